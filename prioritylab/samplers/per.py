"""Proportional prioritised replay (Schaul et al., 2016, Section 3.3 and eq. 1).

``p_i = |delta_i| + eps``, ``P(i) = p_i^alpha / sum_k p_k^alpha``, IS weights
``w_i = (N P(i))^-beta`` normalised so the largest is 1 (Section 3.4).
Defaults are PER's Atari proportional setting, alpha = 0.6, beta0 = 0.4 (PER Section 4, "the sweet spot";
plain-text extractions of the paper lose these numbers; LAP/PAL Table 6 gives the same values, and its App.
D.1 says they are PER's, "as described by Schaul et al."); eps = 1e-6 (PER Section 3.3 asks for "a small positive
constant" without a value: the value is ours; the deep agents use 1e-10, LAP Table 6).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_range, check_total
from ..priorities import PER
from ..sumtree import tree_sample_is
from .base import SampleBatch
from .fused import gather_stamps
from .priority import PrioritySampler

NORMALISATIONS = ("global", "batch")


def check_normalise(normalise: str) -> str:
    """The IS-weight normalisation option shared by ``per``, ``per-rank`` and ``pser``."""
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {NORMALISATIONS}, got {normalise!r}")
    return normalise


class PERSampler(PrioritySampler):
    """Proportional PER.

    ``normalise="global"`` (default) divides the weights by the largest weight
    over every stored item, ``(N min_j P(j))^-beta`` -- the reading of PER's
    Algorithm 1 used by the reference DQN implementations and by the LAP/PAL
    paper's Theorem 3 (eq. 20).  ``"batch"`` divides by the minibatch's largest
    weight.  ``beta`` is given per call (anneal it with
    :class:`prioritylab.schedules.LinearSchedule`); ``beta`` at construction is
    the value used when a call gives none.
    """

    name = "per"
    _rule = PER

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        normalise: str = "global",
        seed=None,
        **kwargs,
    ):
        self.normalise = check_normalise(normalise)
        self.beta = check_range("beta", beta, 0.0, 1.0)
        self.eps = check_range("eps", eps, 0.0, np.inf, hi_open=True)
        super().__init__(capacity, alpha, seed, track_min=normalise == "global", **kwargs)
        self._rule_param = self.eps

    def config(self) -> dict:
        return {**super().config(), "beta": self.beta, "eps": self.eps, "normalise": self.normalise}

    def _norm_mass(self) -> float:
        """Smallest positive mass of a sampleable slot for global normalisation (0 selects the
        batch's largest weight).  An item of zero mass is never drawn and carries no weight, so
        it does not set the normaliser (``eps = 0`` with a zero TD error, or a mass below the
        float range)."""
        if self.normalise != "global":
            return 0.0
        return self.tree.arrays.tmin[0]  # finite: sampling checked that the total is positive

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        b = self.beta if beta is None else float(beta)
        a = self.tree.arrays
        check_total(a.tree[0])
        norm_mass = self._norm_mass()  # checked before the RNG moves
        idx, probs, weights = np.empty(k, dtype=np.int64), np.empty(k), np.empty(k)
        u = self.rng.random(k)
        tree_sample_is(a.tree, a.leaf0, a.depth, u, self.stratified, self._size, b, norm_mass, idx, probs, weights)
        return SampleBatch(idx, probs, weights, gather_stamps(self._generation, idx), b)
