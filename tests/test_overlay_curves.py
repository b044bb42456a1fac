"""``scripts/overlay_curves.py``: labelled sets of run folders in one figure, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from theory_scripts import load_script


def run_folder(root: Path, name: str, returns, finished=True, **settings) -> Path:
    """A run of seed N where ``name`` ends in ``_sN`` (else seed 0); ``settings`` replace or add recorded ones."""
    folder = root / name
    folder.mkdir(parents=True)
    seed = int(name.rsplit("_s", 1)[1]) if "_s" in name else 0
    config = {"agent": "dqn", "env": "MinAtar/Breakout-v1", "sampler": "lap", "seed": seed,
              "steps": 100 * len(returns), **settings}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps({"config": config}))
    lines = ["step,return_mean"] + [f"{100 * (i + 1)},{r}" for i, r in enumerate(returns)]
    (folder / "evaluations.csv").write_text("\n".join(lines) + "\n")
    if finished:
        (folder / "finished.json").write_text(json.dumps({"step": 100 * len(returns)}))
    return folder


def test_sets_are_drawn_and_partial_runs_named(tmp_path, capsys):
    script = load_script("overlay_curves")
    for s in range(2):
        run_folder(tmp_path / "a", f"lap_s{s}", [1.0 + s] * 6)
        run_folder(tmp_path / "b", f"lap_s{s}", [5.0 + s] * 6)
    run_folder(tmp_path / "b", "lap_s2", [9.0] * 3, finished=False)
    out = tmp_path / "fig.png"
    sets = [f"lap, eps 0.01={tmp_path}/a/lap_s*", f"lap, eps 1e-5={tmp_path}/b/lap_s*"]
    assert script.main([*sets, "--out", str(out), "--dashed", "eps 0.01"]) == 0
    assert out.stat().st_size > 0
    assert f"left out (no finished.json): {tmp_path}/b/lap_s2" in capsys.readouterr().err


def test_bad_sets_are_one_line_errors_and_write_nothing(tmp_path, capsys):
    script = load_script("overlay_curves")
    run_folder(tmp_path, "partial", [1.0] * 3, finished=False)
    out = tmp_path / "fig.png"
    for args, message in (
        (["no-label"], "'no-label' is not LABEL=RUN_FOLDER_GLOB"),
        ([f"x={tmp_path}/nothing*"], "matches no folder"),
        ([f"x={tmp_path}/partial"], "x: no finished run"),
    ):
        assert script.main([*args, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert message in err[-1] and err[-1].startswith("overlay_curves: error:"), err
        assert not out.exists()


def test_a_set_that_is_not_seeds_of_one_setting_is_a_one_line_error(tmp_path, capsys):
    """Averaged into one curve and labelled "N seeds", runs of another sampler, a seed met twice (one study's
    runs beside another's) or another recorded setting would pass for seeds of one setting."""
    script = load_script("overlay_curves")
    run_folder(tmp_path / "a", "lap_s0", [1.0] * 6)
    run_folder(tmp_path / "a", "lap_s1", [2.0] * 6)
    run_folder(tmp_path / "a", "per_s2", [3.0] * 6, sampler="per")
    run_folder(tmp_path / "b", "lap_s1", [4.0] * 6)
    run_folder(tmp_path / "c", "lap_s0", [1.0] * 6)
    run_folder(tmp_path / "c", "lap_s1", [1.0] * 6, rms_eps=1e-5)
    run_folder(tmp_path / "c", "lap_s2", [1.0] * 6, replay={"duplicates": "each"})  # one lap does not read: the same
    out = tmp_path / "fig.png"
    for args, message in (
        ([f"x={tmp_path}/a/*"], "x: its runs are of more than one agent, environment and sampler (dqn "
                                "MinAtar/Breakout-v1 lap; dqn MinAtar/Breakout-v1 per)"),
        ([f"x={tmp_path}/[ab]/lap_s*"], f"x: seed 1 is there twice ({tmp_path}/a/lap_s1 and {tmp_path}/b/lap_s1)"),
        ([f"x={tmp_path}/c/lap_s*"], "x: its runs differ in rms_eps (None, 1e-05)"),
    ):
        assert script.main([*args, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0] == f"overlay_curves: error: {message}", err
        assert not out.exists()
    assert script.main([f"x={tmp_path}/c/lap_s[02]", "--out", str(out)]) == 0


def with_column(folder: Path, name: str, values) -> None:
    lines = (folder / "evaluations.csv").read_text().splitlines()
    rows = [f"{lines[0]},{name}"] + [f"{line},{v}" for line, v in zip(lines[1:], values, strict=True)]
    (folder / "evaluations.csv").write_text("\n".join(rows) + "\n")


def test_another_column_on_a_log_scale_with_each_run(tmp_path, capsys, monkeypatch):
    script = load_script("overlay_curves")
    drawn = {}
    monkeypatch.setattr(script, "save_figure", lambda fig, path: drawn.update(
        lines=[(ln.get_label(), ln.get_ydata().copy()) for ln in fig.axes[0].get_lines()],
        scale=fig.axes[0].get_yscale(), label=fig.axes[0].get_ylabel(),
        bands=len(fig.axes[0].collections)))  # fmt: skip
    for s, temps in enumerate(([0.1] * 6, [0.001] * 6)):
        with_column(run_folder(tmp_path, f"sac_s{s}", [1.0] * 6), "temperature", temps)
    out = tmp_path / "fig.png"
    assert script.main([f"all={tmp_path}/sac_s*", "--out", str(out), "--column", "temperature", "--log", "--each"]) == 0
    assert drawn["scale"] == "log" and drawn["label"].startswith("temperature")
    mean = next(y for label, y in drawn["lines"] if label.startswith("all (2 seeds)"))
    assert abs(mean[-1] - 0.01) < 1e-12  # the geometric mean of 0.1 and 0.001
    each = [y for label, y in drawn["lines"] if label.startswith("_")]
    assert sorted(round(float(y[-1]), 12) for y in each) == [0.001, 0.1]
    assert drawn["bands"] == 0  # 2 runs: no interval, as in the report's tables
    for s in range(2, 5):
        with_column(run_folder(tmp_path, f"sac_s{s}", [1.0] * 6), "temperature", [0.01] * 6)
    assert script.main([f"all={tmp_path}/sac_s*", "--out", str(out), "--column", "temperature"]) == 0
    assert drawn["bands"] == 1 and drawn["scale"] == "linear"


def test_a_column_a_run_lacks_or_a_log_of_zero_is_a_one_line_error(tmp_path, capsys):
    script = load_script("overlay_curves")
    with_column(run_folder(tmp_path, "sac_s0", [1.0] * 6), "temperature", [0.1, 0.1, 0.1, 0.0, 0.1, 0.1])
    run_folder(tmp_path, "sac_s1", [1.0] * 6)
    with_column(run_folder(tmp_path, "sac_s2", [1.0] * 6), "temperature", [0.1, 0.1, "abc", 0.1, 0.1, 0.1])
    with_column(run_folder(tmp_path, "sac_s3", [1.0] * 6), "temperature", [0.1, 0.1, "nan", 0.1, 0.1, 0.1])
    out = tmp_path / "fig.png"
    for args, message in (
        ([f"x={tmp_path}/sac_s1"], "sac_s1: its evaluations.csv has no column 'temperature'"),
        ([f"x={tmp_path}/sac_s2"], "sac_s2/evaluations.csv: row 3 has temperature 'abc', not a number"),
        ([f"x={tmp_path}/sac_s3"], "sac_s3: its temperature is not a finite number at every evaluation after"),
        ([f"x={tmp_path}/sac_s0", "--log"], "temperature reaches 0.0, which a log scale"),
    ):
        assert script.main([*args, "--out", str(out), "--column", "temperature"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert message in err[-1] and err[-1].startswith("overlay_curves: error:"), err
        assert not out.exists()


def test_evaluations_before_a_diagnostic_has_a_value_are_left_out(tmp_path, monkeypatch):
    """A replay diagnostic is empty (NaN) until the first update: those evaluations are not drawn."""
    script = load_script("overlay_curves")
    drawn = {}
    monkeypatch.setattr(script, "save_figure", lambda fig, path: drawn.update(
        x=[ln.get_xdata().copy() for ln in fig.axes[0].get_lines()]))  # fmt: skip
    for s, first in enumerate((2, 3)):
        with_column(run_folder(tmp_path, f"td3_s{s}", [1.0] * 6), "ess_mean", ["nan"] * first + [0.9] * (6 - first))
    assert script.main([f"x={tmp_path}/td3_s*", "--out", str(tmp_path / "f.png"), "--column", "ess_mean"]) == 0
    assert list(drawn["x"][0]) == [400, 500, 600]  # from the first evaluation at which both runs have a value


def test_an_out_that_cannot_be_written_is_refused_first_and_no_temporary_file_stays(tmp_path, capsys, monkeypatch):
    """``--out FOLDER`` failed after the figure, leaving its half-written temporary PNG beside the folder: it is one
    line before any run is read; a figure that fails while written leaves neither a temporary file nor a folder."""
    from matplotlib.figure import Figure

    script = load_script("overlay_curves")
    run_folder(tmp_path / "runs", "lap_s0", [1.0] * 6)
    (tmp_path / "fig").mkdir()
    monkeypatch.setattr(script, "read_run", lambda folder: pytest.fail("a run was read"))
    assert script.main([f"a={tmp_path}/runs/lap_s*", "--out", str(tmp_path / "fig")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"overlay_curves: error: --out {tmp_path / 'fig'} is a folder, not a file"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig", "runs"] and not any((tmp_path / "fig").iterdir())
    monkeypatch.undo()

    def failing_savefig(self, fh, **kwargs):
        fh.write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", failing_savefig)
    with pytest.raises(OSError, match="disk full"):
        script.main([f"a={tmp_path}/runs/lap_s*", "--out", str(tmp_path / "new" / "fig.png")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig", "runs"]
