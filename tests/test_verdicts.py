"""``prioritylab verdicts``: the stated rule in code, and every verdict on the results pages worked out from the
reports' CSV files."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

from prioritylab.cli import main as cli_main
from prioritylab.harness.report import verdicts as V

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / V.REGISTRY
PAGE = REGISTRY.parent / "README.md"


@pytest.mark.parametrize(
    ("rule", "lo", "hi", "size", "expected"),
    [
        ("gain", 0.01, 30.0, 15.0, V.REPRODUCED),
        ("gain", 0.0, 30.0, 15.0, V.INCONCLUSIVE),  # a lower end equal to 0 holds it
        ("gain", -10.0, 15.0, 15.0, V.INCONCLUSIVE),  # an upper end equal to the size holds it
        ("gain", -10.0, 14.99, 15.0, V.NOT_REPRODUCED),
        ("gain", -90.0, -50.0, 6.5, V.NOT_REPRODUCED),
        ("gain_unsized", 0.5, 2.0, None, V.REPRODUCED),
        ("gain_unsized", -0.5, 2.0, None, V.INCONCLUSIVE),
        ("gain_unsized", -2.0, -0.5, None, V.NOT_REPRODUCED),
        ("gain_unsized", -2.0, 0.0, None, V.INCONCLUSIVE),
        ("loss_unsized", -2.0, -0.5, None, V.REPRODUCED),
        ("loss_unsized", 0.5, 2.0, None, V.NOT_REPRODUCED),
        ("loss_unsized", -2.0, 0.0, None, V.INCONCLUSIVE),
        ("twice", -1.9, -0.4, None, V.NOT_REPRODUCED),
        ("twice", 0.1, 3.0, None, V.REPRODUCED),
        ("twice", -6.9, 1.4, None, V.INCONCLUSIVE),
        ("equal", -20.5, -7.5, None, V.NOT_REPRODUCED),
        ("equal", 0.2, 5.0, None, V.NOT_REPRODUCED),
        ("equal", -17.7, 6.9, None, V.NOT_TIGHT),
        ("equal", -6.4, 6.4, None, V.TIGHT),
        ("equal", -6.5, 6.0, None, V.NOT_TIGHT),  # an end equal to the bound holds it
        ("equal", 0.0, 6.0, None, V.TIGHT),
    ],
)
def test_verdict_follows_the_stated_rule(rule, lo, hi, size, expected):
    assert V.verdict(rule, lo, hi, size) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("gains", -1.0, 1.0, None), "unknown rule 'gains'"),
        (("gain", -1.0, 1.0, None), "takes a size"),
        (("equal", -1.0, 1.0, 6.5), "takes no size"),
        (("twice", 1.0, -1.0, None), "is not an interval"),
        (("twice", float("nan"), 1.0, None), "is not an interval"),
    ],
)
def test_verdict_refuses_what_it_cannot_judge(args, message):
    with pytest.raises(ValueError, match=message):
        V.verdict(*args)


def test_every_verdict_on_the_results_pages_follows_from_the_reports():
    result = V.check(REGISTRY)
    assert [(page, cells[0], problem) for page, cells, _, problem in result if problem] == []
    summary = [cells for page, cells, _, _ in result if page == "README.md"]
    assert len(summary) >= 34
    unnamed = [cells[0] for _, cells, mine, _ in result if not mine]
    assert unnamed == [cells[0] for _, cells, _, _ in result if V.exempt(cells)]
    assert len(unnamed) == 3  # NERS Table 3's rows on the summary, judged on their study page


def test_every_page_with_verdicts_is_checked():
    """A study page with a verdict row is named in the registry, but NERS Table 3's, which compares with the
    table's own values."""
    named = {line["page"] for line in csv.DictReader(open(REGISTRY, newline="", encoding="utf-8"))}
    with_verdicts = {str(page.relative_to(REGISTRY.parent)) for page in REGISTRY.parent.rglob("README.md")
                     if V.page_rows(page)}  # fmt: skip
    assert with_verdicts - named == {"sac_pendulum_table3/README.md"}
    assert named <= with_verdicts


def test_the_page_states_the_sizes_the_rule_uses():
    text = PAGE.read_text(encoding="utf-8").split(V.PAGE_SECTION, 1)[1].split("\n| ", 1)[0]
    text = " ".join(text.split())
    for name, size in V.SIZES.items():
        assert f"+{size:g} %" in text, name
    assert f"±{V.EQUALITY_BOUND:g} %" in text


def _copy_study(tmp_path: Path) -> tuple[Path, Path]:
    """The registry, the pages and the reports' CSV files, copied where a test may change them; the registry and
    the summary page."""
    results = tmp_path / "results"
    for line in csv.DictReader(open(REGISTRY, newline="", encoding="utf-8")):
        for name in (f"{V.TABLES[line['table']][0]}.csv", None):
            source = REGISTRY.parent / line["report"] / name if name else REGISTRY.parent / line["page"]
            target = results / source.relative_to(REGISTRY.parent)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    shutil.copyfile(REGISTRY, results / REGISTRY.name)
    return results / REGISTRY.name, results / PAGE.name


def _problems(registry: Path, page: str = "README.md") -> dict[str, str]:
    return {f"{cells[0]} | {cells[1]}": problem for where, cells, _, problem in V.check(registry)
            if problem and where == page}  # fmt: skip


def test_a_changed_interval_is_caught(tmp_path):
    registry, page = _copy_study(tmp_path)
    table = registry.parent / "minatar_study_long" / "differences.csv"
    rows = list(csv.DictReader(open(table, newline="", encoding="utf-8")))
    for row in rows:  # PER's Asterix gain, whose interval [+38, +95] gives "reproduced", made to hold 0
        if (row["env"], row["sampler"], row["baseline"]) == ("MinAtar/Asterix-v1", "per", "uniform"):
            row["pct_lo"] = "-1.0"
    with open(table, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    problems = _problems(registry)
    assert list(problems) == [next(k for k in problems if "MinAtar Asterix; 600k frames, 12 %" in k
                                   and k.startswith("the same, later in training"))]
    assert "gives ['inconclusive'], which the row does not state" in next(iter(problems.values()))
    (study,) = _problems(registry, "minatar_study_long/README.md").values()  # the study's own row, likewise
    assert "gives ['inconclusive'], which the row does not state" in study


def test_a_changed_verdict_on_the_page_is_caught(tmp_path):
    registry, page = _copy_study(tmp_path)
    text = page.read_text(encoding="utf-8")
    old = "| **not reproduced**: every PAL seed below every LAP seed |"
    assert text.count(old) == 1
    page.write_text(text.replace(old, "| **inconclusive**: every PAL seed below every LAP seed |"), encoding="utf-8")
    problems = _problems(registry)
    assert len(problems) == 1
    (key, problem), = problems.items()
    assert key.startswith("the same, at eps 1e-5 | DQN, MinAtar Breakout; 5 seeds")
    assert "the rule gives ['not reproduced']" in problem


def test_a_stated_verdict_no_comparison_gives_is_caught(tmp_path):
    registry, page = _copy_study(tmp_path)
    text = page.read_text(encoding="utf-8")
    old = "| **reproduced** at this budget (every PER seed ends above every uniform seed);"
    assert text.count(old) == 1
    page.write_text(text.replace(old, "| **reproduced** at this budget, **not reproduced** (every PER seed ends "
                                      "above every uniform seed);"), encoding="utf-8")  # fmt: skip
    (problem,) = _problems(registry).values()
    assert "the row states ['not reproduced'], which no comparison gives" in problem


def test_a_row_without_a_registry_line_is_caught(tmp_path):
    registry, page = _copy_study(tmp_path)
    lines = registry.read_text(encoding="utf-8").splitlines(keepends=True)
    registry.write_text("".join(line for line in lines if ",ners_fig3/sac," not in line), encoding="utf-8")
    problems = _problems(registry)
    assert len(problems) == 3
    assert set(problems.values()) == {"no line of the registry names this row"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ((",minatar_study,differences,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_uniform",
          ",minatar_study,differences,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_everything"),
         "line 2: the rule 'gain' needs a size"),
        ((",minatar_study,differences,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_uniform",
          ",minatar_study,differences,dqn,MinAtar/Breakout-v1,per,random,gain,per_over_uniform"),
         "line 2: 0 rows of .*differences.csv are"),
        ((",minatar_study,differences,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_uniform",
          ",minatar_study,speed,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_uniform"),
         "line 2: the rule 'twice' reads the table 'speed', and only it does"),
        ((",minatar_study,differences,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_uniform",
          ",minatar_studies,differences,dqn,MinAtar/Breakout-v1,per,uniform,gain,per_over_uniform"),
         "line 2: no .*minatar_studies/differences.csv"),
        (('"DQN, MinAtar Breakout; 250k frames"', '"DQN, MinAtar Pong; 250k frames"'),
         "line 2: no verdict row of .*README.md from the previous line's on .* holds 'DQN, MinAtar Pong; 250k "
         "frames'"),
        ((",twice,\n", ",twice,15\n"), "the rule 'twice' takes no size"),
    ],
)
def test_a_bad_registry_line_is_named(tmp_path, change, message):
    registry, page = _copy_study(tmp_path)
    text = registry.read_text(encoding="utf-8")
    old, new = change
    assert old in text
    registry.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        V.check(registry)


def test_registry_lines_follow_the_page_order(tmp_path):
    """A line names the first matching row at or after the previous line's row of its page, so two rows with the
    same cells (the TD3 and the SAC "NERS outperforms PER (same) | the same") are told apart by order; a line out
    of order names no row."""
    registry, page = _copy_study(tmp_path)
    lines = registry.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.startswith("README.md,"))  # the summary's last row's
    moved = lines.pop(last)
    registry.write_text("".join([lines[0], moved, *lines[1:]]), encoding="utf-8")
    with pytest.raises(ValueError, match="line 3: no verdict row"):
        V.check(registry)


def test_the_command_prints_each_verdict_and_fails_on_a_disagreement(tmp_path, capsys):
    assert cli_main(["verdicts", "--registry", str(REGISTRY)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"dqn MinAtar/Asterix-v1: per − uniform, minatar_study_long: \[\+38\.\d\d, \+95\.\d\d\] %, "
                     r"size \+15 % -> reproduced", out)
    assert out.rstrip().endswith(" comparisons, 0 disagreeing")
    registry, page = _copy_study(tmp_path)
    page.write_text(page.read_text(encoding="utf-8").replace(
        "| **not reproduced**: every PAL seed below every LAP seed |", "| **reproduced** |"), encoding="utf-8")
    assert cli_main(["verdicts", "--registry", str(registry)]) == 1
    out = capsys.readouterr().out
    assert "DISAGREES: the rule gives ['not reproduced'], which the row does not state" in out
    assert out.rstrip().endswith(", 1 disagreeing")
    with pytest.raises(SystemExit) as stop:
        cli_main(["verdicts", "--registry", str(tmp_path / "nothing.csv")])
    assert stop.value.code != 0
    assert f"--registry {tmp_path / 'nothing.csv'} is not a file" in capsys.readouterr().err


def test_a_report_gets_the_verdict_of_each_of_the_papers_comparisons(tmp_path, capsys):
    """``--report``: the rule on any report's CSV files, with an environment's own sizes where LAP/PAL Table 1
    gives them; the committed reports give the verdicts their pages state."""
    found = {(e.env, e.sampler, e.baseline, e.table): (e.size, e.verdict)
             for e in V.report_verdicts(REGISTRY.parent / "lap_halfcheetah")}  # fmt: skip
    assert found[("HalfCheetah-v5", "lap", "uniform", "differences")] == ("lap_over_uniform_halfcheetah",
                                                                          V.INCONCLUSIVE)  # fmt: skip
    assert found[("HalfCheetah-v5", "per", "uniform", "differences")] == ("per_over_uniform_halfcheetah",
                                                                          V.NOT_REPRODUCED)  # fmt: skip
    assert found[("HalfCheetah-v5", "pal", "lap", "differences")] == ("", V.NOT_TIGHT)
    assert found[("HalfCheetah-v5", "per", "uniform", "speed")] == ("", V.NOT_REPRODUCED)
    assert len(found) == 7  # six pairs of the papers' claims and PER's speed
    long = {(e.env, e.sampler, e.baseline, e.table): e.verdict
            for e in V.report_verdicts(REGISTRY.parent / "minatar_study_long")}  # fmt: skip
    assert long[("MinAtar/Asterix-v1", "per", "uniform", "differences")] == V.REPRODUCED
    assert long[("MinAtar/Freeway-v1", "pser", "per", "differences")] == V.NOT_REPRODUCED
    # a row whose interval is undefined is left out; a folder that is not a report is named
    report = tmp_path / "report"
    report.mkdir()
    for name in ("differences.csv", "speed.csv"):
        text = (REGISTRY.parent / "lap_halfcheetah" / name).read_text(encoding="utf-8")
        if name == "differences.csv":
            head, first, *rest = text.splitlines(keepends=True)
            cells = first.rstrip("\r\n").split(",")
            cells[6:12] = ["nan"] * 6  # the lap − uniform row's interval, undefined
            text = "".join([head, ",".join(cells) + "\r\n", *rest])
        (report / name).write_text(text, encoding="utf-8")
    left = {(e.sampler, e.baseline, e.table) for e in V.report_verdicts(report)}
    assert ("lap", "uniform", "differences") not in left and len(left) == 6
    assert cli_main(["verdicts", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "td3 HalfCheetah-v5: pal − lap: [-21.94, +15.45] % -> consistent with equality, not a tight test" in out
    cut = (report / "speed.csv").read_bytes()
    (report / "speed.csv").write_bytes(cut[: cut.rindex(b",")])  # a file cut while written
    with pytest.raises(ValueError, match=r"speed.csv: row \d+ is truncated"):
        V.report_verdicts(report)
    (report / "speed.csv").unlink()
    with pytest.raises(SystemExit):
        cli_main(["verdicts", "--report", str(report)])
    assert f"{report} holds no speed.csv: is it a prioritylab report?" in capsys.readouterr().err
