"""``prioritylab report``: tables and figures from run folders alone."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from scipy import stats

from prioritylab.cli import main as cli_main
from prioritylab.harness import report as R


def fake_run(root, sampler, seed, returns, finished=True, extra=None):
    folder = root / f"td3_Hopper-v5_{sampler}_s{seed}"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(
        {"config": {"agent": "td3", "env": "Hopper-v5", "sampler": sampler, "seed": seed, "steps": 1000}}))
    with open(folder / "evaluations.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["step", "return_mean", "ess_mean", "td_mean", "td_std", "q_mean", "q_std"])
        w.writeheader()
        for i, r in enumerate(returns):
            w.writerow({"step": 100 * (i + 1), "return_mean": r, "ess_mean": 1.0, "td_mean": 0.5 + seed,
                        "td_std": 0.1, "q_mean": 10.0, "q_std": 2.0, **(extra or {})})
    if finished:
        (folder / "finished.json").write_text("{}")


def test_table_is_the_mean_and_t_interval_of_the_last_ten_evaluations(tmp_path):
    rng = np.random.default_rng(0)
    curves = {s: rng.normal(size=14).cumsum() for s in range(3)}
    for s, c in curves.items():
        fake_run(tmp_path / "runs", "per", s, c, finished=s != 2)
    fake_run(tmp_path / "runs", "uniform", 0, np.arange(12.0))
    result = R.report(tmp_path / "runs", tmp_path / "out")
    row = next(t for t in result["table"] if t["sampler"] == "per")
    finals = np.array([c[-10:].mean() for c in curves.values()])
    assert row["return_last10_mean"] == pytest.approx(finals.mean(), rel=1e-12, abs=0)
    half = stats.t.ppf(0.975, 2) * finals.std(ddof=1) / math.sqrt(3)
    assert row["ci95"] == pytest.approx(half, rel=1e-12, abs=0)
    assert row["finished"] == 2 and row["seeds"] == 3
    text = (tmp_path / "out" / "table.md").read_text()
    assert "(1 unfinished)" in text and "n/a (1 seed)" in text
    t3 = (tmp_path / "out" / "ners_table3.md").read_text()
    assert "| td3 | Hopper-v5 | per | 3 | 1.500 | 0.100 | 10.00 | 2.00 |" in t3
    assert (tmp_path / "out" / "curves_td3_Hopper-v5.png").stat().st_size > 0
    assert (tmp_path / "out" / "diagnostics_td3_Hopper-v5.png").stat().st_size > 0


def test_smoothing_is_a_trailing_uniform_window():
    y = np.arange(8.0)
    np.testing.assert_allclose(R.smooth(y, 5), [0, 0.5, 1, 1.5, 2, 3, 4, 5], rtol=0, atol=1e-12)


def test_command_line_errors_are_one_line(tmp_path, capsys):
    for argv, message in ((["report", str(tmp_path), "--out", str(tmp_path / "o")], "no run folders"),
                          (["report", str(tmp_path / "missing")], "is not a folder")):  # fmt: skip
        with pytest.raises(SystemExit) as err:
            cli_main(argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert err.value.code == 2 and len(lines) == 1 and message in lines[0]
