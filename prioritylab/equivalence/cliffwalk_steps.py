"""Blind Cliffwalk (a): the expected tabular updates of LAP and PER equal their uniform equivalents at every step."""

from __future__ import annotations

import numpy as np

from .. import losses
from ..samplers import make_sampler
from ..samplers.priority import _is_weights
from .common import EXACT_TOL, Check, compare, worst


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
    from ..cliffwalk.env import build_memory, discount

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
            w = _is_weights(p, size, beta, p.min())
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
