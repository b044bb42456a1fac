"""Training steps per second of TD3 and SAC with every sampler, the bare update, and peer libraries.

A *training step* is one environment step plus one update: act, step, store,
sample, update the networks, give the sampler its priorities.  Every
contender first fills its buffer with ``prefill`` uniformly random steps and
runs a short untimed warm-up; then each repeat times ``steps`` training steps
of every contender in turn (the order rotates every repeat, so a change of
machine load hits all alike) and the median over the repeats is reported.

Contenders:

* ``prioritylab``: our training path itself, :func:`prioritylab.deep.loop.collect`
  and :func:`prioritylab.deep.loop.learn` on a run built by
  :func:`prioritylab.deep.loop.make_learner` (evaluation, logging and
  checkpoints left out), for each sampler.  Timers around the environment,
  the policy, the buffer's writer, the sampler, the gather and transfer and
  the update split each step's time into parts.
* ``bare update``: the same agent's update on one fixed batch of tensors
  (uniform method): no environment, no replay.  The limit of the loop.
* ``stable-baselines3``: its TD3 / SAC (uniform buffer), ``model.learn`` in
  chunks of ``steps`` after ``learning_starts`` = ``prefill``; timers around its
  buffer's ``add`` (``store``) and ``sample`` (``gather``).
* ``SB3 + prioritylab``: the same SB3 model and settings with
  :class:`prioritylab.sb3.PrioritizedReplayBuffer` (``uniform`` and ``per``);
  its ``vs unif`` column is its time per step over plain SB3's; its priority
  updates are timed as ``sampler``.
* ``tianshou``: its TD3 with ``PrioritizedVectorReplayBuffer``: one
  ``Collector.collect(n_step=1)`` and one ``update(buffer, batch)`` per
  training step, as its off-policy trainer does with one step per collect.

Every contender has the same networks (``hidden``-``hidden`` ReLU MLPs),
batch size, Adam learning rate, discount, Polyak rate and buffer capacity, and
runs on the same torch device (``--device``; the CPU by default).  On a CUDA
device every part's timer synchronises the device before and after the part,
so a part holds its own kernels' time.  A timer inside another charges its
opening synchronisation to the outer part: ``gather`` (the buffer's calls less
the sampler and the transfer) holds those, and the TD errors' copy back to the
host.  ``transfer`` times each field's host-to-device copy with a
synchronisation around each, so it is an upper bound.
Peers are optional: they are imported only here, and skipped when missing.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from . import importable, record

AGENTS = ("td3", "sac", "dqn", "ddqn")
CONTINUOUS, ATARI = ("td3", "sac"), ("dqn", "ddqn")
SAMPLERS = ("uniform", "per", "lap", "pal", "pser", "ners")
PEERS = ("sb3", "tianshou")
PARTS = ("env", "act", "store", "sampler", "gather", "transfer", "update", "other")
"""Where a step's time goes: environment step and reset, the policy's action, the buffer's writer,
the sampler (sample + priority update), the gather into host arrays, their copy to the device (zero on
the CPU, where the tensors share the arrays), the networks'
update, the rest."""
BARE_TRIES = ("threads+1", "flush-denormal", "actor-full-critic")
"""Variants of the bare update measured with ``--tries``: one more torch thread, denormals flushed to
zero, and the actor's loss through the full critic forward (both critics, weight gradients computed and
discarded: the form before :meth:`prioritylab.deep.nets.TwinQ.frozen`)."""
LOOP_TRIES = ("diagnostics-off",)
"""Variants of our training step measured with ``--tries``: the replay diagnostics switched off
(``--no-diagnostics``), for the uniform and per rows; their cost is reported on the rows with them on."""
TRIES = BARE_TRIES + LOOP_TRIES
DIAGNOSTICS_OFF_SAMPLERS = ("uniform", "per")


@dataclass
class Result:
    """One contender's timings over the repeats."""

    name: str
    agent: str
    kind: str  # "ours", "bare", "try", "peer" or "sb3" (SB3 with prioritylab's replay)
    sampler: str
    rates: list[float]
    """Training steps (or updates, for the bare rows) per second, one per repeat."""
    parts: dict[str, list[float]] = field(default_factory=dict)
    """Milliseconds per step of each part, one per repeat (ours only)."""
    steps_per_s: float = 0.0
    overhead: float | None = None
    """Median over repeats of (time per step / uniform's time per step) - 1 (ours); for the ``sb3`` rows,
    of (time per step / plain SB3's) - 1."""
    vs_bare: float | None = None
    vs_peer: float | None = None
    """steps/s over the fastest peer's of the same agent."""
    memory_mb: float | None = None
    """Replay memory at full capacity (the allocated arrays), MB; where the contender can tell."""
    diagnostics_cost: float | None = None
    """Median over repeats of (time per step / the same sampler's time with diagnostics off) - 1."""


class Timers:
    """Seconds spent in wrapped calls, by part.

    ``sync`` (``torch.cuda.synchronize`` on a CUDA device) is called before and after each wrapped call, so
    that a part's time holds its own device work, not only the launch of it.
    """

    def __init__(self, sync: Callable[[], None] | None = None):
        self.seconds: dict[str, float] = {}
        self.sync = sync

    def timed(self, call: Callable, part: str) -> Callable:
        """``call``, adding its duration to ``part``."""
        clock, sync = time.perf_counter, self.sync
        seconds = self.seconds
        seconds.setdefault(part, 0.0)

        def timed(*args, **kwargs):
            if sync is not None:
                sync()
            t0 = clock()
            try:
                return call(*args, **kwargs)
            finally:
                if sync is not None:
                    sync()
                seconds[part] += clock() - t0

        return timed

    def wrap(self, obj, attr: str, part: str) -> None:
        """Replace ``obj.attr`` by a call that adds its duration to ``part``."""
        setattr(obj, attr, self.timed(getattr(obj, attr), part))

    def reset(self) -> None:
        for k in self.seconds:
            self.seconds[k] = 0.0


TIMED_EPSILON = 0.05
"""The exploration rate of every DQN contender while timed (SB3's default final rate)."""


def _settings(agent: str, sampler: str, config: dict, diagnostics: bool = True):
    from ..deep import dqn, sac, td3

    common = {"sampler": sampler, "steps": config["total_steps"], "start_steps": config["prefill"],
              "seed": config["seed"], "progress": False, "diagnostics": diagnostics,
              "device": config.get("device", "cpu")}  # fmt: skip
    if agent in ATARI:
        spec, cls = {"dqn": (dqn.DQN_SPEC, dqn.DQNSettings), "ddqn": (dqn.DDQN_SPEC, dqn.DDQNSettings)}[agent]
        net = {} if config.get("atari_net") is None else config["atari_net"]
        # every contender acts epsilon-greedily at one fixed epsilon while timed (SB3's and tianshou's too), so
        # each runs its Q-network on the same share of steps: ours would still be near eps_start after a prefill
        eps = {"eps_start": TIMED_EPSILON, "eps_end": TIMED_EPSILON}
        return spec, cls(env=config["atari_env"], buffer_size=config["atari_buffer_size"],
                         batch_size=config["atari_batch"], **net, **eps, **common)  # fmt: skip
    spec, cls = {"td3": (td3.SPEC, td3.TD3Settings), "sac": (sac.SPEC, sac.SACSettings)}[agent]
    cfg = cls(env=config["env"], buffer_size=config["buffer_size"], batch_size=config["batch"],
              hidden=config["hidden"], **common)  # fmt: skip
    return spec, cfg


class Ours:
    """Our training step on a run built as ``prioritylab train`` builds it."""

    kind = "ours"

    def __init__(self, agent: str, sampler: str, config: dict, diagnostics: bool = True):
        import torch

        from ..deep.loop import make_learner
        from ..deep.methods import Method
        from ..deep.run import pick_device

        self.name, self.agent_name, self.sampler = "prioritylab", agent, sampler
        if not diagnostics:
            self.name, self.kind = "prioritylab, diagnostics off", "try"
        spec, cfg = _settings(agent, sampler, config, diagnostics)
        self.spec, self.cfg = spec, cfg
        self.device = pick_device(cfg.device)
        self.env = spec.make_env(cfg.env, cfg)
        self.method = Method(sampler, cfg.replay, spec.defaults, cfg.steps)
        self.agent, self.buffer, self.rng, _ = make_learner(spec, cfg, self.env, self.device, self.method)
        self.every = spec.update_every(cfg)  # env steps per update: 1 (TD3, SAC), 4 (DQN family)
        self.obs, _ = self.env.reset(seed=cfg.seed)
        self.step = 0
        self.episode_return = 0.0
        for _ in range(cfg.start_steps):
            self._collect(explore=False)
        self.sync = torch.cuda.synchronize if self.device.type == "cuda" else None
        self.timers = t = Timers(self.sync)
        t.wrap(self.env, "step", "env")
        t.wrap(self.env, "reset", "env")
        t.wrap(self.agent, "act", "act")
        t.wrap(self.buffer, "add", "store")
        t.wrap(self.buffer.sampler, "sample", "sampler")
        t.wrap(self.buffer.sampler, "update", "sampler")
        t.wrap(self.buffer, "sample", "buffer_io")  # includes the sampler's sample
        t.wrap(self.buffer, "update", "buffer_io")  # includes the sampler's update
        t.wrap(self.agent, "update", "update")

    def _collect(self, explore: bool) -> None:
        from ..deep.loop import collect

        self.obs, reward, term, trunc = collect(self.spec, self.agent, self.env, self.buffer, self.rng, self.obs,
                                               explore)  # fmt: skip
        self.step += 1
        self.episode_return += float(reward)
        if term or trunc:  # as the training loop does (NERS trains here)
            self.buffer.sampler.on_episode_end({"return": self.episode_return})
            self.episode_return = 0.0
            self.obs, _ = self.env.reset()

    def memory_bytes(self) -> int:
        return self.buffer.memory_bytes()

    def run(self, n: int) -> tuple[float, dict[str, float]]:
        """Seconds for ``n`` training steps, and the seconds of each part."""
        from ..deep.loop import learn
        from ..replay import buffer as replay_buffer

        cfg, agent, buffer, method, device = self.cfg, self.agent, self.buffer, self.method, self.device
        self.timers.reset()
        to_device = replay_buffer._to_device  # timed as "transfer" while this contender runs
        replay_buffer._to_device = self.timers.timed(to_device, "transfer")
        try:
            t0 = time.perf_counter()
            for _ in range(n):
                for _ in range(self.every):
                    self._collect(explore=True)
                learn(agent, buffer, method, self.step, cfg.batch_size, device)
            if self.sync is not None:
                self.sync()
            total = time.perf_counter() - t0
        finally:
            replay_buffer._to_device = to_device
        s = dict(self.timers.seconds)
        parts = {
            "env": s["env"], "act": s["act"], "store": s["store"], "sampler": s["sampler"],
            "gather": s["buffer_io"] - s["sampler"] - s["transfer"], "transfer": s["transfer"],
            "update": s["update"],
        }  # fmt: skip
        parts["other"] = total - sum(parts.values())
        return total, parts


class Bare:
    """The same agent's update on one fixed batch of tensors: no environment, no replay."""

    kind = "bare"

    def __init__(self, agent: str, config: dict, variant: str | None = None):
        self.name = "bare update" if variant is None else f"bare update, {variant}"
        self.kind = "bare" if variant is None else "try"
        self.agent_name, self.sampler, self.variant = agent, "-", variant
        self.learner = Ours(agent, "uniform", config)
        self.batch = self.learner.buffer.sample(self.learner.cfg.batch_size, device=self.learner.device)
        self.threads = config["threads"]
        if variant == "actor-full-critic":
            critic = self.learner.agent.critic
            critic.frozen = lambda obs, act, members=None: critic(obs, act)

    def run(self, n: int) -> tuple[float, dict[str, float]]:
        import torch

        agent, method, batch = self.learner.agent, self.learner.method, self.batch
        if self.variant == "threads+1":
            torch.set_num_threads(self.threads + 1)
        if self.variant == "flush-denormal":
            torch.set_flush_denormal(True)
        try:
            t0 = time.perf_counter()
            for _ in range(n):
                agent.update(batch, method)
            if self.learner.sync is not None:
                self.learner.sync()
            total = time.perf_counter() - t0
        finally:
            torch.set_num_threads(self.threads)
            torch.set_flush_denormal(False)
        return total, {}


class SB3:
    """stable-baselines3's TD3 or SAC, ``learn`` in chunks after ``learning_starts``."""

    kind = "peer"

    def __init__(self, agent: str, config: dict):
        import stable_baselines3 as sb3

        self.name, self.agent_name, self.sampler = "stable-baselines3", agent, "uniform"
        self._build(sb3, agent, config, {})

    def _build(self, module, agent: str, config: dict, replay: dict) -> None:
        """The model, from ``module`` (SB3 itself or :mod:`prioritylab.sb3`) with ``replay`` settings."""
        import gymnasium as gym

        self.every = 1
        if agent in ATARI:
            self._dqn(module, agent, config, replay)
            return
        env = gym.make(config["env"])
        kw = {
            "learning_rate": 3e-4, "buffer_size": config["buffer_size"], "learning_starts": config["prefill"],
            "batch_size": config["batch"], "tau": 0.005, "gamma": 0.99, "train_freq": 1, "gradient_steps": 1,
            "policy_kwargs": {"net_arch": [config["hidden"], config["hidden"]]}, "seed": config["seed"],
            "device": config.get("device", "cpu"), "verbose": 0,
        }  # fmt: skip
        if replay:
            kw["replay_buffer_kwargs"] = replay
        if agent == "td3":
            from stable_baselines3.common.noise import NormalActionNoise

            dim = env.action_space.shape[0]
            kw["action_noise"] = NormalActionNoise(np.zeros(dim), 0.1 * np.ones(dim))
            self.model = module.TD3("MlpPolicy", env, **kw)
        else:
            self.model = module.SAC("MlpPolicy", env, **kw)
        self.model.learn(config["prefill"])  # random actions, no update (SB3 trains once past learning_starts)
        self._time_replay()

    def _time_replay(self) -> None:
        """Timers around the replay buffer's calls: ``store`` (add), ``gather`` (sample: the draw, the
        gather and the tensors) and ``sampler`` (the priority update, where there is one)."""
        import torch

        self.sync = torch.cuda.synchronize if self.model.device.type == "cuda" else None
        self.timers = t = Timers(self.sync)
        buf = self.model.replay_buffer
        t.wrap(buf, "add", "store")
        t.wrap(buf, "sample", "gather")
        if hasattr(buf, "update"):
            t.wrap(buf, "update", "sampler")

    def _dqn(self, module, agent: str, config: dict, replay: dict) -> None:
        """SB3's DQN (it has no Double DQN) on our preprocessed ALE env, with the settings of ours: RMSProp,
        batch, capacity, one update every 4 steps, the Nature CNN (SB3's NatureCNN; with ``--quick``'s filters,
        :func:`sb3_nature_cnn`, so that both sides time one network), stacks stored once (SB3:
        ``optimize_memory_usage``; prioritylab's buffer: one frame per slot, ``frame_stack=4``)."""
        from torch.optim import RMSprop

        from ..deep.dqn import NATURE_CHANNELS, make_env

        _, cfg = _settings(agent, "uniform", config)
        env = make_env(cfg.env, cfg)
        self.every = cfg.update_every
        if replay:
            self.name += " (DQN)"
            memory = {"replay_buffer_kwargs": {**replay, "frame_stack": 4}}
        else:
            self.name = "stable-baselines3 (DQN)"
            memory = {"optimize_memory_usage": True, "replay_buffer_kwargs": {"handle_timeout_termination": False}}
        self.model = module.DQN(
            "CnnPolicy", env, learning_rate=cfg.lr, buffer_size=cfg.buffer_size, learning_starts=config["prefill"],
            batch_size=cfg.batch_size, gamma=cfg.gamma, train_freq=cfg.update_every, gradient_steps=1,
            target_update_interval=cfg.target_every * cfg.update_every, **memory,
            exploration_initial_eps=cfg.eps_end, exploration_final_eps=cfg.eps_end,
            policy_kwargs={"optimizer_class": RMSprop, "features_extractor_kwargs": {"features_dim": cfg.hidden},
                           **({} if tuple(cfg.channels) == NATURE_CHANNELS  # SB3's own NatureCNN's
                              else {"features_extractor_class": sb3_nature_cnn(cfg.channels),
                                    "net_arch": []}),  # as SB3 gives its NatureCNN: no hidden layers after it
                           "optimizer_kwargs": {"alpha": cfg.rms_alpha, "eps": cfg.rms_eps, "centered": cfg.centered}},
            seed=config["seed"], device=config.get("device", "cpu"), verbose=0,
        )  # fmt: skip
        self.model.learn(config["prefill"])
        self._time_replay()

    def memory_bytes(self) -> int | None:
        buf = self.model.replay_buffer
        return sum(v.nbytes for v in vars(buf).values() if isinstance(v, np.ndarray))

    def run(self, n: int) -> tuple[float, dict[str, float]]:
        """Seconds for ``n`` training steps, and the seconds in the replay buffer's calls."""
        self.timers.reset()
        t0 = time.perf_counter()
        self.model.learn(n * self.every, reset_num_timesteps=False)
        if self.sync is not None:
            self.sync()
        return time.perf_counter() - t0, dict(self.timers.seconds)


def sb3_nature_cnn(channels):
    """SB3's features extractor of the Nature CNN's layout with other filters (``--quick``'s tiny network): three
    convolutions (8/4, 4/2, 3/1) and a linear layer to ``features_dim`` with its ReLU, so that with SB3's
    final linear layer it is the network of ours (``deep.dqn.NatureCNN``) at the same filters and width."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    c1, c2, c3 = channels

    class NatureLayout(BaseFeaturesExtractor):
        def __init__(self, observation_space, features_dim: int = 512):
            super().__init__(observation_space, features_dim)
            self.cnn = nn.Sequential(
                nn.Conv2d(observation_space.shape[0], c1, 8, stride=4), nn.ReLU(),
                nn.Conv2d(c1, c2, 4, stride=2), nn.ReLU(),
                nn.Conv2d(c2, c3, 3, stride=1), nn.ReLU(),
                nn.Flatten(),
            )  # fmt: skip
            with torch.no_grad():
                flat = self.cnn(torch.zeros(1, *observation_space.shape)).shape[1]
            self.linear = nn.Sequential(nn.Linear(flat, features_dim), nn.ReLU())

        def forward(self, observations):
            return self.linear(self.cnn(observations))

    return NatureLayout


class SB3Prioritylab(SB3):
    """The SB3 row's model and settings with prioritylab's replay (:mod:`prioritylab.sb3`) and ``sampler``."""

    kind = "sb3"

    def __init__(self, agent: str, sampler: str, config: dict):
        from .. import sb3 as ours

        self.name, self.agent_name, self.sampler = "SB3 + prioritylab", agent, sampler
        self._build(ours, agent, config, {"sampler": sampler})

    def memory_bytes(self) -> int | None:
        buf = self.model.replay_buffer
        return buf.replay.memory_bytes() + buf._last_next.nbytes


class Tianshou:
    """tianshou's TD3 with its prioritized buffer: one collected step and one update per training step."""

    kind = "peer"

    def __init__(self, agent: str, config: dict):
        import gymnasium as gym
        from tianshou.algorithm import TD3
        from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
        from tianshou.algorithm.optim import AdamOptimizerFactory
        from tianshou.data import Collector, PrioritizedVectorReplayBuffer
        from tianshou.exploration import GaussianNoise
        from tianshou.utils.net.common import Net
        from tianshou.utils.net.continuous import ContinuousActorDeterministic, ContinuousCritic

        self.name, self.agent_name, self.sampler = "tianshou", agent, "per"
        env = gym.make(config["env"])
        obs_shape, act_shape = env.observation_space.shape, env.action_space.shape
        hidden = [config["hidden"], config["hidden"]]
        max_action = float(env.action_space.high[0])
        actor = ContinuousActorDeterministic(preprocess_net=Net(state_shape=obs_shape, hidden_sizes=hidden),
                                             action_shape=act_shape, max_action=max_action)  # fmt: skip

        def critic():
            net = Net(state_shape=obs_shape, action_shape=act_shape, hidden_sizes=hidden, concat=True)
            return ContinuousCritic(preprocess_net=net)

        policy = ContinuousDeterministicPolicy(actor=actor, exploration_noise=GaussianNoise(sigma=0.1 * max_action),
                                               action_space=env.action_space)  # fmt: skip
        self.algorithm = TD3(
            policy=policy, policy_optim=AdamOptimizerFactory(lr=3e-4), critic=critic(),
            critic_optim=AdamOptimizerFactory(lr=3e-4), critic2=critic(), critic2_optim=AdamOptimizerFactory(lr=3e-4),
            tau=0.005, gamma=0.99, policy_noise=0.2 * max_action, noise_clip=0.5 * max_action, update_actor_freq=2,
        )  # fmt: skip
        self.buffer = PrioritizedVectorReplayBuffer(config["buffer_size"], 1, alpha=0.6, beta=0.4)
        with warnings.catch_warnings():  # "Single environment detected, wrap to DummyVectorEnv"
            warnings.simplefilter("ignore", UserWarning)
            self.collector = Collector(self.algorithm, env, self.buffer, exploration_noise=True)
        self.collector.reset()
        self.collector.collect(n_step=config["prefill"], random=True)
        self.batch = config["batch"]

    def run(self, n: int) -> tuple[float, dict[str, float]]:
        from tianshou.utils.torch_utils import policy_within_training_step

        collector, algorithm, buffer, batch = self.collector, self.algorithm, self.buffer, self.batch
        t0 = time.perf_counter()
        for _ in range(n):
            with policy_within_training_step(algorithm.policy):  # as its trainer's training step
                collector.collect(n_step=1)
                algorithm.update(buffer, batch)
        return time.perf_counter() - t0, {}


class TianshouDQN:
    """tianshou's DQN (Double DQN for ``ddqn``) with its prioritized buffer on our preprocessed ALE env: four
    collected steps and one update per training step, as its off-policy trainer with ``step_per_collect=4``."""

    kind = "peer"

    def __init__(self, agent: str, config: dict):
        import torch
        from tianshou.algorithm import DQN
        from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
        from tianshou.algorithm.optim import RMSpropOptimizerFactory
        from tianshou.data import Collector, PrioritizedVectorReplayBuffer

        from ..deep.dqn import NatureCNN, make_env

        self.name, self.agent_name, self.sampler = "tianshou", agent, "per"
        _, cfg = _settings(agent, "per", config)
        env = make_env(cfg.env, cfg)

        class QNet(torch.nn.Module):  # tianshou's model interface: (obs, state, info) -> (values, state)
            def __init__(self):
                super().__init__()
                self.q = NatureCNN(env.action_space.n, cfg.channels, cfg.hidden)

            def forward(self, obs, state=None, info=None):
                return self.q(torch.as_tensor(obs)), state

        policy = DiscreteQLearningPolicy(model=QNet(), action_space=env.action_space, eps_training=cfg.eps_end)
        optim = RMSpropOptimizerFactory(lr=cfg.lr, alpha=cfg.rms_alpha, eps=cfg.rms_eps, centered=cfg.centered)
        self.algorithm = DQN(policy=policy, optim=optim, gamma=cfg.gamma, target_update_freq=cfg.target_every,
                             is_double=agent == "ddqn", huber_loss_delta=1.0)  # fmt: skip
        self.buffer = PrioritizedVectorReplayBuffer(cfg.buffer_size, 1, alpha=0.6, beta=0.4)
        with warnings.catch_warnings():  # "Single environment detected, wrap to DummyVectorEnv"
            warnings.simplefilter("ignore", UserWarning)
            self.collector = Collector(self.algorithm, env, self.buffer, exploration_noise=True)
        self.collector.reset()
        self.collector.collect(n_step=config["prefill"], random=True)
        self.batch, self.every = cfg.batch_size, cfg.update_every

    def memory_bytes(self) -> int | None:
        total = 0
        for buf in self.buffer.buffers:
            for value in buf._meta.values():  # the stored fields, allocated at full capacity on the first add
                total += value.nbytes if isinstance(value, np.ndarray) else 0
        return total

    def run(self, n: int) -> tuple[float, dict[str, float]]:
        from tianshou.utils.torch_utils import policy_within_training_step

        collector, algorithm, buffer, batch = self.collector, self.algorithm, self.buffer, self.batch
        t0 = time.perf_counter()
        for _ in range(n):
            with policy_within_training_step(algorithm.policy):
                collector.collect(n_step=self.every)
                algorithm.update(buffer, batch)
        return time.perf_counter() - t0, {}


PEER_CLASSES = {"sb3": SB3, "tianshou": Tianshou}
SB3_SAMPLERS = ("uniform", "per")
"""Samplers of the ``SB3 + prioritylab`` rows (:mod:`prioritylab.sb3`), set up beside the SB3 peer."""


def available_peers(wanted) -> tuple[list[str], dict[str, str]]:
    """The peers that import, and why the others were skipped."""
    return importable(wanted, {"sb3": ("stable_baselines3",), "tianshou": ("tianshou.algorithm",)})


def build(agents, samplers, peers, config: dict, tries=(), log: Callable[[str], None] = print) -> tuple[list, dict]:
    """Every contender, filled and ready; returns them and the peers that could not be set up (with why)."""
    contenders, skipped = [], {}
    for agent in agents:
        contenders.append(Bare(agent, config))
        for variant in tries:
            if variant == "actor-full-critic" and agent in ATARI:  # named, not dropped (peers are in skipped)
                log(f"skipping {variant} {agent}: a try of the actor-critic agents (DQN has no actor)")
            elif variant in BARE_TRIES:
                contenders.append(Bare(agent, config, variant))
        for sampler in samplers:
            contenders.append(Ours(agent, sampler, config))
            if "diagnostics-off" in tries and sampler in DIAGNOSTICS_OFF_SAMPLERS:
                contenders.append(Ours(agent, sampler, config, diagnostics=False))
            elif "diagnostics-off" in tries:
                log(f"skipping diagnostics-off {agent} {sampler}: measured for "
                    f"{' and '.join(DIAGNOSTICS_OFF_SAMPLERS)} only")  # fmt: skip
        for peer in peers:
            if peer == "tianshou" and agent == "sac":
                skipped[f"{peer} {agent}"] = "not set up (TD3 and the DQN family with its prioritized buffer only)"
                continue
            if peer == "tianshou" and config.get("device", "cpu") != "cpu":
                skipped[f"{peer} {agent}"] = "not set up on a device other than the CPU"
                continue
            try:
                cls = TianshouDQN if (peer == "tianshou" and agent in ATARI) else PEER_CLASSES[peer]
                built = [cls(agent, config)]
                if peer == "sb3":
                    built += [SB3Prioritylab(agent, s, config) for s in SB3_SAMPLERS]
                contenders += built  # all of the peer's rows or, if one cannot be set up, none (named skipped)
            except Exception as err:  # noqa: BLE001 - a peer that cannot be set up is reported, not fatal
                skipped[f"{peer} {agent}"] = f"{type(err).__name__}: {err}"
                log(f"skipping {peer} {agent}: {type(err).__name__}: {err}")
    return contenders, skipped


def run(contenders, steps: int, repeats: int, warmup: int, progress: bool = False) -> list[Result]:
    """Time ``steps`` training steps of each contender per repeat, interleaved; medians and ratios."""
    from tqdm.auto import tqdm

    for c in contenders:
        c.run(warmup)
    seconds = {id(c): [] for c in contenders}
    parts = {id(c): {p: [] for p in PARTS} for c in contenders}
    with tqdm(total=repeats * len(contenders), disable=not progress, desc="agent bench", unit="run") as bar:
        for r in range(repeats):
            k = r % len(contenders)
            for c in contenders[k:] + contenders[:k]:
                total, split = c.run(steps)
                seconds[id(c)].append(total)
                for p, s in split.items():
                    parts[id(c)][p].append(1e3 * s / steps)
                bar.update()
    results = []
    for c in contenders:
        res = Result(c.name, c.agent_name, c.kind, c.sampler, [steps / s for s in seconds[id(c)]],
                     {p: v for p, v in parts[id(c)].items() if v})  # fmt: skip
        res.steps_per_s = statistics.median(res.rates)
        size = c.memory_bytes() if hasattr(c, "memory_bytes") else None
        res.memory_mb = None if size is None else size / 2**20
        results.append(res)
    _ratios(results, {id(r): seconds[id(c)] for r, c in zip(results, contenders, strict=True)})
    return results


def _ratios(results: list[Result], seconds: dict[int, list[float]]) -> None:
    for agent in {r.agent for r in results}:
        rows = [r for r in results if r.agent == agent]
        bare = next((r for r in rows if r.kind == "bare"), None)
        uniform = next((r for r in rows if r.kind == "ours" and r.sampler == "uniform"), None)
        peers = [r for r in rows if r.kind == "peer"]
        best_peer = max((r.steps_per_s for r in peers), default=None)
        plain_sb3 = next((r for r in peers if r.name.startswith("stable-baselines3")), None)
        for r in rows:
            if r.kind in ("ours", "try") and bare is not None:
                r.vs_bare = r.steps_per_s / bare.steps_per_s
            if r.kind == "ours" and uniform is not None:
                paired = [a / b for a, b in zip(seconds[id(r)], seconds[id(uniform)], strict=True)]
                r.overhead = statistics.median(paired) - 1.0
            if r.kind == "sb3" and plain_sb3 is not None:  # the cost of prioritylab's replay inside SB3
                paired = [a / b for a, b in zip(seconds[id(r)], seconds[id(plain_sb3)], strict=True)]
                r.overhead = statistics.median(paired) - 1.0
            if r.kind in ("ours", "peer", "sb3") and best_peer:
                r.vs_peer = r.steps_per_s / best_peer
            off = next((o for o in rows if o.kind == "try" and o.sampler == r.sampler and o.name.endswith("off")), None)
            if r.kind == "ours" and off is not None:
                paired = [a / b for a, b in zip(seconds[id(r)], seconds[id(off)], strict=True)]
                r.diagnostics_cost = statistics.median(paired) - 1.0


def format_table(results: list[Result]) -> str:
    """Plain-text table: steps/s, ratios, and milliseconds per step by part, then a line saying what ``vs unif``
    is measured against."""
    head = (f"{'agent':<5} {'contender':<34} {'sampler':<7} {'steps/s':>8} {'vs unif':>8} {'vs bare':>8} "
            f"{'vs peer':>8} {'diag':>7} | ms/step: " + " ".join(f"{p:>7}" for p in PARTS))  # fmt: skip
    lines = [head, "-" * len(head)]
    prev = None
    for r in results:
        if prev is not None and r.agent != prev:
            lines.append("")
        prev = r.agent

        def pct(x):
            return "" if x is None else f"{100 * x:+.1f}%"

        def ratio(x):
            return "" if x is None else f"{x:.2f}x"

        ms = " ".join(f"{statistics.median(r.parts[p]):>7.3f}" if p in r.parts else f"{'':>7}" for p in PARTS)
        if r.memory_mb is not None:
            ms += f"  replay {r.memory_mb:,.0f} MB"
        lines.append(f"{r.agent:<5} {r.name:<34} {r.sampler:<7} {r.steps_per_s:>8.1f} {pct(r.overhead):>8} "
                     f"{ratio(r.vs_bare):>8} {ratio(r.vs_peer):>8} {pct(r.diagnostics_cost):>7} "
                     f"| {'':9}{ms}")  # fmt: skip
    lines.append("")
    lines.append("vs unif: time per step over uniform's, minus 1 (negative: faster); SB3 + prioritylab rows: over "
                 "plain SB3's")  # fmt: skip
    return "\n".join(lines)


def to_json(results: list[Result], config: dict, skipped: dict[str, str], machine_load: dict) -> dict:
    out = [asdict(r) for r in results]
    for row in out:
        row["parts_ms_median"] = {p: statistics.median(v) for p, v in row["parts"].items()}
    return record(config, skipped, machine_load, out,
                  peers=("stable-baselines3", "tianshou", "gymnasium", "mujoco", "torch"))  # fmt: skip
