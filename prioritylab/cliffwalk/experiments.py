"""Grids of Blind Cliffwalk runs and their summaries, shared by the theory scripts and the CLI.

A grid is a set of labelled :class:`~prioritylab.cliffwalk.runner.RunConfig`
templates run for every ``n`` and seed.  Seeds are shared across labels, so
all schemes of one ``(n, seed)`` see the same memory order and initial
parameters (common random numbers).

Censoring: a run that has not converged within its ``cap`` counts as ``cap``
updates in the medians, which are then lower bounds; every summary row says
how many runs were censored and marks such medians.  The scripts and the
command line cap every run at :data:`CAP_PER_TRANSITION` updates per memory
transition (:func:`default_cap`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..verdict import caveat, verdict_word, with_verdict
from .env import memory_size
from .runner import DIAGNOSTICS, RunConfig, run

CAP_PER_TRANSITION = 200
"""Update cap per run, per memory transition: 26.2 M updates at n = 16.

Measured (docs/theory/per-figures.md, 10 seeds): about 13x the tabular uniform
median at n = 16 (1.95 M) and about 20x the linear uniform median (1.32 M); no
run of PER Fig. 1-2 or PSER Fig. 7 in the documented tables reaches it."""


def default_cap(n: int) -> int:
    """``CAP_PER_TRANSITION * (2^(n+1) - 2)``: the update cap of one run on ``n`` states."""
    return CAP_PER_TRANSITION * memory_size(n)


def recorded_template(cfg, ns, cap_for, label: str = "") -> dict:
    """What a manifest records of a template run on sizes ``ns``: its settings but ``n`` and ``cap``, which each
    cell sets, and the cap each size ran with (``caps``, by ``n``), so that the record is what ran."""
    settings = {k: v for k, v in vars(cfg).items() if k not in ("n", "cap")}
    return {**settings, "caps": {str(n): int(cap_for(label, n)) for n in ns}}


def _one(task):
    label, cfg, seed = task
    res = run(cfg, seed)
    curve = res.curve[np.isfinite(res.curve)] if res.curve.size else res.curve
    return {
        "label": label,
        "n": cfg.n,
        "memory_size": memory_size(cfg.n),
        "seed": seed,
        "updates": res.updates,
        "censored": res.censored,
        "steps": res.steps,
        "cap": cfg.cap,
        **res.diagnostics,
    }, curve


def run_grid(
    templates: Mapping[str, RunConfig],
    ns: Iterable[int],
    seeds: Iterable[int],
    cap_for=None,
    jobs: int = 1,
    progress: bool = True,
    desc: str = "cliffwalk",
):
    """Run every template for every ``n`` and seed.

    ``cap_for(label, n)`` (optional) gives the update cap per cell.  Returns
    ``(rows, curves)``: one dict per run (label, n, memory_size, seed,
    updates, censored, steps, cap) and the recorded MSE curves keyed by
    ``(label, n, seed)`` (empty arrays when nothing is recorded).
    """
    tasks = []
    for n in ns:
        for label, tpl in templates.items():
            cfg = tpl.replace(n=n) if cap_for is None else tpl.replace(n=n, cap=int(cap_for(label, n)))
            tasks.extend((label, cfg, int(seed)) for seed in seeds)
    # largest memories first, so parallel workers finish together
    tasks.sort(key=lambda t: -t[1].n)
    from tqdm import tqdm

    bar = tqdm(total=len(tasks), desc=desc, disable=not progress, leave=False)
    rows, curves = [], {}
    try:
        if jobs > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for row, curve in pool.map(_one, tasks, chunksize=1):
                    rows.append(row)
                    curves[(row["label"], row["n"], row["seed"])] = curve
                    bar.update(1)
        else:
            for task in tasks:
                row, curve = _one(task)
                rows.append(row)
                curves[(row["label"], row["n"], row["seed"])] = curve
                bar.update(1)
    finally:
        bar.close()
    rows.sort(key=lambda r: (r["label"], r["n"], r["seed"]))
    return rows, curves


def default_jobs() -> int:
    """Worker processes: ``PRIORITYLAB_JOBS`` if set, else 1 (the machine is shared); ``ValueError`` naming a value
    that is not a positive integer."""
    text = os.environ.get("PRIORITYLAB_JOBS", "1")
    jobs = int(text) if text.strip().isdigit() else 0
    if jobs < 1:
        raise ValueError(f"PRIORITYLAB_JOBS must be a positive integer, got {text!r}")
    return jobs


def updates_or_cap(rows: list[dict]) -> np.ndarray:
    """Updates to converge of each run in ``rows``, a censored run counting as its cap."""
    return np.array([r["cap"] if r["censored"] else r["updates"] for r in rows], dtype=float)


def median_is_lower_bound(runs: int, censored: int) -> bool:
    """Whether the median of ``runs`` values, ``censored`` of them counted at their cap, is only a lower bound: a
    censored run needed more updates than its cap, above every run that converged under it, so the censored
    values are the largest, and the median is exact only while the upper of its middle values (the middle one,
    for an odd count) converged: fewer than ``runs - runs // 2`` censored.  (Half of 10 seeds censored: the
    median is the mean of a converged run and a cap, a lower bound though below the cap.)"""
    return censored >= runs - runs // 2


def summarise(rows: list[dict]) -> list[dict]:
    """Median, min and max updates per ``(label, n)``; censored runs count as their cap.  The replay
    diagnostics (:data:`prioritylab.cliffwalk.runner.DIAGNOSTICS`) are medians over the seeds."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["label"], r["n"]), []).append(r)
    out = []
    for (label, n), rs in sorted(cells.items()):
        vals = updates_or_cap(rs)
        cens = int(sum(r["censored"] for r in rs))
        med = float(np.median(vals))
        out.append({
            "label": label, "n": n, "memory_size": rs[0]["memory_size"], "seeds": len(rs),
            "median": med, "min": float(vals.min()), "max": float(vals.max()), "censored": cens,
            "median_is_lower_bound": median_is_lower_bound(len(rs), cens),
            **{k: float(np.median([r[k] for r in rs])) for k in DIAGNOSTICS if k in rs[0]},
        })  # fmt: skip
    return out


DIAGNOSTIC_COLUMNS = ("label", "n", *DIAGNOSTICS)
"""Columns of the replay-diagnostics table (medians over seeds; docs/diagnostics.md, "Testbed")."""


def lookup(summary: list[dict], label: str, n: int) -> dict:
    for row in summary:
        if row["label"] == label and row["n"] == n:
            return row
    raise KeyError(f"no summary row for label={label!r}, n={n}")


def fit_log_linear(x, y) -> tuple[float, float, float]:
    """Least-squares fit ``ln y = a + b x``; return ``(a, b, r2)``."""
    x = np.asarray(x, dtype=float)
    ly = np.log(np.asarray(y, dtype=float))
    if x.size < 2:
        raise ValueError(f"need at least two points to fit, got {x.size}")
    b, a = np.polyfit(x, ly, 1)
    resid = ly - (a + b * x)
    ss = float(np.sum((ly - ly.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss if ss > 0 else 0.0
    return float(a), float(b), r2


def format_table(rows: list[dict], columns: list[str]) -> str:
    """Plain-text table with right-aligned columns."""

    def fmt(v):
        if isinstance(v, float):
            if math.isnan(v):
                return "nan"
            if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-2):
                return f"{v:.3g}"
            return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells)
    return "\n".join(lines)


def median_curve(curves: list[np.ndarray]) -> np.ndarray:
    """Median over runs of MSE curves that stop at convergence.

    A run that stopped early is extended with its last recorded value (below
    the threshold), so the median says correctly whether half the runs have
    converged; values after a run's stop are not its true (lower) MSE.
    """
    if not curves:
        return np.empty(0)
    length = max(c.shape[0] for c in curves)
    stack = np.empty((len(curves), length))
    for k, c in enumerate(curves):
        stack[k, : c.shape[0]] = c
        stack[k, c.shape[0] :] = c[-1] if c.shape[0] else np.nan
    return np.median(stack, axis=0)


def script_parser(description: str, epilog: str | None = None):
    """The command line every Cliffwalk theory script shares (``epilog`` ends its ``--help``)."""
    from .._cli import Parser, positive_int

    p = Parser(description=description, epilog=epilog)
    p.add_argument("--out", default=None, help="output folder for CSV, PNG, manifest.json (default: results/<script>)")
    p.add_argument("--quick", action="store_true", help="small n and few seeds: a few seconds (used by the tests)")
    p.add_argument("--seeds", type=positive_int, default=None,
                   help=f"number of seeds per cell (default: {DEFAULT_SEEDS}, quick: 3)")  # fmt: skip
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="worker processes (default: $PRIORITYLAB_JOBS or 1)")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def verdict_table(checks: list[dict]) -> str:
    """Format verdict rows (claim, measured, criterion, reproduced) as a table with a ``verdict`` column.

    ``reproduced`` is True, False or None (a context row); the column reads
    ``reproduced``, ``not reproduced`` or ``n/a`` (:mod:`prioritylab.verdict`).
    """
    rows = [{**c, "verdict": verdict_word(c["reproduced"])} for c in checks]
    return format_table(rows, ["claim", "measured", "criterion", "verdict"])


def write_outputs(
    out_dir,
    name: str,
    rows: list[dict],
    summary: list[dict],
    config: dict,
    checks: list[dict],
    figures: Mapping[str, object],
    tables: Mapping[str, list[dict]] | None = None,
    caveat: str | None = None,
):
    """Write a grid's files into ``out_dir``.

    ``<name>_runs.csv`` and ``<name>_summary.csv``, then every extra CSV of
    ``tables`` and every figure of ``figures`` (both keyed by file name inside
    ``out_dir``), and last ``manifest.json`` with ``config``, the verdict rows
    and ``caveat``, the line printed under them (:func:`prioritylab.verdict.caveat`;
    None where the run was the default one).
    """
    from pathlib import Path

    from ..results import save_figure, write_csv, write_manifest

    out = Path(out_dir)
    write_csv(out / f"{name}_runs.csv", rows)
    write_csv(out / f"{name}_summary.csv", summary)
    for file_name, table in (tables or {}).items():
        write_csv(out / file_name, table)
    for file_name, fig in figures.items():
        save_figure(fig, out / file_name)
    write_manifest(out, config, extra={"verdict": with_verdict(checks), "caveat": caveat, "program": f"{name}.py"})


DEFAULT_SEEDS = 10
"""Seeds of a theory script by default (``--quick``: 3)."""


def script_seeds(args) -> list[int]:
    """Seeds of a theory script: ``--seeds`` if given, else :data:`DEFAULT_SEEDS` (``--quick``: 3)."""
    return list(range(args.seeds or (3 if args.quick else DEFAULT_SEEDS)))


SUMMARY_COLUMNS = ("label", "n", "memory_size", "median", "min", "max", "censored")
"""Columns of the summary table a theory script prints."""


def run_script(
    args,
    name: str,
    claim: str,
    templates: Mapping[str, RunConfig],
    ns: list[int],
    seeds: list[int],
    verdict: Callable[[list[dict], list[dict]], list[dict]],
    figures: Callable[[list[dict], dict], Mapping[str, object]],
    tables: Callable[[list[dict], dict], Mapping[str, list[dict]]] | None = None,
    columns: Sequence[str] = SUMMARY_COLUMNS,
    last_n_only: bool = False,
    footer: str = "files in {out}",
) -> int:
    """Run a theory script's grid, write its files and print its tables; return the exit code 0.

    ``args`` come from :func:`script_parser`.  The grid of ``templates`` over
    ``ns`` and ``seeds`` runs with every cap at :func:`default_cap`;
    ``verdict(summary, rows)`` gives the verdict rows (``rows``: one per run); ``figures(summary, curves)``
    and ``tables(summary, curves)`` map file names to the figures and extra CSV
    rows written next to the runs, the summary and ``manifest.json``
    (:func:`write_outputs`).  Printed: ``claim``, the summary table (its
    ``columns``; only the largest ``n`` with ``last_n_only``), the verdict
    table and ``footer`` (``{out}`` is the output folder).
    """
    from .._cli import check_output_dir, fail

    out = args.out or f"results/{name}"
    try:
        jobs = args.jobs or default_jobs()
        check_output_dir(out, program=f"{name}.py")
    except ValueError as err:
        fail(name, str(err))
    templates = {label: tpl.replace(diagnostics=True) for label, tpl in templates.items()}  # printed below
    t0 = time.perf_counter()
    rows, curves = run_grid(templates, ns, seeds, cap_for=lambda label, n: default_cap(n), jobs=jobs,
                            progress=not args.no_progress, desc=name)  # fmt: skip
    wall = time.perf_counter() - t0
    summary = summarise(rows)
    checks = verdict(summary, rows)
    config = {"ns": ns, "seeds": seeds,
              "templates": {k: recorded_template(v, ns, lambda label, n: default_cap(n)) for k, v in templates.items()}}
    config.update(cap_per_transition=CAP_PER_TRANSITION, quick=args.quick, jobs=jobs, wall_seconds=wall)
    extra = tables(summary, curves) if tables is not None else None
    below = [f"--seeds {len(seeds)}"] if args.seeds is not None and len(seeds) < DEFAULT_SEEDS else []
    line = caveat(args.quick, below, f"{name}.py")
    write_outputs(out, name, rows, summary, config, checks, figures(summary, curves), extra, caveat=line)
    print(claim)
    shown = [r for r in summary if r["n"] == ns[-1]] if last_n_only else summary
    print(format_table(shown, list(columns)))
    print()
    print(verdict_table(checks))
    if line is not None:
        print(line)
    print("\nreplay diagnostics (medians over seeds; docs/diagnostics.md):")
    print(format_table(shown, list(DIAGNOSTIC_COLUMNS)))
    print(f"\nwall time {wall:.1f} s for {len(rows)} runs; " + footer.format(out=out))
    return 0
