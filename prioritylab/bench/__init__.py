"""Speed benchmarks: ``prioritylab bench sumtree`` and ``prioritylab bench agent`` (see docs/benchmarks.md)."""

OPS = ("update", "sample", "per-step")
"""Operations ``prioritylab bench sumtree`` measures."""
PEERS = ("tianshou", "cpprb", "numpy")
"""Peers it compares against (tianshou and cpprb come with the ``bench`` extra)."""
