"""A vectorised NumPy sum tree, the style of the LAP/PAL authors' replay code.

A binary tree kept as one NumPy array per level (``levels[0]`` is the root,
``levels[-1]`` the leaves, padded with zeros to a power of two).  Every batched
operation is a handful of whole-array NumPy operations per level: a batch of
queries descends the tree level by level, and a batch of updates writes the
leaves and then recomputes each level's touched parents from their two
children.  No compiled code: this is the baseline a NumPy user writes, used by
``prioritylab bench sumtree`` as a peer of the jitted 4-ary tree.
"""

from __future__ import annotations

import numpy as np


class NumpySumTree:
    """Binary sum tree over ``capacity`` slots with batched NumPy operations."""

    def __init__(self, capacity: int):
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity <= 0:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity = int(capacity)
        depth = max(1, (self.capacity - 1).bit_length())
        self.levels = [np.zeros(2**d) for d in range(depth + 1)]

    @property
    def total(self) -> float:
        return float(self.levels[0][0])

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Set leaf masses, then recompute the touched parents level by level.

        NumPy's fancy assignment writes duplicates in order, so the last value
        of a repeated index wins; parents are sums of their children, so there
        is no drift.
        """
        node = np.asarray(indices, dtype=np.int64)
        self.levels[-1][node] = values
        for upper, lower in zip(self.levels[-2::-1], self.levels[:0:-1], strict=True):
            node = node >> 1
            upper[node] = lower[2 * node] + lower[2 * node + 1]

    def sample(self, batch_size: int, rng: np.random.Generator, stratified: bool = True) -> np.ndarray:
        """Draw ``batch_size`` slots with probability ``mass / total``.

        Stratified: query ``q`` is uniform in the ``q``-th of ``batch_size``
        equal ranges of the total mass.  At each level a query goes right when
        it is at or past the left child's sum and the right child has mass,
        so it never enters a zero-mass subtree.
        """
        total = self.levels[0][0]
        if stratified:
            value = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        else:
            value = rng.random(batch_size) * total
        node = np.zeros(batch_size, dtype=np.int64)
        for level in self.levels[1:]:
            node *= 2
            left = level[node]
            right = (value >= left) & (level[node + 1] > 0.0)
            value -= np.where(right, left, 0.0)
            node += right
        return node
