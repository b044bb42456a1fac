"""The deep agents' replay buffer: writer, frame stacks, n-step returns, PSER links, atomic calls, resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prioritylab import make_sampler
from prioritylab.replay import ReplayBuffer, estimate_bytes
from prioritylab.replay.kernels import TRANSITION


class Driver:
    """Fake vectorised environments whose observations name themselves.

    Frame of environment ``e``, episode ``k``, step ``t``: ``[e, k, t]``; the
    observation is the stack of the ``stack`` newest frames, padded with the
    episode's first frame (the usual Atari convention).  Rewards are a
    function of ``(e, k, t)``.  Every step is recorded, so a test can rebuild
    what any stored transition must hold.
    """

    def __init__(self, n_envs, stack, rng):
        self.n, self.stack, self.rng = n_envs, stack, rng
        self.episode = list(range(n_envs))
        self.next_episode = n_envs
        self.t = [0] * n_envs
        self.log: dict[tuple[int, int], list[tuple[float, bool, bool]]] = {}

    def frame(self, e, k, t):
        return np.array([e, k, t], dtype=np.float32)

    def obs_at(self, e, k, t):
        frames = [self.frame(e, k, max(t - j, 0)) for j in range(self.stack - 1, -1, -1)]
        return np.stack(frames) if self.stack > 1 else frames[0]

    @staticmethod
    def reward(e, k, t):
        return float(e + 0.1 * k + 0.01 * t)

    def step(self, p_term, p_trunc):
        obs, nxt, rew, term, trunc = [], [], [], [], []
        for e in range(self.n):
            k, t = self.episode[e], self.t[e]
            te, tr = self.rng.random() < p_term, self.rng.random() < p_trunc
            obs.append(self.obs_at(e, k, t))
            nxt.append(self.obs_at(e, k, t + 1))
            rew.append(self.reward(e, k, t))
            term.append(te)
            trunc.append(tr and not te)
            self.log.setdefault((e, k), []).append((rew[-1], te, trunc[-1]))
            if te or tr:
                self.episode[e], self.t[e] = self.next_episode, 0
                self.next_episode += 1
            else:
                self.t[e] = t + 1
        action = np.arange(self.n, dtype=np.int64)
        return np.stack(obs), action, np.array(rew), np.stack(nxt), np.array(term), np.array(trunc)

    def expected(self, e, k, t, n_step, gamma):
        """n-step return, discount, steps and next observation, by a plain loop over the episode."""
        steps = self.log[(e, k)]
        g, m = 0.0, 0
        for i in range(n_step):
            r, te, tr = steps[t + i]
            g += gamma**i * r
            m = i + 1
            if te:
                return g, 0.0, m, self.obs_at(e, k, t + m)
            if tr:
                break
        return g, gamma**m, m, self.obs_at(e, k, t + m)


def fill(buf, driver, steps, p_term=0.1, p_trunc=0.05):
    for _ in range(steps):
        buf.add(*driver.step(p_term, p_trunc))


def make_buffer(cap=64, n_envs=2, stack=1, n_step=1, gamma=0.9, sampler="uniform", **params):
    obs_shape = (stack, 3) if stack > 1 else (3,)
    return ReplayBuffer(
        cap, obs_shape, (), sampler=make_sampler(sampler, cap, seed=0, **params), num_envs=n_envs,
        action_dtype=np.int64, frame_stack=stack, n_step=n_step, gamma=gamma,
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    n_envs=st.integers(1, 4),
    stack=st.integers(1, 4),
    n_step=st.integers(1, 4),
    steps=st.integers(1, 120),
    p_term=st.sampled_from([0.0, 0.05, 0.3]),
    p_trunc=st.sampled_from([0.0, 0.05, 0.3]),
    seed=st.integers(0, 2**16),
)
def test_every_sampleable_slot_holds_its_stacks_and_n_step_return(n_envs, stack, n_step, steps, p_term, p_trunc, seed):
    """No stack crosses an episode start or the write position, and every n-step return equals a
    plain loop over the recorded episode: checked for every slot the sampler may draw."""
    gamma = 0.9
    cap = n_envs * 16
    buf = make_buffer(cap, n_envs, stack, n_step, gamma)
    driver = Driver(n_envs, stack, np.random.default_rng(seed))
    fill(buf, driver, steps, p_term, p_trunc)
    live = np.flatnonzero(buf.sampler.sampleable(np.arange(cap)))
    assert live.shape[0] == len(buf)
    copy = make_buffer(cap, n_envs, stack, n_step, gamma)  # the load's checks hold for every state the writer makes
    copy.load_state_dict(pickle.loads(pickle.dumps(buf.state_dict())))
    assert pickle.dumps(copy.state_dict()) == pickle.dumps(buf.state_dict())
    if not live.shape[0]:
        return
    data = buf.gather(live)
    newest = data["obs"][:, -1] if stack > 1 else data["obs"]
    for i, slot in enumerate(live):
        e, k, t = (int(v) for v in newest[i])
        assert slot // (cap // n_envs) == e  # each environment writes its own segment
        np.testing.assert_array_equal(data["obs"][i], driver.obs_at(e, k, t))
        g, disc, m, nxt = driver.expected(e, k, t, n_step, gamma)
        assert data["steps"][i] == m
        np.testing.assert_allclose(data["reward"][i], g, rtol=1e-6, atol=0)  # float32 storage
        np.testing.assert_allclose(data["discount"][i], disc, rtol=1e-6, atol=0)
        np.testing.assert_array_equal(data["next_obs"][i], nxt)


@settings(max_examples=60, deadline=None)
@given(
    n_envs=st.integers(1, 4),
    steps=st.integers(5, 80),
    p_end=st.sampled_from([0.05, 0.2, 0.5]),
    window=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
)
def test_pser_decay_reaches_only_earlier_steps_of_the_same_episode(n_envs, steps, p_end, window, seed, picks):
    """For any interleaving of environments and episode ends, an update changes only the updated slot
    and earlier steps of its episode, of its environment, still in memory and within the window."""
    cap = n_envs * 12
    buf = make_buffer(cap, n_envs, sampler="pser", rho=0.5, window=window)
    driver = Driver(n_envs, 1, np.random.default_rng(seed))
    fill(buf, driver, steps, p_end, p_end / 2)
    live = np.flatnonzero(buf.sampler.sampleable(np.arange(cap)))
    if not live.shape[0]:
        return
    st_ = buf.storage
    for pick in picks:
        t = int(live[pick % live.shape[0]])
        before = buf.sampler.priorities(np.arange(cap))
        buf.sampler.update([t], [50.0])  # far above every priority: the decay must change its reach
        changed = set(np.flatnonzero(buf.sampler.priorities(np.arange(cap)) != before).tolist()) - {t}
        allowed = {
            s
            for s in range(cap)
            if st_["kind"][s] == TRANSITION
            and st_["episode"][s] == st_["episode"][t]
            and s // (cap // n_envs) == t // (cap // n_envs)
            and 0 < st_["ep_step"][t] - st_["ep_step"][s] <= window
        }
        assert changed <= allowed


def test_pser_decay_does_not_cross_environments():
    """Two environments writing alternately: an update decays only its own episode's predecessors."""
    buf = make_buffer(32, 2, sampler="pser", rho=0.5, window=4, alpha=1.0, eps=0.0)
    driver = Driver(2, 1, np.random.default_rng(0))
    fill(buf, driver, 6, p_term=0.0, p_trunc=0.0)
    env1 = np.arange(16, 32)
    before = buf.sampler.priorities(env1)
    buf.sampler.update([3], [10.0])  # environment 0, step 3
    np.testing.assert_array_equal(buf.sampler.priorities(env1), before)
    np.testing.assert_array_equal(buf.sampler.priorities([0, 1, 2, 3]), [1.25, 2.5, 5.0, 10.0])


def test_stack_is_padded_with_the_episode_first_frame_and_held_near_the_write_position():
    buf = make_buffer(16, 1, stack=4, sampler="uniform")
    driver = Driver(1, 4, np.random.default_rng(0))
    fill(buf, driver, 40, p_term=0.0, p_trunc=0.0)  # one long episode wrapping the ring
    ok = buf.sampler.sampleable(np.arange(16))
    pos = int(buf.writer["pos"][0])
    # the newest slot (no next frame yet) and the 3 oldest (their stacks lost a frame) are held
    held = {(pos - 1) % 16, pos % 16, (pos + 1) % 16, (pos + 2) % 16}
    assert set(np.flatnonzero(~ok).tolist()) == held


def test_frames_are_stored_once():
    cap = 1000
    buf = ReplayBuffer(cap, (4, 84, 84), (), sampler=make_sampler("per", cap, seed=0), obs_dtype=np.uint8,
                       action_dtype=np.int64, frame_stack=4)  # fmt: skip
    assert buf.storage["obs"].shape == (cap, 84, 84)
    stacked = 2 * cap * 4 * 84 * 84  # obs and next_obs stored as stacks per transition
    assert buf.memory_bytes() <= stacked / 7
    assert abs(buf.memory_bytes() - estimate_bytes(cap, (4, 84, 84), np.uint8, (), np.int64, 4)) < 0.05 * stacked / 7
    assert estimate_bytes(10**6, (4, 84, 84), np.uint8, (), np.int64, 4) <= 7.5e9
    bare = ReplayBuffer(cap, (4, 84, 84), (), sampler=make_sampler("per", cap, seed=0), obs_dtype=np.uint8,
                        action_dtype=np.int64, frame_stack=4, diagnostics=False)  # fmt: skip
    estimates = [estimate_bytes(cap, (4, 84, 84), np.uint8, (), np.int64, 4, diagnostics=d) for d in (True, False)]
    assert buf.memory_bytes() - bare.memory_bytes() == estimates[0] - estimates[1] == 8 * cap  # a draw count a slot


@pytest.mark.parametrize(
    ("arg", "value", "match"),
    [
        ("action", np.array([300]), "300, outside the range of int8"),
        ("action", np.array([1.5]), "must be integers"),
        ("obs", np.full((1, 3), np.nan, dtype=np.float32), "non-finite"),
        ("obs", np.full((1, 3), 1e300), "not finite as float32"),
        ("obs", np.zeros((2, 2)), "shape"),
        ("reward", np.zeros((2, 2)), "shape"),
        ("terminated", np.array([1]), "booleans"),
        ("truncated", np.zeros((1, 1), dtype=bool), "shape"),
    ],
)
def test_bad_rows_are_rejected_before_anything_changes(arg, value, match):
    buf = ReplayBuffer(16, (3,), (), sampler=make_sampler("pser", 16, seed=0), action_dtype=np.int8)
    good = {
        "obs": np.zeros((1, 3)), "action": np.array([1]), "reward": np.zeros(1), "next_obs": np.ones((1, 3)),
        "terminated": np.array([False]), "truncated": np.array([False]),
    }  # fmt: skip
    buf.add(**good)
    before = pickle.dumps(buf.state_dict())
    with pytest.raises(ValueError, match=match):
        buf.add(**{**good, arg: value})
    assert pickle.dumps(buf.state_dict()) == before


def test_gather_refuses_a_slot_that_holds_no_transition_that_can_be_drawn():
    """A slot never written, or one whose n-step return is not complete, would be read from slots holding no part
    of it (a next observation of zeros, a discount of gamma^n): refused, naming the slot; ``strict=False`` (NERS's
    features of slots drawn earlier) reads them as before."""
    from prioritylab.replay.buffer import ReplayBuffer
    from prioritylab.samplers import make_sampler

    buf = ReplayBuffer(16, (2,), (), sampler=make_sampler("per", 16, seed=0), action_dtype=np.int64, n_step=3,
                       gamma=0.9)  # fmt: skip
    for t in range(3):
        buf.add(np.full((1, 2), t, np.float32), np.array([t]), np.array([1.0], np.float32),
                np.full((1, 2), t + 1, np.float32), np.array([False]), np.array([False]))  # fmt: skip
    assert not buf.sampler.sampleable(np.arange(16)).any()  # no 3-step return complete yet
    for slot in (0, 9):
        with pytest.raises(ValueError, match=rf"indices: slot {slot} holds no transition that can be drawn"):
            buf.gather([slot])
    assert buf.gather([0, 9], strict=False)["obs"].shape == (2, 2)
    buf.add(np.full((1, 2), 3, np.float32), np.array([3]), np.array([1.0], np.float32),
            np.full((1, 2), 4, np.float32), np.array([False]), np.array([False]))  # fmt: skip
    data = buf.gather([0])  # its 3-step return is written now
    assert data["reward"][0] == pytest.approx(1 + 0.9 + 0.81) and data["discount"][0] == pytest.approx(0.729)
    np.testing.assert_array_equal(data["next_obs"][0], [3, 3])


def test_bad_slots_envs_and_devices_are_refused_before_anything_changes():
    """``gather`` reads only slots of the buffer (a slot past it would be read from outside its arrays),
    ``end_episodes`` takes integer environments, and ``sample`` refuses an unknown device before it draws (a
    draw moves the generator and the diagnostics' counts)."""
    buf = make_buffer(16, 2, sampler="per")
    fill(buf, Driver(2, 1, np.random.default_rng(0)), 5, 0.0, 0.0)
    before = pickle.dumps(buf.state_dict())
    for bad, match in (([16], r"indices\[0\] = 16 is out of range \[0, 16\)"), ([3, -1], r"indices\[1\] = -1"),
                       ([1.7], "indices must be integers")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            buf.gather(bad)
    for bad in ([0.9], ["1"]):
        with pytest.raises(ValueError, match="envs must be integers"):
            buf.end_episodes(np.zeros((2, 3)), bad)
    for device in ("gpu0", "cuda:99"):  # a name torch does not know, and a device it knows but that is not here
        with pytest.raises(ValueError, match=f"device '{device}' cannot be used here"):
            buf.sample(4, device=device)
    assert pickle.dumps(buf.state_dict()) == before
    np.testing.assert_array_equal(buf.gather([0, 1])["obs"], buf.gather(np.array([0, 1], dtype=np.int32))["obs"])


def test_a_buffer_is_refused_a_sampler_it_could_not_use():
    """per-rank samples only when every written slot may be drawn, which a buffer never allows (it holds the newest
    transition back): refused when the buffer is built, not at its first draw after the warm-up."""
    with pytest.raises(ValueError, match="sampler per-rank cannot back a ReplayBuffer"):
        ReplayBuffer(16, (3,), (), sampler=make_sampler("per-rank", 16, seed=0))
    with pytest.raises(ValueError, match="sampler capacity 8 != buffer capacity 16"):
        ReplayBuffer(16, (3,), (), sampler=make_sampler("per", 8, seed=0))


def test_greedy_td_gives_its_probabilities_before_any_slot_may_be_drawn():
    buf = ReplayBuffer(16, (3,), (), sampler=make_sampler("greedy-td", 16, seed=0), action_dtype=np.int8)
    buf.add(np.zeros((1, 3)), np.array([1]), np.zeros(1), np.ones((1, 3)), np.array([False]), np.array([False]))
    assert buf.sampler.size == 1 and not buf.sampler.sampleable(np.arange(16)).any()
    assert (buf.sampler.probabilities() == 0).all()
    assert np.isnan(buf.diagnostics_report()["coverage"])


def test_update_accepts_torch_tensors_and_skips_stale_items():
    import torch

    buf = make_buffer(16, 1, sampler="per")
    fill(buf, Driver(1, 1, np.random.default_rng(0)), 10, 0.0, 0.0)
    batch = buf.sample(4, device="cpu")
    assert isinstance(batch.obs, torch.Tensor) and batch.obs.shape == (4, 3)
    assert batch.weights.dtype == torch.float32
    buf.update(batch, torch.full((4,), 3.0))
    np.testing.assert_array_equal(buf.sampler.priorities(batch.indices), np.full(4, 3.0 + 1e-6))


def test_is_weights_below_the_float32_range_stay_positive():
    """A float64 weight of 1e-60 would be 0 as float32; the batch gives float32's smallest normal instead."""
    from prioritylab.replay.buffer import WEIGHT_FLOOR

    buf = make_buffer(16, 1, sampler="per", alpha=1.0, eps=0.0)
    fill(buf, Driver(1, 1, np.random.default_rng(0)), 10, 0.0, 0.0)
    live = np.flatnonzero(buf.sampler.sampleable(np.arange(16)))
    td = np.full(live.shape[0], 1e-30)
    td[0] = 1e30  # weight (1e30 / 1e-30)^-1 = 1e-60 relative to the smallest
    buf.sampler.update(live, td)
    batch = buf.sample(64, beta=1.0)
    assert (batch.indices == live[0]).all()  # each other slot holds 1e-60 of its mass: never drawn
    assert batch.weights.dtype == np.float32
    assert (batch.weights == WEIGHT_FLOOR).all() and WEIGHT_FLOOR == np.finfo(np.float32).tiny
    # a weight float32 can hold is handed out as it is, not raised to the floor: (1e-60)^0.5 = 1e-30
    batch = buf.sample(64, beta=0.5)
    assert (batch.indices == live[0]).all() and batch.weights.dtype == np.float32
    np.testing.assert_allclose(batch.weights, np.float32(1e-30), rtol=1e-6, atol=0)


def run_and_record(buf, driver, steps):
    out = []
    for _ in range(steps):
        buf.add(*driver.step(0.1, 0.05))
        if len(buf) >= 4:
            batch = buf.sample(4, beta=0.5)
            buf.update(batch, batch.reward.astype(np.float64) * 3.0 - 1.0)
            out.append((batch.indices.copy(), batch.weights.copy(), batch.reward.copy()))
    return out


@pytest.mark.parametrize("sampler", ["uniform", "per", "lap", "pser"])
def test_resume_is_bit_identical(sampler):
    full = make_buffer(48, 3, stack=2, n_step=2, sampler=sampler)
    drv = Driver(3, 2, np.random.default_rng(1))
    first = run_and_record(full, drv, 40)
    state = pickle.loads(pickle.dumps(full.state_dict()))
    drv_state = pickle.dumps(drv)
    rest = run_and_record(full, drv, 40)

    resumed = make_buffer(48, 3, stack=2, n_step=2, sampler=sampler)
    resumed.load_state_dict(state)
    again = run_and_record(resumed, pickle.loads(drv_state), 40)
    assert first
    for (a, b, c), (x, y, z) in zip(rest, again, strict=True):
        assert np.array_equal(a, x) and np.array_equal(b, y) and np.array_equal(c, z)
    assert pickle.dumps(full.state_dict()) == pickle.dumps(resumed.state_dict())


def test_settings_are_checked():
    s = make_sampler("per", 20, seed=0)
    with pytest.raises(ValueError, match="multiple of num_envs"):
        ReplayBuffer(20, (3,), sampler=s, num_envs=3)
    with pytest.raises(ValueError, match="slots per environment"):
        ReplayBuffer(20, (3,), sampler=s, num_envs=4, n_step=3)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(32, (3,), sampler=s)
    with pytest.raises(ValueError, match="frame_stack"):
        ReplayBuffer(20, (3, 84), sampler=s, frame_stack=4)


def test_end_episodes_truncates_an_open_episode_outside_add():
    """An episode cut by a restart outside add() ends truncated after its last step: its last n transitions
    become sampleable with returns that stop there and bootstrap from the given final observation; the
    other environments are untouched; a bad call changes nothing."""
    n_step, gamma, seg = 3, 0.5, 16
    buf = ReplayBuffer(2 * seg, (2, 3), sampler=make_sampler("per", 2 * seg, seed=0), num_envs=2, frame_stack=2,
                       n_step=n_step, gamma=gamma, action_dtype=np.int64)  # fmt: skip

    def stack(t):  # both environments at step t of their first episode, padded with the first frame
        frames = [np.stack([np.full(3, max(t - 1, 0) + 10 * e), np.full(3, t + 10 * e)]) for e in range(2)]
        return np.stack(frames).astype(np.float32)

    no = np.zeros(2, bool)
    for t in range(5):
        buf.add(stack(t), np.zeros(2, np.int64), np.full(2, t + 1.0, np.float32), stack(t + 1), no, no)
    live = buf.sampler.sampleable(np.arange(2 * seg))
    assert np.flatnonzero(live).tolist() == [0, 1, seg, seg + 1]
    before = buf.state_dict()
    with pytest.raises(ValueError, match="envs must be in"):
        buf.end_episodes(stack(5), [2])
    np.testing.assert_array_equal(buf.state_dict()["sampler"]["sampleable"], before["sampler"]["sampleable"])
    buf.end_episodes(stack(5), [0])
    live = buf.sampler.sampleable(np.arange(2 * seg))
    assert np.flatnonzero(live).tolist() == [0, 1, 2, 3, 4, seg, seg + 1]
    data = buf.gather(np.array([3, 4]))
    np.testing.assert_allclose(data["reward"], [4 + gamma * 5, 5])  # rewards of steps 3, 4 (t + 1)
    np.testing.assert_allclose(data["discount"], [gamma**2, gamma])  # truncated: bootstrap
    np.testing.assert_array_equal(data["next_obs"][1], stack(5)[0])
    # a new episode starts in environment 0 while environment 1 goes on
    restart = stack(0)
    restart[0] += 100
    buf.add(np.stack([restart[0], stack(5)[1]]), np.zeros(2, np.int64), np.ones(2, np.float32), stack(1), no, no)
    buf.load_state_dict(buf.state_dict())  # the layout checks accept the result


@pytest.mark.parametrize("name", ["per", "pser"])
@pytest.mark.parametrize("call", ["add", "add ending an episode", "end_episodes"])
def test_a_write_the_sampler_refuses_near_the_float_range_leaves_the_buffer_unchanged(name, call):
    """A slot is written at the largest priority so far and adds its mass once its n-step return is complete:
    near the float range the sampler refuses that mass.  The buffer's rows, writer and diagnostics must then be
    as before, and it must go on as a buffer that was never asked (an episode's end also writes a tail slot)."""

    def build():
        keep = {"eta": 0.0} if name == "pser" else {}  # PSER keeps eta of a slot's old priority: none here
        buf = ReplayBuffer(32, (3,), (), sampler=make_sampler(name, 32, alpha=1.0, seed=0, **keep), num_envs=2,
                           action_dtype=np.int64, n_step=2, gamma=0.9, diagnostics=True)  # fmt: skip
        driver = Driver(2, 1, np.random.default_rng(0))
        fill(buf, driver, 6, 0.0, 0.0)
        buf.sampler.update(np.array([0, 16]), np.full(2, 6e307))  # the total: 1.2e308 of 1.8e308
        fill(buf, driver, 2, 0.0, 0.0)  # slots written at 6e307, held until their returns are complete
        return buf

    def write(b):
        if call == "end_episodes":
            b.end_episodes(np.ones((2, 3)), [0, 1])
        else:
            b.add(np.zeros((2, 3)), np.array([1, 2]), np.zeros(2), np.ones((2, 3)),
                  np.array([call == "add ending an episode", False]), np.array([False, False]))  # fmt: skip

    buf = build()
    before = pickle.dumps(buf.state_dict())
    with pytest.raises(ValueError, match="overflows the float range"):
        write(buf)
    assert pickle.dumps(buf.state_dict()) == before
    twin = build()
    for b in (buf, twin):  # back in range: the same write is taken, as by a buffer never refused
        written = np.flatnonzero(b.sampler.generations(np.arange(32)) >= 0)
        b.sampler.update(written, np.ones(written.size))
        write(b)
    assert pickle.dumps(buf.state_dict()) == pickle.dumps(twin.state_dict())


@pytest.mark.parametrize("obs_shape", [(84, 84), (3, 84, 84), (84,)])
def test_the_memory_formula_refuses_a_frame_shape_given_for_a_stacked_observation(obs_shape):
    """With frame_stack 4 the buffer takes the stacked shape (4, 84, 84): (84, 84) read as one would drop a frame axis
    and give 221 bytes a slot where the buffer takes 7,193."""
    with pytest.raises(ValueError, match=r"must be the stacked observation's, its first axis the frame_stack 4"):
        estimate_bytes(10**6, obs_shape, np.uint8, (), np.int64, frame_stack=4)
    assert estimate_bytes(10**6, (4, 84, 84), np.uint8, (), np.int64, frame_stack=4) == 7_193 * 10**6
