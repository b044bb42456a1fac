"""The beta schedule the caller passes to samplers."""

import re

import pytest

from prioritylab import LinearSchedule


def test_linear_schedule_interpolates_then_holds():
    beta = LinearSchedule(0.4, 1.0, steps=100)  # PER Section 3.4: anneal beta0 -> 1
    assert beta(0) == 0.4
    assert beta(50) == pytest.approx(0.7)
    assert beta(100) == 1.0
    assert beta(10**6) == 1.0
    assert beta(-5) == 0.4


@pytest.mark.parametrize(("args", "message"),
                         [((0.4, 1.0, 0), "steps must be a positive integer, got 0"),
                          ((0.4, 1.0, float("nan")), "steps must be a positive integer, got nan"),
                          ((0.4, 1.0, 2.5), "steps must be a positive integer, got 2.5"),
                          ((0.4, 1.0, True), "steps must be a positive integer, got True"),
                          ((float("nan"), 1.0, 10), "start must be in"), ((0.4, "one", 10), "end must be a number")])
def test_linear_schedule_rejects_what_would_give_nan_or_values_off_its_line(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        LinearSchedule(*args)
