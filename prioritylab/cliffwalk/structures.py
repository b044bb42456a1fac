"""Jitted order structures of the testbed's greedy and rank-based replay.

* An *argmax tournament tree* for greedy TD replay (PER Section 3.2): a
  complete binary tree over slots whose every node holds the slot with the
  largest key below it, ties going to the lower slot, so that the root is
  ``np.argmax(key)`` (first occurrence).  Changing one key costs O(log N).
* A *treap* (a binary search tree that is a heap on fixed random keys) with
  subtree sizes, ordered by ``(-key, slot)``: it returns the slot of a given
  rank (PER Section 3.3, rank-based: rank 1 is the largest ``|delta|``) in
  O(log N) expected time and re-ranks one changed key by a delete and an
  insert.  This makes rank-based sampling *exact* at every step, unlike PER's
  approximately sorted heap (App. B.2.1).  Ties in the key are ranked by slot.

Node ``s`` of the treap is slot ``s``; ``NIL = -1``.  The heap keys are a
fixed permutation drawn once from their own seed (see :func:`treap_nodes`),
so building a treap never touches a run's random stream.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NIL = -1


# --------------------------------------------------------------------------- argmax tree


def argmax_tree_size(capacity: int) -> int:
    """Number of leaves (a power of two ``>= capacity``) of the argmax tree."""
    leaves = 1
    while leaves < capacity:
        leaves *= 2
    return leaves


@njit(cache=True, inline="always")
def _better(key, x, y):
    """The slot with the larger key; ties (and ``y`` empty) keep ``x``, the left one."""
    if y < 0:
        return x
    if x < 0:
        return y
    return y if key[y] > key[x] else x


@njit(cache=True)
def argmax_build(best, key, leaves):
    """Fill ``best`` (length ``2 * leaves``) over ``key``; the root is ``best[1]``."""
    n = key.shape[0]
    for i in range(leaves):
        best[leaves + i] = i if i < n else -1
    for node in range(leaves - 1, 0, -1):
        best[node] = _better(key, best[2 * node], best[2 * node + 1])
    best[0] = -1


@njit(cache=True)
def argmax_fix(best, key, leaves, slot):
    """Restore the tree after ``key[slot]`` changed."""
    node = (leaves + slot) // 2
    while node >= 1:
        best[node] = _better(key, best[2 * node], best[2 * node + 1])
        node //= 2


# --------------------------------------------------------------------------- treap

NODE = np.dtype(
    [("left", np.int64), ("right", np.int64), ("parent", np.int64), ("size", np.int64),
     ("heap", np.int64), ("key", np.float64), ("pad0", np.int64), ("pad1", np.int64)]
)  # fmt: skip
"""A treap node: 64 bytes, one cache line, so the descent reads one line per level."""


def treap_nodes(capacity: int) -> np.ndarray:
    """Node records for ``capacity`` slots, with fixed random heap keys (own seed, never a run's stream)."""
    nodes = np.zeros(capacity, dtype=NODE)
    for field in ("left", "right", "parent"):
        nodes[field] = NIL
    nodes["heap"] = np.random.default_rng(0x7EA9).permutation(capacity)
    return nodes


@njit(cache=True, inline="always")
def _before(nodes, x, y):
    """True if slot ``x`` ranks before slot ``y``: larger key first, then lower slot."""
    kx = nodes[x].key
    ky = nodes[y].key
    return kx > ky or (kx == ky and x < y)


@njit(cache=True, inline="always")
def _size(nodes, node):
    return 0 if node < 0 else nodes[node].size


@njit(cache=True, inline="always")
def _resize(nodes, node):
    nodes[node].size = 1 + _size(nodes, nodes[node].left) + _size(nodes, nodes[node].right)


@njit(cache=True)
def _rotate_up(nodes, root, x):
    """Rotate ``x`` above its parent, keeping the in-order sequence and sizes."""
    p = nodes[x].parent
    g = nodes[p].parent
    if nodes[p].left == x:
        inner = nodes[x].right
        nodes[p].left = inner
        nodes[x].right = p
    else:
        inner = nodes[x].left
        nodes[p].right = inner
        nodes[x].left = p
    if inner >= 0:
        nodes[inner].parent = p
    nodes[p].parent = x
    nodes[x].parent = g
    if g < 0:
        root[0] = x
    elif nodes[g].left == p:
        nodes[g].left = x
    else:
        nodes[g].right = x
    _resize(nodes, p)
    _resize(nodes, x)


@njit(cache=True)
def treap_insert(nodes, root, x, key):
    """Insert the detached slot ``x`` with float ``key``."""
    nodes[x].left = NIL
    nodes[x].right = NIL
    nodes[x].size = 1
    nodes[x].key = key
    if root[0] < 0:
        nodes[x].parent = NIL
        root[0] = x
        return
    node = root[0]
    while True:
        nodes[node].size += 1
        if _before(nodes, x, node):
            if nodes[node].left < 0:
                nodes[node].left = x
                break
            node = nodes[node].left
        else:
            if nodes[node].right < 0:
                nodes[node].right = x
                break
            node = nodes[node].right
    nodes[x].parent = node
    while nodes[x].parent >= 0 and nodes[x].heap > nodes[nodes[x].parent].heap:
        _rotate_up(nodes, root, x)


@njit(cache=True)
def treap_delete(nodes, root, x):
    """Detach slot ``x``: rotate it down to a leaf, unlink it, shrink its ancestors."""
    while nodes[x].left >= 0 or nodes[x].right >= 0:
        c = nodes[x].left
        r = nodes[x].right
        if c < 0 or (r >= 0 and nodes[r].heap > nodes[c].heap):
            c = r
        _rotate_up(nodes, root, c)
    p = nodes[x].parent
    if p < 0:
        root[0] = NIL
    else:
        if nodes[p].left == x:
            nodes[p].left = NIL
        else:
            nodes[p].right = NIL
        while p >= 0:
            nodes[p].size -= 1
            p = nodes[p].parent
    nodes[x].parent = NIL
    nodes[x].size = 0


@njit(cache=True)
def treap_select(nodes, root, r):
    """The slot of 0-based rank ``r`` (``0 <= r < size of the treap``)."""
    node = root[0]
    while True:
        ls = _size(nodes, nodes[node].left)
        if r < ls:
            node = nodes[node].left
        elif r == ls:
            return node
        else:
            r -= ls + 1
            node = nodes[node].right


@njit(cache=True)
def treap_build(nodes, root, key):
    """Build the treap of slots ``0 .. len(key)-1`` in O(N log N) sort + O(N) (Cartesian tree by stack)."""
    n = key.shape[0]
    order = np.argsort(-key, kind="mergesort")  # stable: equal keys stay in slot order
    stack = np.empty(n, dtype=np.int64)
    top = 0
    for x in order:
        nodes[x].left = NIL
        nodes[x].right = NIL
        nodes[x].parent = NIL
        nodes[x].key = key[x]
        last = NIL
        while top > 0 and nodes[stack[top - 1]].heap < nodes[x].heap:
            top -= 1
            last = stack[top]
        if last >= 0:
            nodes[x].left = last
            nodes[last].parent = x
        if top > 0:
            nodes[stack[top - 1]].right = x
            nodes[x].parent = stack[top - 1]
        stack[top] = x
        top += 1
    root[0] = stack[0] if n > 0 else NIL
    _sizes(nodes, root)


@njit(cache=True)
def _sizes(nodes, root):
    """Recompute every subtree size by an iterative post-order walk."""
    n_nodes = nodes.shape[0]
    stack = np.empty(n_nodes + 1, dtype=np.int64)
    top = 0
    node = root[0]
    last = NIL
    while node >= 0 or top > 0:
        if node >= 0:
            stack[top] = node
            top += 1
            node = nodes[node].left
        else:
            peek = stack[top - 1]
            r = nodes[peek].right
            if r >= 0 and last != r:
                node = r
            else:
                _resize(nodes, peek)
                last = peek
                top -= 1


@njit(cache=True)
def treap_rekey(nodes, root, x, key):
    """Move slot ``x`` to the rank of its new float ``key``."""
    treap_delete(nodes, root, x)
    treap_insert(nodes, root, x, key)


@njit(cache=True)
def treap_inorder(nodes, root, out):
    """Write the slots in rank order into ``out`` (for tests); return the count."""
    stack = np.empty(out.shape[0] + 1, dtype=np.int64)
    top = 0
    k = 0
    node = root[0]
    while node >= 0 or top > 0:
        while node >= 0:
            stack[top] = node
            top += 1
            node = nodes[node].left
        top -= 1
        node = stack[top]
        out[k] = node
        k += 1
        node = nodes[node].right
    return k


@njit(cache=True)
def sample_rank(cdf, n, rng):
    """Draw a 0-based rank with ``P(r) = (r+1)^-alpha / H`` from its cumulative masses ``cdf``.

    One ``rng.random()`` per draw; the rank is the first ``r`` with
    ``cdf[r] > u * cdf[n-1]`` (binary search), clamped to ``n - 1``.
    """
    u = rng.random() * cdf[n - 1]
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) // 2
        if cdf[mid] <= u:
            lo = mid + 1
        else:
            hi = mid
    return min(lo, n - 1)


def rank_cdf(n: int, alpha: float) -> np.ndarray:
    """Cumulative power-law masses ``sum_{j<=r} j^-alpha`` for ranks ``1..n`` (PER Section 3.3)."""
    return np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -float(alpha))
