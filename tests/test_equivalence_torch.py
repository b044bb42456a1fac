"""Expected parameter gradients of a small torch Q-network: LAP + Huber = uniform PAL, PER = eq. 7 / eq. 8."""

import numpy as np
import pytest
import torch

from prioritylab import equivalence as eq  # noqa: E402
from prioritylab import losses_torch as lt  # noqa: E402


@pytest.mark.parametrize("seed", [0, 1])
def test_parameter_gradients_match(seed):
    checks = eq.torch_parameter_checks(seed=seed, n=128)
    assert len(checks) == 6
    for c in checks:
        assert c.passed, f"{c.claim}: rel deviation {c.rel_dev:.3e}"


def test_undetached_lambda_breaks_the_equivalence():
    """PAL whose lambda is differentiated through (no stop-gradient) no longer matches LAP: the check has power."""
    prob = eq.torch_problem(seed=0, n=128, kappa=1.0)
    jac = eq.q_jacobian(prob)
    d = eq.torch_td_errors(prob)
    p = torch.as_tensor(eq.lap_probabilities(d.detach().numpy(), 0.4, 1.0))
    lap = eq.param_grad(prob, (p * lt.huber(d, 1.0)).sum())
    good = eq.param_grad(prob, lt.mean(lt.pal(d, 0.4, 1.0)))
    lam = torch.clamp(d.abs() ** 0.4, min=1.0).mean()  # not detached
    bad = eq.param_grad(prob, lt.mean(lt.pal(d, 0.4, 1.0, lam=1.0) / lam))
    mass = np.abs(p.numpy() * np.clip(np.abs(d.detach().numpy()), None, 1.0)) @ np.abs(jac)
    assert eq.deviation(lap, good, mass)[1] <= eq.EXACT_TOL
    assert eq.deviation(lap, bad, mass)[1] > 1e3 * eq.EXACT_TOL
