"""Losses of the LAP/PAL paper: hand-computed values, finite differences, identities, bad input, torch agreement."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prioritylab import losses

# (name, params) for every loss; lam / eta_n are frozen for the finite differences (stop-gradient).
CASES = [
    ("mse", {}),
    ("l1", {}),
    ("huber", {"kappa": 1.0}),
    ("huber", {"kappa": 0.01}),
    ("power", {"tau": 0.5}),
    ("power", {"tau": 3.0}),
    ("pal", {"alpha": 0.4, "kappa": 1.0}),
    ("pal", {"alpha": 0.6, "kappa": 0.01}),
    ("per_equivalent", {"alpha": 0.6, "beta": 0.4, "tau": 2.0}),
    ("per_equivalent", {"alpha": 1.0, "beta": 0.0, "tau": 1.0}),
    ("per_huber_equivalent", {"alpha": 0.6, "beta": 0.4, "kappa": 1.0}),
    ("per_huber_equivalent", {"alpha": 0.3, "beta": 0.9, "kappa": 0.01}),
]


def frozen(name: str, params: dict, delta: np.ndarray) -> dict:
    """The data-set constants computed once, so a perturbed item does not move them."""
    p = dict(params)
    if name == "pal":
        p["lam"] = losses.pal_lambda(delta, p["alpha"], p["kappa"])
    if name.startswith("per_"):
        p["eta_n"] = losses.per_eta(delta, p["alpha"], p["beta"]) * delta.shape[0]
    return p


@pytest.mark.parametrize(("name", "params"), CASES)
def test_grad_equals_central_finite_difference(name, params):
    """Central differences with h = 1e-6 |delta|: truncation ~h^2 f''' and rounding ~u f / h, both < 1e-7
    relative here; items within 1e-4 of a kink (0, +-kappa) are skipped."""
    rng = np.random.default_rng(1)
    kappa = params.get("kappa", 1.0)
    delta = kappa * 10 ** rng.uniform(-2, 2, 200) * rng.choice([-1.0, 1.0], 200)
    delta = delta[(np.abs(np.abs(delta) - kappa) > 1e-4 * kappa) & (np.abs(delta) > 1e-4 * kappa)]
    fn = getattr(losses, name)
    p = frozen(name, params, delta)
    _, grad = fn(delta, **p)
    h = 1e-6 * np.abs(delta)
    fd = (fn(delta + h, **p)[0] - fn(delta - h, **p)[0]) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=0)


def test_hand_computed_values():
    loss, grad = losses.mse([2.0, -1.0])
    assert loss.tolist() == [2.0, 0.5] and grad.tolist() == [2.0, -1.0]
    loss, grad = losses.l1([-3.0, 0.0])
    assert loss.tolist() == [3.0, 0.0] and grad.tolist() == [-1.0, 0.0]
    loss, grad = losses.huber([3.0, 0.5], kappa=1.0)
    assert loss.tolist() == [2.5, 0.125] and grad.tolist() == [1.0, 0.5]
    loss, grad = losses.huber([-2.0], kappa=0.5)  # 0.5 (2 - 0.25), eq. 29
    assert loss.tolist() == [0.875] and grad.tolist() == [-0.5]
    # PAL, eq. 10: delta = (0.5, 2), alpha = 0.5 -> priorities (1, sqrt 2), lambda = (1 + sqrt 2) / 2
    lam = (1 + math.sqrt(2)) / 2
    loss, grad = losses.pal([0.5, 2.0], alpha=0.5, kappa=1.0)
    np.testing.assert_allclose(loss, [0.125 / lam, 2**1.5 / 1.5 / lam], rtol=1e-15)
    np.testing.assert_allclose(grad, [0.5 / lam, math.sqrt(2) / lam], rtol=1e-15)
    # eq. 31 with kappa = 0.1, alpha = 0.5: small branch 0.5 kappa^a d^2, large kappa |d|^(1+a)/(1+a)
    loss, grad = losses.pal([0.05, -1.0], alpha=0.5, kappa=0.1, lam=2.0)
    np.testing.assert_allclose(loss, [0.5 * 0.1**0.5 * 0.0025 / 2, 0.1 / 1.5 / 2], rtol=1e-15)
    np.testing.assert_allclose(grad, [0.1**0.5 * 0.05 / 2, -0.1 / 2], rtol=1e-15)


def test_per_equivalent_hand_computed():
    """Eq. 7: delta = (1, -2, 4), alpha = beta = 0.5, tau = 2: eta = 1 / (1 + sqrt 2 + 2), exponent 2.25."""
    d = np.array([1.0, -2.0, 4.0])
    eta = 1.0 / (1 + math.sqrt(2) + 2)
    assert losses.per_eta(d, 0.5, 0.5) == pytest.approx(eta, rel=1e-15, abs=0)
    loss, grad = losses.per_equivalent(d, alpha=0.5, beta=0.5, tau=2.0)
    np.testing.assert_allclose(loss, 3 * eta / 2.25 * np.abs(d) ** 2.25, rtol=1e-14)
    np.testing.assert_allclose(grad, 3 * eta * np.sign(d) * np.abs(d) ** 1.25, rtol=1e-14)
    # Corollary 3 / eq. 8 (kappa = 1): tau = 2 on |delta| <= 1, tau = 1 elsewhere
    loss, grad = losses.per_huber_equivalent(d, alpha=0.5, beta=0.5, kappa=1.0)
    np.testing.assert_allclose(loss, 3 * eta * np.array([1 / 2.25, 2**1.25 / 1.25, 4**1.25 / 1.25]), rtol=1e-14)
    np.testing.assert_allclose(grad, 3 * eta * np.array([1.0, -(2**0.25), 4**0.25]), rtol=1e-14)


def test_per_equivalent_eps_generalises_eq7():
    d = np.array([0.3, -2.0, 5.0])
    l0, g0 = losses.per_equivalent(d, 0.6, 0.4, 2.0, eps=0.0)
    l1, g1 = losses.per_equivalent(d, 0.6, 0.4, 2.0, eps=1e-12)
    np.testing.assert_allclose(l1, l0, rtol=1e-10)
    np.testing.assert_allclose(g1, g0, rtol=1e-10)
    # eps > 0: grad = eta N (|d| + eps)^(alpha - alpha beta) sign(d) |d|^(tau - 1)
    _, g = losses.per_equivalent(d, 0.6, 0.4, 1.5, eps=0.1)
    eta = (np.abs(d) + 0.1).min() ** 0.24 / np.sum((np.abs(d) + 0.1) ** 0.6)
    np.testing.assert_allclose(g, 3 * eta * (np.abs(d) + 0.1) ** 0.36 * np.sign(d) * np.abs(d) ** 0.5, rtol=1e-14)


def test_pal_alpha0_is_huber_and_lambda_is_one():
    d = np.array([0.0, 0.2, -0.7, 1.0, -3.0, 40.0])
    for kappa in (1.0, 0.01):
        lp, gp = losses.pal(d, alpha=0.0, kappa=kappa)
        lh, gh = losses.huber(d, kappa)
        assert losses.pal_lambda(d, 0.0, kappa) == 1.0
        np.testing.assert_array_equal(gp, gh)
        np.testing.assert_allclose(lp - lh, np.where(np.abs(d) > kappa, 0.5 * kappa**2, 0.0), rtol=0, atol=1e-13)


def test_per_alpha0_and_beta1_reduce():
    d = np.array([0.0, 0.5, -2.0, 3.0])
    for tau in (0.5, 1.0, 2.0):
        np.testing.assert_allclose(losses.per_equivalent(d, 0.0, 0.4, tau)[1], losses.power(d, tau)[1], rtol=1e-15)
    # beta = 1: exponent tau, the unbiased case (Section 5.1); zeros make eta = 0 with eps = 0
    d = np.array([0.5, -2.0, 3.0])
    _, g = losses.per_equivalent(d, 0.6, 1.0, 2.0)
    np.testing.assert_allclose(g, 3 * 0.5**0.6 / np.sum(np.abs(d) ** 0.6) * d, rtol=1e-14)
    assert losses.per_eta([0.0, 1.0, 2.0], 0.6, 0.4) == 0.0
    tiny = np.nextafter(0.0, 1.0)  # alpha * beta underflows to 0 here, yet 0^(alpha beta) is 0 for beta > 0
    assert losses.per_eta([0.0, 1.0, 2.0], 0.5, tiny) == 0.0
    assert losses.per_eta([0.0, 1.0, 2.0], 0.6, 0.0) == pytest.approx(1 / (1 + 2**0.6))


def test_lap_small_errors_pal_is_mse():
    d = np.array([-0.9, 0.0, 0.4, 1.0])
    np.testing.assert_allclose(losses.pal(d, 0.4, 1.0)[1], d, rtol=1e-15)
    np.testing.assert_array_equal(losses.huber(d, 1.0)[1], d)
    np.testing.assert_array_equal(losses.lap_mass(d, 0.4, 1.0), np.ones(4))


def test_lap_mass_is_the_raw_lap_priority_with_alpha_applied(torch):
    from prioritylab import losses_torch, priorities
    d = np.array([-3.0, -0.5, 0.0, 0.7, 2.5])
    alpha, kappa = 0.4, 0.8
    raw = np.array([priorities.lap_priority(x, kappa) for x in d])
    want = np.array([priorities.mass_of(r, alpha) for r in raw])
    np.testing.assert_allclose(losses.lap_mass(d, alpha, kappa), want, rtol=1e-15)
    np.testing.assert_allclose(losses_torch.lap_mass(torch.tensor(d), alpha, kappa).numpy(), want, rtol=1e-15)
    assert losses.lap_priority is losses.lap_mass and losses_torch.lap_priority is losses_torch.lap_mass


def test_gradient_is_zero_at_zero():
    for name, params in CASES:
        delta = np.array([0.0, 1.0, -2.0])
        _, grad = getattr(losses, name)(delta, **params)
        assert grad[0] == 0.0, name


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: losses.mse([1.0, np.nan]), r"delta\[1\] = nan"),
        (lambda: losses.huber([np.inf]), r"delta\[0\] = inf"),
        (lambda: losses.huber(["0.5"]), r"delta must be numbers, got dtype <U3"),
        (lambda: losses.pal([0.0, 1.0, -np.inf]), r"delta\[2\] = -inf"),
        (lambda: losses.pal([1.0], alpha=-0.1), r"alpha .* -0.1"),
        (lambda: losses.per_equivalent([1.0], beta=1.5), r"beta .* 1.5"),
        (lambda: losses.per_equivalent([1.0], beta=-0.1), r"beta .* -0.1"),
        (lambda: losses.huber([1.0], kappa=0.0), r"kappa .* 0.0"),
        (lambda: losses.pal([1.0], kappa=-1.0), r"kappa .* -1.0"),
        (lambda: losses.power([1.0], tau=0.0), r"tau .* 0.0"),
        (lambda: losses.per_equivalent([1.0], tau=-2.0), r"tau .* -2.0"),
        (lambda: losses.per_equivalent([1.0], eps=-1e-6), r"eps .* -1e-06"),
        (lambda: losses.pal([1.0], lam=0.0), r"lam .* 0.0"),
        (lambda: losses.pal([]), r"at least one"),
        (lambda: losses.per_equivalent([0.0, 0.0]), r"every priority"),
        (lambda: losses.lap_mass([[1.0, 2.0]]), r"delta must be one-dimensional, got shape \(1, 2\)"),
        (lambda: losses.pal(np.ones((2, 3))), r"delta must be one-dimensional, got shape \(2, 3\)"),
        (lambda: losses.per_eta([1.0], True), r"alpha must be a number, got True"),
        (lambda: losses.huber([1.0], kappa="1"), r"kappa must be a number, got '1'"),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# -- torch ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch():
    import torch as module

    return module


def _td_errors(kappa):
    signs = st.sampled_from([-1.0, 1.0])
    mags = st.one_of(st.just(0.0), st.sampled_from([kappa, 0.5 * kappa, 2 * kappa]),
                     st.floats(1e-4, 1e4).map(lambda m: m * kappa))
    return st.lists(st.tuples(signs, mags).map(lambda t: t[0] * t[1]), min_size=1, max_size=60)


@given(data=st.data(), kappa=st.sampled_from([1.0, 0.01]), alpha=st.floats(0.0, 1.0), beta=st.floats(0.0, 1.0),
       tau=st.floats(0.1, 3.0), eps=st.sampled_from([0.0, 1e-6, 0.1]))
def test_torch_matches_numpy_values_and_autograd(torch, data, kappa, alpha, beta, tau, eps):
    from prioritylab import losses_torch

    d = np.array(data.draw(_td_errors(kappa)))
    per_ok = eps > 0 or alpha == 0 or np.any(d)
    cases = [("mse", {}), ("l1", {}), ("huber", {"kappa": kappa}), ("power", {"tau": tau}),
             ("pal", {"alpha": alpha, "kappa": kappa})]
    if per_ok:
        cases += [("per_equivalent", {"alpha": alpha, "beta": beta, "tau": tau, "eps": eps}),
                  ("per_huber_equivalent", {"alpha": alpha, "beta": beta, "kappa": kappa, "eps": eps})]
    for name, params in cases:
        loss_np, grad_np = getattr(losses, name)(d, **params)
        t = torch.tensor(d, dtype=torch.float64, requires_grad=True)
        loss_t = getattr(losses_torch, name)(t, **params)
        loss_t.sum().backward()
        # same formulas, the order of a few products may differ: a few ulps
        np.testing.assert_allclose(loss_t.detach().numpy(), loss_np, rtol=1e-13, atol=0, err_msg=name)
        np.testing.assert_allclose(t.grad.numpy(), grad_np, rtol=1e-13, atol=0, err_msg=name)


def test_torch_eta_of_a_zero_priority_is_zero_however_small_beta(torch):
    from prioritylab import losses_torch

    tiny = np.nextafter(0.0, 1.0)  # alpha * beta underflows to 0 here, yet 0^(alpha beta) is 0 for beta > 0
    assert float(losses_torch.per_eta(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), 0.5, tiny)) == 0.0
    assert float(losses_torch.per_eta(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), 0.5, 0.0)) > 0.0


def test_torch_data_set_constants_are_detached(torch):
    from prioritylab import losses_torch

    t = torch.tensor([0.3, -2.0, 5.0], dtype=torch.float64, requires_grad=True)
    assert not losses_torch.pal_lambda(t).requires_grad
    assert not losses_torch.per_eta(t).requires_grad
    assert float(losses_torch.pal_lambda(t)) == pytest.approx(losses.pal_lambda([0.3, -2.0, 5.0]), rel=1e-15, abs=0)
    assert float(losses_torch.per_eta(t)) == pytest.approx(losses.per_eta([0.3, -2.0, 5.0]), rel=1e-15, abs=0)


def test_torch_mean_and_bad_input(torch):
    from prioritylab import losses_torch

    loss = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    assert float(losses_torch.mean(loss)) == pytest.approx(7 / 3)
    assert float(losses_torch.mean(loss, torch.tensor([1.0, 0.5, 0.25]))) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shape"):
        losses_torch.mean(loss, torch.ones(2))
    with pytest.raises(ValueError, match=r"delta\[1\] = nan"):
        losses_torch.huber(torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match="torch.Tensor"):
        losses_torch.mse([1.0])
    with pytest.raises(ValueError, match=r"kappa .* 0"):
        losses_torch.pal(torch.tensor([1.0]), kappa=0)
    with pytest.raises(ValueError, match="every priority"):
        losses_torch.per_equivalent(torch.zeros(3))
    out = losses_torch.huber(torch.tensor([float("nan")]), check=False)  # the caller opted out of the check
    assert torch.isnan(out).all()
    f32 = losses_torch.pal(torch.tensor([0.5, -3.0], dtype=torch.float32))
    assert f32.dtype == torch.float32
