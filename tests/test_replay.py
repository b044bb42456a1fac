"""Storage + writer + sampler composition."""

import numpy as np
import pytest

from prioritylab import make_sampler
from prioritylab.replay import ReplayBuffer


def transition(i, done=False):
    return {"obs": np.full(3, float(i)), "action": np.int64(i % 2), "reward": np.float64(i), "done": done}


def test_ring_writes_marks_episodes_and_gathers():
    buf = ReplayBuffer(make_sampler("pser", 5, seed=0, rho=0.5, window=4))
    for i in range(7):
        buf.add(transition(i, done=(i == 2)))
    assert len(buf) == 5 and buf.position == 2
    starts = buf.sampler.episode_starts(np.arange(5))
    assert starts.tolist() == [False, False, False, True, False]  # slot 3 follows the done at i = 2
    data, batch = buf.sample(4)
    assert np.array_equal(data["obs"][:, 0], data["reward"])
    assert set(data["reward"].tolist()) <= {2.0, 3.0, 4.0, 5.0, 6.0}
    td = np.array([4.0, 1.0, 2.0, 3.0])
    buf.update(batch, td)
    # Expected raw priorities, by item number (slot = item % 5): all start at the max priority 1;
    # PSER item by item: eq. 10 p = max(|delta| + eps, eta * p_old) with eta = 0.7, then MAX decay
    # p_(i-k) = max(p_(i-k), p * rho^k) for k <= 4 within the episode that starts at item 3.
    raw = {i: 1.0 for i in range(2, 7)}
    for i, d in zip(data["reward"].astype(int).tolist(), td, strict=True):
        raw[i] = max(d + 1e-6, 0.7 * raw[i])
        for j in range(i - 1, max(3, i - 4) - 1, -1):
            raw[j] = max(raw[j], raw[i] * 0.5 ** (i - j))
    expect = [raw[i] for i in (5, 6, 2, 3, 4)]
    np.testing.assert_allclose(buf.sampler.priorities(np.arange(5)), expect, rtol=1e-15, atol=0)


def test_stale_update_after_overwrite_is_ignored():
    buf = ReplayBuffer(make_sampler("per", 2, seed=0))
    buf.add(transition(0))
    buf.add(transition(1))
    _, batch = buf.sample(2)
    buf.add(transition(2))  # overwrites slot 0
    buf.update(batch, np.full(2, 5.0))
    assert buf.sampler.priorities([0])[0] == 1.0  # new item kept its max-priority entry


def test_bad_transition_leaves_buffer_unchanged():
    buf = ReplayBuffer(make_sampler("per", 4, seed=0))
    buf.add(transition(0))
    before = buf.state_dict()
    bad = transition(1)
    bad["obs"] = np.array([1.0, np.nan, 0.0])
    with pytest.raises(ValueError, match="obs"):
        buf.add(bad)
    with pytest.raises(ValueError, match="shape"):
        buf.add({**transition(1), "obs": np.zeros(4)})
    with pytest.raises(ValueError, match="td_errors"):
        buf.add(transition(1), td_error=np.inf)
    after = buf.state_dict()
    assert after["position"] == before["position"] == 1
    assert np.array_equal(after["storage"]["data"]["obs"], before["storage"]["data"]["obs"])
    assert np.array_equal(after["sampler"]["generation"], before["sampler"]["generation"])


def test_resume_continues_exactly():
    def run(buf, steps, start):
        out = []
        for i in range(start, start + steps):
            buf.add(transition(i, done=i % 4 == 3))
            data, batch = buf.sample(3, beta=0.5)
            buf.update(batch, data["reward"] * 0.1 - 0.3)
            out.append((batch.indices.copy(), batch.weights.copy()))
        return out

    a = ReplayBuffer(make_sampler("per", 8, seed=1))
    full = run(a, 20, 0)
    b = ReplayBuffer(make_sampler("per", 8, seed=1))
    first = run(b, 9, 0)
    c = ReplayBuffer(make_sampler("per", 8, seed=77))
    c.load_state_dict(b.state_dict())
    rest = run(c, 11, 9)
    for (i1, w1), (i2, w2) in zip(full, first + rest, strict=True):
        assert np.array_equal(i1, i2) and np.array_equal(w1, w2)


def test_rejected_load_and_bad_done_leave_buffer_unchanged():
    buf = ReplayBuffer(make_sampler("per", 4, seed=0))
    for i in range(3):
        buf.add(transition(i))
    other = ReplayBuffer(make_sampler("per", 4, seed=5))
    other.add(transition(7))
    state = other.state_dict()
    state["storage"]["data"]["obs"] = np.zeros((3, 3))
    before = buf.state_dict()
    with pytest.raises(ValueError, match="rows"):
        buf.load_state_dict(state)
    state = other.state_dict()
    state["sampler"]["config"]["alpha"] = 0.1
    with pytest.raises(ValueError, match="settings"):
        buf.load_state_dict(state)
    with pytest.raises(ValueError, match="done"):
        buf.add({**transition(3), "done": np.array([True, False])})
    after = buf.state_dict()
    assert after["position"] == before["position"] == 3
    assert np.array_equal(after["storage"]["data"]["obs"], before["storage"]["data"]["obs"])
    assert np.array_equal(after["sampler"]["generation"], before["sampler"]["generation"])


def test_values_that_cannot_be_stored_are_rejected_before_any_change():
    buf = ReplayBuffer(make_sampler("per", 4, seed=0))
    buf.add({"obs": np.zeros(2, dtype=np.float32), "reward": 0.0, "done": False})
    before = buf.state_dict()
    bad = [
        {"obs": np.array(["a", "b"]), "reward": 0.0, "done": False},  # strings into float32
        {"obs": np.array([1e300, 0.0]), "reward": 0.0, "done": False},  # overflows float32
        {"obs": np.zeros(2, dtype=np.float32), "reward": 1.5j, "done": False},  # complex into float64
    ]
    for transition_ in bad:
        with pytest.raises(ValueError, match="obs|reward"):
            buf.add(transition_)
    after = buf.state_dict()
    assert after["position"] == before["position"] == 1
    assert after["sampler"]["writes"] == before["sampler"]["writes"]
    assert np.array_equal(after["storage"]["data"]["obs"], before["storage"]["data"]["obs"])
