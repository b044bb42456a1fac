"""The off-policy training loop every agent runs: act, store, sample, update, evaluate, checkpoint.

An agent (``td3``, ``sac``, ...) supplies its networks and update; a replay
method (:mod:`prioritylab.deep.methods`) supplies the sampler and the loss.
The loop owns the environment, the replay buffer, the run folder and the
random streams:

``SeedSequence(seed)`` spawns one stream each for the network initialisation,
exploration, the sampler and the agent's own noise (a ``torch.Generator``);
the training environment is seeded once with ``seed``, the evaluation
environment with ``seed + 100`` at every evaluation (LAP App. D: "the training seed + a constant"; 100 is its
authors' code's).
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from .. import _checks
from ..replay import ReplayBuffer, estimate_bytes, least_slots
from ..replay.diagnostics import COLUMNS as DIAGNOSTICS
from ..samplers import PriorityOverflow
from .atari import unknown_game as unknown_atari_game
from .methods import METHOD_TABLE, Defaults, Method, setting_named
from .minatar import is_minatar
from .minatar import register as register_minatar
from .minatar import unknown_game as unknown_minatar_game
from .run import (
    CHECKPOINT,
    EVAL_SEED_OFFSET,
    EVALS,
    FINISHED,
    MANIFEST,
    TIMING,
    Clock,
    Interrupted,
    RunLog,
    RunSettings,
    RunStopped,
    SettingsError,
    StopSignal,
    check_checkpoint_is_this_runs,
    check_common,
    check_memory,
    check_out,
    check_resumable,
    discard_new_dir,
    env_rng_state,
    load_checkpoint,
    mark_finished,
    pick_device,
    prepare_dir,
    recorded_now,
    replay_capacity,
    resumed_rows,
    run_dir,
    save_atomic,
    set_env_rng_state,
    speaking_as,
    warn,
    write_run_manifest,
    writing_into,
)


class Agent(Protocol):
    """What the loop needs from an algorithm."""

    stat_keys: tuple[str, ...]  # scalars of the last update, logged at each evaluation

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray: ...

    def update(self, batch, method: Method) -> tuple[torch.Tensor, dict]:
        """One gradient step on ``batch``; returns the new priorities (one per item) and scalars to log."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    # Optional: ``start_evaluation(seed)``, called before each evaluation, for an agent whose evaluation
    # policy draws random numbers (DQN's epsilon); it must use its own RNG seeded there, never the
    # training streams, so that a resumed run stays bit-identical.


@dataclass
class Spec:
    """How an algorithm plugs into the loop."""

    name: str
    make_env: Callable[[str, RunSettings], gym.Env]
    """``(env_id, cfg) -> env``, raising :class:`SettingsError` on an environment the agent cannot run."""
    check: Callable[[RunSettings], None]
    """Raises :class:`SettingsError` on a bad agent setting, before any work."""
    make_agent: Callable[[RunSettings, gym.Env, torch.device, np.random.Generator, torch.Generator, Method], Agent]
    """``(cfg, env, device, rng, noise_generator, method) -> agent``."""
    buffer_args: Callable[[RunSettings, gym.Env], dict]
    """Keyword arguments of the run's :class:`ReplayBuffer` (shapes, dtypes, discount, frame stack)."""
    learning_starts: Callable[[RunSettings], int]
    """The first step that updates."""
    update_every: Callable[[RunSettings], int]
    """Environment steps per update."""
    random_action: Callable[[gym.Env, np.random.Generator], Any]
    """A uniformly random action (the random start and epsilon-greedy draws)."""
    defaults: Defaults
    """The agent's sampler defaults (its paper's table)."""
    env_state: Callable[[gym.Env], Any] = env_rng_state
    """The environment state saved at an episode end and restored on resume (default: its ``np_random``)."""
    set_env_state: Callable[[gym.Env, Any], None] = set_env_rng_state
    score_columns: Callable[[Any, np.ndarray], dict] | None = None
    """Optional extra evaluation columns from ``(settings, returns)`` (Atari's human-normalised score)."""


def register_env_packages(env_id: str) -> None:
    """Register the environments of an installed package that gymnasium does not load by itself (ALE's
    ``ALE/...`` and MinAtar's ``MinAtar/...`` ids), so that an id is judged by what it is, not by whether its
    package was imported."""
    if is_minatar(env_id):
        register_minatar()  # so that an agent can name what the environment is, e.g. its discrete actions
    elif env_id.startswith("ALE/"):
        try:
            import ale_py
        except ImportError:  # pragma: no cover - the atari extra is not installed
            return
        gym.register_envs(ale_py)


def make_gym_env(env_id: str) -> gym.Env:
    check_env_id(env_id)
    try:
        return gym.make(env_id)
    except (gym.error.Error, ImportError) as err:  # e.g. a dependency of a known id that is not installed
        raise SettingsError(f"environment {env_id!r} cannot be made: {err}") from None


def check_env_id(env_id: str) -> None:
    """Refuse an id gymnasium does not know (a misspelt game) from its registry alone, before anything is made:
    ``SettingsError`` naming it.  Ids that ``gym.make`` resolves further are left to it: ``module:Id`` (it imports
    the module, whose import registers the id) and an id without a version (it takes the latest)."""
    register_env_packages(env_id)
    if ":" in env_id:  # gym.make imports the module before the colon, whose import registers the id
        module = env_id.split(":", 1)[0]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a name that is no module's
            found = False
        if not found:
            raise SettingsError(f"unknown environment {env_id!r}: no module named {module!r} to import it from")
        return
    if env_id in gym.registry:
        return
    if is_minatar(env_id):
        raise SettingsError(unknown_minatar_game(env_id))
    if env_id.startswith("ALE/"):
        raise SettingsError(unknown_atari_game(env_id))
    try:
        if gym.envs.registration.parse_env_id(env_id)[2] is None:
            return
    except gym.error.Error as err:
        raise SettingsError(f"unknown environment {env_id!r}: {err}") from None
    register_env_packages("ALE/")  # ale-py also registers the older Atari ids (PongNoFrameskip-v4)
    if env_id in gym.registry:
        return
    try:
        gym.spec(env_id)  # for its message, which suggests the nearest known id
    except gym.error.Error as err:
        raise SettingsError(f"unknown environment {env_id!r}: {err}") from None


def evaluate(agent: Agent, env: gym.Env, seed: int, episodes: int) -> np.ndarray:
    """Returns of ``episodes`` episodes of the evaluation policy; the env is reseeded at the first."""
    returns = np.empty(episodes)
    start = getattr(agent, "start_evaluation", None)
    if start is not None:
        start(seed)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed) if i == 0 else env.reset()
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs, explore=False))
            total += float(r)
            done = term or trunc
        returns[i] = total
    return returns


def make_learner(spec: Spec, cfg: RunSettings, env: gym.Env, device: torch.device, method: Method):
    """The agent, the replay buffer, the exploration RNG and the agent's noise generator of a fresh run.

    Seeds the global torch RNG (the network initialisation) from ``cfg.seed``; see the module docstring.
    On a CUDA device it also limits cuDNN to deterministic kernels (``torch.backends.cudnn.deterministic``;
    convolutions' backward passes may otherwise sum with atomics, in an order that changes from run to run),
    so that a seed gives the same run and a resumed run continues as the uninterrupted one.
    """
    if device.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    streams = np.random.SeedSequence(cfg.seed).spawn(4)
    torch_seed = int(streams[0].generate_state(1)[0])
    rng = np.random.default_rng(streams[1])
    noise = torch.Generator(device=device)
    noise.manual_seed(int(streams[3].generate_state(1)[0]))
    torch.manual_seed(torch_seed)
    agent = spec.make_agent(cfg, env, device, rng, noise, method)
    capacity = replay_capacity(cfg)
    buffer = ReplayBuffer(capacity, sampler=method.make_sampler(capacity, np.random.default_rng(streams[2])),
                          diagnostics=cfg.diagnostics, **spec.buffer_args(cfg, env))  # fmt: skip
    try:
        method.attach(buffer)  # a learned sampler reads the buffer's stored fields
    except ValueError as err:
        raise sampler_error(cfg.sampler, err) from None
    return agent, buffer, rng, noise


def collect(spec: Spec, agent: Agent, env: gym.Env, buffer: ReplayBuffer, rng: np.random.Generator,
            obs: np.ndarray, explore: bool) -> tuple[np.ndarray, float, bool, bool]:  # fmt: skip
    """One environment step: act (uniformly at random unless ``explore``), step, store the transition.

    Returns the next observation, the reward and the terminated and truncated flags; resetting is the caller's.
    """
    action = agent.act(obs, explore=True) if explore else spec.random_action(env, rng)
    next_obs, reward, term, trunc, _ = env.step(action)
    buffer.add(obs[None], np.asarray(action)[None], np.array([reward]), np.asarray(next_obs)[None],
               np.array([term]), np.array([trunc]))  # fmt: skip
    return next_obs, reward, term, trunc


def learn(agent: Agent, buffer: ReplayBuffer, method: Method, step: int, batch_size: int,
          device: torch.device) -> dict:  # fmt: skip
    """One update: sample a batch (IS exponent at ``step``), update the agent, give the sampler its priorities."""
    batch = buffer.sample(batch_size, beta=method.beta_at(step), device=device)
    priority, stats = agent.update(batch, method)
    q_values = stats.pop("q_values", None)
    method.report(buffer, batch, priority, q_values)  # the sampler's priorities (and a learned sampler's Q-values)
    if q_values is not None and buffer.diagnostics is not None:
        buffer.diagnostics.on_values(q=q_values.detach().to("cpu").numpy())
    return stats


def sampler_error(sampler: str, err: Exception) -> SettingsError:
    """A replay method's refusal, with the setting it names written as the flag that gives it
    (:func:`~prioritylab.deep.methods.setting_named`): ``--replay.alpha``, ``--replay.ners-lr``."""
    name, rest = setting_named(err)
    text = f"--replay.{name.replace('_', '-')} {rest}" if name else rest
    return SettingsError(f"sampler {sampler}: {text}")


def check_settings(spec: Spec, cfg: RunSettings) -> None:
    """Every check of a run's settings alone (no environment, folder or file; the id is looked up in gymnasium's
    registry first, so that a misspelt game is named before any other setting): ``SettingsError`` naming the
    value."""
    check_env_id(cfg.env)
    check_common(cfg)
    spec.check(cfg)
    check_updates(spec, cfg)


def check_updates(spec: Spec, cfg: RunSettings) -> None:
    """Refuse a run that would end before its first update, unless ``allow_no_updates``."""
    starts, every = spec.learning_starts(cfg), spec.update_every(cfg)
    if cfg.allow_no_updates:
        return
    if cfg.steps < starts:  # the loop updates from step start_steps on, so steps == start_steps updates once
        raise SettingsError(f"--steps {cfg.steps} < --start-steps {starts}: the run would end before its first "
                            "update; lower --start-steps, raise --steps or pass --allow-no-updates")  # fmt: skip
    first = -(-max(starts, 1) // every) * every  # the loop updates at the steps >= starts that every divides
    if first > cfg.steps:
        raise SettingsError(f"the first update would come at step {first} (the first multiple of --update-every "
                            f"{every} from --start-steps {starts} on), after the run's last step {cfg.steps}; lower "
                            "--update-every, raise --steps or pass --allow-no-updates")  # fmt: skip


def check_environment(spec: Spec, cfg: RunSettings, env: gym.Env) -> tuple[Method, int]:
    """Every check of a run's settings against its environment ``env`` (made by ``spec.make_env``, which refuses
    an unknown id): the sampler can work on it and the run fits in memory (:func:`check_run_memory`).  Returns the
    run's replay method and the bytes the run needs at least; ``SettingsError`` naming the value.  ``train`` and
    ``prioritylab sweep`` (before any run starts) call it."""
    try:
        method = Method(cfg.sampler, cfg.replay, spec.defaults, cfg.steps)
        method.check_env(env)
    except ValueError as err:
        raise sampler_error(cfg.sampler, err) from None
    return method, check_run_memory(spec, cfg, env)


def replay_need(spec: Spec, cfg: RunSettings, env: gym.Env) -> tuple[int, int]:
    """``(slots, bytes)`` of the run's replay by its memory formula (:func:`~prioritylab.replay.estimate_bytes`);
    ``SettingsError`` when ``--buffer-size`` gives fewer slots than the replay needs."""
    args = spec.buffer_args(cfg, env)
    capacity = replay_capacity(cfg)
    least = least_slots(args.get("n_step", 1), args.get("frame_stack", 1))
    if capacity < least:
        raise SettingsError(f"buffer_size {cfg.buffer_size} gives a replay of {capacity} slots, fewer than the "
                            f"{least} it needs (n_step + frame_stack + 2)")  # fmt: skip
    need = estimate_bytes(capacity, args["obs_shape"], args["obs_dtype"], args.get("action_shape", ()),
                          args.get("action_dtype", np.float32), args.get("frame_stack", 1),
                          diagnostics=cfg.diagnostics)  # fmt: skip
    return capacity, need


def check_run_memory(spec: Spec, cfg: RunSettings, env: gym.Env) -> int:
    """The replay's memory formula against the memory available, before anything is allocated; then the other
    parts of the run that a setting sizes without a bound of its own (:func:`run_need`), each and all together.
    Returns the bytes the run needs at least: the replay's and those parts' together."""
    capacity, replay = replay_need(spec, cfg, env)
    check_memory(capacity, replay)
    parts = run_need(spec, cfg, env)
    total = replay + sum(need for _, _, need in parts)
    have = _checks.available_bytes()
    if have is None:  # pragma: no cover - not Linux
        return total
    size = _checks.size_text
    for option, what, need in parts:
        if need > have:
            raise SettingsError(f"{option} {getattr_flag(cfg, option)}: {what} at least {size(need)} but only "
                                f"{size(have)} of memory is available")  # fmt: skip
    if total > have:
        largest = max([("--buffer-size", "the replay", replay), *parts], key=lambda part: part[2])
        raise SettingsError(f"the run needs at least {size(total)} (the replay {size(replay)}, "
                            + ", ".join(f"{what.rsplit(' ', 1)[0]} {size(need)}" for _, what, need in parts)
                            + f") but only {size(have)} of memory is available; lower {largest[0]}")  # fmt: skip
    return total


def getattr_flag(cfg: RunSettings, option: str):
    """The value of the setting ``option`` names (``--batch-size``, ``--replay.ners-local``) in ``cfg``."""
    value = cfg
    for name in option.removeprefix("--").replace("-", "_").split("."):
        value = getattr(value, name)
    return " ".join(map(str, value)) if isinstance(value, tuple) else value


def run_need(spec: Spec, cfg: RunSettings, env: gym.Env) -> list[tuple[str, str, int]]:
    """``(option, part, bytes)`` of what a run holds besides its replay, each at least: the networks with Adam's
    moments (their widths, ``--hidden``), a sampled batch (``--batch-size``), an evaluation's returns
    (``--eval-episodes``) and NERS's scorer (``--replay.ners-local``, ``--replay.ners-score``).  These settings
    have no bound of their own: a size past the machine would otherwise fail at the first update or evaluation,
    after the run's folder is written.  Lower bounds, counted without allocating: the networks are built on
    torch's ``meta`` device, which holds shapes alone."""
    args = spec.buffer_args(cfg, env)
    obs = int(np.prod(args["obs_shape"], dtype=np.int64)) * np.dtype(args["obs_dtype"]).itemsize
    act_dtype = np.dtype(args.get("action_dtype", np.float32))
    act = int(np.prod(args.get("action_shape", ()), dtype=np.int64)) * act_dtype.itemsize
    item = 2 * obs + act + 8 + 3 * 4  # observation and next one, action, slot, reward, discount, weight
    parts = [("--hidden", "the networks need", network_bytes(spec, cfg, env)),
             ("--batch-size", "a batch needs", cfg.batch_size * item),
             ("--eval-episodes", "an evaluation's returns need", cfg.eval_episodes * 8)]  # fmt: skip
    if cfg.sampler == "ners":
        local, score = tuple(cfg.replay.ners_local), tuple(cfg.replay.ners_score)
        widths = [(1, *local), (1, *local), (2 * local[-1], *score, 1)]  # local and global parts, scorer (in >= 1)
        weights = sum(a * b + b for chain in widths for a, b in zip(chain, chain[1:], strict=False))
        option = "--replay.ners-local" if max(local) >= max(score, default=0) else "--replay.ners-score"
        parts.append((option, "NERS's scorer needs", 3 * 4 * weights))  # weights and Adam's two moments, float32
    return parts


def network_bytes(spec: Spec, cfg: RunSettings, env: gym.Env) -> int:
    """Bytes of the agent's networks (targets included) and of Adam's two moments of each optimised weight, from
    the agent built on torch's ``meta`` device (no memory, no random draws); a width too large to describe is
    ``SettingsError``."""
    meta = torch.device("meta")
    method = Method(cfg.sampler, cfg.replay, spec.defaults, cfg.steps)  # its checks compute on real tensors
    try:
        with torch.random.fork_rng(devices=[]), torch.device(meta):
            agent = spec.make_agent(cfg, env, meta, np.random.default_rng(0), torch.Generator(), method)
    except RuntimeError as err:
        if "overflow" not in str(err):  # torch: "Storage size calculation overflowed with sizes=[...]"
            raise
        raise SettingsError(f"hidden {cfg.hidden}: the networks are too large to build ({err})") from None
    parts = vars(agent).values()
    weights = sum(p.numel() * p.element_size() for m in parts if isinstance(m, torch.nn.Module) for p in m.parameters())
    optimised = sum(p.numel() * p.element_size() for o in parts if isinstance(o, torch.optim.Optimizer)
                    for group in o.param_groups for p in group["params"])  # fmt: skip
    return weights + 2 * optimised


def warn_if_first_batches_repeat(spec: Spec, cfg: RunSettings) -> None:
    """Name, once every check has passed, a batch larger than the transitions stored when updates start: valid
    (the samplers draw with replacement), but the first batches repeat transitions."""
    starts = spec.learning_starts(cfg)
    if cfg.batch_size > starts:
        warn(f"--batch-size {cfg.batch_size} is larger than the at most {starts} transitions stored when updates "
             f"start (--start-steps {starts}): the first batches draw transitions more than once")


LARGEST_PRIORITY = 1e6
"""A raw priority (|TD error| + eps) a run may meet: returns of MuJoCo tasks reach 1e4, and early TD errors their
size.  An alpha under which a smaller one overflows, ``raw ** alpha`` past the float range, is named at the start."""


def warn_if_priorities_may_overflow(cfg: RunSettings, method: Method) -> None:
    """Name, once every check has passed, an alpha (above 51) under which a priority below
    :data:`LARGEST_PRIORITY` overflows: valid, but the run stops at the first such priority."""
    if "alpha" not in METHOD_TABLE[cfg.sampler].reads or method.alpha <= 0.0:
        return
    log_largest = math.log(np.finfo(np.float64).max) / method.alpha  # the log of the largest priority that fits
    if log_largest < math.log(LARGEST_PRIORITY):
        largest = math.exp(log_largest)
        warn(f"with --replay.alpha {method.alpha} a priority above {largest:.6g} overflows the float range when "
             "raised to alpha; the run stops at the first TD error that large")


def check_threads(checkpoint: dict, path: Path) -> None:
    """A resumed run is bit-identical only at the thread count its checkpoint was written with."""
    saved, now = checkpoint.get("threads"), torch.get_num_threads()
    if saved is not None and saved != now:
        raise SettingsError(f"checkpoint {path} was written with {saved} torch thread(s) but this run would use "
                            f"{now}; resume with --threads {saved} (results match only at the same count)")  # fmt: skip


def evaluation_row(spec: Spec, cfg: RunSettings, agent, step: int, episodes: int, returns: np.ndarray,
                   updates: int, stats: dict, diagnostics: dict) -> dict:  # fmt: skip
    """One row of ``evaluations.csv``: composed here only, so :func:`evaluation_columns` names its columns."""
    extra = spec.score_columns(cfg, returns) if spec.score_columns is not None else {}
    return {"step": step, "episodes": episodes, "return_mean": float(returns.mean()),
            "return_std": float(returns.std()), **extra, "updates": updates,
            **{k: float(stats.get(k, math.nan)) for k in agent.stat_keys}, **diagnostics}  # fmt: skip


def evaluation_columns(spec: Spec, cfg: RunSettings, agent, buffer: ReplayBuffer) -> list[str]:
    """The columns of this run's ``evaluations.csv``, in order."""
    diagnostics = dict.fromkeys(DIAGNOSTICS, math.nan) if buffer.diagnostics is not None else {}
    return list(evaluation_row(spec, cfg, agent, 0, 0, np.zeros(1), 0, {}, diagnostics))


def check_columns(folder: Path, name: str, logged: list[str], now: list[str]) -> None:
    """Refuse, before any file changes, to resume a run whose ``name`` (``evaluations.csv``, ``timing.csv``) has
    other columns than this code logs (a resumption at another commit): its new rows would not fit the header."""
    if logged != now:
        missing, extra = [c for c in now if c not in logged], [c for c in logged if c not in now]
        differ = "; ".join(part for part in (f"this code also logs {', '.join(missing)}" if missing else "",
                                             f"it has {', '.join(extra)}, which this code does not log" if extra
                                             else "") if part) or "the same columns in another order"  # fmt: skip
        raise SettingsError(f"cannot resume {folder}: its {name} was written by other code ({differ}); "
                            "resume it with the code it ran with (its manifest's git_commit)")  # fmt: skip


def train(spec: Spec, cfg: RunSettings) -> Path:
    """Run (or resume) one training run; returns its folder.  Every check happens before any work.

    The run folder is locked for the run's life (:class:`~prioritylab.deep.run.RunLock`).  A run stopped by
    SIGINT/SIGTERM writes its checkpoint and raises :class:`~prioritylab.deep.run.Interrupted`.  Its warnings
    are named as ``prioritylab train <agent>``'s (:func:`~prioritylab.deep.run.warn`).
    """
    with speaking_as(spec.name):
        return _train(spec, cfg)


def _train(spec: Spec, cfg: RunSettings) -> Path:
    check_settings(spec, cfg)
    check_out(cfg.out)
    device = pick_device(cfg.device)
    env = spec.make_env(cfg.env, cfg)
    eval_env = spec.make_env(cfg.env, cfg)
    method, _ = check_environment(spec, cfg, env)
    warn_if_first_batches_repeat(spec, cfg)
    warn_if_priorities_may_overflow(cfg, method)
    folder = run_dir(cfg, spec.name)
    existed = folder.exists()
    lock = prepare_dir(folder, cfg.resume, cfg.overwrite, cfg.restart)
    try:
        # from here on SIGINT/SIGTERM ask for a stop at an episode end with a checkpoint, even one that arrives
        # while the run is still being set up (after its manifest is written, a sweep may stop it at any time)
        with StopSignal() as stop:
            return _train_locked(spec, cfg, folder, env, eval_env, device, method, stop)
    except SettingsError:
        if not existed:
            discard_new_dir(folder)
        raise
    finally:
        lock.release()


def _train_locked(spec: Spec, cfg: RunSettings, folder: Path, env: gym.Env, eval_env: gym.Env,
                  device: torch.device, method: Method, stop: StopSignal) -> Path:  # fmt: skip
    identity = {"agent": spec.name, "env": cfg.env, "sampler": cfg.sampler, "seed": cfg.seed}
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    manifest = folder / MANIFEST
    settings = recorded_now(cfg, spec.name, method.describe())  # what the manifest records of this run
    if cfg.resume and manifest.exists():  # before the checkpoint, which may take minutes to read
        check_resumable(folder, settings)
        if (folder / FINISHED).exists():  # nothing left to run: no file changes
            return folder
    checkpoint = load_checkpoint(folder / CHECKPOINT, identity) if cfg.resume else None
    if checkpoint is not None:
        check_threads(checkpoint, folder / CHECKPOINT)
        if not manifest.exists():
            raise SettingsError(f"cannot resume {folder}: it holds a checkpoint but no manifest.json, so the "
                                f"settings it ran with are unknown")  # fmt: skip
        check_checkpoint_is_this_runs(folder, checkpoint, settings)
    agent, buffer, rng, noise = make_learner(spec, cfg, env, device, method)
    rows, disagree = resumed_rows(folder, checkpoint) if checkpoint is not None else (None, [])
    if rows is not None:
        for name, logged, now in ((EVALS, rows[0], evaluation_columns(spec, cfg, agent, buffer)),
                                  (TIMING, rows[1], ["step", *Clock.COLUMNS])):  # fmt: skip
            if logged:
                check_columns(folder, name, list(logged[0]), now)

    step, updates, episodes, next_ckpt = 0, 0, 0, cfg.checkpoint_every
    if checkpoint is not None:
        agent.load_state_dict(checkpoint["agent"])
        buffer.load_state_dict(checkpoint["buffer"])
        rng.bit_generator.state = checkpoint["rng"]
        try:
            noise.set_state(checkpoint["noise"])
        except RuntimeError:  # a generator's state is the device's own: 5,056 bytes on the CPU, 16 on CUDA
            raise SettingsError(f"cannot resume {folder} on {device}: its checkpoint's noise generator ran on "
                                "another kind of device; resume it with the --device it ran on (its "
                                "manifest's device)") from None  # fmt: skip
        torch.set_rng_state(checkpoint["torch_rng"])
        step, updates, episodes, next_ckpt = (checkpoint[k] for k in ("step", "updates", "episodes", "next_ckpt"))
    env.reset(seed=cfg.seed)
    if checkpoint is not None:
        spec.set_env_state(env, checkpoint["env_state"])
    obs, _ = env.reset() if checkpoint is not None else env.reset(seed=cfg.seed)
    # the run's files change only now, once every part of the checkpoint has been restored
    log = RunLog(folder, step if checkpoint is not None else None, rows, disagree)
    clock = Clock(checkpoint["wall_time"], step, updates) if checkpoint is not None else Clock()
    write_run_manifest(folder, cfg, spec.name, device, method.describe(),
                       resumed_at=step if checkpoint is not None else None)  # fmt: skip
    starts, every = spec.learning_starts(cfg), spec.update_every(cfg)
    last_eval = float(log.evals[-1]["return_mean"]) if log.evals else math.nan
    ess = float(log.evals[-1].get("ess_mean", math.nan)) if log.evals else math.nan
    # the last update's statistics, logged at each evaluation: kept across a resume, as an evaluation may come
    # before the resumed run's first update (updates every k > 1 steps)
    stats: dict = dict(checkpoint.get("stats", {})) if checkpoint is not None else {}
    episode_return = 0.0
    saved_at = step if checkpoint is not None else None  # the step of the newest checkpoint on disk

    def save(reason: str) -> None:
        nonlocal saved_at
        saved_at = step
        with writing_into(folder):
            save_atomic({
                "identity": identity, "recorded": settings, "evals": len(log.evals), **log.recorded_rows(),
                "stats": {k: float(v) for k, v in stats.items()},
                "step": step, "updates": updates, "episodes": episodes, "next_ckpt": next_ckpt,
                "agent": agent.state_dict(), "buffer": buffer.state_dict(copy=False), "rng": rng.bit_generator.state,
                "noise": noise.get_state(), "torch_rng": torch.get_rng_state(), "env_state": spec.env_state(env),
                "wall_time": clock.elapsed, "reason": reason, "threads": torch.get_num_threads(),
            }, folder / CHECKPOINT, parents=False)  # fmt: skip

    bar = tqdm(total=cfg.steps, initial=step, disable=not cfg.progress, unit="step", dynamic_ncols=True,
               desc=f"{spec.name} {cfg.env} {cfg.sampler} s{cfg.seed}")  # fmt: skip
    stopped = False
    bar_updates, bar_time = updates, time.perf_counter()

    def overflowed(err: PriorityOverflow, at: int) -> RunStopped:
        """A priority out of range, from an update or from a new item's (the running maximum): one line."""
        bar.close()
        log.close()
        kept = f"its checkpoint of step {saved_at}" if saved_at is not None else "no checkpoint"
        return RunStopped(f"the run stopped at step {at} of {cfg.steps}: {err}; a smaller --replay.alpha keeps "
                          f"priorities in range. It is not finished; {folder} keeps {kept}")  # fmt: skip

    while step < cfg.steps:
        try:
            obs, reward, term, trunc = collect(spec, agent, env, buffer, rng, obs, explore=step >= starts)
        except PriorityOverflow as err:
            raise overflowed(err, step + 1) from None
        episode_return += float(reward)
        step += 1
        if step >= starts and step % every == 0 and len(buffer) >= 1:
            try:
                stats = learn(agent, buffer, method, step, cfg.batch_size, device)
            except PriorityOverflow as err:
                raise overflowed(err, step) from None
            updates += 1
        if step % cfg.eval_every == 0 or step == cfg.steps:
            returns = evaluate(agent, eval_env, cfg.seed + EVAL_SEED_OFFSET, cfg.eval_episodes)
            last_eval = float(returns.mean())
            buffer.sampler.on_evaluation({"return": last_eval, "step": step, "updates": updates})
            row = evaluation_row(spec, cfg, agent, step, episodes, returns, updates, stats,
                                 buffer.diagnostics_report())  # fmt: skip
            ess = row.get("ess_mean", math.nan)
            log.record(row, {"step": step, **clock.rates(step, updates)})
        if term or trunc:
            episodes += 1
            buffer.sampler.on_episode_end({"return": episode_return, "step": step, "updates": updates})
            episode_return = 0.0  # checkpoints are taken here, so a resumed run starts at 0 as well
            halt = stop.requested or (cfg.stop_after is not None and step >= cfg.stop_after)
            if (step >= next_ckpt or halt) and step < cfg.steps:
                while next_ckpt <= step:
                    next_ckpt += cfg.checkpoint_every
                save("stop" if halt else "periodic")
                if halt:
                    stopped = True
                    break
            obs, _ = env.reset()
        if step % 1000 == 0 or step == cfg.steps:
            now = time.perf_counter()
            ups = (updates - bar_updates) / max(now - bar_time, 1e-9)
            bar_updates, bar_time = updates, now
            bar.set_postfix(upd_s=f"{ups:.0f}", last_eval=f"{last_eval:.1f}", ess=f"{ess:.2f}", refresh=False)
            bar.update(step - bar.n)
    bar.close()
    log.close()
    if stopped and stop.requested:
        raise Interrupted(folder, step, stop.signum)
    if not stopped:
        save("finished")
        mark_finished(folder, {"step": step, "updates": updates, "episodes": episodes, "last_eval": last_eval,
                               "wall_time": clock.elapsed})  # fmt: skip
    return folder
