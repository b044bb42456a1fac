"""``prioritylab cliffwalk`` and the speed benchmark, on small settings."""

import csv
import json

import numpy as np
import pytest

from prioritylab.cli import main
from prioritylab.cliffwalk.experiments import fit_log_linear, median_curve, summarise
from prioritylab.cliffwalk.runner import SCHEMES
from prioritylab.cliffwalk.speed import COLUMNS, SCHEME_COLUMNS
from prioritylab.cliffwalk.speed import main as speed_main


def test_cli_runs_and_writes_files(tmp_path, capsys):
    rc = main(["cliffwalk", "--n", "4", "6", "--learner", "linear", "--sampler", "per", "--alpha", "0.7",
               "--seeds", "3", "--no-progress", "--out", str(tmp_path)])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "linear/per" in out and "censored" in out
    assert {"runs.csv", "summary.csv", "summary.png", "manifest.json"} <= {p.name for p in tmp_path.iterdir()}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config"]["config"]["alpha"] == 0.7
    # the cap each size ran with, as runs.csv has it, and no n or cap of the template, which each size sets (the
    # manifest once said n 16 and cap 20,000,000 beside runs of n 4 and 6 capped at 200 an update's transition)
    config = manifest["config"]["config"]
    ran = {row["n"]: int(row["cap"]) for row in csv.DictReader(open(tmp_path / "runs.csv"))}
    assert config["caps"] == ran == {"4": 6000, "6": 25200} and "n" not in config and "cap" not in config


@pytest.mark.parametrize("argv,named", [
    (["--n", "0"], "n must"), (["--alpha", "-1"], "alpha"), (["--cap", "0"], "'0'"), (["--rho", "2"], "rho"),
    (["--init-std", "inf"], "--init-std must be in [0.0, inf), got inf"), (["--alpha", "inf"], "alpha"),
    (["--eps", "inf"], "eps"), (["--n", "4", "5", "4"], "--n lists a size twice (4 5 4)"),
    (["--benchmark", "--n", "0"], "--benchmark measures fixed settings (docs/benchmarks.md) and takes no other "
                                  "option, got --n --seeds"),  # --no-progress: it draws no bar anyway
])  # fmt: skip
def test_cli_bad_input_exits_with_a_message(argv, named, capsys):
    try:
        code = main(["cliffwalk", "--seeds", "1", "--no-progress", *argv])
    except SystemExit as err:
        code = err.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("prioritylab cliffwalk: error:") and named in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--n", "0"], "--n must be an integer in [1, "),
    (["--init-std", "-1"], "--init-std must be in [0.0, inf), got -1.0"),
    (["--window", "0"], "--window must be a positive integer, got 0"), (["--rho", "1"], "--rho must be in (0.0, 1.0)"),
    (["--sampler", "per", "--eps", "0", "--init", "td"], "--eps = 0 with --init 'small' or 'td' can leave no"),
    (["--out", ""], "--out is empty; give a folder (. for the current one)"),
])  # fmt: skip
def test_a_bad_setting_is_named_by_the_option_typed(argv, message, tmp_path, capsys, monkeypatch):
    """The messages named the settings' fields ("init_std", "n"), not the options typed; ``--out ''`` was taken for
    no --out and the runs went unsaved."""
    from prioritylab.cliffwalk import experiments

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(experiments, "run_grid", lambda *a, **k: pytest.fail("the runs started"))
    size = [] if "--n" in argv else ["--n", "4"]  # an option is typed once
    assert main(["cliffwalk", *size, "--seeds", "1", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"prioritylab cliffwalk: error: {message}"), err
    assert list(tmp_path.iterdir()) == []


def test_speed_benchmark_runs_and_reports_its_columns(tmp_path, capsys):
    """The command runs end to end and reports every column; rates are measured, never asserted here."""
    argv = ["--n", "5", "--jit-updates", "2000", "--ref-updates", "50", "--repeats", "2", "--min-seconds", "0"]
    assert speed_main([*argv, "--out", str(tmp_path)]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == COLUMNS
    with open(tmp_path / "speed.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["scheme"] for r in rows] == ["uniform", "per"]
    for r in rows:
        assert set(COLUMNS) <= set(r)
        assert r["identical_after_reference_updates"] == "True"
        assert r["repeats"] == "2" and r["jit_updates"] == "2000"


def test_speed_per_scheme_runs_and_reports_every_scheme(capsys):
    argv = ["--n", "4", "--per-scheme", "--scheme-updates", "500", "--repeats", "1", "--min-seconds", "0"]
    assert speed_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == SCHEME_COLUMNS
    assert [line.split()[2] for line in lines[2:]] == list(SCHEMES)


def test_summarise_counts_censored_runs_at_their_cap():
    rows = [
        {"label": "a", "n": 3, "memory_size": 14, "seed": s, "updates": u, "censored": u < 0, "steps": 0, "cap": 100}
        for s, u in enumerate([10, 20, -1])
    ]
    (row,) = summarise(rows)
    assert row["median"] == 20 and row["max"] == 100 and row["censored"] == 1 and not row["median_is_lower_bound"]
    rows[0]["updates"], rows[0]["censored"] = -1, True
    assert summarise(rows)[0]["median_is_lower_bound"]


@pytest.mark.parametrize(("updates", "lower_bound"), [
    ([10, -1], True),  # the median 55 is below the cap, but the mean of a converged run and a censored one
    ([10, 20, 30, -1], False),  # the middle two converged: exact
    ([10, 20, -1, -1], True),  # half censored: the upper middle one is
    ([10, 20, 30, -1, -1], False), ([10, 20, -1, -1, -1], True),
])  # fmt: skip
def test_a_median_is_a_lower_bound_once_the_upper_middle_run_is_censored(updates, lower_bound):
    """Censored runs count at their cap, above every run that converged: with an even number of seeds the median is
    the mean of the middle two, and it is only a lower bound once the upper of them is censored, though it may lie
    below the cap (it was once read as exact there, and a verdict taken from it)."""
    rows = [{"label": "a", "n": 3, "memory_size": 14, "seed": s, "updates": u, "censored": u < 0, "steps": 0,
             "cap": 100} for s, u in enumerate(updates)]  # fmt: skip
    (row,) = summarise(rows)
    assert row["median_is_lower_bound"] is lower_bound, row


def test_fit_and_median_curve():
    a, b, r2 = fit_log_linear([1, 2, 3, 4], [2.0, 4.0, 8.0, 16.0])
    assert b == pytest.approx(np.log(2)) and r2 == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"need at least two points to fit, got 1$"):
        fit_log_linear([1], [1.0])
    med = median_curve([np.array([1.0, 0.5]), np.array([1.0, 0.8, 0.6, 0.0005]), np.array([1.0, 0.0001])])
    np.testing.assert_allclose(med, [1.0, 0.5, 0.5, 0.0005])


CHANGED = {"alpha": 0.3, "beta": 0.9, "eps": 0.5, "init": "small", "rho": 0.8, "window": 1, "eta": 0.2,
           "mode": "add", "kappa": 0.05}  # fmt: skip
"""A valid value other than the default for every replay setting of the Cliffwalk."""


def test_each_scheme_reads_exactly_the_settings_it_is_listed_with(capsys):
    """``SCHEME_READS`` is what the CLI warns from: a setting outside a scheme's entry changes none of its runs
    (updates, steps and replay diagnostics over four seeds at n = 8), one inside changes some."""
    import dataclasses

    from prioritylab.cliffwalk.runner import SCHEME_READS, SCHEMES, RunConfig, run

    def runs(cfg):
        return repr([(r.updates, r.steps, sorted(r.diagnostics.items())) for r in (run(cfg, s) for s in range(4))])

    assert set(SCHEME_READS) == set(SCHEMES) and set(CHANGED) == {k for v in SCHEME_READS.values() for k in v}
    for scheme, reads in SCHEME_READS.items():
        # LAP's default floor kappa = 1 lifts every |delta| of this walk to 1, where alpha has nothing to act on
        floor = {"kappa": 0.3} if scheme == "lap" else {}
        base = RunConfig(n=8, scheme=scheme, cap=40_000, diagnostics=True, **floor)
        before = runs(base)
        for name, value in CHANGED.items():
            changed = runs(dataclasses.replace(base, **{name: value})) != before
            assert changed == (name in reads), (scheme, name, changed)
    assert main(["cliffwalk", "--n", "4", "--seeds", "1", "--no-progress", "--sampler", "per", "--kappa", "50"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["prioritylab cliffwalk: warning: --kappa 50.0 has no effect with --sampler per (read by lap)"]


def test_a_folder_holding_another_programs_results_is_refused_before_any_run(tmp_path, capsys):
    """Its manifest.json would be replaced while the other program's files stayed, described by none."""
    import json

    (tmp_path / "manifest.json").write_text(json.dumps({"program": "pser_theorem1.py", "config": {}}))
    argv = ["cliffwalk", "--n", "4", "--seeds", "1", "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {tmp_path} holds the results of pser_theorem1.py (its manifest.json)" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    (tmp_path / "manifest.json").unlink()
    assert main(argv) == 0 and main(argv) == 0  # its own results it replaces
    assert json.loads((tmp_path / "manifest.json").read_text())["program"] == "prioritylab cliffwalk"


@pytest.mark.parametrize("command", ["cliffwalk", "report"])
def test_a_training_runs_folder_or_one_inside_it_is_refused_before_anything_is_written(tmp_path, capsys, command):
    """A run's manifest.json is what its resume reads: results written over it would lose the run.  The refusal
    comes before any folder is made, for the run's own folder and for a new folder inside it."""
    import hashlib
    import shutil
    from pathlib import Path

    committed = Path(__file__).parent.parent / "docs/results/minatar_study_long/runs/dqn_MinAtar-Seaquest-v1_lap_s2"
    run = tmp_path / "runs" / committed.name
    shutil.copytree(committed, run)

    def files():
        return {p.relative_to(tmp_path): hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*")
                if p.is_file()}  # fmt: skip

    before = files()
    for out in (run, run / "report" / "deeper"):
        argv = {"cliffwalk": ["cliffwalk", "--n", "4", "--seeds", "1", "--no-progress", "--out", str(out)],
                "report": ["report", str(tmp_path / "runs"), "--out", str(out)]}[command]  # fmt: skip
        try:
            code = main(argv)
        except SystemExit as exit_:  # the report refuses through SystemExit, the cliffwalk by returning
            code = exit_.code
        assert code == 2
        err = capsys.readouterr().err.strip().splitlines()
        where = "is" if out == run else f"is inside {run}, which is"
        assert len(err) == 1 and f"--out {out} {where} a training run's folder" in err[0], err
        assert files() == before and not (run / "report").exists()
