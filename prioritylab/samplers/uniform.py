"""Uniform replay over written slots (the baseline of every paper)."""

from __future__ import annotations

import numpy as np

from .base import SampleBatch, Sampler
from .fused import draw_slots, gather_stamps

_REDRAWS = 64  # rounds of redrawing held slots before falling back to an explicit list


class UniformSampler(Sampler):
    """Draws sampleable written slots uniformly with replacement; probabilities ``1/N``.

    Held slots (not sampleable) are few, so a drawn held slot is redrawn:
    exactly uniform over the sampleable ones.
    """

    name = "uniform"

    def probabilities(self) -> np.ndarray:
        p = np.zeros(self.capacity)
        if self._n_sampleable:
            p[self._sampleable] = 1.0 / self._n_sampleable
        return p

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        n = self._size
        filled = self._filled[:n]
        idx, stamps, held = draw_slots(filled, self.rng.integers(0, n, size=k), self._generation, self._sampleable)
        if held:
            for _ in range(_REDRAWS):
                held = ~self._sampleable[idx]
                if not held.any():
                    break
                idx[held] = filled[self.rng.integers(0, n, size=int(held.sum()))]
            else:
                live = filled[self._sampleable[filled]]
                held = ~self._sampleable[idx]
                idx[held] = live[self.rng.integers(0, live.shape[0], size=int(held.sum()))]
            stamps = gather_stamps(self._generation, idx)
        return SampleBatch(idx, np.full(k, 1.0 / self._n_sampleable), np.ones(k), stamps)
