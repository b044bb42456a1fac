"""NERS's sparse-reward Pendulum (App. A.2): reward 1 only after more than 20 consecutive upright steps."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import prioritylab.deep  # noqa: F401  (registers the id)
from prioritylab.deep.sparse_pendulum import ENV_ID, SparsePendulumReward


def rollout(env, state, actions):
    env.reset(seed=0)
    env.unwrapped.state = np.array(state, dtype=np.float64)
    rewards, counts = [], []
    for a in actions:
        _, r, term, trunc, info = env.step(np.array([a], dtype=np.float32))
        rewards.append(r)
        counts.append(info["upright_steps"])
        if term or trunc:
            break
    return np.array(rewards), counts


def test_a_balanced_rod_is_rewarded_from_its_21st_upright_step_to_the_time_limit():
    env = gym.make(ENV_ID)
    rewards, _ = rollout(env, [0.0, 0.0], [0.0] * 300)  # exactly upright, no torque: it stays there
    assert len(rewards) == 200  # Pendulum-v1's time limit
    assert rewards[:20].sum() == 0 and (rewards[20:] == 1).all()
    assert rewards.sum() == 180


def test_a_hanging_rod_earns_nothing_and_leaving_the_sector_restarts_the_count():
    env = gym.make(ENV_ID)
    rewards, _ = rollout(env, [math.pi, 0.0], [0.0] * 50)
    assert rewards.sum() == 0
    # a rod upright for 25 steps then pushed out of the sector: the count restarts from 0
    inner = SparsePendulumReward(gym.make("Pendulum-v1"))
    rewards, counts = rollout(inner, [0.0, 0.0], [0.0] * 25)
    assert rewards[-1] == 1 and counts[-1] == 25
    inner.unwrapped.state = np.array([2.0, 0.0])  # outside [-pi/3, pi/3]
    _, r, *_ , info = inner.step(np.array([0.0], dtype=np.float32))
    assert r == 0 and info["upright_steps"] == 0


def test_reset_restarts_the_count_and_the_dense_reward_is_gone():
    env = gym.make(ENV_ID)
    rollout(env, [0.0, 0.0], [0.0] * 30)
    env.reset(seed=1)
    assert env.get_wrapper_attr("upright_steps") == 0
    rng = np.random.default_rng(0)
    env.reset(seed=2)
    rewards = [env.step(rng.uniform(-2, 2, 1).astype(np.float32))[1] for _ in range(100)]
    assert set(rewards) <= {0.0, 1.0}


@pytest.mark.parametrize("kwargs", [{"hold": -1}, {"hold": 2.5}, {"sector": 0.0}, {"sector": 4.0}])
def test_bad_settings_name_the_value(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        SparsePendulumReward(gym.make("Pendulum-v1"), **kwargs)
