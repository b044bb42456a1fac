"""``prioritylab sweep SPEC.py``: expand a sweep specification into ``prioritylab train`` runs and run them.

A specification is a Python file defining ``runs(budget: str) -> list[dict]``:
each dict holds ``agent`` (td3, sac, ...) and the ``prioritylab train`` settings
of one run except the seed (``env``, ``sampler``, ``steps``, any other field,
nested ones as ``"replay.alpha"``).  Budgets: ``paper`` (the paper's budget)
and ``reduced`` (what fits a 2-core machine); a specification documents both.
The queue is run by run, each with all its seeds; a specification that sets
``SEED_MAJOR = True`` is queued seed by seed instead (every run with the first
seed, then every run with the next), so that a sweep stopped part-way has the
same seeds for every run.  A specification that fails (a syntax error, an exception
as it loads or in ``runs()``, a ``sys.exit``) is refused in one line naming it, as is
a ``--seeds`` whose last seed ``train`` would refuse or that makes more than
``MAX_RUNS`` runs, before the list of runs is built.

Each (run, seed) is one ``prioritylab train`` process writing its own run
folder under ``--out``.  A finished run (``finished.json``) recorded with the
specification's settings is skipped (one with other settings stops the sweep
before any run, or, if another sweep finishes it meanwhile, is recorded as such
in ``sweep.json`` and fails the sweep); an
interrupted one (a checkpoint, no ``finished.json``) resumes from its
checkpoint; one interrupted before its first checkpoint has nothing to resume
and starts again from scratch (``--restart``, which deletes nothing if another
process has run it meanwhile).  A run that crashes is recorded with its exit code and the end of
its error output in ``sweep.json``, and the sweep goes on; each run's entry there
also names the settings it was given that its sampler does not read
(``unread_settings``), which the sweep prints once before it starts; sweeps into one
``--out`` (one after another, or at once) share that file, each run's entry
being the one written last.  ``--jobs`` runs
that many at once in a local process pool; ``--backend ray`` submits the same
commands to a Ray cluster (``pip install 'prioritylab[ray]'``), one run a CPU: a local
instance (whose runs at once must fit in memory together, as with ``--jobs``) or the
one at ``--address`` (a host and port where nothing accepts a connection within 10 s, for each address the
host name resolves to, is refused, where Ray would retry for minutes).  Ray's workers must run the code the
sweep checked the runs with (the same checkout, or clean checkouts of one commit: refused otherwise, before any
run) and see the run folders where the sweep does (one machine or a shared file system).

The runs die with the sweep: each ``prioritylab train`` runs in its own process
group; SIGINT (Ctrl-C) or SIGTERM to the sweep sends SIGTERM to every run, which
stops at its episode end with a checkpoint, and the sweep exits with 128 + the
signal once they have (re-run the same command to resume them); a second signal
kills them at once.  Under Ray, whose workers start the runs, the signal reaches them
through a file beside the run folders (``.sweep-stop-PID``) that each worker watches.
On Linux each run of the local pool also asks the kernel for SIGTERM when the
sweep dies (``PR_SET_PDEATHSIG``), so even a SIGKILL of the sweep leaves no run
behind.  The progress bar counts whole runs; after it, each running run's latest evaluated step, read from its
``evaluations.csv`` every ``PROGRESS_EVERY`` seconds.  ``--dry-run`` prints each command as one can paste
it into a shell, its status as a trailing comment.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from tqdm import tqdm

from .._cli import (
    PARENT_PID,
    REFUSED,
    check_not_empty,
    check_output_dir,
    fail,
    nonnegative_int,
    positive_int,
    runs_counted,
)
from ..results import CHECKPOINT, EVALS, FINISHED, MANIFEST, run_folder, write_json

BUDGETS = ("reduced", "paper")
NOT_STARTED = -1  # exit code recorded for a run the sweep did not start because it was stopped
OTHER_SETTINGS = -2  # exit code recorded for a run another sweep finished, meanwhile, with other settings
PROGRESS_EVERY = 30.0  # seconds between two looks at the running runs' evaluations.csv, for the bar's postfix
ERROR_TAIL = 2000  # characters of a crashed run's error output kept in sweep.json (its last lines)
_children: dict[int, subprocess.Popen] = {}  # the running ``prioritylab train`` processes, by pid
_children_lock = threading.Lock()
_stopping = threading.Event()


def load_module(path: Path):
    """The specification's module; ``ValueError`` for a missing file, a folder, a file that is not ``.py``, one
    without ``runs``, or one that fails as it runs (:func:`spec_failure`: a syntax error, an exception, a
    ``sys.exit``).  The module is registered in ``sys.modules`` before it runs, as an imported one is (a
    ``dataclass`` under ``from __future__ import annotations`` looks its module up there)."""
    if path.is_dir():
        raise ValueError(f"sweep specification {path} is a folder; give one of its .py files")
    if not path.is_file():
        raise ValueError(f"sweep specification {path} does not exist")
    if path.suffix != ".py":
        raise ValueError(f"sweep specification {path} is not a Python file (.py)")
    name = f"sweep_spec_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # Ctrl-C (KeyboardInterrupt) is not the specification's failure
        sys.modules.pop(name, None)
        raise ValueError(spec_failure(path, err, "as it loads")) from None
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not callable(getattr(module, "runs", None)):
        raise ValueError(f"{path} defines no function runs(budget)")
    return module


def spec_failure(path: Path, err: BaseException, when: str) -> str:
    """One line naming the specification ``path`` and how it failed ``when`` (as it loads, or in ``runs()``): a
    syntax error with its line, an exception with its type, message and the specification's line it came from,
    or an exit (``sys.exit``), which would otherwise end the sweep without a word."""
    if isinstance(err, SystemExit):
        code = "" if err.code is None else f" with {err.code!r}"
        return (f"sweep specification {path} exited{code} {when} (sys.exit); a specification defines runs(budget) "
                "and must not exit")  # fmt: skip
    if isinstance(err, SyntaxError):  # IndentationError and TabError among them
        return f"sweep specification {path}: {type(err).__name__} at line {err.lineno}: {err.msg}"
    said = " ".join(str(err).split())
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__)
             if Path(frame.filename).resolve() == path.resolve()]  # fmt: skip
    at = f" at line {lines[-1]}" if lines else ""
    return f"sweep specification {path}: {type(err).__name__}{at} {when}" + (f": {said}" if said else "")


def seed_major(path: Path) -> bool:
    """Whether the specification asks for its queue seed by seed (``SEED_MAJOR = True``)."""
    value = getattr(load_module(path), "SEED_MAJOR", False)
    if not isinstance(value, bool):
        raise ValueError(f"{path}: SEED_MAJOR must be True or False, got {value!r}")
    return value


def load_spec(path: Path, budget: str) -> list[dict]:
    """The runs of the specification ``path`` for ``budget``; ``ValueError`` (one line, naming the file) for a
    specification that fails (:func:`load_module`, :func:`spec_failure`), gives no list of runs, a run without its
    agent, env and sampler, one that sets what the sweep sets, one that gives a True/False setting as a value of
    another kind (:func:`check_values`), or two runs that would write one folder."""
    module = load_module(path)
    try:
        runs = module.runs(budget)
    except (Exception, SystemExit) as err:
        raise ValueError(spec_failure(path, err, f"in runs({budget!r})")) from None
    if not isinstance(runs, (list, tuple)) or not runs:
        raise ValueError(f"{path}: runs({budget!r}) returned {runs!r}; it must return a non-empty list of runs")
    runs = list(runs)
    for i, run in enumerate(runs):
        if not isinstance(run, dict) or "agent" not in run or "env" not in run or "sampler" not in run:
            raise ValueError(f"{path}: run {i} must be a dict with agent, env and sampler, got {run!r}")
        reserved = [key for key in ("seed", "out", "progress") if key in run]
        if reserved:
            raise ValueError(f"{path}: run {i} sets {' and '.join(reserved)}; the sweep sets seed, out and progress "
                             "itself")  # fmt: skip
        check_values(path, i, run)
    first: dict[str, int] = {}
    for i, run in enumerate(runs):  # a run's folder is named by its agent, env and sampler only
        name = run_name(run)
        if name in first:
            other = runs[first[name]]
            differ = sorted(k for k in {*run, *other} if run.get(k, "unset") != other.get(k, "unset"))
            raise ValueError(f"{path}: runs {first[name]} and {i} would both write {name} (they differ only "
                             f"in {', '.join(differ) or 'nothing'}): give them separate specifications or --out "
                             f"folders")  # fmt: skip
        first[name] = i
    return runs


def check_values(path: Path, i: int, run: dict) -> None:
    """``ValueError`` naming the setting and its value where run ``i`` gives True or False to a setting of ``train``
    that is not a True/False one (``"steps": True``): :func:`expand` writes a boolean as a bare flag (``--steps``,
    ``--no-steps``), which would leave the setting without its value.  A setting ``train`` does not have, or a run
    whose agent is unknown, is left to the check of the runs (:func:`check_runs`), which names it."""
    flags = {key: value for key, value in run.items() if key != "agent" and isinstance(value, bool)}
    if not flags:
        return
    from ..deep.cli import AGENTS, _agents, _for_env

    if run["agent"] not in AGENTS:
        return
    _, cls = _for_env(run["agent"], ["--env", str(run["env"])], *_agents())
    for key, value in flags.items():
        kind = _setting_type(cls, key)
        if kind is not None and kind is not bool:
            what = {int: "an integer", float: "a number", str: "a string"}.get(kind, f"a {_type_name(kind)}")
            raise ValueError(f"{path}: run {i}: {key} must be {what}, got {value!r} (only a True/False setting takes "
                             "True or False)")  # fmt: skip


def _setting_type(cls, key: str):
    """The type of the setting ``key`` (nested ones as ``"replay.alpha"``) of a settings dataclass ``cls``: the
    type itself, or the one type besides None of an optional one; None for a setting it does not have."""
    import dataclasses
    import types
    import typing

    for part in key.split("."):
        if not dataclasses.is_dataclass(cls):
            return None
        hints = typing.get_type_hints(cls)
        name = part.replace("-", "_")
        if name not in {f.name for f in dataclasses.fields(cls)}:
            return None
        cls = hints[name]
    if typing.get_origin(cls) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(cls) if k is not type(None)]
        return kinds[0] if len(kinds) == 1 else cls
    return cls


def _type_name(kind) -> str:
    return getattr(kind, "__name__", None) or str(kind).replace("typing.", "")


def run_name(run: dict, seed: int | str = "<seed>") -> str:
    """The folder name ``prioritylab train`` gives the specification's ``run`` with ``seed``."""
    return run_folder(run["agent"], run["env"], run["sampler"], seed)


def select(runs: list[dict], only: list[str]) -> list[dict]:
    """The runs whose settings match every ``KEY=VALUE`` of ``only`` (values compared as text, so
    ``steps=100000`` and ``env=ALE/Pong-v5`` both work); ``ValueError`` naming an item that is not
    ``KEY=VALUE``, a key no run has, a value no run has for its key (a misspelt one would otherwise drop out of
    a selection that another value of the key fills), or a selection that matches no run."""
    wanted = {}
    for item in only:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--only takes KEY=VALUE, got {item!r}")
        if not any(key in run for run in runs):
            raise ValueError(f"--only {item}: no run of the specification has a setting {key!r}")
        have = {str(run[key]) for run in runs if key in run}
        if value not in have:
            raise ValueError(f"--only {item}: no run of the specification has {key} {value!r} (it has "
                             f"{', '.join(sorted(have))})")  # fmt: skip
        wanted.setdefault(key, set()).add(value)
    chosen = [r for r in runs if all(k in r and str(r[k]) in values for k, values in wanted.items())]
    if not chosen:
        raise ValueError(f"--only {' '.join(only)} matches none of the specification's {runs_counted(len(runs))}")
    return chosen


MAX_RUNS = 10_000
"""The most runs (the specification's runs, those ``--only`` keeps, times ``--seeds``) one sweep takes: each is a
training run of minutes to days, the largest sweep of the studies has a few hundred, and the list is built and
checked whole before any run starts, so that a mistyped ``--seeds`` is refused rather than filling the memory."""


def check_seeds(seeds: int, first_seed: int) -> None:
    """``ValueError`` where the last seed of ``--seeds`` from ``--first-seed`` is above the largest seed ``train``
    takes (:data:`prioritylab.deep.run.MAX_SEED`, so that the evaluation seed also stays 32-bit): checked before
    the runs are expanded, whose list would otherwise be as long as the seeds are many."""
    from ..deep.run import MAX_SEED

    last = first_seed + seeds - 1
    if last > MAX_SEED:
        raise ValueError(f"--seeds {seeds} from --first-seed {first_seed} would use seeds up to {last}, above the "
                         f"largest seed train takes, {MAX_SEED}; give fewer seeds or a lower "
                         "--first-seed")  # fmt: skip


def check_count(n_runs: int, seeds: int) -> None:
    """``ValueError`` where ``n_runs`` runs with ``seeds`` seeds each are more than :data:`MAX_RUNS`, before they are
    expanded."""
    if n_runs * seeds > MAX_RUNS:
        raise ValueError(f"--seeds {seeds} for the {runs_counted(n_runs)} of the specification gives "
                         f"{n_runs * seeds} runs, more than a sweep takes ({MAX_RUNS}); give fewer seeds, or sweep "
                         "part of them at a time (--only, --first-seed)")  # fmt: skip


def expand(runs: list[dict], seeds: int, first_seed: int, out: Path, by_seed: bool = False) -> list[dict]:
    """One job per (run, seed): run by run, or seed by seed with ``by_seed``."""
    jobs = []
    pairs = [(run, seed) for run in runs for seed in range(first_seed, first_seed + seeds)]
    if by_seed:
        pairs.sort(key=lambda pair: pair[1])  # stable: the runs keep their order within a seed
    for run, seed in pairs:
        folder = out / run_name(run, seed)
        args = ["train", run["agent"]]
        for key, value in run.items():
            if key == "agent":
                continue
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + key.replace("_", "-"))
            else:
                args += [flag, str(value)]
        args += ["--seed", str(seed), "--out", str(out), "--no-progress"]
        jobs.append({"name": folder.name, "folder": folder, "args": args})
    return jobs


def status(job: dict) -> str:
    folder = job["folder"]
    if (folder / FINISHED).exists():
        return "finished"
    if (folder / CHECKPOINT).exists():
        return "resume"
    if (folder / EVALS).exists() or (folder / MANIFEST).exists():
        return "restart"  # stopped before its first checkpoint: nothing to resume
    return "new"


def check_runs(jobs: list[dict], n_jobs: int = 1, ray: bool = False) -> None:
    """Refuse, before any run starts (and in a dry run), a sweep with a run that ``train`` would refuse for its
    settings or its environment (an unknown id, an agent that cannot act on it, a sampler that cannot work on it,
    a run that does not fit in memory), or whose ``n_jobs`` largest runs still to run do not fit in memory
    together, each counted as ``train`` counts it (its replay, networks, a batch, an evaluation's returns and NERS's
    scorer; ``ray``: the ``n_jobs`` runs a local Ray instance runs at once): ``ValueError`` naming the first such
    run, or ``--jobs`` and the largest of those runs."""
    from .._checks import available_bytes, size_text
    from ..deep.cli import check_environments

    needs = check_environments([(job["name"], job["args"][1:]) for job in jobs])
    todo = sorted((needs[j["name"]], j["name"]) for j in jobs if status(j) != "finished")
    at_once = todo[-n_jobs:] if n_jobs > 1 else []
    have, total = available_bytes(), sum(n for n, _ in at_once)
    if len(at_once) > 1 and have is not None and total > have:
        largest, name = at_once[-1]
        who = f"--backend ray runs {n_jobs} at once here (one a CPU)" if ray else f"--jobs {n_jobs}"
        sizes = "the runs' --buffer-size (or --hidden, --batch-size)"
        advice = ("start Ray with fewer CPUs (ray start --head --num-cpus N) and sweep with --address, or lower "
                  + sizes) if ray else f"lower --jobs or {sizes}"  # fmt: skip
        raise ValueError(f"{who}: the {len(at_once)} largest runs still to run need at least {size_text(total)} "
                         f"together (the largest, run {name}, {size_text(largest)}) but only {size_text(have)} of "
                         f"memory is available; {advice}")  # fmt: skip


def check_recorded(jobs: list[dict]) -> None:
    """Refuse, before any run starts, a sweep with a run whose settings train would refuse, or whose run folders
    hold runs (finished, or to resume) recorded with other settings than the specification's, or without a
    readable manifest: a finished one would be counted as this sweep's, a resumed one refused half-way.
    ``ValueError`` naming the run, or each folder and setting."""
    clashes = recorded_clashes(jobs)
    if clashes:
        raise ValueError(clash_message(clashes))


def clash_message(clashes: dict[str, str]) -> str:
    """The refusal of :func:`recorded_clashes`'s runs: the first three folders, and how many more."""
    shown = list(clashes.values())
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return (f"{len(shown)} run folder(s) hold runs with other settings than this specification's: "
            f"{', '.join(shown[:3])}{more}; move them away or sweep into another --out")


def recorded_clashes(jobs: list[dict]) -> dict[str, str]:
    """``{run name: its folder and what differs}`` for each run whose folder holds a run (finished, or to resume)
    recorded with other settings than the specification's, or without a readable manifest, or a run to resume
    at another torch thread count than it ran with (a ``threads`` of 0, the default count, is the run's own
    business: ``train`` checks it); ``ValueError`` naming a run whose settings train would refuse."""
    from ..deep.cli import recorded_for
    from ..provenance import changed_settings

    clashes = {}
    for job in jobs:
        try:
            now = recorded_for(job["args"][1:])  # every run's settings, as train would check them
        except ValueError as err:
            raise ValueError(f"run {job['name']}: {err}") from None
        if status(job) not in ("finished", "resume"):
            continue  # new, or started again from scratch with --restart
        manifest = job["folder"] / MANIFEST
        try:
            saved = json.loads(manifest.read_text())
            changed = changed_settings(saved, now)
        except (OSError, ValueError, AttributeError) as err:
            clashes[job["name"]] = f"{job['folder']} (no readable manifest.json: {err})"
            continue
        threads, ran_with = now["config"].get("threads"), saved.get("torch_threads")
        if status(job) == "resume" and threads and ran_with is not None and threads != ran_with:
            # train refuses it (a resume is bit-identical only at the thread count it was written with), but
            # only once the run has started: named here, before any run
            changed["threads"] = (ran_with, threads)
        if changed:
            differ = "; ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items())
            clashes[job["name"]] = f"{job['folder']} ({differ})"
    return clashes


def unread_notes(jobs: list[dict]) -> list[str]:
    """One line per setting that some of the sweep's runs are given and their sampler does not read (``train``
    warns of it in each run's own output, which the sweep keeps only for a crash)."""
    from ..deep.cli import unread_for

    seen: dict[tuple, list[str]] = {}
    for job in jobs:
        sampler, unused = unread_for(job["args"][1:])
        for name, value, readers in unused:
            samplers = seen.setdefault((name, repr(value), readers), [])
            if sampler not in samplers:
                samplers.append(sampler)
    return [f"replay.{name} {value} has no effect on the runs with sampler {', '.join(samplers)} (read by "
            f"{', '.join(readers) or 'no sampler'})" for (name, value, readers), samplers in seen.items()]


def unread_settings(job: dict) -> list[str]:
    """The settings the job's run is given that its sampler does not read, as "replay.kappa 2.0 (read by lap,
    pal)", for its entry in ``sweep.json`` (the sweep prints them once, :func:`unread_notes`); none for arguments
    this code cannot read."""
    from ..deep.cli import unread_for

    try:
        _, unused = unread_for((job.get("args") or [])[1:])
    except ValueError:
        return []
    return [f"replay.{name} {value!r} (read by {', '.join(readers) or 'no sampler'})"
            for name, value, readers in unused]  # fmt: skip


def unread_lines(job: dict) -> set[str]:
    """The lines in which the job's ``train`` names the settings its sampler does not read, as it prints them
    (:func:`~prioritylab.deep.cli.unread_warnings`); read under :data:`_PARSING`."""
    from ..deep.cli import unread_for, unread_warnings

    try:
        sampler, unused = unread_for(job["args"][1:])
    except ValueError:  # arguments this code cannot read: none it names as unread, and every warning is kept
        return set()
    return set(unread_warnings(job["args"][1], sampler, unused))


def run_warnings(job: dict, err: str, unread: set[str]) -> list[str]:
    """The warnings of a run that finished (a resume on another machine or at another commit), from its whole
    error output: its ``train``'s warning lines (as ``warning: ...``), less ``unread`` (:func:`unread_lines`),
    which :func:`unread_notes` names once for the whole sweep."""
    from .._cli import train_program

    program = f"{train_program(job['args'][1])}: "  # dropped: the sweep names the run instead
    return [line.removeprefix(program) for line in err.splitlines()
            if line.startswith(f"{program}warning: ") and line not in unread]  # fmt: skip


_PARSING = threading.Lock()
"""Held while a run's settings are read in a thread of the local pool: tyro, and CPython 3.11's ``ast.parse``
under it, are not safe from two threads at once (``SystemError: AST constructor recursion depth mismatch``)."""


def command(job: dict) -> list[str]:
    args = list(job["args"])
    state = status(job)
    if state == "resume":
        args.append("--resume")
    elif state == "restart":
        args.append("--restart")
    return [sys.executable, "-m", "prioritylab", *args]


def run_local(cmd: list[str], cwd: str | None = None, stop_file: str | None = None) -> tuple[int, str]:
    """Run one ``prioritylab train`` command (in ``cwd``) in its own process group, told to die with this
    process; its exit code and its whole error output (``NOT_STARTED`` once the sweep is stopping).

    ``stop_file`` (the Ray backend's, whose runs are not this process's children): once it exists, the run is
    sent the signal it names (SIGTERM: stop at the episode end with a checkpoint; then SIGKILL).  A
    ``KeyboardInterrupt`` here (a Ray worker's Ctrl-C or cancel) stops the run the same way and waits for it."""
    env = {**os.environ, PARENT_PID: str(os.getpid())}
    with _children_lock:
        if _stopping.is_set() or _stop_signal(stop_file) is not None:
            return NOT_STARTED, ""
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd,
                                env=env, start_new_session=True)  # fmt: skip
        _children[proc.pid] = proc
    sent = None
    try:
        while True:
            try:
                _, err = proc.communicate(timeout=None if stop_file is None else STOP_POLL)
                break
            except subprocess.TimeoutExpired:
                sig = _stop_signal(stop_file)
                if sig is not None and sig != sent:
                    sent = sig
                    _signal_group(proc.pid, sig)
            except KeyboardInterrupt:
                sent = signal.SIGTERM
                _signal_group(proc.pid, sent)
    finally:
        with _children_lock:
            _children.pop(proc.pid, None)
    return proc.returncode, err


STOP_POLL = 1.0  # seconds between two looks for the Ray backend's stop file


def _stop_signal(stop_file: str | None) -> int | None:
    """The signal the sweep's stop file asks its runs for (None: no stop file, or none asked)."""
    if stop_file is None:
        return None
    try:
        return int(Path(stop_file).read_text().strip() or signal.SIGTERM)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return signal.SIGTERM


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def run_progress(job: dict, since: float) -> str | None:
    """``NAME: step S/STEPS``, from the last whole row of the run's ``evaluations.csv``, where this sweep's run
    has written one (the file changed at or after ``since``); None before its first evaluation."""
    path = Path(job["folder"]) / EVALS
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_mtime < since:
                return None
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            rows = f.read().split(b"\n")
    except OSError:
        return None
    try:
        step = int(rows[-2].split(b",", 1)[0])  # the last row ending in a newline: a row being written is not
    except (IndexError, ValueError):
        return None
    args = list(job["args"])
    steps = args[args.index("--steps") + 1] if "--steps" in args[:-1] else None
    return f"{job['name']}: step {step:,}" + (f"/{int(steps):,}" if steps and steps.isdigit() else "")


def show_progress(bar: tqdm, running: list[dict], since: float) -> None:
    """Put the running runs' latest evaluated steps after the bar, which itself counts whole runs."""
    said = [text for text in (run_progress(job, since) for job in running) if text]
    bar.set_postfix_str("; ".join(said), refresh=True)


def stop_children(sig: int = signal.SIGTERM) -> None:
    """Start no more runs and send ``sig`` to the process group of every running one."""
    with _children_lock:
        _stopping.set()
        for pid in list(_children):
            _signal_group(pid, sig)


class _StopOnSignal:
    """While the runs run: SIGINT/SIGTERM stop them gracefully (a checkpoint each), a second signal kills them.
    ``stop(sig)`` passes the signal on: to the local pool's children, or into the Ray backend's stop file."""

    def __init__(self, stop=stop_children):
        self.signum: int | None = None
        self._stop = stop
        self._previous = {}

    def __enter__(self):
        _stopping.clear()
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.signum is not None:
            self._stop(signal.SIGKILL)
            return
        self.signum = signum
        tqdm.write(f"signal {signum}: stopping every run at its episode end, with a checkpoint")
        self._stop(signal.SIGTERM)

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False


def _run_job(job: dict, cwd: str | None = None, stop_file: str | None = None) -> tuple[int | None, str]:
    """Run a job of the local pool or a Ray task; its status and command are taken when it starts, not when the
    sweep started, so a run another sweep finished meanwhile is skipped (exit code None), or, if that sweep ran
    it with other settings, recorded as such (``OTHER_SETTINGS``) rather than counted as this sweep's."""
    if _stopping.is_set() or _stop_signal(stop_file) is not None:
        return NOT_STARTED, ""
    if status(job) == "finished":
        return _finished_elsewhere(job)
    rc, err = run_local(command(job), cwd, stop_file)
    if rc == REFUSED and status(job) == "finished":  # refused because another sweep finished it meanwhile
        return _finished_elsewhere(job)
    return rc, err


def _finished_elsewhere(job: dict) -> tuple[int | None, str]:
    """A run found finished that this sweep did not run: skipped (None), or ``OTHER_SETTINGS`` with the clash."""
    try:
        with _PARSING:
            check_recorded([job])
    except ValueError as err:
        return OTHER_SETTINGS, str(err)
    return None, ""


STOPPED_AFTER = "stopped at its --stop-after (checkpoint written)"


INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)
"""Exit codes of a run that a signal stopped at an episode end, with its checkpoint written."""


def outcome(rc: int, job: dict | None = None) -> str:
    """A run's status from its exit code; a run that exits 0 at its ``--stop-after`` step has not finished."""
    if rc == 0:
        if job is not None and "--stop-after" in job["args"] and not (job["folder"] / FINISHED).exists():
            return STOPPED_AFTER
        return "finished"
    if rc == NOT_STARTED:
        return "not started (sweep stopped)"
    if rc == OTHER_SETTINGS:
        return "finished elsewhere with other settings"
    if rc in INTERRUPTED:
        return "interrupted (checkpoint written)"
    return "crashed"


def write_record(record: Path, started: float, changed: dict, stopped_by: int | None = None) -> None:
    """Write the outcomes this sweep has just learnt (``changed``) into ``record`` (``sweep.json``), keeping
    every other entry: each run's entry is the one written last, by whichever sweep into the same folder ended
    it last.  Read and written under an ``fcntl`` lock on ``.sweep.json.lock`` beside it, so that two sweeps
    writing at once never drop one another's entries.  ``started`` and ``stopped_by_signal`` are the last
    writer's."""
    record.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(record.with_name(f".{record.name}.lock"), os.O_RDONLY | os.O_CREAT, 0o666)  # any reader locks
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed
        try:
            earlier = json.loads(record.read_text()).get("runs")
        except (OSError, ValueError, AttributeError):  # none yet, or not a record: rewritten whole
            earlier = None
        runs = {**(earlier if isinstance(earlier, dict) else {}), **changed}
        stop = {"stopped_by_signal": stopped_by} if stopped_by is not None else {}
        write_json(record, {"started": started, "runs": runs, **stop})
    finally:
        os.close(fd)


def connect_ray(address: str | None) -> None:
    """Start a local Ray instance with :func:`ray_slots` CPUs (``address`` None: a new one, never a cluster that
    ``RAY_ADDRESS`` or an earlier ``ray start`` names, whose CPUs the memory check did not count) or reach the
    cluster at ``address``, unless this process already has; ``ValueError`` naming what could not be reached,
    before the sweep writes anything."""
    import ray

    if ray.is_initialized():
        return
    if address is not None:
        check_reachable(address)
    target = {"address": "local", "num_cpus": ray_slots(None)} if address is None else {"address": address}
    try:
        ray.init(**target, ignore_reinit_error=True, log_to_driver=False)
    except Exception as err:  # Ray raises ConnectionError, RuntimeError, ... by cause
        where = f"the Ray cluster at --address {address}" if address else "a local Ray instance"
        said = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(f"cannot reach {where}: {type(err).__name__}: {said}") from None


REACH_TIMEOUT_S = 10.0
"""How long :func:`check_reachable` waits for a Ray cluster's address to answer, for each address its host name
resolves to (Ray itself keeps retrying an address where nothing answers for minutes)."""


def check_reachable(address: str) -> None:
    """``ValueError`` naming ``address`` when nothing accepts a connection at its host and port within
    :data:`REACH_TIMEOUT_S` seconds; an address without a port (``auto``, a path) is left to Ray."""
    found = re.fullmatch(r"(?:ray://)?(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(\d+)/?", address.strip())
    if found is None:
        return
    host, port = found.group(1).strip("[]"), int(found.group(2))
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            pass
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise ValueError(f"cannot reach the Ray cluster at --address {address}: nothing accepted a connection "
                         f"at {host}:{port} ({why}); is `ray start --head` running there, and is the port "
                         "open?") from None  # fmt: skip


CODE_PROBE = ("import pathlib, prioritylab, prioritylab.results as r; p = pathlib.Path(prioritylab.__file__).parent; "
              "print(p.resolve()); print(r.git_commit() or ''); print(r.git_dirty(cwd=p))")  # fmt: skip


def _probe(cwd: str, code: str) -> tuple[int, str, str, str]:
    """Run ``code`` as ``python -c`` in ``cwd``: its exit code, output, error output and the interpreter.  It
    imports nothing of this package, so Ray sends it to a worker by value: a worker with other code runs it."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    return out.returncode, out.stdout, out.stderr, sys.executable


def code_identity(cwd: str, probed: tuple[int, str, str, str] | None = None) -> tuple[str, str, str]:
    """Where ``python -m prioritylab`` started in ``cwd`` by this process imports the package from, that
    checkout's commit ('' outside one) and whether its tree differs from the commit; ``probed``: what
    :func:`_probe` gave elsewhere (a Ray worker)."""
    rc, out, err, python = _probe(cwd, CODE_PROBE) if probed is None else probed
    if rc != 0:
        said = (err.strip().splitlines() or [""])[-1]
        raise ValueError(f"{python} in {cwd} cannot import prioritylab: {said}")
    path, commit, dirty = (out.splitlines() + ["", "", ""])[:3]
    return path, commit, dirty


def _by_value(function):
    """A copy of a module-level ``function`` that pickles by value (cloudpickle sends an importable function by
    name, which a worker with other code may not have)."""
    import types

    copy = types.FunctionType(function.__code__, {"__builtins__": __builtins__}, function.__name__,
                              function.__defaults__, function.__closure__)  # fmt: skip
    copy.__module__ = "__main__"
    copy.__qualname__ = function.__name__
    return copy


def same_code(here: tuple[str, str, str], there: tuple[str, str, str]) -> bool:
    """Whether two :func:`code_identity` run the same code: one checkout, or clean checkouts of one commit."""
    return here[0] == there[0] or bool(here[1] and here[1] == there[1] and here[2] == there[2] == "False")


def check_ray_code(cwd: str) -> None:
    """Refuse a Ray sweep whose workers would run other code than the sweep checked its runs with: another
    checkout (unless both are clean checkouts of one commit, as on another machine of the cluster).
    ``ValueError`` naming both."""
    import ray

    here = code_identity(cwd)
    probe = ray.remote(num_cpus=0)(_by_value(_probe))
    there = code_identity(cwd, ray.get(probe.remote(cwd, CODE_PROBE)))
    if same_code(here, there):
        return
    raise ValueError(f"the Ray workers would run prioritylab from {there[0]} (commit {there[1] or 'unknown'}"
                     f"{', changed' if there[2] == 'True' else ''}), not this sweep's {here[0]} (commit "
                     f"{here[1] or 'unknown'}{', changed' if here[2] == 'True' else ''}); start the cluster "
                     "from this checkout, or run the sweep from the workers'")  # fmt: skip


def ray_slots(address: str | None) -> int:
    """How many runs the sweep's local Ray instance runs at once (one a CPU: the CPUs this process may use, which
    :func:`connect_ray` starts it with); with ``address``, 1: the cluster's nodes have their own memory, which
    each run's own check compares its replay with."""
    if address is not None:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_sweep(jobs: list[dict], n_jobs: int, backend: str, address: str | None,
              record: Path) -> tuple[dict, int | None]:  # fmt: skip
    """Run the jobs, recording each outcome in ``record`` (``sweep.json``, through :func:`write_record`); this
    sweep's outcomes, and the signal that stopped it (None if none did: kept here, since another sweep into
    the same folder may write ``record`` after this one)."""
    todo = [j for j in jobs if status(j) != "finished"]
    stopped_by = None
    unread = {j["name"]: unread_settings(j) for j in jobs}  # read here, before any thread of the pool reads settings

    def entry(job, **fields) -> dict:
        """A run's entry in ``record``: its outcome, and the settings it was given that its sampler does not read."""
        return {**fields, **({"unread_settings": unread[job["name"]]} if unread[job["name"]] else {})}

    results = {j["name"]: entry(j, status="finished (skipped)") for j in jobs if status(j) == "finished"}
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), unit="run", desc="sweep", dynamic_ncols=True)
    started = time.time()
    write_record(record, started, dict(results))

    def done(job, rc, err):
        if rc is None:  # another sweep finished it meanwhile
            results[job["name"]] = entry(job, status="finished (skipped)")
            bar.update(1)
            write_record(record, started, {job["name"]: results[job["name"]]})
            return
        results[job["name"]] = entry(job, status=outcome(rc, job), exit_code=rc)
        said = []
        if rc == 0:
            with _PARSING:  # a thread of the local pool may be reading a run's settings too
                said = run_warnings(job, err, unread_lines(job))
        err = err[-ERROR_TAIL:]  # the warnings are read from the whole output, a crash keeps its end
        for line in said:  # a run that ended well prints nothing else; its warnings (a resume elsewhere) show
            tqdm.write(f"run {job['name']}: {line}")
        if said:
            results[job["name"]]["warnings"] = said
        if rc == OTHER_SETTINGS:
            results[job["name"]]["error"] = err
            tqdm.write(f"run {job['name']} was finished meanwhile by another sweep: {err}")
        elif results[job["name"]]["status"] == "crashed":
            results[job["name"]]["error"] = err
            tqdm.write(f"run {job['name']} crashed (exit {rc}): {err.strip().splitlines()[-1] if err.strip() else ''}")
        if rc != NOT_STARTED and rc not in INTERRUPTED:
            bar.update(1)  # the bar counts the runs that ended, not those a stop interrupted or left unstarted
        write_record(record, started, {job["name"]: results[job["name"]]})

    if backend == "ray":
        import ray

        connect_ray(address)
        remote = ray.remote(num_cpus=1)(_run_job)  # one CPU per run, as the local pool's one process per job
        here = os.getcwd()  # the run folders are relative to where the sweep was started
        # a stop reaches the runs, which are the Ray workers' children, through a file beside the run folders
        stop_file = Path(here) / record.parent / f".sweep-stop-{os.getpid()}"
        stop_file.unlink(missing_ok=True)
        try:
            with _StopOnSignal(lambda sig: stop_file.write_text(f"{int(sig)}\n")) as stop:
                pending = {remote.remote({**j, "folder": Path(here) / j["folder"]}, here, str(stop_file)): j
                           for j in todo}  # fmt: skip
                shown = 0.0
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=STOP_POLL)
                    if ready:
                        job = pending.pop(ready[0])
                        try:
                            rc, err = ray.get(ready[0])
                        except ray.exceptions.RayError as lost:  # its worker died past Ray's retries, ...
                            rc, err = 1, f"the Ray task of this run failed: {type(lost).__name__}: {lost}"
                        done(job, rc, err)
                    if ready or time.monotonic() - shown >= PROGRESS_EVERY:
                        show_progress(bar, list(pending.values()), started)
                        shown = time.monotonic()
            stopped_by = stop.signum
        finally:
            stop_file.unlink(missing_ok=True)
    else:
        with _StopOnSignal() as stop, ThreadPoolExecutor(max_workers=n_jobs) as pool:
            futures = {pool.submit(_run_job, j): j for j in todo}
            running = list(futures)  # in queue order
            while running:
                ended, _ = wait(running, timeout=PROGRESS_EVERY, return_when=FIRST_COMPLETED)
                for f in [f for f in running if f in ended]:
                    done(futures[f], *f.result())
                running = [f for f in running if f not in ended]
                show_progress(bar, [futures[f] for f in running if f.running()], started)
        stopped_by = stop.signum
    bar.close()
    write_record(record, started, {}, stopped_by)
    return results, stopped_by


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="run a sweep specification (env x agent x sampler x seed)",
                              description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("spec", type=Path, help="a sweep specification file, e.g. deep/lap_mujoco.py")
    p.add_argument("--seeds", type=positive_int, default=1, help="seeds per run (first-seed, first-seed + 1, ...)")
    p.add_argument("--first-seed", type=nonnegative_int, default=0, help="first seed")
    p.add_argument("--budget", choices=BUDGETS, default="reduced", help="the paper's budget or one that fits here")
    p.add_argument("--jobs", type=positive_int, default=1, help="runs at once (local backend)")
    p.add_argument("--out", default="runs", help="parent folder of the run folders")
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="local process pool or Ray")
    p.add_argument("--address", default=None, help="Ray cluster address (backend ray)")
    p.add_argument("--only", action="append", default=[], metavar="KEY=VALUE",
                   help="run only the runs with this setting, e.g. env=ALE/Pong-v5 or sampler=per; repeat the "
                        "option to combine keys (all must match) or values of one key (any may match)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="list the runs and their status, run nothing")
    p.set_defaults(func=_main)


def _main(args) -> int:
    if args.address is not None and args.backend != "ray":
        fail("prioritylab sweep", f"--address {args.address} is a Ray cluster's: give it with --backend ray")
    if args.jobs != 1 and args.backend == "ray":
        fail("prioritylab sweep", f"--jobs {args.jobs} sizes the local pool; Ray runs one run per CPU of its cluster")
    if args.backend == "ray" and importlib.util.find_spec("ray") is None:
        fail("prioritylab sweep", "--backend ray needs ray: pip install 'prioritylab[ray]'")
    try:
        check_not_empty(args.out)
        check_seeds(args.seeds, args.first_seed)
        runs = select(load_spec(args.spec, args.budget), args.only)
        check_count(len(runs), args.seeds)
        jobs = expand(runs, args.seeds, args.first_seed, Path(args.out), by_seed=seed_major(args.spec))
    except ValueError as err:
        fail("prioritylab sweep", f"{err}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # (the sweep proper also makes and probes the folder, below)
        fail("prioritylab sweep", f"--out {out} is an existing file, not a folder")
    try:
        if args.backend == "local":
            check_runs(jobs, args.jobs)
        else:
            check_runs(jobs, ray_slots(args.address), ray=True)
    except ValueError as err:
        fail("prioritylab sweep", f"{err}")
    try:
        clashing = recorded_clashes(jobs)
    except ValueError as err:
        clashing, clash = {}, str(err)
    else:
        clash = clash_message(clashing) if clashing else None
    if clash is None:
        for note in unread_notes(jobs):
            print(f"prioritylab sweep: note: {note}", file=sys.stderr)
    if args.dry_run:  # the list, then the refusal: a run whose folder holds other settings is labelled so
        try:
            for j in jobs:
                label = f"{status(j)} with other settings: refused" if j["name"] in clashing else status(j)
                print(f"{shlex.join(command(j))}  # {label}")
            print(runs_counted(len(jobs)), flush=True)
        except BrokenPipeError:  # the reader went away (``| head``): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if clash is not None:
        fail("prioritylab sweep", clash)
    if args.dry_run:
        return 0
    try:
        if args.backend == "ray":  # before the sweep writes anything
            connect_ray(args.address)
            check_ray_code(os.getcwd())
        check_output_dir(args.out)
    except ValueError as err:
        fail("prioritylab sweep", f"{err}")
    results, signum = run_sweep(jobs, args.jobs, args.backend, args.address, out / "sweep.json")
    if signum is not None:
        print(f"sweep stopped by signal {signum}; the runs wrote their checkpoints: re-run the same command to "
              f"resume them (see {out}/sweep.json)", file=sys.stderr)  # fmt: skip
        return 128 + signum
    finished = sum(v["status"] in ("finished", "finished (skipped)") for v in results.values())
    crashed = [k for k, v in results.items() if v["status"] == "crashed"]
    elsewhere = [k for k, v in results.items() if v["status"] == outcome(OTHER_SETTINGS)]
    stopped = [k for k, v in results.items()
               if v["status"] in (outcome(128 + signal.SIGTERM), outcome(NOT_STARTED), STOPPED_AFTER)]
    also = f"; {len(elsewhere)} finished meanwhile by another sweep with other settings" if elsewhere else ""
    if stopped:  # a run's own process was stopped (its scheduler, a kill): not finished, though the sweep was not
        its, them = ("its", "it") if len(stopped) == 1 else ("their", "them")
        also += f"; {len(stopped)} stopped before {its} end (re-run the same command to resume {them})"
    print(f"{finished} of {runs_counted(len(jobs))} finished; {len(crashed)} crashed{also} (see {out}/sweep.json)")
    return 0 if finished == len(jobs) else 1
