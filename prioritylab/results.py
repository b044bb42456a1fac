"""Plain-file results: atomic writes and the ``manifest.json`` of every run."""

from __future__ import annotations

import csv
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

_PACKAGES = ("numpy", "numba", "scipy", "matplotlib", "torch", "gymnasium", "mujoco", "ale-py", "minatar", "rliable",
             "prioritylab")


MANIFEST = "manifest.json"  # a run's settings and provenance (also a report's and a theory script's record)
FINISHED = "finished.json"  # written at a run's last step only, so a run with it is complete
EVALS = "evaluations.csv"  # a run's evaluation rows
TIMING = "timing.csv"  # a run's wall times and rates at each evaluation
CHECKPOINT = "checkpoint.pt"  # a run's state at its last checkpoint (never committed)
"""The names of a run's files, for the code that writes them (``deep/run.py``) and the code that reads them without
importing torch (the sweep, ``collect``, the report)."""


def file_mode() -> int:
    """The permissions of a newly created file under the current umask (0644 under the usual 022).

    ``tempfile.mkstemp`` creates its files 0600; an atomic write sets this mode before the rename,
    so results read like any other file.
    """
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def run_folder(agent: str, env: str, sampler: str, seed: int | str) -> str:
    """A training run's folder name, ``<agent>_<env, '/' as '-'>_<sampler>_s<seed>``: composed here only, for
    ``prioritylab train``, which writes the folder, and ``prioritylab sweep``, which looks for it."""
    return f"{agent}_{str(env).replace('/', '-')}_{sampler}_s{seed}"


def atomic_write(path: Path, write, binary: bool = False, parents: bool = True) -> None:
    """Call ``write(fh)`` on a temporary file in the same folder, then rename it to ``path``: a kill or an
    error never leaves a half-written file (nor the temporary one).  The file, and the folder after the
    rename, are flushed to the disk, so that a power loss leaves the old file or the new one, not an empty
    one.  ``parents=False``: a missing folder is not made again (``FileNotFoundError``), for the files of a
    folder that must exist, such as a training run's."""
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline="") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
        _sync_folder(path.parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened for reading (some platforms): the rename stands unflushed
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def as_recorded(obj):
    """``obj`` as :func:`write_json` records it, read back (tuples become lists, NumPy scalars numbers)."""
    return json.loads(json.dumps(obj, default=_jsonable))


def write_json(path, obj, parents: bool = True) -> None:
    atomic_write(Path(path), lambda fh: json.dump(obj, fh, indent=2, sort_keys=True, default=_jsonable),
                 parents=parents)  # fmt: skip


def write_csv(path, rows: Iterable[Mapping], fieldnames: list[str] | None = None, lineterminator="\r\n",
              parents: bool = True) -> None:  # fmt: skip
    """Rows as CSV, atomically (:func:`atomic_write`); the header is ``fieldnames`` or the first row's keys.  Given
    ``fieldnames`` (in the order the file gives them), a table with no rows still has its header, and a row that
    lacks one of them or has another key is a ``ValueError`` before anything is written (not a blank cell)."""
    rows = list(rows)
    if fieldnames is None:
        fieldnames = list(rows[0].keys()) if rows else []
    else:
        fieldnames = list(fieldnames)
        for row in rows:
            if row.keys() != set(fieldnames):
                raise ValueError(f"{path}: a row's columns {list(row)} are not the table's {fieldnames}")

    def _write(fh):
        w = csv.DictWriter(fh, fieldnames=fieldnames, lineterminator=lineterminator)
        w.writeheader()
        w.writerows(rows)

    atomic_write(Path(path), _write, parents=parents)


class NotWhole(ValueError):
    """A CSV file that is not readable CSV or has a row that is not whole (:func:`whole_rows`)."""


def whole_rows(path: Path) -> list[dict]:
    """A CSV file's rows as dicts by its header.  :class:`NotWhole` (its message without the path) for a file
    that is not readable CSV or has a row that is not whole: one with fewer or more fields than the header,
    or a last row without its line end, which a file cut while written leaves (``"1000,63"`` of
    ``"1000,631.5"``); ``OSError`` for a file that cannot be opened."""
    with open(path, newline="", encoding="utf-8-sig") as fh:  # a byte-order mark, as spreadsheets save it, is read
        try:
            text = fh.read()
            rows = list(csv.DictReader(text.splitlines(keepends=True)))
        except (csv.Error, UnicodeDecodeError) as err:
            raise NotWhole(f"not readable CSV ({err})") from None
    for i, row in enumerate(rows):
        if i == len(rows) - 1 and not text.endswith("\n"):  # a file cut while written, whatever its last row holds
            raise NotWhole(f"row {i + 1} is truncated (the file ends without a line end)")
        if None in row or None in row.values():
            fields = sum(k is not None and v is not None for k, v in row.items()) + len(row.get(None) or [])
            raise NotWhole(f"row {i + 1} is not whole: {fields} fields where the header has "
                           f"{len(rows[0]) - (None in rows[0])}")  # fmt: skip
    return rows


def save_figure(fig, path) -> None:
    """Save a matplotlib figure atomically (PNG)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, path)


def _jsonable(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, Path):
        return str(x)
    return repr(x)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def git_dirty(ignore=None, cwd=None) -> bool | None:
    """Whether the working tree differs from the recorded commit (None outside a checkout).

    Changes inside ``ignore`` (the folder a result is being written to) do not count: a report rebuilt
    into a tracked folder changes its own files, which says nothing about the code that made it.  ``cwd``:
    a folder of the checkout (this package's by default).
    """
    here = Path(__file__).parent if cwd is None else Path(cwd)
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=5,
                             cwd=here)  # fmt: skip
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                             text=True, timeout=5, cwd=here)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or top.returncode != 0:
        return None
    root = Path(top.stdout.strip())
    skip = Path(ignore).resolve() if ignore is not None else None
    for line in out.stdout.splitlines():
        path = (root / line[3:].split(" -> ")[-1].strip('"')).resolve()
        if skip is None or not path.is_relative_to(skip):
            return True
    return False


def package_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Installed versions of the project's packages and of ``extra`` ones (peers of a benchmark)."""
    versions = {}
    for name in (*_PACKAGES, *extra):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def machine_info() -> dict:
    """The machine: platform, Python, processor and core count; on Linux the CPU's model and its vector
    instruction sets, and once torch is loaded the kernels it dispatches to (``torch_cpu``).  Floating-point
    results can depend on those: torch picks its CPU kernels by the vector units, so the same seed and code on
    another CPU need not give the same bits (``scripts/rerun_check.py`` compares a run with its re-run here)."""
    info = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        **cpu_model(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_cpu"] = torch.backends.cpu.get_cpu_capability()
    return info


def machine_label(manifest: dict) -> str:
    """The machine a run was recorded on: its platform (kernel and build), then its CPU and the kernels torch
    dispatched to where the manifest records them (:func:`machine_info`); "not recorded" without a platform.
    Two runs of one seed and code on different machines may differ in their last bits, then in their course."""
    machine = manifest.get("machine")
    if not isinstance(machine, dict) or not machine.get("platform"):
        return "not recorded"
    cpu = machine.get("cpu")
    if not cpu:
        return f"{machine['platform']}, CPU not recorded"
    return f"{machine['platform']}, {cpu}" + (f", torch {machine['torch_cpu']}" if machine.get("torch_cpu") else "")


MACHINE_KEYS = ("platform", "cpu", "simd", "torch_cpu")
"""The entries of :func:`machine_info` that can change a run's floating-point results (not its core count)."""


def record_differences(old: Mapping, new: Mapping) -> tuple[list[str], list[str]]:
    """Between two records of where a run ran (a manifest, or one of its ``resumed`` stretches): what differs in
    their machine (:data:`MACHINE_KEYS`) and packages (this project's own version left out), each as
    ``"machine.cpu A -> B"``, and what ``old`` did not record (``"packages.mujoco"``: written before the field)."""
    differ, unrecorded = [], []
    for section, keys in (("machine", MACHINE_KEYS), ("packages", None)):
        was, now = old.get(section) or {}, new.get(section) or {}
        for key in keys or sorted({*was, *now} - {"prioritylab"}):
            if key not in was:
                unrecorded.append(f"{section}.{key}")
            elif was[key] != now.get(key):
                differ.append(f"{section}.{key} {was[key]} -> {now.get(key, 'not recorded')}")
    return differ, unrecorded


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> dict:
    """``cpu`` (model name, family, model) and ``simd`` (its AVX sets) from ``/proc/cpuinfo``; {} elsewhere."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", "").split()
    return {"cpu": f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, model "
                   f"{fields.get('model', '?')})",
            "simd": " ".join(sorted(f for f in flags if f.startswith("avx"))) or "no AVX"}  # fmt: skip


def write_manifest(out_dir, config: Mapping, extra: Mapping | None = None) -> dict:
    """Write ``manifest.json``: config, git commit, package versions, machine, time."""
    manifest = new_manifest(out_dir, config, extra)
    write_json(Path(out_dir) / MANIFEST, manifest)
    return manifest


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran (``sys.argv``), as one can paste it into a shell: ``python -m prioritylab ...`` when
    it ran as the module (whose ``argv[0]`` is the path of ``prioritylab/__main__.py``), ``prioritylab ...`` for
    the installed command, ``python script.py ...`` for a script, and every argument quoted where the shell
    needs it."""
    argv = list(sys.argv if argv is None else argv)
    first = Path(argv[0]) if argv else None
    if first is not None and first.name == "__main__.py" and first.parent.name == "prioritylab":
        argv[:1] = ["python", "-m", "prioritylab"]
    elif first is not None and first.name == "prioritylab":
        argv[0] = "prioritylab"
    elif first is not None and first.suffix == ".py":  # a script (theory/, deep/): not executable on its own
        argv[:0] = ["python"]
    return shlex.join(argv)


def new_manifest(out_dir, config: Mapping, extra: Mapping | None = None) -> dict:
    """What :func:`write_manifest` writes, without writing it."""
    manifest = {
        "config": dict(config),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(ignore=out_dir),
        "packages": package_versions(),
        "machine": machine_info(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command_line(),
    }
    if extra:
        manifest.update(extra)
    return manifest
