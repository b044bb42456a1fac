"""``make demo``: run the theory reproductions on their embedded defaults, then a short deep run.

Runs every script of :data:`SCRIPTS` found in the source checkout's
``theory/`` folder, each in its own process with ``--out <out>/<script>``,
and prints one line per script: exit code, wall time and its verdict counts
(read from the script's ``manifest.json``), followed by a per-reading verdict table
when the manifest has one (``readings_table``, PSER Theorem 1).  Exits 1 if a script failed (a
claim that does not reproduce is not a failure) or if no script was found.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .theory.verdict import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED

ROOT = Path(__file__).resolve().parent.parent
THEORY_DIR = ROOT / "theory"
"""Folder of the theory scripts (present in a source checkout, not in an installed wheel)."""
SCRIPTS = ("per_fig1.py", "per_fig2.py", "pser_theorem1.py", "pser_fig7.py", "lap_equivalence.py")
"""The scripts run, in this order."""
EXPLAINED = {
    "per_fig1.py": "docs/theory/per-figures.md",
    "per_fig2.py": "docs/theory/per-figures.md",
    "pser_theorem1.py": "docs/theory/pser-theorem.md",
    "pser_fig7.py": "docs/theory/pser-figures.md",
    "lap_equivalence.py": "docs/theory/loss-sampling-equivalence.md",
}
"""The page that explains each script's verdicts, reproduced or not."""
DEEP_SCRIPT = ROOT / "deep" / "pendulum_demo.py"
"""The deep half: TD3 on Pendulum-v1, uniform vs per, about a minute."""


def find_scripts(theory_dir: Path) -> tuple[list[Path], list[str]]:
    """The scripts of :data:`SCRIPTS` present in ``theory_dir`` (in order) and the names missing."""
    found = [theory_dir / name for name in SCRIPTS if (theory_dir / name).is_file()]
    missing = [name for name in SCRIPTS if not (theory_dir / name).is_file()]
    return found, missing


def verdict_counts(out: Path) -> str:
    """``"k reproduced, m not reproduced, j n/a"`` from ``out/manifest.json``, or why it cannot be read."""
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError) as err:
        return f"no readable manifest.json ({type(err).__name__})"
    rows = manifest.get("verdict")
    if not isinstance(rows, list):
        return "no verdict in manifest.json"
    counts = Counter(r.get("verdict") for r in rows)
    return ", ".join(f"{counts[w]} {w}" for w in (REPRODUCED, NOT_REPRODUCED, NOT_APPLICABLE))


def deep_summary(out: Path) -> str:
    """The deep demo's result lines, stored under ``summary`` in ``out/manifest.json`` ("" if none)."""
    try:
        text = json.loads((out / "manifest.json").read_text()).get("summary", "")
    except (OSError, ValueError):
        return ""
    return text if isinstance(text, str) else ""


def readings_table(out: Path) -> str:
    """The per-reading table a script stored under ``readings_table`` in ``out/manifest.json`` ("" if none)."""
    try:
        table = json.loads((out / "manifest.json").read_text()).get("readings_table", "")
    except (OSError, ValueError):
        return ""
    return table if isinstance(table, str) else ""


def explained_line(scripts: list[Path]) -> str:
    """One line naming, per script run, the page that explains its verdicts."""
    pages = "; ".join(f"{s.name} -> {EXPLAINED[s.name]}" for s in scripts if s.name in EXPLAINED)
    return f"[demo] every verdict, reproduced or not, is explained in docs/theory/: {pages}"


def main(argv: list[str] | None = None) -> int:
    from ._cli import Parser, check_output_dir, fail

    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script")
    parser.add_argument("--no-deep", action="store_true", help="skip the deep half (TD3 on Pendulum-v1)")
    args = parser.parse_args(argv)
    try:
        check_output_dir(args.out)
    except ValueError as err:
        fail("prioritylab.demo", str(err))
    scripts, missing = find_scripts(THEORY_DIR)
    for name in missing:
        print(f"[demo] skipping {name}: not in {THEORY_DIR}")
    if not scripts:
        print(f"[demo] no theory scripts in {THEORY_DIR}: run the demo from a source checkout")
        return 1
    failed, summary = [], []
    for script in scripts:
        out = args.out / script.stem
        cmd = [sys.executable, str(script), "--out", str(out)] + (["--quick"] if args.quick else [])
        print(f"\n[demo] {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        line = f"{script.name}: exit {rc}, {time.perf_counter() - t0:.1f} s"
        line += f", {verdict_counts(out)}" if rc == 0 else ", failed"
        print(f"[demo] {line}, results in {out}", flush=True)
        summary.append(line)
        table = readings_table(out) if rc == 0 else ""
        if table:
            summary += [f"  {row}" for row in table.splitlines()]
        if rc:
            failed.append(script.name)
    if not args.no_deep and DEEP_SCRIPT.is_file():
        out = args.out / DEEP_SCRIPT.stem
        cmd = [sys.executable, str(DEEP_SCRIPT), "--out", str(out)] + (["--quick"] if args.quick else [])
        print(f"\n[demo] {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        summary.append(f"{DEEP_SCRIPT.name}: exit {rc}, {time.perf_counter() - t0:.1f} s, results in {out}")
        summary += [f"  {row}" for row in deep_summary(out).splitlines()] if rc == 0 else []
        if rc:
            failed.append(DEEP_SCRIPT.name)
    print("\n[demo] summary:\n" + "\n".join(f"[demo]   {line}" for line in summary))
    if failed:
        print(f"[demo] failed: {', '.join(failed)}")
        return 1
    print(f"[demo] all results under {args.out}/ (CSV, PNG, manifest.json per script)")
    print(explained_line(scripts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
