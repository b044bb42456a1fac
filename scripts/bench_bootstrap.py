"""The report's batched bootstrap against rliable's own, side by side in one run.

    python scripts/bench_bootstrap.py [--reps 50000] [--runs 5] [--tasks 3]

Times the 95 % stratified-bootstrap intervals the report computes (``aggregates.md``: IQM, mean and median;
``improvement.md``: P(X > Y)) on random runs x tasks matrices, first through rliable's ``get_interval_estimates``,
one replication at a time, then through the report's ``stats.interval_estimates``, every replication at once,
and prints both times, their ratio and whether the two intervals are the same bytes.
"""

from __future__ import annotations

import time

import numpy as np

from prioritylab._cli import Parser, positive_int
from prioritylab.harness.report import stats


def compare(reps: int, runs: int, tasks: int) -> list[dict]:
    """For each statistic: rliable's seconds, the batched seconds and whether their intervals are byte-equal."""
    from rliable import library as rly

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(runs, tasks)), rng.normal(size=(runs, tasks))
    rows = []
    for name, scores, func, batched in (
            ("IQM, mean and median", {"k": x}, stats.aggregate_values, stats.aggregates_batched),
            ("P(X > Y)", {"k": (x, y)}, stats.probability_of_improvement, stats.probability_of_improvement_batched)):
        start = time.perf_counter()
        theirs = stats.on_own_streams(scores, lambda one, f=func: rly.get_interval_estimates(
            one, f, reps=reps, random_state=np.random.RandomState(0)))
        middle = time.perf_counter()
        ours = stats.interval_estimates(scores, func, reps, batched)
        end = time.perf_counter()
        same = all(np.asarray(a["k"]).tobytes() == np.asarray(b["k"]).tobytes()
                   for a, b in zip(ours, theirs, strict=True))
        rows.append({"statistic": name, "rliable_s": middle - start, "batched_s": end - middle, "same": same})
    return rows  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=positive_int, default=stats.BOOTSTRAP_REPS, help="replications (the report's)")
    parser.add_argument("--runs", type=positive_int, default=5, help="runs a side (default: 5)")
    parser.add_argument("--tasks", type=positive_int, default=3, help="tasks (default: 3)")
    args = parser.parse_args(argv)
    print(f"{args.runs} runs x {args.tasks} tasks, {args.reps} replications")
    print("| statistic | rliable | batched | ratio | same bytes |\n|---|---:|---:|---:|---|")
    for r in compare(args.reps, args.runs, args.tasks):
        print(f"| {r['statistic']} | {r['rliable_s']:.2f} s | {r['batched_s']:.3f} s "
              f"| {r['rliable_s'] / r['batched_s']:.0f}x | {r['same']} |")  # fmt: skip


if __name__ == "__main__":
    main()
