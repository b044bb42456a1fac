"""Replay samplers behind one protocol, built by name with :func:`make_sampler`."""

from __future__ import annotations

import re

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
        # "unexpected keyword argument 'x'", or "multiple values for argument 'x'" (a parameter the sampler fixes)
        bad = re.search(r"argument '(\w+)'", str(err))
        if bad is None or bad[1] not in params:  # not a parameter this sampler does not take: a fault, kept as it is
            raise
        raise ValueError(f"{bad[1]}={params[bad[1]]!r}: sampler {name!r} does not take {bad[1]!r}") from None


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
