"""When does a MinAtar run leave random play?  The criterion of ``deep/minatar_budget.py``, frame by frame.

    python scripts/learned_by.py RUN_FOLDER [RUN_FOLDER ...]

For each run folder of a MinAtar game (``manifest.json`` and ``evaluations.csv``, as ``prioritylab train``
writes them), the mean of each window of ``LEARNED_WINDOW`` consecutive evaluations is set against random
play's score (``prioritylab.scores.MINATAR_RANDOM``): the game is learned by frame F when the window ending
at F has a mean of at least ``LEARNED_RATIO`` times random play's and at least ``LEARNED_MARGIN`` points
above it.  The bounds are the specification's, fixed before its runs.  Prints, per run, the first such F
(or none), and the last window's mean against both bounds.  A partial run is marked as such.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from prioritylab._cli import Parser
from prioritylab.harness.report.runs import column, read_run
from prioritylab.harness.sweep import load_module
from prioritylab.scores import minatar_random, minatar_random_differs

SPEC = load_module(Path(__file__).resolve().parents[1] / "deep" / "minatar_budget.py")


def bound(random: float) -> float:
    """The score a window's mean must reach: the higher of the criterion's two bounds."""
    return max(SPEC.LEARNED_RATIO * random, random + SPEC.LEARNED_MARGIN)


def learned_by(steps: np.ndarray, returns: np.ndarray, random: float) -> tuple[int | None, float]:
    """The first evaluation step at which the window of ``LEARNED_WINDOW`` evaluations ending there reaches
    :func:`bound` (None if none does, or the run has fewer evaluations than a window), and the last window's
    mean (NaN when there is no full window)."""
    w = SPEC.LEARNED_WINDOW
    if returns.size < w:
        return None, float("nan")
    means = np.convolve(returns, np.ones(w) / w, mode="valid")  # means[i]: evaluations i .. i + w - 1
    hits = np.flatnonzero(means >= bound(random))
    return (int(steps[w - 1 + hits[0]]) if hits.size else None), float(means[-1])


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER",
                   help="a MinAtar run's folder as prioritylab train writes it (manifest.json, "
                        "evaluations.csv)")  # fmt: skip
    args = p.parse_args(argv)
    rows = []
    try:
        for folder in args.runs:
            run = read_run(folder)
            random = minatar_random(run["env"])
            if random is None:
                raise ValueError(f"{folder}: {run['env']} is not a MinAtar game with a random-play score (measured "
                                 "on the -v1 games)")  # fmt: skip
            if other := minatar_random_differs(run["config"]):
                raise ValueError(f"{folder}: it ran at {other}: random play's score was measured at other settings "
                                 "(prioritylab.scores.MINATAR_RANDOM_SETTINGS)")  # fmt: skip
            steps, returns = column(run["rows"], "step"), column(run["rows"], "return_mean")
            first, last = learned_by(steps, returns, random)
            rows.append((folder.name, random, run, steps, first, last))
    except ValueError as err:
        print(f"learned_by: error: {err}", file=sys.stderr)
        return 2
    w = SPEC.LEARNED_WINDOW
    print(f"| run | random play | bound | first frame learned (mean of {w} evaluations) | last {w} evaluations | "
          "learned at the end? |")
    print("|---|---:|---:|---|---:|---|")
    for name, random, run, steps, first, last in rows:
        end = int(steps[-1]) if steps.size else 0
        partial = "" if run["finished"] else f" (partial: {end} of {run['steps']})"
        when = f"{first:,}" if first is not None else f"not by {end:,}"
        at_end = "—" if last != last else "yes" if last >= bound(random) else "no"  # NaN: fewer than a window
        print(f"| {name}{partial} | {random:g} | {bound(random):.3f} | {when} | {last:.2f} | {at_end} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
