"""NERS's sparse-reward Pendulum ("Pendulum*", NERS Section 3.1 and App. A.2).

The NERS paper evaluates its Fig. 3 (a) and (d) on a Pendulum "slightly modified from the original
(Pendulum-v0) ... agents receive a reward 1.0 only if the rod is in sufficiently upright position
(between the angle in [-pi/3, pi/3], where the zero angle means that the rod is in completely upright
position) at least more than 20 steps" (App. A.2).  Here, on gymnasium's Pendulum-v1 (the same
dynamics, 200-step episodes):

* ``reward_t = 1`` when the rod's angle after step ``t`` is in ``[-pi/3, pi/3]`` and has been for
  more than ``hold`` consecutive steps (this one included), else ``0``.  "At least more than 20
  steps" is read as *more than* 20: the 21st consecutive upright step is the first rewarded one.
* The count restarts at 0 whenever the rod leaves the sector, and at every ``reset``.
* Observations, actions (``[-2, 2]``; the paper's table lists the action range as ``[-1, 1]``, a
  rescaling that the agents absorb: TD3's actor and noises scale to the bounds, and SAC's entropy is
  that of the squashed action in (-1, 1) by default, LAP eq. 28; SAC with ``--log-prob-of scaled``,
  as ``deep/ners_fig3.py``'s reduced runs were made, does not absorb it) and the 200-step time limit
  are Pendulum-v1's.

Registered as ``prioritylab/SparsePendulum-v1`` when :mod:`prioritylab.deep` is imported, so
``prioritylab train td3 --env prioritylab/SparsePendulum-v1`` works like any gymnasium id.  The count
is reset at each episode start, and checkpoints are taken at episode ends, so exact resume needs
nothing beyond what a Pendulum-v1 run saves.
"""

from __future__ import annotations

import math

import gymnasium as gym

ENV_ID = "prioritylab/SparsePendulum-v1"
HOLD = 20
"""Upright steps that must pass before the reward starts (App. A.2: "at least more than 20 steps")."""
SECTOR = math.pi / 3
"""Half-width of the upright sector around angle 0 (App. A.2: [-pi/3, pi/3])."""


class SparsePendulumReward(gym.Wrapper):
    """Replaces Pendulum's dense cost by NERS's sparse reward (module docstring)."""

    def __init__(self, env: gym.Env, hold: int = HOLD, sector: float = SECTOR):
        super().__init__(env)
        if int(hold) != hold or hold < 0:
            raise ValueError(f"hold must be a non-negative integer, got {hold!r}")
        if not 0 < sector <= math.pi:
            raise ValueError(f"sector must be in (0, pi], got {sector!r}")
        self.hold, self.sector = int(hold), float(sector)
        self.upright_steps = 0

    def reset(self, **kwargs):
        self.upright_steps = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        angle = math.atan2(float(obs[1]), float(obs[0]))  # Pendulum's observation: (cos, sin, angular velocity)
        self.upright_steps = self.upright_steps + 1 if abs(angle) <= self.sector else 0
        reward = 1.0 if self.upright_steps > self.hold else 0.0
        info = {**info, "upright_steps": self.upright_steps}
        return obs, reward, terminated, truncated, info


def make_sparse_pendulum(hold: int = HOLD, sector: float = SECTOR, **kwargs) -> gym.Env:
    """Pendulum-v1 (with its 200-step limit) under :class:`SparsePendulumReward`."""
    return SparsePendulumReward(gym.make("Pendulum-v1", **kwargs), hold=hold, sector=sector)


def register() -> None:
    """Register :data:`ENV_ID` with gymnasium (once)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=make_sparse_pendulum, disable_env_checker=True)

