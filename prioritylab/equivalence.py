"""Numerical checks of the loss <-> sampling equivalence (Fujimoto, Meger & Precup, 2020).

The maths behind ``theory/lap_equivalence.py`` and the equivalence tests:
exact expectations over finite data sets of TD errors (every item summed, no
sampling noise), the distributions of prioritylab's own PER and LAP samplers,
Monte Carlo draws from them, parameter gradients of a small torch Q-network,
and tabular runs on the Blind Cliffwalk.

Conventions: ``delta = Q - y`` (eq. 1); gradients are ``d loss / d Q``
(:mod:`prioritylab.losses`).

How deviations are measured
---------------------------
Two computed expectations ``a = sum_i u_i`` and ``b = sum_i v_i`` of the same
quantity are compared through ``|a - b|`` and the *relative deviation*
``|a - b| / mass`` with ``mass = max(sum_i |u_i|, sum_i |v_i|)``.  Relative to
the summed magnitude (not to ``|a|``) because gradients of both signs cancel:
rounding errors scale with the magnitude of the terms, not with the sum.

Why the tolerance is ``EXACT_TOL = 1e-12``: with unit roundoff
``u = 2^-53 ~ 1.1e-16``, every term is produced by at most ~25 correctly
rounded or faithfully rounded operations (powers, products, the sum tree's
total over <= 6 levels of 4 children), a relative error of at most ~30 u per
term; NumPy's pairwise summation of ``N <= 2000`` terms adds at most
``(log2(N) + 8) u ~ 19 u`` of the mass.  So ``|a - b| <= ~100 u * mass ~ 1.1e-14
* mass``; ``1e-12`` leaves a factor ~90 for power functions that are only
faithfully rounded.  The torch checks (float64) add the network's reductions
(hidden width 32, ``N = 256`` items through two layers): at most ~400 u of the
mass, ``4.4e-14``, inside the same ``1e-12``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from . import losses
from .samplers import is_weights, make_sampler

UNIT_ROUNDOFF = 2.0**-53
"""Unit roundoff of IEEE double precision."""

EXACT_TOL = 1e-12
"""Tolerance on relative deviations of exact (summed) expectations; see the module notes."""

MC_FAIL_PROB = 1e-6
"""False-failure probability budget of one Monte Carlo convergence check (all sizes together)."""


# =============================================================================
# results
# =============================================================================
@dataclass
class Check:
    """One compared quantity: worst absolute / relative deviation against a tolerance."""

    claim: str
    quantity: str
    abs_dev: float
    rel_dev: float
    tol: float
    cases: int = 1
    note: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.rel_dev <= self.tol)

    def row(self) -> dict:
        row = asdict(self)
        row["verdict"] = "reproduced" if self.passed else "NOT reproduced"
        return row


def worst(checks: Sequence[Check]) -> Check:
    """Merge checks of one claim: the worst deviations over all cases."""
    if not checks:
        raise ValueError("no checks to merge")
    first = checks[0]
    return Check(
        first.claim,
        first.quantity,
        max(c.abs_dev for c in checks),
        max(c.rel_dev for c in checks),
        first.tol,
        sum(c.cases for c in checks),
        first.note,
    )


def deviation(a, b, mass) -> tuple[float, float]:
    """``max |a - b|`` and ``max |a - b| / mass`` (0/0 counts as 0, x/0 as inf)."""
    a, b, m = np.atleast_1d(a), np.atleast_1d(b), np.atleast_1d(mass)
    diff = np.abs(a - b)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0.0, 0.0, diff / m)
    return float(diff.max(initial=0.0)), float(rel.max(initial=0.0))


def compare(claim: str, quantity: str, a, b, mass, tol: float = EXACT_TOL, note: str = "") -> Check:
    return Check(claim, quantity, *deviation(a, b, mass), tol, 1, note)


# =============================================================================
# data sets of TD errors
# =============================================================================
def random_td_errors(
    rng: np.random.Generator,
    n: int,
    kappa: float = 1.0,
    span: float = 3.0,
    zero_frac: float = 0.05,
    dup_frac: float = 0.1,
    head: Sequence[float] = (),
) -> np.ndarray:
    """``n`` TD errors with magnitudes ``kappa * 10^U(-span, span)`` (both sides of ``kappa``).

    Random signs; a fraction ``zero_frac`` of exact zeros and ``dup_frac`` of
    exact duplicates of other items; ``head`` (special values such as ``0``,
    ``+-kappa``) overwrites the first items.
    """
    mags = kappa * 10.0 ** rng.uniform(-span, span, n)
    d = mags * rng.choice(np.array([-1.0, 1.0]), n)
    d[rng.random(n) < zero_frac] = 0.0
    dup = rng.random(n) < dup_frac
    if dup.any():
        d[dup] = d[rng.integers(0, n, int(dup.sum()))]
    k = min(len(head), n)
    d[:k] = np.asarray(head[:k], dtype=np.float64)
    return d


# =============================================================================
# exact expectations
# =============================================================================
def uniform_expectation(g: np.ndarray) -> tuple[float, float]:
    """``E_U[g] = sum_i g_i / N`` and its mass ``sum_i |g_i| / N``."""
    n = g.shape[0]
    return float(np.sum(g) / n), float(np.sum(np.abs(g)) / n)


def weighted_expectation(p: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """``sum_i p_i g_i`` and its mass ``sum_i |p_i g_i|``."""
    t = p * g
    return float(np.sum(t)), float(np.sum(np.abs(t)))


def _filled_sampler(name: str, delta: np.ndarray, seed=0, **params):
    n = delta.shape[0]
    sampler = make_sampler(name, n, seed=seed, **params)
    idx = np.arange(n)
    sampler.add(idx)
    sampler.update(idx, delta)
    return sampler


def lap_probabilities(delta: np.ndarray, alpha: float, kappa: float) -> np.ndarray:
    """Exact one-draw probabilities of prioritylab's LAP sampler holding ``delta`` (eq. 30)."""
    return _filled_sampler("lap", delta, alpha=alpha, kappa=kappa).probabilities()


def per_distribution(delta: np.ndarray, alpha: float, beta: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact probabilities and IS weights of prioritylab's PER sampler holding ``delta`` (eq. 3-4).

    Weights ``(N P(i))^-beta`` divided by the largest weight over the data set
    (``normalise="global"``, as in Theorem 3's proof, eq. 20).  Items with
    ``P(i) = 0`` (``delta = 0`` with ``eps = 0``) are never drawn; their weight
    is reported as 0.  Their infinite weight makes the others 0 when ``beta > 0``.
    """
    sampler = _filled_sampler("per", delta, alpha=alpha, beta=beta, eps=eps, normalise="global")
    p = sampler.probabilities()
    with np.errstate(divide="ignore", invalid="ignore"):
        w = is_weights(p, delta.shape[0], beta, p.min())  # np.float64: 0 -> inf weight, no exception
    return p, np.where(p > 0.0, w, 0.0)


def per_expectation(delta: np.ndarray, g: np.ndarray, alpha: float, beta: float, eps: float) -> tuple[float, float]:
    """``E_PER[w(i) g_i]`` exactly, with prioritylab's PER sampler (and its mass)."""
    p, w = per_distribution(delta, alpha, beta, eps)
    return weighted_expectation(p, w * g)


# =============================================================================
# Theorem 1, Corollaries 1 and 2
# =============================================================================
def priority_lambda(pr: np.ndarray) -> float:
    """``lambda = sum_j pr(j) / N`` (Theorem 1)."""
    return float(np.sum(pr) / pr.shape[0])


def corollary1(loss2: np.ndarray, grad2: np.ndarray, pr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corollary 1's uniform loss ``L1 = (1/lambda) |pr|_x L2`` and its gradient ``pr grad2 / lambda`` (eq. 12)."""
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
    pr = losses.lap_priority(delta, alpha, kappa)
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
    """Every exact check on one data set ``delta`` (also used as a set of targets for Observations 2 and 3).

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


def merge_by_claim(checks: Sequence[Check]) -> list[Check]:
    """One row per claim (first-seen order), worst deviations over its cases."""
    groups: dict[str, list[Check]] = {}
    for c in checks:
        groups.setdefault(c.claim, []).append(c)
    return [worst(g) for g in groups.values()]


# =============================================================================
# Monte Carlo with the real samplers
# =============================================================================
def bernstein_radius(variance: float, bound: float, m: int, fail_prob: float) -> float:
    """Radius ``t`` with ``P(|mean_M - mu| >= t) <= fail_prob`` for i.i.d. draws, ``|x - mu| <= bound``.

    Bernstein's inequality ``P(|mean - mu| >= t) <= 2 exp(-M t^2 / (2 var + 2 bound t / 3))``
    solved for ``t``: ``t = (c + sqrt(c^2 + 8 M var L)) / (2 M)``, ``L = ln(2 / fail_prob)``,
    ``c = 2 bound L / 3``.  For large ``M`` it is ``sqrt(2 var L / M)``: the 1/sqrt(M) rate.
    """
    log_term = math.log(2.0 / fail_prob)
    c = 2.0 * bound * log_term / 3.0
    return (c + math.sqrt(c * c + 8.0 * m * variance * log_term)) / (2.0 * m)


@dataclass
class MonteCarloSetup:
    """A filled sampler and the per-draw gradient, with the exact expectation it must converge to."""

    sampler: object
    draw: Callable[[int], np.ndarray]
    exact: float
    """The uniformly sampled equivalent loss's expected gradient (PAL or eq. 7 / 8)."""
    variance: float
    bound: float


def monte_carlo_setup(delta: np.ndarray, method: str, seed: int, **params) -> MonteCarloSetup:
    """``method="lap"`` (alpha, kappa: Huber gradient) or ``"per"`` (alpha, beta, eps and tau or kappa).

    Draws are i.i.d. (``stratified=False``).  For PER a draw's value is the
    sampler's IS weight times the loss gradient (``|delta|^tau/tau`` if ``tau``
    is given, else Huber(kappa)); the exact value is the uniform equivalent's
    expected gradient, and the variance is exact under the sampler's distribution.
    """
    n = delta.shape[0]
    if method == "lap":
        a, k = params["alpha"], params["kappa"]
        sampler = _filled_sampler("lap", delta, seed=seed, alpha=a, kappa=k, stratified=False)
        g = losses.huber(delta, k)[1]
        p, w = sampler.probabilities(), np.ones(n)
        exact = uniform_expectation(losses.pal(delta, a, k)[1])[0]

        def draw(m: int) -> np.ndarray:
            return g[sampler.sample(m).indices]

    elif method == "per":
        a, b, e = params["alpha"], params["beta"], params.get("eps", 0.0)
        sampler = _filled_sampler("per", delta, seed=seed, alpha=a, beta=b, eps=e, stratified=False)
        if "tau" in params:
            g = losses.power(delta, params["tau"])[1]
            exact = uniform_expectation(losses.per_equivalent(delta, a, b, params["tau"], e)[1])[0]
        else:
            g = losses.huber(delta, params["kappa"])[1]
            exact = uniform_expectation(losses.per_huber_equivalent(delta, a, b, params["kappa"], e)[1])[0]
        p, w = per_distribution(delta, a, b, e)

        def draw(m: int) -> np.ndarray:
            batch = sampler.sample(m, beta=b)
            return batch.weights * g[batch.indices]

    else:
        raise ValueError(f"method must be 'lap' or 'per', got {method!r}")
    x = w * g
    support = p > 0.0
    variance = float(np.sum(p * (x - exact) ** 2))
    return MonteCarloSetup(sampler, draw, exact, variance, float(np.abs(x[support] - exact).max()))


def monte_carlo_convergence(
    setup: MonteCarloSetup, sizes: Sequence[int], fail_prob: float = MC_FAIL_PROB
) -> list[dict]:
    """One sample mean per size ``M``; each must lie within the Bernstein radius (union bound over sizes)."""
    rows = []
    per_size = fail_prob / len(sizes)
    for m in sizes:
        est = float(np.mean(setup.draw(int(m))))
        err = abs(est - setup.exact)
        radius = bernstein_radius(setup.variance, setup.bound, int(m), per_size)
        sd = math.sqrt(setup.variance / m)
        rows.append({"M": int(m), "estimate": est, "exact": setup.exact, "abs_err": err, "radius": radius,
                     "z": err / sd if sd > 0 else 0.0, "passed": err <= radius})
    return rows


def monte_carlo_rate(setup: MonteCarloSetup, sizes: Sequence[int], reps: int) -> tuple[np.ndarray, float]:
    """RMS error of ``reps`` sample means per size, divided by ``sqrt(var / M)``, and the fitted log-log slope.

    ``E[(mean_M - mu)^2] = var / M`` exactly for i.i.d. draws, so the normalised
    RMS is near 1 and the slope of ``log RMS`` against ``log M`` near -1/2.
    """
    rms = np.empty(len(sizes))
    for j, m in enumerate(sizes):
        errs = [np.mean(setup.draw(int(m))) - setup.exact for _ in range(reps)]
        rms[j] = math.sqrt(float(np.mean(np.square(errs))))
    slope = float(np.polyfit(np.log(np.asarray(sizes, dtype=float)), np.log(rms), 1)[0])
    return rms / np.sqrt(setup.variance / np.asarray(sizes, dtype=float)), slope


# =============================================================================
# torch: expected parameter gradients of a small Q-network
# =============================================================================
@dataclass
class TorchProblem:
    """A float64 Q-network and a fixed buffer ``(s, a, y)``; ``delta = Q(s, a) - y``."""

    net: object
    states: object
    actions: object
    targets: object


def torch_problem(seed: int = 0, n: int = 256, obs_dim: int = 4, n_actions: int = 3, hidden: int = 32,
                  kappa: float = 1.0) -> TorchProblem:
    """An MLP ``obs_dim -> hidden (tanh) -> n_actions`` and ``n`` transitions whose TD errors span both sides of kappa.

    Targets are ``Q(s, a) - delta0`` with ``delta0`` from :func:`random_td_errors`
    (magnitudes ``kappa * 10^U(-2, 2)``), so the errors are known and spread.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(obs_dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, n_actions))
    net = net.to(torch.float64)
    with torch.no_grad():
        for prm in net.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen, dtype=torch.float64) / math.sqrt(max(prm.shape[-1], 1)))
    states = torch.randn(n, obs_dim, generator=gen, dtype=torch.float64)
    actions = torch.randint(0, n_actions, (n,), generator=gen)
    delta0 = random_td_errors(np.random.default_rng(seed), n, kappa, span=2.0, zero_frac=0.0, dup_frac=0.0)
    with torch.no_grad():
        q = net(states).gather(1, actions[:, None])[:, 0]
    return TorchProblem(net, states, actions, q - torch.as_tensor(delta0))


def torch_td_errors(problem: TorchProblem):
    """``delta = Q(s, a) - y`` for the whole buffer, differentiable in the network's parameters."""
    q = problem.net(problem.states).gather(1, problem.actions[:, None])[:, 0]
    return q - problem.targets


def param_grad(problem: TorchProblem, loss) -> np.ndarray:
    """Gradient of a scalar ``loss`` with respect to every network parameter, flattened (graph kept)."""
    import torch

    params = list(problem.net.parameters())
    grads = torch.autograd.grad(loss, params, retain_graph=True)
    return torch.cat([g.reshape(-1) for g in grads]).numpy()


def q_jacobian(problem: TorchProblem) -> np.ndarray:
    """Per-item ``dQ(s_i, a_i) / d theta``, shape ``(N, P)`` (torch.func), for the deviation masses."""
    import torch
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in problem.net.named_parameters()}

    def q_one(prm, s, a):
        return functional_call(problem.net, prm, (s[None],))[0].gather(0, a.reshape(1))[0]

    jac = vmap(grad(q_one), in_dims=(None, 0, 0))(params, problem.states, problem.actions)
    return torch.cat([jac[k].reshape(problem.states.shape[0], -1) for k in params], dim=1).numpy()


def _torch_compare(claim, problem, jac, loss_a, coef_a, loss_b, coef_b) -> Check:
    """Compare two parameter gradients; mass per parameter ``sum_i |c_i| |dQ_i/dtheta|`` (the larger side)."""
    ga, gb = param_grad(problem, loss_a), param_grad(problem, loss_b)
    mass = np.maximum(np.abs(coef_a) @ np.abs(jac), np.abs(coef_b) @ np.abs(jac))
    return compare(claim, "E[grad_theta] of both losses (autograd, exact)", ga, gb, mass)


def torch_parameter_checks(seed: int = 0, n: int = 256, lap_alpha: float = 0.4, per_alpha: float = 0.6,
                           beta: float = 0.4, tau: float = 2.0, eps: float = 1e-6,
                           kappas: Sequence[float] = (1.0, 0.01)) -> list[Check]:
    """LAP + Huber vs uniform PAL and PER (+ ``|delta|^tau/tau``, + Huber) vs eq. 7 / 8, on network parameters.

    Expectations are exact: the sampled side weights every item's loss by the
    sampler's probability (times the IS weight for PER); the uniform side is
    the mean of the torch loss.  Both gradients come from autograd through
    :mod:`prioritylab.losses_torch`.
    """
    import torch

    from . import losses_torch as lt

    checks = []
    for kappa in kappas:
        prob = torch_problem(seed, n, kappa=kappa)
        jac = q_jacobian(prob)
        d = torch_td_errors(prob)
        dn = d.detach().numpy()
        p = lap_probabilities(dn, lap_alpha, kappa)
        coef_lap = p * losses.huber(dn, kappa)[1]
        coef_pal = losses.pal(dn, lap_alpha, kappa)[1] / n
        checks.append(_torch_compare("torch: LAP+Huber = uniform PAL", prob, jac,
                                     (torch.as_tensor(p) * lt.huber(d, kappa)).sum(), coef_lap,
                                     lt.mean(lt.pal(d, lap_alpha, kappa)), coef_pal))
        p, w = per_distribution(dn, per_alpha, beta, eps)
        pw = torch.as_tensor(p * w)
        coef_per = p * w * losses.power(dn, tau)[1]
        coef_eq = losses.per_equivalent(dn, per_alpha, beta, tau, eps)[1] / n
        checks.append(_torch_compare("torch: PER = uniform eq. 7", prob, jac, (pw * lt.power(d, tau)).sum(), coef_per,
                                     lt.mean(lt.per_equivalent(d, per_alpha, beta, tau, eps)), coef_eq))
        coef_per = p * w * losses.huber(dn, kappa)[1]
        coef_eq = losses.per_huber_equivalent(dn, per_alpha, beta, kappa, eps)[1] / n
        checks.append(_torch_compare("torch: PER+Huber = uniform eq. 8", prob, jac,
                                     (pw * lt.huber(d, kappa)).sum(), coef_per,
                                     lt.mean(lt.per_huber_equivalent(d, per_alpha, beta, kappa, eps)), coef_eq))
    return checks


# =============================================================================
# Blind Cliffwalk (a): expected tabular updates at every step of a run
# =============================================================================
def td_errors_table(q: np.ndarray, mem, gamma: float) -> np.ndarray:
    """``delta_i = Q(s_tm1, a_tm1) - (r_t + gamma (1 - done_t) max_b Q(s_t, b))`` for every transition (eq. 1)."""
    q_t = q[mem.s_t].max(axis=1)
    y = mem.r_t + gamma * np.where(mem.done_t, 0.0, q_t)
    return q[mem.s_tm1, mem.a_tm1] - y


def _pair_table(pair: np.ndarray, coef: np.ndarray, n_pairs: int) -> tuple[np.ndarray, np.ndarray]:
    return np.bincount(pair, coef, n_pairs), np.bincount(pair, np.abs(coef), n_pairs)


def cliffwalk_stepwise(n: int, method: str, steps: int = 200, batch_size: int = 8, lr: float = 0.5,
                       seed: int = 0, alpha: float | None = None, kappa: float = 1.0, beta: float = 0.4,
                       eps: float = 1e-6) -> Check:
    """At every step of a tabular Blind Cliffwalk run, compare the expected Q-table updates.

    ``method="lap"``: LAP sampling + Huber(kappa) vs uniform sampling + PAL
    (Observation 4); ``"per"``: PER sampling + MSE with IS weights vs uniform
    sampling + eq. 7 (Theorem 3, with PER's eps).  Each step: the sampler's
    priorities are set from the current TD errors of the whole memory (the
    theory's setting: current errors, Section 3), both expected updates
    ``sum_i P(i) w(i) grad_i`` and ``(1/N) sum_i grad_equiv_i`` are accumulated
    per state-action pair and compared, then a minibatch is drawn from the
    sampler and applied (``Q -= lr * mean(w grad)``).  Q starts ``N(0, 1)`` so
    the TD errors lie on both sides of kappa.
    """
    from .cliffwalk.env import build_memory, discount

    rng = np.random.default_rng(seed)
    mem = build_memory(n, rng)
    gamma, size, n_pairs = discount(n), mem.s_tm1.shape[0], 2 * n
    pair = 2 * mem.s_tm1 + mem.a_tm1
    q = rng.normal(0.0, 1.0, (n, 2))
    if method == "lap":
        a = 0.4 if alpha is None else alpha
        sampler = make_sampler("lap", size, seed=seed, alpha=a, kappa=kappa)
    elif method == "per":
        a = 0.6 if alpha is None else alpha
        sampler = make_sampler("per", size, seed=seed, alpha=a, beta=beta, eps=eps)
    else:
        raise ValueError(f"method must be 'lap' or 'per', got {method!r}")
    idx = np.arange(size)
    sampler.add(idx, episode_start=mem.episode_start)
    checks = []
    for _ in range(steps):
        delta = td_errors_table(q, mem, gamma)
        sampler.update(idx, delta)
        p = sampler.probabilities()
        if method == "lap":
            g = losses.huber(delta, kappa)[1]
            coef_s, coef_u = p * g, losses.pal(delta, a, kappa)[1] / size
        else:
            g = losses.mse(delta)[1]
            w = is_weights(p, size, beta, p.min())
            coef_s, coef_u = p * w * g, losses.per_equivalent(delta, a, beta, 2.0, eps)[1] / size
        ts, ms = _pair_table(pair, coef_s, n_pairs)
        tu, mu = _pair_table(pair, coef_u, n_pairs)
        checks.append(compare("", "", ts, tu, np.maximum(ms, mu)))
        batch = sampler.sample(batch_size, beta=beta) if method == "per" else sampler.sample(batch_size)
        step = np.bincount(pair[batch.indices], batch.weights * g[batch.indices], n_pairs) / batch_size
        q -= lr * step.reshape(n, 2)
    name = "Cliffwalk (a): LAP+Huber = uniform PAL" if method == "lap" else "Cliffwalk (a): PER+MSE = uniform eq. 7"
    merged = worst(checks)
    return Check(name, "expected Q-table update, every step", merged.abs_dev, merged.rel_dev, EXACT_TOL,
                 merged.cases, f"n = {n}, kappa = {kappa:g}, {steps} steps")


# =============================================================================
# Blind Cliffwalk (b): a stochastic final reward, expected-update dynamics
# =============================================================================
UNIFORM_MSE, UNIFORM_L1, UNIFORM_PAL, UNIFORM_PER_EQ, LAP_HUBER, PER_POWER = range(6)
METHOD_NAMES = {
    UNIFORM_MSE: "uniform + MSE",
    UNIFORM_L1: "uniform + L1",
    UNIFORM_PAL: "uniform + PAL",
    UNIFORM_PER_EQ: "uniform + eq. 7",
    LAP_HUBER: "LAP + Huber",
    PER_POWER: "PER + |d|^tau/tau",
}


def skewed_rewards(k: int = 9, sigma: float = 1.0) -> np.ndarray:
    """The ``k`` quantiles ``exp(sigma z_j)``, ``z_j = Phi^-1((j - 1/2) / k)``, of a log-normal(0, sigma) law.

    A right-skewed reward distribution represented by ``k`` equally likely
    values: mean > median = 1 (``k`` odd), one large outlier.
    """
    from scipy.stats import norm

    return np.exp(sigma * norm.ppf((np.arange(k) + 0.5) / k))


def stochastic_chain(n: int, rewards: np.ndarray, rng: np.random.Generator):
    """Blind Cliffwalk memory whose rewarded transition is replaced by ``len(rewards)`` copies, one per reward.

    The copies are the final (terminal) step of the all-right sequence, so
    the last state's right action has a stochastic reward, uniform over
    ``rewards``, and every earlier state bootstraps from it.
    """
    from .cliffwalk.env import Memory, build_memory

    mem = build_memory(n, rng)
    i = int(np.flatnonzero(mem.r_t > 0)[0])
    extra = len(rewards) - 1
    fields = {}
    for name in Memory._fields:
        col = getattr(mem, name)
        fields[name] = np.concatenate([col, np.repeat(col[i : i + 1], extra)])
    fields["r_t"][i] = rewards[0]
    if extra > 0:
        fields["r_t"][-extra:] = rewards[1:]
        fields["episode_start"][-extra:] = False
    return Memory(**fields)


@njit(cache=True)
def _sign_pow(d: float, p: float) -> float:
    """``sign(d) |d|^p``, 0 at ``d = 0``."""
    if d == 0.0:
        return 0.0
    v = abs(d) ** p
    return v if d > 0.0 else -v


@njit(cache=True)
def _huber_grad(d: float, kappa: float) -> float:
    if abs(d) <= kappa:
        return d
    return kappa if d > 0.0 else -kappa


@njit(cache=True)
def expected_coefficients(delta, method, alpha, beta, kappa, tau, eps, out):
    """``N * E[update of item i]``: ``N P(i) w(i) grad_i`` under the sampling scheme of ``method``.

    Uniform methods give the loss gradient itself (PAL eq. 31, eq. 7 with
    eps); ``LAP_HUBER``: ``N P(i)`` with ``P`` from eq. 30 times the Huber
    gradient; ``PER_POWER``: PER's ``N P(i) w(i)`` (eq. 3-4 with ``|delta| + eps``,
    global weight normalisation) times ``sign |delta|^(tau-1)``.

    Returns the scheme's global positive factor, common to every item: ``1/lambda``
    (PAL, LAP), ``eta N`` (PER, eq. 7), 1 (MSE, L1).
    """
    n = delta.shape[0]
    total, low = 0.0, np.inf
    for i in range(n):
        a = abs(delta[i])
        pr = max(a, kappa) ** alpha if method == LAP_HUBER or method == UNIFORM_PAL else (a + eps) ** alpha
        total += pr
        low = min(low, a + eps)
    for i in range(n):
        d = delta[i]
        a = abs(d)
        if method == UNIFORM_MSE:
            out[i] = d
        elif method == UNIFORM_L1:
            out[i] = _sign_pow(d, 0.0)
        elif method == UNIFORM_PAL:
            g = kappa**alpha * d if a <= kappa else kappa * _sign_pow(d, alpha)
            out[i] = g / (total / n)
        elif method == LAP_HUBER:
            out[i] = n * (max(a, kappa) ** alpha / total) * _huber_grad(d, kappa)
        elif method == UNIFORM_PER_EQ:
            eta = low ** (alpha * beta) / total
            out[i] = eta * n * (a + eps) ** (alpha - alpha * beta) * _sign_pow(d, tau - 1.0)
        else:  # PER_POWER
            p = (a + eps) ** alpha / total
            p_min = low**alpha / total
            w = (n * p) ** -beta / (n * p_min) ** -beta if p_min > 0.0 else 0.0
            out[i] = n * p * w * _sign_pow(d, tau - 1.0)
    if method == UNIFORM_PAL or method == LAP_HUBER:
        return n / total
    if method == UNIFORM_PER_EQ or method == PER_POWER:
        return n * low ** (alpha * beta) / total
    return 1.0


@njit(cache=True)
def run_expected_dynamics(s_tm1, a_tm1, r_t, s_t, done_t, gamma, q, method, alpha, beta, kappa, tau, eps,
                          lr, t_half, steps, watch, normalise):
    """Deterministic expected-update dynamics ``Q <- Q - lr_t sum_i [N P(i) w(i) grad_i] e_(s_i, a_i)``.

    One step is the expected update of ``N`` draws (a sweep).  ``lr_t = lr``
    (``t_half <= 0``) or ``lr / (1 + t / t_half)``.  With ``normalise`` the
    step is divided by the scheme's global factor (``eta N``, ``1/lambda``, see
    :func:`expected_coefficients`): the direction of every update and so the
    fixed points are unchanged, but PER, whose ``eta N`` collapses when one
    priority is near 0, converges in a fixed number of steps.  ``q`` (shape
    ``(n, 2)``) is updated in place; returns ``Q[watch]`` (a flat index) after every step.
    """
    n_items = s_tm1.shape[0]
    delta = np.empty(n_items)
    coef = np.empty(n_items)
    hist = np.empty(steps + 1)
    flat = q.reshape(-1)
    hist[0] = flat[watch]
    for t in range(steps):
        for i in range(n_items):
            y = r_t[i]
            if not done_t[i]:
                y += gamma * max(q[s_t[i], 0], q[s_t[i], 1])
            delta[i] = q[s_tm1[i], a_tm1[i]] - y
        scale = expected_coefficients(delta, method, alpha, beta, kappa, tau, eps, coef)
        lr_t = lr if t_half <= 0.0 else lr / (1.0 + t / t_half)
        if normalise and scale > 0.0:
            lr_t /= scale
        for i in range(n_items):
            q[s_tm1[i], a_tm1[i]] -= lr_t * coef[i]
        hist[t + 1] = flat[watch]
    return hist


def pair_gradient(method: int, delta: np.ndarray, alpha: float, beta: float, kappa: float, tau: float,
                  eps: float) -> np.ndarray:
    """Per-item gradient of the *uniformly sampled equivalent loss* of ``method``, up to a common positive factor.

    From :mod:`prioritylab.losses`: MSE, L1, PAL (``lambda`` fixed at 1) for
    LAP and PAL, eq. 7 with eps (``eta N`` fixed at 1) for PER and its
    equivalent.  Common factors do not move the zero of a pair's expected gradient.
    """
    if method == UNIFORM_MSE:
        return losses.mse(delta)[1]
    if method == UNIFORM_L1:
        return losses.l1(delta)[1]
    if method in (UNIFORM_PAL, LAP_HUBER):
        return losses.pal(delta, alpha, kappa, lam=1.0)[1]
    return losses.per_equivalent(delta, alpha, beta, tau, eps, eta_n=1.0)[1]


def chain_prediction(rewards: np.ndarray, method: int, alpha: float = 0.4, beta: float = 0.4, kappa: float = 1.0,
                     tau: float = 2.0, eps: float = 0.0) -> float:
    """The value of the stochastic final pair predicted by the equivalent loss: the zero of its expected gradient.

    ``Q`` with ``sum_k grad(Q - r_k) = 0`` (brentq, ``xtol = 1e-14``); for L1 the
    median (Observation 3).  Observations 2, 3 and Theorem 3 / Observation 4
    say uniform MSE -> mean, L1 -> median, PER -> minimiser of eq. 7, LAP and PAL
    -> minimiser of PAL.
    """
    from scipy.optimize import brentq

    if method == UNIFORM_L1:
        return float(np.median(rewards))

    def f(q):
        return float(np.sum(pair_gradient(method, q - rewards, alpha, beta, kappa, tau, eps)))

    return float(brentq(f, float(rewards.min()), float(rewards.max()), xtol=1e-14, rtol=8 * UNIT_ROUNDOFF))


def certified_radius(rewards: np.ndarray, q: float, method: int, alpha: float, beta: float, kappa: float,
                     tau: float, eps: float) -> float:
    """Smallest ``h = 10^-k`` such that the pair's expected gradient changes sign on ``[q - h, q + h]``.

    Each equivalent loss here is convex in ``Q``, so a sign change proves its
    minimiser lies within ``h`` of ``q``; ``inf`` if none up to ``h = 1``.
    """
    def f(x):
        return float(np.sum(pair_gradient(method, x - rewards, alpha, beta, kappa, tau, eps)))

    for k in range(15, -1, -1):
        h = 10.0**-k * max(1.0, abs(q))
        lo, hi = f(q - h), f(q + h)
        if lo <= 0.0 <= hi or hi <= 0.0 <= lo:
            return h
    return math.inf


@dataclass
class ChainRun:
    """One expected-dynamics run on the stochastic chain."""

    label: str
    method: int
    params: dict
    final: float
    """Value of the stochastic final pair after the run."""
    history: np.ndarray
    q: np.ndarray
    last_lr: float


def chain_run(mem, n: int, method: int, label: str, steps: int, lr: float, t_half: float = 0.0, alpha: float = 0.4,
              beta: float = 0.4, kappa: float = 1.0, tau: float = 2.0, eps: float = 1e-6,
              normalise: bool = True) -> ChainRun:
    """Run :func:`run_expected_dynamics` from ``Q = 0`` and record the final pair's value."""
    from .cliffwalk.env import discount, right_action

    q = np.zeros((n, 2))
    watch = 2 * (n - 1) + int(right_action(n)[n - 1])
    hist = run_expected_dynamics(mem.s_tm1, mem.a_tm1, mem.r_t, mem.s_t, mem.done_t, discount(n), q, method,
                                 alpha, beta, kappa, tau, eps, lr, t_half, steps, watch, normalise)
    last_lr = lr if t_half <= 0.0 else lr / (1.0 + (steps - 1) / t_half)
    params = {"alpha": alpha, "beta": beta, "kappa": kappa, "tau": tau, "eps": eps}
    return ChainRun(label, method, params, float(hist[-1]), hist, q, last_lr)


CHAIN_TOL = 1e-9
"""Tolerance on converged fixed points of the chain runs (smooth losses).

The runs contract to their fixed point well below 1e-13 (every run's final
steps are at the rounding level; :func:`certified_radius` proves the zero of
the equivalent loss's gradient within ~1e-15 of the final value), and brentq
finds the predicted zero to ``xtol = 1e-14``; 1e-9 is a loose a-priori bound
that only a different fixed point can exceed (the biases studied are ~0.1).
"""


@dataclass
class ChainExperiment:
    rewards: np.ndarray
    runs: list[ChainRun]
    rows: list[dict]
    checks: list[Check]


def _chain_row(run: ChainRun, rewards: np.ndarray, prediction: float, eq7: float, radius: float) -> dict:
    mean = float(np.mean(rewards))
    return {"method": run.label, "alpha": run.params["alpha"], "beta": run.params["beta"],
            "kappa": run.params["kappa"], "final_value": run.final, "prediction": prediction,
            "eq7_minimiser_eps0": eq7, "mean": mean, "median": float(np.median(rewards)),
            "bias": run.final - mean, "predicted_bias": prediction - mean, "certified_radius": radius}


def _fixed_point_check(claim: str, runs: Sequence[ChainRun], preds: Sequence[float], tol: float, note: str) -> Check:
    devs = [abs(r.final - p) for r, p in zip(runs, preds, strict=True)]
    return Check(claim, "final value of the stochastic pair vs prediction", max(devs), max(devs), tol, len(devs), note)


def _trajectory_check(claim: str, a: ChainRun, b: ChainRun, steps: int) -> Check:
    """Expected updates are equal at every step, so the trajectories agree up to rounding.

    Tolerance ``steps * 10 u``: each step adds a few ulps and the expected-update
    map does not expand differences near the fixed point, so they add up at most linearly.
    """
    dev = float(np.max(np.abs(a.history - b.history)))
    return Check(claim, "max_t |Q_t(sampled) - Q_t(uniform equivalent)|", dev, dev, steps * 10 * UNIT_ROUNDOFF,
                 steps, "")


def chain_experiment(n: int = 5, rewards: np.ndarray | None = None, steps: int = 20_000, l1_steps: int = 1_000_000,
                     seed: int = 0, per_alpha: float = 0.6, betas: Sequence[float] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
                     lap_alpha: float = 0.4, kappa: float = 1.0, eps: float = 1e-6, lr: float = 0.05
                     ) -> ChainExperiment:
    """Stochastic-reward Blind Cliffwalk: where each method's expected dynamics settle (Observations 2-4, Theorem 3)."""
    r = skewed_rewards() if rewards is None else np.asarray(rewards, dtype=np.float64)
    mem = stochastic_chain(n, r, np.random.default_rng(seed))
    run = {
        "mse": chain_run(mem, n, UNIFORM_MSE, "uniform + MSE", steps, lr),
        "l1": chain_run(mem, n, UNIFORM_L1, "uniform + L1", l1_steps, lr, t_half=20.0),
        "lap": chain_run(mem, n, LAP_HUBER, "LAP + Huber", steps, lr, alpha=lap_alpha, kappa=kappa),
        "pal": chain_run(mem, n, UNIFORM_PAL, "uniform + PAL", steps, lr, alpha=lap_alpha, kappa=kappa),
        "eq7": chain_run(mem, n, UNIFORM_PER_EQ, "uniform + eq. 7", steps, lr, alpha=per_alpha, beta=0.4, eps=eps),
    }
    per = [chain_run(mem, n, PER_POWER, "PER + MSE", steps, lr, alpha=per_alpha, beta=b, eps=eps) for b in betas]
    rows, preds = [], {}
    for x in [*run.values(), *per]:
        p = x.params
        pred = chain_prediction(r, x.method, p["alpha"], p["beta"], p["kappa"], p["tau"], p["eps"])
        eq7 = chain_prediction(r, UNIFORM_PER_EQ, p["alpha"], p["beta"], p["kappa"], p["tau"], 0.0)
        radius = certified_radius(r, x.final, x.method, p["alpha"], p["beta"], p["kappa"], p["tau"], p["eps"])
        preds[id(x)] = pred
        rows.append(_chain_row(x, r, pred, eq7 if x.method in (PER_POWER, UNIFORM_PER_EQ) else math.nan, radius))
    mean, median = float(np.mean(r)), float(np.median(r))
    l1_tol = len(r) * run["l1"].last_lr
    checks = [
        _fixed_point_check("Cliffwalk (b): uniform MSE -> mean", [run["mse"]], [mean], CHAIN_TOL, "Observation 2"),
        _fixed_point_check("Cliffwalk (b): uniform L1 -> median", [run["l1"]], [median], l1_tol,
                           "Observation 3; tol = K * final step size"),
        _fixed_point_check("Cliffwalk (b): PER+MSE -> argmin eq. 7", per, [preds[id(x)] for x in per], CHAIN_TOL,
                           f"Theorem 3 with eps; beta in {list(betas)}"),
        _fixed_point_check("Cliffwalk (b): LAP, PAL -> argmin PAL", [run["lap"], run["pal"]],
                           [preds[id(run["lap"])]] * 2, CHAIN_TOL, "Observation 4"),
        _trajectory_check("Cliffwalk (b): LAP and PAL trajectories agree", run["lap"], run["pal"], steps),
        _trajectory_check("Cliffwalk (b): PER and eq. 7 trajectories agree", per[list(betas).index(0.4)]
                          if 0.4 in betas else per[0], run["eq7"], steps),
    ]
    return ChainExperiment(r, [*run.values(), *per], rows, checks)
