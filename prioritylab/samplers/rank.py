"""Rank-based prioritised replay (Schaul et al., 2016, Section 3.3, App. B.2.1).

``p_i = 1 / rank(i)`` with ranks by ``|delta|`` in descending order, so
``P(i) = rank(i)^-alpha / sum_r r^-alpha``: a power law over ranks.

The order is kept the way PER kept it: an array-based binary max-heap over the
written slots, which is an *approximately* sorted array (rank = heap position
+ 1).  Inserts and priority changes sift in O(log N); the heap array is fully
re-sorted every ``sort_every`` updated items (PER: every 10^6 steps; at PER's Atari
batch of 32 and one update per 4 steps, the default 10^6 items re-sorts 8 times as often) or on
:meth:`RankSampler.refresh`, and is exact right after.  A descending sorted
array is itself a valid max-heap, so sorting never breaks the heap.

Sampling is stratified into ``k`` segments of equal probability mass (one draw
per segment).  ``within_segment="exact"`` (default) inverts the power-law CDF
inside the segment, so a draw is exactly ``rank^-alpha / H_N``; the CDF table
over ranks depends only on the capacity and is built once, and each draw is a
binary search, O(log N).  ``"uniform"`` is PER's O(1) shortcut: a rank drawn
uniformly between the segment's boundaries (kept for the last size and batch
size), whose probabilities (returned in ``probs``) only approximate the power
law.  They are each draw's probability at a position taken at random, so a rank
that several segments fall back to (one holding more than ``1/k`` of the mass)
counts each of them, and the IS weights stay unbiased.  Defaults: alpha = 0.7,
beta0 = 0.5 (PER Section 4's rank-based "sweet spot"; plain-text extractions of the
paper lose these numbers).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._checks import check_indices, check_positive_int, check_range
from .base import SampleBatch
from .per import check_normalise
from .priority import PrioritySampler, _is_weights
from .state import StateError, state_array, state_int

WITHIN = ("exact", "uniform")


@njit(cache=True)
def _swap(heap, pos, i, j):
    a = heap[i]
    b = heap[j]
    heap[i] = b
    heap[j] = a
    pos[b] = i
    pos[a] = j


@njit(cache=True)
def _sift_up(heap, pos, key, i):
    while i > 0:
        parent = (i - 1) // 2
        if key[heap[parent]] >= key[heap[i]]:
            return i
        _swap(heap, pos, parent, i)
        i = parent
    return i


@njit(cache=True)
def _sift_down(heap, pos, key, i, n):
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        big = left
        right = left + 1
        if right < n and key[heap[right]] > key[heap[left]]:
            big = right
        if key[heap[i]] >= key[heap[big]]:
            return
        _swap(heap, pos, i, big)
        i = big


@njit(cache=True)
def heap_push_or_fix(heap, pos, key, slots, values, n):
    """Set ``key[slots[q]] = values[q]`` one at a time, inserting or re-sifting each."""
    for q in range(slots.shape[0]):
        s = slots[q]
        key[s] = values[q]
        if pos[s] < 0:
            heap[n] = s
            pos[s] = n
            n += 1
            _sift_up(heap, pos, key, n - 1)
        else:
            i = _sift_up(heap, pos, key, pos[s])
            _sift_down(heap, pos, key, i, n)
    return n


class RankSampler(PrioritySampler):
    """Rank-based PER with a heap-ordered rank array (see the module docstring)."""

    name = "per-rank"
    _uses_tree = False

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.7,
        beta: float = 0.5,
        sort_every: int = 1_000_000,
        within_segment: str = "exact",
        normalise: str = "global",
        seed=None,
        **kwargs,
    ):
        self.beta = check_range("beta", beta, 0.0, 1.0)
        self.sort_every = check_positive_int("sort_every", sort_every)
        if within_segment not in WITHIN:
            raise ValueError(f"within_segment must be one of {WITHIN}, got {within_segment!r}")
        self.within_segment = within_segment
        self.normalise = check_normalise(normalise)
        super().__init__(capacity, alpha, seed, **kwargs)
        self._heap = np.zeros(self.capacity, dtype=np.int64)
        self._pos = np.full(self.capacity, -1, dtype=np.int64)
        self._heap_n = 0
        self._since_sort = 0
        self._segment_key: tuple[int, int] | None = None  # derived: see _segments
        self._segment_cache: tuple[np.ndarray, ...] = ()
        ranks = np.arange(1, self.capacity + 1, dtype=np.float64)
        self._rank_mass = ranks**-self.alpha
        if self._rank_mass[-1] == 0.0:  # its probability, and with it every global IS weight, would read 0
            raise ValueError(f"alpha must keep rank {self.capacity}'s mass {self.capacity}^-alpha above 0 in double "
                             f"precision (alpha below {-np.log(np.nextafter(0.0, 1.0)) / np.log(self.capacity):.1f} "
                             f"at this capacity), got {self.alpha}")  # fmt: skip
        self._cdf = np.cumsum(self._rank_mass)  # H_r = sum_{j<=r} j^-alpha

    def config(self) -> dict:
        return {
            **super().config(),
            "beta": self.beta,
            "sort_every": self.sort_every,
            "within_segment": self.within_segment,
            "normalise": self.normalise,
        }

    def memory_bytes(self) -> int:
        """Bytes of the per-slot arrays and raw priorities, the heap and its positions, the rank masses and
        their CDF, and the segment bounds kept for the last batch size."""
        segments = sum(a.nbytes for a in self._segment_cache if isinstance(a, np.ndarray))
        held = (self._heap, self._pos, self._rank_mass, self._cdf)
        return super().memory_bytes() + sum(a.nbytes for a in held) + segments

    def _on_add(self, idx, prepared) -> None:
        self._store(idx, prepared[0])

    def _store(self, idx: np.ndarray, raw: np.ndarray) -> None:
        """No tree: the raw priorities (ranking key ``|delta|``) order the heap."""
        self._max_raw = max(self._max_raw, float(raw.max()))
        self._heap_n = heap_push_or_fix(self._heap, self._pos, self._raw, idx, raw, self._heap_n)

    def _apply(self, idx, raw, mass, td) -> None:
        if td is not None:
            self._td[idx] = td
        self._store(idx, raw)
        self._since_sort += idx.shape[0]
        if self._since_sort >= self.sort_every:
            self.refresh()

    def refresh(self) -> None:
        """Re-sort the heap array by priority (descending; ties by slot)."""
        n = self._size
        filled = self._heap[:n]
        order = np.lexsort((filled, -self._raw[filled]))
        self._heap[:n] = filled[order]
        self._pos[self._heap[:n]] = np.arange(n)
        self._since_sort = 0

    def ranks(self, indices) -> np.ndarray:
        """Current 1-based rank (heap position + 1) of each slot."""
        idx = check_indices("indices", indices, self.capacity)
        self._check_filled(idx)
        return self._pos[idx] + 1

    def order(self) -> np.ndarray:
        """Written slots by current rank (a copy of the heap array: rank r at position r - 1)."""
        return self._heap[: self._heap_n].copy()

    def probabilities(self) -> np.ndarray:
        """Exact per-slot probability of one draw (``within_segment="exact"`` only: with
        ``"uniform"`` it depends on the batch size; read ``SampleBatch.probs`` instead).  Refused, as
        sampling is, while slots are held: the heap ranks them, so no probability would be theirs alone."""
        if self.within_segment != "exact":
            raise ValueError("probabilities() depend on the batch size with within_segment='uniform'")
        self._refuse_held()
        n = self._size
        if n == 0:
            return np.zeros(self.capacity)
        p = np.zeros(self.capacity)
        p[self._heap[:n]] = self._rank_mass[:n] / self._cdf[n - 1]
        return p

    def _draw_ranks(self, k: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Ranks (0-based) of one stratified batch, their probabilities, and the smallest
        probability any stored item has under the same scheme."""
        n = self._size
        total = self._cdf[n - 1]
        u = self.rng.random(k)
        if self.within_segment == "exact":
            target = (np.arange(k) + u) * (total / k)
            r = np.minimum(np.searchsorted(self._cdf[:n], target, side="right"), n - 1)
            return r, self._rank_mass[r] / total, self._rank_mass[n - 1] / total
        lo, hi, mass, least = self._segments(n, k)
        r = lo + np.floor(u * (hi - lo)).astype(np.int64)
        return r, self._marginal(lo, hi, mass, r), least

    @staticmethod
    def _marginal(lo: np.ndarray, hi: np.ndarray, mass: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Probability that one draw of the batch, at a position taken at random, is rank ``r``:
        ``sum_j [lo_j <= r < hi_j] / (k (hi_j - lo_j))``.  Segments overlap where one rank holds more
        than ``1/k`` of the mass (the segments it spans all fall back to it), so a rank may be in
        several; ``lo`` and ``hi`` never decrease, so those are the ones from the first whose ``hi``
        exceeds ``r`` to the last whose ``lo`` does not (``mass``: the running sum of their shares)."""
        first = np.searchsorted(hi, r, side="right")
        last = np.searchsorted(lo, r, side="right")
        return mass[last] - mass[first]

    def _segments(self, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Rank bounds of ``k`` equal-mass segments over ``n`` ranks, the running sum of their shares
        ``1 / (k (hi - lo))`` (:meth:`_marginal`) and the least probability of any rank, kept for the
        last ``(n, k)`` (PER precomputes them), so a draw within a segment is O(1)."""
        if self._segment_key != (n, k):
            bounds = (np.arange(k + 1) / k) * self._cdf[n - 1]
            edges = np.searchsorted(self._cdf[:n], bounds, side="left")
            edges[-1] = n
            lo = np.minimum(edges[:-1], n - 1)
            hi = np.maximum(edges[1:], lo + 1)
            mass = np.concatenate(([0.0], np.cumsum(1.0 / (k * (hi - lo)))))
            starts = np.unique(np.concatenate((lo, hi[hi < n])))  # the probability is constant from each on
            least = float(self._marginal(lo, hi, mass, starts).min())
            self._segment_cache = (lo, hi, mass, least)
            self._segment_key = (n, k)
        return self._segment_cache

    def _refuse_held(self) -> None:
        if self._n_sampleable < self._size:
            raise ValueError(
                "per-rank cannot sample while slots are held back from sampling "
                f"({self._size - self._n_sampleable} held); use it where every written slot is sampleable"
            )

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        self._refuse_held()
        b = self.beta if beta is None else float(beta)
        r, probs, min_prob = self._draw_ranks(k)
        idx = self._heap[r]
        weights = _is_weights(probs, self._size, b, min_prob if self.normalise == "global" else None)
        return SampleBatch(idx, probs, weights, self._generation[idx], b)

    def state_dict(self) -> dict:
        state = super().state_dict()
        state.update(heap=self._heap.copy(), pos=self._pos.copy(), since_sort=self._since_sort, heap_n=self._heap_n)
        return state

    def _parse_state(self, state: dict) -> dict:
        values = super()._parse_state(state)
        cap = (self.capacity,)
        heap_n = state_int(state, "heap_n", 0, self.capacity)
        heap = state_array(state, "heap", np.int64, cap)
        pos = state_array(state, "pos", np.int64, cap)
        since_sort = state_int(state, "since_sort", 0, self.sort_every)
        live = heap[:heap_n]
        if heap_n != values["_size"] or ((live < 0) | (live >= self.capacity)).any():
            raise StateError(f"state['heap_n'] = {heap_n} and state['heap'] must list the {values['_size']} "
                             "written slots")  # fmt: skip
        if not np.array_equal(np.sort(live), np.sort(values["_filled"][:heap_n])):
            raise StateError("state['heap'] must list each written slot exactly once")
        expected_pos = np.full(self.capacity, -1, dtype=np.int64)
        expected_pos[live] = np.arange(heap_n)
        if not np.array_equal(pos, expected_pos):
            raise StateError("state['pos'] must give each written slot's heap position (-1 elsewhere)")
        key = values["_raw"][live]
        child = np.arange(1, heap_n)
        if (key[(child - 1) // 2] < key[child]).any():
            raise StateError("state['heap'] is not in heap order of the raw priorities")
        values.update(_heap=heap, _pos=pos, _since_sort=since_sort, _heap_n=heap_n)
        return values
