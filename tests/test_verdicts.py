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
        ("twice", 0.1, 3.0, None, V.INCONCLUSIVE),  # held values above Y's last cannot show X faster
        ("twice", -6.9, 1.4, None, V.INCONCLUSIVE),
        ("equal", -20.5, -7.5, None, V.NOT_REPRODUCED),
        ("equal", 0.2, 5.0, None, V.NOT_REPRODUCED),
        ("equal", -17.7, 6.9, None, V.NOT_TIGHT),
        ("equal", -6.4, 6.4, None, V.TIGHT),
        ("equal", -6.53, 6.0, None, V.NOT_TIGHT),  # beyond LAP's smallest gain over PER, 6.52 %
        ("equal", 0.0, 6.0, None, V.TIGHT),
    ],
)
def test_verdict_follows_the_stated_rule(rule, lo, hi, size, expected):
    assert V.verdict(rule, lo, hi, size) == expected


@pytest.mark.parametrize(
    ("held", "seen", "expected"),
    [
        ((0.1, 3.0), (0.2, 1.0), V.REPRODUCED),
        ((-2.0, 3.0), (0.2, 1.0), V.REPRODUCED),
        ((0.5, 7.6), (-0.95, -0.2), V.NOT_REPRODUCED),  # MinAtar Seaquest's shape: ahead only where Y is held
        ((-1.9, -0.4), (-1.0, 1.0), V.NOT_REPRODUCED),
        ((-1.9, -0.4), (0.2, 1.0), V.INCONCLUSIVE),  # the readings disagree
        ((-1.0, 1.0), (-1.0, 1.0), V.INCONCLUSIVE),
        ((0.1, 3.0), (0.0, 1.0), V.INCONCLUSIVE),  # a lower end equal to 0 holds it
        ((-1.0, 0.0), (-1.0, 1.0), V.INCONCLUSIVE),  # so does an upper end equal to 0, held ...
        ((-1.0, 1.0), (-1.0, 0.0), V.INCONCLUSIVE),  # ... or observed
        ((0.1, 3.0), (float("nan"), float("nan")), V.INCONCLUSIVE),  # no observed window
    ],
)
def test_twice_as_fast_is_shown_only_where_nothing_of_y_is_held(held, seen, expected):
    """A curve read at twice the speed is held at its last value past its end, which understates a Y still
    improving: the held reading can show X less than twice as fast, only the observed window can show it faster.
    On MinAtar Seaquest PER's area led uniform's held reading, [+0.50, +7.55], while over the first half of the
    run, where uniform's doubled curve was observed, PER fell short of it, [-0.95, -0.20]."""
    assert V.verdict("twice", *held, None, seen) == expected


def test_only_twice_takes_an_observed_window():
    with pytest.raises(ValueError, match="takes no observed window"):
        V.verdict("gain_unsized", -1.0, 1.0, None, (0.1, 0.2))
    with pytest.raises(ValueError, match="is not an interval"):
        V.verdict("twice", -1.0, 1.0, None, (0.2, 0.1))


def test_an_end_equal_to_a_bound_holds_it():
    bound = V.EQUALITY_BOUND
    assert V.verdict("equal", -bound, 1.0) == V.NOT_TIGHT
    assert V.verdict("equal", -1.0, bound) == V.NOT_TIGHT
    assert V.verdict("equal", -bound * 0.999, bound * 0.999) == V.TIGHT
    size = V.SIZES["lap_over_uniform"]
    assert V.verdict("gain", -1.0, size, size) == V.INCONCLUSIVE


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
        assert f"+{size:.1f} %" in text, name
    assert f"±{V.EQUALITY_BOUND:.1f} %" in text


def test_the_sizes_are_the_papers_table_cells():
    """Each size from the cells it cites (LAP/PAL Tables 1-2, PSER Table 1), unrounded: a bound rounded up would
    call "not reproduced" an interval that still holds the paper's effect."""
    expected = {"per_over_uniform": 15.24, "pser_over_per": 23.86, "lap_over_uniform": 6.84, "lap_over_per": 6.52,
                "pal_over_uniform": 0.097, "pal_over_per": 3.15, "lap_over_uniform_halfcheetah": 9.33,
                "pal_over_uniform_halfcheetah": 10.62, "pal_over_per_halfcheetah": 7.79}  # fmt: skip
    assert V.SIZES.keys() == expected.keys()
    for name, size in expected.items():
        assert V.SIZES[name] == pytest.approx(size, abs=0.005), name
    assert V.verdict("gain", -5.0, 23.9, V.SIZES["pser_over_per"]) == V.INCONCLUSIVE  # holds 23.86
    assert V.verdict("gain", -5.0, 23.8, V.SIZES["pser_over_per"]) == V.NOT_REPRODUCED


def _copy_study(tmp_path: Path) -> tuple[Path, Path]:
    """The registry, the pages and the reports' CSV files, copied where a test may change them; the registry and
    the summary page."""
    results = tmp_path / "results"
    for line in csv.DictReader(open(REGISTRY, newline="", encoding="utf-8")):
        for name in (f"{V.TABLES[line['table']][0]}.csv", "manifest.json", None):
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
    assert "does not print the interval [-1.00, +95.47] %" in next(iter(problems.values()))
    (study,) = _problems(registry, "minatar_study_long/README.md").values()  # the study's own row, likewise
    assert "does not print the interval [-1.00, +95.47] %" in study
    assert V.verdict("gain", -1.0, 95.47, V.SIZES["per_over_uniform"]) == V.INCONCLUSIVE  # and its verdict changed


def test_a_line_pointed_at_another_games_row_is_caught(tmp_path):
    """The verdicts of the two games agree ("not reproduced"); the interval the row prints does not."""
    registry, page = _copy_study(tmp_path)
    text = registry.read_text(encoding="utf-8")
    old = ('README.md,the same,"DQN, MinAtar SpaceInvaders; same budget",minatar_study,differences,dqn,'
           "MinAtar/SpaceInvaders-v1,per,uniform")
    assert text.count(old) == 1
    registry.write_text(text.replace(old, old.replace("MinAtar/SpaceInvaders-v1", "MinAtar/Breakout-v1")),
                        encoding="utf-8")  # fmt: skip
    (key, problem), = _problems(registry).items()
    assert key.startswith("the same | DQN, MinAtar SpaceInvaders")
    assert problem.startswith("the row does not print the interval [-13.10, +14.28] % of dqn MinAtar/Breakout-v1")


@pytest.mark.parametrize(("text", "lo", "hi", "expected"), [
    ("+1 % [−13, +14]; P 0.58 [0.20, 1.00]", -13.10, 14.28, True),
    ("+10 % [−0.5, +20]", -0.46, 20.40, True),
    ("area [−0.00, +16]", -1.77e-5, 16.2, True),
    ("−6 [−1,002, +991] (−0.1 % [−16, +16])", -1002.4, 990.8, True),
    ("+1 % [−13, +14]", -13.6, 14.28, False),  # −13.6 prints as −14
    ("+1 % [−13, +14]", 13.10, 14.28, False),  # the sign
    ("+1 % (−13, +14)", -13.10, 14.28, False),
])  # fmt: skip
def test_an_interval_is_printed_at_the_decimals_each_end_shows(text, lo, hi, expected):
    assert V.printed(text, lo, hi) is expected


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
    old = "| **reproduced** at this budget (every PER seed ends above every uniform seed); the gain holds after a "
    old += "Bonferroni correction for the eight pairs ([+21 %"
    assert text.count(old) == 1
    page.write_text(text.replace(old, old.replace("at this budget", "at this budget, **not reproduced**")),
                    encoding="utf-8")  # fmt: skip
    (problem,) = _problems(registry).values()
    assert "the row states ['not reproduced'], which no comparison gives" in problem


@pytest.mark.parametrize(("cell", "unread"), [
    ("LAP ends below PER: not reproduced", ["not reproduced"]),
    ("**inconclusive**: the interval holds 0; PSER − uniform reproduced", ["reproduced"]),
    ("**not reproduced** on Breakout; **inconclusive** on SpaceInvaders", []),
    ("consistent with equality, not a tight test; PAL's gain **inconclusive**", []),
    ("**twice as fast: inconclusive**, not excluded", []),
    ("not reproduced: level; a gain above 14 % excluded (inconclusive before)", ["inconclusive"]),
    ("**PER improves on uniform: reproduced**", ["reproduced"]),  # a bold phrase read only where a verdict opens it
    ("(not reproducing Theorem 1's equality)", []),
])  # fmt: skip
def test_a_verdicts_words_are_found_where_no_verdict_is_read(cell, unread):
    assert V.unread(cell) == unread


def test_a_verdict_written_where_it_is_not_read_is_caught(tmp_path):
    """In a row the registry names, and in a new row it does not name, which would otherwise not be a verdict row
    at all and so would never be checked."""
    registry, page = _copy_study(tmp_path)
    text = page.read_text(encoding="utf-8")
    old = "| **not reproduced**: every PAL seed below every LAP seed |"
    assert text.count(old) == 1
    text = text.replace(old, "| **not reproduced**: every PAL seed below every LAP seed (inconclusive at κ 1) |")
    header = "| claim (paper) | setting; budget against the paper's; seeds |"
    assert text.count(header) == 1
    rows = text.split(header, 1)[1].split("\n\n", 1)[0].splitlines()
    new_row = ("| PER improves on uniform (a new row) | DQN, MinAtar Seaquest | +1 % [−1, +3] | — "
               "| PER level: not reproduced |")  # fmt: skip
    text = text.replace(rows[-1], rows[-1] + "\n" + new_row)
    page.write_text(text, encoding="utf-8")
    problems = _problems(registry)
    assert len(problems) == 2, problems
    said = {key.split(" | ")[0]: problem for key, problem in problems.items()}
    assert said["the same, at eps 1e-5"] == ("the verdict cell says 'inconclusive' where no verdict is read: a "
                                            "verdict opens the cell or a bold phrase")  # fmt: skip
    assert said["PER improves on uniform (a new row)"].startswith("the verdict cell says 'not reproduced'")


def test_a_row_without_a_registry_line_is_caught(tmp_path):
    registry, page = _copy_study(tmp_path)
    lines = registry.read_text(encoding="utf-8").splitlines(keepends=True)
    registry.write_text("".join(line for line in lines if ",ners_fig3/sac," not in line), encoding="utf-8")
    problems = _problems(registry)
    assert len(problems) == 3
    assert set(problems.values()) == {"no line of the registry names this row"}


BREAKOUT_SPEED = "**not reproduced** on either game (speed-ups of 1.25× and more excluded on Breakout, 1.2× and more on SpaceInvaders)"  # noqa: E501
"""The committed verdict of PER's "twice as fast" on Breakout and SpaceInvaders, one verdict for both games."""
BREAKOUT_MIXED = ("**not reproduced** on Breakout (speed-ups of 1.25× and more excluded); **inconclusive** on "
                  "SpaceInvaders")  # fmt: skip
"""The same row's verdict where SpaceInvaders' observed window holds 0 (:func:`_mixed_games`), as both games' did
with Y held: the games' verdicts then differ."""


def _mixed_games(tmp_path: Path) -> tuple[Path, Path, str]:
    """A copy of the study (:func:`_copy_study`) in which SpaceInvaders' observed window of PER − uniform at twice
    the speed holds 0, so that the row's two games give different verdicts, which the row states; the registry,
    the summary page and its text."""
    registry, page = _copy_study(tmp_path)
    table = registry.parent / "minatar_study" / "speed.csv"
    rows = list(csv.DictReader(open(table, newline="", encoding="utf-8")))
    (row,) = [r for r in rows if (r["env"], r["sampler"], r["baseline"]) == ("MinAtar/SpaceInvaders-v1", "per",
                                                                            "uniform")]  # fmt: skip
    row["vs_twice_seen_hi"] = "1.0"
    with open(table, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    study = registry.parent / "minatar_study" / "README.md"
    said = "| **not reproduced**: over the first 125k frames PER stays below"
    assert study.read_text(encoding="utf-8").count(said) == 1
    study.write_text(study.read_text(encoding="utf-8").replace(said, "| **inconclusive**: over the first 125k "
                                                                     "frames PER stays below"), encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    assert text.count(f"| {BREAKOUT_SPEED} |") == 1
    text = text.replace(f"| {BREAKOUT_SPEED} |", f"| {BREAKOUT_MIXED} |")
    page.write_text(text, encoding="utf-8")
    assert [problem for *_, problem in V.check(registry) if problem] == []
    return registry, page, text
ASTERIX_LAP = ("**not reproduced** against PER: LAP ends below PER (every LAP seed below every PER seed), though not "
               "after a Bonferroni correction for the eight pairs ([−70 %, +4 %]); against uniform **inconclusive** "
               "(+12 % [−27, +51])")  # fmt: skip
SEAQUEST_LAP = ("**not reproduced** against PER: every LAP seed ends below every PER seed, and the gap holds after a "
                "Bonferroni correction for the eight pairs ([−148 %, −31 %]); against uniform **inconclusive** "
                "(−20 % [−61, +22]): both end near random play, and at κ 1 LAP's draws are close to uniform's (its top "
                "1 % of transitions holds 2 % of the probability)")  # fmt: skip
SEAQUEST_LAP_PAGE = ("**not reproduced** against PER: LAP ends below PER (every LAP seed below every PER seed), and "
                     "still after a Bonferroni correction for the eight pairs ([−148 %, −31 %]); against uniform "
                     "**inconclusive** (−20 % [−61, +22]): LAP ends level with uniform, near random play")  # fmt: skip
HALFCHEETAH_PAL = ("consistent with equality, not a tight test; PAL's gain over uniform (Table 1: +10.6 %) "
                   "**inconclusive**")  # fmt: skip
"""The committed verdict cells whose comparisons give different verdicts."""


def test_rows_whose_comparisons_differ_tie_each_verdict_to_its_comparison():
    """The committed rows whose comparisons give different verdicts: each clause that states a verdict names the
    comparison whose verdict it is (the game, or the baseline, that tells them apart), or names none of them."""
    mixed = {}
    for page, cells, mine, problem in V.check(REGISTRY):
        if len({e.verdict for e in mine}) > 1:
            assert problem == "" and V.untied(cells[-1], mine) == ""
            mixed.setdefault(cells[-1], []).append(page)
            tied = {i: says for _, says, named in V.clauses(cells[-1], mine) for i in named if says}
            for i, entry in enumerate(mine):
                assert tied.get(i, {entry.verdict}) == {entry.verdict}, (page, entry.comparison())
    assert mixed == {ASTERIX_LAP: ["README.md", "minatar_study_long/README.md"], SEAQUEST_LAP: ["README.md"],
                     SEAQUEST_LAP_PAGE: ["minatar_study_long/README.md"], HALFCHEETAH_PAL: ["README.md"]}  # fmt: skip


def _swapped(cell: str) -> str:
    """The cell with its two verdicts swapped, bold or not."""
    first, second = sorted(V.stated(cell), key=cell.index)
    return cell.replace(first, "\0").replace(second, first).replace("\0", second)


ASTERIX_SWAPPED = ("the clause '**inconclusive** against PER: LAP ends below PER (every LAP seed below every PER "
                   "seed), though not after a Bonferroni correction for the eight pairs ([−70 %, +4 %])' states "
                   "['inconclusive'] for dqn MinAtar/Asterix-v1: lap − per, minatar_study_long, whose interval "
                   "[-55.25, -10.66] % gives 'not reproduced'")  # fmt: skip


@pytest.mark.parametrize(
    ("page_name", "old", "message"),
    [
        ("README.md", BREAKOUT_MIXED,
         "the clause '**inconclusive** on Breakout (speed-ups of 1.25× and more excluded)' states ['inconclusive'] "
         "for dqn MinAtar/Breakout-v1: per − uniform (area, against twice the speed), minatar_study, whose "
         "interval [-1.91, -0.43] gives 'not reproduced'"),
        ("README.md", ASTERIX_LAP, ASTERIX_SWAPPED),
        ("minatar_study_long/README.md", ASTERIX_LAP, ASTERIX_SWAPPED),
        ("README.md", HALFCHEETAH_PAL,
         "the clause \"PAL's gain over uniform (Table 1: +10.6 %) **consistent with equality, not a tight test**\" "
         "states ['consistent with equality, not a tight test'] for td3 HalfCheetah-v5: pal − uniform, "
         "lap_halfcheetah, whose interval [-19.80, +13.12] % gives 'inconclusive'"),
    ],
    ids=["games", "baselines", "baselines-on-the-study-page", "a-default-and-a-baseline"],
)  # fmt: skip
def test_verdicts_swapped_between_a_rows_comparisons_are_caught(tmp_path, page_name, old, message):
    """Both verdicts are still stated, so the row states the set its comparisons give; the clause that names a
    comparison states the other's verdict."""
    registry = (_mixed_games(tmp_path) if old == BREAKOUT_MIXED else _copy_study(tmp_path))[0]
    page = registry.parent / page_name
    text = page.read_text(encoding="utf-8")
    new = _swapped(old)
    assert text.count(f"| {old} |") == 1 and new != old and V.stated(new) == V.stated(old)
    page.write_text(text.replace(f"| {old} |", f"| {new} |"), encoding="utf-8")
    ((where, problem),) = [(where, problem) for where, _, _, problem in V.check(registry) if problem]
    assert where == page_name
    assert problem == message


def test_a_clause_that_names_no_comparison_states_the_verdict_of_those_no_clause_names(tmp_path):
    """Breakout's verdict, stated by a clause that names no game, stands for Breakout; it does not excuse a clause
    that names SpaceInvaders with Breakout's verdict."""
    registry, page, text = _mixed_games(tmp_path)
    default = ("**inconclusive** on SpaceInvaders; **not reproduced** at this budget (speed-ups of 1.25× and more "
               "excluded)")  # fmt: skip
    page.write_text(text.replace(f"| {BREAKOUT_MIXED} |", f"| {default} |"), encoding="utf-8")
    assert _problems(registry) == {}
    ((_, _, mine, _),) = [row for row in V.check(registry) if row[1][-1] == default]
    assert [(says, named) for _, says, named in V.clauses(default, mine)] == [({V.INCONCLUSIVE}, [1]),
                                                                             ({V.NOT_REPRODUCED}, [])]  # fmt: skip
    page.write_text(text.replace(f"| {BREAKOUT_MIXED} |", f"| {_swapped(default)} |"), encoding="utf-8")
    (problem,) = _problems(registry).values()
    assert problem.startswith("the clause '**not reproduced** on SpaceInvaders' states ['not reproduced'] for dqn "
                              "MinAtar/SpaceInvaders-v1: per − uniform (area, against twice the speed)")  # fmt: skip


def _entry(env: str, sampler: str, baseline: str, verdict: str) -> V.Entry:
    return V.Entry(0, "README.md", "claim", "", "report", "differences", "dqn", env, sampler, baseline, "gain",
                   "per_over_uniform", lo=-1.0, hi=1.0, verdict=verdict)  # fmt: skip


def test_clauses_name_the_comparisons_by_what_tells_them_apart():
    games = [_entry("MinAtar/Breakout-v1", "per", "uniform", V.NOT_REPRODUCED),
             _entry("MinAtar/SpaceInvaders-v1", "per", "uniform", V.INCONCLUSIVE)]  # fmt: skip
    assert V.names(games) == [("Breakout",), ("SpaceInvaders",)]
    baselines = [_entry("HalfCheetah-v5", "pal", "lap", V.NOT_TIGHT),
                 _entry("HalfCheetah-v5", "pal", "uniform", V.INCONCLUSIVE)]  # fmt: skip
    assert V.names(baselines) == [("LAP",), ("uniform",)]  # not PAL, nor HalfCheetah: both comparisons' own
    both = [_entry("MinAtar/Breakout-v1", "per", "uniform", V.REPRODUCED),
            _entry("HalfCheetah-v5", "lap", "uniform", V.INCONCLUSIVE)]  # fmt: skip
    assert V.names(both) == [("Breakout", "PER"), ("HalfCheetah", "LAP")]
    assert V.names(games[:1]) == [()]
    # whole words, in the pages' case
    assert V.names_in("PER's area", "PER") and V.names_in("on Breakout", "Breakout")
    assert V.names_in("uniform:", "uniform")
    assert not V.names_in("3 runs per seed", "PER") and not V.names_in("Uniform:", "uniform")
    assert not V.names_in("PSER leads", "PER") and not V.names_in("(`lap_halfcheetah/`)", "HalfCheetah")
    assert not V.names_in("SpaceInvaders", "Space") and not V.names_in("LAPs", "LAP")
    cell = ("**not reproduced** on Breakout, PER's area included; twice as fast: **inconclusive** on "
            "SpaceInvaders; both **reproduced** nowhere; Breakout and SpaceInvaders alike")
    assert V.clauses(cell, games) == [
        ("**not reproduced** on Breakout, PER's area included", {V.NOT_REPRODUCED}, [0]),
        ("twice as fast: **inconclusive** on SpaceInvaders", {V.INCONCLUSIVE}, [1]),
        ("both **reproduced** nowhere", {V.REPRODUCED}, []),
        ("Breakout and SpaceInvaders alike", set(), [0, 1]),
    ]
    assert V.untied(cell, games) == ""  # "reproduced", stated for neither, is the set check's to catch
    assert V.untied("inconclusive on Breakout; SpaceInvaders **not reproduced**", games).startswith(
        "the clause 'inconclusive on Breakout' states ['inconclusive'] for dqn MinAtar/Breakout-v1: per − uniform")
    assert V.untied("**not reproduced** on Breakout, **inconclusive** on Pong", games).startswith(
        "the clause '**not reproduced** on Breakout, **inconclusive** on Pong' states ['inconclusive'], which none "
        "of the comparisons it names gives")  # fmt: skip
    assert V.untied("**not reproduced** on Breakout; SpaceInvaders holds 0", games).startswith(
        "no clause that names dqn MinAtar/SpaceInvaders-v1: per − uniform, report, or that names none of the row's "
        "comparisons, states 'inconclusive'")  # fmt: skip
    assert V.untied("**not reproduced**; **inconclusive**", games) == ""  # no clause names a comparison
    assert V.untied("**inconclusive** on Breakout", [games[1], games[1]]) == ""  # one verdict: the set check's


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


def test_the_command_prints_each_verdict_and_fails_on_a_disagreement(tmp_path, capsys, monkeypatch):
    assert cli_main(["verdicts", "--registry", str(REGISTRY)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"dqn MinAtar/Asterix-v1: per − uniform, minatar_study_long: \[\+38\.\d\d, \+95\.\d\d\] %, "
                     r"size \+15\.24 % -> reproduced", out)
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
    monkeypatch.chdir(tmp_path)  # outside the repository, the default registry is not found: said so
    with pytest.raises(SystemExit):
        cli_main(["verdicts"])
    assert "docs/results/verdicts.csv is not a file (the repository's own registry, relative to its root: run " \
        "from there, or give --registry)" in capsys.readouterr().err


def test_a_report_gets_the_verdict_of_each_of_the_papers_comparisons(tmp_path, capsys):
    """``--report``: the rule on any report's CSV files, as the results pages judge each pair: an environment's own
    sizes where LAP/PAL Table 1 gives them, and on continuous control PER − uniform as NERS's claim that PER does
    worse, with no "twice as fast"; the committed reports give the verdicts their pages state."""
    found = {(e.env, e.sampler, e.baseline, e.table): (e.rule, e.size, e.verdict)
             for e in V.report_verdicts(REGISTRY.parent / "lap_halfcheetah")}  # fmt: skip
    assert found[("HalfCheetah-v5", "lap", "uniform", "differences")] == ("gain", "lap_over_uniform_halfcheetah",
                                                                          V.INCONCLUSIVE)  # fmt: skip
    assert found[("HalfCheetah-v5", "per", "uniform", "differences")] == ("loss_unsized", "", V.INCONCLUSIVE)
    assert found[("HalfCheetah-v5", "pal", "lap", "differences")] == ("equal", "", V.NOT_TIGHT)
    assert len(found) == 6 and not any(table == "speed" for *_, table in found)  # no "twice as fast" on MuJoCo
    sac = {(e.sampler, e.baseline): e.verdict for e in V.report_verdicts(REGISTRY.parent / "ners_fig3" / "sac")}
    assert sac == {("ners", "uniform"): V.INCONCLUSIVE, ("per", "uniform"): V.INCONCLUSIVE,
                   ("ners", "per"): V.INCONCLUSIVE}  # fmt: skip
    long = {(e.env, e.sampler, e.baseline, e.table): e.verdict
            for e in V.report_verdicts(REGISTRY.parent / "minatar_study_long")}  # fmt: skip
    assert long[("MinAtar/Asterix-v1", "per", "uniform", "differences")] == V.REPRODUCED
    assert long[("MinAtar/Freeway-v1", "pser", "per", "differences")] == V.NOT_REPRODUCED
    assert long[("MinAtar/Asterix-v1", "per", "uniform", "speed")] == V.NOT_REPRODUCED  # the observed window's
    assert long[("MinAtar/Freeway-v1", "per", "uniform", "speed")] == V.INCONCLUSIVE
    # a row whose interval is undefined is named with no verdict; a folder that is not a report is named
    report = tmp_path / "report"
    report.mkdir()
    shutil.copyfile(REGISTRY.parent / "lap_halfcheetah" / "manifest.json", report / "manifest.json")
    for name in ("differences.csv", "speed.csv"):
        text = (REGISTRY.parent / "lap_halfcheetah" / name).read_text(encoding="utf-8")
        if name == "differences.csv":
            head, first, *rest = text.splitlines(keepends=True)
            cells = first.rstrip("\r\n").split(",")
            cells[6:12] = ["nan"] * 6  # the lap − uniform row's interval, undefined
            text = "".join([head, ",".join(cells) + "\r\n", *rest])
        (report / name).write_text(text, encoding="utf-8")
    verdicts = {(e.sampler, e.baseline): e.verdict for e in V.report_verdicts(report)}
    assert verdicts[("lap", "uniform")] == "" and len(verdicts) == 6
    assert cli_main(["verdicts", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "td3 HalfCheetah-v5: pal − lap: [-21.94, +15.45] % -> consistent with equality, not a tight test" in out
    assert "td3 HalfCheetah-v5: lap − uniform: the interval is undefined (no spread on either side): no verdict" in out
    with pytest.raises(SystemExit):
        cli_main(["verdicts", "--report", str(report), "--registry", str(REGISTRY)])
    assert "give one of them" in capsys.readouterr().err
    cut = (report / "speed.csv").read_bytes()
    (report / "speed.csv").write_bytes(cut[: cut.rindex(b",")])  # a file cut while written
    with pytest.raises(ValueError, match=r"speed.csv: row \d+ is truncated"):
        V.report_verdicts(report)
    (report / "speed.csv").unlink()
    with pytest.raises(SystemExit):
        cli_main(["verdicts", "--report", str(report)])
    assert f"{report} holds no speed.csv: is it a prioritylab report?" in capsys.readouterr().err
    (report / "manifest.json").unlink()
    with pytest.raises(SystemExit):
        cli_main(["verdicts", "--report", str(report)])
    assert f"{report} holds no manifest.json: is it a prioritylab report?" in capsys.readouterr().err


def _with_column(path: Path, name: str, values: dict[int, str]) -> None:
    """``path``'s CSV with a last column ``name``: ``values`` by row (from 0), "0" elsewhere."""
    head, *rows = path.read_text(encoding="utf-8").splitlines()
    rows = [f"{row},{values.get(i, '0')}" for i, row in enumerate(rows)]
    path.write_text("\r\n".join([f"{head},{name}", *rows]) + "\r\n", encoding="utf-8")


def _report_copy(tmp_path: Path, study: str = "lap_halfcheetah") -> Path:
    report = tmp_path / "report"
    report.mkdir()
    for name in ("differences.csv", "speed.csv", "manifest.json"):
        shutil.copyfile(REGISTRY.parent / study / name, report / name)
    return report


def test_a_report_row_from_partial_runs_gets_no_verdict(tmp_path, capsys):
    """A report made with ``--include-partial`` ends each row with ``partial_runs``: a row computed from partial runs
    gets no verdict and says why, the others theirs; the registry refuses such a row in one line."""
    from prioritylab.harness.report.stats import PARTIAL_RUNS

    report = _report_copy(tmp_path)
    first = next(csv.DictReader(open(report / "differences.csv", newline="", encoding="utf-8")))
    assert (first["sampler"], first["baseline"]) == ("lap", "uniform")
    _with_column(report / "differences.csv", PARTIAL_RUNS, {0: "3"})
    _with_column(report / "speed.csv", PARTIAL_RUNS, {})
    found = {(e.sampler, e.baseline): (e.verdict, e.withheld) for e in V.report_verdicts(report)}
    assert found[("lap", "uniform")] == ("", "computed from 3 partial runs (--include-partial): a verdict is given "
                                             "on finished runs only")  # fmt: skip
    assert found[("pal", "lap")] == (V.NOT_TIGHT, "") and len(found) == 6
    assert cli_main(["verdicts", "--report", str(report)]) == 0
    assert ("td3 HalfCheetah-v5: lap − uniform: computed from 3 partial runs (--include-partial): a verdict is given "
            "on finished runs only: no verdict") in capsys.readouterr().out  # fmt: skip
    registry, _ = _copy_study(tmp_path / "copy")
    table = registry.parent / "minatar_study_long" / "differences.csv"
    rows = list(csv.DictReader(open(table, newline="", encoding="utf-8")))
    at = next(i for i, row in enumerate(rows) if (row["env"], row["sampler"], row["baseline"])
              == ("MinAtar/Asterix-v1", "per", "uniform"))  # fmt: skip
    _with_column(table, PARTIAL_RUNS, {at: "1"})
    with pytest.raises(ValueError, match=r"'MinAtar/Asterix-v1', 'sampler': 'per', 'baseline': 'uniform'} is "
                                         r"computed from 1 partial run: a verdict is given on finished runs only"):
        V.read_registry(registry)
    text = table.read_text(encoding="utf-8")
    assert f",{PARTIAL_RUNS}\n" in text  # newlines read as "\n"
    table.write_text(text.replace(f",{PARTIAL_RUNS}\n", ",other\n", 1), encoding="utf-8")
    assert V.read_registry(registry)  # the same row under a column of another name: not read


def test_a_report_made_with_partial_runs_needs_its_partial_runs_column(tmp_path):
    """A report whose manifest records ``include_partial`` writes ``partial_runs`` in every CSV; one without it (a
    file edited or replaced by hand) cannot say which rows rest on partial runs, so it is refused, by ``--report``
    and by the registry, rather than read as computed from finished runs."""
    import json

    report = _report_copy(tmp_path)
    record = json.loads((report / "manifest.json").read_text())
    assert record["config"]["include_partial"] is False and V.report_verdicts(report)
    record["config"]["include_partial"] = True
    (report / "manifest.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"differences.csv has no partial_runs column, though its report's "
                                         r"manifest.json records include_partial: true"):
        V.report_verdicts(report)
    registry, _ = _copy_study(tmp_path / "copy")
    manifest = registry.parent / "lap_halfcheetah" / "manifest.json"
    manifest.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"lap_halfcheetah\S+differences.csv has no partial_runs column"):
        V.read_registry(registry)
    record["config"] = None  # a manifest without its settings: read as a report of finished runs, no traceback
    (report / "manifest.json").write_text(json.dumps(record))
    assert V.report_verdicts(report)


def test_a_report_that_left_runs_out_is_named_and_refused_by_the_registry(tmp_path, capsys):
    """A run the report found and left out (corrupt, partial...) is named with the verdicts of ``--report``, which
    rest on the other runs; the registry refuses such a report.  The reference runs of an ``--against`` report,
    used in ``versus.md`` only, are not counted."""
    import json

    report = _report_copy(tmp_path)
    record = json.loads((report / "manifest.json").read_text())
    record["not_used"] = [{"folder": "a", "status": "corrupt"}, {"folder": "b", "status": "partial, left out"},
                          {"folder": "c", "status": "corrupt"},
                          {"folder": "d", "status": "reference (x), in versus.md only"}]  # fmt: skip
    (report / "manifest.json").write_text(json.dumps(record))
    assert V.left_out(report) == "3 runs (corrupt: 2; partial, left out: 1)"
    assert cli_main(["verdicts", "--report", str(report)]) == 0
    assert ("note: this report left out 3 runs (corrupt: 2; partial, left out: 1) (its status.md names them): the "
            "verdicts below rest on the other runs") in capsys.readouterr().out  # fmt: skip
    registry, _ = _copy_study(tmp_path / "copy")
    manifest = registry.parent / "lap_halfcheetah" / "manifest.json"
    record = json.loads(manifest.read_text())
    record["not_used"] = [{"folder": "a", "status": "corrupt"}]
    manifest.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"the report \S+lap_halfcheetah left out 1 run \(corrupt: 1\), so its rows "
                                         r"rest on fewer runs than were made"):
        V.read_registry(registry)
    assert V.left_out(REGISTRY.parent / "minatar_lap_eps") == ""  # its reference runs only


def test_a_baseline_mean_of_zero_is_named_as_the_reason_for_no_verdict(tmp_path):
    """An interval in % of a baseline whose mean is 0 is NaN while the absolute one is not: named as such, not as
    "no spread"."""
    report = _report_copy(tmp_path)
    head, first, *rest = (report / "differences.csv").read_text(encoding="utf-8").splitlines()
    columns = head.split(",")
    cells = dict(zip(columns, first.split(","), strict=True))
    cells.update(pct="nan", pct_lo="nan", pct_hi="nan", lo="-3.5", hi="1.25")
    lines = [head, ",".join(cells[c] for c in columns), *rest]
    (report / "differences.csv").write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    [entry] = [e for e in V.report_verdicts(report) if (e.sampler, e.baseline) == ("lap", "uniform")]
    assert entry.verdict == "" and entry.withheld == ("uniform's mean is 0, so the interval [-3.50, +1.25] has no "
                                                      "form in % of it")  # fmt: skip
    cells.update(lo="nan", hi="nan")
    lines = [head, ",".join(cells[c] for c in columns), *rest]
    (report / "differences.csv").write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    [entry] = [e for e in V.report_verdicts(report) if (e.sampler, e.baseline) == ("lap", "uniform")]
    assert entry.withheld == "the interval is undefined (no spread on either side)"


@pytest.mark.parametrize("kept", ["README.md", "minatar_lap_eps/README.md"])
def test_a_registry_cut_at_a_pages_boundary_is_refused_naming_the_page(tmp_path, capsys, kept):
    """A cut inside a page's lines leaves a row no line names; a cut at a page's boundary leaves a page the registry
    no longer names, which must be found all the same: the summary's lines alone, or a study page's lines gone."""
    registry, page = _copy_study(tmp_path)
    lines = registry.read_text(encoding="utf-8").splitlines(keepends=True)
    if kept == "README.md":
        lines = [lines[0], *(line for line in lines[1:] if line.startswith("README.md,"))]
        gone = registry.parent / "lap_halfcheetah" / "README.md"  # the first page left without its lines
    else:
        lines = [line for line in lines if not line.startswith(f"{kept},")]
        gone = registry.parent / kept
    registry.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"no line names the page {gone}, which has")):
        V.check(registry)
    with pytest.raises(SystemExit) as stop:
        cli_main(["verdicts", "--registry", str(registry)])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and f"the page {gone}, which has" in err[0]


def test_the_study_page_without_registry_lines_is_only_ners_table_3s():
    """The one page with verdict rows that the check lets stand without lines is NERS Table 3's."""
    assert V.unnamed_pages(REGISTRY, V.read_registry(REGISTRY)) == []
    assert [page for page in V.UNREGISTERED_PAGES if V.page_rows(REGISTRY.parent / page)] == list(V.UNREGISTERED_PAGES)
