"""Uniform replay over written slots (the baseline of every paper)."""

from __future__ import annotations

import numpy as np

from .base import SampleBatch, Sampler


class UniformSampler(Sampler):
    """Draws written slots uniformly with replacement; probabilities ``1/N``."""

    name = "uniform"

    def probabilities(self) -> np.ndarray:
        p = np.zeros(self.capacity)
        p[self._filled[: self._size]] = 1.0 / max(self._size, 1)
        return p

    def sample(self, batch_size: int, beta: float | None = None) -> SampleBatch:
        k = self._check_batch(batch_size, beta)
        n = self._size
        idx = self._filled[self.rng.integers(0, n, size=k)]
        return SampleBatch(idx, np.full(k, 1.0 / n), np.ones(k), self._generation[idx])
