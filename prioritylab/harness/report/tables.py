"""The Markdown tables of a report, from :mod:`.stats`' rows."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from .runs import LAST, last_values
from .stats import MIN_CI_RUNS, NOMINAL_RUNS, TABLE3_KEYS, mean_ci, welch_ci


def table_markdown(table: list[dict], few_evaluations: dict | None = None) -> str:
    """``table.md``; ``few_evaluations`` (:func:`stats.few_evaluations`) marks the groups with a run of fewer than
    ``LAST`` evaluations, whose score is then not a mean of the last ``LAST``."""
    few_evaluations = few_evaluations or {}
    lines = [f"| agent | env | sampler | seeds | steps | return (last {LAST} evals) ± 95 % CI |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for t in table:
        ci = "n/a (1 seed)" if math.isnan(t["ci95"]) else f"{t['ci95']:.1f}"
        few = " (few seeds)" if 1 < t["seeds"] < MIN_CI_RUNS else ""
        unfinished = "" if t["finished"] == t["seeds"] else f" ({t['seeds'] - t['finished']} partial)"
        n = few_evaluations.get((t["agent"], t["env"], t["sampler"]))
        short = "" if n is None else f" (a run of {n} evals)"
        apart = " (not comparable: below)" if t.get("not_comparable") else ""
        lines.append(f"| {t['agent']} | {t['env']} | {t['sampler']} | {t['seeds']}{unfinished}{few} | "
                     f"{t['last_step']} | {t['return_last10_mean']:.1f} ± {ci}{short}{apart} |")  # fmt: skip
    if any(1 < t["seeds"] < MIN_CI_RUNS for t in table):
        lines += ["", f"(few seeds): fewer than {MIN_CI_RUNS} seeds; the interval is not meaningful."]
    if few_evaluations:
        lines += ["", f"(a run of N evals): a run with fewer than {LAST} evaluations, whose score is the mean of all "
                      "of them, its first ones included; compare such a group's score with care."]  # fmt: skip
    flagged = [t for t in table if t.get("not_comparable")]
    if flagged:
        lines.append("")
        lines.append("**Not comparable** (left out of every other table and of the figures):")
        lines += [f"- {t['agent']} {t['env']} {t['sampler']}: {t['not_comparable']}" for t in flagged]
    return "\n".join(lines) + "\n"


def ners_table3(groups: dict) -> str:
    """NERS Table 3's statistics of the drawn transitions at the last evaluation, mean over seeds; with at least
    :data:`MIN_CI_RUNS` seeds each cell also gives the 95 % t-interval half-width across seeds."""
    lines = ["| agent | env | sampler | seeds | |TD error| mean | |TD error| std | Q mean | Q std |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (agent, env, sampler), runs in sorted(groups.items()):
        cells = []
        for k, digits in zip(TABLE3_KEYS, (3, 3, 2, 2), strict=True):
            values = last_values(runs, k)
            if not np.isfinite(values).all():
                cells.append(NOT_LOGGED if np.isnan(values).any() else DIVERGED)
                continue
            mean, half = mean_ci(values)
            cells.append(f"{mean:.{digits}f} ± {half:.{digits}f}" if len(runs) >= MIN_CI_RUNS else f"{mean:.{digits}f}")
        lines.append(f"| {agent} | {env} | {sampler} | {len(runs)} | " + " | ".join(cells) + " |")
    if any(len(runs) >= MIN_CI_RUNS for runs in groups.values()):
        lines += ["", "± : 95 % t-interval half-width across seeds."]
    lines += table3_differences(groups, TABLE3_KEYS)
    return "\n".join(lines) + "\n"


NO_SPREAD = "(no interval: every seed alike on both sides)"
NOT_LOGGED = "— (not logged by every seed)"
DIVERGED = "— (infinite in some seed: diverged)"


def table3_differences(groups: dict, keys: tuple[str, ...]) -> list[str]:
    """Lines of a table of every pair of samplers of an (agent, env) with at least :data:`MIN_CI_RUNS` seeds
    each: the difference of each statistic's mean over seeds with its Welch 95 % interval, starred when the
    interval excludes 0."""
    by_task, few = defaultdict(dict), defaultdict(list)
    for (agent, env, sampler), runs in sorted(groups.items()):
        if len(runs) >= MIN_CI_RUNS:
            by_task[(agent, env)][sampler] = {k: last_values(runs, k) for k in keys}
        else:
            few[(agent, env)].append(f"{sampler} ({len(runs)})")
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
                    both = np.concatenate([samplers[a][k], samplers[b][k]])
                    if not np.isfinite(both).all():
                        cells.append(NOT_LOGGED if np.isnan(both).any() else DIVERGED)
                        continue
                    d, lo, hi = welch_ci(samplers[a][k], samplers[b][k])
                    star = "*" if lo > 0 or hi < 0 else ""
                    cells.append(f"{d:.3g} [{lo:.3g}, {hi:.3g}]{star}" if math.isfinite(lo) else f"{d:.3g} (no spread)")
                lines.append(f"| {a} − {b} | " + " | ".join(cells) + " |")
        if few[(agent, env)]:
            lines += ["", f"In no pair (fewer than {MIN_CI_RUNS} seeds): {', '.join(few[(agent, env)])}."]
    return lines


def _percent(x: float) -> str:
    """A signed whole percentage; one significant digit where that would round a non-zero value to 0."""
    text = f"{x:+.0f}"
    if x == 0 or text not in ("+0", "-0"):
        return text
    return f"{x:+.1g}"


def _intervals(r: dict) -> tuple[str, str]:
    """A difference row's absolute and relative intervals as table text (:func:`_welch_row`'s fields)."""
    if not math.isfinite(r["lo"]):
        return NO_SPREAD, NO_SPREAD
    return f"[{r['lo']:+.3g}, {r['hi']:+.3g}]", f"[{_percent(r['pct_lo'])}, {_percent(r['pct_hi'])}]"


NOT_COMPARED = "Not compared (a comparison the papers make that these runs cannot give)"


def differences_markdown(rows: list[dict], left_out: Sequence[str] = ()) -> str:
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
    lines += left_out_lines(NOT_COMPARED, left_out)
    return "\n".join(lines) + "\n"


def speed_markdown(rows: list[dict], left_out: Sequence[str] = ()) -> str:
    lines = ["| agent | env | sampler | vs | seeds | area X - Y [95 % CI] | % of Y's area [95 % CI] | "
             "Y twice as fast: gain | X - (Y twice as fast) [95 % CI] | the same, observed window [95 % CI] | "
             "speed-up of Y excluded |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        few = r["seeds"] < MIN_CI_RUNS or r["baseline_seeds"] < MIN_CI_RUNS
        seeds = f"{r['seeds']} / {r['baseline_seeds']}" + (" (few seeds)" if few else "")
        cis = _intervals(r)
        twice = (f"{r['vs_twice']:+.3g} [{r['vs_twice_lo']:+.3g}, {r['vs_twice_hi']:+.3g}]"
                 if math.isfinite(r["vs_twice_lo"]) else f"{r['vs_twice']:+.3g} {NO_SPREAD}")
        seen = ("—" if not math.isfinite(r["vs_twice_seen"]) else
                f"{r['vs_twice_seen']:+.3g} [{r['vs_twice_seen_lo']:+.3g}, {r['vs_twice_seen_hi']:+.3g}]"
                if math.isfinite(r["vs_twice_seen_lo"]) else f"{r['vs_twice_seen']:+.3g} {NO_SPREAD}")
        seen += f" (to step {r['seen_until']:.6g})" if math.isfinite(r["vs_twice_seen"]) else ""
        excluded = ("—" if not math.isfinite(r["excluded_speed_up"]) else "any (X behind Y)"
                    if r["excluded_speed_up"] == 1.0 else f"{r['excluded_speed_up']:.2f}x and more")
        lines.append(f"| {r['agent']} | {r['env']} | {r['sampler']} | {r['baseline']} | {seeds} | "
                     f"{r['difference']:+.3g} {cis[0]} | {_percent(r['pct'])} % {cis[1]} | "
                     f"{r['twice_as_fast']:+.3g} ({_percent(r['twice_as_fast_pct'])} %) | {twice} | {seen} | "
                     f"{excluded} |")
    lines += ["", "Area: a run's mean return over all its evaluations, which rewards learning early as well as ending "
              "high; X minus Y with the 95 % Welch t-interval over the seeds, for the comparisons the papers make "
              "(CLAIMS). Y twice as fast: each Y run's curve read at twice each evaluation step, held at its last "
              "value beyond its end (which understates a run still improving there); the gain is the size of PER's "
              "\"learning is twice as fast\" in these units, and an interval of X - (Y twice as fast) wholly below 0 "
              "says X learns less than twice as fast as Y; one wholly above 0 does not say X learns faster, since "
              "the held values may understate Y. Observed window: the same difference over the evaluations up to "
              "half of Y's last step (the step given), where every value of Y read at twice the speed was "
              "observed: wholly above 0, X learns more than twice as fast there; wholly below 0, less. Speed-up "
              "excluded: the smallest factor (1, or 1.05 to 4 in steps of 0.05) from which an interval of X - (Y "
              "that much faster), held or over its observed window, lies wholly below 0 at every factor tried up "
              "to 4; \"any\" when that holds from 1 on."]
    if any(r["seeds"] < MIN_CI_RUNS or r["baseline_seeds"] < MIN_CI_RUNS for r in rows):
        lines.append(f"(few seeds): fewer than {MIN_CI_RUNS} seeds on a side; the interval is not meaningful.")
    lines += left_out_lines(NOT_COMPARED, left_out)
    return "\n".join(lines) + "\n"


def gains_markdown(rows: list[dict], left_out: Sequence[str] = ()) -> str:
    lines = ["| agent | sampler | vs | envs | seeds | mean % gain | median % gain |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        few = " (few seeds)" if r["seeds"] < MIN_CI_RUNS else ""
        median = median_cell(r["median_gain_pct"], r["envs"], "{:+.2f} %")
        lines.append(f"| {r['agent']} | {r['sampler']} | {r['baseline']} | {r['envs']} | {r['seeds']}{few} | "
                     f"{r['mean_gain_pct']:+.2f} % | {median} |")  # fmt: skip
    if any(r["envs"] < MIN_MEDIAN_TASKS for r in rows):
        lines += ["", MEDIAN_NOTE.format(over="environments")]
    if any(r["seeds"] < MIN_CI_RUNS for r in rows):
        lines += ["", f"(few seeds): a gain from fewer than {MIN_CI_RUNS} seeds per sampler is the difference of "
                      "these runs, not an estimate one can rely on: seed-to-seed spread is often larger."]
    lines += left_out_lines("Environments left out of a row", left_out)
    return "\n".join(lines) + "\n"


def median_cell(value, over: int, fmt: str = "") -> str:
    """A median over ``over`` tasks (environments, games): ``value`` formatted with ``fmt``, or an aggregates row
    (``value`` a dict) as its median interval; "—" over fewer than :data:`MIN_MEDIAN_TASKS`, where it is the mean."""
    if over < MIN_MEDIAN_TASKS:
        return MEDIAN_IS_MEAN
    if isinstance(value, dict):
        return interval(value["median"], value["median_lo"], value["median_hi"], value["ci_meaningful"])
    return fmt.format(value)


def interval(value: float, lo: float, hi: float, meaningful: bool) -> str:
    """``value [lo, hi]``, or the value alone (marked) when the interval rests on too few runs."""
    return f"{value:.3g} [{lo:.3g}, {hi:.3g}]" if meaningful else f"{value:.3g} (no CI)"


MIN_MEDIAN_TASKS = 3
"""A median over fewer tasks is their mean (rliable's median is over the tasks' mean scores, not over runs)."""
MEDIAN_IS_MEAN = "— (= mean)"
MEDIAN_NOTE = ("— (= mean): this median, like rliable's, is taken over {over} rather than over runs, so over one or "
               "two it equals the mean and is not repeated here (the CSV keeps the value).")
BY_TASK_NOTE = ("Each task of the domain alone (`<domain>: <task>`), with its own seeds: the domain's rows take "
                "each sampler's seeds as many on every task as on its task with the fewest, so a task with fewer seeds "
                "(still running) cuts every other task's there.")
FEW_RUNS_NOTE = (f"(no CI): fewer than {MIN_CI_RUNS} runs per task, too few for a meaningful bootstrap interval; "
                 "the point estimate describes these runs only.")
BOOTSTRAP_NOTE = (f"95 % CI: rliable's stratified-bootstrap percentile interval. With fewer than {NOMINAL_RUNS} runs "
                  "per task it is narrower than a 95 % interval: in simulated studies of 5 runs a side it missed its "
                  "truth about twice as often as a 95 % interval would, and far more often where one sampler's runs "
                  "nearly all beat the other's; at 10 runs close to 1 time in 20 (docs/results/README.md, "
                  "`scripts/bootstrap_coverage.py`).")
OVERHEAD_CAVEAT = ("**Caveat: wall times of sweep runs on a shared machine.** Each run's time includes whatever "
                   "else ran beside it (other runs, tests, builds), so these rows are no measure of a sampler's "
                   "cost; `prioritylab bench agent` measures that side by side (docs/benchmarks.md).")


def left_out_lines(title: str, items: Sequence[str]) -> list[str]:
    """A table's list of what it leaves out, each with its reason (nothing when nothing is)."""
    return ["", f"{title}:", ""] + [f"- {x}" for x in items] if items else []


def overhead_markdown(rows: list[dict], left_out: Sequence[str] = ()) -> str:
    lines = [OVERHEAD_CAVEAT, "",
             "| agent | env | sampler | runs | wall time (min) ± 95 % CI | increase over uniform |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        ci = "" if math.isnan(r["ci95_minutes"]) else f" ± {r['ci95_minutes']:.2f}"
        inc = "—" if math.isnan(r["increase_over_uniform_pct"]) or r["sampler"] == "uniform" else \
            f"{r['increase_over_uniform_pct']:+.1f} %"
        few = " (few runs)" if 1 < r["runs"] < MIN_CI_RUNS else ""
        lines.append(f"| {r['agent']} | {r['env']} | {r['sampler']} | {r['runs']}{few} | {r['wall_minutes']:.2f}{ci} "
                     f"| {inc} |")  # fmt: skip
    if any(1 < r["runs"] < MIN_CI_RUNS for r in rows):
        lines += ["", f"(few runs): fewer than {MIN_CI_RUNS} runs; the interval is not meaningful."]
    lines += left_out_lines("Runs left out of this table", left_out)
    return "\n".join(lines) + "\n"


def versus_markdown(rows: list[dict], keys: Sequence[str], unpaired: Sequence[str] = ()) -> str:
    key = ", ".join(keys)
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
    if unpaired:
        lines += ["", "Reference runs without a row (in no table; at least 2 runs a side are needed):", ""]
        lines += [f"- {x}" for x in unpaired]
    return "\n".join(lines) + "\n"


def partial_note(runs: list[dict]) -> str:
    """The line every table of a report that averages partial runs in (``--include-partial``) begins with; empty
    when every run finished."""
    n = sum(not r["finished"] for r in runs)
    if not n:
        return ""
    return (f"**{n} of the {len(runs)} runs here are partial** (no `finished.json`, averaged in by "
            "`--include-partial`): a partial run's final score is its last 10 evaluations so far, and its area "
            "under the learning curve covers only the evaluations it reached. `status.md` names them.\n\n")


def unused_note(status: list[dict]) -> str:
    """The line every table begins with when some folders found are in none of its rows (corrupt, unreadable,
    partial without ``--include-partial``, never updated, or no run at all): the tables show only fewer seeds;
    empty otherwise."""
    unused = Counter(x["status"] for x in status if not x["status"].startswith(("used", "reference")))
    if not unused:
        return ""
    n = sum(unused.values())
    kinds = "; ".join(f"{k} {what}" for what, k in sorted(unused.items()))
    return (f"**{n} of the {len(status)} folders found are in no table here** ({kinds}): `status.md` names "
            "them and why.\n\n")


def status_markdown(status: list[dict], runs: Sequence[dict] = ()) -> str:
    """``status.md``: every folder found, with what became of it, the code it was recorded with and the machine
    it ran on; then each group of ``runs`` (agent, env, sampler) whose runs were recorded at more than one
    commit, each whose runs ran on more than one machine, and each whose runs were recorded with more than one
    version of a package (a resumed run's commits, machines and packages counted, each from the step it was resumed
    at: ``runs.by_segment``)."""
    lines = ["| run folder | status | detail | code (commit) | machine |", "|---|---|---|---|---|"]
    lines += [f"| {x['folder']} | {x['status']} | {x['detail']} | {x.get('code', '—')} | {x.get('machine', '—')} |"
              for x in status]  # fmt: skip
    for key, sep, what, why in (
        ("code", ", ", "were recorded at more than one commit",
         "the report compares their settings, not their code: `git log` between the commits lists what changed"),
        ("machine", "; ", "ran on more than one machine",
         "the same seed and code on another CPU or build may differ in its last bits and then in its course, so "
         "such runs are valid draws of the algorithm but not bit-for-bit repeatable across machines"),
    ):
        values = defaultdict(set)
        for r in runs:
            values[(r["agent"], r["env"], r["sampler"])].update(text for _, text in r[key])
        mixed = {group: sorted(v) for group, v in sorted(values.items()) if len(v) > 1}
        if mixed:
            lines += ["", f"Groups whose runs {what} ({why}):", ""]
            lines += [f"- {' '.join(group)}: {sep.join(v)}" for group, v in mixed.items()]
    versions = defaultdict(lambda: defaultdict(set))  # group -> package -> the versions its runs were recorded with
    for r in runs:
        for _, pairs in r.get("packages", ()):
            for package, version in pairs:
                versions[(r["agent"], r["env"], r["sampler"])][package].add(version)
    mixed = {}
    for group, by in sorted(versions.items()):
        if differ := {package: sorted(v) for package, v in sorted(by.items()) if len(v) > 1}:
            mixed[group] = differ
    if mixed:
        lines += ["", "Groups whose runs were recorded with more than one version of a package (a library's release "
                      "may change the numbers a run computes, or its environment's dynamics; the report pools them "
                      "all the same):", ""]  # fmt: skip
        lines += [f"- {' '.join(group)}: " + "; ".join(f"{p} {', '.join(v)}" for p, v in by.items())
                  for group, by in mixed.items()]  # fmt: skip
    return "\n".join(lines) + "\n"


def human_normalised_markdown(rows: list[dict], left_out: Sequence[str] = ()) -> str:
    lines = ["| agent | sampler | games | mean | median |", "|---|---|---|---|---|"]
    lines += [f"| {r['agent']} | {r['sampler']} | {r['games']} | {r['mean']:.3f} | "
              f"{median_cell(r['median'], r['games'], '{:.3f}')} |" for r in rows]  # fmt: skip
    if any(r["games"] < MIN_MEDIAN_TASKS for r in rows):
        lines += ["", MEDIAN_NOTE.format(over="games")]
    lines += left_out_lines("Games left out, and samplers compared over different games", left_out)
    return "\n".join(lines) + "\n"


def aggregates_markdown(rows: list[dict], left_out: list[str], by_task: bool = False) -> str:
    """rliable's IQM, mean and median rows, and what :func:`.stats.score_matrices` left out (``by_task``: of the
    rows of :func:`.stats.task_cells`, one task each)."""
    lines = ["| agent | domain | sampler | runs x tasks | IQM [95 % CI] | mean [95 % CI] | median [95 % CI] |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r['agent']} | {r['domain']} | {r['sampler']} | {r['runs']} x {r['tasks']} | "
              + " | ".join(interval(r[m], r[m + "_lo"], r[m + "_hi"], r["ci_meaningful"]) for m in ("iqm", "mean"))
              + f" | {median_cell(r, r['tasks'])} |" for r in rows]  # fmt: skip
    if any(r["tasks"] < MIN_MEDIAN_TASKS for r in rows):
        lines += ["", MEDIAN_NOTE.format(over="tasks")]
    if any(r["ci_meaningful"] and r["runs"] < NOMINAL_RUNS for r in rows):
        lines += ["", BOOTSTRAP_NOTE]
    if any(not r["ci_meaningful"] for r in rows):
        lines += ["", FEW_RUNS_NOTE]
    if not rows:
        lines += ["", "No rows: no sampler has at least 2 finished runs on a task here (on MinAtar, a game also needs "
                  "uniform runs above random play to normalise by)."]
    if left_out and by_task:
        lines += ["", "Left out of a task's rows (a sampler with fewer than 2 runs on it):", ""]
        lines += [f"- {x}" for x in left_out]
    elif left_out:
        lines += ["", "Left out of these tables and the performance profiles (the samplers and tasks kept give the "
                  "most sampler-task cells with at least 2 runs each; improvement.md compares each pair on the tasks "
                  "both have):", ""] + [f"- {x}" for x in left_out]  # fmt: skip
    return "\n".join(lines) + "\n"


def _runs_a_side(row: dict) -> str:
    """The runs compared: ``5``, or the sampler's and the baseline's where they differ (``13 / 5``)."""
    return str(row["runs"]) if row["runs"] == row["baseline_runs"] else f"{row['runs']} / {row['baseline_runs']}"


def improvement_markdown(rows: list[dict], left_out: Sequence[str] = ()) -> str:
    lines = ["| agent | domain | sampler | vs | runs x tasks | P(sampler > baseline) [95 % CI] |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['agent']} | {r['domain']} | {r['sampler']} | {r['baseline']} | {_runs_a_side(r)} x {r['tasks']} | "
              f"{interval(r['p_improvement'], r['lo'], r['hi'], r['ci_meaningful'])} |" for r in rows]  # fmt: skip
    if any(r["runs"] != r["baseline_runs"] for r in rows):
        lines += ["", "Runs: the sampler's / the baseline's, where they differ (P(X > Y) counts every pair)."]
    if any(r["ci_meaningful"] and min(r["runs"], r["baseline_runs"]) < NOMINAL_RUNS for r in rows):
        lines += ["", BOOTSTRAP_NOTE]
    if any(not r["ci_meaningful"] for r in rows):
        lines += ["", FEW_RUNS_NOTE]
    if not rows:
        lines += ["", "No rows: no comparison the papers make (CLAIMS) has both samplers with at least 2 runs on a "
                  "common task here."]
    lines += left_out_lines(NOT_COMPARED, left_out)
    return "\n".join(lines) + "\n"
