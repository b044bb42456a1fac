"""What every training run shares: settings, the run folder, logs, checkpoints, evaluation, signals.

A run folder holds:

* ``evaluations.csv``: one row per evaluation (step, episodes, mean and std of
  the return, and the sampler diagnostics); deterministic, so an interrupted
  and resumed run writes the same bytes as an uninterrupted one;
* ``timing.csv``: wall time, env steps/s and updates/s at each evaluation (the
  machine's speed, kept apart from the deterministic results);
* ``manifest.json`` (config, commit, package versions, device, torch threads;
  a resumed run keeps its first record and lists each resumed stretch's in
  ``resumed``), TensorBoard events in ``tb/``, and ``checkpoint.pt`` (networks,
  optimisers, the whole replay, every RNG, counters, the last update's
  statistics, the torch thread count, the settings it was written with and the
  evaluation and timing rows logged by then), written atomically, with its
  SHA-256 in ``checkpoint.pt.sha256``; ``--resume`` verifies the digest before
  it reads the checkpoint, refuses one written with other settings (another
  run's), and continues from the rows the checkpoint recorded (a file that
  disagrees with them is written back, with a warning);
* ``.lock``: the run's lock (``fcntl.flock``, held for the run's life, the
  holder's pid inside), so a second process never writes into a live run.

Checkpoints are taken at episode ends (every ``checkpoint_every`` steps, on
SIGTERM/Ctrl-C, and at ``stop_after``).  There the environment's state is
small: its RNG for MuJoCo and other gymnasium envs, the emulator's cloned
state with its RNG for ALE (each agent's ``Spec.env_state``).  Resuming
there continues bit-identically on the CPU at the same torch thread count
(one by default); a resume with another count is refused.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from .. import _checks
from .._cli import check_not_a_file, check_not_in_run, check_output_dir, train_program
from ..provenance import changed_settings, replay_slots
from ..results import (
    CHECKPOINT,
    EVALS,
    FINISHED,
    MANIFEST,
    TIMING,
    NotWhole,
    as_recorded,
    atomic_write,
    new_manifest,
    record_differences,
    run_folder,
    whole_rows,
    write_csv,
    write_json,
)
from ..samplers.kernels import MAX_WRITES
from .methods import METHODS, ReplaySettings

DIGEST = CHECKPOINT + ".sha256"
LOCK = ".lock"
RUN_FILES = (FINISHED, CHECKPOINT, DIGEST, EVALS, TIMING, MANIFEST, "tb")
"""A run's files, ``finished.json`` first: a start afresh killed while deleting them leaves no run looking finished."""
MAX_COUNT = MAX_WRITES  # steps and slots are int64 counters in the replay and the checkpoint (the replay's bound)
COUNT_BOUND = f"2**{MAX_COUNT.bit_length() - 1}"  # as the messages write it
EVAL_SEED_OFFSET = 100
"""The evaluation env is seeded with seed + 100 (LAP App. D: "the training seed + a constant"; 100 is its authors'
code)."""
MAX_SEED = 2**32 - 1 - EVAL_SEED_OFFSET  # both seeds stay 32-bit


class SettingsError(ValueError):
    """A bad setting, reported as one line before any work starts."""


_speaker: ContextVar[str] = ContextVar("speaker", default="prioritylab")


@contextmanager
def speaking_as(agent: str):
    """Within it, :func:`warn` names ``agent``'s program (the training loop sets it for the run's life); outside,
    as from a script that reads a checkpoint, it names the package."""
    token = _speaker.set(train_program(agent))
    try:
        yield
    finally:
        _speaker.reset(token)


def warn(text: str) -> None:
    """One warning line on stderr, named as ``train``'s own are: ``prioritylab train dqn: warning: ...``."""
    print(f"{_speaker.get()}: warning: {text}", file=sys.stderr)


@dataclass
class RunSettings:
    """Settings every agent shares."""

    env: str = "Hopper-v5"
    """Gymnasium environment id (LAP/PAL ran the MuJoCo -v3 tasks, which gymnasium no longer maintains)."""
    sampler: str = "uniform"
    """Replay method: uniform, per, lap, pal, pser, ners (docs/ners.md)."""
    steps: int = 1_000_000
    """Environment steps to train for: 1M, the span over which LAP/PAL App. B Table 3 times its runs ("1 million
    time steps"); the LAP text gives no training length, and its authors' code trains 3M (the paper budget of
    deep/lap_mujoco.py)."""
    seed: int = 0
    """Seed of every random component (networks, exploration, replay, environment)."""
    device: str = "auto"
    """Torch device: auto (CUDA when present), cpu, cuda, cuda:1, ..."""
    out: Path = Path("runs")
    """Parent folder; the run is written to out/<agent>_<env>_<sampler>_s<seed>."""
    resume: bool = False
    """Continue the run in the folder from its checkpoint (a finished run: its settings are checked, nothing is run)."""
    overwrite: bool = False
    """Delete a previous run in the folder and start afresh."""
    restart: bool = False
    """Start afresh a run stopped before its first checkpoint (what a sweep passes for one): refused, deleting
    nothing, if by the time this run holds the folder's lock it holds a checkpoint or a finished run."""
    eval_every: int = 5000
    """Evaluate every this many environment steps (LAP App. D: 5k)."""
    eval_episodes: int = 10
    """Episodes per evaluation, deterministic policy, env seeded with seed + 100 (LAP App. D:
    "the training seed + a constant"; 100 is its authors' code's)."""
    checkpoint_every: int = 50_000
    """Checkpoint at the first episode end after every this many steps."""
    stop_after: int | None = None
    """Stop with a checkpoint at the first episode end after this step (resume later with --resume)."""
    threads: int = 1
    """Torch CPU threads (0: torch's default, which depends on the machine). One by default: the results
    then do not depend on the core count, a loaded machine is not slowed down by oversubscription, and a
    resume must use the count the checkpoint was written with."""
    allow_no_updates: bool = False
    """Accept steps < start_steps, a run that ends before its first update (its results are a random policy's);
    updates start at step start_steps."""
    progress: bool = True
    """Show a progress bar."""
    diagnostics: bool = True
    """Log what the sampler replays at each evaluation (ESS, ages, coverage, spread; docs/diagnostics.md)."""
    replay: ReplaySettings = field(default_factory=ReplaySettings)


def replay_capacity(cfg: RunSettings) -> int:
    """Slots of the run's replay: ``buffer_size``, or room for the whole run when it is shorter.

    Besides one slot per step, the buffer writes a tail slot (the episode's final observation, never
    sampled) per finished episode, at most one per step, so a run of ``steps`` needs at most ``2 * steps``.
    A run shorter than ``buffer_size`` thus never overwrites a transition, as a longer run would not by the
    same step.  Runs recorded before this rule had ``steps`` slots and, near their end, overwrote their
    oldest transitions (a 60k-step run of 200-step episodes: over its last 298 updates); their manifests
    give their capacity through :func:`prioritylab.provenance.recorded`."""
    return replay_slots(cfg.buffer_size, cfg.steps)


def pick_device(name: str) -> torch.device:
    """``name`` as a torch device that this machine has (``auto``: CUDA when present); ``SettingsError`` if not."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as err:
        raise SettingsError(f"device {name!r} is not a torch device: {err}") from None
    if dev.type not in ("cpu", "cuda"):  # torch names more (mps, xpu, meta): the agents are built and tested on these
        raise SettingsError(f"device {name!r}: the agents run on the CPU or a CUDA GPU (cpu, cuda, cuda:N, auto)")
    if dev.type == "cpu" and dev.index not in (None, 0):  # torch takes any index and ignores it
        raise SettingsError(f"device {name!r}: torch has one CPU device (cpu, or cpu:0); it uses the cores "
                            "--threads gives")  # fmt: skip
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SettingsError(f"device {name!r} asked for, but CUDA is not available here")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise SettingsError(f"device {name!r} asked for, but this machine has {torch.cuda.device_count()} CUDA "
                            f"device(s), numbered from 0")  # fmt: skip
    return dev


def check_common(cfg: RunSettings) -> None:
    """Checks that need no environment: run them first."""
    if cfg.sampler not in METHODS:
        raise SettingsError(f"unknown sampler {cfg.sampler!r}; choose one of {', '.join(METHODS)}")
    for name in ("steps", "eval_every", "eval_episodes", "checkpoint_every"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or value <= 0:
            raise SettingsError(f"{name} must be a positive integer, got {value!r}")
        if value > MAX_COUNT:
            raise SettingsError(f"{name} must be at most {COUNT_BOUND} (an int64 counter), got {value!r}")
    if not isinstance(cfg.seed, int) or not 0 <= cfg.seed <= MAX_SEED:
        raise SettingsError(f"seed must be an integer in [0, 2**32 - {EVAL_SEED_OFFSET + 1}] (evaluation uses seed + "
                            f"{EVAL_SEED_OFFSET}), "
                            f"got {cfg.seed!r}")  # fmt: skip
    if cfg.stop_after is not None and not 0 < cfg.stop_after <= MAX_COUNT:
        raise SettingsError(f"stop_after must be positive and at most {COUNT_BOUND}, got {cfg.stop_after!r}")
    if cfg.stop_after is not None and cfg.stop_after >= cfg.steps:  # it would never stop the run: a slip
        raise SettingsError(f"--stop-after {cfg.stop_after} is not before the run's last step (--steps {cfg.steps}), "
                            "so it would never stop the run; give a step below --steps, or leave it out")  # fmt: skip
    if cfg.resume + cfg.overwrite + cfg.restart > 1:
        raise SettingsError("give one of --resume, --overwrite and --restart, not several")
    if not 0 <= cfg.threads <= 4096:
        raise SettingsError(f"threads must be in [0, 4096], got {cfg.threads}")
    size = getattr(cfg, "buffer_size", None)
    if isinstance(size, int) and size > MAX_COUNT:
        raise SettingsError(f"buffer_size must be at most {COUNT_BOUND}, got {size!r}")
    for setting in fields(cfg):  # a NaN or infinite rate, noise or epsilon would fail late, or never learn
        value = getattr(cfg, setting.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise SettingsError(f"{setting.name} must be a finite number, got {value!r}")


def check_memory(capacity: int, need: int) -> None:
    """Refuse a replay of ``capacity`` slots needing ``need`` bytes when less memory is available."""
    have = _checks.available_bytes()
    if have is not None and need > have:
        raise SettingsError(f"a replay of {capacity:,} transitions needs {_checks.size_text(need)} "
                            f"({need // capacity:,} bytes each) but only {_checks.size_text(have)} of memory is "
                            f"available; lower --buffer-size")  # fmt: skip


def check_out(out: Path) -> None:
    """``--out``, the parent of the run's folder, before any work: not an existing file, nor a training run's folder
    or a folder inside one (a run nested in another run's files, which ``prioritylab report`` and ``collect`` would
    find with it); ``SettingsError`` naming it."""
    try:
        check_not_a_file(out, "--out")
        check_not_in_run(out, "--out", "give the folder that holds the runs", why="")
    except ValueError as err:
        raise SettingsError(str(err)) from None


def run_dir(cfg: RunSettings, agent: str) -> Path:
    return Path(cfg.out) / run_folder(agent, cfg.env, cfg.sampler, cfg.seed)


def flocks(file: Path | int) -> list[tuple[int, bool]]:
    """``(pid, waiting)`` for each ``flock`` on ``file`` (a path or an open descriptor), as Linux's
    ``/proc/locks`` lists them: held (``waiting`` False), or blocked on it. Empty where there is no such table.

    A line reads ``1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF`` (major and minor in hex); a
    process blocked on that lock has a line with ``->`` after the number. The pid is the locking process's, as
    seen from this one's pid namespace (0 where it cannot be seen)."""
    info = os.stat(file)
    here = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return []
    found = []
    for line in table.splitlines():
        fields = line.split()
        waiting = len(fields) > 1 and fields[1] == "->"
        fields = [fields[0], *fields[2:]] if waiting else fields
        if len(fields) > 5 and fields[1] == "FLOCK":
            try:
                major, minor, inode = fields[5].split(":")
                if (int(major, 16), int(minor, 16), int(inode)) == here:
                    found.append((int(fields[4]), waiting))
            except ValueError:  # a line of another layout names no lock of this file
                continue
    return found


class RunLock:
    """An exclusive ``fcntl.flock`` on the run folder's ``.lock``, held for the run's life.

    The holder writes its pid into the file; a second process is refused with one line naming it, as the
    kernel's lock table gives it (:func:`flocks`), or where there is none, as the file does.
    The kernel drops the lock when the holder exits, however it exits (a kill included), so a stale
    file never blocks a run.  ``.lock`` stays in the folder (removing it would let a waiting process
    lock a file nobody else sees); the one removal, of a new folder a refused run made, is caught: a lock
    taken on a file no longer at ``.lock`` is refused.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        path = self.folder / LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = self._holder(fd)
            os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise SettingsError(f"{self.folder} is in use by another run (pid {holder}); "
                                    "wait for it to end or stop it first") from None  # fmt: skip
            raise SettingsError(f"cannot lock {path}: {err.strerror or err}") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:  # another run removed the folder it had made between this open and this lock
            os.close(fd)
            raise SettingsError(f"{self.folder} was removed by another run as this one started; start it again")
        self.fd = fd
        return self

    def claim(self) -> None:
        """Write this process's pid into the held lock file: once the folder is this run's (its contents checked),
        so that a run refused for them leaves the file as it found it."""
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()}\n".encode())

    @staticmethod
    def _holder(fd: int, patience: float = 1.0) -> str:
        """The pid of the lock's holder: the kernel's (:func:`flocks`), where it names one; else the pid the
        holder wrote, read through ``fd``. The file alone can name a stale pid, in the moment between a new
        holder's lock and its write; and a holder that has just taken the lock writes it a moment later, so an
        empty file is read again for up to ``patience`` seconds before "unknown"."""
        held = {pid for pid, waiting in flocks(fd) if not waiting and pid > 0}
        if len(held) == 1:
            return str(held.pop())
        end = time.monotonic() + patience
        while True:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            if holder or time.monotonic() >= end:
                return holder or "unknown"
            time.sleep(0.02)

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the temporary files (``.checkpoint.pt.*.tmp``, ...) a kill during an atomic write left behind.

    Called with the run's lock held, so no live writer owns them.
    """
    stale = []
    for name in RUN_FILES:
        for tmp in path.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)
            stale.append(tmp)
    return stale


def prepare_dir(path: Path, resume: bool, overwrite: bool, restart: bool = False) -> RunLock:
    """Check the run folder before any work: writable, not in use by another process (its lock, which is
    returned held), and not holding a run we would clobber.  A run refused for its folder's contents leaves
    no folder behind; one refused for the lock leaves the folder to its holder, which may have made it
    between this process's look and its lock."""
    if resume and not (path / CHECKPOINT).exists() and not _finished_with_record(path):  # before mkdir
        raise SettingsError(f"--resume: {path} holds no checkpoint to resume from")
    existed = path.exists()
    try:
        check_output_dir(path, option="output folder")
    except ValueError as err:
        raise SettingsError(str(err)) from None
    lock = RunLock(path).acquire()  # refused: the folder is another run's, even if this process made it
    try:
        _check_contents(path, resume, overwrite, restart)
    except SettingsError:
        if not existed:  # removed while the lock is held, so no run of its own can be in it
            discard_new_dir(path)
        lock.release()
        raise
    lock.claim()
    remove_stale_temporaries(path)
    return lock


def discard_new_dir(path: Path) -> None:
    """Remove a run folder this process created, if it holds nothing but the lock file."""
    if path.is_dir() and {p.name for p in path.iterdir()} <= {LOCK}:
        shutil.rmtree(path, ignore_errors=True)


def _finished_with_record(path: Path) -> bool:
    """A finished run with the manifest its settings are checked against: ``--resume`` needs no checkpoint
    there (nothing is left to run; committed runs keep only their small files)."""
    return (path / FINISHED).exists() and (path / MANIFEST).exists()


def _check_contents(path: Path, resume: bool, overwrite: bool, restart: bool = False) -> None:
    finished = (path / FINISHED).exists()
    started = (path / CHECKPOINT).exists() or (path / EVALS).exists()
    if resume:
        if not (path / CHECKPOINT).exists() and not _finished_with_record(path):  # nothing left to run there
            raise SettingsError(f"--resume: {path} holds no checkpoint to resume from")
        return
    if restart and (finished or (path / CHECKPOINT).exists()):  # so was never for --restart, or was run since
        held = "a finished run" if finished else "a checkpoint"
        raise SettingsError(f"--restart: {path} now holds {held}, and --restart is for a run stopped before its "
                            "first checkpoint (a sweep passes it when it saw one, and another process may have run "
                            "it since); nothing was deleted (pass --resume or --overwrite)")  # fmt: skip
    if overwrite or restart:
        _remove_run_files(path)
        return
    if finished:
        raise SettingsError(f"{path} already holds a finished run; pass --overwrite to replace it")
    if started and (path / CHECKPOINT).exists():
        raise SettingsError(f"{path} holds an unfinished run; pass --resume to continue it or --overwrite")
    if started:  # stopped before its first checkpoint: nothing to resume from
        raise SettingsError(f"{path} holds a run stopped before its first checkpoint; pass --restart to run it "
                            "again or --overwrite")  # fmt: skip
    _remove_run_files(path)  # a run that stopped before its first evaluation left no result, but its events


def _remove_run_files(path: Path) -> None:
    for name in RUN_FILES:
        target = path / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


class _Hashing:
    """A binary file that hashes what is written through it."""

    def __init__(self, fh):
        self.fh, self.sha = fh, hashlib.sha256()

    def write(self, data) -> int:
        self.sha.update(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def digest_path(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + ".sha256")


def _read_digest(path: Path) -> dict | None:
    try:
        value = json.loads(digest_path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise SettingsError(f"checksum file {digest_path(path)} is not readable: {err}") from None
    if not isinstance(value, dict) or not isinstance(value.get("sha256"), str):
        raise SettingsError(f"checksum file {digest_path(path)} holds no sha256")
    return value


def save_atomic(obj, path: Path, parents: bool = True) -> None:
    """``torch.save`` through a temporary file and a rename, with the SHA-256 of the bytes in
    ``<path>.sha256``: a kill never leaves a corrupt checkpoint, and a corrupted one is detected.

    The digest file is written before the rename and names the new digest and the one it replaces, then
    rewritten with the new one alone: a kill at any point leaves a checkpoint whose digest it lists. After a
    save cut off between the two writes the record lists two digests, so the one replaced now is read from
    the file on disk: a second cut-off save must not name a checkpoint that was never written.
    """
    path = Path(path)
    previous = _read_digest(path) if path.exists() else None
    if previous is not None and "previous" in previous:
        previous = {"sha256": file_sha256(path)}
    written = {}

    def write(fh):
        hashing = _Hashing(fh)
        torch.save(obj, hashing)
        fh.flush()
        os.fsync(fh.fileno())
        swap = {"sha256": hashing.sha.hexdigest()}
        if previous is not None:
            swap["previous"] = previous["sha256"]
        write_json(digest_path(path), swap, parents=parents)
        written["sha256"] = swap["sha256"]

    atomic_write(path, write, binary=True, parents=parents)
    write_json(digest_path(path), written, parents=parents)


def file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            sha.update(chunk)
    return sha.hexdigest()


def verify_checkpoint(path: Path) -> bool:
    """Refuse a checkpoint whose bytes do not match its recorded SHA-256 (one line, before it is read);
    ``False`` for a checkpoint without ``.sha256``, which :func:`load_checkpoint` accepts only from code that
    wrote none."""
    recorded = _read_digest(path)
    if recorded is None:
        return False
    actual = file_sha256(path)
    if actual not in (recorded["sha256"], recorded.get("previous")):
        raise SettingsError(f"checkpoint {path} is corrupt: its SHA-256 {actual[:16]}... does not match the "
                            f"recorded {recorded['sha256'][:16]}... in {digest_path(path).name}")  # fmt: skip
    return True


def load_checkpoint(path: Path, identity: dict) -> dict:
    """Load ``checkpoint.pt`` after checking its SHA-256; refuse one written by another agent, environment
    or sampler.  A checkpoint without its ``.sha256`` is accepted, with a warning, only if it was written
    before the digests existed (it lacks the thread count that the same code began to save); one written since
    has lost its digest, and a changed byte in it would go unseen, so it is refused."""
    verified = verify_checkpoint(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unreadable file gets one message
        raise SettingsError(f"cannot read checkpoint {path}: {err}") from None
    saved = state.get("identity") if isinstance(state, dict) else None
    if saved != identity:
        raise SettingsError(f"checkpoint {path} was written by {saved}, not by this run {identity}")
    if not verified:
        if "threads" in state:  # written since the digests, by the same commit
            raise SettingsError(f"checkpoint {path} has lost its checksum file {digest_path(path).name}, which "
                                "the code that wrote it always writes: it cannot be verified, so it is not "
                                "resumed (start the run again with --overwrite)")  # fmt: skip
        warn(f"{path} has no checksum file {digest_path(path).name} (written before the digests existed); "
             "resuming unverified")
    return state


class StopSignal:
    """SIGINT/SIGTERM ask the loop to stop at the next episode end (with a checkpoint); a second SIGINT aborts."""

    def __init__(self):
        self.requested = False
        self.signum: int | None = None
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = signum
        again = " (a second Ctrl-C stops at once, without one)" if signum == signal.SIGINT else ""
        print(f"\nsignal {signum}: stopping at the end of this episode, with a checkpoint{again}", flush=True)

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False


class RunStopped(Exception):
    """The run could not go on and stopped without finishing: a sampler refused a priority whose mass passes the
    float range (a setting's consequence, met only at a TD error large enough), or its folder was moved or
    deleted under it.  Its folder keeps what the run wrote, its last checkpoint included."""


class Interrupted(Exception):
    """The run stopped on a signal, after writing its checkpoint."""

    def __init__(self, folder: Path, step: int, signum: int):
        super().__init__(f"interrupted at step {step}; resume with --resume")
        self.folder, self.step, self.signum = folder, step, signum


class RunLog:
    """Evaluation rows (deterministic) and timing rows, CSV and TensorBoard."""

    def __init__(self, path: Path, resume_step: int | None, rows: tuple[list[dict], list[dict]] | None = None,
                 disagree: list[str] | None = None):  # fmt: skip
        """``rows``: a resumed run's evaluation and timing rows up to its checkpoint (:func:`resumed_rows`),
        written back at once where the files disagreed with them (``disagree`` names how, one warning each)."""
        self.path = path
        self.evals: list[dict] = list(rows[0]) if rows is not None else []
        self.timing: list[dict] = list(rows[1]) if rows is not None else []
        if disagree:
            self._write()
            for line in disagree:
                warn(f"{line}; the checkpoint's rows were written back")
        from torch.utils.tensorboard import SummaryWriter

        self.tb = SummaryWriter(str(path / "tb"), purge_step=resume_step + 1 if resume_step is not None else None)

    def record(self, row: dict, timing: dict) -> None:
        self.evals.append({k: _fmt(v) for k, v in row.items()})
        self.timing.append({k: _fmt(v) for k, v in timing.items()})
        self._write()
        step = int(row["step"])
        for k, v in {**row, **timing}.items():
            if k != "step" and isinstance(v, (int, float, np.floating)) and np.isfinite(v):
                self.tb.add_scalar(k, float(v), step)
        self.tb.flush()

    def _write(self) -> None:
        with writing_into(self.path):
            write_csv(self.path / EVALS, self.evals, lineterminator="\n", parents=False)
            write_csv(self.path / TIMING, self.timing, lineterminator="\n", parents=False)

    def recorded_rows(self) -> dict:
        """The rows so far as the files hold them (each cell its text), for the checkpoint to record."""
        return {"eval_rows": [{k: str(v) for k, v in r.items()} for r in self.evals],
                "timing_rows": [{k: str(v) for k, v in r.items()} for r in self.timing]}  # fmt: skip

    def close(self) -> None:
        self.tb.close()


def _folder_gone(folder: Path) -> RunStopped:
    return RunStopped(f"the run's folder {folder} no longer exists (moved or deleted while the run wrote into it); "
                      "the run stopped")  # fmt: skip


@contextmanager
def writing_into(folder: Path):
    """Write a run's files (each with ``parents=False``): a run whose folder was moved or deleted under it stops in
    one line, before or during the write, rather than making the old path again and scattering the run over two
    folders."""
    if not folder.is_dir():
        raise _folder_gone(folder)
    try:
        yield
    except FileNotFoundError:
        if not folder.is_dir():
            raise _folder_gone(folder) from None
        raise


def _rows_up_to(file: Path, step: int) -> list[dict]:
    """``file``'s rows up to ``step`` (none if there is no file); ``SettingsError`` naming the file and the row
    when a row is not whole or its step is not a whole number."""
    if not file.exists():
        return []
    try:
        rows = whole_rows(file)
    except (OSError, NotWhole) as err:
        raise SettingsError(f"cannot resume {file.parent}: {file.name}: {err}") from None
    kept = []
    for i, row in enumerate(rows):
        try:
            at = int(row["step"])
        except (KeyError, ValueError):
            raise SettingsError(f"cannot resume {file.parent}: {file.name} row {i + 1} has step "
                                f"{row.get('step')!r}, not a whole number") from None  # fmt: skip
        if at <= step:
            kept.append(row)
    return kept


def resumed_rows(path: Path, checkpoint: dict) -> tuple[tuple[list[dict], list[dict]], list[str]]:
    """The evaluation and timing rows a run resumed from ``checkpoint`` continues from (those up to its step),
    and how the files disagree with them, one line each (none: the files hold them).

    A checkpoint that records the rows (``eval_rows``, ``timing_rows``) gives them, verified with it by its
    SHA-256.  Where a file disagrees with them (a row cut by a copy or a crash, a value edited, the file gone),
    :class:`RunLog` writes the checkpoint's rows back and says so.  An older checkpoint's rows are read from the
    files, which must then be whole (``SettingsError`` naming the file and row), and must hold as many
    evaluations as the checkpoint was written after."""
    step, out, disagree = checkpoint["step"], [], []
    for name, key in ((EVALS, "eval_rows"), (TIMING, "timing_rows")):
        recorded = checkpoint.get(key)
        if recorded is None:
            out.append(_rows_up_to(path / name, step))
            continue
        try:
            on_disk, problem = _rows_up_to(path / name, step), None
        except SettingsError as err:
            on_disk, problem = None, str(err).split(f"{name}: ", 1)[-1]
        if on_disk != recorded:
            if not (path / name).exists():
                problem = "the file is missing"
            elif problem is None:
                first = next((i for i, (a, b) in enumerate(zip(on_disk, recorded, strict=False)) if a != b),
                             min(len(on_disk), len(recorded)))  # fmt: skip
                problem = f"from row {first + 1} it differs from them (edited or cut since it was written)"
            disagree.append(f"{path / name} did not hold the rows up to step {step} that its checkpoint recorded: "
                            f"{problem}")  # fmt: skip
        out.append(recorded)
    evals = out[0]
    if "evals" in checkpoint and len(evals) != checkpoint["evals"]:
        raise SettingsError(f"cannot resume {path}: its checkpoint (step {step}) was written after "
                            f"{checkpoint['evals']} evaluations, but {EVALS} holds {len(evals)} up to that step; "
                            "the checkpoint is not this run's")  # fmt: skip
    return (out[0], out[1]), disagree


def _fmt(v):
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return v


class Clock:
    """Wall time and rates since the last evaluation (kept out of the deterministic results)."""

    COLUMNS = ("wall_time", "steps_per_s", "updates_per_s")  # what :meth:`rates` gives, in order

    def __init__(self, wall_before: float = 0.0, steps: int = 0, updates: int = 0):
        """``wall_before``, ``steps`` and ``updates``: where a resumed run's checkpoint left them."""
        self.start = time.perf_counter() - wall_before
        self.t_last, self.steps_last, self.updates_last = time.perf_counter(), steps, updates

    def rates(self, steps: int, updates: int) -> dict:
        now = time.perf_counter()
        dt = max(now - self.t_last, 1e-9)
        out = dict(zip(self.COLUMNS, (now - self.start, (steps - self.steps_last) / dt,
                                      (updates - self.updates_last) / dt), strict=True))  # fmt: skip
        self.t_last, self.steps_last, self.updates_last = now, steps, updates
        return out

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def run_config(cfg, agent: str) -> dict:
    """The settings as ``manifest.json`` records them (``config``): JSON values, tuples as lists."""
    config = {"agent": agent, **{k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}}
    return as_recorded(config)


ORIGIN = ("created", "command", "git_commit", "git_dirty", "packages", "machine", "device", "torch_threads")
"""The manifest entries that say where and with what code a run (or a resumed stretch of it) ran."""


def write_run_manifest(path: Path, cfg, agent: str, device: torch.device, method: dict,
                       resumed_at: int | None = None) -> None:  # fmt: skip
    """Write the run's ``manifest.json``; a resumed run (``resumed_at``, the checkpoint's step) keeps its
    first record of where and with what code it ran and appends this stretch's to ``resumed``."""
    manifest = new_manifest(path, run_config(cfg, agent), {"device": str(device), "method": method,
                                                           "replay_capacity": replay_capacity(cfg),
                                                           "torch_threads": torch.get_num_threads()})  # fmt: skip
    if resumed_at is not None:
        first = json.loads((path / MANIFEST).read_text())
        stretch = {"at_step": resumed_at, **{k: manifest[k] for k in ORIGIN}}
        warn_if_elsewhere(path, (first.get("resumed") or [first])[-1], stretch)
        manifest = {**manifest, **{k: first[k] for k in ORIGIN if k in first},
                    "resumed": [*first.get("resumed", []), stretch]}  # fmt: skip
    write_json(path / MANIFEST, manifest)


def warn_if_elsewhere(path: Path, last: dict, now: dict) -> None:
    """Say, on stderr, where a resumed run continues on another machine, device or package version than it last
    ran on (it continues validly, but not bit for bit: CPU kernels and MuJoCo's version move the last bits), or
    at another commit.  Both are recorded in the manifest's ``resumed`` stretch, and ``status.md`` lists them."""
    differ, _ = record_differences(last, now)
    if last.get("device", now["device"]) != now["device"]:
        differ.append(f"device {last['device']} -> {now['device']}")
    if differ:
        warn(f"{path} resumes elsewhere than it last ran ({'; '.join(differ)}): it continues validly, but not bit "
             "for bit as the uninterrupted run would")
    was, commit = last.get("git_commit"), now.get("git_commit")
    if was and commit and (was, last.get("git_dirty")) != (commit, now.get("git_dirty")):
        dirty = lambda record: " + uncommitted changes" if record.get("git_dirty") else ""  # noqa: E731
        warn(f"{path} resumes at commit {commit[:7]}{dirty(now)}; it last ran at {was[:7]}{dirty(last)} "
             f"(`git log {was[:7]}..{commit[:7]}` lists what changed)")


def recorded_now(cfg, agent: str, method: dict) -> dict:
    """What ``manifest.json`` would record of a run with these settings: its config, resolved method and the
    replay's capacity."""
    return {"config": run_config(cfg, agent), "method": as_recorded(method), "replay_capacity": replay_capacity(cfg)}


def check_resumable(path: Path, now: dict) -> None:
    """Refuse to resume the run in ``path`` with settings that change what it computes (a resumed run must
    continue as the uninterrupted one would), naming each; ``now`` is :func:`recorded_now` of the resuming
    command.  Only where and how the run is kept may change (:data:`prioritylab.provenance.RESUMABLE`)."""
    manifest = path / MANIFEST
    try:
        changed = changed_settings(json.loads(manifest.read_text()), now)
    except (OSError, ValueError, AttributeError) as err:
        raise SettingsError(f"cannot resume: {manifest} is not a readable run manifest ({err})") from None
    if changed:
        listed = "; ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
        hint = (f" (its replay's capacity: --buffer-size {changed['replay_capacity'][0]})"
                if "replay_capacity" in changed else "")  # fmt: skip
        raise SettingsError(f"cannot resume {path}: it ran with other settings ({listed}); resume with the "
                            f"run's own settings{hint}, or start a new run")  # fmt: skip


def check_checkpoint_is_this_runs(path: Path, checkpoint: dict, now: dict) -> None:
    """Refuse a checkpoint that another run wrote (one copied in from another folder): it must have been
    written with the resuming settings (``now``, :func:`recorded_now`).  Checkpoints older than this record are
    checked by identity (:func:`load_checkpoint`) and, through :func:`resumed_rows`, by the count of evaluations
    ``evaluations.csv`` holds up to their step."""
    if "recorded" in checkpoint:
        try:
            changed = changed_settings(checkpoint["recorded"], now)
        except (ValueError, AttributeError, TypeError) as err:
            raise SettingsError(f"cannot resume {path}: its checkpoint's record of its settings is unreadable "
                                f"({err})") from None  # fmt: skip
        if changed:
            listed = "; ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changed.items())
            raise SettingsError(f"cannot resume {path}: its checkpoint was written by a run with other settings "
                                f"({listed}); it is not this run's")  # fmt: skip


def mark_finished(path: Path, summary: dict) -> None:
    with writing_into(path):
        write_json(path / FINISHED, summary, parents=False)


def env_rng_state(env) -> dict:
    return env.unwrapped.np_random.bit_generator.state


def set_env_rng_state(env, state: dict) -> None:
    gen = np.random.Generator(np.random.PCG64())
    gen.bit_generator.state = state
    env.unwrapped.np_random = gen
