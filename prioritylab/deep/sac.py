"""SAC (Haarnoja et al., 2018) with any replay method, settings as in LAP/PAL App. D, Table 6.

Twin critics, a squashed Gaussian policy with log-std clipped to (-20, 2) and
eps = 1e-6 in the squashing correction, and a learned entropy temperature
with target ``-|A|``.  Everything else (networks, Adam 3e-4, batch 256,
tau 0.005, 25k random steps) is as for TD3.  The priority of an item is
``max(|delta_1|, |delta_2|)``; the discount is zeroed only on termination.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from .continuous import (
    ContinuousSettings,
    adam,
    check_continuous,
    continuous_spec,
    critic_step,
    polyak,
)
from .methods import Method
from .nets import GaussianActor, TwinQ
from .run import SettingsError


@dataclass
class SACSettings(ContinuousSettings):
    """SAC on a continuous-action gymnasium environment (LAP/PAL App. D, Table 6)."""

    log_std_min: float = -20.0
    """Lower clip of the policy's log-std (Table 6)."""
    log_std_max: float = 2.0
    """Upper clip of the policy's log-std (Table 6)."""
    squash_eps: float = 1e-6
    """Epsilon inside log(1 - tanh(u)^2 + eps) (Table 6)."""
    log_prob_of: str = "unit"
    """Whose log-likelihood the entropy terms use: "unit", the squashed action in (-1, 1), as LAP eq. 28 has it
    ("assumes the action is scaled within (-1, 1)"), so the target -|A| means the same on every action range;
    or "scaled", the action in the environment's range, its half-width's log subtracted per dimension (on
    Pendulum's [-2, 2] a policy half as wide against the range). Runs recorded before this setting used "scaled";
    on a range of [-1, 1] the two are the same."""
    initial_temperature: float = 1.0
    """Initial entropy temperature, then learned (ours, log temperature 0: no paper here gives a value)."""
    target_entropy: float | None = None
    """Entropy target; None: -|A|, minus the action dimension (Table 6)."""


class SAC:
    """SAC's networks and update."""

    stat_keys = ("critic_loss", "actor_loss", "temperature")

    def __init__(self, cfg: SACSettings, env: gym.Env, device: torch.device, rng: np.random.Generator,
                 noise: torch.Generator, method: Method):  # fmt: skip
        obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
        low, high = env.action_space.low.astype(np.float32), env.action_space.high.astype(np.float32)
        self.cfg, self.device, self.rng, self.noise = cfg, device, rng, noise
        self.actor = GaussianActor(obs_dim, act_dim, low, high, cfg.hidden, cfg.log_std_min, cfg.log_std_max,
                                   cfg.squash_eps, cfg.log_prob_of).to(device)  # fmt: skip
        self.critic = TwinQ(obs_dim, act_dim, cfg.hidden).to(device)
        self.critic_target = copy.deepcopy(self.critic)
        self.log_temp = torch.tensor(np.log(cfg.initial_temperature), dtype=torch.float32, device=device,
                                     requires_grad=True)  # fmt: skip
        self.actor_opt = adam(self.actor.parameters(), cfg.lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.lr)
        self.temp_opt = adam([self.log_temp], cfg.lr)
        self.target_entropy = -float(act_dim) if cfg.target_entropy is None else cfg.target_entropy
        self.updates = 0

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        with torch.inference_mode():  # once per env step: the lean path (from_numpy, no autograd bookkeeping)
            o = torch.from_numpy(np.asarray(obs, dtype=np.float32))[None].to(self.device)
            a, _ = self.actor(o, self.noise, deterministic=not explore)
        return a[0].cpu().numpy()

    def update(self, batch, method: Method) -> tuple[torch.Tensor, dict]:
        temp = self.log_temp.detach().exp()
        with torch.no_grad():
            next_action, next_logp = self.actor(batch.next_obs, self.noise)
            q_next = self.critic_target(batch.next_obs, next_action).min(0).values - temp * next_logp
            target = batch.reward + batch.discount * q_next
        q, delta, critic_loss = critic_step(self.critic, self.critic_opt, batch, target, method)

        action, logp = self.actor(batch.obs, self.noise)
        actor_loss = (temp * logp - self.critic.frozen(batch.obs, action).min(0).values).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        temp_loss = -(self.log_temp * (logp.detach() + self.target_entropy)).mean()
        self.temp_opt.zero_grad(set_to_none=True)
        temp_loss.backward()
        self.temp_opt.step()
        polyak(self.critic_target, self.critic, self.cfg.tau)
        self.updates += 1
        stats = {"critic_loss": critic_loss.item(), "actor_loss": actor_loss.item(), "temperature": float(temp),
                 "q_values": q[0].detach()}  # fmt: skip
        return method.priority(delta), stats

    _parts = ("actor", "critic", "critic_target", "actor_opt", "critic_opt", "temp_opt")

    def state_dict(self) -> dict:
        state = {name: getattr(self, name).state_dict() for name in self._parts}
        return state | {"log_temp": self.log_temp.detach().clone(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        for name in self._parts:
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_temp.copy_(state["log_temp"])
        self.updates = state["updates"]


def check_sac(cfg: SACSettings) -> None:
    check_continuous(cfg)
    if not cfg.log_std_min < cfg.log_std_max:
        raise SettingsError(f"--log-std-min {cfg.log_std_min} must be below --log-std-max {cfg.log_std_max}")
    if not cfg.initial_temperature > 0:
        raise SettingsError(f"initial_temperature must be positive, got {cfg.initial_temperature!r}")
    if not cfg.squash_eps > 0:
        raise SettingsError(f"squash_eps must be positive, got {cfg.squash_eps!r}")
    if cfg.log_prob_of not in ("unit", "scaled"):
        raise SettingsError(f"log_prob_of must be 'unit' or 'scaled', got {cfg.log_prob_of!r}")


SPEC = continuous_spec("sac", check_sac, SAC)
SPECS = {"sac": SPEC}
SETTINGS = {"sac": SACSettings}
