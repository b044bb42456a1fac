"""Import a script of ``theory/`` or ``scripts/`` (not packages) as a module, once per test session."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(folder: str, stem: str):
    name = f"{folder}_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def load_theory_script(stem: str):
    """``theory/<stem>.py`` as a module, kept in ``sys.modules`` (its dataclasses need that)."""
    return _load("theory", stem)


def load_script(stem: str):
    """``scripts/<stem>.py`` as a module, kept in ``sys.modules``."""
    return _load("scripts", stem)
