"""``prioritylab report RUNS [RUNS ...] --out REPORT``: curves, tables and diagnostics panels from run folders alone.

Reads every run folder under each ``RUNS`` (a folder with ``manifest.json`` and
``evaluations.csv``, as ``prioritylab train`` writes them; several ``RUNS`` put a
study's runs beside another study's control runs, each run counted once; links to run
folders are followed, so a folder of links picks runs out of others), groups the
runs by (agent, environment, sampler) across seeds and writes:

* ``curves_<agent>_<env>.png``: evaluation return against steps, mean over seeds
  with a 95 % confidence band (Student t over seeds), smoothed uniformly over a
  window of 5 evaluations (LAP/PAL App. D, Fig. 1);
* ``table.md`` / ``table.csv``: mean ± 95 % CI over seeds of each run's average
  return over its last 10 evaluations (LAP/PAL Table 1 format), an interval from
  2-4 seeds marked "few seeds" as in ``differences.md``;
* ``diagnostics_<agent>_<env>.png``: one panel per replay statistic
  (docs/diagnostics.md) over training, one line per sampler, 95 % bands;
* ``ners_table3.md``: the drawn transitions' |TD error| and Q-value, mean and std
  at the last evaluation, one row per sampler (the layout of NERS Table 3), and
  ``table3_<agent>_<env>.png``, the same four statistics seed by seed;
* ``gains.md`` / ``gains.csv``: mean and median % gain of each sampler's final score
  over a baseline sampler's, (x - y) / |y| per environment (LAP/PAL Table 2 format),
  against ``uniform`` and ``per`` when present;
* ``human_normalised.md`` / ``.csv`` (Atari runs): (score - random) / (human -
  random) per game with the PSER appendix's scores, mean and median over games;
* ``aggregates.md`` / ``.csv`` and ``profiles_<agent>_<domain>.png``: IQM, mean and
  median with 95 % stratified-bootstrap intervals and performance profiles, computed
  by ``rliable`` over runs x tasks (Atari games human-normalised, MinAtar games
  normalised between random play and the uniform sampler's mean; one task otherwise).
  With fewer than ``MIN_CI_RUNS`` runs per task the intervals are not shown: they are
  not meaningful. Every median here is over tasks (environments, games), so over one
  or two it is the mean: the Markdown tables show "— (= mean)" there, the CSVs the value;
* ``improvement.md`` / ``.csv``: rliable's probability of improvement of each sampler
  over ``uniform``, and of the comparisons the papers make (LAP, PAL, PSER and NERS
  over ``per``; PAL over ``lap``, where 0.5 is the claim: :data:`CLAIMS`), P(X > Y)
  over runs, averaged over tasks, with its bootstrap interval;
* ``aggregates_by_task`` and ``improvement_by_task`` (``.md`` / ``.csv``) and ``profiles_<agent>_<task>.png``,
  where a domain has several tasks: the same for each task alone (``<domain>: <task>``), with that task's own
  seeds (the domain's tables and profile take each sampler's seeds as many on every task as on its task with the
  fewest);
* ``differences.md`` / ``.csv``: per environment, for the same comparisons, the difference
  of the mean final scores with its 95 % Welch interval, absolute and as a share of the
  baseline's mean;
* ``speed.md`` / ``.csv``: the same comparisons of each run's mean return over all its evaluations (the
  area under its learning curve, which rewards learning early), beside what the baseline would gain if it
  learned twice as fast (its mean curve read at twice each step): PER's "learning is twice as fast";
* ``versus.md`` / ``.csv`` (with ``--against SETTING=VALUE``): each sampler's runs against its own runs
  recorded with ``SETTING = VALUE`` (another optimiser eps, another kappa), the difference of the mean final
  scores with its 95 % Welch interval; the reference runs are in no other table, and the runs of a sampler
  that does not read ``SETTING`` stay in them.  Given several times, the reference runs are those recorded with
  every ``SETTING = VALUE`` their sampler reads (runs that differ in two settings at once);
* ``overhead.md``: wall time per run and its increase over uniform (LAP/PAL App. B,
  Table 3), from the runs' ``timing.csv``, under a caveat: sweep runs share a machine,
  so these are no measure of a sampler's cost (``prioritylab bench agent`` is); intervals
  from 2-4 runs marked "few runs";
* ``status.md``: every run folder found, and whether it was used, left out as
  partial (no ``finished.json``), left out as a run that never updated (0
  updates: a random policy's returns), skipped as corrupt (with the reason), left out
  for want of a ``manifest.json`` beside its ``evaluations.csv``, or empty (neither file),
  with the commit each run was recorded with, and the groups recorded at several;
* ``manifest.json``: the command, commit, package versions, the run folders used and the figures drawn.  A
  report into a folder that holds an earlier report removes the figures that one drew and this one does not
  (a group no longer there); figures it did not draw, such as one drawn by hand, stay.

A final score is the mean return over a run's last 10 evaluations (``table.md`` marks a group with a run of
fewer, whose score then averages all of them).  Partial runs are
listed and never averaged in, unless ``--include-partial`` (then ``table.md`` marks them
and every table begins with a line that counts them).  With ``--include-partial`` every CSV also ends with a
column ``partial_runs``: how many of the runs a row's figures were computed from are partial, 0 where none (even
when no run of the report is).  In ``table.csv``, the group's; in ``differences.csv`` and ``speed.csv``, the
sampler's and the baseline's (both sides); in ``versus.csv``, both sides' (its ``partial`` plus
``reference_partial``); in ``gains.csv``, the sampler's and the baseline's on every environment the row averages
over; in ``human_normalised.csv``, the sampler's on every game of the row; in ``aggregates.csv`` and
``aggregates_by_task.csv``, those among the runs the row's bootstrap takes (each sampler's lowest seeds, as many on
each of the tasks it pools as on its task with the fewest: a partial run beyond them is not counted); in
``improvement.csv`` and ``improvement_by_task.csv``, the same for both sides of the comparison.  Without
``--include-partial`` no CSV has that column.
A corrupt or truncated ``manifest.json`` / ``evaluations.csv`` (a row with fewer or
more fields than the header, or a last row without its line end, a cell that is not a number,
no ``step`` or ``return_mean`` column) is reported by name and skipped.

Only like is compared with like: the seeds of a group must agree on every setting
but the seed and the bookkeeping ones (``IGNORED``), and the samplers of one agent
and environment on every setting but the sampler and its ``replay.*`` settings.  A
group that differs, or that holds one seed in two run folders (a copy), is marked in
``table.md`` with what differs, and left out of every other table and figure.  A run
whose ``finished.json`` names another last step, last return or update count than its
``evaluations.csv`` ends with (a cut or replaced file), or another last step than its manifest's
``steps`` (a shorter run's files), is corrupt, and so is one whose rows are not
the first evaluations of its own schedule (every ``eval_every`` steps and at its last step, from
its manifest: rows cut from the middle, or more rows than the run has), and one whose folder is not named as
``train`` names it from its manifest (a renamed folder, or a manifest edited to another environment, sampler or
seed, which would put the run's scores under another's name; ``prioritylab collect`` refuses it the same way).
The rliable tables take each sampler's own seeds (its lowest, as many on each task) on the samplers and tasks
that give the most sampler-task cells with at least 2 runs each, and list in ``aggregates.md`` what they
leave out (a sampler run on few tasks, a task only some samplers have reached, the seeds
beyond a sampler's fewest on a task, a MinAtar game with nothing to normalise by); the
probability of improvement compares each pair on the tasks both ran.  The curves align
the seeds on the evaluation steps every seed logged, and a figure says where that cut a
curve short.  A Welch interval is undefined (shown as such) when no seed differs on either
side.  Nothing is left out in silence: each table ends with what it could not use and why
(a comparison of the papers without 2 seeds a side, an environment whose baseline is 0 or
absent, an Atari game without human and random scores, a run whose ``timing.csv`` is
missing, cut short or ends early, a sampler with too few seeds for NERS Table 3's pairs; a
replay statistic not logged, or infinite, in some seed), and each names first the groups left out as not
comparable.  The tables and figures are written into a folder of their own inside ``--out`` and moved into it
when all are written, so a report that fails leaves an earlier report there as it was.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm import tqdm

from ..._cli import check_output_dir, empty_refused, fail, missing_dirs, remove_empty_dirs
from ...results import MANIFEST, atomic_write, write_csv, write_manifest
from . import plots, stats, tables
from .runs import against_flags, collect, grouped, incomparable, run_manifest

REPORT_PARTS = 7  # reading, tables, intervals, differences, improvement, figures, profiles: the bar's steps


def report(root: Path | Sequence[Path], out: Path, include_partial: bool = False,
           against: Sequence[tuple[str, str]] | None = None) -> dict:
    """Tables and figures in ``out`` from the run folders under ``root``: one folder, or several (a study's
    runs beside another study's control runs, or single run folders), each run counted once.  ``against``: the
    ``(SETTING, VALUE)`` pairs of ``--against``."""
    roots = [Path(root)] if isinstance(root, (str, Path)) else [Path(r) for r in root]
    if against and isinstance(against[0], str):
        raise ValueError(f"against takes (SETTING, VALUE) pairs, got {against!r}")
    against = list(against) if against else None
    if against is not None:
        keys = [key for key, _ in against]
        twice = sorted({key for key in keys if keys.count(key) > 1})
        if twice:
            raise ValueError(f"--against gives {', '.join(twice)} more than once; give each setting once")
    # the parts of the report, on a terminal only (disable=None): its intervals and figures take minutes
    bar = tqdm(total=REPORT_PARTS, desc="report", unit="part", disable=None, leave=False, dynamic_ncols=True)
    def next_part(name: str) -> None:
        bar.update()
        bar.set_postfix_str(name)

    stage, lock = None, None
    try:
        bar.set_postfix_str("reading the runs")
        runs, reference_runs, status = collect(roots, out, include_partial, against)
        if not runs:  # refused before anything is written: an earlier report in `out` stays as it was
            raise ValueError(_nothing_to_report(roots, status))
        earlier_figures = _drawn_before(out)
        out.mkdir(parents=True, exist_ok=True)
        lock = _lock(out)
        # every table and figure is written into a folder of its own in `out` first, and moved into `out` only
        # when all are: a report that fails half-way leaves an earlier report's files as they were, not a mix
        for left in out.glob(f"{STAGE_PREFIX}*"):  # a killed report's stage (under the lock, none is in use)
            shutil.rmtree(left, ignore_errors=True)
        stage = Path(tempfile.mkdtemp(dir=out, prefix=STAGE_PREFIX))
        gone: list[str] = []  # tables an earlier report wrote that this one's runs do not give
        result = _report_into(stage, gone, runs, reference_runs, status, against, next_part, include_partial)
        drawn = {p.name for p in result["figures"] + result["profiles"]}
        for name in sorted(os.listdir(stage)):
            os.replace(stage / name, out / name)
        for name in [*gone, *sorted(earlier_figures - drawn)]:
            (out / name).unlink(missing_ok=True)
        bar.update()
        recorded_roots = str(roots[0]) if len(roots) == 1 else [str(r) for r in roots]
        write_manifest(out, {"runs": recorded_roots, "include_partial": include_partial, "n_runs": len(runs),
                             **({"against": _recorded_against(against)} if against is not None else {})},
                       {"program": "prioritylab report", "figures": sorted(drawn),
                        "run_folders": [str(r["folder"]) for r in runs],
                        **({"reference_folders": [str(r["folder"]) for r in reference_runs]} if against else {}),
                        "not_used": [x for x in status if not x["status"].startswith("used")]})  # fmt: skip
        result["figures"] = [out / p.name for p in result["figures"]]
        del result["profiles"]
        return result
    finally:
        bar.close()
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if lock is not None:
            os.close(lock)


STAGE_PREFIX = ".report-"
"""The folder inside ``out`` that a report writes into before moving its files into ``out``."""


def _lock(out: Path) -> int:
    """An exclusive lock on the folder ``out`` for the report's life (the folder itself, so that no lock file is
    left among its files); ``ValueError`` if another report holds it."""
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ValueError(f"another prioritylab report is writing into {out}; let it end, or report into another "
                         "--out") from None  # fmt: skip
    return fd


class _Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, frame):
    raise _Stopped(signum)


def _nothing_to_report(roots: Sequence[Path], status: list[dict]) -> str:
    """The one-line refusal of a report without a run to use: what became of each folder found, counted, and
    the first corrupt one with its reason (``status.md`` would have listed them all)."""
    found = "; ".join(f"{n} {what}" for what, n in sorted(Counter(x["status"] for x in status).items()))
    corrupt = next((x for x in status if x["status"] == "corrupt"), None)
    why = ""
    if corrupt:
        folder, detail = corrupt["folder"], corrupt["detail"]
        named = detail if folder in detail else f"{folder}: {detail}"
        why = f"; the first corrupt one: {named}"
    hint = "; --include-partial uses partial runs" if any(x["status"].startswith("partial") for x in status) else ""
    return f"no finished runs to report under {', '.join(map(str, roots))} ({found}{why}){hint}"


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text))


def _report_into(out: Path, gone: list[str], runs: list[dict], reference_runs: list[dict], status: list[dict],
                 against: list[tuple[str, str]] | None, next_part: Callable[[str], None],
                 include_partial: bool = False) -> dict:
    """Write every table and figure of :func:`report` into ``out`` (the report's staging folder), and put in
    ``gone`` the tables that the runs do not give.  Returns the tables' rows, the figures and the profiles.
    ``include_partial``: every CSV ends with the column :data:`stats.PARTIAL_RUNS` (so does every row returned),
    whether or not a run here is partial."""
    _write_text(out / "status.md", tables.status_markdown(status, runs))
    partial = tables.partial_note(runs) + tables.unused_note(status)

    def write(name: str, text: str) -> None:
        """Every table's markdown goes through here, so that each begins with the partial-runs line and the count
        of the run folders found that it does not use."""
        _write_text(out / name, partial + text)

    def columns(name: str) -> tuple[str, ...]:
        """The columns of ``<name>.csv``: :data:`stats.COLUMNS`' and, with ``--include-partial``, the count of the
        partial runs of each row last."""
        return (*stats.COLUMNS[name], *([stats.PARTIAL_RUNS] if include_partial else []))

    next_part("tables")
    groups = grouped(runs)
    notes = incomparable(groups)
    comparable = {k: v for k, v in groups.items() if k not in notes}
    # a group left out as not comparable is in none of the tables after table.md: each names it first, so that a
    # comparison with it that reads "no X runs" is not taken for runs never made
    unlike = [f"{a} {e} {s}: not comparable, so in no row here (table.md says why)" for a, e, s in sorted(notes)]

    table = stats.build_table(groups, notes, partial=include_partial)
    write_csv(out / "table.csv", table)
    few_evaluations = stats.few_evaluations(groups)
    write("table.md", tables.table_markdown(table, few_evaluations))
    write("ners_table3.md", tables.ners_table3(comparable))
    gains_left = list(unlike)
    gain_rows = stats.gains(comparable, left_out=gains_left, partial=include_partial)
    write_csv(out / "gains.csv", gain_rows, columns("gains"))
    write("gains.md", tables.gains_markdown(gain_rows, gains_left))
    hn_left = list(unlike)
    hn = stats.human_normalised(comparable, hn_left, partial=include_partial)
    _table(out, "human_normalised", [{k: v for k, v in r.items() if k != "per_game"} for r in hn],
           tables.human_normalised_markdown(hn, hn_left), write, gone)
    next_part("IQM and mean intervals (bootstrap)")
    left = list(unlike)
    cells = stats.score_cells(comparable, left)
    each_task = stats.task_cells(cells)
    left_by_task = list(unlike)
    unfinished = stats.unfinished_cells(comparable) if include_partial else None  # None: no partial_runs column

    def partial_in(of_cells: dict) -> dict | None:
        """Each matrix's count of partial runs (with ``--include-partial``), for :func:`stats.aggregates`."""
        return None if unfinished is None else stats.matrix_partial_runs(of_cells, unfinished)

    matrices = stats.score_matrices(cells, left)
    agg = stats.aggregates(matrices, partial=partial_in(cells))
    write_csv(out / "aggregates.csv", agg, columns("aggregates"))
    write("aggregates.md", tables.aggregates_markdown(agg, left))
    task_matrices = stats.score_matrices(each_task, left_by_task)
    agg_by_task = stats.aggregates(task_matrices, partial=partial_in(each_task))
    by_task_text = tables.aggregates_markdown(agg_by_task, left_by_task, by_task=True)
    _table(out, "aggregates_by_task", agg_by_task, by_task_text + "\n" + tables.BY_TASK_NOTE + "\n", write,
           gone)
    next_part("differences and speed")
    not_compared = list(unlike)
    diffs = stats.differences(comparable, left_out=not_compared, partial=include_partial)
    write_csv(out / "differences.csv", diffs, columns("differences"))
    write("differences.md", tables.differences_markdown(diffs, not_compared))
    fast = stats.speed(comparable, partial=include_partial)
    write_csv(out / "speed.csv", fast, columns("speed"))
    write("speed.md", tables.speed_markdown(fast, not_compared))
    versus_rows = []
    if against is not None:
        keys = [key for key, _ in against]
        reference = grouped(reference_runs)
        versus_rows = stats.versus(groups, reference, keys, partial=include_partial)
        write_csv(out / "versus.csv", versus_rows, columns("versus"))
        write("versus.md", tables.versus_markdown(versus_rows, keys, stats.unpaired(groups, reference)))
    else:
        _table(out, "versus", [], "", write, gone)
    next_part("probabilities of improvement (bootstrap)")
    imp_left = list(unlike)
    raw_cells = stats.score_cells(comparable, normalise_minatar=False)  # P(X > Y) needs no common scale
    imp = stats.improvement(raw_cells, left_out=imp_left, unfinished=unfinished)
    write_csv(out / "improvement.csv", imp, columns("improvement"))
    write("improvement.md", tables.improvement_markdown(imp, imp_left))
    imp_by_task_left = list(unlike)
    imp_by_task = stats.improvement(stats.task_cells(raw_cells), left_out=imp_by_task_left, unfinished=unfinished)
    _table(out, "improvement_by_task", imp_by_task,
           tables.improvement_markdown(imp_by_task, imp_by_task_left) + "\n" + tables.BY_TASK_NOTE + "\n", write,
           gone)
    no_timing = list(unlike)
    over = stats.overhead(comparable, no_timing)
    write("overhead.md", tables.overhead_markdown(over, no_timing))

    next_part("figures")
    figures = plots.plot_curves(comparable, out) + plots.plot_table3(comparable, out)
    next_part("performance profiles (bootstrap)")
    profiles = [plots.plot_profiles(scores, agent, domain, out)
                for (agent, domain), scores in [*matrices.items(), *task_matrices.items()]]
    return {"runs": len(runs), "groups": len(groups), "table": table, "figures": figures, "status": status,
            "gains": gain_rows, "human_normalised": hn, "aggregates": agg, "improvement": imp, "overhead": over,
            "differences": diffs, "speed": fast, "versus": versus_rows, "aggregates_by_task": agg_by_task,
            "improvement_by_task": imp_by_task, "profiles": profiles,
            "few_evaluations": few_evaluations}


def _table(out: Path, name: str, rows: list[dict], text: str, write: Callable[[str, str], None],
           gone: list[str]) -> None:
    """``<name>.csv`` and ``<name>.md`` (through the report's ``write``) when there are rows; otherwise their
    names in ``gone``, so that not even an earlier report's are left in the report's folder (a table this
    report's runs do not give)."""
    if rows:
        write_csv(out / f"{name}.csv", rows)
        write(f"{name}.md", text)
    else:
        gone.extend(f"{name}{suffix}" for suffix in (".csv", ".md"))


def _drawn_before(out: Path) -> set[str]:
    """The figures an earlier report drew in ``out``, as its ``manifest.json`` lists them, that this report draws
    again or removes (a group no longer there).  Only the report's own names count (``plots.FIGURE_PREFIXES``): a
    figure drawn by hand into the folder stays, as does everything when there is no readable manifest."""
    try:
        listed = json.loads((out / MANIFEST).read_text()).get("figures", [])
    except (OSError, ValueError, AttributeError):
        return set()
    if not isinstance(listed, list):
        return set()
    return {name for name in listed if isinstance(name, str) and Path(name).name == name
            and name.endswith(".png") and name.startswith(plots.FIGURE_PREFIXES)}


def _recorded_against(against: list[tuple[str, str]]) -> str | list[str]:
    """``--against``'s values as the manifest records them: one ``SETTING=VALUE``, or a list of them."""
    flags = against_flags(against)
    return flags[0] if len(flags) == 1 else flags


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="curves, tables and diagnostics panels from run folders",
                              description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("runs", type=Path, nargs="+",
                   help="folder holding run folders (searched recursively); several may be given, for example a "
                        "study's runs and another study's control runs, or single run folders")
    p.add_argument("--out", default="report", help="output folder")
    p.add_argument("--against", metavar="SETTING=VALUE", action="append",
                   help="compare each sampler with its own runs recorded with SETTING = VALUE (for example "
                        "rms_eps=0.01 or method.kappa=0.01): versus.md gives the differences; every other table "
                        "holds the other runs (and the runs of samplers that do not read SETTING).  Give it again "
                        "for runs that differ in several settings: the reference runs are those recorded with "
                        "every SETTING = VALUE their sampler reads")
    p.add_argument("--include-partial", action="store_true",
                   help="average runs without finished.json in too (marked as partial, and counted in each "
                        "CSV row's last column, partial_runs); by default they are listed in status.md and left "
                        "out")  # fmt: skip
    p.set_defaults(func=_main)


def _main(args) -> int:
    empty_refused("prioritylab report", args.out)
    out = Path(args.out)
    for folder in args.runs:
        if not folder.is_dir():
            fail("prioritylab report", f"{folder} is not a folder")
        if folder.resolve() == out.resolve():  # (a folder inside it is not searched: find_runs)
            fail("prioritylab report", f"--out {out} is {folder}, which it reads runs from: its tables "
                                       "would lie among the runs; give a folder of their own (one inside it will do)")
        if run_manifest(folder) and folder.resolve() in out.resolve().parents:  # a report's manifest is no run's
            fail("prioritylab report", f"--out {out} lies inside the run folder {folder}")
    against = None
    if args.against is not None:
        against = []
        for text in args.against:
            key, sep, value = text.partition("=")
            if not (sep and key.strip() and value.strip()):
                fail("prioritylab report", f"--against takes SETTING=VALUE, got {text!r}")
            against.append((key.strip(), value.strip()))
    created = missing_dirs(out)
    previous = signal.signal(signal.SIGTERM, _raise_stopped)  # so that a stopped report cleans up, as Ctrl-C
    try:
        check_output_dir(args.out, program="prioritylab report")  # as given: an empty one is refused there too
        result = report(args.runs, out, include_partial=args.include_partial, against=against)
    except ValueError as err:
        remove_empty_dirs(created)  # a refused report leaves no folder of its own behind
        fail("prioritylab report", f"{err}")
    except (KeyboardInterrupt, _Stopped) as stop:
        signum = stop.signum if isinstance(stop, _Stopped) else signal.SIGINT
        remove_empty_dirs(created)
        print(f"prioritylab report: stopped by signal {signum} before it finished", file=sys.stderr)
        return 128 + signum
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(tables.table_markdown(result["table"], result["few_evaluations"]))
    left_out = [x for x in result["status"] if not x["status"].startswith("used")]
    for x in left_out:
        print(f"left out: {x['folder']}: {x['status']} ({x['detail']})")
    print(f"{result['runs']} runs in {result['groups']} groups; figures and tables in {out}")
    return 0
