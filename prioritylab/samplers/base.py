"""The sampler protocol and the machinery shared by the prioritised samplers.

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
in one jitted pass (:func:`prepare_update`), then hands the fresh items to
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
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
from numba import njit

from .._checks import as_index_array, as_rng, check_indices, check_positive_int, check_range, check_total
from ..priorities import ABS, mass_of, masses_of, raw_priority
from ..sumtree import SumTree, TreeArrays, _update_levels, tree_alloc, tree_rebuild, tree_sample

_NO_STAMPS = np.empty(0, dtype=np.int64)
_NO_TD = np.empty(0)
_NO_TREE = TreeArrays(np.empty(0), np.empty(0), np.empty(0), 0, 0)  # samplers without a sum tree
MAX_WRITES = 2**62  # write stamps stay far from int64 overflow
_SAFE_TOTAL = np.finfo(np.float64).max / 2
"""A total mass bound below which a write cannot overflow the sum tree (rounding of the tree's sums is
far below this margin); a write whose bound reaches it is first tried on a copy."""

# error codes of the jitted checks
_OK, _OUT_OF_RANGE, _NOT_FINITE, _EMPTY, _OVERFLOW, _BAD_LINK = 0, 1, 2, 3, 4, 5


@njit(cache=True)
def prepare_update(indices, td, generations, generation, rule, param, alpha):
    """Check an update and compute raw priorities and masses of its fresh items.

    Returns ``(code, position, keep, raw, mass, td_kept)``: every item is checked (index
    in range, finite TD error, slot written, finite mass); items whose stamp
    differs from ``generations`` (when given) are stale and dropped.
    """
    n = indices.shape[0]
    capacity = generation.shape[0]
    use_gen = generations.shape[0] > 0
    keep = np.empty(n, dtype=np.int64)
    raw = np.empty(n)
    mass = np.empty(n)
    kept = np.empty(n)
    m = 0
    for i in range(n):
        j = indices[i]
        if j < 0 or j >= capacity:
            return _OUT_OF_RANGE, i, keep[:0], raw[:0], mass[:0], kept[:0]
        d = td[i]
        if not np.isfinite(d):
            return _NOT_FINITE, i, keep[:0], raw[:0], mass[:0], kept[:0]
        if generation[j] < 0:
            return _EMPTY, i, keep[:0], raw[:0], mass[:0], kept[:0]
        if use_gen and generation[j] != generations[i]:
            continue
        r = raw_priority(rule, d, param)
        x = mass_of(r, alpha)
        if not (r < np.inf and x < np.inf):
            return _OVERFLOW, i, keep[:0], raw[:0], mass[:0], kept[:0]
        keep[m] = j
        raw[m] = r
        mass[m] = x
        kept[m] = d
        m += 1
    return _OK, -1, keep[:m], raw[:m], mass[:m], kept[:m]


@njit(cache=True)
def write_masses(tree, tmin, leaf0, indices, mass, sampleable):
    """Write masses at ``indices`` (0 in the sum tree, +inf in the min tree for slots not
    sampleable) and bring both trees up to date level by level.  The min tree holds the
    smallest *positive* mass: a zero mass (never drawn) has no IS weight to normalise."""
    for i in range(indices.shape[0]):
        j = indices[i]
        tree[leaf0 + j] = mass[i] if sampleable[j] else 0.0
    _update_levels(tree, leaf0, indices, 0)
    if tmin.shape[0] > 0:
        for i in range(indices.shape[0]):
            j = indices[i]
            tmin[leaf0 + j] = mass[i] if sampleable[j] and mass[i] > 0.0 else np.inf
        _update_levels(tmin, leaf0, indices, 1)


@njit(cache=True)
def store_priorities(tree, tmin, leaf0, sampleable, raw_store, td_store, indices, raw, mass, td):
    """Write checked raw priorities, their masses (:func:`write_masses`) and, when given, the signed
    TD errors; returns the largest raw priority written."""
    top = 0.0
    for i in range(indices.shape[0]):
        raw_store[indices[i]] = raw[i]
        top = max(top, raw[i])
    for i in range(td.shape[0]):
        td_store[indices[i]] = td[i]
    if tree.shape[0] > 0:
        write_masses(tree, tmin, leaf0, indices, mass, sampleable)
    return top


@njit(cache=True)
def total_may_overflow(tree, n, mass, top_mass, span):
    """Whether ``n`` items of masses ``mass`` (or at most ``top_mass``), each raising at most ``span``
    other slots to at most the largest of them, could bring the total mass of ``tree`` to
    :data:`_SAFE_TOTAL` (a bound: exact checks are made on a copy past it)."""
    top = top_mass
    for i in range(mass.shape[0]):
        top = max(top, mass[i])
    return not tree[0] + n * (1 + span) * top < _SAFE_TOTAL


@njit(cache=True)
def link_stamps(indices, prev, generation, writes, scratch, prev_gen):
    """Stamp of each item's predecessor at the moment the item is written.

    A predecessor written earlier in the same call gets that new stamp.
    Returns the position of the first link to an empty slot, else -1.
    ``scratch`` (capacity, all -1) is restored before returning.
    """
    bad = -1
    n = indices.shape[0]
    for i in range(n):
        p = prev[i]
        if p < 0:
            prev_gen[i] = -1
        else:
            g = scratch[p] if scratch[p] >= 0 else generation[p]
            if g < 0 and bad < 0:
                bad = i
            prev_gen[i] = g
        scratch[indices[i]] = writes + i
    for i in range(n):
        scratch[indices[i]] = -1
    return bad


@njit(cache=True)
def check_slots(indices, links, capacity):
    """First slot out of ``[0, capacity)`` (code 1) or link out of ``[-1, capacity)`` (code 5), else (0, -1)."""
    for i in range(indices.shape[0]):
        if indices[i] < 0 or indices[i] >= capacity:
            return _OUT_OF_RANGE, i
    for i in range(links.shape[0]):
        if links[i] < -1 or links[i] >= capacity:
            return _BAD_LINK, i
    return _OK, -1


@njit(cache=True)
def commit_add(indices, links, link_gen, flags, writes, generation, prev, prev_gen, sampleable, td, filled, size):
    """Stamp, link and flag checked slots in order; returns ``(size, change in sampleable count)``."""
    delta = 0
    for i in range(indices.shape[0]):
        j = indices[i]
        if generation[j] < 0:
            filled[size] = j
            size += 1
        generation[j] = writes + i
        prev[j] = links[i]
        prev_gen[j] = link_gen[i]
        delta += np.int64(flags[i]) - np.int64(sampleable[j])
        sampleable[j] = flags[i]
        td[j] = np.nan
    return size, delta


@njit(cache=True)
def commit_flags(indices, flags, generation, sampleable):
    """Set sampleable flags of written slots; returns ``(code, position, change in count)``."""
    for i in range(indices.shape[0]):
        j = indices[i]
        if j < 0 or j >= generation.shape[0]:
            return _OUT_OF_RANGE, i, 0
        if generation[j] < 0:
            return _EMPTY, i, 0
    delta = 0
    for i in range(indices.shape[0]):
        j = indices[i]
        delta += np.int64(flags[i]) - np.int64(sampleable[j])
        sampleable[j] = flags[i]
    return _OK, -1, delta


@njit(cache=True)
def refresh_masses(tree, tmin, leaf0, indices, raw, alpha, sampleable):
    """Rewrite the masses of ``indices`` from their raw priorities (after their flags changed)."""
    mass = np.empty(indices.shape[0])
    for i in range(indices.shape[0]):
        mass[i] = mass_of(raw[indices[i]], alpha)
    write_masses(tree, tmin, leaf0, indices, mass, sampleable)


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


class StateError(ValueError):
    """A ``state_dict`` that cannot be loaded (a ``ValueError`` naming the field)."""


def state_value(state, key: str):
    """``state[key]``, or :class:`StateError` naming the missing key."""
    if not isinstance(state, dict):
        raise StateError(f"state must be a dict, got {type(state).__name__}")
    if key not in state:
        raise StateError(f"state lacks the entry {key!r}")
    return state[key]


def state_int(state, key: str, lo: int = 0, hi: int = MAX_WRITES) -> int:
    """An integer entry in ``[lo, hi]``."""
    v = state_value(state, key)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise StateError(f"state[{key!r}] must be an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def state_array(state, key: str, dtype, shape: tuple) -> np.ndarray:
    """A copy of ``state[key]`` with the expected dtype kind and shape, else :class:`StateError`.

    Values are never cast across kinds: a float array for an int field, or
    fractional stamps, are rejected rather than truncated.
    """
    v = state_value(state, key)
    try:
        arr = np.asarray(v)  # the one copy is the astype below (a replay's frames are gigabytes)
    except (TypeError, ValueError) as err:
        raise StateError(f"state[{key!r}] is not an array: {err}") from None
    dt = np.dtype(dtype)
    if arr.dtype.kind not in _KINDS[dt.kind]:
        raise StateError(f"state[{key!r}] must have dtype {dt}, got {arr.dtype}")
    if arr.shape != shape and not (len(shape) == 1 and shape[0] < 0 and arr.ndim == 1):
        raise StateError(f"state[{key!r}] must have shape {shape}, got {arr.shape}")
    if dt.kind in "iu" and arr.size and arr.dtype.kind in "iu":
        info = np.iinfo(dt)
        if arr.min() < info.min or arr.max() > info.max:
            raise StateError(f"state[{key!r}] holds values outside the range of {dt}")
    return arr.astype(dt)


_KINDS = {"b": "b", "i": "iu", "u": "iu", "f": "fiu"}


def _as_int64(values, name: str) -> np.ndarray:
    """A 1-D contiguous int64 array (no copy when it is one already); range checks are the caller's."""
    if type(values) is np.ndarray and values.dtype == np.int64 and values.ndim == 1 and values.flags.c_contiguous:
        return values
    return as_index_array(name, values)


def check_keys(state, expected, where: str = "state") -> None:
    """:class:`StateError` naming the first entry of ``state`` that is not among ``expected``."""
    if not isinstance(state, dict):
        raise StateError(f"{where} must be a dict, got {type(state).__name__}")
    extra = [k for k in state if k not in expected]
    if extra:
        raise StateError(f"{where} has an unknown entry {extra[0]!r}")


def _check_rng_leaves(value, template, where: str) -> None:
    """``value`` has exactly the structure of the bit generator state ``template``: the same keys,
    integers (never floats or booleans) where it has integers, ``has_uint32`` in {0, 1}."""
    if isinstance(template, dict):
        check_keys(value, template, where)
        for k, t in template.items():
            if k not in value:
                raise StateError(f"{where} lacks the entry {k!r}")
            _check_rng_leaves(value[k], t, f"{where}[{k!r}]")
    elif isinstance(template, str):
        if value != template:
            raise StateError(f"{where} must be {template!r}, got {value!r}")
    elif isinstance(template, np.ndarray):
        if not isinstance(value, np.ndarray) or value.dtype != template.dtype or value.shape != template.shape:
            raise StateError(f"{where} must be a {template.dtype} array of shape {template.shape}")
    elif isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise StateError(f"{where} must be a non-negative integer, got {value!r}")
    elif where.endswith("['has_uint32']") and value not in (0, 1):
        raise StateError(f"{where} must be 0 or 1, got {value!r}")


def load_rng_state(state, bit_generator_type, key: str = "rng") -> np.random.Generator:
    """A fresh Generator set to ``state[key]``, or :class:`StateError` naming the field."""
    value = state_value(state, key)
    probe = np.random.Generator(bit_generator_type())
    _check_rng_leaves(value, probe.bit_generator.state, f"state[{key!r}]")
    try:
        probe.bit_generator.state = value
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        raise StateError(f"state[{key!r}] is not a {bit_generator_type.__name__} state: {err}") from None
    return probe


class Sampler:
    """Base protocol: ``add``, ``sample``, ``update``, ``probabilities``, ``state_dict``/``load_state_dict``.

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

    def __init__(self, capacity: int, seed=None):
        self.capacity = check_positive_int("capacity", capacity)
        self.rng = as_rng(seed)
        self._generation = np.full(self.capacity, -1, dtype=np.int64)
        self._writes = 0  # global write counter: the next generation stamp
        self._prev = np.full(self.capacity, -1, dtype=np.int64)  # predecessor link per slot
        self._prev_gen = np.full(self.capacity, -1, dtype=np.int64)  # its stamp when linked
        self._sampleable = np.zeros(self.capacity, dtype=bool)
        self._n_sampleable = 0
        self._td = np.full(self.capacity, np.nan)  # last signed TD error reported per slot
        self._filled = np.empty(self.capacity, dtype=np.int64)  # written slots, first-write order
        self._size = 0
        self._last = -1  # last slot written (for add() without explicit links)
        self._scratch = np.full(self.capacity, -1, dtype=np.int64)
        self._history: list[np.ndarray] | None = None  # slots drawn since start_history()

    def config(self) -> dict:
        """The settings that define this sampler's behaviour (saved and checked with its state)."""
        return {}

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

    def probabilities(self) -> np.ndarray:
        """Exact probability of every slot under one draw (zeros for empty or held slots)."""
        raise NotImplementedError

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
        idx = _as_int64(slots, "slots")
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
            links = _as_int64(prev, "prev")
            if links.shape != (n,):
                raise ValueError(f"prev must have shape ({n},), got {links.shape}")
        code, pos = check_slots(idx, links, self.capacity)
        if code == _OUT_OF_RANGE:
            raise ValueError(f"slots[{pos}] = {idx[pos]} is out of range [0, {self.capacity})")
        if code == _BAD_LINK:
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
        idx = _as_int64(slots, "slots")
        flags = self._check_flags("sampleable", sampleable, idx.shape[0], True)
        if self._may_overflow(int(flags.sum()), None):
            self._try_on_copy(lambda s: s._set_flags(idx, flags), f"making slots {idx[:4].tolist()} sampleable")
        self._set_flags(idx, flags)

    def _set_flags(self, idx: np.ndarray, flags: np.ndarray) -> None:
        code, pos, delta = commit_flags(idx, flags, self._generation, self._sampleable)
        if code == _OUT_OF_RANGE:
            raise ValueError(f"slots[{pos}] = {idx[pos]} is out of range [0, {self.capacity})")
        if code == _EMPTY:
            raise ValueError(f"slots[{pos}] = {idx[pos]} points at an empty slot")
        self._n_sampleable += delta
        if idx.shape[0]:
            self._on_sampleable(idx)

    def sample(self, batch_size: int, beta: float | None = None) -> SampleBatch:
        """Draw ``batch_size`` slots (with replacement); recorded if a history is kept."""
        batch = self._sample(self._check_batch(batch_size, beta), beta)
        if self._history is not None:
            self._history.append(batch.indices.copy())
        return batch

    def update(self, indices, td_errors, generations=None) -> None:
        """Set priorities of ``indices`` from ``td_errors`` by the sampler's rule (stale items skipped)."""
        idx, td, gen = self._check_call(indices, td_errors, generations, "td_errors")
        code, pos, keep, raw, mass, kept = prepare_update(
            idx, td, gen, self._generation, self._rule, self._rule_param, self._alpha_for_checks
        )
        if code != _OK:
            raise ValueError(self._update_error(code, pos, idx, td, "td_errors"))
        if keep.shape[0]:
            self._guard_total(keep, raw, mass, kept, td, "td_errors")
            self._apply(keep, raw, mass, kept)

    def set_priorities(self, indices, priorities, generations=None) -> None:
        """Set raw priorities directly (a learned sampler's scores), stale items skipped.

        Takes the same path as :meth:`update` with the identity rule; priorities
        must be finite and non-negative, and positive where the sampler's rule
        keeps every priority positive (PER and PSER with eps > 0, LAP).
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
        code, pos, keep, raw, mass, _ = prepare_update(
            idx, p, gen, self._generation, ABS, 0.0, self._alpha_for_checks
        )
        if code != _OK:
            raise ValueError(self._update_error(code, pos, idx, p, "priorities"))
        if keep.shape[0]:
            self._guard_total(keep, raw, mass, None, p, "priorities")
            self._apply(keep, raw, mass, None)

    def on_evaluation(self, info: dict | None = None) -> None:
        """Hook called by a training loop at each evaluation (a learned sampler may train here)."""

    def on_episode_end(self, info: dict | None = None) -> None:
        """Hook called by a training loop at the end of each training episode, ``info["return"]`` its return
        (a learned sampler may train here: NERS's Algorithm 1)."""

    # -- history of drawn slots (for learned samplers) ------------------------------------
    def start_history(self) -> None:
        """Start (or restart) recording the slots drawn by :meth:`sample`."""
        self._history = []

    def history(self) -> np.ndarray:
        """Slots drawn since :meth:`start_history`, in draw order (empty if not recording)."""
        if not self._history:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(self._history)

    def stop_history(self) -> None:
        self._history = None

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
        last = state_int(state, "last", -1, self.capacity - 1)
        if (last >= 0) != bool(written.any()) or (last >= 0 and generation[last] != stamps.max()):
            raise StateError(f"state['last'] = {last} is not the last slot written")
        history = state_value(state, "history")
        if history is not None:
            history = state_array(state, "history", np.int64, (-1,))
            if ((history < 0) | (history >= self.capacity)).any():
                raise StateError("state['history'] holds a slot out of range")
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
        }

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
        pass

    def _on_sampleable(self, idx: np.ndarray) -> None:
        """Slots' sampleable flags changed (already stored)."""

    def _apply(self, idx: np.ndarray, raw: np.ndarray, mass: np.ndarray, td: np.ndarray | None) -> None:
        """Store checked raw priorities of fresh, written slots and their signed TD errors ``td``
        (None: priorities set directly); cannot fail."""
        if td is not None:
            self._td[idx] = td

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        raise NotImplementedError

    # -- checks and bookkeeping ------------------------------------------------
    def _check_call(self, indices, values, generations, what: str):
        idx = np.asarray(indices)
        if idx.dtype != np.int64 or idx.ndim != 1 or not idx.flags.c_contiguous:
            idx = as_index_array("indices", idx)
        val = np.asarray(values)
        if val.dtype != np.float64 or not val.flags.c_contiguous:
            if val.dtype.kind not in "fiub" and val.size:
                raise ValueError(f"{what} must be numbers, got dtype {val.dtype}")
            val = np.ascontiguousarray(val, dtype=np.float64)
        if val.shape != idx.shape:
            raise ValueError(f"{what} must have shape {idx.shape}, got {val.shape}")
        gen = _NO_STAMPS if generations is None else self._check_generations(generations, idx.shape)
        return idx, val, gen

    def _update_error(self, code: int, pos: int, idx: np.ndarray, td: np.ndarray, what: str) -> str:
        if code == _OUT_OF_RANGE:
            return f"indices[{pos}] = {idx[pos]} is out of range [0, {self.capacity})"
        if code == _NOT_FINITE:
            return f"{what}[{pos}] = {td[pos]} must be finite"
        if code == _EMPTY:
            return f"indices[{pos}] = {idx[pos]} points at an empty slot"
        return f"priority from {what}[{pos}] = {td[pos]} overflows when raised to alpha={self._alpha_for_checks}"

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self.capacity}, size={self.size})"


class PrioritySampler(Sampler):
    """A sampler whose draws are proportional to a mass ``raw ** alpha``.

    The rule (``_rule``, ``_rule_param``) turns a TD error into a raw priority.
    New items enter with the largest raw priority seen so far
    (``initial_priority`` before any), unless ``init="td"``, where :meth:`add`
    takes their TD errors.  Samplers that draw from the sum tree keep one
    (``_uses_tree``), with a min tree only when ``track_min`` (PER's global IS
    normalisation).
    """

    _uses_tree = True

    def __init__(
        self,
        capacity: int,
        alpha: float,
        seed=None,
        *,
        initial_priority: float = 1.0,
        init: str = "max",
        stratified: bool = True,
        track_min: bool = False,
    ):
        super().__init__(capacity, seed)
        self.alpha = check_range("alpha", alpha, 0.0, np.inf, hi_open=True)
        self.initial_priority = check_range(
            "initial_priority", initial_priority, 0.0, np.inf, lo_open=True, hi_open=True
        )
        if self._uses_tree and not np.isfinite(mass_of(self.initial_priority, self.alpha)):
            raise ValueError(f"initial_priority={initial_priority} overflows when raised to alpha={alpha}")
        if init not in ("max", "td"):
            raise ValueError(f"init must be 'max' or 'td', got {init!r}")
        self.init = init
        self.stratified = bool(stratified)
        self._track_min = bool(track_min)
        self.tree = SumTree(capacity, track_min=track_min, track_max=False) if self._uses_tree else None
        self._raw = np.zeros(self.capacity)
        self._max_raw = self.initial_priority

    @property
    def _alpha_for_checks(self) -> float:
        """The power whose result must be finite: masses are computed only for the sum tree."""
        return self.alpha if self._uses_tree else 1.0

    @property
    def _positive_priorities(self) -> bool:
        """PER and PSER with eps > 0 and LAP (kappa > 0) never give a priority of 0."""
        return self._rule != ABS and self._rule_param > 0.0

    _decay_span = 0
    """Slots besides its own whose priority one item can raise (PSER's window)."""

    def _may_overflow(self, n: int, prepared) -> bool:
        """Whether writing ``n`` items (masses ``prepared[1]``, or at most the max priority's) could make
        the total mass overflow: a cheap bound (:func:`total_may_overflow`), exact checks happen on a
        copy only past it."""
        if self.tree is None or n == 0:
            return False
        mass = _NO_TD if prepared is None else prepared[1]
        return total_may_overflow(self.tree.arrays.tree, n, mass, mass_of(self._max_raw, self.alpha),
                                  self._decay_span)  # fmt: skip

    def _guard_total(self, idx, raw, mass, td, values, what: str) -> None:
        """Refuse, before writing, priorities that would make the total sampling mass overflow."""
        if self._may_overflow(idx.shape[0], (raw, mass)):
            i = int(np.argmax(np.abs(values)))
            self._try_on_copy(lambda s: s._apply(idx, raw, mass, td), f"{what}[{i}] = {values[i]}")

    def _try_on_copy(self, write, what: str) -> None:
        """Run ``write`` on a copy of the arrays a write touches and raise ``ValueError`` if the copy's
        total mass overflows (only past the bound of :meth:`_may_overflow`: a write near the float range)."""
        trial = copy.copy(self)
        for key, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(trial, key, value.copy())
        trial.tree = copy.deepcopy(self.tree)
        write(trial)
        if not np.isfinite(trial.tree.total):
            raise ValueError(
                f"{what}: the total sampling mass overflows the float range (alpha={self.alpha}); "
                "refused, nothing changed"
            )

    def config(self) -> dict:
        return {
            "alpha": self.alpha,
            "initial_priority": self.initial_priority,
            "init": self.init,
            "stratified": self.stratified,
        }

    def raw_priority(self, td) -> np.ndarray:
        """The sampler's rule over an array of TD errors (see :mod:`prioritylab.priorities`)."""
        td = np.asarray(td, dtype=np.float64).reshape(-1)
        return np.array([raw_priority(self._rule, d, self._rule_param) for d in td])

    # -- reads ---------------------------------------------------------------
    @property
    def max_priority(self) -> float:
        """Largest raw priority seen (what a new item gets)."""
        return self._max_raw

    @property
    def total(self) -> float:
        """Total sampling mass of the sampleable slots."""
        return self.tree.total

    def priorities(self, indices) -> np.ndarray:
        """Raw priorities of ``indices``."""
        return self._raw[check_indices("indices", indices, self.capacity)].copy()

    def masses(self) -> np.ndarray:
        """Sampling mass of every slot (0 for empty or held slots)."""
        return np.array(self.tree.leaves)

    def probabilities(self) -> np.ndarray:
        """Exact per-slot probability of one draw (``mass / total``; zeros while empty)."""
        leaves = self.masses()
        total = self.tree.total
        return leaves / total if total > 0.0 else np.zeros(self.capacity)

    # -- writes ----------------------------------------------------------------
    def _prepare_add(self, idx, td):
        if self.init == "td":
            if td is None:
                raise ValueError("init='td' needs td_errors in add()")
            code, pos, _, raw, mass, _ = prepare_update(
                np.zeros(td.shape[0], dtype=np.int64), td, _NO_STAMPS, np.zeros(1, dtype=np.int64),
                self._rule, self._rule_param, self._alpha_for_checks,
            )  # fmt: skip
            if code != _OK:
                raise ValueError(self._update_error(code, pos, idx, td, "td_errors"))
            return raw, mass
        raw = np.full(idx.shape[0], self._max_raw)
        return raw, masses_of(raw, self.alpha)  # finite: the max priority's mass was checked when it was set

    def _on_add(self, idx, prepared) -> None:
        self._apply(idx, *prepared, None)

    def _apply(self, idx, raw, mass, td) -> None:
        a = self.tree.arrays if self.tree is not None else _NO_TREE
        m = store_priorities(a.tree, a.tmin, a.leaf0, self._sampleable, self._raw, self._td, idx, raw, mass,
                             _NO_TD if td is None else td)  # fmt: skip
        if m > self._max_raw:
            self._max_raw = float(m)

    def _on_sampleable(self, idx) -> None:
        if self.tree is not None:
            a = self.tree.arrays
            refresh_masses(a.tree, a.tmin, a.leaf0, idx, self._raw, self.alpha, self._sampleable)

    # -- sampling ------------------------------------------------------------
    def _draw(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        a = self.tree.arrays
        check_total(a.tree[0])
        out = np.empty(k, dtype=np.int64)
        mass = np.empty(k)
        tree_sample(a.tree, a.leaf0, a.depth, self.rng.random(k), self.stratified, out, mass)
        return out, mass

    def _sample(self, k: int, beta: float | None) -> SampleBatch:
        idx, mass = self._draw(k)
        probs = mass / self.tree.total
        return SampleBatch(idx, probs, np.ones(k), self._generation[idx])

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> dict:
        state = super().state_dict()
        state.update(raw=self._raw.copy(), max_raw=self._max_raw)
        return state

    def _parse_state(self, state: dict) -> dict:
        values = super()._parse_state(state)
        raw = state_array(state, "raw", np.float64, (self.capacity,))
        if not np.all(np.isfinite(raw) & (raw >= 0)):
            raise StateError("state['raw'] must hold finite non-negative priorities")
        if (raw[values["_generation"] < 0] != 0).any():
            raise StateError("state['raw'] holds a priority on a slot never written")
        if self._positive_priorities and (raw[values["_generation"] >= 0] == 0).any():
            s = int(np.flatnonzero((raw == 0) & (values["_generation"] >= 0))[0])
            raise StateError(f"state['raw'] holds 0 on written slot {s}; {self.name}'s priorities are positive")
        max_raw = state_value(state, "max_raw")
        if not isinstance(max_raw, (float, int, np.floating, np.integer)) or isinstance(max_raw, bool):
            raise StateError(f"state['max_raw'] must be a number, got {max_raw!r}")
        max_raw = float(max_raw)
        if not (np.isfinite(max_raw) and max_raw >= self.initial_priority and max_raw >= raw.max()):
            raise StateError(f"state['max_raw'] = {max_raw} must be finite and at least every stored priority")
        mass = masses_of(raw, self._alpha_for_checks)
        if not np.isfinite(mass).all() or not np.isfinite(mass_of(max_raw, self._alpha_for_checks)):
            raise StateError(f"state['raw'] holds a priority that overflows when raised to alpha={self.alpha}")
        values.update(_raw=raw, _max_raw=max_raw)
        if self.tree is not None:
            a = self.tree.arrays
            tree = tree_alloc(a.tree.shape[0])
            tmin = tree_alloc(a.tmin.shape[0], np.inf) if self._track_min else np.empty(0)
            live = values["_sampleable"]
            tree[a.leaf0 : a.leaf0 + self.capacity] = np.where(live, mass, 0.0)
            if self._track_min:
                tmin[a.leaf0 : a.leaf0 + self.capacity] = np.where(live & (mass > 0), mass, np.inf)
            tree_rebuild(tree, tmin, np.empty(0), a.leaf0)
            if not np.isfinite(tree[0]):
                raise StateError("state['raw'] gives a total mass beyond the float range")
            fresh = SumTree(self.capacity, track_min=self._track_min, track_max=False)
            fresh._set_arrays(tree, tmin, np.empty(0))
            values["tree"] = fresh
        return values


def is_weights(probs: np.ndarray, n: int, beta: float, min_prob: float | None) -> np.ndarray:
    """PER importance-sampling weights ``(N P(i))^-beta`` normalised to max 1 (PER Section 3.4).

    ``min_prob`` given: divide by the largest weight over all stored items,
    ``(N min_j P(j))^-beta`` ("global"); ``None``: by the batch's largest.
    Computed in log space, ``exp(-beta (log P(i) - log P_ref))``, so the ratio
    never overflows; a weight below the float range is the smallest positive
    double, so weights stay in (0, 1].  ``N`` cancels in the ratio.  Degenerate
    global normalisation (``min_prob = 0``, an item that is never drawn) has an
    infinite normaliser: every weight is 0 when ``beta > 0``.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if beta == 0.0:
        return np.ones_like(probs)
    if min_prob is not None and min_prob <= 0.0:
        return np.zeros_like(probs)
    logp = np.log(probs)
    ref = logp.min() if min_prob is None else np.log(min_prob)
    w = np.exp(-beta * (logp - ref))
    return np.maximum(w, np.nextafter(0.0, 1.0))
