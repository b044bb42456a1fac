"""Schedules given to samplers by the caller (no hidden schedules in buffers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinearSchedule:
    """Linear interpolation from ``start`` to ``end`` over ``steps``, then constant.

    PER anneals the IS exponent beta linearly from beta0 to 1 over training
    (Section 3.4): ``LinearSchedule(0.4, 1.0, total_steps)``.
    """

    start: float
    end: float
    steps: int

    def __post_init__(self):
        if self.steps <= 0:
            raise ValueError(f"steps must be positive, got {self.steps!r}")

    def __call__(self, t: int) -> float:
        frac = min(max(t, 0) / self.steps, 1.0)
        return self.start + frac * (self.end - self.start)
