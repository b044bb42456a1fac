"""Shared test settings: Hypothesis profiles.

* ``ci`` (default): 40 examples per property, derandomized, so every run (and CI) checks the same
  examples and a failure reproduces exactly.
* ``dev`` (``HYPOTHESIS_PROFILE=dev``): 2,000 examples per property from a random seed, to search
  further; Hypothesis prints the seed and the failing example of any failure.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
