"""The Blind Cliffwalk memory and ground truth (PER Section 3.1, App. B.1)."""

import re

import numpy as np
import pytest

from prioritylab.cliffwalk.env import (
    build_memory,
    discount,
    memory_size,
    q_star,
    right_action,
    value_iteration,
)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11])
def test_transition_count_and_single_reward(n):
    mem = build_memory(n, np.random.default_rng(n))
    assert mem.s_tm1.shape[0] == 2 ** (n + 1) - 2 == memory_size(n)
    assert all(a.shape == mem.s_tm1.shape for a in mem)
    assert mem.r_t.sum() == 1.0
    k = int(np.flatnonzero(mem.r_t)[0])
    assert mem.s_tm1[k] == n - 1 and mem.a_tm1[k] == right_action(n)[n - 1] and mem.done_t[k]
    assert mem.s_tm1.dtype == np.int64 and mem.r_t.dtype == np.float64 and mem.done_t.dtype == bool


@pytest.mark.parametrize("n", [1, 2, 4, 7, 10])
def test_each_state_action_appears_2_to_the_n_minus_i_times(n):
    mem = build_memory(n, np.random.default_rng(0))
    counts = np.zeros((n, 2), dtype=int)
    np.add.at(counts, (mem.s_tm1, mem.a_tm1), 1)
    i = np.arange(1, n + 1)  # 1-based state index
    np.testing.assert_array_equal(counts, np.repeat((2 ** (n - i))[:, None], 2, axis=1))


@pytest.mark.parametrize("n", [2, 5, 9])
def test_episodes_are_the_2n_sequences_stored_contiguously(n):
    mem = build_memory(n, np.random.default_rng(3))
    starts = np.flatnonzero(mem.episode_start)
    assert starts.shape[0] == 2**n  # every action sequence is executed once
    assert starts[0] == 0
    ends = np.append(starts[1:], mem.s_tm1.shape[0])
    lengths = ends - starts
    right = right_action(n)
    for b, e in zip(starts, ends, strict=True):
        np.testing.assert_array_equal(mem.s_tm1[b:e], np.arange(e - b))  # s_1, s_2, ... in order
        assert mem.done_t[e - 1] and not mem.done_t[b : e - 1].any()
        np.testing.assert_array_equal(mem.a_tm1[b : e - 1], right[: e - b - 1])  # right until the last step
        np.testing.assert_array_equal(mem.s_t[b : e - 1], np.arange(1, e - b))
    # a sequence whose first wrong action is at state k (1-based) has length k: 2^(n-k) of them (k < n), 2 of length n
    hist = np.bincount(lengths, minlength=n + 1)[1:]
    expected = np.array([2 ** (n - k) for k in range(1, n)] + [2])
    np.testing.assert_array_equal(hist, expected)


def test_wrong_actions_terminate_without_reward():
    n = 6
    mem = build_memory(n, np.random.default_rng(1))
    wrong = mem.a_tm1 != right_action(n)[mem.s_tm1]
    assert mem.done_t[wrong].all() and (mem.r_t[wrong] == 0).all()
    np.testing.assert_array_equal(mem.s_t[mem.done_t], mem.s_tm1[mem.done_t])


def test_order_is_random_and_seeded():
    a = build_memory(8, np.random.default_rng(0))
    b = build_memory(8, np.random.default_rng(0))
    c = build_memory(8, np.random.default_rng(1))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.a_tm1, c.a_tm1)
    key = lambda m: np.sort(m.s_tm1 * 2 + m.a_tm1)  # noqa: E731
    np.testing.assert_array_equal(key(a), key(c))


def test_right_action_alternates_and_discount():
    np.testing.assert_array_equal(right_action(5), [0, 1, 0, 1, 0])
    assert discount(16) == pytest.approx(15 / 16)
    assert discount(1) == 0.0


@pytest.mark.parametrize("n", list(range(1, 17)))
def test_closed_form_q_star_equals_value_iteration(n):
    q = q_star(n)
    np.testing.assert_allclose(q, value_iteration(n), rtol=0, atol=1e-12)
    gamma = 1 - 1 / n
    right = right_action(n)
    assert q[n - 1, right[n - 1]] == 1.0
    assert q[0, right[0]] == pytest.approx(gamma ** (n - 1))
    assert (q[np.arange(n), 1 - right] == 0).all()


@pytest.mark.parametrize("bad", [0, -1, 25, 2.0, "3", True, None])
def test_bad_n_raises(bad):
    message = rf"n \(number of states\) must be an integer in \[1, \d+\], got {re.escape(repr(bad))}$"
    with pytest.raises(ValueError, match=message):
        build_memory(bad, np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        q_star(bad)


def test_rng_must_be_a_generator():
    with pytest.raises(ValueError, match="Generator"):
        build_memory(3, 0)
