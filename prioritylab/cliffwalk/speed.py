"""Speed of the jitted Blind Cliffwalk learners against the plain NumPy/Python reference.

Measures Q-updates per second of one learner at ``n = 16`` (131,070
transitions) with uniform and with proportional (sum tree) replay, for the
jitted kernel (:func:`prioritylab.cliffwalk.learners.run_kernel`, as called by
:func:`prioritylab.cliffwalk.runner.run`) and for the reference loop
(:mod:`prioritylab.cliffwalk.reference`), in one process, and checks that both
reach bit-identical parameters after the reference's updates.

Setup (building the memory, the trees, compiling) is prepared before the clock
starts and is never timed: only the kernel call (which also fills the initial priorities,
one pass over the memory) and the reference's update loop are.  One *repeat* runs fresh
runs of a fixed number of updates until the timed seconds reach
``min_seconds``; its rate is the updates done over those seconds, so it is
always positive and each timing is long against the clock's resolution.  The
report gives the median rate over ``repeats`` repeats and their minimum and
maximum.  The jitted kernel is timed as the theory scripts use it, with the replay
diagnostics on (``RunConfig(diagnostics=True)``), and again with them off (``jit_off_*``, the
default); repeats of the two alternate, so both see the same machine load.

``--per-scheme`` instead times the jitted kernel alone for every replay scheme and reports
nanoseconds per update, with the same repeats.

Run: ``python -m prioritylab.cliffwalk.speed [--per-scheme] [--out DIR]`` or
``prioritylab cliffwalk --benchmark``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from .._cli import Parser
from . import learners as L
from .reference import Reference
from .runner import SCHEMES, RunConfig, kernel_args, run

CASES = (("uniform", {}), ("per", {"alpha": 0.7}))
COLUMNS = [
    "n", "learner", "scheme", "jit_updates_per_s", "jit_min", "jit_max", "jit_off_updates_per_s",
    "reference_updates_per_s", "reference_min", "reference_max", "speedup", "identical_after_reference_updates",
]  # fmt: skip
SCHEME_COLUMNS = ["n", "learner", "scheme", "ns_per_update", "ns_min", "ns_max"]


def _jit_job(cfg: RunConfig, seed) -> Callable[[], None]:
    """Everything :func:`run` does before its kernel call; the returned closure is the kernel call."""
    args = kernel_args(cfg, seed)
    return lambda: L.run_kernel(*args)


def _reference_job(cfg: RunConfig, seed, updates: int) -> Callable[[], None]:
    ref = Reference(cfg, seed)

    def job():
        for _ in range(updates):
            ref.step()

    return job


def repeated_rates(prepare: Callable[[], Callable[[], None]], updates: int, repeats: int, min_seconds: float):
    """Updates per second of ``repeats`` repeats; a repeat times fresh jobs from ``prepare``
    (each doing ``updates`` updates, setup untimed) until ``min_seconds`` of timed work."""
    rates = []
    for _ in range(repeats):
        done, seconds = 0, 0.0
        while True:  # at least one job, so a rate is never 0 / 0
            job = prepare()
            t0 = time.perf_counter()
            job()
            seconds += time.perf_counter() - t0
            done += updates
            if seconds >= min_seconds:
                break
        rates.append(done / seconds)
    return np.array(rates)


def benchmark(
    n: int = 16,
    learner: str = "tabular",
    jit_updates: int = 2_000_000,
    ref_updates: int = 20_000,
    seed=0,
    repeats: int = 5,
    min_seconds: float = 0.5,
):
    """One row per scheme: median, min and max jitted and reference Q-updates/s, the ratio of the
    medians, and whether both reach the same parameters after ``ref_updates`` updates."""
    rows = []
    for scheme, extra in CASES:
        cfg = RunConfig(n=n, learner=learner, scheme=scheme, stop_at_convergence=False, **extra)
        jit_cfg = cfg.replace(cap=jit_updates, diagnostics=True)
        off_cfg = jit_cfg.replace(diagnostics=False)
        _jit_job(jit_cfg, seed)()  # compile or load the cache
        jit, off = [], []
        for _ in range(repeats):  # alternate on and off, one repeat each
            jit += list(repeated_rates(lambda c=jit_cfg: _jit_job(c, seed), jit_updates, 1, min_seconds))
            off += list(repeated_rates(lambda c=off_cfg: _jit_job(c, seed), jit_updates, 1, min_seconds))
        jit, off = np.array(jit), np.array(off)
        ref = repeated_rates(lambda c=cfg: _reference_job(c, seed, ref_updates), ref_updates, repeats, min_seconds)
        first = Reference(cfg, seed)
        for _ in range(ref_updates):
            first.step()
        same = bool(np.array_equal(run(cfg.replace(cap=ref_updates), seed).theta, first.theta))
        rows.append({
            "n": n, "learner": learner, "scheme": scheme, "alpha": extra.get("alpha", ""),
            "jit_updates_per_s": float(np.median(jit)), "jit_min": float(jit.min()), "jit_max": float(jit.max()),
            "jit_off_updates_per_s": float(np.median(off)), "jit_off_min": float(off.min()),
            "jit_off_max": float(off.max()), "reference_updates_per_s": float(np.median(ref)),
            "reference_min": float(ref.min()),
            "reference_max": float(ref.max()), "speedup": float(np.median(jit) / np.median(ref)),
            "identical_after_reference_updates": same, "reference_updates": ref_updates,
            "jit_updates": jit_updates, "repeats": repeats, "min_seconds": min_seconds,
        })  # fmt: skip
    return rows


def scheme_costs(
    n: int = 16, learner: str = "tabular", updates: int = 1_000_000, seed=0, repeats: int = 5,
    min_seconds: float = 0.5,
):  # fmt: skip
    """Nanoseconds per jitted update of every replay scheme (default settings, alpha = 0.7):
    median, min and max over repeats (the jitted kernel only, as in :func:`benchmark`)."""
    rows = []
    for scheme in SCHEMES:
        cfg = RunConfig(n=n, learner=learner, scheme=scheme, stop_at_convergence=False, cap=updates)
        _jit_job(cfg, seed)()
        rates = repeated_rates(lambda c=cfg: _jit_job(c, seed), updates, repeats, min_seconds)
        ns = 1e9 / rates
        rows.append({"n": n, "learner": learner, "scheme": scheme, "ns_per_update": float(np.median(ns)),
                     "ns_min": float(ns.min()), "ns_max": float(ns.max()), "updates": updates, "repeats": repeats})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16, help="number of states")
    p.add_argument("--learner", choices=("tabular", "linear"), default="tabular", help="learner")
    p.add_argument("--jit-updates", type=int, default=2_000_000, help="updates per timed run of the jitted kernel")
    p.add_argument("--ref-updates", type=int, default=20_000, help="updates per timed run of the reference loop")
    p.add_argument("--repeats", type=int, default=5, help="repeats (median, min and max are reported)")
    p.add_argument("--min-seconds", type=float, default=0.5, help="timed seconds per repeat, at least")
    p.add_argument("--per-scheme", action="store_true", help="instead: ns per jitted update of every scheme")
    p.add_argument("--scheme-updates", type=int, default=1_000_000, help="updates per timed run with --per-scheme")
    p.add_argument("--out", default=None, help="folder for speed.csv (schemes.csv) and manifest.json")
    args = p.parse_args(argv)
    from .experiments import format_table

    if args.per_scheme:
        rows = scheme_costs(args.n, args.learner, args.scheme_updates, 0, args.repeats, args.min_seconds)
        print(format_table(rows, SCHEME_COLUMNS))
    else:
        rows = benchmark(args.n, args.learner, args.jit_updates, args.ref_updates, 0, args.repeats, args.min_seconds)
        print(format_table(rows, COLUMNS))
    if args.out:
        from pathlib import Path

        from ..results import write_csv, write_manifest

        write_csv(Path(args.out) / ("schemes.csv" if args.per_scheme else "speed.csv"), rows)
        write_manifest(args.out, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
