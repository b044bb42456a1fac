"""Verdict wording shared by every theory script.

Every script prints (and stores in ``manifest.json`` or a CSV) one verdict per
claim, in a column named ``verdict`` holding one of three words:

* ``reproduced``: the measured quantity meets the stated criterion;
* ``not reproduced``: it does not (the script still exits 0);
* ``n/a``: a context row, reported for information, with no criterion.

A verdict row keeps the machine-readable outcome under ``reproduced``:
``True``, ``False`` or ``None`` (context rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_APPLICABLE = "n/a"
QUICK_CAVEAT = ("--quick: smoke settings, so a verdict above can differ from the full run's (docs/benchmarks.md, "
                "'make demo', lists the verdicts --quick keeps; make demo's settings keep them all)")
"""Printed under a theory script's verdicts when it ran with ``--quick``."""


DEMO_NOTE = ("make demo's settings: fewer runs than the defaults, checked claim by claim to give the default run's "
             "verdicts (docs/benchmarks.md, 'make demo')")
"""Printed in place of a caveat when a script ran with exactly the settings ``make demo`` gives it."""


def caveat(quick: bool, below: list[str], script: str | None = None) -> str | None:
    """The line printed under a theory script's verdicts when it ran with fewer runs, cases or sizes than its
    defaults: :data:`QUICK_CAVEAT` with ``--quick``; else one naming ``below``, each option that shrank the run
    as given (``"--n-max 4"``); ``None`` when the run was not smaller than the default one.  When those are
    exactly the settings ``make demo`` gives ``script`` (:data:`prioritylab.demo.DEMO_ARGS`), whose verdicts
    were checked against the default run's, :data:`DEMO_NOTE` instead."""
    from .demo import DEMO_ARGS  # the demo imports this module: read when called

    given = (["--quick"] if quick else []) + [word for option in below for word in option.split()]
    if script is not None and given and _pairs(given) == _pairs(DEMO_ARGS.get(script, [""])):
        return DEMO_NOTE
    if quick:
        return QUICK_CAVEAT
    if below:
        return (f"{', '.join(below)}: fewer than the defaults, so a verdict above can differ from the default run's "
                "(docs/benchmarks.md, 'make demo', gives settings checked to keep every verdict)")  # fmt: skip
    return None


def _pairs(args: list[str]) -> set[tuple[str, ...]]:
    """Command-line words as a set of options, each with the values after it (the order of options aside)."""
    out, current = set(), None
    for word in args:
        if word.startswith("--"):
            if current is not None:
                out.add(tuple(current))
            current = [word]
        elif current is not None:
            current.append(word)
        else:
            out.add((word,))
    if current is not None:
        out.add(tuple(current))
    return out


def verdict_word(reproduced: bool | None) -> str:
    """``"reproduced"``, ``"not reproduced"`` or ``"n/a"`` (``None``: a context row)."""
    if reproduced is None:
        return NOT_APPLICABLE
    return REPRODUCED if reproduced else NOT_REPRODUCED


def with_verdict(rows: Iterable[Mapping]) -> list[dict]:
    """Copies of ``rows`` with a ``verdict`` word from each row's ``reproduced`` (bool or None)."""
    return [{**r, "verdict": verdict_word(r["reproduced"])} for r in rows]


__all__ = ["NOT_APPLICABLE", "NOT_REPRODUCED", "REPRODUCED", "verdict_word", "with_verdict"]
