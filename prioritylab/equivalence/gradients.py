"""Expected parameter gradients of a small torch Q-network: LAP + Huber = uniform PAL, PER = eq. 7 / 8.

The only module of :mod:`prioritylab.equivalence` that uses torch, and only
inside its functions: importing it does not need torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import losses
from .common import Check, compare, lap_probabilities, per_distribution, random_td_errors


@dataclass
class TorchProblem:
    """A float64 Q-network and a fixed buffer ``(s, a, y)``; ``delta = Q(s, a) - y``."""

    net: object
    states: object
    actions: object
    y: object
    """The values ``y`` (``Q(s, a) - delta0`` at the initial parameters)."""


def torch_problem(seed: int = 0, n: int = 256, obs_dim: int = 4, n_actions: int = 3, hidden: int = 32,
                  kappa: float = 1.0) -> TorchProblem:
    """An MLP ``obs_dim -> hidden (tanh) -> n_actions`` and ``n`` transitions whose TD errors span both sides of kappa.

    The values are ``y = Q(s, a) - delta0`` with ``delta0`` from :func:`random_td_errors`
    (magnitudes ``kappa * 10^U(-2, 2)``), so the errors are known and spread.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(obs_dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, n_actions))
    net = net.to(torch.float64)
    with torch.no_grad():
        for prm in net.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen, dtype=torch.float64) / math.sqrt(max(prm.shape[-1], 1)))
    states = torch.randn(n, obs_dim, generator=gen, dtype=torch.float64)
    actions = torch.randint(0, n_actions, (n,), generator=gen)
    delta0 = random_td_errors(np.random.default_rng(seed), n, kappa, span=2.0, zero_frac=0.0, dup_frac=0.0)
    with torch.no_grad():
        q = net(states).gather(1, actions[:, None])[:, 0]
    return TorchProblem(net, states, actions, q - torch.as_tensor(delta0))


def torch_td_errors(problem: TorchProblem):
    """``delta = Q(s, a) - y`` for the whole buffer, differentiable in the network's parameters."""
    q = problem.net(problem.states).gather(1, problem.actions[:, None])[:, 0]
    return q - problem.y


def param_grad(problem: TorchProblem, loss) -> np.ndarray:
    """Gradient of a scalar ``loss`` with respect to every network parameter, flattened (graph kept)."""
    import torch

    params = list(problem.net.parameters())
    grads = torch.autograd.grad(loss, params, retain_graph=True)
    return torch.cat([g.reshape(-1) for g in grads]).numpy()


def q_jacobian(problem: TorchProblem) -> np.ndarray:
    """Per-item ``dQ(s_i, a_i) / d theta``, shape ``(N, P)`` (torch.func), for the deviation masses."""
    import torch
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in problem.net.named_parameters()}

    def q_one(prm, s, a):
        return functional_call(problem.net, prm, (s[None],))[0].gather(0, a.reshape(1))[0]

    jac = vmap(grad(q_one), in_dims=(None, 0, 0))(params, problem.states, problem.actions)
    return torch.cat([jac[k].reshape(problem.states.shape[0], -1) for k in params], dim=1).numpy()


def _torch_compare(claim, problem, jac, loss_a, coef_a, loss_b, coef_b) -> Check:
    """Compare two parameter gradients; mass per parameter ``sum_i |c_i| |dQ_i/dtheta|`` (the larger side)."""
    ga, gb = param_grad(problem, loss_a), param_grad(problem, loss_b)
    mass = np.maximum(np.abs(coef_a) @ np.abs(jac), np.abs(coef_b) @ np.abs(jac))
    return compare(claim, "E[grad_theta] of both losses (autograd, exact)", ga, gb, mass)


def torch_parameter_checks(seed: int = 0, n: int = 256, lap_alpha: float = 0.4, per_alpha: float = 0.6,
                           beta: float = 0.4, tau: float = 2.0, eps: float = 1e-6,
                           kappas: Sequence[float] = (1.0, 0.01)) -> list[Check]:
    """LAP + Huber vs uniform PAL and PER (+ ``|delta|^tau/tau``, + Huber) vs eq. 7 / 8, on network parameters.

    Expectations are exact: the sampled side weights every item's loss by the
    sampler's probability (times the IS weight for PER); the uniform side is
    the mean of the torch loss.  Both gradients come from autograd through
    :mod:`prioritylab.losses_torch`.
    """
    import torch

    from .. import losses_torch as lt

    checks = []
    for kappa in kappas:
        prob = torch_problem(seed, n, kappa=kappa)
        jac = q_jacobian(prob)
        d = torch_td_errors(prob)
        dn = d.detach().numpy()
        p = lap_probabilities(dn, lap_alpha, kappa)
        coef_lap = p * losses.huber(dn, kappa)[1]
        coef_pal = losses.pal(dn, lap_alpha, kappa)[1] / n
        checks.append(_torch_compare("torch: LAP+Huber = uniform PAL", prob, jac,
                                     (torch.as_tensor(p) * lt.huber(d, kappa)).sum(), coef_lap,
                                     lt.mean(lt.pal(d, lap_alpha, kappa)), coef_pal))
        p, w = per_distribution(dn, per_alpha, beta, eps)
        pw = torch.as_tensor(p * w)
        coef_per = p * w * losses.power(dn, tau)[1]
        coef_eq = losses.per_equivalent(dn, per_alpha, beta, tau, eps)[1] / n
        checks.append(_torch_compare("torch: PER = uniform eq. 7", prob, jac, (pw * lt.power(d, tau)).sum(), coef_per,
                                     lt.mean(lt.per_equivalent(d, per_alpha, beta, tau, eps)), coef_eq))
        coef_per = p * w * losses.huber(dn, kappa)[1]
        coef_eq = losses.per_huber_equivalent(dn, per_alpha, beta, kappa, eps)[1] / n
        checks.append(_torch_compare("torch: PER+Huber = uniform eq. 8", prob, jac,
                                     (pw * lt.huber(d, kappa)).sum(), coef_per,
                                     lt.mean(lt.per_huber_equivalent(d, per_alpha, beta, kappa, eps)), coef_eq))
    return checks
