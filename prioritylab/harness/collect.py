"""``prioritylab collect``: copy finished runs' small files into a folder of results to keep.

A study's runs are written with checkpoints and event files (hundreds of MB); what a report needs, and what a
repository keeps, is each finished run's ``evaluations.csv``, ``manifest.json``, ``finished.json`` and
``timing.csv``.  ``prioritylab collect runs/study --into docs/results/study/runs`` copies those files of every
finished run under ``runs/study`` into ``<into>/<run folder>/``, leaving runs still in progress where they are
(and naming them).

Every run is checked before anything is copied, with the report's own reader: a finished run whose files are
missing, cut, replaced or do not match its ``finished.json`` (``timing.csv`` as the report's overhead table reads
it) is refused, as is a run whose folder under ``--into`` already holds other files of the same name (another run,
or another version of it), two finished runs with one folder name, a run whose folder is not named as ``train``
names it from its manifest (a renamed copy), a folder under those searched that cannot be
listed (it may hold runs), and an ``--into`` that is empty, cannot be written, is one of the folders searched, or is
a training run's folder or a folder inside one.  Links to run
folders are followed, and a run keeps its own folder's name.  A refusal copies nothing.  Each file is written whole
or not at all, and a run collected before with the same files is left as it is, so the command can be repeated as a
study goes on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._cli import (
    check_not_in_run,
    check_output_dir,
    empty_refused,
    fail,
    missing_dirs,
    plain,
    remove_empty_dirs,
    runs_counted,
)
from ..results import EVALS, FINISHED, MANIFEST, TIMING, atomic_write
from .report.runs import find_runs, misnamed
from .report.stats import wall_time

SMALL_FILES = (EVALS, MANIFEST, FINISHED, TIMING)
"""A run's files that a report reads; ``timing.csv`` is copied where the run wrote one."""


def _name(folder: Path) -> str:
    """The name a run is collected under: its own folder's, the name ``train`` gave it (which ``sweep`` matches
    runs by), also when it is reached through a link of another name."""
    return folder.resolve().name


def _same_bytes(a: Path, b: Path) -> bool:
    return b.exists() and a.read_bytes() == b.read_bytes()


def plan(roots: list[Path], into: Path) -> dict:
    """What :func:`collect` would do, every check made: ``copy`` (run folders to copy), ``same`` (already
    collected with the same files), ``unfinished`` (runs still in progress, or stopped) and ``left`` (folders
    that are not runs, with why).  ``ValueError`` (one line) for anything that must stop the whole collection."""
    target_root = into.resolve()
    for root in roots:
        if root.resolve() == target_root or target_root in root.resolve().parents:
            raise ValueError(f"--into {into} is, or holds, the folder {root} it would collect from")
    check_not_in_run(into, "--into")  # as check_output_dir refuses a results folder there: the run's files are its own

    def inside_into(folder: Path) -> bool:  # runs collected before, when --into lies under a folder searched
        return target_root in folder.resolve().parents

    chosen: dict[str, Path] = {}
    unfinished: dict[Path, Path] = {}
    left: dict[Path, dict] = {}
    for root in roots:
        runs, status = find_runs(root, exclude=into)
        for entry in status:
            folder = Path(entry["folder"])
            if inside_into(folder):
                continue
            if entry["status"].startswith("unreadable"):  # it may hold finished runs: not a folder to pass over
                raise ValueError(f"{folder}: {entry['detail']}; make it readable, or move it out of {root}")
            if (folder / FINISHED).exists():  # a finished run that the report could not read whole
                raise ValueError(f"finished run {folder} cannot be read whole: {entry['status']} ({entry['detail']})")
            if entry["status"] == "corrupt":  # without finished.json: a run still being written, or stopped
                unfinished.setdefault(folder.resolve(), folder)
            else:
                left.setdefault(folder.resolve(), entry)
        for run in runs:
            folder = run["folder"]
            if inside_into(folder):
                continue
            if folder.resolve() == target_root or folder.resolve() in target_root.parents:
                raise ValueError(f"--into {into} lies inside the run folder {folder}: its copies would be found as "
                                 "runs of their own")  # fmt: skip
            if not run["finished"]:
                unfinished.setdefault(folder.resolve(), folder)
                continue
            if (folder / TIMING).exists():
                try:
                    wall_time(run)
                except ValueError as err:
                    raise ValueError(f"finished run {folder}: {err}") from None
            name, wrong = _name(folder), misnamed(run)
            if wrong:  # a renamed folder: collected, it would stand for a run it is not
                raise ValueError(f"finished run {folder} {wrong}: give it its own name, or move it out of the folders "
                                 "collected")  # fmt: skip
            other = chosen.get(name)
            if other is not None and other.resolve() != folder.resolve():
                raise ValueError(f"two finished runs are named {name}: {other} and {folder}")
            chosen[name] = folder
    copy, same = [], []
    for name, folder in sorted(chosen.items()):
        target = into / name
        if target.exists() and not target.is_dir():
            raise ValueError(f"{target} is in the way: a file where the run's folder would go")
        for f in SMALL_FILES:
            if (target / f).exists() and not (target / f).is_file():
                raise ValueError(f"{target / f} is in the way: not a plain file")
        differs = [f for f in SMALL_FILES
                   if (target / f).exists() and not _same_bytes(target / f, folder / f)]  # fmt: skip
        if differs:
            raise ValueError(f"{target} already holds another {differs[0]} than {folder / differs[0]} (another run, "
                             f"or another version of this one): remove it to collect this one")  # fmt: skip
        whole = all((target / f).exists() for f in SMALL_FILES if (folder / f).exists())
        (same if whole else copy).append(folder)
    return {"copy": copy, "same": same, "unfinished": sorted(unfinished.values()), "left": list(left.values())}


def collect(roots: list[Path], into: Path) -> dict:
    """Copy the small files of every finished run under ``roots`` into ``into/<run folder>/`` after
    :func:`plan`'s checks and a check that ``into`` can be written; returns the plan.  ``ValueError`` where
    ``roots`` hold no run at all, finished or not (a mistyped folder that happens to exist)."""
    todo = plan(roots, into)
    if not any(todo[key] for key in ("copy", "same", "unfinished")):
        raise ValueError(f"no run under {', '.join(map(str, roots))}: nothing to collect")
    if todo["copy"]:
        created = missing_dirs(into)
        try:
            check_output_dir(into, option="--into")
        except ValueError:
            remove_empty_dirs(created)
            raise
    for folder in todo["copy"]:
        for name in SMALL_FILES:
            source = folder / name
            if source.exists():
                data = source.read_bytes()
                atomic_write(into / _name(folder) / name, lambda fh, data=data: fh.write(data), binary=True)
    return todo


def register(subparsers) -> None:
    p = subparsers.add_parser("collect", help="copy finished runs' small files into a results folder",
                              description=plain(__doc__.splitlines()[0]),
                              epilog=plain("\n".join(__doc__.splitlines()[2:])),
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("runs", type=Path, nargs="+",
                   help="folder holding run folders (searched recursively), as prioritylab sweep --out writes it, "
                        "or single run folders")  # fmt: skip
    p.add_argument("--into", required=True,
                   help="folder to copy into, one subfolder per run (for example docs/results/<study>/runs)")
    p.set_defaults(func=_main)


def _main(args) -> int:
    empty_refused("prioritylab collect", args.into, "--into")
    into = Path(args.into)
    for folder in args.runs:
        if not folder.is_dir():
            fail("prioritylab collect", f"{folder} is not a folder")
    if into.exists() and not into.is_dir():
        fail("prioritylab collect", f"--into {into} is not a folder")
    try:
        done = collect(args.runs, into)
    except (OSError, ValueError) as err:
        fail("prioritylab collect", f"{err}")
    for folder in done["unfinished"]:
        print(f"not finished, left where it is: {folder}")
    for entry in done["left"]:
        print(f"not a run, left: {entry['folder']} ({entry['status']}: {entry['detail']})")
    print(f"{runs_counted(len(done['copy']))} copied into {into}, {len(done['same'])} already there with the same "
          f"files, {len(done['unfinished'])} not finished")  # fmt: skip
    return 0
