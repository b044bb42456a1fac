"""Prioritised Sequence Experience Replay (Brittain et al., 2019, Section 3.2).

When transition ``t`` receives priority ``p_t`` it is decayed backwards along
its episode, for ``k = 1..W``:

* MAX (eq. 6): ``p_(t-k) <- max(p_t rho^k, p_(t-k))``
* ADD (eq. 7): ``p_(t-k) <- min(p_(t-k) + p_t rho^k, p_max)``

with the window ``W = floor(ln 0.01 / ln rho)`` (eq. 8-9: the decay stops
at about 1% of ``p_t``), and on the update of a sampled transition the
anti-collapse rule (eq. 10) ``p_t <- max(|delta_t| + eps, eta p_t_old)``.
Priorities here are raw; the tree stores ``p^alpha`` (eq. 5).

The decay follows the predecessor links the writer gives (the previous step of
the same episode of the same environment): it never crosses an episode start
and never reaches a slot overwritten since (its stamp changed), whatever the
interleaving of environments in the ring.  Defaults follow PSER's Atari table (App.): rho = 0.4
(W = 5), eta = 0.7, MAX, alpha = 0.5, beta = 0.5.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._checks import check_positive_int, check_range
from ..priorities import pser_anti_collapse, pser_decay, pser_set
from .per import PERSampler

MODES = ("max", "add")

RHO = 0.4  # decay coefficient (defined in PSER Section 3.2; 0.4 in Section 4.2 and its Atari table)
ETA = 0.7  # anti-collapse factor of eq. 10 (Section 4.2 and the appendix's Table 2, "previous priority")
MODE = "max"  # decay rule: eq. 6 ("max"), the paper's; eq. 7 ("add") is the alternative it states
"""PSER's settings, one home: the sampler, the deep agents' ``ReplaySettings`` and the testbed's ``RunConfig``
take their defaults from here."""


def window_from_rho(rho: float, threshold: float = 0.01) -> int:
    """PSER eq. 8-9: ``W = floor(ln 0.01 / ln rho)``, the largest ``W`` with ``rho^W >= 0.01``, and at least 1
    (for rho < 0.01, where that ``W`` is 0, the decay still reaches the previous step).

    rho = 0.4 gives 5 (0.4^5 = 0.0102), the paper's Atari setting.
    """
    return max(1, int(math.floor(math.log(threshold) / math.log(rho))))


DUPLICATES = ("once", "each")
"""How one update treats a slot that appears more than once in it (a minibatch may draw a slot twice):
``"once"``, one application of eq. 10 and of the decay, at the slot's last copy (the paper's "previous
priority" is the one the slot held before this update, so a transition drawn twice in one minibatch drops to
``eta * p_old``, not ``eta^2 * p_old``, and under ADD its decay is not added twice); ``"each"``, once per copy,
compounding (this project's only behaviour before the option existed).  Either way the running max priority
(a new transition's priority, and ADD's cap) takes every copy's priority, the copies ``"once"`` does not apply
among them, as PER's last-copy-wins update does: it is the largest priority the learner reported."""
DUPLICATE = "once"  # the default, eq. 10's reading (the deep agents' ``ReplaySettings`` take it from here)


@njit(cache=True)
def pser_update(
    raw, tree, tmin, leaf0, alpha, prev, prev_gen, generation, sampleable, indices, base, eta, rho, window, add_mode,
    p_max, once, scratch,
):  # fmt: skip
    """Eq. 10 then eq. 6/7, item by item in order: ``p_t = max(base_i, eta * raw[t])`` read at the
    moment item ``i`` is set (so it sees the decay of earlier items), then decayed backwards.  With ``once``
    only the last copy of a slot that appears more than once is applied; ``scratch`` (capacity, all -1)
    marks those copies and is restored before returning."""
    n = indices.shape[0]
    if once:
        for i in range(n):
            scratch[indices[i]] = i
    for i in range(n):
        t = indices[i]
        if once and scratch[t] != i:
            continue
        p = pser_anti_collapse(base[i], eta, raw[t])
        pser_set(raw, tree, tmin, leaf0, alpha, prev, prev_gen, generation, sampleable, t, p, rho, window, add_mode,
                 p_max)  # fmt: skip
    if once:
        for i in range(n):
            scratch[indices[i]] = -1


class PSERSampler(PERSampler):
    """PSER on top of proportional PER (same IS weights and normalisation options).

    ``init="max"`` is the paper's MaxPrio variant; ``init="td"`` its CurrentTD
    variant, where :meth:`add` takes the new items' TD errors and, as any
    priority set from a TD error, decays them backwards.  A MaxPrio item enters
    at the largest priority without a decay: Section 3.2 decays a priority
    calculated from a TD error, which a MaxPrio item does not have yet.
    ``duplicates``: how an update treats a slot given more than once
    (:data:`DUPLICATES`).
    """

    name = "pser"

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.5,
        beta: float = 0.5,
        rho: float = RHO,
        eta: float = ETA,
        window: int | None = None,
        mode: str = MODE,
        eps: float = 1e-6,  # PSER gives no value; PER's sampler's (the deep agents: 1e-10, LAP Table 6)
        duplicates: str = DUPLICATE,
        seed=None,
        **kwargs,
    ):
        self.rho = check_range("rho", rho, 0.0, 1.0, lo_open=True, hi_open=True)
        if duplicates not in DUPLICATES:
            raise ValueError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
        self.duplicates = duplicates
        self.eta = check_range("eta", eta, 0.0, 1.0)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.window = window_from_rho(self.rho) if window is None else check_positive_int("window", window)
        super().__init__(capacity, alpha=alpha, beta=beta, eps=eps, seed=seed, **kwargs)

    @property
    def _decay_span(self) -> int:
        return self.window

    def config(self) -> dict:
        return {**super().config(), "rho": self.rho, "eta": self.eta, "window": self.window, "mode": self.mode,
                "duplicates": self.duplicates}  # fmt: skip

    def _fusable(self) -> tuple[bool, bool, bool]:
        """``add`` at the max priority is the plain one (no decay); updates decay, so they are not fused."""
        return self.init == "max", True, False

    def _decay_write(self, idx: np.ndarray, base: np.ndarray, eta: float) -> None:
        """Run :func:`pser_update` on checked priorities (cannot fail: eq. 10 and the decay never
        exceed max(base, the max priority), whose masses were checked)."""
        p_max = max(self._max_raw, float(base.max()))
        self._max_raw = p_max
        a = self.tree.arrays
        pser_update(
            self._raw, a.tree, a.tmin, a.leaf0, self.alpha, self._prev, self._prev_gen, self._generation,
            self._sampleable, idx, base, eta, self.rho, self.window, self.mode == "add", p_max,
            self.duplicates == "once", self._scratch,
        )  # fmt: skip

    def _on_add(self, idx, prepared) -> None:
        raw, mass = prepared
        if self.init == "td":
            self._decay_write(idx, raw, 0.0)
        else:
            self._apply_plain(idx, raw, mass)

    def _apply_plain(self, idx, raw, mass) -> None:
        super()._apply(idx, raw, mass, None)

    def _apply(self, idx, raw, mass, td) -> None:
        if td is not None:
            self._td[idx] = td
        if td is None:  # priorities set directly (a learned score): no eq. 10, still decayed
            self._decay_write(idx, raw, 0.0)
        else:
            self._decay_write(idx, raw, self.eta)  # eq. 10 inside, item by item


__all__ = ["DUPLICATES", "PSERSampler", "pser_decay", "pser_update", "window_from_rho"]
