"""Prioritised Sequence Experience Replay (Brittain et al., 2019, Section 3.2).

When transition ``t`` receives priority ``p_t`` it is decayed backwards along
its episode, for ``k = 1..W``:

* MAX (eq. 6): ``p_(t-k) <- max(p_t rho^k, p_(t-k))``
* ADD (eq. 7): ``p_(t-k) <- min(p_(t-k) + p_t rho^k, p_max)``

with the window ``W = floor(ln 0.01 / ln rho)`` (eq. 8-9: the decay stops
at about 1% of ``p_t``), and on the update of a sampled transition the
anti-collapse rule (eq. 10) ``p_t <- max(|delta_t| + eps, eta p_t_old)``.
Priorities here are raw; the tree stores ``p^alpha`` (eq. 5).

The decay never crosses the start of ``t``'s episode and never reaches a slot
that was not written immediately before ``t`` (generation stamps must be
consecutive), so it cannot wrap past the ring buffer's write position or into
overwritten data.  Defaults follow PSER's Atari table (App.): rho = 0.4
(W = 5), eta = 0.7, MAX, alpha = 0.5, beta = 0.5.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._checks import check_positive_int, check_range
from ..sumtree import tree_set
from .base import mass_of
from .per import PERSampler

MODES = ("max", "add")


def window_from_rho(rho: float, threshold: float = 0.01) -> int:
    """PSER eq. 8-9: ``W = floor(ln 0.01 / ln rho)``, the largest ``W`` with ``rho^W >= 0.01``.

    rho = 0.4 gives 5 (0.4^5 = 0.0102), the paper's Atari setting.
    """
    return max(1, int(math.floor(math.log(threshold) / math.log(rho))))


@njit(cache=True)
def pser_decay(raw, tree, tmin, tmax, leaf0, alpha, generation, episode_start, t, rho, window, add_mode, p_max):
    """Decay ``raw[t]`` backwards over at most ``window`` predecessors (eq. 6/7).

    Stops at an episode start (slot ``t-k+1`` starting an episode ends the walk)
    and at the first slot whose generation stamp is not ``generation[t] - k``.
    Changed priorities are written to the tree as ``raw ** alpha``.
    """
    cap = raw.shape[0]
    g = generation[t]
    decayed = raw[t]
    for k in range(1, window + 1):
        if episode_start[(t - k + 1) % cap]:
            return
        s = (t - k) % cap
        if generation[s] != g - k or generation[s] < 0:  # not written just before t, or empty
            return
        decayed *= rho
        old = raw[s]
        new = min(old + decayed, p_max) if add_mode else max(decayed, old)
        if new != old:
            raw[s] = new
            tree_set(tree, tmin, tmax, leaf0, s, mass_of(new, alpha))


@njit(cache=True)
def pser_update(
    raw, tree, tmin, tmax, leaf0, alpha, generation, episode_start, indices, base, eta, rho, window, add_mode, p_max
):
    """Eq. 10 then eq. 6/7, item by item in order: ``p_t = max(base_i, eta * raw[t])`` read at the
    moment item ``i`` is set (so it sees the decay of earlier items), then decayed backwards."""
    for i in range(indices.shape[0]):
        t = indices[i]
        p = max(base[i], eta * raw[t])
        raw[t] = p
        tree_set(tree, tmin, tmax, leaf0, t, mass_of(p, alpha))
        pser_decay(raw, tree, tmin, tmax, leaf0, alpha, generation, episode_start, t, rho, window, add_mode, p_max)


@njit(cache=True)
def pser_set_and_decay(
    raw, tree, tmin, tmax, leaf0, alpha, generation, episode_start, indices, priorities, rho, window, add_mode, p_max
):
    """Set each raw priority in order, then decay it backwards (no eq. 10; ``p_max`` raw)."""
    pser_update(
        raw, tree, tmin, tmax, leaf0, alpha, generation, episode_start, indices, priorities, 0.0, rho, window,
        add_mode, p_max,
    )  # fmt: skip


class PSERSampler(PERSampler):
    """PSER on top of proportional PER (same IS weights and normalisation options).

    ``init="max"`` is the paper's MaxPrio variant; ``init="td"`` its CurrentTD
    variant, where :meth:`add` takes the new items' TD errors and, as any
    priority set from a TD error, decays them backwards.
    """

    name = "pser"

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.5,
        beta: float = 0.5,
        rho: float = 0.4,
        eta: float = 0.7,
        window: int | None = None,
        mode: str = "max",
        eps: float = 1e-6,
        seed=None,
        **kwargs,
    ):
        self.rho = check_range("rho", rho, 0.0, 1.0, lo_open=True, hi_open=True)
        self.eta = check_range("eta", eta, 0.0, 1.0)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.window = window_from_rho(self.rho) if window is None else check_positive_int("window", window)
        super().__init__(capacity, alpha=alpha, beta=beta, eps=eps, seed=seed, **kwargs)

    def config(self) -> dict:
        return {**super().config(), "rho": self.rho, "eta": self.eta, "window": self.window, "mode": self.mode}

    def _raw_rule(self):
        return None  # eq. 10 and the decay need the general path

    def _prepare_update(self, idx, td):
        """Raw ``|delta| + eps``; eq. 10 and the decay never exceed max(it, the max priority),
        and ``x ** alpha`` is monotone, so checking that one mass suffices."""
        base = self.raw_priority(td)
        i = int(np.argmax(base))
        if not (np.isfinite(base[i]) and np.isfinite(mass_of(base[i], self.alpha))):
            raise ValueError(f"priority from td_errors[{i}] = {td[i]} overflows when raised to alpha={self.alpha}")
        return base, None

    def _decay_write(self, idx: np.ndarray, base: np.ndarray, eta: float) -> None:
        """Run :func:`pser_update` on checked priorities (cannot fail)."""
        p_max = max(self._max_raw, float(base.max()))  # eq. 10 values never exceed it
        self._max_raw = p_max
        a = self.tree.arrays
        pser_update(
            self._raw, a.tree, a.tmin, a.tmax, a.leaf0, self.alpha, self._generation, self._episode_start,
            idx, base, eta, self.rho, self.window, self.mode == "add", p_max,
        )  # fmt: skip

    def _on_add(self, idx, prepared) -> None:
        raw, mass = prepared
        if self.init == "td":
            self._decay_write(idx, raw, 0.0)
        else:
            self._write(idx, raw, mass)

    def _on_update(self, idx, prepared) -> None:
        self._decay_write(idx, prepared[0], self.eta)  # eq. 10 inside, item by item


__all__ = ["PSERSampler", "pser_decay", "pser_set_and_decay", "pser_update", "window_from_rho"]
