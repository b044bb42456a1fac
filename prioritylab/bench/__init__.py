"""Speed benchmarks: ``prioritylab bench sumtree``, ``prioritylab bench agent`` and ``prioritylab bench replay``
(see docs/benchmarks.md), and what they share: the load, the commit, the peers that import, the JSON record."""

OPS = ("update", "sample", "per-step")
"""Operations ``prioritylab bench sumtree`` measures."""
PEERS = ("tianshou", "cpprb", "numpy")
"""Peers it compares against (tianshou and cpprb come with the ``bench`` extra)."""


def load() -> dict:
    """Load averages and this process's CPU count, recorded next to the figures."""
    import os

    one, five, fifteen = os.getloadavg()
    return {"loadavg_1_5_15": [one, five, fifteen], "cpu_count": os.cpu_count()}


def code() -> dict:
    """The commit the figures come from, and whether the tree differed from it."""
    from ..results import git_commit, git_dirty

    return {"git_commit": git_commit(), "git_dirty": git_dirty()}


def importable(wanted, modules: dict[str, tuple[str, ...]]) -> tuple[list[str], dict[str, str]]:
    """The peers of ``wanted`` whose modules (``modules[name]``, imported in turn) import, and why each other was
    skipped. Any error an import raises skips its peer, named with the error's type: a peer installed at a
    version that breaks on import is skipped, as a missing one is. A name ``modules`` lacks is refused."""
    import importlib

    ok, skipped = [], {}
    for name in wanted:
        if name not in modules:
            raise ValueError(f"unknown peer {name!r}; known: {', '.join(modules)}")
        try:
            for module in modules[name]:
                importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - any import failure means skip
            skipped[name] = f"{type(err).__name__}: {err}"
            continue
        ok.append(name)
    return ok, skipped


def record(config: dict, skipped: dict[str, str], machine_load: dict, results: list[dict], peers=(), **extra) -> dict:
    """A benchmark's JSON: its settings, the peers skipped and why, the machine, its load, the versions of the
    project's packages and of ``peers``, the commit, the results, then ``extra`` fields."""
    from ..results import machine_info, package_versions

    return {"config": config, "skipped_peers": skipped, "machine": machine_info(), "load": machine_load,
            "packages": package_versions(tuple(peers)), **code(), "results": results, **extra}  # fmt: skip
