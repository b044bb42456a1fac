"""``scripts/paper_power.py``: the power of a planned Welch comparison at a paper's effect and spread."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from theory_scripts import load_script


def test_power_is_the_rejection_rate_of_simulated_studies():
    """With equal spreads and seeds a side, Welch's degrees of freedom at the true spreads are Student's 2(n - 1),
    for which the noncentral t gives the exact power: 40,000 simulated 5-seed studies, each tested with
    Student's t, reject at the computed rate within 4 binomial standard errors (0.01 here)."""
    script = load_script("paper_power")
    rng = np.random.default_rng(0)
    n, sims, sd, diff = 5, 40_000, 1.0, 1.4
    power, half = script.welch_power(diff, sd, sd, n)
    a = rng.normal(diff, sd, size=(sims, n))
    b = rng.normal(0.0, sd, size=(sims, n))
    rate = float(np.mean(stats.ttest_ind(a, b, axis=1).pvalue < 0.05))
    assert abs(rate - power) < 4 * math.sqrt(power * (1 - power) / sims), (rate, power)
    assert half == pytest.approx(stats.t.ppf(0.975, 2 * (n - 1)) * sd * math.sqrt(2 / n), rel=1e-12)
    assert 0.3 < power < 0.7  # a case where the comparison is informative: neither 0 nor 1


def test_seeds_for_is_the_fewest_runs_reaching_the_power():
    script = load_script("paper_power")
    n = script.seeds_for(1.0, 1.0, 1.5)
    assert script.welch_power(1.0, 1.0, 1.5, n)[0] >= 0.8 > script.welch_power(1.0, 1.0, 1.5, n - 1)[0]
    assert script.seeds_for(0.001, 1.0, 1.0, most=50) is None


def test_the_spread_is_read_back_from_the_half_width_both_ways():
    script = load_script("paper_power")
    assert script.run_sd(2.262157 * 3 / math.sqrt(10), 10, "t") == pytest.approx(3.0, rel=1e-6)
    assert script.run_sd(1.959964 * 3 / math.sqrt(10), 10, "z") == pytest.approx(3.0, rel=1e-6)


def test_lap_table_1_halfcheetah(capsys):
    """The command in deep/lap_halfcheetah.py: LAP's +9.3 % over TD3 has power well below 0.8 at 5 seeds."""
    script = load_script("paper_power")
    assert script.main(["--trials", "10", "--seeds", "5", "--baseline", "td3", "td3=13570.9,794.2",
                        "lap=14836.5,532.2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "| lap - td3 | t interval | +9.3 % | ±10.4 % | 0.45 | 10 |" in out
    assert "| lap - td3 | z interval | +9.3 % | ±12.0 % | 0.35 | 13 |" in out


@pytest.mark.parametrize(("args", "message"), [
    (["x=1"], "'x=1' is not NAME=MEAN,HALF"),
    (["x=1,0"], "with a positive half-width"),
    (["x=1,2", "x=3,4", "--baseline", "x"], "x is given twice"),
    (["x=1,2", "--pair", "x:y"], "y: not a NAME given (names: x)"),
    (["x=1,2", "--pair", "xy"], "xy: not a NAME given"),
    (["x=1,2", "y=2,2"], "nothing to compare"),
    (["x=1,2", "y=2,2", "--pair", "x:y", "--seeds", "1"], "need at least 2 runs"),
])
def test_bad_input_is_a_one_line_error(capsys, args, message):
    script = load_script("paper_power")
    argv = [*args, "--trials", "10"] + ([] if "--seeds" in args else ["--seeds", "5"])
    assert script.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
