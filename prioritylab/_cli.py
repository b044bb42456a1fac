"""What every command line of the project shares: one-line errors, checked numbers, writable outputs.

The rule: every option is checked, and the output folder is checked to be
writable, before any work starts; a bad value gets one line naming it
(``prog: error: ...``) and exit code 2, with nothing written.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

PARENT_PID = "PRIORITYLAB_PARENT_PID"  # set by a parent (``prioritylab sweep``) whose death must end this process
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|obj):`~?([^`]+)`")

REFUSED = 2
"""The exit code of a command refused before any work (a bad setting, a folder in use or not its own), as
argparse's; ``prioritylab sweep`` reads it from the runs it starts."""


def typed_twice(first: str, again: str) -> str:
    """The refusal of an option typed twice, first as ``first`` and again as ``again`` (the same name, or another
    of the option's names)."""
    names = "" if again == first else f" (as {first} and {again})"
    return f"{first} is given twice{names}; give it once"


def train_program(agent: str) -> str:
    """The name that ``prioritylab train <agent>``'s errors and warnings start with."""
    return f"prioritylab train {agent}"


def plain(text: str | None) -> str | None:
    """Docstring reST made plain for a terminal: ``x`` and :func:`x` become x."""
    if text is None:
        return None
    return _ROLE.sub(r"\1", text).replace("``", "")


class Parser(argparse.ArgumentParser):
    """``argparse`` with a one-line error (no usage block) and the defaults shown in ``--help``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs["description"] = plain(kwargs.get("description"))
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(REFUSED, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, but an option typed twice is an error (argparse keeps the last: ``--n 3 --n 4`` would
        run n = 4 alone), and, where the parser was set up with :func:`remember_defaults`, with ``given_dests``:
        the options the command line typed, whatever their values, which :func:`given` reads."""
        typed, twice = self._typed(sys.argv[1:] if args is None else list(args))
        if twice:
            self.error(twice)
        parsed, extras = super().parse_known_args(args, namespace)
        if "given_defaults" in self._defaults:  # its own words only: a subcommand's parser reads its own
            parsed.given_dests = sorted(typed)
        return parsed, extras

    REPEATABLE = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction, argparse._ExtendAction,
                  argparse._HelpAction, argparse._VersionAction)  # fmt: skip
    """Actions that are meant to be given again (``--against A --against B``)."""

    def _typed(self, args: list[str]) -> tuple[set[str], str]:
        """The options (``dest``) among this parser's words, and "--n is given twice; give it once" for the first
        typed again (as ``--opt value`` or ``--opt=value``, under another of its names too), "" if none.  The
        words end at a subcommand's name, whose parser reads the rest, or at ``--``."""
        seen: dict[str, str] = {}
        commands = {name for a in self._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}
        for token in args:
            if token == "--" or token in commands:
                break
            name = token.split("=", 1)[0]
            action = self._action_of(name) if token.startswith("-") else None
            if action is None:
                continue
            if action.dest in seen and not isinstance(action, self.REPEATABLE):
                return set(seen), typed_twice(seen[action.dest], name)
            seen.setdefault(action.dest, name)
        return set(seen), ""

    def _action_of(self, name: str):
        """The action an option's name stands for, as argparse reads it: the name itself, or a long option it
        abbreviates uniquely (``--see`` for ``--seeds``); None if neither."""
        if name in self._option_string_actions:
            return self._option_string_actions[name]
        if not (self.allow_abbrev and name.startswith("--")):
            return None
        found = {id(a): a for option, a in self._option_string_actions.items() if option.startswith(name)}
        return next(iter(found.values())) if len(found) == 1 else None


class Distinct(argparse.Action):
    """A list option (``nargs``) whose values must differ: a repeat would be measured or run twice and pooled."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = []
        for value in values:
            if value in seen:
                shown = f"{value:,}" if isinstance(value, int) else str(value)
                parser.error(f"{option_string} gives {shown} twice")
            seen.append(value)
        setattr(namespace, self.dest, list(values))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions kept as written; an option's help ends with its default unless it names one already, or the
    default is empty (``""``, ``[]``), which would read ``(default: )``."""

    def _get_help_string(self, action):
        text = plain(action.help) or ""
        default = action.default
        if ("default" in text or any(default is x for x in (None, False, argparse.SUPPRESS))  # 0 is shown
                or not action.option_strings or isinstance(action, argparse._HelpAction)):  # fmt: skip
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"{text} (default: {shown})" if shown.strip() else text


def runs_counted(n: int) -> str:
    """``"1 run"``, ``"2 runs"``: a count of runs as the commands print it."""
    return f"{n} run" if n == 1 else f"{n} runs"


def fail(prog: str, message: str):
    """Print ``prog: error: message`` on one line and exit with code :data:`REFUSED`."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(REFUSED)


def _int_at_least(text: str, low: int, kind: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        raise argparse.ArgumentTypeError(f"must be a {kind} integer, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    return _int_at_least(text, 1, "positive")


def nonnegative_int(text: str) -> int:
    """``argparse`` type: an integer >= 0."""
    return _int_at_least(text, 0, "non-negative")


BOOKKEEPING = ("func", "given_defaults", "given_dests")
"""What :func:`remember_defaults` and :class:`Parser` add to a command's namespace beside its options."""


def remember_defaults(p: argparse.ArgumentParser, **defaults) -> None:
    """``p.set_defaults(**defaults)``, and every option's default as ``given_defaults``, so that :func:`given`
    can tell which options the command line gave."""
    p.set_defaults(**defaults, given_defaults={k: v for k, v in vars(p.parse_args([])).items() if k != "given_dests"})


def given(args: argparse.Namespace, names=None) -> list[str]:
    """The options (their ``dest``, in the parser's order) that the command line typed, even at their default
    value (``--batch 256`` beside ``--quick`` is 256); only those in ``names`` when given.  The parser must be a
    :class:`Parser` set up with :func:`remember_defaults`."""
    typed = args.given_dests
    return [k for k in args.given_defaults if k not in BOOKKEEPING and (names is None or k in names)
            and k in typed]  # fmt: skip


def check_output_dir(path, option: str = "--out", program: str | None = None) -> Path:
    """Create ``path`` if needed and prove it writable with a probe file; ``ValueError`` naming it if not.

    Refuses an existing regular file and a folder that cannot be written, so that no work is done
    whose results could not be saved.  With ``program`` (the name a results folder's ``manifest.json``
    records as its ``program``), also a folder holding another program's results: its manifest would be
    replaced while its other files stayed, described by none; and a training run's folder, or a folder
    inside one: its manifest is what a resume reads, and the run's own files are no place for results.
    """
    check_not_empty(path, option)
    path = Path(path)
    check_not_a_file(path, option)
    if program is not None:  # before any folder is made
        check_not_in_run(path, option)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ValueError(f"{option} {path} cannot be written: {err.strerror or err}") from None
    if program is not None:
        try:
            other = json.loads((path / "manifest.json").read_text()).get("program", program)
        except (OSError, ValueError, AttributeError):  # none, or not one of ours: nothing to tell
            other = program
        if other != program:
            raise ValueError(f"{option} {path} holds the results of {other} (its manifest.json); give another "
                             "folder, or move them away")  # fmt: skip
    return path


def check_not_empty(value, option: str = "--out", what: str = "a folder (. for the current one)") -> None:
    """``ValueError`` for an empty or blank path given as text: ``Path("")`` is the current folder, and an empty
    value is a slip (a shell variable that was not set), not a request to write there."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{option} is empty; give {what}")


def empty_refused(prog: str, value, option: str = "--out", what: str = "a folder (. for the current one)") -> None:
    """:func:`check_not_empty` for a command line: its refusal as ``prog``'s one-line error, before any work."""
    try:
        check_not_empty(value, option, what)
    except ValueError as err:
        fail(prog, str(err))


def check_not_a_file(path, option: str) -> None:
    """``ValueError`` where the folder ``path``, or the nearest of its parents that exists (the folder it would be
    made in), is an existing file."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is an existing file, not a folder")
    above = next((f for f in path.parents if f.exists()), None)
    if above is not None and not above.is_dir():
        raise ValueError(f"{option} {path}: {above} is an existing file, not a folder")


def check_not_in_run(path, option: str, advice: str = "give another folder",
                     why: str = " (its manifest.json is the run's)") -> None:  # fmt: skip
    """``ValueError`` where ``path`` is a training run's folder or lies inside one (:func:`is_run_folder`): the run's
    files are its own, and a run or results written there would be found with it."""
    path = Path(path)
    here = path.resolve()
    run = next((f for f in (here, *here.parents) if is_run_folder(f)), None)
    if run is not None:
        where = "is" if run == here else f"is inside {run}, which is"
        raise ValueError(f"{option} {path} {where} a training run's folder{why}; {advice}")


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a training run: a ``manifest.json`` with the run's ``command`` and ``config`` and no
    ``program``, which the results of ``prioritylab report``, ``cliffwalk`` and the theory scripts record."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and "program" not in manifest and {"command", "config"} <= manifest.keys()


def missing_dirs(path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first: what :func:`check_output_dir`
    would create, for :func:`remove_empty_dirs` to take back when the command then fails."""
    out = []
    for folder in (Path(path), *Path(path).parents):
        if folder.exists():
            break
        out.append(folder)
    return out


def remove_empty_dirs(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty; a folder something was written into stays."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def check_output_file(path, option: str) -> Path:
    """The folder of ``path`` must be writable (:func:`check_output_dir`) and ``path`` not a folder."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder, not a file")
    check_output_dir(path.parent if str(path.parent) else Path("."), option=f"{option} {path}: folder")
    return path


def die_with_parent() -> None:
    """End this process with SIGTERM when the parent named by ``$PRIORITYLAB_PARENT_PID`` dies (Linux).

    ``prioritylab sweep`` sets the variable for its ``prioritylab train`` processes: the kernel's
    parent-death signal (``prctl(PR_SET_PDEATHSIG)``) reaches them even when the sweep is killed with
    SIGKILL, and SIGTERM makes a run stop at its episode end with a checkpoint.  A parent already gone
    before the request is caught by comparing the parent pid.  Elsewhere, or without the variable,
    nothing happens.
    """
    parent = os.environ.pop(PARENT_PID, None)
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:  # pragma: no cover - always allowed
        return
    if str(os.getppid()) != parent:  # the parent died before the request: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)
