"""``prioritylab collect``: finished runs' small files copied into a results folder, every run checked first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_report import fake_run

from prioritylab.cli import main as cli_main
from prioritylab.harness import report as R
from prioritylab.harness.collect import SMALL_FILES
from prioritylab.harness.report.runs import find_runs


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli_main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(lines) == 1, lines
    return lines[0]


def test_finished_runs_small_files_are_copied_and_runs_in_progress_left(tmp_path, capsys):
    runs, into = tmp_path / "runs", tmp_path / "kept" / "runs"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0 + seed] * 10, wall=3.0)  # its timing.csv ends at step 1000, as its evaluations
    fake_run(runs, "per", 2, [5.0] * 4, finished=False)
    heavy = runs / "td3_Hopper-v5_per_s0"
    (heavy / "checkpoint.pt").write_bytes(b"\0" * 64)
    (heavy / "tb").mkdir()
    (heavy / "tb" / "events").write_bytes(b"x")
    assert cli_main(["collect", str(runs), str(runs), str(runs / "td3_Hopper-v5_per_s2"), "--into", str(into)]) == 0
    out = capsys.readouterr().out  # a folder given twice, or inside another given, counts once
    assert "2 runs copied" in out and "1 not finished" in out and out.count("not finished, left") == 1
    assert f"not finished, left where it is: {runs / 'td3_Hopper-v5_per_s2'}" in out
    for seed in range(2):
        name = f"td3_Hopper-v5_per_s{seed}"
        assert sorted(p.name for p in (into / name).iterdir()) == sorted(SMALL_FILES)
        for f in SMALL_FILES:
            assert (into / name / f).read_bytes() == (runs / name / f).read_bytes()
    assert not (into / "td3_Hopper-v5_per_s2").exists()
    kept, _ = find_runs(into)  # the report reads the collected runs as it reads the originals
    assert [(r["rows"], r["config"], r["finished"]) for r in kept] == [
        (r["rows"], r["config"], r["finished"]) for r in find_runs(runs)[0] if r["finished"]]
    before = files_under(into)
    assert cli_main(["collect", str(runs), "--into", str(into)]) == 0  # repeated as the study goes on
    assert "0 runs copied" in capsys.readouterr().out and files_under(into) == before


def test_a_finished_run_whose_evaluations_are_cut_stops_the_collection_before_any_copy(tmp_path, capsys):
    runs, into = tmp_path / "runs", tmp_path / "kept"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0] * 12)
    evals = runs / "td3_Hopper-v5_per_s1" / "evaluations.csv"
    evals.write_text(evals.read_text()[:-20])  # cut inside its last row
    line = refused(["collect", str(runs), "--into", str(into)], capsys)
    assert "finished run" in line and "td3_Hopper-v5_per_s1" in line and "row 12 is truncated" in line
    assert not into.exists()


@pytest.mark.parametrize(("cut", "message"), [
    (lambda text: text.rstrip("\n"), "its timing.csv: row 1 is truncated"),
    (lambda text: text.replace("1000,", "500,"), "its timing.csv ends at step 500, its last evaluation at 1000"),
    (lambda text: text.splitlines()[0] + "\n", "timing.csv without a row"),
    (lambda text: text.replace("1000,3.0,", "500,4.0,1,1\n1000,3.0,"), "wall_time goes back at row 2 (4.0 then 3.0"),
    (lambda text: text.replace("1000,3.0,", "1000,9.0,"), "last wall_time 9.0 is later than the run's end, 5.0"),
])  # fmt: skip
def test_a_finished_run_with_a_cut_timing_file_is_refused_as_the_report_reads_it(tmp_path, capsys, cut, message):
    runs, into = tmp_path / "runs", tmp_path / "kept"
    fake_run(runs, "per", 0, [1.0] * 10, wall=3.0)
    (runs / "td3_Hopper-v5_per_s0" / "finished.json").write_text('{"step": 1000, "wall_time": 5.0}')
    timing = runs / "td3_Hopper-v5_per_s0" / "timing.csv"
    timing.write_text(cut(timing.read_text()))
    line = refused(["collect", str(runs), "--into", str(into)], capsys)
    assert message in line and "td3_Hopper-v5_per_s0" in line
    assert not into.exists()
    left_out = []
    R.stats.overhead({("td3", "Hopper-v5", "per"): R.runs.find_runs(runs)[0]}, left_out)
    assert message in left_out[0]  # the overhead table leaves it out for the same reason


@pytest.mark.parametrize(("episodes", "refuse"), [(7, False), (8, False), (9, True), (6, True)])
def test_a_finished_run_holding_another_seeds_evaluations_is_refused_by_its_episode_count(tmp_path, capsys, episodes,
                                                                                          refuse):  # fmt: skip
    """Seeds of one setting share their steps and updates, and can end on the same return: the episodes counted
    by the last evaluation must be the run's own, at most one fewer than ``finished.json``'s (an episode may end
    after the last evaluation, at the last step)."""
    runs, into = tmp_path / "runs", tmp_path / "kept"
    fake_run(runs, "per", 0, [1.0] * 10, extra={"episodes": episodes})
    (runs / "td3_Hopper-v5_per_s0" / "finished.json").write_text('{"step": 1000, "episodes": 8, "last_eval": 1.0}')
    if not refuse:
        assert cli_main(["collect", str(runs), "--into", str(into)]) == 0
        return
    line = refused(["collect", str(runs), "--into", str(into)], capsys)
    assert f"its last row has episodes {episodes}, but finished.json says 8 at the same step" in line
    assert not into.exists()


@pytest.mark.parametrize("missing", ["evaluations.csv", "manifest.json"])
def test_a_finished_run_missing_a_file_is_refused(tmp_path, capsys, missing):
    runs, into = tmp_path / "runs", tmp_path / "kept"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0] * 10)
    (runs / "td3_Hopper-v5_per_s1" / missing).unlink()
    line = refused(["collect", str(runs), "--into", str(into)], capsys)
    assert "finished run" in line and "td3_Hopper-v5_per_s1 cannot be read whole" in line
    assert not into.exists()


def test_a_file_in_the_way_or_an_into_that_is_a_searched_folder_is_refused_before_any_copy(tmp_path, capsys):
    runs, into = tmp_path / "runs", tmp_path / "kept"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0] * 10)
    into.mkdir()
    (into / "td3_Hopper-v5_per_s1").write_text("x")
    assert "td3_Hopper-v5_per_s1 is in the way" in refused(["collect", str(runs), "--into", str(into)], capsys)
    assert sorted(p.name for p in into.iterdir()) == ["td3_Hopper-v5_per_s1"]  # seed 0 was not copied either
    for target in (runs, tmp_path):
        line = refused(["collect", str(runs), "--into", str(target)], capsys)
        assert f"--into {target} is, or holds, the folder {runs}" in line
    inside = runs / "td3_Hopper-v5_per_s0" / "kept"  # copies inside a run would be found as runs of their own
    line = refused(["collect", str(runs), "--into", str(inside)], capsys)
    assert f"--into {inside} lies inside the run folder {runs / 'td3_Hopper-v5_per_s0'}" in line
    assert not inside.exists()


def test_a_folder_holding_no_run_is_refused_and_one_that_is_not_a_run_is_named_once(tmp_path, capsys):
    empty, into = tmp_path / "typo", tmp_path / "kept"
    empty.mkdir()
    line = refused(["collect", str(empty), "--into", str(into)], capsys)
    assert line == f"prioritylab collect: error: no run under {empty}: nothing to collect" and not into.exists()
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [1.0] * 10)
    (runs / "notes").mkdir()
    assert cli_main(["collect", str(runs), "--into", str(into)]) == 0
    out = capsys.readouterr().out
    assert f"not a run, left: {runs / 'notes'} (empty, left out: no manifest.json" in out and "1 run copied" in out


def test_another_version_of_a_run_already_collected_is_refused_and_left_as_it_was(tmp_path, capsys):
    first, second, into = tmp_path / "first", tmp_path / "second", tmp_path / "kept"
    fake_run(first, "per", 0, [1.0] * 12)
    assert cli_main(["collect", str(first), "--into", str(into)]) == 0
    before = files_under(into)
    fake_run(second, "per", 0, [2.0] * 12)  # the same run folder name, other evaluations
    fake_run(second, "uniform", 0, [2.0] * 12)
    line = refused(["collect", str(second), "--into", str(into)], capsys)
    assert "td3_Hopper-v5_per_s0" in line and "already holds another evaluations.csv" in line
    assert files_under(into) == before  # the uniform run, which could have been copied, was not either


@pytest.mark.parametrize("changed", SMALL_FILES)
def test_a_run_already_collected_that_differs_in_any_one_of_its_files_is_refused(tmp_path, capsys, changed):
    """Not only another course (evaluations.csv): another manifest (settings, commit), another finished.json or
    another timing.csv is another version of the run, refused and left as it was."""
    import shutil

    first, second, into = tmp_path / "first", tmp_path / "second", tmp_path / "kept"
    fake_run(first, "per", 0, [1.0] * 12, wall=50.0)
    (first / "td3_Hopper-v5_per_s0" / "timing.csv").write_text(
        "step,wall_time,steps_per_s,updates_per_s\n1200,50.0,1,1\n")  # ends at the last evaluation, as collect asks
    assert cli_main(["collect", str(first), "--into", str(into)]) == 0
    before = files_under(into)
    shutil.copytree(first, second)
    path = second / "td3_Hopper-v5_per_s0" / changed
    path.write_text(path.read_text().replace("1200", "1200.0", 1) if changed == "timing.csv" else
                    path.read_text().replace("}", ', "note": "another version"}', 1) if changed.endswith(".json") else
                    path.read_text().replace("1.0", "1.5", 1))  # fmt: skip
    line = refused(["collect", str(second), "--into", str(into)], capsys)
    assert f"already holds another {changed}" in line
    assert files_under(into) == before


def test_two_finished_runs_with_one_name_are_refused(tmp_path, capsys):
    fake_run(tmp_path / "a", "per", 0, [1.0] * 12)
    fake_run(tmp_path / "b", "per", 0, [2.0] * 12)
    line = refused(["collect", str(tmp_path / "a"), str(tmp_path / "b"), "--into", str(tmp_path / "kept")], capsys)
    assert "two finished runs are named td3_Hopper-v5_per_s0" in line
    assert not (tmp_path / "kept").exists()


def test_a_run_in_a_folder_renamed_to_another_runs_name_is_refused(tmp_path, capsys):
    """Collected, the folder would stand for the seed it is named after; the report would count the real one twice."""
    fake_run(tmp_path / "runs", "per", 0, [1.0] * 12)
    (tmp_path / "runs" / "td3_Hopper-v5_per_s0").rename(tmp_path / "runs" / "td3_Hopper-v5_per_s1")
    line = refused(["collect", str(tmp_path / "runs"), "--into", str(tmp_path / "kept")], capsys)
    assert "is named td3_Hopper-v5_per_s1, but its manifest is that of td3_Hopper-v5_per_s0" in line
    assert not (tmp_path / "kept").exists()


def test_runs_reached_through_links_are_collected_under_their_own_names(tmp_path, capsys):
    store, picked, into = tmp_path / "store", tmp_path / "picked", tmp_path / "kept"
    for seed in range(3):
        fake_run(store, "per", seed, [1.0 + seed] * 10)
    picked.mkdir()
    for seed in (0, 2):
        (picked / f"best{seed}").symlink_to(store / f"td3_Hopper-v5_per_s{seed}", target_is_directory=True)
    assert cli_main(["collect", str(picked), "--into", str(tmp_path / "alone")]) == 0
    assert "2 runs copied" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "alone").iterdir()) == ["td3_Hopper-v5_per_s0", "td3_Hopper-v5_per_s2"]
    assert cli_main(["collect", str(picked), str(store), "--into", str(into)]) == 0  # each run once, by either path
    assert "3 runs copied" in capsys.readouterr().out
    assert sorted(p.name for p in into.iterdir()) == [f"td3_Hopper-v5_per_s{seed}" for seed in range(3)]
    assert files_under(into) == files_under(store)


def test_a_folder_that_cannot_be_listed_stops_the_collection_before_any_copy(tmp_path, capsys, monkeypatch):
    runs = tmp_path / "runs"
    for seed in range(2):
        fake_run(runs, "per", seed, [1.0] * 10)
    hidden = runs / "td3_Hopper-v5_per_s1"
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", str(path))) if Path(path) == hidden else scandir(path))
    line = refused(["collect", str(runs), "--into", str(tmp_path / "kept")], capsys)
    assert f"{hidden}: cannot list it (Permission denied)" in line and not (tmp_path / "kept").exists()


def test_a_results_folder_inside_the_searched_folder_is_not_read_as_more_runs(tmp_path, capsys):
    runs = tmp_path / "runs"
    fake_run(runs, "per", 0, [1.0] * 12)
    for _ in range(2):
        assert cli_main(["collect", str(runs), "--into", str(runs / "kept")]) == 0
    assert "0 runs copied" in capsys.readouterr().out.splitlines()[-1]


def test_a_missing_source_or_an_into_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    fake_run(tmp_path / "runs", "per", 0, [1.0] * 12)
    assert "is not a folder" in refused(["collect", str(tmp_path / "nowhere"), "--into", str(tmp_path / "k")], capsys)
    (tmp_path / "file").write_text("x")
    line = refused(["collect", str(tmp_path / "runs"), "--into", str(tmp_path / "file")], capsys)
    assert f"--into {tmp_path / 'file'} is not a folder" in line


def training_run(folder: Path) -> Path:
    """A training run's folder as train writes it: its manifest records the command and the config."""
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text('{"command": ["prioritylab", "train", "td3"], "config": {"agent": "td3"}}')
    return folder


@pytest.mark.parametrize("inside", ["", "kept"])
def test_an_into_that_is_a_training_runs_folder_or_inside_one_is_refused(tmp_path, capsys, inside):
    """Its manifest is what a resume reads; the copies would be found as runs of their own (as report refuses)."""
    fake_run(tmp_path / "runs", "per", 0, [1.0] * 12)
    run = training_run(tmp_path / "elsewhere" / "td3_Hopper-v5_per_s7")
    into = run / inside if inside else run
    line = refused(["collect", str(tmp_path / "runs"), "--into", str(into)], capsys)
    where = "is" if not inside else f"is inside {run}, which is"
    assert line == (f"prioritylab collect: error: --into {into} {where} a training run's folder (its manifest.json is "
                    "the run's); give another folder")  # fmt: skip
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json"]


def test_an_empty_into_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    fake_run(tmp_path / "runs", "per", 0, [1.0] * 12)
    monkeypatch.chdir(tmp_path)
    line = refused(["collect", "runs", "--into", ""], capsys)
    assert line == "prioritylab collect: error: --into is empty; give a folder (. for the current one)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
