"""Keep Numba's on-disk cache in step with the package's kernel sources.

Numba keys a cached kernel on its own source file only.  A kernel that calls a
kernel of another module (``samplers/pser.py`` calling ``priorities.pser_decay``)
keeps its cached machine code, the callee compiled in, after the callee's file is
edited: the edit has no effect and nothing says so.  :func:`refresh` closes that
gap: it hashes the sources of every module of the package that caches a kernel,
compares the digest with the one recorded beside the cache, and on a difference
empties the cache index of every cached kernel of those modules, so each is
compiled again from the sources on its first call.  The package runs it once, on
import, before any kernel is called.

The digest lives in the cache folder of :mod:`prioritylab.sumtree` (in-tree
``__pycache__``, or wherever ``NUMBA_CACHE_DIR`` and Numba's own rules put it), so
a second cache folder keeps a digest of its own.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
import warnings
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Numba keeps one cache index per interpreter version (``*.py311.nbi``), so each version keeps its own digest
STAMP = f"prioritylab-kernels.{sys.implementation.cache_tag}.sha256"
# a decorator line such as ``@njit(cache=True)`` or ``@numba.jit(nopython=True, cache=True)``
MARK = re.compile(r"^[ \t]*@(?:numba\.)?n?jit\(.*\bcache=True", re.MULTILINE)


def kernel_modules(root: Path = PACKAGE, package: str = __package__) -> list[tuple[str, Path]]:
    """``(module name, path)`` of every module under ``root`` whose source asks Numba to cache a kernel."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "cache=True" not in text or not MARK.search(text):  # the plain test first: most modules have none
            continue
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join((package, *parts)), path))
    return found


def sources_digest(modules: list[tuple[str, Path]]) -> str:
    """One SHA-256 over the modules' names and sources, in name order."""
    h = hashlib.sha256()
    for name, path in sorted(modules):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cached_kernels(module) -> list:
    """The dispatchers defined in ``module`` that keep an on-disk cache."""
    out = []
    for obj in vars(module).values():
        cache = getattr(obj, "_cache", None)
        if getattr(obj, "__module__", None) == module.__name__ and getattr(cache, "cache_path", None):
            out.append(obj)
    return out


def refresh(anchor, root: Path = PACKAGE, package: str = __package__) -> list[str]:
    """Empty every cached kernel's index if the kernel sources changed since the digest beside ``anchor``'s cache.

    ``anchor`` is one cached kernel of the package; its cache folder holds the
    digest.  Returns the names of the kernels whose index was emptied (none when
    the sources are unchanged, or when Numba's JIT is off and nothing is cached).
    """
    folder = getattr(getattr(anchor, "_cache", None), "cache_path", None)
    if not folder:
        return []
    modules = kernel_modules(root, package)
    digest = sources_digest(modules)
    stamp = Path(folder) / STAMP
    try:
        if stamp.read_text(encoding="ascii").strip() == digest:
            return []
    except (OSError, UnicodeDecodeError):
        pass
    emptied = []
    for name, _ in modules:
        for kernel in cached_kernels(importlib.import_module(name)):
            kernel._cache.flush()
            emptied.append(f"{name}.{kernel.__name__}")
    try:
        tmp = stamp.with_name(f"{STAMP}.{os.getpid()}.tmp")
        tmp.write_text(digest + "\n", encoding="ascii")
        os.replace(tmp, stamp)
    except OSError as err:
        warnings.warn(
            f"prioritylab cannot record its kernel sources' digest at {stamp} ({err}); "
            "its compiled kernels will be rebuilt on every import",
            RuntimeWarning,
            stacklevel=2,
        )
    return emptied
