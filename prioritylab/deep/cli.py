"""``prioritylab train {td3,sac,dqn,ddqn} ...``: every field of the agent's settings is a flag (tyro).

A module defines ``SPEC`` for one agent, or ``SPECS`` (name -> Spec) for several.  ``dqn`` and ``ddqn``
with ``--env MinAtar/<Game>-v1`` take the MinAtar settings and network (``MINATAR_SPECS``,
``MINATAR_SETTINGS`` of :mod:`prioritylab.deep.dqn`), so ``--help`` after such an ``--env`` shows those.
"""

from __future__ import annotations

import sys

AGENTS = {"td3": "prioritylab.deep.td3", "sac": "prioritylab.deep.sac", "dqn": "prioritylab.deep.dqn",
          "ddqn": "prioritylab.deep.dqn"}  # fmt: skip


def main(argv: list[str]) -> int:
    import importlib

    import tyro

    from .loop import train
    from .minatar import is_minatar
    from .run import SettingsError

    specs, settings = {}, {}
    for name, module in AGENTS.items():
        mod = importlib.import_module(module)
        specs[name] = mod.SPECS[name] if hasattr(mod, "SPECS") else mod.SPEC
        settings[name] = next(v for k, v in vars(mod).items() if k.endswith("Settings") and k[:3].lower() == name[:3])
    if not argv or argv[0] not in AGENTS:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"prioritylab train: unknown agent {argv[0]!r}; choose one of {', '.join(AGENTS)}", file=sys.stderr)
            return 2
        print("usage: prioritylab train {" + ",".join(AGENTS) + "} [--help] [settings...]")
        for name in AGENTS:
            print(f"  {name:5s} {settings[name].__doc__.splitlines()[0]}")
        return 0
    agent = argv[0]
    if agent in ("dqn", "ddqn") and is_minatar(env_option(argv[1:])):
        from . import dqn

        specs[agent], settings[agent] = dqn.MINATAR_SPECS[agent], dqn.MINATAR_SETTINGS[agent]
    cfg = tyro.cli(settings[agent], args=argv[1:], prog=f"prioritylab train {agent}",
                   description=settings[agent].__doc__)  # fmt: skip
    try:
        folder = train(specs[agent], cfg)
    except SettingsError as err:
        print(f"prioritylab train {agent}: error: {err}", file=sys.stderr)
        return 2
    print(f"run written to {folder}")
    return 0


def env_option(args: list[str]) -> str:
    """The value of the last ``--env X`` / ``--env=X`` in ``args``; empty if none."""
    value = ""
    for i, arg in enumerate(args):
        if arg == "--env" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--env="):
            value = arg.split("=", 1)[1]
    return value
