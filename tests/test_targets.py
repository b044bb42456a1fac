"""The TD targets of TD3, SAC, DQN and Double DQN against targets computed by hand.

Each test draws one batch, records the agent's noise stream before the update, and
recomputes the target in float64 NumPy from the networks' weights: TD3's smoothing noise,
its clip and the action bounds, the twin minimum; SAC's squashed-Gaussian next action and
entropy term; DQN's clipped reward and max, Double DQN's argmax by the online network.  The
agent's update returns ``max_k |Q_k(s, a) - y|`` per item (the priority), which is compared
with the hand-computed value.  The settings make every part bite: asymmetric action bounds,
smoothing noise whose clip and bounds are both active, rewards outside [-1, 1], discounts
of 0, 1 and in between.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from prioritylab.deep import dqn, sac, td3
from prioritylab.deep.continuous import CONTINUOUS_DEFAULTS
from prioritylab.deep.methods import Method, ReplaySettings

LOW = np.array([-1.0, -3.0, 0.5], dtype=np.float32)
HIGH = np.array([1.0, 1.0, 2.5], dtype=np.float32)
OBS_DIM, BATCH = 4, 64


def continuous_env():
    return SimpleNamespace(observation_space=gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32),
                           action_space=gym.spaces.Box(LOW, HIGH, dtype=np.float32))  # fmt: skip


def continuous_batch(rng: np.random.Generator):
    discount = np.full(BATCH, 0.99, dtype=np.float32)
    discount[::5] = 0.0  # terminated
    discount[1::7] = 0.99**3  # an n-step discount
    f = lambda *shape: torch.as_tensor(rng.normal(size=shape).astype(np.float32))  # noqa: E731
    return SimpleNamespace(obs=f(BATCH, OBS_DIM), action=torch.as_tensor(rng.uniform(LOW, HIGH, (BATCH, 3)),
                           dtype=torch.float32), reward=3 * f(BATCH), next_obs=f(BATCH, OBS_DIM),
                           discount=torch.as_tensor(discount), weights=torch.ones(BATCH))  # fmt: skip


def np_params(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().double().numpy().copy() for k, v in module.state_dict().items()}


def twin_q(p: dict, obs: np.ndarray, act: np.ndarray) -> np.ndarray:
    """The twin critics, ``(2, batch)``, from their weights (``x @ W + b`` per member)."""
    x = np.concatenate([obs, act], axis=-1)
    out = []
    for k in range(2):
        h = np.maximum(x @ p["l1.weight"][k] + p["l1.bias"][k], 0)
        h = np.maximum(h @ p["l2.weight"][k] + p["l2.bias"][k], 0)
        out.append((h @ p["l3.weight"][k] + p["l3.bias"][k])[:, 0])
    return np.stack(out)


def mlp(p: dict, x: np.ndarray, prefix: str = "net") -> np.ndarray:
    for i in (0, 2):
        x = np.maximum(x @ p[f"{prefix}.{i}.weight"].T + p[f"{prefix}.{i}.bias"], 0)
    return x @ p[f"{prefix}.4.weight"].T + p[f"{prefix}.4.bias"]


def perturb(module: torch.nn.Module, seed: int) -> None:
    """Move a target network away from its online copy, so that using the wrong one shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))


def continuous_method():
    return Method("uniform", ReplaySettings(), CONTINUOUS_DEFAULTS, total_steps=1000)


def np64(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


@pytest.mark.parametrize("policy_noise, noise_clip", [(2.0, 1.5), (0.2, 0.5)])
def test_td3_target_matches_hand_computation(policy_noise, noise_clip):
    torch.manual_seed(0)
    cfg = td3.TD3Settings(hidden=32, policy_noise=policy_noise, noise_clip=noise_clip, policy_freq=2)
    noise = torch.Generator().manual_seed(7)
    agent = td3.TD3(cfg, continuous_env(), torch.device("cpu"), np.random.default_rng(0), noise, continuous_method())
    perturb(agent.critic_target, 1)
    perturb(agent.actor_target, 2)
    batch = continuous_batch(np.random.default_rng(3))
    draw = torch.Generator()
    draw.set_state(noise.get_state())
    eps = np64(torch.randn(batch.action.shape, generator=draw))
    critic, critic_t, actor_t = np_params(agent.critic), np_params(agent.critic_target), np_params(agent.actor_target)

    priority, _ = agent.update(batch, continuous_method())

    half = (HIGH.astype(np.float64) - LOW) / 2
    centre = (HIGH.astype(np.float64) + LOW) / 2
    smooth = np.clip(eps * policy_noise, -noise_clip, noise_clip) * half
    a_next = np.clip(centre + half * np.tanh(mlp(actor_t, np64(batch.next_obs))) + smooth, LOW, HIGH)
    if policy_noise > 1:  # the settings make the noise clip and the bounds both active
        assert (np.abs(eps * policy_noise) > noise_clip).any()
        assert (a_next == HIGH).any() and (a_next == LOW).any()
    q_next = twin_q(critic_t, np64(batch.next_obs), a_next).min(0)
    y = np64(batch.reward) + np64(batch.discount) * q_next
    q = twin_q(critic, np64(batch.obs), np64(batch.action))
    expected = np.abs(q - y).max(0)
    np.testing.assert_allclose(np64(priority), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("log_prob_of", ["unit", "scaled"])
def test_sac_target_matches_hand_computation(log_prob_of):
    """LAP eq. 28's log-likelihood of the squashed action in (-1, 1) (``unit``, the default), or of the action in
    the environment's range, its half-width's log subtracted (``scaled``); the bounds here have half-widths 1, 2
    and 1, so the two differ by log 2."""
    torch.manual_seed(0)
    cfg = sac.SACSettings(hidden=32, initial_temperature=0.3, log_prob_of=log_prob_of)
    noise = torch.Generator().manual_seed(11)
    agent = sac.SAC(cfg, continuous_env(), torch.device("cpu"), np.random.default_rng(0), noise, continuous_method())
    perturb(agent.critic_target, 1)
    batch = continuous_batch(np.random.default_rng(4))
    draw = torch.Generator()
    draw.set_state(noise.get_state())
    z = np64(torch.randn(batch.action.shape, generator=draw))
    critic, critic_t, actor = np_params(agent.critic), np_params(agent.critic_target), np_params(agent.actor)

    priority, _ = agent.update(batch, continuous_method())

    out = mlp(actor, np64(batch.next_obs))
    mean, log_std = out[:, :3], np.clip(out[:, 3:], cfg.log_std_min, cfg.log_std_max)
    u = mean + np.exp(log_std) * z
    half = (HIGH.astype(np.float64) - LOW) / 2
    a_next = (HIGH.astype(np.float64) + LOW) / 2 + half * np.tanh(u)
    logp = (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    logp -= np.log((half if log_prob_of == "scaled" else 1.0) * (1 - np.tanh(u) ** 2) + cfg.squash_eps).sum(-1)
    v_next = twin_q(critic_t, np64(batch.next_obs), a_next).min(0) - 0.3 * logp
    y = np64(batch.reward) + np64(batch.discount) * v_next
    expected = np.abs(twin_q(critic, np64(batch.obs), np64(batch.action)) - y).max(0)
    np.testing.assert_allclose(np64(priority), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("agent_cls", [dqn.DQN, dqn.DoubleDQN])
def test_dqn_targets_match_hand_computation(agent_cls):
    torch.manual_seed(0)
    cfg = dqn.DQNSettings(channels=(4, 8, 8), hidden=16)
    env = SimpleNamespace(action_space=gym.spaces.Discrete(5),
                          observation_space=gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))
    defaults = dqn.SPECS["ddqn" if agent_cls.double else "dqn"].defaults
    method = Method("uniform", ReplaySettings(), defaults, total_steps=1000)
    agent = agent_cls(cfg, env, torch.device("cpu"), np.random.default_rng(0), torch.Generator(), method)
    perturb(agent.target, 5)
    rng = np.random.default_rng(6)
    n = 16
    frames = lambda: torch.as_tensor(rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8))  # noqa: E731
    discount = np.where(np.arange(n) % 4 == 0, 0.0, 0.99).astype(np.float32)
    batch = SimpleNamespace(obs=frames(), action=torch.as_tensor(rng.integers(0, 5, n)),
                            reward=torch.as_tensor(rng.uniform(-3, 3, n).astype(np.float32)), next_obs=frames(),
                            discount=torch.as_tensor(discount), weights=torch.ones(n))  # fmt: skip
    with torch.no_grad():
        q_online = np64(agent.q(batch.obs))
        q_online_next = np64(agent.q(batch.next_obs))
        q_target_next = np64(agent.target(batch.next_obs))

    priority, _ = agent.update(batch, method)

    r = np64(batch.reward)
    assert (np.abs(r) > 1).any()
    if agent_cls.double:
        best = q_online_next.argmax(1)
        assert (best != q_target_next.argmax(1)).any()  # the two rules differ on this batch
        v_next = q_target_next[np.arange(n), best]
    else:
        v_next = q_target_next.max(1)
    y = np.clip(r, -1, 1) + np64(batch.discount) * v_next
    expected = np.abs(q_online[np.arange(n), np64(batch.action).astype(int)] - y)
    np.testing.assert_allclose(np64(priority), expected, rtol=1e-5, atol=1e-5)
