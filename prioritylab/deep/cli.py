"""``prioritylab train {td3,sac,dqn,ddqn} ...``: every field of the agent's settings is a flag (tyro).

An agent module exports ``SPECS`` (name -> Spec) and ``SETTINGS`` (name -> settings dataclass).  ``dqn`` and ``ddqn``
with ``--env MinAtar/<Game>-v1`` take the MinAtar settings and network (``MINATAR_SPECS``,
``MINATAR_SETTINGS`` of :mod:`prioritylab.deep.dqn`), so ``--help`` after such an ``--env`` shows those.
Errors are one line (``prioritylab train AGENT: error: ...``, exit 2), tyro's parsing errors included; an
integer setting also takes an integral number in scientific notation (``--steps 1e6``).  A run stopped by
Ctrl-C or SIGTERM ends with ``interrupted at step N; resume with --resume`` and exit code 128 + the signal
(130 for Ctrl-C), after its checkpoint is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import re
import signal
import sys
import types
import typing
from decimal import Decimal, InvalidOperation

from .._cli import REFUSED, train_program, typed_twice
from ..results import FINISHED

AGENTS = {"td3": "prioritylab.deep.td3", "sac": "prioritylab.deep.sac", "dqn": "prioritylab.deep.dqn",
          "ddqn": "prioritylab.deep.dqn"}  # fmt: skip
_SCIENTIFIC = re.compile(r"[+]?[0-9]+(\.[0-9]*)?[eE][+]?[0-9]+")
_BOX = "╭╮╰╯│─"


def usage(settings: dict) -> str:
    lines = ["usage: prioritylab train {" + ",".join(AGENTS) + "} [--help] [settings...]"]
    lines += [f"  {name:5s} {settings[name].__doc__.splitlines()[0]}" for name in AGENTS]
    return "\n".join(lines)


@functools.cache
def int_flags(cls, prefix: str = "") -> frozenset[str]:
    """The flags of the integer fields of a settings dataclass (nested ones as ``--replay.name``); once a class
    (a sweep's check parses every run's recorded command)."""
    flags = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            flags |= int_flags(kind, f"{prefix}{f.name}.")
        elif kind is int or (typing.get_origin(kind) in (typing.Union, types.UnionType)
                             and int in typing.get_args(kind) and float not in typing.get_args(kind)):  # fmt: skip
            flags.add("--" + prefix + f.name.replace("_", "-"))
    return frozenset(flags)


def integral_scientific(argv: list[str], flags: set[str]) -> list[str]:
    """``--steps 1e6`` and ``--steps=1e6`` as ``--steps 1000000``: an integral value in scientific notation
    given to an integer flag is written out (exactly, through ``Decimal``); anything else is left to tyro."""

    def convert(text: str) -> str:
        if not _SCIENTIFIC.fullmatch(text):
            return text
        try:
            value = Decimal(text)
        except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
            return text
        if value.adjusted() > 18:  # past every count's bound (2**62): left as given, for tyro to refuse
            return text  # (written out, 1e3000000 would take seconds, and 1e5000 exceeds int()'s digit limit)
        return str(int(value)) if value == value.to_integral_value() else text

    out = list(argv)
    for i, token in enumerate(out):
        flag, sep, value = token.partition("=")
        if flag in flags and sep:
            out[i] = f"{flag}={convert(value)}"
        elif token in flags and i + 1 < len(out):
            out[i + 1] = convert(out[i + 1])
    return out


def tyro_error(text: str) -> str:
    """The message of tyro's error box on one line, without its frame or title.  tyro draws the box with
    box-drawing characters on a terminal (the title inside the top edge) and, writing into a captured stream
    (``prioritylab sweep``'s check of its runs), as a title line above rules of dashes; either way the message is
    the first paragraph inside the frame."""
    rule = set(_BOX + "-")
    paragraphs: list[list[str]] = []
    current: list[str] = []
    framed = False
    for line in text.splitlines():
        edge = line.strip().startswith(("╭", "╰"))
        framed |= edge
        inner = line.strip().strip("│").strip()
        if edge or not inner or set(inner) <= rule:  # a frame's edge, a rule or a blank line ends a paragraph
            if current:
                paragraphs.append(current)
                current = []
            continue
        current.append(" ".join(inner.split()))
    if current:
        paragraphs.append(current)
    if not paragraphs:
        return "invalid arguments"
    message = paragraphs[0] if framed or len(paragraphs) == 1 else paragraphs[1]  # unframed: a title comes first
    return " ".join(message)


def as_flag(message: str, cls) -> str:
    """A refusal that starts with the name of one of ``cls``'s settings (``stop_after must be ...``, as the checks
    name the fields) with that setting written as the flag one types, ``--stop-after must be ...``."""
    word, sep, rest = message.partition(" ")
    if sep and word in {f.name for f in dataclasses.fields(cls)}:
        return f"--{word.replace('_', '-')} {rest}"
    return message


def flag_typed_twice(argv: list[str]) -> str:
    """"--seed is given twice; give it once" for the first flag typed again (``--flag value`` or ``--flag=value``,
    with ``_`` or ``-``, ``--no-x`` for ``--x``); "" if none.  tyro keeps the last, so ``--seed 1 --seed 2`` would
    run seed 2 alone: every flag of ``train`` takes its values once (a list, several after one flag)."""
    seen: dict[str, str] = {}
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--") or token == "--help":
            continue
        name = token.split("=", 1)[0]
        key = name[2:].replace("_", "-").removeprefix("no-")
        if key in seen:
            return typed_twice(seen[key], name)
        seen[key] = name
    return ""


def parse(cls, argv: list[str], prog: str):
    """tyro's parse, with its error box turned into one line (``SystemExit(2)`` after printing it); a flag typed
    twice is refused (:func:`flag_typed_twice`)."""
    import tyro

    twice = flag_typed_twice(argv)
    if twice:
        print(f"{prog}: error: {twice}", file=sys.stderr)
        raise SystemExit(REFUSED)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(cls, args=integral_scientific(argv, int_flags(cls)), prog=prog, description=cls.__doc__)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            print(f"{prog}: error: {tyro_error(captured.getvalue())}", file=sys.stderr)
            raise SystemExit(REFUSED) from None
        sys.stderr.write(captured.getvalue())
        raise


def _agents() -> tuple[dict, dict]:
    """Every agent's Spec and settings dataclass, by name."""
    import importlib

    specs, settings = {}, {}
    for name, module in AGENTS.items():
        mod = importlib.import_module(module)
        specs[name], settings[name] = mod.SPECS[name], mod.SETTINGS[name]
    return specs, settings


def _for_env(agent: str, argv: list[str], specs: dict, settings: dict) -> tuple:
    """The Spec and settings class of ``agent`` for the ``--env`` in ``argv`` (MinAtar's for a MinAtar game)."""
    from .minatar import is_minatar

    if agent in ("dqn", "ddqn") and is_minatar(env_option(argv)):
        from . import dqn

        return dqn.MINATAR_SPECS[agent], dqn.MINATAR_SETTINGS[agent]
    return specs[agent], settings[agent]


def recorded_for(argv: list[str]) -> dict:
    """What ``manifest.json`` would record (config and resolved method) of ``prioritylab train`` with ``argv``
    (``[agent, flags...]``), nothing run; a bad agent, flag or setting (every check ``train`` makes of the settings
    alone, :func:`~prioritylab.deep.loop.check_settings`) is ``ValueError`` with its message on one line."""
    from .methods import Method
    from .run import recorded_now

    spec, cfg = _checked(argv)
    return recorded_now(cfg, argv[0], Method(cfg.sampler, cfg.replay, spec.defaults, cfg.steps).describe())


def check_environments(runs: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Every check ``train`` makes before any work of a run's settings (as :func:`recorded_for`) and of its
    environment (the id exists, the agent can act on it, the sampler can work on it, the run fits in memory), for
    each ``(name, argv)`` of ``runs``; one environment is made per agent and id.  ``ValueError`` naming the first
    run refused, with ``train``'s message.  Returns the bytes each run needs at least (its replay by the memory
    formula, its networks, a batch, an evaluation's returns and NERS's scorer;
    :func:`~prioritylab.deep.loop.check_run_memory`)."""
    from .loop import check_environment
    from .run import SettingsError

    made: dict[tuple[str, str], object] = {}
    needs: dict[str, int] = {}
    try:
        for name, argv in runs:
            try:
                spec, cfg = _checked(argv)
            except ValueError as err:
                raise ValueError(f"run {name}: {err}") from None
            try:
                key = (argv[0], cfg.env)
                if key not in made:
                    made[key] = spec.make_env(cfg.env, cfg)
                needs[name] = check_environment(spec, cfg, made[key])[1]
            except SettingsError as err:
                raise ValueError(f"run {name}: {as_flag(str(err), type(cfg))}") from None
    finally:
        for env in made.values():
            env.close()
    return needs


def unread_for(argv: list[str]) -> tuple[str, list]:
    """The sampler of ``prioritylab train`` with ``argv`` and the settings it was given that the sampler does not
    read (:func:`~prioritylab.deep.methods.unread`); ``ValueError`` as :func:`recorded_for`."""
    from .methods import unread

    _, cfg = _checked(argv)
    return cfg.sampler, unread(cfg.sampler, cfg.replay)


def unread_warnings(agent: str, sampler: str, unused: list) -> list[str]:
    """The lines in which ``prioritylab train <agent>`` names the settings it was given that ``sampler`` does not
    read (``unused``, as :func:`unread_for` gives them); a sweep names them once for all its runs instead."""
    return [f"{train_program(agent)}: warning: --replay.{name.replace('_', '-')} {value} has no effect with "
            f"--sampler {sampler} (read by {', '.join(readers) or 'no sampler'})"
            for name, value, readers in unused]  # fmt: skip


def _checked(argv: list[str]):
    """``(spec, settings)`` of ``prioritylab train`` with ``argv``, checked as :func:`recorded_for` says."""
    from .loop import check_settings
    from .run import SettingsError, check_out

    specs, settings = _agents()
    if not argv or argv[0] not in AGENTS:
        raise ValueError(f"unknown agent {argv[0] if argv else ''!r}; choose one of {', '.join(AGENTS)}")
    spec, cls = _for_env(argv[0], argv[1:], specs, settings)
    prog = train_program(argv[0])
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(io.StringIO()):
            cfg = parse(cls, argv[1:], prog)
    except SystemExit:
        lines = captured.getvalue().strip().splitlines()
        raise ValueError(lines[-1].removeprefix(f"{prog}: error: ") if lines else "invalid arguments") from None
    try:
        check_given_out(argv[1:])
        check_settings(spec, cfg)
        check_out(cfg.out)
    except SettingsError as err:
        raise ValueError(as_flag(str(err), cls)) from None
    return spec, cfg


def main(argv: list[str]) -> int:
    from .loop import train
    from .methods import Method, unread
    from .run import Interrupted, RunStopped, SettingsError, run_dir

    specs, settings = _agents()
    if not argv or argv[0] not in AGENTS:
        if argv and argv[0] in ("-h", "--help"):
            print(usage(settings))
            return 0
        if argv:
            print(f"prioritylab train: error: unknown agent {argv[0]!r}; choose one of {', '.join(AGENTS)}",
                  file=sys.stderr)  # fmt: skip
        else:
            print(usage(settings), file=sys.stderr)
        return REFUSED
    agent = argv[0]
    spec, cls = _for_env(agent, argv[1:], specs, settings)
    prog = train_program(agent)
    cfg = parse(cls, argv[1:], prog)  # SystemExit after --help or a parsing error
    try:
        Method(cfg.sampler, cfg.replay, spec.defaults, cfg.steps)
        unused = unread(cfg.sampler, cfg.replay)
    except (ValueError, TypeError):  # a bad sampler or setting: train refuses it, in one line
        unused = []
    for line in unread_warnings(agent, cfg.sampler, unused):
        print(line, file=sys.stderr)
    was_finished = cfg.resume and (run_dir(cfg, spec.name) / FINISHED).exists()
    try:
        check_given_out(argv[1:])
        folder = train(spec, cfg)
    except SettingsError as err:
        print(f"{prog}: error: {as_flag(str(err), cls)}", file=sys.stderr)
        return REFUSED
    except Interrupted as stop:
        print(f"{stop} (run folder {stop.folder})", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:  # a second Ctrl-C, or one before the run had started
        print(f"{prog}: stopped at once by an interrupt, without a checkpoint: --resume continues from the run's "
              "last checkpoint if it wrote one, --restart runs it again if not", file=sys.stderr)  # fmt: skip
        return 128 + signal.SIGINT
    except RunStopped as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    if not (folder / FINISHED).exists():  # stopped at --stop-after, as asked
        print(f"run stopped at its --stop-after step with a checkpoint in {folder}; continue it with --resume")
        return 0
    if was_finished:
        print(f"{folder} already holds a finished run; nothing was trained (--overwrite runs it again)")
        return 0
    print(f"run written to {folder}")
    return 0


def env_option(args: list[str]) -> str:
    """The value of the last ``--env X`` / ``--env=X`` in ``args``; empty if none."""
    return option_value(args, "--env") or ""


def option_value(args: list[str], flag: str) -> str | None:
    """The value of the last ``flag X`` / ``flag=X`` in ``args``; ``None`` if none."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def check_given_out(args: list[str]) -> None:
    """An empty ``--out ''`` would be read as the current folder (``Path("")``): a slip, refused."""
    from .._cli import check_not_empty
    from .run import SettingsError

    try:
        check_not_empty(option_value(args, "--out"), what="the folder that holds the runs (. for the current one)")
    except ValueError as err:
        raise SettingsError(str(err)) from None
