"""``make demo``: run the theory reproductions on their embedded defaults."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ["per_fig1.py", "per_fig2.py", "pser_theorem1.py", "pser_fig7.py", "lap_equivalence.py"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script")
    args = parser.parse_args(argv)
    failed = []
    for name in SCRIPTS:
        script = ROOT / "theory" / name
        if not script.exists() or importlib.util.find_spec("prioritylab") is None:
            print(f"[demo] skipping {name}: not present")
            continue
        out = args.out / script.stem
        cmd = [sys.executable, str(script), "--out", str(out)] + (["--quick"] if args.quick else [])
        print(f"\n[demo] {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"[demo] {name}: exit {rc}, {time.perf_counter() - t0:.1f} s, results in {out}")
        if rc:
            failed.append(name)
    if failed:
        print(f"[demo] failed: {', '.join(failed)}")
        return 1
    print(f"\n[demo] all results under {args.out}/ (CSV, PNG, manifest.json per script)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
