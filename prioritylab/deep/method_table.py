"""The replay methods, one entry each: adding a method is adding a :class:`MethodEntry`.

An entry says how its sampler is built from a :class:`~prioritylab.deep.methods.Method`'s
resolved settings (``m.alpha``, ``m.beta0``, ``m.eps``, ``m.kappa``, ``m.settings``), which
critic loss it trains with, whether that loss takes PER's IS weights (and so whether the β
schedule is used), its default α and β₀ from the agent's
:class:`~prioritylab.deep.methods.Defaults`, and optional hooks: ``check`` (settings, at
construction), ``check_env``, ``attach`` (connect the sampler to its buffer), ``report``
(hand the learner's priorities to the sampler) and ``describe`` (the manifest's extra
fields).  The core methods are registered here; :mod:`prioritylab.deep.ners` registers its
own entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from .. import losses_torch as L
from ..samplers import make_sampler

METHOD_TABLE: dict = {}
"""Every registered method by name, in registration order (the core ones first)."""


def td_loss(m, delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The agent's TD loss (MSE, or Huber(``td_kappa``) for the DQN family), IS-weighted when the method uses
    weights; summed over critics, averaged over the batch."""
    loss = L.mse(delta, check=False) if m.td_kappa is None else L.huber(delta, m.td_kappa, check=False)
    if m.uses_weights:
        return (loss * weights).mean(-1).sum()
    return loss.mean(-1).sum()


def lap_loss(m, delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """LAP's Huber(kappa) (LAP eq. 9 / 29)."""
    return L.huber(delta, m.kappa, check=False).mean(-1).sum()


def pal_loss(m, delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """PAL(alpha, kappa) (LAP eq. 10 / 31), lambda from the largest error over the critics."""
    lam = L.pal_lambda(delta.detach().abs().amax(0), m.alpha, m.kappa, check=False)
    return L.pal(delta, m.alpha, m.kappa, lam=lam, check=False).mean(-1).sum()


def pser_fields(settings) -> dict:
    """The PSER settings, recorded in every method's description."""
    return {k: v for k, v in asdict(settings).items() if k in ("rho", "eta", "window", "mode")}


def report_priorities(buffer, batch, priority, q_values) -> None:
    """Hand the learner's priorities to the buffer's sampler."""
    buffer.update(batch, priority)


def _per_alpha(d) -> float:
    return d.per_alpha


def _lap_alpha(d) -> float:
    return d.lap_alpha


def _per_beta0(d) -> float:
    return d.per_beta0


@dataclass(frozen=True)
class MethodEntry:
    """One replay method: its sampler, loss, IS weights, defaults and hooks."""

    name: str
    build: Callable
    """``build(m, capacity, seed)``: the sampler, from the method's resolved settings."""
    loss: Callable = td_loss
    """``loss(m, delta, weights)`` over TD errors of shape ``(critics, batch)``."""
    uses_weights: bool = False
    """Whether the loss takes IS weights (and the sampler is given β from the schedule)."""
    default_alpha: Callable = _lap_alpha
    """``default_alpha(defaults)``: α when the settings leave it unset."""
    default_beta0: Callable = _per_beta0
    """``default_beta0(defaults)``: β₀ when the settings leave it unset."""
    check: Callable | None = None
    """``check(m)``: refuse bad settings at construction, beyond what building the sampler checks."""
    check_env: Callable | None = None
    """``check_env(m, env)``: refuse an environment the method cannot serve."""
    attach: Callable | None = None
    """``attach(m, buffer)``: connect the sampler to the buffer it serves."""
    report: Callable = report_priorities
    """``report(buffer, batch, priority, q_values)``: hand the learner's outputs to the sampler."""
    describe: Callable = pser_fields
    """``describe(settings)``: the fields recorded besides name, alpha, beta0, eps and kappa."""
    reads: tuple[str, ...] = ()
    """The :class:`~prioritylab.deep.methods.ReplaySettings` fields the method uses: a setting given away from
    its default for a method that does not read it is named to the user (:func:`~prioritylab.deep.methods.unread`)."""


def register(entry: MethodEntry) -> MethodEntry:
    """Add ``entry`` to :data:`METHOD_TABLE`; a name already taken is refused."""
    if entry.name in METHOD_TABLE:
        raise ValueError(f"a replay method named {entry.name!r} is already registered")
    METHOD_TABLE[entry.name] = entry
    return entry


def _check_pal(m) -> None:
    L.pal(torch.zeros(1), m.alpha, m.kappa)


def _pser(m, capacity, seed):
    s = m.settings
    return make_sampler("pser", capacity, alpha=m.alpha, beta=m.beta0, eps=m.eps, rho=s.rho, eta=s.eta,
                        window=s.window, mode=s.mode, duplicates=s.duplicates, normalise=s.normalise,
                        seed=seed)  # fmt: skip


WEIGHTED_READS = ("alpha", "beta0", "eps", "normalise")
"""What PER's proportional sampler with IS weights reads."""
PSER_READS = (*WEIGHTED_READS, "rho", "eta", "window", "mode", "duplicates")

register(MethodEntry("uniform", build=lambda m, capacity, seed: make_sampler("uniform", capacity, seed=seed)))
register(MethodEntry(
    "per", uses_weights=True, default_alpha=_per_alpha, reads=WEIGHTED_READS,
    build=lambda m, capacity, seed: make_sampler("per", capacity, alpha=m.alpha, beta=m.beta0, eps=m.eps,
                                                 normalise=m.settings.normalise, seed=seed),
))  # fmt: skip
register(MethodEntry(
    "lap", loss=lap_loss, reads=("alpha", "kappa"),
    build=lambda m, capacity, seed: make_sampler("lap", capacity, alpha=m.alpha, kappa=m.kappa, seed=seed),
))  # fmt: skip
register(MethodEntry("pal", loss=pal_loss, check=_check_pal, reads=("alpha", "kappa"),
                     build=lambda m, capacity, seed: make_sampler("uniform", capacity, seed=seed)))  # fmt: skip
# PSER's own (alpha, beta) are Table 4's (0.5, 0.5) for its DQN (dqn's Defaults); with ddqn, TD3 and SAC, which no
# paper ran with PSER, it takes the agent's PER values, so that PSER differs from PER in its decay only
register(MethodEntry("pser", uses_weights=True, default_alpha=_per_alpha, build=_pser, reads=PSER_READS))
