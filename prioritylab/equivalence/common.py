"""Results, data sets and exact expectations shared by the loss <-> sampling checks.

Conventions: ``delta = Q - y`` (LAP/PAL eq. 1); gradients are ``d loss / d Q``
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..samplers import make_sampler
from ..samplers.priority import _is_weights
from ..verdict import verdict_word

UNIT_ROUNDOFF = 2.0**-53
"""Unit roundoff of IEEE double precision."""

EXACT_TOL = 1e-12
"""Tolerance on relative deviations of exact (summed) expectations; see the module notes."""


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
        """Every field, ``reproduced`` (bool) and the ``verdict`` word (:mod:`prioritylab.verdict`)."""
        row = asdict(self)
        row["reproduced"] = self.passed
        row["verdict"] = verdict_word(self.passed)
        return row


def largest(values) -> float:
    """The largest of ``values``, NaN if any is NaN: Python's ``max`` keeps a NaN only when it comes first, so a
    deviation that is not a number would pass a check merged after a good one."""
    values = [float(v) for v in values]
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def worst(checks: Sequence[Check]) -> Check:
    """Merge checks of one claim: the worst deviations over all cases (NaN if any is NaN: then it fails)."""
    if not checks:
        raise ValueError("no checks to merge")
    first = checks[0]
    return Check(
        first.claim,
        first.quantity,
        largest(c.abs_dev for c in checks),
        largest(c.rel_dev for c in checks),
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


def merge_by_claim(checks: Sequence[Check]) -> list[Check]:
    """One row per claim (first-seen order), worst deviations over its cases."""
    groups: dict[str, list[Check]] = {}
    for c in checks:
        groups.setdefault(c.claim, []).append(c)
    return [worst(g) for g in groups.values()]


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


def filled_sampler(name: str, delta: np.ndarray, seed=0, **params):
    n = delta.shape[0]
    sampler = make_sampler(name, n, seed=seed, **params)
    idx = np.arange(n)
    sampler.add(idx)
    sampler.update(idx, delta)
    return sampler


def lap_probabilities(delta: np.ndarray, alpha: float, kappa: float) -> np.ndarray:
    """Exact one-draw probabilities of prioritylab's LAP sampler holding ``delta`` (eq. 30)."""
    return filled_sampler("lap", delta, alpha=alpha, kappa=kappa).probabilities()


def per_distribution(delta: np.ndarray, alpha: float, beta: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact probabilities and IS weights of prioritylab's PER sampler holding ``delta`` (eq. 3-4).

    Weights ``(N P(i))^-beta`` divided by the largest weight over the data set
    (``normalise="global"``, as in Theorem 3's proof, eq. 20).  Items with
    ``P(i) = 0`` (``delta = 0`` with ``eps = 0``) are never drawn; their weight
    is reported as 0.  Their infinite weight makes the others 0 when ``beta > 0``.
    """
    sampler = filled_sampler("per", delta, alpha=alpha, beta=beta, eps=eps, normalise="global")
    p = sampler.probabilities()
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _is_weights(p, delta.shape[0], beta, p.min())  # np.float64: 0 -> inf weight, no exception
    return p, np.where(p > 0.0, w, 0.0)


def per_expectation(delta: np.ndarray, g: np.ndarray, alpha: float, beta: float, eps: float) -> tuple[float, float]:
    """``E_PER[w(i) g_i]`` exactly, with prioritylab's PER sampler (and its mass)."""
    p, w = per_distribution(delta, alpha, beta, eps)
    return weighted_expectation(p, w * g)
