"""Per-item losses of the LAP/PAL paper (Fujimoto, Meger & Precup, 2020) and their gradients.

Every function takes the TD errors ``delta`` of a data set (a buffer or a
minibatch, any 1-D array-like) and returns ``(loss, grad)``, two float64
arrays with one entry per item.

Sign convention (used everywhere in prioritylab)
------------------------------------------------
``delta = Q - y`` (LAP/PAL eq. 1 and Observation 2): the TD error is the
network output minus the target.  ``grad`` is ``d loss / d Q``, which equals
``d loss / d delta`` because the target is held fixed.  So ``grad`` has the
sign of ``delta`` for every loss here and a gradient-descent step moves ``Q``
by ``-lr * grad``, towards ``y``.  ``sign(0) = 0``: at ``delta = 0`` every
gradient is 0 (the symmetric sub-gradient of the L1 loss; for a power below
one, where the derivative is infinite, the same choice).

Data-set quantities
-------------------
PAL's ``lambda`` (eq. 10, 31) and PER's ``eta`` (eq. 7) are computed over the
items given and are held constant in the gradient, as the paper's stop-gradient
``|.|_x`` (Corollary 1).  Pass ``lam=`` / ``eta_n=`` to use values computed
elsewhere (e.g. a minibatch loss that uses the whole buffer's ``lambda``).

Bad input raises ``ValueError`` naming the value (and its position).
"""

from __future__ import annotations

import numpy as np

from ._checks import check_finite_array, check_range

__all__ = [
    "huber",
    "l1",
    "lap_mass",
    "mse",
    "pal",
    "pal_lambda",
    "per_equivalent",
    "per_eta",
    "per_huber_equivalent",
    "power",
]


# -- input checks (check_* are shared with losses_torch) ------------------------
def _delta(delta, nonempty: bool = False) -> np.ndarray:
    d = check_finite_array("delta", delta)
    if nonempty and d.shape[0] == 0:
        raise ValueError("delta must hold at least one TD error (the data set is empty)")
    return d


def check_alpha(alpha) -> float:
    """``alpha`` in [0, inf): the priority exponent (else ``ValueError`` naming it)."""
    return check_range("alpha", alpha, 0.0, np.inf, hi_open=True)


def check_beta(beta) -> float:
    """``beta`` in [0, 1]: the IS exponent (else ``ValueError`` naming it)."""
    return check_range("beta", beta, 0.0, 1.0)


def check_kappa(kappa) -> float:
    """``kappa`` in (0, inf): LAP's floor and Huber threshold (else ``ValueError`` naming it)."""
    return check_range("kappa", kappa, 0.0, np.inf, lo_open=True, hi_open=True)


def check_tau(tau) -> float:
    """``tau`` in (0, inf): the power loss's exponent (else ``ValueError`` naming it)."""
    return check_range("tau", tau, 0.0, np.inf, lo_open=True, hi_open=True)


def check_eps(eps) -> float:
    """``eps`` in [0, inf): PER's added priority (else ``ValueError`` naming it)."""
    return check_range("eps", eps, 0.0, np.inf, hi_open=True)


def _abs_pow(a: np.ndarray, p: float) -> np.ndarray:
    """``a ** p`` for ``a >= 0`` with the value 0 at ``a = 0`` (also for ``p <= 0``)."""
    out = np.zeros_like(a)
    pos = a > 0
    out[pos] = np.power(a[pos], p)
    return out


# -- the basic losses (Section 3) -------------------------------------------
def mse(delta) -> tuple[np.ndarray, np.ndarray]:
    """Mean squared error ``0.5 delta^2``, gradient ``delta`` (Section 3, below eq. 1)."""
    d = _delta(delta)
    return 0.5 * d * d, d.copy()


def l1(delta) -> tuple[np.ndarray, np.ndarray]:
    """L1 loss ``|delta|``, gradient ``sign(delta)`` (Section 3; ``sign(0) = 0``)."""
    d = _delta(delta)
    return np.abs(d), np.sign(d)


def huber(delta, kappa: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Huber loss (eq. 2 for ``kappa = 1``, eq. 29 in general).

    ``0.5 delta^2`` if ``|delta| <= kappa``, else ``kappa (|delta| - 0.5 kappa)``;
    gradient ``delta`` or ``kappa sign(delta)``.  ``kappa = 1`` is the DQN/TD3
    setting (Section 3); the Atari LAP runs use ``kappa = 0.01`` (App. D.2).
    """
    d = _delta(delta)
    k = check_kappa(kappa)
    a = np.abs(d)
    small = a <= k
    loss = np.where(small, 0.5 * d * d, k * (a - 0.5 * k))
    grad = np.where(small, d, k * np.sign(d))
    return loss, grad


def power(delta, tau: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """The loss ``|delta|^tau / tau`` of Theorem 3 (``tau > 0``), gradient ``sign(delta) |delta|^(tau-1)``.

    ``tau = 2`` is MSE, ``tau = 1`` the L1 loss.  The gradient at ``delta = 0``
    is 0 (for ``tau < 1`` the derivative there is infinite; see the module notes).
    """
    d = _delta(delta)
    t = check_tau(tau)
    a = np.abs(d)
    return _abs_pow(a, t) / t, np.sign(d) * _abs_pow(a, t - 1.0)


# -- LAP / PAL (Section 5.2, App. A.4, App. D.2) ------------------------------
def lap_mass(delta, alpha: float = 0.4, kappa: float = 1.0) -> np.ndarray:
    """LAP sampling mass ``max(|delta|^alpha, kappa^alpha)`` (eq. 9 for ``kappa = 1``, eq. 30).

    This is the priority with α applied; the raw priority ``max(|delta|, kappa)``
    is :func:`prioritylab.priorities.lap_priority`.
    Defaults ``alpha = 0.4`` (Table 6, TD3) and ``kappa = 1`` (eq. 9).
    """
    d = _delta(delta)
    a, k = check_alpha(alpha), check_kappa(kappa)
    return np.maximum(np.power(np.abs(d), a), k**a)


def pal_lambda(delta, alpha: float = 0.4, kappa: float = 1.0) -> float:
    """PAL's ``lambda = sum_j max(|delta_j|^alpha, kappa^alpha) / N`` (eq. 10, 27, 31)."""
    pr = lap_mass(_delta(delta, nonempty=True), alpha, kappa)
    return float(np.sum(pr) / pr.shape[0])


def pal(delta, alpha: float = 0.4, kappa: float = 1.0, lam: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Prioritized Approximation Loss (eq. 10 for ``kappa = 1``, eq. 31 in general).

    ``(1/lambda) * 0.5 kappa^alpha delta^2`` if ``|delta| <= kappa``, else
    ``(1/lambda) * kappa |delta|^(1+alpha) / (1+alpha)``; gradient
    ``(1/lambda) kappa^alpha delta`` or ``(1/lambda) kappa |delta|^alpha sign(delta)``,
    i.e. ``(1/lambda) |lap_mass|_x * grad huber`` (Corollary 1, eq. 26).

    ``lambda`` is :func:`pal_lambda` over ``delta`` unless given, and is a
    constant in the gradient.  The value is eq. 31 as printed: it jumps at
    ``|delta| = kappa`` (by ``kappa^(2+alpha) (1/(1+alpha) - 1/2) / lambda``);
    the gradient is continuous there.  With ``alpha = 0``, ``lambda = 1`` and
    PAL is the Huber loss plus the constant ``0.5 kappa^2`` on ``|delta| > kappa``
    (same gradient; App. C.1: "when alpha = 0, PAL equals the Huber loss").
    """
    d = _delta(delta, nonempty=lam is None)
    a, k = check_alpha(alpha), check_kappa(kappa)
    if lam is None:
        lam = pal_lambda(d, a, k)
    lam = check_range("lam", lam, 0.0, np.inf, lo_open=True, hi_open=True)
    ad = np.abs(d)
    small = ad <= k
    ka = k**a
    loss = np.where(small, 0.5 * ka * d * d, k * np.power(ad, 1.0 + a) / (1.0 + a)) / lam
    grad = np.where(small, ka * d, k * np.power(ad, a) * np.sign(d)) / lam
    return loss, grad


# -- PER's uniformly sampled equivalent (Theorem 3, Corollary 3) ----------------
def per_eta(delta, alpha: float = 0.6, beta: float = 0.4, eps: float = 0.0) -> float:
    """``eta = min_j p_j^(alpha beta) / sum_j p_j^alpha`` with ``p_j = |delta_j| + eps`` (eq. 7).

    ``eps = 0`` is the paper's analysis (Section 3: "assume eps = 0"); ``eps > 0``
    is PER's priority ``|delta| + eps`` as prioritylab's PER sampler stores it.
    With ``eps = 0`` and ``beta > 0``, a zero TD error makes ``eta = 0``: that
    item has probability 0 and an infinite IS weight, which drives every
    normalised weight to 0 (the ``eps -> 0`` limit of PER), however small ``beta``
    is (:func:`min_power`).  ``0^0 = 1``, so ``beta = 0`` or ``alpha = 0`` leave
    zeros harmless.  A data set whose every priority is 0 (all ``delta = 0``,
    ``eps = 0``, ``alpha > 0``) cannot be sampled by PER and raises ``ValueError``.
    """
    d = _delta(delta, nonempty=True)
    a, b, e = check_alpha(alpha), check_beta(beta), check_eps(eps)
    p = np.abs(d) + e
    total = float(np.sum(np.power(p, a)))
    if not total > 0.0:
        raise ValueError("PER is undefined here: every priority |delta| + eps is 0 (all delta = 0 with eps = 0)")
    return float(min_power(float(p.min()), a, b) / total)


def min_power(p_min: float, alpha: float, beta: float) -> float:
    """``p_min^(alpha beta)``, with ``0^x = 0`` for every ``x > 0``: a subnormal ``beta`` (or ``alpha``)
    whose product with the other underflows to 0 must not turn a zero priority's ``0^x`` into ``0^0 = 1``."""
    if p_min == 0.0 and alpha > 0.0 and beta > 0.0:
        return 0.0
    return float(np.power(p_min, alpha * beta))


def _per_scale(d: np.ndarray, alpha: float, beta: float, eps: float, eta_n) -> float:
    if eta_n is None:
        return per_eta(d, alpha, beta, eps) * d.shape[0]
    return check_range("eta_n", eta_n, 0.0, np.inf, hi_open=True)


def _per_branch(ad: np.ndarray, tau: float, q: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Value ``(a+eps)^q a^tau / (tau+q)`` and gradient magnitude ``(a+eps)^q a^(tau-1)``, ``q = alpha - alpha beta``.

    With ``eps = 0`` these are ``a^(tau+q) / (tau+q)`` and ``a^(tau+q-1)``, eq. 7 and its derivative.
    """
    p = tau + q
    if eps == 0.0:
        return _abs_pow(ad, p) / p, _abs_pow(ad, p - 1.0)
    w = np.power(ad + eps, q)
    return w * _abs_pow(ad, tau) / p, w * _abs_pow(ad, tau - 1.0)


def per_equivalent(
    delta, alpha: float = 0.6, beta: float = 0.4, tau: float = 2.0, eps: float = 0.0, eta_n: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly sampled loss with PER's expected gradient for ``|delta|^tau / tau`` (Theorem 3, eq. 7 and 20).

    ``eta N / (tau + alpha - alpha beta) * |delta|^(tau + alpha - alpha beta)``
    with ``eta`` from :func:`per_eta` over ``delta`` (``N = len(delta)``) unless
    ``eta_n`` (the product ``eta N``) is given; it is a constant in the gradient.
    Defaults ``alpha = 0.6, beta = 0.4`` are PER's (LAP/PAL Tables 6, 7).

    ``eps > 0`` (PER with priority ``|delta| + eps``) generalises eq. 7 exactly:
    the gradient is ``eta N (|delta| + eps)^(alpha - alpha beta) sign(delta) |delta|^(tau-1)``
    (Theorem 1 applied to PER's ``P(i) w(i)``) and the value
    ``eta N (|delta| + eps)^(alpha - alpha beta) |delta|^tau / (tau + alpha - alpha beta)``,
    which is eq. 7 at ``eps = 0``; for ``eps > 0`` the factor
    ``((|delta| + eps) / |delta|)^(alpha - alpha beta)`` is held constant in the
    gradient (so ``grad`` is not the derivative of this value then).
    """
    d = _delta(delta, nonempty=eta_n is None)
    a, b, t, e = check_alpha(alpha), check_beta(beta), check_tau(tau), check_eps(eps)
    scale = _per_scale(d, a, b, e, eta_n)
    value, gmag = _per_branch(np.abs(d), t, a - a * b, e)
    return scale * value, scale * np.sign(d) * gmag


def per_huber_equivalent(
    delta, alpha: float = 0.6, beta: float = 0.4, kappa: float = 1.0, eps: float = 0.0, eta_n: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly sampled loss with the expected gradient of PER + Huber(kappa) (Corollary 3, eq. 8 and 23).

    Eq. 8 is :func:`per_equivalent` with ``tau = 2`` where ``|delta| <= 1`` and
    ``tau = 1`` elsewhere.  For a general ``kappa`` (eq. 29) the Huber gradient
    is ``delta`` (``tau = 2``) where ``|delta| <= kappa`` and ``kappa sign(delta)``
    (``kappa`` times the ``tau = 1`` gradient) elsewhere, so the equivalent is
    ``eta N/(2+alpha-alpha beta) |delta|^(2+alpha-alpha beta)`` if ``|delta| <= kappa`` and
    ``kappa eta N/(1+alpha-alpha beta) |delta|^(1+alpha-alpha beta)`` otherwise
    (``kappa = 1`` gives eq. 8).  The value jumps at ``|delta| = kappa`` as eq. 8
    does; the gradient is continuous.  ``eps``/``eta_n`` as in :func:`per_equivalent`.
    """
    d = _delta(delta, nonempty=eta_n is None)
    a, b, k, e = check_alpha(alpha), check_beta(beta), check_kappa(kappa), check_eps(eps)
    scale = _per_scale(d, a, b, e, eta_n)
    ad = np.abs(d)
    q = a - a * b
    v2, g2 = _per_branch(ad, 2.0, q, e)
    v1, g1 = _per_branch(ad, 1.0, q, e)
    small = ad <= k
    loss = scale * np.where(small, v2, k * v1)
    grad = scale * np.sign(d) * np.where(small, g2, k * g1)
    return loss, grad


#: Former name of :func:`lap_mass`, kept so existing callers keep working. It is
#: not the raw priority :func:`prioritylab.priorities.lap_priority`.
lap_priority = lap_mass
