"""LAP/PAL (Fujimoto, Meger & Precup, 2020): numerical checks of the loss <-> sampling equivalence.

Checks Theorems 1-3, Corollaries 1-3 and Observations 1-4 exactly on random
data sets of TD errors, by Monte Carlo with prioritylab's PER and LAP samplers,
on the parameters of a small torch Q-network, and on the Blind Cliffwalk
(expected updates at every step; a stochastic final reward whose fixed points
show PER's outlier bias).  Prints a verdict table (``reproduced`` / ``not
reproduced`` per claim) and writes ``checks.csv`` (the same rows), ``monte_carlo.csv``,
``chain.csv``, ``chain_summary.json``, ``chain_bias.png``, ``variance.csv`` and
``manifest.json`` (with the verdict rows) into ``--out``.  Exits 0 whatever the
verdicts; non-zero only on errors.

    python theory/lap_equivalence.py --out results/lap_equivalence [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from prioritylab import equivalence as eq
from prioritylab._cli import Parser, check_output_dir, fail, nonnegative_int, positive_int
from prioritylab.results import save_figure, write_csv, write_json, write_manifest
from prioritylab.verdict import caveat, verdict_word

SPECIAL = (0.0, 1.0, -1.0, 0.5, 2.0)  # multiplied by kappa: zero, both boundaries, both sides
NONZERO = 0.25  # times kappa: what a zero TD error becomes in a data set checked with eps = 0


def exact_checks(rng: np.random.Generator, n_cases: int) -> list[eq.Check]:
    """``n_cases`` random data sets per kappa in {1, 0.01}, sizes 1...2000, random alpha, beta, tau, eps."""
    checks = []
    sizes = np.array([1, 2, 3, 10, 100, 500, 2000])
    for kappa in tqdm((1.0, 0.01), desc="exact checks", leave=False):
        for _ in range(n_cases):
            n = int(rng.choice(sizes))
            head = [kappa * v for v in rng.permutation(SPECIAL)]
            delta = eq.random_td_errors(rng, n, kappa, zero_frac=float(rng.choice([0.0, 0.05, 0.3])), head=head)
            alpha, beta, tau = float(rng.uniform(0.01, 1.0)), float(rng.uniform(0, 1)), float(rng.uniform(0.1, 3.0))
            eps = float(rng.choice([0.0, 1e-6]))
            if eps == 0.0:
                # with eps = 0 one zero TD error gives PER's eta = min |d|^(alpha beta) = 0 and every weight 0:
                # Theorem 3 and Corollary 3 would compare 0 with 0 (that limit is an identity case of its own)
                delta[delta == 0.0] = kappa * NONZERO
            checks += eq.exact_case(delta, rng, alpha=alpha, beta=beta, tau=tau, kappa=kappa, eps=eps)
    merged = {c.claim: c for c in eq.merge_by_claim(checks)}
    return [merged[k] for k in EXACT_ORDER if k in merged] + [c for k, c in merged.items() if k not in EXACT_ORDER]


EXACT_ORDER = (
    "Theorem 1", "Corollary 1", "Corollary 2", "Observation 1", "Theorem 2", "Theorem 2 (eq. 14)",
    "Theorem 3 (eps = 0)", "Theorem 3 (PER eps > 0)", "Corollary 3 (eps = 0)", "Corollary 3 (PER eps > 0)",
    "Observation 2 (MSE -> mean)", "Observation 3 (L1 -> median)", "Observation 4 (kappa = 1)",
    "Observation 4 (general kappa)", "Identity: PAL(alpha=0) = Huber/lambda", "Identity: PER(alpha=0) = uniform",
    "Identity: LAP(|d|<=kappa) = uniform MSE",
)

MC_SETUPS = (
    ("lap", {"alpha": 0.4, "kappa": 1.0}),
    ("lap", {"alpha": 0.6, "kappa": 0.01}),
    ("per", {"alpha": 0.6, "beta": 0.4, "eps": 1e-6, "tau": 2.0}),
    ("per", {"alpha": 0.6, "beta": 0.4, "eps": 1e-6, "kappa": 1.0}),
)


def monte_carlo_checks(seed: int, quick: bool) -> tuple[list[eq.Check], list[dict]]:
    """Sample means of the real samplers' draws against the exact uniform-equivalent expectation."""
    sizes = [100, 1_000, 10_000] if quick else [100, 1_000, 10_000, 100_000, 1_000_000]
    # slope estimate: sd ~0.024 with 100 reps at 3 sizes (20 seeds measured), so the tolerance 0.15 is ~6 sd
    rate_sizes, reps = ([100, 1_000, 10_000], 100) if quick else ([100, 1_000, 10_000, 100_000], 200)
    checks, rows = [], []
    for j, (method, params) in enumerate(tqdm(MC_SETUPS, desc="Monte Carlo", leave=False)):
        kappa = params.get("kappa", 1.0)
        delta = eq.random_td_errors(np.random.default_rng(seed + j), 500, kappa, span=2.0)
        label = f"{method} {params}"
        conv, setups = [], {}  # the whole mean, and the items with positive and negative TD errors apart
        for part in eq.PARTS:
            setups[part] = eq.monte_carlo_setup(delta, method, seed + j, part=part, **params)
            part_rows = eq.monte_carlo_convergence(setups[part], sizes, eq.MC_FAIL_PROB / len(eq.PARTS))
            rows += [{"setup": label, "part": part, **r} for r in part_rows]
            conv += part_rows
        ratio = eq.largest(r["abs_err"] / r["radius"] for r in conv)
        checks.append(eq.Check("Monte Carlo: sample mean -> exact",
                               "|mean_M - E| / Bernstein radius (max over M and parts)",
                               eq.largest(r["abs_err"] for r in conv), ratio, 1.0, len(conv),
                               f"M up to {sizes[-1]}, all items and the items with delta > 0 and < 0 apart; "
                               f"false-failure prob <= {eq.MC_FAIL_PROB:g} per setup"))  # fmt: skip
        norm_rms, slope = eq.monte_carlo_rate(setups["all"], rate_sizes, reps)
        rows.append({"setup": label, "part": "all", "M": "rate", "estimate": slope, "exact": -0.5,
                     "abs_err": abs(slope + 0.5), "radius": 0.15, "z": float(norm_rms.max()), "passed": None})
        checks.append(eq.Check("Monte Carlo: 1/sqrt(M) rate", "|fitted log-log slope of RMS error + 1/2|",
                               abs(slope + 0.5), abs(slope + 0.5), 0.15, len(rate_sizes) * reps,
                               f"{reps} reps per M; sqrt(M) RMS/sd in [{norm_rms.min():.2f}, {norm_rms.max():.2f}]"))
    return eq.merge_by_claim(checks), rows


def variance_summary(seed: int, n_sets: int) -> list[dict]:
    """How much the L1 pair of Theorem 2 reduces the gradient variance, per uniformly sampled loss ``L1``."""
    rows = []
    rng = np.random.default_rng(seed)
    for kappa in (1.0, 0.01):
        for j in range(n_sets):
            delta = eq.random_td_errors(rng, 500, kappa, span=2.0)
            for name, g1 in eq.first_losses(delta, 0.4, 0.4, kappa, 1e-6):
                best = eq.prioritised_pair("L1", g1, np.sign(g1))
                var_u, _ = eq.gradient_variance(np.full(g1.shape[0], 1.0 / g1.shape[0]), g1)
                alts = [eq.prioritised_pair(a, g1, g2) for a, g2 in eq.variance_alternatives(delta, g1, rng)]
                low = min(alts, key=lambda x: x.variance)
                rows.append({"kappa": kappa, "set": j, "loss_L1": name, "var_uniform": var_u,
                             "var_L1_pair": best.variance, "min_var_other_pair": low.variance,
                             "best_other_pair": low.name, "ratio_to_uniform": best.variance / var_u,
                             "ratio_to_best_other": best.variance / low.variance})
    return rows


def torch_checks(seed: int, quick: bool) -> list[eq.Check]:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: the parameter-gradient checks are skipped", file=sys.stderr)
        return []
    seeds = [seed] if quick else [seed, seed + 1, seed + 2]
    checks = []
    for s in tqdm(seeds, desc="torch", leave=False):
        checks += eq.torch_parameter_checks(seed=s)
    return eq.merge_by_claim(checks)


def cliffwalk_stepwise_checks(seed: int, quick: bool) -> list[eq.Check]:
    steps = 100 if quick else 500
    checks = [eq.cliffwalk_stepwise(6, "lap", steps=steps, seed=seed, kappa=k) for k in (1.0, 0.01)]
    checks.append(eq.cliffwalk_stepwise(6, "per", steps=steps, seed=seed))
    return eq.merge_by_claim(checks)


def chain_part(seed: int, quick: bool) -> eq.ChainExperiment:
    betas = (0.0, 0.4, 1.0) if quick else tuple(np.round(np.linspace(0.0, 1.0, 11), 2))
    steps, l1_steps = (5_000, 200_000) if quick else (20_000, 1_000_000)
    return eq.chain_experiment(seed=seed, betas=betas, steps=steps, l1_steps=l1_steps)


def huber_minimiser(rewards: np.ndarray, kappa: float = 1.0) -> float:
    """Where uniform Huber(kappa) would settle on the stochastic pair (a reference for PAL)."""
    from scipy.optimize import brentq

    from prioritylab import losses

    return float(brentq(lambda q: float(np.sum(losses.huber(q - rewards, kappa)[1])), rewards.min(), rewards.max(),
                        xtol=1e-14))


def bias_figure(chain: eq.ChainExperiment, out: Path, huber_ref: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = chain.rewards
    per = [row for row in chain.rows if row["method"] == "PER + MSE"]
    lap = next(row for row in chain.rows if row["method"] == "LAP + Huber")
    grid = np.linspace(0.0, 1.0, 41)
    alpha = per[0]["alpha"]
    theory = [eq.chain_prediction(r, eq.UNIFORM_PER_EQ, alpha, b, 1.0, 2.0, 0.0) for b in grid]
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.4, 1]})
    ax0.plot(grid, theory, "-", color="C0", label=f"argmin eq. 7 (exponent 2 + {alpha:g}(1 - beta))")
    ax0.plot([row["beta"] for row in per], [row["final_value"] for row in per], "o", color="C0",
             label="PER + MSE: expected dynamics, final value")
    ax0.axhline(np.mean(r), color="k", ls="--", lw=1, label=f"mean = {np.mean(r):.3f} (uniform MSE)")
    ax0.axhline(np.median(r), color="grey", ls=":", lw=1, label=f"median = {np.median(r):.3f} (uniform L1)")
    ax0.axhline(lap["final_value"], color="C2", ls="-.", lw=1,
                label=f"LAP = PAL = {lap['final_value']:.3f} (alpha = {lap['alpha']:g}, kappa = 1)")
    if huber_ref is not None:
        ax0.axhline(huber_ref, color="C3", ls=(0, (1, 3)), lw=1,
                    label=f"uniform Huber(1) = {huber_ref:.3f} (reference)")
    ax0.set_xlabel("PER importance-sampling exponent beta")
    ax0.set_ylabel("value of the stochastic final pair")
    ax0.set_title("Stochastic Blind Cliffwalk: where each method settles")
    ax0.legend(fontsize=8)
    ax1.stem(r, np.full(r.shape, 1.0 / len(r)), basefmt=" ")
    marks = [(np.mean(r), "k", "--", "mean"), (np.median(r), "grey", ":", "median"),
             (lap["final_value"], "C2", "-.", "LAP = PAL"), (per[0]["final_value"], "C1", "-", "PER, beta = 0")]
    for x, c, ls, name in marks:
        ax1.axvline(x, color=c, lw=1.2, ls=ls, label=f"{name}: {x:.3f}")
    ax1.set_ylim(0.0, 1.6 / len(r))
    ax1.legend(fontsize=8, loc="upper right")
    ax1.set_xlabel("final reward (log-normal quantiles)")
    ax1.set_ylabel("probability")
    ax1.set_title("Reward distribution of the final step")
    fig.tight_layout()
    save_figure(fig, out / "chain_bias.png")
    plt.close(fig)


def verdict_table(checks: list[eq.Check]) -> str:
    """One line per claim: quantity, cases, worst deviations, tolerance and the verdict word."""
    head = f"{'claim':48s} {'quantity':58s} {'cases':>7s} {'worst abs':>10s} {'worst rel':>10s} {'tol':>9s}  verdict"
    lines = [head, "-" * len(head)]
    for c in checks:
        lines.append(f"{c.claim[:48]:48s} {c.quantity[:58]:58s} {c.cases:7d} {c.abs_dev:10.2e} {c.rel_dev:10.2e} "
                     f"{c.tol:9.2e}  {verdict_word(c.passed)}")
    return "\n".join(lines)


DEFAULT_CASES = 40  # random data sets per kappa for the exact checks


def build_parser() -> argparse.ArgumentParser:
    from prioritylab.demo import settings_note

    p = Parser(description=__doc__.splitlines()[0], epilog=settings_note("lap_equivalence.py"))
    p.add_argument("--out", type=Path, default=Path("results/lap_equivalence"), help="output folder")
    p.add_argument("--quick", action="store_true", help="fewer cases, sizes and steps (about 6 s)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of every random draw")
    p.add_argument("--cases", type=positive_int, default=None,
                   help=f"random data sets per kappa for the exact checks (default {DEFAULT_CASES}, --quick 8)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_output_dir(args.out, program="lap_equivalence.py")
    except ValueError as err:
        fail("lap_equivalence.py", str(err))
    start = time.time()
    rng = np.random.default_rng(args.seed)
    n_cases = args.cases if args.cases is not None else (8 if args.quick else DEFAULT_CASES)
    checks = exact_checks(rng, n_cases)
    mc_checks, mc_rows = monte_carlo_checks(args.seed, args.quick)
    checks += mc_checks
    checks += torch_checks(args.seed, args.quick)
    checks += cliffwalk_stepwise_checks(args.seed, args.quick)
    chain = chain_part(args.seed, args.quick)
    checks += chain.checks
    print(verdict_table(checks))
    out = args.out
    write_csv(out / "checks.csv", [c.row() for c in checks])
    write_csv(out / "monte_carlo.csv", mc_rows)
    huber_ref = huber_minimiser(chain.rewards)
    write_csv(out / "chain.csv", chain.rows)
    write_json(out / "chain_summary.json", {"rewards": chain.rewards, "mean": float(np.mean(chain.rewards)),
                                            "median": float(np.median(chain.rewards)),
                                            "uniform_huber_minimiser": huber_ref})
    bias_figure(chain, out, huber_ref)
    var_rows = variance_summary(args.seed, 2 if args.quick else 10)
    write_csv(out / "variance.csv", var_rows)
    to_u = np.array([r["ratio_to_uniform"] for r in var_rows])
    to_alt = np.array([r["ratio_to_best_other"] for r in var_rows])
    print(f"\nTheorem 2 margins over {len(var_rows)} (data set, L1) pairs: Var(L1 pair) / Var(uniform L1) "
          f"median {np.median(to_u):.3f} (range {to_u.min():.3f}-{to_u.max():.3f}); "
          f"Var(L1 pair) / least other pair's variance: max {to_alt.max():.3f}")
    for r in chain.rows:
        print(f"  chain: {r['method']:16s} beta={r['beta']:<4g} final {r['final_value']:.6f}  "
              f"predicted {r['prediction']:.6f}  bias vs mean {r['bias']:+.6f}")
    print(f"  chain: uniform Huber(1) would settle at {huber_ref:.6f}; mean {np.mean(chain.rewards):.6f}, "
          f"median {np.median(chain.rewards):.6f}")
    n_bad = sum(not c.passed for c in checks)
    below = [f"--cases {n_cases}"] if args.cases is not None and n_cases < DEFAULT_CASES else []
    line = caveat(args.quick, below, "lap_equivalence.py")
    write_manifest(out, vars(args), {"program": "lap_equivalence.py", "seconds": round(time.time() - start, 1),
                                     "claims": len(checks), "not_reproduced": n_bad,
                                     "verdict": [c.row() for c in checks], "caveat": line})  # fmt: skip
    print(f"\n{len(checks) - n_bad}/{len(checks)} claims reproduced; results in {out} ({time.time() - start:.0f} s)")
    if line is not None:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
