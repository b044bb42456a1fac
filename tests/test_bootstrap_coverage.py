"""``scripts/bootstrap_coverage.py``: how often the report's 95 % intervals miss the truth with few runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from theory_scripts import load_script


def test_the_truths_are_those_of_the_simulated_scores():
    """For normals of unit spread P(X > Y) is Phi(shift / sqrt(2)) and the IQM the mean; the lognormal draws
    have zero mean and unit spread, and its truths are those of a large sample."""
    script = load_script("bootstrap_coverage")
    rng = np.random.default_rng(0)
    assert script.truths(1.0, "normal", rng) == (pytest.approx(stats.norm.cdf(1 / math.sqrt(2))), 1.0)
    x = script.draw(rng, 1_000_000, "lognormal")
    assert abs(x.mean()) < 0.01 and x.std() == pytest.approx(1.0, abs=0.02)
    p, iqm = script.truths(0.0, "lognormal", rng)
    assert p == pytest.approx(0.5, abs=0.002)
    assert iqm < -0.2  # right-skewed: the middle half lies below the mean


def test_a_study_is_counted_by_whether_each_interval_holds_its_truth(monkeypatch):
    """At a shift of 10 standard deviations every X run beats every Y run, so P's interval is [1, 1] in every
    study: it excludes 1/2 each time, and misses a truth of Phi(10 / sqrt(2)) = 1 - 8e-13 each time (from above),
    but not a truth of exactly 1.  The Welch and IQM intervals miss only by chance."""
    script = load_script("bootstrap_coverage")
    r = script.coverage(5, 10.0, studies=10, reps=100, dist="normal", seed=0)
    assert r["miss_p"] == 1.0 and r["excludes_half"] == 1.0 and 0 < 1 - r["p_true"] < 1e-12
    assert r["miss_welch"] <= 0.3 and r["miss_iqm"] <= 0.4
    assert script.coverage(5, 10.0, studies=10, reps=100, dist="normal", seed=0) == r
    monkeypatch.setattr(script, "truths", lambda shift, dist, rng: (1.0, shift))
    exact = script.coverage(5, 10.0, studies=10, reps=100, dist="normal", seed=0)
    assert exact["miss_p"] == 0 and exact["miss_welch"] == r["miss_welch"] and exact["miss_iqm"] == r["miss_iqm"]


@pytest.mark.parametrize(("args", "message"), [
    (["--runs", "1"], "--runs must be at least 2, got 1"),
    (["--shift", "-1"], "--shift must be a finite number at least 0, got -1.0"),
    (["--shift", "0", "nan"], "--shift must be a finite number at least 0, got nan"),
])  # fmt: skip
def test_bad_settings_are_refused_in_one_line(capsys, args, message):
    script = load_script("bootstrap_coverage")
    with pytest.raises(SystemExit) as stop:
        script.main(args)
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)
