"""``prioritylab verdicts``: each claim's verdict, worked out from the reports' CSV files by the stated rule.

The results pages give one row per claim of a paper in one setting, with a verdict: the summary
(``docs/results/README.md``, section "Verdicts, claim by claim") and each study's own page
(``docs/results/<study>/README.md``).  The rule that turns an interval into a verdict is stated on the summary;
this module is that rule in code (:func:`verdict`), the sizes of the effects the papers report (:data:`SIZES`),
and a check that every verdict on those pages follows from the unrounded intervals in the reports' CSV files.

The comparisons are listed in a registry, ``docs/results/verdicts.csv``, one line per comparison, each page's
lines in its row order (a row that states two comparisons has two lines).  Its columns:

* ``page``: the page, relative to the registry's folder;
* ``claim``: the row's first cell, exactly; ``setting``: a part of the row (empty: any).  A line belongs to the
  first row of its page, at or after the previous line's row there, whose claim is ``claim`` and which holds
  ``setting``;
* ``report``: the report folder, relative to the registry's folder; ``table``: :data:`TABLES`, the final scores
  (``differences``), the areas under the learning curves (``area``) or the areas against twice the speed
  (``speed``, for "twice as fast");
* ``agent``, ``env``, ``sampler``, ``baseline``: the CSV row, X = ``sampler`` against Y = ``baseline``;
* ``rule`` (:data:`RULES`) and ``size``, a key of :data:`SIZES` for the rule ``gain``, empty otherwise.

``prioritylab verdicts --report DIR`` applies the same rule to any report: each of the papers' comparisons in
its ``differences.csv`` and ``speed.csv`` (:data:`PAPER_CLAIMS`), with the general sizes, or an environment's own
where LAP/PAL Table 1 gives them (:data:`OWN_SIZES`).

A page's rows are the rows of its tables whose last cell states a verdict (:func:`stated`: in its opening words or
in a bold phrase that begins with one).  A verdict's words anywhere else in that cell fail the row
(:func:`unread`), so that no verdict is written where the check would not read it.  Each line's interval
must be printed in its row, at the decimals the row shows (:func:`printed`), so that a line pointed at another
game's CSV row fails, and the row must state the verdicts its comparisons give and no other.  Where a row's
comparisons give different verdicts, each verdict must be tied to its comparison (:func:`untied` names one that is
not): the cell's clauses, its parts between ``;``, name the comparisons by what tells them apart (the game, the
sampler or the baseline, :func:`names`); a clause that names comparisons and states verdicts states theirs and no
other, and each comparison's verdict is stated by a clause that names it or by one that names none of the row's.
Each row must be named by a line of the registry, but for NERS Table 3's rows, which compare with the table's own
values on their study page (``sac_pendulum_table3/``, whose page the registry does not name), and every other
Markdown page under the registry's folder that has verdict rows must have lines in the registry: the pages are found
there, so that a registry cut at a page's boundary does not pass.  An interval lies
above a bound when its lower end is above it: an end equal to the bound holds it.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...results import NotWhole, whole_rows
from ...verdict import NOT_REPRODUCED, REPRODUCED

REGISTRY = Path("docs/results/verdicts.csv")
"""The registry's place in the repository."""

PAGE_SECTION = "## Verdicts, claim by claim"
"""The heading of the page's section whose table the verdicts are checked against."""

UNREGISTERED_PAGES = ("sac_pendulum_table3/README.md",)
"""The pages, relative to the registry's folder, whose verdict rows no line of the registry names: NERS Table 3's
study page, whose rows compare with the table's own values, not with a report's interval.  Every other page under
the registry's folder with a verdict row must have its lines (:func:`unnamed_pages`)."""


def _gain(x: float, y: float) -> float:
    """The % gain of a score ``x`` over ``y``, (x - y) / |y| (LAP/PAL Table 2's definition)."""
    return 100 * (x - y) / abs(y)


SIZES: dict[str, float] = {
    # LAP/PAL Table 2: Double DQN + PER over Double DQN, the median % gain over its 10 Atari games (the mean is +37.65)
    "per_over_uniform": 15.24,
    # PSER Table 1: median human-normalised score 109 % against PER's 88 %
    "pser_over_per": _gain(109, 88),
    # LAP/PAL Table 1, the smallest gain of TD3 + LAP over TD3 where LAP gains (Ant)
    "lap_over_uniform": _gain(6912.6, 6469.9),
    # LAP/PAL Table 1, the smallest gain of TD3 + LAP over TD3 + PER (HalfCheetah)
    "lap_over_per": _gain(14836.5, 13927.8),
    # the same reading of Table 1 for PAL: its smallest gains over TD3 and over TD3 + PER where it gains (both Ant)
    "pal_over_uniform": _gain(6476.2, 6469.9),
    "pal_over_per": _gain(6476.2, 6278.7),
    # LAP/PAL Table 1, HalfCheetah's own: TD3 + LAP and TD3 + PAL over TD3, and TD3 + PAL over TD3 + PER (LAP over
    # PER there is lap_over_per)
    "lap_over_uniform_halfcheetah": _gain(14836.5, 13570.9),
    "pal_over_uniform_halfcheetah": _gain(15012.2, 13570.9),
    "pal_over_per_halfcheetah": _gain(15012.2, 13927.8),
}
"""The size of each claimed effect, in % of Y's mean final score: the smallest a paper reports for the claim,
computed from the paper's table cells (the pages state them to 0.1 %)."""

EQUALITY_BOUND = SIZES["lap_over_per"]
""""PAL matches LAP" is a tight test only where the whole interval of PAL − LAP lies within ±this % of LAP's
score: it then excludes a difference as large as LAP's smallest claimed gain."""

RULES = {
    "gain": "X improves on Y by the size: reproduced above 0, not reproduced below the size, else inconclusive",
    "gain_unsized": "X improves on Y, no size given: reproduced above 0, not reproduced below 0, else inconclusive",
    "loss_unsized": "X does worse than Y, no size given: reproduced below 0, not reproduced above 0, else "
                    "inconclusive",
    "twice": "X learns twice as fast as Y (X − Y read at twice the speed, on the areas under the curves): "
             "reproduced where the interval over the observed window (up to half of Y's last step, nothing of Y "
             "held) lies above 0, not reproduced where it or the whole run's (Y held at its last value beyond its "
             "end) lies below 0, else inconclusive (and where they disagree)",
    "equal": "X matches Y: not reproduced where the interval excludes 0, else consistent with equality, a tight "
             f"test where it lies within ±{EQUALITY_BOUND:.1f} % of Y's score",
}
"""The rules, by name (the page states them in words)."""

INCONCLUSIVE = "inconclusive"
TIGHT, NOT_TIGHT = "consistent with equality, a tight test", "consistent with equality, not a tight test"
VERDICTS = (NOT_REPRODUCED, REPRODUCED, INCONCLUSIVE, NOT_TIGHT, TIGHT)
"""The words of a deep-study verdict: the theory scripts' two (:mod:`prioritylab.verdict`), and the ones an
interval that holds a bound gives."""


def verdict(rule: str, lo: float, hi: float, size: float | None = None,
            seen: tuple[float, float] | None = None) -> str:
    """The verdict of an interval ``[lo, hi]`` of X − Y under ``rule`` (:data:`RULES`); ``size``, for ``gain``, in
    the interval's units.  An end equal to a bound holds it.  ``seen``, for ``twice`` only: the interval over the
    observed window (``[lo, hi]`` is then the whole run's, with Y held beyond its end); without it (or with NaN
    ends) nothing shows X faster, and ``twice`` gives at best "inconclusive"."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; the rules are {', '.join(RULES)}")
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"[{lo}, {hi}] is not an interval")
    if (rule == "gain") != (size is not None):
        raise ValueError(f"the rule {rule!r} " + ("takes a size" if rule == "gain" else "takes no size"))
    if rule == "gain":
        return REPRODUCED if lo > 0 else NOT_REPRODUCED if hi < size else INCONCLUSIVE
    if seen is not None and rule != "twice":
        raise ValueError(f"the rule {rule!r} takes no observed window")
    if rule == "twice":
        observed = seen is not None and all(map(math.isfinite, seen))
        if observed and seen[0] > seen[1]:
            raise ValueError(f"[{seen[0]}, {seen[1]}] is not an interval")
        above = observed and seen[0] > 0
        below = hi < 0 or (observed and seen[1] < 0)
        return REPRODUCED if above and not below else NOT_REPRODUCED if below and not above else INCONCLUSIVE
    if rule == "gain_unsized":
        return REPRODUCED if lo > 0 else NOT_REPRODUCED if hi < 0 else INCONCLUSIVE
    if rule == "loss_unsized":
        return REPRODUCED if hi < 0 else NOT_REPRODUCED if lo > 0 else INCONCLUSIVE
    if lo > 0 or hi < 0:  # equal
        return NOT_REPRODUCED
    return TIGHT if -EQUALITY_BOUND < lo and hi < EQUALITY_BOUND else NOT_TIGHT


REGISTRY_COLUMNS = ["page", "claim", "setting", "report", "table", "agent", "env", "sampler", "baseline", "rule",
                    "size"]  # fmt: skip
TABLES = {"differences": ("differences", "pct_lo", "pct_hi"), "area": ("speed", "pct_lo", "pct_hi"),
          "speed": ("speed", "vs_twice_lo", "vs_twice_hi")}  # fmt: skip
"""What each value of ``table`` reads: the CSV file and the columns of the interval, in % of Y's mean (final
scores; areas under the curves), or, for ``twice``, the absolute interval of X − (Y read at twice the speed),
with :data:`SEEN` beside it."""

SEEN = ("vs_twice_seen_lo", "vs_twice_seen_hi")
"""The columns of ``speed.csv`` that the rule ``twice`` reads beside the whole run's interval: the interval over the
observed window (:func:`prioritylab.harness.report.stats.speed`)."""


def _deciding(word: str, lo: float, hi: float, seen: tuple[float, float] | None) -> tuple[float, float]:
    """The interval a ``twice`` verdict rests on, which its row must print: the observed window's where it decides
    (reproduced, or not reproduced with the whole run's interval holding 0), else the whole run's."""
    if seen is not None and (word == REPRODUCED or (word == NOT_REPRODUCED and not hi < 0)):
        return seen
    return lo, hi


def _seen_of(row: dict, where: str) -> tuple[float, float]:
    """A ``speed.csv`` row's observed-window interval (NaN ends where it is undefined); ``ValueError`` naming the
    row where the report has no such columns (a report made before them: make it again)."""
    try:
        return float(row[SEEN[0]]), float(row[SEEN[1]])
    except (KeyError, TypeError):
        raise ValueError(f"{where} has no {SEEN[0]}, {SEEN[1]}: the report predates the observed window that "
                         "\"twice as fast\" is read over; make it again") from None
    except ValueError:
        return math.nan, math.nan


@dataclass(frozen=True)
class Entry:
    """One line of the registry, with its verdict."""

    line: int
    page: str
    claim: str
    setting: str
    report: str
    table: str
    agent: str
    env: str
    sampler: str
    baseline: str
    rule: str
    size: str
    lo: float = math.nan
    hi: float = math.nan
    verdict: str = ""
    withheld: str = ""
    """Why the comparison has no verdict (``--report`` only; a registry line without one is an error)."""

    def comparison(self) -> str:
        what = {"speed": " (area, against twice the speed)", "area": " (area)"}.get(self.table, "")
        return f"{self.agent} {self.env}: {self.sampler} − {self.baseline}{what}, {self.report}"


def read_registry(path: Path) -> list[Entry]:
    """The registry's lines, each with its interval read from its report's CSV and its verdict; ``ValueError``
    naming the line for a malformed line, a missing report or CSV row, an unknown rule or size, a row computed from
    partial runs or a report that left runs out (:func:`left_out`): a verdict rests on every run, each finished."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != REGISTRY_COLUMNS:
            raise ValueError(f"{path}: the columns are {reader.fieldnames}, not {REGISTRY_COLUMNS}")
        lines = list(reader)
    tables: dict[Path, list[dict]] = {}
    reports_left_out: dict[Path, str] = {}
    entries = []
    for number, line in enumerate(lines, start=2):
        where = f"{path}, line {number}"
        if None in line or any(value is None for value in line.values()):
            raise ValueError(f"{where}: {len(REGISTRY_COLUMNS)} fields expected")
        if line["rule"] not in RULES:
            raise ValueError(f"{where}: unknown rule {line['rule']!r}; the rules are {', '.join(RULES)}")
        if line["table"] not in TABLES:
            raise ValueError(f"{where}: unknown table {line['table']!r}; the tables are {', '.join(TABLES)}")
        if (line["table"] == "speed") != (line["rule"] == "twice"):
            raise ValueError(f"{where}: the rule 'twice' reads the table 'speed', and only it does")
        if line["rule"] == "gain" and line["size"] not in SIZES:
            raise ValueError(f"{where}: the rule 'gain' needs a size, one of {', '.join(SIZES)}; got "
                             f"{line['size']!r}")  # fmt: skip
        if line["rule"] != "gain" and line["size"]:
            raise ValueError(f"{where}: the rule {line['rule']!r} takes no size, got {line['size']!r}")
        csv_name, lo_col, hi_col = TABLES[line["table"]]
        csv_path = path.parent / line["report"] / f"{csv_name}.csv"
        if csv_path not in tables:
            if not csv_path.is_file():
                raise ValueError(f"{where}: no {csv_path}")
            tables[csv_path] = _report_rows(csv_path)
        key = {k: line[k] for k in ("agent", "env", "sampler", "baseline")}
        rows = [row for row in tables[csv_path] if all(row.get(k) == v for k, v in key.items())]
        if len(rows) != 1:
            raise ValueError(f"{where}: {len(rows)} rows of {csv_path} are {key}, not one")
        try:
            lo, hi = float(rows[0][lo_col]), float(rows[0][hi_col])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{where}: {csv_path}'s row {key} has no numbers in {lo_col}, {hi_col}") from None
        partial = partial_runs(rows[0], f"{csv_path}'s row {key}")
        if partial:
            raise ValueError(f"{where}: {csv_path}'s row {key} is computed from {partial} partial run"
                             f"{'s' if partial > 1 else ''}: a verdict is given on finished runs only (finish them "
                             "and make the report again)")  # fmt: skip
        if csv_path.parent not in reports_left_out:
            reports_left_out[csv_path.parent] = left_out(csv_path.parent)
        left = reports_left_out[csv_path.parent]
        if left:
            raise ValueError(f"{where}: the report {csv_path.parent} left out {left}, so its rows rest on fewer "
                             "runs than were made; a verdict is given on a report of every run (its status.md names "
                             "those left out)")  # fmt: skip
        size = SIZES[line["size"]] if line["rule"] == "gain" else None
        seen = _seen_of(rows[0], f"{where}: {csv_path}'s row {key}") if line["rule"] == "twice" else None
        try:
            word = verdict(line["rule"], lo, hi, size, seen)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        lo, hi = _deciding(word, lo, hi, seen)
        entries.append(Entry(number, **line, lo=lo, hi=hi, verdict=word))
    return entries


def partial_runs(row: dict, where: str) -> int:
    """How many of the runs a report's CSV row is computed from are partial (its ``partial_runs`` column, which a
    report made with ``--include-partial`` writes); 0 without the column."""
    from .stats import PARTIAL_RUNS

    value = row.get(PARTIAL_RUNS)
    if value is None or value == "":
        return 0
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"{where}: {PARTIAL_RUNS} {value!r} is not a count") from None
    if count < 0:
        raise ValueError(f"{where}: {PARTIAL_RUNS} {value!r} is not a count")
    return count


NOT_A_LEFT_OUT_RUN = ("reference", "empty")
"""The statuses, by their start, of the folders a report lists as not used that :func:`left_out` does not count:
the reference runs of an ``--against`` report, which it uses in ``versus.md`` only, and empty folders (no run)."""


def _manifest(report: Path) -> dict:
    """A report folder's ``manifest.json``; ``ValueError`` naming the folder where it is missing or unreadable."""
    import json

    path = Path(report) / "manifest.json"
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{report} holds no manifest.json: is it a prioritylab report?") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} cannot be read ({err})") from None
    return record if isinstance(record, dict) else {}


def left_out(report: Path) -> str:
    """The runs a report folder's ``manifest.json`` lists as found but not used (corrupt, partial, unreadable...),
    as "3 runs (corrupt: 1; partial, left out: 2)"; "" if none (:data:`NOT_A_LEFT_OUT_RUN` are not counted)."""
    runs = _manifest(report).get("not_used", [])
    states = (str(run.get("status", "")) if isinstance(run, dict) else "" for run in runs)
    counts = Counter(state for state in states if not state.startswith(NOT_A_LEFT_OUT_RUN))
    total = sum(counts.values())
    if not total:
        return ""
    kinds = "; ".join(f"{state}: {n}" for state, n in counts.items())
    return f"{total} run{'s' if total > 1 else ''} ({kinds})"


def _undefined(row: dict, table: str) -> str:
    """Why a report row's interval is NaN: its baseline's mean is 0 (the interval has no form in % of it), or
    neither side varies (every seed alike; the report compares two seeds a side at least)."""
    if table == "speed":  # the absolute interval of X's areas against Y's read at twice the speed
        return (f"the interval is undefined (no spread in {row.get('sampler', 'X')}'s areas nor in "
                f"{row.get('baseline', 'Y')}'s read at twice the speed)")  # fmt: skip
    try:
        absolute = float(row["lo"]), float(row["hi"])
    except (KeyError, TypeError, ValueError):
        absolute = (math.nan, math.nan)
    if all(math.isfinite(v) for v in absolute):
        return (f"{row.get('baseline', 'the baseline')}'s mean is 0, so the interval "
                f"[{absolute[0]:+.2f}, {absolute[1]:+.2f}] has no form in % of it")  # fmt: skip
    return "the interval is undefined (no spread on either side)"


def _report_rows(path: Path) -> list[dict]:
    """A report's CSV file, every row whole (:func:`prioritylab.results.whole_rows`: a cut file is an error, not
    fewer comparisons); ``ValueError`` naming the file. Where the report's manifest records ``include_partial``
    (under ``config``), the file must have the ``partial_runs`` column that such a report writes: without it, no
    row could say which of its runs were partial, and each would be read as computed from finished runs."""
    from .stats import PARTIAL_RUNS

    try:
        rows = whole_rows(path)
    except NotWhole as err:
        raise ValueError(f"{path}: {err}") from None
    config = _manifest(path.parent).get("config") if rows and PARTIAL_RUNS not in rows[0] else None
    if isinstance(config, dict) and config.get("include_partial"):
        raise ValueError(f"{path} has no {PARTIAL_RUNS} column, though its report's manifest.json records "
                         "include_partial: true; make the report again")  # fmt: skip
    return rows


def page_rows(page: Path) -> list[list[str]]:
    """The cells of each row of the page's tables whose last cell states a verdict (:func:`stated`) or holds a
    verdict's words where :func:`stated` does not read them (:func:`unread`), in order."""
    rows = []
    for line in Path(page).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line.startswith("|") or re.fullmatch(r"\|[-:| ]+\|", line):  # not a row, or the rule under a header
            continue
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if stated(cells[-1]) or unread(cells[-1]):
            rows.append(cells)
    return rows


def exempt(cells: list[str]) -> bool:
    """NERS Table 3's rows: they compare with the table's own values on their study page."""
    return re.search(r"\((NERS )?Table 3\)$", cells[0]) is not None


def stated(cell: str) -> set[str]:
    """The verdicts a page's verdict cell states: its opening words and each bold phrase, where they begin with a
    verdict (after "twice as fast:", which names the claim).  :func:`clauses` reads the same statements clause by
    clause."""
    return {word for _, word in _statements(cell)}


def _statements(cell: str) -> list[tuple[int, str]]:
    """Each verdict the cell states (:func:`stated`), with where its phrase starts in the cell."""
    return [(at, word) for at, _, word in _read(cell)]


_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _read(cell: str) -> list[tuple[int, int, str]]:
    """Each verdict the cell states (:func:`stated`): where its phrase starts and ends in the cell (the opening
    words' phrase ends with the verdict, a bold phrase with its closing ``**``), and the verdict."""
    phrases = [(0, None, cell), *((m.start(), m.end(), m.group(1)) for m in _BOLD.finditer(cell))]
    found = []
    for at, end, phrase in phrases:
        phrase = re.sub(r"^\*\*|^twice as fast:\s*", "", phrase.strip()).strip().lower()
        for word in sorted(VERDICTS, key=len, reverse=True):  # the longest first: "not reproduced" before "reproduced"
            if phrase.startswith(word) and (len(phrase) == len(word) or not phrase[len(word)].isalnum()):
                found.append((at, cell.lower().index(word) + len(word) if end is None else end, word))
                break
    return found


_VERDICT_WORDS = re.compile(r"(?<!\w)((?:not )?reproduced|inconclusive|consistent with equality)(?!\w)",
                            re.IGNORECASE)  # fmt: skip
"""The words that make a phrase a verdict (:data:`VERDICTS`)."""


def unread(cell: str) -> list[str]:
    """The verdict words in a cell that :func:`stated` does not read: outside its opening words' verdict and
    outside every bold phrase that begins with a verdict ("LAP ends below PER: not reproduced" says a verdict that
    no check would see)."""
    spans = [(at, end) for at, end, _ in _read(cell)]
    return [m.group(0) for m in _VERDICT_WORDS.finditer(cell) if not any(at <= m.start() < end for at, end in spans)]


NAMED_BY = ("env", "sampler", "baseline")
"""The parts of a comparison by which a row's cell names it."""


def shown(attribute: str, value: str) -> str:
    """A registry value as the pages write it: an environment as its game's short name (``MinAtar/Breakout-v1``:
    ``Breakout``; ``HalfCheetah-v5``: ``HalfCheetah``), a sampler in capitals (``PER``), but ``uniform``."""
    if attribute == "env":
        return re.sub(r"-v\d+$", "", value.rsplit("/", 1)[-1])
    return value if value == "uniform" else value.upper()


def names(entries: list[Entry]) -> list[tuple[str, ...]]:
    """For each of a row's comparisons, the names that tell it from the others: its value, as the pages write it
    (:func:`shown`), of each of :data:`NAMED_BY` on which the row's comparisons differ; none where they differ on
    none of them."""
    differing = [name for name in NAMED_BY if len({getattr(e, name) for e in entries}) > 1]
    return [tuple(dict.fromkeys(shown(name, getattr(e, name)) for name in differing)) for e in entries]


def names_in(text: str, name: str) -> bool:
    """Whether ``text`` holds ``name`` as a whole word, in the same case (``PER's`` names PER; ``PSER``,
    ``lap_halfcheetah`` and the English "per seed" name neither PER nor HalfCheetah)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def clauses(cell: str, entries: list[Entry]) -> list[tuple[str, set[str], list[int]]]:
    """The verdict cell's clauses, its parts between ``;``, each with the verdicts it states (:func:`stated`; the
    cell's opening words are its first clause's) and the indexes in ``entries`` of the comparisons it names
    (:func:`names`)."""
    statements, own = _statements(cell), names(entries)
    result, start = [], 0
    for part in cell.split(";"):
        end = start + len(part)
        says = {word for at, word in statements if start <= at < end}
        named = [i for i, labels in enumerate(own) if any(names_in(part, label) for label in labels)]
        result.append((part.strip(), says, named))
        start = end + 1
    return result


def untied(cell: str, entries: list[Entry]) -> str:
    """What is wrong with how a row's verdict cell ties each verdict to its comparison ("" if nothing), where the
    row's comparisons ``entries`` give different verdicts (a row whose comparisons all give one verdict passes): a
    clause (:func:`clauses`) that states verdicts and names comparisons must state the verdict of each it names, and
    only verdicts those give; each comparison's verdict must be stated by a clause that names it or by one that
    names none of the row's comparisons."""
    if len({e.verdict for e in entries}) < 2:
        return ""
    parts = clauses(cell, entries)
    for text, says, named in parts:
        if not says:
            continue
        for entry in (entries[i] for i in named):
            if entry.verdict not in says:
                return (f"the clause {text!r} states {sorted(says)} for {entry.comparison()}, whose interval "
                        f"{_interval(entry)} gives {entry.verdict!r}")  # fmt: skip
        extra = says - {entries[i].verdict for i in named}
        if named and extra:
            return (f"the clause {text!r} states {sorted(extra)}, which none of the comparisons it names gives: "
                    + "; ".join(f"{entries[i].comparison()} {_interval(entries[i])} gives {entries[i].verdict!r}"
                                for i in named))  # fmt: skip
    for i, entry in enumerate(entries):
        if not any(entry.verdict in says and (i in named or not named) for _, says, named in parts):
            return (f"no clause that names {entry.comparison()}, or that names none of the row's comparisons, "
                    f"states {entry.verdict!r}, which its interval {_interval(entry)} gives")  # fmt: skip
    return ""


_NUMBER = r"[−+-]?[\d,]*\.?\d+"
_BRACKETS = re.compile(rf"\[({_NUMBER})\s*%?,\s*({_NUMBER})\s*%?\]")


def printed(text: str, lo: float, hi: float) -> bool:
    """Whether ``text`` prints the interval ``[lo, hi]`` as ``[a, b]``, each end rounded to the decimals it shows
    (``[−13, +14]``, ``[−0.5, +20]``, ``[−1.91, −0.43] ``)."""
    for a, b in _BRACKETS.findall(text):
        ends = []
        for shown in (a, b):
            digits = shown.replace("−", "-").replace("+", "").replace(",", "")
            decimals = len(digits.split(".")[1]) if "." in digits else 0
            ends.append((float(digits), 0.5 * 10.0**-decimals + 1e-9))
        if abs(ends[0][0] - lo) <= ends[0][1] and abs(ends[1][0] - hi) <= ends[1][1]:
            return True
    return False


def unnamed_pages(registry: Path, entries: list[Entry]) -> list[tuple[Path, int]]:
    """Each Markdown page under the registry's folder that has verdict rows (:func:`page_rows`) but no line of the
    registry, but :data:`UNREGISTERED_PAGES`, with its count of verdict rows.  The registry names the pages it
    checks, so a registry cut at a page's boundary (every line of a page gone) would otherwise check fewer pages
    and pass; the pages are found here, not read from the registry."""
    registry = Path(registry)
    named = {(registry.parent / e.page).resolve() for e in entries}
    named |= {(registry.parent / page).resolve() for page in UNREGISTERED_PAGES}
    out = []
    for page in sorted(registry.parent.rglob("*.md")):
        if page.is_file() and page.resolve() not in named:
            rows = page_rows(page)
            if rows:
                out.append((page, len(rows)))
    return out


def check(registry: Path) -> list[tuple[str, list[str], list[Entry], str]]:
    """Each verdict row of each page the registry names, with the page, the registry's lines that belong to the
    row, and what is wrong with it ("" if nothing): an interval of its comparisons that the row does not print
    (:func:`printed`: a line pointed at another game's or pair's CSV row), a verdict the rule gives that the row
    does not state, one the row states that no comparison gives, in a row whose comparisons give different
    verdicts one not tied to its comparison by the clause that states it (:func:`untied`: two verdicts swapped
    between their comparisons), a verdict's words where no verdict is read (:func:`unread`), or a row no line
    names.  ``ValueError`` for a line that names no row, or for a page under the registry's folder with verdict rows
    and no line of the registry (:func:`unnamed_pages`)."""
    registry = Path(registry)
    entries = read_registry(registry)
    missing = unnamed_pages(registry, entries)
    if missing:
        page, n = missing[0]
        more = f" (and {len(missing) - 1} more such pages)" if len(missing) > 1 else ""
        raise ValueError(f"{registry}: no line names the page {page}, which has {n} verdict rows{more}: every page "
                         "with verdict rows must have its lines in the registry (is the registry cut?)")  # fmt: skip
    result = []
    for page in dict.fromkeys(e.page for e in entries):
        path = registry.parent / page
        if not path.is_file():
            raise ValueError(f"{registry}: no page {path}")
        rows = page_rows(path)
        owner: list[list[Entry]] = [[] for _ in rows]
        at = 0
        for entry in (e for e in entries if e.page == page):
            while at < len(rows) and not (rows[at][0] == entry.claim and entry.setting in " | ".join(rows[at])):
                at += 1
            if at == len(rows):
                raise ValueError(f"{registry}, line {entry.line}: no verdict row of {path} from the previous line's "
                                 f"on has the claim {entry.claim!r} and holds {entry.setting!r}")  # fmt: skip
            owner[at].append(entry)
        for cells, mine in zip(rows, owner, strict=True):
            problem = ""
            loose = unread(cells[-1])
            if loose:
                problem = (f"the verdict cell says {', '.join(map(repr, loose))} where no verdict is read: a verdict "
                           "opens the cell or a bold phrase")  # fmt: skip
            elif not mine and not exempt(cells):
                problem = "no line of the registry names this row"
            elif mine:
                says, gives = stated(cells[-1]), {e.verdict for e in mine}
                unprinted = [e for e in mine if not printed(" | ".join(cells), e.lo, e.hi)]
                if unprinted:
                    problem = "the row does not print the interval " + "; ".join(
                        f"{_interval(e)} of {e.comparison()}" for e in unprinted)
                elif gives - says:
                    problem = f"the rule gives {sorted(gives - says)}, which the row does not state"
                elif says - gives:
                    problem = f"the row states {sorted(says - gives)}, which no comparison gives"
                else:
                    problem = untied(cells[-1], mine)
            result.append((page, cells, mine, problem))
    return result


PAPER_CLAIMS: dict[tuple[str, str], tuple[str, str]] = {
    ("per", "uniform"): ("gain", "per_over_uniform"),
    ("pser", "per"): ("gain", "pser_over_per"),
    ("lap", "uniform"): ("gain", "lap_over_uniform"),
    ("lap", "per"): ("gain", "lap_over_per"),
    ("pal", "uniform"): ("gain", "pal_over_uniform"),
    ("pal", "per"): ("gain", "pal_over_per"),
    ("pal", "lap"): ("equal", ""),
    ("ners", "uniform"): ("gain_unsized", ""),
    ("ners", "per"): ("gain_unsized", ""),
}
"""The claim each (X, Y) pair of a report's ``differences.csv`` stands for, as its rule and size, as the results
pages judge it.  On an environment that is neither Atari nor MinAtar (continuous control), PER − uniform is NERS's
claim that PER does worse (``loss_unsized``), and PER's "twice as fast" (``speed.csv``), an Atari claim, is not
read."""

OWN_SIZES = {"HalfCheetah": {"lap_over_uniform": "lap_over_uniform_halfcheetah",
                             "pal_over_uniform": "pal_over_uniform_halfcheetah",
                             "pal_over_per": "pal_over_per_halfcheetah"}}  # fmt: skip
"""Environments whose own sizes LAP/PAL Table 1 gives, by the start of their name: the size used there instead."""


def _discrete(env: str) -> bool:
    """An Atari or MinAtar environment, where the PER paper's claims were made."""
    from ...scores import atari_game, minatar_game

    return atari_game(env) is not None or minatar_game(env) is not None


def report_verdicts(report: Path) -> list[Entry]:
    """Every comparison of the papers' claims (:data:`PAPER_CLAIMS`, and PER − uniform at twice the speed) in the
    report folder ``report``, with its verdict by the stated rule, read from its ``differences.csv`` and
    ``speed.csv``; a row computed from partial runs, or whose interval is undefined, gets no verdict (``""``) and
    the reason (``withheld``)."""
    report = Path(report)
    out = []
    for table in ("differences", "speed"):
        path = report / f"{TABLES[table][0]}.csv"
        if not path.is_file():
            raise ValueError(f"{report} holds no {path.name}: is it a prioritylab report?")
        rows = _report_rows(path)
        for number, row in enumerate(rows, start=2):
            pair, env = (row.get("sampler", ""), row.get("baseline", "")), row.get("env", "")
            if table == "speed":
                if pair != ("per", "uniform") or not _discrete(env):
                    continue
                rule, size = "twice", ""
            elif pair == ("per", "uniform") and not _discrete(env):
                rule, size = "loss_unsized", ""
            elif pair in PAPER_CLAIMS:
                rule, size = PAPER_CLAIMS[pair]
            else:
                continue
            own = next((sizes for start, sizes in OWN_SIZES.items() if env.startswith(start)), {})
            size = own.get(size, size)
            _, lo_col, hi_col = TABLES[table]
            try:
                lo, hi = float(row[lo_col]), float(row[hi_col])
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}, line {number}: no numbers in {lo_col}, {hi_col}") from None
            # a row without a verdict is kept, so that it is named with the reason
            partial = partial_runs(row, f"{path}, line {number}")
            if partial:
                word, withheld = "", (f"computed from {partial} partial run{'s' if partial > 1 else ''} "
                                      "(--include-partial): a verdict is given on finished runs only")  # fmt: skip
            elif not math.isfinite(lo + hi):
                word, withheld = "", _undefined(row, table)
            else:
                seen = _seen_of(row, f"{path}, line {number}") if rule == "twice" else None
                word, withheld = verdict(rule, lo, hi, SIZES[size] if size else None, seen), ""
                lo, hi = _deciding(word, lo, hi, seen)
            out.append(Entry(number, "", "", "", str(report), table, row.get("agent", ""), env, pair[0], pair[1],
                             rule, size, lo=lo, hi=hi, verdict=word, withheld=withheld))  # fmt: skip
    return out


def _interval(entry: Entry) -> str:
    unit = "" if entry.table == "speed" else " %"
    return f"[{entry.lo:+.2f}, {entry.hi:+.2f}]{unit}"


def register(subparsers) -> None:
    from ..._cli import plain

    p = subparsers.add_parser("verdicts", help="each claim's verdict from the reports' CSV files, checked against "
                                               "the results page",  # fmt: skip
                              description=plain(__doc__.splitlines()[0]),
                              epilog=plain("\n".join(__doc__.splitlines()[2:])),
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--registry", type=Path, default=None, help=f"the registry of claims (default {REGISTRY})")
    p.add_argument("--report", type=Path, action="append", default=None, metavar="DIR",
                   help="instead, the verdict of each of the papers' comparisons in this report folder (as "
                        "prioritylab report --out writes it), by the same rule; may be given again")  # fmt: skip
    p.set_defaults(func=_main)


def _main(args) -> int:
    from ..._cli import fail

    if getattr(args, "report", None):
        if args.registry is not None:
            fail("prioritylab verdicts", f"--registry {args.registry} checks the results pages and --report judges "
                                         "a report: give one of them")  # fmt: skip
        for folder in args.report:
            if not folder.is_dir():
                fail("prioritylab verdicts", f"--report {folder} is not a folder")
        try:
            found = [(folder, left_out(folder), report_verdicts(folder)) for folder in args.report]
        except (OSError, ValueError) as err:
            fail("prioritylab verdicts", str(err))
        for folder, left, entries in found:
            print(f"== {folder}")
            if left:
                print(f"    note: this report left out {left} (its status.md names them): the verdicts below rest "
                      "on the other runs")  # fmt: skip
            for entry in entries:
                size = f", size {SIZES[entry.size]:+.2f} % ({entry.size})" if entry.size else ""
                what = (f"    {entry.agent} {entry.env}: {entry.sampler} − {entry.baseline}"
                        f"{' (area, against twice the speed)' if entry.table == 'speed' else ''}: ")  # fmt: skip
                if entry.verdict:
                    print(f"{what}{_interval(entry)}{size} -> {entry.verdict}")
                else:
                    print(f"{what}{entry.withheld}: no verdict")
            if not entries:
                print("    no comparison of the papers' claims with an interval")
        return 0
    registry = REGISTRY if args.registry is None else args.registry
    if not registry.is_file():
        where = (" (the repository's own registry, relative to its root: run from there, or give --registry)"
                 if args.registry is None else "")  # fmt: skip
        fail("prioritylab verdicts", f"--registry {registry} is not a file{where}")
    try:
        result = check(registry)
    except (OSError, ValueError) as err:
        fail("prioritylab verdicts", str(err))
    wrong, page = 0, None
    for where, cells, mine, problem in result:
        if where != page:
            page = where
            print(f"== {page}")
        print(f"{cells[0]} | {cells[1]}"[:160])
        if not mine:
            print("    (compared with NERS Table 3's own values on its study page)" if not problem else "")
        for entry in mine:
            size = f", size {SIZES[entry.size]:+.2f} %" if entry.size else ""
            print(f"    {entry.comparison()}: {_interval(entry)}{size} -> {entry.verdict}")
        if problem:
            wrong += 1
            print(f"    DISAGREES: {problem}")
    pages = len({where for where, *_ in result})
    print(f"{pages} pages, {len(result)} rows, {sum(len(m) for _, _, m, _ in result)} comparisons, {wrong} disagreeing")
    return 1 if wrong else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(argparse.Namespace(registry=None, report=None)))
