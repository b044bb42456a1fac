"""SB3's DQN, TD3 and SAC with prioritised replay: IS weights in the critic loss, TD errors back to the sampler.

Each ``train()`` is SB3 2.9's, step for step, with three lines changed (marked
``# prioritylab``): a call with no sampleable transition yet does nothing
(:meth:`_Prioritized._nothing_to_sample`), the batch is drawn through :meth:`_Prioritized._sample`
(the IS exponent beta annealed over the run's progress) and the critic loss is
:meth:`_Prioritized._critic_loss`, the replay method's loss
(:meth:`prioritylab.deep.methods.Method.critic_loss`) over the critics' TD
errors, which also hands ``max_k |delta_k|`` to the sampler.  With
``sampler="uniform"`` the loss is SB3's own (MSE for TD3 and SAC, Huber(1)
for DQN), so the update is SB3's.
"""

from __future__ import annotations

import numpy as np
import stable_baselines3 as sb3
import torch as th
from stable_baselines3.common.utils import polyak_update

from .buffer import PrioritizedReplayBuffer, PrioritizedSamples

MODEL_SETTINGS = ("sampler", "n_steps", "frame_stack", "n_envs", "buffer_size", "handle_timeout_termination",
                  "observation_space", "action_space")
"""What a loaded replay buffer must share with the model it is loaded into (and ``gamma`` where returns are
n-step, and the settings its sampler reads): the model built its own buffer with them, and a buffer built
otherwise would train it on other data, or draw it otherwise."""


RESOLVED = ("alpha", "beta0", "eps", "kappa")
"""The method's settings that :class:`~prioritylab.deep.methods.Method` resolves against the agent's table."""


def _method_settings(buffer: PrioritizedReplayBuffer) -> dict:
    """The settings its replay method reads (``METHOD_TABLE``'s ``reads``), as resolved: a default given
    explicitly and one left unset are the same setting."""
    method = buffer.method
    return {key: getattr(method, key) if key in RESOLVED else getattr(method.settings, key)
            for key in method.entry.reads}  # fmt: skip


def _settings_differ(loaded: PrioritizedReplayBuffer, model: PrioritizedReplayBuffer) -> str:
    """The first :data:`MODEL_SETTINGS` (then ``gamma``, then the settings the sampler reads) on which a loaded
    buffer and the model's buffer differ, as text (``"n_steps=3 where the model has n_steps=1"``); empty if
    none.  A loaded buffer keeps its own sampler's settings, so one built with another ``alpha`` would train
    the model with that ``alpha`` while its ``replay_buffer_kwargs`` say otherwise."""
    ours, theirs = loaded._init, model._init
    keys = [*MODEL_SETTINGS, *(("gamma",) if max(ours.get("n_steps", 1), theirs.get("n_steps", 1)) > 1 else ())]
    for key in keys:
        if ours.get(key) != theirs.get(key):
            return f"{key}={ours.get(key)!r} where the model has {key}={theirs.get(key)!r}"
    ours, theirs = _method_settings(loaded), _method_settings(model)
    for key in theirs:
        if ours[key] != theirs[key]:
            return f"{key}={ours[key]!r} where the model has {key}={theirs[key]!r}"
    return ""


class _Prioritized:
    """What the three algorithms share; ``_loss_scale`` turns the method's per-item ``0.5 delta^2`` into the
    algorithm's own loss (TD3's ``delta^2``)."""

    _loss_scale = 1.0

    def __init__(self, *args, replay_buffer_class=None, **kwargs):
        if replay_buffer_class is None:
            replay_buffer_class = PrioritizedReplayBuffer
        if not (isinstance(replay_buffer_class, type) and issubclass(replay_buffer_class, PrioritizedReplayBuffer)):
            name = getattr(replay_buffer_class, "__name__", replay_buffer_class)
            raise ValueError(f"replay_buffer_class={name} must be prioritylab.sb3.PrioritizedReplayBuffer")
        super().__init__(*args, replay_buffer_class=replay_buffer_class, **kwargs)

    def _setup_model(self) -> None:
        # the sampler's generator follows the model's seed, and the n-step returns the model's n_steps and gamma,
        # unless the buffer kwargs give them; SB3 itself sets up n-step returns only for its own buffers
        given = self.replay_buffer_kwargs
        if self.n_steps > 1 and given.get("n_steps", self.n_steps) != self.n_steps:
            raise ValueError(f"n_steps={self.n_steps} and replay_buffer_kwargs n_steps={given['n_steps']} differ; "
                             "give one of them")  # fmt: skip
        kwargs = {"seed": self.seed, **given}
        if kwargs.setdefault("n_steps", self.n_steps) > 1:  # gamma only where it discounts (SB3 allows gamma = 0)
            kwargs.setdefault("gamma", self.gamma)
        if kwargs["n_steps"] > 1 and kwargs["gamma"] != self.gamma:
            raise ValueError(f"replay_buffer_kwargs gamma={kwargs['gamma']!r} differs from the model's "
                             f"gamma={self.gamma!r}: the n-step returns would be discounted with another gamma "
                             "than the target; leave it out")  # fmt: skip
        if kwargs["n_steps"] > 1 and getattr(self._vec_normalize_env, "norm_reward", False):
            raise ValueError("n_steps > 1 with a reward-normalising VecNormalize is not supported (the n-step "
                             "return is formed from raw rewards); use norm_reward=False or n_steps=1")  # fmt: skip
        n_steps, self.n_steps = self.n_steps, 1  # passed to the buffer above: no SB3 warning that it is ignored
        self.replay_buffer_kwargs = kwargs
        try:
            super()._setup_model()
        finally:
            self.replay_buffer_kwargs, self.n_steps = given, n_steps

    def set_random_seed(self, seed: int | None = None) -> None:
        """SB3's seeding, and the sampler's generator re-seeded from ``seed`` once the buffer exists."""
        super().set_random_seed(seed)
        if seed is not None and isinstance(getattr(self, "replay_buffer", None), PrioritizedReplayBuffer):
            self.replay_buffer.reseed(seed)

    def load_replay_buffer(self, path, truncate_last_traj: bool = True) -> None:
        """SB3's, refusing (with the model's buffer kept) a file that holds anything but a
        :class:`PrioritizedReplayBuffer`: a plain SB3 buffer would fail at the first update."""
        before = self.replay_buffer
        try:
            super().load_replay_buffer(path, truncate_last_traj)
        except AssertionError:  # SB3's own check: not a replay buffer at all
            self.replay_buffer = before
            raise ValueError(f"{path} does not hold a replay buffer") from None
        if not isinstance(self.replay_buffer, PrioritizedReplayBuffer):
            loaded, self.replay_buffer = type(self.replay_buffer).__name__, before
            raise ValueError(f"{path} holds an SB3 {loaded}, not a prioritylab.sb3.PrioritizedReplayBuffer; its "
                             "transitions carry no priorities: load it into a stable_baselines3 model")  # fmt: skip
        if isinstance(before, PrioritizedReplayBuffer):
            differ = _settings_differ(self.replay_buffer, before)
            if differ:
                self.replay_buffer = before
                raise ValueError(f"{path} holds a replay buffer built with {differ}: load it into a model with "
                                 "the same settings")  # fmt: skip

    def _nothing_to_sample(self) -> bool:
        """No transition may be drawn yet (a model loaded without its replay buffer, ``learning_starts`` 0, or
        n-step returns not yet complete): SB3's buffer would train on what it has, this one waits a step."""
        return self.replay_buffer.size() == 0

    def _beta(self) -> float | None:
        """The IS exponent now: annealed linearly with the run's progress, as SB3's schedules are."""
        method = self.replay_buffer.method
        if not method.uses_weights:
            return None
        start, end = method.beta.start, method.beta.end
        # the last rollout may overshoot learn()'s total_timesteps, so the progress can pass 1
        return start + (end - start) * min(1.0, max(0.0, 1.0 - self._current_progress_remaining))

    def _sample(self, batch_size: int) -> PrioritizedSamples:
        return self.replay_buffer.sample(batch_size, env=self._vec_normalize_env, beta=self._beta())

    def _critic_loss(self, current_q_values, target_q_values: th.Tensor, replay_data: PrioritizedSamples):
        """The method's critic loss over the TD errors of every critic; their priorities go to the sampler."""
        if isinstance(current_q_values, th.Tensor):
            current_q_values = (current_q_values,)
        delta = th.stack([(q - target_q_values).reshape(-1) for q in current_q_values])  # (critics, batch)
        method = self.replay_buffer.method
        loss = method.critic_loss(delta, replay_data.weights)
        self.replay_buffer.update(replay_data, method.priority(delta))
        return self._loss_scale * loss if self._loss_scale != 1.0 else loss


class DQN(_Prioritized, sb3.DQN):
    """SB3's DQN with prioritylab's replay: ``DQN("MlpPolicy", env, replay_buffer_kwargs=dict(sampler="per"))``."""

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self._nothing_to_sample():  # prioritylab
            return
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        losses = []
        for _ in range(gradient_steps):
            replay_data = self._sample(batch_size)  # prioritylab
            discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma
            with th.no_grad():
                next_q_values, _ = self.q_net_target(replay_data.next_observations).max(dim=1)
                next_q_values = next_q_values.reshape(-1, 1)
                target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values
            current_q_values = th.gather(self.q_net(replay_data.observations), dim=1,
                                         index=replay_data.actions.long())  # fmt: skip
            loss = self._critic_loss(current_q_values, target_q_values, replay_data)  # prioritylab
            losses.append(loss.item())
            self.policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            self.policy.optimizer.step()
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", np.mean(losses))


class TD3(_Prioritized, sb3.TD3):
    """SB3's TD3 with prioritylab's replay: ``TD3("MlpPolicy", env, replay_buffer_kwargs=dict(sampler="lap"))``."""

    _loss_scale = 2.0  # SB3's TD3 critic loss is the sum over critics of mean(delta^2)

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self._nothing_to_sample():  # prioritylab
            return
        self.policy.set_training_mode(True)
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])
        actor_losses, critic_losses = [], []
        for _ in range(gradient_steps):
            self._n_updates += 1
            replay_data = self._sample(batch_size)  # prioritylab
            discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma
            with th.no_grad():
                noise = replay_data.actions.clone().data.normal_(0, self.target_policy_noise)
                noise = noise.clamp(-self.target_noise_clip, self.target_noise_clip)
                next_actions = (self.actor_target(replay_data.next_observations) + noise).clamp(-1, 1)
                next_q_values = th.cat(self.critic_target(replay_data.next_observations, next_actions), dim=1)
                next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
                target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values
            current_q_values = self.critic(replay_data.observations, replay_data.actions)
            critic_loss = self._critic_loss(current_q_values, target_q_values, replay_data)  # prioritylab
            critic_losses.append(critic_loss.item())
            self.critic.optimizer.zero_grad()
            critic_loss.backward()
            self.critic.optimizer.step()
            if self._n_updates % self.policy_delay == 0:  # delayed actor and target updates
                obs = replay_data.observations
                actor_loss = -self.critic.q1_forward(obs, self.actor(obs)).mean()
                actor_losses.append(actor_loss.item())
                self.actor.optimizer.zero_grad()
                actor_loss.backward()
                self.actor.optimizer.step()
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                polyak_update(self.actor.parameters(), self.actor_target.parameters(), self.tau)
                polyak_update(self.critic_batch_norm_stats, self.critic_batch_norm_stats_target, 1.0)
                polyak_update(self.actor_batch_norm_stats, self.actor_batch_norm_stats_target, 1.0)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        if actor_losses:
            self.logger.record("train/actor_loss", np.mean(actor_losses))
        self.logger.record("train/critic_loss", np.mean(critic_losses))


class SAC(_Prioritized, sb3.SAC):
    """SB3's SAC with prioritylab's replay: ``SAC("MlpPolicy", env, replay_buffer_kwargs=dict(sampler="per"))``."""

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        if self._nothing_to_sample():  # prioritylab
            return
        self.policy.set_training_mode(True)
        optimizers = [self.actor.optimizer, self.critic.optimizer]
        if self.ent_coef_optimizer is not None:
            optimizers += [self.ent_coef_optimizer]
        self._update_learning_rate(optimizers)
        ent_coef_losses, ent_coefs, actor_losses, critic_losses = [], [], [], []
        for gradient_step in range(gradient_steps):
            replay_data = self._sample(batch_size)  # prioritylab
            discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma
            if self.use_sde:
                self.actor.reset_noise()
            actions_pi, log_prob = self.actor.action_log_prob(replay_data.observations)
            log_prob = log_prob.reshape(-1, 1)
            ent_coef_loss = None
            if self.ent_coef_optimizer is not None and self.log_ent_coef is not None:
                ent_coef = th.exp(self.log_ent_coef.detach())
                ent_coef_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
                ent_coef_losses.append(ent_coef_loss.item())
            else:
                ent_coef = self.ent_coef_tensor
            ent_coefs.append(ent_coef.item())
            if ent_coef_loss is not None and self.ent_coef_optimizer is not None:
                self.ent_coef_optimizer.zero_grad()
                ent_coef_loss.backward()
                self.ent_coef_optimizer.step()
            with th.no_grad():
                next_actions, next_log_prob = self.actor.action_log_prob(replay_data.next_observations)
                next_q_values = th.cat(self.critic_target(replay_data.next_observations, next_actions), dim=1)
                next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
                next_q_values = next_q_values - ent_coef * next_log_prob.reshape(-1, 1)
                target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values
            current_q_values = self.critic(replay_data.observations, replay_data.actions)
            critic_loss = self._critic_loss(current_q_values, target_q_values, replay_data)  # prioritylab
            critic_losses.append(critic_loss.item())
            self.critic.optimizer.zero_grad()
            critic_loss.backward()
            self.critic.optimizer.step()
            q_values_pi = th.cat(self.critic(replay_data.observations, actions_pi), dim=1)
            min_qf_pi, _ = th.min(q_values_pi, dim=1, keepdim=True)
            actor_loss = (ent_coef * log_prob - min_qf_pi).mean()
            actor_losses.append(actor_loss.item())
            self.actor.optimizer.zero_grad()
            actor_loss.backward()
            self.actor.optimizer.step()
            if gradient_step % self.target_update_interval == 0:
                polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                polyak_update(self.batch_norm_stats, self.batch_norm_stats_target, 1.0)
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/ent_coef", np.mean(ent_coefs))
        self.logger.record("train/actor_loss", np.mean(actor_losses))
        self.logger.record("train/critic_loss", np.mean(critic_losses))
        if ent_coef_losses:
            self.logger.record("train/ent_coef_loss", np.mean(ent_coef_losses))
