"""``make demo``: the theory reproductions at demo settings, with a short deep run beside them.

Runs every script of :data:`SCRIPTS` found in the source checkout's
``theory/`` folder, fastest first, each in its own process with ``--out
<out>/<script>`` and the settings of :data:`DEMO_ARGS` (settings that give the
same verdict for every claim as the script's full settings; ``--full`` runs the
full ones, ``--quick`` passes ``--quick`` instead).  The deep half
(:data:`DEEP_SCRIPT`) runs beside them in a second process, so the two
halves share a 2-core machine; it starts once the first script has finished,
so that the first verdict does not wait on the deep half's imports and Numba
compilation (docs/benchmarks.md, "make demo").  Each script's output is held until it finishes
and then printed whole, followed by one line: exit code, wall time and its
verdict counts (read from the script's ``manifest.json``), and a per-reading
verdict table when the manifest has one (``readings_table``, PSER Theorem 1);
the script's standard error goes to ``<out>/<script>.log``.  Exits 1 if a
script failed (a claim that does not reproduce is not a failure) or if no
script was found.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .verdict import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED

ROOT = Path(__file__).resolve().parent.parent
THEORY_DIR = ROOT / "theory"
"""Folder of the theory scripts (present in a source checkout, not in an installed wheel)."""
SCRIPTS = ("per_fig1.py", "lap_equivalence.py", "per_fig2.py", "pser_fig7.py", "pser_theorem1.py")
"""The scripts run, in this order: fastest first, so that the first verdict comes within seconds."""
DEMO_ARGS = {
    "per_fig1.py": [],
    "lap_equivalence.py": ["--quick"],
    "per_fig2.py": ["--seeds", "3"],
    "pser_fig7.py": ["--seeds", "3"],
    "pser_theorem1.py": ["--mc-runs", "2000", "--real-seeds", "20"],
}
"""Each script's settings in the demo (README, "make demo"): every claim gets the same verdict as at the
script's full settings (no arguments), in a fraction of the time (docs/benchmarks.md, "make demo")."""
EXPLAINED = {
    "per_fig1.py": "docs/theory/per-figures.md",
    "per_fig2.py": "docs/theory/per-figures.md",
    "pser_theorem1.py": "docs/theory/pser-theorem.md",
    "pser_fig7.py": "docs/theory/pser-figures.md",
    "lap_equivalence.py": "docs/theory/loss-sampling-equivalence.md",
}
"""The page that explains each script's verdicts, reproduced or not."""
DEEP_SCRIPT = ROOT / "deep" / "pendulum_demo.py"
"""The deep half: TD3 on Pendulum-v1, uniform vs per, a short smoke run beside the theory half."""
DEEP_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The deep half keeps to one core, leaving the other to the theory scripts."""


def settings_note(name: str) -> str:
    """The line each theory script's ``--help`` ends with: its settings in ``make demo``."""
    shown = " ".join(DEMO_ARGS[name]) or "no options (its full settings)"
    return (f"make demo runs this script with: {shown}. Every claim gets the same verdict as with no options "
            "(the full settings; docs/benchmarks.md, 'make demo').")  # fmt: skip


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


def script_args(name: str, quick: bool, full: bool) -> list[str]:
    """The settings a script runs with: ``--quick``, its full settings (none), or :data:`DEMO_ARGS`."""
    if quick:
        return ["--quick"]
    return [] if full else list(DEMO_ARGS.get(name, []))


def _start(cmd: list[str], out: Path, env: dict | None = None) -> tuple[subprocess.Popen, float, object, object]:
    """Start ``cmd`` with its standard output held in a temporary file and its standard error in
    ``<out>.log``; return the process, its start time and both files."""
    import os
    import tempfile

    stdout = tempfile.TemporaryFile(mode="w+")
    log = open(out.with_name(out.name + ".log"), "w")  # noqa: SIM115 (closed in _finish)
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=log, env={**os.environ, **(env or {})})
    return proc, time.perf_counter(), stdout, log


def _finish(job, name: str, out: Path) -> tuple[int, float]:
    """Wait for a started script, print its held output whole, and the tail of its log if it failed."""
    proc, t0, stdout, log = job
    rc = proc.wait()
    seconds = time.perf_counter() - t0
    log.close()
    stdout.seek(0)
    print(f"\n[demo] ---- {name} ----", flush=True)
    print(stdout.read().rstrip(), flush=True)
    stdout.close()
    if rc:
        tail = out.with_name(out.name + ".log").read_text().splitlines()[-15:]
        print("\n".join(tail))
    return rc, seconds


def main(argv: list[str] | None = None) -> int:
    from ._cli import Parser, check_output_dir, fail

    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--quick", action="store_true", help="pass --quick to every script (a smoke run)")
    how.add_argument("--full", action="store_true",
                     help="run each theory script at its full settings instead of the demo's (DEMO_ARGS)")
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
    t_demo = time.perf_counter()
    deep, deep_out = None, args.out / DEEP_SCRIPT.stem
    failed, summary, deep_lines = [], [], []

    def start_deep():
        nonlocal deep
        if not args.no_deep and DEEP_SCRIPT.is_file():
            cmd = [sys.executable, str(DEEP_SCRIPT), "--out", str(deep_out)] + (["--quick"] if args.quick else [])
            print(f"[demo] started beside the theory scripts: {' '.join(cmd)}", flush=True)
            deep = _start(cmd, deep_out, DEEP_ENV)

    def finish_deep():
        rc, seconds = _finish(deep, DEEP_SCRIPT.name, deep_out)
        deep_lines.append(f"{DEEP_SCRIPT.name}: exit {rc}, {seconds:.1f} s, results in {deep_out}")
        deep_lines.extend(f"  {row}" for row in deep_summary(deep_out).splitlines() if rc == 0)
        print(f"[demo] {deep_lines[0]}", flush=True)
        if rc:
            failed.append(DEEP_SCRIPT.name)

    for script in scripts:
        out = args.out / script.stem
        cmd = [sys.executable, str(script), "--out", str(out)] + script_args(script.name, args.quick, args.full)
        print(f"\n[demo] {' '.join(cmd)}", flush=True)
        rc, seconds = _finish(_start(cmd, out), script.name, out)
        line = f"{script.name}: exit {rc}, {seconds:.1f} s"
        line += f", {verdict_counts(out)}" if rc == 0 else ", failed"
        print(f"[demo] {line} (at {time.perf_counter() - t_demo:.0f} s), results in {out}", flush=True)
        summary.append(line)
        table = readings_table(out) if rc == 0 else ""
        if table:
            summary += [f"  {row}" for row in table.splitlines()]
        if rc:
            failed.append(script.name)
        if deep is None and script == scripts[0]:  # the first verdict first, then both cores at work
            start_deep()
        if deep is not None and not deep_lines and deep[0].poll() is not None:
            finish_deep()
    if deep is not None and not deep_lines:
        print(f"\n[demo] waiting for {DEEP_SCRIPT.name}", flush=True)
        finish_deep()
    summary += deep_lines
    print("\n[demo] summary:\n" + "\n".join(f"[demo]   {line}" for line in summary))
    if failed:
        print(f"[demo] failed: {', '.join(failed)}")
        return 1
    print(f"[demo] all results under {args.out}/ (CSV, PNG, manifest.json per script), in "
          f"{time.perf_counter() - t_demo:.0f} s")  # fmt: skip
    print(explained_line(scripts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
