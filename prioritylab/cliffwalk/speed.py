"""Speed of the jitted Blind Cliffwalk learners against the plain NumPy/Python reference.

Measures Q-updates per second of one learner at ``n = 16`` (131,070
transitions) with uniform and with proportional (sum tree) replay, for the
jitted kernel (:func:`prioritylab.cliffwalk.runner.run`) and for the reference
loop (:mod:`prioritylab.cliffwalk.reference`), in one process, and checks
that both reach bit-identical parameters after the reference's updates.
Setup (building the memory, the trees, compiling) is not timed: the jitted
rate is ``(K - k) / (t_K - t_k)`` from two runs of ``K`` and ``k`` updates,
the reference rate times its update loop only.

Run: ``python -m prioritylab.cliffwalk.speed [--out DIR]`` or
``prioritylab cliffwalk --benchmark``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from .reference import Reference
from .runner import RunConfig, run

CASES = (("uniform", {}), ("per", {"alpha": 0.7}))


def _jit_rate(cfg: RunConfig, seed: int, big: int, small: int) -> float:
    run(cfg.replace(cap=small), seed)  # compile / load the cache, warm the memory
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        run(cfg.replace(cap=small), seed)
        t1 = time.perf_counter()
        run(cfg.replace(cap=big), seed)
        t2 = time.perf_counter()
        best = min(best, (t2 - t1) - (t1 - t0))
    return (big - small) / best


def _reference_rate(cfg: RunConfig, seed: int, updates: int) -> tuple[float, np.ndarray]:
    ref = Reference(cfg, seed)
    t0 = time.perf_counter()
    for _ in range(updates):
        ref.step()
    return updates / (time.perf_counter() - t0), ref.theta


def benchmark(n: int = 16, learner: str = "tabular", jit_updates: int = 2_000_000, ref_updates: int = 20_000, seed=0):
    """One row per scheme: jitted and reference Q-updates/s, their ratio, and the identity check."""
    rows = []
    for scheme, extra in CASES:
        cfg = RunConfig(n=n, learner=learner, scheme=scheme, stop_at_convergence=False, **extra)
        jit = _jit_rate(cfg, seed, jit_updates, jit_updates // 20)
        ref, theta_ref = _reference_rate(cfg, seed, ref_updates)
        same = bool(np.array_equal(run(cfg.replace(cap=ref_updates), seed).theta, theta_ref))
        rows.append({
            "n": n, "learner": learner, "scheme": scheme, "alpha": extra.get("alpha", ""),
            "jit_updates_per_s": jit, "reference_updates_per_s": ref, "speedup": jit / ref,
            "identical_after_reference_updates": same, "reference_updates": ref_updates,
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16, help="number of states")
    p.add_argument("--learner", choices=("tabular", "linear"), default="tabular", help="learner")
    p.add_argument("--jit-updates", type=int, default=2_000_000, help="updates timed for the jitted kernel")
    p.add_argument("--ref-updates", type=int, default=20_000, help="updates timed for the reference loop")
    p.add_argument("--out", default=None, help="folder for speed.csv and manifest.json")
    args = p.parse_args(argv)
    from .experiments import format_table

    rows = benchmark(args.n, args.learner, args.jit_updates, args.ref_updates)
    print(format_table(rows, ["n", "learner", "scheme", "jit_updates_per_s", "reference_updates_per_s", "speedup",
                              "identical_after_reference_updates"]))  # fmt: skip
    if args.out:
        from pathlib import Path

        from ..results import write_csv, write_manifest

        write_csv(Path(args.out) / "speed.csv", rows)
        write_manifest(args.out, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
