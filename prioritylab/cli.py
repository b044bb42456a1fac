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
    "report": "prioritylab.harness.report",
    "collect": "prioritylab.harness.collect",
    "sweep": "prioritylab.harness.sweep",
    "verdicts": "prioritylab.harness.report.verdicts",
}


def build_parser() -> argparse.ArgumentParser:
    from ._cli import Parser
    from .deep.cli import AGENTS

    parser = Parser(prog="prioritylab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    agents = ",".join(AGENTS)
    sub.add_parser("train", help=f"train a deep agent: prioritylab train {{{agents}}} --help", add_help=False)
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
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "train":  # settings dataclasses parsed by tyro, one flag per field
        from ._cli import die_with_parent
        from .deep.cli import main as train_main

        die_with_parent()
        return train_main(argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
