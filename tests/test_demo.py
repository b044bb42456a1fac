"""``make demo`` (prioritylab.demo): script discovery, verdict counts, failure reporting, and one real --quick run."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prioritylab import demo

ROOT = Path(__file__).resolve().parents[1]

FAKE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    out = Path(sys.argv[sys.argv.index("--out") + 1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "argv.json").write_text(json.dumps(sys.argv[1:]))
    verdict = [{"claim": "a", "verdict": "reproduced"}, {"claim": "b", "verdict": "not reproduced"},
               {"claim": "c", "verdict": "n/a"}, {"claim": "d", "verdict": "reproduced"}]
    (out / "manifest.json").write_text(json.dumps({"verdict": verdict}))
    sys.exit(EXIT)
    """
)


def fake_theory(tmp_path, exits: dict[str, int]):
    """A theory folder holding fake scripts (name -> exit code) that write a manifest with four verdicts."""
    folder = tmp_path / "theory"
    folder.mkdir()
    for name, code in exits.items():
        (folder / name).write_text(FAKE.replace("EXIT", str(code)))
    return folder


def test_discovery_keeps_the_order_and_lists_missing_scripts(tmp_path):
    folder = fake_theory(tmp_path, {"pser_fig7.py": 0, "per_fig1.py": 0, "unrelated.py": 0})
    found, missing = demo.find_scripts(folder)
    assert [p.name for p in found] == ["per_fig1.py", "pser_fig7.py"]
    assert missing == ["lap_equivalence.py", "per_fig2.py", "pser_theorem1.py"]
    assert demo.find_scripts(demo.THEORY_DIR)[1] == []  # the checkout has every script


def test_runs_every_script_and_reports_a_failure(tmp_path, monkeypatch, capsys):
    folder = fake_theory(tmp_path, {"per_fig1.py": 0, "per_fig2.py": 3, "lap_equivalence.py": 0})
    monkeypatch.setattr(demo, "THEORY_DIR", folder)
    out = tmp_path / "results"
    assert demo.main(["--out", str(out), "--quick", "--no-deep"]) == 1
    text = capsys.readouterr().out
    assert "skipping pser_theorem1.py" in text and "skipping pser_fig7.py" in text
    assert "per_fig1.py: exit 0" in text and "2 reproduced, 1 not reproduced, 1 n/a" in text
    assert "per_fig2.py: exit 3" in text and "failed: per_fig2.py" in text
    assert json.loads((out / "per_fig1" / "argv.json").read_text()) == ["--out", str(out / "per_fig1"), "--quick"]
    assert (out / "lap_equivalence" / "manifest.json").exists()  # a failure does not stop the others


def test_all_scripts_succeeding_exit_0_without_quick(tmp_path, monkeypatch, capsys):
    folder = fake_theory(tmp_path, {"per_fig1.py": 0})
    monkeypatch.setattr(demo, "THEORY_DIR", folder)
    out = tmp_path / "r"
    assert demo.main(["--out", str(out), "--no-deep"]) == 0
    assert json.loads((out / "per_fig1" / "argv.json").read_text()) == ["--out", str(out / "per_fig1")]
    text = capsys.readouterr().out
    assert "failed" not in text
    last = text.strip().splitlines()[-1]
    assert "explained in docs/theory/" in last and "per_fig1.py -> docs/theory/per-figures.md" in last


def test_demo_settings_by_default_full_settings_on_request(tmp_path, monkeypatch):
    folder = fake_theory(tmp_path, {name: 0 for name in demo.SCRIPTS})
    monkeypatch.setattr(demo, "THEORY_DIR", folder)
    assert demo.main(["--out", str(tmp_path / "d"), "--no-deep"]) == 0
    assert demo.main(["--out", str(tmp_path / "f"), "--no-deep", "--full"]) == 0
    for name in demo.SCRIPTS:
        stem = name.removesuffix(".py")
        demo_argv = json.loads((tmp_path / "d" / stem / "argv.json").read_text())
        assert demo_argv == ["--out", str(tmp_path / "d" / stem), *demo.DEMO_ARGS[name]], name
        assert json.loads((tmp_path / "f" / stem / "argv.json").read_text()) == ["--out", str(tmp_path / "f" / stem)]


def test_the_order_and_settings_are_the_ones_the_docs_and_each_scripts_help_give():
    """README's table of the demo's scripts lists them in the order run, with the settings passed, and each
    script's --help names the same settings."""
    import re
    import subprocess
    import sys

    readme = (demo.ROOT / "README.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `theory/(\w+\.py)` \| `?([^|`]*)`? \|", readme, flags=re.M)
    assert [(int(k), name) for k, name, _ in rows] == [(k + 1, name) for k, name in enumerate(demo.SCRIPTS)]
    for _, name, shown in rows:
        assert shown.strip() == (" ".join(demo.DEMO_ARGS[name]) or "(full settings)"), name
        help_text = subprocess.run([sys.executable, str(demo.THEORY_DIR / name), "--help"], capture_output=True,
                                   text=True, check=True).stdout  # fmt: skip
        assert demo.settings_note(name) in " ".join(help_text.split()), name


def test_the_deep_half_starts_after_the_first_verdict_and_runs_beside_the_next_scripts(tmp_path, monkeypatch, capsys):
    """The first theory script has the cores to itself (the deep half has not started when it ends), and the
    second finds the deep half running (it waits up to 20 s for it)."""
    marker = tmp_path / "deep-started"
    deep = tmp_path / "deep.py"
    deep.write_text(FAKE.replace("sys.exit(EXIT)", f"open({str(marker)!r}, 'w').close()\nsys.exit(0)"))
    folder = fake_theory(tmp_path, {"per_fig1.py": 0, "lap_equivalence.py": 0})
    alone = FAKE.replace("EXIT", f"3 if os.path.exists({str(marker)!r}) else 0")  # fails if the deep half began
    (folder / "per_fig1.py").write_text("import os\n" + alone)
    waits = (f"import time, os\nfor _ in range(200):\n    if os.path.exists({str(marker)!r}): break\n"
             "    time.sleep(0.1)\n")  # fmt: skip
    beside = FAKE.replace("EXIT", f"0 if os.path.exists({str(marker)!r}) else 3")
    (folder / "lap_equivalence.py").write_text(waits + beside)
    monkeypatch.setattr(demo, "THEORY_DIR", folder)
    monkeypatch.setattr(demo, "DEEP_SCRIPT", deep)
    assert demo.main(["--out", str(tmp_path / "r")]) == 0
    text = capsys.readouterr().out
    assert "per_fig1.py: exit 0" in text and "lap_equivalence.py: exit 0" in text and "deep.py: exit 0" in text
    assert text.index("per_fig1.py: exit 0") < text.index("started beside the theory scripts")


def test_every_script_has_an_existing_explanation_page():
    for name in demo.SCRIPTS:
        assert (demo.ROOT / demo.EXPLAINED[name]).is_file(), name


def test_no_scripts_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo, "THEORY_DIR", tmp_path / "nowhere")
    assert demo.main(["--out", str(tmp_path)]) == 1
    assert "no theory scripts" in capsys.readouterr().out


def test_verdict_counts_without_a_manifest(tmp_path):
    assert "no readable manifest.json" in demo.verdict_counts(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"config": {}}))
    assert demo.verdict_counts(tmp_path) == "no verdict in manifest.json"


def test_quick_demo_end_to_end(quick_demo):
    """Every real script in --quick mode (about 15 s): exit 0 and a manifest whose verdict words are the shared ones."""
    assert quick_demo.code == 0
    tmp_path, text = quick_demo.out, quick_demo.text
    for name in demo.SCRIPTS:
        stem = name.removesuffix(".py")
        rows = json.loads((tmp_path / stem / "manifest.json").read_text())["verdict"]
        assert rows and {r["verdict"] for r in rows} <= {"reproduced", "not reproduced", "n/a"}, stem
        assert f"{name}: exit 0" in text
    deep = tmp_path / "pendulum_demo"
    assert "pendulum_demo.py: exit 0" in text and (deep / "curves.png").exists()
    with open(deep / "curves.csv") as fh:
        assert {line.split(",")[0] for line in fh.readlines()[1:]} == {"uniform", "per"}
    assert "uniform  final return" in text and "per      final return" in text
    log = (tmp_path / "pendulum_demo.log").read_text()  # its standard error: a warning would name an option that
    assert "warning" not in log, log  # the demo's user did not type (the quick runs once drew batches of 256 from 200)



GROUPS_PLUGIN = """
import json, os
def pytest_collection_finish(session):
    groups = {item.nodeid: [m.args[0] for m in item.iter_markers("xdist_group")] for item in session.items}
    uses = {item.nodeid: "quick_demo" in item.fixturenames for item in session.items}
    with open(os.environ["GROUPS_OUT"], "w") as f:
        json.dump({"groups": groups, "uses": uses}, f)
"""


def test_the_tests_sharing_the_quick_demo_run_on_one_worker(tmp_path):
    """``make test`` runs the suite on every core: the tests reading the quick demo are one ``xdist_group``
    (tests/conftest.py), so the demo runs once, not once per worker; a test sharing nothing is in no group."""
    (tmp_path / "groups_plugin.py").write_text(GROUPS_PLUGIN)
    files = ["tests/test_demo.py", "tests/test_pser_theorem.py", "tests/test_lap_equivalence_script.py",
             "tests/test_theory_scripts_per.py", "tests/test_rerun_check.py"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "GROUPS_OUT": str(tmp_path / "groups.json")}
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-qq", "-p", "no:xdist", "-p", "groups_plugin",
                    *files], cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
    found = json.loads((tmp_path / "groups.json").read_text())
    sharing = [node for node, uses in found["uses"].items() if uses]
    assert len(sharing) >= 6
    assert all(found["groups"][node] == ["quick_demo"] for node in sharing)
    trained = [node for node, groups in found["groups"].items() if groups == ["test_rerun_check.trained"]]
    assert len(trained) >= 2 and all("test_rerun_check.py" in node for node in trained)
    alone = "tests/test_demo.py::test_discovery_keeps_the_order_and_lists_missing_scripts"
    assert found["groups"][alone] == []


def test_a_shared_fixture_is_built_once_in_a_real_two_worker_run(tmp_path):
    """The groups matter only if pytest-xdist honours them: in a run on two workers with the suite's own
    ``conftest.py``, six test files asking for one session fixture build it once.  (pytest 9.2 with pytest-xdist
    3.8 built it on both workers: the quick demo ran twice in every ``make test``.)"""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text() + textwrap.dedent("""

        @pytest.fixture(scope="session")
        def shared():
            with open(os.environ["BUILT_LOG"], "a") as log:
                log.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
        """))  # fmt: skip
    body = "import time\n\n\ndef test_shared(shared):\n    time.sleep(0.1)\n"
    body += "".join(f"\n\ndef test_alone_{j}():\n    time.sleep(0.1)\n" for j in range(2))
    for i in range(6):
        (tmp_path / f"test_{i}.py").write_text(body)
    log = tmp_path / "built.log"
    env = {**os.environ, "BUILT_LOG": str(log)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "18 passed" in done.stdout
    assert len(log.read_text().splitlines()) == 1, log.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--steps", "0"], "argument --steps: must be a positive integer, got '0'"),
     (["--steps", "100"], "--steps 100 must exceed the 1000 random steps that start each run"),
     (["--seed", "-1"], "argument --seed: must be a non-negative integer, got '-1'"),
     (["--quick", "--out", "FILE"], "is an existing file, not a folder")],
)
def test_the_demos_deep_half_refuses_bad_options_in_one_line_before_any_run(args, message, tmp_path, capsys):
    """In this process (the quick demo runs the script as a process of its own): its ``main`` exits with 2 and one
    line on stderr, and writes nothing."""
    import runpy

    script = runpy.run_path(str(ROOT / "deep" / "pendulum_demo.py"), run_name="pendulum_demo")
    (tmp_path / "FILE").write_text("")
    out = tmp_path / "out"
    argv = [str(tmp_path / "FILE") if a == "FILE" else a for a in args]
    if "--out" not in argv:
        argv += ["--out", str(out)]
    with pytest.raises(SystemExit) as stop:
        script["main"](argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1 and message in lines[0], lines
    assert not out.exists()
