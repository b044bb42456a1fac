"""What every training run shares: settings, the run folder, logs, checkpoints, evaluation, signals.

A run folder holds:

* ``evaluations.csv``: one row per evaluation (step, episodes, mean and std of
  the return, and the sampler diagnostics); deterministic, so an interrupted
  and resumed run writes the same bytes as an uninterrupted one;
* ``timing.csv``: wall time, env steps/s and updates/s at each evaluation (the
  machine's speed, kept apart from the deterministic results);
* ``manifest.json`` (config, commit, package versions, device), TensorBoard
  events in ``tb/``, and ``checkpoint.pt`` (networks, optimisers, the whole
  replay, every RNG, counters), written atomically.

Checkpoints are taken at episode ends (every ``checkpoint_every`` steps, on
SIGTERM/Ctrl-C, and at ``stop_after``).  There the environment's state is
small: its RNG for MuJoCo and other gymnasium envs, the emulator's cloned
state with its RNG for ALE (each agent's ``Spec.env_state``).  Resuming
there continues bit-identically on the CPU.
"""

from __future__ import annotations

import csv
import shutil
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from .._cli import check_output_dir
from ..results import atomic_write, write_csv, write_json, write_manifest
from .methods import METHODS, ReplaySettings

CHECKPOINT = "checkpoint.pt"
EVALS = "evaluations.csv"
TIMING = "timing.csv"
RUN_FILES = (CHECKPOINT, EVALS, TIMING, "manifest.json", "finished.json", "tb")


class SettingsError(ValueError):
    """A bad setting, reported as one line before any work starts."""


@dataclass
class RunSettings:
    """Settings every agent shares."""

    env: str = "Hopper-v5"
    """Gymnasium environment id."""
    sampler: str = "uniform"
    """Replay method: uniform, per, lap, pal, pser, ners (docs/ners.md)."""
    steps: int = 1_000_000
    """Environment steps to train for (LAP/PAL: 1M for MuJoCo)."""
    seed: int = 0
    """Seed of every random component (networks, exploration, replay, environment)."""
    device: str = "auto"
    """Torch device: auto (CUDA when present), cpu, cuda, cuda:1, ..."""
    out: Path = Path("runs")
    """Parent folder; the run is written to out/<agent>_<env>_<sampler>_s<seed>."""
    resume: bool = False
    """Continue the run in the folder from its checkpoint."""
    overwrite: bool = False
    """Delete a previous run in the folder and start afresh."""
    eval_every: int = 5000
    """Evaluate every this many environment steps (LAP App. D: 5k)."""
    eval_episodes: int = 10
    """Episodes per evaluation, deterministic policy, env seeded with seed + 100 (LAP App. D)."""
    checkpoint_every: int = 50_000
    """Checkpoint at the first episode end after every this many steps."""
    stop_after: int | None = None
    """Stop with a checkpoint at the first episode end after this step (resume later with --resume)."""
    threads: int = 0
    """Torch CPU threads (0: torch's default)."""
    progress: bool = True
    """Show a progress bar."""
    diagnostics: bool = True
    """Log what the sampler replays at each evaluation (ESS, ages, coverage, spread; docs/diagnostics.md)."""
    replay: ReplaySettings = field(default_factory=ReplaySettings)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as err:
        raise SettingsError(f"device {name!r} is not a torch device: {err}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SettingsError(f"device {name!r} asked for, but CUDA is not available here")
    return dev


def check_common(cfg: RunSettings) -> None:
    """Checks that need no environment: run them first."""
    if cfg.sampler not in METHODS:
        raise SettingsError(f"unknown sampler {cfg.sampler!r}; choose one of {', '.join(METHODS)}")
    for name in ("steps", "eval_every", "eval_episodes", "checkpoint_every"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or value <= 0:
            raise SettingsError(f"{name} must be a positive integer, got {value!r}")
    if cfg.stop_after is not None and cfg.stop_after <= 0:
        raise SettingsError(f"stop_after must be positive, got {cfg.stop_after!r}")
    if cfg.resume and cfg.overwrite:
        raise SettingsError("give --resume or --overwrite, not both")
    if cfg.threads < 0:
        raise SettingsError(f"threads must be >= 0, got {cfg.threads}")


def run_dir(cfg: RunSettings, agent: str) -> Path:
    env = cfg.env.replace("/", "-")
    return Path(cfg.out) / f"{agent}_{env}_{cfg.sampler}_s{cfg.seed}"


def prepare_dir(path: Path, resume: bool, overwrite: bool) -> None:
    """Check the run folder before any work: writable, and not holding a run we would clobber."""
    try:
        check_output_dir(path, option="output folder")
    except ValueError as err:
        raise SettingsError(str(err)) from None
    finished = (path / "finished.json").exists()
    started = (path / CHECKPOINT).exists() or (path / EVALS).exists()
    if resume:
        if not (path / CHECKPOINT).exists():
            raise SettingsError(f"--resume: {path} holds no checkpoint to resume from")
        return
    if overwrite:
        for name in RUN_FILES:
            target = path / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        return
    if finished:
        raise SettingsError(f"{path} already holds a finished run; pass --overwrite to replace it")
    if started:
        raise SettingsError(f"{path} holds an unfinished run; pass --resume to continue it or --overwrite")


def save_atomic(obj, path: Path) -> None:
    """``torch.save`` through a temporary file and a rename: a kill never leaves a corrupt checkpoint."""
    atomic_write(path, lambda fh: torch.save(obj, fh), binary=True)


def load_checkpoint(path: Path, identity: dict) -> dict:
    """Load ``checkpoint.pt``; refuse one written by another agent, environment or sampler."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unreadable file gets one message
        raise SettingsError(f"cannot read checkpoint {path}: {err}") from None
    saved = state.get("identity") if isinstance(state, dict) else None
    if saved != identity:
        raise SettingsError(f"checkpoint {path} was written by {saved}, not by this run {identity}")
    return state


class StopSignal:
    """SIGINT/SIGTERM ask the loop to stop at the next episode end (with a checkpoint); a second SIGINT aborts."""

    def __init__(self):
        self.requested = False
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\nsignal {signum}: stopping at the end of this episode, with a checkpoint", flush=True)

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False


class RunLog:
    """Evaluation rows (deterministic) and timing rows, CSV and TensorBoard."""

    def __init__(self, path: Path, resume_step: int | None):
        self.path = path
        self.evals: list[dict] = []
        self.timing: list[dict] = []
        if resume_step is not None:  # drop rows written after the checkpoint we resume from
            self.evals = [r for r in _read_csv(path / EVALS) if int(r["step"]) <= resume_step]
            self.timing = [r for r in _read_csv(path / TIMING) if int(r["step"]) <= resume_step]
        from torch.utils.tensorboard import SummaryWriter

        self.tb = SummaryWriter(str(path / "tb"), purge_step=resume_step + 1 if resume_step is not None else None)

    def record(self, row: dict, timing: dict) -> None:
        self.evals.append({k: _fmt(v) for k, v in row.items()})
        self.timing.append({k: _fmt(v) for k, v in timing.items()})
        write_csv(self.path / EVALS, self.evals, lineterminator="\n")
        write_csv(self.path / TIMING, self.timing, lineterminator="\n")
        step = int(row["step"])
        for k, v in {**row, **timing}.items():
            if k != "step" and isinstance(v, (int, float, np.floating)) and np.isfinite(v):
                self.tb.add_scalar(k, float(v), step)
        self.tb.flush()

    def close(self) -> None:
        self.tb.close()


def _fmt(v):
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return v


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


class Clock:
    """Wall time and rates since the last evaluation (kept out of the deterministic results)."""

    def __init__(self, wall_before: float = 0.0):
        self.start = time.perf_counter() - wall_before
        self.t_last, self.steps_last, self.updates_last = time.perf_counter(), 0, 0

    def rates(self, steps: int, updates: int) -> dict:
        now = time.perf_counter()
        dt = max(now - self.t_last, 1e-9)
        out = {
            "wall_time": now - self.start,
            "steps_per_s": (steps - self.steps_last) / dt,
            "updates_per_s": (updates - self.updates_last) / dt,
        }
        self.t_last, self.steps_last, self.updates_last = now, steps, updates
        return out

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def write_run_manifest(path: Path, cfg, agent: str, device: torch.device, method: dict) -> None:
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}
    write_manifest(path, {"agent": agent, **config}, {"device": str(device), "method": method,
                                                      "torch_threads": torch.get_num_threads()})  # fmt: skip


def mark_finished(path: Path, summary: dict) -> None:
    write_json(path / "finished.json", summary)


def env_rng_state(env) -> dict:
    return env.unwrapped.np_random.bit_generator.state


def set_env_rng_state(env, state: dict) -> None:
    gen = np.random.Generator(np.random.PCG64())
    gen.bit_generator.state = state
    env.unwrapped.np_random = gen
