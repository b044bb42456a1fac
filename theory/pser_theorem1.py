"""PSER Theorem 1 (Brittain et al., 2019, App. 1): expected replay steps on the Blind Cliffwalk, PER vs PSER.

For n = 2..16 and rho in {0.4, 0.65, 0.8} (PSER App. table of tried decay coefficients)
the theorem's claims are checked three ways in its idealised model (learning rate 1,
pre-filled memory, priorities = TD error, a replayed transition's priority drops to its
post-update TD error): closed forms, the exact expectation of the absorbing Markov
chain, and a Monte Carlo of the model on the actual memory; a fourth column runs the
real algorithms (priority from the TD error of the update, PSER re-decaying it) on the
learning-rate-1 learner of prioritylab.cliffwalk.  Derivation: docs/theory/pser-theorem.md.

Writes into --out: expected_steps.csv (window W = floor(ln 0.01 / ln rho), PSER eq. 8-9),
expected_steps_unlimited_window.csv (the theorem as stated: decay down the whole
episode), real_runs.csv (every real run), pser_theorem1.png, manifest.json; prints a
verdict table.  Exits 0 whether or not a claim reproduces.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from prioritylab.cliffwalk import run_lr1
from prioritylab.results import save_figure, write_csv, write_manifest
from prioritylab.samplers.pser import window_from_rho
from prioritylab.theory import pser_model as pm
from prioritylab.theory.verdict import verdict_word, with_verdict

COLUMNS = [
    "n", "rho", "e_per_closed", "e_per_exact", "e_per_mc", "e_per_mc_ci", "e_pser_bound", "e_pser_exact",
    "e_pser_mc", "e_pser_mc_ci", "e_pser_real", "e_per_real",
]  # fmt: skip
RHOS = (0.4, 0.65, 0.8)
"""PSER App. table: the decay coefficients tried (0.4 is the chosen one)."""
WINDOWS = ("eq8-9", "unlimited")
CSV_NAMES = {"eq8-9": "expected_steps.csv", "unlimited": "expected_steps_unlimited_window.csv"}
REL_TOL = 1e-9
"""Closed form vs exact chain: both are sums of the same O(n) terms in float64."""
Z_MAX = 4.0
"""Largest |MC - exact| / standard error accepted over the whole table (P(|z| > 4) = 6e-5 per point)."""
ACCEL_MAX = 1.5
"""Largest upper-half / lower-half slope ratio still called linear growth (see :func:`growth`)."""
MIN_COVERAGE = 0.85
"""Smallest share of points whose 95% CI must cover the exact value (expected share: 0.95)."""


@dataclass
class Config:
    """Settings of the check (defaults: the full run)."""

    n_min: int = 2
    """Smallest number of states (PER App. B.1 varies n from 2 to 16)."""
    n_max: int = 16
    """Largest number of states."""
    rhos: tuple = RHOS
    """PSER decay coefficients."""
    mc_runs: int = 10_000
    """Monte Carlo runs per point."""
    real_seeds: int = 50
    """Seeds of the real learning-rate-1 runs per point."""
    seed: int = 0
    """Base seed (Monte Carlo streams and real-run seeds derive from it)."""
    alpha: float = 1.0
    """Prioritisation exponent; Theorem 1 samples "according to their priorities" (alpha = 1)."""
    eps: float = 1e-6
    """PER/PSER eps of the real runs (the idealised model takes eps -> 0)."""
    eta_variant: float = 0.7
    """PSER eq. 10 anti-collapse coefficient of an extra real-run variant (App. table: 0.7)."""
    eps_variant: float = 1e-12
    """eps of an extra real-run variant, close to the model's eps -> 0."""
    quick: bool = False
    """Quick mode: n <= 8, fewer runs (a few seconds; used by the tests)."""

    @property
    def ns(self) -> list[int]:
        return list(range(self.n_min, self.n_max + 1))


def real_steps(n: int, scheme: str, rho: float, window: int, cfg: Config, eta: float, eps: float) -> np.ndarray:
    """Updates to convergence of the real algorithm (``run_lr1``), one per seed (-1: censored)."""
    return np.array(
        [run_lr1(n, scheme, rho=rho, window=window, eta=eta, eps=eps, alpha=cfg.alpha, seed=cfg.seed + s)
         for s in range(cfg.real_seeds)],
        dtype=np.int64,
    )  # fmt: skip


def _mean(steps: np.ndarray) -> float:
    ok = steps[steps >= 0]
    return float(ok.mean()) if ok.size else float("nan")


class _Cache:
    """Runs keyed by the effective chain length ``min(W, n - 1)``: a longer window changes nothing."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.seq = np.random.SeedSequence(cfg.seed)
        self.mc, self.real, self.log = {}, {}, []

    def pser_mc(self, n: int, rho: float, window: int | None) -> pm.MCResult:
        key = (n, rho, pm.chain_length(n, window))
        if key not in self.mc:
            rng = np.random.default_rng(self.seq.spawn(1)[0])
            self.mc[key] = pm.e_pser_mc(n, rho, window, self.cfg.mc_runs, rng, alpha=self.cfg.alpha)
        return self.mc[key]

    def run(self, n: int, scheme: str, rho: float, window: int, eta: float = 0.0, eps: float | None = None):
        """(mean, standard error, censored runs) of the real algorithm at one point."""
        w = min(window, n - 1)
        eps = self.cfg.eps if eps is None else eps
        key = (n, scheme, rho if scheme == "pser" else None, w, eta, eps)
        if key not in self.real:
            steps = real_steps(n, scheme, rho, max(w, 1), self.cfg, eta, eps)
            ok = steps[steps >= 0].astype(np.float64)
            se = float(ok.std(ddof=1) / math.sqrt(ok.size)) if ok.size > 1 else float("nan")
            self.real[key] = (_mean(steps), se, int((steps < 0).sum()))
            self.log += [dict(n=n, scheme=scheme, rho=key[2], window=w, eta=eta, eps=eps, seed=self.cfg.seed + s,
                              steps=int(v)) for s, v in enumerate(steps)]  # fmt: skip
        return self.real[key]


def variant_labels(cfg: Config) -> dict[str, tuple[float, float]]:
    """Extra real PSER runs (W = eq. 8-9): label -> (eta, eps)."""
    return {f"eta={cfg.eta_variant}": (cfg.eta_variant, cfg.eps), f"eps={cfg.eps_variant:g}": (0.0, cfg.eps_variant)}


def compute(cfg: Config, progress=None) -> tuple[dict, list[dict], dict]:
    """Tables (one per window kind), the log of real runs, and the real variants' means {label: {(n, rho): mean}}."""
    tables = {kind: [] for kind in WINDOWS}
    cache = _Cache(cfg)
    variants = {label: {} for label in variant_labels(cfg)}
    for n in cfg.ns:
        per = pm.e_per_mc(n, cfg.mc_runs, np.random.default_rng(cache.seq.spawn(1)[0]))
        per_real = cache.run(n, "per", 0.4, 1)
        base = dict(n=n, e_per_closed=pm.e_per_closed(n), e_per_exact=pm.e_per_exact(n), e_per_mc=per.mean,
                    e_per_mc_ci=per.ci, e_per_real=per_real[0], e_per_real_se=per_real[1],
                    censored=per_real[2])  # fmt: skip
        for rho in cfg.rhos:
            for kind in WINDOWS:
                w = None if kind == "unlimited" else window_from_rho(rho)
                mc = cache.pser_mc(n, rho, w)
                real = cache.run(n, "pser", rho, n if w is None else w)
                row = dict(
                    base,
                    rho=rho,
                    e_pser_bound=pm.e_pser_bound(n, rho, w, cfg.alpha),
                    e_pser_exact=pm.e_pser_exact(n, rho, w, cfg.alpha),
                    e_pser_mc=mc.mean,
                    e_pser_mc_ci=mc.ci,
                    e_pser_real=real[0],
                    e_pser_real_se=real[1],
                )
                row["censored"] += real[2]
                row.update(window="unlimited" if w is None else w, e_pser_closed=pm.e_pser_closed(n, rho, w, cfg.alpha),
                           e_pser_bound_loose=pm.e_pser_bound_loose(n, rho, cfg.alpha))  # fmt: skip
                tables[kind].append(row)
            for label, (eta, eps) in variant_labels(cfg).items():
                variants[label][(n, rho)] = cache.run(n, "pser", rho, window_from_rho(rho), eta, eps)[0]
            if progress is not None:
                progress.update(1)
    return tables, cache.log, variants


# --------------------------------------------------------------------------- verdict


def growth(ns, values) -> dict:
    """Growth class of ``values(n)``.

    ``log2_slope``: slope of ``log2 E`` against ``n`` over the upper half of the ``n``
    range (1 for ``2^n``).  ``accel``: slope of ``E`` against ``n`` over the upper half
    divided by the slope over the lower half (1 for an affine function, about 2.3 for a
    quadratic on n = 2..16).  Exponential if ``log2_slope >= 0.5``, else linear if
    ``accel <= 1.5``, else superlinear.
    """
    ns = np.asarray(ns, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    mid = 0.5 * (ns.min() + ns.max())
    upper, lower = ns >= mid, ns <= mid
    b = float(np.polyfit(ns[upper], np.log2(v[upper]), 1)[0])
    accel = float(np.polyfit(ns[upper], v[upper], 1)[0] / np.polyfit(ns[lower], v[lower], 1)[0])
    kind = "exponential" if b >= 0.5 else ("linear" if 0.0 < accel <= ACCEL_MAX else "superlinear")
    return dict(kind=kind, log2_slope=b, accel=accel)


def _rel(a, b) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def _by_rho(rows, key):
    out = {}
    for r in rows:
        out.setdefault(r["rho"], []).append((r["n"], r[key]))
    return {rho: (np.array([p[0] for p in v]), np.array([p[1] for p in v])) for rho, v in out.items()}


def _mc_stats(rows) -> tuple[float, float]:
    z = []
    seen_per = set()
    for r in rows:
        if r["n"] not in seen_per:
            seen_per.add(r["n"])
            z.append((r["e_per_mc"] - r["e_per_exact"]) / (r["e_per_mc_ci"] / 1.96))
        z.append((r["e_pser_mc"] - r["e_pser_exact"]) / (r["e_pser_mc_ci"] / 1.96))
    z = np.abs(np.array(z))
    return float((z <= 1.96).mean()), float(z.max())


def _claim(claim: str, measured: str, reproduced: bool, note: str = "") -> dict:
    return dict(claim=claim, measured=measured, reproduced=bool(reproduced), note=note)


def _model_claims(tables: dict) -> list[dict]:
    rows_w, rows_u = tables["eq8-9"], tables["unlimited"]
    both = rows_w + rows_u
    out = []
    err = max(_rel(r["e_per_closed"], r["e_per_exact"]) for r in both)
    out.append(_claim("E_PER closed form (eq. 28) = exact chain", f"max rel. err {err:.1e}", err <= REL_TOL))
    err = max(_rel(r["e_pser_closed"], r["e_pser_exact"]) for r in both)
    out.append(_claim("E_PSER derived closed form = exact chain", f"max rel. err {err:.1e}", err <= REL_TOL))
    cover, zmax = _mc_stats(rows_w) if rows_w else (0.0, np.inf)
    cover_u, zmax_u = _mc_stats(rows_u)
    cover, zmax = min(cover, cover_u), max(zmax, zmax_u)
    out.append(_claim("Monte Carlo within 95% CI of exact", f"coverage {cover:.0%}, max |z| {zmax:.2f}",
                      cover >= MIN_COVERAGE and zmax <= Z_MAX, "expected coverage 95%"))  # fmt: skip
    for name, rows in (("W = eq. 8-9", rows_w), ("unlimited W", rows_u)):
        ok = [r for r in rows if r["e_pser_exact"] <= r["e_pser_bound"] * (1 + 1e-12)]
        out.append(_claim(f"PSER bound (eq. 31) >= exact, {name}", f"holds at {len(ok)}/{len(rows)} points",
                          len(ok) == len(rows), _first_failure(rows, "e_pser_bound")))  # fmt: skip
    ok = [r for r in rows_u if r["e_pser_exact"] <= r["e_pser_bound_loose"]]
    out.append(_claim("n / (1 - rho) >= exact, unlimited W", f"holds at {len(ok)}/{len(rows_u)} points",
                      len(ok) == len(rows_u), _first_failure(rows_u, "e_pser_bound_loose")))  # fmt: skip
    per = _by_rho(rows_u, "e_per_exact")
    g = growth(*next(iter(per.values())))
    out.append(_claim("PER grows exponentially (2^n)", f"log2-slope {g['log2_slope']:.2f}",
                      0.9 <= g["log2_slope"] <= 1.1))  # fmt: skip
    for name, rows in (("unlimited W", rows_u), ("W = eq. 8-9", rows_w)):
        for rho, (ns, v) in _by_rho(rows, "e_pser_exact").items():
            g = growth(ns, v)
            out.append(_claim(f"PSER grows linearly, exact, {name}, rho={rho}",
                              f"{g['kind']}: log2-slope {g['log2_slope']:.2f}, slope ratio {g['accel']:.2f}",
                              g["kind"] == "linear"))  # fmt: skip
    ok = all(r["e_pser_exact"] <= r["e_per_exact"] for r in both)
    out.append(_claim("PSER never slower than PER (exact)", "all points" if ok else "some points", ok))
    return out


def _first_failure(rows, key: str) -> str:
    bad = [r for r in rows if r["e_pser_exact"] > r[key] * (1 + 1e-12)]
    if not bad:
        return ""
    r = bad[0]
    return f"first failure n={r['n']}, rho={r['rho']}: exact {r['e_pser_exact']:.4g} > {r[key]:.4g}"


def _real_claims(tables: dict, variants: dict) -> list[dict]:
    rows = tables["eq8-9"]
    out = []
    z = [abs(r["e_per_real"] - r["e_per_closed"] - (r["n"] - 1)) / max(r["e_per_real_se"], 1e-12) for r in rows]
    out.append(_claim("real PER follows E_PER + (n - 1)", f"max |real - prediction| / s.e. = {max(z):.1f}",
                      max(z) <= Z_MAX, "n - 1: a learned transition keeps its pre-update |delta| once"))  # fmt: skip
    for name, key in (("W = eq. 8-9", "eq8-9"), ("unlimited W", "unlimited")):
        for rho, (ns, v) in _by_rho(tables[key], "e_pser_real").items():
            g = growth(ns, v)
            out.append(_claim(f"real PSER grows linearly, {name}, rho={rho}",
                              f"{g['kind']}: log2-slope {g['log2_slope']:.2f}, slope ratio {g['accel']:.2f}",
                              g["kind"] == "linear"))  # fmt: skip
    for label, means in variants.items():
        for rho in sorted({k[1] for k in means}):
            ns = np.array(sorted(k[0] for k in means if k[1] == rho))
            g = growth(ns, [means[(n, rho)] for n in ns])
            out.append(_claim(f"real PSER ({label}) grows linearly, W = eq. 8-9, rho={rho}",
                              f"{g['kind']}: log2-slope {g['log2_slope']:.2f}, slope ratio {g['accel']:.2f}",
                              g["kind"] == "linear"))  # fmt: skip
    unl = tables["unlimited"]
    ok = [r for r in unl if r["e_pser_real"] <= r["e_pser_bound"]]
    out.append(_claim("real PSER within the bound (eq. 31), unlimited W", f"holds at {len(ok)}/{len(unl)} points",
                      len(ok) == len(unl), "the bound ignores re-replays of just-learned transitions"))  # fmt: skip
    ok = all(r["e_pser_real"] < r["e_per_real"] for r in rows if r["n"] >= 3)
    out.append(_claim("real PSER faster than real PER (n >= 3)", "all points" if ok else "not everywhere", ok))
    censored = sum(r["censored"] for r in rows)
    out.append(_claim("no real run censored at the cap", f"{censored} censored", censored == 0))
    return out


def verdict(tables: dict, variants: dict | None = None) -> list[dict]:
    """Every claim with what was measured and whether it is reproduced (see docs/theory/pser-theorem.md)."""
    out = _model_claims(tables)
    if tables["eq8-9"] and "e_pser_real" in tables["eq8-9"][0]:
        out += _real_claims(tables, variants or {})
    return out


def format_verdict(rows: list[dict]) -> str:
    """Claim, verdict (``reproduced`` / ``not reproduced``) and what was measured, one line per claim."""
    width = max(len(r["claim"]) for r in rows)
    lines = [f"{'claim':<{width}}  {'verdict':<14}  measured"]
    for r in rows:
        note = f"  ({r['note']})" if r["note"] else ""
        lines.append(f"{r['claim']:<{width}}  {verdict_word(r['reproduced']):<14}  {r['measured']}{note}")
    lines.append("(growth: exponential if log2-slope >= 0.5; else linear if slope ratio <= 1.5, else superlinear)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- outputs


def make_figure(tables: dict, path: Path) -> None:
    """Log-y expected steps vs n: PER and PSER, closed forms as lines, MC with error bars, real as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    colors = {0.4: "tab:blue", 0.65: "tab:orange", 0.8: "tab:green"}
    for ax, kind, title in zip(axes, WINDOWS, ("window W = floor(ln 0.01 / ln rho) (eq. 8-9)",
                                                "unlimited window (Theorem 1 as stated)"), strict=True):  # fmt: skip
        rows = tables[kind]
        per = {r["n"]: r for r in rows}
        ns = np.array(sorted(per))
        ax.plot(ns, [per[n]["e_per_closed"] for n in ns], "k-", lw=2, label="PER closed form (eq. 28)")
        ax.errorbar(ns, [per[n]["e_per_mc"] for n in ns], yerr=[per[n]["e_per_mc_ci"] for n in ns], fmt="ko",
                    ms=3, capsize=2, label="PER Monte Carlo (95% CI)")  # fmt: skip
        ax.plot(ns, [per[n]["e_per_real"] for n in ns], "kx", ms=7, label="PER real algorithm")
        for rho, col in colors.items():
            sub = sorted((r for r in rows if r["rho"] == rho), key=lambda r: r["n"])
            if not sub:
                continue
            x = np.array([r["n"] for r in sub])
            ax.plot(
                x,
                [r["e_pser_closed"] for r in sub],
                "-",
                color=col,
                label=f"PSER exact = derived closed form, rho={rho}",
            )
            ax.plot(x, [r["e_pser_bound"] for r in sub], "--", color=col, label=f"PSER bound (eq. 31), rho={rho}")
            ax.errorbar(x, [r["e_pser_mc"] for r in sub], yerr=[r["e_pser_mc_ci"] for r in sub], fmt="o",
                        color=col, ms=3, capsize=2, label=f"PSER Monte Carlo (95% CI), rho={rho}")  # fmt: skip
            ax.plot(x, [r["e_pser_real"] for r in sub], "^", color=col, ms=6, mfc="none",
                    label=f"PSER real algorithm, rho={rho}")  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("number of states n")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("expected replay steps to convergence")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle("PSER Theorem 1 on the Blind Cliffwalk (learning rate 1): dots = Monte Carlo of the model")
    save_figure(fig, path)
    plt.close(fig)


def write_outputs(out: Path, cfg: Config, tables: dict, log: list[dict], verdict_rows: list[dict], seconds: float):
    for kind in WINDOWS:
        write_csv(out / CSV_NAMES[kind], [{c: r[c] for c in COLUMNS} for r in tables[kind]], COLUMNS)
    extra_cols = ["n", "rho", "window", "e_pser_closed", "e_pser_exact", "e_pser_bound", "e_pser_bound_loose",
                  "e_pser_real_se", "e_per_real_se"]  # fmt: skip
    write_csv(out / "pser_closed_form.csv", [{c: r[c] for c in extra_cols} for k in WINDOWS for r in tables[k]],
              extra_cols)  # fmt: skip
    write_csv(out / "real_runs.csv", log, ["n", "scheme", "rho", "window", "eta", "eps", "seed", "steps"])
    make_figure(tables, out / "pser_theorem1.png")
    config = asdict(cfg)
    write_manifest(out, config, extra={"verdict": with_verdict(verdict_rows), "seconds": round(seconds, 1),
                                       "files": [*CSV_NAMES.values(), "pser_closed_form.csv", "real_runs.csv",
                                                 "pser_theorem1.png"]})  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("results/pser_theorem1"), help="output folder")
    p.add_argument("--quick", action="store_true", help="n <= 8, 2000 MC runs, 10 real seeds (a few seconds)")
    p.add_argument("--n-max", type=int, default=None, help="largest n (default 16, quick 8)")
    p.add_argument("--mc-runs", type=int, default=None, help="Monte Carlo runs per point (default 10000)")
    p.add_argument("--real-seeds", type=int, default=None, help="real-algorithm seeds per point (default 50)")
    p.add_argument("--seed", type=int, default=0, help="base seed")
    return p


def config_from_args(args) -> Config:
    cfg = Config(seed=args.seed, quick=args.quick)
    if args.quick:
        cfg.n_max, cfg.mc_runs, cfg.real_seeds = 8, 2000, 10
    if args.n_max is not None:
        cfg.n_max = args.n_max
    if args.mc_runs is not None:
        cfg.mc_runs = args.mc_runs
    if args.real_seeds is not None:
        cfg.real_seeds = args.real_seeds
    if not 4 <= cfg.n_max <= pm.MAX_EXACT_STATES:
        raise ValueError(f"--n-max must be in [4, {pm.MAX_EXACT_STATES}], got {cfg.n_max}")
    if cfg.mc_runs < 2 or cfg.real_seeds < 2:
        raise ValueError(f"--mc-runs and --real-seeds must be at least 2, got {cfg.mc_runs}, {cfg.real_seeds}")
    return cfg


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    t0 = time.perf_counter()
    with tqdm(total=len(cfg.ns) * len(cfg.rhos), desc="PSER Theorem 1", unit="point") as bar:
        tables, log, variants = compute(cfg, bar)
    rows = verdict(tables, variants)
    seconds = time.perf_counter() - t0
    write_outputs(args.out, cfg, tables, log, rows, seconds)
    print(format_verdict(rows))
    print(f"\nresults in {args.out} ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
