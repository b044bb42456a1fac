"""Replay methods as settings: which sampler draws the batch and which loss it is trained with.

A method is a small object, not a copied training loop (LAP/PAL Section 5):

| method | sampler | critic loss | IS weights |
|---|---|---|---|
| ``uniform`` | uniform | MSE (Huber(1) for the DQN family) | no |
| ``per`` | proportional PER, ``|delta| + eps`` (PER eq. 1) | as uniform | yes, beta annealed to 1 (PER Section 3.4) |
| ``lap`` | LAP, ``max(|delta|, kappa)^alpha`` (LAP eq. 9 / 30) | Huber(kappa) (eq. 9 / 29) | no |
| ``pal`` | uniform | PAL(alpha, kappa) (eq. 10 / 31) | no |
| ``pser`` | PSER (PER + backward decay, eq. 6-10) | as uniform | yes, annealed |
| ``ners`` | NERS, learned scores (eq. 1-7, :mod:`prioritylab.deep.ners`) | as uniform | yes, annealed (NERS eq. 5) |

Each method is one entry of :mod:`prioritylab.deep.method_table` (NERS registers its own
in :mod:`prioritylab.deep.ners`).  Every loss comes from :mod:`prioritylab.losses_torch`.  The priority given to
the sampler is the TD error of largest magnitude over the critics
(LAP App. D: ``max(|delta_1|, |delta_2|)``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from ..losses import check_beta
from ..samplers import Sampler
from ..samplers import pser as PSER
from ..samplers.per import check_normalise
from ..schedules import LinearSchedule
from . import ners as N
from .method_table import METHOD_TABLE, MethodEntry, register

__all__ = ["METHODS", "METHOD_TABLE", "Defaults", "Method", "MethodEntry", "ReplaySettings", "register", "unread"]

METHODS = tuple(METHOD_TABLE)
"""The registered methods' names (the core ones, then NERS, registered by :mod:`prioritylab.deep.ners`)."""


@dataclass
class ReplaySettings:
    """Prioritisation settings; an unset value (None) takes the agent's default for the chosen sampler (its
    paper's table)."""

    alpha: float | None = None
    """Priority exponent (TD3/SAC: PER 0.6, LAP/PAL 0.4, LAP Table 6; DDQN: 0.6, Table 7; DQN: PER/PSER 0.5, PSER
    Table 4, LAP/PAL 0.6 as DDQN; NERS 0.5, its Table B.1)."""
    beta0: float | None = None
    """Initial IS exponent for per/pser/ners, annealed linearly to 1 over training (PER Section 3.4; 0.4, Table 6;
    DQN keeps it fixed at 0.5, PSER appendix)."""
    eps: float | None = None
    """PER's added priority (1e-10, LAP Table 6 / Castro et al.)."""
    kappa: float | None = None
    """LAP/PAL's priority floor and Huber threshold (1 for TD3/SAC, eq. 9-10; 0.01 for DDQN, App. D.2, "we use
    kappa=0.01", in eq. 29-30)."""
    rho: float = PSER.RHO
    """PSER decay coefficient (defined in PSER Section 3.2; 0.4 in Section 4.2 and its Atari table)."""
    eta: float = PSER.ETA
    """PSER anti-collapse factor of eq. 10 (0.7: Section 4.2 and the appendix's Table 2, "previous priority")."""
    window: int | None = None
    """PSER decay window; None: W = floor(ln 0.01 / ln rho), eq. 9 (5 for rho = 0.4)."""
    mode: str = PSER.MODE
    """PSER decay rule: 'max' (eq. 6) or 'add' (eq. 7)."""
    duplicates: str = PSER.DUPLICATE
    """PSER, a slot drawn more than once in one minibatch: one eq. 10 update from the priority it held before
    ('once', eq. 10's "previous priority") or one per copy, compounding to eta^k ('each', this project's
    behaviour before the setting existed; docs/samplers.md)."""
    normalise: str = "batch"
    """How per/pser/ners divide their IS weights so the largest is 1: by the minibatch's largest weight ('batch',
    as the code behind the papers' deep results does: Dopamine, which PSER adapted, and the LAP/PAL authors'
    TD3 and DDQN) or by the largest over every stored item ('global', PER Algorithm 1 read over the whole
    replay; LAP/PAL Theorem 3, eq. 20).  With a tiny eps, 'global' can shrink every weight, and so the
    step, by orders of magnitude (docs/samplers.md)."""
    ners_baseline: str = "previous"
    """NERS replay reward (eq. 6): return minus that of the 'previous' evaluation (the paper) or of the 'first'
    (the authors' public code); docs/ners.md."""
    ners_schedule: str = "episode"
    """When NERS trains: at the end of every training episode from its return ('episode': Algorithm 1's placement
    with the replay reward of the paper's variant NERS*, Sec. 3.3, Fig. 4 b-c) or at each evaluation from the
    evaluation return ('evaluation', eq. 6 and the text of its Section 2.2); docs/ners.md."""
    ners_sample_size: int = N.SAMPLE_SIZE
    """NERS |I_train| per training step (Table B.1: 128)."""
    ners_lr: float = N.LEARNING_RATE
    """NERS Adam learning rate (Table B.1: 1e-4)."""
    ners_local: tuple[int, ...] = N.LOCAL_HIDDEN
    """Widths of NERS's local and global networks (Table B.1: 256 512 256 128)."""
    ners_score: tuple[int, ...] = N.SCORE_HIDDEN
    """Hidden widths of NERS's score network (Table B.1: 256 128 64)."""


SAMPLER_ARGUMENTS = {"beta": "beta0", "local_hidden": "ners_local", "score_hidden": "ners_score"}
"""The samplers' arguments whose ``ReplaySettings`` field has another name (NERS's others: ``ners_`` + theirs)."""


def setting_named(err: Exception) -> tuple[str | None, str]:
    """The ``ReplaySettings`` field a sampler's refusal names, and the rest of its message: the samplers name their
    own arguments (``beta must be ...``, NERS's ``lr``), which a caller gives as ``beta0`` and ``ners_lr``.
    ``(None, message)`` where it names none."""
    text = str(err)
    word, sep, rest = text.partition(" ")
    names = {f.name for f in fields(ReplaySettings)}
    name = SAMPLER_ARGUMENTS.get(word, f"ners_{word}" if f"ners_{word}" in names else word)
    return (name, rest) if sep and name in names else (None, text)


def unread(name: str, settings: ReplaySettings) -> list[tuple[str, object, tuple[str, ...]]]:
    """``(field, value, methods that read it)`` for each setting given away from its default that the method
    ``name`` does not read: it has no effect on the run (the manifest still records it)."""
    default = ReplaySettings()
    return [(f.name, getattr(settings, f.name), tuple(m for m, e in METHOD_TABLE.items() if f.name in e.reads))
            for f in fields(ReplaySettings)
            if getattr(settings, f.name) != getattr(default, f.name) and f.name not in METHOD_TABLE[name].reads]


@dataclass(frozen=True)
class Defaults:
    """An agent's defaults per sampler (the paper's table)."""

    per_alpha: float
    per_beta0: float
    per_eps: float
    lap_alpha: float
    kappa: float
    per_beta_end: float | None = 1.0
    """IS exponent at the end of training (PER anneals beta to 1); None keeps beta fixed at ``beta0``."""
    td_kappa: float | None = None
    """Loss of uniform/per/pser: None for MSE, a number for Huber with that threshold (DQN's Huber, kappa 1)."""


class Method:
    """A sampler plus the loss that goes with it; built from a name and :class:`ReplaySettings`.

    What differs between methods is their :class:`~prioritylab.deep.method_table.MethodEntry`
    (``self.entry``); this class resolves the settings against the agent's :class:`Defaults`
    and calls the entry.
    """

    def __init__(self, name: str, settings: ReplaySettings, defaults: Defaults, total_steps: int):
        if name not in METHOD_TABLE:
            raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(METHOD_TABLE)}")
        self.name = name
        self.entry = entry = METHOD_TABLE[name]
        s = settings
        self.alpha = s.alpha if s.alpha is not None else entry.default_alpha(defaults)
        self.beta0 = s.beta0 if s.beta0 is not None else entry.default_beta0(defaults)
        self.eps = s.eps if s.eps is not None else defaults.per_eps
        self.kappa = s.kappa if s.kappa is not None else defaults.kappa
        self.settings = s
        self.uses_weights = entry.uses_weights
        self.beta_end = self.beta0 if defaults.per_beta_end is None else defaults.per_beta_end
        check_beta(self.beta0)  # named as the samplers name it (beta0 to the caller), not as the schedule's start
        self.beta = LinearSchedule(self.beta0, self.beta_end, total_steps)
        self.td_kappa = defaults.td_kappa
        check_normalise(s.normalise)  # refused even where the sampler does not read it
        for field_name, value, readers in unread(name, s):  # so is a value no sampler that reads it would take
            if readers:
                Method(readers[0], ReplaySettings(**{field_name: value}), defaults, total_steps)
        # build a small sampler now: a bad setting fails before any work, with the sampler's own message
        self.make_sampler(8, seed=0)
        if entry.check is not None:
            entry.check(self)

    def describe(self) -> dict:
        base = {"name": self.name, "alpha": self.alpha, "beta0": self.beta0, "eps": self.eps, "kappa": self.kappa}
        if self.uses_weights:  # the IS weights' normalisation and beta's schedule, from beta0 to beta_end
            base["normalise"] = self.settings.normalise
            base["beta_end"] = self.beta_end
        return {**base, **self.entry.describe(self.settings)}

    def make_sampler(self, capacity: int, seed) -> Sampler:
        return self.entry.build(self, capacity, seed)

    def check_env(self, env) -> None:
        """Refuse, before any work, an environment the method cannot serve (NERS: vector observations or
        uint8/bool images)."""
        if self.entry.check_env is not None:
            self.entry.check_env(self, env)

    def attach(self, buffer) -> None:
        """Connect the sampler to the buffer it serves (NERS reads the buffer's stored fields); else nothing."""
        if self.entry.attach is not None:
            self.entry.attach(self, buffer)

    def report(self, buffer, batch, priority, q_values) -> None:
        """Hand the learner's priorities (and, for NERS, the batch's Q-values) to the buffer's sampler."""
        self.entry.report(buffer, batch, priority, q_values)

    def beta_at(self, step: int) -> float | None:
        return self.beta(step) if self.uses_weights else None

    def critic_loss(self, delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Loss over TD errors of shape ``(critics, batch)``, summed over critics, averaged over the batch."""
        return self.entry.loss(self, delta, weights)

    @staticmethod
    def priority(delta: torch.Tensor) -> torch.Tensor:
        """``max_k |delta_k|`` over the critics (LAP App. D), detached."""
        return delta.detach().abs().amax(0)
