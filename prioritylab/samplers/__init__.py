"""Replay samplers behind one protocol, built by name with :func:`make_sampler`."""

from __future__ import annotations

from .base import SampleBatch, Sampler
from .greedy import GreedyTDSampler
from .kernels import PriorityOverflow
from .lap import LAPSampler
from .per import PERSampler
from .priority import PrioritySampler, is_weights
from .pser import PSERSampler
from .rank import RankSampler
from .uniform import UniformSampler

SAMPLERS: dict[str, type[Sampler]] = {
    cls.name: cls for cls in (UniformSampler, PERSampler, RankSampler, LAPSampler, PSERSampler, GreedyTDSampler)
}


def make_sampler(name: str, capacity: int, **params) -> Sampler:
    """Build a sampler from the registry: ``make_sampler("per", 2**20, alpha=0.6, seed=0)``."""
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; known: {sorted(SAMPLERS)}") from None
    try:
        return cls(capacity, **params)
    except TypeError as err:
        if "argument" not in str(err):  # not a parameter this sampler does not take: a fault, kept as it is
            raise
        raise ValueError(f"sampler {name!r} does not take the parameters given: {err}") from None


__all__ = [
    "SAMPLERS",
    "GreedyTDSampler",
    "LAPSampler",
    "PERSampler",
    "PSERSampler",
    "PriorityOverflow",
    "PrioritySampler",
    "RankSampler",
    "SampleBatch",
    "Sampler",
    "UniformSampler",
    "is_weights",
    "make_sampler",
]
