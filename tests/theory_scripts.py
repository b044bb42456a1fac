"""Import a script of ``theory/`` (not a package) as a module, once per test session."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_theory_script(stem: str):
    """``theory/<stem>.py`` as a module, kept in ``sys.modules`` (its dataclasses need that)."""
    name = f"theory_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "theory" / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
