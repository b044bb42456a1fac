"""The figures of a report: learning curves, diagnostics panels, NERS Table 3 seed by seed, performance
profiles."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...results import save_figure
from ...scores import (
    ATARI_SCORE_SETTINGS,
    MINATAR_RANDOM_SETTINGS,
    SCORES,
    atari_game,
    minatar_game,
    minatar_random,
    settings_differ,
)
from .runs import aligned, last_values
from .stats import TABLE3_KEYS, batchable, batched_bootstrap, domain_and_task, mean_ci, on_own_streams

SMOOTH = 5  # evaluations (LAP/PAL App. D)
PROFILE_REPS = 2000
"""Bootstrap replications of the performance profiles' bands (rliable's default, ``create_performance_profile``)."""
FIGURE_KINDS = ("curves", "diagnostics", "table3", "profiles")
"""The figures the report draws, each named ``<kind>_<agent>_<what>.png`` by :func:`figure_path`."""
FIGURE_PREFIXES = tuple(f"{kind}_" for kind in FIGURE_KINDS)
"""How the name of every figure the report draws begins (a later report into the same folder removes those of an
earlier one that it does not draw again)."""
PANELS = ("ess_mean", "age_median", "coverage", "top1_share", "prob_n_p99", "td_mean", "q_mean", "weight_mean")


def steps_label(x: float, _pos=None) -> str:
    """A step count as a short tick label (20k, 1.5M): the diagnostics panels are too narrow for 60000."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:g}{suffix}"
    return f"{x:g}"


def figure_path(out: Path, kind: str, agent: str, what: str) -> Path:
    """The one place a report figure's name is made: ``<kind>_<agent>_<what>.png``, ``/`` in ``what`` as ``-``."""
    if kind not in FIGURE_KINDS:
        raise ValueError(f"figure kind {kind!r} is not one of {FIGURE_KINDS}")
    return out / f"{kind}_{agent}_{what.replace('/', '-')}.png"


def smooth(y: np.ndarray, window: int = SMOOTH) -> np.ndarray:
    """Uniform moving average over up to ``window`` trailing evaluations."""
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = np.empty_like(y, dtype=np.float64)
    for i in range(y.shape[0]):
        lo = max(0, i + 1 - window)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


TABLE3_TITLES = ("|TD error| mean", "|TD error| std", "Q mean", "Q std")


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
        path = figure_path(out, "table3", agent, env)
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)
    return written


def _reference_scores(ax, env: str, lo: float, hi: float, runs: Sequence[dict] = ()) -> tuple[float, float]:
    """A dotted line at random play's score: on an Atari game the random agent's and, when it is within twice the
    curves' range of them, the human's (PSER appendix table); on a MinAtar game random play's
    (:data:`prioritylab.scores.MINATAR_RANDOM`).  None where one of ``runs`` ran at other settings than the score
    was measured at (``scores.settings_differ``): it is not their scale.  The y range grows to hold them."""
    measured = MINATAR_RANDOM_SETTINGS if minatar_game(env) is not None else ATARI_SCORE_SETTINGS
    if any(settings_differ(r["config"], measured) for r in runs):
        return lo, hi
    random = minatar_random(env)
    if random is not None:
        ax.axhline(random, color="0.45", ls=":", lw=1.2, label=f"random play ({random:g})")
        return min(lo, random), max(hi, random)
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
    """Per (agent, env): ``curves_<agent>_<env>.png``, the smoothed evaluation returns of each sampler (mean over
    seeds, 95 % band, each seed faint), and ``diagnostics_<agent>_<env>.png``, one panel per replay statistic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    written = []
    by_task = defaultdict(dict)
    for (agent, env, sampler), runs in groups.items():
        by_task[(agent, env)][sampler] = runs
    for (agent, env), samplers in sorted(by_task.items()):
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        lo, hi = np.inf, -np.inf
        cut = []
        for k, (sampler, runs) in enumerate(sorted(samplers.items())):
            color = f"C{k}"
            steps, values = aligned(runs, "return_mean")
            if any(len(r["rows"]) > steps.size for r in runs):
                cut.append(f"{sampler} at step {int(steps[-1]) if steps.size else 0}")
            values = np.stack([smooth(v) for v in values])
            mean, half = mean_ci(values)
            ax.plot(steps, mean, color=color, lw=1.8, label=f"{sampler} ({len(runs)} seed{'s' * (len(runs) > 1)})")
            for v in values:  # each seed, faint
                ax.plot(steps, v, color=color, lw=0.6, alpha=0.35)
            if len(runs) > 1:
                ax.fill_between(steps, mean - half, mean + half, color=color, alpha=0.12, lw=0)
            lo, hi = min(lo, float(values.min())), max(hi, float(values.max()))
        lo, hi = _reference_scores(ax, env, lo, hi, [r for runs in samplers.values() for r in runs])
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        ax.set_ylim(lo - pad, hi + pad)  # the seeds' range: a wide band (few seeds) runs off the plot
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"return (smoothed over {SMOOTH} evals)")
        ax.set_title(f"{agent.upper()} on {env}")
        ax.legend(fontsize=8)
        caption = ("Thick: mean over seeds; band: 95 % t-interval of the mean; faint: each seed. "
                   "The y axis spans the seeds' values, so a wide band (few seeds) runs off it.")
        if cut:
            caption += ("\nCut to the evaluations every seed logged (a seed stopped early): " + ", ".join(cut)
                        + ".")  # fmt: skip
        fig.text(0.01, -0.02, caption, fontsize=7, ha="left", va="top")
        path = figure_path(out, "curves", agent, env)
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)

        keys = [k for k in PANELS if any(k in r["rows"][0] for runs in samplers.values() for r in runs)]
        if not keys:
            continue
        cols = 4
        rows_n = math.ceil(len(keys) / cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 2.6 * rows_n), squeeze=False,
                                 gridspec_kw={"hspace": 0.45})
        for ax, key in zip(axes.flat, keys, strict=False):
            for sampler, runs in sorted(samplers.items()):
                steps, values = aligned(runs, key)
                mean, half = mean_ci(values)
                ax.plot(steps, mean, label=sampler)
                if len(runs) > 1:
                    ax.fill_between(steps, mean - half, mean + half, alpha=0.2)
            ax.set_title(key, fontsize=9)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_formatter(FuncFormatter(steps_label))
        for ax in list(axes.flat)[len(keys):]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"Replay diagnostics, {agent.upper()} on {env} (docs/diagnostics.md)", fontsize=10)
        fig.supxlabel("environment steps", fontsize=8)
        path = figure_path(out, "diagnostics", agent, env)
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)
    return written


def score_label(domain: str) -> str:
    """The axis label of a domain's final scores: with the domain's normalisation where its name gives one
    (``Atari (human-normalised)``, ``MinAtar (0 = random, 1 = uniform)``), raw scores otherwise."""
    _, sep, scale = domain.partition(" (")
    return "final score" + (f" ({scale}" if sep else "")


def profile_bands(score_dict: dict, taus: np.ndarray, reps: int) -> tuple[dict, dict]:
    """rliable's performance profile of each entry of ``score_dict`` with its 95 % band, each on its own stream
    (:func:`~prioritylab.harness.report.stats.on_own_streams`), so that a sampler's band depends only on its runs.
    The band's replications are computed at once where :func:`~prioritylab.harness.report.stats.batched_bootstrap`
    can take the scores: rliable's numbers, bit for bit."""
    from rliable import library as rly

    def estimate(one: dict) -> tuple[dict, dict]:
        ((key, scores),) = one.items()
        if not batchable((scores,)):
            return rly.create_performance_profile(one, taus, reps=reps)
        band = batched_bootstrap((scores,), lambda batch: shares_above(batch, taus), reps)
        return {key: rly.score_distributions(scores, taus)}, {key: band}

    return on_own_streams(score_dict, estimate)


def shares_above(batch: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """rliable's score distribution (``score_distributions``: the share of a matrix's scores above each threshold)
    of each of a batch of runs x tasks matrices, ``batch`` (reps, runs, tasks): (reps, thresholds).  A share is a
    count over the matrix's size, exact in any order, so it is rliable's to the bit."""
    return np.mean(batch[:, None, :, :] > np.asarray(taus)[None, :, None, None], axis=(2, 3))


def plot_profiles(score_dict: dict, agent: str, domain: str, out: Path) -> Path:
    """``profiles_<agent>_<domain>.png``: rliable's performance profiles of one domain's runs x tasks matrices,
    with 95 % stratified-bootstrap bands.  Given a key of
    :func:`~prioritylab.harness.report.stats.task_cells` (``<domain>: <task>``), the profile of that task alone,
    with its own seeds: ``profiles_<agent>_<task>.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    domain, task = domain_and_task(domain)
    allv = np.concatenate([v.ravel() for v in score_dict.values()])
    taus = np.linspace(allv.min(), allv.max(), 101)
    profiles, cis = profile_bands(score_dict, taus, PROFILE_REPS)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for k, s in enumerate(sorted(score_dict)):
        ax.plot(taus, profiles[s], color=f"C{k}", label=f"{s} ({score_dict[s].shape[0]} runs)" if task else s)
        ax.fill_between(taus, cis[s][0], cis[s][1], color=f"C{k}", alpha=0.15, lw=0)
    ax.set_xlabel(score_label(domain))
    ax.set_ylabel("fraction of runs with score > x")
    ax.set_title(f"Performance profile, {agent.upper()} on {task or domain}", fontsize=10)
    ax.legend(fontsize=8)
    fig.text(0.01, -0.02, "Band: 95 % stratified-bootstrap interval (rliable).", fontsize=7, ha="left", va="top")
    path = figure_path(out, "profiles", agent, task or domain.split(" ")[0])
    save_figure(fig, path)
    plt.close(fig)
    return path
