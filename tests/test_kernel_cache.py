"""Numba's cache and edits to a kernel that another module's kernel calls (``prioritylab._kernel_cache``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import prioritylab
from prioritylab import _kernel_cache as K

PACKAGE = Path(prioritylab.__file__).resolve().parent

# PER's masses come from ``priorities.mass_of``, compiled into ``samplers/kernels.py``'s ``prepare_update``, the
# kernel every sampler's update calls (called here alone: a whole sampler would compile its other kernels too, for
# about 4 s more a run, and they play no part in this)
PROBE = """
import numpy as np
from prioritylab.priorities import RULES
from prioritylab.samplers.kernels import prepare_update
no_stamps, written = np.empty(0, dtype=np.int64), np.zeros(4, dtype=np.int64)
mass = prepare_update(np.arange(2), np.array([1.0, 3.0]), no_stamps, written, RULES["per"], 0.0, 1.0)[4]
print(repr(float(mass.sum())))
"""
REFRESH = "import prioritylab._kernel_cache as K, prioritylab.sumtree as t; print(len(K.refresh(t.tree_update)))"


def run(code: str, where: Path, env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=where, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("cache_dir", [False, True], ids=["in-tree", "NUMBA_CACHE_DIR"])
def test_an_edit_of_a_kernel_called_from_another_module_takes_effect(tmp_path, cache_dir):
    shutil.copytree(PACKAGE, tmp_path / "prioritylab", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    assert run(PROBE, tmp_path, env) == "4.0"  # 1 + 3, compiled and cached
    assert run(REFRESH, tmp_path, env) == "0"  # sources unchanged: the cache is kept
    rules = tmp_path / "prioritylab" / "priorities.py"
    source = rules.read_text()
    assert source.count("    return raw**alpha\n") == 1
    rules.write_text(source.replace("    return raw**alpha\n", "    return raw**alpha + 1.0\n"))
    # without the refresh Numba would load prepare_update's cached code, the old mass_of in it, and print 4.0
    assert run(PROBE, tmp_path, env) == "6.0"
    assert run(REFRESH, tmp_path, env) == "0"


def test_the_kernel_modules_are_those_that_cache_a_kernel():
    found = dict(K.kernel_modules())
    assert {
        "prioritylab.priorities",
        "prioritylab.sumtree",
        "prioritylab.samplers.pser",
        "prioritylab.replay.kernels",
    } <= set(found)
    assert "prioritylab._kernel_cache" not in found and "prioritylab.samplers.per" not in found
    for path in found.values():
        assert path.is_relative_to(PACKAGE) and K.MARK.search(path.read_text())


def test_a_digest_that_cannot_be_written_is_warned_about(tmp_path, monkeypatch):
    class Cache:
        cache_path = str(tmp_path / "absent" / "folder")

    class Kernel:
        _cache = Cache()

    monkeypatch.setattr(K, "kernel_modules", lambda root, package: [])
    with pytest.warns(RuntimeWarning, match="cannot record its kernel sources' digest"):
        assert K.refresh(Kernel()) == []


def test_without_an_on_disk_cache_nothing_is_done():
    assert K.refresh(object()) == []
    assert K.refresh(lambda: None) == []


def test_each_interpreter_version_keeps_its_own_digest():
    """Numba keeps one index per version (``*.py311.nbi``): a digest shared by two versions would mark the
    other version's index, which the refresh did not empty, as current."""
    import sys

    assert sys.implementation.cache_tag in K.STAMP
