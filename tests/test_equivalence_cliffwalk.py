"""Blind Cliffwalk: expected updates at every step (LAP = PAL, PER = eq. 7), and a stochastic final reward whose
fixed points are the mean (MSE), the median (L1), eq. 7's minimiser (PER) and PAL's minimiser (LAP and PAL)."""

import numpy as np
import pytest

from prioritylab import equivalence as eq
from prioritylab.cliffwalk.env import memory_size, right_action


@pytest.mark.parametrize(("method", "kappa"), [("lap", 1.0), ("lap", 0.01), ("per", 1.0)])
def test_expected_updates_agree_at_every_step(method, kappa):
    check = eq.cliffwalk_stepwise(6, method, steps=100, kappa=kappa, seed=1)
    assert check.cases == 100
    assert check.passed, check


def test_stochastic_chain_memory():
    rewards = eq.skewed_rewards(9)
    assert np.median(rewards) == pytest.approx(1.0) and rewards.mean() > 1.4  # right-skewed
    mem = eq.stochastic_chain(5, rewards, np.random.default_rng(0))
    assert mem.s_tm1.shape[0] == memory_size(5) + 8
    final = (mem.s_tm1 == 4) & (mem.a_tm1 == right_action(5)[4])
    assert final.sum() == 9 and mem.done_t[final].all()
    np.testing.assert_array_equal(np.sort(mem.r_t[final]), rewards)
    assert mem.r_t[~final].max() == 0.0


@pytest.fixture(scope="module")
def chain():
    return eq.chain_experiment(steps=5_000, l1_steps=200_000, betas=(0.0, 0.4, 1.0))


def test_chain_fixed_points_match_the_equivalent_losses(chain):
    for check in chain.checks:
        assert check.passed, check


def test_chain_biases(chain):
    """PER + MSE (beta < 1) settles above the mean, towards the outlier, as eq. 7 predicts; beta = 1 is unbiased;
    LAP and PAL settle at one value between the median and the mean."""
    rows = {(r["method"], r["beta"]): r for r in chain.rows}
    mean, median = chain.rewards.mean(), np.median(chain.rewards)
    assert rows[("uniform + MSE", 0.4)]["final_value"] == pytest.approx(mean, abs=1e-12)
    assert rows[("uniform + L1", 0.4)]["final_value"] == pytest.approx(median, abs=1e-4)
    b0, b4, b1 = (rows[("PER + MSE", b)] for b in (0.0, 0.4, 1.0))
    assert b0["bias"] > b4["bias"] > 0.05
    assert abs(b1["bias"]) < 1e-12
    for r in (b0, b4, b1):
        assert r["bias"] == pytest.approx(r["predicted_bias"], abs=1e-9)
        assert abs(r["prediction"] - r["eq7_minimiser_eps0"]) < 1e-5  # PER's eps = 1e-6 barely moves it
    lap, pal = rows[("LAP + Huber", 0.4)], rows[("uniform + PAL", 0.4)]
    assert lap["final_value"] == pytest.approx(pal["final_value"], abs=1e-12)
    assert median < lap["final_value"] < mean


def test_a_wrong_prediction_is_rejected(chain):
    per = next(r for r in chain.runs if r.label == "PER + MSE" and r.params["beta"] == 0.4)
    wrong = eq.chain_prediction(chain.rewards, eq.PER_POWER, 0.6, 0.5, 1.0, 2.0, 1e-6)
    assert abs(per.final - wrong) > 1e3 * eq.CHAIN_TOL
