"""prioritylab's samplers inside stable-baselines3 (prioritylab.sb3): real SB3, real environments."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import stable_baselines3 as sb3  # the sb3 extra, installed by make test: a missing one fails, never skips
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer
from stable_baselines3.common.logger import Logger

from prioritylab.sb3 import DQN, SAC, TD3, PrioritizedReplayBuffer

BOX = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACT = spaces.Box(-1.0, 1.0, (2,), np.float32)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = th.get_num_threads()
    th.set_num_threads(1)  # small networks: threads only add noise on a shared machine
    yield
    th.set_num_threads(threads)


def _buffer(n_envs=1, size=64, **kw) -> PrioritizedReplayBuffer:
    return PrioritizedReplayBuffer(size, BOX, ACT, device="cpu", n_envs=n_envs, **kw)


def _drive(buffers, steps, n_envs, ends, seed=0):
    """Feed the same vectorised steps to every buffer, as SB3's collection loop does: env ``e`` ends an
    episode at the steps in ``ends[e]`` (a dict step -> 'terminated' or 'truncated'); observations encode
    (env, episode step, episode) so that each is unique."""
    rng = np.random.default_rng(seed)
    ep_step, episode = np.zeros(n_envs, int), np.zeros(n_envs, int)

    def observe(e):
        return np.array([e, ep_step[e], episode[e]], np.float32)

    obs = np.stack([observe(e) for e in range(n_envs)])
    for t in range(steps):
        action = rng.uniform(-1, 1, (n_envs, 2)).astype(np.float32)
        reward = rng.normal(size=n_envs).astype(np.float32)
        done, infos = np.zeros(n_envs, bool), [{} for _ in range(n_envs)]
        ep_step += 1
        next_obs = np.stack([observe(e) for e in range(n_envs)])
        for e in range(n_envs):
            how = ends[e].get(t)
            if how:
                done[e] = True
                infos[e]["TimeLimit.truncated"] = how == "truncated"
                episode[e] += 1
                ep_step[e] = 0
        reset_obs = np.stack([observe(e) for e in range(n_envs)])
        for b in buffers:
            b.add(obs, next_obs, action, reward, done, infos)
        obs = np.where(done[:, None], reset_obs, next_obs)


def _rows(buffer):
    """SB3 buffer content as {obs tuple: (next_obs, action, reward, done without timeouts)}."""
    n = buffer.size() if not buffer.full else buffer.buffer_size
    out = {}
    for t in range(n):
        for e in range(buffer.n_envs):
            done = buffer.dones[t, e] * (1 - buffer.timeouts[t, e])
            out[tuple(buffer.observations[t, e])] = (buffer.next_observations[t, e], buffer.actions[t, e],
                                                     buffer.rewards[t, e], done)  # fmt: skip
    return out


@pytest.mark.parametrize("n_envs", [1, 2])
def test_samples_hold_what_sb3_stores(n_envs):
    """Every sampled transition equals the one SB3's own buffer stored: terminated vs truncated from infos,
    the final observation as next observation, rewards and actions."""
    ends = [{5: "terminated", 11: "truncated", 17: "terminated"}, {8: "truncated", 13: "terminated"}][:n_envs]
    ours = _buffer(n_envs, size=48 * n_envs, sampler="per", seed=1)
    theirs = SB3ReplayBuffer(48 * n_envs, BOX, ACT, device="cpu", n_envs=n_envs)
    _drive([ours, theirs], 24, n_envs, ends)
    rows = _rows(theirs)
    batch = ours.sample(256)
    assert batch.observations.shape == (256, 3) and batch.rewards.shape == batch.dones.shape == (256, 1)
    assert batch.discounts is None and batch.weights.shape == (256,)
    dones_seen = set()
    for i in range(256):
        next_obs, action, reward, done = rows[tuple(batch.observations[i].numpy())]
        np.testing.assert_array_equal(batch.next_observations[i].numpy(), next_obs)
        np.testing.assert_array_equal(batch.actions[i].numpy(), action)
        assert batch.rewards[i, 0].item() == reward and batch.dones[i, 0].item() == done
        dones_seen.add(float(done))
    assert dones_seen == {0.0, 1.0}
    assert isinstance(batch, sb3.common.type_aliases.ReplayBufferSamples)


@pytest.mark.parametrize("n_envs", [1, 2, 8])
def test_buffer_size_counts_transitions_over_all_environments_as_sb3s_does(n_envs):
    """SB3's ReplayBuffer holds buffer_size // n_envs rows of n_envs transitions: so many slots here, one
    segment of buffer_size // n_envs for each environment (n_envs times as many would replay older data)."""
    ours, theirs = _buffer(n_envs, size=1000), SB3ReplayBuffer(1000, BOX, ACT, device="cpu", n_envs=n_envs)
    assert ours.buffer_size == theirs.buffer_size == 1000 // n_envs
    assert ours.replay.capacity == theirs.buffer_size * n_envs and ours.replay.seg == 1000 // n_envs


def test_a_buffer_size_too_small_for_its_environments_is_refused_naming_the_value_given():
    with pytest.raises(ValueError) as err:
        _buffer(4, size=10, n_steps=3, gamma=0.99)
    assert str(err.value) == ("buffer_size=10 gives each of the n_envs=4 environments 2 slots, fewer than the 6 it "
                              "needs (n_steps + frame_stack + 2): give buffer_size=24 or more")


BAD_BUFFER_SETTINGS = [
    ({"size": 0}, "buffer_size=0 must be a positive integer"),
    ({"sampler": "uniform", "alpha": -1.0}, "alpha must be in"),
    ({"sampler": "per", "beta0": 2.0}, "beta0 must be in [0.0, 1.0], got 2.0"),
    ({"sampler": "per", "beta0": np.nan}, "beta0 must be in [0.0, 1.0], got nan"),  # not the schedule's "start"
    ({"sampler": "uniform", "beta0": np.inf}, "beta0 must be in [0.0, 1.0]"),
    ({"gamma": "0.9"}, "gamma='0.9' must be a number in (0, 1]"),
    ({"n_steps": 0}, "n_steps=0 must be a positive integer"),
]


@pytest.mark.parametrize(("kw", "message"), BAD_BUFFER_SETTINGS)
def test_a_bad_buffer_size_or_an_unread_setting_out_of_range_is_refused_naming_it(kw, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _buffer(**kw)


def test_a_buffer_pickled_when_each_environment_had_buffer_size_slots_is_refused_naming_why():
    """Such a buffer (saved before buffer_size was divided among the environments) holds n_envs times the
    capacity its constructor arguments now give: refused in one line saying so, not loaded as another size."""
    buf = _buffer(2, size=128, sampler="per")  # 128 slots, as the earlier code gave buffer_size=64 with 2 envs
    state = buf.__getstate__()
    state["init"] = {**state["init"], "buffer_size": 64}
    with pytest.raises(ValueError, match=r"earlier prioritylab\.sb3 that gave each of its 2 environments "
                                         r"buffer_size=64 slots \(128 in all, where SB3's buffer holds 64\)"):
        PrioritizedReplayBuffer.__new__(PrioritizedReplayBuffer).__setstate__(state)


def test_timeouts_are_terminal_without_handle_timeout_termination():
    ours = _buffer(sampler="uniform", seed=0, handle_timeout_termination=False)
    _drive([ours], 12, 1, [{5: "truncated"}])
    batch = ours.sample(200)
    ended = batch.observations[:, 1] == 5  # the sixth step of episode 0, the truncated one
    assert ended.any() and (batch.dones[ended] == 1).all()


def test_multi_env_writes_and_pser_decay_stay_per_environment():
    """n_envs=4: each environment's transitions sit in its own segment, and PSER's backward decay of a
    large TD error reaches the predecessors of the same environment's episode only."""
    n = 4
    buf = _buffer(n, size=4 * 32, sampler="pser", rho=0.4, window=3, seed=0)
    _drive([buf], 20, n, [{6: "terminated"}, {9: "truncated"}, {}, {3: "terminated", 12: "terminated"}])
    replay = buf.replay
    seg = replay.seg
    written = replay.storage["kind"] != 0
    env_of_obs = replay.storage["obs"][:, 0]
    for e in range(n):
        part = slice(e * seg, (e + 1) * seg)
        assert (env_of_obs[part][written[part]] == e).all()
    sampler = replay.sampler
    everything = np.arange(replay.capacity)
    live = everything[sampler.sampleable(everything)]
    sampler.update(live, np.full(live.size, 0.1))
    before = sampler.priorities(everything).copy()
    # env 2 never ends an episode: decay from its step 10 goes to steps 9, 8, 7
    target = 2 * seg + 10
    sampler.update(np.array([target]), np.array([50.0]), replay.sampler.generations(np.array([target])))
    changed = np.flatnonzero(sampler.priorities(everything) != before)
    assert set(changed) == {target, target - 1, target - 2, target - 3}


def test_restart_outside_the_step_loop_ends_the_episode_truncated():
    """An observation that is not the previous next observation (a reset between two learn() calls) ends
    the open episode as truncated: its last transition bootstraps from the observation it reached."""
    buf = _buffer(sampler="uniform", seed=0)
    obs = np.zeros((1, 3), np.float32)
    for t in range(4):
        nxt = np.full((1, 3), t + 1, np.float32)
        buf.add(obs, nxt, np.zeros((1, 2), np.float32), np.ones(1, np.float32), np.zeros(1, bool), [{}])
        obs = nxt
    restart = np.full((1, 3), -7, np.float32)
    buf.add(restart, restart + 1, np.zeros((1, 2), np.float32), np.ones(1, np.float32), np.zeros(1, bool), [{}])
    batch = buf.sample(100)
    last = batch.observations[:, 0] == 3
    assert last.any()
    assert (batch.next_observations[last] == 4).all() and (batch.dones[last] == 0).all()
    assert not (batch.next_observations[:, 0] == -7).any()
    buf.replay.load_state_dict(buf.replay.state_dict())  # the layout checks pass


def test_float64_observations_of_a_float32_space_are_one_episode():
    """SubprocVecEnv stacks what the environments return: float64 observations of a float32 Box are stored
    cast, and compared with the previous next observation as stored, so no step reads as a restart."""
    buf = _buffer(sampler="uniform", seed=0, n_steps=3, gamma=0.9)
    obs = np.zeros((1, 3))
    for t in range(12):
        nxt = np.full((1, 3), (t + 1) / 3)  # float64, not exactly a float32
        buf.add(obs, nxt, np.zeros((1, 2)), np.ones(1), np.zeros(1, bool), [{}])
        obs = nxt
    assert not buf.replay.storage["truncated"].any()
    batch = buf.sample(200)
    np.testing.assert_allclose(batch.discounts.numpy(), 0.9**3)
    np.testing.assert_allclose(batch.rewards.numpy(), 1 + 0.9 + 0.81, rtol=1e-6)


def _dqn_kwargs(seed=0, **kw):
    return dict(seed=seed, buffer_size=2000, learning_starts=64, batch_size=32, train_freq=4, gradient_steps=1,
                policy_kwargs=dict(net_arch=[32, 32]), verbose=0, device="cpu", **kw)  # fmt: skip


def _continuous_kwargs(seed=0, **kw):
    return dict(seed=seed, buffer_size=2000, learning_starts=64, batch_size=32, train_freq=1, gradient_steps=1,
                policy_kwargs=dict(net_arch=[32, 32]), verbose=0, device="cpu", **kw)  # fmt: skip


def _params(model):
    return [p.detach().clone() for p in model.policy.parameters()]


CASES = [(DQN, sb3.DQN, "CartPole-v1", _dqn_kwargs), (TD3, sb3.TD3, "Pendulum-v1", _continuous_kwargs),
         (SAC, sb3.SAC, "Pendulum-v1", _continuous_kwargs)]  # fmt: skip


@pytest.mark.parametrize("ours_cls, sb3_cls, env_id, kwargs", CASES)
@pytest.mark.parametrize("sampler", ["uniform", "per"])
def test_update_equals_sb3_on_the_same_batch(ours_cls, sb3_cls, env_id, kwargs, sampler, tmp_path):
    """train() on the same batch from the same state gives SB3's parameters exactly: with the uniform sampler,
    and with PER at beta = 0 (all IS weights 1), through the method's own loss."""
    rb = dict(sampler=sampler) if sampler == "uniform" else dict(sampler="per", beta0=0.0)
    ours = ours_cls("MlpPolicy", env_id, replay_buffer_kwargs=rb, **kwargs())
    ours.learn(200)  # fills the buffer and trains, so the update starts from trained parameters and optimizers
    ours.save(tmp_path / "ours")
    plain = {"replay_buffer_class": SB3ReplayBuffer, "replay_buffer_kwargs": {}}
    theirs = sb3_cls.load(tmp_path / "ours", env=ours.get_env(), device="cpu", custom_objects=plain)
    assert type(theirs.replay_buffer) is SB3ReplayBuffer
    batch = ours.replay_buffer.sample(32)  # the sampler's own beta: beta0
    assert th.all(batch.weights == 1)
    ours.replay_buffer.sample = lambda *a, **k: batch
    theirs.replay_buffer.sample = lambda *a, **k: batch.sb3()
    before = _params(ours)
    for model in (ours, theirs):
        model.set_logger(Logger(None, []))
        th.manual_seed(3)
        model.train(gradient_steps=2, batch_size=32)
    changed = False
    for a, b, c in zip(_params(ours), _params(theirs), before, strict=True):
        assert th.equal(a, b)
        changed |= not th.equal(a, c)
    assert changed


def test_save_and_load_keep_the_sampler_and_continue_sampling(tmp_path):
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per"), **_dqn_kwargs())
    model.learn(400)
    sampler = model.replay_buffer.replay.sampler
    everything = np.arange(sampler.capacity)
    live = everything[sampler.sampleable(everything)]
    assert np.unique(sampler.priorities(live)).size > 10  # the TD errors have set priorities
    model.save(tmp_path / "model")
    model.save_replay_buffer(tmp_path / "replay")
    loaded = DQN.load(tmp_path / "model", env=model.get_env(), device="cpu")
    loaded.load_replay_buffer(tmp_path / "replay")
    assert isinstance(loaded.replay_buffer, PrioritizedReplayBuffer)
    np.testing.assert_array_equal(loaded.replay_buffer.replay.sampler.priorities(everything),
                                  sampler.priorities(everything))  # fmt: skip
    drawn = {}
    for name, m in (("original", model), ("loaded", loaded)):
        m.set_logger(Logger(None, []))
        th.manual_seed(5)
        m.train(gradient_steps=5, batch_size=32)
        drawn[name] = (m.replay_buffer.sample(64).indices, _params(m),
                       m.replay_buffer.replay.sampler.priorities(everything))  # fmt: skip
    np.testing.assert_array_equal(drawn["original"][0], drawn["loaded"][0])
    for a, b in zip(drawn["original"][1], drawn["loaded"][1], strict=True):
        assert th.equal(a, b)
    np.testing.assert_array_equal(drawn["original"][2], drawn["loaded"][2])


def test_a_replay_buffer_built_with_other_settings_is_refused_on_load_and_the_models_buffer_kept(tmp_path):
    """Its n-step returns discounted with another gamma, or drawn by another sampler or with other sampler
    settings, it would train the model on other targets, or draw otherwise, than the model's settings give."""
    saved = DQN("MlpPolicy", "CartPole-v1", gamma=0.9, n_steps=3, replay_buffer_kwargs=dict(sampler="per"),
                **_dqn_kwargs())  # fmt: skip
    saved.learn(100)
    saved.save_replay_buffer(tmp_path / "replay")
    for kwargs, message in ((dict(gamma=0.9, n_steps=1), "n_steps=3 where the model has n_steps=1"),
                            (dict(gamma=0.5, n_steps=3), "gamma=0.9 where the model has gamma=0.5")):
        model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per"), **kwargs, **_dqn_kwargs())
        before = model.replay_buffer
        with pytest.raises(ValueError, match=f"holds a replay buffer built with {message}"):
            model.load_replay_buffer(tmp_path / "replay")
        assert model.replay_buffer is before
    for rb, message in ((dict(alpha=0.9), "alpha=0.5 where the model has alpha=0.9"),
                        (dict(beta0=0.2), "beta0=0.5 where the model has beta0=0.2"),
                        (dict(normalise="global"), "normalise='batch' where the model has normalise='global'")):
        model = DQN("MlpPolicy", "CartPole-v1", gamma=0.9, n_steps=3, replay_buffer_kwargs=dict(sampler="per", **rb),
                    **_dqn_kwargs())  # fmt: skip
        before = model.replay_buffer
        with pytest.raises(ValueError, match=f"holds a replay buffer built with {message}"):
            model.load_replay_buffer(tmp_path / "replay")
        assert model.replay_buffer is before
    lap = DQN("MlpPolicy", "CartPole-v1", gamma=0.9, n_steps=3, replay_buffer_kwargs=dict(sampler="lap"),
              **_dqn_kwargs())  # fmt: skip
    with pytest.raises(ValueError, match="built with sampler='per' where the model has sampler='lap'"):
        lap.load_replay_buffer(tmp_path / "replay")
    same = DQN("MlpPolicy", "CartPole-v1", gamma=0.9, n_steps=3, replay_buffer_kwargs=dict(sampler="per", alpha=0.5),
               **_dqn_kwargs())  # fmt: skip  (alpha given as the default the saved buffer took: the same setting)
    same.load_replay_buffer(tmp_path / "replay")
    assert same.replay_buffer.size() == saved.replay_buffer.size()


def test_a_plain_sb3_replay_buffer_is_refused_on_load_and_the_models_buffer_kept(tmp_path):
    plain = sb3.DQN("MlpPolicy", "CartPole-v1", **_dqn_kwargs())
    plain.learn(100)
    plain.save_replay_buffer(tmp_path / "plain")
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per"), **_dqn_kwargs())
    before = model.replay_buffer
    with pytest.raises(ValueError, match=r"holds an SB3 ReplayBuffer, not a prioritylab\.sb3\.PrioritizedReplayBuffer"):
        model.load_replay_buffer(tmp_path / "plain")
    assert model.replay_buffer is before


def test_a_model_without_its_replay_buffer_resumes_and_learning_starts_may_be_zero(tmp_path):
    """Nothing sampleable at an update (a loaded model's empty buffer; a first step whose transition waits for
    the next observation): that train() call does no gradient step, where a draw would fail."""
    model = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler="per"), **_continuous_kwargs())
    model.learn(80)
    model.save(tmp_path / "model")  # no replay buffer saved
    loaded = TD3.load(tmp_path / "model", env=model.get_env(), device="cpu")
    loaded.learn(40, reset_num_timesteps=False)
    assert loaded.num_timesteps == 120 and loaded._n_updates > model._n_updates
    fresh = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per", n_steps=3),
                **{**_dqn_kwargs(), "learning_starts": 0, "train_freq": 1})  # fmt: skip
    fresh.learn(20)
    assert 0 < fresh._n_updates < 20


def test_the_models_set_random_seed_reaches_the_sampler():
    """Built without a seed, a model seeded as SB3 documents (set_random_seed before the model, for its
    networks, and the model's after it, for its environment) repeats exactly: the sampler's generator too."""
    from stable_baselines3.common.utils import set_random_seed

    runs = []
    for _ in range(2):
        set_random_seed(0)
        model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per"),
                    **_dqn_kwargs(seed=None))
        model.set_random_seed(0)
        model.learn(200)
        runs.append(_params(model))
    assert all(th.equal(a, b) for a, b in zip(*runs, strict=True))


def test_plain_sb3_with_this_buffer_repeats_from_its_seed():
    """A plain SB3 algorithm passes the buffer no seed: its sampler takes one from NumPy's global generator, which
    SB3 seeds with the model's seed before it builds the buffer, so two runs from one seed are one run (they
    differed once: the sampler took fresh entropy), and another seed gives another."""
    runs = []
    for seed in (0, 0, 1):
        model = sb3.DQN("MlpPolicy", "CartPole-v1", replay_buffer_class=PrioritizedReplayBuffer,
                        replay_buffer_kwargs=dict(sampler="uniform"), **_dqn_kwargs(seed=seed))  # fmt: skip
        model.learn(300)
        runs.append(_params(model))
    assert all(th.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert not all(th.equal(a, b) for a, b in zip(runs[0], runs[2], strict=True))


def test_plain_sb3_n_step_returns_need_the_models_gamma_and_a_gamma_without_them_is_named():
    """A plain SB3 algorithm passes the buffer neither n_steps nor gamma: n-step returns with a gamma it was not
    given would be discounted by a default (0.99 once, where the model's was 0.9), so they are refused without
    one; with the model's, an item's discount is gamma^n.  A gamma given with n_steps=1 has no effect: named."""
    kwargs = dict(replay_buffer_class=PrioritizedReplayBuffer, gamma=0.9, **_dqn_kwargs())
    with pytest.raises(ValueError, match=r"^n_steps=3 needs gamma, the model's discount"):
        sb3.DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(n_steps=3), **kwargs)
    model = sb3.DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(n_steps=3, gamma=0.9), **kwargs)
    model.learn(200)
    discounts = np.unique(model.replay_buffer.sample(64).discounts.numpy())
    powers = np.array([0.0, 0.9, 0.9**2, 0.9**3])  # an episode's end cuts the return short; a terminal: 0
    assert all(np.isclose(powers, d, rtol=1e-6).any() for d in discounts), discounts
    assert np.isclose(discounts, 0.9**3, rtol=1e-6).any() and not np.isclose(discounts, 0.99**3, rtol=1e-3).any()
    with pytest.warns(UserWarning, match=r"gamma=0\.5 has no effect with n_steps=1 \(the target discounts with the "
                                         r"model's gamma\)"):
        sb3.DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(gamma=0.5), **kwargs)


def test_the_is_normaliser_is_the_minibatchs_and_a_buffer_pickled_before_the_option_loads_as_global():
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per"), **_dqn_kwargs())
    model.learn(300)
    buffer = model.replay_buffer
    assert buffer.replay.sampler.normalise == "batch"
    old = PrioritizedReplayBuffer(buffer.buffer_size, buffer.observation_space, buffer.action_space,
                                  sampler="per", normalise="global")  # fmt: skip
    state = old.__getstate__()
    del state["init"]["normalise"]
    restored = PrioritizedReplayBuffer.__new__(PrioritizedReplayBuffer)
    restored.__setstate__(state)
    assert restored.replay.sampler.normalise == "global"


def test_learning_twice_resets_cleanly():
    """learn() called again (SB3 resets the environment) ends the open episode; the buffer stays valid."""
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="pser"), **_dqn_kwargs())
    model.learn(150)
    model.learn(150)
    replay = model.replay_buffer.replay
    replay.load_state_dict(replay.state_dict())
    assert replay.storage["truncated"].any()


@pytest.mark.parametrize("sampler", ["lap", "pal", "pser"])
def test_methods_train_sac(sampler):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler=sampler), **_continuous_kwargs())
    model.learn(120)
    assert np.isfinite(model.logger.name_to_value["train/critic_loss"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sampler="bogus"), "sampler='bogus'"),
        (dict(sampler="ners"), "sampler='ners'"),
        (dict(sampler="per", alpha=-1.0), "alpha"),
        (dict(sampler="pser", rho=2.0), "rho"),
        (dict(sampler="lap", kappa=0.0), "kappa"),
        (dict(gamma=0.0, n_steps=3), "gamma=0.0"),
        (dict(sampler="per", normalise="max"), "normalise must be one of"),
        (dict(seed=1.5), r"seed=1\.5 must be a non-negative integer"),
        (dict(seed=-1), "seed=-1 must be a non-negative integer"),
        (dict(diagnostics="yes"), "diagnostics='yes' must be True or False"),
    ],
)
def test_bad_buffer_settings_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=kwargs, **_dqn_kwargs())
    assert "\n" not in str(err.value)


def test_bad_algorithm_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="replay_buffer_class=ReplayBuffer") as err:
        TD3("MlpPolicy", "Pendulum-v1", replay_buffer_class=SB3ReplayBuffer, **_continuous_kwargs())
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="optimize_memory_usage") as err:
        DQN("MlpPolicy", "CartPole-v1", optimize_memory_usage=True, **_dqn_kwargs())
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="Dict observation"):
        PrioritizedReplayBuffer(10, spaces.Dict({"a": BOX}), ACT)


def test_dqn_per_smoke():
    """A short DQN + PER run on CartPole: priorities move and the loss is finite (learning: the slow test)."""
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_kwargs=dict(sampler="per"), **_dqn_kwargs())
    model.learn(500)
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    assert model.replay_buffer.replay.sampler.max_priority != 1.0


def test_td3_lap_smoke():
    """A short TD3 + LAP run on Pendulum: the critic loss is finite and LAP's priorities move."""
    model = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler="lap"), **_continuous_kwargs())
    model.learn(300)
    assert np.isfinite(model.logger.name_to_value["train/critic_loss"])
    assert model.replay_buffer.replay.sampler.max_priority > 1.0


def _stacked_cartpole(padding):
    import gymnasium as gym

    return gym.wrappers.FrameStackObservation(gym.make("CartPole-v1"), 3, padding_type=padding)


@pytest.mark.parametrize("n_envs", [1, 2])
def test_frame_stack_stores_frames_once_and_rebuilds_the_stacks(n_envs):
    """frame_stack=3 over gymnasium's FrameStackObservation: one frame per slot, and every sampled item (stack,
    action, reward, next stack, done) is a step the environments produced, past the ring's wrap, with episodes
    ending in it."""
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(lambda: _stacked_cartpole("reset"), n_envs=n_envs, seed=0)
    model = DQN("MlpPolicy", env, replay_buffer_kwargs=dict(sampler="per", frame_stack=3),
                **{**_dqn_kwargs(), "buffer_size": 200})  # fmt: skip
    steps, ends = set(), 0
    real_add = model.replay_buffer.add

    def add(obs, next_obs, action, reward, done, infos):
        nonlocal ends
        for i in range(n_envs):
            steps.add((obs[i].tobytes(), int(action[i]), float(reward[i]), next_obs[i].tobytes(), float(done[i])))
        ends += int(done.sum())
        real_add(obs, next_obs, action, reward, done, infos)

    model.replay_buffer.add = add
    model.learn(600)
    assert ends >= 10 and len(steps) == 600  # episodes ended, and the 200 slots were written over
    assert model.replay_buffer.replay.storage["obs"].shape[1:] == (4,)
    batch = model.replay_buffer.sample(256)
    assert batch.observations.shape == (256, 3, 4)
    sampled = zip(batch.observations.numpy(), batch.actions.numpy(), batch.rewards.numpy(),
                  batch.next_observations.numpy(), batch.dones.numpy(), strict=True)  # fmt: skip
    for obs, action, reward, next_obs, done in sampled:
        assert (obs.tobytes(), int(action[0]), float(reward[0]), next_obs.tobytes(), float(done[0])) in steps


def test_frame_stack_refuses_other_stacks():
    with pytest.raises(ValueError, match="frame_stack=3: observations must be stacks") as err:
        DQN("MlpPolicy", _stacked_cartpole("zero"), replay_buffer_kwargs=dict(frame_stack=3),
            **_dqn_kwargs()).learn(5)  # fmt: skip
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_dqn_per_learns_cartpole():
    """DQN + PER on CartPole-v1, 8,000 steps (RL Zoo's CartPole settings, shorter): measured mean returns over
    10 episodes of 241 (seed 0) and 202 (seed 1); a random policy gets about 22. Threshold 100."""
    from stable_baselines3.common.evaluation import evaluate_policy

    model = DQN("MlpPolicy", "CartPole-v1", seed=0, buffer_size=20_000, learning_starts=1000, learning_rate=2.3e-3,
                batch_size=64, target_update_interval=10, train_freq=256, gradient_steps=128,
                exploration_fraction=0.16, exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]),
                replay_buffer_kwargs=dict(sampler="per"), device="cpu", verbose=0)  # fmt: skip
    model.learn(8000)
    mean, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=10)
    assert mean > 100


@pytest.mark.slow
def test_td3_lap_learns_pendulum():
    """TD3 + LAP on Pendulum-v1, 6,000 steps: measured mean returns over 10 episodes of -377 (seed 0) and -175
    (seed 1); a random policy gets about -1,200. Threshold -800."""
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.noise import NormalActionNoise

    model = TD3("MlpPolicy", "Pendulum-v1", seed=0, buffer_size=20_000, learning_starts=1000, learning_rate=1e-3,
                gamma=0.98, action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
                policy_kwargs=dict(net_arch=[64, 64]), replay_buffer_kwargs=dict(sampler="lap"), device="cpu",
                verbose=0)  # fmt: skip
    model.learn(6000)
    mean, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=10)
    assert mean > -800


@pytest.mark.parametrize("bad", ["obs", "action", "reward"])
def test_a_refused_write_changes_nothing(bad):
    """A non-finite observation, action or reward in a step that restarts the open episode (its observation is
    not the last next observation) is refused before that episode is ended."""
    buf = _buffer(sampler="per", seed=0)
    _drive([buf], 6, 1, [{}])
    before = pickle.dumps(buf.replay.state_dict())
    row = {"obs": np.full((1, 3), 0.9, np.float32), "action": np.zeros((1, 2), np.float32),
           "reward": np.zeros(1, np.float32)}  # fmt: skip
    row[bad] = np.full_like(row[bad], np.nan)
    with pytest.raises(ValueError, match=f"{bad} holds a non-finite value: nan"):
        buf.add(row["obs"], np.zeros((1, 3), np.float32), row["action"], row["reward"], np.zeros(1, bool), [{}])
    assert pickle.dumps(buf.replay.state_dict()) == before


def test_critic_loss_weights_items_and_reports_priorities():
    """TD3 + PER: the critic loss is SB3's sum over critics of mean(w * delta^2), and each item's priority
    becomes max(|delta_1|, |delta_2|) + eps."""
    model = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler="per", beta0=1.0),
                **_continuous_kwargs())  # fmt: skip
    model.learn(150)
    model._current_progress_remaining = 1.0
    batch = model._sample(32)
    assert batch.weights.std() > 0  # beta = 1 on priorities that differ
    q1 = th.linspace(-2, 2, 32).reshape(-1, 1)
    q2 = th.linspace(3, -1, 32).reshape(-1, 1)
    target = th.zeros(32, 1)
    loss = model._critic_loss((q1, q2), target, batch)
    w = batch.weights.reshape(-1, 1)
    th.testing.assert_close(loss, (w * q1**2).mean() + (w * q2**2).mean(), rtol=1e-6, atol=0)
    sampler = model.replay_buffer.replay.sampler
    expected = th.maximum(q1.abs(), q2.abs()).reshape(-1).double().numpy() + sampler.eps
    got = sampler.priorities(batch.indices)
    last = {int(i): k for k, i in enumerate(batch.indices)}  # a slot drawn twice keeps its last update
    np.testing.assert_allclose(got, expected[[last[int(i)] for i in batch.indices]], rtol=1e-6)


def _huber(delta: th.Tensor, kappa: float) -> th.Tensor:
    """LAP/PAL eq. 29."""
    return th.where(delta.abs() <= kappa, 0.5 * delta**2, kappa * (delta.abs() - 0.5 * kappa))


def _pal(delta: th.Tensor, alpha: float, kappa: float) -> th.Tensor:
    """LAP/PAL eq. 31, with lambda over each item's largest |delta| across the critics (LAP App. D's priority)."""
    lam = th.clamp(delta.abs().amax(0), min=kappa).pow(alpha).mean()
    small = delta.abs() <= kappa
    return th.where(small, 0.5 * kappa**alpha * delta**2, kappa * delta.abs() ** (1 + alpha) / (1 + alpha)) / lam


# algorithm, environment, settings, critics, and the factor between SB3's loss and the method's 0.5 delta^2:
# TD3 sums mean(delta^2) over its critics, SAC 0.5 mean(delta^2), DQN takes Huber(1)
ALGORITHMS = [(DQN, "CartPole-v1", _dqn_kwargs, 1, 1.0), (TD3, "Pendulum-v1", _continuous_kwargs, 2, 2.0),
              (SAC, "Pendulum-v1", _continuous_kwargs, 2, 1.0)]  # fmt: skip


@pytest.mark.parametrize("algo, env_id, kwargs, critics, scale", ALGORITHMS)
@pytest.mark.parametrize("sampler", ["per", "lap", "pal"])
def test_each_algorithms_critic_loss_is_the_methods_loss_as_the_papers_write_it(algo, env_id, kwargs, critics,
                                                                                  scale, sampler):  # fmt: skip
    """PER: the agent's TD loss weighted by the IS weights (here at beta = 1, so they differ); LAP: Huber(kappa)
    unweighted (eq. 29); PAL: eq. 31. Summed over the critics, averaged over the batch, at the algorithm's
    scale; TD errors on both sides of kappa."""
    rb = dict(sampler=sampler, beta0=1.0) if sampler == "per" else dict(sampler=sampler)
    model = algo("MlpPolicy", env_id, replay_buffer_kwargs=rb, **kwargs())
    model.learn(150)
    model._current_progress_remaining = 1.0
    batch = model._sample(32)
    method = model.replay_buffer.method
    delta = th.stack([th.linspace(-3, 3, 32) * (k + 1) for k in range(critics)])  # (critics, batch)
    q = tuple(d.reshape(-1, 1) for d in delta)
    loss = model._critic_loss(q if critics > 1 else q[0], th.zeros(32, 1), batch)
    if sampler == "per":
        assert batch.weights.std() > 0
        per_item = (_huber(delta, 1.0) if algo is DQN else 0.5 * delta**2) * batch.weights
    elif sampler == "lap":
        per_item = _huber(delta, method.kappa)
    else:
        per_item = _pal(delta, method.alpha, method.kappa)
    th.testing.assert_close(loss, scale * per_item.mean(-1).sum(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("algo, env_id, kwargs, critics, scale", ALGORITHMS)
def test_train_minimises_the_loss_that_the_critic_loss_returns(algo, env_id, kwargs, critics, scale):
    """train() takes its critic's gradient from _critic_loss's value, once per gradient step: a factor s = 1
    on that value receives the value as its gradient."""
    model = algo("MlpPolicy", env_id, replay_buffer_kwargs=dict(sampler="lap"), **kwargs())
    model.learn(150)
    model.set_logger(Logger(None, []))
    original, returned = model._critic_loss, []
    s = th.ones((), requires_grad=True)

    def spy(*args):
        loss = original(*args)
        returned.append(loss.detach())
        return loss * s

    model._critic_loss = spy
    model.train(gradient_steps=1, batch_size=32)
    assert len(returned) == 1 and s.grad is not None
    th.testing.assert_close(s.grad, returned[0])


def test_the_annealed_beta_reaches_the_sampler():
    """At the run's start the IS exponent is beta0 = 0 (every weight 1); at its end, 1 (weights that differ)."""
    model = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler="per", beta0=0.0),
                **_continuous_kwargs())  # fmt: skip
    model.learn(150)
    model._current_progress_remaining = 1.0
    assert th.all(model._sample(32).weights == 1)
    model._current_progress_remaining = 0.0
    assert model._sample(32).weights.std() > 0


def test_the_samplers_stream_is_not_the_one_sb3_explores_with():
    """SB3 seeds the action space (the first, random actions) and the first environment with the seed itself:
    the sampler draws from a stream spawned from it, here and after set_random_seed."""
    model = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler="per"), **_continuous_kwargs(seed=3))
    sampler = model.replay_buffer.replay.sampler
    fresh = np.random.default_rng(3).bit_generator.state
    assert model.action_space.np_random.bit_generator.state == fresh  # how SB3 seeds it
    assert sampler.rng.bit_generator.state != fresh
    assert sampler.rng.bit_generator.state == _buffer(seed=3, sampler="per").replay.sampler.rng.bit_generator.state
    model.set_random_seed(7)
    assert model.action_space.np_random.bit_generator.state == np.random.default_rng(7).bit_generator.state
    assert sampler.rng.bit_generator.state == _buffer(seed=7, sampler="per").replay.sampler.rng.bit_generator.state
    assert sampler.rng.bit_generator.state != np.random.default_rng(7).bit_generator.state


@pytest.mark.parametrize("algo", [TD3, SAC])
def test_beta_stays_within_one_when_the_last_rollout_overshoots_the_total(algo):
    """Two environments step two at a time, so learn(101) ends at 102 steps: the progress passes 1."""
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = algo("MlpPolicy", env, replay_buffer_kwargs=dict(sampler="per"), **_continuous_kwargs())
    model.learn(101)
    assert model.num_timesteps == 102 and model._current_progress_remaining < 0
    assert model._beta() == pytest.approx(1.0)


def test_n_step_returns_follow_the_models_n_steps_and_gamma():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3's "n_steps is ignored" warning would be raised
        model = DQN("MlpPolicy", "CartPole-v1", gamma=0.5, n_steps=3, replay_buffer_kwargs=dict(sampler="per"),
                    **_dqn_kwargs())  # fmt: skip
    replay = model.replay_buffer.replay
    assert (replay.n_step, replay.gamma) == (3, 0.5) and model.n_steps == 3
    model.learn(100)
    discounts = model.replay_buffer.sample(64).discounts.numpy()
    assert set(np.round(np.unique(discounts), 6)) <= {0.0, 0.125, 0.25, 0.5}
    assert model.replay_buffer_kwargs == dict(sampler="per")  # the model's own kwargs are left as given
    given = DQN("MlpPolicy", "CartPole-v1", gamma=0.5, replay_buffer_kwargs=dict(n_steps=3), **_dqn_kwargs())
    assert (given.replay_buffer.replay.n_step, given.replay_buffer.replay.gamma) == (3, 0.5)


@pytest.mark.parametrize("n_envs, n_steps, gamma, timeouts", [(2, 3, 0.9, True), (3, 4, 0.8, False)])
def test_n_step_samples_past_the_wrap_equal_a_reference_from_the_step_log(n_envs, n_steps, gamma, timeouts):
    """Episodes end at random, terminated or cut by a time limit, in each environment, and the ring is written
    over several times: every sampled item's action, n-step return, discount, next observation and done equal
    those computed from the log of every step (a cut episode bootstraps, unless timeouts are not handled)."""
    buf = _buffer(n_envs, size=24 * n_envs, sampler="per", seed=0, n_steps=n_steps, gamma=gamma,
                  handle_timeout_termination=timeouts)  # fmt: skip
    rng = np.random.default_rng(1)
    log = [[] for _ in range(n_envs)]  # per environment: (obs, action, reward, next_obs, terminal, ended)
    episode, step = np.zeros(n_envs, int), np.zeros(n_envs, int)
    obs = np.array([[e, 0, 0] for e in range(n_envs)], np.float32)
    for _ in range(150):
        action = rng.uniform(-1, 1, (n_envs, 2)).astype(np.float32)
        reward = rng.normal(size=n_envs).astype(np.float32)
        step += 1
        next_obs = np.array([[e, step[e], episode[e]] for e in range(n_envs)], np.float32)
        done = rng.random(n_envs) < 0.12
        cut = done & (rng.random(n_envs) < 0.5)
        buf.add(obs, next_obs, action, reward, done, [{"TimeLimit.truncated": bool(c)} for c in cut])
        for e in range(n_envs):
            terminal = bool(done[e]) and not (bool(cut[e]) and timeouts)
            log[e].append((obs[e].copy(), action[e], float(reward[e]), next_obs[e].copy(), terminal, bool(done[e])))
        episode += done
        step[done] = 0
        obs = np.where(done[:, None], np.array([[e, 0, episode[e]] for e in range(n_envs)], np.float32), next_obs)
    reference = {}
    for steps in log:
        for i in range(len(steps)):
            ret, j = 0.0, i
            while True:
                ret += gamma ** (j - i) * steps[j][2]
                if steps[j][5] or j - i + 1 == n_steps or j + 1 == len(steps):
                    break
                j += 1
            complete = steps[j][5] or j - i + 1 == n_steps
            discount = 0.0 if steps[j][4] else gamma ** (j - i + 1)
            reference[tuple(steps[i][0])] = (steps[i][1], ret, discount, steps[j][3], complete)
    batch = buf.sample(1024)
    kinds = set()
    for k in range(1024):
        action, ret, discount, next_obs, complete = reference[tuple(batch.observations[k].numpy())]
        assert complete
        np.testing.assert_array_equal(batch.actions[k].numpy(), action)
        assert batch.rewards[k, 0].item() == pytest.approx(ret, rel=1e-5, abs=1e-5)
        assert batch.discounts[k, 0].item() == pytest.approx(discount, rel=1e-6)
        np.testing.assert_array_equal(batch.next_observations[k].numpy(), next_obs)
        assert batch.dones[k, 0].item() == float(discount == 0.0)
        kinds.add(discount)
    assert 0.0 in kinds and gamma**n_steps in kinds  # terminated and full returns
    assert (len(kinds) > 2) == timeouts  # returns shortened by a cut that bootstraps, only where timeouts are handled
    assert len(log[0]) > buf.buffer_size  # the ring was written over


def test_one_step_models_take_any_gamma_sb3_takes():
    """gamma = 0 (a bandit's target) is valid in SB3; one-step returns never discount, so the buffer never sees it."""
    model = DQN("MlpPolicy", "CartPole-v1", gamma=0.0, replay_buffer_kwargs=dict(sampler="per"), **_dqn_kwargs())
    model.learn(80)
    assert model.replay_buffer.replay.n_step == 1


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(n_steps=3, replay_buffer_kwargs=dict(n_steps=2)), "n_steps=3 and replay_buffer_kwargs n_steps=2"),
        (dict(gamma=0.5, replay_buffer_kwargs=dict(n_steps=3, gamma=0.9)), "gamma=0.9 differs from the model's"),
    ],
)
def test_n_step_settings_that_disagree_with_the_model_are_refused(kw, match):
    with pytest.raises(ValueError, match=match) as err:
        DQN("MlpPolicy", "CartPole-v1", **kw, **_dqn_kwargs())
    assert "\n" not in str(err.value)


def test_n_step_returns_with_reward_normalisation_are_refused_before_learning():
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0), norm_reward=True)
    with pytest.raises(ValueError, match="reward-normalising VecNormalize") as err:
        DQN("MlpPolicy", env, n_steps=3, **_dqn_kwargs())
    assert "\n" not in str(err.value)


def test_a_plain_sb3_algorithm_and_a_setting_the_sampler_does_not_read_are_named():
    """Plain SB3 reports no priorities, so PER through it samples as uniform: the buffer says so once, after
    ``UNREPORTED_BATCHES`` batches; prioritylab's TD3 reports them and draws no such warning.  A sampler setting
    the chosen sampler does not read is named when the buffer is built."""
    import warnings

    from prioritylab.sb3.buffer import UNREPORTED_BATCHES

    kwargs = {**_continuous_kwargs(), "learning_starts": 32}
    with pytest.warns(UserWarning, match=r"kappa=5\.0 has no effect with sampler='per' \(read by lap, pal\)"):
        plain = sb3.TD3("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer,
                        replay_buffer_kwargs=dict(sampler="per", kappa=5.0), **kwargs)  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        plain.learn(32 + UNREPORTED_BATCHES + 20)
    said = [str(w.message) for w in seen if "no priorities reported" in str(w.message)]
    assert len(said) == 1 and "samples and trains as uniform replay" in said[0]
    assert np.unique(plain.replay_buffer.replay.sampler.probabilities()[:100]).size == 1  # it did sample uniformly
    ours = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(sampler="per"), **kwargs)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ours.learn(32 + UNREPORTED_BATCHES + 20)
    assert not [w for w in seen if "PrioritizedReplayBuffer" in str(w.message)]
