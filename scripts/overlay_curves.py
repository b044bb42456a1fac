"""Evaluation curves of several labelled sets of runs in one figure, e.g. one setting's two values.

    python scripts/overlay_curves.py --out FIGURE.png [--title TEXT] LABEL=RUN_FOLDER_GLOB [...]

``prioritylab report`` compares the samplers of one agent and environment run with one set of
settings, and marks groups whose settings differ as not comparable.  This draws, for each
``LABEL=GLOB`` (a glob of run folders, e.g. ``"lap, eps 0.01=docs/results/minatar_study/runs/
dqn_MinAtar-Breakout-v1_lap_s*"``), the mean over its finished runs of the evaluation return,
smoothed and aligned on the steps every run logged as the report does, with its 95 % t-interval
band.  Folders without ``finished.json`` are left out and named; a corrupt one is an error.
Sets whose labels start alike (up to the first comma, e.g. ``"lap, eps 0.01"`` and ``"lap, eps
1e-5"``) share a colour; ``--dashed TEXT`` draws the sets whose label contains TEXT dashed.
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path

import numpy as np

from prioritylab.harness.report.plots import SMOOTH, smooth
from prioritylab.harness.report.runs import aligned, read_run
from prioritylab.harness.report.stats import mean_ci
from prioritylab.results import save_figure


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sets", nargs="+", metavar="LABEL=GLOB", help="a label and a glob of run folders")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    p.add_argument("--title", default="", help="the figure's title")
    p.add_argument("--dashed", default=None, metavar="TEXT", help="draw the sets whose label contains TEXT dashed")
    args = p.parse_args(argv)
    try:
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
            loaded.append((label, runs))
    except ValueError as err:
        print(f"overlay_curves: error: {err}", file=sys.stderr)
        return 2

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colours: dict[str, str] = {}
    for label, runs in loaded:
        colour = colours.setdefault(label.split(",")[0].strip(), f"C{len(colours)}")
        style = "--" if args.dashed is not None and args.dashed in label else "-"
        steps, values = aligned(runs, "return_mean")
        values = np.stack([smooth(v) for v in values])
        mean, half = mean_ci(values)
        ax.plot(steps, mean, color=colour, ls=style, lw=1.8,
                label=f"{label} ({len(runs)} seed{'s' * (len(runs) > 1)})")  # fmt: skip
        if len(runs) > 1:
            ax.fill_between(steps, mean - half, mean + half, color=colour, alpha=0.12, lw=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"return (smoothed over {SMOOTH} evals)")
    ax.set_title(args.title)
    ax.legend(fontsize=8)
    fig.text(0.01, -0.02, "Line: mean over seeds; band: 95 % t-interval of the mean.", fontsize=7, ha="left",
             va="top")  # fmt: skip
    save_figure(fig, args.out)
    plt.close(fig)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
