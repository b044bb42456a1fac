"""Does the code here still produce the committed runs?  Re-run the start of each run folder given, with the
settings its manifest recorded, and compare its evaluation rows with the committed ones, text for text.

A study's runs are often recorded at several commits (``status.md`` lists them); the report compares their
settings, not their code.  This check answers the question the commits leave open: whether the code that now
trains a run still gives that run's numbers.  Each run is re-run with ``prioritylab train`` and its recorded
command, into a temporary folder, up to its ``--evals``-th evaluation (``--stop-after``), and every column of
those rows (return, updates, loss, replay diagnostics, ...) must match the committed ``evaluations.csv`` exactly,
and the settings the re-run records must be the committed run's (:func:`prioritylab.provenance.changed_settings`:
a default that changed since would show there).

    python scripts/rerun_check.py docs/results/minatar_study/runs/dqn_MinAtar-Breakout-v1_per_s0 --evals 2

Prints one line per run (``identical`` through a step, or the first row that differs, its columns that differ,
the first step at which the run's course (episodes, returns, updates) differs, if it does, and what differs
between the machine and packages the run recorded and those here) and exits with 1 if any run differs.
A run recorded before the replay's capacity rule (``provenance.replay_slots``) is re-run with
``--buffer-size`` set to the capacity it had, and a run recorded before a setting existed with the value it ran
with (``provenance.BEFORE_IT_EXISTED``, such as ``--replay.duplicates each`` for PSER), as its line says, so that
its recorded command means the same experiment.
Rows that differ although the re-run used the run's own commit point to the machine or the packages: torch
picks its CPU kernels by the CPU's vector units, MuJoCo's version changes its arithmetic, and either moves the
last bits, which a run then amplifies.  Settings are checked before any run starts: a folder without a
readable manifest, a recorded command without ``train``, or a run with fewer evaluations than asked is a
one-line error.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from prioritylab._cli import PARENT_PID, Parser
from prioritylab.provenance import BEFORE_IT_EXISTED, changed_settings, flat, recorded, replay_slots, unread_by
from prioritylab.results import EVALS, MANIFEST, NotWhole, record_differences, whole_rows

DROPPED = {"--resume": 0, "--restart": 0, "--overwrite": 0, "--no-progress": 0, "--out": 1, "--stop-after": 1}
"""Options of a recorded command that say where and how it ran, not what: left out (with their value's count)."""


def capacity_then(manifest: dict) -> int | None:
    """``--buffer-size`` to give the re-run where the recorded command would now get another replay capacity
    than the run had (``provenance.replay_slots``: a run shorter than its buffer now keeps room for twice its
    steps, where runs recorded before that rule had one slot a step); None where it would get the same."""
    settings = recorded(manifest)
    then, size, steps = settings.get("replay_capacity"), manifest["config"].get("buffer_size"), settings.get("steps")
    if not all(isinstance(x, int) for x in (then, size, steps)):
        return None
    return None if replay_slots(size, steps) == then else then


def earlier_flags(manifest: dict) -> list[str]:
    """Flags that give the re-run the value a run recorded before a setting existed ran with
    (``provenance.BEFORE_IT_EXISTED``), for each such setting its sampler reads: the recorded command alone would
    now take the setting's current default."""
    if not isinstance(manifest.get("config"), dict):  # nothing recorded but the command: it is re-run as it is
        return []
    config, settings = flat(manifest["config"]), recorded(manifest)
    unread = unread_by(str(settings.get("sampler")))
    flags = []
    for key, value, _ in BEFORE_IT_EXISTED:
        if key.startswith("method.") or key.startswith(unread) or key in config or key not in settings:
            continue
        flag = "--" + key.replace("_", "-")
        flags += [flag if value else f"--no-{flag[2:]}"] if isinstance(value, bool) else [flag, str(value)]
    return flags


def rerun_args(manifest: dict, out: Path, until: int, buffer_size: int | None = None) -> list[str]:
    """The recorded ``train`` command's arguments, writing into ``out`` and stopping at step ``until``, with
    ``--buffer-size`` last where given (:func:`capacity_then`)."""
    words = shlex.split(manifest["command"])
    if "train" not in words:
        raise ValueError(f"its recorded command is not a train command: {manifest['command']!r}")
    words = words[words.index("train"):]
    args, i = [], 0
    while i < len(words):
        name = words[i].split("=", 1)[0]
        if name in DROPPED:
            i += 1 + (DROPPED[name] if "=" not in words[i] else 0)
            continue
        args.append(words[i])
        i += 1
    size = [] if buffer_size is None else ["--buffer-size", str(buffer_size)]
    return [*args, *earlier_flags(manifest), *size, "--out", str(out), "--stop-after", str(until), "--no-progress"]


def read_rows(path: Path) -> list[dict]:
    """``path``'s rows, every one whole (``results.whole_rows``); ``NotWhole`` naming the first that is not."""
    return whole_rows(path)


def plan(folder: Path, evals: int) -> tuple[dict, list[dict], int]:
    """The run's manifest, its first ``evals`` committed rows and their last step; ``ValueError`` if unusable."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{folder}: no readable manifest.json ({err})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("command"), str):
        raise ValueError(f"{folder}: its manifest.json records no command")
    if not isinstance(manifest.get("config"), dict):
        raise ValueError(f"{folder}: its manifest.json records no settings (config)")
    try:
        rows = read_rows(folder / EVALS)
    except OSError as err:
        raise ValueError(f"{folder}: no readable evaluations.csv ({err})") from None
    except NotWhole as err:  # a cut or damaged file, which would read as a re-run that differs
        raise ValueError(f"{folder}: its evaluations.csv is not whole: {err}") from None
    if len(rows) < evals:
        raise ValueError(f"{folder}: has {len(rows)} evaluations, fewer than --evals {evals}")
    rows = rows[:evals]
    rerun_args(manifest, folder, 1)  # raises on a command that is not train's
    return manifest, rows, int(float(rows[-1]["step"]))


def elsewhere(recorded: dict, now: dict) -> str:
    """What differs between the machine and packages the run recorded and the re-run's (the usual cause of rows
    that differ when the code is the same: other CPU kernels, another physics engine), and what the run's
    manifest did not record (manifests written before those fields)."""
    differ, unrecorded = record_differences(recorded, now)
    said = f"elsewhere: {'; '.join(differ)}" if differ else "the same machine and packages as far as recorded"
    return f" ({said}" + (f"; not recorded by the run: {', '.join(unrecorded)})" if unrecorded else ")")


TRAINING = ("episodes", "return_mean", "return_std", "updates")
"""The columns that follow the agent's own course; the others are losses and replay statistics, whose last
digits a change in how a statistic is summed moves without changing the run."""


def compare(committed: list[dict], now: list[dict]) -> str | None:
    """The first row in which two runs' evaluation rows differ, with every column that differs there (to 3),
    and whether the run's course (:data:`TRAINING`) differs anywhere; None when they are the same text."""
    for rows, whose in ((committed, "the committed run"), (now, "the re-run")):
        missing = [key for key in TRAINING if rows and key not in rows[0]]
        if missing:  # a renamed column would read as None on both sides, and so as the same course
            raise SystemExit(f"{whose}'s evaluations.csv has no column {', '.join(missing)} (TRAINING names it)")
    for i, row in enumerate(committed):
        if i >= len(now):
            return f"the re-run has {len(now)} rows through step {row['step']}, the committed run {len(committed)}"
        keys = [key for key, value in row.items() if now[i].get(key) != value]
        if not keys:
            continue
        cells = ", ".join(f"{key} {row[key]} -> {now[i].get(key)}" for key in keys[:3])
        more = f" and {len(keys) - 3} more columns" if len(keys) > 3 else ""
        course = next((r["step"] for r, n in zip(committed, now, strict=False)
                       if any(r[k] != n[k] for k in TRAINING)), None)  # fmt: skip
        after = (f"; its course ({', '.join(TRAINING)}) from step {course}" if course is not None else
                 f"; its course ({', '.join(TRAINING)}) is identical in all {len(committed)} rows")
        return f"step {row['step']}: {cells}{more}{after}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (manifest.json + evaluations.csv)")
    parser.add_argument("--evals", type=int, default=2, help="evaluations to re-run and compare (default 2)")
    args = parser.parse_args(argv)
    if args.evals < 1:
        parser.error(f"--evals must be at least 1, got {args.evals}")
    try:
        plans = [(folder, *plan(folder, args.evals)) for folder in args.runs]
    except ValueError as err:
        parser.error(str(err))
    differing = 0
    for folder, manifest, committed, until in plans:
        with tempfile.TemporaryDirectory(prefix="rerun_check_") as tmp:
            size = capacity_then(manifest)
            cmd = [sys.executable, "-m", "prioritylab", *rerun_args(manifest, Path(tmp), until, size)]
            env = {**os.environ, PARENT_PID: str(os.getpid())}  # the re-run ends if this check is killed
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            found = sorted(Path(tmp).glob("*/evaluations.csv"))
            if done.returncode != 0 or len(found) != 1:
                print(f"{folder}: the re-run failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
                differing += 1
                continue
            rerun = json.loads((found[0].parent / MANIFEST).read_text())
            changed = changed_settings(manifest, rerun)
            diff = compare(committed, read_rows(found[0]))
            if diff is not None:
                diff += elsewhere(manifest, rerun)
        if changed:  # the code here reads the recorded command as other settings (a default changed, say)
            diff = "settings: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items()) + (
                f"; and {diff}" if diff else "")
        commit = str(manifest.get("git_commit", "not recorded"))[:7]
        if size is not None:
            commit += f"; re-run with --buffer-size {size}, the replay capacity it had"
        if earlier_flags(manifest):
            commit += f"; re-run with {' '.join(earlier_flags(manifest))}, as it ran before those settings existed"
        if diff is None:
            print(f"{folder} (recorded at {commit}): identical through step {until} "
                  f"({len(committed)} evaluations, {len(committed[0])} columns)")  # fmt: skip
        else:
            differing += 1
            print(f"{folder} (recorded at {commit}): differs at {diff}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
