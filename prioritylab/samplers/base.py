"""The sampler protocol: what the writer and the learner call, and what a new sampler implements.

A sampler is a small object over replay *slots*; it holds no transition data
and knows nothing of environments or episodes.  The writer tells it which
slots were (re)written with :meth:`Sampler.add`, with a *predecessor link*
per slot (the slot of the previous step of the same episode, for PSER's
backward decay), and which slots may not be drawn yet
(:meth:`Sampler.set_sampleable`: a frame stack or an n-step return that is
not complete).  The learner asks for a minibatch with :meth:`Sampler.sample`
and reports fresh TD errors with :meth:`Sampler.update`.  Every sampler owns
a ``numpy.random.Generator`` and saves/loads its complete state.

One update path: :meth:`Sampler.update` checks the call and turns TD errors
into raw priorities with the sampler's rule from :mod:`prioritylab.priorities`
in one jitted pass (:func:`~prioritylab.samplers.kernels.prepare_update`), then hands the fresh items to
the sampler's :meth:`Sampler._apply` (tree write, PSER's eq. 10 and decay,
heap fix).  A learned sampler sets raw priorities directly with
:meth:`Sampler.set_priorities`, which takes the same ``_apply``.

Priority domains: the tree stores the sampling *mass* ``raw ** alpha``;
alpha is applied only by :func:`prioritylab.priorities.mass_of`.

Atomic calls: every public method checks all of its input (and computes what
could fail, such as ``raw ** alpha`` overflowing) before it changes anything,
so a call that raises ``ValueError`` leaves the sampler exactly as it was;
``load_state_dict`` checks the whole state before assigning any of it.

Generation stamps: every write of a slot gets the next value of a global write
counter.  :meth:`Sampler.sample` returns the stamps of the drawn slots and
:meth:`Sampler.update` ignores items whose slot was overwritten since (a stale
update), when the stamps are passed back.

Beside this file: :mod:`~prioritylab.samplers.bookkeeping` (the per-slot bookkeeping behind
the public calls), :mod:`~prioritylab.samplers.kernels` (their jitted kernels),
:mod:`~prioritylab.samplers.state` (strict state parsing) and
:mod:`~prioritylab.samplers.priority` (:class:`PrioritySampler`, the base of the
prioritised samplers, and :func:`is_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..priorities import ABS
from .bookkeeping import SlotBookkeeping
from .kernels import MAX_WRITES, prepare_update
from .state import StateError, check_keys, load_rng_state, state_array, state_int, state_value

__all__ = [
    "MAX_WRITES", "SampleBatch", "Sampler", "StateError", "check_keys", "load_rng_state", "prepare_update",
    "state_array", "state_int", "state_value",
]  # fmt: skip


@dataclass
class SampleBatch:
    """What :meth:`Sampler.sample` returns."""

    indices: np.ndarray
    """Slots drawn (int64)."""
    probs: np.ndarray
    """Probability with which each slot is drawn by one draw, ``P(i)`` (1 for greedy TD)."""
    weights: np.ndarray
    """Importance-sampling weights in (0, 1] (all ones for methods that use none)."""
    generations: np.ndarray
    """Write stamps of the drawn slots; pass them back to :meth:`Sampler.update`."""
    beta: float | None = None
    """The IS exponent the weights were computed with (the sampler's own where ``sample`` got none); ``None`` for
    methods that use no weights."""


class Sampler(SlotBookkeeping):
    """The protocol every sampler follows.

    The writer calls :meth:`add` (slots, predecessor links, held flags) and
    :meth:`set_sampleable`; the learner calls :meth:`sample` (→ :class:`SampleBatch`)
    and :meth:`update` (TD errors, with the stamps ``sample`` returned); a learned
    sampler sets priorities with :meth:`set_priorities`; a training loop calls
    :meth:`on_evaluation`; checkpoints use :meth:`state_dict`/:meth:`load_state_dict`.
    Reads: :attr:`size`, :attr:`num_sampleable`, :meth:`generations`,
    :meth:`predecessors`, :meth:`episode_starts`, :meth:`sampleable`, :meth:`td_errors`,
    :meth:`probabilities`, :meth:`memory_bytes`.  These calls are implemented once in
    :class:`~prioritylab.samplers.bookkeeping.SlotBookkeeping`.

    A new sampler sets :attr:`name` and its rule, and implements the hooks below:
    :meth:`_sample` and :meth:`probabilities` always; :meth:`_apply` (and
    :meth:`_prepare_add`/:meth:`_on_add`, :meth:`_on_sampleable`) when it keeps
    priorities; :meth:`_priorities_from` (and :meth:`_store_inputs`) when its priorities
    come from extra :attr:`update_inputs`; :meth:`config`, and ``state_dict``/``_parse_state``
    extended by its own fields, when it has settings or state of its own.

    ``seed`` is an int, a ``SeedSequence`` or a ``Generator`` (used as is);
    ``None`` draws fresh entropy from the operating system, so pass a seed for
    reproducible runs.  The priority rule (a code of
    :mod:`prioritylab.priorities`) is ``_rule``/``_rule_param``.
    """

    name = "base"
    _rule = ABS
    _rule_param = 0.0
    _alpha_for_checks = 1.0
    _positive_priorities = False  # whether the rule keeps every priority above 0 (set_priorities must too)
    _least_priority = 0.0  # the least raw priority the rule gives (LAP's kappa): set_priorities and states keep to it
    _least_priority_named = "0"  # how an error names it
    update_inputs: tuple[str, ...] = ()
    """Extra per-item inputs :meth:`update` takes by keyword besides the TD errors (NERS: ``("q_values",)``);
    a sampler that names some computes its priorities from them in :meth:`_priorities_from`."""

    def config(self) -> dict:
        """The settings that define this sampler's behaviour (saved and checked with its state)."""
        return {}

    def probabilities(self) -> np.ndarray:
        """Exact probability of every slot under one draw (zeros for empty or held slots)."""
        raise NotImplementedError

    def on_evaluation(self, info: dict | None = None) -> None:
        """Hook called by a training loop at each evaluation (a learned sampler may train here)."""

    def on_episode_end(self, info: dict | None = None) -> None:
        """Hook called by a training loop at the end of each training episode, ``info["return"]`` its return
        (a learned sampler may train here: NERS's Algorithm 1)."""

    def may_overflow(self, n: int) -> bool:
        """Whether writing ``n`` slots, or making them sampleable, at up to the largest priority so far could make
        the total sampling mass overflow the float range: a cheap bound, true only near it.  A caller that makes
        several calls for one write of its own checks it first, since a later call may then be refused."""
        return self._may_overflow(n, None)

    def memory_bytes(self) -> int:
        """Bytes of the arrays this sampler holds: here the per-slot arrays and the record of drawn slots; a
        sampler that holds more (a tree, a heap, a network) adds its own."""
        held = (self._slots, self._prev, self._prev_gen, self._filled, self._scratch, *(self._history or ()),
                *(self._history_writes or ()))
        return sum(a.nbytes for a in held)

    # -- hooks for subclasses --------------------------------------------------
    def _may_overflow(self, n: int, prepared) -> bool:
        """Whether writing ``n`` items could make a total sampling mass overflow (no masses here)."""
        return False

    def _guard_total(self, idx, raw, mass, td, values, what: str) -> None:
        """Refuse priorities that would make the total sampling mass overflow (no masses here)."""

    def _prepare_add(self, idx: np.ndarray, td: np.ndarray | None):
        """Check and compute what :meth:`_on_add` needs; must not change state."""
        return None

    def _on_add(self, idx: np.ndarray, prepared) -> None:
        """Slots were stamped and linked: store what :meth:`_prepare_add` computed for them."""

    def _on_sampleable(self, idx: np.ndarray) -> None:
        """Slots' sampleable flags changed (already stored)."""

    def _apply(self, idx: np.ndarray, raw: np.ndarray, mass: np.ndarray, td: np.ndarray | None) -> None:
        """Store checked raw priorities of fresh, written slots and their signed TD errors ``td``
        (None: priorities set directly); cannot fail."""
        if td is not None:
            self._td[idx] = td

    def _priorities_from(self, idx: np.ndarray, td: np.ndarray, inputs: dict) -> np.ndarray:
        """Raw priorities of fresh, written slots from their checked TD errors and :attr:`update_inputs`
        (finite arrays by name); may raise ``ValueError``, must not change state."""
        raise NotImplementedError

    def _store_inputs(self, idx: np.ndarray, inputs: dict) -> None:
        """Keep what a sampler records of its checked :attr:`update_inputs`; cannot fail."""

    def _missing_input(self, name: str) -> str:
        """The message when :meth:`update` is called without the input ``name``."""
        return f"{self.name}'s update needs {name}=... (one value per item)"

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self.capacity}, size={self.size})"


def __getattr__(name: str):
    """``PrioritySampler`` and ``is_weights`` lived here; they now live in :mod:`.priority`."""
    if name in ("PrioritySampler", "is_weights"):
        from . import priority

        return getattr(priority, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
