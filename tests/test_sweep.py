"""``prioritylab sweep``: expansion, dry run, skipping finished runs, recording crashes (real train processes)."""

from __future__ import annotations

import json

import pytest

from prioritylab.cli import main as cli_main
from prioritylab.harness import sweep

SPEC = '''
def runs(budget):
    steps = 40 if budget == "reduced" else 10**6
    common = {"steps": steps, "start_steps": 20, "eval_every": 40, "eval_episodes": 1, "hidden": 8,
              "batch_size": 4, "threads": 1}
    return [{"agent": "td3", "env": "Pendulum-v1", "sampler": "per", **common},
            {"agent": "td3", "env": "NoSuchEnv-v0", "sampler": "uniform", **common}]
'''


def test_dry_run_lists_every_run_and_seed(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    assert cli_main(["sweep", str(spec), "--seeds", "3", "--out", str(tmp_path / "runs"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "6 runs" in out and out.count("new ") == 6 and "--seed 2" in out and "--steps 40" in out
    paper = sweep.expand(sweep.load_spec(spec, "paper"), 1, 0, tmp_path)
    assert "1000000" in paper[0]["args"]


def test_runs_skip_finished_and_record_crashes(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    out = tmp_path / "runs"
    assert cli_main(["sweep", str(spec), "--out", str(out), "--jobs", "2"]) == 1  # one run crashes
    record = json.loads((out / "sweep.json").read_text())["runs"]
    assert record["td3_Pendulum-v1_per_s0"]["status"] == "finished"
    crash = record["td3_NoSuchEnv-v0_uniform_s0"]
    assert crash["status"] == "crashed" and crash["exit_code"] == 2 and "unknown environment" in crash["error"]
    assert (out / "td3_Pendulum-v1_per_s0" / "finished.json").exists()
    capsys.readouterr()
    assert cli_main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0
    assert "finished -m prioritylab train td3 --env Pendulum-v1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [("x = 1", "defines no function runs"), ("def runs(b):\n    return [{'agent': 'td3'}]", "must be a dict"),
     ("def runs(b):\n    return [{'agent': 'td3', 'env': 'E', 'sampler': 'per', 'seed': 1}]", "sets seed")],
)
def test_bad_specifications_are_one_line_errors(tmp_path, text, message, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(text)
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--dry-run"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0]
