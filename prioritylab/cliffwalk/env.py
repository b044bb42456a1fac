"""The Blind Cliffwalk (PER, Schaul et al. 2016, Section 3.1 and App. B.1).

``n`` states ``s_1 .. s_n`` (indexed ``0 .. n-1`` here) and two actions ``0``/``1``.
At every state one action is *right* and moves to the next state; the other is
*wrong* and ends the episode with reward 0.  Which action is right alternates
from state to state (App. B.1: "to make generalization across actions
impossible"), so that a linear approximator (one-hot state features and a bias, one weight vector per action) cannot
generalise across actions.  The right action at the last state ends the episode
with reward 1.  A random action sequence reaches the reward with probability
``2^-n``.

The replay memory (App. B.1) is filled by executing every one of the ``2^n``
action sequences of length ``n`` until termination, in random order.  A
sequence whose first wrong action is at state ``s_k`` (1-based) contributes
``k`` transitions; the all-right sequence contributes ``n``.  In total the
memory holds ``2^(n+1) - 2`` transitions, exactly one of them rewarded, and
each state-action pair ``(s_i, a)`` appears ``2^(n-i)`` times (1-based ``i``):
the frequency at which a uniformly random behaviour policy meets it.

Conventions of this module (the project's own choices, documented in
docs/theory/per-figures.md):

* ``right_action(n)[i] = i % 2``: action 0 is right at even (0-based) states.
* Terminal transitions (a wrong action anywhere, the right action at the last
  state) have ``done_t = True`` and ``s_t = s_tm1``; ``s_t`` is never used to
  bootstrap from a terminal transition, it is only kept a valid index.
* ``episode_start`` marks the first transition of every executed sequence;
  the transitions of one sequence are stored contiguously, in order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

MAX_STATES = 24
"""Largest ``n`` accepted: the memory holds ``2^(n+1) - 2`` transitions (n = 24: 33.5 M)."""


class Memory(NamedTuple):
    """A filled Blind Cliffwalk replay memory (arrays of equal length ``2^(n+1) - 2``).

    Attributes
    ----------
    s_tm1: int64, state the transition starts from (``0 .. n-1``).
    a_tm1: int64, action taken (0 or 1).
    r_t: float64, reward (1.0 for the single successful final step, else 0.0).
    s_t: int64, next state (equal to ``s_tm1`` on terminal transitions, unused there).
    done_t: bool, True for a wrong action and for the right action at the last state.
    episode_start: bool, True for the first transition of each executed sequence.
    """

    s_tm1: np.ndarray
    a_tm1: np.ndarray
    r_t: np.ndarray
    s_t: np.ndarray
    done_t: np.ndarray
    episode_start: np.ndarray


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_STATES:
        raise ValueError(f"n (number of states) must be an integer in [1, {MAX_STATES}], got {n!r}")
    return int(n)


def right_action(n: int) -> np.ndarray:
    """Which action is right at each state: ``i % 2`` (alternating, PER App. B.1). Shape ``(n,)``, int64."""
    n = _check_n(n)
    return np.arange(n, dtype=np.int64) % 2


def discount(n: int) -> float:
    """Discount ``gamma = 1 - 1/n`` (PER App. B.1: keeps values on the same scale for every ``n``)."""
    n = _check_n(n)
    return 1.0 - 1.0 / n


def q_star(n: int) -> np.ndarray:
    """Closed-form optimal action values, shape ``(n, 2)``.

    ``Q*(s_i, right) = gamma^(n-i)`` for 1-based ``i`` (the reward 1 is ``n - i``
    right steps away, discounted once per step after the first) and
    ``Q*(s_i, wrong) = 0``.
    """
    n = _check_n(n)
    gamma = discount(n)
    q = np.zeros((n, 2))
    i = np.arange(n)
    q[i, right_action(n)] = gamma ** (n - 1 - i)
    return q


def value_iteration(n: int, tol: float = 1e-15, max_iter: int = 10_000) -> np.ndarray:
    """Optimal action values by Bellman-optimality sweeps (the check on :func:`q_star`).

    Iterates ``Q(s, a) <- r(s, a) + gamma * (1 - done(s, a)) * max_b Q(s'(s, a), b)``
    from ``Q = 0`` until the largest change is below ``tol``.
    """
    n = _check_n(n)
    gamma = discount(n)
    right = right_action(n)
    q = np.zeros((n, 2))
    for _ in range(max_iter):
        new = np.zeros_like(q)
        for s in range(n):
            a = right[s]
            if s == n - 1:
                new[s, a] = 1.0
            else:
                new[s, a] = gamma * q[s + 1].max()
        delta = np.abs(new - q).max()
        q = new
        if delta < tol:
            return q
    raise RuntimeError(f"value iteration did not converge in {max_iter} sweeps")  # pragma: no cover


def build_memory(n: int, rng: np.random.Generator) -> Memory:
    """Execute all ``2^n`` action sequences until termination, in random order (PER App. B.1).

    Sequence ``m`` (an integer in ``[0, 2^n)``) takes action ``(m >> i) & 1`` at
    state ``i``; the sequences are executed in the order ``rng.permutation(2^n)``.
    Returns the ``2^(n+1) - 2`` transitions as a :class:`Memory`.
    """
    n = _check_n(n)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    right = right_action(n)
    order = rng.permutation(1 << n).astype(np.int64)
    actions = (order[:, None] >> np.arange(n)[None, :]) & 1  # (2^n, n) action at each state
    wrong = actions != right[None, :]
    success = ~wrong.any(axis=1)
    first_wrong = np.where(success, n - 1, wrong.argmax(axis=1))  # 0-based index of the last step
    lengths = first_wrong + 1
    total = int(lengths.sum())
    seq = np.repeat(np.arange(1 << n), lengths)
    starts = np.cumsum(lengths) - lengths
    s_tm1 = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    a_tm1 = actions[seq, s_tm1].astype(np.int64)
    last = s_tm1 == first_wrong[seq]
    done_t = last.copy()
    r_t = (last & success[seq]).astype(np.float64)
    s_t = np.where(done_t, s_tm1, s_tm1 + 1).astype(np.int64)
    episode_start = s_tm1 == 0
    return Memory(s_tm1, a_tm1, r_t, s_t, done_t, episode_start)


def memory_size(n: int) -> int:
    """Number of transitions of the filled memory: ``2^(n+1) - 2``."""
    n = _check_n(n)
    return (1 << (n + 1)) - 2


__all__ = [
    "MAX_STATES",
    "Memory",
    "build_memory",
    "discount",
    "memory_size",
    "q_star",
    "right_action",
    "value_iteration",
]
