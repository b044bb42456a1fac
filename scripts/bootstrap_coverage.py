"""How often the report's 95 % intervals miss the truth with few runs a side.

    python scripts/bootstrap_coverage.py --runs 5 10 --shift 0 1 --studies 1000

Each simulated study draws ``--runs`` scores of a sampler X from a normal distribution with mean ``--shift``
(in units of the seed-to-seed standard deviation) and as many of a baseline Y from the standard normal, one
task, and computes the report's three intervals on them, through the report's own code
(``prioritylab.harness.report.stats``):

- rliable's stratified-bootstrap percentile interval of P(X > Y) (``improvement.md``), whose truth for two
  normals of unit spread is Phi(shift / sqrt(2));
- rliable's interval of X's IQM (``aggregates.md``), whose truth for a normal is its mean (the distribution
  is symmetric);
- the Welch t-interval of X's mean minus Y's (``differences.md``), whose truth is the shift.

It prints, per setting, the share of studies whose interval misses its truth (nominal 0.05) with its binomial
standard error, and for P the share whose interval excludes 1/2. The bootstraps take ``--reps`` resamples (the
report's are 50,000; on the same simulated studies, 1,000 and 50,000 resamples gave miss rates within 1.7 points
of each other, as ``docs/results/README.md`` reports). The report's batched bootstrap computes them all at once,
rliable's intervals to the bit (``stats.batched_bootstrap``). Normal scores are the kind a Welch interval
assumes; other shapes can be tried with ``--dist``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from prioritylab._cli import Parser
from prioritylab.harness.report import stats

DISTS = ("normal", "lognormal")
"""``normal``: as above; ``lognormal``: exp of a standard normal, standardised to unit spread (a right skew,
where the IQM's truth is the population's interquartile mean rather than its mean)."""


def draw(rng: np.random.Generator, n: int, dist: str) -> np.ndarray:
    """``n`` scores of unit spread and zero mean from ``dist``."""
    if dist == "normal":
        return rng.standard_normal(n)
    s = 1.0
    mean, sd = math.exp(s * s / 2), math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    return (np.exp(s * rng.standard_normal(n)) - mean) / sd


def truths(shift: float, dist: str, rng: np.random.Generator) -> tuple[float, float]:
    """P(X > Y) and X's interquartile mean for X = shift + a draw, Y a draw: exact for ``normal``, from 2M draws
    otherwise."""
    if dist == "normal":
        return float(sps.norm.cdf(shift / math.sqrt(2))), shift
    x, y = draw(rng, 2_000_000, dist) + shift, draw(rng, 2_000_000, dist)
    lo, hi = np.quantile(x, [0.25, 0.75])
    return float(np.mean(x > y)), float(x[(x >= lo) & (x <= hi)].mean())


def coverage(n: int, shift: float, studies: int, reps: int, dist: str, seed: int) -> dict:
    """Miss rates of the three intervals over ``studies`` simulated studies of ``n`` runs a side."""
    rng = np.random.default_rng([seed, n, round(shift * 1000)])
    p_true, iqm_true = truths(shift, dist, rng)
    miss = {"p": 0, "iqm": 0, "welch": 0}
    excludes_half = 0
    for _ in range(studies):
        x, y = draw(rng, n, dist) + shift, draw(rng, n, dist)
        _, ci = stats.interval_estimates({"x": (x[:, None], y[:, None])}, stats.probability_of_improvement, reps,
                                         stats.probability_of_improvement_batched)  # fmt: skip
        lo, hi = np.squeeze(ci["x"])
        miss["p"] += not lo <= p_true <= hi
        excludes_half += not lo <= 0.5 <= hi
        _, ci = stats.interval_estimates({"x": x[:, None]}, stats.iqm, reps, stats.iqm_batched)
        lo, hi = np.squeeze(ci["x"])
        miss["iqm"] += not lo <= iqm_true <= hi
        _, lo, hi = stats.welch_ci(x, y)
        miss["welch"] += not lo <= shift <= hi
    rates = {f"miss_{k}": v / studies for k, v in miss.items()}
    return {"runs": n, "shift": shift, "p_true": p_true, "studies": studies, **rates,
            "excludes_half": excludes_half / studies}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[5, 10], help="runs a side (default: 5 10)")
    parser.add_argument("--shift", type=float, nargs="+", default=[0.0, 1.0],
                        help="X's mean minus Y's, in standard deviations (default: 0 1)")  # fmt: skip
    parser.add_argument("--studies", type=int, default=1000, help="simulated studies per setting (default: 1000)")
    parser.add_argument("--reps", type=int, default=1000, help="bootstrap resamples per interval (default: 1000)")
    parser.add_argument("--dist", choices=DISTS, default="normal", help="the scores' distribution (default: normal)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulation (default: 0)")
    args = parser.parse_args(argv)
    for name, values in (("--runs", args.runs), ("--studies", [args.studies]), ("--reps", [args.reps])):
        if min(values) < 2:
            parser.error(f"{name} must be at least 2, got {min(values)}")
    bad = [s for s in args.shift if not (math.isfinite(s) and s >= 0)]
    if bad:  # the shift, in thousandths, also seeds its setting's stream, which takes no negative entry
        parser.error(f"--shift must be a finite number at least 0, got {bad[0]}")
    print(f"{args.dist} scores; {args.studies} studies a setting, {args.reps} resamples an interval; "
          "share of 95 % intervals missing their truth (nominal 0.05) +- its standard error")  # fmt: skip
    print("| runs a side | shift | true P(X > Y) | P interval misses | P interval excludes 1/2 | IQM interval misses "
          "| Welch interval misses |\n|---:|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    for n in args.runs:
        for shift in args.shift:
            r = coverage(n, shift, args.studies, args.reps, args.dist, args.seed)
            se = {k: math.sqrt(r[k] * (1 - r[k]) / args.studies) for k in ("miss_p", "miss_iqm", "miss_welch")}
            print(f"| {n} | {shift:g} | {r['p_true']:.3f} | {r['miss_p']:.3f} +- {se['miss_p']:.3f} "
                  f"| {r['excludes_half']:.3f} | {r['miss_iqm']:.3f} +- {se['miss_iqm']:.3f} "
                  f"| {r['miss_welch']:.3f} +- {se['miss_welch']:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
