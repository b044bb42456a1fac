"""TD3 (Fujimoto et al., 2018) with any replay method, settings as in LAP/PAL App. D, Table 6.

Clipped double Q-learning with twin critics, target policy smoothing and
delayed actor updates.  The critic's loss and the sampler come from the replay
method (:mod:`prioritylab.deep.methods`); the priority of an item is
``max(|delta_1|, |delta_2|)``.  The discount is zeroed only on termination,
never on truncation (the buffer returns ``discount = 0`` only for terminated
steps).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from .continuous import (
    CONTINUOUS_DEFAULTS,
    ContinuousSettings,
    adam,
    check_continuous,
    continuous_spec,
    critic_step,
    polyak,
)
from .methods import Method
from .nets import DeterministicActor, TwinQ
from .run import SettingsError


@dataclass
class TD3Settings(ContinuousSettings):
    """TD3 on a continuous-action gymnasium environment (LAP/PAL App. D, Table 6)."""

    expl_noise: float = 0.1
    """Std of the Gaussian exploration noise, as a fraction of the action range's half-width (Table 6: 0.1)."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise, scaled by the half-width (Table 6: 0.2)."""
    noise_clip: float = 0.5
    """Clip of the smoothing noise, scaled by the half-width (Table 6: 0.5)."""
    policy_freq: int = 2
    """Actor and target updates every this many critic updates (NERS Table B.1, "policy update frequency 2";
    TD3's delay).  LAP App. D.1 words the Polyak step as "after each learning update", and NERS Table B.1 as
    "soft update with interval 1"; here, as in TD3, the targets move with the delayed actor update."""


class TD3:
    """TD3's networks and update (Fujimoto et al., 2018, Algorithm 1)."""

    stat_keys = ("critic_loss", "actor_loss")

    def __init__(self, cfg: TD3Settings, env: gym.Env, device: torch.device, rng: np.random.Generator,
                 noise: torch.Generator, method: Method):  # fmt: skip
        obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
        low, high = env.action_space.low.astype(np.float32), env.action_space.high.astype(np.float32)
        self.cfg, self.device, self.rng, self.noise = cfg, device, rng, noise
        self.actor = DeterministicActor(obs_dim, act_dim, low, high, cfg.hidden).to(device)
        self.critic = TwinQ(obs_dim, act_dim, cfg.hidden).to(device)
        self.actor_target = copy.deepcopy(self.actor)
        self.critic_target = copy.deepcopy(self.critic)
        self.actor_opt = adam(self.actor.parameters(), cfg.lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.lr)
        self.low = torch.as_tensor(low, device=device)
        self.high = torch.as_tensor(high, device=device)
        self.half = (self.high - self.low) / 2
        self._half_np = (high - low) / 2
        self._low_np, self._high_np = low, high
        self._expl_std = cfg.expl_noise * self._half_np
        self.updates = 0
        self.last_actor_loss = float("nan")  # logged at evaluations that fall between two actor updates

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        with torch.inference_mode():  # once per env step: the lean path (from_numpy, no autograd bookkeeping)
            x = torch.from_numpy(np.asarray(obs, dtype=np.float32))[None].to(self.device)
            a = self.actor(x)[0].cpu().numpy()
        if explore:
            a = a + self.rng.normal(0.0, self._expl_std)
            a = np.clip(a, self._low_np, self._high_np)
        return a.astype(np.float32)

    def update(self, batch, method: Method) -> tuple[torch.Tensor, dict]:
        cfg = self.cfg
        with torch.no_grad():
            eps = torch.randn(batch.action.shape, generator=self.noise, device=self.device)
            smooth = (eps * cfg.policy_noise).clamp(-cfg.noise_clip, cfg.noise_clip) * self.half
            next_action = torch.max(torch.min(self.actor_target(batch.next_obs) + smooth, self.high), self.low)
            q_next = self.critic_target(batch.next_obs, next_action).min(0).values
            target = batch.reward + batch.discount * q_next
        q, delta, critic_loss = critic_step(self.critic, self.critic_opt, batch, target, method)
        self.updates += 1
        stats = {"critic_loss": critic_loss.item(), "actor_loss": self.last_actor_loss, "q_values": q[0].detach()}
        if self.updates % cfg.policy_freq == 0:
            actor_loss = -self.critic.frozen(batch.obs, self.actor(batch.obs), members=1)[0].mean()  # Q_1 only
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            polyak(self.critic_target, self.critic, cfg.tau)
            polyak(self.actor_target, self.actor, cfg.tau)
            self.last_actor_loss = stats["actor_loss"] = actor_loss.item()
        return method.priority(delta), stats

    def state_dict(self) -> dict:
        parts = {name: getattr(self, name).state_dict() for name in self._parts}
        return parts | {"updates": self.updates, "last_actor_loss": self.last_actor_loss}

    def load_state_dict(self, state: dict) -> None:
        for name in self._parts:
            getattr(self, name).load_state_dict(state[name])
        self.updates = state["updates"]
        self.last_actor_loss = state["last_actor_loss"]

    _parts = ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt")


def check_td3(cfg: TD3Settings) -> None:
    check_continuous(cfg)
    for name in ("expl_noise", "policy_noise", "noise_clip"):
        if getattr(cfg, name) < 0:
            raise SettingsError(f"{name} must be >= 0, got {getattr(cfg, name)!r}")
    if cfg.policy_freq <= 0:
        raise SettingsError(f"policy_freq must be positive, got {cfg.policy_freq!r}")




SPEC = continuous_spec("td3", check_td3, TD3)
SPECS = {"td3": SPEC}
SETTINGS = {"td3": TD3Settings}
__all__ = ["CONTINUOUS_DEFAULTS", "SETTINGS", "SPEC", "SPECS", "TD3", "TD3Settings", "check_td3"]
