"""Priority rules: one plain jitted definition each, shared by the samplers and the testbed.

A rule turns a TD error into a *raw* priority; the sampling mass is
``raw ** alpha`` (:func:`mass_of`, the one place alpha is applied).  The
sampler classes (:mod:`prioritylab.samplers`) and the Blind Cliffwalk's jitted
learners (:mod:`prioritylab.cliffwalk.learners`) call these functions, so "the
same samplers in the testbed and the agents" holds below the kernel level too.

* PER proportional, eq. 1 (Schaul et al., 2016): ``|delta| + eps``.
* LAP, eq. 9 (Fujimoto et al., 2020; eq. 30 for general kappa): ``max(|delta|, kappa)``;
  its alpha power is ``max(|delta|^alpha, kappa^alpha)``.
* Greedy TD and rank-based PER (PER Sections 3.2-3.3): ``|delta|``.
* PSER eq. 10 (Brittain et al., 2019): ``max(|delta| + eps, eta * p_old)``, and its
  backward decay, eq. 8-9 (MAX eq. 6 / ADD eq. 7), in :func:`pser_decay`.

The decay walks *predecessor links*: ``prev[s]`` is the slot holding the step
before ``s`` in the same episode of the same environment (``-1`` at an episode
start), and ``prev_gen[s]`` that slot's write stamp at the time ``s`` was
written.  A link whose target was overwritten since (its stamp changed) ends
the walk.  The writer sets the links; the rule knows nothing of episodes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .sumtree import tree_refresh_extreme, tree_refresh_path

# rule codes of :func:`raw_priority`
PER, LAP, ABS = 0, 1, 2
RULES = {"per": PER, "lap": LAP, "abs": ABS}


@njit(cache=True)
def mass_of(raw, alpha):
    """The sampling mass ``raw ** alpha`` (PER eq. 1's numerator): the one place alpha is applied.

    Every kernel calls this, so a mass is bit-identical whichever path computed
    it (NumPy's ``power`` and the compiled ``**`` can differ in the last bit).
    """
    return raw**alpha


@njit(cache=True)
def masses_of(raw, alpha):
    """:func:`mass_of` over an array."""
    out = np.empty(raw.shape[0])
    for i in range(raw.shape[0]):
        out[i] = mass_of(raw[i], alpha)
    return out


@njit(cache=True)
def per_priority(delta, eps):
    """PER eq. 1: ``p = |delta| + eps``."""
    return abs(delta) + eps


@njit(cache=True)
def lap_priority(delta, kappa):
    """LAP eq. 9 (eq. 30 for general kappa): ``p = max(|delta|, kappa)``; mass ``p^alpha``."""
    return max(abs(delta), kappa)


@njit(cache=True)
def abs_priority(delta):
    """Greedy TD and rank-based PER (PER Sections 3.2-3.3): ``p = |delta|``."""
    return abs(delta)


@njit(cache=True)
def raw_priority(rule, delta, param):
    """Dispatch on a rule code: ``PER`` (``param`` = eps), ``LAP`` (``param`` = kappa), ``ABS``."""
    if rule == PER:
        return per_priority(delta, param)
    if rule == LAP:
        return lap_priority(delta, param)
    return abs_priority(delta)


@njit(cache=True)
def pser_anti_collapse(base, eta, p_old):
    """PSER eq. 10: ``p = max(|delta| + eps, eta * p_old)`` (``base`` is ``|delta| + eps``)."""
    return max(base, eta * p_old)


@njit(cache=True)
def set_mass(tree, tmin, leaf0, slot, mass, sampleable):
    """Write one slot's mass (0 in the sum tree and +inf in the min tree while not sampleable;
    the min tree holds the smallest positive mass)."""
    leaf = leaf0 + slot
    tree[leaf] = mass if sampleable else 0.0
    tree_refresh_path(tree, leaf)
    if tmin.shape[0] > 0:
        tmin[leaf] = mass if sampleable and mass > 0.0 else np.inf
        tree_refresh_extreme(tmin, leaf, False)


@njit(cache=True)
def pser_decay(raw, tree, tmin, leaf0, alpha, prev, prev_gen, generation, sampleable, t, rho, window, add_mode, p_max):
    """PSER eq. 6/7 over at most ``window`` predecessors of ``t`` (eq. 8-9), along ``prev`` links.

    MAX (eq. 6): ``p_(t-k) <- max(p_t rho^k, p_(t-k))``; ADD (eq. 7):
    ``p_(t-k) <- min(p_(t-k) + p_t rho^k, p_max)``.  The walk ends at an
    episode start (``prev < 0``) and at a link whose target was overwritten
    (stamp differs from ``prev_gen``).  Changed masses go to the tree (0 while
    a slot is not sampleable; its raw priority still changes).
    """
    decayed = raw[t]
    cur = t
    for _ in range(window):
        s = prev[cur]
        if s < 0 or generation[s] != prev_gen[cur]:
            return
        decayed *= rho
        old = raw[s]
        new = min(old + decayed, p_max) if add_mode else max(decayed, old)
        if new != old:
            raw[s] = new
            set_mass(tree, tmin, leaf0, s, mass_of(new, alpha), sampleable[s])
        cur = s


@njit(cache=True)
def pser_set(raw, tree, tmin, leaf0, alpha, prev, prev_gen, generation, sampleable, t, p, rho, window, add_mode,
             p_max):  # fmt: skip
    """Set slot ``t``'s raw priority to ``p`` (eq. 10 already applied) and decay it backwards (eq. 6/7)."""
    raw[t] = p
    set_mass(tree, tmin, leaf0, t, mass_of(p, alpha), sampleable[t])
    pser_decay(raw, tree, tmin, leaf0, alpha, prev, prev_gen, generation, sampleable, t, rho, window, add_mode, p_max)


def sequential_links(episode_start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(generation, prev, prev_gen)`` of a memory written once, slot by slot, in order.

    Slot ``i`` links to ``i - 1`` unless it starts an episode (the Blind
    Cliffwalk's memories and PSER Theorem 1's model).
    """
    starts = np.asarray(episode_start, dtype=bool).reshape(-1)
    n = starts.shape[0]
    generation = np.arange(n, dtype=np.int64)
    prev = np.where(starts, -1, generation - 1).astype(np.int64)
    return generation, prev, prev.copy()


__all__ = [
    "ABS",
    "pser_set",
    "LAP",
    "PER",
    "RULES",
    "abs_priority",
    "lap_priority",
    "mass_of",
    "masses_of",
    "per_priority",
    "pser_anti_collapse",
    "pser_decay",
    "raw_priority",
    "sequential_links",
    "set_mass",
]
