"""Shared test settings: Hypothesis profiles (fast by default, ``HYPOTHESIS_PROFILE=slow`` for many more)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("slow", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
