"""The numbers of a report: intervals over seeds (Student t, Welch), the papers' comparisons, gains,
rliable's aggregates and probabilities of improvement, and wall-time overhead."""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from itertools import combinations

import numpy as np

from ...provenance import held_whole, unread_by
from ...results import TIMING
from ...scores import (
    ATARI_SCORE_SETTINGS,
    SCORES,
    atari_game,
    minatar_game,
    minatar_random,
    minatar_random_differs,
    settings_differ,
)
from ...scores import human_normalised as normalise_human
from .runs import LAST, NotWhole, _twice, area, column, differing, final_score, seed_order, whole_rows

MIN_CI_RUNS = 5
"""Fewest runs per task for which a table shows a bootstrap interval (fewer: the point estimate alone)."""
NOMINAL_RUNS = 10
"""Fewest runs per task from which rliable's percentile intervals came close to their nominal 95 % in simulated
studies (``scripts/bootstrap_coverage.py --reps 50000``: at 5 runs a side they missed their truth 8-11 % of the
time, and P's 38 % where X's runs beat Y's with probability 0.88 (lognormal scores), at 10 runs 5-7 %); tables
with shown intervals over fewer runs say so."""
BOOTSTRAP_REPS = 50_000
"""Stratified-bootstrap replications of rliable's intervals (IQM, mean, median, probability of improvement):
rliable's own default (``get_interval_estimates``).  At 2,000 an endpoint moved by a few hundredths from one
random stream to another."""


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


def welch_df(va: float, vb: float, na: int, nb: int) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two means with squared standard errors ``va`` and
    ``vb``, from ``na`` and ``nb`` runs."""
    return (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))


def welch_ci(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """``mean(a) - mean(b)`` and its 95 % Welch interval (independent samples, unequal variances); NaN bounds
    when neither sample varies (every seed alike on both sides: the t-interval is undefined)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        return diff, math.nan, math.nan
    half = t_quantile(welch_df(va, vb, a.size, b.size)) * se
    return diff, diff - half, diff + half


TABLE3_KEYS = ("td_mean", "td_std", "q_mean", "q_std")

_WELCH = ("difference", "lo", "hi", "pct", "pct_lo", "pct_hi")
COLUMNS = {
    "gains": ("agent", "sampler", "baseline", "envs", "seeds", "mean_gain_pct", "median_gain_pct"),
    "aggregates": ("agent", "domain", "sampler", "runs", "tasks", "ci_meaningful",
                   *(f"{m}{end}" for m in ("iqm", "mean", "median") for end in ("", "_lo", "_hi"))),
    "differences": ("agent", "env", "sampler", "baseline", "seeds", "baseline_seeds", *_WELCH),
    "speed": ("agent", "env", "sampler", "baseline", "seeds", "baseline_seeds", *_WELCH, "twice_as_fast",
              "twice_as_fast_pct", "vs_twice", "vs_twice_lo", "vs_twice_hi", "seen_until", "vs_twice_seen",
              "vs_twice_seen_lo", "vs_twice_seen_hi", "excluded_speed_up"),
    "versus": ("agent", "env", "sampler", "value", "reference", "seeds", "reference_seeds", "partial",
               "reference_partial", "mean", "reference_mean", *_WELCH, "not_comparable"),
    "improvement": ("agent", "domain", "sampler", "baseline", "runs", "baseline_runs", "tasks", "p_improvement",
                    "lo", "hi", "ci_meaningful"),
}  # fmt: skip
"""The columns of the report's tables that can have no rows (:func:`~prioritylab.results.write_csv` checks every
row against them, so that an empty table's CSV still has its header)."""
PARTIAL_RUNS = "partial_runs"
"""The last column of every CSV of a report made with ``--include-partial`` (and of the rows the functions here
give when asked for it): how many of the runs a row's figures were computed from are partial (no
``finished.json``), both sides' for a comparison, every task's for a row pooled over tasks (for an rliable row, of
the runs its bootstrap takes); 0 where none."""


def unfinished(runs: Sequence[dict]) -> int:
    """How many of ``runs`` are partial (no ``finished.json``)."""
    return sum(not r["finished"] for r in runs)


def build_table(groups: dict, notes: dict | None = None, partial: bool = False) -> list[dict]:
    """``table.csv``'s rows: per (agent, env, sampler), the mean and 95 % t-interval over its seeds of their final
    scores.  ``partial``: each row ends with :data:`PARTIAL_RUNS`, the group's partial runs."""
    notes = notes or {}
    table = []
    for (agent, env, sampler), runs in sorted(groups.items()):
        finals = np.array([final_score(r) for r in runs])
        mean, half = mean_ci(finals)
        table.append({
            "agent": agent, "env": env, "sampler": sampler, "seeds": len(runs),
            "last_step": int(min(column(r["rows"], "step")[-1] for r in runs)),
            "return_last10_mean": float(mean), "ci95": float(half),
            "finished": sum(r["finished"] for r in runs),
            "not_comparable": notes.get((agent, env, sampler), ""),
            **({PARTIAL_RUNS: unfinished(runs)} if partial else {}),
        })  # fmt: skip
    return table


def few_evaluations(groups: dict) -> dict:
    """``(agent, env, sampler) -> n`` for each group with a run of fewer than :data:`LAST` evaluations, ``n`` the
    fewest: such a run's final score is the mean of all its evaluations, its first ones included."""
    fewest = {key: min(len(r["rows"]) for r in runs) for key, runs in groups.items()}
    return {key: n for key, n in fewest.items() if n < LAST}


def gains(groups: dict, baselines=("uniform", "per"), left_out: list[str] | None = None,
          partial: bool = False) -> list[dict]:
    """Mean and median % gain (x - y) / |y| of each sampler's mean final score over each baseline's, over the
    environments both ran (LAP/PAL Table 2).  An environment a sampler ran but the baseline did not, or where
    the baseline's mean is 0 (no % gain), is named in ``left_out``.  ``partial``: each row ends with
    :data:`PARTIAL_RUNS`, the partial runs of the sampler and of the baseline on the environments of the row."""
    finals = {k: np.mean([final_score(r) for r in runs]) for k, runs in groups.items()}
    out = []
    agents = sorted({a for a, _, _ in finals})
    for agent in agents:
        samplers = sorted({s for a, _, s in finals if a == agent})
        for base in baselines:
            for sampler in samplers:
                if sampler == base:
                    continue
                ran = sorted(e for a, e, s in finals if a == agent and s == sampler)
                envs = [e for e in ran if finals.get((agent, e, base), 0) != 0]
                vals = [(finals[(agent, e, sampler)] - finals[(agent, e, base)]) / abs(finals[(agent, e, base)])
                        for e in envs]  # fmt: skip
                if left_out is not None:
                    left_out += [f"{agent} {sampler} vs {base}: {e} left out ({base}'s mean final score there is 0: "
                                 "no % gain)" if (agent, e, base) in finals else
                                 f"{agent} {sampler} vs {base}: {e} left out (no {base} runs there)"
                                 for e in ran if e not in envs]  # fmt: skip
                if vals:
                    seeds = min(min(len(groups[(agent, e, sampler)]), len(groups[(agent, e, base)])) for e in envs)
                    out.append({"agent": agent, "sampler": sampler, "baseline": base, "envs": len(vals), "seeds": seeds,
                                "mean_gain_pct": 100 * float(np.mean(vals)),
                                "median_gain_pct": 100 * float(np.median(vals)),
                                **({PARTIAL_RUNS: sum(unfinished(groups[(agent, e, s)]) for e in envs
                                                      for s in (sampler, base))} if partial else {})})  # fmt: skip
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
    return dict(zip(_WELCH, (diff, lo, hi, *rel), strict=True))


def differences(groups: dict, claims: dict | None = None, score=final_score,
                left_out: list[str] | None = None, partial: bool = False) -> list[dict]:
    """Per agent and environment, for each comparison of ``claims`` (default :data:`CLAIMS`): the difference of
    the mean scores X - Y (``score``: :func:`final_score`, or :func:`area` for :func:`speed`) with its 95 % Welch
    interval over the seeds, absolute and as a share of |Y's mean|; groups with at least 2 seeds each.  A
    comparison not made (Y never ran there, or fewer than 2 seeds on a side) is named in ``left_out``.  ``partial``:
    each row ends with :data:`PARTIAL_RUNS`, the partial runs of X and of Y."""
    rows = []
    for baseline, samplers in (CLAIMS if claims is None else claims).items():
        for (agent, env, sampler), runs in sorted(groups.items()):
            if sampler == baseline or (samplers is not None and sampler not in samplers):
                continue
            base = groups.get((agent, env, baseline), [])
            if len(runs) < 2 or len(base) < 2:
                if left_out is not None:
                    why = f"{len(runs)} / {len(base)} seeds, fewer than 2 on a side" if base else f"no {baseline} runs"
                    left_out.append(f"{agent} {env} {sampler} vs {baseline}: {why}")
                continue
            x, y = np.array([score(r) for r in runs]), np.array([score(r) for r in base])
            rows.append({"agent": agent, "env": env, "sampler": sampler, "baseline": baseline,
                         "seeds": len(runs), "baseline_seeds": len(base), **_welch_row(x, y),
                         **({PARTIAL_RUNS: unfinished(runs) + unfinished(base)} if partial else {})})  # fmt: skip
    return rows


SPEED_UP = 2.0
"""The speed-up :func:`speed` tests: PER's "on aggregate, learning is twice as fast" (PER section 6, Figs. 4, 8)."""
FACTORS = np.round(np.arange(1.05, 4.0001, 0.05), 2)
"""The speed-ups :func:`speed` tries for the smallest one the interval of the areas excludes."""


def _excluded_from(factors: Sequence[float], excluded: Sequence[bool]) -> float:
    """The smallest of ``factors`` (ascending) from which every one on is excluded; NaN if the last is not.  The
    interval's upper end need not fall as the factor grows (a curve read past its end is held at its last value,
    and one that falls late gives a faster reading a smaller area), so a factor excluded alone, with larger ones
    not excluded after it, does not make "that speed-up and more" excluded."""
    first = math.nan
    for f, out in zip(factors, excluded, strict=True):
        first = (first if math.isfinite(first) else float(f)) if out else math.nan
    return first


def _seen(x_runs: list[dict], y_runs: list[dict], factor: float) -> tuple[float, float, float, float]:
    """X's areas minus Y's read ``factor`` times as fast, both over the evaluations up to Y's shortest run's last
    step divided by ``factor``, where every value read of Y was observed: that step, the difference and its Welch
    interval (NaN where a side has no evaluation there, or neither side varies)."""
    until = min(float(column(run["rows"], "step")[-1]) for run in y_runs) / factor
    x = np.array([area(run, 1.0, until) for run in x_runs])
    y = np.array([area(run, factor, until) for run in y_runs])
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return until, math.nan, math.nan, math.nan
    return (until, *welch_ci(x, y))


def speed(groups: dict, claims: dict | None = None, partial: bool = False) -> list[dict]:
    """:func:`differences` of :func:`area`, the mean return over all evaluations, and readings of a speed-up:
    what Y's area would gain if Y learned :data:`SPEED_UP` times as fast (each Y run's curve read at twice each
    step, held at its last value beyond its end), the Welch interval of X's areas minus those, the same over the
    evaluations up to half of Y's last step only (``seen_until``), where nothing of Y is held, and the smallest
    speed-up of Y (1, or one of :data:`FACTORS`) from which X falls short of it, for it and every larger factor
    tried: an interval of either reading wholly below 0 (1: X's areas are below Y's own; NaN if the largest
    factor is not excluded).  Holding understates a Y still improving at its end, so the held reading can show
    that X learns less than twice as fast and cannot show that it learns faster: only the observed window
    (``vs_twice_seen``) can (:mod:`~prioritylab.harness.report.verdicts`, the rule ``twice``).  It makes the
    comparisons :func:`differences` makes, so that function's ``left_out`` names those it does not.
    ``partial``: each row ends with :data:`PARTIAL_RUNS`, the partial runs of X and of Y (the runs read at a
    speed-up are Y's)."""
    rows = differences(groups, claims, score=area)
    for r in rows:
        base = groups[(r["agent"], r["env"], r["baseline"])]
        runs = groups[(r["agent"], r["env"], r["sampler"])]
        x = np.array([area(run) for run in runs])
        y = float(np.mean([area(run) for run in base]))
        fast = np.array([area(run, SPEED_UP) for run in base])
        gain = float(fast.mean()) - y
        d, lo, hi = welch_ci(x, fast)
        until, seen, seen_lo, seen_hi = _seen(runs, base, SPEED_UP)
        excluded = [r["hi"] < 0] + [welch_ci(x, np.array([area(run, f) for run in base]))[2] < 0
                                    or _seen(runs, base, float(f))[3] < 0 for f in FACTORS]  # fmt: skip
        r.update({"twice_as_fast": gain, "twice_as_fast_pct": 100 * gain / abs(y) if y != 0 else math.nan,
                  "vs_twice": d, "vs_twice_lo": lo, "vs_twice_hi": hi, "seen_until": until,
                  "vs_twice_seen": seen, "vs_twice_seen_lo": seen_lo, "vs_twice_seen_hi": seen_hi,
                  "excluded_speed_up": _excluded_from((1.0, *FACTORS), excluded)})  # fmt: skip
        if partial:
            r[PARTIAL_RUNS] = unfinished(runs) + unfinished(base)
    return rows


def _values(run: dict, keys: Sequence[str]):
    """A run's recorded values of ``keys``: the value itself for one key, else the values joined by commas, with
    "—" for a setting its sampler does not read."""
    unread = unread_by(run["sampler"])
    values = ["—" if key.startswith(unread) else run["config"].get(key) for key in keys]
    return values[0] if len(values) == 1 else ", ".join(map(str, values))


def unpaired(groups: dict, reference: dict) -> list[str]:
    """The (agent, environment, sampler) groups of the reference runs that :func:`versus` gives no row: no compared
    runs of that sampler, or fewer than 2 runs on a side."""
    out = []
    for k, base in sorted(reference.items()):
        runs = groups.get(k, [])
        if len(runs) < 2 or len(base) < 2:
            out.append(f"{k[0]} {k[1]} {k[2]}: {len(base)} reference run(s) against {len(runs)} compared")
    return out


def _held_whole(run: dict) -> bool:
    """Whether the run's replay had room for all it stored (a slot per step and per episode's end, so at most
    ``2 * steps``; :func:`prioritylab.provenance.held_whole`): then runs of different lengths differ in
    their capacity only as a consequence of their lengths, and no transition was overwritten in either."""
    capacity, steps = run["config"].get("replay_capacity"), run["config"].get("steps")
    return isinstance(capacity, int) and isinstance(steps, int) and held_whole(capacity, steps)


def versus(groups: dict, reference: dict, keys: Sequence[str], partial: bool = False) -> list[dict]:
    """Per (agent, environment, sampler) with at least 2 runs on both sides: the mean final score of the compared
    runs minus the reference runs', with its 95 % Welch interval, absolute and as a share of |the reference's
    mean|.  A row whose runs differ in another setting than ``keys`` (the seed and the bookkeeping ones aside;
    with ``steps`` among ``keys``, the replay's capacity too where every run's held the whole run), or hold one
    seed in two folders on a side, is marked not comparable instead.  ``partial``: each row ends with
    :data:`PARTIAL_RUNS`, the partial runs of both sides (``partial`` plus ``reference_partial``)."""
    rows = []
    for k, runs in sorted(groups.items()):
        base = reference.get(k)
        if base is None or len(runs) < 2 or len(base) < 2:
            continue
        unread = unread_by(k[2])
        same = set(keys) | ({"replay_capacity"} if "steps" in keys and all(map(_held_whole, runs + base)) else set())
        apart = differing([r["config"] for r in runs + base], lambda c, u=unread, s=same: c in s or c.startswith(u))
        why = [f"they also differ in {c} ({', '.join(map(str, v))})" for c, v in apart.items()]
        why += [f"seed {', '.join(map(str, _twice(side)))} twice {where}"
                for side, where in ((runs, "among the compared runs"), (base, "among the reference runs"))
                if _twice(side)]  # fmt: skip
        x, y = np.array([final_score(r) for r in runs]), np.array([final_score(r) for r in base])
        rows.append({"agent": k[0], "env": k[1], "sampler": k[2], "value": _values(runs[0], keys),
                     "reference": _values(base[0], keys), "seeds": len(runs), "reference_seeds": len(base),
                     "partial": unfinished(runs), "reference_partial": unfinished(base),
                     "mean": float(x.mean()), "reference_mean": float(y.mean()), **_welch_row(x, y),
                     "not_comparable": "; ".join(why),
                     **({PARTIAL_RUNS: unfinished(runs) + unfinished(base)} if partial else {})})
    return rows


def human_normalised(groups: dict, left_out: list[str] | None = None, partial: bool = False) -> list[dict]:
    """Per (agent, sampler): each game's human-normalised mean final score, and their mean and median
    (PER/PSER convention, the PSER appendix's human and random scores).  An Atari game without those scores is
    named in ``left_out``, and so is each sampler's set of games where an agent's samplers ran different ones.
    ``partial``: each row's figures are followed by :data:`PARTIAL_RUNS`, the sampler's partial runs on the games
    of the row."""
    per_key = defaultdict(dict)
    partial_on = defaultdict(dict)
    for (agent, env, sampler), runs in sorted(groups.items()):
        game = atari_game(env)
        if game is None:
            continue
        if game not in SCORES:
            if left_out is not None and f"{env}: no human and random scores" not in left_out:
                left_out.append(f"{env}: no human and random scores")
            continue
        if atari_left_out(agent, env, sampler, runs, left_out):
            continue
        per_key[(agent, sampler)][game] = normalise_human(game, np.mean([final_score(r) for r in runs]))
        partial_on[(agent, sampler)][game] = unfinished(runs)
    if left_out is not None:
        for agent in sorted({a for a, _ in per_key}):
            sets = {s: sorted(g) for (a, s), g in per_key.items() if a == agent}
            if len({tuple(g) for g in sets.values()}) > 1:
                left_out += [f"{agent} {s}: its mean and median are over {', '.join(g)} (the samplers ran different "
                             "games)" for s, g in sorted(sets.items())]  # fmt: skip
    out = []
    for (agent, sampler), games in sorted(per_key.items()):
        vals = np.array(list(games.values()))
        out.append({"agent": agent, "sampler": sampler, "games": len(vals), "mean": float(vals.mean()),
                    "median": float(np.median(vals)),
                    **({PARTIAL_RUNS: sum(partial_on[(agent, sampler)].values())} if partial else {}),
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


def on_own_streams(score_dict: dict, estimate) -> tuple[dict, dict]:
    """``estimate`` (an rliable call taking a dict of scores and giving two dicts by the same keys: estimates and
    their intervals) of each entry of ``score_dict`` alone, on a stream of its own seeded alike, so that what it
    gives an entry depends only on that entry's runs: one call over several entries draws their resamples from
    one stream in turn, and so gives an entry another interval beside other entries."""
    point, ci = {}, {}
    for key, scores in score_dict.items():
        with rliable_seeded():
            p, c = estimate({key: scores})
        point[key], ci[key] = p[key], c[key]
    return point, ci


def interval_estimates(score_dict: dict, func, reps: int, batched=None) -> tuple[dict, dict]:
    """rliable's ``get_interval_estimates`` of each entry of ``score_dict``, each on its own stream
    (:func:`on_own_streams`).  With ``batched``, ``func`` of every replication at once, an entry whose scores
    :func:`batched_bootstrap` can take is computed there instead: the same numbers."""
    from rliable import library as rly

    def estimate(one: dict) -> tuple[dict, dict]:
        ((key, scores),) = one.items()
        arrays = (scores,) if isinstance(scores, np.ndarray) else tuple(scores)
        if batched is not None and batchable(arrays):
            return {key: func(*arrays)}, {key: batched_bootstrap(arrays, batched, reps)}
        return rly.get_interval_estimates(one, func, reps=reps, random_state=np.random.RandomState(0))

    return on_own_streams(score_dict, estimate)


CI_SIZE = 0.95
"""The coverage of the bootstrap intervals (rliable's default)."""

BATCH_ELEMENTS = 1 << 24
"""About the most array elements :func:`batched_bootstrap` makes at once: it takes the replications in chunks of
at most this over (matrices x runs x runs x tasks) each, the size of P(X > Y)'s comparisons of every pair of runs
(16M: a few hundred MB; 50,000 replications of the studies here are one chunk)."""


def batchable(arrays: tuple[np.ndarray, ...]) -> bool:
    """Whether :func:`batched_bootstrap` reproduces rliable's bootstrap of ``arrays``: runs x tasks matrices of one
    shape (so that their indices come from one draw), every score finite (as :func:`iqm` needs)."""
    return all(a.ndim == 2 and a.shape == arrays[0].shape and np.isfinite(a).all() for a in arrays)


def batched_bootstrap(arrays: tuple[np.ndarray, ...], batched, reps: int) -> np.ndarray:
    """rliable's stratified-bootstrap percentile interval (``get_interval_estimates``, through arch's ``conf_int``)
    of a statistic of the runs x tasks matrices ``arrays``, every replication at once: ``batched`` takes arrays of
    shape (reps, runs, tasks) and gives (reps, values).  rliable draws each replication's run indices with
    ``np.random.choice(runs, (runs, tasks))`` from NumPy's global generator, one array after the other; with one
    shape for all, those are one ``randint`` draw of shape (reps, arrays, runs, tasks), the same numbers in the
    same order, and so are consecutive draws of chunks of replications (:data:`BATCH_ELEMENTS`).  Each
    replication's statistic and arch's percentiles are then computed as arch computes them: ``(2, values)``, the
    lower ends and the upper ends, the same bits (``tests/test_report.py``)."""
    runs, tasks = arrays[0].shape
    chunk = max(1, BATCH_ELEMENTS // (len(arrays) * runs * runs * tasks))
    column = np.arange(tasks)
    parts = []
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        index = np.random.randint(0, runs, size=(size, len(arrays), runs, tasks))  # noqa: NPY002 - rliable's stream
        part = batched(*(a[index[:, i], column] for i, a in enumerate(arrays)))
        parts.append(np.asarray(part, dtype=float).reshape(size, -1))
    results = np.concatenate(parts)
    alpha = (1.0 - CI_SIZE) / 2
    percentiles = [100 * alpha, 100 * (1.0 - alpha)]
    lower, upper = np.zeros(results.shape[1]), np.zeros(results.shape[1])
    for i in range(results.shape[1]):
        lower[i], upper[i] = np.percentile(results[:, i], percentiles)
    return np.vstack((lower, upper))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """rliable's ``metrics.probability_of_improvement`` of runs x tasks matrices: per task, the share of pairs
    (X run, Y run) in which X's score is the higher, a tie counting 1/2 (the Mann-Whitney U over n * m), averaged
    over the tasks.  It counts the pairs itself rather than calling SciPy's test once per task, the same values
    about 30 times faster on 5 x 2 matrices, which is what lets the bootstrap take rliable's 50,000 replications."""
    n, m = x.shape[0], y.shape[0]
    per_task = [(np.sum(x[:, t, None] > y[None, :, t]) + 0.5 * np.sum(x[:, t, None] == y[None, :, t])) / (n * m)
                for t in range(x.shape[1])]  # fmt: skip
    return float(np.mean(per_task))


def probability_of_improvement_batched(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`probability_of_improvement` of each of a batch of matrix pairs, ``x`` (reps, n, tasks) against ``y``
    (reps, m, tasks): the same operations, the same values."""
    n, m = x.shape[1], y.shape[1]
    above = np.sum(x[:, :, None, :] > y[:, None, :, :], axis=(1, 2))
    level = np.sum(x[:, :, None, :] == y[:, None, :, :], axis=(1, 2))
    return np.mean((above + 0.5 * level) / (n * m), axis=1)


def iqm(scores: np.ndarray) -> np.float64:
    """rliable's ``metrics.aggregate_iqm``: SciPy's ``trim_mean`` of every run and task together, 25 % cut from
    each end.  The same NumPy operations on the same values (ravel, partition at the two cuts, mean of what lies
    between), without SciPy's handling of its arguments on every call: the same bits, about 20 times faster, and
    the bootstrap calls it once a replication.  Scores that are not all finite go to SciPy, whose handling of NaN
    this does not repeat."""
    a = np.asarray(scores).ravel()
    if a.size == 0 or not np.isfinite(a).all():
        from rliable import metrics

        return metrics.aggregate_iqm(scores)
    low = int(0.25 * a.size)
    high = a.size - low
    return np.mean(np.partition(a, (low, high - 1))[low:high])


def iqm_batched(scores: np.ndarray) -> np.ndarray:
    """:func:`iqm` of each of a batch of runs x tasks matrices, ``scores`` (reps, runs, tasks), with the operations
    it does on one matrix, along an axis: (reps,)."""
    flat = scores.reshape(scores.shape[0], -1)
    low = int(0.25 * flat.shape[1])
    high = flat.shape[1] - low
    return np.mean(np.partition(flat, (low, high - 1), axis=1)[:, low:high], axis=1)


def aggregate_values(scores: np.ndarray) -> np.ndarray:
    """IQM (:func:`iqm`), mean and median of a runs x tasks matrix (rliable's ``aggregate_mean`` and
    ``aggregate_median``: of the task means): the values of ``aggregates.md``."""
    from rliable import metrics

    return np.array([iqm(scores), metrics.aggregate_mean(scores), metrics.aggregate_median(scores)])


def aggregates_batched(scores: np.ndarray) -> np.ndarray:
    """:func:`aggregate_values` of each of a batch of runs x tasks matrices, ``scores`` (reps, runs, tasks), with the
    operations each does on one matrix: (reps, 3)."""
    task_means = np.mean(scores, axis=1)
    return np.stack([iqm_batched(scores), np.mean(task_means, axis=1), np.median(task_means, axis=1)], axis=1)


def aggregates(matrices: dict, reps: int | None = None, partial: dict | None = None) -> list[dict]:
    """IQM, mean and median with 95 % stratified-bootstrap CIs (rliable) of :func:`score_matrices`' runs x tasks
    matrices.

    Tasks are the Atari games of an agent (human-normalised scores), its MinAtar games (normalised by
    :func:`minatar_normalised`) or one other environment.  Each sampler's bootstrap is seeded on its own
    (:func:`interval_estimates`), so a report is reproducible and a sampler's interval does not depend on the
    other samplers in it.  Rows with fewer than :data:`MIN_CI_RUNS` runs carry ``ci_meaningful = False``.
    ``partial`` (:func:`matrix_partial_runs` of the cells the matrices were made from): each row ends with
    :data:`PARTIAL_RUNS`, the partial runs in its matrix.
    """
    rows = []
    for (agent, domain), score_dict in matrices.items():
        point, ci = interval_estimates(score_dict, aggregate_values, reps or BOOTSTRAP_REPS, aggregates_batched)
        for s in sorted(score_dict):
            n, tasks = score_dict[s].shape
            row = {"agent": agent, "domain": domain, "sampler": s, "runs": n, "tasks": tasks,
                   "ci_meaningful": n >= MIN_CI_RUNS}  # fmt: skip
            for i, m in enumerate(("iqm", "mean", "median")):
                row.update({m: float(point[s][i]), f"{m}_lo": float(ci[s][0, i]), f"{m}_hi": float(ci[s][1, i])})
            if partial is not None:
                row[PARTIAL_RUNS] = partial[(agent, domain, s)]
            rows.append(row)
    return rows


MINATAR_DOMAIN = "MinAtar (0 = random, 1 = uniform)"


def minatar_normalised(groups: dict, left_out: list[str] | None = None) -> dict:
    """``(agent, env, sampler) -> (scores - random) / (uniform - random)`` for MinAtar groups: 0 is random play
    (:data:`prioritylab.scores.MINATAR_RANDOM`), 1 the mean final score of the same agent with ``uniform``
    replay on that game.  Games with fewer than 2 uniform runs (one run's score is no mean to set a scale by,
    where every table needs 2 runs a side), whose uniform mean is not above random play, or with runs at other
    environment settings than random play's score was measured at (``minatar_random_differs``) are left out,
    each named once in ``left_out`` with its reason."""
    out = {}
    skipped = {}
    for (agent, env, sampler), runs in sorted(groups.items()):
        game = minatar_game(env)
        if game is None:
            continue
        random = minatar_random(env)
        if random is None:
            skipped[(agent, env)] = ("no random-play score for it in prioritylab.scores.MINATAR_RANDOM (measured "
                                     "on the -v1 games)")  # fmt: skip
            continue
        other = next((why for key, of in groups.items() if key[:2] == (agent, env) for r in of
                      if (why := minatar_random_differs(r["config"]))), "")  # fmt: skip
        if other:
            skipped[(agent, env)] = (f"runs at {other}: random play's score in prioritylab.scores.MINATAR_RANDOM "
                                     "was measured at other settings")  # fmt: skip
            continue
        base = groups.get((agent, env, "uniform"))
        if not base:
            skipped[(agent, env)] = "no uniform runs to normalise by"
            continue
        if len(base) < 2:
            skipped[(agent, env)] = "1 uniform run: at least 2 are needed to normalise by their mean"
            continue
        ref = float(np.mean([final_score(r) for r in base]))
        if ref <= random:
            skipped[(agent, env)] = (f"uniform's mean final score {ref:.3g} is not above random play's {random:.3g}: "
                                     "nothing to normalise by")  # fmt: skip
            continue
        out[(agent, env, sampler)] = (np.array([final_score(r) for r in runs]) - random) / (ref - random)
    if left_out is not None:
        left_out += [f"{agent}, {MINATAR_DOMAIN}: task {env} left out ({why})" for (agent, env), why in skipped.items()]
    return out


def atari_left_out(agent: str, env: str, sampler: str, runs: list[dict], left_out: list[str] | None) -> bool:
    """Whether an Atari group's scores are off the scale of the reference scores (a run at other settings than
    ``scores.ATARI_SCORE_SETTINGS``), each such group named once in ``left_out`` with the setting."""
    other = next((why for r in runs if (why := settings_differ(r["config"], ATARI_SCORE_SETTINGS))), "")
    line = (f"{agent} {env} {sampler}: runs at {other}: the human and random scores stand at other settings, so it "
            "is not human-normalised")  # fmt: skip
    if other and left_out is not None and line not in left_out:
        left_out.append(line)
    return bool(other)


def cell_task(env: str) -> str:
    """The task :func:`score_cells` files an environment's runs under: an Atari game with human and random scores by
    its game's name (never an environment id), any other environment by its id."""
    game = atari_game(env)
    return game if game is not None and game in SCORES else env


def unfinished_cells(groups: dict) -> set[tuple]:
    """``(agent, sampler, task, seed)`` of each partial run of ``groups``, the task as :func:`score_cells` names it
    (:func:`cell_task`): the runs of :func:`score_cells`' cells, and of :func:`task_cells`', that are partial."""
    return {(agent, sampler, cell_task(env), r["seed"]) for (agent, env, sampler), runs in groups.items()
            for r in runs if not r["finished"]}


def score_cells(groups: dict, left_out: list[str] | None = None, normalise_minatar: bool = True) -> dict:
    """``(agent, domain) -> sampler -> task -> {seed: score}``: Atari games human-normalised, MinAtar games by
    :func:`minatar_normalised` (the games it cannot normalise appended to ``left_out``), any other environment a
    domain of its own (raw returns).  With ``normalise_minatar=False`` the MinAtar games keep their raw scores,
    every game of them: for :func:`improvement`, as P(X > Y) on a game is the same on any scale that game's
    samplers share, and needs no uniform runs."""
    minatar = minatar_normalised(groups, left_out) if normalise_minatar else {}
    domains = defaultdict(lambda: defaultdict(dict))
    for (agent, env, sampler), runs in groups.items():
        task = cell_task(env)
        scores = np.array([final_score(r) for r in runs])
        if task != env:  # an Atari game with human and random scores
            if normalise_minatar and atari_left_out(agent, env, sampler, runs, left_out):  # raw P(X > Y): any scale
                continue
            domain, scores = "Atari (human-normalised)", normalise_human(task, scores)
        elif minatar_game(env) is not None and not normalise_minatar:
            domain = MINATAR_DOMAIN
        elif minatar_game(env) is not None:
            if (agent, env, sampler) not in minatar:
                continue
            domain, scores = MINATAR_DOMAIN, minatar[(agent, env, sampler)]
        else:
            domain = env
        domains[(agent, domain)][sampler][task] = dict(zip((r["seed"] for r in runs), scores, strict=True))
    return domains


def task_cells(cells: dict) -> dict:
    """Each task of a domain alone, for the domains of :func:`score_cells` with several tasks (some sampler with at
    least 2 runs on each): ``(agent, "<domain>: <task>") -> sampler -> {task: {seed: score}}``.  A domain's pooled
    tables take each sampler's seeds as many on every task as on its task with the fewest, so a task still
    running (fewer seeds) would cut every other task's; these rows keep each task's own seeds."""
    out = {}
    for (agent, domain), samplers in sorted(cells.items()):
        tasks = sorted(set().union(*(_tasks(by_task) for by_task in samplers.values())))
        if len(tasks) < 2:
            continue
        for task in tasks:
            out[(agent, f"{domain}{TASK_SEPARATOR}{task}")] = {s: {task: by_task[task]}
                                                              for s, by_task in samplers.items() if task in by_task}
    return out


TASK_SEPARATOR = ": "
"""Between the domain and the task in :func:`task_cells`' keys (``MinAtar (...): MinAtar/Asterix-v1``)."""


def domain_and_task(name: str) -> tuple[str, str | None]:
    """A key's domain and task: ``(domain, task)`` for :func:`task_cells`' ``<domain>: <task>``, ``(domain, None)``
    for a whole domain of :func:`score_cells` (no domain name holds the separator)."""
    domain, sep, task = name.partition(TASK_SEPARATOR)
    return domain, (task if sep else None)


def _tasks(cells: dict) -> set:
    """The tasks on which a sampler has at least 2 runs."""
    return {t for t, seeds in cells.items() if len(seeds) >= 2}


def _chosen(cells: dict, tasks: list) -> dict:
    """``task -> seeds``: the runs of a sampler's matrix, its lowest seeds, as many on each task as on its task with
    the fewest."""
    n = min(len(cells[t]) for t in tasks)
    return {t: sorted(cells[t], key=seed_order)[:n] for t in tasks}


def _matrix(cells: dict, tasks: list) -> np.ndarray:
    """runs x tasks: the sampler's lowest seeds, as many on each task as on its task with the fewest."""
    chosen = _chosen(cells, tasks)
    return np.stack([np.array([cells[t][seed] for seed in chosen[t]]) for t in tasks], 1)


def _partial_in(agent: str, sampler: str, chosen: dict, unfinished: set) -> int:
    """How many of the runs ``chosen`` (:func:`_chosen`) of ``sampler`` are in ``unfinished``
    (:func:`unfinished_cells`)."""
    return sum((agent, sampler, t, seed) in unfinished for t, seeds in chosen.items() for seed in seeds)


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


def score_matrices(cells: dict, left_out: list[str] | None = None) -> dict:
    """``(agent, domain) -> sampler -> runs x tasks`` score matrices for rliable, from :func:`score_cells`' (or
    :func:`task_cells`') cells.  The samplers and tasks are chosen by :func:`_most_cells`; each sampler has its own
    seeds, its lowest, as many on each task as on its task with the fewest (so one sampler's seeds never cut
    another's).  What is left out is appended to ``left_out``, one line each."""
    out = {}
    for key, samplers in sorted(cells.items()):
        names, tasks = _most_cells(samplers)
        if left_out is not None:
            for s in sorted(set(samplers) - set(names)):
                have = sorted(_tasks(samplers[s]))
                left_out.append(f"{key[0]}, {key[1]}: {s} left out (at least 2 runs on {len(have)} task(s): "
                                f"{', '.join(map(str, have)) or 'none'}; the others share {len(tasks)})")  # fmt: skip
            every = sorted(set().union(*(samplers[s] for s in samplers)) - set(tasks))
            for t in every:
                left_out.append(f"{key[0]}, {key[1]}: task {t} left out (not every sampler has 2 runs on it)")
            for s in names:
                n = min(len(samplers[s][t]) for t in tasks)
                left_out += [f"{key[0]}, {key[1]}: {s} on {t}: {len(samplers[s][t]) - n} of its {len(samplers[s][t])} "
                             f"seeds unused (a sampler takes as many seeds on every task as on its task with the "
                             f"fewest, {n})" for t in tasks if len(samplers[s][t]) > n]  # fmt: skip
        if names:
            out[key] = {s: _matrix(samplers[s], tasks) for s in names}
    return out


def matrix_partial_runs(cells: dict, unfinished: set) -> dict:
    """``(agent, domain, sampler) -> n`` for each matrix that :func:`score_matrices` makes of ``cells``: how many of
    the runs in it, the seeds it takes on every task it keeps, are partial (in ``unfinished``:
    :func:`unfinished_cells`)."""
    out = {}
    for (agent, domain), samplers in sorted(cells.items()):
        names, tasks = _most_cells(samplers)
        for s in names:
            out[(agent, domain, s)] = _partial_in(agent, s, _chosen(samplers[s], tasks), unfinished)
    return out


def improvement(cells: dict, reps: int | None = None, claims: dict | None = None,
                left_out: list[str] | None = None, unfinished: set | None = None) -> list[dict]:
    """rliable's probability of improvement P(X > Y) of sampler X over baseline Y for each comparison of
    ``claims`` (default :data:`CLAIMS`), per (agent, domain) of ``cells`` (:func:`score_cells`' or
    :func:`task_cells`'), with its 95 % stratified-bootstrap interval (seeded).  Each comparison uses the tasks on
    which both samplers have at least 2 runs, and each sampler's own lowest seeds (as :func:`score_matrices`),
    whatever other samplers ran.  A comparison not made (no task with at least 2 runs of each) is named in
    ``left_out``.  ``unfinished`` (:func:`unfinished_cells`): each row ends with :data:`PARTIAL_RUNS`, how many
    of the runs it compares, X's and Y's, are partial."""
    rows = []
    for baseline, samplers in (CLAIMS if claims is None else claims).items():
        rows += _improvement(cells, reps or BOOTSTRAP_REPS, baseline, samplers, left_out, unfinished)
    return rows


def _improvement(cells: dict, reps: int, baseline: str, samplers: tuple[str, ...] | None,
                 left_out: list[str] | None, unfinished: set | None = None) -> list[dict]:
    rows = []
    for (agent, domain), by_sampler in sorted(cells.items()):
        pairs, partial = {}, {}
        for s in sorted(by_sampler):
            if s == baseline or (samplers is not None and s not in samplers):
                continue
            tasks = sorted(_tasks(by_sampler[s]) & _tasks(by_sampler.get(baseline, {})))
            if tasks:
                pairs[s] = (_matrix(by_sampler[s], tasks), _matrix(by_sampler[baseline], tasks))
                if unfinished is not None:
                    partial[s] = sum(_partial_in(agent, side, _chosen(by_sampler[side], tasks), unfinished)
                                     for side in (s, baseline))
            elif left_out is not None:
                why = "no task with at least 2 runs of each" if baseline in by_sampler else f"no {baseline} runs"
                left_out.append(f"{agent}, {domain}: {s} vs {baseline} ({why})")
        if not pairs:
            continue
        point, ci = interval_estimates(pairs, probability_of_improvement, reps, probability_of_improvement_batched)
        for s, (x, y) in pairs.items():
            rows.append({"agent": agent, "domain": domain, "sampler": s, "baseline": baseline, "runs": x.shape[0],
                         "baseline_runs": y.shape[0], "tasks": y.shape[1], "p_improvement": float(np.squeeze(point[s])),
                         "lo": float(np.squeeze(ci[s])[0]), "hi": float(np.squeeze(ci[s])[1]),
                         "ci_meaningful": min(x.shape[0], y.shape[0]) >= MIN_CI_RUNS,
                         **({PARTIAL_RUNS: partial[s]} if unfinished is not None else {})})  # fmt: skip
    return rows


def wall_time(run: dict) -> float:
    """The run's wall time, from the last row of its ``timing.csv``; ``ValueError`` saying why there is none (no
    readable file, a row that is not whole, a last row without a usable wall time or ending before the run's last
    evaluation)."""
    try:
        timing = whole_rows(run["folder"] / TIMING)
        walls = [float(row["wall_time"]) for row in timing]
        last = timing[-1]
        wall, step = walls[-1], float(last["step"])
    except OSError:
        raise ValueError("no readable timing.csv") from None
    except NotWhole as err:
        raise ValueError(f"its timing.csv: {err}") from None
    except IndexError:
        raise ValueError("timing.csv without a row") from None
    except (KeyError, TypeError, ValueError):
        raise ValueError("timing.csv without a wall_time in every row and a step in its last") from None
    if not math.isfinite(wall) or wall < 0:
        raise ValueError(f"its timing.csv's last wall_time is {last['wall_time']}")
    back = next((i for i in range(1, len(walls)) if not walls[i] >= walls[i - 1]), None)
    if back is not None:
        raise ValueError(f"its timing.csv's wall_time goes back at row {back + 1} ({timing[back - 1]['wall_time']} "
                         f"then {timing[back]['wall_time']}; another run's rows?)")  # fmt: skip
    ended = run.get("finished_wall")
    if isinstance(ended, (int, float)) and math.isfinite(ended) and wall > ended:
        raise ValueError(f"its timing.csv's last wall_time {last['wall_time']} is later than the run's end, "
                         f"{ended} in finished.json (another run's timing.csv?)")  # fmt: skip
    if step != column(run["rows"], "step")[-1]:
        last_eval = run["rows"][-1]["step"]
        raise ValueError(f"its timing.csv ends at step {last['step']}, its last evaluation at {last_eval}")
    return wall


def overhead(groups: dict, left_out: list[str] | None = None) -> list[dict]:
    """Wall time of each group's runs (the last ``timing.csv`` row) and its increase over uniform's, same agent
    and env (LAP/PAL App. B, Table 3: run time and % increase).  A run whose ``timing.csv`` is missing, unreadable
    or ends before its last evaluation is left out, named in ``left_out`` with its reason."""
    walls = {}
    for key, runs in sorted(groups.items()):
        times = []
        for r in runs:
            try:
                times.append(wall_time(r))
            except ValueError as err:
                if left_out is not None:
                    left_out.append(f"{r['folder']}: {err}")
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
