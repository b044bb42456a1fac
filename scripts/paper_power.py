"""How likely a study with N seeds a side is to resolve a difference of the size a paper reports.

    python scripts/paper_power.py --trials 10 --seeds 5 --baseline td3 \\
        td3=13570.9,794.2 per=13927.8,683.9 lap=14836.5,532.2 pal=15012.2,885.4

Each ``NAME=MEAN,HALF`` is a paper's mean score and the half-width of its 95 % interval over ``--trials``
runs (LAP/PAL Table 1 gives HalfCheetah's as above).  One run's standard deviation is read back from the
half-width in the two ways papers compute it, since they seldom say which: as a t interval,
``HALF * sqrt(trials) / t(0.975, trials - 1)``, and as a normal one, ``HALF * sqrt(trials) / 1.96``.

For each sampler against ``--baseline`` (and each ``--pair A:B``), it prints the paper's difference, the
expected half-width of a 95 % Welch interval with ``--seeds`` runs a side (both as % of B's mean), the power
(the chance that this interval excludes 0 if the paper's means and spreads are the truth, with normal
seed-to-seed noise), and the seeds a side that give 80 % power.  The power is that of the Welch test itself,
simulated (``STUDIES`` studies, seeded, about +-0.003); the noncentral t with Welch's degrees of freedom at the
true spreads, the usual closed form, is slightly optimistic with few seeds (0.02 at 5 seeds a side), and only
starts the search for the seeds needed.  It is the check to make before spending compute on a comparison: a
study whose power is 0.3 will most likely end "inconclusive", whatever the truth.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy import stats

from prioritylab._cli import Parser
from prioritylab.harness.report.stats import welch_df

TARGET = 0.8
"""The power for which the seeds needed are given."""
STUDIES = 20_000
"""Simulated studies per power."""


def run_sd(half: float, trials: int, reading: str) -> float:
    """One run's standard deviation from a 95 % half-width over ``trials`` runs (``reading``: ``t`` or ``z``)."""
    quantile = stats.t.ppf(0.975, trials - 1) if reading == "t" else stats.norm.ppf(0.975)
    return half * math.sqrt(trials) / quantile


def approximate_power(diff: float, sd_a: float, sd_b: float, n: int) -> tuple[float, float]:
    """The closed form: power of the two-sided 95 % Welch comparison of ``n`` runs a side as a noncentral t with
    Welch's degrees of freedom at the true spreads ``sd_a``, ``sd_b`` (exact for Student's t when they are equal);
    and the interval's expected half-width."""
    va, vb = sd_a**2 / n, sd_b**2 / n
    se = math.sqrt(va + vb)
    df = welch_df(va, vb, n, n)
    crit = stats.t.ppf(0.975, df)
    nc = diff / se
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)), float(crit * se)


def welch_power(diff: float, sd_a: float, sd_b: float, n: int, studies: int = STUDIES, seed: int = 0) -> float:
    """The share of ``studies`` simulated studies (``n`` normal runs a side, means ``diff`` apart) whose 95 %
    Welch interval excludes 0 (scipy's Welch test at p < 0.05: the same t and degrees of freedom)."""
    rng = np.random.default_rng(seed)
    rejected = 0
    for start in range(0, studies, 2000):  # in blocks: 2 x 2000 x n draws at a time
        size = min(2000, studies - start)
        a = rng.normal(diff, sd_a, size=(size, n))
        b = rng.normal(0.0, sd_b, size=(size, n))
        rejected += int(np.sum(stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05))
    return rejected / studies


def seeds_for(diff: float, sd_a: float, sd_b: float, power: float = TARGET, most: int = 1000) -> int | None:
    """The fewest runs a side whose simulated Welch power is at least ``power`` (None beyond ``most``): the search
    starts where the closed form reaches it and steps to the crossing."""
    start = next((n for n in range(2, most + 1) if approximate_power(diff, sd_a, sd_b, n)[0] >= power), None)
    if start is None:
        return None
    n = start
    while n <= most and welch_power(diff, sd_a, sd_b, n) < power:
        n += 1
    while n > 2 and welch_power(diff, sd_a, sd_b, n - 1) >= power:
        n -= 1
    return n if n <= most else None


def parse_scores(texts: list[str]) -> dict[str, tuple[float, float]]:
    """``NAME=MEAN,HALF`` strings -> {name: (mean, half)}; ``ValueError`` naming a bad one."""
    scores = {}
    for text in texts:
        name, sep, values = text.partition("=")
        parts = values.split(",")
        try:
            mean, half = (float(x) for x in parts) if sep and name and len(parts) == 2 else (math.nan, math.nan)
        except ValueError:
            mean, half = math.nan, math.nan
        if not (math.isfinite(mean) and math.isfinite(half) and half > 0):
            raise ValueError(f"{text!r} is not NAME=MEAN,HALF with a positive half-width")
        if name in scores:
            raise ValueError(f"{name} is given twice")
        scores[name] = (mean, half)
    return scores


def rows(scores: dict, trials: int, seeds: int, pairs: list[tuple[str, str]]) -> list[dict]:
    out = []
    for a, b in pairs:
        (ma, ha), (mb, hb) = scores[a], scores[b]
        for reading in ("t", "z"):
            sd_a, sd_b = run_sd(ha, trials, reading), run_sd(hb, trials, reading)
            half = approximate_power(ma - mb, sd_a, sd_b, seeds)[1]
            power = welch_power(ma - mb, sd_a, sd_b, seeds)
            out.append({"pair": f"{a} - {b}", "reading": reading, "difference_pct": 100 * (ma - mb) / abs(mb),
                        "half_width_pct": 100 * half / abs(mb), "power": power,
                        "seeds_for_80": seeds_for(ma - mb, sd_a, sd_b)})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("scores", nargs="+", metavar="NAME=MEAN,HALF", help="a paper's mean and 95 %% half-width")
    p.add_argument("--trials", type=int, required=True, help="the runs the paper's intervals are over")
    p.add_argument("--seeds", type=int, required=True, help="the runs a side of the planned study")
    p.add_argument("--baseline", help="compare every other NAME with this one")
    p.add_argument("--pair", action="append", default=[], metavar="A:B", help="also compare A with B")
    args = p.parse_args(argv)
    try:
        scores = parse_scores(args.scores)
        if args.trials < 2 or args.seeds < 2:
            raise ValueError(f"--trials and --seeds need at least 2 runs (got {args.trials} and {args.seeds})")
        pairs = [(a, args.baseline) for a in scores if a != args.baseline] if args.baseline else []
        pairs += [tuple(x.split(":", 1)) for x in args.pair]
        for pair in pairs:
            unknown = [name for name in pair if name not in scores] if len(pair) == 2 else [":".join(pair)]
            if unknown:
                raise ValueError(f"{', '.join(unknown)}: not a NAME given (names: {', '.join(scores)})")
            if scores[pair[1]][0] == 0:
                raise ValueError(f"{pair[1]}'s mean is 0: a difference cannot be given as a share of it")
        if not pairs:
            raise ValueError("nothing to compare: give --baseline or --pair")
    except ValueError as err:
        print(f"paper_power: error: {err}", file=sys.stderr)
        return 2
    print(f"| A - B | sd read as | difference (% of B) | 95 % Welch half-width, {args.seeds} seeds a side | power | "
          f"seeds a side for {TARGET:.0%} power |")
    print("|---|---|---|---|---|---|")
    for r in rows(scores, args.trials, args.seeds, pairs):
        needed = r["seeds_for_80"] if r["seeds_for_80"] is not None else "> 1000"
        print(f"| {r['pair']} | {r['reading']} interval | {r['difference_pct']:+.1f} % | "
              f"±{r['half_width_pct']:.1f} % | {r['power']:.2f} | {needed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
