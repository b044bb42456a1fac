"""Every command line checks its options and its output folder before any work: one line naming the bad value,
a non-zero exit, nothing written.  Result files get the usual permissions, and --help is plain text."""

from __future__ import annotations

import argparse
import os
import runpy
import stat
import sys
from pathlib import Path

import pytest
from theory_scripts import ROOT, load_theory_script

from prioritylab._cli import HelpFormatter
from prioritylab.cli import main
from prioritylab.results import write_csv, write_json


def outcome(capsys, call):
    """Exit code and stderr lines of ``call()`` (a SystemExit counts as its code)."""
    try:
        code = call()
    except SystemExit as err:
        code = err.code
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "existing.txt"
    path.write_text("not a folder")
    return path


def cli(*argv):
    return lambda: main(list(argv))


BAD = {
    "cliffwalk seeds 0": (("cliffwalk", "--seeds", "0"), "'0'"),
    "cliffwalk seeds -2": (("cliffwalk", "--seeds", "-2"), "'-2'"),
    "cliffwalk jobs 0": (("cliffwalk", "--jobs", "0"), "'0'"),
    "sweep jobs 0": (("sweep", "deep/lap_mujoco.py", "--jobs", "0"), "'0'"),
    "sweep seeds 0": (("sweep", "deep/lap_mujoco.py", "--seeds", "0"), "'0'"),
    "sweep first seed -1": (("sweep", "deep/lap_mujoco.py", "--first-seed", "-1"), "'-1'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_numbers_are_refused_in_one_line(case, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(__file__)))
    argv, named = BAD[case]
    code, err = outcome(capsys, cli(*argv, "--out", str(tmp_path / "out")))
    assert code == 2 and len(err) == 1 and named in err[0] and "error" in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [("cliffwalk", "--n", "3", "--seeds", "1", "--no-progress"),
                                     ("report", "tests")])  # fmt: skip
def test_an_existing_file_as_out_is_refused_before_any_work(command, a_file, capsys):
    code, err = outcome(capsys, cli(*command, "--out", str(a_file)))
    assert code != 0 and len(err) == 1 and str(a_file) in err[0] and "existing file" in err[0]
    assert a_file.read_text() == "not a folder"


def test_an_unwritable_out_is_refused_before_any_work(capsys, a_file):
    bad = a_file / "below"  # a folder below a regular file can never be created
    code, err = outcome(capsys, cli("cliffwalk", "--n", "3", "--seeds", "1", "--no-progress", "--out", str(bad)))
    assert code == 2 and len(err) == 1 and f"--out {bad}: {a_file} is an existing file, not a folder" in err[0]


def test_bench_json_path_is_checked_before_timing(capsys, a_file):
    bad = a_file / "bench.json"
    code, err = outcome(capsys, cli("bench", "sumtree", "--quick", "--no-progress", "--json", str(bad)))
    assert code == 2 and len(err) == 1 and str(bad) in err[0]


@pytest.mark.parametrize("script,argv,named", [
    ("per_fig1", ["--seeds", "0"], "'0'"),
    ("per_fig2", ["--seeds", "-1"], "'-1'"),
    ("pser_fig7", ["--jobs", "0"], "'0'"),
    ("lap_equivalence", ["--cases", "0"], "'0'"),
    ("pser_theorem1", ["--n-max", "2"], "--n-max"),
])  # fmt: skip
def test_theory_scripts_refuse_bad_options(script, argv, named, capsys, tmp_path):
    mod = load_theory_script(script)
    code, err = outcome(capsys, lambda: mod.main([*argv, "--out", str(tmp_path / "out")]))
    assert code == 2 and len(err) == 1 and named in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["abc", "0", "-3"])
def test_a_theory_script_refuses_a_bad_jobs_variable_before_any_work(value, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIORITYLAB_JOBS", value)
    mod = load_theory_script("per_fig1")
    code, err = outcome(capsys, lambda: mod.main(["--quick", "--out", str(tmp_path / "out")]))
    assert code == 2 and err == [f"per_fig1: error: PRIORITYLAB_JOBS must be a positive integer, got '{value}'"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("script", ["per_fig1", "pser_theorem1", "lap_equivalence"])
def test_theory_scripts_refuse_a_file_as_out(script, a_file, capsys):
    mod = load_theory_script(script)
    code, err = outcome(capsys, lambda: mod.main(["--quick", "--out", str(a_file)]))
    assert code == 2 and len(err) == 1 and "existing file" in err[0]


def test_result_files_follow_the_umask(tmp_path):
    from prioritylab.deep.run import save_atomic

    old = os.umask(0o022)
    try:
        write_csv(tmp_path / "a.csv", [{"x": 1}])
        write_json(tmp_path / "b.json", {"x": 1})
        save_atomic({"x": 1}, tmp_path / "c.pt")
    finally:
        os.umask(old)
    for name in ("a.csv", "b.json", "c.pt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


@pytest.mark.parametrize("command", [("cliffwalk",), ("sweep",), ("report",), ("bench", "agent"),
                                     ("bench", "replay"), ("train", "td3"), ("train", "ddqn"),
                                     ("train", "dqn"), ("train", "sac")])  # fmt: skip
def test_help_is_plain_text_with_defaults(command, capsys):
    with pytest.raises(SystemExit) as err:
        main([*command, "--help"])
    assert err.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text and ":class:" not in text
    assert "default" in text


def test_git_dirty_ignores_the_folder_a_result_is_written_to(tmp_path):
    import subprocess

    from prioritylab.results import git_dirty

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code").mkdir()
    (tmp_path / "report").mkdir()
    (tmp_path / "code" / "a.py").write_text("x = 1\n")
    (tmp_path / "report" / "table.md").write_text("old\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    assert git_dirty(cwd=tmp_path) is False
    (tmp_path / "report" / "table.md").write_text("new\n")
    assert git_dirty(cwd=tmp_path) is True  # without ignore, any change counts
    assert git_dirty(ignore=tmp_path / "report", cwd=tmp_path) is False
    (tmp_path / "code" / "a.py").write_text("x = 2\n")
    assert git_dirty(ignore=tmp_path / "report", cwd=tmp_path) is True


@pytest.mark.parametrize("argv, recorded", [
    (["/x/prioritylab/__main__.py", "train", "td3", "--out", "my runs"],
     "python -m prioritylab train td3 --out 'my runs'"),
    (["/venv/bin/prioritylab", "report", "a", "--against", "rms_eps=0.01"],
     "prioritylab report a --against rms_eps=0.01"),
    (["theory/per_fig1.py", "--seeds", "3"], "python theory/per_fig1.py --seeds 3"),
])  # fmt: skip
def test_the_recorded_command_pastes_back_into_a_shell(argv, recorded):
    """A manifest's ``command``: the module run as ``python -m prioritylab``, not the path of its ``__main__.py``
    (which a shell cannot run with its arguments), the installed command by its name, arguments quoted."""
    from prioritylab.results import command_line

    assert command_line(argv) == recorded


def test_a_default_of_zero_is_shown_in_the_help(capsys):
    """``0`` equals ``False`` in Python: the help hid every zero default with the switches' ``False``; a reader of
    ``cliffwalk --help`` could not see that ``--beta`` defaults to no IS correction."""
    for command, line in ((["cliffwalk"], "no IS correction) (default: 0.0)"), (["sweep"], "first seed (default: 0)")):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert line in " ".join(capsys.readouterr().out.split())


def _actions(parser: argparse.ArgumentParser, prog: str):
    """``(prog, action, parser)`` of every option and positional of ``parser`` and of its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{prog} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield prog, action, parser


SCRIPTS = sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "theory").glob("*.py"))


def _script_parser(path: Path, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``path`` builds when run as a script: caught where it would parse ``sys.argv``."""
    caught = []

    def catch(self, args=None, namespace=None):
        caught.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    monkeypatch.setattr(sys, "argv", [str(path)])
    with pytest.raises(SystemExit):
        runpy.run_path(str(path), run_name="__main__")
    monkeypatch.undo()
    return caught[0]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_option_of_a_script_has_help_and_no_empty_default(path, monkeypatch):
    """An option without help (minatar_random.py's --episodes, learned_by.py's RUN_FOLDER, transfer_ab.py's --device)
    says nothing in --help; an empty default ("" or []) read "(default: )" there."""
    parser = _script_parser(path, monkeypatch)
    assert [f"{prog}: {a.option_strings or a.metavar or a.dest}" for prog, a, _ in _actions(parser, path.name)
            if not a.help] == []  # fmt: skip
    assert "(default: )" not in parser.format_help()


def test_every_option_of_a_subcommand_has_help_and_no_empty_default():
    from prioritylab.cli import build_parser

    parsers = {}
    for prog, action, parser in _actions(build_parser(), "prioritylab"):
        assert action.help, f"{prog}: {action.option_strings or action.dest}"
        parsers[prog] = parser
    for prog, parser in parsers.items():
        assert "(default: )" not in parser.format_help(), prog
    for default in ("", []):
        p = argparse.ArgumentParser(formatter_class=HelpFormatter)
        p.add_argument("--x", default=default, help="an option")
        assert "  --x X       an option\n" in p.format_help()


def test_a_manifest_records_the_cpu_its_vector_units_and_the_kernels_torch_takes(tmp_path):
    """Floating-point results can depend on the CPU: the manifest says which one, from /proc/cpuinfo (its first
    processor), its AVX sets, and (torch loaded) torch's kernel choice; MuJoCo's and MinAtar's versions too."""
    import torch

    from prioritylab.results import _PACKAGES, cpu_model, machine_info

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC\ncpu family\t: 25\nmodel\t\t: 17\n"
                    "flags\t\t: fpu sse avx2 avx512f avx avx512bw\n\nprocessor\t: 1\nmodel name\t: Other\n")
    assert cpu_model(str(info)) == {"cpu": "AMD EPYC (family 25, model 17)", "simd": "avx avx2 avx512bw avx512f"}
    info.write_text("processor\t: 0\nflags\t\t: fpu sse\n")
    assert cpu_model(str(info)) == {"cpu": "? (family ?, model ?)", "simd": "no AVX"}
    assert cpu_model(str(tmp_path / "missing")) == {}
    assert machine_info()["torch_cpu"] == torch.backends.cpu.get_cpu_capability()
    assert {"mujoco", "minatar", "rliable"} <= set(_PACKAGES)


@pytest.mark.parametrize(("size", "text"), [
    (0, "0 bytes"), (999, "999 bytes"), (1_000, "1.00 kB"), (870_000, "870.0 kB"), (906_096, "906.1 kB"),
    (999_950, "1.00 MB"), (999_999, "1.00 MB"), (9_999_999, "10.0 MB"), (1_160_000, "1.16 MB"),
    (1_234_000, "1.23 MB"), (23_400_000_000, "23.4 GB"), (52_776_600_000_000, "52,776.6 GB"),
])  # fmt: skip
def test_every_message_writes_a_size_one_way_with_three_significant_figures(size, text):
    """One formatter for the sizes of every memory message (train, sweep, bench), to three significant figures:
    the sweep's 0.87 and 0.86 MB, which one decimal would print alike, read 870.0 and 860.0 kB; a size that rounds
    up to the next unit is written in it."""
    from prioritylab._checks import size_text

    assert size_text(size) == text


@pytest.mark.parametrize(("argv", "message"), [
    (["cliffwalk", "--n", "3", "--n", "4"], "prioritylab cliffwalk: error: --n is given twice; give it once"),
    (["bench", "sumtree", "--seed", "1", "--seed=2"], "prioritylab bench sumtree: error: --seed is given twice"),
    (["train", "td3", "--seed", "1", "--seed=2"], "prioritylab train td3: error: --seed is given twice; give it once"),
    (["train", "dqn", "--start-steps", "9", "--start_steps", "9"],
     "prioritylab train dqn: error: --start-steps is given twice (as --start-steps and --start_steps)"),
    (["train", "td3", "--progress", "--no-progress"], "--progress is given twice (as --progress and --no-progress)"),
    (["cliffwalk", "--seeds", "3", "--seed", "5"], "--seeds is given twice (as --seeds and --seed); give it once"),
    (["bench", "sumtree", "--seconds", "1", "--sec=2"], "--seconds is given twice (as --seconds and --sec)"),
])  # fmt: skip
def test_an_option_typed_twice_is_refused_not_read_as_its_last_value(argv, message, capsys):
    """argparse and tyro keep an option's last value: ``--n 3 --n 4`` ran n = 4 alone, and the manifest recorded
    [4]; ``train --seed 1 --seed 2`` ran seed 2.  Refused in one line, before any work."""
    from prioritylab.cli import main

    with pytest.raises(SystemExit) as err:
        code = main(argv)
        raise SystemExit(code)
    lines = capsys.readouterr().err.strip().splitlines()
    assert err.value.code == 2 and len(lines) == 1 and message in lines[0], lines


def test_an_option_meant_to_be_given_again_still_is(tmp_path, capsys):
    """``--against`` and ``--report`` append: given twice, both are read."""
    from prioritylab.cli import main

    with pytest.raises(SystemExit):
        main(["verdicts", "--report", str(tmp_path / "a"), "--report", str(tmp_path / "b")])
    assert f"--report {tmp_path / 'a'} is not a folder" in capsys.readouterr().err
