"""Exact checks of the loss <-> sampling equivalence (LAP/PAL Theorems 1-3, Corollaries 1-3, Observations 1-4)
on Hypothesis data sets, the checks' power to fail, and Monte Carlo with the real samplers."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from prioritylab import equivalence as eq
from prioritylab import losses

KAPPAS = st.sampled_from([1.0, 0.01])
ALPHAS = st.floats(0.01, 1.0)  # alpha in (0, 1]
BETAS = st.floats(0.0, 1.0)
TAUS = st.floats(0.1, 3.0)
EPSS = st.sampled_from([0.0, 1e-6])


@st.composite
def td_datasets(draw, kappa: float):
    """Data sets of 1...2000 TD errors: magnitudes kappa * 10^(-4...4), zeros, duplicates, boundary values.

    Small ones are Hypothesis lists (shrinkable); large ones come from a seeded generator whose
    parameters Hypothesis draws, with special values (0, +-kappa, kappa / 2, 2 kappa) in front.
    """
    special = st.sampled_from([0.0, kappa, -kappa, 0.5 * kappa, -2.0 * kappa])
    element = st.one_of(special, st.tuples(st.sampled_from([-1.0, 1.0]), st.floats(-4.0, 4.0)).map(
        lambda t: t[0] * kappa * 10.0 ** t[1]))
    if draw(st.booleans()):
        values = draw(st.lists(element, min_size=1, max_size=40))
        if draw(st.booleans()) and len(values) > 1:  # duplicates
            values = values + values[: len(values) // 2]
        return np.array(values)
    n = draw(st.integers(1, 2000))
    head = draw(st.lists(special, max_size=8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return eq.random_td_errors(rng, n, kappa, span=draw(st.sampled_from([1.0, 4.0])),
                               zero_frac=draw(st.sampled_from([0.0, 0.05, 0.5])),
                               dup_frac=draw(st.sampled_from([0.0, 0.2])), head=head)


def data_and_kappa():
    return KAPPAS.flatmap(lambda k: st.tuples(td_datasets(k), st.just(k)))


def assert_passed(check: eq.Check):
    assert check.passed, f"{check.claim}: rel deviation {check.rel_dev:.3e} > {check.tol:.1e} ({check.quantity})"


@given(dk=data_and_kappa(), seed=st.integers(0, 2**32 - 1))
def test_theorem1(dk, seed):
    delta, kappa = dk
    assert_passed(eq.check_theorem1(delta, np.random.default_rng(seed), kappa))


@given(dk=data_and_kappa(), alpha=ALPHAS, eps=EPSS)
def test_corollaries_1_and_2(dk, alpha, eps):
    delta, kappa = dk
    assert_passed(eq.check_corollary1(delta, alpha, kappa, eps))
    assert_passed(eq.check_corollary2(delta, alpha, kappa))


@given(dk=data_and_kappa(), alpha=ALPHAS, beta=BETAS, eps=EPSS, seed=st.integers(0, 2**32 - 1))
def test_observation1_and_theorem2(dk, alpha, beta, eps, seed):
    delta, kappa = dk
    for check in eq.check_theorem2(delta, np.random.default_rng(seed), alpha, beta, kappa, eps):
        assert_passed(check)


@given(dk=data_and_kappa(), alpha=ALPHAS, beta=BETAS, tau=TAUS, eps=EPSS)
def test_theorem3_and_corollary3(dk, alpha, beta, tau, eps):
    delta, kappa = dk
    assume(eps > 0.0 or np.any(delta))  # PER cannot sample a data set whose every priority is 0
    assert_passed(eq.check_theorem3(delta, alpha, beta, tau, eps))
    assert_passed(eq.check_corollary3(delta, alpha, beta, kappa, eps))


@given(dk=data_and_kappa(), alpha=ALPHAS)
def test_observation4_lap_equals_pal(dk, alpha):
    delta, kappa = dk
    assert_passed(eq.check_observation4(delta, alpha, kappa))


@given(dk=data_and_kappa(), alpha=ALPHAS, beta=BETAS, tau=TAUS, eps=EPSS)
def test_identity_cases(dk, alpha, beta, tau, eps):
    delta, kappa = dk
    assert_passed(eq.check_pal_alpha0(delta, kappa))
    assert_passed(eq.check_per_alpha0(delta, beta, tau, eps))
    assert_passed(eq.check_lap_small(delta, alpha, kappa))


@given(dk=data_and_kappa())
def test_observations_2_and_3_mean_and_median(dk):
    y, _ = dk
    assert_passed(eq.check_observation2(y))
    assert_passed(eq.check_observation3(y))


# -- zeros and PER's eps ----------------------------------------------------------------
def test_zero_td_errors_with_eps0_make_per_gradient_vanish():
    """eps = 0, beta > 0: the zero item has P = 0 and an infinite IS weight, so every normalised weight
    is 0 and both sides of Theorem 3 are exactly 0 (eta = 0 in eq. 7)."""
    delta = np.array([0.0, 0.5, -2.0, 3.0])
    p, w = eq.per_distribution(delta, 0.6, 0.4, 0.0)
    assert p[0] == 0.0 and np.all(w == 0.0)
    assert eq.per_expectation(delta, losses.mse(delta)[1], 0.6, 0.4, 0.0)[0] == 0.0
    assert np.all(losses.per_equivalent(delta, 0.6, 0.4, 2.0)[1] == 0.0)
    # however small beta: at the smallest subnormal, alpha * beta underflows to 0, yet 0^(alpha beta) is 0
    tiny = np.nextafter(0.0, 1.0)
    assert eq.per_expectation(delta, losses.mse(delta)[1], 0.5, tiny, 0.0)[0] == 0.0
    # with PER's eps the zero item is drawn and the equivalence is the eps form of eq. 7
    lhs = eq.per_expectation(delta, losses.mse(delta)[1], 0.6, 0.4, 1e-6)[0]
    rhs = np.mean(losses.per_equivalent(delta, 0.6, 0.4, 2.0, eps=1e-6)[1])
    assert lhs == pytest.approx(rhs, rel=1e-13, abs=0) and lhs != 0.0


def test_corollary2_rejects_opposite_signs():
    with pytest.raises(ValueError, match="item 1"):
        eq.corollary2_priority(np.array([1.0, -2.0]), np.array([1.0, 2.0]))


# -- the checks can fail --------------------------------------------------------------------
def test_checks_detect_wrong_losses():
    """A wrong exponent, a missing 1/lambda or the wrong beta is caught far above the tolerance."""
    delta = eq.random_td_errors(np.random.default_rng(5), 300, 1.0)
    p = eq.lap_probabilities(delta, 0.4, 1.0)
    lap = eq.weighted_expectation(p, losses.huber(delta, 1.0)[1])
    for wrong in (losses.pal(delta, 0.5, 1.0)[1], losses.pal(delta, 0.4, 1.0)[1] * losses.pal_lambda(delta)):
        dev = eq.compare("", "", lap[0], np.mean(wrong), lap[1])
        assert dev.rel_dev > 1e3 * eq.EXACT_TOL
    per = eq.per_expectation(delta, losses.mse(delta)[1], 0.6, 0.4, 1e-6)
    wrong = np.mean(losses.per_equivalent(delta, 0.6, 0.5, 2.0, eps=1e-6)[1])
    assert eq.compare("", "", per[0], wrong, per[1]).rel_dev > 1e3 * eq.EXACT_TOL
    # a pair that breaks Theorem 1 (grad L1 = pr grad L2 without 1/lambda)
    pr = np.exp(np.random.default_rng(0).normal(size=300))
    g2 = losses.mse(delta)[1]
    lhs, rhs, mass = eq.theorem1_sides(pr * g2, g2, pr)
    assert abs(lhs - rhs) / mass > 1e3 * eq.EXACT_TOL


def test_variance_order_is_not_vacuous():
    """Observation 1 is strict for MSE on spread errors: the L1 pair has much less variance than uniform MSE."""
    delta = eq.random_td_errors(np.random.default_rng(2), 500, 1.0, span=2.0)
    g1 = losses.mse(delta)[1]
    best = eq.prioritised_pair("L1", g1, np.sign(g1))
    var_u, _ = eq.gradient_variance(np.full(500, 1 / 500), g1)
    assert best.variance < 0.5 * var_u
    alt = eq.prioritised_pair("tau=3", g1, np.sign(g1) * np.abs(losses.power(delta, 3.0)[1]))
    assert best.variance < alt.variance


# -- Monte Carlo with the real samplers -------------------------------------------------------
MC_SETUPS = [
    ("lap", {"alpha": 0.4, "kappa": 1.0}),
    ("lap", {"alpha": 0.6, "kappa": 0.01}),
    ("per", {"alpha": 0.6, "beta": 0.4, "eps": 1e-6, "tau": 2.0}),
    ("per", {"alpha": 0.6, "beta": 0.4, "eps": 1e-6, "kappa": 1.0}),
]


@pytest.mark.parametrize(("method", "params"), MC_SETUPS)
def test_monte_carlo_converges_to_exact_expectation(method, params):
    """Sample means of 10^2...10^5 i.i.d. draws lie within Bernstein's radius (false-failure probability
    <= 1e-6 per setup, union bound over the sizes); the fitted log-log slope of the RMS error over 100
    repetitions is -1/2 within 0.15 (its sd is ~0.024, measured over 20 seeds: ~6 sd)."""
    kappa = params.get("kappa", 1.0)
    delta = eq.random_td_errors(np.random.default_rng(11), 500, kappa, span=2.0)
    setup = eq.monte_carlo_setup(delta, method, seed=3, **params)
    rows = eq.monte_carlo_convergence(setup, [100, 1_000, 10_000, 100_000])
    assert all(r["passed"] for r in rows), rows
    for part in ("positive", "negative"):
        part_rows = eq.monte_carlo_convergence(eq.monte_carlo_setup(delta, method, seed=3, part=part, **params),
                                               [100, 1_000, 10_000, 100_000])  # fmt: skip
        assert all(r["passed"] for r in part_rows), (part, part_rows)
    _, slope = eq.monte_carlo_rate(setup, [100, 1_000, 10_000], reps=100)
    assert abs(slope + 0.5) <= 0.15


def test_monte_carlo_rejects_a_wrong_expectation():
    """LAP's draws against uniform Huber (not PAL) leave the Bernstein radius: the test has power."""
    delta = eq.random_td_errors(np.random.default_rng(11), 500, 1.0, span=2.0)
    setup = eq.monte_carlo_setup(delta, "lap", seed=3, alpha=0.4, kappa=1.0)
    setup.exact = float(np.mean(losses.huber(delta, 1.0)[1]))
    rows = eq.monte_carlo_convergence(setup, [100, 1_000, 10_000, 100_000])
    assert not rows[-1]["passed"]


def test_monte_carlo_parts_catch_what_the_whole_mean_misses():
    """LAP alpha = 0.6 (kappa = 0.01) against PAL with alpha = 0.7: the whole mean's gradients of both signs
    nearly cancel and the wrong expectation stays inside its radius; each sign's part on its own leaves it."""
    delta = eq.random_td_errors(np.random.default_rng(1), 500, 0.01, span=2.0)
    sizes = [100, 1_000, 10_000, 100_000]
    caught = {}
    for part in eq.PARTS:
        setup = eq.monte_carlo_setup(delta, "lap", seed=1, part=part, alpha=0.6, kappa=0.01)
        keep = {"all": np.ones(500), "positive": delta > 0, "negative": delta < 0}[part]
        assert setup.exact == pytest.approx(float(np.mean(keep * losses.pal(delta, 0.6, 0.01)[1])), rel=1e-12)
        setup.exact = float(np.mean(keep * losses.pal(delta, 0.7, 0.01)[1]))
        caught[part] = not all(r["passed"] for r in eq.monte_carlo_convergence(setup, sizes))
    assert caught == {"all": False, "positive": True, "negative": True}


def test_bernstein_radius_shrinks_as_one_over_sqrt_m():
    r1, r2 = eq.bernstein_radius(1.0, 5.0, 10**6, 1e-6), eq.bernstein_radius(1.0, 5.0, 4 * 10**6, 1e-6)
    assert r2 / r1 == pytest.approx(0.5, rel=0.01, abs=0)


@pytest.mark.parametrize("kappa", [1.0, 0.01])
def test_every_exact_check_on_the_largest_data_sets(kappa):
    """Seeded data sets of the largest size (2000) through every exact check."""
    rng = np.random.default_rng(int(kappa * 100))
    for zero_frac in (0.0, 0.3):
        delta = eq.random_td_errors(rng, 2000, kappa, span=4.0, zero_frac=zero_frac, head=[0.0, kappa, -kappa])
        for eps in (0.0, 1e-6):
            for check in eq.exact_case(delta, rng, alpha=0.6, beta=0.4, tau=1.7, kappa=kappa, eps=eps):
                assert_passed(check)


def test_a_deviation_that_is_not_a_number_fails_its_merged_check_wherever_it_comes():
    """Python's ``max`` keeps a NaN only when it comes first: merged after a good case, a NaN deviation once made
    the claim pass.  It fails now in either order, as it does alone."""
    good = eq.Check("claim", "q", 0.0, 0.0, 1e-12, 1)
    bad = eq.Check("claim", "q", float("nan"), float("nan"), 1e-12, 1)
    assert not bad.passed
    for order in ([good, bad], [bad, good]):
        merged = eq.worst(order)
        assert not merged.passed and np.isnan(merged.rel_dev) and merged.cases == 2
    assert eq.largest([1.0, 3.0, 2.0]) == 3.0
