"""Greedy TD replay: always the largest |delta| (PER Section 3.2, Fig. 2 left)."""

from __future__ import annotations

import numpy as np

from .base import SampleBatch
from .priority import PrioritySampler


class GreedyTDSampler(PrioritySampler):
    """Deterministically replays the ``k`` largest raw priorities ``|delta|`` among sampleable slots.

    New items enter at the maximum priority seen (PER Section 3.2).  Ties go to
    the lowest slot.  The draw is deterministic: ``probs`` is 1 for a drawn
    slot and :meth:`probabilities` is a point mass on the top slot.  No sum
    tree is kept; a batch costs one O(N log N) sort over the written slots.
    """

    name = "greedy-td"
    _uses_tree = False

    def __init__(self, capacity: int, seed=None, **kwargs):
        super().__init__(capacity, 1.0, seed, **kwargs)

    def _order(self) -> np.ndarray:
        filled = self._filled[: self._size]
        filled = filled[self._sampleable[filled]]
        return filled[np.lexsort((filled, -self._raw[filled]))]  # by (-priority, slot)

    def probabilities(self) -> np.ndarray:
        p = np.zeros(self.capacity)
        order = self._order()
        if order.size:  # none where no written slot may be drawn yet
            p[order[0]] = 1.0
        return p

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        chosen = np.resize(self._order(), k)  # the k largest; cycles if k exceeds the size
        return SampleBatch(chosen, np.ones(k), np.ones(k), self._generation[chosen])
