"""DQN (Mnih et al., 2015) and Double DQN (van Hasselt et al., 2016) on Atari and MinAtar, with any replay method.

* ``dqn``: the Nature agent with the settings of PSER's appendix (Table 4), the DQN that
  PSER compares PER and PSER with;
* ``ddqn``: Double DQN with the settings of LAP/PAL App. D.2, Table 7, the agent that LAP
  and PAL are compared on;
* on a MinAtar game (``--env MinAtar/<Game>-v1``), both take the network and settings of the
  MinAtar paper's DQN baseline (:class:`MinAtarSettings`, :class:`MinAtarNet`); the update is the
  same, and the replay stores one boolean state per slot (no frame stack).

Both share the network (:class:`NatureCNN`), the epsilon-greedy policy and the update; they
differ in the target: ``r + gamma max_a Q'(s', a)`` (DQN) against
``r + gamma Q'(s', argmax_a Q(s', a))`` (Double DQN).  The discount is zeroed only on
termination, never on truncation (LAP App. D.2, "Terminal Transitions").

On Atari, rewards are clipped to [-1, 1] **in the TD target only** (``batch.reward.clamp(-1, 1)``):
the replay stores the game's reward and the evaluation returns are the game's scores.  The
replay uses one-step returns, so clipping the sampled reward is clipping each reward.

Counting on Atari: one agent step is 4 emulator frames (:mod:`prioritylab.deep.atari`); ``steps``,
``start_steps``, ``eval_every`` count agent steps; ``target_every`` and ``eps_decay`` count
updates (one every ``update_every`` agent steps), as LAP's Table 7 does.  On MinAtar one step is one
frame and there is one update per frame.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from .atari import FRAME_STACK, SCREEN, atari_state, make_atari_env, score_columns, set_atari_state
from .loop import Spec
from .methods import Defaults, Method
from .minatar import make_minatar_env, minatar_state, set_minatar_state
from .run import RunSettings, SettingsError

# LAP/PAL Table 7 (Double DQN): PER alpha 0.6, beta 0.4 (annealed to 1, PER Section 3.4), eps 1e-10;
# LAP & PAL alpha 0.6; kappa 0.01 (App. D.2, eq. 29-31); uniform/PER/PSER keep DQN's Huber loss (kappa 1).
DDQN_DEFAULTS = Defaults(per_alpha=0.6, per_beta0=0.4, per_eps=1e-10, lap_alpha=0.6, kappa=0.01, td_kappa=1.0)
# PSER appendix, Table 4 (DQN): proportional prioritisation, exponent 0.5, IS exponent 0.5 (one value, kept
# fixed as in Dopamine, which PSER adapted); PER's eps and LAP/PAL's alpha and kappa are not given there and
# are Double DQN's above (LAP Table 7 / App. D.2).
DQN_DEFAULTS = dataclasses.replace(DDQN_DEFAULTS, per_alpha=0.5, per_beta0=0.5, per_beta_end=None)

NATURE_CHANNELS = (32, 64, 64)
"""The Nature DQN's filters in its three convolutions (Mnih et al. 2015, Methods, "Model architecture")."""


@dataclass
class AtariSettings(RunSettings):
    """Settings shared by DQN and Double DQN; the defaults are Double DQN's (LAP/PAL Table 7 and App. D.2)."""

    env: str = "ALE/Pong-v5"
    """ALE v5 game id (ALE/<Game>-v5)."""
    steps: int = 10_000_000
    """Agent steps to train for (1 step = 4 frames; 10M steps = 40M frames, a budget, not a paper's figure)."""
    eval_every: int = 50_000
    """Evaluate every this many agent steps (LAP App. D.2: every 50k time steps)."""
    eval_episodes: int = 10
    """Episodes per evaluation at epsilon eval_eps, env seeded with seed + 100 (LAP App. D.2: "the training seed +
    a constant"; 100 is its authors' code's)."""
    checkpoint_every: int = 500_000
    """Checkpoint at the first episode end after every this many steps (a full replay is ~7 GB on disk)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions (1M, NERS Table B.1 and Dopamine's; Table 7 gives none; ~7.2 KB each:
    7.2 GB, see README); the replay has min(this, max(2 x steps, 64))
    slots, so a run of at most half of it keeps all of its own (room for its episodes' tail slots too)."""
    batch_size: int = 32
    """Minibatch size (Table 7: 32)."""
    gamma: float = 0.99
    """Discount factor (Table 7: 0.99)."""
    lr: float = 6.25e-5
    """RMSProp learning rate (Table 7: 6.25e-5)."""
    rms_alpha: float = 0.95
    """RMSProp smoothing constant (Table 7: 0.95)."""
    rms_eps: float = 1e-5
    """RMSProp epsilon (Table 7: 1e-5; torch adds it outside the square root)."""
    centered: bool = True
    """Centered RMSProp (Table 7: True); momentum is 0."""
    start_steps: int = 20_000
    """Initial agent steps with uniformly random actions, before any update (Table 7: 20k)."""
    update_every: int = 4
    """Agent steps per update (Table 7: training frequency 4)."""
    target_every: int = 8_000
    """Updates between copies of the network into the target network (Table 7: 8k training iterations)."""
    eps_start: float = 1.0
    """Initial exploration epsilon (Table 7: 1)."""
    eps_end: float = 0.01
    """Final exploration epsilon (Table 7: 0.01)."""
    eps_decay: int = 250_000
    """Updates over which epsilon falls linearly from eps_start to eps_end (Table 7: 250k training iterations)."""
    eval_eps: float = 0.001
    """Epsilon of the evaluation policy (Table 7: 0.001), drawn from an RNG seeded at each evaluation."""
    channels: tuple[int, int, int] = NATURE_CHANNELS
    """Filters of the three conv layers (Nature DQN; see NatureCNN)."""
    hidden: int = 512
    """Width of the fully connected hidden layer (App. D.2: 512)."""
    max_episode_frames: int = 108_000
    """Truncate episodes after this many emulator frames (PSER Section 4.1 and NERS Table B.1: 108k frames = 27k
    agent steps, 30 minutes of play)."""
    sticky: float = 0.25
    """Probability of repeating the previous action (sticky actions, App. D.2: 0.25)."""
    clip_reward: bool = True
    """Clip rewards to [-1, 1] in the TD target (PER Section 4, "rewards and TD-errors are clipped"; NERS Table B.1;
    Nature DQN)."""


@dataclass
class DDQNSettings(AtariSettings):
    """Double DQN on an Atari game (LAP/PAL App. D.2, Table 7); MinAtar ids take MinAtar's settings."""


@dataclass
class DQNSettings(AtariSettings):
    """DQN, Nature network, on an Atari game (PSER appendix, Table 4); MinAtar ids take MinAtar's settings.

    PSER's Table 4 states its periods in frames (1 agent step = 4 frames): 50k frames before
    learning = 12,500 agent steps, a target period of 10k frames = 2,500 agent steps = 625
    updates.  The Nature paper's own table gives 50k and 10k in agent steps and parameter
    updates; pass --start-steps 50000 --target-every 10000 for those.  Dopamine, whose DQN PSER
    adapted, counts its periods in agent steps (its Nature configuration: 50k and 10k agent steps,
    --start-steps 50000 --target-every 2500), so Table 4's "frames" may be agent steps: a reading
    this cannot settle, and the default takes the table's word.
    """

    eval_every: int = 250_000
    """Evaluate every this many agent steps (PSER Section 4.1: every 1M frames; PSER then plays 500K frames, this
    10 episodes, as the Double DQN agent)."""
    lr: float = 2.5e-4
    """RMSProp learning rate (PSER Table 4: 0.00025)."""
    rms_eps: float = 1e-5
    """RMSProp epsilon (PSER Table 4: 1e-5).  Dopamine's TensorFlow RMSProp, which PSER ran, adds it inside the
    square root (about 3.2e-3 outside it while the mean square is small); torch adds it outside, as LAP's
    PyTorch code: a departure, kept so that dqn and ddqn differ in PSER's table only."""
    start_steps: int = 12_500
    """Random agent steps before learning (PSER Table 4: 50K frames = 12,500 agent steps)."""
    target_every: int = 625
    """Updates between target copies (PSER Table 4: 10K frames = 2,500 agent steps = 625 updates)."""
    eps_decay: int = 62_500
    """Updates of epsilon's linear decay (PSER Table 4 gives 1.0 -> 0.01 without a period; Dopamine's DQN
    configuration, whose epsilons 0.01 and 0.001 Table 4 repeats, decays over 250k agent steps = 62,500 updates)."""
    eval_eps: float = 0.001
    """Epsilon of the evaluation policy (PSER Table 4: 0.001)."""


@dataclass
class MinAtarSettings(RunSettings):
    """DQN on a MinAtar game: the MinAtar paper's DQN baseline (Young & Tian, 2019).

    Sources: the paper's Section 4 (network, one update per frame, 5M frames) and the constants of its
    reference implementation, ``examples/dqn.py`` of the MinAtar repository ("as in the MinAtar reference
    DQN" below); one step is one frame.  Where the reference counts frames (target period, epsilon's
    decay after the replay start) this counts updates, the same at one update per frame.  The evaluation
    is ours: the paper reports training-episode returns.
    """

    env: str = "MinAtar/Breakout-v1"
    """MinAtar game id (MinAtar/<Game>-v1, each game's minimal action set; -v0: all 6 actions, as the reference
    DQN, which acts on ``env.num_actions()``: a departure of ours for -v1)."""
    steps: int = 5_000_000
    """Frames to train for (MinAtar paper: 5M frames)."""
    eval_every: int = 100_000
    """Evaluate every this many frames (ours: 50 evaluations over the paper's 5M)."""
    eval_episodes: int = 10
    """Episodes per evaluation at epsilon eval_eps, env seeded with seed + 100 (ours, as the Atari agents)."""
    checkpoint_every: int = 250_000
    """Checkpoint at the first episode end after every this many frames."""
    buffer_size: int = 100_000
    """Replay capacity in slots (as in the MinAtar reference DQN: 100k transitions). Each finished episode also
    takes a slot for its final observation, so the replay holds slightly fewer transitions: 0.2-1.8 % fewer in
    the committed MinAtar runs with uniform, PER and PSER, 2-8 % with LAP and PAL, whose episodes are shorter."""
    batch_size: int = 32
    """Minibatch size (as in the MinAtar reference DQN: 32)."""
    gamma: float = 0.99
    """Discount factor (as in the MinAtar reference DQN: 0.99)."""
    lr: float = 2.5e-4
    """RMSProp learning rate (as in the MinAtar reference DQN: 0.00025)."""
    rms_alpha: float = 0.95
    """RMSProp squared-gradient momentum (as in the MinAtar reference DQN: 0.95)."""
    rms_eps: float = 0.01
    """RMSProp minimum squared gradient, passed as torch's eps (as in the MinAtar reference DQN: 0.01)."""
    centered: bool = True
    """Centered RMSProp (as in the MinAtar reference DQN); momentum is 0."""
    start_steps: int = 5_000
    """Frames of uniformly random actions before the first update (as in the MinAtar reference DQN: 5k)."""
    update_every: int = 1
    """Frames per update (MinAtar paper and reference DQN: one update per frame)."""
    target_every: int = 1_000
    """Updates between target copies (as in the MinAtar reference DQN: every 1,000 frames)."""
    eps_start: float = 1.0
    """Initial exploration epsilon (as in the MinAtar reference DQN: 1.0)."""
    eps_end: float = 0.1
    """Final exploration epsilon (as in the MinAtar reference DQN: 0.1)."""
    eps_decay: int = 100_000
    """Updates of epsilon's linear decay (as in the MinAtar reference DQN: the first 100k frames after the
    replay start)."""
    eval_eps: float = 0.001
    """Epsilon of the evaluation policy (ours, the Atari agents' 0.001), drawn from an RNG seeded at each
    evaluation."""
    conv_channels: int = 16
    """Filters of the one 3x3 stride-1 convolution (MinAtar paper, Section 4: 16)."""
    hidden: int = 128
    """Width of the fully connected hidden layer (MinAtar paper, Section 4: 128)."""
    sticky: float = 0.1
    """Probability of repeating the previous action (MinAtar's default sticky actions: 0.1)."""
    ramping: bool = True
    """Difficulty ramping of Asterix and Seaquest (MinAtar's default: on)."""
    max_episode_steps: int = 10_000
    """Truncate episodes after this many frames (ours, a guard: MinAtar imposes no episode limit, and a greedy
    policy can loop, e.g. a still paddle under a Breakout ball that never reaches a brick; Freeway's game ends
    itself on its 2,501st frame, as terminated)."""
    clip_reward: bool = False
    """Clip rewards to [-1, 1] in the TD target (off: the MinAtar reference DQN does not clip)."""


@dataclass
class MinAtarDQNSettings(MinAtarSettings):
    """DQN on a MinAtar game (the MinAtar paper's DQN baseline; PSER Table 4's sampler settings)."""


@dataclass
class MinAtarDDQNSettings(MinAtarSettings):
    """Double DQN on a MinAtar game (the MinAtar DQN baseline's settings; LAP Table 7's sampler settings)."""


class MinAtarNet(nn.Module):
    """The MinAtar paper's DQN network (Section 4): one 3x3 convolution of 16 filters, stride 1, ReLU,
    a fully connected layer of 128 with ReLU, one output per action.

    Input ``(batch, channels, 10, 10)`` booleans (0/1, used as they are); the convolution has no
    padding, so the flatten is 16 x 8 x 8 = 1,024 wide.
    """

    def __init__(self, in_channels: int, actions: int, conv_channels: int = 16, hidden: int = 128, side: int = 10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(in_channels, conv_channels, 3, stride=1), nn.ReLU(), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(conv_channels * (side - 2) ** 2, hidden), nn.ReLU(),
                                  nn.Linear(hidden, actions))  # fmt: skip

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs.float()))


class NatureCNN(nn.Module):
    """The Nature DQN network, as LAP/PAL App. D.2 describes it.

    Input ``(batch, 4, 84, 84)`` uint8, scaled by 1/255 on the device; conv 8x8 stride 4, conv
    4x4 stride 2, conv 3x3 stride 1, each with ReLU; flatten (64 x 7 x 7 = 3136); a hidden layer
    of 512 with ReLU; one output per action.

    App. D.2's text gives the third conv as 2x2, but its 3136-wide flatten needs 3x3 (a 2x2
    kernel leaves 8 x 8 x 64 = 4096), so this is 3x3 as in the Nature network.  The text also
    gives the second conv 32 filters where the Nature network has 64; ``channels`` defaults to
    Nature's (32, 64, 64).  Smaller ``channels``/``hidden`` make tiny test networks.

    The convolutions run in the channels-last memory layout (weights and input), which oneDNN
    computes about 10 % faster on CPU than the default layout; the arithmetic is the same up to
    floating-point rounding, and the flatten keeps Nature's (channel, row, column) order.
    """

    def __init__(self, actions: int, channels=(32, 64, 64), hidden: int = 512, frames: int = FRAME_STACK):
        super().__init__()
        c1, c2, c3 = channels
        self.features = nn.Sequential(
            nn.Conv2d(frames, c1, 8, stride=4), nn.ReLU(),
            nn.Conv2d(c1, c2, 4, stride=2), nn.ReLU(),
            nn.Conv2d(c2, c3, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )  # fmt: skip
        side = ((SCREEN - 8) // 4 + 1 - 4) // 2 + 1 - 3 + 1  # 84 -> 20 -> 9 -> 7
        self.head = nn.Sequential(nn.Linear(c3 * side * side, hidden), nn.ReLU(), nn.Linear(hidden, actions))
        self.features.to(memory_format=torch.channels_last)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = (obs.float() * (1.0 / 255.0)).contiguous(memory_format=torch.channels_last)
        return self.head(self.features(x))


def nature_network(actions: int, obs_shape: tuple, cfg: AtariSettings) -> NatureCNN:
    return NatureCNN(actions, cfg.channels, cfg.hidden)


def minatar_network(actions: int, obs_shape: tuple, cfg: MinAtarSettings) -> MinAtarNet:
    channels, side, _ = obs_shape
    return MinAtarNet(channels, actions, cfg.conv_channels, cfg.hidden, side)


class DQN:
    """DQN's network, epsilon-greedy policy and update; :class:`DoubleDQN` changes only the target."""

    # q_mean is the last batch's mean Q(s, a); with replay diagnostics on (the default), the evaluation row's
    # q_mean column holds the replay's statistic instead (NERS Table 3's, over the draws since the last row)
    stat_keys = ("loss", "q_mean", "epsilon")
    double = False

    def __init__(self, cfg: AtariSettings | MinAtarSettings, env: gym.Env, device: torch.device,
                 rng: np.random.Generator, noise: torch.Generator, method: Method, network=None):  # fmt: skip
        """``network(actions, obs_shape, cfg)`` builds the Q-network (default: :func:`nature_network`)."""
        self.cfg, self.device, self.rng = cfg, device, rng
        self.actions = int(env.action_space.n)
        self.q = (network or nature_network)(self.actions, env.observation_space.shape, cfg).to(device)
        self.target = copy.deepcopy(self.q)
        self.target.requires_grad_(False)
        self.opt = torch.optim.RMSprop(self.q.parameters(), lr=cfg.lr, alpha=cfg.rms_alpha, eps=cfg.rms_eps,
                                       centered=cfg.centered, momentum=0.0)  # fmt: skip
        self.updates = 0
        self.eval_rng = np.random.default_rng([0, 1])

    def epsilon(self) -> float:
        """Linear from ``eps_start`` to ``eps_end`` over ``eps_decay`` updates, then constant."""
        cfg = self.cfg
        frac = min(self.updates / cfg.eps_decay, 1.0)
        return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)

    def start_evaluation(self, seed: int) -> None:
        """A fresh evaluation RNG, the same at every evaluation; the training streams are not touched."""
        self.eval_rng = np.random.default_rng([seed, 1])

    def act(self, obs: np.ndarray, explore: bool) -> int:
        eps, rng = (self.epsilon(), self.rng) if explore else (self.cfg.eval_eps, self.eval_rng)
        if rng.random() < eps:
            return int(rng.integers(self.actions))
        with torch.no_grad():
            q = self.q(torch.as_tensor(np.asarray(obs), device=self.device)[None])
        return int(q.argmax(1)[0])

    def next_value(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``max_a Q'(s', a)``."""
        return self.target(next_obs).amax(1)

    def update(self, batch, method: Method) -> tuple[torch.Tensor, dict]:
        action = batch.action.long()
        q_all = self.q(batch.obs)
        q = q_all.gather(1, action[:, None]).squeeze(1)
        with torch.no_grad():
            reward = batch.reward.clamp(-1.0, 1.0) if self.cfg.clip_reward else batch.reward
            target = reward + batch.discount * self.next_value(batch.next_obs)
        delta = (q - target)[None]  # (1, batch): one critic
        loss = method.critic_loss(delta, batch.weights)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.updates += 1
        if self.updates % self.cfg.target_every == 0:
            self.target.load_state_dict(self.q.state_dict())
        stats = {"loss": loss.item(), "q_mean": q.detach().mean().item(), "epsilon": self.epsilon(),
                 "q_values": q_all.detach().amax(1)}  # max_a Q(s, a): diagnostics and NERS features  # fmt: skip
        return method.priority(delta), stats

    def state_dict(self) -> dict:
        return {"q": self.q.state_dict(), "target": self.target.state_dict(), "opt": self.opt.state_dict(),
                "updates": self.updates}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["target"])
        self.opt.load_state_dict(state["opt"])
        self.updates = state["updates"]


class DoubleDQN(DQN):
    """Double DQN: the online network picks the next action, the target network values it."""

    double = True

    def next_value(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``Q'(s', argmax_a Q(s', a))``."""
        best = self.q(next_obs).argmax(1, keepdim=True)
        return self.target(next_obs).gather(1, best).squeeze(1)


def check_dqn(cfg: AtariSettings | MinAtarSettings, positive: tuple[str, ...]) -> None:
    """The checks both settings share (``positive``: the fields of one kind that must also be positive)."""
    for name in ("buffer_size", "batch_size", "hidden", "update_every", "target_every", "eps_decay", *positive):
        if getattr(cfg, name) <= 0:
            raise SettingsError(f"{name} must be positive, got {getattr(cfg, name)!r}")
    if cfg.start_steps < 0:
        raise SettingsError(f"start_steps must be >= 0, got {cfg.start_steps!r}")
    for name in ("gamma", "eps_start", "eps_end", "eval_eps", "sticky", "rms_alpha"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            raise SettingsError(f"{name} must be in [0, 1], got {getattr(cfg, name)!r}")
    for name in ("lr", "rms_eps"):
        if not getattr(cfg, name) > 0:
            raise SettingsError(f"{name} must be positive, got {getattr(cfg, name)!r}")


def check_atari(cfg: AtariSettings) -> None:
    check_dqn(cfg, ("max_episode_frames",))
    if len(cfg.channels) != 3 or min(cfg.channels) <= 0:
        raise SettingsError(f"channels must be three positive filter counts, got {cfg.channels!r}")


def check_minatar(cfg: MinAtarSettings) -> None:
    check_dqn(cfg, ("conv_channels", "max_episode_steps"))


def make_env(env_id: str, cfg: AtariSettings) -> gym.Env:
    return make_atari_env(env_id, max_episode_frames=cfg.max_episode_frames, sticky=cfg.sticky)


def atari_buffer_args(cfg: AtariSettings, env: gym.Env) -> dict:
    return {
        "obs_shape": env.observation_space.shape,
        "action_shape": (),
        "obs_dtype": np.uint8,
        "action_dtype": np.int64,
        "frame_stack": FRAME_STACK,
        "gamma": cfg.gamma,
    }


def random_discrete_action(env: gym.Env, rng: np.random.Generator) -> int:
    return int(rng.integers(env.action_space.n))


def make_minatar(env_id: str, cfg: MinAtarSettings) -> gym.Env:
    return make_minatar_env(env_id, sticky=cfg.sticky, max_episode_steps=cfg.max_episode_steps, ramping=cfg.ramping)


def minatar_buffer_args(cfg: MinAtarSettings, env: gym.Env) -> dict:
    """One boolean state per slot, no frame stack (MinAtar paper)."""
    return {"obs_shape": env.observation_space.shape, "action_shape": (), "obs_dtype": bool,
            "action_dtype": np.int64, "frame_stack": 1, "gamma": cfg.gamma}  # fmt: skip


def _spec(name: str, agent, defaults: Defaults) -> Spec:
    return Spec(
        name=name,
        make_env=make_env,
        check=check_atari,
        make_agent=agent,
        buffer_args=atari_buffer_args,
        learning_starts=lambda cfg: cfg.start_steps,
        update_every=lambda cfg: cfg.update_every,
        random_action=random_discrete_action,
        defaults=defaults,
        env_state=atari_state,
        set_env_state=set_atari_state,
        score_columns=score_columns,
    )


def _minatar_spec(atari: Spec, agent) -> Spec:
    """The Atari agent's spec with MinAtar's environment, network, checks and replay layout."""
    return dataclasses.replace(atari, make_env=make_minatar, check=check_minatar,
                               make_agent=functools.partial(agent, network=minatar_network),
                               buffer_args=minatar_buffer_args, env_state=minatar_state,
                               set_env_state=set_minatar_state, score_columns=None)  # fmt: skip


DQN_SPEC = _spec("dqn", DQN, DQN_DEFAULTS)
DDQN_SPEC = _spec("ddqn", DoubleDQN, DDQN_DEFAULTS)
SPECS = {"dqn": DQN_SPEC, "ddqn": DDQN_SPEC}
SETTINGS = {"dqn": DQNSettings, "ddqn": DDQNSettings}
MINATAR_SPECS = {"dqn": _minatar_spec(DQN_SPEC, DQN), "ddqn": _minatar_spec(DDQN_SPEC, DoubleDQN)}
"""The same agents on MinAtar games (``prioritylab train dqn --env MinAtar/Breakout-v1`` picks them)."""
MINATAR_SETTINGS = {"dqn": MinAtarDQNSettings, "ddqn": MinAtarDDQNSettings}
