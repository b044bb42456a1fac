"""``prioritylab sweep``: expansion, dry run, skipping finished runs, recording crashes (real train processes)."""

from __future__ import annotations

import fcntl
import json
import pathlib
import re
import shutil
import sys
import threading
import time

import pytest
from ordering import flocks, wait_for

from prioritylab._cli import runs_counted
from prioritylab.cli import main as cli_main
from prioritylab.harness import sweep
from prioritylab.results import write_json

SPEC = '''
def runs(budget):
    steps = 40 if budget == "reduced" else 10**6
    common = {"steps": steps, "start_steps": 20, "eval_every": 40, "eval_episodes": 1, "hidden": 8,
              "batch_size": 4, "threads": 1}
    return [{"agent": "td3", "env": "Pendulum-v1", "sampler": "per", **common},
            {"agent": "td3", "env": "NoSuchEnv-v0", "sampler": "uniform", **common}]
'''
VALID = SPEC.replace("NoSuchEnv-v0", "MountainCarContinuous-v0")  # both runs as train would accept them


def test_a_count_of_one_run_is_singular(tmp_path, capsys):
    """The dry run's count, and a refusal that counts the specification's runs, say "1 run", not "1 runs"."""
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    out = str(tmp_path / "runs")
    assert cli_main(["sweep", str(spec), "--out", out, "--dry-run", "--only", "sampler=per"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 run"
    with pytest.raises(ValueError, match="^--seeds 10001 for the 1 run of the specification gives 10001 runs, "):
        sweep.check_count(1, 10_001)
    assert [runs_counted(n) for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]


def test_dry_run_lists_every_run_and_seed(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    assert cli_main(["sweep", str(spec), "--seeds", "3", "--out", str(tmp_path / "runs"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "6 runs" in out and out.count("  # new\n") == 6 and "--seed 2" in out and "--steps 40" in out
    paper = sweep.expand(sweep.load_spec(spec, "paper"), 1, 0, tmp_path)
    assert "1000000" in paper[0]["args"]


def test_runs_skip_finished_and_record_crashes(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    out = tmp_path / "runs"
    monkeypatch.setattr(sweep, "check_runs", lambda jobs, n_jobs=1: None)  # let the unknown environment reach its run
    from prioritylab.deep import loop

    monkeypatch.setattr(loop, "check_env_id", lambda env_id: None)  # (here: the run's own process refuses it)
    assert cli_main(["sweep", str(spec), "--out", str(out), "--jobs", "2"]) == 1  # one run crashes
    record = json.loads((out / "sweep.json").read_text())["runs"]
    assert record["td3_Pendulum-v1_per_s0"]["status"] == "finished"
    crash = record["td3_NoSuchEnv-v0_uniform_s0"]
    assert crash["status"] == "crashed" and crash["exit_code"] == 2 and "unknown environment" in crash["error"]
    assert (out / "td3_Pendulum-v1_per_s0" / "finished.json").exists()
    capsys.readouterr()
    assert cli_main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0
    assert f"{sys.executable} -m prioritylab train td3 --env Pendulum-v1" in capsys.readouterr().out


@pytest.mark.parametrize(("env", "agent", "message"), [
    ("NoSuchEnv-v0", "td3", "unknown environment 'NoSuchEnv-v0'"),
    ("MinAtar/Brekout-v1", "dqn", "unknown MinAtar game 'MinAtar/Brekout-v1'"),
    ("CartPole-v1", "td3", "CartPole-v1 has Discrete(2) actions; this agent needs a continuous (Box) action space"),
])  # fmt: skip
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_run_train_would_refuse_for_its_environment_stops_the_sweep_before_any_run(tmp_path, capsys, env, agent,
                                                                                      message, dry_run):  # fmt: skip
    """An environment that train would refuse (checked as train checks it, one environment made per agent and id)
    refuses the sweep in one line before any run starts or is listed, a dry run's too."""
    spec = tmp_path / "spec.py"
    spec.write_text(f"def runs(budget):\n    return [{{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': 'per', "
                    f"'steps': 40, 'start_steps': 20}}, {{'agent': {agent!r}, 'env': {env!r}, 'sampler': 'per', "
                    f"'steps': 40, 'start_steps': 20}}]\n")  # fmt: skip
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(out), *(["--dry-run"] if dry_run else [])])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured
    assert f"run {agent}_{env.replace('/', '-')}_per_s0: {message}" in captured.err
    assert not out.exists()


@pytest.mark.parametrize("dry_run", [True, False])
def test_runs_at_once_that_do_not_fit_together_stop_the_sweep_before_any_run(tmp_path, capsys, monkeypatch,
                                                                             dry_run):  # fmt: skip
    """Each run fits alone but ``--jobs 2`` would hold the two largest at once: refused in one line before any
    run starts, naming --jobs; one at a time the sweep goes on.  A run is counted as ``train`` counts it: its
    replay and what its networks, a batch and an evaluation's returns need, so two replays that fit together
    are refused when their runs' networks and batches do not fit beside them."""
    from prioritylab import _checks

    spec = tmp_path / "spec.py"  # Pendulum: 12 + 4 + 31 + 90 + 8 = 145 bytes a slot; 2 x steps slots a replay
    spec.write_text("def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': x, "
                    "'steps': s, 'start_steps': 20, 'hidden': 8} for x, s in (('uniform', 1_000), ('per', 2_000), "
                    "('lap', 500))]\n")  # fmt: skip
    replays = [145 * 2 * steps for steps in (1_000, 2_000, 500)]
    rest = 5_680 + 256 * 48 + 10 * 8  # a run's networks with Adam's moments, a batch of 256 and 10 returns
    monkeypatch.setattr(_checks, "available_bytes", lambda: replays[0] + replays[1] + 20_000)  # replays alone fit
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(out), "--jobs", "2", *(["--dry-run"] if dry_run else [])])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().splitlines() == [
        "prioritylab sweep: error: --jobs 2: the 2 largest runs still to run need at least 906.1 kB together (the "
        "largest, run td3_Pendulum-v1_per_s0, 598.0 kB) but only 890.0 kB of memory is available; lower --jobs or "
        "the runs' --buffer-size (or --hidden, --batch-size)"]  # fmt: skip
    assert not out.exists()
    monkeypatch.setattr(_checks, "available_bytes", lambda: replays[0] + replays[1] + 2 * rest)  # just enough
    assert cli_main(["sweep", str(spec), "--out", str(out), "--jobs", "2", "--dry-run"]) == 0
    monkeypatch.setattr(_checks, "available_bytes", lambda: replays[1] + rest)  # one at a time
    assert cli_main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0


def test_a_local_ray_instance_is_checked_for_the_runs_it_runs_at_once(tmp_path, capsys, monkeypatch):
    """Ray runs one run a CPU: the sweep's local instance, started with as many CPUs as the check counted, is
    checked as --jobs would be (in a dry run too, which starts no Ray); a cluster's nodes are not the driver."""
    from prioritylab import _checks

    spec = tmp_path / "spec.py"
    spec.write_text("def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': x, "
                    "'steps': s, 'start_steps': 20, 'hidden': 8} for x, s in (('uniform', 1_000), "
                    "('per', 2_000))]\n")  # fmt: skip
    monkeypatch.setattr(_checks, "available_bytes", lambda: 145 * 2 * 2_000 + 30_000)  # the larger alone fits
    monkeypatch.setattr(sweep, "ray_slots", lambda address: 2 if address is None else 1)
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--backend", "ray", "--dry-run"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--backend ray runs 2 at once here (one a CPU)" in err and "ray start" in err
    assert cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--backend", "ray", "--address",
                     "10.0.0.1:6379", "--dry-run"]) == 0  # fmt: skip
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()  # a dry run starts no Ray


def test_a_dry_run_refuses_an_out_that_is_a_file(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    (tmp_path / "afile").write_text("")
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(tmp_path / "afile"), "--dry-run"])
    assert exit_.value.code == 2 and "is an existing file, not a folder" in capsys.readouterr().err


def test_a_setting_some_runs_do_not_read_is_noted_once_before_the_sweep(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text("def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': s, "
                    "'replay.kappa': 2.0} for s in ('uniform', 'per', 'lap', 'pal')]\n")  # fmt: skip
    assert cli_main(["sweep", str(spec), "--seeds", "2", "--out", str(tmp_path / "runs"), "--dry-run"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["prioritylab sweep: note: replay.kappa 2.0 has no effect on the runs with sampler uniform, per "
                   "(read by lap, pal)"]  # fmt: skip


def test_each_runs_entry_in_the_record_names_the_settings_its_sampler_does_not_read(tmp_path, monkeypatch):
    """The note printed once before the sweep is kept in ``sweep.json`` too, in the entry of each run it names,
    whatever the run's outcome (finished, skipped as finished, crashed); a run whose sampler reads every setting it
    is given has no such entry."""
    monkeypatch.setattr(sweep, "status", lambda job: "finished" if job["name"] == "lap" else "new")
    monkeypatch.setattr(sweep, "command", lambda job: [sys.executable, "-c", f"raise SystemExit({job['rc']})"])
    jobs = [{"name": s, "folder": tmp_path / s, "rc": rc,
             "args": ["train", "td3", "--env", "Pendulum-v1", "--sampler", s, "--replay.kappa", "2"]}
            for s, rc in (("uniform", 0), ("per", 1), ("lap", 0))]  # fmt: skip
    sweep.run_sweep(jobs, 1, "local", None, tmp_path / "sweep.json")
    record = json.loads((tmp_path / "sweep.json").read_text())["runs"]
    assert record["uniform"] == {"status": "finished", "exit_code": 0,
                                 "unread_settings": ["replay.kappa 2.0 (read by lap, pal)"]}  # fmt: skip
    assert record["per"]["status"] == "crashed" and record["per"]["unread_settings"] == [
        "replay.kappa 2.0 (read by lap, pal)"]
    assert record["lap"] == {"status": "finished (skipped)"}


def test_a_run_stopped_at_its_stop_after_is_not_counted_finished(tmp_path, capsys):
    """A run that exits 0 at the step the specification asked it to stop at has a checkpoint, not a result."""
    spec = tmp_path / "spec.py"
    common = ('{"steps": 400, "start_steps": 20, "eval_every": 200, "eval_episodes": 1, "hidden": 8, "batch_size": 4, '
              '"threads": 1}')  # fmt: skip
    spec.write_text(f"def runs(budget):\n    return [{{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': 'per', "
                    f"**{common}, 'stop_after': 200}}]\n")  # fmt: skip
    out = tmp_path / "runs"
    assert cli_main(["sweep", str(spec), "--out", str(out)]) == 1
    assert "0 of 1 run finished; 0 crashed; 1 stopped before its end (re-run the same command to resume it)" in (
        capsys.readouterr().out)  # fmt: skip
    record = json.loads((out / "sweep.json").read_text())["runs"]["td3_Pendulum-v1_per_s0"]
    assert record == {"status": "stopped at its --stop-after (checkpoint written)", "exit_code": 0}
    spec.write_text(spec.read_text().replace(", 'stop_after': 200", ""))
    assert cli_main(["sweep", str(spec), "--out", str(out)]) == 0  # the same run, resumed to its end
    assert json.loads((out / "td3_Pendulum-v1_per_s0" / "finished.json").read_text())["step"] == 400


def test_a_finished_run_recorded_with_other_settings_stops_the_sweep_before_any_run(tmp_path, capsys):
    """A finished run folder is counted as the sweep's only if it ran with the specification's settings."""
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    out = tmp_path / "runs"
    assert cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1"]) == 0
    spec.write_text(VALID.replace('"batch_size": 4', '"batch_size": 6'))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(out), "--seeds", "2"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "td3_Pendulum-v1_per_s0 (batch_size 4 -> 6)" in err
    assert not (out / "td3_Pendulum-v1_per_s1").exists()  # nothing started
    with pytest.raises(SystemExit):  # a dry run lists every run, then refuses
        cli_main(["sweep", str(spec), "--out", str(out), "--dry-run"])
    captured = capsys.readouterr()
    assert "# finished" in captured.out and "2 runs" in captured.out and "batch_size 4 -> 6" in captured.err
    spec.write_text(SPEC.replace('"threads": 1', '"threads": 1, "checkpoint_every": 7'))  # bookkeeping only
    assert cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1", "--dry-run"]) == 0
    manifest = out / "td3_Pendulum-v1_per_s0" / "manifest.json"
    for text in ("{not json", '{"config": null}', ""):
        manifest.write_text(text)
        capsys.readouterr()
        with pytest.raises(SystemExit):
            cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1"])
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "td3_Pendulum-v1_per_s0 (no readable manifest.json" in err, err
    manifest.unlink()
    with pytest.raises(SystemExit):
        cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1"])
    assert "no readable manifest.json" in capsys.readouterr().err


def test_a_run_killed_before_its_first_checkpoint_starts_again(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC.replace("common}]\n", "common}][:1]\n"))
    out = tmp_path / "runs"
    assert cli_main(["sweep", str(spec), "--out", str(out)]) == 0
    folder = out / "td3_Pendulum-v1_per_s0"
    whole = (folder / "evaluations.csv").read_bytes()
    # as a kill before the first checkpoint leaves it: a manifest and a partial CSV, nothing to resume
    (folder / "checkpoint.pt").unlink()
    (folder / "finished.json").unlink()
    (folder / "evaluations.csv").write_bytes(whole.splitlines(keepends=True)[0])
    capsys.readouterr()
    assert cli_main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith(f"{sys.executable} -m prioritylab train td3")
    assert listed.splitlines()[0].endswith("--restart  # restart")
    assert cli_main(["sweep", str(spec), "--out", str(out)]) == 0
    assert json.loads((out / "sweep.json").read_text())["runs"]["td3_Pendulum-v1_per_s0"]["status"] == "finished"
    assert (folder / "evaluations.csv").read_bytes() == whole  # the same seed, the same run


def test_a_run_another_sweep_finished_meanwhile_is_skipped(tmp_path, monkeypatch):
    jobs = [{"name": n, "folder": tmp_path / n, "args": ["train", "td3"]} for n in ("a", "b")]
    started = []

    def fake_run(cmd, cwd=None, stop_file=None):
        started.append(cmd)
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "finished.json").write_text("{}")  # as if a second sweep finished "b" meanwhile
        return 0, ""

    checked = []
    monkeypatch.setattr(sweep, "run_local", fake_run)
    monkeypatch.setattr(sweep, "check_recorded", checked.append)  # "b" ran with this sweep's settings
    results, _ = sweep.run_sweep(jobs, 1, "local", None, tmp_path / "sweep.json")
    assert len(started) == 1 and checked == [[jobs[1]]]
    assert results == {"a": {"status": "finished", "exit_code": 0}, "b": {"status": "finished (skipped)"}}


def test_a_finished_runs_warnings_are_shown_and_recorded(tmp_path, monkeypatch, capsys):
    """A run's error output is kept for a crash only, but the warnings of a run that finished (a resume on
    another machine or at another commit) are printed and kept in ``sweep.json``."""
    warning = "warning: a resumes at commit 1111111; it last ran at 0000000 (`git log 0000000..1111111` ...)"
    outputs = {"a": f"UserWarning: something of gymnasium's\nprioritylab train a: {warning}\n", "b": ""}
    monkeypatch.setattr(sweep, "run_local", lambda cmd, cwd=None, stop_file=None: (0, outputs[cmd[-1]]))
    monkeypatch.setattr(sweep, "status", lambda job: "new")
    monkeypatch.setattr(sweep, "command", lambda job: job["args"])
    jobs = [{"name": n, "folder": tmp_path / n, "args": ["train", n]} for n in ("a", "b")]
    results, _ = sweep.run_sweep(jobs, 1, "local", None, tmp_path / "sweep.json")
    assert results == {"a": {"status": "finished", "exit_code": 0, "warnings": [warning]},
                       "b": {"status": "finished", "exit_code": 0}}  # fmt: skip
    assert f"run a: {warning}" in capsys.readouterr().out  # where a crash is reported too
    assert json.loads((tmp_path / "sweep.json").read_text())["runs"]["a"]["warnings"] == [warning]


def test_a_runs_own_warnings_are_kept_and_the_unread_settings_named_once_for_the_sweep_are_not(tmp_path, capsys):
    """From a real run's error output, which names a setting its sampler does not read and a batch larger than
    the replay at the first update, the sweep keeps the second only: the first it names once for all its runs."""
    args = ["train", "td3", "--env", "Pendulum-v1", "--out", str(tmp_path), "--no-progress", "--eval-episodes", "1",
            "--steps", "102", "--eval-every", "102", "--start-steps", "100", "--batch-size", "256",
            "--replay.kappa", "5"]  # fmt: skip
    assert cli_main(args) == 0
    err = capsys.readouterr().err
    assert err.startswith("prioritylab train td3: warning: --replay.kappa 5.0 has no effect"), err
    job = {"name": "a", "folder": tmp_path / "td3_Pendulum-v1_uniform_s0", "args": args}
    assert sweep.run_warnings(job, err, sweep.unread_lines(job)) == [
        "warning: --batch-size 256 is larger than the at most 100 transitions stored when updates start "
        "(--start-steps 100): the first batches draw transitions more than once"]  # fmt: skip
    assert sweep.unread_notes([job]) == ["replay.kappa 5.0 has no effect on the runs with sampler uniform (read by "
                                         "lap, pal)"]  # fmt: skip


def test_a_warning_is_kept_however_much_a_run_writes_after_it(tmp_path, monkeypatch):
    """The warnings are read from a run's whole error output (a resume's come first), through the real
    ``run_local``; a crash keeps the end of its output."""
    writes = {"a": "import sys; sys.stderr.write('prioritylab train a: warning: first\\n' + 'x' * 5000 + '\\n')",
              "b": "import sys; sys.stderr.write('y' * 5000 + 'the end\\n'); sys.exit(1)"}  # fmt: skip
    monkeypatch.setattr(sweep, "status", lambda job: "new")
    monkeypatch.setattr(sweep, "command", lambda job: [sys.executable, "-c", writes[job["name"]]])
    jobs = [{"name": n, "folder": tmp_path / n, "args": ["train", n]} for n in ("a", "b")]
    results, _ = sweep.run_sweep(jobs, 1, "local", None, tmp_path / "sweep.json")
    assert results["a"]["warnings"] == ["warning: first"]
    assert results["b"]["status"] == "crashed" and results["b"]["error"].endswith("the end\n")
    assert len(results["b"]["error"]) == sweep.ERROR_TAIL


def test_the_bar_shows_each_running_runs_latest_evaluated_step(tmp_path, monkeypatch, capsys):
    """The bar counts whole runs, so between two runs' ends it shows the running runs' latest evaluated steps,
    from the last whole row of each one's evaluations.csv; a row being written is not read."""
    monkeypatch.setattr(sweep, "PROGRESS_EVERY", 0.01)
    monkeypatch.setattr(sweep, "status", lambda job: "new")
    monkeypatch.setattr(sweep, "command", lambda job: job["args"])
    seen = threading.Event()

    def run(cmd, cwd=None, stop_file=None):
        folder = tmp_path / cmd[1]
        folder.mkdir()
        (folder / "evaluations.csv").write_text("step,return_mean\n5000,1.0\n10000,2.0\n150")
        assert seen.wait(30)
        return 0, ""

    monkeypatch.setattr(sweep, "run_local", run)
    shown = []
    real = sweep.show_progress

    def show(bar, running, since):
        real(bar, running, since)
        shown.append(bar.postfix)
        if any("10,000" in (text or "") for text in shown):
            seen.set()

    monkeypatch.setattr(sweep, "show_progress", show)
    jobs = [{"name": "a", "folder": tmp_path / "a", "args": ["train", "a", "--steps", "20000"]}]
    sweep.run_sweep(jobs, 1, "local", None, tmp_path / "sweep.json")
    assert "a: step 10,000/20,000" in shown
    assert "a: step 10,000/20,000" in capsys.readouterr().err  # on the bar itself
    assert sweep.run_progress(jobs[0], since=time.time() + 3600) is None  # a file older than the sweep: not read


def test_two_sweeps_into_one_folder_keep_each_others_entries_in_sweep_json(tmp_path, monkeypatch):
    """A second sweep (another ``--only``, or one running beside the first) records its runs beside the
    first's; a run both sweeps ran keeps the entry of the later."""
    record = tmp_path / "sweep.json"
    outcomes = {"a": 1, "b": 0, "c": 0}  # "a" crashes in the first sweep
    monkeypatch.setattr(sweep, "run_local", lambda cmd, cwd=None, stop_file=None: (outcomes[cmd[-1]], "boom\n"))
    monkeypatch.setattr(sweep, "status", lambda job: "new")

    def jobs(*names):
        return [{"name": n, "folder": tmp_path / n, "args": ["train", n]} for n in names]

    monkeypatch.setattr(sweep, "command", lambda job: job["args"])
    sweep.run_sweep(jobs("a", "b"), 1, "local", None, record)
    outcomes["a"] = 0
    sweep.run_sweep(jobs("a", "c"), 1, "local", None, record)
    runs = json.loads(record.read_text())["runs"]
    assert runs == {name: {"status": "finished", "exit_code": 0} for name in ("a", "b", "c")}

    # a sweep that recorded "x" as crashed (refused: another sweep held it) never writes that entry back over
    # the "finished" the other sweep records while it runs "y"
    outcomes.update(x=2, y=0)

    def x_recorded_as_refused():
        return json.loads(record.read_text())["runs"].get("x", {}).get("status") == "crashed"

    def run_beside(cmd, cwd=None, stop_file=None):
        if cmd[-1] == "y":  # the other sweep finishes "x" after this one has recorded x's refusal
            # the pool may start "y" before the sweep has written "x"
            wait_for(x_recorded_as_refused, timeout=30, what="the sweep to record x's refusal")
            sweep.write_record(record, 9.0, {"x": {"status": "finished", "exit_code": 0}})
        return outcomes[cmd[-1]], "held by another run\n"

    monkeypatch.setattr(sweep, "run_local", run_beside)
    sweep.run_sweep(jobs("x", "y"), 1, "local", None, record)
    assert json.loads(record.read_text())["runs"]["x"] == {"status": "finished", "exit_code": 0}

    # another sweep holds the lock between its read and its write: this sweep's write waits, then keeps both
    with open(tmp_path / ".sweep.json.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        earlier = json.loads(record.read_text())
        writer = threading.Thread(target=sweep.write_record, args=(record, 2.0, {"e": {"status": "crashed"}}))
        writer.start()
        wait_for(lambda: any(waiting for _, waiting in flocks(tmp_path / ".sweep.json.lock")), timeout=30,
                 what="the write to wait for the lock", while_=writer.is_alive)
        write_json(record, {**earlier, "runs": {**earlier["runs"], "d": {"status": "finished", "exit_code": 0}}})
    writer.join()
    assert set(json.loads(record.read_text())["runs"]) == {"a", "b", "c", "d", "e", "x", "y"}


def test_a_run_refused_because_another_sweep_finished_it_as_it_started_is_skipped(tmp_path, monkeypatch):
    jobs = [{"name": "a", "folder": tmp_path / "a", "args": ["train", "td3"]}]

    def finished_by_another_then_refused(cmd, cwd=None, stop_file=None):
        (tmp_path / "a").mkdir()
        (tmp_path / "a" / "finished.json").write_text("{}")  # another sweep finished "a" as this one started it
        return 2, "a already holds a finished run; pass --overwrite to replace it"

    monkeypatch.setattr(sweep, "run_local", finished_by_another_then_refused)
    monkeypatch.setattr(sweep, "check_recorded", lambda jobs: None)  # it ran with this sweep's settings
    results, _ = sweep.run_sweep(jobs, 1, "local", None, tmp_path / "sweep.json")
    assert results == {"a": {"status": "finished (skipped)"}}


def test_a_run_another_sweep_finished_meanwhile_with_other_settings_is_not_counted(tmp_path, monkeypatch, capsys):
    """The settings of a run found finished when its turn comes are checked again, as at the sweep's start."""
    one = SPEC.replace("common}]\n", "common}][:1]\n")
    spec, other_spec = tmp_path / "spec.py", tmp_path / "other.py"
    spec.write_text(one)
    other_spec.write_text(one.replace('"batch_size": 4', '"batch_size": 6'))
    out = tmp_path / "runs"
    jobs = sweep.expand(sweep.load_spec(spec, "reduced"), 2, 0, out)
    other = sweep.expand(sweep.load_spec(other_spec, "reduced"), 2, 0, out)
    real_run = sweep.run_local

    def run_then_other_sweep_finishes_seed_1(cmd, cwd=None, stop_file=None):
        rc = real_run(cmd, cwd)
        assert real_run(sweep.command(other[1]))[0] == 0  # another sweep, batch 6, finishes seed 1 meanwhile
        return rc

    monkeypatch.setattr(sweep, "run_local", run_then_other_sweep_finishes_seed_1)
    results, _ = sweep.run_sweep(jobs, 1, "local", None, out / "sweep.json")
    assert results["td3_Pendulum-v1_per_s0"] == {"status": "finished", "exit_code": 0}
    late = results["td3_Pendulum-v1_per_s1"]
    assert late["status"] == "finished elsewhere with other settings" and late["exit_code"] == sweep.OTHER_SETTINGS
    assert "td3_Pendulum-v1_per_s1 (batch_size 6 -> 4)" in late["error"]
    assert json.loads((out / "sweep.json").read_text())["runs"] == results


def test_only_selects_runs_by_their_settings(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    out = str(tmp_path / "runs")
    assert cli_main(["sweep", str(spec), "--out", out, "--dry-run", "--only", "sampler=per", "--seeds", "2"]) == 0
    listed = capsys.readouterr().out
    assert "2 runs" in listed and "NoSuchEnv" not in listed and listed.count("--sampler per") == 2
    # one key with two values: either matches; two keys: both must match; numbers compare as text
    both = sweep.select(sweep.load_spec(spec, "reduced"), ["sampler=per", "sampler=uniform"])
    assert [r["sampler"] for r in both] == ["per", "uniform"]
    assert sweep.select(sweep.load_spec(spec, "reduced"), ["steps=40", "env=NoSuchEnv-v0"])[0]["sampler"] == "uniform"


@pytest.mark.parametrize(
    ("only", "message"),
    [("sampler", "takes KEY=VALUE, got 'sampler'"), ("=per", "takes KEY=VALUE"),
     ("game=Pong", "no run of the specification has a setting 'game'"),
     ("sampler=lap", "--only sampler=lap: no run of the specification has sampler 'lap' (it has per, uniform)")],
)
def test_a_bad_only_is_a_one_line_error_before_any_run(tmp_path, only, message, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--out", str(out), "--only", only])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0]
    assert not out.exists()  # refused before the output folder was made


@pytest.mark.parametrize(
    ("only", "message"),
    [(["sampler=per", "sampler=uniformm"], "--only sampler=uniformm: no run of the specification has sampler "
                                           "'uniformm' (it has per, uniform)"),
     (["sampler=per", "env=NoSuchEnv-v0"], "--only sampler=per env=NoSuchEnv-v0 matches none of the "
                                           "specification's 2 runs")],
)  # fmt: skip
def test_every_value_of_only_must_select_a_run(tmp_path, only, message):
    """A misspelt value beside a good one of the same key would otherwise drop its runs out of the sweep."""
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    with pytest.raises(ValueError, match=re.escape(message)):
        sweep.select(sweep.load_spec(spec, "reduced"), only)


@pytest.mark.parametrize(("body", "said"), [("return None", "returned None"), ("return []", "returned []"),
                                             ("return {'agent': 'td3'}", "returned {'agent': 'td3'}")])  # fmt: skip
def test_a_specification_that_gives_no_list_of_runs_is_named(tmp_path, body, said):
    spec = tmp_path / "spec.py"
    spec.write_text(f"def runs(budget):\n    {body}\n")
    with pytest.raises(ValueError, match=re.escape(f"runs('paper') {said}; it must return a non-empty list of runs")):
        sweep.load_spec(spec, "paper")


def test_the_atari_100k_queue_runs_both_atari_specifications_game_by_game():
    root = pathlib.Path(__file__).resolve().parents[1] / "deep"
    queue = sweep.load_spec(root / "atari_100k.py", "reduced")
    ddqn, dqn = sweep.load_spec(root / "lap_atari.py", "reduced"), sweep.load_spec(root / "pser_atari.py", "reduced")
    assert sorted(map(repr, queue)) == sorted(map(repr, ddqn + dqn))
    games = [r["env"] for r in queue]
    assert games == sorted(games, key=games.index) and games[0] == "ALE/Pong-v5"  # each game's runs together
    first_game = [(r["agent"], r["sampler"]) for r in queue[:6]]
    assert first_game == [("ddqn", "uniform"), ("ddqn", "per"), ("ddqn", "lap"), ("ddqn", "pal"), ("dqn", "per"),
                          ("dqn", "pser")]  # fmt: skip
    assert all(r["steps"] == 100_000 for r in queue)  # the Atari 100k regime: 100k agent steps, 400k frames


@pytest.mark.parametrize(("options", "message"), [
    (["--address", "10.0.0.1:6379"], "--address 10.0.0.1:6379 is a Ray cluster's: give it with --backend ray"),
    (["--backend", "ray", "--jobs", "4"], "--jobs 4 sizes the local pool; Ray runs one run per CPU"),
])  # fmt: skip
def test_an_option_the_backend_does_not_read_is_refused(tmp_path, options, message, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), *options])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [("x = 1", "defines no function runs"), ("def runs(b):\n    return [{'agent': 'td3'}]", "must be a dict"),
     ("def runs(b):\n    return [{'agent': 'td3', 'env': 'E', 'sampler': 'per', 'seed': 1}]", "sets seed"),
     ("def runs(b):\n    return [{'agent': 'td3', 'env': 'E', 'sampler': 'per', 'progress': True}]",
      "run 0 sets progress; the sweep sets seed, out and progress itself"),
     ("def runs(b):\n    r = {'agent': 'td3', 'env': 'A/E', 'sampler': 'lap'}\n"
      "    return [{**r, 'replay.kappa': 0.01}, {**r, 'env': 'B'}, {**r, 'replay.kappa': 1.0}]",
      "runs 0 and 2 would both write td3_A-E_lap_s<seed> (they differ only in replay.kappa)")],
)
def test_bad_specifications_are_one_line_errors(tmp_path, text, message, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(text)
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--dry-run"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0]


@pytest.mark.parametrize(("name", "message"), [("spec", "is a folder"), ("spec.txt", "is not a Python file")])
def test_a_specification_that_is_a_folder_or_not_python_is_a_one_line_error(tmp_path, name, message, capsys):
    spec = tmp_path / name
    if name == "spec":
        spec.mkdir()
    else:
        spec.write_text("def runs(b):\n    return []\n")
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--dry-run"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0] and str(spec) in lines[0]


def test_a_specification_with_a_dataclass_under_postponed_annotations_loads(tmp_path, capsys):
    """A dataclass looks its module up in sys.modules when annotations are strings: the file runs as a script
    does, so it must run as a specification too."""
    spec = tmp_path / "spec.py"
    spec.write_text("from __future__ import annotations\nfrom dataclasses import dataclass\n\n\n@dataclass\n"
                    "class Grid:\n    steps: int = 2000\n\n\n"
                    "def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': 'per', "
                    "'steps': Grid().steps, 'start_steps': 1000}]\n")  # fmt: skip
    assert cli_main(["sweep", str(spec), "--dry-run", "--out", str(tmp_path / "runs")]) == 0
    assert "--steps 2000" in capsys.readouterr().out


def test_the_ray_backend_runs_a_two_run_sweep_on_a_local_cluster(tmp_path, monkeypatch):
    """End to end on a Ray instance started here (2 CPUs, no dashboard): two real training runs, each a Ray
    task, their folders written where the sweep was started, and a rerun skips both."""
    import ray

    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.py"
    # Ray starts its workers at niceness 15: on a busy machine (CI runs the suite beside other jobs) they would
    # wait behind everything else; this test checks the plumbing, not the scheduling priority
    monkeypatch.setenv("RAY_worker_niceness", "0")
    # and a worker has 60 s by default to register with the raylet before Ray gives up on it: a loaded machine
    # gets five times that, so the test fails on the sweep's plumbing, not on Ray's start-up
    monkeypatch.setenv("RAY_worker_register_timeout_seconds", "300")
    spec.write_text(SPEC.replace('"env": "NoSuchEnv-v0"', '"env": "Pendulum-v1"'))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert cli_main(["sweep", str(spec), "--backend", "ray", "--out", "runs"]) == 0
        record = json.loads((tmp_path / "runs" / "sweep.json").read_text())["runs"]
        assert {k: v["status"] for k, v in record.items()} == {"td3_Pendulum-v1_per_s0": "finished",
                                                                "td3_Pendulum-v1_uniform_s0": "finished"}
        for name in record:
            assert (tmp_path / "runs" / name / "finished.json").exists()
        assert cli_main(["sweep", str(spec), "--backend", "ray", "--out", "runs"]) == 0
        record = json.loads((tmp_path / "runs" / "sweep.json").read_text())["runs"]
        assert {k: v["status"] for k, v in record.items()} == {"td3_Pendulum-v1_per_s0": "finished (skipped)",
                                                                "td3_Pendulum-v1_uniform_s0": "finished (skipped)"}
        # a task that fails in its worker (here: a job without its command) is that run's crash, not the sweep's
        broken = {"name": "broken", "folder": pathlib.Path("broken"), "args": None}
        results, _ = sweep.run_sweep([broken], 1, "ray", None, tmp_path / "other" / "sweep.json")
        said = results["broken"]
        assert said["status"] == "crashed" and "the Ray task of this run failed" in said["error"], said
        assert not list((tmp_path / "other").glob(".sweep-stop-*"))
    finally:
        ray.shutdown()


def test_the_minatar_study_is_queued_seed_by_seed(tmp_path, capsys):
    root = pathlib.Path(__file__).resolve().parents[1] / "deep"
    spec = root / "minatar_study.py"
    assert sweep.seed_major(spec) and not sweep.seed_major(root / "lap_atari.py")
    runs = sweep.load_spec(spec, "paper")
    assert len(runs) == 25 and {r["agent"] for r in runs} == {"dqn"}
    jobs = sweep.expand(runs, 5, 0, tmp_path, by_seed=True)
    seeds = [int(j["args"][j["args"].index("--seed") + 1]) for j in jobs]
    assert seeds == sorted(seeds) and seeds[:25] == [0] * 25 and len(jobs) == 125
    assert [j["name"] for j in jobs[:25]] == [j["name"].replace("_s1", "_s0") for j in jobs[25:50]]
    reduced = sweep.load_spec(spec, "reduced")  # the games DQN learned within 250k frames
    assert {r["env"] for r in reduced} == {"MinAtar/Breakout-v1", "MinAtar/SpaceInvaders-v1"} and len(reduced) == 10
    assert cli_main(["sweep", str(spec), "--seeds", "2", "--out", str(tmp_path), "--dry-run"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.endswith("# new")]
    assert len(listed) == 20
    assert all("--seed 0" in line for line in listed[:10]) and all("--seed 1" in line for line in listed[10:])
    ddqn = sweep.load_spec(root / "minatar_study_ddqn.py", "paper")
    assert [{**r, "agent": "dqn"} for r in ddqn] == sweep.load_spec(spec, "paper")
    assert all(r["steps"] == 5_000_000 for r in ddqn) and sweep.seed_major(root / "minatar_study_ddqn.py")


def test_a_bad_seed_major_is_a_one_line_error(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC + "\nSEED_MAJOR = 'yes'\n")
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--dry-run"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and "SEED_MAJOR must be True or False" in lines[0]


COMMITTED = [  # specification, study folder, seeds, the finished runs of the specification committed there
    ("atari_100k.py", "atari_100k", 2, 18),
    ("sac_pendulum_table3.py", "sac_pendulum_table3", 10, 40),
    ("minatar_study.py", "minatar_study", 5, 50),
    ("minatar_lap_eps.py", "minatar_lap_eps", 5, 20),
    ("minatar_lap_kappa.py", "minatar_lap_kappa", 5, 10),
    ("minatar_budget.py", "minatar_budget", 1, 3),
    ("ners_fig3.py", "ners_fig3", 10, 60),
    ("lap_halfcheetah.py", "lap_halfcheetah", 5, 20),
    ("lap_halfcheetah.py", "lap_halfcheetah/followup", 13, 16),
    ("minatar_study_long.py", "minatar_study_long", 5, 75),
    ("minatar_study_ddqn.py", "minatar_study_ddqn", 5, 20),
]


@pytest.mark.parametrize(("spec", "study", "seeds", "finished"), COMMITTED)
def test_the_committed_runs_are_what_their_specifications_run(spec, study, seeds, finished):
    """docs/results' README commands re-run the committed runs: every committed run folder a specification
    names was recorded with the settings the specification gives it (the sweep would skip it as finished)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    spec = root / "deep" / spec
    jobs = sweep.expand(sweep.load_spec(spec, "reduced"), seeds, 0, root / "docs/results" / study / "runs",
                        by_seed=sweep.seed_major(spec))  # fmt: skip
    assert sum(sweep.status(j) == "finished" for j in jobs) == finished  # none lost, none added unnoticed
    sweep.check_recorded(jobs)


DEEP = pathlib.Path(__file__).resolve().parents[1] / "deep"


@pytest.mark.parametrize("spec", sorted(p.name for p in DEEP.glob("*.py") if "def runs(" in p.read_text()))
def test_every_specification_expands_into_commands_train_accepts(spec, tmp_path):
    """Both budgets of every specification in deep/ expand, and each run's settings are ones train accepts."""
    from prioritylab.deep.cli import recorded_for

    path = DEEP / spec
    for budget in sweep.BUDGETS:
        jobs = sweep.expand(sweep.load_spec(path, budget), 1, 0, tmp_path)
        assert jobs
        for job in jobs:
            recorded_for(job["args"][1:])  # raises ValueError on a setting train would refuse


def test_a_run_with_a_setting_train_refuses_stops_the_sweep_before_any_run(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text(VALID.replace('"sampler": "uniform", **common}', '"sampler": "uniform", **common, "steps": 10}'))
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert "run td3_MountainCarContinuous-v0_uniform_s0: --steps 10 < --start-steps 20" in err
    assert not out.exists() or not any(out.iterdir())  # nothing started, the valid run neither


def test_a_run_stopped_on_its_own_is_not_counted_as_finished(tmp_path, monkeypatch, capsys):
    """A run whose own process is stopped (its scheduler, a kill of that pid) writes its checkpoint and exits 143;
    the sweep was not signalled, so it ends, but reports the run as stopped and exits non-zero."""
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC.replace("common}]\n", "common}][:1]\n"))
    out = tmp_path / "runs"
    monkeypatch.setattr(sweep, "run_local", lambda cmd, cwd=None, stop_file=None: (143, ""))
    assert cli_main(["sweep", str(spec), "--out", str(out), "--seeds", "2"]) == 1
    text = capsys.readouterr().out
    assert "0 of 2 runs finished; 0 crashed; 2 stopped before their end (re-run the same command to resume" in text
    record = json.loads((out / "sweep.json").read_text())["runs"]
    assert {v["status"] for v in record.values()} == {"interrupted (checkpoint written)"}


def test_the_settings_check_of_finished_runs_does_not_depend_on_free_memory(tmp_path, monkeypatch):
    """Memory is train's check when a run starts; a sweep's check of its runs' settings reads the settings alone."""
    from prioritylab import _checks
    from prioritylab.deep import run
    from prioritylab.deep.cli import recorded_for

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:       1000 kB\n")
    monkeypatch.setattr(_checks, "MEMINFO", str(meminfo))
    with pytest.raises(run.SettingsError, match="lower --buffer-size"):
        run.check_memory(1000, 10**7)  # the check itself still refuses
    for env in ("MinAtar/Breakout-v1", "ALE/Pong-v5"):
        recorded_for(["dqn", "--env", env, "--buffer-size", "100000"])  # no error


def test_a_misspelt_setting_refuses_the_sweep_with_trains_own_short_line(tmp_path, capsys):
    """tyro draws its error box otherwise into a captured stream (a title above rules of dashes); the sweep gives
    the message alone, as ``train`` does."""
    spec = tmp_path / "spec.py"
    spec.write_text("def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': 'per', "
                    "'stepz': 40, 'start_steps': 20}]\n")  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2
    assert err == "prioritylab sweep: error: run td3_Pendulum-v1_per_s0: Unrecognized options: --stepz, 40"


def test_a_false_setting_in_a_specification_is_passed_as_its_no_flag(tmp_path, capsys):
    spec = tmp_path / "spec.py"
    spec.write_text("def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': 'per', "
                    "'steps': 40, 'start_steps': 20, 'diagnostics': False, 'allow_no_updates': True}]\n")  # fmt: skip
    assert cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert " --no-diagnostics " in listed and " --allow-no-updates " in listed and " --diagnostics " not in listed


def stopped_run(tmp_path: pathlib.Path) -> tuple[pathlib.Path, str, pathlib.Path]:
    """A sweep's Pendulum run stopped at its --stop-after (a checkpoint, no finished.json): the specification
    file, the text of the specification without the stop, and the sweep's --out."""
    spec = tmp_path / "spec.py"
    longer = VALID.replace("steps = 40 if", "steps = 600 if").replace('"eval_every": 40', '"eval_every": 200')
    spec.write_text(longer.replace('"steps": steps,', '"steps": steps, "stop_after": 250,'))  # stops at 400
    out = tmp_path / "runs"
    assert cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1"]) == 1  # stopped, as asked
    folder = out / "td3_Pendulum-v1_per_s0"
    assert (folder / "checkpoint.pt").exists() and not (folder / "finished.json").exists()
    return spec, longer, out


def test_a_run_to_resume_recorded_with_other_settings_stops_the_sweep_before_any_run(tmp_path, capsys):
    """Not only a finished run: one stopped at its --stop-after (a checkpoint, no finished.json) that ran with
    other settings would be refused half-way by train --resume; the sweep refuses it first."""
    spec, longer, out = stopped_run(tmp_path)
    spec.write_text(longer.replace('"batch_size": 4', '"batch_size": 6'))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli_main(["sweep", str(spec), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and "td3_Pendulum-v1_per_s0 (batch_size 4 -> 6)" in err
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["td3_Pendulum-v1_per_s0"]  # nothing started
    with pytest.raises(SystemExit) as exit_:  # a dry run lists the runs first, the clashing one labelled so
        cli_main(["sweep", str(spec), "--out", str(out), "--dry-run"])
    listed = capsys.readouterr().out.splitlines()
    assert exit_.value.code == 2
    assert [line.rsplit("  # ", 1)[1] for line in listed if "--seed 0" in line and "Pendulum-v1 --sampler per" in line
            ] == ["resume with other settings: refused"]  # fmt: skip


def test_a_run_to_resume_at_another_thread_count_stops_the_sweep_before_any_run(tmp_path, capsys):
    """train --resume refuses another torch thread count than the checkpoint's (the run would not continue bit
    for bit), but only once started, which a sweep would record as a crash: the sweep names it first."""
    spec, longer, out = stopped_run(tmp_path)
    for threads, refused in ((2, True), (0, False)):  # 0 (torch's own count here): train's check, at its start
        spec.write_text(longer.replace('"threads": 1', f'"threads": {threads}'))
        capsys.readouterr()
        if refused:
            with pytest.raises(SystemExit) as exit_:
                cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1", "--dry-run"])
            err = capsys.readouterr().err.strip()
            assert exit_.value.code == 2 and "td3_Pendulum-v1_per_s0 (threads 1 -> 2)" in err
        else:
            assert cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1", "--dry-run"]) == 0
            assert capsys.readouterr().out.splitlines()[0].endswith("# resume")
    spec.write_text(longer)  # the count it ran with: resumed and finished
    assert cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1"]) == 0
    spec.write_text(longer.replace('"threads": 1', '"threads": 2'))  # a finished run's count does not matter
    assert cli_main(["sweep", str(spec), "--out", str(out), "--only", "env=Pendulum-v1", "--dry-run"]) == 0


@pytest.mark.parametrize(
    ("there", "same"),
    [(("/a/prioritylab", "c1", "True"), True),  # this very checkout, changed or not
     (("/b/prioritylab", "c1", "False"), False),  # this checkout is changed: its changes are not there
     (("/b/prioritylab", "c2", "False"), False),  # another commit
     (("/b/prioritylab", "", "None"), False)],  # not a checkout: nothing says it is the same code
)  # fmt: skip
def test_ray_workers_must_import_the_code_the_sweep_checked(there, same):
    here = ("/a/prioritylab", "c1", "True")
    assert sweep.same_code(here, there) is same
    assert sweep.same_code(("/a/prioritylab", "c1", "False"), ("/b/prioritylab", "c1", "False"))  # clean, one commit


def test_the_code_a_run_imports_is_found_as_the_run_would_import_it(tmp_path):
    """From the folder the runs start in (``python -m`` puts it first on the path): a copy of the package there
    is what they would run."""
    import prioritylab

    path, commit, dirty = sweep.code_identity(str(tmp_path))
    assert path == str(pathlib.Path(prioritylab.__file__).resolve().parent) and dirty in ("True", "False", "None")
    shutil.copytree(path, tmp_path / "prioritylab", ignore=shutil.ignore_patterns("__pycache__"))
    copy = sweep.code_identity(str(tmp_path))
    assert copy[0] == str((tmp_path / "prioritylab").resolve()) and not sweep.same_code((path, commit, dirty), copy)


def _closed_port() -> int:
    """A port on this machine where nothing listens (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ray_address_where_nothing_answers_is_refused_before_anything_is_written(tmp_path, capsys):
    """Ray keeps retrying an address where nothing answers for minutes; the sweep names it at once."""
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC.replace('"env": "NoSuchEnv-v0"', '"env": "Pendulum-v1"'))
    port = _closed_port()
    with pytest.raises(SystemExit) as err:
        cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--backend", "ray", "--address",
                  f"127.0.0.1:{port}"])  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1, lines
    assert f"cannot reach the Ray cluster at --address 127.0.0.1:{port}: nothing accepted a connection" in lines[0]
    assert not (tmp_path / "runs").exists()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def test_the_ray_address_check_reads_host_and_port_and_leaves_other_forms_to_ray():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}", f"localhost:{port}"):
            sweep.check_reachable(address)
    for address in ("auto", "/tmp/ray/session_latest", "local"):
        sweep.check_reachable(address)  # no host and port: Ray reads these itself
    closed = _closed_port()
    for address in (f"127.0.0.1:{closed}", f"ray://127.0.0.1:{closed}"):
        with pytest.raises(ValueError, match=re.escape(f"--address {address}: nothing accepted a connection at "
                                                       f"127.0.0.1:{closed}")):
            sweep.check_reachable(address)


def refused(argv: list[str], capsys) -> str:
    """The one line a command refused before any work prints."""
    with pytest.raises(SystemExit) as exit_:
        cli_main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(("options", "message"), [
    (["--seeds", "100000000000"], "--seeds 100000000000 from --first-seed 0 would use seeds up to 99999999999, above "
                                  "the largest seed train takes, 4294967195"),
    (["--seeds", "2", "--first-seed", "4294967195"], "would use seeds up to 4294967196, above the largest seed"),
    (["--seeds", "4294967000"], "--seeds 4294967000 for the 2 runs of the specification gives 8589934000 runs, more "
                                "than a sweep takes (10000)"),
])  # fmt: skip
def test_a_seed_count_too_large_is_refused_before_the_runs_are_expanded(tmp_path, capsys, monkeypatch, options,
                                                                         message):  # fmt: skip
    """The list of runs is as long as the seeds are many: it must not be built (a dry run would fill the memory)."""
    from prioritylab.deep.run import MAX_SEED

    assert MAX_SEED == 4294967195
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    monkeypatch.setattr(sweep, "expand", lambda *a, **k: pytest.fail("the runs were expanded"))
    started = time.monotonic()
    line = refused(["sweep", str(spec), *options, "--out", str(tmp_path / "runs"), "--dry-run"], capsys)
    assert message in line and time.monotonic() - started < 30
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("def runs(budget)\n    return []\n", "spec.py: SyntaxError at line 1: expected ':'"),
    ("x = 1\n  y = 2\n", "spec.py: IndentationError at line 2: unexpected indent"),
    ("LIMIT = 3\nassert LIMIT > 5, 'too few'\n", "spec.py: AssertionError at line 2 as it loads: too few"),
    ("import nosuchmodule_here\n", "spec.py: ModuleNotFoundError at line 1 as it loads: No module named "
                                   "'nosuchmodule_here'"),
    ("def runs(budget):\n    raise ValueError(f'no budget {budget}')\n",
     "spec.py: ValueError at line 2 in runs('reduced'): no budget reduced"),
    ("def runs(budget):\n    return {'a': 1}[budget]\n", "spec.py: KeyError at line 2 in runs('reduced'): 'reduced'"),
    ("import sys\nsys.exit(3)\n", "spec.py exited with 3 as it loads (sys.exit); a specification defines "
                                  "runs(budget) and must not exit"),
    ("import sys\ndef runs(budget):\n    sys.exit()\n", "spec.py exited in runs('reduced') (sys.exit)"),
])  # fmt: skip
def test_a_specification_that_fails_is_a_one_line_error_naming_it(tmp_path, capsys, text, message):
    spec = tmp_path / "spec.py"
    spec.write_text(text)
    line = refused(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--dry-run"], capsys)
    assert line.startswith(f"prioritylab sweep: error: sweep specification {spec}") and message in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("setting", "message"), [
    ("'steps': True", "run 0: steps must be an integer, got True"),
    ("'replay.alpha': False", "run 0: replay.alpha must be a number, got False"),
])  # fmt: skip
def test_a_true_or_false_for_a_setting_of_another_kind_is_refused_naming_it(tmp_path, capsys, setting, message):
    """A boolean is written as a bare flag (--steps), which left train with a flag missing its value."""
    spec = tmp_path / "spec.py"
    spec.write_text("def runs(budget):\n    return [{'agent': 'td3', 'env': 'Pendulum-v1', 'sampler': 'per', "
                    f"'start_steps': 20, 'steps': 40, {setting}}}]\n")  # fmt: skip
    line = refused(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--dry-run"], capsys)
    assert f"{spec}: {message} (only a True/False setting takes True or False)" in line and "Missing" not in line


def test_an_empty_out_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    monkeypatch.chdir(tmp_path)
    line = refused(["sweep", str(spec), "--out", "", "--dry-run"], capsys)
    assert line == "prioritylab sweep: error: --out is empty; give a folder (. for the current one)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.py"]


def test_an_env_whose_module_does_not_exist_is_a_one_line_error(tmp_path, capsys):
    """gymnasium imports the module named before the colon of an id: a missing one is train's refusal, not a
    traceback."""
    spec = tmp_path / "spec.py"
    spec.write_text(VALID.replace("MountainCarContinuous-v0", "nosuchmodule:Foo-v0"))
    line = refused(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--dry-run"], capsys)
    assert "nosuchmodule" in line and line.startswith("prioritylab sweep: error: run td3_nosuchmodule:Foo-v0")
    assert not (tmp_path / "runs").exists()


def test_an_out_inside_a_training_runs_folder_is_refused_before_any_run(tmp_path, capsys):
    """Every run would be refused by train for it, one by one: the sweep refuses it first, naming the run folder."""
    run = tmp_path / "td3_Pendulum-v1_uniform_s0"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"command": "prioritylab train td3", "config": {}}))
    spec = tmp_path / "spec.py"
    spec.write_text(VALID)
    line = refused(["sweep", str(spec), "--out", str(run / "more"), "--dry-run"], capsys)
    assert line.endswith(f"--out {run / 'more'} is inside {run}, which is a training run's folder; give the folder "
                         "that holds the runs"), line  # fmt: skip
    assert [p.name for p in run.iterdir()] == ["manifest.json"]
