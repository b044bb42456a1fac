"""``scripts/paper_power.py``: the power of a planned Welch comparison at a paper's effect and spread."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from theory_scripts import load_script


def test_the_closed_form_is_the_rejection_rate_of_simulated_student_studies():
    """With equal spreads and seeds a side, Welch's degrees of freedom at the true spreads are Student's 2(n - 1),
    for which the noncentral t gives the exact power: 40,000 simulated 5-seed studies, each tested with
    Student's t, reject at the computed rate within 4 binomial standard errors (0.01 here)."""
    script = load_script("paper_power")
    rng = np.random.default_rng(0)
    n, sims, sd, diff = 5, 40_000, 1.0, 1.4
    power, half = script.approximate_power(diff, sd, sd, n)
    a = rng.normal(diff, sd, size=(sims, n))
    b = rng.normal(0.0, sd, size=(sims, n))
    rate = float(np.mean(stats.ttest_ind(a, b, axis=1).pvalue < 0.05))
    assert abs(rate - power) < 4 * math.sqrt(power * (1 - power) / sims), (rate, power)
    assert half == pytest.approx(stats.t.ppf(0.975, 2 * (n - 1)) * sd * math.sqrt(2 / n), rel=1e-12)
    assert 0.3 < power < 0.7  # a case where the comparison is informative: neither 0 nor 1


def test_the_simulated_power_is_that_of_welchs_interval():
    """The simulated power counts the studies whose Welch interval, computed here by hand, excludes 0.  With equal
    seeds a side Welch's t is Student's and its degrees of freedom are at most Student's, so on the same draws
    it rejects less often: below the closed form here, not above it."""
    script = load_script("paper_power")
    n, sd_a, sd_b, diff, studies = 5, 1.0, 2.0, 1.8, 4000
    power = script.welch_power(diff, sd_a, sd_b, n, studies=studies, seed=3)
    rng = np.random.default_rng(3)
    rejected = 0
    for _ in range(2):  # the blocks of 2000 the script draws
        a, b = rng.normal(diff, sd_a, size=(2000, n)), rng.normal(0.0, sd_b, size=(2000, n))
        va, vb = a.var(axis=1, ddof=1) / n, b.var(axis=1, ddof=1) / n
        df = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (n - 1))
        half = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
        d = a.mean(axis=1) - b.mean(axis=1)
        rejected += int(np.sum((d - half > 0) | (d + half < 0)))
    assert power == rejected / studies
    assert script.welch_power(1.4, 1.0, 1.0, 5) < script.approximate_power(1.4, 1.0, 1.0, 5)[0]


def test_seeds_for_is_the_fewest_runs_reaching_the_power():
    script = load_script("paper_power")
    n = script.seeds_for(1.0, 1.0, 1.5)
    assert script.welch_power(1.0, 1.0, 1.5, n) >= 0.8 > script.welch_power(1.0, 1.0, 1.5, n - 1)
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
    assert "| lap - td3 | t interval | +9.3 % | ±10.4 % | 0.43 | 11 |" in out
    assert "| lap - td3 | z interval | +9.3 % | ±12.0 % | 0.34 | 13 |" in out


@pytest.mark.parametrize(("args", "message"), [
    (["x=1"], "'x=1' is not NAME=MEAN,HALF"),
    (["x=1,0"], "with a positive half-width"),
    (["x=1,2", "x=3,4", "--baseline", "x"], "x is given twice"),
    (["x=1,2", "--pair", "x:y"], "y: not a NAME given (names: x)"),
    (["x=1,2", "--pair", "xy"], "xy: not a NAME given"),
    (["x=1,2", "y=2,2"], "nothing to compare"),
    (["x=1,2", "y=2,2", "--pair", "x:y", "--seeds", "1"], "need at least 2 runs"),
    (["x=1,2", "y=0,2", "--baseline", "y"], "y's mean is 0: a difference cannot be given as a share of it"),
])
def test_bad_input_is_a_one_line_error(capsys, args, message):
    script = load_script("paper_power")
    argv = [*args, "--trials", "10"] + ([] if "--seeds" in args else ["--seeds", "5"])
    assert script.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
