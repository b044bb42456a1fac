"""Monte Carlo with prioritylab's PER and LAP samplers: sample means converge to the exact expectations.

A draw's value is the sampled item's loss gradient (times the IS weight for
PER); its exact expectation is the uniformly sampled equivalent loss's
expected gradient (PAL, eq. 7 or eq. 8).  Convergence is judged against
Bernstein's inequality, the rate against the ``1/sqrt(M)`` law.

The equivalence holds item by item (``P(i) w(i) grad L1(i) = grad L2(i) / N``), so
it holds on any part of the items too.  The whole mean sums gradients of both
signs, which nearly cancel: its exact value can be small against its spread, and
a wrong expectation then hides inside the radius.  :data:`PARTS` checks the items
with positive and negative TD errors apart as well, each a sum of one sign.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import losses
from .common import filled_sampler, per_distribution, uniform_expectation

MC_FAIL_PROB = 1e-6
"""False-failure probability budget of one Monte Carlo convergence check (all sizes together)."""
PARTS = ("all", "positive", "negative")
"""The items whose draws a check averages: all, those with delta > 0, those with delta < 0."""


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


def monte_carlo_setup(delta: np.ndarray, method: str, seed: int, part: str = "all", **params) -> MonteCarloSetup:
    """``method="lap"`` (alpha, kappa: Huber gradient) or ``"per"`` (alpha, beta, eps and tau or kappa).

    ``part`` (one of :data:`PARTS`): a draw of an item outside the part counts 0, on both sides.

    Draws are i.i.d. (``stratified=False``).  For PER a draw's value is the
    sampler's IS weight times the loss gradient (``|delta|^tau/tau`` if ``tau``
    is given, else Huber(kappa)); the exact value is the uniform equivalent's
    expected gradient, and the variance is exact under the sampler's distribution.
    """
    n = delta.shape[0]
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    keep = {"all": np.ones(n), "positive": (delta > 0).astype(float), "negative": (delta < 0).astype(float)}[part]
    if method == "lap":
        a, k = params["alpha"], params["kappa"]
        sampler = filled_sampler("lap", delta, seed=seed, alpha=a, kappa=k, stratified=False)
        g = keep * losses.huber(delta, k)[1]
        p, w = sampler.probabilities(), np.ones(n)
        exact = uniform_expectation(keep * losses.pal(delta, a, k)[1])[0]

        def draw(m: int) -> np.ndarray:
            return g[sampler.sample(m).indices]

    elif method == "per":
        a, b, e = params["alpha"], params["beta"], params.get("eps", 0.0)
        sampler = filled_sampler("per", delta, seed=seed, alpha=a, beta=b, eps=e, stratified=False)
        if "tau" in params:
            g = keep * losses.power(delta, params["tau"])[1]
            exact = uniform_expectation(keep * losses.per_equivalent(delta, a, b, params["tau"], e)[1])[0]
        else:
            g = keep * losses.huber(delta, params["kappa"])[1]
            exact = uniform_expectation(keep * losses.per_huber_equivalent(delta, a, b, params["kappa"], e)[1])[0]
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
