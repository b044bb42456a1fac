"""``prioritylab report``: tables and figures from run folders alone."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from prioritylab.cli import main as cli_main
from prioritylab.harness import report as R
from prioritylab.harness.report import plots, tables
from prioritylab.harness.report import runs as report_runs
from prioritylab.harness.report import stats as report_stats


def fake_run(root, sampler, seed, returns, finished=True, extra=None, env="Hopper-v5", agent="td3", wall=None,
             config=None):
    folder = root / f"{agent}_{env.replace('/', '-')}_{sampler}_s{seed}"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(
        {"config": {"agent": agent, "env": env, "sampler": sampler, "seed": seed, **(config or {})}}))
    if wall is not None:
        (folder / "timing.csv").write_text(f"step,wall_time,steps_per_s,updates_per_s\n1000,{wall},1,1\n")
    with open(folder / "evaluations.csv", "w", newline="") as fh:
        fields = ["step", "return_mean", "loss", "ess_mean", "td_mean", "td_std", "q_mean", "q_std"]
        w = csv.DictWriter(fh, fieldnames=[*fields, *(k for k in extra or {} if k not in fields)])
        w.writeheader()
        # the loss (read by no table) differs by sampler, as real runs' rows do: equal returns of two samplers are
        # not one run's files under two manifests
        loss = zlib.crc32(sampler.encode()) / 2**32
        for i, r in enumerate(returns):
            w.writerow({"step": 100 * (i + 1), "return_mean": r, "loss": loss, "ess_mean": 1.0, "td_mean": 0.5 + seed,
                        "td_std": 0.1, "q_mean": 10.0, "q_std": 2.0, **(extra or {})})
    if finished:
        (folder / "finished.json").write_text(json.dumps({"step": 100 * len(returns)}))


@pytest.mark.figures
def test_table_is_the_mean_and_t_interval_of_the_last_ten_evaluations(tmp_path):
    rng = np.random.default_rng(0)
    curves = {s: rng.normal(size=14).cumsum() for s in range(3)}
    for s, c in curves.items():
        fake_run(tmp_path / "runs", "per", s, c, finished=s != 2)
    fake_run(tmp_path / "runs", "uniform", 0, np.arange(12.0))
    result = R.report(tmp_path / "runs", tmp_path / "out", include_partial=True)
    row = next(t for t in result["table"] if t["sampler"] == "per")
    finals = np.array([c[-10:].mean() for c in curves.values()])
    assert row["return_last10_mean"] == pytest.approx(finals.mean(), rel=1e-12, abs=0)
    half = stats.t.ppf(0.975, 2) * finals.std(ddof=1) / math.sqrt(3)
    assert row["ci95"] == pytest.approx(half, rel=1e-12, abs=0)
    assert row["finished"] == 2 and row["seeds"] == 3
    text = (tmp_path / "out" / "table.md").read_text()
    assert "(1 partial)" in text and "n/a (1 seed)" in text
    assert "| per | 3 (1 partial) (few seeds) |" in text and "| uniform | 1 |" in text  # 1 seed: no interval to flag
    assert "(few seeds): fewer than 5 seeds; the interval is not meaningful." in text
    for name in ("table", "differences", "speed", "gains", "aggregates", "improvement", "overhead", "ners_table3"):
        assert (tmp_path / "out" / f"{name}.md").read_text().startswith("**1 of the 4 runs here are partial**")
    assert "partial" not in (tmp_path / "out" / "status.md").read_text().splitlines()[0]
    R.report(tmp_path / "runs", tmp_path / "finished_only")
    assert "runs here are partial" not in (tmp_path / "finished_only" / "differences.md").read_text()
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    assert "| td3 | Hopper-v5 | per | 3 | 1.500 | 0.100 | 10.00 | 2.00 |" in t3
    assert (tmp_path / "out" / "curves_td3_Hopper-v5.png").stat().st_size > 0
    assert (tmp_path / "out" / "diagnostics_td3_Hopper-v5.png").stat().st_size > 0


def test_the_progress_bar_names_each_part_and_ends_full_and_closed(tmp_path, monkeypatch):
    """On a terminal the report shows its parts (the bootstraps take minutes); the bar reaches its total, and is
    closed when the report fails too."""
    bars = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.kwargs, self.n, self.parts, self.closed = total, kwargs, 0, [], False
            bars.append(self)

        def update(self, n=1):
            self.n += n

        def set_postfix_str(self, text):
            self.parts.append(text)

        def close(self):
            self.closed = True

    monkeypatch.setattr(R, "tqdm", Bar)
    for sampler in ("uniform", "per"):
        for seed in range(2):
            fake_run(tmp_path / "runs", sampler, seed, np.arange(12.0) + seed)
    R.report(tmp_path / "runs", tmp_path / "out")
    bar = bars[-1]
    assert bar.n == bar.total == R.REPORT_PARTS and bar.closed
    assert bar.kwargs["disable"] is None  # shown on a terminal only, so a log or a pipe gets no bar
    assert len(set(bar.parts)) == R.REPORT_PARTS and bar.parts[0] == "reading the runs"
    with pytest.raises(ValueError, match="no finished runs"):
        R.report(tmp_path / "empty", tmp_path / "out2")
    assert len(bars) == 2 and bars[-1].closed


def test_a_report_without_a_run_to_use_is_refused_in_one_line_leaving_an_earlier_report_as_it_was(tmp_path, capsys):
    """Partial and corrupt runs only: the error counts what it found and names the first corrupt run's fault,
    and the report already in ``--out`` keeps every file as it was (its ``status.md`` included)."""
    from prioritylab.cli import main as cli_main

    for seed in range(2):
        fake_run(tmp_path / "good", "per", seed, [1.0 + seed] * 10)
        fake_run(tmp_path / "bad", "per", seed, [1.0] * 10, finished=False)
    fake_run(tmp_path / "bad", "uniform", 0, [1.0] * 10)
    (tmp_path / "bad" / "td3_Hopper-v5_uniform_s0" / "evaluations.csv").write_text("step,return_mean\n100,x\n")
    out = tmp_path / "out"
    R.report(tmp_path / "good", out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(SystemExit) as err:
        cli_main(["report", str(tmp_path / "bad"), "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    corrupt = tmp_path / "bad" / "td3_Hopper-v5_uniform_s0" / "evaluations.csv"
    assert err.value.code == 2 and lines == [
        f"prioritylab report: error: no finished runs to report under {tmp_path / 'bad'} (1 corrupt; 2 partial, "
        f"left out; the first corrupt one: {corrupt}: row 1 has return_mean 'x', not a number); --include-partial "
        "uses partial runs"]  # fmt: skip
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    with pytest.raises(SystemExit):
        cli_main(["report", str(tmp_path / "bad"), "--out", str(tmp_path / "new" / "out")])
    assert not (tmp_path / "new").exists()


def test_ners_table3_gives_a_t_interval_across_five_or_more_seeds(tmp_path):
    for seed in range(5):
        fake_run(tmp_path / "runs", "ners", seed, [1.0] * 12)
    R.report(tmp_path / "runs", tmp_path / "out")
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    td = 0.5 + np.arange(5.0)  # fake_run's td_mean is 0.5 + seed
    half = stats.t.ppf(0.975, 4) * td.std(ddof=1) / math.sqrt(5)
    assert f"| td3 | Hopper-v5 | ners | 5 | 2.500 ± {half:.3f} | 0.100 ± 0.000 | 10.00 ± 0.00 | 2.00 ± 0.00 |" in t3


@pytest.mark.figures
def test_table3_figure_is_drawn_where_the_runs_log_the_four_statistics(tmp_path):
    for seed in range(3):
        fake_run(tmp_path / "runs", "ners", seed, [1.0] * 12)
        fake_run(tmp_path / "runs", "uniform", seed, [1.0] * 12)
    fake_run(tmp_path / "runs", "uniform", 0, [1.0] * 12, env="Walker2d-v5", extra={"q_std": ""})
    R.report(tmp_path / "runs", tmp_path / "out")
    assert (tmp_path / "out" / "table3_td3_Hopper-v5.png").stat().st_size > 0
    assert not (tmp_path / "out" / "table3_td3_Walker2d-v5.png").exists()  # a statistic is not logged
    figures = json.loads((tmp_path / "out" / "manifest.json").read_text())["figures"]
    assert "table3_td3_Hopper-v5.png" in figures


@pytest.mark.parametrize(("given", "where", "message"),
                         [("runs", "runs", "is {given}, which it reads runs from"),
                          ("runs/td3_Hopper-v5_per_s0", "runs/td3_Hopper-v5_per_s0/report",
                           "lies inside the run folder {given}")])  # fmt: skip
def test_a_report_into_the_folder_it_reads_runs_from_or_into_a_run_is_refused_in_one_line(tmp_path, capsys, given,
                                                                                          where, message):  # fmt: skip
    fake_run(tmp_path / "runs", "per", 0, [1.0] * 10)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exit_:
        cli_main(["report", str(tmp_path / given), "--out", str(tmp_path / where)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(lines) == 1
    assert f"--out {tmp_path / where} " + message.format(given=tmp_path / given) in lines[0]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_report_into_a_reused_folder_removes_the_figures_of_groups_no_longer_there(tmp_path):
    """An earlier report's figure of a group the runs no longer hold would read as current; a figure the report
    did not draw (one drawn by hand beside it) stays."""
    for seed in range(2):
        fake_run(tmp_path / "runs", "uniform", seed, [1.0] * 12)
        fake_run(tmp_path / "walker", "uniform", seed, [1.0] * 12, env="Walker2d-v5")
    out = tmp_path / "out"
    R.report([tmp_path / "runs", tmp_path / "walker"], out)
    (out / "kappa_curves.png").write_bytes(b"drawn by hand")
    (out / "curves_td3_Ant-v5.png").write_bytes(b"not listed by the earlier report")
    assert (out / "curves_td3_Walker2d-v5.png").exists() and (out / "diagnostics_td3_Walker2d-v5.png").exists()
    R.report(tmp_path / "runs", out)
    assert not (out / "curves_td3_Walker2d-v5.png").exists() and not (out / "diagnostics_td3_Walker2d-v5.png").exists()
    assert (out / "curves_td3_Hopper-v5.png").exists() and (out / "kappa_curves.png").read_bytes() == b"drawn by hand"
    assert (out / "curves_td3_Ant-v5.png").exists()
    figures = json.loads((out / "manifest.json").read_text())["figures"]
    assert all(name.startswith(plots.FIGURE_PREFIXES) and (out / name).exists() for name in figures)
    assert "curves_td3_Hopper-v5.png" in figures and not any("Walker2d" in name for name in figures)


def test_figure_names_come_from_one_place():
    path = plots.figure_path(Path("o"), "curves", "dqn", "MinAtar/Breakout-v1")
    assert path == Path("o/curves_dqn_MinAtar-Breakout-v1.png")
    assert plots.FIGURE_PREFIXES == tuple(f"{kind}_" for kind in plots.FIGURE_KINDS)
    with pytest.raises(ValueError, match="'kappa'"):
        plots.figure_path(Path("o"), "kappa", "dqn", "Breakout")


def test_welch_interval_matches_scipy():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 1.0, 7), rng.normal(0.0, 3.0, 10)
    diff, lo, hi = report_stats.welch_ci(a, b)
    res = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert diff == pytest.approx(a.mean() - b.mean(), rel=1e-12)
    assert (lo, hi) == pytest.approx((res.low, res.high), rel=1e-9)


def test_welch_interval_is_undefined_when_no_seed_differs(tmp_path):
    diff, lo, hi = report_stats.welch_ci(np.array([3.0, 3.0]), np.array([1.0, 1.0, 1.0]))
    assert diff == 2.0 and math.isnan(lo) and math.isnan(hi)
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "uniform", seed, [1.0] * 10)
        fake_run(runs, "per", seed, [3.0] * 10)
    R.report(runs, tmp_path / "out")
    line = next(x for x in (tmp_path / "out" / "differences.md").read_text().splitlines() if "| per | uniform |" in x)
    assert "+2 (no interval: every seed alike on both sides)" in line and "nan" not in line, line


def test_ners_table3_lists_each_pair_of_samplers_with_five_or_more_seeds(tmp_path):
    for seed in range(5):
        fake_run(tmp_path / "runs", "ners", seed, [1.0] * 12)
        fake_run(tmp_path / "runs", "uniform", seed, [1.0] * 12)
    fake_run(tmp_path / "runs", "per", 0, [1.0] * 12)  # one seed: left out of the differences
    R.report(tmp_path / "runs", tmp_path / "out")
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    half = stats.t.ppf(0.975, 8) * math.sqrt(2 * np.arange(5.0).var(ddof=1) / 5)  # td_mean = 0.5 + seed in both
    assert f"| ners − uniform | 0 [{-half:.3g}, {half:.3g}] | 0 (no spread) | 0 (no spread) | 0 (no spread) |" in t3
    assert "per −" not in t3 and "− per" not in t3


def test_smoothing_is_a_trailing_uniform_window():
    y = np.arange(8.0)
    np.testing.assert_allclose(plots.smooth(y, 5), [0, 0.5, 1, 1.5, 2, 3, 4, 5], rtol=0, atol=1e-12)


def test_a_killed_reports_stage_is_removed_and_two_reports_never_write_one_folder_at_once(tmp_path):
    """A report killed (SIGKILL) leaves its stage in ``--out``: the next report removes it.  A report into a
    folder another report is writing is refused, so no report's stage is removed under it."""
    import fcntl
    import os

    runs, out = tmp_path / "runs", tmp_path / "out"
    for sampler in ("uniform", "per"):
        fake_run(runs, sampler, 0, [1.0] * 10)
    (out / ".report-killed").mkdir(parents=True)
    (out / ".report-killed" / "table.md").write_text("half")
    R.report(runs, out)
    assert not list(out.glob(".report-*")) and (out / "table.md").exists()
    fd = os.open(out, os.O_RDONLY)  # another report's hold on the folder
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="another prioritylab report is writing into"):
            R.report(runs, out)
    finally:
        os.close(fd)
    R.report(runs, out)


@pytest.mark.parametrize("stop", ["interrupt", "terminate"])
def test_a_stopped_report_says_so_in_one_line_and_leaves_no_folder_it_made(tmp_path, capsys, monkeypatch, stop):
    runs = tmp_path / "runs"
    fake_run(runs, "uniform", 0, [1.0] * 10)

    def stopped(*args, **kwargs):
        if stop == "interrupt":
            raise KeyboardInterrupt
        import signal

        signal.raise_signal(signal.SIGTERM)  # the report's handler turns it into a stop

    monkeypatch.setattr(R, "report", stopped)
    out = tmp_path / "new" / "out"
    assert cli_main(["report", str(runs), "--out", str(out)]) == {"interrupt": 130, "terminate": 143}[stop]
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"prioritylab report: stopped by signal {2 if stop == 'interrupt' else 15} before it finished"]
    assert not (tmp_path / "new").exists()


def test_command_line_errors_are_one_line(tmp_path, capsys):
    for argv, message in ((["report", str(tmp_path), "--out", str(tmp_path / "o")], "no run folders"),
                          (["report", str(tmp_path / "missing")], "is not a folder")):  # fmt: skip
        with pytest.raises(SystemExit) as err:
            cli_main(argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert err.value.code == 2 and len(lines) == 1 and message in lines[0]


def test_partial_and_corrupt_runs_are_listed_and_never_averaged_in(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [1.0] * 12)
    fake_run(runs, "per", 1, [3.0] * 12)
    fake_run(runs, "per", 2, [100.0] * 5, finished=False)  # partial: would move the mean a lot
    fake_run(runs, "per", 3, [1.0] * 12)
    (runs / "td3_Hopper-v5_per_s3" / "manifest.json").write_text('{"config": {"agent": "td3"')  # truncated JSON
    fake_run(runs, "per", 4, [1.0] * 12)
    with open(runs / "td3_Hopper-v5_per_s4" / "evaluations.csv", "a") as fh:
        fh.write("1300,")  # a row cut short by a kill
    result = R.report(runs, tmp_path / "out")
    row = result["table"][0]
    assert row["seeds"] == 2 and row["return_last10_mean"] == 2.0
    status = {x["folder"].rsplit("/", 1)[1]: x for x in result["status"]}
    assert status["td3_Hopper-v5_per_s2"]["status"] == "partial, left out"
    s3, s4 = status["td3_Hopper-v5_per_s3"], status["td3_Hopper-v5_per_s4"]
    assert s3["status"] == "corrupt" and "manifest.json" in s3["detail"]
    assert s4["status"] == "corrupt" and "row 13" in s4["detail"]
    text = (tmp_path / "out" / "status.md").read_text()
    assert text.count("| corrupt |") == 2 and "| partial, left out |" in text
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert len(manifest["run_folders"]) == 2 and len(manifest["not_used"]) == 3 and manifest["git_commit"]
    first = ("**3 of the 5 folders found are in no table here** (2 corrupt; 1 partial, left out): `status.md` "
             "names them and why.")  # the tables show only the 2 seeds used: each says that others were found
    for name in ("table", "differences", "speed", "aggregates", "improvement"):
        assert (tmp_path / "out" / f"{name}.md").read_text().startswith(first), name
    assert not (tmp_path / "out" / "status.md").read_text().startswith("**")


@pytest.mark.parametrize("text, message", [
    ("step,wall_time\n1000,60\n2000\n3000,180\n", "row 2 is not whole: 1 fields where the header has 2"),
    ("step,wall_time\n1000,60,7\n2000,120\n", "row 1 is not whole: 3 fields where the header has 2"),
    ("step,wall_time\n1000,60\n2000,12", "row 2 is truncated (the file ends without a line end)"),
    ("step,wall_time\n1000\n2000,12", "row 1 is not whole: 1 fields where the header has 2"),
    (b"step,wall_time\n1000,\xff\n", "not readable CSV"),
])  # fmt: skip
def test_whole_rows_names_the_first_row_that_is_not_whole(tmp_path, text, message):
    """The reader both evaluations.csv and timing.csv go through: a row short or long anywhere in the file, or a
    last row without its line end (a file cut while written), is named; whole files read as written."""
    path = tmp_path / "timing.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(report_runs.NotWhole, match=re.escape(message)):
        report_runs.whole_rows(path)
    path.write_text("step,wall_time\r\n1000,60\r\n2000,120.5\r\n")
    assert report_runs.whole_rows(path) == [{"step": "1000", "wall_time": "60"}, {"step": "2000", "wall_time": "120.5"}]
    with pytest.raises(OSError):
        report_runs.whole_rows(tmp_path / "missing.csv")


def test_a_finished_run_whose_evaluations_are_not_its_own_record_is_corrupt(tmp_path):
    """Rows cut from the middle, rows past the run's schedule, a file from another run that ends at the same
    step, and a shorter run's files: each would move the last-10 mean while looking like a run, so each is
    refused with its reason."""
    runs = tmp_path / "runs"
    schedule = {"steps": 1200, "eval_every": 100}
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0] * 12, config=schedule)
    cut = runs / "td3_Hopper-v5_per_s1" / "evaluations.csv"
    lines = cut.read_text().splitlines(keepends=True)
    cut.write_text("".join([*lines[:4], *lines[6:]]))  # steps 400 and 500 gone, still ending at 1200
    fake_run(runs, "per", 2, [1.0] * 13, config=schedule)  # a row past the run's last step
    for seed, last in ((3, 1.0), (4, 7.5)):  # seed 4's finished.json recorded another last return
        fake_run(runs, "per", seed, [1.0] * 12, config=schedule)
        (runs / f"td3_Hopper-v5_per_s{seed}" / "finished.json").write_text(json.dumps({"step": 1200,
                                                                                      "last_eval": last}))
    fake_run(runs, "per", 5, [1.0] * 12, config=schedule, extra={"updates": 1100})
    (runs / "td3_Hopper-v5_per_s5" / "finished.json").write_text(json.dumps({"step": 1200, "updates": 1150}))
    fake_run(runs, "per", 6, [1.0] * 8, config=schedule)  # a shorter run's files, whole and agreeing, in its folder
    result = R.report(runs, tmp_path / "out")
    assert result["table"][0]["seeds"] == 2  # seeds 0 and 3
    status = {x["folder"].rsplit("_", 1)[1]: x for x in result["status"]}
    assert "updates 1100, but finished.json says updates 1150" in status["s5"]["detail"]
    assert status["s1"]["status"] == "corrupt" and "row 4 is at step 600, where the run's schedule" in status["s1"][
        "detail"]  # fmt: skip
    assert status["s2"]["status"] == "corrupt" and "13 rows, but a run of 1200 steps" in status["s2"]["detail"]
    assert status["s6"]["status"] == "corrupt" and "ended at step 800, but its manifest gives it 1200 steps" in status[
        "s6"]["detail"]  # fmt: skip
    assert status["s4"]["status"] == "corrupt" and "return_mean 1.0, but finished.json says last_eval 7.5" in status[
        "s4"]["detail"]  # fmt: skip
    assert [report_runs.evaluation_steps(1000, 300), report_runs.evaluation_steps(900, 300)] == [
        [300, 600, 900, 1000], [300, 600, 900]]  # fmt: skip


def test_a_cell_that_is_not_a_number_or_a_missing_column_makes_a_run_corrupt_by_name(tmp_path):
    """Every column is read as a number: a diagnostics cell that is not one would fail a later table, so the run
    is refused up front, named with its row and column; a header without ``return_mean`` is named as such, and
    a byte-order mark (a file saved by a spreadsheet) is read."""
    runs = tmp_path / "runs"
    for seed in range(4):
        fake_run(runs, "per", seed, [1.0 + seed] * 10)
    bad = runs / "td3_Hopper-v5_per_s1" / "evaluations.csv"
    lines = bad.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace(",1.5,", ",1.5x,", 1)  # row 3's td_mean
    bad.write_text("".join(lines))
    renamed = runs / "td3_Hopper-v5_per_s2" / "evaluations.csv"
    renamed.write_text(renamed.read_text().replace("return_mean", "return", 1))
    marked = runs / "td3_Hopper-v5_per_s3" / "evaluations.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + marked.read_bytes())
    result = R.report(runs, tmp_path / "out")
    status = {x["folder"].rsplit("_", 1)[1]: x for x in result["status"]}
    assert status["s1"]["status"] == "corrupt" and "row 3 has td_mean '1.5x', not a number" in status["s1"]["detail"]
    assert status["s2"]["status"] == "corrupt" and "no return_mean column (its header: step, return," in status[
        "s2"]["detail"]  # fmt: skip
    assert status["s3"]["status"] == "used" and result["table"][0]["seeds"] == 2


def test_a_group_with_a_run_of_fewer_than_ten_evaluations_is_marked_in_the_table(tmp_path):
    """A run shorter than 10 evaluations has no "last 10": its score is the mean of all of them, the first
    ones (before much learning) included, so the table says so where it gives that score."""
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "uniform", seed, [float(seed)] * 12)
        fake_run(runs, "per", seed, [float(seed)] * 6, env="Walker2d-v5")  # runs of other lengths: not compared
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    assert "| td3 | Walker2d-v5 | per | 2 (few seeds) | 600 | 0.5 ± 6.4 (a run of 6 evals) |" in text
    assert "| td3 | Hopper-v5 | uniform | 2 (few seeds) | 1200 | 0.5 ± 6.4 |" in text
    assert "(a run of N evals): a run with fewer than 10 evaluations" in text


def test_a_report_that_fails_half_way_leaves_the_earlier_report_in_its_folder_as_it_was(tmp_path, monkeypatch):
    """Tables and figures are written to a folder of their own and moved into ``--out`` only once all are
    written, so a report that fails in its last part leaves no mix of two reports (nor its own staging folder)."""
    runs = tmp_path / "runs"
    for sampler in ("uniform", "per"):
        for seed in range(2):
            fake_run(runs, sampler, seed, [1.0 + seed] * 10)
    out = tmp_path / "out"
    R.report(runs, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "curves_td3_Hopper-v5.png" in before and "table.md" in before
    fake_run(runs, "per", 2, [9.0] * 10)  # a new run changes the tables

    def fail(*args, **kwargs):
        raise RuntimeError("out of memory")

    real = plots.plot_profiles
    monkeypatch.setattr(plots, "plot_profiles", fail)
    with pytest.raises(RuntimeError, match="out of memory"):
        R.report(runs, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.setattr(plots, "plot_profiles", real)
    R.report(runs, out)
    assert "| per | 3 (few seeds) |" in (out / "table.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == sorted(before)


def test_a_run_that_finishes_while_the_report_reads_it_is_partial_not_corrupt(tmp_path, monkeypatch):
    fake_run(tmp_path, "per", 0, [1.0] * 5, finished=False)
    folder = tmp_path / "td3_Hopper-v5_per_s0"
    real_open = open

    def finishing_open(path, *args, **kwargs):  # the run writes its last row and finished.json as it is read
        fh = real_open(path, *args, **kwargs)
        if Path(path).name == "evaluations.csv" and not (folder / "finished.json").exists():
            text = fh.read()
            with real_open(path, "a") as out:
                out.write("600,1.0,0.5,1.0,0.5,0.1,10.0,2.0\n")
            (folder / "finished.json").write_text(json.dumps({"step": 600}))
            fh.close()
            return io.StringIO(text)
        return fh

    monkeypatch.setattr("builtins.open", finishing_open)
    run = report_runs.read_run(folder)
    assert not run["finished"] and len(run["rows"]) == 5  # read as the partial run it was when read
    monkeypatch.undo()
    run = report_runs.read_run(folder)
    assert run["finished"] and len(run["rows"]) == 6


def test_gain_tables_follow_lap_table_2(tmp_path):
    runs = tmp_path / "runs"
    finals = {("Hopper-v5", "uniform"): 100.0, ("Hopper-v5", "lap"): 150.0, ("Hopper-v5", "per"): 80.0,
              ("Walker2d-v5", "uniform"): -50.0, ("Walker2d-v5", "lap"): -25.0, ("Walker2d-v5", "per"): -100.0}
    for (env, sampler), v in finals.items():
        fake_run(runs, sampler, 0, [v] * 10, env=env)
    rows = {(r["sampler"], r["baseline"]): r for r in R.report(runs, tmp_path / "out")["gains"]}
    # gain = (x - y) / |y|: lap over uniform +50 % and +50 %, per over uniform -20 % and -100 %
    assert rows[("lap", "uniform")]["mean_gain_pct"] == pytest.approx(50.0, abs=1e-12)
    assert rows[("per", "uniform")]["mean_gain_pct"] == pytest.approx(-60.0, abs=1e-12)
    assert rows[("per", "uniform")]["median_gain_pct"] == pytest.approx(-60.0, abs=1e-12)
    # lap over per: (150 - 80) / 80 = +87.5 %, (-25 + 100) / 100 = +75 %
    assert rows[("lap", "per")]["mean_gain_pct"] == pytest.approx(81.25, abs=1e-12)
    assert rows[("lap", "per")]["envs"] == 2
    text = (tmp_path / "out" / "gains.md").read_text()
    assert "| td3 | lap | per | 2 | 1 (few seeds) | +81.25 % | — (= mean) |" in text  # one seed: flagged
    assert "not an estimate one can rely on" in text


@pytest.mark.figures
def test_atari_scores_are_human_normalised_and_aggregated_by_rliable(tmp_path):
    from prioritylab.scores import SCORES

    runs = tmp_path / "runs"
    half = {g: SCORES[g][0] + 0.5 * (SCORES[g][1] - SCORES[g][0]) for g in ("Pong", "Breakout")}
    for game in ("Pong", "Breakout"):
        for seed in range(3):
            fake_run(runs, "per", seed, [half[game]] * 10, env=f"ALE/{game}-v5", agent="ddqn")
            score = SCORES[game][0] + (0.2 if game == "Pong" else 1.0) * (SCORES[game][1] - SCORES[game][0])
            fake_run(runs, "uniform", seed, [score] * 10, env=f"ALE/{game}-v5", agent="ddqn")
    result = R.report(runs, tmp_path / "out")
    hn = {r["sampler"]: r for r in result["human_normalised"]}
    assert hn["per"]["mean"] == pytest.approx(0.5, abs=1e-12) and hn["per"]["median"] == pytest.approx(0.5, abs=1e-12)
    assert hn["uniform"]["mean"] == pytest.approx(0.6, abs=1e-12)
    assert hn["uniform"]["per_game"] == pytest.approx({"Breakout": 1.0, "Pong": 0.2}, abs=1e-12)
    agg = {r["sampler"]: r for r in result["aggregates"]}
    per = agg["per"]  # every run scores 0.5: every statistic and both ends of every interval are 0.5
    assert per["domain"].startswith("Atari") and per["runs"] == 3 and per["tasks"] == 2
    for m in ("iqm", "mean", "median"):
        assert per[m] == pytest.approx(0.5, abs=1e-12)
        assert per[f"{m}_lo"] == pytest.approx(0.5, abs=1e-12) and per[f"{m}_hi"] == pytest.approx(0.5, abs=1e-12)
    assert agg["uniform"]["mean"] == pytest.approx(0.6, abs=1e-12)
    assert (tmp_path / "out" / "profiles_ddqn_Atari.png").stat().st_size > 0
    assert "| ddqn | per | 2 | 0.500 | — (= mean) |" in (tmp_path / "out" / "human_normalised.md").read_text()


def test_atari_runs_at_a_shorter_episode_cap_are_not_human_normalised(tmp_path):
    """The human and random scores stand at 108,000-frame episodes: Breakout's runs at a 400-frame cap are left out
    of the human-normalised and rliable tables, each group named with its setting; Pong's (at the cap, or with no
    cap recorded) are kept."""
    from prioritylab.scores import SCORES

    runs = tmp_path / "runs"
    for game, cap in (("Pong", None), ("Breakout", 400)):
        for seed in range(3):
            for sampler in ("uniform", "per"):
                score = SCORES[game][0] + 0.5 * (SCORES[game][1] - SCORES[game][0])
                fake_run(runs, sampler, seed, [score] * 10, env=f"ALE/{game}-v5", agent="ddqn",
                         config=None if cap is None else {"max_episode_frames": cap})  # fmt: skip
    result = R.report(runs, tmp_path / "out")
    assert {r["sampler"]: r["games"] for r in result["human_normalised"]} == {"per": 1, "uniform": 1}
    assert {r["sampler"]: r["tasks"] for r in result["aggregates"]} == {"per": 1, "uniform": 1}
    why = ("ddqn ALE/Breakout-v5 per: runs at max_episode_frames 400 (measured at 108000): the human and random "
           "scores stand at other settings, so it is not human-normalised")  # fmt: skip
    assert why in (tmp_path / "out" / "human_normalised.md").read_text()
    assert why in (tmp_path / "out" / "aggregates.md").read_text()
    # P(X > Y) is the same on any scale a game's samplers share: both games stay in it
    by_task = (tmp_path / "out" / "improvement_by_task.md").read_text()
    assert "Breakout" in by_task and "Pong" in by_task
    assert {r["tasks"] for r in result["improvement"]} == {2}


def test_the_iqm_is_the_interquartile_mean_of_the_runs_not_their_mean_or_median(tmp_path):
    finals = [0.0, 1.0, 2.0, 3.0, 4.0, 9.0, 10.0, 40.0]  # skewed: IQM 4.5 (the middle four of 8 runs), mean 8.625
    for seed, value in enumerate(finals):
        fake_run(tmp_path / "runs", "per", seed, [value] * 10)
    per = next(r for r in R.report(tmp_path / "runs", tmp_path / "out")["aggregates"] if r["sampler"] == "per")
    assert per["runs"] == 8 and per["tasks"] == 1
    assert per["iqm"] == pytest.approx(stats.trim_mean(finals, 0.25), abs=1e-12) == 4.5
    # rliable's median is the median over tasks of each task's mean score: with one task, the mean
    assert per["mean"] == pytest.approx(8.625, abs=1e-12) and per["median"] == pytest.approx(8.625, abs=1e-12)
    assert per["iqm_lo"] < 4.5 < per["iqm_hi"]


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=12),
                  elements=st.floats(-1e6, 1e6, allow_nan=False)))  # fmt: skip
def test_the_iqm_gives_rliables_bits(scores):
    """The report's IQM (``stats.iqm``, the bootstrap's aggregate) is rliable's ``aggregate_iqm`` to the last bit,
    ties and all."""
    from rliable import metrics

    ours, theirs = report_stats.iqm(scores), metrics.aggregate_iqm(scores)
    assert ours.tobytes() == np.float64(theirs).tobytes(), (ours, theirs)


def test_the_iqm_of_scores_with_a_nan_or_an_infinity_is_scipys():
    from rliable import metrics

    for bad in (np.nan, np.inf, -np.inf):
        scores = np.array([[1.0, 2.0], [bad, 4.0], [5.0, 6.0]])
        ours, theirs = report_stats.iqm(scores), metrics.aggregate_iqm(scores)
        assert np.array_equal(ours, theirs, equal_nan=True), (bad, ours, theirs)


def _rliables(score_dict: dict, func, reps: int) -> tuple[dict, dict]:
    """rliable's own intervals of each entry, on its own stream: what the report computed before it batched them."""
    from rliable import library as rly

    return report_stats.on_own_streams(score_dict, lambda one: rly.get_interval_estimates(
        one, func, reps=reps, random_state=np.random.RandomState(0)))  # fmt: skip


def _aggregate(x: np.ndarray) -> np.ndarray:
    """rliable's own IQM, mean and median."""
    from rliable import metrics

    return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x)])


def _same_bits(ours: tuple[dict, dict], theirs: tuple[dict, dict]) -> bool:
    return all(np.asarray(a[k]).shape == np.asarray(b[k]).shape and np.asarray(a[k]).tobytes() == np.asarray(
        b[k]).tobytes() for a, b in zip(ours, theirs, strict=True) for k in b)  # fmt: skip


_SCORE = st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.0, 1.0, 2.5]))  # ties among runs and tasks too
_PAIRS = st.tuples(st.integers(2, 8), st.integers(1, 6)).flatmap(
    lambda shape: st.tuples(*[hnp.arrays(np.float64, shape, elements=_SCORE, fill=st.nothing())] * 2))


@given(_PAIRS)
def test_the_batched_bootstrap_gives_rliables_intervals_to_the_bit(pair):
    """The report's intervals of the IQM, mean and median and of P(X > Y), every replication at once
    (``stats.batched_bootstrap``), are the ones rliable's replication-by-replication bootstrap gives, byte for byte:
    the same resamples from the same stream, the same statistic, the same percentiles."""
    x, y = pair
    for score_dict, func, batched in (({"x": x}, _aggregate, report_stats.aggregates_batched),
                                      ({"x": (x, y)}, report_stats.probability_of_improvement,
                                       report_stats.probability_of_improvement_batched)):  # fmt: skip
        ours = report_stats.interval_estimates(score_dict, func, 200, batched)
        assert _same_bits(ours, _rliables(score_dict, func, 200)), (score_dict, ours)


@given(st.tuples(st.integers(1, 4), st.integers(2, 12), st.integers(1, 12)).flatmap(
    lambda shape: st.tuples(*[hnp.arrays(np.float64, shape, elements=_SCORE, fill=st.nothing())] * 2)))
def test_the_batched_statistics_are_each_matrixs_to_the_bit(batch):
    """Each replication's IQM, mean, median and P(X > Y) in the batched bootstrap is the one-matrix function's, bit
    for bit (an interval, read from two order statistics of the replications, could hide a last-bit difference).
    Up to 144 scores a matrix: NumPy's partition sorts a small array whole, so only a larger one tells it from a
    sort."""
    x, y = batch
    together = report_stats.aggregates_batched(x)
    p = report_stats.probability_of_improvement_batched(x, y)
    for r in range(x.shape[0]):
        assert together[r].tobytes() == _aggregate(x[r]).tobytes(), (x[r], together[r], _aggregate(x[r]))
        assert p[r].tobytes() == np.float64(report_stats.probability_of_improvement(x[r], y[r])).tobytes()


@given(_PAIRS, st.integers(1, 40))
def test_the_performance_profiles_bands_are_rliables_to_the_bit(pair, thresholds):
    """The profile and its band (``plots.profile_bands``, every replication at once) are rliable's
    ``create_performance_profile``, byte for byte, at thresholds on and between the scores."""
    from rliable import library as rly

    x, _ = pair
    taus = np.unique(np.concatenate([x.ravel()[:thresholds], np.linspace(x.min() - 1, x.max() + 1, thresholds)]))
    theirs = report_stats.on_own_streams({"x": x}, lambda one: rly.create_performance_profile(one, taus, reps=100))
    assert _same_bits(plots.profile_bands({"x": x}, taus, 100), theirs)


def test_the_batched_bootstrap_in_chunks_gives_the_same_intervals(monkeypatch):
    """Replications taken in chunks (``stats.BATCH_ELEMENTS``, which bounds the memory of a large study's
    bootstrap) draw the same stream in the same order: rliable's intervals, to the bit, chunk size whatever."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    pairs, matrix = {"x": (x, y)}, {"x": x}
    f, batched = report_stats.probability_of_improvement, report_stats.probability_of_improvement_batched
    theirs = (_rliables(pairs, f, 300), _rliables(matrix, _aggregate, 300))
    for elements in (1, 216, 2 * 6 * 6 * 3 * 7, 1 << 24):  # one replication a chunk, 1, 7 (300 = 42 x 7 + 6), all
        monkeypatch.setattr(report_stats, "BATCH_ELEMENTS", elements)
        assert _same_bits(report_stats.interval_estimates(pairs, f, 300, batched), theirs[0]), elements
        ours = report_stats.interval_estimates(matrix, _aggregate, 300, report_stats.aggregates_batched)
        assert _same_bits(ours, theirs[1]), elements


def test_scores_the_batched_bootstrap_cannot_take_go_to_rliables():
    """Matrices of different shapes (their indices are drawn one shape after the other) or with a score that is
    not finite are bootstrapped by rliable itself, so they too get rliable's intervals."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(3, 2))
    assert not report_stats.batchable((x, y))
    pairs = {"x": (x, y)}
    f, batched = report_stats.probability_of_improvement, report_stats.probability_of_improvement_batched
    assert _same_bits(report_stats.interval_estimates(pairs, f, 100, batched), _rliables(pairs, f, 100))
    x[1, 0] = np.inf
    assert not report_stats.batchable((x,))
    with np.errstate(invalid="ignore"):  # an infinite resample's percentiles: inf - inf, in rliable's path too
        ours = report_stats.interval_estimates({"x": x}, _aggregate, 100, report_stats.aggregates_batched)
        assert _same_bits(ours, _rliables({"x": x}, _aggregate, 100))


def test_overhead_is_the_wall_time_increase_over_uniform(tmp_path):
    runs = tmp_path / "runs"
    for seed, (u, p) in enumerate(((600.0, 660.0), (600.0, 700.0))):
        fake_run(runs, "uniform", seed, [1.0] * 10, wall=u)
        fake_run(runs, "per", seed, [1.0] * 10, wall=p)
    rows = {r["sampler"]: r for r in R.report(runs, tmp_path / "out")["overhead"]}
    assert rows["uniform"]["wall_minutes"] == pytest.approx(10.0, abs=1e-12)
    assert rows["per"]["increase_over_uniform_pct"] == pytest.approx(100 * (680 / 600 - 1), abs=1e-9)
    text = (tmp_path / "out" / "overhead.md").read_text()
    assert "+13.3 %" in text and "| per | 2 (few runs) |" in text
    assert "(few runs): fewer than 5 runs; the interval is not meaningful." in text
    assert text.startswith("**Caveat: wall times of sweep runs on a shared machine.**") and "bench agent" in text


def test_intervals_from_fewer_than_five_runs_are_not_shown(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "uniform", seed, [10.0 + seed] * 10)
        fake_run(runs, "per", seed, [12.0 + seed] * 10)
    result = R.report(runs, tmp_path / "out")
    assert [r["sampler"] for r in result["aggregates"]] == ["per", "uniform"]
    assert [(r["sampler"], r["baseline"]) for r in result["improvement"]] == [("per", "uniform")]
    assert all(not r["ci_meaningful"] for r in result["aggregates"] + result["improvement"])
    text = (tmp_path / "out" / "aggregates.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| td3")]
    assert rows and all("(no CI)" in line and "[" not in line for line in rows)
    assert "fewer than 5 runs per task" in text
    for seed in range(2, 5):
        fake_run(runs, "uniform", seed, [10.0 + seed] * 10)
        fake_run(runs, "per", seed, [12.0 + seed] * 10)
    result = R.report(runs, tmp_path / "out2")
    assert [(r["sampler"], r["runs"]) for r in result["aggregates"]] == [("per", 5), ("uniform", 5)]
    assert [r["sampler"] for r in result["improvement"]] == ["per"]
    assert all(r["ci_meaningful"] for r in result["aggregates"] + result["improvement"])
    assert "(no CI)" not in (tmp_path / "out2" / "aggregates.md").read_text()


def test_shown_bootstrap_intervals_say_they_cover_less_than_95_percent_over_few_runs(tmp_path):
    """aggregates.md and improvement.md name the kind of interval they show and that over fewer than 10 runs it is
    narrower than a 95 % one (measured by scripts/bootstrap_coverage.py); tables showing no interval, or
    intervals over 10 runs a task, say nothing of it."""
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "uniform", seed, [10.0 + seed] * 10)
        fake_run(runs, "per", seed, [12.0 + seed] * 10)
    R.report(runs, tmp_path / "out")
    for name in ("aggregates.md", "improvement.md"):
        assert "percentile interval" not in (tmp_path / "out" / name).read_text()
    for seed in range(2, 5):
        fake_run(runs, "uniform", seed, [10.0 + seed] * 10)
        fake_run(runs, "per", seed, [12.0 + seed] * 10)
    R.report(runs, tmp_path / "out2")
    for name in ("aggregates.md", "improvement.md"):
        text = (tmp_path / "out2" / name).read_text()
        assert "rliable's stratified-bootstrap percentile interval" in text and "bootstrap_coverage.py" in text
    row = {"agent": "td3", "domain": "Hopper-v5", "sampler": "per", "baseline": "uniform", "runs": 10, "tasks": 1,
           "baseline_runs": 10, "ci_meaningful": True, "p_improvement": 0.5, "lo": 0.2, "hi": 0.8,
           **{k: 1.0 for m in ("iqm", "mean", "median") for k in (m, m + "_lo", m + "_hi")}}  # fmt: skip
    for markdown in (tables.aggregates_markdown([row], []), tables.improvement_markdown([row])):
        assert "[0.2, 0.8]" in markdown or "[1, 1]" in markdown
        assert "percentile interval" not in markdown
    assert "percentile interval" in tables.improvement_markdown([{**row, "runs": 9}])


def test_a_median_over_one_or_two_tasks_is_not_repeated_as_if_it_were_a_median_of_runs(tmp_path):
    """rliable's median, the gains' and the human-normalised median are over tasks, so over one or two they equal
    the mean: the tables show "— (= mean)" and say why, and show the median itself over three or more."""
    runs = tmp_path / "runs"
    for env, (u, p) in {"Hopper-v5": (10.0, 20.0), "Walker2d-v5": (10.0, 11.0), "Ant-v5": (10.0, 12.0)}.items():
        for seed in range(5):
            fake_run(runs, "uniform", seed, [u + seed] * 10, env=env)
            fake_run(runs, "per", seed, [p + seed] * 10, env=env)
    R.report(runs, tmp_path / "out")
    gains = (tmp_path / "out" / "gains.md").read_text()
    row = next(line for line in gains.splitlines() if line.startswith("| td3 | per | uniform | 3 |"))
    assert row.endswith("| +36.11 % | +16.67 % |") and "— (= mean)" not in gains  # gains 83.3, 8.3, 16.7 %
    aggregates = (tmp_path / "out" / "aggregates.md").read_text()
    rows = [line for line in aggregates.splitlines() if line.startswith("| td3 |")]  # a domain per environment
    assert len(rows) == 6 and all(line.endswith("| — (= mean) |") for line in rows)
    assert "like rliable's, is taken over tasks rather than over runs" in aggregates
    assert "| — (= mean) |" in tables.gains_markdown([{"agent": "td3", "sampler": "per", "baseline": "uniform",
                                                        "envs": 2, "seeds": 5, "mean_gain_pct": 1.0,
                                                        "median_gain_pct": 1.0}])  # fmt: skip
    agg = {"agent": "dqn", "domain": "MinAtar", "sampler": "per", "runs": 5, "tasks": 3, "ci_meaningful": True,
           **{m: v for m, v in (("iqm", 1.0), ("mean", 2.0), ("median", 3.0))},
           **{m + "_lo": 0.5 for m in ("iqm", "mean", "median")}, **{m + "_hi": 4.0 for m in ("iqm", "mean", "median")}}
    shown = tables.aggregates_markdown([agg], [])
    assert "| 1 [0.5, 4] | 2 [0.5, 4] | 3 [0.5, 4] |" in shown and "— (= mean)" not in shown
    assert "| 2 [0.5, 4] | — (= mean) |" in tables.aggregates_markdown([{**agg, "tasks": 2}], [])
    hn = [{"agent": "dqn", "sampler": "per", "games": g, "mean": 0.25, "median": 0.5} for g in (2, 3)]
    assert tables.human_normalised_markdown(hn).splitlines()[2:4] == ["| dqn | per | 2 | 0.250 | — (= mean) |",
                                                                     "| dqn | per | 3 | 0.250 | 0.500 |"]


def test_status_names_the_code_each_run_was_recorded_with_and_the_groups_recorded_at_several(tmp_path):
    """status.md gives each run's commit (marked when its checkout had uncommitted changes) and machine, each
    resumption at another one from its step, and lists the groups whose runs were recorded at more than one
    commit, and those that ran on more than one machine: the report compares settings, not code or machines."""
    runs = tmp_path / "runs"
    old = {"platform": "Linux-a"}
    new = {"platform": "Linux-b", "cpu": "AMD EPYC (family 25, model 1)", "torch_cpu": "AVX2"}
    commits = {("uniform", 0): ("a" * 40, False, new), ("uniform", 1): ("a" * 40, False, new),
               ("per", 0): ("b" * 40, False, old), ("per", 1): ("c" * 40, True, new)}  # fmt: skip
    for (sampler, seed), (commit, dirty, machine) in commits.items():
        fake_run(runs, sampler, seed, [10.0 + seed] * 10, config={"steps": 1000})
        manifest = runs / f"td3_Hopper-v5_{sampler}_s{seed}" / "manifest.json"
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "git_commit": commit, "git_dirty": dirty,
                                        "machine": machine}))  # fmt: skip
    fake_run(runs, "per", 2, [10.0] * 10, config={"steps": 1000})  # a manifest without a commit or a machine
    manifest = runs / "td3_Hopper-v5_per_s2" / "manifest.json"
    manifest.write_text(json.dumps({k: v for k, v in json.loads(manifest.read_text()).items() if k != "machine"}))
    manifest = runs / "td3_Hopper-v5_uniform_s0" / "manifest.json"  # resumed twice: the second at another commit
    resumes = [{"at_step": 300, "git_commit": "a" * 40, "git_dirty": False, "machine": new},
               {"at_step": 600, "git_commit": "d" * 40, "git_dirty": False, "machine": old}]  # fmt: skip
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "resumed": resumes}))
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "status.md").read_text()
    assert ("td3_Hopper-v5_uniform_s1 | used | last evaluation at step 1000 of 1000 | aaaaaaa | "
            "Linux-b, AMD EPYC (family 25, model 1), torch AVX2 |") in text  # fmt: skip
    assert "per_s1 | used | last evaluation at step 1000 of 1000 | ccccccc + uncommitted changes | Linux-b," in text
    assert "per_s0 | used | last evaluation at step 1000 of 1000 | bbbbbbb | Linux-a, CPU not recorded |" in text
    assert "td3_Hopper-v5_per_s2 | used | last evaluation at step 1000 of 1000 | not recorded | not recorded |" in text
    groups = text.split("recorded at more than one commit")[1]
    commits_part, machines_part = groups.split("ran on more than one machine")
    assert "- td3 Hopper-v5 per: bbbbbbb, ccccccc + uncommitted changes, not recorded" in commits_part
    assert ("- td3 Hopper-v5 per: Linux-a, CPU not recorded; Linux-b, AMD EPYC (family 25, model 1), torch AVX2; "
            "not recorded") in machines_part  # fmt: skip
    assert ("td3_Hopper-v5_uniform_s0 | used | last evaluation at step 1000 of 1000 | aaaaaaa; resumed at step 600: "
            "ddddddd | Linux-b, AMD EPYC (family 25, model 1), torch AVX2; resumed at step 600: Linux-a, CPU not "
            "recorded |") in text  # fmt: skip
    assert "- td3 Hopper-v5 uniform: aaaaaaa, ddddddd" in commits_part
    assert ("- td3 Hopper-v5 uniform: Linux-a, CPU not recorded; Linux-b, AMD EPYC (family 25, model 1), torch "
            "AVX2") in machines_part  # fmt: skip


def test_groups_recorded_with_other_package_versions_are_named_in_status(tmp_path):
    """Seeds recorded with another torch or gymnasium (a run resumed under a new numpy counted from its resume) are
    pooled as before, and status.md names each group and package whose versions differ; a manifest without its
    packages is not read as a difference."""
    runs = tmp_path / "runs"
    base = {"torch": "2.13.0+cpu", "gymnasium": "1.4.0", "numpy": "2.4.6"}
    versions = {("uniform", 0): base, ("uniform", 1): base, ("per", 0): base,
                ("per", 1): {**base, "torch": "1.13.1+cpu", "gymnasium": "0.29.1"}, ("per", 2): None}  # fmt: skip
    for (sampler, seed), packages in versions.items():
        fake_run(runs, sampler, seed, [10.0 + seed] * 10, config={"steps": 1000})
        if packages is not None:
            manifest = runs / f"td3_Hopper-v5_{sampler}_s{seed}" / "manifest.json"
            manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "packages": packages}))
    manifest = runs / "td3_Hopper-v5_uniform_s1" / "manifest.json"
    resumed = [{"at_step": 500, "packages": {**base, "numpy": "2.5.0"}}]
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "resumed": resumed}))
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "status.md").read_text()
    part = text.split("recorded with more than one version of a package")[1]
    assert "- td3 Hopper-v5 per: gymnasium 0.29.1, 1.4.0; torch 1.13.1+cpu, 2.13.0+cpu" in part
    assert "- td3 Hopper-v5 uniform: numpy 2.4.6, 2.5.0" in part
    fresh = tmp_path / "same"
    for seed in range(2):
        fake_run(fresh, "per", seed, [1.0] * 10)
    R.report(fresh, tmp_path / "out_same")
    assert "version of a package" not in (tmp_path / "out_same" / "status.md").read_text()


def test_probability_of_improvement_over_uniform(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(5):  # per beats uniform in every pair of runs; lap ties uniform exactly
        fake_run(runs, "uniform", seed, [float(seed)] * 10)
        fake_run(runs, "per", seed, [10.0 + seed] * 10)
        fake_run(runs, "lap", seed, [float(seed)] * 10)
    result = R.report(runs, tmp_path / "out")["improvement"]
    assert [(r["sampler"], r["baseline"]) for r in result] == [("lap", "uniform"), ("per", "uniform"), ("lap", "per")]
    assert result[-1]["p_improvement"] == pytest.approx(0.0, abs=1e-12)  # lap is below per in every pair
    rows = {r["sampler"]: r for r in result if r["baseline"] == "uniform"}
    assert rows["per"]["p_improvement"] == pytest.approx(1.0, abs=1e-12)
    # P(X > Y) + 0.5 P(X = Y) over the 25 pairs of runs: 10 favour lap, 10 uniform, 5 tie: (10 + 2.5) / 25
    assert rows["lap"]["p_improvement"] == pytest.approx(0.5, abs=1e-12)
    assert rows["per"]["ci_meaningful"] and rows["per"]["lo"] <= 1.0 <= rows["per"]["hi"] + 1e-12
    assert "| td3 | Hopper-v5 | per | uniform | 5 x 1 | 1 [1, 1] |" in (tmp_path / "out" / "improvement.md").read_text()


def test_a_probability_of_improvement_names_the_runs_of_each_side(tmp_path):
    """PER with 7 seeds against uniform's 5: P(X > Y) counts the 35 pairs, and the table names both counts."""
    runs = tmp_path / "runs"
    for seed in range(7):
        fake_run(runs, "per", seed, [float(seed)] * 10)
        if seed < 5:
            fake_run(runs, "uniform", seed, [seed + 0.5] * 10)
    row = R.report(runs, tmp_path / "out")["improvement"][0]
    # per's seed k beats uniform's seeds below k (of 0-4): 0 + 1 + 2 + 3 + 4 + 5 + 5 of the 35 pairs
    assert (row["runs"], row["baseline_runs"], row["p_improvement"]) == (7, 5, pytest.approx(20 / 35, abs=1e-12))
    text = (tmp_path / "out" / "improvement.md").read_text()
    assert "| td3 | Hopper-v5 | per | uniform | 7 / 5 x 1 |" in text and "the sampler's / the baseline's" in text
    assert row["ci_meaningful"] and "percentile interval" in text  # 5 a side at least, under 10: the coverage note
    shutil.rmtree(runs / "td3_Hopper-v5_uniform_s4")  # 7 against 4: the interval follows the smaller side
    row = R.report(runs, tmp_path / "out4")["improvement"][0]
    text = (tmp_path / "out4" / "improvement.md").read_text()
    assert (row["runs"], row["baseline_runs"], row["ci_meaningful"]) == (7, 4, False)
    assert "| td3 | Hopper-v5 | per | uniform | 7 / 4 x 1 |" in text and "(no CI)" in text


def test_a_pilot_on_few_games_never_cuts_the_other_samplers_games(tmp_path):
    """Three Atari games of uniform and per with 5 seeds; ners with 1, then 2, seeds on Pong alone: uniform's and
    per's tables keep all three games, ners is left out (and said so), and ners against uniform uses Pong."""
    from prioritylab.scores import SCORES

    runs = tmp_path / "runs"
    games = ("Pong", "Breakout", "Seaquest")
    for game in games:
        lo, hi = SCORES[game]
        for seed in range(5):
            for sampler, k in (("uniform", 1), ("per", 2)):
                fake_run(runs, sampler, seed, [lo + 0.1 * (seed + k) * (hi - lo)] * 10, env=f"ALE/{game}-v5",
                         agent="ddqn")  # fmt: skip
    lo, hi = SCORES["Pong"]
    for n_pilot in (1, 2):
        fake_run(runs, "ners", n_pilot - 1, [lo + 0.9 * (hi - lo)] * 10, env="ALE/Pong-v5", agent="ddqn")
        result = R.report(runs, tmp_path / f"out{n_pilot}")
        shapes = {r["sampler"]: (r["runs"], r["tasks"]) for r in result["aggregates"]}
        assert shapes == {"per": (5, 3), "uniform": (5, 3)}, shapes
        assert {r["sampler"]: r["mean"] for r in result["aggregates"]} == {
            "per": pytest.approx(0.4), "uniform": pytest.approx(0.3)}
        text = (tmp_path / f"out{n_pilot}" / "aggregates.md").read_text()
        assert "ddqn, Atari (human-normalised): ners left out" in text
        imp = {(r["sampler"], r["baseline"]): (r["runs"], r["tasks"]) for r in result["improvement"]}
        assert imp[("per", "uniform")] == (5, 3)
        assert imp.get(("ners", "uniform")) == ((2, 1) if n_pilot == 2 else None)


def test_a_game_only_some_samplers_reached_is_left_out_not_the_samplers(tmp_path):
    """Seed-major sweeps: the second game has two uniform runs and one of per. Both samplers keep the first game."""
    runs = tmp_path / "runs"
    for seed in range(3):
        for sampler, score in (("uniform", 5.0 + seed), ("per", 6.0 + seed)):
            fake_run(runs, sampler, seed, [score] * 10, env="MinAtar/Breakout-v1", agent="dqn")
    fake_run(runs, "uniform", 0, [20.0] * 10, env="MinAtar/SpaceInvaders-v1", agent="dqn")
    fake_run(runs, "uniform", 1, [22.0] * 10, env="MinAtar/SpaceInvaders-v1", agent="dqn")
    fake_run(runs, "per", 0, [21.0] * 10, env="MinAtar/SpaceInvaders-v1", agent="dqn")
    result = R.report(runs, tmp_path / "out")
    assert {r["sampler"]: (r["runs"], r["tasks"]) for r in result["aggregates"]} == {"per": (3, 1), "uniform": (3, 1)}
    assert "task MinAtar/SpaceInvaders-v1 left out" in (tmp_path / "out" / "aggregates.md").read_text()


def test_a_samplers_bootstrap_interval_does_not_depend_on_the_other_samplers_in_the_report(tmp_path):
    """The same uniform and PER runs, reported alone and beside LAP's and PAL's: uniform's IQM interval and
    P(PER > uniform)'s are the same in both (one stream shared by the samplers in turn made them differ)."""
    rng = np.random.default_rng(11)
    scores = {s: rng.normal(loc, 1.0, size=5) for s, loc in (("uniform", 0.0), ("per", 0.5), ("lap", 0.2),
                                                              ("pal", 0.1))}  # fmt: skip
    found = []
    for name, samplers in (("two", ("uniform", "per")), ("four", ("uniform", "per", "lap", "pal"))):
        for sampler in samplers:
            for seed, score in enumerate(scores[sampler]):
                fake_run(tmp_path / name, sampler, seed, [float(score)] * 10)
        result = R.report(tmp_path / name, tmp_path / f"out_{name}")
        iqm = next(r for r in result["aggregates"] if r["sampler"] == "uniform")
        p = next(r for r in result["improvement"] if (r["sampler"], r["baseline"]) == ("per", "uniform"))
        found.append(((iqm["iqm_lo"], iqm["iqm_hi"]), (p["lo"], p["hi"])))
    assert found[0] == found[1]


def test_a_samplers_profile_band_does_not_depend_on_the_other_samplers():
    rng = np.random.default_rng(4)
    scores = {s: rng.normal(size=(5, 2)) for s in ("lap", "per", "uniform")}  # uniform drawn last
    taus = np.linspace(-2.0, 2.0, 21)
    alone = plots.profile_bands({"uniform": scores["uniform"]}, taus, 100)
    together = plots.profile_bands(scores, taus, 100)
    assert np.array_equal(alone[0]["uniform"], together[0]["uniform"])
    assert np.array_equal(alone[1]["uniform"], together[1]["uniform"])


def test_probability_of_improvement_is_rliables_with_ties():
    from rliable import metrics

    rng = np.random.default_rng(3)
    for n, m, tasks in ((5, 5, 1), (5, 3, 2), (10, 10, 3), (2, 7, 1)):
        x, y = rng.integers(0, 4, size=(n, tasks)).astype(float), rng.integers(0, 4, size=(m, tasks)).astype(float)
        assert report_stats.probability_of_improvement(x, y) == metrics.probability_of_improvement(x, y)
        assert report_stats.probability_of_improvement(x, x) == 0.5


def test_bootstrap_intervals_are_the_same_in_every_report_and_leave_numpy_as_found(tmp_path):
    runs = tmp_path / "runs"
    rng = np.random.default_rng(5)
    for seed in range(6):
        for sampler in ("uniform", "per", "lap"):
            fake_run(runs, sampler, seed, rng.normal(size=10).cumsum())
    texts = []
    for k in range(2):
        np.random.random(k + 1)  # noqa: NPY002 -- the caller's global state differs between the two reports
        R.report(runs, tmp_path / f"out{k}")
        texts.append([(tmp_path / f"out{k}" / name).read_text() for name in ("aggregates.md", "improvement.md")])
    assert texts[0] == texts[1]
    np.random.seed(123)  # noqa: NPY002
    np.random.random(1)  # noqa: NPY002
    expected = np.random.get_state()  # noqa: NPY002
    np.random.seed(123)  # noqa: NPY002
    np.random.random(1)  # noqa: NPY002
    R.report(runs, tmp_path / "out2")
    got = np.random.get_state()  # noqa: NPY002
    assert np.array_equal(got[1], expected[1]) and got[2] == expected[2]


def test_minatar_games_are_normalised_between_random_play_and_uniform(tmp_path):
    from prioritylab.scores import MINATAR_RANDOM

    runs = tmp_path / "runs"
    games = ("Breakout", "Asterix")
    for game in games:
        rnd = MINATAR_RANDOM[game]
        for seed in range(2):
            fake_run(runs, "uniform", seed, [rnd + 4.0] * 10, env=f"MinAtar/{game}-v1", agent="dqn")
            fake_run(runs, "per", seed, [rnd + 2.0] * 10, env=f"MinAtar/{game}-v1", agent="dqn")
    # a game where uniform never left random play cannot be normalised by it: left out
    for seed in range(2):
        for sampler in ("uniform", "per"):
            fake_run(runs, sampler, seed, [MINATAR_RANDOM["Freeway"]] * 10, env="MinAtar/Freeway-v1", agent="dqn")
    # and so is a game with no uniform runs, and a -v0 game (random play measured on -v1 only); each is named in
    # aggregates.md with its reason, not dropped silently
    for seed in range(2):
        fake_run(runs, "per", seed, [5.0] * 10, env="MinAtar/Seaquest-v1", agent="dqn")
        for sampler in ("uniform", "per"):
            fake_run(runs, sampler, seed, [5.0] * 10, env="MinAtar/SpaceInvaders-v0", agent="dqn")
    agg = {r["sampler"]: r for r in R.report(runs, tmp_path / "out")["aggregates"]}
    assert agg["per"]["domain"].startswith("MinAtar") and agg["per"]["tasks"] == 2 and agg["per"]["runs"] == 2
    assert agg["per"]["mean"] == pytest.approx(0.5, abs=1e-12) and agg["uniform"]["mean"] == pytest.approx(1.0)
    text = (tmp_path / "out" / "aggregates.md").read_text()
    freeway = f"MinAtar/Freeway-v1 left out (uniform's mean final score {MINATAR_RANDOM['Freeway']:.3g} is not above"
    assert freeway in text and "task MinAtar/Seaquest-v1 left out (no uniform runs to normalise by)" in text
    assert ("task MinAtar/SpaceInvaders-v0 left out (no random-play score for it in prioritylab.scores.MINATAR_RANDOM "
            "(measured on the -v1 games))") in text  # fmt: skip
    assert text.count("Freeway") == 1 and "Breakout" not in text


def test_a_minatar_game_run_at_other_settings_than_random_play_was_measured_at_is_not_normalised(tmp_path):
    """Random play scores otherwise at another episode cap, sticky-action probability or ramping: Breakout's runs
    at a 1,000-step cap are left out of the normalised tables, named with the setting; Asterix at the measured
    settings (a manifest without them ran at their defaults) is kept."""
    from prioritylab.scores import MINATAR_RANDOM, MINATAR_RANDOM_SETTINGS, minatar_random_differs

    assert minatar_random_differs(MINATAR_RANDOM_SETTINGS) == "" and minatar_random_differs({}) == ""
    assert minatar_random_differs({"sticky": 0.25, "ramping": False}) == ("sticky 0.25 (measured at 0.1); ramping "
                                                                          "False (measured at True)")  # fmt: skip
    runs = tmp_path / "runs"
    for game in ("Breakout", "Asterix"):
        rnd = MINATAR_RANDOM[game]
        for seed in range(2):
            for sampler, score in (("uniform", 4.0), ("per", 2.0)):
                config = {"sticky": 0.1, "ramping": True, "max_episode_steps": 1000} if game == "Breakout" else None
                fake_run(runs, sampler, seed, [rnd + score] * 10, env=f"MinAtar/{game}-v1", agent="dqn",
                         config=config)  # fmt: skip
    agg = {r["sampler"]: r for r in R.report(runs, tmp_path / "out")["aggregates"]}
    assert agg["per"]["tasks"] == 1 and agg["per"]["mean"] == pytest.approx(0.5, abs=1e-12)
    text = (tmp_path / "out" / "aggregates.md").read_text()
    assert ("task MinAtar/Breakout-v1 left out (runs at max_episode_steps 1000 (measured at 10000): random play's "
            "score in prioritylab.scores.MINATAR_RANDOM was measured at other settings)") in text  # fmt: skip


def test_each_task_alone_keeps_its_own_seeds_when_another_task_has_fewer(tmp_path, monkeypatch):
    """Breakout with 5 seeds beside SpaceInvaders with 2 (a sweep part-way): the domain's tables and profile take
    2 seeds of each (no interval), the by-task tables and profiles give Breakout its 5, exactly as a report of
    Breakout alone does."""
    from prioritylab.scores import MINATAR_RANDOM

    drawn = {}
    real = plots.plot_profiles

    def spy(scores, agent, domain, out):
        path = real(scores, agent, domain, out)
        drawn[(path.parent.parent.name, path.name)] = {s: m.copy() for s, m in scores.items()}
        return path

    monkeypatch.setattr(plots, "plot_profiles", spy)
    runs, alone = tmp_path / "runs", tmp_path / "alone"
    for seed in range(5):
        for sampler, gain in (("uniform", 4.0), ("per", 3.0 + 0.5 * seed)):
            for root in (runs, alone):
                fake_run(root, sampler, seed, [MINATAR_RANDOM["Breakout"] + gain + 0.1 * seed] * 10,
                         env="MinAtar/Breakout-v1", agent="dqn")  # fmt: skip
            if seed < 2:
                fake_run(runs, sampler, seed, [MINATAR_RANDOM["SpaceInvaders"] + gain + seed] * 10,
                         env="MinAtar/SpaceInvaders-v1", agent="dqn")  # fmt: skip
    result = R.report(runs, tmp_path / "out")
    assert {(r["sampler"], r["runs"], r["tasks"], r["ci_meaningful"]) for r in result["aggregates"]} == {
        ("uniform", 2, 2, False), ("per", 2, 2, False)}
    by_task = {(r["domain"].split(": ")[1], r["sampler"]): r for r in result["aggregates_by_task"]}
    assert {k: (r["runs"], r["tasks"]) for k, r in by_task.items()} == {
        ("MinAtar/Breakout-v1", "uniform"): (5, 1), ("MinAtar/Breakout-v1", "per"): (5, 1),
        ("MinAtar/SpaceInvaders-v1", "uniform"): (2, 1), ("MinAtar/SpaceInvaders-v1", "per"): (2, 1)}
    reference = {r["sampler"]: r for r in R.report(alone, tmp_path / "alone_out")["aggregates"]}
    for sampler, r in reference.items():
        mine = by_task[("MinAtar/Breakout-v1", sampler)]
        keys = ("iqm", "iqm_lo", "iqm_hi", "mean")
        assert [mine[k] for k in keys] == [r[k] for k in keys]
    imp = {(r["domain"].split(": ")[1], r["sampler"]): (r["runs"], r["ci_meaningful"]) for r in
           result["improvement_by_task"]}  # fmt: skip
    assert imp == {("MinAtar/Breakout-v1", "per"): (5, True), ("MinAtar/SpaceInvaders-v1", "per"): (2, False)}
    assert "Each task of the domain alone" in (tmp_path / "out" / "aggregates_by_task.md").read_text()
    # a profile for the domain (2 seeds of each game) and one for each game with its own seeds; Breakout's is the
    # profile of the report of Breakout alone
    names = ["profiles_dqn_MinAtar.png", "profiles_dqn_MinAtar-Breakout-v1.png",
             "profiles_dqn_MinAtar-SpaceInvaders-v1.png"]  # fmt: skip
    assert sorted(n for folder, n in drawn if folder == "out") == sorted(names)
    assert all((tmp_path / "out" / n).stat().st_size > 0 for n in names)
    assert sorted(json.loads((tmp_path / "out" / "manifest.json").read_text())["figures"]) == sorted(
        [*names, *(p.name for p in (tmp_path / "out").glob("[ctd]*.png"))])
    assert {s: m.shape for s, m in drawn[("out", names[0])].items()} == {"uniform": (2, 2), "per": (2, 2)}
    assert {s: m.shape for s, m in drawn[("out", names[2])].items()} == {"uniform": (2, 1), "per": (2, 1)}
    alone_profile = drawn[("alone_out", "profiles_dqn_MinAtar.png")]
    assert {s: m.tolist() for s, m in drawn[("out", names[1])].items()} == {
        s: m.tolist() for s, m in alone_profile.items()} and alone_profile["per"].shape == (5, 1)
    R.report(alone, tmp_path / "out")  # one task: no by-task tables or profiles, and none left from the report before
    assert not any((tmp_path / "out").glob("*_by_task.*"))
    assert sorted(p.name for p in (tmp_path / "out").glob("profiles_*")) == ["profiles_dqn_MinAtar.png"]


def test_a_sampler_short_of_runs_on_one_task_is_listed_in_that_tasks_rows(tmp_path):
    from prioritylab.scores import MINATAR_RANDOM

    runs = tmp_path / "runs"
    for game in ("Breakout", "SpaceInvaders"):
        for seed in range(2):
            for sampler in ("uniform", "per") if game == "SpaceInvaders" and seed == 1 else ("uniform", "per", "pser"):
                fake_run(runs, sampler, seed, [MINATAR_RANDOM[game] + 3.0 + seed] * 10, env=f"MinAtar/{game}-v1",
                         agent="dqn")  # fmt: skip
    result = R.report(runs, tmp_path / "out")
    assert {(r["domain"].split(": ")[1], r["sampler"]) for r in result["aggregates_by_task"]} == {
        ("MinAtar/Breakout-v1", s) for s in ("uniform", "per", "pser")} | {
        ("MinAtar/SpaceInvaders-v1", s) for s in ("uniform", "per")}
    text = (tmp_path / "out" / "aggregates_by_task.md").read_text()
    assert "Left out of a task's rows" in text and "MinAtar/SpaceInvaders-v1: pser left out" in text


def test_speed_compares_areas_and_sizes_a_twofold_speed_up(tmp_path):
    """PER's runs are uniform's curve read at twice each step (a ramp to 10 over 20 evaluations that then holds):
    their area exceeds uniform's by exactly the gain of learning twice as fast, X - (Y twice as fast) is 0, and
    the smallest speed-up the interval excludes is above 2.  LAP's runs are uniform's: every speed-up of uniform
    gains more than LAP's interval allows only above 1."""
    runs = tmp_path / "runs"
    ramp = np.minimum(np.arange(1, 41) / 2.0, 10.0)  # 0.5, 1, ..., 10 at evaluation 20, then 10
    for seed in range(5):
        fake_run(runs, "uniform", seed, list(ramp + 0.1 * seed))
        fake_run(runs, "per", seed, list(np.minimum(np.arange(1, 41), 10.0) + 0.1 * seed))
        fake_run(runs, "lap", seed, list(ramp + 0.1 * seed))
    rows = {r["sampler"]: r for r in R.report(runs, tmp_path / "out")["speed"] if r["baseline"] == "uniform"}
    expected = np.minimum(np.arange(1, 41), 10.0).mean() - ramp.mean()
    per = rows["per"]
    assert per["difference"] == pytest.approx(expected, rel=1e-12) and per["twice_as_fast"] == pytest.approx(expected)
    assert per["twice_as_fast_pct"] == pytest.approx(100 * expected / (ramp.mean() + 0.2))  # mean offset 0.2
    assert per["vs_twice"] == pytest.approx(0, abs=1e-12) and per["vs_twice_lo"] < 0 < per["vs_twice_hi"]
    assert per["excluded_speed_up"] > 2
    assert rows["lap"]["difference"] == 0 and 1 < rows["lap"]["excluded_speed_up"] < 2
    text = (tmp_path / "out" / "speed.md").read_text()
    assert "Y twice as fast: gain" in text and "x and more |" in text


def test_twice_as_fast_over_the_observed_window_holds_nothing_of_y(tmp_path):
    """Uniform still climbs at its end; PER stays low for half the run, then jumps far above it.  Against uniform's
    curve read at twice the speed and held at its last value, PER's area is ahead, which holding alone produces:
    over the first half of the run, where every value of uniform read at twice the speed was observed, PER is
    behind, so PER does not learn twice as fast there, and the rule reads "not reproduced" (on MinAtar Seaquest
    the held reading was [+0.50, +7.55] and the observed window's [-0.95, -0.20])."""
    from prioritylab.harness.report import verdicts as V

    runs = tmp_path / "runs"
    for seed in range(5):
        fake_run(runs, "uniform", seed, list(0.1 * np.arange(1, 41) + 0.05 * seed), env="MinAtar/Seaquest-v1",
                 agent="dqn")  # fmt: skip
        fake_run(runs, "per", seed, [0.1 + 0.01 * seed] * 20 + [30.0 + seed] * 20, env="MinAtar/Seaquest-v1",
                 agent="dqn")  # fmt: skip
    (row,) = [r for r in R.report(runs, tmp_path / "out")["speed"] if r["sampler"] == "per"]
    assert row["vs_twice_lo"] > 0 and row["seen_until"] == 2000
    seen_x = np.mean([0.1 + 0.01 * seed for seed in range(5)])
    seen_y = np.mean([np.mean(0.2 * np.arange(1, 21) + 0.05 * seed) for seed in range(5)])
    assert row["vs_twice_seen"] == pytest.approx(seen_x - seen_y) and row["vs_twice_seen_hi"] < 0
    # the window up to 4000 / f frames holds one of PER's jumped evaluations from f = 1.90 down, two from 1.81:
    # behind uniform read f times as fast from 1.85 on (a mean of (2 + 30) / 21 against 0.185 * 11), ahead below
    assert row["excluded_speed_up"] == pytest.approx(1.85)
    held, seen = (row["vs_twice_lo"], row["vs_twice_hi"]), (row["vs_twice_seen_lo"], row["vs_twice_seen_hi"])
    assert V.verdict("twice", *held, None, seen) == V.NOT_REPRODUCED
    (entry,) = [e for e in V.report_verdicts(tmp_path / "out") if e.table == "speed"]
    assert entry.verdict == V.NOT_REPRODUCED and (entry.lo, entry.hi) == seen  # the interval that decides
    assert "(to step 2000) |" in (tmp_path / "out" / "speed.md").read_text()


def test_a_speed_up_is_excluded_and_more_only_when_every_larger_factor_is_excluded(tmp_path):
    """The interval of X - (Y read f times as fast) need not tighten as f grows: here uniform's seeds agree until
    their last evaluation, which a faster reading holds for ever more of the curve, so the interval excludes
    f = 1 to 1.30 and no larger factor, and `_excluded_from` names no factor from such a reading.  Over the
    observed window, where nothing is held, PER's flat 7 falls below uniform read at every factor tried, so the
    row names "any"."""
    runs = tmp_path / "runs"
    ramp = np.minimum(np.arange(1, 41) / 2.0, 10.0)  # 0.5, 1, ..., 10 at evaluation 20, then 10
    for seed, end in enumerate((6.0, 8.0, 10.0, 12.0, 14.0)):
        fake_run(runs, "uniform", seed, [*ramp[:-1], end])
        fake_run(runs, "per", seed, [7.0 + 0.1 * seed] * 40)
    row = next(r for r in R.report(runs, tmp_path / "out")["speed"] if r["sampler"] == "per")
    assert row["hi"] < 0 and row["excluded_speed_up"] == 1.0 and row["vs_twice_seen_hi"] < 0
    x = np.array([7.0 + 0.1 * seed for seed in range(5)])
    base = [np.array([*ramp[:-1], end]) for end in (6.0, 8.0, 10.0, 12.0, 14.0)]
    steps = 100.0 * np.arange(1, 41)

    def upper(f):
        return report_stats.welch_ci(x, np.array([np.interp(f * steps, steps, c).mean() for c in base]))[2]

    assert upper(1.3) < 0 < upper(1.35) and upper(4.0) > 0  # excluded up to 1.30 only
    assert report_stats._excluded_from((1.0, 1.05, 1.1, 1.15), (True, False, True, True)) == 1.1
    assert report_stats._excluded_from((1.0, 1.05, 1.1), (True, True, True)) == 1.0
    assert math.isnan(report_stats._excluded_from((1.0, 1.05, 1.1), (True, True, False)))
    text = (tmp_path / "out" / "speed.md").read_text()
    assert "any (X behind Y) |" in text.splitlines()[2]


def test_a_twofold_speed_up_holds_a_curve_still_rising_at_its_end():
    """The area at twice the speed reads the curve at 2, 4, ... and holds its last value beyond the end."""
    from prioritylab.harness.report.runs import area

    rows = [{"step": str(100 * i), "return_mean": str(float(i))} for i in range(1, 21)]
    run = {"rows": rows}
    assert area(run) == pytest.approx(10.5) and area(run, 1.0) == area(run)
    assert area(run, 2.0) == pytest.approx(np.minimum(2 * np.arange(1, 21), 20).mean())  # 2, 4, ..., 20, 20, ...


def test_a_speed_up_reads_between_evaluations_on_the_straight_line():
    """At a factor that falls between two evaluations the curve is read on the line joining them, not at the
    evaluation before: 1.5 times steps 1, 2, 3, 4 reads 5, 20 and then the last value, 30, twice."""
    from prioritylab.harness.report.runs import area

    run = {"rows": [{"step": str(s), "return_mean": str(10.0 * (s - 1))} for s in (1, 2, 3, 4)]}
    assert area(run, 1.5) == pytest.approx((5 + 20 + 30 + 30) / 4)
    assert area(run, 1.5, until=2) == pytest.approx((5 + 20) / 2) and math.isnan(area(run, 1.5, until=0.5))


def test_the_observed_window_ends_at_half_of_ys_shortest_run():
    """With Y's seeds of different lengths the window ends at half of the shortest one's last step, so that no
    value of any Y run is held inside it."""
    def run(n, slope):
        return {"rows": [{"step": str(100 * i), "return_mean": str(slope * i)} for i in range(1, n + 1)]}

    until, diff, lo, hi = report_stats._seen([run(20, 2.0), run(20, 2.1)], [run(10, 1.0), run(20, 1.05)], 2.0)
    assert until == 500.0
    # X reads its evaluations at 100-500; Y at twice those steps, 200-1000, observed in both Y runs
    x = [np.mean([s * i for i in range(1, 6)]) for s in (2.0, 2.1)]
    y = [np.mean([s * 2 * i for i in range(1, 6)]) for s in (1.0, 1.05)]
    assert diff == pytest.approx(np.mean(x) - np.mean(y)) and lo < diff < hi


def test_a_profiles_score_axis_names_the_domains_normalisation():
    assert plots.score_label("Atari (human-normalised)") == "final score (human-normalised)"
    assert plots.score_label(report_stats.MINATAR_DOMAIN) == "final score (0 = random, 1 = uniform)"
    assert plots.score_label("Hopper-v5") == "final score"


def test_curves_mark_random_play_and_a_nearby_human_score():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    assert plots._reference_scores(ax, "ALE/Pong-v5", -21.0, -20.9) == (-21.0, -20.7)  # random -20.7, human 14.6 far
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [-20.7]
    fig2, ax2 = plt.subplots()
    assert plots._reference_scores(ax2, "ALE/Pong-v5", -21.0, 10.0) == (-21.0, 14.6)  # human within reach: drawn
    assert [line.get_ydata()[0] for line in ax2.get_lines()] == [-20.7, 14.6]
    fig3, ax3 = plt.subplots()
    assert plots._reference_scores(ax3, "Hopper-v5", 1.0, 2.0) == (1.0, 2.0) and not ax3.get_lines()
    fig4, ax4 = plt.subplots()  # MinAtar: random play's score (0.435 on Asterix), the y range grown to hold it
    assert plots._reference_scores(ax4, "MinAtar/Asterix-v1", 1.0, 20.0) == (0.435, 20.0)
    assert [line.get_ydata()[0] for line in ax4.get_lines()] == [0.435]
    # runs at other settings than the score was measured at: not their scale, so no line
    fig5, ax5 = plt.subplots()
    capped = [{"config": {"max_episode_steps": 10_000}}, {"config": {"max_episode_steps": 1000}}]
    assert plots._reference_scores(ax5, "MinAtar/Asterix-v1", 1.0, 20.0, capped) == (1.0, 20.0)
    fig6, ax6 = plt.subplots()
    short = [{"config": {"max_episode_frames": 400}}]
    assert plots._reference_scores(ax6, "ALE/Pong-v5", -3.0, -1.0, short) == (-3.0, -1.0)
    assert not ax5.get_lines() and not ax6.get_lines()
    for f in (fig, fig2, fig3, fig4, fig5, fig6):
        plt.close(f)


def test_a_run_without_replay_diagnostics_gives_no_table3_statistics(tmp_path):
    """With diagnostics off, a DQN run's ``q_mean`` column holds its last batch's mean Q, not NERS Table 3's
    statistic of the replayed transitions: the report reads it as missing."""
    for seed in range(2):
        fake_run(tmp_path / "runs", "per", seed, [1.0] * 12)
    fake_run(tmp_path / "runs", "uniform", 0, [1.0] * 12)
    manifest = tmp_path / "runs" / "td3_Hopper-v5_uniform_s0" / "manifest.json"
    recorded = json.loads(manifest.read_text())
    recorded["config"]["diagnostics"] = False
    manifest.write_text(json.dumps(recorded))
    R.report(tmp_path / "runs", tmp_path / "out")
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    assert "| td3 | Hopper-v5 | uniform | 1 | " + " | ".join(["— (not logged by every seed)"] * 4) + " |" in t3
    assert "| td3 | Hopper-v5 | per | 2 | 1.000 | 0.100 | 10.00 | 2.00 |" in t3


def test_differences_are_welch_intervals_of_the_papers_comparisons(tmp_path):
    runs = tmp_path / "runs"
    finals = {"uniform": [10.0, 12.0, 11.0, 13.0, 9.0], "per": [14.0, 13.0, 16.0, 12.0, 15.0], "lap": [5.0, 6.0]}
    for sampler, values in finals.items():
        for seed, v in enumerate(values):
            fake_run(runs, sampler, seed, [v] * 12)
    rows = {(r["sampler"], r["baseline"]): r for r in R.report(runs, tmp_path / "out")["differences"]}
    assert set(rows) == {("per", "uniform"), ("lap", "uniform"), ("lap", "per")}
    x, y = np.array(finals["per"]), np.array(finals["uniform"])
    welch = stats.ttest_ind(x, y, equal_var=False)
    lo, hi = welch.confidence_interval(0.95)
    r = rows[("per", "uniform")]
    assert r["difference"] == pytest.approx(3.0) and (r["lo"], r["hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert r["pct"] == pytest.approx(100 * 3.0 / 11.0) and r["pct_lo"] == pytest.approx(100 * lo / 11.0)
    text = (tmp_path / "out" / "differences.md").read_text()
    assert "| td3 | Hopper-v5 | lap | per | 2 / 5 (few seeds) |" in text and "(few seeds): fewer than 5" in text


def test_several_run_folders_are_reported_together_and_each_run_counted_once(tmp_path, capsys):
    """A study's runs beside another folder's control runs: one report, rliable's tables against the control;
    a folder given twice (or inside another given) adds nothing; one bad folder is a one-line error."""
    study, control = tmp_path / "study", tmp_path / "control"
    for seed in range(5):
        fake_run(study, "lap", seed, [2.0 + seed] * 12, extra={"ess_mean": 1.0})
        fake_run(control, "uniform", seed, [1.0 + seed] * 12)
        fake_run(control, "per", seed, [5.0] * 12)
    uniform = sorted(control.glob("*_uniform_s*"))
    result = R.report([study, *uniform, uniform[0], control / "td3_Hopper-v5_uniform_s1"], tmp_path / "out")
    assert {(t["sampler"], t["seeds"]) for t in result["table"]} == {("lap", 5), ("uniform", 5)}
    assert "same seed" not in (tmp_path / "out" / "table.md").read_text()
    assert "few seeds" not in (tmp_path / "out" / "table.md").read_text()  # 5 seeds a sampler
    imp = {(r["sampler"], r["baseline"]): r["p_improvement"] for r in result["improvement"]}
    lap, uni = 2.0 + np.arange(5), 1.0 + np.arange(5)  # P(X > Y) over the 25 pairs, a tie counting 1/2: 17/25
    assert imp[("lap", "uniform")] == pytest.approx(np.mean((lap[:, None] > uni) + 0.5 * (lap[:, None] == uni)))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert len(manifest["run_folders"]) == 10 and len(manifest["config"]["runs"]) == 8
    assert cli_main(["report", str(study), str(control), "--out", str(tmp_path / "both")]) == 0
    table = (tmp_path / "both" / "table.md").read_text()
    assert all(f"| {s} | 5 |" in table for s in ("lap", "per", "uniform")), table
    with pytest.raises(SystemExit) as err:
        cli_main(["report", str(study), str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and "missing is not a folder" in lines[0]


def test_a_percentage_near_zero_keeps_its_sign_and_a_decimal():
    assert [tables._percent(x) for x in (-0.46, 0.3, 0.0, -0.5, -0.04, 12.4, -7.6, -1.77e-5)] == \
        ["-0.5", "+0.3", "+0", "-0.5", "-0.04", "+12", "-8", "-2e-05"]


def test_against_compares_each_sampler_with_its_own_runs_at_the_reference_value(tmp_path):
    """``--against rms_eps=0.01``: the runs at the reference value leave every table but versus.md, which gives each
    sampler's difference from its own reference runs (Welch, as scipy); a sampler without a counterpart is
    only listed."""
    here, study = tmp_path / "here", tmp_path / "study"
    finals = {"uniform": ([7.0, 7.5, 6.5, 7.2, 6.8], [6.4, 6.9, 6.1, 6.6, 6.3]), "lap": ([7.6, 7.9, 7.1, 7.7, 8.0],
                                                                                         [1.8, 2.2, 1.3, 1.6, 2.0])}
    for sampler, (new, old) in finals.items():
        for seed, (a, b) in enumerate(zip(new, old, strict=True)):
            fake_run(here, sampler, seed, [a] * 12, config={"rms_eps": 1e-5})
            fake_run(study, sampler, seed, [b] * 12, config={"rms_eps": 0.01})
    for seed in range(5):
        fake_run(study, "pser", seed, [6.0 + seed] * 12, config={"rms_eps": 0.01})
    result = R.report([here, study], tmp_path / "out", against=[("rms_eps", "1e-2")])  # 0.01 as a number
    table = {t["sampler"]: (t["seeds"], t["return_last10_mean"]) for t in result["table"]}
    assert table == {"uniform": (5, pytest.approx(7.0)), "lap": (5, pytest.approx(7.66))}
    rows = {r["sampler"]: r for r in result["versus"]}
    assert set(rows) == {"uniform", "lap"}
    for sampler, (new, old) in finals.items():
        lo, hi = stats.ttest_ind(new, old, equal_var=False).confidence_interval(0.95)
        r = rows[sampler]
        assert r["difference"] == pytest.approx(np.mean(new) - np.mean(old)) and not r["not_comparable"]
        assert (r["lo"], r["hi"]) == (pytest.approx(lo), pytest.approx(hi))
        assert (r["value"], r["reference"]) == (1e-5, 0.01)
    text = (tmp_path / "out" / "versus.md").read_text()
    assert "| dqn" not in text and "| td3 | Hopper-v5 | lap | 1e-05 | 0.01 | 5 / 5 | 7.66 | 1.78 |" in text
    status = (tmp_path / "out" / "status.md").read_text()
    assert status.count("reference (rms_eps = 1e-2), in versus.md only |") == 15
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["against"] == "rms_eps=1e-2" and len(manifest["reference_folders"]) == 15
    R.report([here, study], tmp_path / "out")  # the same folder without --against: no stale versus.md
    assert not (tmp_path / "out" / "versus.md").exists()


def test_against_keeps_the_samplers_that_do_not_read_the_setting_and_flags_other_differences(tmp_path):
    """Uniform replay does not read kappa: its runs stay in the compared tables whatever kappa they record; a
    reference that also differs in another setting is shown as not comparable, not as a difference."""
    runs = tmp_path / "runs"
    for seed in range(5):
        fake_run(runs, "uniform", seed, [6.0 + 0.1 * seed] * 12, config={"method.kappa": 0.01})
        fake_run(runs / "k1", "lap", seed, [7.0 + 0.1 * seed] * 12, config={"method.kappa": 1.0})
        fake_run(runs / "k001", "lap", seed, [2.0 + 0.1 * seed] * 12, config={"method.kappa": 0.01, "lr": 0.1})
    result = R.report(runs, tmp_path / "out", against=[("method.kappa", "0.01")])
    assert {t["sampler"] for t in result["table"]} == {"uniform", "lap"}
    assert [(r["sampler"], r["not_comparable"]) for r in result["versus"]] == [
        ("lap", "they also differ in lr (None, 0.1)")]
    assert "not comparable: they also differ in lr (None, 0.1)" in (tmp_path / "out" / "versus.md").read_text()
    assert {(r["sampler"], r["baseline"]) for r in result["differences"]} == {("lap", "uniform")}


def test_against_marks_copied_reference_runs_and_partial_runs_and_keeps_rows_of_a_flagged_task(tmp_path):
    """A reference run copied into a second folder is not counted twice silently; partial runs (with
    --include-partial) are marked on both sides; a uniform control that differs from the others (which keeps
    it out of the sampler comparisons) does not drop LAP's row against its own reference."""
    new, old = tmp_path / "new", tmp_path / "old"
    for seed in range(3):
        fake_run(new, "lap", seed, [7.0 + seed] * 12, config={"method.kappa": 1.0})
        fake_run(old, "lap", seed, [2.0 + seed] * (12 if seed else 3), finished=seed > 0,
                 config={"method.kappa": 0.01})
        fake_run(new, "uniform", seed, [6.0] * 12, config={"lr": 0.5})
    shutil.copytree(old / "td3_Hopper-v5_lap_s1", tmp_path / "backup" / "td3_Hopper-v5_lap_s1")
    result = R.report([new, old, tmp_path / "backup"], tmp_path / "out", include_partial=True,
                      against=[("method.kappa", "0.01")])
    row = result["versus"][0]
    assert (row["sampler"], row["seeds"], row["reference_seeds"], row["reference_partial"]) == ("lap", 3, 4, 1)
    assert row["not_comparable"] == "seed 1 twice among the reference runs"
    text = (tmp_path / "out" / "versus.md").read_text()
    assert "| 3 / 4 (few seeds) (0 / 1 partial) |" in text and "not comparable: seed 1 twice" in text
    assert "reference (method.kappa = 0.01), in versus.md only, partial" in (tmp_path / "out" / "status.md").read_text()
    assert "samplers differ in lr" in (tmp_path / "out" / "table.md").read_text()


def test_a_partial_reference_run_is_named_as_a_reference_and_not_counted_as_a_run_left_out(tmp_path):
    """Without --include-partial, a partial run is left out: one at the reference value of ``--against`` is named
    as a reference run (left out of versus.md), which ``prioritylab verdicts`` does not count as a run the
    compared tables lack; a partial compared run is counted, and an empty folder is not."""
    from prioritylab.harness.report.verdicts import left_out

    new, old = tmp_path / "new", tmp_path / "old"
    for seed in range(3):
        fake_run(new, "lap", seed, [7.0 + seed] * 12, config={"method.kappa": 1.0})
        fake_run(new, "uniform", seed, [6.0 + seed] * 12)
        fake_run(old, "lap", seed, [2.0 + seed] * (12 if seed else 3), finished=seed > 0,
                 config={"method.kappa": 0.01})  # fmt: skip
    (new / "notes").mkdir()  # a folder that holds no run
    R.report([new, old], tmp_path / "out", against=[("method.kappa", "0.01")])
    status = (tmp_path / "out" / "status.md").read_text()
    assert "reference (method.kappa = 0.01), partial, left out of versus.md" in status
    assert "empty, left out" in status and left_out(tmp_path / "out") == ""
    fake_run(new, "lap", 3, [7.0] * 3, finished=False, config={"method.kappa": 1.0})
    R.report([new, old], tmp_path / "out", against=[("method.kappa", "0.01")])
    assert left_out(tmp_path / "out") == "1 run (partial, left out: 1)"


def test_against_steps_does_not_name_the_capacity_that_follows_from_the_lengths(tmp_path):
    """Runs shorter than their buffer get room for the whole run (``2 * steps`` slots), so runs of two lengths
    record two capacities: ``--against steps=N`` does not call that a second difference, unless some run's
    replay was too small to hold it (then it overwrote transitions the other did not)."""
    for case, short_capacity in (("whole", 1200), ("overwrote", 600)):
        runs = tmp_path / case
        for seed in range(3):
            fake_run(runs / "long", "per", seed, [5.0 + seed] * 12, config={"steps": 1200, "replay_capacity": 2400})
            fake_run(runs / "short", "per", seed, [4.0 + seed] * 6,
                     config={"steps": 600, "replay_capacity": short_capacity})
        row = R.report(runs, tmp_path / f"out_{case}", against=[("steps", "600")])["versus"][0]
        assert (row["seeds"], row["reference_seeds"], row["mean"], row["reference_mean"]) == (3, 3, 6.0, 5.0)
        assert row["not_comparable"] == ("" if case == "whole" else "they also differ in replay_capacity (2400, 600)")


def test_against_two_settings_compares_runs_that_differ_in_both(tmp_path):
    """``--against method.kappa=0.01 --against rms_eps=1e-5``: LAP at kappa 1 and eps 0.01 against LAP at kappa 0.01
    and eps 1e-5; uniform, which reads eps but not kappa, against its own eps-1e-5 runs."""
    new, old = tmp_path / "new", tmp_path / "old"
    finals = {"lap": ([7.0, 7.9, 7.2, 6.9, 6.6], [7.8, 7.4, 7.9, 7.5, 7.6]), "uniform": ([6.4, 6.6, 6.5, 6.2, 6.6],
                                                                                          [7.1, 6.9, 7.2, 7.0, 7.0])}
    for seed in range(5):
        fake_run(new, "lap", seed, [finals["lap"][0][seed]] * 12, config={"method.kappa": 1.0, "rms_eps": 0.01})
        fake_run(old, "lap", seed, [finals["lap"][1][seed]] * 12, config={"method.kappa": 0.01, "rms_eps": 1e-5})
        fake_run(new, "uniform", seed, [finals["uniform"][0][seed]] * 12,
                 config={"method.kappa": 0.01, "rms_eps": 0.01})
        fake_run(old, "uniform", seed, [finals["uniform"][1][seed]] * 12,
                 config={"method.kappa": 0.01, "rms_eps": 1e-5})
    result = R.report([new, old], tmp_path / "out", against=[("method.kappa", "0.01"), ("rms_eps", "1e-5")])
    assert {t["sampler"]: t["seeds"] for t in result["table"]} == {"lap": 5, "uniform": 5}
    rows = {r["sampler"]: r for r in result["versus"]}
    for sampler, (x, y) in finals.items():
        lo, hi = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
        assert (rows[sampler]["lo"], rows[sampler]["hi"]) == (pytest.approx(lo), pytest.approx(hi))
        assert not rows[sampler]["not_comparable"]
    assert (rows["lap"]["value"], rows["lap"]["reference"]) == ("1.0, 0.01", "0.01, 1e-05")
    assert (rows["uniform"]["value"], rows["uniform"]["reference"]) == ("—, 0.01", "—, 1e-05")  # kappa unread
    assert "| method.kappa, rms_eps | reference method.kappa, rms_eps |" in (tmp_path / "out" / "versus.md").read_text()
    status = (tmp_path / "out" / "status.md").read_text()
    assert status.count("reference (method.kappa = 0.01 and rms_eps = 1e-5), in versus.md only |") == 5
    assert status.count("reference (rms_eps = 1e-5), in versus.md only |") == 5  # uniform: the setting it reads
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["against"] == ["method.kappa=0.01", "rms_eps=1e-5"]


def test_reference_runs_without_compared_runs_are_named_in_versus(tmp_path):
    """Uniform replay reads eps but not kappa: its eps-1e-5 runs are reference runs with nothing to compare them
    with, so versus.md names them instead of dropping them silently."""
    for seed in range(3):
        fake_run(tmp_path / "a", "lap", seed, [7.0 + seed] * 12, config={"method.kappa": 1.0, "rms_eps": 0.01})
        fake_run(tmp_path / "b", "lap", seed, [6.0 + seed] * 12, config={"method.kappa": 0.01, "rms_eps": 1e-5})
        fake_run(tmp_path / "b", "uniform", seed, [5.0] * 12, config={"method.kappa": 0.01, "rms_eps": 1e-5})
    result = R.report([tmp_path / "a", tmp_path / "b"], tmp_path / "out",
                      against=[("method.kappa", "0.01"), ("rms_eps", "1e-5")])
    assert [r["sampler"] for r in result["versus"]] == ["lap"]
    text = (tmp_path / "out" / "versus.md").read_text()
    assert "- td3 Hopper-v5 uniform: 3 reference run(s) against 0 compared" in text
    with pytest.raises(ValueError, match="against takes \\(SETTING, VALUE\\) pairs"):
        R.report(tmp_path / "a", tmp_path / "out2", against=("rms_eps", "0.01"))


@pytest.mark.parametrize(("folders", "flags", "message"), [
    ("abc", ["method.kappa=0.01", "rms_eps=1e-5"], "the other runs hold 2 values of method.kappa (1.0, 0.01)"),
    ("bc", ["method.kappa=0.01", "rms_eps=1e-5"], "the compared runs hold method.kappa = 0.01 too, so it separates"),
    ("cu", ["method.kappa=0.01"], "no compared run is of a sampler that reads method.kappa"),
    ("abc", ["rms_eps=1e-5", "rms_eps=0.01"], "--against gives rms_eps more than once"),
    ("abc", ["method.kappa=0.01", "rms_eps=0.5"], "no run was recorded with method.kappa = 0.01 and rms_eps = 0.5"),
])
def test_a_bad_set_of_against_settings_is_a_one_line_error_before_anything_is_written(tmp_path, capsys, folders,
                                                                                       flags, message):
    """Compared runs that differ from the reference in one setting beside runs that differ in both are no single
    comparison; nor is a setting whose reference value the compared runs hold too, one no compared sampler
    reads, or one given twice."""
    settings = {"a": ("lap", 1.0, 0.01), "b": ("lap", 0.01, 0.01), "c": ("lap", 0.01, 1e-5),
                "u": ("uniform", 0.01, 0.01)}
    for folder in folders:
        sampler, kappa, eps = settings[folder]
        for seed in range(3):
            fake_run(tmp_path / "runs" / folder, sampler, seed, [1.0] * 12,
                     config={"method.kappa": kappa, "rms_eps": eps})  # fmt: skip
    args = [x for flag in flags for x in ("--against", flag)]
    with pytest.raises(SystemExit) as err:
        cli_main(["report", str(tmp_path / "runs"), *args, "--out", str(tmp_path / "out")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0], lines
    out = tmp_path / "out"
    assert not (out.exists() and any(out.iterdir()))


@pytest.mark.parametrize(("against", "message"), [
    ("rms_eps", "--against takes SETTING=VALUE, got 'rms_eps'"),
    ("rms_eps=0.5", "no run was recorded with rms_eps = 0.5"),
    ("lr=0.01", "has no recorded lr"),
    ("buffer_size=1000", "buffer_size (runs are compared on the replay's capacity: --against replay_capacity=N)"),
    ("rms_eps=0.01", "the other runs hold 2 values of rms_eps"),
    ("per=true", "every run was recorded with per = true"),
])
def test_a_bad_against_is_a_one_line_error_before_anything_is_written(tmp_path, capsys, against, message):
    for seed, eps in enumerate((0.01, 0.01, 1e-5, 1e-3)):
        fake_run(tmp_path / "runs", "per", seed, [1.0] * 12, config={"rms_eps": eps, "per": True})
    with pytest.raises(SystemExit) as err:
        cli_main(["report", str(tmp_path / "runs"), "--against", against, "--out", str(tmp_path / "new" / "out")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "new").exists()  # the folders the refused report had made for --out are gone


def test_every_committed_report_was_made_from_a_clean_tree():
    """A committed report's manifest names the commit whose code made it: that holds only when the tree had no
    other changes (its own folder aside), so every report in docs/results records ``git_dirty: false``."""
    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    reports = [p for p in sorted(root.rglob("manifest.json")) if "run_folders" in json.loads(p.read_text())]
    assert len(reports) >= 7
    dirty = [str(p.relative_to(root)) for p in reports if json.loads(p.read_text()).get("git_dirty") is not False]
    assert dirty == []


@pytest.mark.slow
def test_every_committed_report_rebuilds_from_its_committed_runs(tmp_path):
    """Each committed report's recorded command, run again in a fresh process from the repository's root (as
    recorded: ``status.md`` names the run folders from there) into another folder, with the code here, gives the
    same tables, byte for byte, and no others, and names the same figures: every table in docs/results comes from
    committed run files (slow: about 3.5 minutes for the 10 reports here)."""
    repo = Path(__file__).resolve().parents[1]
    reports = [p for p in sorted((repo / "docs" / "results").rglob("manifest.json"))
               if "run_folders" in json.loads(p.read_text())]  # fmt: skip
    assert len(reports) >= 10
    for manifest in reports:
        recorded = json.loads(manifest.read_text())
        args = shlex.split(recorded["command"])
        args = args[args.index("report") + 1:]
        out = args.index("--out") + 1
        assert repo / args[out] == manifest.parent
        rebuilt = tmp_path / str(manifest.parent.relative_to(repo)).replace("/", "_")
        args[out] = str(rebuilt)
        done = subprocess.run([sys.executable, "-m", "prioritylab", "report", *args], cwd=repo, capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        tables = sorted(p.name for p in rebuilt.iterdir() if p.suffix in (".md", ".csv"))
        kept = sorted(p.name for p in manifest.parent.iterdir()
                      if p.suffix in (".md", ".csv") and p.name != "README.md")  # fmt: skip
        differ = [t for t in tables if (manifest.parent / t).read_bytes() != (rebuilt / t).read_bytes()]
        assert len(tables) >= 10 and kept == tables and differ == [], (manifest.parent, differ)
        assert sorted(json.loads((rebuilt / "manifest.json").read_text())["figures"]) == sorted(recorded["figures"])


def test_a_table_without_rows_still_has_its_header(tmp_path):
    """One sampler on one task: no comparison, gain or probability of improvement, and each of those CSVs is its
    header alone, the columns the same tables have with rows (a header pandas can read)."""
    import pandas as pd

    for seed in range(2):
        fake_run(tmp_path / "one", "per", seed, [1.0 + seed] * 10)
        for sampler in ("uniform", "per"):
            fake_run(tmp_path / "two", sampler, seed, [1.0 + seed] * 10)
    R.report(tmp_path / "one", tmp_path / "out_one")
    R.report(tmp_path / "two", tmp_path / "out_two")
    for name in ("gains", "differences", "speed", "improvement"):
        empty = pd.read_csv(tmp_path / "out_one" / f"{name}.csv")
        full = pd.read_csv(tmp_path / "out_two" / f"{name}.csv")
        assert empty.empty and len(full) > 0 and list(empty.columns) == list(full.columns) == list(
            report_stats.COLUMNS[name]), name


def test_a_row_with_other_columns_is_refused_before_the_csv_is_written(tmp_path):
    from prioritylab.results import write_csv

    path = tmp_path / "t.csv"
    write_csv(path, [], ["a", "b"])
    assert path.read_bytes() == b"a,b\r\n"
    for rows in ([{"a": 1, "b": 2}, {"a": 1}], [{"b": 2}], [{"a": 1, "b": 2, "c": 3}]):
        with pytest.raises(ValueError, match="are not the table's"):
            write_csv(path, rows, ["a", "b"])
        assert path.read_bytes() == b"a,b\r\n"
    write_csv(path, [{"b": 2, "a": 1}], ["a", "b"])  # the columns in the order given
    assert path.read_bytes() == b"a,b\r\n1,2\r\n"


def _partial_study(runs):
    """Runs of two agents, some partial (P): td3 on Hopper (uniform 3 finished; per and lap 2 finished + P) and
    Walker2d (uniform 2; per 1 + P; lap 2); dqn on Pong (uniform and per 2 + P, each P seed 2) and Breakout (uniform
    and per 2)."""
    for sampler, env, finished in [("uniform", "Hopper-v5", (1, 1, 1)), ("per", "Hopper-v5", (1, 1, 0)),
                                   ("lap", "Hopper-v5", (1, 1, 0)), ("uniform", "Walker2d-v5", (1, 1)),
                                   ("per", "Walker2d-v5", (1, 0)), ("lap", "Walker2d-v5", (1, 1))]:  # fmt: skip
        for seed, done in enumerate(finished):
            fake_run(runs, sampler, seed, np.arange(12.0 if done else 11.0) + seed, finished=bool(done), env=env)
    for sampler in ("uniform", "per"):
        for seed in range(3):
            fake_run(runs, sampler, seed, [5.0 + seed + (sampler == "per")] * (12 if seed < 2 else 11),
                     finished=seed < 2, env="ALE/Pong-v5", agent="dqn")  # fmt: skip
        for seed in range(2):
            fake_run(runs, sampler, seed, [3.0 + seed + (sampler == "per")] * 12, env="ALE/Breakout-v5", agent="dqn")


PARTIAL_KEYS = {
    "table": ("agent", "env", "sampler"), "differences": ("agent", "env", "sampler", "baseline"),
    "speed": ("agent", "env", "sampler", "baseline"), "gains": ("agent", "sampler", "baseline"),
    "human_normalised": ("agent", "sampler"), "aggregates": ("agent", "domain", "sampler"),
    "aggregates_by_task": ("agent", "domain", "sampler"), "improvement": ("agent", "domain", "sampler", "baseline"),
    "improvement_by_task": ("agent", "domain", "sampler", "baseline"),
}  # fmt: skip
"""The columns that name a row of each CSV of :func:`_partial_study`'s report."""


def _partial_runs_by_row(path, keys):
    """``row's key -> partial_runs`` of a CSV whose last column is ``partial_runs``."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames[-1] == "partial_runs", (path.name, reader.fieldnames)
        return {tuple(row[k] for k in keys): int(row["partial_runs"]) for row in reader}


def test_with_include_partial_every_csv_counts_the_partial_runs_of_each_row(tmp_path):
    """``partial_runs``, each CSV's last column: a group's own partial runs; both sides' for a comparison (per
    environment, and over the environments of a gain); the runs an rliable matrix takes (each sampler's lowest
    seeds, as many on every task as on its task with the fewest: Pong's partial seed 2 is in the Pong rows only)."""
    _partial_study(tmp_path / "runs")
    R.report(tmp_path / "runs", tmp_path / "out", include_partial=True)
    out = tmp_path / "out"
    assert sorted(p.stem for p in out.glob("*.csv")) == sorted(PARTIAL_KEYS)
    got = {name: _partial_runs_by_row(out / f"{name}.csv", keys) for name, keys in PARTIAL_KEYS.items()}
    atari, pong, breakout = ("Atari (human-normalised)", "Atari (human-normalised): Pong",
                             "Atari (human-normalised): Breakout")  # fmt: skip
    assert got["table"] == {
        ("td3", "Hopper-v5", "uniform"): 0, ("td3", "Hopper-v5", "per"): 1, ("td3", "Hopper-v5", "lap"): 1,
        ("td3", "Walker2d-v5", "uniform"): 0, ("td3", "Walker2d-v5", "per"): 1, ("td3", "Walker2d-v5", "lap"): 0,
        ("dqn", "ALE/Pong-v5", "uniform"): 1, ("dqn", "ALE/Pong-v5", "per"): 1,
        ("dqn", "ALE/Breakout-v5", "uniform"): 0, ("dqn", "ALE/Breakout-v5", "per"): 0}  # fmt: skip
    compared = {
        ("td3", "Hopper-v5", "per", "uniform"): 1, ("td3", "Hopper-v5", "lap", "uniform"): 1,
        ("td3", "Hopper-v5", "lap", "per"): 2, ("td3", "Walker2d-v5", "per", "uniform"): 1,
        ("td3", "Walker2d-v5", "lap", "uniform"): 0, ("td3", "Walker2d-v5", "lap", "per"): 1,
        ("dqn", "ALE/Pong-v5", "per", "uniform"): 2, ("dqn", "ALE/Breakout-v5", "per", "uniform"): 0}  # fmt: skip
    assert got["differences"] == got["speed"] == compared
    assert got["gains"] == {
        ("td3", "per", "uniform"): 2, ("td3", "lap", "uniform"): 1, ("td3", "lap", "per"): 3,
        ("td3", "uniform", "per"): 2, ("dqn", "per", "uniform"): 2, ("dqn", "uniform", "per"): 2}  # fmt: skip
    assert got["human_normalised"] == {("dqn", "per"): 1, ("dqn", "uniform"): 1}
    assert got["aggregates"] == {
        ("td3", "Hopper-v5", "uniform"): 0, ("td3", "Hopper-v5", "per"): 1, ("td3", "Hopper-v5", "lap"): 1,
        ("td3", "Walker2d-v5", "uniform"): 0, ("td3", "Walker2d-v5", "per"): 1, ("td3", "Walker2d-v5", "lap"): 0,
        ("dqn", atari, "uniform"): 0, ("dqn", atari, "per"): 0}  # fmt: skip
    assert got["aggregates_by_task"] == {("dqn", pong, "uniform"): 1, ("dqn", pong, "per"): 1,
                                         ("dqn", breakout, "uniform"): 0, ("dqn", breakout, "per"): 0}
    assert got["improvement"] == {
        ("td3", "Hopper-v5", "per", "uniform"): 1, ("td3", "Hopper-v5", "lap", "uniform"): 1,
        ("td3", "Hopper-v5", "lap", "per"): 2, ("td3", "Walker2d-v5", "per", "uniform"): 1,
        ("td3", "Walker2d-v5", "lap", "uniform"): 0, ("td3", "Walker2d-v5", "lap", "per"): 1,
        ("dqn", atari, "per", "uniform"): 0}  # fmt: skip
    assert got["improvement_by_task"] == {("dqn", pong, "per", "uniform"): 2, ("dqn", breakout, "per", "uniform"): 0}


def test_with_include_partial_versus_counts_both_sides_and_an_empty_csv_has_the_column(tmp_path):
    """``versus.csv``'s ``partial_runs`` is its ``partial`` plus its ``reference_partial``; a table without rows
    (one sampler: no comparison) still has the column in its header."""
    new, old = tmp_path / "new", tmp_path / "old"
    for seed in range(3):
        fake_run(new, "lap", seed, np.arange(12.0 if seed < 2 else 11.0) + seed, finished=seed < 2,
                 config={"method.kappa": 1.0})  # fmt: skip
        fake_run(old, "lap", seed, np.arange(12.0 if seed == 0 else 11.0) - seed, finished=seed == 0,
                 config={"method.kappa": 0.01})  # fmt: skip
    R.report([new, old], tmp_path / "out", include_partial=True, against=[("method.kappa", "0.01")])
    out = tmp_path / "out"
    with open(out / "versus.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["partial"], row["reference_partial"], row["partial_runs"]) == ("1", "2", "3")
    assert list(row)[-1] == "partial_runs"
    assert _partial_runs_by_row(out / "table.csv", ("sampler",)) == {("lap",): 1}
    for name in ("gains", "differences", "speed", "improvement", "aggregates", "versus"):
        header = (out / f"{name}.csv").read_text().splitlines()[0].split(",")
        assert header == [*report_stats.COLUMNS[name], "partial_runs"], name


def test_without_include_partial_no_csv_has_a_partial_runs_column(tmp_path):
    """The CSVs of a report made without ``--include-partial`` keep their columns: no ``partial_runs``, even where
    runs were left out as partial."""
    _partial_study(tmp_path / "runs")
    result = R.report(tmp_path / "runs", tmp_path / "out")
    out = tmp_path / "out"
    assert sorted(p.stem for p in out.glob("*.csv")) == sorted(PARTIAL_KEYS)
    for path in out.glob("*.csv"):
        header = path.read_text().splitlines()[0].split(",")
        assert "partial_runs" not in header, path.name
        if path.stem in report_stats.COLUMNS:
            assert header == list(report_stats.COLUMNS[path.stem]), path.name
    table_header = (out / "table.csv").read_text().splitlines()[0].split(",")
    assert table_header == ["agent", "env", "sampler", "seeds", "last_step", "return_last10_mean", "ci95", "finished",
                            "not_comparable"]  # fmt: skip
    assert all("partial_runs" not in row for name in PARTIAL_KEYS for row in result[name])


def test_a_run_folder_without_its_manifest_is_named_not_dropped(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(3):
        fake_run(runs, "per", seed, [1.0] * 10)
    (runs / "td3_Hopper-v5_per_s2" / "manifest.json").unlink()
    result = R.report(runs, tmp_path / "out")
    assert next(t for t in result["table"] if t["sampler"] == "per")["seeds"] == 2
    status = (tmp_path / "out" / "status.md").read_text()
    assert "td3_Hopper-v5_per_s2" in status and "no manifest, left out" in status


def test_links_to_run_folders_are_followed_and_each_run_read_once(tmp_path):
    """A folder of links to runs elsewhere reads as the runs themselves; a link to a run already under the folder,
    or to the folder itself, adds nothing (each real folder is read once)."""
    store = tmp_path / "store"
    for seed in range(3):
        fake_run(store, "per", seed, [1.0 + seed] * 10)
    picked = tmp_path / "picked"
    picked.mkdir()
    for seed in (0, 1):
        (picked / f"seed{seed}").symlink_to(store / f"td3_Hopper-v5_per_s{seed}", target_is_directory=True)
    fake_run(picked, "per", 2, [3.0] * 10)
    (picked / "again").symlink_to(picked / "td3_Hopper-v5_per_s2", target_is_directory=True)
    (picked / "loop").symlink_to(picked, target_is_directory=True)
    found, status = report_runs.find_runs(picked)
    assert sorted(run["seed"] for run in found) == [0, 1, 2] and status == []
    result = R.report(picked, tmp_path / "out")
    row = next(t for t in result["table"] if t["sampler"] == "per")
    assert row["seeds"] == 3 and row["return_last10_mean"] == pytest.approx(2.0)


def test_a_folder_that_cannot_be_listed_is_named_not_passed_over(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0 + seed] * 10)
    hidden = runs / "td3_Hopper-v5_per_s1"
    scandir = os.scandir

    def refuse(path="."):
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    found, status = report_runs.find_runs(runs)
    assert [run["seed"] for run in found] == [0]
    assert status == [{"folder": str(hidden), "status": "unreadable, left out",
                       "detail": "cannot list it (Permission denied): a run in it or under it cannot be read"}]


def test_a_report_beside_its_runs_still_names_what_it_leaves_out(tmp_path):
    """``report S/runs --out S``, the layout of docs/results: the report's folder holds the runs, and excluding
    it from the search must not hide the runs' folders."""
    study = tmp_path / "study"
    fake_run(study / "runs", "per", 0, [1.0] * 10)
    fake_run(study / "runs", "per", 1, [1.0] * 10)
    (study / "runs" / "td3_Hopper-v5_per_s1" / "manifest.json").unlink()
    (study / "runs" / "stray").mkdir()
    _, status = report_runs.find_runs(study / "runs", exclude=study)
    assert {Path(x["folder"]).name: x["status"] for x in status} == {
        "td3_Hopper-v5_per_s1": "no manifest, left out", "stray": "empty, left out"}
    fake_run(study / "runs", "per", 2, [1.0] * 10)
    manifest = study / "runs" / "td3_Hopper-v5_per_s2" / "manifest.json"
    manifest.unlink()
    manifest.mkdir()  # not a file: the run is corrupt, not passed over
    _, status = report_runs.find_runs(study / "runs", exclude=study)
    assert {Path(x["folder"]).name: x["status"] for x in status}["td3_Hopper-v5_per_s2"] == "corrupt"


def test_a_reports_own_manifest_above_the_runs_hides_none_of_them(tmp_path, capsys):
    """``report S --out T`` with S a study folder of docs/results (a report's manifest.json beside runs/): the
    report's manifest names no run, so the folders under it are still searched and a broken one named; once, it
    made every folder under S count as inside a run, and a run without its manifest was dropped without a word,
    by the report and by collect."""
    from prioritylab.harness import collect as C

    study = tmp_path / "study"
    for seed in range(3):
        fake_run(study / "runs", "per", seed, [1.0 + seed] * 10)
    R.report(study / "runs", study)  # the report's own manifest.json, beside runs/
    assert "agent" not in json.loads((study / "manifest.json").read_text())["config"]
    (study / "runs" / "td3_Hopper-v5_per_s2" / "manifest.json").unlink()
    (study / "runs" / "stray").mkdir()
    found, status = report_runs.find_runs(study)
    assert [run["seed"] for run in found] == [0, 1]
    assert {Path(x["folder"]).name: x["status"] for x in status} == {
        "td3_Hopper-v5_per_s2": "no manifest, left out", "stray": "empty, left out"}
    with pytest.raises(ValueError, match=r"td3_Hopper-v5_per_s2 cannot be read whole: no manifest"):
        C.collect([study], tmp_path / "into")
    # a report folder under the study (one of docs/results' nested reports) is neither a run nor an empty folder,
    # and a report may be written inside the study folder, whose manifest is no run's
    (study / "runs" / "stray").rmdir()
    fake_run(tmp_path / "again", "per", 2, [3.0] * 10)
    shutil.copyfile(tmp_path / "again" / "td3_Hopper-v5_per_s2" / "manifest.json",
                    study / "runs" / "td3_Hopper-v5_per_s2" / "manifest.json")  # fmt: skip
    R.report(study / "runs", study / "sub")
    _, status = report_runs.find_runs(study)
    assert status == []
    assert cli_main(["report", str(study), "--out", str(study / "again")]) == 0


def test_every_comparison_the_runs_cannot_give_is_named(tmp_path):
    """Three seeds of uniform and lap, one of per and pal: the tables compare lap with uniform only, and name the
    five comparisons of the papers (CLAIMS) they cannot make, with the reason."""
    runs = tmp_path / "runs"
    for seed in range(3):
        for sampler in ("uniform", "lap"):
            fake_run(runs, sampler, seed, [1.0 + seed] * 10)
    for sampler in ("per", "pal"):
        fake_run(runs, sampler, 0, [1.0] * 10)
    result = R.report(runs, tmp_path / "out")
    assert {(r["sampler"], r["baseline"]) for r in result["differences"]} == {("lap", "uniform")}
    for name in ("differences", "speed"):
        text = (tmp_path / "out" / f"{name}.md").read_text()
        assert "td3 Hopper-v5 pal vs uniform: 1 / 3 seeds, fewer than 2 on a side" in text
        assert "td3 Hopper-v5 lap vs per: 3 / 1 seeds" in text and "td3 Hopper-v5 pal vs lap: 1 / 3 seeds" in text
        assert "per vs uniform: 1 / 3 seeds" in text and "pal vs per: 1 / 1 seeds" in text
    improvement = (tmp_path / "out" / "improvement.md").read_text()
    assert "td3, Hopper-v5: pal vs uniform (no task with at least 2 runs of each)" in improvement
    assert "| lap | uniform |" in improvement


def test_gains_name_the_environments_a_row_leaves_out(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "uniform", seed, [0.0] * 10, env="Walker2d-v5")  # baseline 0: no % gain
        for env in ("Hopper-v5", "Ant-v5"):
            fake_run(runs, "uniform", seed, [2.0] * 10, env=env)
        for env in ("Hopper-v5", "Ant-v5", "Walker2d-v5", "Humanoid-v5"):
            fake_run(runs, "lap", seed, [3.0] * 10, env=env)
    rows = R.report(runs, tmp_path / "out")["gains"]
    assert next(r for r in rows if r["sampler"] == "lap" and r["baseline"] == "uniform")["envs"] == 2
    text = (tmp_path / "out" / "gains.md").read_text()
    assert "td3 lap vs uniform: Walker2d-v5 left out (uniform's mean final score there is 0: no % gain)" in text
    assert "td3 lap vs uniform: Humanoid-v5 left out (no uniform runs there)" in text


def test_human_normalised_names_games_without_scores_and_different_game_sets(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(2):
        for env in ("ALE/Pong-v5", "ALE/Breakout-v5", "ALE/Surround-v5"):
            fake_run(runs, "uniform", seed, [1.0] * 10, env=env, agent="dqn")
        fake_run(runs, "per", seed, [1.0] * 10, env="ALE/Pong-v5", agent="dqn")
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "human_normalised.md").read_text()
    assert "ALE/Surround-v5: no human and random scores" in text
    assert "dqn per: its mean and median are over Pong (the samplers ran different games)" in text
    assert "dqn uniform: its mean and median are over Breakout, Pong" in text


def test_overhead_names_each_run_whose_timing_it_cannot_use(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(3):
        fake_run(runs, "uniform", seed, [1.0] * 10, wall=600.0)
        fake_run(runs, "per", seed, [1.0] * 12, wall=660.0)  # its timing.csv ends at step 1000, before 1200
    (runs / "td3_Hopper-v5_uniform_s1" / "timing.csv").unlink()
    (runs / "td3_Hopper-v5_uniform_s2" / "timing.csv").write_text("step,wall_time\n1000,abc\n")
    fake_run(runs, "uniform", 3, [1.0] * 10, wall=600.0)
    timing = runs / "td3_Hopper-v5_uniform_s3" / "timing.csv"
    timing.write_text(timing.read_text()[:-7])  # cut by a kill: "1000,60" would read as 60 s
    rows = {r["sampler"]: r for r in R.report(runs, tmp_path / "out")["overhead"]}
    assert rows["uniform"]["runs"] == 1 and "per" not in rows
    text = (tmp_path / "out" / "overhead.md").read_text()
    assert "td3_Hopper-v5_uniform_s1: no readable timing.csv" in text
    assert "td3_Hopper-v5_uniform_s2: timing.csv without a wall_time in every row and a step in its last" in text
    assert "td3_Hopper-v5_per_s0: its timing.csv ends at step 1000, its last evaluation at 1200" in text
    assert "td3_Hopper-v5_uniform_s3: its timing.csv: row 1 is truncated (the file ends without a line end)" in text


def test_table3_names_samplers_in_no_pair_and_statistics_not_logged(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(5):
        fake_run(runs, "uniform", seed, [1.0] * 12)
        fake_run(runs, "ners", seed, [1.0] * 12, extra={"q_std": "nan", "td_std": "inf"} if seed == 0 else None)
    for seed in range(4):
        fake_run(runs, "per", seed, [1.0] * 12)
    R.report(runs, tmp_path / "out")
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    assert "In no pair (fewer than 5 seeds): per (4)." in t3
    line = next(x for x in t3.splitlines() if x.startswith("| ners − uniform |"))
    assert line.endswith("| — (infinite in some seed: diverged) | 0 (no spread) | — (not logged by every seed) |"), line


def test_a_curve_cut_to_its_shortest_seed_says_so(tmp_path, monkeypatch):
    captions = {}

    def keep(fig, path):
        captions[path.name] = " ".join(t.get_text() for t in fig.texts)

    monkeypatch.setattr(plots, "save_figure", keep)
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [1.0] * 12)
    fake_run(runs, "per", 1, [1.0] * 4, finished=False)
    fake_run(runs, "uniform", 0, [1.0] * 12)
    R.report(runs, tmp_path / "out", include_partial=True)
    assert "Cut to the evaluations every seed logged (a seed stopped early): per at step 400." in \
        captions["curves_td3_Hopper-v5.png"]


def test_seeds_the_pooled_tables_do_not_use_are_named(tmp_path):
    from prioritylab.scores import MINATAR_RANDOM

    runs = tmp_path / "runs"
    for game, seeds in (("Breakout", 4), ("SpaceInvaders", 2)):
        for seed in range(seeds):
            for sampler, gain in (("uniform", 4.0), ("per", 3.0)):
                fake_run(runs, sampler, seed, [MINATAR_RANDOM[game] + gain + seed] * 10, env=f"MinAtar/{game}-v1",
                         agent="dqn")  # fmt: skip
    fake_run(runs, "uniform", 0, [1.0] * 10, env="MinAtar/Pong-v1", agent="dqn")
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "aggregates.md").read_text()
    assert "per on MinAtar/Breakout-v1: 2 of its 4 seeds unused" in text
    assert "uniform on MinAtar/Breakout-v1: 2 of its 4 seeds unused" in text and "SpaceInvaders-v1: 2 of" not in text
    assert "task MinAtar/Pong-v1 left out (no random-play score" in text


def test_the_diagnostics_panels_label_steps_short_enough_to_read(tmp_path, monkeypatch):
    """Four panels a row leave no room for 60000 beside 80000: the x ticks read 60k, 1.5M."""
    labels = [plots.steps_label(x) for x in (0, 500, 2000, 60000, 1_500_000, 2e6)]
    assert labels == ["0", "500", "2k", "60k", "1.5M", "2M"]
    drawn, real = {}, plots.save_figure

    def save(fig, path):
        drawn[Path(path).name] = fig
        real(fig, path)

    monkeypatch.setattr(plots, "save_figure", save)
    for seed in range(2):
        fake_run(tmp_path / "runs", "per", seed, [1.0] * 12)
    plots.plot_curves({("td3", "Hopper-v5", "per"): report_runs.find_runs(tmp_path / "runs")[0]}, tmp_path)
    fig = drawn["diagnostics_td3_Hopper-v5.png"]
    assert fig.axes[0].xaxis.get_major_formatter()(60000, 0) == "60k"
    assert fig.get_supxlabel() == "environment steps"


def test_intervals_hold_their_estimates_and_the_marks_follow_the_numbers(tmp_path):
    """On runs that spread (so an interval cannot be a point): every shown interval of the aggregates and of the
    probability of improvement has its low end below its estimate and its high end above; a sampler behind
    uniform throughout has X - (uniform twice as fast) below 0 with "any (X behind Y)" excluded; and a NERS Table 3
    difference whose interval excludes 0 carries the star, one that holds 0 none."""
    from prioritylab.scores import MINATAR_RANDOM

    runs = tmp_path / "runs"
    rng = np.random.default_rng(0)
    base = MINATAR_RANDOM["Breakout"]
    for seed in range(6):
        ramp = np.minimum(np.arange(1, 21) / 2.0, 5.0)
        fake_run(runs, "uniform", seed, list(base + ramp + rng.normal(0, 0.7)), env="MinAtar/Breakout-v1",
                 agent="dqn")  # fmt: skip
        fake_run(runs, "per", seed, list(base + 0.8 * ramp + rng.normal(0, 0.7)), env="MinAtar/Breakout-v1",
                 agent="dqn", extra={"td_mean": 10.5 + seed})  # fmt: skip
    result = R.report(runs, tmp_path / "out")
    for row in result["aggregates"]:
        for m in ("iqm", "mean"):
            assert row[f"{m}_lo"] < row[m] < row[f"{m}_hi"], (row["sampler"], m, row)
    (imp,) = result["improvement"]
    assert imp["sampler"] == "per" and imp["lo"] <= imp["p_improvement"] <= imp["hi"] and imp["lo"] < imp["hi"]
    assert imp["p_improvement"] < 0.5  # per learns less here
    speed = next(r for r in result["speed"] if r["sampler"] == "per")
    assert speed["vs_twice"] < 0 and speed["vs_twice_hi"] < 0 and speed["excluded_speed_up"] == 1.0
    assert "any (X behind Y)" in (tmp_path / "out" / "speed.md").read_text()
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    row = next(line for line in t3.splitlines() if line.startswith("| per − uniform |"))
    td_mean, *others = row.split("|")[2:6]
    assert td_mean.strip().endswith("]*"), row  # td_mean 10.5 + seed against 0.5 + seed
    assert not any("*" in cell for cell in others), row  # the other three are equal on both sides


@pytest.mark.parametrize("bad", ["nan", "inf", "repeated step", "decreasing step"])
def test_a_run_with_a_non_finite_return_or_steps_out_of_order_is_corrupt_and_the_report_completes(tmp_path, bad):
    runs = tmp_path / "runs"
    for seed in range(3):
        fake_run(runs, "uniform", seed, [1.0 + seed] * 10)
    fake_run(runs, "uniform", 3, [1.0] * 10)
    evals = runs / "td3_Hopper-v5_uniform_s3" / "evaluations.csv"
    lines = evals.read_text().splitlines(keepends=True)
    cells = lines[5].split(",")
    if bad in ("nan", "inf"):
        cells[1] = bad
    else:
        cells[0] = lines[4].split(",")[0] if bad == "repeated step" else "50"
    lines[5] = ",".join(cells)
    evals.write_text("".join(lines))
    result = R.report(runs, tmp_path / "out")
    status = {Path(x["folder"]).name: x for x in result["status"]}["td3_Hopper-v5_uniform_s3"]
    assert status["status"] == "corrupt" and "row 5" in status["detail"], status
    assert next(r for r in result["table"] if r["sampler"] == "uniform")["seeds"] == 3


def test_a_minatar_game_is_normalised_by_two_uniform_runs_or_more_and_p_needs_no_scale(tmp_path):
    """One uniform run is no mean to set "1 = uniform" by: the game is left out of the normalised tables, named
    with its reason.  P(X > Y) does not depend on a game's scale, so PSER against PER is still made there (and on a
    game without any uniform run), from the raw scores."""
    runs = tmp_path / "runs"
    fake_run(runs, "uniform", 0, [9.0] * 10, env="MinAtar/Asterix-v1", agent="dqn")
    for seed in range(3):
        for game in ("Asterix", "Seaquest"):
            fake_run(runs, "per", seed, [2.0 + seed] * 10, env=f"MinAtar/{game}-v1", agent="dqn")
            fake_run(runs, "pser", seed, [3.0 + seed] * 10, env=f"MinAtar/{game}-v1", agent="dqn")
    result = R.report(runs, tmp_path / "out")
    assert result["aggregates"] == []
    text = (tmp_path / "out" / "aggregates.md").read_text()
    assert "task MinAtar/Asterix-v1 left out (1 uniform run: at least 2 are needed to normalise by their mean)" in text
    assert "task MinAtar/Seaquest-v1 left out (no uniform runs to normalise by)" in text
    imp = {(r["sampler"], r["baseline"], r["tasks"]): r["p_improvement"] for r in result["improvement"]}
    pser, per = 3.0 + np.arange(3), 2.0 + np.arange(3)
    expected = np.mean((pser[:, None] > per) + 0.5 * (pser[:, None] == per))
    assert imp == {("pser", "per", 2): pytest.approx(expected)}
    by_task = {r["domain"] for r in result["improvement_by_task"]}
    assert by_task == {f"MinAtar (0 = random, 1 = uniform): MinAtar/{g}-v1" for g in ("Asterix", "Seaquest")}


def test_a_run_copied_under_another_seed_and_runs_of_other_lengths_are_not_compared(tmp_path):
    """Evaluations are what the manifests cannot fake: the same rows under two seeds (a copied run whose manifest
    was edited) and finished runs that end at different steps (manifests without their settings) leave the group
    out of every comparison, named in table.md."""
    runs = tmp_path / "runs"
    for seed in range(3):
        fake_run(runs, "uniform", seed, [1.0 + seed] * 12)
        fake_run(runs, "lap", seed, [2.0 + seed] * (12 if seed else 10))
        fake_run(runs, "per", seed, [3.0 + seed] * 12)
    copy = runs / "td3_Hopper-v5_per_s9"
    shutil.copytree(runs / "td3_Hopper-v5_per_s1", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "config": {**manifest["config"], "seed": 9}}))
    result = R.report(runs, tmp_path / "out")
    assert result["differences"] == [] and result["improvement"] == []  # only uniform is left to compare
    text = (tmp_path / "out" / "table.md").read_text()
    assert "the same evaluations under several seeds (one run's files copied under another seed?): seed 1" in text
    assert "seed 9" in text and "finished runs end at different steps (1000, 1200)" in text


def test_a_run_copied_under_another_samplers_manifest_is_not_compared(tmp_path):
    """PER's seed 0 files under uniform's seed-0 manifest (the folder and manifest still uniform's): a run of one
    sampler would be counted as the other's, and shift their difference with no word; both groups are named in
    table.md and left out of the comparisons."""
    runs = tmp_path / "runs"
    for seed in range(3):
        fake_run(runs, "uniform", seed, [1.0 + seed] * 12)
        fake_run(runs, "per", seed, [3.0 + seed] * 12)
        fake_run(runs, "lap", seed, [5.0 + seed] * 12)
    shutil.copyfile(runs / "td3_Hopper-v5_per_s0" / "evaluations.csv", runs / "td3_Hopper-v5_uniform_s0" /
                    "evaluations.csv")  # fmt: skip
    result = R.report(runs, tmp_path / "out")
    assert {(r["sampler"], r["baseline"]) for r in result["differences"]} == set()  # lap's baselines are left out
    text = (tmp_path / "out" / "table.md").read_text()
    assert (f"seed 0 ({runs / 'td3_Hopper-v5_uniform_s0'}) has the same evaluations as per seed 0 "
            f"({runs / 'td3_Hopper-v5_per_s0'}) (one run's files copied under another run's manifest?)") in text
    assert f"has the same evaluations as uniform seed 0 ({runs / 'td3_Hopper-v5_uniform_s0'})" in text


def test_a_copy_whose_manifest_gives_its_seed_as_text_is_still_a_copy(tmp_path):
    """Seeds 1 and "1" are not one seed to the check of seeds in several folders, so the check of equal
    evaluations must name them: the copy is not counted as a second seed."""
    runs = tmp_path / "runs"
    for seed in range(3):
        fake_run(runs, "uniform", seed, [1.0 + seed] * 12)
        fake_run(runs, "per", seed, [3.0 + seed] * 12)
    copy = runs / "copy" / "td3_Hopper-v5_per_s1"  # named as its manifest names it (the seed "1" as 1)
    shutil.copytree(runs / "td3_Hopper-v5_per_s1", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "config": {**manifest["config"], "seed": "1"}}))
    result = R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    assert "the same evaluations under several seeds (one run's files copied under another seed?)" in text
    assert result["differences"] == []


def test_a_run_whose_manifest_was_edited_to_another_environment_is_left_out_and_named(tmp_path, capsys):
    """Asterix's scores under a manifest that says Breakout would be listed as Breakout's: the folder, named by train
    from the manifest it was written with, tells (as collect refuses such a run)."""
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0 + seed] * 12, agent="dqn", env="MinAtar/Breakout-v1")
    fake_run(runs, "per", 2, [50.0] * 12, agent="dqn", env="MinAtar/Asterix-v1")
    edited = runs / "dqn_MinAtar-Asterix-v1_per_s2"
    manifest = json.loads((edited / "manifest.json").read_text())
    manifest["config"]["env"] = "MinAtar/Breakout-v1"
    (edited / "manifest.json").write_text(json.dumps(manifest))
    assert cli_main(["report", str(runs), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    said = (f"left out: {edited}: corrupt ({edited} is named dqn_MinAtar-Asterix-v1_per_s2, but its manifest is that "
            "of dqn_MinAtar-Breakout-v1_per_s2 (a renamed folder, or an edited manifest.json))")  # fmt: skip
    assert said in out
    assert "2 runs in 1 groups" in out
    assert str(edited) not in json.loads((tmp_path / "out" / "manifest.json").read_text())["run_folders"]
    assert "| dqn | MinAtar/Breakout-v1 | per | 2 (few seeds) |" in (tmp_path / "out" / "table.md").read_text()


def test_an_empty_out_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [1.0] * 12)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as err:
        cli_main(["report", str(runs), "--out", ""])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and lines == ["prioritylab report: error: --out is empty; give a folder (. for the "
                                             "current one)"]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
