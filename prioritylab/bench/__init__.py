"""Speed benchmarks: ``prioritylab bench sumtree`` and ``prioritylab bench agent`` (see docs/benchmarks.md)."""

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
