"""Run folders for a report: reading one (and what makes it corrupt), finding them under the folders given,
grouping them by (agent, environment, sampler), which groups can be compared, and ``--against``'s split."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...provenance import IGNORED, recorded, unread_by
from ...replay.diagnostics import COLUMNS as DIAGNOSTICS
from ...results import EVALS, FINISHED, MANIFEST, NotWhole, machine_label, run_folder, whole_rows

LAST = 10  # evaluations averaged for the table (LAP/PAL Table 1)


def evaluation_steps(steps: int, eval_every: int) -> list[int]:
    """The steps at which a run of ``steps`` evaluates: every ``eval_every`` steps and at its last step
    (:func:`prioritylab.deep.loop.train`)."""
    return [*range(eval_every, steps + 1, eval_every), *([steps] if steps % eval_every else [])]


def check_schedule(evals: Path, rows: list[dict], config: dict) -> None:
    """``ValueError`` unless the rows' steps are the first evaluations of the run's schedule (its ``steps`` and
    ``eval_every``, when its manifest records them): a file with rows cut from its middle, or rows of another
    run's schedule, is not the run's record."""
    steps, every = config.get("steps"), config.get("eval_every")
    if type(steps) is not int or type(every) is not int or steps <= 0 or every <= 0:
        return
    expected = evaluation_steps(steps, every)
    if len(rows) > len(expected):
        raise ValueError(f"{evals}: {len(rows)} rows, but a run of {steps} steps evaluated every {every} has "
                         f"{len(expected)} evaluations")  # fmt: skip
    for i, (row, want) in enumerate(zip(rows, expected, strict=False)):  # a partial run has fewer
        if float(row["step"]) != want:
            raise ValueError(f"{evals}: row {i + 1} is at step {row['step']}, where the run's schedule (steps "
                             f"{steps}, eval_every {every}) has step {want} (rows cut or from another run?)")


def _same_number(recorded, logged: str) -> bool:
    try:
        return isinstance(recorded, (int, float)) and float(recorded) == float(logged)
    except (TypeError, ValueError):
        return False


def read_run(folder: Path) -> dict:
    """One run folder's config and evaluation rows; ``ValueError`` naming the file if it is corrupt."""
    manifest = folder / MANIFEST
    try:
        recorded_manifest = json.loads(manifest.read_text())
        config = recorded_manifest.get("config", {})
    except (OSError, ValueError, AttributeError) as err:
        raise ValueError(f"{manifest}: not readable JSON ({err})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{manifest}: its config is not a mapping of settings")
    for key in ("agent", "env", "sampler"):
        if not isinstance(config.get(key), str):
            raise ValueError(f"{manifest}: config has no {key}")
    finished = folder / FINISHED
    ended, summary, was_finished = None, {}, finished.exists()
    if was_finished:  # read before the evaluations: a run that finishes meanwhile is then read as partial
        try:
            summary = json.loads(finished.read_text())
            ended = summary["step"]
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise ValueError(f"{finished}: not readable JSON with the run's last step ({err!r})") from None
    evals = folder / EVALS
    try:
        rows = whole_rows(evals)
    except (OSError, NotWhole) as err:
        raise ValueError(f"{evals}: {err}") from None
    if not rows:
        raise ValueError(f"{evals}: no evaluations")
    missing = [key for key in ("step", "return_mean") if key not in rows[0]]
    if missing:
        raise ValueError(f"{evals}: no {' or '.join(missing)} column (its header: {', '.join(rows[0])})")
    last = -math.inf
    for i, row in enumerate(rows):
        for key, value in row.items():  # every column is a number (a statistic not logged: empty or nan)
            try:
                float(value or "nan")
            except ValueError:
                raise ValueError(f"{evals}: row {i + 1} has {key} {value!r}, not a number") from None
        step, ret = float(row["step"]), float(row["return_mean"])
        if not (math.isfinite(step) and math.isfinite(ret)) or step <= last:
            raise ValueError(f"{evals}: row {i + 1} has step {row['step']} / return {row['return_mean']}")
        last = step
    check_schedule(evals, rows, config)
    if config.get("diagnostics") is False:  # its columns then hold no replay statistics (DQN's q_mean is its
        rows = [{**row, **{k: "nan" for k in DIAGNOSTICS if k in row}} for row in rows]  # batch's, not Table 3's)
    if was_finished:  # finished.json is written after the last row, so that row was in the file read above
        if not isinstance(ended, (int, float)) or ended != last:
            raise ValueError(f"{evals}: ends at step {rows[-1]['step']}, but {finished.name} says the run ended at "
                             f"step {ended!r} (a cut or replaced evaluations.csv?)")  # fmt: skip
        steps = config.get("steps")
        if type(steps) is int and ended != steps:  # the loop writes finished.json at its last step only
            raise ValueError(f"{finished}: the run ended at step {ended!r}, but its manifest gives it {steps} steps "
                             "(files of another run?)")  # fmt: skip
        for key, column in (("last_eval", "return_mean"), ("updates", "updates")):  # the last row's, when written
            if key in summary and column in rows[-1] and not _same_number(summary[key], rows[-1][column]):
                raise ValueError(f"{evals}: its last row has {column} {rows[-1][column]}, but {finished.name} says "
                                 f"{key} {summary[key]!r} (a replaced evaluations.csv?)")  # fmt: skip
        if "episodes" in summary and "episodes" in rows[-1]:  # the run may end an episode per environment after it
            envs = config.get("num_envs", 1)
            try:
                extra = summary["episodes"] - float(rows[-1]["episodes"])
                fits = 0 <= extra <= (envs if type(envs) is int and envs > 0 else 1)
            except (TypeError, ValueError):
                fits = False
            if not fits:
                raise ValueError(f"{evals}: its last row has episodes {rows[-1]['episodes']}, but {finished.name} "
                                 f"says {summary['episodes']!r} at the same step (another seed's "
                                 "evaluations.csv?)")  # fmt: skip
    return {
        "folder": folder, "agent": config["agent"], "env": config["env"], "sampler": config["sampler"],
        "seed": config.get("seed"), "steps": config.get("steps"), "rows": rows,
        "finished": was_finished, "finished_wall": summary.get("wall_time"), "config": recorded(recorded_manifest),
        "code": by_segment(recorded_manifest, code_label), "machine": by_segment(recorded_manifest, machine_label),
        "packages": by_segment(recorded_manifest, package_label),
    }  # fmt: skip


def misnamed(run: dict) -> str:
    """What is wrong with the name of a run's folder ("" if nothing): a folder is named by ``train`` from its
    manifest's agent, environment, sampler and seed (:func:`~prioritylab.results.run_folder`), and ``sweep`` finds
    its runs by that name, so a folder named otherwise was renamed, or its manifest edited (another environment's
    name over its scores).  A folder reached through a link is named by the folder linked to."""
    name = Path(run["folder"]).resolve().name
    own = run_folder(run["agent"], run["env"], run["sampler"], run["seed"])
    return "" if name == own else f"is named {name}, but its manifest is that of {own}"


def by_segment(manifest: dict, label) -> list[tuple[int, str]]:
    """``(step, label(record))`` for the run's first record and for each resumption (``resumed``) whose label
    differs from the one before: a run resumed at another commit, or on another machine, is recorded with both
    from the step it was resumed at."""
    parts = [(0, label(manifest))]
    for entry in manifest.get("resumed") or []:
        if isinstance(entry, dict) and label(entry) != parts[-1][1]:
            parts.append((entry.get("at_step", "?"), label(entry)))
    return parts


def segments_text(parts: list[tuple[int, str]]) -> str:
    """:func:`by_segment`'s labels as one cell: the first, then "resumed at step N: label" for each change."""
    return "; ".join([parts[0][1], *(f"resumed at step {step}: {text}" for step, text in parts[1:])])


def package_label(manifest: dict) -> tuple:
    """The package versions a run was recorded with, as sorted ``(package, version)`` pairs; ``()`` where the
    manifest records none (not read as a difference)."""
    packages = manifest.get("packages")
    if not isinstance(packages, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in packages.items()))


def code_label(manifest: dict) -> str:
    """The code a run was recorded with: its commit's first 7 digits, marked when the checkout had uncommitted
    changes; "not recorded" for a manifest without a commit."""
    commit = manifest.get("git_commit")
    if not isinstance(commit, str) or not commit:
        return "not recorded"
    return commit[:7] + (" + uncommitted changes" if manifest.get("git_dirty") else "")


def folders_under(root: Path, unlisted: dict[Path, str] | None = None) -> list[Path]:
    """``root`` and every folder under it, in order, following links to folders (a collection of links to run
    folders is read like the folders themselves); a folder reached twice, by a link into ``root`` or a link to one
    of its own parents, is listed once, where it is first reached.  A folder that cannot be listed is left out and
    put in ``unlisted`` with the reason."""

    def note(err: OSError) -> None:
        if unlisted is not None:
            unlisted[Path(err.filename)] = err.strerror or str(err)

    found, seen = [], set()
    for path, subfolders, _ in os.walk(root, onerror=note, followlinks=True):
        real = os.path.realpath(path)
        if real in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders.sort()
        found.append(Path(path))
    return found


def find_runs(root: Path, exclude: Path | None = None) -> tuple[list[dict], list[dict]]:
    """Every run folder under ``root`` (a ``manifest.json`` beside an ``evaluations.csv``): the readable
    runs, and the status of each folder found (``used`` is decided later; ``corrupt`` with its reason;
    ``empty`` for a folder without subfolders that holds neither file, ``no evaluations`` for a run's
    manifest without an ``evaluations.csv``, ``no manifest`` for an ``evaluations.csv`` without one,
    ``unreadable`` for a folder that cannot be listed, so that a run in it or under it cannot be read);
    ``exclude`` (the report's own folder) is not searched, unless it holds ``root``.  Links to folders are
    followed (:func:`folders_under`)."""
    runs, status = [], []
    skip = exclude.resolve() if exclude is not None else None
    if skip is not None and (skip == root.resolve() or skip in root.resolve().parents):
        skip = None  # a report written beside its runs (--out S for S/runs) hides none of them
    unlisted: dict[Path, str] = {}
    folders = folders_under(root, unlisted)
    for folder in sorted(f for f in folders if (f / MANIFEST).exists()):
        if not (folder / EVALS).exists():
            if run_manifest(folder):
                status.append({"folder": str(folder), "status": "no evaluations, left out",
                               "detail": "manifest.json without evaluations.csv (stopped before its first "
                                         "evaluation)"})  # fmt: skip
            continue
        try:
            runs.append(read_run(folder))
        except ValueError as err:
            status.append({"folder": str(folder), "status": "corrupt", "detail": str(err)})

    def excluded(folder: Path) -> bool:
        return skip is not None and (folder.resolve() == skip or skip in folder.resolve().parents)

    for folder, why in sorted(unlisted.items()):
        if not excluded(folder):
            status.append({"folder": str(folder), "status": "unreadable, left out",
                           "detail": f"cannot list it ({why}): a run in it or under it cannot be read"})
    for folder in [root, *sorted(f for f in folders if f != root)] if folders else []:
        if excluded(folder):
            continue
        inside_run = any(run_manifest(parent) for parent in (folder, *folder.parents)
                         if parent == root or root in parent.parents)  # fmt: skip
        if inside_run:
            continue
        if (folder / EVALS).exists():
            status.append({"folder": str(folder), "status": "no manifest, left out",
                           "detail": "evaluations.csv without manifest.json (whose settings these are is unknown)"})
        elif (folder / MANIFEST).exists():  # a report's or a theory script's results: not a run, nor an empty folder
            continue
        elif not any(p.is_dir() for p in folder.iterdir()):
            files = sorted(p.name for p in folder.iterdir())
            status.append({"folder": str(folder), "status": "empty, left out",
                           "detail": "no manifest.json and no evaluations.csv"
                                     + (f" (holds {', '.join(files)})" if files else "")})  # fmt: skip
    return runs, status


def run_manifest(folder: Path) -> bool:
    """``folder`` holds a run's ``manifest.json``: beside an ``evaluations.csv``, or one whose settings name an
    agent, or one that cannot be read (so that it is named as corrupt, not passed over).  A report's own manifest
    (``prioritylab report --out``, no agent) is none: the folders under it are searched as any others."""
    if not (folder / MANIFEST).exists():
        return False
    if (folder / EVALS).exists():
        return True
    try:
        return "agent" in json.loads((folder / MANIFEST).read_text()).get("config", {})
    except (OSError, ValueError, AttributeError):
        return True


def never_updated(run: dict) -> bool:
    """A run whose last evaluation reports 0 updates: its returns are a random policy's."""
    value = run["rows"][-1].get("updates")
    try:
        return value is not None and float(value) == 0
    except ValueError:
        return False


def differing(configs: list[dict], skip=lambda key: False) -> dict[str, list]:
    """The settings whose values differ between ``configs`` (flat), with their distinct values."""
    keys = sorted({k for c in configs for k in c if k not in IGNORED and not skip(k)})
    out = {}
    for key in keys:
        values = []
        for c in configs:
            if c.get(key) not in values:
                values.append(c.get(key))
        if len(values) > 1:
            out[key] = values
    return out


def incomparable(groups: dict) -> dict:
    """Per group, why it cannot be compared: settings that differ between its seeds, or between the samplers
    of its agent and environment beyond the sampler and its ``replay.*`` settings."""
    notes = {}
    by_task = defaultdict(dict)
    for key, runs in groups.items():
        by_task[key[:2]][key[2]] = runs
        unread = unread_by(key[2])
        within = differing([r["config"] for r in runs], skip=lambda k, unread=unread: k.startswith(unread))
        if within:
            notes[key] = "seeds differ in " + "; ".join(f"{k} ({', '.join(map(str, v))})" for k, v in within.items())
        folders = defaultdict(list)
        for r in runs:
            folders[r["seed"]].append(str(r["folder"]))
        twice = {seed: f for seed, f in folders.items() if len(f) > 1}
        if twice:
            text = "the same seed in several run folders (a copy counted twice?): " + "; ".join(
                f"seed {seed} in {', '.join(f)}" for seed, f in sorted(twice.items(), key=lambda x: seed_order(x[0])))
            notes[key] = f"{notes[key]}; {text}" if key in notes else text
        for text in _copies_and_lengths(runs):
            notes[key] = f"{notes[key]}; {text}" if key in notes else text
    for key, text in _copies_across(groups).items():
        notes[key] = f"{notes[key]}; {text}" if key in notes else text
    for (agent, env), samplers in by_task.items():
        if len(samplers) < 2:
            continue
        across = differing([runs[0]["config"] for runs in samplers.values()],
                           skip=lambda k: k == "sampler" or k.startswith(("replay.", "method.")))  # fmt: skip
        if across:
            text = "samplers differ in " + "; ".join(f"{k} ({', '.join(map(str, v))})" for k, v in across.items())
            for sampler in samplers:
                key = (agent, env, sampler)
                notes[key] = f"{notes[key]}; {text}" if key in notes else text
    return notes


def _copies_and_lengths(runs: list[dict]) -> list[str]:
    """Why a group's runs are not as many independent runs of one length, from their evaluations alone (the
    manifests may lack the settings or have been edited): two runs with the same evaluation rows under different
    seeds (one run's files under another seed?), and finished runs that end at different steps."""
    out = []
    same = defaultdict(list)
    for r in runs:
        same[_evaluations_key(r)].append(r)
    # one run in two folders under one seed is named by "the same seed in several run folders" already
    copies = [group for group in same.values() if len({r["seed"] for r in group}) > 1]  # seeds as incomparable()
    if copies:
        out.append("the same evaluations under several seeds (one run's files copied under another seed?): " +
                   "; ".join(", ".join(f"seed {r['seed']} ({r['folder']})" for r in group) for group in copies))
    ends = sorted({float(r["rows"][-1]["step"]) for r in runs if r["finished"]})
    if len(ends) > 1 and len({r["config"].get("steps") for r in runs}) == 1:  # else "seeds differ in steps" says it
        out.append("finished runs end at different steps (" + ", ".join(f"{e:g}" for e in ends) + ")")
    return out


def _evaluations_key(run: dict) -> tuple:
    """A run's evaluation rows, every column, as one hashable value: equal for one run's files in two folders."""
    return tuple(tuple(sorted(row.items())) for row in run["rows"])


def _copies_across(groups: dict) -> dict:
    """Per group, the runs of its task's other samplers whose evaluation rows are the same as one of its runs':
    one run's files copied under another run's manifest, which would count a run of one sampler as a run of the
    other (:func:`_copies_and_lengths` finds such copies within a group)."""
    where = defaultdict(list)
    for key, runs in groups.items():
        for r in runs:
            where[(key[:2], _evaluations_key(r))].append((key, r))
    out = {}
    for found in where.values():
        if len({key for key, _ in found}) < 2:
            continue
        for key, run in found:
            others = ", ".join(f"{other[2]} seed {r['seed']} ({r['folder']})" for other, r in found if other != key)
            text = (f"seed {run['seed']} ({run['folder']}) has the same evaluations as {others} (one run's files "
                    "copied under another run's manifest?)")  # fmt: skip
            out[key] = f"{out[key]}; {text}" if key in out else text
    return out


def column(rows: list[dict], key: str) -> np.ndarray:
    return np.array([float(r.get(key, "nan") or "nan") for r in rows])


def seed_order(seed) -> tuple:
    """Sort key of a recorded seed: integers in order, anything else after them."""
    return (0, seed, "") if isinstance(seed, int) and not isinstance(seed, bool) else (1, 0, str(seed))


def grouped(runs: list[dict]) -> dict:
    """``(agent, env, sampler) -> runs``, each group's runs in the order of their seeds."""
    groups = defaultdict(list)
    for r in sorted(runs, key=lambda r: (seed_order(r["seed"]), str(r["folder"]))):
        groups[(r["agent"], r["env"], r["sampler"])].append(r)
    return groups


def aligned(runs: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """The evaluation steps every run of a group logged and the (runs x steps) values of ``key`` at them."""
    common = sorted(set.intersection(*(set(column(r["rows"], "step")) for r in runs)))
    values = []
    for r in runs:
        at = dict(zip(column(r["rows"], "step"), column(r["rows"], key), strict=True))
        values.append([at[step] for step in common])
    return np.array(common), np.array(values, dtype=float).reshape(len(runs), len(common))


def last_values(runs: list[dict], key: str) -> np.ndarray:
    """``key`` at each run's last evaluation."""
    return np.array([column(r["rows"], key)[-1] for r in runs])


def final_score(run: dict) -> float:
    """Mean return over the run's last 10 evaluations (LAP/PAL App. D: the final score)."""
    return float(column(run["rows"], "return_mean")[-LAST:].mean())


def area(run: dict, factor: float = 1.0, until: float | None = None) -> float:
    """Mean return over all the run's evaluations: the area under its learning curve per evaluation, which
    rewards learning early as well as ending high (the speed PER reports: "learning is twice as fast").

    ``factor``: the area the run would have had learning ``factor`` times as fast, its curve read at ``factor``
    times each evaluation step and held at its last value beyond its end.  Holding understates a run still
    improving at its end, so a run whose area falls short of this one falls short of the real speed-up too; a
    run whose area exceeds it need not exceed the real one, which the held values cannot show.  ``until``: only
    the evaluations at steps up to ``until`` (with ``factor * until`` at most the last step, nothing is held);
    NaN if there is none."""
    steps, returns = column(run["rows"], "step"), column(run["rows"], "return_mean")
    read = steps if until is None else steps[steps <= until]
    if read.size == 0:
        return math.nan
    return float(np.interp(factor * read, steps, returns).mean())


def _is_value(recorded_value, text: str) -> bool:
    """Whether a recorded setting equals ``text`` as given on the command line: numbers as numbers (1e-5 is
    1e-05), other values as the manifest's JSON writes them (``false``, ``null``, ``[256, 128]``) or as Python
    prints them."""
    if isinstance(recorded_value, (int, float)) and not isinstance(recorded_value, bool):
        try:
            return float(text) == float(recorded_value)
        except ValueError:
            return False
    try:
        if json.loads(text) == recorded_value:
            return True
    except ValueError:
        pass
    return str(recorded_value) == text


def against_text(against: Sequence[tuple[str, str]]) -> str:
    """``--against``'s settings as text: ``method.kappa = 0.01 and rms_eps = 1e-5``."""
    return " and ".join(f"{key} = {value}" for key, value in against)


def against_flags(against: Sequence[tuple[str, str]]) -> list[str]:
    """``--against``'s values as given: ``["method.kappa=0.01", "rms_eps=1e-5"]``."""
    return ["=".join(pair) for pair in against]


def is_reference(run: dict, against: Sequence[tuple[str, str]]) -> bool:
    """Whether ``run`` is a reference run of ``--against``: recorded with every ``KEY`` = ``VALUE`` its sampler
    reads, and reading one at least."""
    read = read_settings(run, against)
    return bool(read) and all(key in run["config"] and _is_value(run["config"][key], value) for key, value in read)


def split_against(runs: list[dict], against: Sequence[tuple[str, str]]) -> tuple[list[dict], list[dict]]:
    """``--against KEY=VALUE [--against KEY=VALUE ...]``: the runs compared and the reference runs, those recorded
    with every ``KEY`` = ``VALUE`` their sampler reads (a run whose sampler reads none of the keys is compared).
    ``ValueError`` if no run or every run is a reference run, if a run whose sampler reads a ``KEY`` has no record
    of it, or if the compared runs hold more than one value of a ``KEY``, none, or only ``VALUE`` (a ``KEY`` that
    separates nothing)."""
    flag = " ".join(f"--against {text}" for text in against_flags(against))
    compared, reference = [], []
    others: dict[str, list] = {key: [] for key, _ in against}
    for r in runs:
        read = read_settings(r, against)
        for key, _ in read:
            if key not in r["config"]:
                resolved = "method." + key.split(".", 1)[1] if key.startswith("replay.") else None
                hint = f" (its resolved value is {resolved})" if resolved in r["config"] else ""
                if key == "buffer_size":  # provenance.recorded compares the capacity it gives instead
                    hint = " (runs are compared on the replay's capacity: --against replay_capacity=N)"
                raise ValueError(f"{flag}: {r['folder']} has no recorded {key}{hint}")
        if is_reference(r, against):
            reference.append(r)
            continue
        compared.append(r)
        for key, _ in read:
            if r["config"][key] not in others[key]:
                others[key].append(r["config"][key])
    if not reference:
        raise ValueError(f"{flag}: no run was recorded with {against_text(against)}")
    if not compared:
        raise ValueError(f"{flag}: every run was recorded with {against_text(against)}; there is nothing to compare "
                         "with them")  # fmt: skip
    for key, values in others.items():
        if len(values) > 1:
            raise ValueError(f"{flag}: the other runs hold {len(values)} values of {key} "
                             f"({', '.join(map(repr, values))}); --against compares one value with the reference")
    for key, value in against:
        if not others[key]:
            raise ValueError(f"{flag}: no compared run is of a sampler that reads {key}; there is nothing to compare "
                             "the reference runs with")  # fmt: skip
        if _is_value(others[key][0], value):
            raise ValueError(f"{flag}: the compared runs hold {key} = {value} too, so it separates nothing; leave "
                             f"--against {key}={value} out")  # fmt: skip
    return compared, reference


def read_settings(run: dict, against: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs of ``--against`` whose setting the run's sampler reads."""
    return [(key, value) for key, value in against if not key.startswith(unread_by(run["sampler"]))]


def _twice(runs: list[dict]) -> list:
    """The seeds that appear in more than one of ``runs``' folders (a copied run)."""
    seeds = [r["seed"] for r in runs]
    return sorted({s for s in seeds if seeds.count(s) > 1}, key=seed_order)


def collect(roots: Sequence[Path], out: Path, include_partial: bool = False,
            against: Sequence[tuple[str, str]] | None = None) -> tuple[list[dict], list[dict], list[dict]]:
    """The runs a report averages, the reference runs of ``--against`` (:func:`split_against`), and the status
    of every folder found under ``roots`` (each run counted once, ``out`` not searched), sorted by folder.
    ``ValueError`` if no folder under ``roots`` holds a run."""
    where = ", ".join(map(str, roots))
    found, status, seen = [], [], set()
    for one in roots:
        runs_here, status_here = find_runs(one, exclude=out)
        found += [r for r in runs_here if Path(r["folder"]).resolve() not in seen]
        status += [x for x in status_here if Path(x["folder"]).resolve() not in seen]
        seen |= {Path(r["folder"]).resolve() for r in runs_here} | {Path(x["folder"]).resolve() for x in status_here}
    if not found and not status:
        raise ValueError(f"no run folders (manifest.json + evaluations.csv) under {where}")
    for r in found:  # a renamed folder, or an edited manifest: its scores would stand for another run's
        why = misnamed(r)
        if why:
            detail = f"{r['folder']} {why} (a renamed folder, or an edited manifest.json)"
            status.append({"folder": str(r["folder"]), "status": "corrupt", "detail": detail})
    found = [r for r in found if not misnamed(r)]
    runs = [r for r in found if (r["finished"] or include_partial) and not never_updated(r)]
    reference_runs: list[dict] = []
    if against is not None and runs:
        runs, reference_runs = split_against(runs, against)
    in_reference = {id(r) for r in reference_runs}
    for r in found:
        last = int(column(r["rows"], "step")[-1])
        if never_updated(r):
            status.append({"folder": str(r["folder"]), "status": "no updates, left out",
                           "code": segments_text(r["code"]), "machine": segments_text(r["machine"]),
                           "detail": f"0 updates by step {last}: a random policy's returns (steps <= start_steps?)"})
            continue
        if id(r) in in_reference:
            state = (f"reference ({against_text(read_settings(r, against))}), in versus.md only"
                     + ("" if r["finished"] else ", partial"))
        elif r["finished"]:
            state = "used"
        elif include_partial:
            state = "used, partial"
        elif against is not None and is_reference(r, against):  # left out of versus.md only
            state = f"reference ({against_text(read_settings(r, against))}), partial, left out of versus.md"
        else:
            state = "partial, left out"
        status.append({"folder": str(r["folder"]), "status": state,
                       "code": segments_text(r["code"]), "machine": segments_text(r["machine"]),
                       "detail": f"last evaluation at step {last} of {r['steps']}"})  # fmt: skip
    status.sort(key=lambda x: x["folder"])
    return runs, reference_runs, status
