"""What every sampler shares: the slot bookkeeping behind the public calls of the protocol.

:class:`SlotBookkeeping` keeps, per slot, the write stamp, the predecessor link and its stamp,
the sampleable flag and the last signed TD error, and implements the public calls of
:class:`~prioritylab.samplers.base.Sampler` (``add``, ``set_sampleable``, ``sample``, ``update``,
``set_priorities``, the history of drawn slots, ``state_dict``/``load_state_dict``) on top of
the jitted kernels of :mod:`prioritylab.samplers.kernels`.  Every call checks all of its input
before it changes anything; the sampler-specific work goes through the hooks that
:class:`~prioritylab.samplers.base.Sampler` declares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._checks import as_float_array, as_index_array, as_rng, check_indices, check_positive_int, check_range
from ..priorities import ABS, mass_of, masses_of
from .fused import MAY_OVERFLOW, fused_add, fused_flags, fused_update
from .kernels import (
    BAD_LINK,
    EMPTY,
    MAX_WRITES,
    NO_STAMPS,
    NO_TD,
    NO_TREE,
    NOT_FINITE,
    OK,
    OUT_OF_RANGE,
    PriorityOverflow,
    check_slots,
    commit_add,
    commit_flags,
    link_stamps,
    prepare_update,
)  # fmt: skip
from .state import StateError, check_keys, load_rng_state, state_array, state_int, state_value

if TYPE_CHECKING:
    from .base import SampleBatch

SLOT_RECORD = np.dtype(
    [("generation", np.int64), ("td", np.float64), ("raw", np.float64), ("sampleable", np.bool_)], align=True
)
"""Per-slot fields read together, one record each (32 bytes): the write stamp, the last signed TD error,
the raw priority (prioritised samplers) and the sampleable flag.  The samplers read them through views
(``_generation``, ``_td``, ``_raw``, ``_sampleable``)."""
IN_RECORD = {"_generation": "generation", "_td": "td", "_raw": "raw", "_sampleable": "sampleable"}
"""Attributes that are views of the record: loading a state writes into the record instead of rebinding them."""

_TRUE, _FALSE = np.ones(1, dtype=bool), np.zeros(1, dtype=bool)  # one flag for every slot


def as_int64(values, name: str) -> np.ndarray:
    """A 1-D contiguous int64 array (no copy when it is one already); range checks are the caller's."""
    if type(values) is np.ndarray and values.dtype == np.int64 and values.ndim == 1 and values.flags.c_contiguous:
        return values
    return as_index_array(name, values)


class SlotBookkeeping:
    """Per-slot stamps, links, flags and TD errors, and the public calls built on them.

    Not a sampler by itself: subclass :class:`~prioritylab.samplers.base.Sampler`, which
    declares the hooks these calls use (``_prepare_add``, ``_on_add``, ``_apply``, ...).
    """

    def __init__(self, capacity: int, seed=None):
        self.capacity = check_positive_int("capacity", capacity)
        self.rng = as_rng(seed)
        # what a draw and an update read of a slot, in one 32-byte record: one cache line per slot
        self._slots = np.zeros(self.capacity, dtype=SLOT_RECORD)
        self._generation = self._slots["generation"]
        self._generation.fill(-1)
        self._writes = 0  # global write counter: the next generation stamp
        self._prev = np.full(self.capacity, -1, dtype=np.int64)  # predecessor link per slot
        self._prev_gen = np.full(self.capacity, -1, dtype=np.int64)  # its stamp when linked
        self._sampleable = self._slots["sampleable"]
        self._n_sampleable = 0
        self._td = self._slots["td"]  # last signed TD error reported per slot
        self._td.fill(np.nan)
        self._filled = np.empty(self.capacity, dtype=np.int64)  # written slots, first-write order
        self._size = 0
        self._last = -1  # last slot written (for add() without explicit links)
        self._scratch = np.full(self.capacity, -1, dtype=np.int64)
        self._history: list[np.ndarray] | None = None  # slots drawn since start_history()
        self._history_writes: list[np.ndarray] | None = None  # the write counter at each of those draws

    # -- reads ---------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of slots written at least once."""
        return self._size

    @property
    def num_sampleable(self) -> int:
        """Number of written slots that may be drawn now."""
        return self._n_sampleable

    def generations(self, indices) -> np.ndarray:
        """Current write stamps of ``indices`` (-1 for a slot never written)."""
        return self._generation[check_indices("indices", indices, self.capacity)]

    def episode_starts(self, indices) -> np.ndarray:
        """Whether each slot has no predecessor link (first step of an episode)."""
        return self._prev[check_indices("indices", indices, self.capacity)] < 0

    def predecessors(self, indices) -> np.ndarray:
        """Predecessor slot of each slot, -1 where there is none or it was overwritten."""
        idx = check_indices("indices", indices, self.capacity)
        p = self._prev[idx]
        ok = (p >= 0) & (self._generation[np.maximum(p, 0)] == self._prev_gen[idx])
        return np.where(ok, p, -1)

    def sampleable(self, indices) -> np.ndarray:
        return self._sampleable[check_indices("indices", indices, self.capacity)].copy()

    def td_errors(self, indices) -> np.ndarray:
        """The last signed TD error reported for each slot (NaN if none since it was written)."""
        return self._td[check_indices("indices", indices, self.capacity)].copy()

    # -- protocol ------------------------------------------------------------
    def add(self, slots, prev=None, *, episode_start=None, td_errors=None, sampleable=True) -> None:
        """Register that ``slots`` were (re)written, in this order.

        ``prev`` gives each slot's predecessor link (``-1``: none).  Without it,
        the slots continue one stream: each links to the slot written just
        before it, unless ``episode_start`` (bool per slot, or one flag) marks
        the first step of an episode.  ``sampleable=False`` registers slots
        that may not be drawn until :meth:`set_sampleable`.  ``td_errors`` are
        used only by samplers that seed new items from them (``init="td"``).
        """
        one_flag = sampleable is True or sampleable is False
        if (prev is not None and episode_start is None and td_errors is None and one_flag
                and self._fused_calls()[0] and self._add_fused(slots, prev, sampleable)):  # fmt: skip
            return
        idx = as_int64(slots, "slots")
        n = idx.shape[0]
        if prev is None:
            starts = self._check_flags("episode_start", episode_start, n, False)
            links = np.empty(n, dtype=np.int64)
            if n:
                links[0] = self._last
                links[1:] = idx[:-1]
                links[starts] = -1
        else:
            if episode_start is not None:
                raise ValueError("give either prev or episode_start, not both")
            links = as_int64(prev, "prev")
            if links.shape != (n,):
                raise ValueError(f"prev must have shape ({n},), got {links.shape}")
        code, pos = check_slots(idx, links, self.capacity)
        if code == OUT_OF_RANGE:
            raise ValueError(f"slots[{pos}] = {idx[pos]} is out of range [0, {self.capacity})")
        if code == BAD_LINK:
            raise ValueError(f"prev[{pos}] = {links[pos]} is out of range [-1, {self.capacity})")
        flags = self._check_flags("sampleable", sampleable, n, True)
        td = None if td_errors is None else self._check_td(td_errors, n)
        if n == 0:
            return
        if self._writes + n > MAX_WRITES:
            raise ValueError(f"write counter would pass {MAX_WRITES}")
        link_gen = np.empty(n, dtype=np.int64)
        bad = link_stamps(idx, links, self._generation, self._writes, self._scratch, link_gen)
        if bad >= 0:
            raise ValueError(f"prev[{bad}] = {links[bad]} points at an empty slot")
        prepared = self._prepare_add(idx, td)  # everything that can fail happens here
        if self._may_overflow(n, prepared):
            self._try_on_copy(lambda s: s._commit_add(idx, links, link_gen, flags, prepared),
                              f"adding slots {idx[:4].tolist()}{'...' if n > 4 else ''}")  # fmt: skip
        self._commit_add(idx, links, link_gen, flags, prepared)

    def _add_fused(self, slots, prev, flag: bool) -> bool:
        """The buffer's :meth:`add` in one kernel (:func:`~prioritylab.samplers.fused.fused_add`); False:
        nothing changed, take the general path (which raises the precise error)."""
        idx, links = as_int64(slots, "slots"), as_int64(prev, "prev")
        if links.shape != idx.shape:
            return False
        raw, tree, tmin, leaf0, alpha, span = self._fused_arrays()
        code, _, size, delta = fused_add(
            idx, links, flag, self._writes, MAX_WRITES, self._generation, self._prev, self._prev_gen,
            self._sampleable, self._td, self._filled, self._size, self._scratch, raw, tree, tmin, leaf0,
            self._fused_max_raw(), alpha, span,
        )  # fmt: skip
        if code != OK:
            return False
        n = idx.shape[0]
        if n:
            self._size = size
            self._n_sampleable += delta
            self._writes += n
            self._last = int(idx[-1])
        return True

    def _fused_calls(self) -> tuple[bool, bool, bool]:
        """Whether ``add``, ``set_sampleable`` and ``update`` may take the fused kernels (cached)."""
        calls = self.__dict__.get("_fused")
        if calls is None:
            calls = self._fused = self._fusable()
        return calls

    def _fusable(self) -> tuple[bool, bool, bool]:
        """Which calls' hooks are the plain ones the fused kernels implement (a sampler that overrides a
        hook is not fused unless it says so)."""
        from .base import Sampler

        cls = type(self)

        def plain(*names):
            return all(getattr(cls, n) is getattr(Sampler, n) for n in names)

        add = plain("_prepare_add", "_on_add", "_may_overflow")
        return add, plain("_on_sampleable", "_may_overflow"), plain("_apply", "_guard_total") and not self.update_inputs

    def _fused_arrays(self):
        """``(raw, tree, tmin, leaf0, alpha, span)`` of the fused kernels: no priorities here."""
        return NO_TD, NO_TREE.tree, NO_TREE.tmin, 0, 1.0, 0

    def _fused_max_raw(self) -> float:
        return 0.0

    def _commit_add(self, idx, links, link_gen, flags, prepared) -> None:
        n = idx.shape[0]
        self._size, delta = commit_add(
            idx, links, link_gen, flags, self._writes, self._generation, self._prev, self._prev_gen,
            self._sampleable, self._td, self._filled, self._size,
        )  # fmt: skip
        self._n_sampleable += delta
        self._writes += n
        self._last = int(idx[-1])
        self._on_add(idx, prepared)

    def set_sampleable(self, slots, sampleable) -> None:
        """Allow (``True``) or forbid (``False``) drawing written ``slots``; priorities are kept."""
        idx = as_int64(slots, "slots")
        if self._fused_calls()[1]:
            flags = sampleable
            if flags is True or flags is False:
                flags = _TRUE if flags else _FALSE
            if type(flags) is np.ndarray and flags.dtype == np.bool_ and flags.shape in ((idx.shape[0],), (1,)):
                raw, tree, tmin, leaf0, alpha, span = self._fused_arrays()
                code, _, delta = fused_flags(idx, flags, self._generation, self._sampleable, raw, tree, tmin,
                                             leaf0, alpha, mass_of(self._fused_max_raw(), alpha), span)  # fmt: skip
                if code == OK:
                    self._n_sampleable += delta
                    return
        flags = self._check_flags("sampleable", sampleable, idx.shape[0], True)
        if self._may_overflow(int(flags.sum()), None):
            self._try_on_copy(lambda s: s._set_flags(idx, flags), f"making slots {idx[:4].tolist()} sampleable")
        self._set_flags(idx, flags)

    def _set_flags(self, idx: np.ndarray, flags: np.ndarray) -> None:
        code, pos, delta = commit_flags(idx, flags, self._generation, self._sampleable)
        if code == OUT_OF_RANGE:
            raise ValueError(f"slots[{pos}] = {idx[pos]} is out of range [0, {self.capacity})")
        if code == EMPTY:
            raise ValueError(f"slots[{pos}] = {idx[pos]} points at an empty slot")
        self._n_sampleable += delta
        if idx.shape[0]:
            self._on_sampleable(idx)

    def sample(self, batch_size: int, beta: float | None = None) -> SampleBatch:
        """Draw ``batch_size`` slots (with replacement); recorded if a history is kept."""
        batch = self._sample(self._check_batch(batch_size, beta), beta)
        if self._history is not None:
            self._history.append(batch.indices.copy())
            self._history_writes.append(np.full(batch.indices.shape[0], self._writes, dtype=np.int64))
        return batch

    def update(self, indices, td_errors, generations=None, **inputs) -> None:
        """Set priorities of ``indices`` from ``td_errors`` by the sampler's rule (stale items skipped).

        ``inputs``: the extra per-item arrays a sampler names in ``update_inputs`` (NERS's
        ``q_values``), from which its :meth:`_priorities_from` computes the priorities.
        """
        idx, td, gen = self._check_call(indices, td_errors, generations, "td_errors")
        if inputs or self.update_inputs:
            self._update_with_inputs(idx, td, gen, inputs)
            return
        if self._fused_calls()[2]:
            raw, tree, tmin, leaf0, alpha, span = self._fused_arrays()
            code, pos, top = fused_update(idx, td, gen, self._generation, self._rule, self._rule_param,
                                          self._alpha_for_checks, raw, self._td, self._sampleable, tree, tmin, leaf0,
                                          span, True)  # fmt: skip
            if code == OK:
                self._raise_max(top)
                return
            if code != MAY_OVERFLOW:
                raise self._update_error(code, pos, idx, td, "td_errors")
        code, pos, keep, raw, mass, kept = prepare_update(
            idx, td, gen, self._generation, self._rule, self._rule_param, self._alpha_for_checks
        )
        if code != OK:
            raise self._update_error(code, pos, idx, td, "td_errors")
        if keep.shape[0]:
            self._guard_total(keep, raw, mass, kept, td, "td_errors")
            self._apply(keep, raw, mass, kept)

    def _update_with_inputs(self, idx, td, gen, inputs: dict) -> None:
        """The update path of a sampler with extra inputs: each input checked like the TD errors, the TD
        errors checked (no rule), then for the fresh items the priorities of :meth:`_priorities_from`, their
        masses, the overflow guard and :meth:`_apply`; nothing changes unless everything passes."""
        for name in inputs:
            if name not in self.update_inputs:
                raise TypeError(f"{type(self).__name__}.update() got an unexpected keyword argument {name!r}")
        values = {}
        for name in self.update_inputs:
            v = inputs.get(name)
            if v is None:
                raise ValueError(self._missing_input(name))
            if hasattr(v, "detach"):  # a torch tensor
                v = v.detach().to("cpu").double().numpy()
            values[name] = self._check_call(idx, v, None, name)[1]
        code, pos, keep, _, _, _ = prepare_update(idx, td, gen, self._generation, ABS, 0.0, 1.0)
        if code != OK:
            raise self._update_error(code, pos, idx, td, "td_errors")
        for name, v in values.items():
            bad = ~np.isfinite(v)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{name}[{i}] = {v[i]} (slot {idx[i]}) must be finite")
        if keep.shape[0] == 0:
            return
        fresh = self._generation[idx] == gen if gen.shape[0] else np.ones(idx.shape[0], dtype=bool)
        td_k = td[fresh]
        values = {name: v[fresh] for name, v in values.items()}
        raw = self._priorities_from(keep, td_k, values)
        mass = masses_of(raw, self._alpha_for_checks)
        self._guard_total(keep, raw, mass, None, raw, "priorities")
        self._td[keep] = td_k
        self._store_inputs(keep, values)
        self._apply(keep, raw, mass, None)

    def _raise_max(self, top: float) -> None:
        """A fused update wrote raw priorities up to ``top`` (no priorities here)."""

    def set_priorities(self, indices, priorities, generations=None) -> None:
        """Set raw priorities directly (a learned sampler's scores), stale items skipped.

        Takes the same path as :meth:`update` with the identity rule; priorities
        must be finite and non-negative, positive where the sampler's rule
        keeps every priority positive (PER and PSER with eps > 0, LAP), and at
        least LAP's kappa for LAP, the least priority its rule gives.
        """
        idx, p, gen = self._check_call(indices, priorities, generations, "priorities")
        neg = p < 0
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            raise ValueError(f"priorities[{i}] = {p[i]} must be non-negative")
        if self._positive_priorities and (p == 0).any():
            i = int(np.flatnonzero(p == 0)[0])
            raise ValueError(f"priorities[{i}] = 0.0 must be positive: {self.name}'s rule gives every slot a "
                             "positive priority")  # fmt: skip
        least = self._least_priority  # 0 for every rule but LAP's: the checks above cover it
        if least > 0 and (p < least).any():
            i = int(np.flatnonzero(p < least)[0])
            raise ValueError(f"priorities[{i}] = {p[i]} is below {self._least_priority_named}, the least "
                             f"priority {self.name}'s rule gives")  # fmt: skip
        code, pos, keep, raw, mass, _ = prepare_update(idx, p, gen, self._generation, ABS, 0.0, self._alpha_for_checks)
        if code != OK:
            raise self._update_error(code, pos, idx, p, "priorities")
        if keep.shape[0]:
            self._guard_total(keep, raw, mass, None, p, "priorities")
            self._apply(keep, raw, mass, None)

    # -- history of drawn slots (for learned samplers) ------------------------------------
    def start_history(self) -> None:
        """Start (or restart) recording the slots drawn by :meth:`sample`."""
        self._history, self._history_writes = [], []

    def history(self) -> np.ndarray:
        """Slots drawn since :meth:`start_history`, in draw order (empty if not recording)."""
        if not self._history:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(self._history)

    def history_writes(self) -> np.ndarray:
        """For each entry of :meth:`history`, the write counter when it was drawn: the slot still holds the
        transition drawn then if its write stamp is below it."""
        if not self._history_writes:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(self._history_writes)

    def drawn_and_held(self) -> np.ndarray:
        """The distinct slots drawn since :meth:`start_history` that still hold a transition drawn then (a
        slot rewritten after its last draw is left out: what it holds now was never drawn)."""
        idx = self.history()
        return np.unique(idx[self._generation[idx] < self.history_writes()])

    def stop_history(self) -> None:
        self._history = self._history_writes = None

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "name": self.name,
            "capacity": self.capacity,
            "config": self.config(),
            "rng": self.rng.bit_generator.state,
            "generation": self._generation.copy(),
            "writes": self._writes,
            "prev": self._prev.copy(),
            "prev_gen": self._prev_gen.copy(),
            "sampleable": self._sampleable.copy(),
            "td": self._td.copy(),
            "filled": self._filled[: self._size].copy(),
            "last": self._last,
            "history": None if self._history is None else self.history(),
            "history_writes": None if self._history is None else self.history_writes(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`: all of it is checked before any of it is assigned.

        Any inconsistency raises ``ValueError`` naming the field, and the
        sampler is left unchanged.
        """
        try:
            check_keys(state, self.state_dict())
            values = self._parse_state(state)
            probe = load_rng_state(state, type(self.rng.bit_generator))
        except StateError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, AttributeError) as err:
            raise ValueError(f"state cannot be loaded: {type(err).__name__}: {err}") from None
        for key, value in values.items():
            if key in IN_RECORD:
                self._slots[IN_RECORD[key]] = value
            else:
                setattr(self, key, value)
        self.rng.bit_generator.state = probe.bit_generator.state

    def _parse_state(self, state: dict) -> dict:
        """Check ``state`` and return the attributes to assign (no side effect)."""
        name, capacity, config = (state_value(state, k) for k in ("name", "capacity", "config"))
        if not isinstance(name, str) or name != self.name:
            raise StateError(f"state['name'] = {name!r} is not this sampler's {self.name!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity != self.capacity:
            raise StateError(f"state['capacity'] = {capacity!r} is not this sampler's {self.capacity}")
        if not isinstance(config, dict) or config != self.config():
            raise StateError(f"state['config'] = {config!r} differs from this sampler's settings {self.config()}")
        cap = (self.capacity,)
        generation = state_array(state, "generation", np.int64, cap)
        writes = state_int(state, "writes")
        if generation.min() < -1 or generation.max() >= MAX_WRITES or writes != int(generation.max()) + 1:
            raise StateError("state['writes'] must be one past the newest stamp in state['generation']")
        written = generation >= 0
        stamps = generation[written]
        if np.unique(stamps).shape[0] != stamps.shape[0]:
            raise StateError("state['generation'] repeats a write stamp")
        filled = state_array(state, "filled", np.int64, (-1,))
        if not np.array_equal(np.sort(filled), np.flatnonzero(written)):
            raise StateError("state['filled'] must list each written slot (state['generation'] >= 0) exactly once")
        prev = state_array(state, "prev", np.int64, cap)
        prev_gen = state_array(state, "prev_gen", np.int64, cap)
        if ((prev < -1) | (prev >= self.capacity)).any() or ((prev >= 0) & ~written).any():
            raise StateError("state['prev'] must hold -1 or a slot, and only for written slots")
        linked = prev >= 0
        target = generation[np.where(linked, prev, 0)]
        if (linked & (target < 0)).any():
            s = int(np.flatnonzero(linked & (target < 0))[0])
            raise StateError(f"state['prev'] links slot {s} to slot {prev[s]}, which was never written")
        if ((prev_gen < -1) | (linked & ((prev_gen < 0) | (prev_gen >= generation) | (prev_gen > target)))).any() or (
            prev_gen[~linked] != -1
        ).any():
            raise StateError(
                "state['prev_gen'] must be, for each link of state['prev'], a stamp the target slot had before "
                "the linking write (-1 elsewhere)"
            )
        sampleable = state_array(state, "sampleable", bool, cap)
        if (sampleable & ~written).any():
            raise StateError("state['sampleable'] marks an empty slot")
        td = state_array(state, "td", np.float64, cap)
        if np.isinf(td).any():
            raise StateError("state['td'] must hold finite TD errors or NaN")
        if not np.isnan(td[~written]).all():  # td_errors() would give it as the TD error of a slot never written
            raise StateError("state['td'] holds a TD error for an empty slot (NaN there)")
        last = state_int(state, "last", -1, self.capacity - 1)
        if (last >= 0) != bool(written.any()) or (last >= 0 and generation[last] != stamps.max()):
            raise StateError(f"state['last'] = {last} is not the last slot written")
        history = state_value(state, "history")
        if history is not None:
            history = state_array(state, "history", np.int64, (-1,))
            if ((history < 0) | (history >= self.capacity)).any():
                raise StateError("state['history'] holds a slot out of range")
        drawn_at = state_value(state, "history_writes")
        if (drawn_at is None) != (history is None):
            raise StateError("state['history_writes'] must be None exactly where state['history'] is")
        if history is not None:
            drawn_at = state_array(state, "history_writes", np.int64, (-1,))
            if drawn_at.shape != history.shape:
                raise StateError(f"state['history_writes'] has {drawn_at.shape[0]} entries, state['history'] "
                                 f"{history.shape[0]}: one per draw")  # fmt: skip
            if history.shape[0] and (drawn_at[0] < 0 or drawn_at[-1] > writes or (np.diff(drawn_at) < 0).any()):
                raise StateError("state['history_writes'] must give, for each slot of state['history'], the write "
                                 "counter at its draw: non-decreasing, in [0, state['writes']]")  # fmt: skip
        buffer = np.empty(self.capacity, dtype=np.int64)
        buffer[: filled.shape[0]] = filled
        return {
            "_generation": generation,
            "_writes": writes,
            "_prev": prev,
            "_prev_gen": prev_gen,
            "_sampleable": sampleable,
            "_n_sampleable": int(sampleable.sum()),
            "_td": td,
            "_filled": buffer,
            "_size": int(filled.shape[0]),
            "_last": last,
            "_history": None if history is None else ([history] if history.shape[0] else []),
            "_history_writes": None if history is None else ([drawn_at] if history.shape[0] else []),
        }

    # -- checks and bookkeeping ------------------------------------------------
    def _check_call(self, indices, values, generations, what: str):
        idx = np.asarray(indices)
        if idx.dtype != np.int64 or idx.ndim != 1 or not idx.flags.c_contiguous:
            idx = as_index_array("indices", idx)
        val = np.asarray(values)
        if val.dtype != np.float64 or not val.flags.c_contiguous:  # the hot path takes float64 as it is
            val = as_float_array(what, val)
        if val.shape != idx.shape:
            raise ValueError(f"{what} must have shape {idx.shape}, got {val.shape}")
        gen = NO_STAMPS if generations is None else self._check_generations(generations, idx.shape)
        return idx, val, gen

    def _update_error(self, code: int, pos: int, idx: np.ndarray, td: np.ndarray, what: str) -> ValueError:
        """The error for a jitted check's ``code`` at ``pos``: :class:`PriorityOverflow` for an overflow."""
        if code == OUT_OF_RANGE:
            return ValueError(f"indices[{pos}] = {idx[pos]} is out of range [0, {self.capacity})")
        if code == NOT_FINITE:
            return ValueError(f"{what}[{pos}] = {td[pos]} must be finite")
        if code == EMPTY:
            return ValueError(f"indices[{pos}] = {idx[pos]} points at an empty slot")
        return PriorityOverflow(
            f"priority from {what}[{pos}] = {td[pos]} overflows when raised to alpha={self._alpha_for_checks}"
        )

    def _check_flags(self, name: str, flags, n: int, default: bool) -> np.ndarray:
        if flags is None:
            return np.full(n, default)
        if flags is True or flags is False:
            return np.full(n, flags)
        arr = np.asarray(flags)
        if arr.dtype != bool:
            raise ValueError(f"{name} must be booleans, got dtype {arr.dtype}")
        if arr.ndim == 0 or arr.shape == (1,):
            return np.full(n, bool(arr.reshape(-1)[0]))
        if arr.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
        return arr

    def _check_td(self, td_errors, n: int) -> np.ndarray:
        td = np.asarray(td_errors)
        if td.dtype.kind not in "fiu":
            raise ValueError(f"td_errors must be numbers, got dtype {td.dtype}")
        td = np.ascontiguousarray(td, dtype=np.float64)
        if td.shape != (n,):
            raise ValueError(f"td_errors must have shape ({n},), got {td.shape}")
        bad = ~np.isfinite(td)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"td_errors[{i}] = {td[i]} must be finite")
        return td

    def _check_generations(self, generations, shape: tuple) -> np.ndarray:
        if (type(generations) is np.ndarray and generations.dtype == np.int64 and generations.shape == shape
                and generations.flags.c_contiguous):  # fmt: skip
            return generations  # the stamps sample() handed out: already checked in kind and shape
        gen = np.asarray(generations)
        if gen.dtype.kind not in "iu":
            raise ValueError(f"generations must be integers, got dtype {gen.dtype}")
        if gen.shape != shape:
            raise ValueError(f"generations must have shape {shape}, got {gen.shape}")
        if gen.dtype == np.uint64 and gen.size and gen.max() > np.iinfo(np.int64).max:
            raise ValueError(f"generations hold {gen.max()}, beyond any write stamp")
        return np.ascontiguousarray(gen, dtype=np.int64)

    def _check_filled(self, idx: np.ndarray) -> None:
        empty = self._generation[idx] < 0
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise ValueError(f"indices[{i}] = {idx[i]} points at an empty slot")

    def _check_batch(self, batch_size, beta) -> int:
        """Check a sample request (``beta`` is checked even by samplers that use no IS weights)."""
        k = check_positive_int("batch_size", batch_size)
        if beta is not None:
            check_range("beta", beta, 0.0, 1.0)
        if self._size == 0:
            raise ValueError("cannot sample from an empty sampler (no slot added yet)")
        if self._n_sampleable == 0:
            raise ValueError(f"cannot sample: none of the {self._size} written slots is sampleable yet")
        return k
