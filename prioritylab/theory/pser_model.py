"""PSER Theorem 1 (Brittain et al., 2019, Section 3.1 and App. 1): the idealised model.

The model of the theorem's proof (App. 1, eq. 15-31): tabular Q-learning with
learning rate 1 and ``Q = 0`` at the start on the Blind Cliffwalk (PER App. B.1),
replaying one transition per step from a memory pre-filled with all ``2^n``
action sequences (``N = 2^(n+1) - 2`` transitions, exactly one rewarded).
Priorities are the TD error at ``Q = 0``, so only the rewarded transition has a
non-zero priority; a replayed transition's priority drops to its *post-update*
TD error, which is 0 with learning rate 1 in this deterministic chain (no
``eps``, no anti-collapse ``eta``).  Sampling is ``P(i) = p_i^alpha / sum_k
p_k^alpha`` (PSER eq. 5) over the transitions with a non-zero priority; when
every priority is 0 it is uniform over the whole memory (the ``eps -> 0`` limit
of PER's ``p = |delta| + eps``).  PSER additionally decays the rewarded
transition's priority backwards along its episode when the memory is filled
(MAX eq. 6 or ADD eq. 7, window ``W``).  Convergence: ``Q = Q*`` exactly, which
happens after ``n`` "Q-intervals"; interval ``k`` ends at the first replay of
``(s_(n-k+1), right)`` after interval ``k - 1`` ended.

The derivation is in docs/theory/pser-theorem.md.  This module gives

* closed forms: :func:`e_per_closed`, :func:`e_pser_closed` (exact) and the
  theorem's bound :func:`e_pser_bound` (the proof's per-interval argument);
* exact expectations from the absorbing Markov chain over the reduced state
  (interval, set of transitions that still carry priority), built from an actual
  filled memory: :func:`e_per_exact`, :func:`e_pser_exact`;
* the same under each of the three :data:`READINGS` of what a replay does to
  priorities (post-update, re-decay, real = Algorithm 1): :func:`e_reading_exact`,
  with the re-decay closed form :func:`e_redecay_closed`;
* a brute-force solve of the unreduced chain (every slot's priority and the whole
  Q table) for tiny ``n``, any reading: :func:`e_bruteforce`;
* a jitted Monte Carlo of the model on the actual memory, driving the core sum
  tree and the PSER ``pser_decay`` kernel, any reading: :func:`e_per_mc`, :func:`e_pser_mc`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .._checks import as_rng, check_positive_int, check_range
from ..cliffwalk.env import Memory, build_memory, discount, memory_size, right_action
from ..priorities import mass_of, masses_of, pser_decay, sequential_links
from ..samplers.pser import MODES, pser_update
from ..sumtree import SumTree, tree_sample_one, tree_set

MAX_EXACT_STATES = 20
"""Largest ``n`` for the memory-based computations (exact chain, Monte Carlo): 2 M transitions."""

TOL = 1e-12
"""Absolute tolerance of ``|Q - Q*|`` for convergence (the lr-1 updates reproduce Q* bit for bit)."""


READINGS = ("post", "redecay", "real")
"""What a replay does to the replayed transition's priority and which value triggers the decay.

* ``"post"``: priority = post-update ``|delta|`` (0 here), decay triggered with that value;
* ``"redecay"``: priority = post-update ``|delta|``, decay triggered with the ``|delta|``
  observed at the update (before Q changed);
* ``"real"`` (PSER Algorithm 1): priority = the observed ``|delta|``, decay triggered with it.
"""


def _check_reading(reading) -> int:
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    return READINGS.index(reading)


class MCResult(NamedTuple):
    """A Monte Carlo estimate of an expected number of replay steps."""

    mean: float
    """Sample mean over the runs that converged."""
    ci: float
    """Half-width of the normal 95% confidence interval, ``1.96 s / sqrt(runs)``."""
    runs: int
    """Runs that converged within the step cap."""
    capped: int
    """Runs stopped at the step cap (excluded from the mean; 0 in every setting of the script)."""


# --------------------------------------------------------------------------- checks


def _check_n(n, hi: int | None = None) -> int:
    n = check_positive_int("n", n)
    if hi is not None and n > hi:
        raise ValueError(f"n must be at most {hi} here, got {n}")
    return n


def _check_window(window) -> int | None:
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 0:
        raise ValueError(f"window must be None (unlimited) or a non-negative integer, got {window!r}")
    return int(window)


def _check_common(rho, alpha, eps=0.0):
    rho = check_range("rho", rho, 0.0, 1.0, lo_open=True, hi_open=True)
    alpha = check_range("alpha", alpha, 0.0, np.inf, lo_open=True)
    eps = check_range("eps", eps, 0.0, np.inf)
    return rho, alpha, eps


# --------------------------------------------------------------------------- closed forms


def interval_copies(n: int, k: int) -> int:
    """Copies in the memory of ``(s_(n-k+1), right)``, the pair whose replay ends interval ``k``: ``2^(k-1)``.

    PER App. B.1: ``(s_i, a)`` appears ``2^(n-i)`` times (1-based ``i``).
    """
    n = _check_n(n)
    if not 1 <= k <= n:
        raise ValueError(f"interval k must be in [1, {n}], got {k!r}")
    return 1 << (k - 1)


def chain_length(n: int, window: int | None) -> int:
    """``m = min(W, n - 1)``: predecessors of the rewarded transition reached by the fill-time decay.

    The decay (PSER eq. 6-7) covers at most ``W`` predecessors and never crosses the
    episode start; the rewarded episode has ``n`` transitions.  ``window=None``: unlimited.
    """
    n = _check_n(n)
    window = _check_window(window)
    return n - 1 if window is None else min(window, n - 1)


def e_per_closed(n: int, eps: float = 0.0, alpha: float = 1.0) -> float:
    """PSER Theorem 1, eq. 15/28: ``E_PER(n) = 1 + sum_(k=1)^(n-1) (2^(n+1) - 2) / 2^k``.

    Equals ``2^(n+1) - 5 + 2^(2-n)``.  With PER's ``p = |delta| + eps`` (PER Section
    3.3) instead of the idealised ``eps -> 0`` limit, the first interval is geometric
    with success probability ``(1+eps)^alpha / ((1+eps)^alpha + (N-1) eps^alpha)``,
    adding ``(N - 1) (eps / (1 + eps))^alpha``; later intervals are unchanged since all
    priorities are then equal to ``eps``.
    """
    n = _check_n(n)
    eps = check_range("eps", eps, 0.0, np.inf)
    alpha = check_range("alpha", alpha, 0.0, np.inf, lo_open=True)
    big_n = memory_size(n)
    total = 1.0 + sum(big_n / 2.0**k for k in range(1, n))
    if eps > 0.0:
        total += (big_n - 1) * mass_of(eps / (1.0 + eps), alpha)
    return total


def in_order_probability(k: int, r: float) -> float:
    """``q_k = prod_(s=1)^k (1 - r) / (1 - r^s)``.

    The probability that ``k`` items with sampling masses ``1, r, ..., r^(k-1)``,
    drawn proportionally without replacement (a Plackett-Luce order; PSER eq. 5 with
    mass ratio ``r = rho^alpha``), come out in the order of decreasing mass.
    Luce's choice axiom makes this the same whether or not other items are mixed in.
    """
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k!r}")
    r = check_range("r", r, 0.0, 1.0, hi_open=True)
    q = 1.0
    for s in range(1, k + 1):
        q *= (1.0 - r) / (1.0 - r**s)
    return q


def e_pser_closed(n: int, rho: float, window: int | None = None, alpha: float = 1.0) -> float:
    """Exact expected steps of PSER in the theorem's model (derived in docs/theory/pser-theorem.md).

    ``E = (m + 1) + sum_(k=2)^n N / 2^(k-1) * (1 - q_k [k <= m + 1])`` with
    ``m = min(W, n - 1)``, ``r = rho^alpha`` and ``q_k`` from
    :func:`in_order_probability`.  The chain ``c_0..c_m`` of priorities
    ``1, rho, ..., rho^m`` (PSER App. 1, fill-time decay) is used up in ``m + 1``
    draws; the first ``L`` intervals finish inside them, ``P(L >= k) = q_k``; every
    later interval waits ``N / 2^(k-1)`` uniform draws.  ``window=0`` gives PER.
    """
    n = _check_n(n)
    rho, alpha, _ = _check_common(rho, alpha)
    m = chain_length(n, window)
    r = mass_of(rho, alpha)
    big_n = memory_size(n)
    total = float(m + 1)
    for k in range(2, n + 1):
        q = in_order_probability(k, r) if k <= m + 1 else 0.0
        total += big_n / 2.0 ** (k - 1) * (1.0 - q)
    return total


def e_pser_bound(n: int, rho: float, window: int | None = None, alpha: float = 1.0) -> float:
    """The theorem's PSER bound (PSER App. 1, eq. 29-31), extended to a finite window.

    The proof bounds interval ``k``'s wait by ``1 / p_k``, with ``p_k`` the share of
    the chain's remaining mass held by the pair that ends interval ``k``, ``p_k = (1 - r) / (1 - r^(m - k + 2))``:
    ``B = sum_(k=1)^(m+1) (1 - r^(m-k+2)) / (1 - r) + sum_(k=m+2)^n N / 2^(k-1)``,
    where intervals beyond the chain (``k > m + 1``, possible only with a finite window)
    have no priority left and wait as in PER.  Unlimited window: ``B = sum_(j=1)^n
    (1 - r^j) / (1 - r) <= n / (1 - r)``, linear in ``n``.  Holds for interval 1 only
    (docs/theory/pser-theorem.md): a chain transition replayed before its interval
    drops to priority 0 and its interval then waits for uniform draws.
    """
    n = _check_n(n)
    rho, alpha, _ = _check_common(rho, alpha)
    m = chain_length(n, window)
    r = mass_of(rho, alpha)
    big_n = memory_size(n)
    total = sum((1.0 - r ** (m - k + 2)) / (1.0 - r) for k in range(1, m + 2))
    total += sum(big_n / 2.0 ** (k - 1) for k in range(m + 2, n + 1))
    return total


def e_pser_bound_loose(n: int, rho: float, alpha: float = 1.0) -> float:
    """``n / (1 - rho^alpha)``: the linear envelope of :func:`e_pser_bound` (unlimited window)."""
    n = _check_n(n)
    rho, alpha, _ = _check_common(rho, alpha)
    return n / (1.0 - mass_of(rho, alpha))


# --------------------------------------------------------------------------- the filled memory


class Model(NamedTuple):
    """A filled memory with its initial priorities and the per-pair tables the kernels use.

    Pair ``p = 2 s + a`` is the state-action ``(s, a)`` (0-based ``s``); the environment is
    deterministic, so a pair determines reward, next state and termination.
    """

    memory: Memory
    raw0: np.ndarray
    """Raw priorities after the fill (TD error at Q = 0, then the fill-time decay)."""
    mass0: np.ndarray
    """Sampling masses ``raw0 ** alpha`` (PSER eq. 5)."""
    pair_r: np.ndarray
    pair_next: np.ndarray
    pair_done: np.ndarray
    pair_count: np.ndarray
    pair_offset: np.ndarray
    """Slots of pair ``p`` are ``slots_by_pair[pair_offset[p]:pair_offset[p + 1]]``."""
    slots_by_pair: np.ndarray
    q_star: np.ndarray
    """Q* computed with the learner's own floating-point operations."""
    gamma: float
    p_max: float


def _pair_tables(memory: Memory, n: int):
    pair = 2 * memory.s_tm1 + memory.a_tm1
    n_pairs = 2 * n
    pair_r = np.zeros(n_pairs)
    pair_next = np.zeros(n_pairs, dtype=np.int64)
    pair_done = np.zeros(n_pairs, dtype=np.bool_)
    pair_r[pair] = memory.r_t
    pair_next[pair] = memory.s_t
    pair_done[pair] = memory.done_t
    count = np.bincount(pair, minlength=n_pairs).astype(np.int64)
    offset = np.concatenate(([0], np.cumsum(count))).astype(np.int64)
    return pair_r, pair_next, pair_done, count, offset, np.argsort(pair, kind="stable").astype(np.int64)


def _q_star_lr1(n: int, gamma: float) -> np.ndarray:
    """Q* with the exact operations of a learning-rate-1 update (``r + gamma * max Q(s')``)."""
    q = np.zeros((n, 2))
    right = right_action(n)
    q[n - 1, right[n - 1]] = 1.0
    for s in range(n - 2, -1, -1):
        q[s, right[s]] = 0.0 + gamma * max(q[s + 1, 0], q[s + 1, 1])
    return q


def build_model(
    n: int,
    rho: float = 0.4,
    window: int | None = None,
    alpha: float = 1.0,
    eps: float = 0.0,
    mode: str = "max",
    decay: bool = True,
    memory: Memory | None = None,
    seed=0,
) -> Model:
    """Fill the memory (PER App. B.1) and set its priorities as PSER App. 1 does.

    Every transition gets ``|delta| + eps`` at ``Q = 0`` (``|r|``), in storage order;
    with ``decay`` each is decayed backwards at once through the library's
    ``pser_update`` kernel (MAX eq. 6 / ADD eq. 7, ``window`` predecessors, never
    across an episode start).  ``decay=False`` is PER.  ``memory`` defaults to
    ``build_memory(n, rng(seed))``.
    """
    n = _check_n(n, MAX_EXACT_STATES)
    rho, alpha, eps = _check_common(rho, alpha, eps)
    window = _check_window(window)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if memory is None:
        memory = build_memory(n, as_rng(seed))
    big_n = memory.s_tm1.shape[0]
    raw = np.zeros(big_n)
    td0 = np.abs(memory.r_t) + eps
    p_max = float(td0.max())
    tree = SumTree(big_n, track_min=False, track_max=False)
    a = tree.arrays
    if decay:
        w = n if window is None else window
        generation, prev, prev_gen = sequential_links(memory.episode_start)
        pser_update(
            raw, a.tree, a.tmin, a.leaf0, alpha, prev, prev_gen, generation, np.ones(big_n, dtype=np.bool_),
            np.arange(big_n, dtype=np.int64), td0, 0.0, rho, w, mode == "add", p_max, False, np.empty(0, np.int64),
        )  # fmt: skip
    else:
        raw[:] = td0
    gamma = discount(n)
    return Model(memory, raw, masses_of(raw, alpha), *_pair_tables(memory, n), _q_star_lr1(n, gamma), gamma, p_max)


# --------------------------------------------------------------------------- exact expectation


def _interval_of_pair(n: int) -> np.ndarray:
    """Interval served by each pair: ``k`` for ``(s_(n-k+1), right)`` (0-based state ``n - k``), 0 otherwise."""
    iv = np.zeros(2 * n, dtype=np.int64)
    right = right_action(n)
    for s in range(n):
        iv[2 * s + right[s]] = n - s
    return iv


@njit(cache=True)
def _chain_dp(w, iv, counts, big_n, n):
    """Expected steps of the absorbing chain on states (interval k, set S of slots with mass > 0).

    ``w[j]``: mass of the j-th slot carrying priority after the fill, ``iv[j]``: the
    interval its pair ends (0: none), ``counts[k]``: slots holding the pair that ends
    interval k.  With S empty, interval k waits ``N / counts[k]`` uniform draws; otherwise one
    draw removes slot j (its priority drops to 0) with probability ``w[j] / sum_S w``.
    """
    n_items = w.shape[0]
    n_sets = 1 << n_items
    e = np.zeros((n + 2, n_sets))
    tail = 0.0
    for k in range(n, 0, -1):
        tail += big_n / counts[k]
        e[k, 0] = tail
    for s_set in range(1, n_sets):
        tot = 0.0
        for j in range(n_items):
            if s_set >> j & 1:
                tot += w[j]
        for k in range(1, n + 1):
            acc = 1.0
            for j in range(n_items):
                if s_set >> j & 1:
                    nk = k + 1 if iv[j] == k else k
                    acc += w[j] / tot * e[nk, s_set ^ (1 << j)]
            e[k, s_set] = acc
    return e[1, n_sets - 1]


def _exact_from_model(model: Model, n: int) -> float:
    items = np.flatnonzero(model.mass0 > 0.0)
    if items.shape[0] > MAX_EXACT_STATES:
        raise ValueError(f"{items.shape[0]} slots carry priority; the exact chain handles at most {MAX_EXACT_STATES}")
    mem = model.memory
    iv_pair = _interval_of_pair(n)
    iv = iv_pair[2 * mem.s_tm1[items] + mem.a_tm1[items]]
    counts = np.zeros(n + 1)
    for k in range(1, n + 1):
        counts[k] = model.pair_count[np.flatnonzero(iv_pair == k)[0]]
    return float(_chain_dp(model.mass0[items], iv, counts, float(mem.s_tm1.shape[0]), n))


def e_per_exact(n: int, seed=0) -> float:
    """Exact E_PER(n) by the absorbing chain over (interval, slots with priority) on a filled memory."""
    n = _check_n(n, MAX_EXACT_STATES)
    return _exact_from_model(build_model(n, decay=False, seed=seed), n)


def e_pser_exact(n: int, rho: float, window: int | None = None, alpha: float = 1.0, mode: str = "max", seed=0) -> float:
    """Exact E_PSER(n) by the absorbing chain over (interval, slots with priority) on a filled memory.

    The fill-time decay is the library's kernel on an actual memory, so this does not
    assume the chain's shape; copies of a pair without priority are exchangeable and
    enter only through their count (the reduction is argued in docs/theory/pser-theorem.md).
    """
    n = _check_n(n, MAX_EXACT_STATES)
    return _exact_from_model(build_model(n, rho, window, alpha, 0.0, mode, True, seed=seed), n)


MAX_READING_STATES = 2_000_000
"""Largest number of reduced states :func:`e_reading_exact` will visit before giving up."""


def _rewarded_chain(model: Model, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Slots ``c_0..c_(n-1)`` of the rewarded episode (``c_j`` holds ``(s_(n-j), right)``) and their fill priorities."""
    mem = model.memory
    t = int(np.flatnonzero(mem.r_t > 0)[0])
    chain = t - np.arange(n)
    if not mem.episode_start[chain[-1]] or mem.episode_start[chain[:-1]].any():
        raise RuntimeError("the rewarded episode is not stored contiguously")  # pragma: no cover
    return chain, model.raw0[chain]


class _ReadingChain:
    """Absorbing chain of one reading on the reduced state ``(k, raw priorities of c_0..c_(n-1))``.

    Why this state is enough (docs/theory/pser-theorem.md, section 5): Q is a function of
    the interval ``k``; only a replay that ends an interval has a non-zero ``|delta|``
    (``v_k = Q*(s_(n-k+1), right)``) and so is the only one that can decay a non-zero
    value; predecessors of a right action in its episode are right actions, so decay only
    reaches copies of the pairs of later intervals.  Slots outside the rewarded episode get
    priority only from a decay started in their episode, i.e. after a uniform draw (all
    masses 0) ended an interval there; at that moment every slot is at 0, so that
    episode is interchangeable with the rewarded one and the ender is relabelled
    ``c_(k-1)``.  All other slots are at 0, interchangeable, and enter only through
    ``N / 2^(k-1)``, the mean uniform wait for the next ender.
    """

    def __init__(self, n, values, big_n, rho, window, alpha, add_mode, p_max, reading):
        self.n, self.values, self.big_n = n, values, big_n
        self.rho, self.window, self.alpha = rho, window, alpha
        self.add_mode, self.p_max, self.reading = add_mode, p_max, reading
        self.memo: dict = {}

    def end_interval(self, k: int, raw: tuple) -> tuple:
        """Replay of ``c_(k-1)``, which ends interval ``k``: set its priority and decay eq. 6/7."""
        seen, after = self.values[k - 1], 0.0
        out = list(raw)
        out[k - 1] = seen if self.reading == "real" else after
        decayed = after if self.reading == "post" else seen
        for j in range(k, min(k - 1 + self.window, self.n - 1) + 1):
            decayed *= self.rho
            out[j] = min(out[j] + decayed, self.p_max) if self.add_mode else max(decayed, out[j])
        return tuple(out)

    def expected(self, k: int, raw: tuple) -> float:
        """Expected replays from state ``(k, raw)`` to convergence (iterative post-order, no recursion limit)."""
        stack = [(k, raw)]
        while stack:
            key = stack[-1]
            if key in self.memo:
                stack.pop()
                continue
            nxt = self._successors(*key)
            todo = [s for _, s in nxt if s[0] <= self.n and s not in self.memo]
            if todo:
                stack.extend(todo)
                if len(self.memo) + len(stack) > MAX_READING_STATES:
                    raise ValueError(f"more than {MAX_READING_STATES} reduced states; use a smaller n")
                continue
            stack.pop()
            cost = self.big_n / 2.0 ** (key[0] - 1) if len(nxt) == 1 and nxt[0][0] < 0 else 1.0
            self.memo[key] = cost + sum(abs(p) * (self.memo[s] if s[0] <= self.n else 0.0) for p, s in nxt)
        return self.memo[(k, raw)]

    def _successors(self, k: int, raw: tuple) -> list:
        """``[(probability, next state)]``; a single ``(-1, state)`` marks a uniform wait (all masses 0)."""
        mass = [x**self.alpha if x > 0.0 else 0.0 for x in raw]
        total = sum(mass)
        if total == 0.0:
            return [(-1.0, (k + 1, self.end_interval(k, raw)))]
        out = []
        for j, w in enumerate(mass):
            if w == 0.0:
                continue
            if j == k - 1:
                out.append((w / total, (k + 1, self.end_interval(k, raw))))
            else:  # |delta| = 0 before and after: the slot drops to 0 and decays nothing
                out.append((w / total, (k, raw[:j] + (0.0,) + raw[j + 1 :])))
        return out


@njit(cache=True)
def _geometric_dp(col_mass, col_len, stale_mass, keep_ender):
    """Expected steps for the re-decay / real readings when every interval starts from a fresh geometric chain.

    State within interval k (0-based ``k`` here): which of the ``col_len[k]`` chain items
    (item 0 is the interval's pair) still carry priority (``col``, item 0 always set) and
    which earlier enders still carry their observed ``|delta|`` (``stale``, real reading
    only).  ``col_mass[k, i]``: mass of chain item i; ``stale_mass[i]``: mass of the
    ender of interval i.  Index ``stale | col << k``.
    """
    n = col_len.shape[0]
    nxt = np.zeros(1)
    for k in range(n - 1, -1, -1):
        size = 1 << (k + col_len[k])
        cur = np.full(size, np.nan)
        for idx in range(size):
            stale = idx & ((1 << k) - 1)
            col = idx >> k
            if not col & 1:
                continue
            total = 0.0
            for i in range(col_len[k]):
                if col >> i & 1:
                    total += col_mass[k, i]
            for i in range(k):
                if stale >> i & 1:
                    total += stale_mass[i]
            if k == n - 1:
                acc = 0.0
            else:
                full = (1 << col_len[k + 1]) - 1
                acc = col_mass[k, 0] / total * nxt[(stale | (1 << k if keep_ender else 0)) | full << (k + 1)]
            for i in range(1, col_len[k]):
                if col >> i & 1:
                    acc += col_mass[k, i] / total * cur[idx ^ (1 << (k + i))]
            for i in range(k):
                if stale >> i & 1:
                    acc += stale_mass[i] / total * cur[idx ^ (1 << i)]
            cur[idx] = 1.0 + acc
        nxt = cur
    return nxt[((1 << col_len[0]) - 1)]


def _geometric_applies(model: Model, n: int, rho: float, mode: str, reading: str, decay: bool, window) -> bool:
    """Whether :func:`_geometric_dp` is exact: MAX decay, a non-zero re-decay and ``gamma >= rho``.

    With ``gamma >= rho`` a new decay ``v_k rho^j`` is never below an older one
    (``v_(k-1) rho^(j+1)``), so MAX rewrites the whole window; beyond it nothing was ever decayed.
    """
    return mode == "max" and decay and reading != "post" and window != 0 and model.gamma >= rho


def _geometric_expected(model: Model, n: int, rho: float, window: int, alpha: float, reading: str) -> float:
    _, raw0 = _rewarded_chain(model, n)
    right = right_action(n)
    values = np.array([model.q_star[n - k, right[n - k]] for k in range(1, n + 1)])
    col_len = np.array([min(window, n - 1) + 1] + [min(window, n - k) for k in range(1, n)], dtype=np.int64)
    col_mass = np.zeros((n, int(col_len.max())))
    col_mass[0, : col_len[0]] = masses_of(np.ascontiguousarray(raw0[: col_len[0]], dtype=np.float64), alpha)
    for k in range(1, n):
        decayed = values[k - 1]
        for i in range(col_len[k]):
            decayed *= rho
            col_mass[k, i] = mass_of(decayed, alpha)
    return float(_geometric_dp(col_mass, col_len, masses_of(values, alpha), reading == "real"))


def e_reading_exact(
    n: int,
    rho: float,
    window: int | None = None,
    alpha: float = 1.0,
    mode: str = "max",
    reading: str = "post",
    decay: bool = True,
    seed=0,
    method: str = "auto",
) -> float:
    """Exact expected steps under one of the :data:`READINGS` (``eps -> 0``), on a filled memory.

    The fill (priorities, fill-time decay) is the library's kernel on an actual memory, as
    for :func:`e_pser_exact`.  ``method="chain"``: the general reduced chain
    :class:`_ReadingChain` (any mode, reading and gamma; its cost grows with the number of
    reachable priority patterns, about ``n 2^(n-1)`` for ``"real"`` with an unlimited
    window, see :data:`MAX_READING_STATES`).  ``"geometric"``: the jitted
    :func:`_geometric_dp`, exact only where :func:`_geometric_applies`.  ``"auto"``: the
    latter where it applies, else the chain.  ``"post"`` equals :func:`e_pser_exact`;
    ``decay=False`` is PER under the same reading.
    """
    n = _check_n(n, MAX_EXACT_STATES)
    _check_reading(reading)
    if method not in ("auto", "chain", "geometric"):
        raise ValueError(f"method must be 'auto', 'chain' or 'geometric', got {method!r}")
    model = build_model(n, rho, window, alpha, 0.0, mode, decay, seed=seed)
    w = 0 if not decay else (n if window is None else window)
    fast = _geometric_applies(model, n, rho, mode, reading, decay, w)
    if method == "geometric" and not fast:
        raise ValueError("the geometric DP needs mode='max', decay, reading 'redecay' or 'real' and gamma >= rho")
    if fast and method != "chain":
        return _geometric_expected(model, n, rho, w, alpha, reading)
    _, raw0 = _rewarded_chain(model, n)
    right = right_action(n)
    values = [float(model.q_star[n - k, right[n - k]]) for k in range(1, n + 1)]
    chain = _ReadingChain(n, values, float(model.memory.s_tm1.shape[0]), rho, w, alpha, mode == "add",
                          model.p_max, reading)  # fmt: skip
    return float(chain.expected(1, tuple(float(x) for x in raw0)))


def e_redecay_closed(n: int, rho: float, window: int | None = None, alpha: float = 1.0) -> float:
    """Closed form of the re-decay reading (MAX, ``gamma >= rho``; derived in docs/theory/pser-theorem.md).

    ``E = sum_(k=1)^n (1 + sum_(j=1)^(L_k - 1) r^j / (1 + r^j))`` with ``r = rho^alpha``,
    ``L_1 = min(W, n - 1) + 1`` and ``L_k = min(W, n - k + 1)`` for ``k >= 2``: at the start
    of interval k the priorities are a geometric chain of ``L_k`` items headed by the
    interval's pair, and item j is replayed before the head with probability
    ``r^j / (1 + r^j)``.  Needs ``gamma = 1 - 1/n >= rho`` (else a decay can leave older,
    larger priorities in place); raises otherwise.
    """
    n = _check_n(n)
    rho, alpha, _ = _check_common(rho, alpha)
    window = _check_window(window)
    if discount(n) < rho:
        raise ValueError(f"closed form needs gamma = {discount(n):.3g} >= rho = {rho}")
    r = mass_of(rho, alpha)
    w = n if window is None else window
    if w == 0:
        raise ValueError("window must be at least 1 (window 0 is PER)")
    lengths = [min(w, n - 1) + 1] + [min(w, n - k + 1) for k in range(2, n + 1)]
    return float(sum(1.0 + sum(r**j / (1.0 + r**j) for j in range(1, ell)) for ell in lengths))


def _replay_python(model: Model, q, raw, i, rho, window, alpha, eps, add_mode, decay, reading="post"):
    """One learning-rate-1 replay of slot ``i`` on plain Python lists (the brute force's own step)."""
    mem = model.memory
    s, a = int(mem.s_tm1[i]), int(mem.a_tm1[i])
    boot = 0.0 if mem.done_t[i] else model.gamma * max(q[2 * mem.s_t[i]], q[2 * mem.s_t[i] + 1])
    seen = abs(float(mem.r_t[i]) + boot - q[2 * s + a]) + eps  # |delta| observed at the update
    q[2 * s + a] = float(mem.r_t[i]) + boot
    boot = 0.0 if mem.done_t[i] else model.gamma * max(q[2 * mem.s_t[i]], q[2 * mem.s_t[i] + 1])
    after = abs(float(mem.r_t[i]) + boot - q[2 * s + a]) + eps
    raw[i] = seen if reading == "real" else after
    source = after if reading == "post" else seen
    for k in range(1, (window if decay else 0) + 1):
        if i - k < 0 or mem.episode_start[i - k + 1]:
            break
        dec = source * rho**k
        raw[i - k] = min(raw[i - k] + dec, model.p_max) if add_mode else max(dec, raw[i - k])


def e_bruteforce(
    n: int,
    rho: float = 0.4,
    window: int | None = None,
    alpha: float = 1.0,
    mode: str = "max",
    decay: bool = True,
    seed=0,
    max_states: int = 20_000,
    reading: str = "post",
) -> float:
    """Expected steps by solving the *unreduced* absorbing chain (tiny ``n`` only).

    A state is the whole Q table plus every slot's raw priority; each slot is a possible
    next replay, with probability ``mass / total`` or ``1 / N`` when the total is 0.  The
    replay and decay are re-implemented here in plain Python, independently of the
    kernels, and the linear system ``(I - P) t = 1`` is solved densely.  ``reading``
    is one of :data:`READINGS`.
    """
    n = _check_n(n, 5)
    _check_reading(reading)
    model = build_model(n, rho, window, alpha, 0.0, mode, decay, seed=seed)
    w = n if window is None else window
    big_n = model.memory.s_tm1.shape[0]
    qs = model.q_star.ravel()
    start = (tuple([0.0] * (2 * n)), tuple(float(x) for x in model.raw0))
    index, rows, frontier = {start: 0}, [], [start]
    while frontier:
        q_t, raw_t = frontier.pop()
        row = {}
        if max(abs(x - y) for x, y in zip(q_t, qs, strict=True)) > TOL:
            mass = [mass_of(x, alpha) if x > 0 else 0.0 for x in raw_t]
            total = sum(mass)
            for i in range(big_n):
                p = mass[i] / total if total > 0 else 1.0 / big_n
                if p == 0.0:
                    continue
                q, raw = list(q_t), list(raw_t)
                _replay_python(model, q, raw, i, rho, w, alpha, 0.0, mode == "add", decay, reading)
                nxt = (tuple(q), tuple(raw))
                if nxt not in index:
                    if len(index) >= max_states:
                        raise ValueError(f"more than max_states={max_states} states; use a smaller n")
                    index[nxt] = len(index)
                    frontier.append(nxt)
                row[index[nxt]] = row.get(index[nxt], 0.0) + p
        rows.append((index[(q_t, raw_t)], row))
    size = len(index)
    a_mat = np.eye(size)
    b = np.zeros(size)
    for src, row in rows:
        if row:
            b[src] = 1.0
            for dst, p in row.items():
                a_mat[src, dst] -= p
    return float(np.linalg.solve(a_mat, b)[0])


# --------------------------------------------------------------------------- Monte Carlo


@njit(cache=True)
def _pair_value(q, p, pair_r, pair_next, pair_done, gamma):
    """Value a learning-rate-1 update gives pair ``p``: ``r + gamma * max_b Q(s', b)`` (no bootstrap at a terminal)."""
    if pair_done[p]:
        return pair_r[p] + 0.0
    s_next = pair_next[p]
    return pair_r[p] + gamma * max(q[s_next, 0], q[s_next, 1])


@njit(cache=True)
def _mark(dirty, stack, n_dirty, i):
    if not dirty[i]:
        dirty[i] = True
        stack[n_dirty] = i
        n_dirty += 1
    return n_dirty


@njit(cache=True)
def _skip_to_useful(q, pair_r, pair_next, pair_done, pair_count, pair_offset, slots_by_pair, gamma, big_n, rng):
    """All masses are 0, so draws are uniform over the N slots: jump to the first one that changes Q.

    A draw of a pair whose TD error is 0 leaves Q unchanged and its priority at 0, so the
    number of draws up to the first draw of a pair with a non-zero TD error is geometric
    with success probability ``c / N`` (``c`` slots hold such pairs) and that slot is
    uniform among the ``c``.  Returns ``(slot, draws)``, or ``(-1, 0)`` if ``c = 0``.
    """
    c = 0
    for p in range(pair_count.shape[0]):
        if pair_count[p] > 0 and _pair_value(q, p, pair_r, pair_next, pair_done, gamma) != q[p // 2, p % 2]:
            c += pair_count[p]
    if c == 0:
        return -1, 0
    draws = rng.geometric(c / big_n)
    u = rng.integers(0, c)
    for p in range(pair_count.shape[0]):
        if pair_count[p] > 0 and _pair_value(q, p, pair_r, pair_next, pair_done, gamma) != q[p // 2, p % 2]:
            if u < pair_count[p]:
                return slots_by_pair[pair_offset[p] + u], draws
            u -= pair_count[p]
    return -1, 0  # pragma: no cover - unreachable


@njit(cache=True)
def _run_once(s_tm1, a_tm1, links, tables, q_star, tree, leaf0, depth, raw, params, cap, q, rng,
              dirty, stack):  # fmt: skip
    """One run of the idealised model from the filled memory; returns (steps or -1 at the cap, dirty slots)."""
    pair_r, pair_next, pair_done, pair_count, pair_offset, slots_by_pair = tables
    gamma, alpha, eps, rho, p_max, window, add_mode, fast_forward, reading = params
    big_n = s_tm1.shape[0]
    q[:, :] = 0.0
    wrong = 0
    for s in range(q.shape[0]):
        for b in range(2):
            wrong += abs(q[s, b] - q_star[s, b]) > TOL
    steps, n_dirty = 0, 0
    prev, prev_gen, generation, live = links
    none = np.empty(0)  # no extrema trees
    while wrong > 0:
        if steps >= cap:
            return -1, n_dirty
        if tree[0] > 0.0:
            i = tree_sample_one(tree, leaf0, depth, rng)
            steps += 1
        elif fast_forward:
            i, draws = _skip_to_useful(q, pair_r, pair_next, pair_done, pair_count, pair_offset, slots_by_pair, gamma,
                                       big_n, rng)  # fmt: skip
            if i < 0:
                return -1, n_dirty
            steps += draws
        else:
            i = rng.integers(0, big_n)
            steps += 1
        s, b = s_tm1[i], a_tm1[i]
        p = 2 * s + b
        before = 1 if abs(q[s, b] - q_star[s, b]) > TOL else 0
        target = _pair_value(q, p, pair_r, pair_next, pair_done, gamma)
        seen = abs(target - q[s, b]) + eps  # |delta| observed at the update
        q[s, b] = target
        wrong += (1 if abs(q[s, b] - q_star[s, b]) > TOL else 0) - before
        after = abs(_pair_value(q, p, pair_r, pair_next, pair_done, gamma) - q[s, b]) + eps  # post-update |delta|
        n_dirty = _mark(dirty, stack, n_dirty, i)
        raw[i] = after if reading == 0 else seen  # the value the decay is triggered with
        if window > 0:
            for k in range(1, window + 1):
                n_dirty = _mark(dirty, stack, n_dirty, (i - k) % big_n)
            pser_decay(raw, tree, none, leaf0, alpha, prev, prev_gen, generation, live, i, rho, window,
                       add_mode, p_max)  # fmt: skip
        if reading == 1:  # re-decay: the replayed transition itself keeps its post-update |delta|
            raw[i] = after
        tree_set(tree, none, none, leaf0, i, mass_of(raw[i], alpha))
    return steps, n_dirty


@njit(cache=True)
def _mc_runs(s_tm1, a_tm1, links, tables, q_star, tree, leaf0, depth, raw, raw0, mass0, params, cap, runs,
             rng):  # fmt: skip
    """``runs`` independent runs from the same filled memory; restores the touched slots after each."""
    big_n = s_tm1.shape[0]
    q = np.zeros(q_star.shape)
    dirty = np.zeros(big_n, dtype=np.bool_)
    stack = np.empty(big_n, dtype=np.int64)
    out = np.empty(runs, dtype=np.int64)
    none = np.empty(0)
    for run in range(runs):
        out[run], n_dirty = _run_once(s_tm1, a_tm1, links, tables, q_star, tree, leaf0, depth,
                                      raw, params, cap, q, rng, dirty, stack)  # fmt: skip
        for j in range(n_dirty):
            i = stack[j]
            dirty[i] = False
            raw[i] = raw0[i]
            tree_set(tree, none, none, leaf0, i, mass0[i])
    return out


def simulate(
    n: int,
    runs: int,
    rng,
    rho: float = 0.4,
    window: int | None = None,
    alpha: float = 1.0,
    eps: float = 0.0,
    mode: str = "max",
    decay: bool = True,
    fast_forward: bool = True,
    cap: int = 10**9,
    memory: Memory | None = None,
    reading: str = "post",
) -> np.ndarray:
    """Steps to convergence of ``runs`` independent runs of the model (-1: stopped at ``cap``).

    Faithful to the model on an actual filled memory: each step draws a slot from the
    core sum tree (``tree_sample_one``), applies the learning-rate-1 update, sets the
    slot's raw priority and, for PSER, decays backwards with the library's ``pser_decay``
    kernel, as ``reading`` says (:data:`READINGS`; ``"post"``, the theorem's idealised
    model, by default; ``"real"`` with ``eps > 0`` is PSER Algorithm 1 with ``eta = 0``).  When every mass is 0 and
    ``fast_forward`` is set, the uniform draws that cannot change Q are skipped in one
    geometric jump (exact in distribution, see :func:`_skip_to_useful`).  The runs share
    one memory (a fixed storage order): the law of the steps does not depend on the
    order, since permuting slots permutes nothing but their labels.
    """
    n = _check_n(n, MAX_EXACT_STATES)
    runs = check_positive_int("runs", runs)
    cap = check_positive_int("cap", cap)
    code = _check_reading(reading)
    rng = as_rng(rng)
    if memory is None:
        memory = build_memory(n, rng)
    model = build_model(n, rho, window, alpha, eps, mode, decay, memory=memory)
    tree = SumTree(memory.s_tm1.shape[0], track_min=False, track_max=False)
    tree.update(np.arange(memory.s_tm1.shape[0]), model.mass0)
    a = tree.arrays
    w = 0 if not decay else (n if window is None else window)
    params = (model.gamma, float(alpha), float(eps), float(rho), model.p_max, w, mode == "add", bool(fast_forward),
              code)  # fmt: skip
    tables = (model.pair_r, model.pair_next, model.pair_done, model.pair_count, model.pair_offset, model.slots_by_pair)
    raw = model.raw0.copy()
    generation, prev, prev_gen = sequential_links(memory.episode_start)
    links = (prev, prev_gen, generation, np.ones(generation.shape[0], dtype=np.bool_))
    return _mc_runs(memory.s_tm1, memory.a_tm1, links, tables, model.q_star, a.tree, a.leaf0, a.depth,
                    raw, model.raw0, model.mass0, params, cap, runs, rng)  # fmt: skip


def summarise(steps: np.ndarray) -> MCResult:
    """Mean and 95% CI half-width (normal approximation) of the converged runs."""
    ok = steps[steps >= 0].astype(np.float64)
    if ok.shape[0] < 2:
        raise ValueError(f"need at least 2 converged runs, got {ok.shape[0]}")
    half = 1.96 * ok.std(ddof=1) / math.sqrt(ok.shape[0])
    return MCResult(float(ok.mean()), float(half), int(ok.shape[0]), int((steps < 0).sum()))


def e_per_mc(n: int, runs: int = 10_000, rng=None, eps: float = 0.0, alpha: float = 1.0, **kwargs) -> MCResult:
    """Monte Carlo E_PER(n): the idealised model without decay (see :func:`simulate`)."""
    return summarise(simulate(n, runs, rng, alpha=alpha, eps=eps, decay=False, **kwargs))


def e_pser_mc(
    n: int, rho: float, window: int | None = None, runs: int = 10_000, rng=None, alpha: float = 1.0, **kwargs
) -> MCResult:
    """Monte Carlo E_PSER(n): the idealised model with the fill-time decay (see :func:`simulate`)."""
    return summarise(simulate(n, runs, rng, rho=rho, window=window, alpha=alpha, decay=True, **kwargs))


__all__ = [
    "MAX_EXACT_STATES",
    "MCResult",
    "READINGS",
    "Model",
    "build_model",
    "chain_length",
    "e_bruteforce",
    "e_per_closed",
    "e_per_exact",
    "e_per_mc",
    "e_pser_bound",
    "e_pser_bound_loose",
    "e_pser_closed",
    "e_pser_exact",
    "e_pser_mc",
    "e_reading_exact",
    "e_redecay_closed",
    "in_order_probability",
    "interval_copies",
    "simulate",
    "summarise",
]
