"""Greedy TD replay: always the largest |delta| (PER Section 3.2, Fig. 2 left)."""

from __future__ import annotations

import numpy as np

from .base import PrioritySampler, SampleBatch


class GreedyTDSampler(PrioritySampler):
    """Deterministically replays the ``k`` largest raw priorities ``|delta|``.

    New items enter at the maximum priority seen (PER Section 3.2).  Ties go to
    the lowest slot.  ``probs`` is 1 for a drawn slot (a point mass); the tree
    is kept so that ``probabilities()`` and the state layout match the others.
    """

    name = "greedy-td"

    def __init__(self, capacity: int, seed=None, **kwargs):
        kwargs.setdefault("track_extrema", False)
        super().__init__(capacity, 1.0, seed, **kwargs)

    def raw_priority(self, td: np.ndarray) -> np.ndarray:
        return np.abs(td)

    def _raw_rule(self):
        return (0.0, 0.0)

    def sample(self, batch_size: int, beta: float | None = None) -> SampleBatch:
        k = self._check_batch(batch_size)
        filled = self._filled[: self._size]
        if k >= filled.shape[0]:
            order = np.lexsort((filled, -self._raw[filled]))
            chosen = filled[order]
            chosen = np.resize(chosen, k)
        else:
            # stable top-k: sort by (-priority, slot)
            order = np.lexsort((filled, -self._raw[filled]))[:k]
            chosen = filled[order]
        return SampleBatch(chosen, np.ones(k), np.ones(k), self._generation[chosen])
