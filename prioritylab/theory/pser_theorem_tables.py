"""The tables behind PSER Theorem 1's verdicts: every point's exact values, Monte Carlo and real runs.

:func:`compute` fills, for each ``n`` and decay coefficient ``rho`` of a :class:`Config` and each
window rule (:data:`~prioritylab.theory.pser_theorem.WINDOWS`), one row with PER's closed form,
exact chain and Monte Carlo; the PSER bounds and closed forms; every reading's exact chain and
Monte Carlo (:mod:`prioritylab.theory.pser_model`); Algorithm 1 in the model's kernel at two eps;
and the real algorithms on the learning-rate-1 Cliffwalk learner (``run_lr1``).  It also returns
the log of every real run and the extra real variants; :func:`per_hypotheses` adds the large
real-PER samples at small ``n``.  :mod:`prioritylab.theory.pser_theorem` turns the tables into
verdicts; ``theory/pser_theorem1.py`` is the driver (options, files, figure).
Derivations: docs/theory/pser-theorem.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cliffwalk import run_lr1
from ..samplers.pser import window_from_rho
from . import pser_model as pm
from .pser_theorem import EXACT_KEY, MC_KEY, READINGS, RHOS, WINDOWS

PER_CHECK_NS = (2, 3, 4)
"""n of the large real-PER sample that separates E_PER + (n - 1) from E_PER (see :func:`per_hypotheses`)."""


@dataclass
class Config:
    """Settings of the check (defaults: the full run)."""

    n_min: int = 2
    """Smallest number of states (PER App. B.1 varies n from 2 to 16)."""
    n_max: int = 16
    """Largest number of states."""
    rhos: tuple = RHOS
    """PSER decay coefficients."""
    mc_runs: int = 10_000
    """Monte Carlo runs per point."""
    real_seeds: int = 50
    """Seeds of the real learning-rate-1 runs per point."""
    per_seeds: int = 3000
    """Seeds of the real PER runs at each n of :data:`PER_CHECK_NS` (expected |z| of the wrong hypothesis >= 9)."""
    seed: int = 0
    """Base seed (Monte Carlo streams and real-run seeds derive from it)."""
    alpha: float = 1.0
    """Prioritisation exponent; Theorem 1 samples "according to their priorities" (alpha = 1)."""
    eps: float = 1e-6
    """PER/PSER eps of the real runs (the idealised model takes eps -> 0)."""
    eta_variant: float = 0.7
    """PSER eq. 10 anti-collapse coefficient of an extra real-run variant (App. table: 0.7)."""
    eps_variant: float = 1e-12
    """eps of an extra Algorithm 1 variant (model Monte Carlo), close to the model's eps -> 0."""
    quick: bool = False
    """Quick mode: n <= 8, fewer runs (a few seconds; used by the tests)."""

    @property
    def ns(self) -> list[int]:
        return list(range(self.n_min, self.n_max + 1))


def real_steps(
    n: int, scheme: str, rho: float, window: int, cfg: Config, eta: float, eps: float, seeds: int | None = None
) -> np.ndarray:
    """Updates to convergence of the real algorithm (``run_lr1``), one per seed (-1: censored)."""
    seeds = cfg.real_seeds if seeds is None else seeds
    return np.array(
        [
            run_lr1(n, scheme, rho=rho, window=window, eta=eta, eps=eps, alpha=cfg.alpha, seed=cfg.seed + s)
            for s in range(seeds)
        ],
        dtype=np.int64,
    )


def _mean_se(steps: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of the updates to convergence; NaN if a run was censored (-1), whose updates are
    unknown beyond the cap: a mean over the runs that converged would be biased low, and read as a result."""
    if steps.size == 0 or (steps < 0).any():
        return float("nan"), float("nan")
    ok = steps.astype(np.float64)
    se = float(ok.std(ddof=1) / math.sqrt(ok.size)) if ok.size > 1 else float("nan")
    return float(ok.mean()), se


class PointCache:
    """Runs and exact values keyed by the effective chain length ``min(W, n - 1)``: a longer window changes nothing."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.seq = np.random.SeedSequence(cfg.seed)
        self.mc, self.exact, self.real, self.log = {}, {}, {}, []

    def pser_mc(self, n: int, rho: float, window: int | None, reading: str = "post") -> pm.MCResult:
        key = (n, rho, pm.chain_length(n, window), reading)
        if key not in self.mc:
            rng = np.random.default_rng(self.seq.spawn(1)[0])
            self.mc[key] = pm.e_pser_mc(n, rho, window, self.cfg.mc_runs, rng, alpha=self.cfg.alpha, reading=reading)
        return self.mc[key]

    def pser_exact(self, n: int, rho: float, window: int | None, reading: str) -> float:
        key = (n, rho, pm.chain_length(n, window), reading)
        if key not in self.exact:
            if reading == "post":
                self.exact[key] = pm.e_pser_exact(n, rho, window, self.cfg.alpha)
            else:
                self.exact[key] = pm.e_reading_exact(n, rho, window, self.cfg.alpha, reading=reading)
        return self.exact[key]

    def real_eps_mc(self, n: int, rho: float, window: int | None, eps: float) -> pm.MCResult:
        """Model Monte Carlo of Algorithm 1 (real reading, eta = 0) with a fixed ``eps``."""
        key = (n, rho, pm.chain_length(n, window), "real", eps)
        if key not in self.mc:
            rng = np.random.default_rng(self.seq.spawn(1)[0])
            self.mc[key] = pm.e_pser_mc(
                n, rho, window, self.cfg.mc_runs, rng, alpha=self.cfg.alpha, reading="real", eps=eps
            )
        return self.mc[key]

    def run(
        self,
        n: int,
        scheme: str,
        rho: float,
        window: int,
        eta: float = 0.0,
        eps: float | None = None,
        seeds: int | None = None,
    ):
        """(mean, standard error, censored runs) of the real algorithm at one point."""
        w = min(window, n - 1)
        eps = self.cfg.eps if eps is None else eps
        seeds = self.cfg.real_seeds if seeds is None else seeds
        key = (n, scheme, rho if scheme == "pser" else None, w, eta, eps, seeds)
        if key not in self.real:
            steps = real_steps(n, scheme, rho, max(w, 1), self.cfg, eta, eps, seeds)
            self.real[key] = (*_mean_se(steps), int((steps < 0).sum()))
            self.log += [
                dict(n=n, scheme=scheme, rho=key[2], window=w, eta=eta, eps=eps, seed=self.cfg.seed + s, steps=int(v))
                for s, v in enumerate(steps)
            ]
        return self.real[key]


def variant_labels(cfg: Config) -> dict[str, tuple[float, float]]:
    """Extra real PSER runs of the testbed (W = eq. 8-9): label -> (eta, eps).

    The eps variant runs in the model's kernel instead (``e_pser_real_eps2_mc``, see
    :meth:`PointCache.real_eps_mc`), which agrees with the testbed and affords 10^4 runs.
    """
    return {f"eta={cfg.eta_variant}": (cfg.eta_variant, cfg.eps)}


def _redecay_closed(n: int, rho: float, w: int | None, alpha: float) -> float:
    try:
        return pm.e_redecay_closed(n, rho, w, alpha)
    except ValueError:  # gamma < rho: no closed form, the chain still applies
        return float("nan")


def _row(cache: PointCache, base: dict, n: int, rho: float, w: int | None) -> dict:
    cfg = cache.cfg
    real = cache.run(n, "pser", rho, n if w is None else w)
    row = dict(
        base,
        rho=rho,
        window="unlimited" if w is None else w,
        e_pser_bound=pm.e_pser_bound(n, rho, w, cfg.alpha),
        e_pser_bound_eq31=pm.e_pser_bound(n, rho, None, cfg.alpha),
        e_pser_real=real[0],
        e_pser_real_se=real[1],
        e_pser_closed=pm.e_pser_closed(n, rho, w, cfg.alpha),
        e_pser_bound_loose=pm.e_pser_bound_loose(n, rho, cfg.alpha),
        e_pser_redecay_closed=_redecay_closed(n, rho, w, cfg.alpha),
        alpha=cfg.alpha,
        eps=cfg.eps,
        eps2=cfg.eps_variant,
        pser_censored=real[2],  # beside the base's per_censored: each count of its own algorithm's runs
    )
    for key, eps in (("e_pser_real_eps_mc", cfg.eps), ("e_pser_real_eps2_mc", cfg.eps_variant)):
        mc = cache.real_eps_mc(n, rho, w, eps)
        row[key], row[key + "_ci"] = mc.mean, mc.ci
    for reading in READINGS:
        mc = cache.pser_mc(n, rho, w, reading)
        row[EXACT_KEY[reading]] = cache.pser_exact(n, rho, w, reading)
        row[MC_KEY[reading]], row[MC_KEY[reading] + "_ci"] = mc.mean, mc.ci
    return row


def compute(cfg: Config, progress=None) -> tuple[dict, list[dict], dict]:
    """Tables (one per window kind), the log of real runs, and the real variants {label: {(n, rho): (mean, se)}}."""
    tables = {kind: [] for kind in WINDOWS}
    cache = PointCache(cfg)
    variants = {label: {} for label in variant_labels(cfg)}
    for n in cfg.ns:
        per = pm.e_per_mc(n, cfg.mc_runs, np.random.default_rng(cache.seq.spawn(1)[0]))
        per_real = cache.run(n, "per", 0.4, 1)
        base = dict(
            n=n,
            e_per_closed=pm.e_per_closed(n),
            e_per_exact=pm.e_per_exact(n),
            e_per_mc=per.mean,
            e_per_mc_ci=per.ci,
            e_per_real=per_real[0],
            e_per_real_se=per_real[1],
            per_censored=per_real[2],
        )
        for rho in cfg.rhos:
            for kind in WINDOWS:
                tables[kind].append(_row(cache, base, n, rho, None if kind == "unlimited" else window_from_rho(rho)))
            for label, (eta, eps) in variant_labels(cfg).items():
                variants[label][(n, rho)] = cache.run(n, "pser", rho, window_from_rho(rho), eta, eps)[:2]
            if progress is not None:
                progress.update(1)
    tables["per_check"] = per_hypotheses(cfg, cache)
    return tables, cache.log, variants


def per_hypotheses(cfg: Config, cache: PointCache) -> list[dict]:
    """Large real-PER samples at small n, where E_PER + (n - 1) and E_PER differ by many standard errors.

    At n = 2, 3, 4 the difference n - 1 is 1, 2, 3 steps against a run-to-run standard
    deviation of about 2.5, 7 and 16, so ``per_seeds = 3000`` puts the wrong hypothesis
    about 20, 15 and 10 standard errors away.  ``e_per_real_exact`` is the exact real
    reading without decay (eps -> 0), which equals E_PER + (n - 1).
    """
    out = []
    for n in PER_CHECK_NS:
        if n > cfg.n_max:
            continue
        mean, se, censored = cache.run(n, "per", 0.4, 1, seeds=cfg.per_seeds)
        out.append(
            dict(
                n=n,
                runs=cfg.per_seeds,
                e_per_real=mean,
                e_per_real_se=se,
                censored=censored,
                e_per_exact=pm.e_per_exact(n),
                e_per_real_exact=pm.e_reading_exact(n, 0.4, alpha=cfg.alpha, reading="real", decay=False),
            )
        )
    return out
