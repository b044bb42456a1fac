"""What the agents act with, and which way their updates move, checked against their definitions.

Every score in a results table is an evaluation return, so the evaluation policy must be the one the
papers evaluate: DQN's greedy action taken with probability ``1 - eval_eps`` (from its own RNG), TD3's actor
without exploration noise, SAC's deterministic action (the squashed mean).  The targets of the updates are
checked in ``test_targets.py``; here each update must also move the right way on a fixed batch: the critics'
loss falls, TD3's actor raises ``Q_1(s, pi(s))`` and SAC's raises ``min_k Q_k(s, a)`` under a fixed critic,
and SAC's temperature rises when the policy's entropy is below its target and falls when above.  The IS
exponent follows each agent's paper: annealed from 0.4 to exactly 1 at the run's last step (PER Section
3.4) for TD3, SAC and Double DQN, fixed at 0.5 for DQN (PSER Table 4).
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_targets import (
    HIGH,
    LOW,
    OBS_DIM,
    continuous_batch,
    continuous_env,
    continuous_method,
    mlp,
    np_params,
    perturb,
)

from prioritylab.deep import dqn, sac, td3
from prioritylab.deep.methods import Method, ReplaySettings

ACTIONS = 5


@pytest.fixture(autouse=True)
def one_thread():
    """Small networks: one thread is many times faster than several on a machine that is also training."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def small_dqn(**kw):
    torch.manual_seed(0)
    cfg = dqn.DQNSettings(channels=(4, 8, 8), hidden=16, **kw)
    env = SimpleNamespace(action_space=gym.spaces.Discrete(ACTIONS),
                          observation_space=gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))  # fmt: skip
    method = Method("uniform", ReplaySettings(), dqn.DQN_DEFAULTS, 1000)
    agent = dqn.DQN(cfg, env, torch.device("cpu"), np.random.default_rng(0), torch.Generator(), method)
    perturb(agent.q, 2)  # so that the greedy action depends on the observation
    observations = np.random.default_rng(1).integers(0, 256, (200, 4, 84, 84), dtype=np.uint8)
    with torch.no_grad():
        greedy = agent.q(torch.as_tensor(observations)).argmax(1).numpy()
    assert len(set(greedy.tolist())) > 1  # the observations reach more than one greedy action
    return agent, observations, greedy


def test_dqn_evaluates_with_eval_eps_and_explores_with_its_schedule():
    agent, observations, greedy = small_dqn(eval_eps=0.0)
    assert agent.epsilon() == 1.0  # no update yet: training acts at random
    agent.start_evaluation(100)
    assert [agent.act(o, explore=False) for o in observations] == greedy.tolist()
    explored = np.array([agent.act(o, explore=True) for o in observations])
    assert 0.1 < (explored == greedy).mean() < 0.35  # 1 / 5 of uniform draws match

    agent, observations, greedy = small_dqn(eval_eps=1.0)
    agent.updates = agent.cfg.eps_decay  # the schedule's end: training acts almost greedily
    assert agent.epsilon() == pytest.approx(agent.cfg.eps_end) and agent.cfg.eps_end < 0.05
    agent.start_evaluation(100)
    evaluated = np.array([agent.act(o, explore=False) for o in observations])
    assert 0.1 < (evaluated == greedy).mean() < 0.35
    assert (np.array([agent.act(o, explore=True) for o in observations]) == greedy).mean() > 0.9


def test_dqn_evaluation_draws_from_its_own_rng():
    agent, observations, _ = small_dqn(eval_eps=0.5)
    before = agent.rng.bit_generator.state
    agent.start_evaluation(100)
    first = [agent.act(o, explore=False) for o in observations]
    assert agent.rng.bit_generator.state == before  # the training stream is not touched
    agent.start_evaluation(100)
    assert [agent.act(o, explore=False) for o in observations] == first


def small_agent(settings, agent_cls, noise_seed, **kw):
    """A small TD3 or SAC on ``test_targets``' environment (asymmetric action bounds), seeded."""
    torch.manual_seed(0)
    return agent_cls(settings(hidden=32, **kw), continuous_env(), torch.device("cpu"), np.random.default_rng(0),
                     torch.Generator().manual_seed(noise_seed), continuous_method())  # fmt: skip


def small_td3(**kw):
    return small_agent(td3.TD3Settings, td3.TD3, 7, **kw)


def small_sac(**kw):
    return small_agent(sac.SACSettings, sac.SAC, 11, **kw)


OBS = np.random.default_rng(5).normal(size=(20, OBS_DIM)).astype(np.float32)
HALF, CENTRE = (HIGH.astype(np.float64) - LOW) / 2, (HIGH.astype(np.float64) + LOW) / 2


def test_td3_evaluates_its_actor_without_noise_and_explores_with_it():
    agent = small_td3()
    actor = np_params(agent.actor)
    for obs in OBS:
        expected = CENTRE + HALF * np.tanh(mlp(actor, obs[None].astype(np.float64)))[0]
        np.testing.assert_allclose(agent.act(obs, explore=False), expected, rtol=1e-5, atol=1e-6)
    explored = np.stack([agent.act(obs, explore=True) for obs in OBS])
    greedy = np.stack([agent.act(obs, explore=False) for obs in OBS])
    assert ((explored >= LOW) & (explored <= HIGH)).all()
    assert np.abs(explored - greedy).mean() > 0.05  # expl_noise 0.1 of the half-widths 1, 2, 1


def test_sac_evaluates_its_squashed_mean_and_explores_by_sampling():
    agent = small_sac()
    actor = np_params(agent.actor)
    noise_before = agent.noise.get_state()
    for obs in OBS:
        mean = mlp(actor, obs[None].astype(np.float64))[0, :3]
        np.testing.assert_allclose(agent.act(obs, explore=False), CENTRE + HALF * np.tanh(mean), rtol=1e-5,
                                   atol=1e-6)  # fmt: skip
    assert torch.equal(agent.noise.get_state(), noise_before)  # the evaluation draws no noise
    explored = np.stack([agent.act(obs, explore=True) for obs in OBS])
    greedy = np.stack([agent.act(obs, explore=False) for obs in OBS])
    assert ((explored >= LOW) & (explored <= HIGH)).all()
    assert np.abs(explored - greedy).mean() > 0.05


def critic_loss_on(agent, batch):
    """The critics' mean squared error against the batch's fixed targets (``batch.target``)."""
    with torch.no_grad():
        q = agent.critic(batch.obs, batch.action)
    return float(((q - batch.target) ** 2).mean())


@pytest.mark.parametrize("make", [small_td3, small_sac], ids=["td3", "sac"])
def test_critic_updates_lower_the_critic_loss(make):
    agent = make(lr=1e-3)
    batch = continuous_batch(np.random.default_rng(3))
    batch.target = batch.reward  # for the measure only; the updates use their own targets
    batch.discount = torch.zeros_like(batch.discount)  # so the updates' targets are the rewards too
    before = critic_loss_on(agent, batch)
    for _ in range(200):
        agent.update(batch, continuous_method())
    after = critic_loss_on(agent, batch)
    assert after < 0.5 * before, (before, after)


def freeze(*optimisers):
    for opt in optimisers:
        for group in opt.param_groups:
            group["lr"] = 0.0


def test_td3_actor_updates_raise_the_first_critics_value():
    agent = small_td3(lr=1e-3, policy_freq=1)
    perturb(agent.critic, 1)  # a critic whose value depends on the action
    freeze(agent.critic_opt)
    batch = continuous_batch(np.random.default_rng(3))

    def value():
        with torch.no_grad():
            return float(agent.critic(batch.obs, agent.actor(batch.obs))[0].mean())

    before = value()
    for _ in range(40):
        agent.update(batch, continuous_method())
    assert value() > before + 0.5, (before, value())


def test_sac_actor_updates_raise_the_critics_value_under_a_small_temperature():
    agent = small_sac(lr=1e-3, initial_temperature=1e-4)
    perturb(agent.critic, 1)
    freeze(agent.critic_opt, agent.temp_opt)
    batch = continuous_batch(np.random.default_rng(3))

    def value():
        draw = torch.Generator().manual_seed(0)
        with torch.no_grad():
            action, _ = agent.actor(batch.obs.repeat(8, 1), draw)
            return float(agent.critic(batch.obs.repeat(8, 1), action).min(0).values.mean())

    before = value()
    for _ in range(40):
        agent.update(batch, continuous_method())
    assert value() > before + 0.5, (before, value())


@pytest.mark.parametrize(("target_entropy", "direction"), [(50.0, 1), (-50.0, -1)])
def test_sac_temperature_rises_below_its_target_entropy_and_falls_above(target_entropy, direction):
    agent = small_sac(target_entropy=target_entropy)
    before = agent.log_temp.item()
    agent.update(continuous_batch(np.random.default_rng(3)), continuous_method())
    assert np.sign(agent.log_temp.item() - before) == direction


@pytest.mark.parametrize("spec", [td3.SPEC, sac.SPEC, dqn.DDQN_SPEC], ids=["td3", "sac", "ddqn"])
@pytest.mark.parametrize("sampler", ["per", "pser", "ners"])
def test_is_exponent_anneals_from_0_4_to_exactly_1_at_the_last_step(spec, sampler):
    m = Method(sampler, ReplaySettings(), spec.defaults, total_steps=1000)
    assert [m.beta_at(t) for t in (0, 500)] == pytest.approx([0.4, 0.7], abs=1e-12)
    assert m.beta_at(1000) == m.beta_at(2000) == 1.0


@pytest.mark.parametrize("sampler", ["per", "pser"])
def test_dqn_keeps_its_is_exponent_at_0_5(sampler):
    for spec in (dqn.DQN_SPEC, dqn.MINATAR_SPECS["dqn"]):
        m = Method(sampler, ReplaySettings(), spec.defaults, total_steps=1000)
        assert [m.beta_at(t) for t in (0, 500, 1000)] == [0.5, 0.5, 0.5]
