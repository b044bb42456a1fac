"""``scripts/rerun_check.py``: re-run the start of a recorded run with the code here and compare, row by row."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
from theory_scripts import load_script

TRAIN = ["train", "td3", "--env", "Pendulum-v1", "--steps", "120", "--start-steps", "40", "--eval-every", "40",
         "--eval-episodes", "1", "--hidden", "16", "--batch-size", "8"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short TD3 run made by ``prioritylab train`` here; each test copies it (:func:`run_copy`)."""
    out = tmp_path_factory.mktemp("trained")
    subprocess.run([sys.executable, "-m", "prioritylab", *TRAIN, "--out", str(out), "--no-progress"], check=True)
    return out / "td3_Pendulum-v1_uniform_s0"


def run_copy(trained, tmp_path):
    folder = tmp_path / trained.name
    shutil.copytree(trained, folder)
    return folder


def test_a_recorded_command_is_re_run_into_another_folder_and_stops_at_the_step_compared(tmp_path):
    script = load_script("rerun_check")
    manifest = {"command": "/x/prioritylab/__main__.py train td3 --env Hopper-v5 --seed 3 --out /runs --no-progress "
                           "--resume --stop-after=50 --checkpoint-every 25000"}  # fmt: skip
    assert script.rerun_args(manifest, tmp_path, 900) == [
        "train", "td3", "--env", "Hopper-v5", "--seed", "3", "--checkpoint-every", "25000",
        "--out", str(tmp_path), "--stop-after", "900", "--no-progress"]  # fmt: skip
    with pytest.raises(ValueError, match="not a train command"):
        script.rerun_args({"command": "prioritylab report runs"}, tmp_path, 1)
    course = {"episodes": "1", "return_std": "0.0", "updates": "10"}
    rows = [{"step": "40", "return_mean": "-1.5", **course}, {"step": "80", "return_mean": "-2.5", **course}]
    assert script.compare(rows, [dict(r) for r in rows]) is None
    assert script.compare(rows, [rows[0], {**rows[1], "return_mean": "-2.50001"}]) == (
        "step 80: return_mean -2.5 -> -2.50001; its course (episodes, return_mean, return_std, updates) from step 80")
    stats = [{**r, "td_std": "0.5"} for r in rows]
    assert script.compare(stats, [*stats[:1], {**stats[1], "td_std": "0.50000001"}]) == (
        "step 80: td_std 0.5 -> 0.50000001; its course (episodes, return_mean, return_std, updates) is identical "
        "in all 2 rows")
    assert "the re-run has 1 rows through step 80" in script.compare(rows, rows[:1])
    renamed = [{("return" if k == "return_mean" else k): v for k, v in r.items()} for r in stats]
    with pytest.raises(SystemExit, match="the re-run's evaluations.csv has no column return_mean"):
        script.compare(stats, renamed)  # read with .get, both sides would say None: the same course


def test_a_run_re_run_here_is_identical_and_a_changed_value_or_setting_is_found(trained, tmp_path, capsys):
    """A run made by this code (by ``prioritylab train``, whose command its manifest records) re-runs to the
    same text through its second evaluation (after its first updates); an evaluation value changed in the
    committed file, or a setting recorded otherwise, is named and the check exits with 1."""
    script = load_script("rerun_check")
    folder = run_copy(trained, tmp_path)
    capsys.readouterr()
    assert script.main([str(folder), "--evals", "2"]) == 0
    assert "identical through step 80 (2 evaluations" in capsys.readouterr().out
    evals = folder / "evaluations.csv"
    with open(evals, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert float(rows[1]["updates"]) > 0  # the rows compared cover learning, not only random steps
    rows[1]["loss" if "loss" in rows[1] else "return_mean"] = "123.0"
    changed = next(k for k in ("loss", "return_mean") if rows[1].get(k) == "123.0")
    with open(evals, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["command"] = manifest["command"].replace("--steps 120", "--steps 160")  # the same first 80 steps
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert script.main([str(folder), "--evals", "2"]) == 1
    out = capsys.readouterr().out
    assert "differs at settings: replay_capacity 240 -> 320, steps 120 -> 160; and step 80: " in out
    assert f"and step 80: {changed} 123.0 -> " in out
    assert out.strip().endswith("(the same machine and packages as far as recorded)")


def test_a_run_recorded_before_the_capacity_rule_is_re_run_with_the_replay_it_had(trained, tmp_path, capsys):
    """A manifest recording one slot a step (120 for 120 steps, the rule before ``run.replay_capacity`` gave room
    for twice the steps) is re-run with ``--buffer-size 120``, so its settings and rows match; a run whose
    command still gives its capacity is re-run with the command alone."""
    script = load_script("rerun_check")
    folder = run_copy(trained, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["replay_capacity"] == 240 and script.capacity_then(manifest) is None
    assert "--buffer-size" not in script.rerun_args(manifest, tmp_path, 80, script.capacity_then(manifest))
    (folder / "manifest.json").write_text(json.dumps({**manifest, "replay_capacity": 120}))
    capsys.readouterr()
    assert script.main([str(folder), "--evals", "2"]) == 0
    out = capsys.readouterr().out
    assert "re-run with --buffer-size 120, the replay capacity it had): identical through step 80" in out
    del manifest["replay_capacity"]  # a manifest from before the capacity was recorded: steps slots
    assert script.capacity_then(manifest) == 120
    assert script.rerun_args(manifest, tmp_path, 80, 120)[-7:-5] == ["--buffer-size", "120"]


def test_a_run_recorded_before_a_setting_existed_is_re_run_with_the_value_it_ran_with(trained, tmp_path, capsys):
    """A TD3 run whose manifest predates ``replay.normalise`` (and ``replay.duplicates``) ran with the global
    normaliser: its re-run is given
    it, the settings then match, and its rows too (the uniform sampler reads no normaliser, so nothing else
    changes); flags go only to the samplers and agents that read them."""
    script = load_script("rerun_check")
    folder = run_copy(trained, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert script.earlier_flags(manifest) == []  # recorded with every setting: its command alone says it all
    config = {**manifest["config"], "replay": {k: v for k, v in manifest["config"]["replay"].items()
                                               if k not in ("normalise", "duplicates")}}  # fmt: skip
    old = {**manifest, "config": config}
    assert script.earlier_flags(old) == []  # uniform does not read the normaliser
    per = {**old, "config": {**config, "sampler": "per"}}
    assert script.earlier_flags(per) == ["--replay.normalise", "global"]
    pser = {**per, "config": {**per["config"], "agent": "dqn", "sampler": "pser"}}
    assert script.earlier_flags(pser) == ["--replay.normalise", "global", "--clip-reward", "--replay.duplicates",
                                          "each"]  # fmt: skip
    sac = {**per, "config": {**per["config"], "agent": "sac"}}
    assert script.earlier_flags(sac) == ["--replay.normalise", "global", "--log-prob-of", "scaled"]
    assert script.rerun_args(per, tmp_path, 80)[-7:-5] == ["--replay.normalise", "global"]


def test_an_unusable_run_folder_is_a_one_line_error_before_any_run(tmp_path, capsys):
    script = load_script("rerun_check")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as err:
        script.main([str(tmp_path / "empty")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and "no readable manifest.json" in lines[-1]
    (tmp_path / "empty" / "manifest.json").write_text(json.dumps({"command": "prioritylab train td3"}))
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "empty")])
    assert "records no settings (config)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "empty"), "--evals", "0"])
    assert "--evals must be at least 1, got 0" in capsys.readouterr().err
    # a cut evaluations file would be re-run and read as a run that differs: refused, naming the row
    manifest = {"command": "prioritylab train td3 --env Pendulum-v1", "config": {"agent": "td3"}}
    (tmp_path / "empty" / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "empty" / "evaluations.csv").write_text("step,return_mean\n100,1.0\n200,2")
    with pytest.raises(SystemExit):
        script.main([str(tmp_path / "empty")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert "its evaluations.csv is not whole: row 2 is truncated" in lines[-1], lines


def test_a_difference_names_the_machine_and_packages_that_differ_from_the_recorded_ones():
    script = load_script("rerun_check")
    recorded = {"machine": {"platform": "Linux-a", "cpu": "EPYC (family 25, model 17)", "simd": "avx avx2 avx512f"},
                "packages": {"torch": "2.13.0+cpu", "prioritylab": "0.1.0"}}  # fmt: skip
    now = {"machine": {"platform": "Linux-a", "cpu": "EPYC (family 25, model 1)", "simd": "avx avx2",
                       "torch_cpu": "AVX2"},
           "packages": {"torch": "2.13.0+cpu", "mujoco": "4.0.0", "prioritylab": "0.2.0"}}  # fmt: skip
    assert script.elsewhere(recorded, now) == (
        " (elsewhere: machine.cpu EPYC (family 25, model 17) -> EPYC (family 25, model 1); "
        "machine.simd avx avx2 avx512f -> avx avx2; not recorded by the run: machine.torch_cpu, packages.mujoco)")
    assert script.elsewhere(now, now) == " (the same machine and packages as far as recorded)"
    assert script.elsewhere({}, now).startswith(" (the same machine and packages as far as recorded; not recorded")


def test_the_re_run_ends_when_the_check_is_killed(tmp_path):
    """The re-run is told its parent's pid, as a sweep's runs are: killing the check ends the re-run too."""
    import os
    import signal
    from pathlib import Path

    from ordering import wait_for

    run = tmp_path / "td3_Pendulum-v1_uniform_s0"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"config": {}, "command": "python -m prioritylab " + " ".join(
        ["train", "td3", "--env", "Pendulum-v1", "--steps", "400000", "--start-steps", "100", "--eval-every",
         "200000", "--eval-episodes", "1", "--hidden", "16", "--batch-size", "8"])}))  # fmt: skip
    (run / "evaluations.csv").write_text("step,return_mean\n200000,-1.0\n")
    check = subprocess.Popen([sys.executable, "scripts/rerun_check.py", str(run), "--evals", "1"],
                             cwd=Path(__file__).resolve().parents[1], env={**os.environ, "TMPDIR": str(tmp_path)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    locks = lambda: [p for p in tmp_path.glob("rerun_check_*/*/.lock") if p.read_text().strip()]  # noqa: E731
    wait_for(lambda: locks(), what="the re-run to take its run folder's lock", while_=lambda: check.poll() is None)
    child = int(locks()[0].read_text().split()[0])

    def gone() -> bool:
        try:
            return "\nState:\tZ" in Path(f"/proc/{child}/status").read_text()
        except OSError:
            return True

    assert not gone()
    check.send_signal(signal.SIGKILL)
    check.wait()
    wait_for(gone, timeout=30, what="the re-run to end with its check")
