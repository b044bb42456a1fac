"""``prioritylab report RUNS [RUNS ...] --out REPORT``: curves, tables and diagnostics panels from run folders alone.

Reads every run folder under each ``RUNS`` (a folder with ``manifest.json`` and
``evaluations.csv``, as ``prioritylab train`` writes them; several ``RUNS`` put a
study's runs beside another study's control runs, each run counted once), groups the
runs by (agent, environment, sampler) across seeds and writes:

* ``curves_<agent>_<env>.png``: evaluation return against steps, mean over seeds
  with a 95 % confidence band (Student t over seeds), smoothed uniformly over a
  window of 5 evaluations (LAP/PAL App. D, Fig. 1);
* ``table.md`` / ``table.csv``: mean ± 95 % CI over seeds of each run's average
  return over its last 10 evaluations (LAP/PAL Table 1 format);
* ``diagnostics_<agent>_<env>.png``: one panel per replay statistic
  (docs/diagnostics.md) over training, one line per sampler, 95 % bands;
* ``ners_table3.md``: the drawn transitions' |TD error| and Q-value, mean and std
  at the last evaluation, one row per sampler (the layout of NERS Table 3), and
  ``table3_<agent>_<env>.png``, the same four statistics seed by seed;
* ``gains.md`` / ``gains.csv``: mean and median % gain of each sampler's final score
  over a baseline sampler's, (x - y) / |y| per environment (LAP/PAL Table 2 format),
  against ``uniform`` and ``per`` when present;
* ``human_normalised.md`` / ``.csv`` (Atari runs): (score - random) / (human -
  random) per game with the PSER appendix's scores, mean and median over games;
* ``aggregates.md`` / ``.csv`` and ``profiles_<agent>_<domain>.png``: IQM, mean and
  median with 95 % stratified-bootstrap intervals and performance profiles, computed
  by ``rliable`` over runs x tasks (Atari games human-normalised, MinAtar games
  normalised between random play and the uniform sampler's mean; one task otherwise).
  With fewer than ``MIN_CI_RUNS`` runs per task the intervals are not shown: they are
  not meaningful;
* ``improvement.md`` / ``.csv``: rliable's probability of improvement of each sampler
  over ``uniform``, and of the comparisons the papers make (LAP, PAL, PSER and NERS
  over ``per``; PAL over ``lap``, where 0.5 is the claim: :data:`CLAIMS`), P(X > Y)
  over runs, averaged over tasks, with its bootstrap interval;
* ``differences.md`` / ``.csv``: per environment, for the same comparisons, the difference
  of the mean final scores with its 95 % Welch interval, absolute and as a share of the
  baseline's mean;
* ``versus.md`` / ``.csv`` (with ``--against SETTING=VALUE``): each sampler's runs against its own runs
  recorded with ``SETTING = VALUE`` (another optimiser eps, another kappa), the difference of the mean final
  scores with its 95 % Welch interval; the reference runs are in no other table, and the runs of a sampler
  that does not read ``SETTING`` stay in them;
* ``overhead.md``: wall time per run and its increase over uniform (LAP/PAL App. B,
  Table 3), from the runs' ``timing.csv``, under a caveat: sweep runs share a machine,
  so these are no measure of a sampler's cost (``prioritylab bench agent`` is);
* ``status.md``: every run folder found, and whether it was used, left out as
  partial (no ``finished.json``), left out as a run that never updated (0
  updates: a random policy's returns), skipped as corrupt (with the reason), or
  empty (a folder with no ``manifest.json`` and no ``evaluations.csv``);
* ``manifest.json``: the command, commit, package versions and the run folders used.

A final score is the mean return over a run's last 10 evaluations.  Partial runs are
listed and never averaged in, unless ``--include-partial`` (then they are marked).
A corrupt or truncated ``manifest.json`` / ``evaluations.csv`` (a row with fewer or
more fields than the header, or a last row without its line end) is reported by name
and skipped.

Only like is compared with like: the seeds of a group must agree on every setting
but the seed and the bookkeeping ones (``IGNORED``), and the samplers of one agent
and environment on every setting but the sampler and its ``replay.*`` settings.  A
group that differs, or that holds one seed in two run folders (a copy), is marked in
``table.md`` with what differs, and left out of every other table and figure.  A run
whose ``finished.json`` names another last step than its ``evaluations.csv`` ends at
(a cut or replaced file) is corrupt.  The rliable tables take each sampler's own seeds
(its lowest, as many on each task) on the samplers and tasks that give the most
sampler-task cells with at least 2 runs each, and list in ``aggregates.md`` what they
leave out (a sampler run on few tasks, a task only some samplers have reached); the
probability of improvement compares each pair on the tasks both ran.  The curves align
the seeds on the evaluation steps every seed logged.  A Welch interval is undefined
(shown as such) when no seed differs on either side.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from itertools import combinations
from pathlib import Path

import numpy as np

from .._cli import check_output_dir, fail
from ..provenance import IGNORED, recorded, unread_by
from ..replay.diagnostics import COLUMNS as DIAGNOSTICS
from ..results import save_figure, write_csv, write_manifest
from ..scores import MINATAR_RANDOM, SCORES, atari_game, minatar_game
from ..scores import human_normalised as normalise_human

SMOOTH = 5  # evaluations (LAP/PAL App. D)
LAST = 10  # evaluations averaged for the table (LAP/PAL Table 1)
MIN_CI_RUNS = 5
"""Fewest runs per task for which a table shows a bootstrap interval (fewer: the point estimate alone)."""
BOOTSTRAP_REPS = 2000
"""Stratified-bootstrap replications of rliable's intervals (IQM, mean, median, probability of improvement)."""
PROFILE_REPS = 500
"""Bootstrap replications of the performance profiles' bands."""
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


def read_run(folder: Path) -> dict:
    """One run folder's config and evaluation rows; ``ValueError`` naming the file if it is corrupt."""
    manifest = folder / "manifest.json"
    try:
        recorded_manifest = json.loads(manifest.read_text())
        config = recorded_manifest.get("config", {})
    except (OSError, ValueError, AttributeError) as err:
        raise ValueError(f"{manifest}: not readable JSON ({err})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{manifest}: its config is not a mapping of settings")
    for key in ("agent", "env", "sampler"):
        if not isinstance(config.get(key), str):
            raise ValueError(f"{manifest}: config has no {key}")
    evals = folder / "evaluations.csv"
    try:
        with open(evals, newline="") as fh:
            text = fh.read()
        rows = list(csv.DictReader(text.splitlines(keepends=True)))
    except (OSError, csv.Error, UnicodeDecodeError) as err:
        raise ValueError(f"{evals}: not readable CSV ({err})") from None
    if not rows:
        raise ValueError(f"{evals}: no evaluations")
    if not text.endswith("\n"):
        raise ValueError(f"{evals}: row {len(rows)} is truncated (the file ends without a line end)")
    last = -math.inf
    for i, row in enumerate(rows):
        if None in row or None in row.values():
            raise ValueError(f"{evals}: row {i + 1} is truncated: {len([v for v in row.values() if v is not None])} "
                             f"fields where the header has {len(rows[0]) - (None in rows[0])}")  # fmt: skip
        try:
            step, ret = float(row["step"]), float(row["return_mean"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{evals}: row {i + 1} is truncated or not numeric") from None
        if not (math.isfinite(step) and math.isfinite(ret)) or step <= last:
            raise ValueError(f"{evals}: row {i + 1} has step {row['step']} / return {row['return_mean']}")
        last = step
    if config.get("diagnostics") is False:  # its columns then hold no replay statistics (DQN's q_mean is its
        rows = [{**row, **{k: "nan" for k in DIAGNOSTICS if k in row}} for row in rows]  # batch's, not Table 3's)
    finished = folder / "finished.json"
    if finished.exists():
        try:
            ended = json.loads(finished.read_text())["step"]
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise ValueError(f"{finished}: not readable JSON with the run's last step ({err!r})") from None
        if not isinstance(ended, (int, float)) or ended != last:
            raise ValueError(f"{evals}: ends at step {rows[-1]['step']}, but {finished.name} says the run ended at "
                             f"step {ended!r} (a cut or replaced evaluations.csv?)")  # fmt: skip
    return {
        "folder": folder, "agent": config["agent"], "env": config["env"], "sampler": config["sampler"],
        "seed": config.get("seed"), "steps": config.get("steps"), "rows": rows,
        "finished": finished.exists(), "config": recorded(recorded_manifest),
    }  # fmt: skip


def find_runs(root: Path, exclude: Path | None = None) -> tuple[list[dict], list[dict]]:
    """Every run folder under ``root`` (a ``manifest.json`` beside an ``evaluations.csv``): the readable
    runs, and the status of each folder found (``used`` is decided later; ``corrupt`` with its reason;
    ``empty`` for a folder without subfolders that holds neither file, ``no evaluations`` for a run's
    manifest without an ``evaluations.csv``); ``exclude`` (the report's own folder) is not searched."""
    runs, status = [], []
    skip = exclude.resolve() if exclude is not None else None
    for manifest in sorted(root.rglob("manifest.json")):
        folder = manifest.parent
        if not (folder / "evaluations.csv").exists():
            try:
                is_run = "agent" in json.loads(manifest.read_text()).get("config", {})
            except (OSError, ValueError, AttributeError):
                is_run = True
            if is_run:
                status.append({"folder": str(folder), "status": "no evaluations, left out",
                               "detail": "manifest.json without evaluations.csv (stopped before its first "
                                         "evaluation)"})  # fmt: skip
            continue
        try:
            runs.append(read_run(folder))
        except ValueError as err:
            status.append({"folder": str(folder), "status": "corrupt", "detail": str(err)})
    for folder in sorted(p for p in root.rglob("*") if p.is_dir()):
        if skip is not None and (folder.resolve() == skip or skip in folder.resolve().parents):
            continue
        inside_run = any((parent / "manifest.json").exists() for parent in (folder, *folder.parents)
                         if parent == root or root in parent.parents)  # fmt: skip
        if not inside_run and not any(p.is_dir() for p in folder.iterdir()) and \
                not (folder / "evaluations.csv").exists():
            files = sorted(p.name for p in folder.iterdir())
            status.append({"folder": str(folder), "status": "empty, left out",
                           "detail": "no manifest.json and no evaluations.csv"
                                     + (f" (holds {', '.join(files)})" if files else "")})  # fmt: skip
    return runs, status


def never_updated(run: dict) -> bool:
    """A run whose last evaluation reports 0 updates: its returns are a random policy's."""
    value = run["rows"][-1].get("updates")
    try:
        return value is not None and float(value) == 0
    except ValueError:
        return False


def differing(configs: list[dict], skip=lambda key: False) -> dict[str, list]:
    """The settings whose values differ between ``configs`` (flat), with their distinct values."""
    keys = sorted({k for c in configs for k in c if k not in IGNORED and not skip(k)})
    out = {}
    for key in keys:
        values = []
        for c in configs:
            if c.get(key) not in values:
                values.append(c.get(key))
        if len(values) > 1:
            out[key] = values
    return out


def incomparable(groups: dict) -> dict:
    """Per group, why it cannot be compared: settings that differ between its seeds, or between the samplers
    of its agent and environment beyond the sampler and its ``replay.*`` settings."""
    notes = {}
    by_task = defaultdict(dict)
    for key, runs in groups.items():
        by_task[key[:2]][key[2]] = runs
        unread = unread_by(key[2])
        within = differing([r["config"] for r in runs], skip=lambda k, unread=unread: k.startswith(unread))
        if within:
            notes[key] = "seeds differ in " + "; ".join(f"{k} ({', '.join(map(str, v))})" for k, v in within.items())
        folders = defaultdict(list)
        for r in runs:
            folders[r["seed"]].append(str(r["folder"]))
        twice = {seed: f for seed, f in folders.items() if len(f) > 1}
        if twice:
            text = "the same seed in several run folders (a copy counted twice?): " + "; ".join(
                f"seed {seed} in {', '.join(f)}" for seed, f in sorted(twice.items(), key=lambda x: seed_order(x[0])))
            notes[key] = f"{notes[key]}; {text}" if key in notes else text
    for (agent, env), samplers in by_task.items():
        if len(samplers) < 2:
            continue
        across = differing([runs[0]["config"] for runs in samplers.values()],
                           skip=lambda k: k == "sampler" or k.startswith(("replay.", "method.")))  # fmt: skip
        if across:
            text = "samplers differ in " + "; ".join(f"{k} ({', '.join(map(str, v))})" for k, v in across.items())
            for sampler in samplers:
                key = (agent, env, sampler)
                notes[key] = f"{notes[key]}; {text}" if key in notes else text
    return notes


def column(rows: list[dict], key: str) -> np.ndarray:
    return np.array([float(r.get(key, "nan") or "nan") for r in rows])


def seed_order(seed) -> tuple:
    """Sort key of a recorded seed: integers in order, anything else after them."""
    return (0, seed, "") if isinstance(seed, int) and not isinstance(seed, bool) else (1, 0, str(seed))


def grouped(runs: list[dict]) -> dict:
    """``(agent, env, sampler) -> runs``, each group's runs in the order of their seeds."""
    groups = defaultdict(list)
    for r in sorted(runs, key=lambda r: (seed_order(r["seed"]), str(r["folder"]))):
        groups[(r["agent"], r["env"], r["sampler"])].append(r)
    return groups


def aligned(runs: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """The evaluation steps every run of a group logged and the (runs x steps) values of ``key`` at them."""
    common = sorted(set.intersection(*(set(column(r["rows"], "step")) for r in runs)))
    values = []
    for r in runs:
        at = dict(zip(column(r["rows"], "step"), column(r["rows"], key), strict=True))
        values.append([at[step] for step in common])
    return np.array(common), np.array(values, dtype=float).reshape(len(runs), len(common))


def build_table(groups: dict, notes: dict | None = None) -> list[dict]:
    notes = notes or {}
    table = []
    for (agent, env, sampler), runs in sorted(groups.items()):
        finals = np.array([column(r["rows"], "return_mean")[-LAST:].mean() for r in runs])
        mean, half = mean_ci(finals)
        table.append({
            "agent": agent, "env": env, "sampler": sampler, "seeds": len(runs),
            "last_step": int(min(column(r["rows"], "step")[-1] for r in runs)),
            "return_last10_mean": float(mean), "ci95": float(half),
            "finished": sum(r["finished"] for r in runs),
            "not_comparable": notes.get((agent, env, sampler), ""),
        })  # fmt: skip
    return table


def table_markdown(table: list[dict]) -> str:
    lines = ["| agent | env | sampler | seeds | steps | return (last 10 evals) ± 95 % CI |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for t in table:
        ci = "n/a (1 seed)" if math.isnan(t["ci95"]) else f"{t['ci95']:.1f}"
        unfinished = "" if t["finished"] == t["seeds"] else f" ({t['seeds'] - t['finished']} partial)"
        lines.append(f"| {t['agent']} | {t['env']} | {t['sampler']} | {t['seeds']}{unfinished} | {t['last_step']} "
                     f"| {t['return_last10_mean']:.1f} ± {ci} |")  # fmt: skip
    flagged = [t for t in table if t.get("not_comparable")]
    if flagged:
        lines.append("")
        lines.append("**Not comparable** (left out of every other table and of the figures):")
        lines += [f"- {t['agent']} {t['env']} {t['sampler']}: {t['not_comparable']}" for t in flagged]
    return "\n".join(lines) + "\n"


def last_values(runs: list[dict], key: str) -> np.ndarray:
    """``key`` at each run's last evaluation."""
    return np.array([column(r["rows"], key)[-1] for r in runs])


TABLE3_KEYS = ("td_mean", "td_std", "q_mean", "q_std")
TABLE3_TITLES = ("|TD error| mean", "|TD error| std", "Q mean", "Q std")


def ners_table3(groups: dict) -> str:
    """NERS Table 3's statistics of the drawn transitions at the last evaluation, mean over seeds; with at least
    :data:`MIN_CI_RUNS` seeds each cell also gives the 95 % t-interval half-width across seeds."""
    lines = ["| agent | env | sampler | seeds | |TD error| mean | |TD error| std | Q mean | Q std |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (agent, env, sampler), runs in sorted(groups.items()):
        cells = []
        for k, digits in zip(TABLE3_KEYS, (3, 3, 2, 2), strict=True):
            mean, half = mean_ci(last_values(runs, k))
            cells.append(f"{mean:.{digits}f} ± {half:.{digits}f}" if len(runs) >= MIN_CI_RUNS else f"{mean:.{digits}f}")
        lines.append(f"| {agent} | {env} | {sampler} | {len(runs)} | " + " | ".join(cells) + " |")
    if any(len(runs) >= MIN_CI_RUNS for runs in groups.values()):
        lines += ["", "± : 95 % t-interval half-width across seeds."]
    lines += table3_differences(groups, TABLE3_KEYS)
    return "\n".join(lines) + "\n"


def plot_table3(groups: dict, out: Path) -> list[Path]:
    """``table3_<agent>_<env>.png``: NERS Table 3's four statistics at the last evaluation, one panel each;
    every seed as a dot and, with at least two seeds, the mean with its 95 % t-interval, per sampler (the
    samplers whose runs all logged the four)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_task = defaultdict(dict)
    for (agent, env, sampler), runs in groups.items():
        if all(np.isfinite(last_values(runs, k)).all() for k in TABLE3_KEYS):
            by_task[(agent, env)][sampler] = runs
    written = []
    for (agent, env), samplers in sorted(by_task.items()):
        names = sorted(samplers)
        fig, axes = plt.subplots(1, 4, figsize=(12.5, 3.2))
        for ax, key, title in zip(axes, TABLE3_KEYS, TABLE3_TITLES, strict=True):
            for x, sampler in enumerate(names):
                values = last_values(samplers[sampler], key)
                offsets = np.linspace(-0.15, 0.15, values.size) if values.size > 1 else np.zeros(1)
                ax.plot(x + offsets, values, "o", color=f"C{x}", ms=3.5, alpha=0.5)
                if values.size > 1:
                    mean, half = mean_ci(values)
                    ax.errorbar(x + 0.3, mean, yerr=half, fmt="s", color=f"C{x}", ms=5, capsize=3)
            ax.set_xticks(range(len(names)), names, fontsize=8)
            ax.set_title(title, fontsize=9)
            ax.tick_params(axis="y", labelsize=7)
        fig.suptitle(f"Drawn transitions at the last evaluation, {agent.upper()} on {env} (NERS Table 3's "
                     "statistics)", fontsize=10)  # fmt: skip
        fig.text(0.01, -0.02, "Dots: each seed; square and bar: mean over seeds with its 95 % t-interval.",
                 fontsize=7, ha="left", va="top")  # fmt: skip
        path = out / f"table3_{agent}_{env.replace('/', '-')}.png"
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)
    return written


NO_SPREAD = "(no interval: every seed alike on both sides)"


def welch_ci(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """``mean(a) - mean(b)`` and its 95 % Welch interval (independent samples, unequal variances); NaN bounds
    when neither sample varies (every seed alike on both sides: the t-interval is undefined)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        return diff, math.nan, math.nan
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = t_quantile(df) * se
    return diff, diff - half, diff + half


def table3_differences(groups: dict, keys: tuple[str, ...]) -> list[str]:
    """Lines of a table of every pair of samplers of an (agent, env) with at least :data:`MIN_CI_RUNS` seeds
    each: the difference of each statistic's mean over seeds with its Welch 95 % interval, starred when the
    interval excludes 0."""
    by_task = defaultdict(dict)
    for (agent, env, sampler), runs in groups.items():
        if len(runs) >= MIN_CI_RUNS:
            by_task[(agent, env)][sampler] = {k: last_values(runs, k) for k in keys}
    lines = []
    for (agent, env), samplers in sorted(by_task.items()):
        names = sorted(samplers)
        if len(names) < 2:
            continue
        lines += ["", f"Differences between samplers, {agent} on {env} (row sampler minus column sampler; "
                  "Welch 95 % interval; * : the interval excludes 0; no spread: every seed alike on both sides, no "
                  "interval):", "",
                  "| pair | |TD error| mean | |TD error| std | Q mean | Q std |", "|---|---|---|---|---|"]  # fmt: skip
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                cells = []
                for k in keys:
                    d, lo, hi = welch_ci(samplers[a][k], samplers[b][k])
                    star = "*" if lo > 0 or hi < 0 else ""
                    cells.append(f"{d:.3g} [{lo:.3g}, {hi:.3g}]{star}" if math.isfinite(lo) else f"{d:.3g} (no spread)")
                lines.append(f"| {a} − {b} | " + " | ".join(cells) + " |")
    return lines


def _reference_scores(ax, env: str, lo: float, hi: float) -> tuple[float, float]:
    """On an Atari game, dotted lines at the random agent's score and, when it is within twice the curves'
    range of them, the human's (PSER appendix table); the y range grows to hold them."""
    game = atari_game(env)
    if game is None or game not in SCORES:
        return lo, hi
    random, human = SCORES[game]
    ax.axhline(random, color="0.45", ls=":", lw=1.2, label=f"random agent ({random:g})")
    lo, hi = min(lo, random), max(hi, random)
    if lo - 2 * (hi - lo) <= human <= hi + 2 * (hi - lo):
        ax.axhline(human, color="0.2", ls="--", lw=1.0, label=f"human ({human:g})")
        lo, hi = min(lo, human), max(hi, human)
    return lo, hi


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
            ax.plot(steps, mean, color=color, lw=1.8, label=f"{sampler} ({len(runs)} seed{'s' * (len(runs) > 1)})")
            for v in values:  # each seed, faint
                ax.plot(steps, v, color=color, lw=0.6, alpha=0.35)
            if len(runs) > 1:
                ax.fill_between(steps, mean - half, mean + half, color=color, alpha=0.12, lw=0)
            lo, hi = min(lo, float(values.min())), max(hi, float(values.max()))
        lo, hi = _reference_scores(ax, env, lo, hi)
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        ax.set_ylim(lo - pad, hi + pad)  # the seeds' range: a wide band (few seeds) runs off the plot
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"return (smoothed over {SMOOTH} evals)")
        ax.set_title(f"{agent.upper()} on {env}")
        ax.legend(fontsize=8)
        caption = ("Thick: mean over seeds; band: 95 % t-interval of the mean; faint: each seed. "
                   "The y axis spans the seeds' values, so a wide band (few seeds) runs off it.")
        fig.text(0.01, -0.02, caption, fontsize=7, ha="left", va="top")
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


def final_score(run: dict) -> float:
    """Mean return over the run's last 10 evaluations (LAP/PAL App. D: the final score)."""
    return float(column(run["rows"], "return_mean")[-LAST:].mean())


def gains(groups: dict, baselines=("uniform", "per")) -> list[dict]:
    """Mean and median % gain (x - y) / |y| of each sampler's mean final score over each baseline's, over the
    environments both ran (LAP/PAL Table 2)."""
    finals = {k: np.mean([final_score(r) for r in runs]) for k, runs in groups.items()}
    out = []
    agents = sorted({a for a, _, _ in finals})
    for agent in agents:
        samplers = sorted({s for a, _, s in finals if a == agent})
        for base in baselines:
            for sampler in samplers:
                if sampler == base:
                    continue
                envs = sorted(e for a, e, s in finals if a == agent and s == sampler and (agent, e, base) in finals)
                vals = [(finals[(agent, e, sampler)] - finals[(agent, e, base)]) / abs(finals[(agent, e, base)])
                        for e in envs if finals[(agent, e, base)] != 0]  # fmt: skip
                if vals:
                    seeds = min(min(len(groups[(agent, e, sampler)]), len(groups[(agent, e, base)])) for e in envs)
                    out.append({"agent": agent, "sampler": sampler, "baseline": base, "envs": len(vals), "seeds": seeds,
                                "mean_gain_pct": 100 * float(np.mean(vals)),
                                "median_gain_pct": 100 * float(np.median(vals))})  # fmt: skip
    return out


CLAIMS = {"uniform": None, "per": ("lap", "pal", "pser", "ners"), "lap": ("pal",)}
"""The comparisons the papers make, baseline -> samplers (None: every other): each sampler over uniform replay;
LAP and PAL (LAP/PAL Tables 1-2), PSER (its Atari table) and NERS against PER; PAL against LAP, its uniform
twin with the same expected gradient (LAP/PAL Theorem 1), where a P near 0.5 is the claim."""


def _welch_row(x: np.ndarray, y: np.ndarray) -> dict:
    """Mean final scores ``x`` minus ``y`` with the 95 % Welch interval, absolute and as % of |mean(y)|."""
    diff, lo, hi = welch_ci(x, y)
    scale = abs(float(y.mean()))
    rel = [100 * v / scale if scale > 0 else math.nan for v in (diff, lo, hi)]
    return {"difference": diff, "lo": lo, "hi": hi, "pct": rel[0], "pct_lo": rel[1], "pct_hi": rel[2]}


def _intervals(r: dict) -> tuple[str, str]:
    """A difference row's absolute and relative intervals as table text (:func:`_welch_row`'s fields)."""
    if not math.isfinite(r["lo"]):
        return NO_SPREAD, NO_SPREAD
    return f"[{r['lo']:+.3g}, {r['hi']:+.3g}]", f"[{_percent(r['pct_lo'])}, {_percent(r['pct_hi'])}]"


def differences(groups: dict, claims: dict | None = None) -> list[dict]:
    """Per agent and environment, for each comparison of ``claims`` (default :data:`CLAIMS`): the difference of
    the mean final scores (:func:`final_score`) X - Y with its 95 % Welch interval over the seeds, absolute and
    as a share of |Y's mean|; groups with at least 2 seeds each."""
    rows = []
    for baseline, samplers in (CLAIMS if claims is None else claims).items():
        for (agent, env, sampler), runs in sorted(groups.items()):
            base = groups.get((agent, env, baseline))
            if sampler == baseline or base is None or (samplers is not None and sampler not in samplers):
                continue
            if len(runs) < 2 or len(base) < 2:
                continue
            x, y = np.array([final_score(r) for r in runs]), np.array([final_score(r) for r in base])
            rows.append({"agent": agent, "env": env, "sampler": sampler, "baseline": baseline,
                         "seeds": len(runs), "baseline_seeds": len(base), **_welch_row(x, y)})  # fmt: skip
    return rows


def _percent(x: float) -> str:
    """A signed whole percentage; one significant digit where that would round a non-zero value to 0."""
    text = f"{x:+.0f}"
    if x == 0 or text not in ("+0", "-0"):
        return text
    return f"{x:+.1g}" if abs(x) >= 0.01 else f"{x:+.2f}"


def differences_markdown(rows: list[dict]) -> str:
    lines = ["| agent | env | sampler | vs | seeds | X - Y [95 % CI] | % of Y [95 % CI] |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        few = r["seeds"] < MIN_CI_RUNS or r["baseline_seeds"] < MIN_CI_RUNS
        seeds = f"{r['seeds']} / {r['baseline_seeds']}" + (" (few seeds)" if few else "")
        cis = _intervals(r)
        lines.append(f"| {r['agent']} | {r['env']} | {r['sampler']} | {r['baseline']} | {seeds} | "
                     f"{r['difference']:+.3g} {cis[0]} | {_percent(r['pct'])} % {cis[1]} |")  # fmt: skip
    lines += ["", "Mean final score (last 10 evaluations) of X minus Y's, with the 95 % Welch t-interval over the "
              "seeds (independent runs, unequal variances); the comparisons the papers make (CLAIMS)."]
    if any(r["seeds"] < MIN_CI_RUNS or r["baseline_seeds"] < MIN_CI_RUNS for r in rows):
        lines.append(f"(few seeds): fewer than {MIN_CI_RUNS} seeds on a side; the interval is not meaningful.")
    return "\n".join(lines) + "\n"


def gains_markdown(rows: list[dict]) -> str:
    lines = ["| agent | sampler | vs | envs | seeds | mean % gain | median % gain |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        few = " (few seeds)" if r["seeds"] < MIN_CI_RUNS else ""
        lines.append(f"| {r['agent']} | {r['sampler']} | {r['baseline']} | {r['envs']} | {r['seeds']}{few} | "
                     f"{r['mean_gain_pct']:+.2f} % | {r['median_gain_pct']:+.2f} % |")  # fmt: skip
    if any(r["seeds"] < MIN_CI_RUNS for r in rows):
        lines += ["", f"(few seeds): a gain from fewer than {MIN_CI_RUNS} seeds per sampler is the difference of "
                      "these runs, not an estimate one can rely on: seed-to-seed spread is often larger."]
    return "\n".join(lines) + "\n"


def human_normalised(groups: dict) -> list[dict]:
    """Per (agent, sampler): each game's human-normalised mean final score, and their mean and median
    (PER/PSER convention, the PSER appendix's human and random scores)."""
    per_key = defaultdict(dict)
    for (agent, env, sampler), runs in groups.items():
        game = atari_game(env)
        if game is None or game not in SCORES:
            continue
        per_key[(agent, sampler)][game] = normalise_human(game, np.mean([final_score(r) for r in runs]))
    out = []
    for (agent, sampler), games in sorted(per_key.items()):
        vals = np.array(list(games.values()))
        out.append({"agent": agent, "sampler": sampler, "games": len(vals), "mean": float(vals.mean()),
                    "median": float(np.median(vals)),
                    "per_game": {g: float(v) for g, v in sorted(games.items())}})  # fmt: skip
    return out


@contextmanager
def rliable_seeded(seed: int = 0):
    """rliable's bootstraps draw their indices from NumPy's global generator (its ``random_state`` reaches
    only arch's own generator): seed that for reproducible intervals, and give the caller its state back."""
    saved = np.random.get_state()  # noqa: NPY002
    np.random.seed(seed)  # noqa: NPY002
    try:
        with warnings.catch_warnings():  # arch's notice that random_state will become a NumPy Generator
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        np.random.set_state(saved)  # noqa: NPY002


def aggregates(groups: dict, out: Path, reps: int | None = None, left_out: list[str] | None = None) -> list[dict]:
    """IQM, mean and median with 95 % stratified-bootstrap CIs (rliable), and performance profiles.

    Tasks are the Atari games of an agent (human-normalised scores), its MinAtar games (normalised by
    :func:`minatar_normalised`) or one other environment; the score matrix of a sampler is runs x tasks
    (:func:`score_matrices`, which appends what it leaves out to ``left_out``).  The bootstrap is seeded, so a
    report is reproducible.  Rows with fewer than :data:`MIN_CI_RUNS` runs carry ``ci_meaningful = False``.
    """
    from rliable import library as rly
    from rliable import metrics

    def agg(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x)])

    rows = []
    for (agent, domain), score_dict in score_matrices(groups, left_out).items():
        with rliable_seeded():
            point, ci = rly.get_interval_estimates(score_dict, agg, reps=reps or BOOTSTRAP_REPS,
                                                   random_state=np.random.RandomState(0))  # fmt: skip
        for s in sorted(score_dict):
            n, tasks = score_dict[s].shape
            row = {"agent": agent, "domain": domain, "sampler": s, "runs": n, "tasks": tasks,
                   "ci_meaningful": n >= MIN_CI_RUNS}  # fmt: skip
            for i, m in enumerate(("iqm", "mean", "median")):
                row.update({m: float(point[s][i]), f"{m}_lo": float(ci[s][0, i]), f"{m}_hi": float(ci[s][1, i])})
            rows.append(row)
        plot_profiles(score_dict, agent, domain, out, rly)
    return rows


def minatar_normalised(groups: dict) -> dict:
    """``(agent, env, sampler) -> (scores - random) / (uniform - random)`` for MinAtar groups: 0 is random play
    (:data:`prioritylab.scores.MINATAR_RANDOM`), 1 the mean final score of the same agent with ``uniform``
    replay on that game.  Games without a uniform group, or whose uniform mean is not above random play,
    are left out (nothing to normalise by)."""
    out = {}
    for (agent, env, sampler), runs in groups.items():
        game = minatar_game(env)
        base = groups.get((agent, env, "uniform"))
        if game not in MINATAR_RANDOM or not base:
            continue
        random = MINATAR_RANDOM[game]
        ref = float(np.mean([final_score(r) for r in base]))
        if ref <= random:
            continue
        out[(agent, env, sampler)] = (np.array([final_score(r) for r in runs]) - random) / (ref - random)
    return out


def score_cells(groups: dict) -> dict:
    """``(agent, domain) -> sampler -> task -> {seed: score}``: Atari games human-normalised, MinAtar games by
    :func:`minatar_normalised`, any other environment a domain of its own (raw returns)."""
    minatar = minatar_normalised(groups)
    domains = defaultdict(lambda: defaultdict(dict))
    for (agent, env, sampler), runs in groups.items():
        game = atari_game(env)
        scores = np.array([final_score(r) for r in runs])
        if game is not None and game in SCORES:
            domain, task, scores = "Atari (human-normalised)", game, normalise_human(game, scores)
        elif minatar_game(env) is not None:
            if (agent, env, sampler) not in minatar:
                continue
            domain, task, scores = "MinAtar (0 = random, 1 = uniform)", env, minatar[(agent, env, sampler)]
        else:
            domain, task = env, env
        domains[(agent, domain)][sampler][task] = dict(zip((r["seed"] for r in runs), scores, strict=True))
    return domains


def _tasks(cells: dict) -> set:
    """The tasks on which a sampler has at least 2 runs."""
    return {t for t, seeds in cells.items() if len(seeds) >= 2}


def _matrix(cells: dict, tasks: list) -> np.ndarray:
    """runs x tasks: the sampler's lowest seeds, as many on each task as on its task with the fewest."""
    n = min(len(cells[t]) for t in tasks)
    return np.stack([np.array([cells[t][seed] for seed in sorted(cells[t], key=seed_order)[:n]]) for t in tasks], 1)


def _most_cells(samplers: dict) -> tuple[list[str], list]:
    """The samplers and tasks of a domain's tables: of every set of samplers, the one whose common tasks (each
    sampler with at least 2 runs on each) give the most sampler-task cells, then the most samplers, then the most
    tasks: a sampler run on few tasks (a pilot) is left out rather than cutting every other sampler's tasks, and a
    task that only some samplers have reached is left out rather than every other sampler."""
    names = sorted(s for s in samplers if _tasks(samplers[s]))
    best, best_key = ([], []), (0, 0, 0)
    for k in range(len(names), 0, -1):
        for subset in combinations(names, k):
            tasks = sorted(set.intersection(*(_tasks(samplers[s]) for s in subset)))
            key = (len(subset) * len(tasks), len(subset), len(tasks))
            if key > best_key:
                best, best_key = (list(subset), tasks), key
    return best


def score_matrices(groups: dict, left_out: list[str] | None = None) -> dict:
    """``(agent, domain) -> sampler -> runs x tasks`` score matrices for rliable (:func:`score_cells`).  The samplers
    and tasks are chosen by :func:`_most_cells`; each sampler has its own seeds, its lowest, as many on each task as on
    its task with the fewest (so one sampler's seeds never cut another's).  What is left out is appended to
    ``left_out``, one line each."""
    out = {}
    for key, samplers in sorted(score_cells(groups).items()):
        names, tasks = _most_cells(samplers)
        if left_out is not None:
            for s in sorted(set(samplers) - set(names)):
                have = sorted(_tasks(samplers[s]))
                left_out.append(f"{key[0]}, {key[1]}: {s} left out (at least 2 runs on {len(have)} task(s): "
                                f"{', '.join(map(str, have)) or 'none'}; the others share {len(tasks)})")  # fmt: skip
            every = sorted(set().union(*(samplers[s] for s in samplers)) - set(tasks))
            for t in every:
                left_out.append(f"{key[0]}, {key[1]}: task {t} left out (not every sampler has 2 runs on it)")
        if names:
            out[key] = {s: _matrix(samplers[s], tasks) for s in names}
    return out


def improvement(groups: dict, reps: int | None = None, claims: dict | None = None) -> list[dict]:
    """rliable's probability of improvement P(X > Y) of sampler X over baseline Y for each comparison of
    ``claims`` (default :data:`CLAIMS`), per (agent, domain), with its 95 % stratified-bootstrap interval
    (seeded).  Each comparison uses the tasks on which both samplers have at least 2 runs, and each sampler's
    own lowest seeds (as :func:`score_matrices`), whatever other samplers ran."""
    cells = score_cells(groups)
    rows = []
    for baseline, samplers in (CLAIMS if claims is None else claims).items():
        rows += _improvement(cells, reps or BOOTSTRAP_REPS, baseline, samplers)
    return rows


def _improvement(cells: dict, reps: int, baseline: str, samplers: tuple[str, ...] | None) -> list[dict]:
    from rliable import library as rly
    from rliable import metrics

    rows = []
    for (agent, domain), by_sampler in sorted(cells.items()):
        if baseline not in by_sampler:
            continue
        pairs = {}
        for s in sorted(by_sampler):
            if s == baseline or (samplers is not None and s not in samplers):
                continue
            tasks = sorted(_tasks(by_sampler[s]) & _tasks(by_sampler[baseline]))
            if tasks:
                pairs[s] = (_matrix(by_sampler[s], tasks), _matrix(by_sampler[baseline], tasks))
        if not pairs:
            continue
        with rliable_seeded():
            point, ci = rly.get_interval_estimates(pairs, metrics.probability_of_improvement, reps=reps,
                                                   random_state=np.random.RandomState(0))  # fmt: skip
        for s, (x, y) in pairs.items():
            n, tasks = min(x.shape[0], y.shape[0]), y.shape[1]
            rows.append({"agent": agent, "domain": domain, "sampler": s, "baseline": baseline, "runs": n,
                         "tasks": tasks, "p_improvement": float(np.squeeze(point[s])),
                         "lo": float(np.squeeze(ci[s])[0]), "hi": float(np.squeeze(ci[s])[1]),
                         "ci_meaningful": n >= MIN_CI_RUNS})  # fmt: skip
    return rows


def interval(value: float, lo: float, hi: float, meaningful: bool) -> str:
    """``value [lo, hi]``, or the value alone (marked) when the interval rests on too few runs."""
    return f"{value:.3g} [{lo:.3g}, {hi:.3g}]" if meaningful else f"{value:.3g} (no CI)"


FEW_RUNS_NOTE = (f"(no CI): fewer than {MIN_CI_RUNS} runs per task, too few for a meaningful bootstrap interval; "
                 "the point estimate describes these runs only.")


def plot_profiles(score_dict: dict, agent: str, domain: str, out: Path, rly) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    allv = np.concatenate([v.ravel() for v in score_dict.values()])
    taus = np.linspace(allv.min(), allv.max(), 101)
    with rliable_seeded():
        profiles, cis = rly.create_performance_profile(score_dict, taus, reps=PROFILE_REPS)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for k, s in enumerate(sorted(score_dict)):
        ax.plot(taus, profiles[s], color=f"C{k}", label=s)
        ax.fill_between(taus, cis[s][0], cis[s][1], color=f"C{k}", alpha=0.15, lw=0)
    ax.set_xlabel("final score" + (" (human-normalised)" if domain.startswith("Atari") else ""))
    ax.set_ylabel("fraction of runs with score > x")
    ax.set_title(f"Performance profile, {agent.upper()} on {domain}", fontsize=10)
    ax.legend(fontsize=8)
    fig.text(0.01, -0.02, "Band: 95 % stratified-bootstrap interval (rliable).", fontsize=7, ha="left", va="top")
    name = domain.split(" ")[0].replace("/", "-")
    path = out / f"profiles_{agent}_{name}.png"
    save_figure(fig, path)
    plt.close(fig)
    return path


def overhead(groups: dict) -> list[dict]:
    """Wall time of each group's runs (the last ``timing.csv`` row) and its increase over uniform's, same agent
    and env (LAP/PAL App. B, Table 3: run time and % increase)."""
    walls = {}
    for key, runs in groups.items():
        times = []
        for r in runs:
            try:
                with open(r["folder"] / "timing.csv", newline="") as fh:
                    rows = list(csv.DictReader(fh))
                times.append(float(rows[-1]["wall_time"]))
            except (OSError, KeyError, IndexError, ValueError):
                continue
        if times:
            walls[key] = times
    out = []
    for (agent, env, sampler), times in sorted(walls.items()):
        mean, half = mean_ci(np.array(times))
        base = walls.get((agent, env, "uniform"))
        inc = 100 * (mean / np.mean(base) - 1) if base else math.nan
        out.append({"agent": agent, "env": env, "sampler": sampler, "runs": len(times),
                    "wall_minutes": float(mean) / 60, "ci95_minutes": float(half) / 60,
                    "increase_over_uniform_pct": float(inc)})  # fmt: skip
    return out


OVERHEAD_CAVEAT = ("**Caveat: wall times of sweep runs on a shared machine.** Each run's time includes whatever "
                   "else ran beside it (other runs, tests, builds), so these rows are no measure of a sampler's "
                   "cost; `prioritylab bench agent` measures that side by side (docs/benchmarks.md).")


def overhead_markdown(rows: list[dict]) -> str:
    lines = [OVERHEAD_CAVEAT, "",
             "| agent | env | sampler | runs | wall time (min) ± 95 % CI | increase over uniform |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        ci = "" if math.isnan(r["ci95_minutes"]) else f" ± {r['ci95_minutes']:.2f}"
        inc = "—" if math.isnan(r["increase_over_uniform_pct"]) or r["sampler"] == "uniform" else \
            f"{r['increase_over_uniform_pct']:+.1f} %"
        lines.append(f"| {r['agent']} | {r['env']} | {r['sampler']} | {r['runs']} | {r['wall_minutes']:.2f}{ci} "
                     f"| {inc} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _is_value(recorded_value, text: str) -> bool:
    """Whether a recorded setting equals ``text`` as given on the command line: numbers as numbers (1e-5 is
    1e-05), other values as the manifest's JSON writes them (``false``, ``null``, ``[256, 128]``) or as Python
    prints them."""
    if isinstance(recorded_value, (int, float)) and not isinstance(recorded_value, bool):
        try:
            return float(text) == float(recorded_value)
        except ValueError:
            return False
    try:
        if json.loads(text) == recorded_value:
            return True
    except ValueError:
        pass
    return str(recorded_value) == text


def split_against(runs: list[dict], key: str, value: str) -> tuple[list[dict], list[dict]]:
    """``--against KEY=VALUE``: the runs compared (every run but those recorded with ``KEY`` = ``VALUE``, and the
    runs of samplers that do not read ``KEY``) and the reference runs (``KEY`` = ``VALUE``).  ``ValueError`` if
    no run or every run holds ``VALUE``, if a run whose sampler reads ``KEY`` has no record of it, or if the
    compared runs hold more than one other value."""
    compared, reference, others = [], [], []
    for r in runs:
        if key.startswith(unread_by(r["sampler"])):
            compared.append(r)
            continue
        if key not in r["config"]:
            resolved = "method." + key.split(".", 1)[1] if key.startswith("replay.") else None
            hint = f" (its resolved value is {resolved})" if resolved in r["config"] else ""
            raise ValueError(f"--against {key}={value}: {r['folder']} has no recorded {key}{hint}")
        if _is_value(r["config"][key], value):
            reference.append(r)
        else:
            compared.append(r)
            if r["config"][key] not in others:
                others.append(r["config"][key])
    if not reference:
        raise ValueError(f"--against {key}={value}: no run was recorded with {key} = {value}")
    if not compared:
        raise ValueError(f"--against {key}={value}: every run was recorded with {key} = {value}; there is nothing "
                         "to compare with them")  # fmt: skip
    if len(others) > 1:
        raise ValueError(f"--against {key}={value}: the other runs hold {len(others)} values of {key} "
                         f"({', '.join(map(repr, others))}); --against compares one value with the reference")
    return compared, reference


def _twice(runs: list[dict]) -> list:
    """The seeds that appear in more than one of ``runs``' folders (a copied run)."""
    seeds = [r["seed"] for r in runs]
    return sorted({s for s in seeds if seeds.count(s) > 1}, key=seed_order)


def versus(groups: dict, reference: dict, key: str) -> list[dict]:
    """Per (agent, environment, sampler) with at least 2 runs on both sides: the mean final score of the compared
    runs minus the reference runs', with its 95 % Welch interval, absolute and as a share of |the reference's
    mean|.  A row whose runs differ in another setting than ``key`` (the seed and the bookkeeping ones aside),
    or hold one seed in two folders on a side, is marked not comparable instead."""
    rows = []
    for k, runs in sorted(groups.items()):
        base = reference.get(k)
        if base is None or len(runs) < 2 or len(base) < 2:
            continue
        unread = unread_by(k[2])
        apart = differing([r["config"] for r in runs + base], skip=lambda c, u=unread: c == key or c.startswith(u))
        why = [f"they also differ in {c} ({', '.join(map(str, v))})" for c, v in apart.items()]
        why += [f"seed {', '.join(map(str, _twice(side)))} twice {where}"
                for side, where in ((runs, "among the compared runs"), (base, "among the reference runs"))
                if _twice(side)]  # fmt: skip
        x, y = np.array([final_score(r) for r in runs]), np.array([final_score(r) for r in base])
        rows.append({"agent": k[0], "env": k[1], "sampler": k[2], "value": runs[0]["config"].get(key),
                     "reference": base[0]["config"].get(key), "seeds": len(runs), "reference_seeds": len(base),
                     "partial": sum(not r["finished"] for r in runs),
                     "reference_partial": sum(not r["finished"] for r in base),
                     "mean": float(x.mean()), "reference_mean": float(y.mean()), **_welch_row(x, y),
                     "not_comparable": "; ".join(why)})
    return rows


def versus_markdown(rows: list[dict], key: str) -> str:
    lines = [f"| agent | env | sampler | {key} | reference {key} | seeds | mean | reference mean | "
             "difference [95 % CI] | % of reference [95 % CI] |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        few = r["seeds"] < MIN_CI_RUNS or r["reference_seeds"] < MIN_CI_RUNS
        seeds = f"{r['seeds']} / {r['reference_seeds']}" + (" (few seeds)" if few else "")
        if r["partial"] or r["reference_partial"]:
            seeds += f" ({r['partial']} / {r['reference_partial']} partial)"
        cis = ("not comparable: " + r["not_comparable"],) * 2 if r["not_comparable"] else _intervals(r)
        lines.append(f"| {r['agent']} | {r['env']} | {r['sampler']} | {r['value']} | {r['reference']} | {seeds} | "
                     f"{r['mean']:.3g} | {r['reference_mean']:.3g} | {r['difference']:+.3g} {cis[0]} | "
                     f"{_percent(r['pct'])} % {cis[1]} |")  # fmt: skip
    lines += ["", f"Each sampler's runs against its own runs at the reference {key}: the difference of the mean final "
              "scores (last 10 evaluations) with the 95 % Welch t-interval over the seeds; every other table here "
              "holds the compared runs only."]
    return "\n".join(lines) + "\n"


def report(root: Path | Sequence[Path], out: Path, include_partial: bool = False,
           against: tuple[str, str] | None = None) -> dict:
    """Tables and figures in ``out`` from the run folders under ``root``: one folder, or several (a study's
    runs beside another study's control runs, or single run folders), each run counted once."""
    roots = [Path(root)] if isinstance(root, (str, Path)) else [Path(r) for r in root]
    where = ", ".join(map(str, roots))
    found, status, seen = [], [], set()
    for one in roots:
        runs_here, status_here = find_runs(one, exclude=out)
        found += [r for r in runs_here if Path(r["folder"]).resolve() not in seen]
        status += [x for x in status_here if Path(x["folder"]).resolve() not in seen]
        seen |= {Path(r["folder"]).resolve() for r in runs_here} | {Path(x["folder"]).resolve() for x in status_here}
    if not found and not status:
        raise ValueError(f"no run folders (manifest.json + evaluations.csv) under {where}")
    runs = [r for r in found if (r["finished"] or include_partial) and not never_updated(r)]
    reference_runs: list[dict] = []
    if against is not None and runs:
        runs, reference_runs = split_against(runs, *against)
    in_reference = {id(r) for r in reference_runs}
    for r in found:
        last = int(column(r["rows"], "step")[-1])
        if never_updated(r):
            status.append({"folder": str(r["folder"]), "status": "no updates, left out",
                           "detail": f"0 updates by step {last}: a random policy's returns (steps <= start_steps?)"})
            continue
        if id(r) in in_reference:
            state = f"reference ({against[0]} = {against[1]}), in versus.md only" + ("" if r["finished"] else
                                                                                     ", partial")
        elif r["finished"]:
            state = "used"
        else:
            state = "used, partial" if include_partial else "partial, left out"
        status.append({"folder": str(r["folder"]), "status": state,
                       "detail": f"last evaluation at step {last} of {r['steps']}"})  # fmt: skip
    status.sort(key=lambda x: x["folder"])
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| run folder | status | detail |", "|---|---|---|"]
    lines += [f"| {x['folder']} | {x['status']} | {x['detail']} |" for x in status]
    (out / "status.md").write_text("\n".join(lines) + "\n")
    if not runs:
        raise ValueError(f"no finished runs under {where} (see {out / 'status.md'}; --include-partial uses the "
                         "others)")
    groups = grouped(runs)
    notes = incomparable(groups)
    table = build_table(groups, notes)
    comparable = {k: v for k, v in groups.items() if k not in notes}
    write_csv(out / "table.csv", table)
    (out / "table.md").write_text(table_markdown(table))
    (out / "ners_table3.md").write_text(ners_table3(comparable))
    gain_rows = gains(comparable)
    write_csv(out / "gains.csv", gain_rows)
    (out / "gains.md").write_text(gains_markdown(gain_rows))
    hn = human_normalised(comparable)
    if hn:
        write_csv(out / "human_normalised.csv", [{k: v for k, v in r.items() if k != "per_game"} for r in hn])
        lines = ["| agent | sampler | games | mean | median |", "|---|---|---|---|---|"]
        lines += [f"| {r['agent']} | {r['sampler']} | {r['games']} | {r['mean']:.3f} | {r['median']:.3f} |" for r in hn]
        (out / "human_normalised.md").write_text("\n".join(lines) + "\n")
    left = []
    agg = aggregates(comparable, out, left_out=left)
    write_csv(out / "aggregates.csv", agg)
    lines = ["| agent | domain | sampler | runs x tasks | IQM [95 % CI] | mean [95 % CI] | median [95 % CI] |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r['agent']} | {r['domain']} | {r['sampler']} | {r['runs']} x {r['tasks']} | "
              + " | ".join(interval(r[m], r[m + "_lo"], r[m + "_hi"], r["ci_meaningful"])
                           for m in ("iqm", "mean", "median"))
              + " |" for r in agg]  # fmt: skip
    if any(not r["ci_meaningful"] for r in agg):
        lines += ["", FEW_RUNS_NOTE]
    if left:
        lines += ["", "Left out of these tables and the performance profiles (the samplers and tasks kept give the "
                  "most sampler-task cells with at least 2 runs each; improvement.md compares each pair on the tasks "
                  "both have):", ""] + [f"- {x}" for x in left]  # fmt: skip
    (out / "aggregates.md").write_text("\n".join(lines) + "\n")
    diffs = differences(comparable)
    write_csv(out / "differences.csv", diffs)
    (out / "differences.md").write_text(differences_markdown(diffs))
    versus_rows = []
    if against is not None:
        versus_rows = versus(groups, grouped(reference_runs), against[0])
        write_csv(out / "versus.csv", versus_rows)
        (out / "versus.md").write_text(versus_markdown(versus_rows, against[0]))
    else:  # an earlier report's, with --against, into the same folder
        for name in ("versus.csv", "versus.md"):
            (out / name).unlink(missing_ok=True)
    imp = improvement(comparable)
    write_csv(out / "improvement.csv", imp)
    lines = ["| agent | domain | sampler | vs | runs x tasks | P(sampler > baseline) [95 % CI] |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['agent']} | {r['domain']} | {r['sampler']} | {r['baseline']} | {r['runs']} x {r['tasks']} | "
              f"{interval(r['p_improvement'], r['lo'], r['hi'], r['ci_meaningful'])} |" for r in imp]  # fmt: skip
    if any(not r["ci_meaningful"] for r in imp):
        lines += ["", FEW_RUNS_NOTE]
    (out / "improvement.md").write_text("\n".join(lines) + "\n")
    over = overhead(comparable)
    (out / "overhead.md").write_text(overhead_markdown(over))
    figures = plot_curves(comparable, out) + plot_table3(comparable, out)
    recorded_roots = where if len(roots) == 1 else [str(r) for r in roots]
    write_manifest(out, {"runs": recorded_roots, "include_partial": include_partial, "n_runs": len(runs),
                         **({"against": "=".join(against)} if against is not None else {})},
                   {"figures": sorted(p.name for p in out.glob("*.png")),
                    "run_folders": [str(r["folder"]) for r in runs],
                    **({"reference_folders": [str(r["folder"]) for r in reference_runs]} if against else {}),
                    "not_used": [x for x in status if not x["status"].startswith("used")]})  # fmt: skip
    return {"runs": len(runs), "groups": len(groups), "table": table, "figures": figures, "status": status,
            "gains": gain_rows, "human_normalised": hn, "aggregates": agg, "improvement": imp, "overhead": over,
            "differences": diffs, "versus": versus_rows}


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="curves, tables and diagnostics panels from run folders",
                              description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("runs", type=Path, nargs="+",
                   help="folder holding run folders (searched recursively); several may be given, for example a "
                        "study's runs and another study's control runs, or single run folders")
    p.add_argument("--out", type=Path, default=Path("report"), help="output folder")
    p.add_argument("--against", metavar="SETTING=VALUE",
                   help="compare each sampler with its own runs recorded with SETTING = VALUE (for example "
                        "rms_eps=0.01 or method.kappa=0.01): versus.md gives the differences; every other table "
                        "holds the other runs (and the runs of samplers that do not read SETTING)")
    p.add_argument("--include-partial", action="store_true",
                   help="average runs without finished.json in too (marked as partial); by default they are "
                        "listed in status.md and left out")  # fmt: skip
    p.set_defaults(func=_main)


def _main(args) -> int:
    for folder in args.runs:
        if not folder.is_dir():
            fail("prioritylab report", f"{folder} is not a folder")
    against = None
    if args.against is not None:
        key, sep, value = args.against.partition("=")
        if not (sep and key.strip() and value.strip()):
            fail("prioritylab report", f"--against takes SETTING=VALUE, got {args.against!r}")
        against = (key.strip(), value.strip())
    try:
        check_output_dir(args.out)
        result = report(args.runs, args.out, include_partial=args.include_partial, against=against)
    except ValueError as err:
        fail("prioritylab report", f"{err}")
    print(table_markdown(result["table"]))
    left_out = [x for x in result["status"] if not x["status"].startswith("used")]
    for x in left_out:
        print(f"left out: {x['folder']}: {x['status']} ({x['detail']})")
    print(f"{result['runs']} runs in {result['groups']} groups; figures and tables in {args.out}")
    return 0
