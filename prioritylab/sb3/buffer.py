"""A stable-baselines3 replay buffer backed by prioritylab's :class:`~prioritylab.replay.ReplayBuffer`.

SB3 builds it from ``replay_buffer_class`` and ``replay_buffer_kwargs``; the
kwargs name a replay method of :mod:`prioritylab.deep.methods` (``uniform``,
``per``, ``lap``, ``pal``, ``pser``) and its settings.  Writes follow SB3's
``ReplayBuffer``: ``n_envs`` environments, a ``done`` that is a truncation when
``infos[e]["TimeLimit.truncated"]`` says so (``handle_timeout_termination``),
observations as given (before ``VecNormalize``).  Every observation is stored
once (the memory of SB3's ``optimize_memory_usage``, with timeouts handled).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples

from ..deep.continuous import CONTINUOUS_DEFAULTS
from ..deep.dqn import DQN_DEFAULTS
from ..deep.methods import Method, ReplaySettings, setting_named, unread
from ..replay import ReplayBuffer, least_slots
from ..replay.buffer import check_rows

METHODS = ("uniform", "per", "lap", "pal", "pser")
UNREPORTED_BATCHES = 100
"""Batches drawn with no priorities reported, after which a method other than uniform warns (once) that it is
not being trained as it should: a plain SB3 algorithm neither reports TD errors nor uses LAP's or PAL's loss."""


def sampler_stream(seed: int | None) -> np.random.Generator:
    """The sampler's generator for ``seed``: a stream spawned from it, so not ``default_rng(seed)``, the stream
    that SB3 and gymnasium give the action space (the exploration's random actions) and the first environment,
    which the replay's draws would otherwise repeat.  ``None`` (a plain SB3 algorithm, which passes no seed): a
    seed drawn from NumPy's global generator, which SB3 seeds with the model's seed before it builds the buffer,
    so that a seeded model repeats, as with SB3's own buffer; an unseeded one does not."""
    if seed is None:
        seed = int(np.random.randint(0, 2**63 - 1, dtype=np.int64))  # noqa: NPY002 - the one SB3 seeds
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])


class PrioritizedSamples(ReplayBufferSamples):
    """SB3's :class:`ReplayBufferSamples` (SB3 code reads it as its own), with the sampler's figures as
    attributes: ``weights`` (IS weights, shape ``(batch,)``; not used by methods without them),
    ``indices`` (the sampled slots) and ``generations`` (their write stamps: a slot rewritten since it was
    drawn gets no update)."""

    weights: th.Tensor
    indices: np.ndarray
    generations: np.ndarray

    def __new__(cls, observations, actions, next_observations, dones, rewards, discounts, *, weights, indices,
                generations):  # fmt: skip
        self = super().__new__(cls, observations, actions, next_observations, dones, rewards, discounts)
        self.weights, self.indices, self.generations = weights, indices, generations
        return self

    def sb3(self) -> ReplayBufferSamples:
        """The same batch as SB3's own type."""
        return ReplayBufferSamples(*self)


class PrioritizedReplayBuffer(SB3ReplayBuffer):
    """SB3 replay buffer over a prioritylab sampler.

    SB3's own arguments (``buffer_size`` counts transitions over all
    environments, as in SB3) and:

    * ``sampler``: ``uniform``, ``per``, ``lap``, ``pal`` or ``pser``
      (:mod:`prioritylab.deep.methods`; PAL samples uniformly and changes the loss);
    * ``alpha``, ``beta0``, ``eps``, ``kappa``, ``rho``, ``eta``, ``window``,
      ``mode``, ``normalise``: the method's settings (:class:`~prioritylab.deep.methods.ReplaySettings`);
      unset ones take prioritylab's DQN table for discrete actions, its TD3/SAC
      table otherwise;
    * ``n_steps``, ``gamma``: n-step returns, as SB3's ``NStepReplayBuffer`` (``gamma`` is needed, and read,
      only above one step: the prioritylab algorithms pass the model's);
    * ``frame_stack``: ``k > 1`` stores only the newest frame of observations stacked on their first axis
      and padded with the episode's first frame (gymnasium's ``FrameStackObservation``, the Atari
      preprocessing of :mod:`prioritylab.deep.atari`); every write is checked to be such a stack (SB3's
      ``VecFrameStack`` stacks on the last axis and pads with zeros: leave it at 1 there);
    * ``seed``: the sampler's generator, a stream spawned from the seed (:func:`sampler_stream`; the
      prioritylab algorithms pass the model's seed; without one, a seed from NumPy's global generator, which
      SB3 seeds with the model's);
    * ``diagnostics``: keep prioritylab's replay diagnostics (off: they cost time).

    ``optimize_memory_usage`` must stay ``False``: observations are stored once anyway.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        sampler: str = "uniform",
        alpha: float | None = None,
        beta0: float | None = None,
        eps: float | None = None,
        kappa: float | None = None,
        rho: float = 0.4,
        eta: float = 0.7,
        window: int | None = None,
        mode: str = "max",
        normalise: str = "batch",
        n_steps: int = 1,
        gamma: float | None = None,
        frame_stack: int = 1,
        seed: int | None = None,
        diagnostics: bool = False,
    ):
        init = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed={seed!r} must be a non-negative integer or None")
        if not isinstance(diagnostics, (bool, np.bool_)):
            raise ValueError(f"diagnostics={diagnostics!r} must be True or False")
        if sampler not in METHODS:
            raise ValueError(f"sampler={sampler!r} is not one of {', '.join(METHODS)}")
        if optimize_memory_usage:
            raise ValueError("optimize_memory_usage=True: this buffer stores every observation once already; "
                             "leave it False")  # fmt: skip
        if isinstance(observation_space, spaces.Dict):
            raise ValueError("Dict observation spaces are not supported; use a Box or Discrete observation space")
        number = (int, float, np.integer, np.floating)
        if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, number) or not 0 < gamma <= 1):
            raise ValueError(f"gamma={gamma!r} must be a number in (0, 1]")
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise ValueError(f"buffer_size={buffer_size!r} must be a positive integer")
        if not isinstance(n_envs, int) or n_envs < 1 or buffer_size // n_envs < 1:
            raise ValueError(f"n_envs={n_envs!r} must be a positive integer at most buffer_size={buffer_size}")
        for name, value in (("n_steps", n_steps), ("frame_stack", frame_stack)):  # the replay's n_step, frame_stack
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        if n_steps > 1 and gamma is None:  # a plain SB3 algorithm passes none: its returns would take a default
            raise ValueError(f"n_steps={n_steps} needs gamma, the model's discount, which the n-step returns take: "
                             "give gamma=<the model's gamma> (prioritylab.sb3's DQN, TD3 and SAC pass it)")  # fmt: skip
        least = least_slots(n_steps, frame_stack)
        if buffer_size // n_envs < least:
            raise ValueError(f"buffer_size={buffer_size} gives each of the n_envs={n_envs} environments "
                             f"{buffer_size // n_envs} slots, fewer than the {least} it needs (n_steps + frame_stack "
                             f"+ 2): give buffer_size={least * n_envs} or more")  # fmt: skip
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device, n_envs=n_envs)
        self.buffer_size = buffer_size // n_envs  # slots per environment, as SB3's ReplayBuffer divides it
        discrete = isinstance(action_space, spaces.Discrete)
        settings = ReplaySettings(alpha=alpha, beta0=beta0, eps=eps, kappa=kappa, rho=rho, eta=eta, window=window,
                                  mode=mode, normalise=normalise)  # fmt: skip
        try:
            self.method = Method(sampler, settings, DQN_DEFAULTS if discrete else CONTINUOUS_DEFAULTS, total_steps=1)
        except ValueError as err:  # named as given here: beta0, not the sampler's own beta
            name, rest = setting_named(err)
            raise ValueError(f"{name} {rest}" if name else rest) from None
        for name, value, readers in unread(sampler, settings):
            warnings.warn(f"PrioritizedReplayBuffer: {name}={value!r} has no effect with sampler={sampler!r} (read by "
                          f"{', '.join(r for r in readers if r in METHODS) or 'no sampler here'})", stacklevel=2)
        if gamma is not None and n_steps == 1:
            warnings.warn(f"PrioritizedReplayBuffer: gamma={gamma!r} has no effect with n_steps=1 (the target "
                          "discounts with the model's gamma)", stacklevel=2)  # fmt: skip
        self._unreported = 0
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.optimize_memory_usage = False
        capacity = self.buffer_size * n_envs
        action_dtype = self._maybe_cast_dtype(action_space.dtype)
        drawn_by = self.method.make_sampler(capacity, sampler_stream(seed))
        self.replay = ReplayBuffer(
            capacity, self.obs_shape, (self.action_dim,), sampler=drawn_by,
            num_envs=n_envs, obs_dtype=observation_space.dtype, action_dtype=action_dtype, n_step=n_steps,
            gamma=1.0 if gamma is None else gamma, frame_stack=frame_stack, diagnostics=diagnostics,
        )  # fmt: skip
        self.method.attach(self.replay)
        # the last next observation of each environment: a restart outside the step loop is recognised by an
        # observation that is not it, and ends the open episode there
        self._last_next = np.zeros((n_envs, *self.obs_shape), dtype=self.replay.obs_dtype)
        self._init = init

    # -- SB3's interface ---------------------------------------------------------
    def size(self) -> int:
        """Transitions that may be sampled now."""
        return len(self.replay)

    def add(self, obs, next_obs, action, reward, done, infos: list[dict[str, Any]]) -> None:
        n = self.n_envs
        # cast as the replay stores them (refusing what a cast would wrap or make non-finite) before they are
        # compared with the previous next observation: float64 observations of a float32 space (SubprocVecEnv
        # stacks what the environments return) must not read as a restart at every step
        shape, dtype = (n, *self.obs_shape), self.replay.obs_dtype
        obs = check_rows("obs", np.asarray(obs).reshape(shape), shape, dtype)
        next_obs = check_rows("next_obs", np.asarray(next_obs).reshape(shape), shape, dtype)
        replay = self.replay  # the rows the replay would refuse are refused before an episode is ended below
        action = check_rows("action", np.asarray(action).reshape((n, self.action_dim)), (n, *replay.action_shape),
                            replay.action_dtype)  # fmt: skip
        done = np.asarray(done).reshape(n).astype(bool)
        if self.handle_timeout_termination:
            timeout = np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos], dtype=bool)
        else:
            timeout = np.zeros(n, dtype=bool)
        reward = check_rows("reward", np.asarray(reward), (n,), np.dtype(np.float32))
        restarted = self.replay.writer["open"] & (obs != self._last_next).reshape(n, -1).any(axis=1)
        if self.replay.frame_stack > 1:
            self._check_stacks(obs, next_obs, ~self.replay.writer["open"] | restarted)
        if restarted.any():
            self.replay.end_episodes(self._last_next, np.flatnonzero(restarted))
        self.replay.add(obs, action, reward, next_obs, done & ~timeout, done & timeout)
        self._last_next[...] = next_obs

    def _check_stacks(self, obs, next_obs, starts) -> None:
        """Refuse observations that are not first-axis stacks padded with the episode's first frame."""
        shifted = np.array_equal(next_obs[:, :-1], obs[:, 1:])
        padded = all(np.array_equal(o, np.broadcast_to(o[-1], o.shape)) for o in obs[starts])
        if not (shifted and padded):
            k = self.replay.frame_stack
            raise ValueError(f"frame_stack={k}: observations must be stacks on the first axis padded with the "
                             "episode's first frame (gymnasium's FrameStackObservation)")  # fmt: skip

    def sample(self, batch_size: int, env=None, beta: float | None = None) -> PrioritizedSamples:
        """Draw ``batch_size`` transitions (IS exponent ``beta``, or the sampler's own) as SB3 tensors."""
        batch = self.replay.sample(batch_size, beta)
        if self.method.name != "uniform" and self._unreported >= 0:
            self._unreported += 1
            if self._unreported >= UNREPORTED_BATCHES:
                self._unreported = -1  # warned: once per buffer
                warnings.warn(f"PrioritizedReplayBuffer(sampler={self.method.name!r}): {UNREPORTED_BATCHES} batches "
                              "drawn and no priorities reported, so it samples and trains as uniform replay; a plain "
                              "SB3 algorithm does not report them: train with prioritylab.sb3's DQN, TD3 or SAC",
                              stacklevel=2)  # fmt: skip
        n_step = self.replay.n_step
        reward = batch.reward
        if env is not None and getattr(env, "norm_reward", False):
            if n_step > 1:
                raise ValueError("n_steps > 1 with a reward-normalising VecNormalize is not supported")
            reward = self._normalize_reward(reward, env)
        obs = self._normalize_obs(batch.obs, env)
        next_obs = self._normalize_obs(batch.next_obs, env)

        def t(arr):  # freshly gathered arrays: no copy needed on the CPU
            return self.to_torch(arr, copy=False)

        dones = (batch.discount == 0).astype(np.float32)
        discounts = t(batch.discount.reshape(-1, 1)) if n_step > 1 else None
        return PrioritizedSamples(
            t(obs), t(batch.action), t(next_obs), t(dones.reshape(-1, 1)), t(reward.reshape(-1, 1)), discounts,
            weights=t(batch.weights), indices=batch.indices, generations=batch.generations,
        )  # fmt: skip

    def update(self, samples: PrioritizedSamples, priority: th.Tensor) -> None:
        """Hand the batch's priorities (``|delta|``, one per item) to the sampler."""
        self.method.report(self.replay, samples, priority, None)
        self._unreported = 0 if self._unreported >= 0 else -1

    def reseed(self, seed: int) -> None:
        """Re-seed the sampler's generator (the prioritylab algorithms' ``set_random_seed``)."""
        self.replay.sampler.rng.bit_generator.state = sampler_stream(seed).bit_generator.state

    def reset(self) -> None:
        raise ValueError("PrioritizedReplayBuffer cannot be reset; build a new one")

    def extend(self, *args, **kwargs) -> None:
        raise ValueError("PrioritizedReplayBuffer takes one vectorised step at a time (add)")

    # -- pickling (SB3's save_replay_buffer / load_replay_buffer) -----------------
    def __getstate__(self) -> dict:
        return {"init": self._init, "device": self.device, "replay": self.replay.state_dict(copy=False),
                "last_next": self._last_next}  # fmt: skip

    def __setstate__(self, state: dict) -> None:
        # a buffer pickled before the normalise option existed normalised its IS weights globally
        with warnings.catch_warnings():  # its settings were named to the user when it was built
            warnings.simplefilter("ignore")
            self.__init__(**{"normalise": "global", **state["init"]})
        saved, n = state["replay"].get("config", {}).get("capacity"), self.n_envs
        if n > 1 and saved == state["init"]["buffer_size"] * n != self.replay.capacity:
            raise ValueError(f"this replay buffer was saved by an earlier prioritylab.sb3 that gave each of its {n} "
                             f"environments buffer_size={saved // n} slots ({saved} in all, where SB3's buffer holds "
                             f"{self.replay.capacity}); it cannot be loaded as one of this version: train the model "
                             "on without it, or with a new buffer")  # fmt: skip
        self.replay.load_state_dict(state["replay"])
        self._last_next[...] = state["last_next"]
        self.device = state["device"]

    def __repr__(self) -> str:
        return f"PrioritizedReplayBuffer({self.replay!r})"
