"""The ``prioritylab`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the
module is imported only when listed here, so a missing optional dependency
(torch, gymnasium) only affects its own subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "cliffwalk": "prioritylab.cliffwalk.cli",
    "bench": "prioritylab.bench.cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prioritylab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ImportError as err:  # pragma: no cover - optional extras
            p = sub.add_parser(name, help=f"(unavailable: {err})")
            p.set_defaults(func=lambda args, err=err: sys.exit(f"prioritylab {args.command}: {err}"))
            continue
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
