"""Torch versions of :mod:`prioritylab.losses` for the deep agents.

Same names and parameters; each takes a tensor of TD errors ``delta = Q - y``
(LAP/PAL eq. 1) and returns the per-item loss tensor, whose autograd gradient
with respect to ``delta`` (hence ``Q``) equals the ``grad`` of the NumPy
function.  Data-set quantities (PAL's ``lambda``, PER's ``eta N``) are computed
from ``delta.detach()`` and are constants in the graph (the paper's
stop-gradient, Corollary 1).  Reduce with :func:`mean` (``weights`` for PER's
IS weights).

``check=True`` (default) rejects NaN/inf TD errors with a ``ValueError`` naming
the first bad position; that needs one device synchronisation, so a hot GPU
loop that already guards its inputs may pass ``check=False``.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_range
from .losses import check_alpha, check_beta, check_eps, check_kappa, check_tau, min_power

__all__ = [
    "huber",
    "l1",
    "lap_mass",
    "mean",
    "mse",
    "pal",
    "pal_lambda",
    "per_equivalent",
    "per_eta",
    "per_huber_equivalent",
    "power",
]


def _check(delta: torch.Tensor, check: bool, nonempty: bool = False) -> torch.Tensor:
    if not isinstance(delta, torch.Tensor):
        raise ValueError(f"delta must be a torch.Tensor, got {type(delta).__name__}")
    if not delta.is_floating_point():
        raise ValueError(f"delta must be a floating-point tensor, got dtype {delta.dtype}")
    if nonempty and delta.numel() == 0:
        raise ValueError("delta must hold at least one TD error (the data set is empty)")
    if check:
        bad = ~torch.isfinite(delta.detach()).reshape(-1)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0, 0])
            raise ValueError(f"delta[{i}] = {float(delta.detach().reshape(-1)[i])} must be finite")
    return delta


def _abs_pow(a: torch.Tensor, p: float) -> torch.Tensor:
    """``a ** p`` for ``a >= 0``: 0 at ``a = 0`` with a zero (not NaN) gradient there."""
    pos = a > 0
    safe = torch.where(pos, a, torch.ones_like(a))
    return torch.where(pos, safe**p, torch.zeros_like(a))


def mse(delta: torch.Tensor, check: bool = True) -> torch.Tensor:
    """``0.5 delta^2`` (Section 3)."""
    d = _check(delta, check)
    return 0.5 * d * d


def l1(delta: torch.Tensor, check: bool = True) -> torch.Tensor:
    """``|delta|`` (Section 3); gradient ``sign(delta)``, 0 at 0."""
    return _check(delta, check).abs()


def huber(delta: torch.Tensor, kappa: float = 1.0, check: bool = True) -> torch.Tensor:
    """Huber loss (eq. 2, eq. 29): ``0.5 delta^2`` if ``|delta| <= kappa`` else ``kappa (|delta| - 0.5 kappa)``."""
    d = _check(delta, check)
    k = check_kappa(kappa)
    a = d.abs()
    return torch.where(a <= k, 0.5 * d * d, k * (a - 0.5 * k))


def power(delta: torch.Tensor, tau: float = 2.0, check: bool = True) -> torch.Tensor:
    """``|delta|^tau / tau`` (Theorem 3); gradient 0 at ``delta = 0``."""
    d = _check(delta, check)
    t = check_tau(tau)
    return _abs_pow(d.abs(), t) / t


def lap_mass(delta: torch.Tensor, alpha: float = 0.4, kappa: float = 1.0, check: bool = True) -> torch.Tensor:
    """LAP sampling mass ``max(|delta|^alpha, kappa^alpha)`` (eq. 30), detached (α applied)."""
    d = _check(delta, check).detach()
    a, k = check_alpha(alpha), check_kappa(kappa)
    return torch.clamp(d.abs() ** a, min=k**a)


def pal_lambda(delta: torch.Tensor, alpha: float = 0.4, kappa: float = 1.0, check: bool = True) -> torch.Tensor:
    """``lambda = mean_j max(|delta_j|^alpha, kappa^alpha)`` (eq. 31), a detached 0-d tensor."""
    _check(delta, check, nonempty=True)
    return lap_mass(delta, alpha, kappa, check=False).mean()


def pal(
    delta: torch.Tensor, alpha: float = 0.4, kappa: float = 1.0, lam=None, check: bool = True
) -> torch.Tensor:
    """PAL (eq. 10, eq. 31), per item; ``lambda`` over ``delta`` (detached) unless given."""
    d = _check(delta, check, nonempty=lam is None)
    a, k = check_alpha(alpha), check_kappa(kappa)
    if lam is None:
        lam = pal_lambda(d, a, k, check=False)
    elif not isinstance(lam, torch.Tensor):
        lam = check_range("lam", lam, 0.0, math.inf, lo_open=True, hi_open=True)
    ad = d.abs()
    small = ad <= k
    loss = torch.where(small, 0.5 * k**a * d * d, k * _abs_pow(ad, 1.0 + a) / (1.0 + a))
    return loss / lam


def per_eta(delta: torch.Tensor, alpha: float = 0.6, beta: float = 0.4, eps: float = 0.0, check: bool = True):
    """``eta = min_j p_j^(alpha beta) / sum_j p_j^alpha``, ``p = |delta| + eps`` (eq. 7), a detached 0-d tensor."""
    d = _check(delta, check, nonempty=True).detach()
    a, b, e = check_alpha(alpha), check_beta(beta), check_eps(eps)
    p = d.abs() + e
    total = (p**a).sum()
    if not bool(total > 0):
        raise ValueError("PER is undefined here: every priority |delta| + eps is 0 (all delta = 0 with eps = 0)")
    return min_power(float(p.min()), a, b) / total  # 0^x = 0 for x > 0, even where alpha beta underflows


def _per_scale(d, a, b, e, eta_n):
    if eta_n is None:
        return per_eta(d, a, b, e, check=False) * d.numel()
    if isinstance(eta_n, torch.Tensor):
        return eta_n.detach()
    return check_range("eta_n", eta_n, 0.0, math.inf, hi_open=True)


def _per_branch(ad: torch.Tensor, tau: float, q: float, eps: float) -> torch.Tensor:
    """Per-item value whose gradient in ``|delta|`` is ``(|delta|+eps)^q |delta|^(tau-1)`` (see NumPy version)."""
    p = tau + q
    if eps == 0.0:
        return _abs_pow(ad, p) / p
    w = (ad.detach() + eps) ** q
    surrogate = w * _abs_pow(ad, tau) / tau  # right gradient, value off by p / tau
    value = (w * _abs_pow(ad.detach(), tau) / p).detach()
    return surrogate + (value - surrogate.detach())


def per_equivalent(
    delta: torch.Tensor,
    alpha: float = 0.6,
    beta: float = 0.4,
    tau: float = 2.0,
    eps: float = 0.0,
    eta_n=None,
    check: bool = True,
) -> torch.Tensor:
    """Theorem 3's uniform equivalent of PER with ``|delta|^tau / tau`` (eq. 7).

    See :func:`prioritylab.losses.per_equivalent`.
    """
    d = _check(delta, check, nonempty=eta_n is None)
    a, b, t, e = check_alpha(alpha), check_beta(beta), check_tau(tau), check_eps(eps)
    scale = _per_scale(d, a, b, e, eta_n)
    return scale * _per_branch(d.abs(), t, a - a * b, e)


def per_huber_equivalent(
    delta: torch.Tensor,
    alpha: float = 0.6,
    beta: float = 0.4,
    kappa: float = 1.0,
    eps: float = 0.0,
    eta_n=None,
    check: bool = True,
) -> torch.Tensor:
    """Corollary 3's uniform equivalent of PER with Huber(kappa) (eq. 8, general kappa as in the NumPy version)."""
    d = _check(delta, check, nonempty=eta_n is None)
    a, b, k, e = check_alpha(alpha), check_beta(beta), check_kappa(kappa), check_eps(eps)
    scale = _per_scale(d, a, b, e, eta_n)
    ad = d.abs()
    q = a - a * b
    return scale * torch.where(ad <= k, _per_branch(ad, 2.0, q, e), k * _per_branch(ad, 1.0, q, e))


def mean(loss: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Minibatch reduction ``mean(weights * loss)`` (``weights``: PER's IS weights, detached; none: plain mean)."""
    if weights is None:
        return loss.mean()
    w = torch.as_tensor(weights, dtype=loss.dtype, device=loss.device).detach()
    if w.shape != loss.shape:
        raise ValueError(f"weights must have the loss's shape {tuple(loss.shape)}, got {tuple(w.shape)}")
    return (w * loss).mean()


#: Former name of :func:`lap_mass`, kept so existing callers keep working. It is
#: not the raw priority :func:`prioritylab.priorities.lap_priority`.
lap_priority = lap_mass
