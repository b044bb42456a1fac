"""Jitted Q-learners and replay schemes of the Blind Cliffwalk testbed.

Learners (PER App. B.1, eq. 2-3).  The TD error of transition ``i`` is
``delta = r_t + gamma * (1 - done_t) * max_b Q(s_t, b) - Q(s_tm1, a_tm1)`` and
the update ``theta <- theta + lr * w * delta * grad_theta Q(s_tm1, a_tm1)``
(``w``: importance-sampling weight, 1 unless ``beta > 0``).

* tabular: ``theta`` has shape ``(2, n)`` and ``Q(s, a) = theta[a, s]``;
* linear: a 1-hot state encoding concatenated with a constant bias feature 1,
  one weight vector per action: ``theta`` has shape ``(2, n + 1)`` and
  ``Q(s, a) = theta[a, s] + theta[a, n]``.  An update moves ``Q(s, a)`` by
  ``2 lr delta`` and every other ``Q(s', a)`` by ``lr delta``.

``q`` (shape ``(n, 2)``) is kept equal to the values the parameters represent.
The environment is deterministic, so a transition is determined by its
*class* ``c = 2 s + a``; the kernel reads each slot's class (one byte) and the
class's ``(s_tm1, a_tm1, s_t, done_t, r_t)`` from a ``2n``-row table
(:func:`transition_table`), which keeps the hot loop in cache.

Replay schemes (integer codes below), all with one transition per update:

* ``UNIFORM``: slot ``floor(u N)`` from one ``u = rng.random()`` (the sum tree's draw with equal masses;
  its deviation from exact uniformity is below ``N 2^-53``).
* ``ORACLE``: the transition whose update most reduces the global squared error
  ``sum_{s,a} (Q - Q*)^2`` (PER Section 3.1, "in hindsight, after the parameter
  update").  Every copy of one class has the same effect, so the scan is over
  the ``2n`` classes and the first copy in memory is the one replayed.  Each
  candidate's effect is exact and O(1): tabular ``(e + d)^2 - e^2``; linear
  ``2 d (E_a + e) + (n + 3) d^2`` with ``d = lr delta``, ``e = Q(s, a) -
  Q*(s, a)`` and ``E_a`` the sum of the errors of action ``a`` (O(n) per
  step).  Ties go to the lower class.  If no candidate lowers the error by
  more than ``STALL_TOL * sse`` (the greedy choice is stuck; this happens with
  linear FA, where each update also moves every other state's value), the
  candidate with the largest ``|delta|`` is replayed instead.
* ``GREEDY``: the largest stored ``|delta|`` (PER Section 3.2), an argmax tree.
* ``PER``: proportional, raw priority ``|delta| + eps``, ``P(i) = p_i^alpha /
  sum_k p_k^alpha`` (PER eq. 1), the core sum tree kernels.
* ``RANK``: rank-based, ``P(i) ~ rank(i)^-alpha`` with ranks by stored
  ``|delta|`` (descending, ties by slot), exact at every step via a treap.
* ``PSER``: PER plus the backward decay of PSER eq. 6/7 over a window ``W``
  (eq. 8-9) and the anti-collapse rule eq. 10, ``p <- max(|delta| + eps, eta
  p_old)``, through :func:`prioritylab.priorities.pser_set`.  ``p_old`` is
  the slot's raw priority current when it is set, so it includes every decay
  written by earlier updates (the library sampler's reading inside a batch).
* ``LAP``: raw priority ``max(|delta|, kappa)`` (LAP eq. 9/30), mass ``raw^alpha``;
  the running maximum starts at ``max(1, kappa)``.

A replayed transition's new priority comes from the TD error computed for its
update (the algorithms as published) or, with ``post_priority``, from the TD
error recomputed after the update (the idealised model of PSER's Theorem 1).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..priorities import LAP as LAP_RULE
from ..priorities import PER as PER_RULE
from ..priorities import mass_of, pser_anti_collapse, pser_set, raw_priority
from ..sumtree import tree_rebuild, tree_refresh_extreme, tree_sample_one, tree_set
from .structures import argmax_build, argmax_fix, sample_rank, treap_build, treap_rekey, treap_select

UNIFORM, ORACLE, GREEDY, PER, RANK, PSER, LAP = 0, 1, 2, 3, 4, 5, 6
"""Scheme codes; every code from ``GREEDY`` on keeps priorities."""

INIT_MAX, INIT_SMALL, INIT_TD = 0, 1, 2
"""Initial priority of the pre-filled memory: the maximal priority (``pmax`` at
the start: 1, the library's ``initial_priority``, and ``max(1, kappa)`` for LAP,
whose raw priorities never go below ``kappa``; see
:func:`prioritylab.cliffwalk.runner.initial_max_priority`), the priority of a
zero TD error (``eps`` for PER/PSER: PSER's "small non-zero priority"), or the
current TD error."""

EXACT_TOL = 1e-12
"""``criterion="exact"``: an entry counts as learned once ``|Q - Q*| <= EXACT_TOL``."""

STALL_TOL = 1e-12
"""Oracle stall: no candidate lowers the squared error by more than ``STALL_TOL * sse``."""

FLUSH = 1e-150
"""Parameters smaller than this in magnitude are set to 0 after an update (flush to zero).

Q-values of wrong actions decay geometrically towards 0 (by ``1 - lr`` per
update).  Without a floor they pass through the range where their squares
(the squared error) are subnormal and end stuck at the subnormal 1e-323
(``0.75 * 1e-323`` rounds back to 1e-323), where every update runs on
subnormal floats: measured 3-5x slower per update.  The change to any value is
below 1e-150 and to any squared error below 1e-300, far below every quantity
measured (MSE threshold 1e-3)."""

RESYNC = 1024
"""The tabular learner tracks the squared error incrementally and recomputes it exactly this often."""


class Settings(NamedTuple):
    """Scalar settings of one run, as the jitted kernel sees them (see runner.RunConfig)."""

    linear: bool
    lr: float
    gamma: float
    scheme: int
    alpha: float
    beta: float
    eps: float
    init: int
    rho: float
    window: int
    eta: float
    add_mode: bool
    kappa: float
    post_priority: bool
    threshold: float
    exact: bool
    cap: int
    record_every: int
    stop: bool
    diagnostics: bool


class Table(NamedTuple):
    """The memory by class: ``cls[i] = 2 s + a`` of slot ``i`` and one row per class."""

    cls: np.ndarray  # int8, per slot
    c_int: np.ndarray  # int64 (2n, 4): s_tm1, a_tm1, s_t, done_t
    c_r: np.ndarray  # float64 (2n,): r_t
    first: np.ndarray  # int64 (2n,): first slot of each class


class ReplayArrays(NamedTuple):
    """Per-run replay state (unused parts are empty arrays, so one compiled kernel serves all)."""

    raw: np.ndarray  # raw priority per slot
    tree: np.ndarray  # sum tree of raw**alpha (PER, PSER, LAP)
    tmin: np.ndarray  # minimum tree (IS weights with beta > 0), else empty
    tmax: np.ndarray  # empty: no max tree
    leaf0: int
    depth: int
    generation: np.ndarray  # write stamps 0..N-1
    prev: np.ndarray  # predecessor links (PSER's decay), priorities.sequential_links
    prev_gen: np.ndarray
    live: np.ndarray  # every slot sampleable
    best: np.ndarray  # argmax tree (GREEDY)
    leaves: int
    nodes: np.ndarray  # treap node rows (RANK), see structures.treap_nodes
    root: np.ndarray
    cdf: np.ndarray  # cumulative rank masses (RANK)
    pmax: np.ndarray  # [largest raw priority recorded], starts at runner.initial_max_priority
    # replay diagnostics (docs/diagnostics.md, "Testbed"), accumulated in the replay loop
    slot_stats: np.ndarray  # per slot [times replayed, update count at its last replay (0: filled at 0)]
    ages: np.ndarray  # histogram of the replayed slots' ages, bins of age_bin()
    wsum: np.ndarray  # [sum of IS weights, sum of their squares] over the replays


AGE_EXACT = 1024
"""Ages below this have a bin each (exact quantiles)."""
AGE_PER_OCTAVE = 32
"""Above :data:`AGE_EXACT`, each octave ``[2^(e-1), 2^e)`` has 32 equal bins, ``2^(e-1) / 32`` wide (a
quantile is its bin's lower edge, within 3.1 %)."""
AGE_BINS = AGE_EXACT + AGE_PER_OCTAVE * 54


@njit(cache=True)
def set_mass(tree, tmin, tmax, leaf0, i, mass):
    """One slot's mass in the sum tree (and max tree), and in the min tree as the samplers keep it: +inf for a
    zero mass, which is never drawn and so does not set PER's IS normaliser (``min_j P(j)`` over positive ``P``)."""
    tree_set(tree, tmin[:0], tmax, leaf0, i, mass)
    if tmin.shape[0] > 0:
        tmin[leaf0 + i] = mass if mass > 0.0 else np.inf
        tree_refresh_extreme(tmin, leaf0 + i, False)


@njit(cache=True, inline="always")
def age_bin(age):
    """Histogram bin of an age (updates since the slot was last replayed, >= 1): the age itself below
    ``AGE_EXACT``; above, its octave and 32nd of an octave, read from the exponent and the top five
    mantissa bits of ``float(age)`` (exact for every age below ``2^53``: no logarithm, no ``frexp`` call
    in the hot loop)."""
    if age < AGE_EXACT:
        return age
    bits = np.float64(age).view(np.int64)  # age = 2^E (1 + f), E = (bits >> 52) - 1023 >= 10
    octave = (bits >> 52) - (1023 + 10)
    return min(AGE_EXACT + AGE_PER_OCTAVE * octave + ((bits >> (52 - 5)) & (AGE_PER_OCTAVE - 1)), AGE_BINS - 1)


def transition_table(memory, n: int) -> Table:
    """Group the memory's transitions by ``(s_tm1, a_tm1)``; check each class is one transition."""
    cls = memory.s_tm1 * 2 + memory.a_tm1
    uniq, first = np.unique(cls, return_index=True)
    if uniq.shape[0] != 2 * n or uniq[0] != 0 or uniq[-1] != 2 * n - 1:
        raise ValueError(f"memory does not hold every one of the {2 * n} state-action pairs")
    c_int = np.stack([memory.s_tm1[first], memory.a_tm1[first], memory.s_t[first], memory.done_t[first]], axis=1)
    c_r = memory.r_t[first].astype(np.float64)
    same = (memory.s_t == c_int[cls, 2]) & (memory.done_t == c_int[cls, 3].astype(bool)) & (memory.r_t == c_r[cls])
    if not same.all():
        i = int(np.flatnonzero(~same)[0])
        raise ValueError(f"transition {i} differs from the first one with the same (state, action)")
    return Table(cls.astype(np.int8), c_int.astype(np.int64), c_r, first.astype(np.int64))


# --------------------------------------------------------------------------- learner


@njit(cache=True, inline="always")
def td_error(c_int, c_r, q, gamma, c):
    """PER eq. 2 for class ``c``: ``r_t + gamma (1 - done_t) max_b Q(s_t, b) - Q(s_tm1, a_tm1)``."""
    y = c_r[c]
    if c_int[c, 3] == 0:
        s_t = c_int[c, 2]
        y += gamma * max(q[s_t, 0], q[s_t, 1])
    return y - q[c_int[c, 0], c_int[c, 1]]


@njit(cache=True)
def q_from_theta(theta, linear, q):
    """Fill ``q`` (n, 2) with the values ``theta`` represents."""
    n = q.shape[0]
    for a in range(2):
        for s in range(n):
            q[s, a] = theta[a, s] + theta[a, n] if linear else theta[a, s]


@njit(cache=True, inline="always")
def _flush(x):
    """``x``, or 0 if ``|x| < FLUSH`` (see :data:`FLUSH`)."""
    return x if abs(x) >= FLUSH else 0.0


@njit(cache=True, inline="always")
def apply_update(theta, q, linear, s, a, d):
    """PER eq. 3 with step ``d = lr w delta`` along ``grad_theta Q(s, a)``."""
    theta[a, s] = _flush(theta[a, s] + d)
    if linear:
        n = q.shape[0]
        theta[a, n] = _flush(theta[a, n] + d)
        for k in range(n):
            q[k, a] = theta[a, k] + theta[a, n]
    else:
        q[s, a] = theta[a, s]


@njit(cache=True)
def squared_error(q, q_star):
    """``sum_{s,a} (Q(s, a) - Q*(s, a))^2`` over all ``2n`` pairs, state-major order."""
    sse = 0.0
    for s in range(q.shape[0]):
        for a in range(2):
            e = q[s, a] - q_star[s, a]
            sse += e * e
    return sse


# --------------------------------------------------------------------------- replay


@njit(cache=True, inline="always")
def raw_from_td(cfg, abs_delta):
    """Raw priority of a TD error: ``|d| + eps`` (PER, PSER), ``|d|`` (greedy, rank), ``max(|d|, kappa)`` (LAP)."""
    if cfg.scheme == PER or cfg.scheme == PSER:
        return raw_priority(PER_RULE, abs_delta, cfg.eps)
    if cfg.scheme == LAP:
        return raw_priority(LAP_RULE, abs_delta, cfg.kappa)
    return abs(abs_delta)


@njit(cache=True)
def init_priorities(cls, c_int, c_r, q, cfg, rep):
    """Give every pre-filled transition its initial priority and build the scheme's structure."""
    if cfg.scheme < GREEDY:
        return
    N = cls.shape[0]
    raw = rep.raw
    for i in range(N):
        if cfg.init == INIT_MAX:
            raw[i] = rep.pmax[0]
        elif cfg.init == INIT_SMALL:
            raw[i] = raw_from_td(cfg, 0.0)
        else:
            raw[i] = raw_from_td(cfg, abs(td_error(c_int, c_r, q, cfg.gamma, cls[i])))
        rep.pmax[0] = max(rep.pmax[0], raw[i])
    if cfg.scheme == GREEDY:
        argmax_build(rep.best, raw, rep.leaves)
    elif cfg.scheme == RANK:
        treap_build(rep.nodes, rep.root, raw)
    elif cfg.scheme == PSER and cfg.init == INIT_TD:
        # PSER's fill (Theorem 1's proof): each priority is set in memory order and decayed backwards
        for i in range(N):
            pser_set(raw, rep.tree, rep.tmin, rep.leaf0, cfg.alpha, rep.prev, rep.prev_gen, rep.generation, rep.live,
                     i, raw[i], cfg.rho, cfg.window, cfg.add_mode, rep.pmax[0])  # fmt: skip
    else:
        for i in range(N):
            rep.tree[rep.leaf0 + i] = mass_of(raw[i], cfg.alpha)
            if rep.tmin.shape[0] > 0:  # a zero mass is never drawn, so it does not set the IS normaliser
                rep.tmin[rep.leaf0 + i] = rep.tree[rep.leaf0 + i] if rep.tree[rep.leaf0 + i] > 0.0 else np.inf
        tree_rebuild(rep.tree, rep.tmin, rep.tmax, rep.leaf0)


@njit(cache=True)
def oracle_select(c_int, c_r, first, q, q_star, linear, lr, gamma):
    """The transition whose update most lowers the squared error to ``Q*`` (see the module docstring)."""
    n = q.shape[0]
    col0 = 0.0
    col1 = 0.0
    if linear:
        for s in range(n):
            col0 += q[s, 0] - q_star[s, 0]
            col1 += q[s, 1] - q_star[s, 1]
    best = np.inf
    best_c = -1
    big = -1.0
    big_c = -1
    for c in range(2 * n):
        s = c_int[c, 0]
        a = c_int[c, 1]
        d = lr * td_error(c_int, c_r, q, gamma, c)
        e = q[s, a] - q_star[s, a]
        if linear:
            change = 2.0 * d * ((col0 if a == 0 else col1) + e) + (n + 3) * d * d
        else:
            change = (e + d) * (e + d) - e * e
        if change < best:
            best = change
            best_c = c
        if abs(d) > big:
            big = abs(d)
            big_c = c
    if best >= -STALL_TOL * squared_error(q, q_star):
        return first[big_c]
    return first[best_c]


@njit(cache=True)
def draw_ordered(cfg, N, rng, best, nodes, root, cdf):
    """GREEDY and RANK draws; return ``(slot, IS weight)``."""
    if cfg.scheme == GREEDY:
        return best[1], 1.0
    r = sample_rank(cdf, N, rng)
    w = ((r + 1.0) / N) ** (cfg.alpha * cfg.beta) if cfg.beta > 0.0 else 1.0  # (P(r) / P(N))^-beta
    return treap_select(nodes, root, r), w


# --------------------------------------------------------------------------- run


@njit(cache=True)
def _count_exact(q, q_star, ok):
    k = 0
    for s in range(q.shape[0]):
        for a in range(2):
            ok[s, a] = abs(q[s, a] - q_star[s, a]) <= EXACT_TOL
            k += ok[s, a]
    return k


@njit(cache=True, inline="always")
def _recount_exact(q, q_star, ok, n_ok, s, a):
    """Update the count of exact entries after ``Q(s, a)`` changed."""
    now = abs(q[s, a] - q_star[s, a]) <= EXACT_TOL
    n_ok += np.int64(now) - np.int64(ok[s, a])
    ok[s, a] = now
    return n_ok


@njit(cache=True)
def run_kernel(table, q_star, theta, cfg, rep, rng, curve):
    """Replay and learn until convergence or ``cfg.cap`` updates; return ``(converged_at, updates)``.

    ``converged_at`` is the first update count after which ``MSE(Q, Q*) <
    cfg.threshold`` (mean over all ``2n`` pairs), or, with ``cfg.exact``, after
    which every ``|Q - Q*| <= EXACT_TOL`` (tabular only); ``-1`` if censored.
    ``curve[k]`` receives the MSE after ``k * cfg.record_every`` updates; a
    run that stops at convergence between two record points writes its final
    MSE at the next one, and NaN after it.  ``theta`` is updated in place.
    """
    cls, c_int, c_r, first = table
    raw, tree, tmin, tmax, leaf0, depth, generation, prev, prev_gen, live, best, leaves, nodes, root, cdf = rep[:15]
    slot_stats, ages, wsum = rep[16:]
    sw, sw2 = wsum[0], wsum[1]
    n, N, sc, rec = q_star.shape[0], cls.shape[0], cfg.scheme, cfg.record_every
    q = np.empty((n, 2))
    q_from_theta(theta, cfg.linear, q)
    init_priorities(cls, c_int, c_r, q, cfg, rep)
    pmax = rep.pmax[0]
    thr = cfg.threshold * 2 * n
    sse = squared_error(q, q_star)
    ok = np.zeros((n, 2), dtype=np.bool_)
    n_ok = _count_exact(q, q_star, ok)
    converged_at = 0 if (n_ok == 2 * n if cfg.exact else sse < thr) else -1
    curve[:] = np.nan
    if rec > 0:
        curve[0] = sse / (2 * n)
    t = 0
    while t < cfg.cap and not (cfg.stop and converged_at >= 0):
        w = 1.0
        if sc == UNIFORM:
            i = min(int(rng.random() * N), N - 1)  # one uniform, as the sum tree draws; bias < N 2^-53
        elif sc == PER or sc == PSER or sc == LAP:
            i = tree_sample_one(tree, leaf0, depth, rng)
            if cfg.beta > 0.0 and sc != LAP:  # PER Section 3.4: (N P(i))^-beta / max_j (N P(j))^-beta
                w = (tree[leaf0 + i] / tmin[0]) ** (-cfg.beta)
        elif sc == ORACLE:
            i = oracle_select(c_int, c_r, first, q, q_star, cfg.linear, cfg.lr, cfg.gamma)
        else:
            i, w = draw_ordered(cfg, N, rng, best, nodes, root, cdf)
        c = cls[i]
        s = c_int[c, 0]
        a = c_int[c, 1]
        delta = td_error(c_int, c_r, q, cfg.gamma, c)
        old = q[s, a]
        apply_update(theta, q, cfg.linear, s, a, cfg.lr * w * delta)
        t += 1
        if cfg.diagnostics:  # replay count, age since the last replay, IS weight sums
            slot_stats[i, 0] += 1
            ages[age_bin(t - slot_stats[i, 1])] += 1
            slot_stats[i, 1] = t
            sw += w
            sw2 += w * w
        if sc >= GREEDY:
            d_new = td_error(c_int, c_r, q, cfg.gamma, c) if cfg.post_priority else delta
            p = raw_from_td(cfg, abs(d_new))
            if sc == PSER:
                # PSER eq. 10, p_old = the current raw (earlier decays included)
                p = pser_anti_collapse(p, cfg.eta, raw[i])
            pmax = max(pmax, p)
            if sc == PSER:  # eq. 6/7: the priority decays backwards along the episode
                pser_set(raw, tree, tmin, leaf0, cfg.alpha, prev, prev_gen, generation, live, i, p, cfg.rho,
                         cfg.window, cfg.add_mode, pmax)  # fmt: skip
            else:
                raw[i] = p
                if sc == GREEDY:
                    argmax_fix(best, raw, leaves, i)
                elif sc == RANK:
                    treap_rekey(nodes, root, i, p)
                else:
                    set_mass(tree, tmin, tmax, leaf0, i, mass_of(p, cfg.alpha))
        if cfg.linear or t % RESYNC == 0:
            sse = squared_error(q, q_star)
        else:
            sse += (q[s, a] - q_star[s, a]) ** 2 - (old - q_star[s, a]) ** 2
        if converged_at < 0:
            if cfg.exact:
                n_ok = _recount_exact(q, q_star, ok, n_ok, s, a)
                if n_ok == 2 * n:
                    converged_at = t
            elif sse < thr:
                sse = squared_error(q, q_star)
                if sse < thr:
                    converged_at = t
        if rec > 0 and (t % rec == 0 or (cfg.stop and converged_at >= 0)):
            curve[(t + rec - 1) // rec] = squared_error(q, q_star) / (2 * n)
    rep.pmax[0] = pmax
    wsum[0], wsum[1] = sw, sw2
    return converged_at, t
