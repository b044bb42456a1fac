"""The beta schedule the caller passes to samplers."""

import pytest

from prioritylab import LinearSchedule


def test_linear_schedule_interpolates_then_holds():
    beta = LinearSchedule(0.4, 1.0, steps=100)  # PER Section 3.4: anneal beta0 -> 1
    assert beta(0) == 0.4
    assert beta(50) == pytest.approx(0.7)
    assert beta(100) == 1.0
    assert beta(10**6) == 1.0
    assert beta(-5) == 0.4


def test_linear_schedule_rejects_non_positive_steps():
    with pytest.raises(ValueError, match="steps"):
        LinearSchedule(0.4, 1.0, steps=0)
