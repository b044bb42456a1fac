"""Shared test settings: Hypothesis profiles, and the report's bootstrap size.

* ``ci`` (default): 40 examples per property, derandomized, so every run (and CI) checks the same
  examples and a failure reproduces exactly.
* ``dev`` (``HYPOTHESIS_PROFILE=dev``): 2,000 examples per property from a random seed, to search
  further; Hypothesis prints the seed and the failing example of any failure.

``prioritylab report`` draws 2,000 stratified-bootstrap replications per interval (500 for the performance
profiles); its tests draw 200 (50): they check what the report computes from which runs, and that it is
reproducible, not the precision of an interval, and the bootstrap was most of their time.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _small_report_bootstrap(monkeypatch):
    from prioritylab.harness.report import plots, stats

    monkeypatch.setattr(stats, "BOOTSTRAP_REPS", 200)
    monkeypatch.setattr(plots, "PROFILE_REPS", 50)
