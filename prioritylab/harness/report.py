"""``prioritylab report RUNS --out REPORT``: curves, tables and diagnostics panels from run folders alone.

Reads every run folder under ``RUNS`` (a folder with ``manifest.json`` and
``evaluations.csv``, as ``prioritylab train`` writes them), groups the runs by
(agent, environment, sampler) across seeds and writes:

* ``curves_<agent>_<env>.png``: evaluation return against steps, mean over seeds
  with a 95 % confidence band (Student t over seeds), smoothed uniformly over a
  window of 5 evaluations (LAP/PAL App. D, Fig. 1);
* ``table.md`` / ``table.csv``: mean ± 95 % CI over seeds of each run's average
  return over its last 10 evaluations (LAP/PAL Table 1 format);
* ``diagnostics_<agent>_<env>.png``: one panel per replay statistic
  (docs/diagnostics.md) over training, one line per sampler, 95 % bands;
* ``ners_table3.md``: the drawn transitions' |TD error| and Q-value, mean and std
  at the last evaluation, one row per sampler (the layout of NERS Table 3).

Runs that stopped before their last step are included and marked as unfinished.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from .._cli import check_output_dir, fail
from ..results import save_figure, write_csv, write_manifest

SMOOTH = 5  # evaluations (LAP/PAL App. D)
LAST = 10  # evaluations averaged for the table (LAP/PAL Table 1)
PANELS = ("ess_mean", "age_median", "coverage", "top1_share", "prob_n_p99", "td_mean", "q_mean", "weight_mean")


def t_quantile(df: int) -> float:
    """Two-sided 95 % Student t quantile."""
    from scipy import stats

    return float(stats.t.ppf(0.975, df)) if df > 0 else math.nan


def mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and 95 % CI half-width over the first axis (NaN half-width for one value)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan) if np.ndim(mean) else math.nan
    half = t_quantile(n - 1) * values.std(axis=0, ddof=1) / math.sqrt(n)
    return mean, half


def smooth(y: np.ndarray, window: int = SMOOTH) -> np.ndarray:
    """Uniform moving average over up to ``window`` trailing evaluations."""
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = np.empty_like(y, dtype=np.float64)
    for i in range(y.shape[0]):
        lo = max(0, i + 1 - window)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


def find_runs(root: Path) -> list[dict]:
    runs = []
    for manifest in sorted(root.rglob("manifest.json")):
        folder = manifest.parent
        evals = folder / "evaluations.csv"
        if not evals.exists():
            continue
        config = json.loads(manifest.read_text()).get("config", {})
        if "agent" not in config:
            continue
        with open(evals, newline="") as fh:
            rows = list(csv.DictReader(fh))
        if not rows:
            continue
        runs.append({
            "folder": folder, "agent": config["agent"], "env": config["env"], "sampler": config["sampler"],
            "seed": config.get("seed"), "steps": config.get("steps"), "rows": rows,
            "finished": (folder / "finished.json").exists(),
        })  # fmt: skip
    return runs


def column(rows: list[dict], key: str) -> np.ndarray:
    return np.array([float(r.get(key, "nan") or "nan") for r in rows])


def grouped(runs: list[dict]) -> dict:
    groups = defaultdict(list)
    for r in runs:
        groups[(r["agent"], r["env"], r["sampler"])].append(r)
    return groups


def aligned(runs: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps common to all runs of a group and the (runs x steps) values of ``key``."""
    n = min(len(r["rows"]) for r in runs)
    steps = column(runs[0]["rows"][:n], "step")
    return steps, np.stack([column(r["rows"][:n], key) for r in runs])


def build_table(groups: dict) -> list[dict]:
    table = []
    for (agent, env, sampler), runs in sorted(groups.items()):
        finals = np.array([column(r["rows"], "return_mean")[-LAST:].mean() for r in runs])
        mean, half = mean_ci(finals)
        table.append({
            "agent": agent, "env": env, "sampler": sampler, "seeds": len(runs),
            "last_step": int(min(column(r["rows"], "step")[-1] for r in runs)),
            "return_last10_mean": float(mean), "ci95": float(half),
            "finished": sum(r["finished"] for r in runs),
        })  # fmt: skip
    return table


def table_markdown(table: list[dict]) -> str:
    lines = ["| agent | env | sampler | seeds | steps | return (last 10 evals) ± 95 % CI |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for t in table:
        ci = "n/a (1 seed)" if math.isnan(t["ci95"]) else f"{t['ci95']:.1f}"
        unfinished = "" if t["finished"] == t["seeds"] else f" ({t['seeds'] - t['finished']} unfinished)"
        lines.append(f"| {t['agent']} | {t['env']} | {t['sampler']} | {t['seeds']}{unfinished} | {t['last_step']} "
                     f"| {t['return_last10_mean']:.1f} ± {ci} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def ners_table3(groups: dict) -> str:
    lines = ["| agent | env | sampler | seeds | |TD error| mean | |TD error| std | Q mean | Q std |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (agent, env, sampler), runs in sorted(groups.items()):
        vals = {k: np.mean([column(r["rows"], k)[-1] for r in runs]) for k in ("td_mean", "td_std", "q_mean", "q_std")}
        lines.append(f"| {agent} | {env} | {sampler} | {len(runs)} | {vals['td_mean']:.3f} | {vals['td_std']:.3f} "
                     f"| {vals['q_mean']:.2f} | {vals['q_std']:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot_curves(groups: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    by_task = defaultdict(dict)
    for (agent, env, sampler), runs in groups.items():
        by_task[(agent, env)][sampler] = runs
    for (agent, env), samplers in sorted(by_task.items()):
        name = env.replace("/", "-")
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        lo, hi = np.inf, -np.inf
        for k, (sampler, runs) in enumerate(sorted(samplers.items())):
            color = f"C{k}"
            steps, values = aligned(runs, "return_mean")
            values = np.stack([smooth(v) for v in values])
            mean, half = mean_ci(values)
            ax.plot(steps, mean, color=color, lw=1.8, label=f"{sampler} ({len(runs)} seeds)")
            for v in values:  # each seed, faint
                ax.plot(steps, v, color=color, lw=0.6, alpha=0.35)
            if len(runs) > 1:
                ax.fill_between(steps, mean - half, mean + half, color=color, alpha=0.12, lw=0)
            lo, hi = min(lo, float(values.min())), max(hi, float(values.max()))
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        ax.set_ylim(lo - pad, hi + pad)  # the seeds' range: a wide band (few seeds) runs off the plot
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"return (smoothed over {SMOOTH} evals)")
        ax.set_title(f"{agent.upper()} on {env}")
        ax.legend(fontsize=8)
        fig.text(0.01, -0.02, "Thick: mean over seeds; band: 95 % t-interval of the mean (clipped to the seeds' "
                 "range); faint: each seed.", fontsize=7, ha="left", va="top")  # fmt: skip
        path = out / f"curves_{agent}_{name}.png"
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)

        keys = [k for k in PANELS if any(k in r["rows"][0] for runs in samplers.values() for r in runs)]
        if not keys:
            continue
        cols = 4
        rows_n = math.ceil(len(keys) / cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 2.6 * rows_n), squeeze=False)
        for ax, key in zip(axes.flat, keys, strict=False):
            for sampler, runs in sorted(samplers.items()):
                steps, values = aligned(runs, key)
                mean, half = mean_ci(values)
                ax.plot(steps, mean, label=sampler)
                if len(runs) > 1:
                    ax.fill_between(steps, mean - half, mean + half, alpha=0.2)
            ax.set_title(key, fontsize=9)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(keys):]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"Replay diagnostics, {agent.upper()} on {env} (docs/diagnostics.md)", fontsize=10)
        path = out / f"diagnostics_{agent}_{name}.png"
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)
    return written


def report(root: Path, out: Path) -> dict:
    runs = find_runs(root)
    if not runs:
        raise ValueError(f"no run folders (manifest.json + evaluations.csv) under {root}")
    out.mkdir(parents=True, exist_ok=True)
    groups = grouped(runs)
    table = build_table(groups)
    write_csv(out / "table.csv", table)
    (out / "table.md").write_text(table_markdown(table))
    (out / "ners_table3.md").write_text(ners_table3(groups))
    figures = plot_curves(groups, out)
    write_manifest(out, {"runs": str(root), "n_runs": len(runs)}, {"figures": [p.name for p in figures]})
    return {"runs": len(runs), "groups": len(groups), "table": table, "figures": figures}


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="curves, tables and diagnostics panels from run folders",
                              description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("runs", type=Path, help="folder holding run folders (searched recursively)")
    p.add_argument("--out", type=Path, default=Path("report"), help="output folder")
    p.set_defaults(func=_main)


def _main(args) -> int:
    if not args.runs.is_dir():
        fail("prioritylab report", f"{args.runs} is not a folder")
    try:
        check_output_dir(args.out)
        result = report(args.runs, args.out)
    except ValueError as err:
        fail("prioritylab report", f"{err}")
    print(table_markdown(result["table"]))
    print(f"{result['runs']} runs in {result['groups']} groups; figures and tables in {args.out}")
    return 0
