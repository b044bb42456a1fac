"""Schedules given to samplers by the caller (no hidden schedules in buffers)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import check_positive_int, check_range


@dataclass(frozen=True)
class LinearSchedule:
    """Linear interpolation from ``start`` to ``end`` over ``steps``, then constant.

    PER anneals the IS exponent beta linearly from beta0 to 1 over training
    (Section 3.4): ``LinearSchedule(0.4, 1.0, total_steps)``.
    """

    start: float
    end: float
    steps: int

    def __post_init__(self):  # a NaN or a fraction of a step would give NaN, or values off the line, later
        for name in ("start", "end"):
            object.__setattr__(self, name, check_range(name, getattr(self, name), -np.inf, np.inf, True, True))
        object.__setattr__(self, "steps", check_positive_int("steps", self.steps))

    def __call__(self, t: int) -> float:
        if isinstance(t, (bool, np.bool_)) or not t == t:  # True reads as step 1, and a NaN step gives a NaN value
            raise ValueError(f"t must be a step number, got {t!r}")
        frac = min(max(t, 0) / self.steps, 1.0)
        return self.start + frac * (self.end - self.start)
