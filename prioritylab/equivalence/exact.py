"""Exact checks of LAP/PAL Theorems 1-3, Corollaries 1-3 and Observations 1-4 on one data set of TD errors.

Every expectation is a sum over all items (no sampling noise); the prioritised
side uses the exact one-draw probabilities of prioritylab's own PER and LAP
samplers (:mod:`.common`).  Tolerances: :data:`~.common.EXACT_TOL`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import losses
from .common import (
    EXACT_TOL,
    UNIT_ROUNDOFF,
    Check,
    compare,
    deviation,
    lap_probabilities,
    per_distribution,
    per_expectation,
    uniform_expectation,
    weighted_expectation,
    worst,
)


# =============================================================================
# Theorem 1, Corollaries 1 and 2
# =============================================================================
def priority_lambda(pr: np.ndarray) -> float:
    """``lambda = sum_j pr(j) / N`` (Theorem 1)."""
    return float(np.sum(pr) / pr.shape[0])


def corollary1(loss2: np.ndarray, grad2: np.ndarray, pr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corollary 1's uniform loss ``L1 = (1/lambda) |pr|_x L2`` and its gradient ``pr grad2 / lambda``."""
    lam = priority_lambda(pr)
    return pr * loss2 / lam, pr * grad2 / lam


def corollary2_priority(grad1: np.ndarray, grad2: np.ndarray) -> np.ndarray:
    """Corollary 2's priority ``pr = grad1 / grad2`` (0 where both vanish).

    Requires ``sign(grad1) = sign(grad2)`` item by item (``ValueError`` naming
    the first item that breaks it).  Where both gradients are 0 the item adds
    nothing to either expectation and any priority is valid; 0 is taken
    (adding priority mass there only adds variance, Theorem 2's eq. 14).
    """
    s1, s2 = np.sign(grad1), np.sign(grad2)
    bad = s1 != s2
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"item {i}: grad1 = {grad1[i]} and grad2 = {grad2[i]} differ in sign (Corollary 2)")
    pr = np.zeros_like(grad1)
    nz = grad2 != 0.0
    pr[nz] = grad1[nz] / grad2[nz]
    return pr


def theorem1_sides(grad1: np.ndarray, grad2: np.ndarray, pr: np.ndarray, scale2: float = 1.0):
    """``E_U[grad1]`` and ``E_pr[scale2 * grad2]`` with ``P(i) = pr(i) / sum_j pr(j)``, plus the mass."""
    lhs, m1 = uniform_expectation(grad1)
    total = float(np.sum(pr))
    if total == 0.0:  # nothing can be drawn; every item's gradient is 0 by construction
        return lhs, 0.0, m1
    rhs, m2 = weighted_expectation(pr / total, scale2 * grad2)
    return lhs, rhs, max(m1, m2)


# =============================================================================
# Observation 1 and Theorem 2: gradient variance
# =============================================================================
def gradient_variance(p: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """``Var_p(x) = sum_i p_i (x_i - mu)^2`` (two-pass) and the second moment ``sum_i p_i x_i^2``."""
    mu = float(np.sum(p * x))
    return float(np.sum(p * (x - mu) ** 2)), float(np.sum(p * x * x))


@dataclass
class VariancePair:
    """A prioritised pair satisfying Theorem 1 for a given ``grad1``: ``lambda L2`` sampled with ``pr``."""

    name: str
    variance: float
    second_moment: float
    mean: float
    closed_form: float
    """Theorem 2's ``(sum pr / N^2) sum_i grad1_i grad2_i - X`` (eq. 14)."""


def prioritised_pair(name: str, grad1: np.ndarray, grad2: np.ndarray) -> VariancePair:
    """Variance of ``grad(lambda L2)`` under ``pr = grad1 / grad2`` (Corollary 2, Theorem 2 eq. 14)."""
    n = grad1.shape[0]
    pr = corollary2_priority(grad1, grad2)
    total = float(np.sum(pr))
    x_mean = float(np.sum(grad1) / n)
    if total == 0.0:
        return VariancePair(name, 0.0, 0.0, 0.0, 0.0)
    lam = total / n
    p = pr / total
    var, second = gradient_variance(p, lam * grad2)
    closed = total / n**2 * float(np.sum(grad1 * grad2)) - x_mean**2
    return VariancePair(name, var, second, float(np.sum(p * lam * grad2)), closed)


def variance_alternatives(
    delta: np.ndarray, grad1: np.ndarray, rng: np.random.Generator, taus=(0.5, 1.5, 2.0, 3.0), n_random: int = 4
) -> list[tuple[str, np.ndarray]]:
    """Gradients ``grad2`` of losses that can be paired with ``grad1`` (same signs, Corollary 2).

    The family ``|delta|^tau / tau`` (gradient ``sign(delta) |delta|^(tau-1)``,
    priority ``|grad1| / |delta|^(tau-1)``) and random valid pairs
    ``grad2 = sign(grad1) c_i`` with log-normal ``c_i``.  Items with
    ``grad1 = 0`` get ``grad2 = 0``.
    """
    s = np.sign(grad1)
    out = []
    for tau in taus:
        g2 = s * np.abs(losses.power(delta, tau)[1])
        out.append((f"|delta|^{tau:g}/{tau:g}", g2))
    for j in range(n_random):
        out.append((f"random pair {j}", s * np.exp(rng.normal(0.0, 1.5, grad1.shape[0]))))
    return out


# =============================================================================
# exact checks on one data set
# =============================================================================
def _second_losses(delta: np.ndarray, kappa: float) -> list[tuple[str, np.ndarray]]:
    """Gradients of the losses used as ``L2``: MSE, L1, Huber(kappa), ``|delta|^tau/tau``."""
    return [
        ("MSE", losses.mse(delta)[1]),
        ("L1", losses.l1(delta)[1]),
        (f"Huber({kappa:g})", losses.huber(delta, kappa)[1]),
        ("|delta|^0.5/0.5", losses.power(delta, 0.5)[1]),
        ("|delta|^3/3", losses.power(delta, 3.0)[1]),
    ]


def first_losses(
    delta: np.ndarray, alpha: float, beta: float, kappa: float, eps: float
) -> list[tuple[str, np.ndarray]]:
    """Gradients of the losses used as ``L1`` (uniformly sampled) in the Theorem 2 checks."""
    out = [
        ("MSE", losses.mse(delta)[1]),
        (f"Huber({kappa:g})", losses.huber(delta, kappa)[1]),
        ("PAL", losses.pal(delta, alpha, kappa)[1]),
        ("|delta|^1.5/1.5", losses.power(delta, 1.5)[1]),
    ]
    if eps > 0.0 or np.any(delta):
        out.append(("PER equivalent", losses.per_equivalent(delta, alpha, beta, 2.0, eps)[1]))
    return out


def check_theorem1(delta: np.ndarray, rng: np.random.Generator, kappa: float = 1.0) -> Check:
    """Theorem 1 with random priorities (some 0) and ``grad L1 = pr grad L2 / lambda``, for five ``L2``."""
    n = delta.shape[0]
    pr = np.exp(rng.normal(0.0, 1.5, n))
    pr[rng.random(n) < 0.05] = 0.0
    pr[rng.integers(0, n)] = 1.0  # at least one item can be drawn
    lam = priority_lambda(pr)
    checks = []
    for _, g2 in _second_losses(delta, kappa):
        lhs, rhs, mass = theorem1_sides(pr * g2 / lam, g2, pr)
        checks.append(compare("Theorem 1", "E_U[grad L1] vs E_pr[grad L2] (random pr)", lhs, rhs, mass))
    return worst(checks)


def check_corollary1(delta: np.ndarray, alpha: float, kappa: float, eps: float) -> Check:
    """Corollary 1 builds ``L1 = |pr|_x L2 / lambda``; its uniform expectation equals the samplers' one.

    Pairs: LAP's priority with Huber(kappa) (the sampler ``lap``) and PER's
    priority ``(|delta| + eps)^alpha`` with ``|delta|^2/2`` (the sampler ``per``
    with ``beta = 0``, no IS weights).
    """
    checks = []
    pr = losses.lap_mass(delta, alpha, kappa)
    l2, g2 = losses.huber(delta, kappa)
    lhs, m1 = uniform_expectation(corollary1(l2, g2, pr)[1])
    rhs, m2 = weighted_expectation(lap_probabilities(delta, alpha, kappa), g2)
    checks.append(compare("Corollary 1", "E_U[grad |pr|x L2/lambda] vs E_sampler[grad L2]", lhs, rhs, max(m1, m2)))
    if eps > 0.0 or alpha == 0.0 or np.any(delta):
        pr = np.power(np.abs(delta) + eps, alpha)
        l2, g2 = losses.mse(delta)
        lhs, m1 = uniform_expectation(corollary1(l2, g2, pr)[1])
        rhs, m2 = per_expectation(delta, g2, alpha, 0.0, eps)
        checks.append(compare("Corollary 1", "E_U[grad |pr|x L2/lambda] vs E_sampler[grad L2]", lhs, rhs, max(m1, m2)))
    return worst(checks)


def check_corollary2(delta: np.ndarray, alpha: float, kappa: float) -> Check:
    """Corollary 2: ``pr = grad L1 / grad L2`` turns uniform ``L1`` into prioritised ``lambda L2``."""
    l1_losses = [("MSE", losses.mse(delta)[1]), ("Huber", losses.huber(delta, kappa)[1])]
    l1_losses.append(("PAL", losses.pal(delta, alpha, kappa)[1]))
    l2_losses = [("L1", losses.l1(delta)[1]), ("|d|^1.5", losses.power(delta, 1.5)[1])]
    checks = []
    for _, g1 in l1_losses:
        for _, g2 in l2_losses:
            pr = corollary2_priority(g1, g2)
            lhs, rhs, mass = theorem1_sides(g1, g2, pr, scale2=priority_lambda(pr))
            quantity = "E_U[grad L1] vs E_pr[grad lambda L2], pr = grad L1/grad L2"
            checks.append(compare("Corollary 2", quantity, lhs, rhs, mass))
    return worst(checks)


def check_theorem2(
    delta: np.ndarray, rng: np.random.Generator, alpha: float, beta: float, kappa: float, eps: float
) -> list[Check]:
    """Observation 1, Theorem 2 (L1 pair has least variance) and Theorem 2's eq. 14, for five ``L1``."""
    obs1, thm2, eq14 = [], [], []
    for _, g1 in first_losses(delta, alpha, beta, kappa, eps):
        best = prioritised_pair("L1", g1, np.sign(g1))
        var_u, second_u = gradient_variance(np.full(g1.shape[0], 1.0 / g1.shape[0]), g1)
        over = max(0.0, best.variance - var_u)
        rel = over / max(second_u, 1e-300)
        obs1.append(Check("Observation 1", "Var(L1 pair) <= Var(uniform L1): excess", over, rel, EXACT_TOL))
        for _, g2 in variance_alternatives(delta, g1, rng):
            alt = prioritised_pair("alt", g1, g2)
            over = max(0.0, best.variance - alt.variance)
            scale = max(alt.second_moment, best.second_moment, 1e-300)
            thm2.append(Check("Theorem 2", "Var(L1 pair) <= Var(other pair): excess", over, over / scale, EXACT_TOL))
            quantity = "Var_pr(grad lambda L2) vs closed form"
            eq14.append(compare("Theorem 2 (eq. 14)", quantity, alt.variance, alt.closed_form, scale))
    return [worst(obs1), worst(thm2), worst(eq14)]


def check_theorem3(delta: np.ndarray, alpha: float, beta: float, tau: float, eps: float) -> Check:
    """Theorem 3: PER (sampler ``per``, global IS weights) with ``|delta|^tau/tau`` vs eq. 7 sampled uniformly."""
    lhs, m1 = per_expectation(delta, losses.power(delta, tau)[1], alpha, beta, eps)
    rhs, m2 = uniform_expectation(losses.per_equivalent(delta, alpha, beta, tau, eps)[1])
    claim = "Theorem 3 (eps = 0)" if eps == 0.0 else "Theorem 3 (PER eps > 0)"
    return compare(claim, "E_PER[w grad |d|^tau/tau] vs E_U[grad eq. 7]", lhs, rhs, max(m1, m2))


def check_corollary3(delta: np.ndarray, alpha: float, beta: float, kappa: float, eps: float) -> Check:
    """Corollary 3: PER with Huber(kappa) vs eq. 8 (general kappa) sampled uniformly."""
    lhs, m1 = per_expectation(delta, losses.huber(delta, kappa)[1], alpha, beta, eps)
    rhs, m2 = uniform_expectation(losses.per_huber_equivalent(delta, alpha, beta, kappa, eps)[1])
    claim = "Corollary 3 (eps = 0)" if eps == 0.0 else "Corollary 3 (PER eps > 0)"
    return compare(claim, "E_PER[w grad Huber] vs E_U[grad eq. 8]", lhs, rhs, max(m1, m2))


def check_observation4(delta: np.ndarray, alpha: float, kappa: float) -> Check:
    """Observation 4: LAP (sampler ``lap``) with Huber(kappa) vs PAL (eq. 10 / 31) sampled uniformly."""
    lhs, m1 = weighted_expectation(lap_probabilities(delta, alpha, kappa), losses.huber(delta, kappa)[1])
    rhs, m2 = uniform_expectation(losses.pal(delta, alpha, kappa)[1])
    claim = "Observation 4 (kappa = 1)" if kappa == 1.0 else "Observation 4 (general kappa)"
    return compare(claim, "E_LAP[grad Huber] vs E_U[grad PAL]", lhs, rhs, max(m1, m2))


# =============================================================================
# identity cases
# =============================================================================
def check_pal_alpha0(delta: np.ndarray, kappa: float) -> Check:
    """PAL with ``alpha = 0``: ``lambda = 1`` and PAL is Huber(kappa) (+ ``0.5 kappa^2`` on ``|delta| > kappa``)."""
    lp, gp = losses.pal(delta, 0.0, kappa)
    lh, gh = losses.huber(delta, kappa)
    lam = losses.pal_lambda(delta, 0.0, kappa)
    shift = np.where(np.abs(delta) > kappa, 0.5 * kappa * kappa, 0.0)
    a1, r1 = deviation(gp, gh, np.abs(gh))
    a2, r2 = deviation(lp, lh + shift, np.abs(lh) + shift)
    a3, r3 = deviation(lam, 1.0, 1.0)
    return Check("Identity: PAL(alpha=0) = Huber/lambda", "grads, values (+0.5 kappa^2 shift), lambda = 1",
                 max(a1, a2, a3), max(r1, r2, r3), EXACT_TOL)


def check_per_alpha0(delta: np.ndarray, beta: float, tau: float, eps: float) -> Check:
    """PER with ``alpha = 0`` is uniform: probabilities ``1/N``, IS weights 1, eq. 7 = ``|delta|^tau/tau``."""
    n = delta.shape[0]
    p, w = per_distribution(delta, 0.0, beta, eps)
    a1, r1 = deviation(p, 1.0 / n, 1.0 / n)
    a2, r2 = deviation(w, 1.0, 1.0)
    lq, gq = losses.per_equivalent(delta, 0.0, beta, tau, eps)
    lt, gt = losses.power(delta, tau)
    a3, r3 = deviation(gq, gt, np.abs(gt))
    a4, r4 = deviation(lq, lt, np.abs(lt))
    return Check("Identity: PER(alpha=0) = uniform", "P(i) vs 1/N, w vs 1, eq. 7 vs |d|^tau/tau",
                 max(a1, a2, a3, a4), max(r1, r2, r3, r4), EXACT_TOL)


def check_lap_small(delta: np.ndarray, alpha: float, kappa: float) -> Check:
    """LAP with every ``|delta| <= kappa`` is uniform MSE: ``P(i) = 1/N``, Huber = MSE, PAL = MSE."""
    n = delta.shape[0]
    top = float(np.abs(delta).max())
    # every |delta| <= kappa (clipped: the rescaled largest item may exceed kappa by one ulp), the largest on it
    d = np.clip(delta * (kappa / top), -kappa, kappa) if top > 0.0 else delta
    p = lap_probabilities(d, alpha, kappa)
    a1, r1 = deviation(p, 1.0 / n, 1.0 / n)
    lh, gh = losses.huber(d, kappa)
    lm, gm = losses.mse(d)
    lp, gp = losses.pal(d, alpha, kappa)
    a2, r2 = deviation(np.concatenate([gh, gp, lh, lp]), np.concatenate([gm, gm, lm, lm]),
                       np.concatenate([np.abs(gm), np.abs(gm), lm, lm]))
    return Check("Identity: LAP(|d|<=kappa) = uniform MSE", "P(i) vs 1/N; Huber, PAL vs MSE",
                 max(a1, a2), max(r1, r2), EXACT_TOL)


# =============================================================================
# Observations 2 and 3: minimisers of the expected loss
# =============================================================================
def check_observation2(y: np.ndarray) -> Check:
    """Observation 2: the root of ``E[grad MSE(Q - y)]`` (brentq) is ``mean(y)``.

    The expected MSE is convex in ``Q``, so its stationary point is the minimiser.
    """
    from scipy.optimize import brentq

    scale = float(np.mean(np.abs(y))) or 1.0
    lo, hi = float(y.min()) - 1.0, float(y.max()) + 1.0
    root = brentq(lambda q: float(np.mean(losses.mse(q - y)[1])), lo, hi, xtol=1e-15 * scale, rtol=8 * UNIT_ROUNDOFF)
    mean = float(np.mean(y))
    return compare("Observation 2 (MSE -> mean)", "argmin E[MSE] (root of E grad) vs mean(y)", root, mean, scale)


def _mean_abs_at_points(y_sorted: np.ndarray) -> np.ndarray:
    """``E|y_j - y|`` for every sorted data point ``y_j`` (prefix sums, O(N))."""
    n = y_sorted.shape[0]
    csum = np.concatenate([[0.0], np.cumsum(y_sorted)])
    j = np.arange(n)
    below = j * y_sorted - csum[:-1]
    above = (csum[-1] - csum[1:]) - (n - 1 - j) * y_sorted
    return (below + above) / n


def check_observation3(y: np.ndarray) -> Check:
    """Observation 3: ``median(y)`` is a zero of the L1 sub-gradient and attains ``min_Q E|Q - y|``.

    Two parts: the sub-gradient condition ``|#{y < m} - #{y > m}| <= #{y = m}``
    (integers, exact), and ``E|m - y|`` against the minimum over the data points
    (where a piecewise-linear convex function attains its minimum).
    """
    m = float(np.median(y))
    below, above, equal = int(np.sum(y < m)), int(np.sum(y > m)), int(np.sum(y == m))
    violation = max(0, abs(below - above) - equal) / y.shape[0]
    at_median = float(np.mean(np.abs(m - y)))
    best = float(_mean_abs_at_points(np.sort(y)).min())
    scale = float(np.mean(np.abs(y))) + abs(m) or 1.0
    a, r = deviation(at_median, best, scale)
    return Check("Observation 3 (L1 -> median)", "E|median - y| vs min_Q E|Q - y|; sub-gradient at median",
                 max(a, violation), max(r, violation), EXACT_TOL)


# =============================================================================
# all exact checks on one data set
# =============================================================================
def exact_case(delta: np.ndarray, rng: np.random.Generator, *, alpha: float, beta: float, tau: float,
               kappa: float, eps: float) -> list[Check]:
    """Every exact check on one data set ``delta`` (also used as the values ``y`` of Observations 2 and 3).

    Theorem 3 / Corollary 3 are skipped when PER cannot sample (every
    ``delta = 0`` with ``eps = 0``).
    """
    checks = [check_theorem1(delta, rng, kappa), check_corollary1(delta, alpha, kappa, eps),
              check_corollary2(delta, alpha, kappa)]
    checks += check_theorem2(delta, rng, alpha, beta, kappa, eps)
    if eps > 0.0 or np.any(delta):
        checks += [check_theorem3(delta, alpha, beta, tau, eps), check_corollary3(delta, alpha, beta, kappa, eps)]
    checks += [check_observation4(delta, alpha, kappa), check_pal_alpha0(delta, kappa),
               check_per_alpha0(delta, beta, tau, eps), check_lap_small(delta, alpha, kappa),
               check_observation2(delta), check_observation3(delta)]
    return checks
