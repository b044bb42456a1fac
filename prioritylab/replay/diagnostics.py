"""What a sampler actually replays: statistics accumulated over the batches drawn between two reports.

Per batch, inside the sampling path (no pass over the memory): the effective
sample size of the IS weights, the ages of the drawn transitions, how often
each slot is drawn, the mean IS weight, and (when the learner reports them)
the drawn transitions' |TD errors| and Q-values.  Once per report (an
evaluation), one scan of the memory: coverage and the spread of the sampling
probabilities.  docs/diagnostics.md explains each figure and what healthy
and degenerate values look like.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..sumtree import prefetch

COLUMNS = (
    "ess_mean", "ess_p5", "age_median", "age_p90", "coverage", "max_replays",
    "prob_n_p1", "prob_n_p50", "prob_n_p99", "top1_share",
    "td_mean", "td_std", "q_mean", "q_std", "beta", "weight_mean",
)  # fmt: skip


TINY = 1e-290
"""Below this sum of squared weights (all of a batch's weights under about 1e-145, as global normalisation
can give), the ESS fraction is computed from the weights over their largest (:func:`_ess_scaled`)."""


@njit(cache=True)
def _ess_scaled(weights):
    """The ESS fraction (sum w)^2 / (k sum w^2) of weights too small to square, from ``w / max(w)`` (the
    fraction does not change with the weights' scale).  Weights all 0 (global normalisation where an item has
    probability 0) reach the learner as equal floors (``buffer.WEIGHT_FLOOR``): a fraction of 1."""
    m = 0.0
    for i in range(weights.shape[0]):
        m = max(m, weights[i])
    if m <= 0.0:
        return 1.0
    s = 0.0
    s2 = 0.0
    for i in range(weights.shape[0]):
        s += weights[i] / m
        s2 += (weights[i] / m) ** 2
    return s * s / (weights.shape[0] * s2)


@njit(cache=True)
def _accumulate(idx, weights, counts):
    """Count the draws of each slot; return the batch's ESS fraction (sum w)^2 / (k sum w^2)."""
    s = 0.0
    s2 = 0.0
    for i in range(idx.shape[0]):
        counts[idx[i]] += 1
        s += weights[i]
        s2 += weights[i] * weights[i]
    return s * s / (idx.shape[0] * s2) if s2 > TINY else _ess_scaled(weights)


@njit(cache=True)
def _accumulate_draw(idx, weights, counts, env_step, now, ages):
    """:func:`_accumulate` and the ages ``now - env_step[idx]`` in one pass (lines prefetched first); returns
    the ESS fraction and the weights' sum and sum of squares."""
    k = idx.shape[0]
    for i in range(k):
        prefetch(counts, idx[i])
        prefetch(env_step, idx[i])
    s = 0.0
    s2 = 0.0
    for i in range(k):
        j = idx[i]
        counts[j] += 1
        ages[i] = now - env_step[j]
        s += weights[i]
        s2 += weights[i] * weights[i]
    return (s * s / (k * s2) if s2 > TINY else _ess_scaled(weights)), s, s2


@njit(cache=True)
def _sums(x):
    """Sum and sum of squares of a float64 array."""
    s = 0.0
    s2 = 0.0
    for i in range(x.shape[0]):
        s += x[i]
        s2 += x[i] * x[i]
    return s, s2


class Moments:
    """Running count, sum and sum of squares (mean and std without keeping the values).

    A value above about 1.3e154 takes the sum of squares past the float range: the std is then reported as
    ``inf`` (the spread is past what the sums can hold), never as a finite number, and the state stays loadable.
    """

    def __init__(self):
        self.n, self.s, self.s2 = 0, 0.0, 0.0

    def add(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        s, s2 = _sums(x)
        self.add_sums(x.shape[0], s, s2)

    def add_sums(self, n: int, s: float, s2: float) -> None:
        self.n += n
        self.s += s
        self.s2 += s2

    def mean_std(self) -> tuple[float, float]:
        if not self.n:
            return math.nan, math.nan
        mean = self.s / self.n
        if math.isinf(self.s2):
            return mean, math.inf
        return mean, math.sqrt(max(self.s2 / self.n - mean * mean, 0.0))


class ReplayDiagnostics:
    """Accumulates the per-batch figures of one buffer; :meth:`report` returns them and starts afresh."""

    def __init__(self, capacity: int):
        self.counts = np.zeros(capacity, dtype=np.int64)  # draws per slot since it was written
        self._reset_window()

    def _reset_window(self) -> None:
        self.ess: list[float] = []
        self.ages: list[np.ndarray] = []
        self.weights = Moments()
        self.td = Moments()
        self.q = Moments()
        self.beta = math.nan

    # -- per write and per batch ------------------------------------------------------------
    def on_write(self, slots: np.ndarray) -> None:
        self.counts[slots] = 0

    def on_sample(self, idx: np.ndarray, weights: np.ndarray, ages: np.ndarray, beta: float | None) -> None:
        self.ess.append(_accumulate(idx, weights, self.counts))
        self.ages.append(ages)
        self.weights.add(weights)
        self.beta = math.nan if beta is None else float(beta)

    def on_draw(self, idx: np.ndarray, weights: np.ndarray, env_step: np.ndarray, now: int, beta: float | None) -> None:
        """:meth:`on_sample` with the ages ``now - env_step[idx]`` computed in the same jitted pass (the
        buffer's call)."""
        ages = np.empty(idx.shape[0], dtype=np.int64)
        ess, s, s2 = _accumulate_draw(idx, weights, self.counts, env_step, now, ages)
        self.ess.append(ess)
        self.ages.append(ages)
        self.weights.add_sums(idx.shape[0], s, s2)
        self.beta = math.nan if beta is None else float(beta)

    def on_values(self, td_abs=None, q=None) -> None:
        """The learner's |TD errors| and Q-values of the drawn transitions (NERS Table 3's figures)."""
        if td_abs is not None:
            self.td.add(td_abs)
        if q is not None:
            self.q.add(q)

    # -- once per report ----------------------------------------------------------------------
    def report(self, probs: np.ndarray, in_memory: np.ndarray) -> dict[str, float]:
        """Figures over the batches since the last report; ``probs`` are the sampler's one-draw
        probabilities of every slot, ``in_memory`` marks the slots that can be drawn (the buffer's sampleable
        slots)."""
        ess = np.array(self.ess)
        ages = np.concatenate(self.ages) if self.ages else np.empty(0)
        n = int(in_memory.sum())
        p = probs[in_memory] * n if n else np.empty(0)
        top = max(1, int(math.ceil(0.01 * n)))
        out = {
            "ess_mean": float(ess.mean()) if ess.size else math.nan,
            "ess_p5": float(np.percentile(ess, 5)) if ess.size else math.nan,
            "age_median": float(np.median(ages)) if ages.size else math.nan,
            "age_p90": float(np.percentile(ages, 90)) if ages.size else math.nan,
            "coverage": float((self.counts[in_memory] > 0).mean()) if n else math.nan,
            "max_replays": float(self.counts[in_memory].max()) if n else math.nan,
            "prob_n_p1": float(np.percentile(p, 1)) if n else math.nan,
            "prob_n_p50": float(np.percentile(p, 50)) if n else math.nan,
            "prob_n_p99": float(np.percentile(p, 99)) if n else math.nan,
            "top1_share": float(np.sort(probs[in_memory])[-top:].sum()) if n else math.nan,
            "beta": self.beta,
            "weight_mean": self.weights.mean_std()[0],
        }
        out["td_mean"], out["td_std"] = self.td.mean_std()
        out["q_mean"], out["q_std"] = self.q.mean_std()
        self._reset_window()
        return {k: out[k] for k in COLUMNS}

    def state_dict(self) -> dict:
        """Everything, the open window included, so a resumed run reports what an uninterrupted one does."""
        return {
            "counts": self.counts.copy(),
            "ess": np.array(self.ess, dtype=np.float64),
            "ages": np.concatenate(self.ages) if self.ages else np.empty(0, dtype=np.int64),
            "moments": np.array([[m.n, m.s, m.s2] for m in (self.weights, self.td, self.q)], dtype=np.float64),
            "beta": self.beta,
        }

    @staticmethod
    def parse_state(state, capacity: int) -> dict:
        """Check a :meth:`state_dict` (``ValueError`` naming the field); returns it as arrays."""
        from ..samplers.state import StateError, check_keys, state_array, state_value

        check_keys(state, ("counts", "ess", "ages", "moments", "beta"), "state['diagnostics']")
        counts = state_array(state, "counts", np.int64, (capacity,))
        ess = state_array(state, "ess", np.float64, (-1,))
        ages = state_array(state, "ages", np.int64, (-1,))
        moments = state_array(state, "moments", np.float64, (3, 3))
        beta = state_value(state, "beta")
        for key, arr in (("counts", counts), ("ages", ages)):
            if (arr < 0).any():
                raise StateError(f"state['diagnostics'][{key!r}] must be non-negative")
        if not ((ess > 0) & (ess <= 1 + 1e-12)).all():  # one per batch: (sum w)^2 / (k sum w^2), weights > 0
            raise StateError("state['diagnostics']['ess'] must hold fractions in (0, 1], one per batch")
        n = moments[:, 0]
        # the TD and Q rows' sums may have left the float range (Moments); the weights' cannot, each is in (0, 1]
        if (not np.isfinite(moments[0]).all() or not np.isfinite(n).all() or np.isnan(moments).any() or (n < 0).any()
                or (n != np.round(n)).any() or (moments[:, 2] < 0).any()):  # fmt: skip
            raise StateError("state['diagnostics']['moments'] must hold counts, sums and sums of squares")
        w_n, w_s, w_s2 = moments[0]
        tol = 1e-9 * max(w_n, 1.0)
        if w_n != ages.shape[0] or not (0 <= w_s2 <= w_s + tol and w_s <= w_n + tol) or (w_n == 0 and w_s != 0):
            raise StateError(
                f"state['diagnostics']['moments'] counts {w_n:g} weights in [0, 1] and state['diagnostics']['ages'] "
                f"holds {ages.shape[0]} ages: each drawn item gives one of each"
            )
        if (ess.shape[0] == 0) != (ages.shape[0] == 0) or ess.shape[0] > ages.shape[0]:
            raise StateError(
                f"state['diagnostics']['ess'] holds {ess.shape[0]} batches for the {ages.shape[0]} drawn items of "
                "state['diagnostics']['ages']: one per batch, each of at least one item"
            )
        if not isinstance(beta, float) or not (math.isnan(beta) or 0.0 <= beta <= 1.0):
            raise StateError(f"state['diagnostics']['beta'] must be a float in [0, 1] or NaN, got {beta!r}")
        if not math.isnan(beta) and ess.shape[0] == 0:
            raise StateError(f"state['diagnostics']['beta'] = {beta} is set, but no batch was drawn (state['ess'])")
        return {"counts": counts, "ess": ess, "ages": ages, "moments": moments, "beta": beta}

    def assign(self, parsed: dict) -> None:
        self.counts = parsed["counts"]
        self._reset_window()
        self.ess = [float(x) for x in parsed["ess"]]
        self.ages = [parsed["ages"]] if parsed["ages"].size else []
        for m, row in zip((self.weights, self.td, self.q), parsed["moments"], strict=True):
            m.n, m.s, m.s2 = int(row[0]), float(row[1]), float(row[2])
        self.beta = parsed["beta"]
