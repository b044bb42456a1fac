"""Evaluation curves of several labelled sets of runs in one figure, e.g. one setting's two values.

    python scripts/overlay_curves.py --out FIGURE.png [--title TEXT] LABEL=RUN_FOLDER_GLOB [...]

``prioritylab report`` compares the samplers of one agent and environment run with one set of
settings, and marks groups whose settings differ as not comparable.  This draws, for each
``LABEL=GLOB`` (a glob of run folders, e.g. ``"lap, eps 0.01=docs/results/minatar_study/runs/
dqn_MinAtar-Breakout-v1_lap_s*"``), the mean over its finished runs of the evaluation return,
smoothed and aligned on the steps every run logged as the report does, with its 95 % t-interval
band where the set has at least 5 runs (the report's tables give no interval from fewer).  Folders
without ``finished.json`` are left out and named; a corrupt one is an error, and so is a set whose runs are
not seeds of one setting (another agent, environment or sampler, a seed twice, another recorded setting).
Sets whose labels start alike (up to the first comma, e.g. ``"lap, eps 0.01"`` and ``"lap, eps
1e-5"``) share a colour; ``--dashed TEXT`` draws the sets whose label contains TEXT dashed.

``--column NAME`` draws another column of ``evaluations.csv`` than the return (for example SAC's
``temperature`` or a replay diagnostic such as ``top1_share``); ``--log`` draws it on a log scale, the mean
and band then taken over the logarithms (a geometric mean), and ``--each`` adds every run's own curve, thin.
Evaluations before the first at which every run of a set has a value are left out (a replay diagnostic is
empty before the first update); a column a run did not log, a value that is not a number, one missing after
that, or a value at or below 0 with ``--log`` is an error naming the run.
"""

from __future__ import annotations

import glob
import sys
from pathlib import Path

import numpy as np

from prioritylab._cli import Parser, check_output_file, missing_dirs, remove_empty_dirs
from prioritylab.harness.report.plots import SMOOTH, smooth
from prioritylab.harness.report.runs import aligned, differing, read_run
from prioritylab.harness.report.stats import MIN_CI_RUNS, mean_ci
from prioritylab.provenance import unread_by
from prioritylab.results import atomic_write


def parse_sets(specs: list[str]) -> list[tuple[str, list[Path]]]:
    """``LABEL=GLOB`` strings -> (label, run folders); ``ValueError`` naming a bad or empty one."""
    sets = []
    for spec in specs:
        label, sep, pattern = spec.partition("=")
        if not sep or not label or not pattern:
            raise ValueError(f"{spec!r} is not LABEL=RUN_FOLDER_GLOB")
        folders = sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_dir())
        if not folders:
            raise ValueError(f"{pattern!r} ({label}) matches no folder")
        sets.append((label, folders))
    return sets


def check_one_setting(label: str, runs: list[dict]) -> None:
    """A set's runs must be seeds of one setting, as a report's group is: one agent, environment and sampler,
    each seed once, and every recorded setting equal but the seed (and those the sampler does not read);
    ``ValueError`` naming what differs."""
    kinds = sorted({f"{r['agent']} {r['env']} {r['sampler']}" for r in runs})
    if len(kinds) > 1:
        raise ValueError(f"{label}: its runs are of more than one agent, environment and sampler ({'; '.join(kinds)})")
    seen: dict = {}
    for r in runs:
        if r["seed"] in seen:
            raise ValueError(f"{label}: seed {r['seed']} is there twice ({seen[r['seed']]} and {r['folder']})")
        seen[r["seed"]] = r["folder"]
    unread = unread_by(runs[0]["sampler"])
    within = differing([r["config"] for r in runs], skip=lambda key: key.startswith(unread))
    if within:
        raise ValueError(f"{label}: its runs differ in " + "; ".join(f"{k} ({', '.join(map(str, v))})"
                                                                  for k, v in within.items()))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("sets", nargs="+", metavar="LABEL=GLOB", help="a label and a glob of run folders")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    p.add_argument("--title", default="", help="the figure's title")
    p.add_argument("--dashed", default=None, metavar="TEXT", help="draw the sets whose label contains TEXT dashed")
    p.add_argument("--column", default="return_mean", help="the column of evaluations.csv to draw")
    p.add_argument("--log", action="store_true", help="a log scale (mean and band over the logarithms)")
    p.add_argument("--each", action="store_true", help="draw each run's curve too")
    args = p.parse_args(argv)
    made = missing_dirs(args.out.parent)  # what the check of --out makes, taken back if the command stops short
    try:
        check_output_file(args.out, "--out")  # before the runs are read and the figure drawn
        sets = parse_sets(args.sets)
        loaded = []
        for label, folders in sets:
            runs = [read_run(f) for f in folders]
            for r in runs:
                if not r["finished"]:
                    print(f"left out (no finished.json): {r['folder']}", file=sys.stderr)
            runs = [r for r in runs if r["finished"]]
            if not runs:
                raise ValueError(f"{label}: no finished run")
            check_one_setting(label, runs)
            for r in runs:
                if args.column not in r["rows"][0]:  # (read_run has refused a cell that is not a number)
                    raise ValueError(f"{r['folder']}: its evaluations.csv has no column {args.column!r}")
            steps, values = aligned(runs, args.column)
            start = int(np.argmax(np.isfinite(values).all(axis=0)))  # a diagnostic is NaN before the first update
            steps, values = steps[start:], values[:, start:]
            for r, v in zip(runs, values, strict=True):
                if not np.isfinite(v).all():
                    raise ValueError(f"{r['folder']}: its {args.column} is not a finite number at every evaluation "
                                     "after the first at which every run of its set has one")  # fmt: skip
                if args.log and (v <= 0).any():
                    low = float(v.min())
                    raise ValueError(f"{r['folder']}: {args.column} reaches {low!r}, which a log scale cannot show")
            loaded.append((label, runs, steps, np.log10(values) if args.log else values))
    except ValueError as err:
        remove_empty_dirs(made)
        print(f"overlay_curves: error: {err}", file=sys.stderr)
        return 2
    try:
        draw(args, loaded)
    except BaseException:
        remove_empty_dirs(made)
        raise
    print(f"wrote {args.out}")
    return 0


def draw(args, loaded: list) -> None:
    """The figure of the ``loaded`` sets, written to ``args.out`` (:func:`save_figure`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colours: dict[str, str] = {}
    shown = (lambda x: 10.0**x) if args.log else (lambda x: x)
    for label, runs, steps, values in loaded:
        colour = colours.setdefault(label.split(",")[0].strip(), f"C{len(colours)}")
        style = "--" if args.dashed is not None and args.dashed in label else "-"
        values = np.stack([smooth(v) for v in values])
        mean, half = mean_ci(values)
        ax.plot(steps, shown(mean), color=colour, ls=style, lw=1.8,
                label=f"{label} ({len(runs)} seed{'s' * (len(runs) > 1)})")  # fmt: skip
        if len(runs) >= MIN_CI_RUNS:  # the report's tables give no interval from fewer runs either
            ax.fill_between(steps, shown(mean - half), shown(mean + half), color=colour, alpha=0.12, lw=0)
        if args.each:
            for v in values:
                ax.plot(steps, shown(v), color=colour, ls=style, lw=0.6, alpha=0.4)
    if args.log:
        ax.set_yscale("log")
    ax.set_xlabel("environment steps")
    name = "return" if args.column == "return_mean" else args.column
    ax.set_ylabel(f"{name} (smoothed over {SMOOTH} evals)")
    ax.set_title(args.title)
    ax.legend(fontsize=8)
    note = f"Line: mean over seeds; band: 95 % t-interval of the mean, for sets of {MIN_CI_RUNS} runs or more"
    note += " (both over the logarithms: a geometric mean)" if args.log else ""
    note += "; thin: each run." if args.each else "."
    fig.text(0.01, -0.02, note, fontsize=7, ha="left", va="top")
    try:
        save_figure(fig, args.out)
    finally:
        plt.close(fig)


def save_figure(fig, path: Path) -> None:
    """``fig`` as a PNG at ``path``, through a temporary file in its folder that no failure leaves behind
    (:func:`prioritylab.results.atomic_write`)."""
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=120, bbox_inches="tight"), binary=True)


if __name__ == "__main__":
    sys.exit(main())
