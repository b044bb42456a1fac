"""One checked jitted call per sampler call on the replay buffer's hot path.

The general path of :class:`~prioritylab.samplers.bookkeeping.SlotBookkeeping` runs several
NumPy and jitted calls per public call, each reading the per-slot arrays again.  For the
samplers whose writes are the plain ones (uniform, and the tree samplers whose priorities
are stored as they are: ``per``, ``lap``, and ``pser`` on ``add``), the kernels below do a
whole call in one pass: every check first, then every write, with the lines of the slots
prefetched before they are read so that their cache misses overlap.

Each kernel returns a code of :mod:`~prioritylab.samplers.kernels`.  Anything but ``OK``
means that nothing was changed; the caller then takes the general path, which raises the
precise error (or, for :data:`MAY_OVERFLOW`, tries the write on a copy first).  The results
are the general path's, bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..priorities import mass_of, raw_priority
from ..sumtree import FANOUT, prefetch, tree_update_levels
from .kernels import BAD_LINK, EMPTY, NOT_FINITE, OK, OUT_OF_RANGE, OVERFLOW, past_safe_total

MAY_OVERFLOW = 6
"""The cheap bound says the total mass could reach the float range: take the general path."""
TOO_MANY_WRITES = 7
"""The write counter would pass ``MAX_WRITES``."""
BAD_PREV = 8
"""A link points at an empty slot."""

_AHEAD = 8  # items prefetched ahead of the one being checked


@njit(cache=True, inline="always")
def _prefetch_slot(j, generation, raw, td, sampleable, tree, tmin, leaf0):
    """Lines a write of slot ``j`` reads or writes: its bookkeeping, its leaves and their parents."""
    prefetch(generation, j)
    prefetch(sampleable, j)
    prefetch(td, j)
    if raw.shape[0] > 0:
        prefetch(raw, j)
    if tree.shape[0] > 0:
        leaf = leaf0 + j
        prefetch(tree, leaf)
        prefetch(tree, (leaf - 1) // FANOUT)
        if tmin.shape[0] > 0:
            prefetch(tmin, leaf)
            prefetch(tmin, (leaf - 1) // FANOUT)


@njit(cache=True)
def fused_add(indices, links, flag, writes, max_writes, generation, prev, prev_gen, sampleable, td, filled, size,
              scratch, raw, tree, tmin, leaf0, max_raw, alpha, span):  # fmt: skip
    """:meth:`add` with explicit links, one held flag for every slot and new items at ``max_raw``.

    Checks slots and links, the write counter, the links' targets and the overflow bound, then
    stamps, links and flags the slots in order and (``raw`` non-empty) gives each the raw
    priority ``max_raw``, its mass entering the trees only when ``flag``.  Returns ``(code,
    position, size, change in the sampleable count)``.
    """
    n = indices.shape[0]
    capacity = generation.shape[0]
    for i in range(n):
        j = indices[i]
        if j < 0 or j >= capacity:
            return OUT_OF_RANGE, i, size, 0
        p = links[i]
        if p < -1 or p >= capacity:
            return BAD_LINK, i, size, 0
        _prefetch_slot(j, generation, raw, td, sampleable, tree, tmin, leaf0)
    if n == 0:
        return OK, -1, size, 0
    if writes + n > max_writes:
        return TOO_MANY_WRITES, -1, size, 0
    # links' stamps at the moment each item is written (a target written earlier in the call: its new stamp)
    bad = -1
    for i in range(n):
        p = links[i]
        if p >= 0 and bad < 0:
            g = scratch[p] if scratch[p] >= 0 else generation[p]
            if g < 0:
                bad = i
        scratch[indices[i]] = writes + i
    for i in range(n):
        scratch[indices[i]] = -1
    if bad >= 0:
        return BAD_PREV, bad, size, 0
    mass = 0.0
    if tree.shape[0] > 0:
        mass = mass_of(max_raw, alpha)
        if past_safe_total(tree[0], n, span, mass):
            return MAY_OVERFLOW, -1, size, 0
    delta = 0
    for i in range(n):
        j = indices[i]
        p = links[i]
        g = generation[p] if p >= 0 else -1  # a target written earlier in the call already holds its new stamp
        if generation[j] < 0:
            filled[size] = j
            size += 1
        generation[j] = writes + i
        prev[j] = p
        prev_gen[j] = g
        delta += np.int64(flag) - np.int64(sampleable[j])
        sampleable[j] = flag
        td[j] = np.nan
        if raw.shape[0] > 0:
            raw[j] = max_raw
    if tree.shape[0] > 0:
        for i in range(n):
            tree[leaf0 + indices[i]] = mass if flag else 0.0
        tree_update_levels(tree, leaf0, indices, 0)
        if tmin.shape[0] > 0:
            for i in range(n):
                tmin[leaf0 + indices[i]] = mass if flag and mass > 0.0 else np.inf
            tree_update_levels(tmin, leaf0, indices, 1)
    return OK, -1, size, delta


@njit(cache=True)
def fused_flags(indices, flags, generation, sampleable, raw, tree, tmin, leaf0, alpha, top_mass, span):
    """:meth:`set_sampleable`: check every slot, set the flags, rewrite the masses of the slots.

    ``flags`` holds one flag per slot, or one flag for all of them.

    ``top_mass`` is the mass of the largest raw priority, for the overflow bound.  Returns
    ``(code, position, change in the sampleable count)``.
    """
    n = indices.shape[0]
    capacity = generation.shape[0]
    one = flags.shape[0] != n  # one flag for every slot
    raised = 0
    for i in range(n):
        j = indices[i]
        if j < 0 or j >= capacity:
            return OUT_OF_RANGE, i, 0
        if generation[j] < 0:
            return EMPTY, i, 0
        raised += np.int64(flags[0 if one else i])
    if tree.shape[0] > 0 and n > 0 and raised > 0 and past_safe_total(tree[0], raised, span, top_mass):
        return MAY_OVERFLOW, -1, 0
    delta = 0
    for i in range(n):
        j = indices[i]
        f = flags[0 if one else i]
        delta += np.int64(f) - np.int64(sampleable[j])
        sampleable[j] = f
    if tree.shape[0] > 0 and n > 0:
        for i in range(n):
            j = indices[i]
            m = mass_of(raw[j], alpha)
            tree[leaf0 + j] = m if sampleable[j] else 0.0
        tree_update_levels(tree, leaf0, indices, 0)
        if tmin.shape[0] > 0:
            for i in range(n):
                j = indices[i]
                m = mass_of(raw[j], alpha)
                tmin[leaf0 + j] = m if sampleable[j] and m > 0.0 else np.inf
            tree_update_levels(tmin, leaf0, indices, 1)
    return OK, -1, delta


@njit(cache=True)
def fused_update(indices, values, generations, generation, rule, param, alpha, raw, td, sampleable, tree, tmin, leaf0,
                 span, keep_td):  # fmt: skip
    """:meth:`update` (or, with the identity rule and ``keep_td`` false, :meth:`set_priorities`) of a
    sampler that stores its priorities as they are.

    Checks every item (index in range, finite value, slot written, finite raw priority and
    mass; stale items skipped) and the overflow bound, then writes the fresh items' raw
    priorities, signed TD errors (``keep_td``) and masses.  Returns ``(code, position, the
    largest raw priority written)``.
    """
    n = indices.shape[0]
    capacity = generation.shape[0]
    use_gen = generations.shape[0] > 0
    for i in range(min(n, _AHEAD)):
        j = indices[i]
        if j >= 0 and j < capacity:
            _prefetch_slot(j, generation, raw, td, sampleable, tree, tmin, leaf0)
    fresh = np.empty(n, dtype=np.bool_)
    top = 0.0
    top_mass = 0.0
    m = 0
    for i in range(n):
        if i + _AHEAD < n:
            a = indices[i + _AHEAD]
            if a >= 0 and a < capacity:
                _prefetch_slot(a, generation, raw, td, sampleable, tree, tmin, leaf0)
        j = indices[i]
        if j < 0 or j >= capacity:
            return OUT_OF_RANGE, i, 0.0
        d = values[i]
        if not np.isfinite(d):
            return NOT_FINITE, i, 0.0
        if generation[j] < 0:
            return EMPTY, i, 0.0
        fresh[i] = not use_gen or generation[j] == generations[i]
        if fresh[i]:
            r = raw_priority(rule, d, param)
            x = mass_of(r, alpha)
            if not (r < np.inf and x < np.inf):
                return OVERFLOW, i, 0.0
            top = max(top, r)
            top_mass = max(top_mass, x)
            m += 1
    if m == 0:
        return OK, -1, 0.0
    if tree.shape[0] > 0 and past_safe_total(tree[0], m, span, top_mass):
        return MAY_OVERFLOW, -1, 0.0
    keep = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(n):
        if fresh[i]:
            j = indices[i]
            keep[m] = j
            m += 1
            r = raw_priority(rule, values[i], param)
            if raw.shape[0] > 0:
                raw[j] = r
            if keep_td:
                td[j] = values[i]
            if tree.shape[0] > 0:
                x = mass_of(r, alpha)
                tree[leaf0 + j] = x if sampleable[j] else 0.0
                if tmin.shape[0] > 0:
                    tmin[leaf0 + j] = x if sampleable[j] and x > 0.0 else np.inf
    if tree.shape[0] > 0:
        tree_update_levels(tree, leaf0, keep, 0)
        if tmin.shape[0] > 0:
            tree_update_levels(tmin, leaf0, keep, 1)
    return OK, -1, top


@njit(cache=True)
def gather_stamps(generation, indices):
    """``generation[indices]`` with the lines prefetched first (the indices are in range)."""
    n = indices.shape[0]
    for i in range(n):
        prefetch(generation, indices[i])
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = generation[indices[i]]
    return out


@njit(cache=True)
def draw_slots(filled, positions, generation, sampleable):
    """``filled[positions]``, their stamps and how many of them are held (not sampleable), each line
    prefetched before it is read."""
    n = positions.shape[0]
    for i in range(n):
        prefetch(filled, positions[i])
    idx = np.empty(n, dtype=np.int64)
    for i in range(n):
        idx[i] = filled[positions[i]]
        prefetch(generation, idx[i])
    out = np.empty(n, dtype=np.int64)
    held = 0
    for i in range(n):
        out[i] = generation[idx[i]]
        held += not sampleable[idx[i]]
    return idx, out, held
