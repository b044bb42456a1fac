"""Runs that refuse what they cannot vouch for, checked through ``prioritylab train`` / ``sweep``: in processes of
their own where signals, concurrent runs or the recorded command are under test, else in the test's process.

A report skips a cut evaluations file and lists empty folders; a checkpoint with one flipped byte is refused;
two processes never share a run folder; a killed sweep takes its runs with it; a run that never updates is
refused (and flagged by ``report``), as are comparisons between runs whose settings differ; a resume runs at
the thread count its checkpoint was written with.  Then the command line: one line and exit 2 for each bad
value, nothing written.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import warnings
import zipfile
import zlib
from pathlib import Path

import pytest
import torch
from ordering import flocks, wait_for

from prioritylab.cli import main as cli_main
from prioritylab.deep import run as run_mod
from prioritylab.deep import td3
from prioritylab.harness import report as R
from prioritylab.harness.report import runs as report_runs

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--env", "Pendulum-v1", "--start-steps", "50", "--eval-episodes", "1", "--hidden", "8", "--batch-size",
        "8", "--no-progress"]  # fmt: skip
FOLDER = "td3_Pendulum-v1_uniform_s0"


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def train_cmd(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "prioritylab", "train", "td3", *TINY, "--out", str(out), *args]


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=timeout, cwd=ROOT)


def run_here(cmd: list[str]) -> subprocess.CompletedProcess:
    """``cmd`` (a :func:`train_cmd`) run in this process, as :func:`run` runs it in a new one: the same exit code
    and output, without a new interpreter's imports (about 2 s a run).  For runs that need no process of their
    own: no signal, no second run at once, no recorded command under test.  Python warnings come first in its
    ``stderr``, as a process would print them."""
    out, err, threads = io.StringIO(), io.StringIO(), torch.get_num_threads()
    with warnings.catch_warnings(record=True) as caught:  # a process prints them on its stderr: so does this
        warnings.simplefilter("default")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli_main(cmd[3:])
        except SystemExit as stop:
            code = stop.code
        finally:
            torch.set_num_threads(threads)  # the run sets its own; later tests keep theirs
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught)
    return subprocess.CompletedProcess(cmd, code, out.getvalue(), shown + err.getvalue())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """``uninterrupted(*steps)``: the folder of the uninterrupted run of :func:`train_cmd` with ``steps``, made once
    a module and shared by the tests that compare a stopped run with it (read only: a test that changes a run
    makes its own)."""
    made: dict[tuple[str, ...], Path] = {}

    def folder(*steps: str) -> Path:
        if steps not in made:
            out = tmp_path_factory.mktemp("uninterrupted")
            done = run_here(train_cmd(out, *steps))
            assert done.returncode == 0, done.stderr
            made[steps] = out / FOLDER
        return made[steps]

    return folder


def run_files(folder: Path) -> dict[str, bytes]:
    """The bytes of every file of a run folder but its lock, those in its folders (TensorBoard's ``tb/``) too."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}  # fmt: skip


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.strip().splitlines() if line.strip()]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


# ---- 1. report: a cut evaluations.csv is skipped by name; an empty run folder is listed ----


def fake_run(root: Path, sampler: str, seed: int, returns, steps=None, updates=10, **config) -> Path:
    folder = root / f"td3_Hopper-v5_{sampler}_s{seed}"
    folder.mkdir(parents=True)
    steps = 100 * len(returns) if steps is None else steps  # a finished run ends at its steps
    manifest = {"config": {"agent": "td3", "env": "Hopper-v5", "sampler": sampler, "seed": seed, "steps": steps,
                           **config}}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest))
    # the loss differs by sampler, as real runs' rows do: equal returns of two samplers are not one run's files
    loss = zlib.crc32(sampler.encode()) / 2**32
    lines = ["step,episodes,return_mean,return_std,updates,loss"]
    lines += [f"{100 * (i + 1)},{i},{r},1.0,{updates},{loss}" for i, r in enumerate(returns)]
    (folder / "evaluations.csv").write_text("\n".join(lines) + "\n")
    (folder / "finished.json").write_text(json.dumps({"step": 100 * len(returns)}))
    return folder


@pytest.mark.parametrize("cut", ["3000,14,-15", "3000,14,-15\n", "3000,14,-15,1.0,1,0.5"])
def test_report_skips_an_evaluations_file_cut_mid_row(tmp_path, cut):
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [-1500.0] * 12)
    cut_run = fake_run(runs, "per", 1, [-1600.0] * 12)
    with open(cut_run / "evaluations.csv", "a") as fh:
        fh.write(cut)  # a kill during the write: fewer fields, or no line end
    result = R.report(runs, tmp_path / "out")
    assert result["table"][0]["seeds"] == 1 and result["table"][0]["return_last10_mean"] == -1500.0
    status = {Path(x["folder"]).name: x for x in result["status"]}
    assert status[cut_run.name]["status"] == "corrupt"
    assert "evaluations.csv" in status[cut_run.name]["detail"] and "row 13" in status[cut_run.name]["detail"]


def test_report_skips_a_finished_run_whose_evaluations_were_cut_at_a_line_end(tmp_path):
    """A cut that leaves whole rows is caught by finished.json, which records the run's last step."""
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [-1500.0] * 12)
    cut_run = fake_run(runs, "per", 1, [-1600.0] * 3 + [-100.0] * 9)
    lines = (cut_run / "evaluations.csv").read_text().splitlines(keepends=True)
    (cut_run / "evaluations.csv").write_text("".join(lines[:4]))  # the header and 3 whole rows
    result = R.report(runs, tmp_path / "out")
    assert result["table"][0]["seeds"] == 1 and result["table"][0]["return_last10_mean"] == -1500.0
    status = {Path(x["folder"]).name: x for x in result["status"]}
    assert status[cut_run.name]["status"] == "corrupt"
    assert "ends at step 300, but finished.json says the run ended at step 1200" in status[cut_run.name]["detail"]
    for text in ("{}", "{not json", '{"step": "1200"}'):
        (cut_run / "finished.json").write_text(text)
        result = R.report(runs, tmp_path / "out")
        status = {Path(x["folder"]).name: x for x in result["status"]}
        assert status[cut_run.name]["status"] == "corrupt" and "finished.json" in status[cut_run.name]["detail"]


def test_report_does_not_count_a_copied_run_folder_as_more_seeds(tmp_path):
    runs = tmp_path / "runs"
    for seed in range(5):
        fake_run(runs, "uniform", seed, [1.0 + seed] * 12)
        fake_run(runs, "per", seed, [2.0 + seed] * 12)
    clean = R.report(runs, tmp_path / "clean")
    shutil.copytree(runs / "td3_Hopper-v5_per_s0", runs / "old" / "td3_Hopper-v5_per_s0")
    result = R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    assert "the same seed in several run folders" in text and "seed 0 in " in text
    assert "the same evaluations under several seeds" not in text  # said once: the copy keeps its seed
    per_row = next(line for line in text.splitlines() if line.startswith("| td3 | Hopper-v5 | per |"))
    assert per_row.endswith("(not comparable: below) |"), per_row  # the row itself says its mean counts a copy
    assert [r["sampler"] for r in result["aggregates"]] == ["uniform"] and result["gains"] == []
    assert [r["sampler"] for r in clean["aggregates"]] == ["per", "uniform"]


def test_rliable_tables_take_each_samplers_own_seeds(tmp_path):
    """A sampler with few or other seeds never cuts another's: uniform and per keep their 5 seeds beside ners."""
    runs = tmp_path / "runs"
    for seed in range(5):
        fake_run(runs, "uniform", seed, [10.0 * seed] * 12)
        fake_run(runs, "per", seed, [10.0 * seed + 1] * 12)
    for seed in (5, 6):
        fake_run(runs, "ners", seed, [10.0 * seed] * 12)
    result = R.report(runs, tmp_path / "out")
    rows = {r["sampler"]: r for r in result["aggregates"]}
    assert {s: (r["runs"], r["mean"]) for s, r in rows.items()} == {
        "uniform": (5, pytest.approx(20.0)), "per": (5, pytest.approx(21.0)), "ners": (2, pytest.approx(55.0))}
    pairs = {(r["sampler"], r["baseline"]): (r["runs"], r["ci_meaningful"]) for r in result["improvement"]}
    assert pairs[("per", "uniform")] == (5, True) and pairs[("ners", "uniform")] == (2, False)


def test_curves_align_the_seeds_on_the_steps_they_all_logged():
    rows = [{"step": str(s), "return_mean": str(s / 100)} for s in (100, 200, 300, 400)]
    other = [{"step": str(s), "return_mean": str(-s)} for s in (200, 400, 600)]
    steps, values = report_runs.aligned([{"rows": rows}, {"rows": other}], "return_mean")
    assert steps.tolist() == [200.0, 400.0] and values.tolist() == [[2.0, 4.0], [-200.0, -400.0]]


def test_report_lists_an_empty_run_folder(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [1.0] * 12)
    (runs / "td3_Hopper-v5_per_s1").mkdir()  # what a run refused or killed at start-up used to leave
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "status.md").read_text()
    assert "td3_Hopper-v5_per_s1 | empty, left out |" in text


# ---- 2. checkpoint integrity ----


def flip_a_tensor_byte(checkpoint: Path) -> None:
    """Flip one byte in the middle of the largest tensor record of a ``torch.save`` zip archive."""
    with zipfile.ZipFile(checkpoint) as zf:
        info = max((i for i in zf.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    with open(checkpoint, "r+b") as fh:
        fh.seek(info.header_offset + 26)
        name_len, extra_len = (int.from_bytes(fh.read(2), "little") for _ in range(2))
        at = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
        fh.seek(at)
        byte = fh.read(1)[0]
        fh.seek(at)
        fh.write(bytes([byte ^ 0x10]))


def test_a_flipped_byte_in_a_checkpoint_tensor_is_refused_and_stale_temporaries_are_removed(tmp_path):
    stopped = run_here(train_cmd(tmp_path, "--steps", "600", "--eval-every", "200", "--stop-after", "250"))
    assert stopped.returncode == 0, stopped.stderr
    folder = tmp_path / FOLDER
    checkpoint = folder / "checkpoint.pt"
    assert json.loads((folder / "checkpoint.pt.sha256").read_text())["sha256"]
    pristine = checkpoint.read_bytes()
    evals = (folder / "evaluations.csv").read_bytes()

    flip_a_tensor_byte(checkpoint)
    refused = run_here(train_cmd(tmp_path, "--steps", "600", "--eval-every", "200", "--resume"))
    lines = error_lines(refused)
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "checkpoint" in lines[0] and "corrupt" in lines[0] and "SHA-256" in lines[0]
    assert (folder / "evaluations.csv").read_bytes() == evals and not (folder / "finished.json").exists()

    checkpoint.write_bytes(pristine)
    stale = folder / ".checkpoint.pt.x1y2z3.tmp"  # as a kill during a checkpoint write leaves it
    stale.write_bytes(pristine[:100])
    resumed = run_here(train_cmd(tmp_path, "--steps", "600", "--eval-every", "200", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumes" not in resumed.stderr  # the same machine and code: no warning that it is resumed elsewhere
    assert (folder / "finished.json").exists() and not stale.exists()
    assert not list(folder.glob(".*.tmp"))


def test_the_digest_names_the_checkpoint_on_disk_at_every_point_of_a_save(tmp_path, monkeypatch):
    """A kill between the rename of the checkpoint and the final digest write leaves a digest listing both."""
    from prioritylab.deep import run as run_mod

    path = tmp_path / "checkpoint.pt"
    run_mod.save_atomic({"x": torch.arange(4)}, path)
    run_mod.verify_checkpoint(path)
    writes = []
    real = run_mod.write_json

    def write_json_then_die(target, obj, parents=True):
        writes.append(obj)
        if len(writes) == 2:  # the rename has happened; the final digest write never does
            raise KeyboardInterrupt
        real(target, obj, parents=parents)

    monkeypatch.setattr(run_mod, "write_json", write_json_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_mod.save_atomic({"x": torch.arange(5)}, path)
    monkeypatch.setattr(run_mod, "write_json", real)
    run_mod.verify_checkpoint(path)  # the new checkpoint, listed in the swap record
    assert torch.equal(torch.load(path)["x"], torch.arange(5))


def test_two_saves_cut_off_before_their_renames_leave_a_checkpoint_the_digest_lists(tmp_path, monkeypatch):
    """Each save is cut off after its swap record is written and before its rename: the checkpoint on disk
    is still the first one, and the second swap record must name it, not the never-written second one."""
    path = tmp_path / "checkpoint.pt"
    run_mod.save_atomic({"x": torch.arange(4)}, path)
    real_replace = os.replace

    def replace_then_die(src, dst):
        if Path(dst) == path:
            raise KeyboardInterrupt  # the swap record is written; the checkpoint's rename never happens
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_then_die)
    for value in (5, 6):
        with pytest.raises(KeyboardInterrupt):
            run_mod.save_atomic({"x": torch.arange(value)}, path)
    monkeypatch.setattr(os, "replace", real_replace)
    run_mod.verify_checkpoint(path)  # the first checkpoint, which the second swap record names as replaced
    assert torch.equal(torch.load(path)["x"], torch.arange(4))
    run_mod.save_atomic({"x": torch.arange(7)}, path)  # a save that completes leaves one digest, the new one
    run_mod.verify_checkpoint(path)
    assert set(json.loads(run_mod.digest_path(path).read_text())) == {"sha256"}


def test_a_checkpoint_copied_in_from_another_run_is_refused_before_anything_changes(tmp_path):
    """The checkpoint records the settings it was written with and the rows the run had logged: one of another
    run is refused; one of this run (the same settings and seed) brings its own rows."""
    steps = ["--steps", "1400", "--eval-every", "100"]
    donor = run_here(train_cmd(tmp_path / "donor", *steps, "--stop-after", "1050"))
    assert donor.returncode == 0, donor.stderr
    written = tmp_path / "donor" / FOLDER
    saved = torch.load(written / "checkpoint.pt", weights_only=False)
    assert saved["step"] == 1200 and saved["evals"] == 12  # steps 100..1200, past the loop's 1000-step mark
    assert saved["recorded"]["config"]["lr"] == 0.0003
    assert [int(r["step"]) for r in saved["eval_rows"]] == list(range(100, 1300, 100)) == [
        int(r["step"]) for r in saved["timing_rows"]]  # fmt: skip
    stopped = run_here(train_cmd(tmp_path / "other", *steps, "--lr", "0.001", "--stop-after", "150"))
    assert stopped.returncode == 0, stopped.stderr
    folder = tmp_path / "other" / FOLDER
    for f in ("checkpoint.pt", "checkpoint.pt.sha256"):
        shutil.copy(written / f, folder / f)  # same agent, env, sampler and seed: the identity matches
    before = run_files(folder)
    refused = run_here(train_cmd(tmp_path / "other", *steps, "--lr", "0.001", "--resume"))
    assert refused.returncode == 2 and len(error_lines(refused)) == 1, refused.stderr
    assert "its checkpoint was written by a run with other settings (lr 0.0003 -> 0.001)" in refused.stderr
    assert run_files(folder) == before


def rewrite_checkpoint(folder: Path, change) -> None:
    """``change(state)`` applied to a run's checkpoint, saved again with its digest."""
    path = folder / "checkpoint.pt"
    state = torch.load(path, weights_only=False)
    change(state)
    run_mod.save_atomic(state, path)


def as_before_rows_were_recorded(state: dict) -> None:
    del state["eval_rows"], state["timing_rows"]


@pytest.mark.parametrize("damage", ["cut", "edited", "rows of an earlier point"])
def test_a_damaged_evaluations_file_is_written_back_from_the_checkpoint_and_the_run_finishes_as_uninterrupted(
        tmp_path, damage, uninterrupted):  # fmt: skip
    """A cut copy, a crash or an edit leaves ``evaluations.csv`` disagreeing with the checkpoint, whose rows its
    SHA-256 vouches for: a warning names the first row that differs, the checkpoint's rows are written back at
    once, and the run finishes as the uninterrupted one."""
    steps = ["--steps", "1600", "--eval-every", "400"]  # evaluations at 400, 800, 1200, 1600; episodes of 200
    if damage == "rows of an earlier point":  # this run's checkpoint, copied beside the rows of its first 600 steps
        assert run_here(train_cmd(tmp_path / "split", *steps, "--stop-after", "450")).returncode == 0
        assert run_here(train_cmd(tmp_path / "donor", *steps, "--stop-after", "1050")).returncode == 0
        for f in ("checkpoint.pt", "checkpoint.pt.sha256"):
            shutil.copy(tmp_path / "donor" / FOLDER / f, tmp_path / "split" / FOLDER / f)
    else:
        assert run_here(train_cmd(tmp_path / "split", *steps, "--stop-after", "1050")).returncode == 0
    evals = tmp_path / "split" / FOLDER / "evaluations.csv"  # the checkpoint's step: 1200, the first episode end
    text = evals.read_text()
    if damage == "cut":
        evals.write_text(text[: text.index("\n800,") + 4])  # inside row 2, before the checkpoint's step
    elif damage == "edited":
        first = text.splitlines()[2].split(",")
        evals.write_text(text.replace(",".join(first), ",".join([*first[:2], "9.5", *first[3:]])))
    # stopped again at step 1400, before the next evaluation, whose rewrite of the file would hide a missing
    # write-back
    resumed = run_here(train_cmd(tmp_path / "split", *steps, "--resume", "--stop-after", "1201"))
    assert resumed.returncode == 0, resumed.stderr
    expected = {"cut": "row 2 is truncated", "edited": "from row 2 it differs", "rows of an earlier point":
                "from row 2 it differs"}[damage]  # fmt: skip
    assert "warning:" in resumed.stderr and expected in resumed.stderr, resumed.stderr
    full = (uninterrupted(*steps) / "evaluations.csv").read_text()
    assert evals.read_text() == full[: full.index("\n1600,") + 1]  # the checkpoint's rows, written back at once
    resumed = run_here(train_cmd(tmp_path / "split", *steps, "--resume"))
    assert resumed.returncode == 0 and "warning:" not in resumed.stderr, resumed.stderr
    assert evals.read_text() == full


def test_an_older_checkpoints_rows_are_read_from_whole_files_with_as_many_evaluations(tmp_path, uninterrupted):
    """A checkpoint written before the rows were recorded takes them from the files: a row that is not whole, a
    step that is not a number, another count of evaluations than the checkpoint's, or other columns than this
    code logs (in either file) are each refused in one line, before anything changes."""
    steps = ["--steps", "1400", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *steps, "--stop-after", "1050")).returncode == 0
    folder = tmp_path / FOLDER
    rewrite_checkpoint(folder, as_before_rows_were_recorded)
    evals = folder / "evaluations.csv"
    text = evals.read_text()
    lines = text.splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    without = [",".join(c for i, c in enumerate(line.rstrip("\n").split(",")) if i != header.index("updates")) + "\n"
               for line in lines]  # fmt: skip
    for damaged, message in [
        (text[: text.index("\n800,") + 4], "evaluations.csv: row 4 is truncated (the file ends without a line end)"),
        (text.replace("\n400,", "\n4O0,"), "evaluations.csv row 2 has step '4O0', not a whole number"),
        ("".join(lines[:3]), "was written after 6 evaluations, but evaluations.csv holds 2 up to that step"),
        ("".join(without), "its evaluations.csv was written by other code (this code also logs updates)"),
    ]:
        evals.write_text(damaged)
        before = run_files(folder)
        refused = run_here(train_cmd(tmp_path, *steps, "--resume"))
        assert refused.returncode == 2 and len(error_lines(refused)) == 1, refused.stderr
        assert message in refused.stderr, refused.stderr
        assert run_files(folder) == before
    evals.write_text(text)
    timing = folder / "timing.csv"
    kept = timing.read_text()
    timing.write_text("".join(line.rsplit(",", 1)[0] + "\n" for line in kept.splitlines()))  # no updates_per_s
    before = run_files(folder)
    refused = run_here(train_cmd(tmp_path, *steps, "--resume"))
    assert refused.returncode == 2 and len(error_lines(refused)) == 1, refused.stderr
    assert "its timing.csv was written by other code (this code also logs updates_per_s)" in refused.stderr
    assert run_files(folder) == before
    timing.write_text(kept)
    resumed = run_here(train_cmd(tmp_path, *steps, "--resume"))
    assert resumed.returncode == 0 and "warning" not in resumed.stderr, resumed.stderr
    assert evals.read_bytes() == (uninterrupted(*steps) / "evaluations.csv").read_bytes()


def test_a_checkpoint_that_lost_its_digest_is_refused_unless_written_before_digests(tmp_path):
    steps = ["--steps", "600", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *steps, "--stop-after", "250")).returncode == 0
    folder = tmp_path / FOLDER
    (folder / "checkpoint.pt.sha256").unlink()
    before = run_files(folder)
    refused = run_here(train_cmd(tmp_path, *steps, "--resume"))
    assert refused.returncode == 2 and len(error_lines(refused)) == 1, refused.stderr
    assert "has lost its checksum file checkpoint.pt.sha256" in refused.stderr
    assert run_files(folder) == before

    def as_before_digests(state):  # the code that wrote no digests recorded no thread count, settings or rows
        as_before_rows_were_recorded(state)
        del state["recorded"], state["evals"], state["threads"]

    rewrite_checkpoint(folder, as_before_digests)
    (folder / "checkpoint.pt.sha256").unlink()
    resumed = run_here(train_cmd(tmp_path, *steps, "--resume"))
    assert resumed.returncode == 0 and "resuming unverified" in resumed.stderr, resumed.stderr


def test_a_checkpoint_whose_noise_generator_ran_on_another_kind_of_device_is_one_line(tmp_path):
    """A generator's state is its device's own (16 bytes on CUDA, 5,056 on the CPU): a CUDA checkpoint resumed on
    the CPU is refused in one line, before anything changes."""
    steps = ["--steps", "600", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *steps, "--stop-after", "250")).returncode == 0
    folder = tmp_path / FOLDER

    def as_cuda_saves_it(state):
        state["noise"] = torch.zeros(16, dtype=torch.uint8)

    rewrite_checkpoint(folder, as_cuda_saves_it)
    before = run_files(folder)
    refused = run_here(train_cmd(tmp_path, *steps, "--resume"))
    assert refused.returncode == 2 and len(error_lines(refused)) == 1, refused.stderr
    assert "its checkpoint's noise generator ran on another kind of device" in refused.stderr
    assert run_files(folder) == before


def test_a_run_whose_folder_is_moved_away_stops_without_making_it_again(tmp_path, monkeypatch):
    """Between two writes, and during a checkpoint's: the run stops in one line, and the old path stays gone."""
    folder = tmp_path / "run"
    folder.mkdir()
    log = run_mod.RunLog(folder, None)
    log.record({"step": 1, "return_mean": 0.5}, {"step": 1, "wall_time": 0.1})
    log.close()
    folder.rename(tmp_path / "moved")
    with pytest.raises(run_mod.RunStopped, match="no longer exists"):
        log.record({"step": 2, "return_mean": 0.5}, {"step": 2, "wall_time": 0.2})
    assert not folder.exists()

    from prioritylab.deep import loop

    real = run_mod.save_atomic

    def moved_while_saving(obj, path, parents=True):  # the folder goes between the checkpoint and its digest
        real_write_json = run_mod.write_json

        def move_then_write(target, value, parents=True):
            if Path(target).parent.is_dir():
                Path(target).parent.rename(tmp_path / "moved during the save")
            real_write_json(target, value, parents=parents)

        monkeypatch.setattr(run_mod, "write_json", move_then_write)
        try:
            real(obj, path, parents=parents)
        finally:
            monkeypatch.setattr(run_mod, "write_json", real_write_json)

    monkeypatch.setattr(loop, "save_atomic", moved_while_saving)
    stopped = run_here(train_cmd(tmp_path / "out", "--steps", "600", "--eval-every", "200", "--stop-after", "250"))
    assert stopped.returncode == 1 and len(error_lines(stopped)) == 1, stopped.stderr
    assert "no longer exists (moved or deleted while the run wrote into it)" in stopped.stderr
    assert not (tmp_path / "out" / FOLDER).exists()


def test_a_run_resumed_after_its_1000th_step_finishes_as_the_uninterrupted_one(tmp_path, uninterrupted):
    steps = ["--steps", "1400", "--eval-every", "200"]
    stopped = run_here(train_cmd(tmp_path / "split", *steps, "--stop-after", "1050"))
    assert stopped.returncode == 0 and "run stopped at its --stop-after step" in stopped.stdout, stopped.stdout
    resumed = run_here(train_cmd(tmp_path / "split", *steps, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    full, split = uninterrupted(*steps), tmp_path / "split" / FOLDER
    assert (full / "evaluations.csv").read_bytes() == (split / "evaluations.csv").read_bytes()


def scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    """``tag``'s (step, value) pairs as TensorBoard shows them from a run's event files, in the order read."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder / "tb"), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_a_resume_drops_the_tensorboard_points_logged_after_its_checkpoint(tmp_path, uninterrupted):
    """A run killed after its checkpoint has logged evaluations the resumed run logs again: TensorBoard must show
    each step once, with the uninterrupted run's values, not the killed stretch beside the new one."""
    steps = ["--steps", "1400", "--eval-every", "200"]
    # the state of a run killed after step 1000 whose last checkpoint is at step 800 (episodes end every 200 steps
    # there): its events reach step 1000
    assert run_here(train_cmd(tmp_path / "killed", *steps, "--stop-after", "850")).returncode == 0
    assert run_here(train_cmd(tmp_path / "donor", *steps, "--stop-after", "650")).returncode == 0
    for f in ("checkpoint.pt", "checkpoint.pt.sha256"):
        shutil.copy(tmp_path / "donor" / FOLDER / f, tmp_path / "killed" / FOLDER / f)
    killed = tmp_path / "killed" / FOLDER
    assert [s for s, _ in scalars(killed, "return_mean")] == [200, 400, 600, 800, 1000]
    resumed = run_here(train_cmd(tmp_path / "killed", *steps, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    full = scalars(uninterrupted(*steps), "return_mean")
    assert [s for s, _ in full] == list(range(200, 1401, 200))
    assert scalars(killed, "return_mean") == full


def test_a_resume_that_fails_restoring_the_environment_changes_no_file(tmp_path, monkeypatch):
    """The manifest's list of resumed stretches, the logs and TensorBoard change only once every part of the
    checkpoint, the environment's state last, is restored."""
    import dataclasses

    from prioritylab.deep.run import SettingsError

    steps = ["--steps", "600", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *steps, "--stop-after", "250")).returncode == 0
    folder = tmp_path / FOLDER
    before = run_files(folder)
    events = sorted(p.name for p in (folder / "tb").iterdir())

    def refuse(env, state):
        raise SettingsError("the environment's state cannot be restored")

    monkeypatch.setitem(td3.SPECS, "td3", dataclasses.replace(td3.SPECS["td3"], set_env_state=refuse))
    assert cli_main(["train", "td3", *TINY, "--out", str(tmp_path), *steps, "--resume"]) == 2
    assert run_files(folder) == before and sorted(p.name for p in (folder / "tb").iterdir()) == events


def test_a_resume_keeps_the_runs_first_record_and_adds_its_own(tmp_path):
    steps = ["--steps", "600", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *steps, "--stop-after", "250")).returncode == 0
    manifest = tmp_path / FOLDER / "manifest.json"
    first = json.loads(manifest.read_text())
    platform = first["machine"]["platform"]
    first |= {"git_commit": "0" * 40, "git_dirty": True, "created": "2000-01-01T00:00:00+00:00",
              "machine": {**first["machine"], "platform": "Linux-other"}}  # fmt: skip
    manifest.write_text(json.dumps(first))  # as if the first stretch had run on other code, on another machine
    resumed = run(train_cmd(tmp_path, *steps, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert (f"resumes elsewhere than it last ran (machine.platform Linux-other -> {platform}): it continues "
            "validly, but not bit for bit") in resumed.stderr  # fmt: skip
    commit = json.loads(manifest.read_text())["resumed"][0]["git_commit"][:7]
    assert f"resumes at commit {commit}" in resumed.stderr
    assert "it last ran at 0000000 + uncommitted changes (`git log 0000000.." in resumed.stderr
    after = json.loads(manifest.read_text())
    assert (after["git_commit"], after["git_dirty"], after["created"]) == ("0" * 40, True, first["created"])
    [stretch] = after["resumed"]
    assert stretch["at_step"] == 400 and stretch["git_commit"] != "0" * 40 and "--resume" in stretch["command"]
    assert (tmp_path / FOLDER / "finished.json").exists()


def test_a_resume_on_another_device_or_package_version_is_named(capsys):
    from prioritylab.deep.run import speaking_as, warn_if_elsewhere

    last = {"device": "cuda:0", "git_commit": "a" * 40, "git_dirty": False, "machine": {"platform": "L"},
            "packages": {"torch": "2.13.0", "prioritylab": "0.1.0"}}  # fmt: skip
    now = {**last, "device": "cpu", "packages": {"torch": "2.14.0", "mujoco": "4.0.0", "prioritylab": "0.2.0"}}
    with speaking_as("sac"):  # as the training loop's: the warning is named as its agent's program
        warn_if_elsewhere(Path("run"), last, now)
    assert capsys.readouterr().err == (
        "prioritylab train sac: warning: run resumes elsewhere than it last ran (packages.torch 2.13.0 -> 2.14.0; "
        "device cuda:0 -> cpu): it continues validly, but not bit for bit as the uninterrupted run would\n")
    warn_if_elsewhere(Path("run"), last, now)  # called outside a run (a script reading a checkpoint): the package's
    assert capsys.readouterr().err.startswith("prioritylab: warning: run resumes elsewhere")
    warn_if_elsewhere(Path("run"), last, {**last, "packages": {**last["packages"], "prioritylab": "0.2.0"}})
    assert capsys.readouterr().err == ""  # the project's own version is its commit's business


def test_resuming_a_finished_run_trains_nothing_changes_no_file_and_says_so(tmp_path, capsys):
    """``--resume`` of a run that has finished: its settings are still checked (another value is refused), and
    otherwise nothing is trained and no file changes (the manifest gains no resumed stretch)."""
    steps = [*TINY, "--out", str(tmp_path), "--steps", "300", "--eval-every", "150"]
    assert cli_main(["train", "td3", *steps]) == 0
    folder = tmp_path / FOLDER
    before = run_files(folder)
    capsys.readouterr()
    assert cli_main(["train", "td3", *steps, "--resume"]) == 0
    assert f"{folder} already holds a finished run; nothing was trained" in capsys.readouterr().out
    assert run_files(folder) == before
    assert cli_main(["train", "td3", *steps, "--lr", "0.1", "--resume"]) == 2
    assert "lr" in capsys.readouterr().err and run_files(folder) == before
    for name in ("checkpoint.pt", "checkpoint.pt.sha256"):  # as committed: the small files only
        (folder / name).unlink()
    before = run_files(folder)
    assert cli_main(["train", "td3", *steps, "--resume"]) == 0
    assert "nothing was trained" in capsys.readouterr().out and run_files(folder) == before
    (folder / "manifest.json").unlink()  # then nothing to check its settings against: refused, in one line
    assert cli_main(["train", "td3", *steps, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.endswith("holds no checkpoint to resume from"), err


def test_a_plain_run_over_one_stopped_before_its_first_evaluation_keeps_no_events_of_it(tmp_path):
    """Such a folder holds no result, so a plain run may start there; the dead run's TensorBoard events must go
    with it, or the two runs' curves would show as one."""
    steps = ["--steps", "300", "--eval-every", "150"]
    folder = tmp_path / FOLDER
    (folder / "tb").mkdir(parents=True)
    (folder / "tb" / "events.out.tfevents.1.dead").write_bytes(b"events of a run killed at step 40")
    (folder / "manifest.json").write_text("{}")
    done = run_here(train_cmd(tmp_path, *steps))
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (folder / "tb").iterdir() if p.name.endswith(".dead")] == []
    assert len(list((folder / "tb").iterdir())) == 1 and (folder / "finished.json").exists()


# ---- 3. the run folder lock ----


def test_two_trains_into_one_folder_one_is_refused_naming_the_holder(tmp_path):
    # the first run is paused while it holds the folder's lock, so the second meets the lock however loaded the
    # machine is (left to the scheduler, the first could end before the second arrived, or the second could
    # arrive between the first's flock and its writing its pid); two runs arriving at one moment are
    # test_a_run_refused_by_the_lock_leaves_the_folder_the_holder_made_meanwhile's case
    lock = tmp_path / FOLDER / run_mod.LOCK
    first = subprocess.Popen(train_cmd(tmp_path, "--steps", "600", "--eval-every", "200"), env=env(), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: lock.exists() and lock.read_text() == f"{first.pid}\n", what="the first run's lock")
        os.kill(first.pid, signal.SIGSTOP)
        assert (first.pid, False) in flocks(lock), "the first run ended before it was paused at its lock"
        second = subprocess.run(train_cmd(tmp_path, "--steps", "600", "--eval-every", "300"), env=env(),
                                cwd=ROOT, capture_output=True, text=True, timeout=180)  # fmt: skip
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, first_err = first.communicate(timeout=180)
    assert (first.returncode, second.returncode) == (0, 2), (first_err[-500:], second.stderr[-500:])
    lines = error_lines(second)
    assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and "in use" in lines[0]
    manifest = json.loads((tmp_path / FOLDER / "manifest.json").read_text())
    steps = [int(line.split(",")[0]) for line in (tmp_path / FOLDER / "evaluations.csv").read_text().splitlines()[1:]]
    assert manifest["config"]["eval_every"] == 200 and steps == [200, 400, 600]  # the holder's run, whole


def test_a_run_refused_by_the_lock_leaves_the_folder_the_holder_made_meanwhile(tmp_path, monkeypatch):
    # two runs start into one new folder: both see no folder, the other makes it and locks it first
    folder, held = tmp_path / FOLDER, []
    made = run_mod.check_output_dir

    def made_and_locked_by_another(path, option):
        made(path, option=option)
        held.append(run_mod.RunLock(path).acquire())  # a second open file description: flock refuses this one

    monkeypatch.setattr(run_mod, "check_output_dir", made_and_locked_by_another)
    with pytest.raises(run_mod.SettingsError, match=f"in use by another run \\(pid {os.getpid()}\\)"):
        run_mod.prepare_dir(folder, resume=False, overwrite=False)
    assert sorted(p.name for p in folder.iterdir()) == [run_mod.LOCK]  # the holder's folder and lock file stay
    held[0].release()


def test_a_run_refused_by_a_lock_names_the_kernels_holder_not_a_stale_pid_in_the_file(tmp_path):
    # the moment between a new holder's lock and its write: the file still holds the last holder's pid
    folder = tmp_path / FOLDER
    folder.mkdir()
    (folder / run_mod.LOCK).write_text("4242\n")
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder / run_mod.LOCK)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(run_mod.SettingsError, match=rf"in use by another run \(pid {holder.pid}\)"):
            run_mod.RunLock(folder).acquire()
    finally:
        holder.kill()
        holder.wait()
    assert (folder / run_mod.LOCK).read_text() == "4242\n"  # the refused run wrote nothing


def test_a_run_refused_as_the_holder_takes_the_lock_names_the_pid_the_holder_writes_a_moment_later(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setattr(run_mod, "flocks", lambda file: [])  # a system without a lock table: the file is read
    folder = tmp_path / FOLDER
    folder.mkdir()
    fd = os.open(folder / run_mod.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the holder has its lock and has not written its pid yet
    writes_pid = threading.Timer(0.1, os.write, (fd, b"4242\n"))
    writes_pid.start()
    try:
        with pytest.raises(run_mod.SettingsError, match=r"in use by another run \(pid 4242\)"):
            run_mod.RunLock(folder).acquire()
    finally:
        writes_pid.join()
        os.close(fd)


def test_a_lock_on_a_lock_file_removed_meanwhile_is_refused(tmp_path, monkeypatch):
    # another run opened, then removed, the folder it had made; the lock on the removed file would be no one's lock
    folder = tmp_path / FOLDER
    folder.mkdir()
    real = run_mod.fcntl.flock

    def removed_first(fd, op):
        shutil.rmtree(folder)
        return real(fd, op)

    monkeypatch.setattr(run_mod.fcntl, "flock", removed_first)
    with pytest.raises(run_mod.SettingsError, match="was removed by another run as this one started"):
        run_mod.RunLock(folder).acquire()


@pytest.mark.parametrize("holds", ["a checkpoint", "a finished run"])
def test_restart_deletes_nothing_once_another_process_has_run_the_folder(tmp_path, capsys, holds):
    # a sweep passes --restart for a run it saw stopped before its first checkpoint; by the time the run holds the
    # lock another process may have resumed or finished it, and that run's files must survive
    steps = ["--steps", "600", "--eval-every", "200", "--checkpoint-every", "200"]
    stop = ["--stop-after", "250"] if holds == "a checkpoint" else []
    assert cli_main(["train", "td3", *TINY, "--out", str(tmp_path), *steps, *stop]) == 0
    folder = tmp_path / FOLDER
    before = run_files(folder)
    capsys.readouterr()
    assert cli_main(["train", "td3", *TINY, "--out", str(tmp_path), *steps, "--restart"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"now holds {holds}" in line and "nothing was deleted" in line
    assert run_files(folder) == before


def test_a_start_afresh_deletes_finished_json_first(tmp_path, monkeypatch):
    # a start afresh killed while it deletes the old run's files must not leave a folder that looks finished
    folder = tmp_path / FOLDER
    folder.mkdir()
    for name in ("finished.json", "checkpoint.pt", "evaluations.csv", "manifest.json"):
        (folder / name).write_text("{}")
    deleted = []
    real = Path.unlink
    monkeypatch.setattr(Path, "unlink", lambda self, *a, **k: (deleted.append(self.name), real(self, *a, **k)))
    run_mod.prepare_dir(folder, resume=False, overwrite=True).release()
    assert deleted[0] == "finished.json" and set(deleted) >= {"checkpoint.pt", "evaluations.csv", "manifest.json"}


def test_one_of_resume_overwrite_and_restart(tmp_path, capsys):
    for pair in (("--resume", "--restart"), ("--overwrite", "--restart"), ("--resume", "--overwrite")):
        assert cli_main(["train", "td3", *TINY, "--out", str(tmp_path), "--steps", "100", *pair]) == 2
        assert "not several" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ---- 4. a killed sweep takes its runs with it ----

SPEC = """
def runs(budget):
    common = {"steps": 200_000, "start_steps": 50, "eval_every": 100_000, "eval_episodes": 1, "hidden": 8,
              "batch_size": 8, "checkpoint_every": 100_000}
    return [{"agent": "td3", "env": "Pendulum-v1", "sampler": s, **common} for s in ("uniform", "per")]
"""


def start_sweep(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    sweep = subprocess.Popen([sys.executable, "-m", "prioritylab", "sweep", str(spec), "--out", str(tmp_path / "runs"),
                              "--jobs", "2"], env=env(), cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for(lambda: len(children_of(sweep.pid)) == 2, what="the sweep's two runs")
    kids = children_of(sweep.pid)
    # both runs are training once their manifests are written
    wait_for(lambda: all((tmp_path / "runs" / f"td3_Pendulum-v1_{s}_s0" / "manifest.json").exists()
                         for s in ("uniform", "per")), what="the runs to start")  # fmt: skip
    return sweep, kids


def test_sigkill_of_a_sweep_ends_its_runs(tmp_path):
    sweep, kids = start_sweep(tmp_path)
    try:
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=10)
        wait_for(lambda: not any(alive(pid) for pid in kids), timeout=60, what="the orphaned runs to end")
    finally:
        for pid in kids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    for s in ("uniform", "per"):  # they stopped as on SIGTERM: with a checkpoint, ready to resume
        assert (tmp_path / "runs" / f"td3_Pendulum-v1_{s}_s0" / "checkpoint.pt").exists()


def test_sigterm_of_a_sweep_stops_its_runs_with_checkpoints(tmp_path):
    sweep, kids = start_sweep(tmp_path)
    try:
        os.kill(sweep.pid, signal.SIGTERM)
        _, err = sweep.communicate(timeout=60)
    finally:
        for pid in kids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert sweep.returncode == 128 + signal.SIGTERM, err
    assert not any(alive(pid) for pid in kids)
    record = json.loads((tmp_path / "runs" / "sweep.json").read_text())
    assert record["stopped_by_signal"] == signal.SIGTERM
    assert {v["status"] for v in record["runs"].values()} == {"interrupted (checkpoint written)"}
    assert "0/2 [" in err and "1/2 [" not in err and "2/2 [" not in err, err  # the bar counts no interrupted run


def test_sigterm_of_a_ray_sweep_stops_its_runs_with_checkpoints(tmp_path):
    """Under Ray the runs are the workers' children, not the sweep's: the stop reaches them through the sweep's
    stop file, and each stops at its episode end with a checkpoint, as under the local pool (Ray itself would
    kill them, with no checkpoint, once the sweep that submitted them has gone)."""
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    out = tmp_path / "runs"
    # as in the Ray test of tests/test_sweep.py: workers at the usual priority, and time to register when loaded
    ray_env = {**env(), "RAY_worker_niceness": "0", "RAY_worker_register_timeout_seconds": "300"}
    sweep = subprocess.Popen([sys.executable, "-m", "prioritylab", "sweep", str(spec), "--out", str(out),
                              "--backend", "ray"], env=ray_env, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: all((out / f"td3_Pendulum-v1_{s}_s0" / "manifest.json").exists() for s in ("uniform", "per")),
                 timeout=300, what="the Ray runs to start", while_=lambda: sweep.poll() is None)  # fmt: skip
        os.kill(sweep.pid, signal.SIGTERM)
        _, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 128 + signal.SIGTERM, err
    record = json.loads((out / "sweep.json").read_text())
    assert record["stopped_by_signal"] == signal.SIGTERM
    assert {v["status"] for v in record["runs"].values()} == {"interrupted (checkpoint written)"}, record
    for s in ("uniform", "per"):  # checkpoint_every is past the stop: only the stop can have written these
        folder = out / f"td3_Pendulum-v1_{s}_s0"
        assert (folder / "checkpoint.pt").exists() and not (folder / "finished.json").exists()
    assert not list(out.glob(".sweep-stop-*"))


# ---- 5. runs that never learned; groups that differ in more than the sampler ----


def test_train_refuses_steps_below_start_steps_unless_asked(tmp_path, capsys):
    code = cli_main(["train", "td3", "--env", "Pendulum-v1", "--steps", "300", "--out", str(tmp_path), "--no-progress"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--steps 300 < --start-steps 25000" in lines[0]
    assert "--allow-no-updates" in lines[0] and not any(tmp_path.iterdir())
    code = cli_main(["train", "dqn", "--env", "MinAtar/Breakout-v1", "--steps", "300", "--start-steps", "100",
                     "--update-every", "500", "--out", str(tmp_path), "--no-progress"])  # none of 100-300 divides
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "the first update would come at step 500" in lines[0]
    assert "--allow-no-updates" in lines[0] and not any(tmp_path.iterdir())
    asked = run_here([sys.executable, "-m", "prioritylab", "train", "td3", "--env", "Pendulum-v1", "--steps", "200",
                      "--eval-every", "200", "--eval-episodes", "1", "--hidden", "8", "--out", str(tmp_path),
                      "--no-progress", "--allow-no-updates"])  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    fake_run(tmp_path / "x", "per", 0, [1.0] * 3)  # a run that learned, beside the one that did not
    result = R.report(tmp_path, tmp_path / "report")
    status = {Path(x["folder"]).name: x for x in result["status"]}
    assert status[FOLDER]["status"] == "no updates, left out"
    assert [t["sampler"] for t in result["table"]] == ["per"]


def test_report_refuses_to_compare_samplers_whose_runs_differ_in_other_settings(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, "uniform", seed, [1.0 + seed] * 12, batch_size=128)
        fake_run(runs, "per", seed, [2.0 + seed] * 24, batch_size=128, replay={"alpha": 0.6})
        fake_run(runs, "lap", seed, [3.0] * 12, batch_size=256 if seed else 128)
    result = R.report(runs, tmp_path / "out")
    assert result["gains"] == [] and result["aggregates"] == []
    text = (tmp_path / "out" / "table.md").read_text()
    assert "**Not comparable**" in text and "samplers differ in steps (1200, 2400)" in text
    assert "seeds differ in batch_size (128, 256)" in text and "replay.alpha" not in text
    for table in ("differences", "gains", "aggregates", "improvement", "overhead"):  # why lap is in no row
        assert "- td3 Hopper-v5 lap: not comparable, so in no row here (table.md says why)" in (
            tmp_path / "out" / f"{table}.md").read_text(), table  # fmt: skip
    same = tmp_path / "same"
    for seed in (0, 1):
        fake_run(same, "uniform", seed, [1.0 + seed] * 12, threads=1 + seed)  # bookkeeping settings may differ
        fake_run(same, "per", seed, [2.0 + seed] * 12, replay={"alpha": 0.6})
    result = R.report(same, tmp_path / "out2")
    assert len(result["gains"]) == 2 and "Not comparable" not in (tmp_path / "out2" / "table.md").read_text()


# ---- 6. torch threads: one by default, recorded, a resume at another count refused ----


def test_thread_count_is_recorded_and_a_resume_at_another_count_is_refused(tmp_path):
    assert td3.TD3Settings().threads == 1
    stopped = run_here(train_cmd(tmp_path, "--steps", "600", "--eval-every", "200", "--stop-after", "250"))
    assert stopped.returncode == 0, stopped.stderr
    folder = tmp_path / FOLDER
    assert json.loads((folder / "manifest.json").read_text())["torch_threads"] == 1
    assert torch.load(folder / "checkpoint.pt", weights_only=False)["threads"] == 1
    before = run_files(folder)
    refused = run_here(train_cmd(tmp_path, "--steps", "600", "--eval-every", "200", "--resume", "--threads", "2"))
    lines = error_lines(refused)
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "1 torch thread" in lines[0] and "--threads 1" in lines[0]
    assert run_files(folder) == before


def test_a_resume_with_settings_that_change_the_run_is_refused_naming_them(tmp_path):
    """A resumed run must continue as the uninterrupted one: other learning settings are refused before any
    work, files untouched; where and how the run is kept may change."""
    common = ["--steps", "600", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *common, "--stop-after", "250")).returncode == 0
    folder = tmp_path / FOLDER
    before = run_files(folder)
    refused = run_here(train_cmd(tmp_path, "--steps", "800", "--eval-every", "200", "--lr", "0.001", "--resume"))
    lines = error_lines(refused)
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "it ran with other settings (" in lines[0]  # the manifest's check, the first
    assert "lr 0.0003 -> 0.001" in lines[0] and "steps 600 -> 800" in lines[0]
    assert run_files(folder) == before
    manifest = (folder / "manifest.json").read_bytes()
    (folder / "manifest.json").unlink()
    unknown = run_here(train_cmd(tmp_path, *common, "--resume"))
    assert unknown.returncode == 2 and "no manifest.json" in unknown.stderr, unknown.stderr
    (folder / "manifest.json").write_bytes(manifest)
    resumed = run_here(train_cmd(tmp_path, *common, "--checkpoint-every", "100", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert (folder / "finished.json").exists()


def test_a_run_recorded_before_a_setting_existed_resumes_only_with_the_value_it_ran_with(tmp_path):
    """A manifest without ``replay.normalise`` ran with global normalisation: a PER run resumes with 'global'
    and is refused with the new default 'batch'."""
    common = ["--steps", "600", "--eval-every", "200", "--sampler", "per"]
    assert run_here(train_cmd(tmp_path, *common, "--replay.normalise", "global", "--stop-after", "250")).returncode == 0
    manifest = tmp_path / "td3_Pendulum-v1_per_s0" / "manifest.json"
    recorded = json.loads(manifest.read_text())
    del recorded["config"]["replay"]["normalise"]
    manifest.write_text(json.dumps(recorded))
    refused = run_here(train_cmd(tmp_path, *common, "--resume"))
    assert refused.returncode == 2 and "replay.normalise 'global' -> 'batch'" in refused.stderr, refused.stderr
    resumed = run_here(train_cmd(tmp_path, *common, "--replay.normalise", "global", "--resume"))
    assert resumed.returncode == 0, resumed.stderr


def test_a_run_recorded_before_the_capacity_counted_tail_slots_resumes_with_its_own_capacity(tmp_path):
    """A manifest without ``replay_capacity`` had one slot per step below ``buffer_size``: resumed with today's
    rule (room for the tail slots too) it would change its replay, and is refused naming the capacity; with a
    ``--buffer-size`` that gives its capacity it resumes."""
    common = ["--steps", "600", "--eval-every", "200"]
    assert run_here(train_cmd(tmp_path, *common, "--buffer-size", "600", "--stop-after", "250")).returncode == 0
    manifest = tmp_path / FOLDER / "manifest.json"
    recorded = json.loads(manifest.read_text())
    assert recorded["replay_capacity"] == 600  # min(buffer_size, 2 * steps)
    del recorded["replay_capacity"]
    recorded["config"]["buffer_size"] = 1_000_000  # as such a run recorded it: capacity min(1M, 600 steps)
    manifest.write_text(json.dumps(recorded))
    refused = run_here(train_cmd(tmp_path, *common, "--resume"))
    assert refused.returncode == 2 and "replay_capacity 600 -> 1200" in refused.stderr, refused.stderr
    assert "--buffer-size 600" in refused.stderr
    resumed = run_here(train_cmd(tmp_path, *common, "--buffer-size", "600", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / FOLDER / "finished.json").exists()


def test_the_replay_capacity_is_compared_not_the_buffer_size_that_bounds_it():
    from prioritylab.provenance import changed_settings, recorded

    def manifest(buffer_size, steps=60_000, capacity=None):
        config = {"agent": "td3", "sampler": "uniform", "steps": steps, "buffer_size": buffer_size}
        return {"config": config, **({"replay_capacity": capacity} if capacity is not None else {})}

    before = manifest(1_000_000)  # recorded before the capacity was: one slot per step, 60,000
    assert recorded(before)["replay_capacity"] == 60_000 and "buffer_size" not in recorded(before)
    assert changed_settings(before, manifest(60_000, capacity=60_000)) == {}
    assert changed_settings(before, manifest(1_000_000, capacity=120_000)) == {"replay_capacity": (60_000, 120_000)}
    assert changed_settings(manifest(100_000, 250_000), manifest(100_000, 250_000, 100_000)) == {}


def test_which_samplers_read_the_is_normalisation_is_the_method_table():
    from prioritylab.deep.methods import METHOD_TABLE
    from prioritylab.provenance import WEIGHTED, changed_settings

    assert set(WEIGHTED) == {name for name, entry in METHOD_TABLE.items() if entry.uses_weights}
    old = {"agent": "dqn", "sampler": "lap", "replay": {"alpha": None}}
    now = {**old, "replay": {"alpha": None, "normalise": "batch"}}
    assert changed_settings({"config": old}, {"config": now}) == {}
    old["sampler"] = now["sampler"] = "per"
    assert changed_settings({"config": old}, {"config": now}) == {"replay.normalise": ("global", "batch")}


def test_resolved_sampler_values_are_compared_not_the_null_that_asks_for_the_default():
    """A default that changed is a difference; an explicit value equal to the recorded default is not."""
    from prioritylab.provenance import changed_settings

    def manifest(alpha_setting, alpha):
        return {"config": {"agent": "dqn", "sampler": "per", "replay": {"alpha": alpha_setting, "normalise": "batch"}},
                "method": {"name": "per", "alpha": alpha, "normalise": "batch"}}  # fmt: skip

    assert changed_settings(manifest(None, 0.5), manifest(0.5, 0.5)) == {}
    assert changed_settings(manifest(None, 0.5), manifest(None, 0.6)) == {"method.alpha": (0.5, 0.6)}
    old = manifest(None, 0.5)
    del old["method"]["normalise"]  # recorded before the setting: global
    assert changed_settings(old, manifest(None, 0.5)) == {"method.normalise": ("global", "batch")}


def test_a_specifications_pin_of_an_earlier_value_is_what_an_old_manifest_reads_as():
    """``as_before`` gives specifications the values :func:`recorded` fills into a manifest that predates a
    setting, so a pinned preset and its committed runs are the same experiment."""
    import pytest

    from prioritylab.provenance import as_before, recorded

    pins = as_before("replay.normalise", "replay.duplicates", "log_prob_of", "clip_reward")
    assert pins == {"replay.normalise": "global", "replay.duplicates": "each", "log_prob_of": "scaled",
                    "clip_reward": True}  # fmt: skip
    for sampler, agent in (("pser", "dqn"), ("per", "sac")):
        old = recorded({"config": {"agent": agent, "sampler": sampler, "replay": {}}})
        assert all(old[k] == v for k, v in pins.items() if k in old), (sampler, old)
    with pytest.raises(KeyError, match="replay.alpha"):
        as_before("replay.normalise", "replay.alpha")


# ---- the command line: one line, exit 2, nothing written ----

BAD = [
    (["--seed", "-1"], "got -1"),
    (["--steps", "1e13", "--buffer-size", "1e13"], "lower --buffer-size"),
    (["--steps", str(10**30)], str(10**30)),
    (["--resume"], "holds no checkpoint"),
    (["--no-such-option", "3"], "--no-such-option"),
    (["--env", "ALE/Pong-v5"], "needs a continuous (Box) action space"),
    (["--replay.normalise", "max"], "normalise must be one of ('global', 'batch'), got 'max'"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_train_values_are_one_line_and_write_nothing(args, message, tmp_path, capsys):
    try:
        env = [] if "--env" in args else ["--env", "Pendulum-v1"]  # an option is typed once
        code = cli_main(["train", "td3", *env, *args, "--out", str(tmp_path), "--no-progress"])
    except SystemExit as err:
        code = err.code
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and message in err[0] and "error" in err[0], err
    assert not any(tmp_path.iterdir())


def test_help_lists_every_agent_and_bare_train_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    assert "{td3,sac,dqn,ddqn}" in capsys.readouterr().out
    assert cli_main(["train"]) == 2
    assert capsys.readouterr().err.startswith("usage: prioritylab train {td3,sac,dqn,ddqn}")


def ctrl_c(tmp_path: Path, second: bool) -> tuple[int, str]:
    """A run started as a process and sent Ctrl-C once it has written its manifest; with ``second``, sent it again
    once it says that it heads for its episode's end (checking that it says what a second one does).  The
    process's exit code and error output."""
    proc = subprocess.Popen(train_cmd(tmp_path, "--steps", "200000", "--eval-every", "100000"), env=env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: (tmp_path / FOLDER / "manifest.json").exists(), what="the run to start")
        proc.send_signal(signal.SIGINT)
        if second:
            for line in proc.stdout:  # the first signal's message: the run now heads for its episode's end
                if "stopping at the end of this episode" in line:
                    assert "a second Ctrl-C stops at once, without one" in line
                    break
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_ctrl_c_ends_with_the_step_and_exit_130_after_the_checkpoint(tmp_path):
    code, err = ctrl_c(tmp_path, second=False)
    assert code == 130, err
    step = torch.load(tmp_path / FOLDER / "checkpoint.pt", weights_only=False)["step"]
    assert err.strip().splitlines()[-1].startswith(f"interrupted at step {step}; resume with --resume")
    assert step % 200 == 0  # at an episode end


def test_a_second_ctrl_c_stops_at_once_in_one_line(tmp_path):
    """The first Ctrl-C says that a second one stops at once, without a checkpoint; the second does so, in one
    line that says how to go on (no traceback)."""
    code, err = ctrl_c(tmp_path, second=True)
    assert code == 130, err
    assert [line for line in err.splitlines() if line.strip()] == [
        "prioritylab train td3: stopped at once by an interrupt, without a checkpoint: --resume continues from the "
        "run's last checkpoint if it wrote one, --restart runs it again if not"]
    assert not (tmp_path / FOLDER / "checkpoint.pt").exists()


def test_sweep_dry_run_prints_commands_one_can_paste(tmp_path, capsys):
    """The listing is made in this process; its first command is pasted into a shell of its own."""
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC.replace("200_000", "60").replace("100_000", "60"))
    assert cli_main(["sweep", str(spec), "--out", str(tmp_path / "runs"), "--dry-run"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert shlex.split(first, comments=True)[1:4] == ["-m", "prioritylab", "train"]
    pasted = subprocess.run(first, shell=True, executable=shutil.which("bash"), capture_output=True, text=True,
                            env=env(), cwd=ROOT, timeout=120)  # fmt: skip
    assert pasted.returncode == 0, pasted.stderr
    assert (tmp_path / "runs" / FOLDER / "finished.json").exists()


def test_a_setting_only_another_sampler_reads_does_not_split_a_group(tmp_path):
    """Runs written before NERS's schedule setting existed lack it: for PER it is not read, so its seeds still
    agree; for NERS it is, so its seeds do not."""
    runs = tmp_path / "runs"
    for sampler in ("per", "ners"):
        fake_run(runs, sampler, 0, [1.0] * 12, replay={"alpha": 0.5})
        fake_run(runs, sampler, 1, [2.0] * 12, replay={"alpha": 0.5, "ners_schedule": "episode"})
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    assert "ners: seeds differ in replay.ners_schedule (evaluation, episode)" in text
    assert "per: seeds differ" not in text
    fake_run(runs, "per", 2, [3.0] * 12, replay={"alpha": 0.6, "ners_schedule": "episode"})
    R.report(runs, tmp_path / "out")
    assert "per: seeds differ in replay.alpha (0.5, 0.6)" in (tmp_path / "out" / "table.md").read_text()


def test_a_run_recorded_before_the_is_normalisation_setting_counts_as_global(tmp_path):
    runs = tmp_path / "runs"
    for sampler in ("uniform", "per"):
        fake_run(runs, sampler, 0, [1.0] * 12, replay={"alpha": 0.5})
        fake_run(runs, sampler, 1, [2.0] * 12, replay={"alpha": 0.5, "normalise": "global"})
    R.report(runs, tmp_path / "out")
    assert "seeds differ" not in (tmp_path / "out" / "table.md").read_text()
    for sampler in ("uniform", "per"):
        fake_run(runs, sampler, 2, [3.0] * 12, replay={"alpha": 0.5, "normalise": "batch"})
    R.report(runs, tmp_path / "out")
    text = (tmp_path / "out" / "table.md").read_text()
    assert "per: seeds differ in replay.normalise (global, batch)" in text and "uniform: seeds differ" not in text


def test_a_resumed_runs_first_speeds_count_the_steps_since_the_resume_only(monkeypatch):
    from prioritylab.deep import run as run_module

    clock_now = [100.0]
    monkeypatch.setattr(run_module.time, "perf_counter", lambda: clock_now[0])
    clock = run_module.Clock(wall_before=3600.0, steps=50_000, updates=49_000)
    clock_now[0] += 2.0
    rates = clock.rates(50_500, 49_000 + 400)
    assert rates == {"wall_time": pytest.approx(3602.0), "steps_per_s": pytest.approx(250.0),
                     "updates_per_s": pytest.approx(200.0)}  # fmt: skip
