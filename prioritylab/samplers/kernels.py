"""Jitted bookkeeping of the samplers: the one checked update pass and the fused writes.

:func:`prepare_update` checks an update and turns TD errors into raw priorities and masses
(the rule of :mod:`prioritylab.priorities`, alpha applied by ``mass_of``); the other kernels
stamp, link and flag slots (:func:`check_slots`, :func:`link_stamps`, :func:`commit_add`,
:func:`commit_flags`) and write masses into a sampler's sum tree (:func:`write_masses`,
:func:`store_priorities`, :func:`refresh_masses`), with the cheap overflow bound
:func:`total_may_overflow`.  The checks return one of the codes below and a position.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..priorities import mass_of, raw_priority
from ..sumtree import SAFE_TOTAL, TreeArrays, tree_update_levels

NO_STAMPS = np.empty(0, dtype=np.int64)
NO_TD = np.empty(0)
NO_TREE = TreeArrays(np.empty(0), np.empty(0), np.empty(0), 0, 0)  # samplers without a sum tree
MAX_WRITES = 2**62  # write stamps stay far from int64 overflow

# error codes of the jitted checks
OK, OUT_OF_RANGE, NOT_FINITE, EMPTY, OVERFLOW, BAD_LINK = 0, 1, 2, 3, 4, 5


class PriorityOverflow(ValueError):
    """A priority refused because its mass ``raw ** alpha``, or the total mass, would pass the float range.

    The sampler is left unchanged.  Unlike the other refusals it follows from the values a run produces (a TD
    error too large for alpha), not from a bad call, so a training loop can end the run with a one-line error.
    """


@njit(cache=True)
def prepare_update(indices, td, generations, generation, rule, param, alpha):
    """Check an update and compute raw priorities and masses of its fresh items.

    Returns ``(code, position, keep, raw, mass, td_kept)``: every item is checked (index
    in range, finite TD error, slot written, finite mass); items whose stamp
    differs from ``generations`` (when given) are stale and dropped.
    """
    n = indices.shape[0]
    capacity = generation.shape[0]
    use_gen = generations.shape[0] > 0
    keep = np.empty(n, dtype=np.int64)
    raw = np.empty(n)
    mass = np.empty(n)
    kept = np.empty(n)
    m = 0
    for i in range(n):
        j = indices[i]
        if j < 0 or j >= capacity:
            return OUT_OF_RANGE, i, keep[:0], raw[:0], mass[:0], kept[:0]
        d = td[i]
        if not np.isfinite(d):
            return NOT_FINITE, i, keep[:0], raw[:0], mass[:0], kept[:0]
        if generation[j] < 0:
            return EMPTY, i, keep[:0], raw[:0], mass[:0], kept[:0]
        if use_gen and generation[j] != generations[i]:
            continue
        r = raw_priority(rule, d, param)
        x = mass_of(r, alpha)
        if not (r < np.inf and x < np.inf):
            return OVERFLOW, i, keep[:0], raw[:0], mass[:0], kept[:0]
        keep[m] = j
        raw[m] = r
        mass[m] = x
        kept[m] = d
        m += 1
    return OK, -1, keep[:m], raw[:m], mass[:m], kept[:m]


@njit(cache=True)
def write_masses(tree, tmin, leaf0, indices, mass, sampleable):
    """Write masses at ``indices`` (0 in the sum tree, +inf in the min tree for slots not
    sampleable) and bring both trees up to date level by level.  The min tree holds the
    smallest *positive* mass: a zero mass (never drawn) has no IS weight to normalise."""
    for i in range(indices.shape[0]):
        j = indices[i]
        tree[leaf0 + j] = mass[i] if sampleable[j] else 0.0
    tree_update_levels(tree, leaf0, indices, 0)
    if tmin.shape[0] > 0:
        for i in range(indices.shape[0]):
            j = indices[i]
            tmin[leaf0 + j] = mass[i] if sampleable[j] and mass[i] > 0.0 else np.inf
        tree_update_levels(tmin, leaf0, indices, 1)


@njit(cache=True)
def store_priorities(tree, tmin, leaf0, sampleable, raw_store, td_store, indices, raw, mass, td):
    """Write checked raw priorities, their masses (:func:`write_masses`) and, when given, the signed
    TD errors; returns the largest raw priority written."""
    top = 0.0
    for i in range(indices.shape[0]):
        raw_store[indices[i]] = raw[i]
        top = max(top, raw[i])
    for i in range(td.shape[0]):
        td_store[indices[i]] = td[i]
    if tree.shape[0] > 0:
        write_masses(tree, tmin, leaf0, indices, mass, sampleable)
    return top


@njit(cache=True, inline="always")
def past_safe_total(total, n, span, top):
    """The bound every write is checked against, one home: ``n`` items of mass at most ``top``, each raising at
    most ``span`` other slots to at most ``top``, could bring the total mass ``total`` to :data:`SAFE_TOTAL`."""
    return not total + n * (1 + span) * top < SAFE_TOTAL


@njit(cache=True)
def total_may_overflow(tree, n, mass, top_mass, span):
    """Whether ``n`` items of masses ``mass`` (or at most ``top_mass``), each raising at most ``span``
    other slots to at most the largest of them, could bring the total mass of ``tree`` to
    :data:`SAFE_TOTAL` (a bound: exact checks are made on a copy past it)."""
    top = top_mass
    for i in range(mass.shape[0]):
        top = max(top, mass[i])
    return past_safe_total(tree[0], n, span, top)


@njit(cache=True)
def link_stamps(indices, prev, generation, writes, scratch, prev_gen):
    """Stamp of each item's predecessor at the moment the item is written.

    A predecessor written earlier in the same call gets that new stamp.
    Returns the position of the first link to an empty slot, else -1.
    ``scratch`` (capacity, all -1) is restored before returning.
    """
    bad = -1
    n = indices.shape[0]
    for i in range(n):
        p = prev[i]
        if p < 0:
            prev_gen[i] = -1
        else:
            g = scratch[p] if scratch[p] >= 0 else generation[p]
            if g < 0 and bad < 0:
                bad = i
            prev_gen[i] = g
        scratch[indices[i]] = writes + i
    for i in range(n):
        scratch[indices[i]] = -1
    return bad


@njit(cache=True)
def check_slots(indices, links, capacity):
    """First slot out of ``[0, capacity)`` (code 1) or link out of ``[-1, capacity)`` (code 5), else (0, -1)."""
    for i in range(indices.shape[0]):
        if indices[i] < 0 or indices[i] >= capacity:
            return OUT_OF_RANGE, i
    for i in range(links.shape[0]):
        if links[i] < -1 or links[i] >= capacity:
            return BAD_LINK, i
    return OK, -1


@njit(cache=True)
def commit_add(indices, links, link_gen, flags, writes, generation, prev, prev_gen, sampleable, td, filled, size):
    """Stamp, link and flag checked slots in order; returns ``(size, change in sampleable count)``."""
    delta = 0
    for i in range(indices.shape[0]):
        j = indices[i]
        if generation[j] < 0:
            filled[size] = j
            size += 1
        generation[j] = writes + i
        prev[j] = links[i]
        prev_gen[j] = link_gen[i]
        delta += np.int64(flags[i]) - np.int64(sampleable[j])
        sampleable[j] = flags[i]
        td[j] = np.nan
    return size, delta


@njit(cache=True)
def commit_flags(indices, flags, generation, sampleable):
    """Set sampleable flags of written slots; returns ``(code, position, change in count)``."""
    for i in range(indices.shape[0]):
        j = indices[i]
        if j < 0 or j >= generation.shape[0]:
            return OUT_OF_RANGE, i, 0
        if generation[j] < 0:
            return EMPTY, i, 0
    delta = 0
    for i in range(indices.shape[0]):
        j = indices[i]
        delta += np.int64(flags[i]) - np.int64(sampleable[j])
        sampleable[j] = flags[i]
    return OK, -1, delta


@njit(cache=True)
def refresh_masses(tree, tmin, leaf0, indices, raw, alpha, sampleable):
    """Rewrite the masses of ``indices`` from their raw priorities (after their flags changed)."""
    mass = np.empty(indices.shape[0])
    for i in range(indices.shape[0]):
        mass[i] = mass_of(raw[indices[i]], alpha)
    write_masses(tree, tmin, leaf0, indices, mass, sampleable)
