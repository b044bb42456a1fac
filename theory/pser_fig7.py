"""PSER Fig. 2 and 7: MSE curves of uniform, oracle, PER and PSER replay on the Blind Cliffwalk.

Brittain et al. (2019), Section 3.1 and App. 2.

Published claims (Section 3.1, App. 2, Discussion):

* "PSER consistently outperforms PER in this problem" (n = 13..16, MSE to Q*
  tracked every 100 updates, with the memory's priorities initialised to the
  maximal or to a small non-zero priority);
* "For the Blind Cliff Walk experiments, we found that MaxPrio approach delayed
  the convergence to the true Q-value as compared to CurrentTD."

Setting: tabular Q-learning, step size 1/4, gamma = 1 - 1/n (PSER App. 2,
after PER App. B.1); priorities ``(|delta| + 1e-6)^alpha``; PSER with
rho = 0.4 and the window of eq. 8-9 (W = 5, "propagate back the priority 5
steps before"), MAX decay (eq. 6).  10 seeds; each run stops when the MSE over
all 2n state-action pairs falls below 10^-3.

The paper leaves open, and this script runs every combination of:

* the initial Q-values: ``zeros`` (the paper's description that all samples
  have equal priority "until the goal transition is sampled [...] and a
  non-zero TD error is encountered" implies Q = 0) or ``normal`` (PER App.
  B.1: N(0, 0.1), std);
* the anti-collapse rule eq. 10: eta = 0.7 (the Atari table) or eta = 0 (the
  Cliffwalk appendix describes PSER without it);
* the initial priority: ``max`` (1), ``small`` (eps, every transition) and
  ``td`` (CurrentTD: the TD error at the initial Q, decayed backwards by PSER).

alpha is not given for the Cliffwalk; alpha = 1 (Theorem 1: "sampled according
to their priorities").  Verdict per reading: PSER's median updates to converge
below PER's in every (n, initial priority) cell; PSER with max priority slower
than with the TD-error initial priority at every n.  Each cell's ratio of medians
counts only where its 95 % bootstrap interval (the seeds resampled, paired, as
every scheme runs on the same seeds) lies wholly on the claimed side of 1: a
bare ratio of 10-seed medians near 1 changes side with the seed block.
"""

from __future__ import annotations

import sys

import numpy as np

from prioritylab.cliffwalk.experiments import median_curve, run_script, script_parser, script_seeds, updates_or_cap
from prioritylab.cliffwalk.runner import RunConfig
from prioritylab.demo import settings_note

NAME = "pser_fig7"
CLAIM = "PSER Fig. 2/7: PSER converges faster than PER on the Blind Cliffwalk; MaxPrio delays convergence"
Q0S = ("zeros", "normal")
ETAS = (0.0, 0.7)
INITS = ("max", "small", "td")
ALPHA = 1.0
RECORD_EVERY = 100
RESAMPLES = 10_000
"""Bootstrap resamples of the seeds for each cell's interval of a ratio of medians."""


def templates() -> dict[str, RunConfig]:
    out = {}
    for q0 in Q0S:
        base = RunConfig(learner="tabular", lr=0.25, q0=q0, alpha=ALPHA, rho=0.4, mode="max",
                         record_every=RECORD_EVERY, stop_at_convergence=True)  # fmt: skip
        out[f"{q0}/uniform"] = base.replace(scheme="uniform")
        out[f"{q0}/oracle"] = base.replace(scheme="oracle")
        for init in INITS:
            out[f"{q0}/per init={init}"] = base.replace(scheme="per", init=init)
            for eta in ETAS:
                out[f"{q0}/pser eta={eta} init={init}"] = base.replace(scheme="pser", init=init, eta=eta)
    return out


def ratio_interval(top: np.ndarray, bottom: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    """``median(top) / median(bottom)`` and its 95 % percentile bootstrap interval, the seeds (shared by both,
    in the same order) resampled together."""
    idx = rng.integers(0, top.shape[0], (RESAMPLES, top.shape[0]))
    ratios = np.median(top[idx], axis=1) / np.median(bottom[idx], axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(np.median(top) / np.median(bottom)), float(lo), float(hi)


def per_seed(rows: list[dict], label: str, n: int) -> np.ndarray:
    """Updates to converge of each seed of a cell, in seed order (a censored run counts as its cap)."""
    cell = sorted((r for r in rows if r["label"] == label and r["n"] == n), key=lambda r: r["seed"])
    return updates_or_cap(cell)


def _sides(intervals: list[tuple[float, float, float]]) -> tuple[int, int, int]:
    """Cells whose interval lies above 1 (the claim holds), below 1 (the opposite), and across it."""
    won = sum(lo > 1.0 for _, lo, _ in intervals)
    lost = sum(hi < 1.0 for _, _, hi in intervals)
    return won, lost, len(intervals) - won - lost


def verdict(summary: list[dict], rows: list[dict], ns: list[int]) -> list[dict]:
    """One row per reading (q0, eta) for each claim; a cell counts for a claim only where the bootstrap
    interval of its ratio of medians lies wholly above 1."""
    rng = np.random.default_rng(0)
    checks = []
    for q0 in Q0S:
        for eta in ETAS:
            cells = [ratio_interval(per_seed(rows, f"{q0}/per init={init}", n),
                                    per_seed(rows, f"{q0}/pser eta={eta} init={init}", n), rng)
                     for n in ns for init in INITS]  # fmt: skip
            won, lost, across = _sides(cells)
            ratios = [r for r, _, _ in cells]
            checks.append({
                "claim": f"[Q0 {q0}, eta {eta}] PSER faster than PER",
                "measured": f"PSER faster in {won}/{len(cells)} (n, init) cells, slower in {lost}, undecided in "
                            f"{across}; PER/PSER {min(ratios):.2f}..{max(ratios):.2f} (median {np.median(ratios):.2f})",
                "criterion": "median(PER) / median(PSER) > 1 in every cell, its 95 % bootstrap interval above 1",
                "reproduced": won == len(cells),
            })  # fmt: skip
            delays = [ratio_interval(per_seed(rows, f"{q0}/pser eta={eta} init=max", n),
                                     per_seed(rows, f"{q0}/pser eta={eta} init=td", n), rng) for n in ns]  # fmt: skip
            won, lost, across = _sides(delays)
            checks.append({
                "claim": f"[Q0 {q0}, eta {eta}] MaxPrio delays PSER vs CurrentTD",
                "measured": "max/td " + ", ".join(f"n={n}: {d:.2f} [{lo:.2f}, {hi:.2f}]"
                                                  for n, (d, lo, hi) in zip(ns, delays, strict=True)),
                "criterion": "median(max) / median(td) > 1 at every n, its 95 % bootstrap interval above 1",
                "reproduced": won == len(delays),
            })  # fmt: skip
    return checks


def curve_rows(curves: dict, labels, ns, seeds, points: int = 200) -> list[dict]:
    """Median MSE curves, thinned to about ``points`` log-spaced update counts per (label, n)."""
    rows = []
    for label in labels:
        for n in ns:
            med = median_curve([curves[(label, n, s)] for s in seeds])
            if med.size == 0:
                continue
            idx = np.unique(np.concatenate([[0], np.geomspace(1, med.size - 1, points).astype(int)])) if med.size > 1 \
                else np.array([0])  # fmt: skip
            rows.extend({"label": label, "n": n, "updates": int(k * RECORD_EVERY), "median_mse": float(med[k])}
                        for k in idx)  # fmt: skip
    return rows


def plot(curves: dict, ns: list[int], seeds, q0: str, eta: float):
    """One panel per n; one colour per method (uniform, oracle, PER, PSER) and one line style per initial
    priority in every panel; each median curve ends where half of its runs have converged."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(2, len(ns))
    rows_ = (len(ns) + cols - 1) // cols
    fig, axes = plt.subplots(rows_, cols, figsize=(5.6 * cols, 3.9 * rows_), squeeze=False, sharey=True)
    style = {"max": "--", "small": ":", "td": "-."}
    labels = (
        [(f"{q0}/uniform", "uniform", "0.45", "-"), (f"{q0}/oracle", "oracle", "k", "-")]
        + [(f"{q0}/per init={i}", f"PER, init {i}", "C0", style[i]) for i in INITS]
        + [(f"{q0}/pser eta={eta} init={i}", f"PSER, init {i}", "C3", style[i]) for i in INITS]
    )
    for ax, n in zip(axes.ravel(), ns, strict=False):
        for label, name, color, ls in labels:
            runs = [curves[(label, n, s)] for s in seeds]
            med = median_curve(runs)
            # past the median run length, half of the runs have stopped at convergence and the median is only
            # their last recorded value: end the curve there, with a dot
            stop = int(np.median([c.shape[0] for c in runs]))
            med = med[:stop]
            x = np.arange(1, med.size + 1) * RECORD_EVERY
            ax.plot(x, np.maximum(med, 1e-12), ls, color=color, lw=1.3, label=name)
            if med.size:
                ax.plot(x[-1], max(med[-1], 1e-12), "o", color=color, ms=3)
        ax.axhline(1e-3, color="k", lw=0.5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"n = {n}", fontsize=10)
        ax.set_xlabel("updates")
        ax.set_ylabel("median MSE to Q*")
    for ax in axes.ravel()[len(ns):]:
        ax.axis("off")
    handles, names = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4, fontsize=9, frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(f"PSER Fig. 7: initial parameters {q0}, eta {eta}", fontsize=11)
    fig.text(0.01, -0.07, "Median over seeds of the MSE to Q*; a curve ends (dot) where half of its runs have "
             "converged. Colour: method; line style: initial priority of the memory (dashed max, dotted small, "
             "dash-dot TD). Thin black line: the 1e-3 threshold.", fontsize=8, ha="left", va="top")  # fmt: skip
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__.splitlines()[0], epilog=settings_note("pser_fig7.py"))
    args = parser.parse_args(argv)
    if args.seeds == 1:  # one seed resampled is one point: an interval of no width, "above 1" by construction
        parser.error("--seeds 1: each verdict's 95 % bootstrap interval resamples the seeds, which takes 2 at least")
    ns = [5, 6] if args.quick else [13, 14, 15, 16]
    seeds = script_seeds(args)
    tpl = templates()
    return run_script(
        args, NAME, CLAIM, tpl, ns, seeds,
        verdict=lambda summary, rows: verdict(summary, rows, ns),
        figures=lambda summary, curves: {
            f"{NAME}_q0-{q0}_eta-{eta}.png": plot(curves, ns, seeds, q0, eta) for q0 in Q0S for eta in ETAS
        },
        tables=lambda summary, curves: {f"{NAME}_curves.csv": curve_rows(curves, tpl, ns, seeds)},
        columns=["label", "n", "median", "min", "max", "censored"],
        last_n_only=True,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
