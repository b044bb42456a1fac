"""Sum tree over replay slots: flat float64 arrays, batched jitted kernels.

Layout
------
A complete ``FANOUT``-ary tree (``FANOUT = 4``) stored heap-style in one flat
array: the root is node 0, the children of node ``i`` are ``FANOUT * i + 1 ... FANOUT * i + FANOUT``
and the leaves (one per slot, padded with zeros up to ``FANOUT ** depth``) start
at ``leaf0 = (FANOUT ** depth - 1) // (FANOUT - 1)``.  The four children of a node
are contiguous (32 bytes, and :func:`tree_alloc` puts every such group inside
one 64-byte cache line), so one descent step reads one cache line and a
2^20-slot tree is 10 levels deep (a binary tree: 20).

Invariant: every internal node equals the left-to-right floating-point sum of
its children.  Updates recompute parents from children (never add deltas), so
there is no drift and the whole tree is a pure function of its leaves.

The kernels are plain ``@njit`` functions over arrays so that jitted code (the
Blind Cliffwalk learners) can call them directly; :class:`SumTree` is a thin
wrapper that validates input and owns the arrays.

Optional extrema trees (same layout) keep the minimum and maximum leaf over the
slots written so far, for IS-weight normalisation (PER eq. 1-2 with the global
maximum weight) and max-priority insertion; each is read at its root in O(1).

Speed (docs/benchmarks.md, "what we tried"): the arrays are allocated so that
every group of ``FANOUT`` children sits in one cache line; batched kernels work
level by level so the memory loads of a level are independent; a descent
prefetches each query's next group one level ahead and, for sorted
(stratified) queries, replaces the top levels by one merge; indices are
unsigned in the inner loops (no negative-index wraparound code).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._checks import as_float_array, as_index_array, check_bool, check_indices, check_positive_int, check_total

FANOUT = 4
"""Children per internal node, a compile-time constant of every kernel.

Measured (docs/benchmarks.md): 4 beats 2, 8 and 16 for batched stratified
descent at 2^20 slots; a constant (rather than an argument) lets the compiler
unroll the child scan, which alone gave 1.6x."""

_FANOUT_BITS = FANOUT.bit_length() - 1
_TINY = np.nextafter(0.0, 1.0)  # smallest positive double: the floor of an IS weight
"""``log2(FANOUT)``: the ancestor of slot ``j`` ``h`` levels up sits at position
``j >> (h * _FANOUT_BITS)`` of its level (``FANOUT`` is a power of two)."""

_LINE = 64
"""Cache-line size in bytes used to align the tree arrays."""


def tree_shape(capacity: int, fanout: int = FANOUT) -> tuple[int, int, int]:
    """Return ``(depth, leaf0, size)`` of a tree holding ``capacity`` leaves."""
    depth, leaves = 1, fanout
    while leaves < capacity:
        leaves *= fanout
        depth += 1
    leaf0 = (leaves - 1) // (fanout - 1)
    return depth, leaf0, leaf0 + leaves


def tree_alloc(size: int, fill: float = 0.0) -> np.ndarray:
    """A float64 array of ``size`` for a tree, laid out for the kernels' loads.

    Node 1 (the first child group) starts on a cache-line boundary, so each
    group of ``FANOUT`` children (32 bytes) lies in one line instead of half of
    them straddling two.  Any float64 array works with the kernels; this one is
    just faster (about 2x for batched updates and descents at 2^22 slots,
    docs/benchmarks.md).
    """
    pad = _LINE // 8
    buf = np.full(size + pad, fill, dtype=np.float64)
    shift = (-(buf.ctypes.data + 8) % _LINE) // 8
    return buf[shift : shift + size]


# --------------------------------------------------------------------------- kernels


@intrinsic
def prefetch(typingctx, arr, index):
    """Hint the CPU to load ``arr[index]`` into cache (LLVM ``llvm.prefetch``); no effect on results.

    A descent knows every query's next node one whole level before reading it;
    prefetching it then keeps many cache misses in flight at once.
    """
    sig = types.void(arr, index)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32])
        # the unsuffixed name is upgraded by LLVM to its pointer-type mangling, whatever the LLVM version
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])  # read, keep in all levels, data cache
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True)
def check_priorities(indices, values, capacity):
    """Return the position of the first invalid (index, value) pair, or -1.

    Invalid: an index outside ``[0, capacity)`` or a value that is NaN, infinite
    or negative.  Callers check before mutating anything.
    """
    for i in range(indices.shape[0]):
        j = indices[i]
        v = values[i]
        if j < 0 or j >= capacity or not (v >= 0.0 and v < np.inf):
            return i
    return -1


@njit(cache=True)
def tree_refresh_path(tree, leaf):
    """Recompute the sums on the path from ``leaf`` to the root."""
    node = leaf
    while node > 0:
        parent = (node - 1) // FANOUT
        first = np.uint64(parent * FANOUT + 1)  # unsigned, as in _child
        s = 0.0
        for j in range(FANOUT):
            s += tree[first + np.uint64(j)]
        if tree[parent] == s:  # ancestors already agree with this subtree
            return
        tree[parent] = s
        node = parent


@njit(cache=True, inline="always")
def _extreme_of_children(t, first, is_max):
    """Minimum (or maximum) of the ``FANOUT`` children starting at ``first``."""
    e = t[first]
    for j in range(1, FANOUT):
        v = t[first + np.uint64(j)]
        e = max(e, v) if is_max else min(e, v)
    return e


@njit(cache=True)
def tree_refresh_extreme(t, leaf, is_max):
    """Recompute a min (or max) tree on the path from ``leaf`` to the root."""
    node = leaf
    while node > 0:
        parent = (node - 1) // FANOUT
        e = _extreme_of_children(t, np.uint64(parent * FANOUT + 1), is_max)
        if t[parent] == e:
            return
        t[parent] = e
        node = parent


@njit(cache=True)
def tree_update_levels(t, leaf0, indices, kind):
    """Recompute, level by level bottom-up, the ancestors of ``indices`` in one tree.

    ``kind`` 0: sums, 1: minima, 2: maxima.  The ancestors of one level are
    independent of each other, so their cache misses overlap (2x faster than
    walking each path in turn); ancestors are found by shifting the slot index
    (``slot >> 2h``).  A level with no more nodes than the batch is recomputed
    whole, one sequential pass instead of many scattered repeats of the same
    few nodes.
    """
    n = indices.shape[0]
    first = leaf0  # first node of the level just brought up to date
    shift = 0
    while first > 0:
        first = (first - 1) // FANOUT
        shift += _FANOUT_BITS
        width = first * (FANOUT - 1) + 1  # nodes on this level
        if width <= n:
            for node in range(first, first + width):
                _recompute(t, node, kind)
        else:
            for i in range(n):
                _recompute(t, first + (indices[i] >> shift), kind)


@njit(cache=True, inline="always")
def _recompute(t, node, kind):
    """Set ``node`` from its ``FANOUT`` children: their sum, minimum or maximum."""
    first = np.uint64(node * FANOUT + 1)  # unsigned, as in _child
    if kind == 0:
        s = 0.0
        for j in range(FANOUT):
            s += t[first + np.uint64(j)]
        t[node] = s
    else:
        t[node] = _extreme_of_children(t, first, kind == 2)


@njit(cache=True)
def tree_update(tree, tmin, tmax, leaf0, indices, values):
    """Write ``values`` at slots ``indices`` and recompute their ancestors.

    Duplicate indices resolve to the last value (all leaves are written before
    any parent is recomputed).  ``tmin`` and ``tmax`` may each be an empty
    array, which disables that extrema tree.  Each tree is brought up to date
    in its own pass (:func:`tree_update_levels`): a sum pass without extrema
    branches is 10x faster than one loop that also serves the extrema trees.
    """
    for i in range(indices.shape[0]):
        tree[leaf0 + indices[i]] = values[i]
    tree_update_levels(tree, leaf0, indices, 0)
    for t, kind in ((tmin, 1), (tmax, 2)):
        if t.shape[0] > 0:
            for i in range(indices.shape[0]):
                t[leaf0 + indices[i]] = values[i]
            tree_update_levels(t, leaf0, indices, kind)


@njit(cache=True)
def tree_set(tree, tmin, tmax, leaf0, index, value):
    """Single-slot update (the testbed's batch-1 case), no array allocation."""
    leaf = leaf0 + index
    tree[leaf] = value
    tree_refresh_path(tree, leaf)
    if tmin.shape[0] > 0:
        tmin[leaf] = value
        tree_refresh_extreme(tmin, leaf, False)
    if tmax.shape[0] > 0:
        tmax[leaf] = value
        tree_refresh_extreme(tmax, leaf, True)


@njit(cache=True, inline="always")
def _child(tree, first, v):
    """Pick the child of a node for query value ``v``; return (child, new v).

    The children are scanned left to right without branches: ``c`` counts the
    running sums ``<= v`` and ``prev`` keeps the last such running sum, so a
    child whose running sum exceeds ``v`` has a strictly positive mass and
    zero-mass children (empty or padded slots) are never entered.  If rounding
    leaves ``v`` at or beyond the node's sum, the rightmost child with positive
    mass is taken, so no descent can end on a zero-mass leaf.
    """
    base = np.uint64(first)  # unsigned: no negative-index wraparound code (10-15% faster descents)
    acc = 0.0
    prev = 0.0
    c = 0
    for j in range(FANOUT):
        acc += tree[base + np.uint64(j)]
        below = acc <= v
        c += below
        prev = acc if below else prev
    if c == FANOUT:
        c = FANOUT - 1
        while c > 0 and tree[first + c] <= 0.0:
            c -= 1
        return first + c, tree[first + c]
    return first + c, v - prev


@njit(cache=True)
def _descend_from(tree, leaf0, levels, values, out, mass):
    """Descend ``levels`` levels from the nodes in ``out``, then turn them into slots.

    All queries advance one level at a time, so their loads are independent;
    the group each query reads next is prefetched as soon as it is known, a
    whole level ahead of its use.
    """
    k = values.shape[0]
    for q in range(k):
        prefetch(tree, out[q] * FANOUT + 1)
    for _ in range(levels):
        for q in range(k):
            node, v = _child(tree, out[q] * FANOUT + 1, values[q])
            out[q] = node
            values[q] = v
            prefetch(tree, node * FANOUT + 1)
    for q in range(k):
        mass[q] = tree[out[q]]
        out[q] -= leaf0


@njit(cache=True)
def tree_descend(tree, leaf0, depth, values, out, mass):
    """Find the leaf of every query value, one tree level at a time.

    ``values`` (overwritten) are points in ``[0, total)``, in any order; ``out``
    receives the slots and ``mass`` their leaf masses.
    """
    for q in range(values.shape[0]):
        out[q] = 0
    _descend_from(tree, leaf0, depth, values, out, mass)


@njit(cache=True)
def _merge_level(tree, first, width, values, out):
    """Place sorted query values on the level starting at node ``first``.

    One left-to-right pass over the level's running sum replaces the descent
    through every level above it: query ``q`` lands on the first node whose
    running sum exceeds ``values[q]`` (a node of positive mass) and keeps the
    remainder.  Values at or beyond the level's sum (rounding) go to its
    rightmost node of positive mass, as in :func:`_child`.
    """
    last = first + width - 1
    while last > first and tree[last] <= 0.0:
        last -= 1
    node = first
    below = 0.0
    acc = tree[first]
    for q in range(values.shape[0]):
        v = values[q]
        while acc <= v and node < last:
            node += 1
            below = acc
            acc += tree[node]
        if acc <= v:
            out[q] = last
            values[q] = tree[last]
        else:
            out[q] = node
            values[q] = v - below


@njit(cache=True)
def _descend_sorted(tree, leaf0, depth, values, out, mass):
    """:func:`tree_descend` for non-decreasing ``values`` (stratified queries).

    The deepest level with at most ``k`` nodes is reached with one merge of the
    sorted queries against that level's running sum (:func:`_merge_level`); the
    levels below are descended as usual.
    """
    k = values.shape[0]
    level, first, width = 0, 0, 1
    while level < depth and width * FANOUT <= k:
        level += 1
        first = first * FANOUT + 1
        width *= FANOUT
    if level == 0:
        tree_descend(tree, leaf0, depth, values, out, mass)
        return
    _merge_level(tree, first, width, values, out)
    _descend_from(tree, leaf0, depth - level, values, out, mass)


@njit(cache=True)
def tree_sample(tree, leaf0, depth, u, stratified, out, mass):
    """Turn uniforms ``u`` in [0, 1) (overwritten) into slots drawn by mass.

    Stratified (PER App. B.2.1): ``[0, total)`` is cut into ``k`` equal ranges
    and query ``q`` is ``(q + u[q]) * total / k``, so the queries arrive sorted
    and the top levels are done in one merge (:func:`_descend_sorted`).
    Plain: ``u[q] * total``.
    """
    k = u.shape[0]
    total = tree[0]
    if stratified:
        seg = total / k
        for q in range(k):
            u[q] = (q + u[q]) * seg
        _descend_sorted(tree, leaf0, depth, u, out, mass)
    else:
        for q in range(k):
            u[q] = u[q] * total
        tree_descend(tree, leaf0, depth, u, out, mass)


@njit(cache=True)
def tree_sample_is(tree, leaf0, depth, u, stratified, n, beta, norm_mass, out, probs, weights):
    """:func:`tree_sample` fused with PER's probabilities and IS weights.

    ``probs[q] = mass / total`` is ``P(i)`` of PER eq. 1 (leaves hold
    ``p^alpha``); ``weights[q] = (n P(i))^-beta`` (PER Section 3.4) divided by
    the largest weight: ``(n norm_mass / total)^-beta`` when ``norm_mass > 0``
    (pass the smallest stored mass, ``tmin[0]``, for PER's global
    normalisation), else the batch's largest weight.  ``n`` cancels in the
    ratio (kept in the signature for callers); the ratio is computed in log
    space, ``exp(-beta (log mass - log mass_ref))``, and a weight below the
    float range becomes the smallest positive double, so weights stay in (0, 1].
    A zero smallest mass thus falls back to the batch's normalisation: callers
    that promise global normalisation must reject it first.
    """
    tree_sample(tree, leaf0, depth, u, stratified, out, probs)
    total = tree[0]
    k = out.shape[0]
    # log space: the ratio of two masses can exceed the float range (masses span 1e-300..1e300)
    log_ref = np.log(norm_mass) if norm_mass > 0.0 else np.inf
    for q in range(k):
        m = probs[q]
        probs[q] = m / total
        lm = np.log(m)
        weights[q] = lm
        if norm_mass <= 0.0:
            log_ref = min(log_ref, lm)
    for q in range(k):
        w = np.exp(-beta * (weights[q] - log_ref))
        weights[q] = w if w > 0.0 else _TINY  # stays in (0, 1] below the float range


@njit(cache=True)
def tree_sample_one(tree, leaf0, depth, rng):
    """Draw one slot (the testbed's batch-1 case) without allocating."""
    v = rng.random() * tree[0]
    node = 0
    for _ in range(depth):
        node, v = _child(tree, node * FANOUT + 1, v)
    return node - leaf0


@njit(cache=True)
def tree_rebuild(tree, tmin, tmax, leaf0):
    """Recompute every internal node from the leaves (used after loading)."""
    for t, kind in ((tree, 0), (tmin, 1), (tmax, 2)):
        if t.shape[0] > 0:
            for parent in range(leaf0 - 1, -1, -1):
                _recompute(t, parent, kind)


SAFE_TOTAL = np.finfo(np.float64).max / 2
"""A bound on a new total mass below which a write cannot overflow the root (the rounding of the tree's sums is
far below this margin); a sampler whose write may reach it first tries the write on a copy."""


@njit(cache=True)
def _checked_update(tree, tmin, tmax, leaf0, capacity, indices, values):
    """:func:`check_priorities`, then :func:`tree_update` only if all pass (one call from Python).

    Returns -1 when written, the position of the first invalid pair, or -2 (nothing written) when
    the new total could reach the float range: the caller decides on a copy.
    """
    bad = check_priorities(indices, values, capacity)
    if bad >= 0:
        return bad
    grow = 0.0
    for i in range(values.shape[0]):
        grow += values[i]
    if not tree[0] + grow < SAFE_TOTAL:
        return -2
    tree_update(tree, tmin, tmax, leaf0, indices, values)
    return -1


# --------------------------------------------------------------------------- wrapper


class TreeArrays(NamedTuple):
    """The arrays and shape a :class:`SumTree` hands to jitted callers."""

    tree: np.ndarray
    tmin: np.ndarray
    tmax: np.ndarray
    leaf0: int
    depth: int


def _as_values(values, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype != np.float64 or not arr.flags.c_contiguous:  # the hot path takes float64 as it is
        arr = as_float_array(name, arr)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr


class SumTree:
    """Sum tree over ``capacity`` slots; leaves hold non-negative sampling masses.

    Parameters
    ----------
    capacity:
        Number of slots (any positive integer; leaves are padded internally).
    track_min, track_max:
        Also keep the minimum (maximum) mass over written slots in a tree of
        the same layout, read in O(1) at its root via :attr:`min` (:attr:`max`).
        Each costs one more array to update: batched updates at 2^20 slots are
        about 1.6x slower with one, 2.5x with both (docs/benchmarks.md).  PER's
        global IS-weight normalisation needs the minimum; the samplers track
        their maximum priority in the raw domain and need no max tree.
    """

    def __init__(self, capacity: int, track_min: bool = True, track_max: bool = False):
        self.capacity = check_positive_int("capacity", capacity)
        self.depth, self.leaf0, size = tree_shape(self.capacity)
        self.set_arrays(
            tree_alloc(size),
            tree_alloc(size, np.inf) if track_min else np.empty(0),
            tree_alloc(size) if track_max else np.empty(0),
        )

    # -- reads ---------------------------------------------------------------
    @property
    def arrays(self) -> TreeArrays:
        """The live arrays, for jitted code that calls the kernels directly.

        Callers that write through them must keep the invariant (use the
        ``tree_*`` kernels of this module).  Built once per set of arrays:
        samplers read it on every call.
        """
        return self._arrays

    def set_arrays(self, tree: np.ndarray, tmin: np.ndarray, tmax: np.ndarray) -> None:
        self._tree, self._min, self._max = tree, tmin, tmax
        self._arrays = TreeArrays(tree, tmin, tmax, self.leaf0, self.depth)

    @property
    def total(self) -> float:
        """Sum of all leaf masses."""
        return float(self._tree[0])

    @property
    def track_min(self) -> bool:
        return self._min.shape[0] > 0

    @property
    def track_max(self) -> bool:
        return self._max.shape[0] > 0

    @property
    def min(self) -> float:
        """Smallest mass among slots written so far (``inf`` if none)."""
        if not self.track_min:
            raise ValueError("this SumTree was built with track_min=False")
        return float(self._min[0])

    @property
    def max(self) -> float:
        """Largest mass among slots written so far (0 if none)."""
        if not self.track_max:
            raise ValueError("this SumTree was built with track_max=False")
        return float(self._max[0])

    def priorities(self, indices) -> np.ndarray:
        """Leaf masses at ``indices`` (a copy)."""
        idx = check_indices("indices", indices, self.capacity)
        return self._tree[self.leaf0 + idx]

    @property
    def leaves(self) -> np.ndarray:
        """Read-only view of all ``capacity`` leaf masses."""
        view = self._tree[self.leaf0 : self.leaf0 + self.capacity]
        view.flags.writeable = False
        return view

    # -- writes --------------------------------------------------------------
    def update(self, indices, priorities) -> None:
        """Set the masses of ``indices``; the last value wins for duplicates.

        Raises ``ValueError`` (tree unchanged) on an index out of range or a
        NaN, infinite or negative value, naming the first offending position,
        and on values whose total would overflow the float range (naming the largest).
        """
        idx = as_index_array("indices", indices)
        val = _as_values(priorities, idx.shape[0], "priorities")
        bad = _checked_update(self._tree, self._min, self._max, self.leaf0, self.capacity, idx, val)
        if bad == -2:  # near the float range: write a copy first, refuse if its total overflows
            trial = self._tree.copy()
            tree_update(trial, np.empty(0), np.empty(0), self.leaf0, idx, val)
            if not np.isfinite(trial[0]):
                i = int(np.argmax(val))
                raise ValueError(f"priorities[{i}] = {val[i]}: the total mass overflows the float range; refused")
            tree_update(self._tree, self._min, self._max, self.leaf0, idx, val)
        if bad >= 0:  # nothing was written
            j, v = idx[bad], val[bad]
            if not 0 <= j < self.capacity:
                raise ValueError(f"indices[{bad}] = {j} is out of range [0, {self.capacity})")
            raise ValueError(f"priorities[{bad}] = {v} is not a finite non-negative number")

    # -- sampling ------------------------------------------------------------
    def sample(self, batch_size: int, rng: np.random.Generator, stratified: bool = True) -> np.ndarray:
        """Draw ``batch_size`` slots with probability ``mass / total``."""
        return self.sample_with_mass(batch_size, rng, stratified)[0]

    def sample_with_mass(self, batch_size: int, rng: np.random.Generator, stratified: bool = True):
        """Like :meth:`sample` but also return each drawn slot's mass."""
        batch_size = check_positive_int("batch_size", batch_size)
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        check_total(self._tree[0])
        out = np.empty(batch_size, dtype=np.int64)
        mass = np.empty(batch_size)
        if type(stratified) is not bool:  # the usual case costs one type test on this timed path
            stratified = check_bool("stratified", stratified)  # "no" would read as True
        tree_sample(self._tree, self.leaf0, self.depth, rng.random(batch_size), stratified, out, mass)
        return out, mass

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> dict:
        """Leaves plus the written-slot mask; the trees are a function of them."""
        leaves = self._tree[self.leaf0 : self.leaf0 + self.capacity].copy()
        state = {"capacity": self.capacity, "leaves": leaves, "track_min": self.track_min, "track_max": self.track_max}
        if self.track_min:
            state["written"] = np.isfinite(self._min[self.leaf0 : self.leaf0 + self.capacity])
        return state

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`; checked in full before anything changes (a ``ValueError`` naming the
        field: missing or unknown entries, wrong types, shapes or values, a total that overflows)."""
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict, got {type(state).__name__}")
        expected = {"capacity", "leaves", "track_min", "track_max"} | ({"written"} if self.track_min else set())
        missing, unknown = expected - set(state), set(state) - expected
        if missing or unknown:
            what = [f"missing {sorted(missing)}"] * bool(missing) + [f"unknown {sorted(unknown)}"] * bool(unknown)
            raise ValueError(f"state entries: {', '.join(what)}")
        for key in ("track_min", "track_max"):
            if not isinstance(state[key], (bool, np.bool_)):
                raise ValueError(f"state['{key}'] must be a bool, got {state[key]!r}")
        cap = state["capacity"]
        if isinstance(cap, (bool, np.bool_)) or not isinstance(cap, (int, np.integer)):
            raise ValueError(f"state['capacity'] must be an integer, got {cap!r}")
        if int(cap) != self.capacity:
            raise ValueError(f"state['capacity'] is {cap}, this tree has {self.capacity}")
        if (bool(state["track_min"]), bool(state["track_max"])) != (self.track_min, self.track_max):
            raise ValueError(
                f"state['track_min'], state['track_max'] are {state['track_min']}, {state['track_max']}; "
                f"this tree tracks min={self.track_min}, max={self.track_max}"
            )
        raw = np.asarray(state["leaves"])
        if raw.dtype.kind not in "fiu":
            raise ValueError(f"state['leaves'] must be numbers, got dtype {raw.dtype}")
        leaves = raw.astype(np.float64)
        if leaves.shape != (self.capacity,) or not np.all(np.isfinite(leaves) & (leaves >= 0)):
            raise ValueError("state['leaves'] must hold `capacity` finite non-negative values")
        with np.errstate(over="ignore"):
            total = leaves.sum()
        if not np.isfinite(total):
            raise ValueError("state['leaves'] sum to more than the float range holds")
        if self.track_min:
            written = np.asarray(state["written"])
            if written.dtype != np.bool_ or written.shape != (self.capacity,):
                raise ValueError(f"state['written'] must be a bool array of shape ({self.capacity},), "
                                 f"got {written.dtype} {written.shape}")  # fmt: skip
            unwritten = np.flatnonzero((leaves > 0) & ~written)
            if unwritten.size:  # a positive leaf is one that was written: the min tree would miss it
                i = int(unwritten[0])
                raise ValueError(f"state['written'] is False at slot {i}, whose leaf is {float(leaves[i])!r}: a "
                                 "slot with a positive leaf was written")  # fmt: skip
        tree = tree_alloc(self._tree.shape[0])
        tree[self.leaf0 : self.leaf0 + self.capacity] = leaves
        tmin, tmax = np.empty(0), np.empty(0)
        if self.track_min:
            tmin = tree_alloc(self._min.shape[0], np.inf)
            tmin[self.leaf0 : self.leaf0 + self.capacity] = np.where(written, leaves, np.inf)
        if self.track_max:
            tmax = tree_alloc(self._max.shape[0])
            tmax[self.leaf0 : self.leaf0 + self.capacity] = leaves
        tree_rebuild(tree, tmin, tmax, self.leaf0)
        if not np.isfinite(tree[: self.leaf0]).all():  # the tree's own sums, in its order (NumPy's sum adds in another)
            raise ValueError("state['leaves'] sum to more than the float range holds")
        self.set_arrays(tree, tmin, tmax)

    def __repr__(self) -> str:
        return f"SumTree(capacity={self.capacity}, total={self.total:.6g})"
