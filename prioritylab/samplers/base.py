"""The sampler protocol and the machinery shared by the prioritised samplers.

A sampler is a small object over replay *slots*; it holds no transition data.
The writer tells it which slots were (re)written with :meth:`Sampler.add`; the
learner asks for a minibatch with :meth:`Sampler.sample` and reports fresh TD
errors with :meth:`Sampler.update`.  Every sampler owns a
``numpy.random.Generator`` and saves/loads its complete state.

Priority domains: callers pass TD errors; a sampler turns them into a *raw*
priority (``|delta| + eps`` for PER, ``max(|delta|, kappa)`` for LAP, ...) and
the tree stores the sampling *mass* ``raw ** alpha``.  ``alpha`` is applied in
exactly one place, :func:`mass_of` (used by :meth:`PrioritySampler._mass` and
by every kernel), and the maximum priority used
for new items is tracked in the raw domain.

Atomic calls: every public method checks all of its input (and computes what
could fail, such as ``raw ** alpha`` overflowing) before it changes anything,
so a call that raises ``ValueError`` leaves the sampler exactly as it was;
``load_state_dict`` checks the whole state, including the sampler's settings
(:meth:`Sampler.config`), before assigning any of it.

Generation stamps: every write of a slot gets the next value of a global write
counter.  :meth:`Sampler.sample` returns the stamps of the drawn slots and
:meth:`Sampler.update` ignores items whose slot was overwritten since (a stale
update), when the stamps are passed back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .._checks import as_rng, check_finite_array, check_indices, check_positive_int, check_range, check_total
from ..sumtree import SumTree, tree_sample, tree_update

_NO_STAMPS = np.empty(0, dtype=np.int64)

# error codes of :func:`priority_update`
_OK, _OUT_OF_RANGE, _NOT_FINITE, _EMPTY, _OVERFLOW = 0, 1, 2, 3, 4


@njit(cache=True)
def mass_of(raw, alpha):
    """The sampling mass ``raw ** alpha`` (PER eq. 1's numerator): the one place alpha is applied.

    Every kernel and :meth:`PrioritySampler._mass` call this, so a mass is
    bit-identical whichever path computed it (NumPy's ``power`` and the
    compiled ``**`` can differ in the last bit).
    """
    return raw**alpha


@njit(cache=True)
def masses_of(raw, alpha):
    """:func:`mass_of` over an array."""
    out = np.empty(raw.shape[0])
    for i in range(raw.shape[0]):
        out[i] = mass_of(raw[i], alpha)
    return out


@njit(cache=True)
def priority_update(tree, tmin, tmax, leaf0, raw, generation, indices, td, generations, eps, floor, alpha):
    """Checked, fused priority update: ``raw = max(|td| + eps, floor)``, mass ``raw ** alpha``.

    Returns ``(code, position, max_raw_applied)``.  Every item is checked
    (index in range, finite TD error, slot written, finite mass) before
    anything is written, so a rejected call changes nothing.  Items whose
    generation stamp differs from ``generations`` (when that array is not
    empty) are stale and skipped.  Duplicates resolve to the last value.
    """
    n = indices.shape[0]
    capacity = raw.shape[0]
    use_gen = generations.shape[0] > 0
    keep = np.empty(n, dtype=np.int64)
    new_raw = np.empty(n)
    mass = np.empty(n)
    m = 0
    max_raw = 0.0
    for i in range(n):
        j = indices[i]
        if j < 0 or j >= capacity:
            return _OUT_OF_RANGE, i, 0.0
        d = td[i]
        if not np.isfinite(d):
            return _NOT_FINITE, i, 0.0
        if generation[j] < 0:
            return _EMPTY, i, 0.0
        if use_gen and generation[j] != generations[i]:
            continue  # stale: checked but never written
        r = max(abs(d) + eps, floor)
        x = mass_of(r, alpha)
        if not x < np.inf:
            return _OVERFLOW, i, 0.0
        keep[m] = j
        new_raw[m] = r
        mass[m] = x
        max_raw = max(max_raw, r)
        m += 1
    for i in range(m):
        raw[keep[i]] = new_raw[i]
    tree_update(tree, tmin, tmax, leaf0, keep[:m], mass[:m])
    return _OK, -1, max_raw


@dataclass
class SampleBatch:
    """What :meth:`Sampler.sample` returns."""

    indices: np.ndarray
    """Slots drawn (int64)."""
    probs: np.ndarray
    """Probability with which each slot is drawn by one draw, ``P(i)`` (1 for greedy TD)."""
    weights: np.ndarray
    """Importance-sampling weights (all ones for methods that use none)."""
    generations: np.ndarray
    """Write stamps of the drawn slots; pass them back to :meth:`Sampler.update`."""


def state_array(state: dict, key: str, dtype, shape: tuple) -> np.ndarray:
    """A copy of ``state[key]`` with the expected dtype and shape, else ``ValueError``."""
    arr = np.array(state[key], dtype=dtype)
    if arr.shape != shape:
        raise ValueError(f"state[{key!r}] must have shape {shape}, got {arr.shape}")
    return arr


class Sampler:
    """Base protocol: ``add``, ``sample``, ``update``, ``probabilities``, ``state_dict``/``load_state_dict``.

    ``seed`` is an int, a ``SeedSequence`` or a ``Generator`` (used as is);
    ``None`` draws fresh entropy from the operating system, so pass a seed for
    reproducible runs.
    """

    name = "base"

    def __init__(self, capacity: int, seed=None):
        self.capacity = check_positive_int("capacity", capacity)
        self.rng = as_rng(seed)
        self._generation = np.full(self.capacity, -1, dtype=np.int64)
        self._writes = 0  # global write counter: the next generation stamp
        self._episode_start = np.zeros(self.capacity, dtype=bool)
        self._filled = np.empty(self.capacity, dtype=np.int64)  # written slots, first-write order
        self._size = 0

    def config(self) -> dict:
        """The settings that define this sampler's behaviour (saved and checked with its state)."""
        return {}

    # -- reads ---------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of slots written at least once."""
        return self._size

    def generations(self, indices) -> np.ndarray:
        """Current write stamps of ``indices`` (-1 for a slot never written)."""
        return self._generation[check_indices("indices", indices, self.capacity)]

    def episode_starts(self, indices) -> np.ndarray:
        """Whether each slot holds the first transition of an episode."""
        return self._episode_start[check_indices("indices", indices, self.capacity)]

    def probabilities(self) -> np.ndarray:
        """Exact probability of every slot under one draw (zeros for empty slots)."""
        raise NotImplementedError

    # -- protocol ------------------------------------------------------------
    def add(self, slots, episode_start=None, td_errors=None) -> None:
        """Register that ``slots`` were (re)written, in this order.

        ``episode_start`` (bool per slot, or one flag for all) marks the first
        transition of an episode (PSER never decays across it).  ``td_errors``
        are used only by samplers configured to seed new items from their
        current TD error (``init="td"``).
        """
        idx = check_indices("slots", slots, self.capacity)
        starts = self._check_starts(episode_start, idx.shape[0])
        td = None if td_errors is None else self._check_td(td_errors, idx.shape[0])
        if idx.shape[0] == 0:
            return
        prepared = self._prepare_add(idx, td)  # everything that can fail happens here
        self._write_stamps(idx, starts)
        self._on_add(idx, prepared)

    def sample(self, batch_size: int, beta: float | None = None) -> SampleBatch:
        raise NotImplementedError

    def update(self, indices, td_errors, generations=None) -> None:
        """Set priorities of ``indices`` from ``td_errors`` (stale items skipped)."""
        idx = check_indices("indices", indices, self.capacity)
        td = self._check_td(td_errors, idx.shape[0])
        self._check_filled(idx)
        if generations is not None:
            fresh = self._generation[idx] == self._check_generations(generations, idx.shape)
            if not fresh.all():
                idx, td = idx[fresh], td[fresh]
        if idx.shape[0]:
            self._on_update(idx, self._prepare_update(idx, td))

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "name": self.name,
            "capacity": self.capacity,
            "config": self.config(),
            "rng": self.rng.bit_generator.state,
            "generation": self._generation.copy(),
            "writes": self._writes,
            "episode_start": self._episode_start.copy(),
            "filled": self._filled[: self._size].copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`: all of it is checked before any of it is assigned."""
        try:
            values = self._parse_state(state)
        except KeyError as err:
            raise ValueError(f"state lacks the entry {err}") from None
        probe = np.random.Generator(type(self.rng.bit_generator)())
        try:
            probe.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError) as err:
            raise ValueError(f"state['rng'] is not a {type(self.rng.bit_generator).__name__} state: {err}") from None
        for key, value in values.items():
            setattr(self, key, value)
        self.rng.bit_generator.state = state["rng"]

    def _parse_state(self, state: dict) -> dict:
        """Check ``state`` and return the attributes to assign (no side effect)."""
        if state["name"] != self.name or int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"state is for sampler {state['name']!r} with capacity {state['capacity']}, "
                f"not {self.name!r} with capacity {self.capacity}"
            )
        if state["config"] != self.config():
            raise ValueError(f"state was saved with settings {state['config']}, this sampler has {self.config()}")
        cap = (self.capacity,)
        generation = state_array(state, "generation", np.int64, cap)
        writes = int(state["writes"])
        if generation.min() < -1 or writes <= generation.max():
            raise ValueError("state['generation'] must be >= -1 and below state['writes'] (the next stamp)")
        filled = np.asarray(state["filled"], dtype=np.int64)
        if filled.ndim != 1 or not np.array_equal(np.sort(filled), np.flatnonzero(generation >= 0)):
            raise ValueError("state['filled'] must list each written slot (generation >= 0) exactly once")
        buffer = np.empty(self.capacity, dtype=np.int64)
        buffer[: filled.shape[0]] = filled
        return {
            "_generation": generation,
            "_writes": writes,
            "_episode_start": state_array(state, "episode_start", bool, cap),
            "_filled": buffer,
            "_size": int(filled.shape[0]),
        }

    # -- hooks for subclasses --------------------------------------------------
    def _prepare_add(self, idx: np.ndarray, td: np.ndarray | None):
        """Check and compute what :meth:`_on_add` needs; must not change state."""
        return None

    def _on_add(self, idx: np.ndarray, prepared) -> None:
        pass

    def _prepare_update(self, idx: np.ndarray, td: np.ndarray):
        """Check and compute what :meth:`_on_update` needs; must not change state."""
        return td

    def _on_update(self, idx: np.ndarray, prepared) -> None:
        pass

    # -- checks and bookkeeping ------------------------------------------------
    def _write_stamps(self, idx: np.ndarray, starts: np.ndarray) -> None:
        n = idx.shape[0]
        if n == 1:  # the writer's usual call: one slot per environment step
            if self._generation[idx[0]] < 0:
                self._filled[self._size] = idx[0]
                self._size += 1
        elif (new := self._generation[idx] < 0).any():
            fresh, first = np.unique(idx[new], return_index=True)
            fresh = fresh[np.argsort(first)]
            self._filled[self._size : self._size + fresh.shape[0]] = fresh
            self._size += fresh.shape[0]
        self._generation[idx] = self._writes + np.arange(n, dtype=np.int64)
        self._writes += n
        self._episode_start[idx] = starts

    def _check_starts(self, episode_start, n: int) -> np.ndarray:
        if episode_start is None:
            return np.zeros(n, dtype=bool)
        starts = np.asarray(episode_start, dtype=bool).reshape(-1)
        if starts.shape == (1,) and n != 1:
            starts = np.repeat(starts, n)
        if starts.shape != (n,):
            raise ValueError(f"episode_start must have shape ({n},), got {starts.shape}")
        return starts

    def _check_td(self, td_errors, n: int) -> np.ndarray:
        td = check_finite_array("td_errors", td_errors)
        if td.shape != (n,):
            raise ValueError(f"td_errors must have shape ({n},), got {td.shape}")
        return td

    def _check_generations(self, generations, shape: tuple) -> np.ndarray:
        gen = np.asarray(generations, dtype=np.int64).reshape(-1)
        if gen.shape != shape:
            raise ValueError(f"generations must have shape {shape}, got {gen.shape}")
        return gen

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
        return k

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self.capacity}, size={self.size})"


class PrioritySampler(Sampler):
    """A sampler whose draws are proportional to a mass ``raw ** alpha``.

    Subclasses define :meth:`raw_priority` (TD error -> raw priority).  New items
    enter with the largest raw priority seen so far (``initial_priority`` before
    any), unless ``init="td"``, where :meth:`add` takes their TD errors.
    Samplers that draw from the sum tree keep one (``_uses_tree``); it tracks
    the minimum mass only when ``track_min`` (PER's global IS normalisation).
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
        self.alpha = check_range("alpha", alpha, 0.0, np.inf)
        self.initial_priority = check_range(
            "initial_priority", initial_priority, 0.0, np.inf, lo_open=True, hi_open=True
        )
        if init not in ("max", "td"):
            raise ValueError(f"init must be 'max' or 'td', got {init!r}")
        self.init = init
        self.stratified = bool(stratified)
        self.tree = SumTree(capacity, track_min=track_min, track_max=False) if self._uses_tree else None
        self._raw = np.zeros(self.capacity)
        self._max_raw = self.initial_priority

    def config(self) -> dict:
        return {
            "alpha": self.alpha,
            "initial_priority": self.initial_priority,
            "init": self.init,
            "stratified": self.stratified,
        }

    # -- the one place alpha is applied ----------------------------------------
    def _mass(self, raw: np.ndarray) -> np.ndarray:
        """``raw ** alpha`` through :func:`mass_of`; an overflow is checked by the callers, before any change."""
        return masses_of(np.ascontiguousarray(raw, dtype=np.float64), self.alpha)

    def raw_priority(self, td: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _raw_rule(self) -> tuple[float, float] | None:
        """``(eps, floor)`` if ``raw_priority(td) == max(|td| + eps, floor)``: enables the fused update."""
        return None

    def _checked_mass(self, raw: np.ndarray, td: np.ndarray | None) -> np.ndarray | None:
        """``raw ** alpha``, rejected if it overflows; ``None`` for samplers without a tree."""
        if self.tree is None:
            return None
        mass = self._mass(raw)
        bad = ~(np.isfinite(mass) & np.isfinite(raw))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            source = f"td_errors[{i}] = {td[i]}" if td is not None else f"the max priority {raw[i]}"
            raise ValueError(f"priority from {source} overflows when raised to alpha={self.alpha}")
        return mass

    # -- reads ---------------------------------------------------------------
    @property
    def max_priority(self) -> float:
        """Largest raw priority seen (what a new item gets)."""
        return self._max_raw

    def priorities(self, indices) -> np.ndarray:
        """Raw priorities of ``indices``."""
        return self._raw[check_indices("indices", indices, self.capacity)].copy()

    def probabilities(self) -> np.ndarray:
        """Exact per-slot probability of one draw (``mass / total``; zeros while empty)."""
        leaves = np.asarray(self.tree.leaves)
        total = self.tree.total
        return leaves / total if total > 0.0 else np.zeros(self.capacity)

    # -- writes ----------------------------------------------------------------
    def update(self, indices, td_errors, generations=None) -> None:
        rule = self._raw_rule()
        if rule is None:
            return super().update(indices, td_errors, generations)
        idx = np.asarray(indices)
        if idx.dtype != np.int64 or idx.ndim != 1:
            idx = check_indices("indices", idx, self.capacity)
        td = np.asarray(td_errors, dtype=np.float64).reshape(-1)
        if td.shape != idx.shape:
            raise ValueError(f"td_errors must have shape {idx.shape}, got {td.shape}")
        gen = _NO_STAMPS if generations is None else self._check_generations(generations, idx.shape)
        a = self.tree.arrays
        code, pos, max_raw = priority_update(
            a.tree, a.tmin, a.tmax, a.leaf0, self._raw, self._generation, idx, td, gen, rule[0], rule[1], self.alpha
        )
        if code != _OK:
            raise ValueError(self._update_error(code, pos, idx, td))
        if max_raw > self._max_raw:
            self._max_raw = max_raw

    def _update_error(self, code: int, pos: int, idx: np.ndarray, td: np.ndarray) -> str:
        if code == _OUT_OF_RANGE:
            return f"indices[{pos}] = {idx[pos]} is out of range [0, {self.capacity})"
        if code == _NOT_FINITE:
            return f"td_errors[{pos}] = {td[pos]} must be finite"
        if code == _EMPTY:
            return f"indices[{pos}] = {idx[pos]} points at an empty slot"
        return f"priority from td_errors[{pos}] = {td[pos]} overflows when raised to alpha={self.alpha}"

    def _prepare_add(self, idx, td):
        if self.init == "td":
            if td is None:
                raise ValueError("init='td' needs td_errors in add()")
            raw = self.raw_priority(td)
        else:
            raw = np.full(idx.shape[0], self._max_raw)
            td = None
        return raw, self._checked_mass(raw, td)

    def _prepare_update(self, idx, td):
        raw = self.raw_priority(td)
        return raw, self._checked_mass(raw, td)

    def _on_add(self, idx, prepared) -> None:
        self._write(idx, *prepared)

    def _on_update(self, idx, prepared) -> None:
        self._write(idx, *prepared)

    def _write(self, idx: np.ndarray, raw: np.ndarray, mass: np.ndarray | None) -> None:
        """Store checked raw priorities and masses (cannot fail)."""
        if self.tree is not None:
            a = self.tree.arrays
            tree_update(a.tree, a.tmin, a.tmax, a.leaf0, idx, mass)  # checked by the caller
        self._raw[idx] = raw
        self._max_raw = max(self._max_raw, float(raw.max()))

    # -- sampling ------------------------------------------------------------
    def _draw(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        a = self.tree.arrays
        check_total(a.tree[0])
        out = np.empty(k, dtype=np.int64)
        mass = np.empty(k)
        tree_sample(a.tree, a.leaf0, a.depth, self.rng.random(k), self.stratified, out, mass)
        return out, mass

    def sample(self, batch_size: int, beta: float | None = None) -> SampleBatch:
        k = self._check_batch(batch_size, beta)
        idx, mass = self._draw(k)
        probs = mass / self.tree.total
        return SampleBatch(idx, probs, np.ones(k), self._generation[idx])

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> dict:
        state = super().state_dict()
        state.update(raw=self._raw.copy(), max_raw=self._max_raw)
        if self.tree is not None:
            state["tree"] = self.tree.state_dict()
        return state

    def _parse_state(self, state: dict) -> dict:
        values = super()._parse_state(state)
        raw = state_array(state, "raw", np.float64, (self.capacity,))
        if not np.all(np.isfinite(raw) & (raw >= 0)):
            raise ValueError("state['raw'] must hold finite non-negative priorities")
        max_raw = float(state["max_raw"])
        if not (np.isfinite(max_raw) and max_raw >= self.initial_priority and max_raw >= raw.max()):
            raise ValueError(f"state['max_raw'] = {max_raw} must be finite and at least every stored priority")
        values.update(_raw=raw, _max_raw=max_raw)
        if self.tree is not None:
            tree = SumTree(self.capacity, track_min=self.tree.track_min, track_max=self.tree.track_max)
            tree.load_state_dict(state["tree"])
            values["tree"] = tree
        return values


def is_weights(probs: np.ndarray, n: int, beta: float, min_prob: float | None) -> np.ndarray:
    """PER importance-sampling weights ``(N P(i))^-beta`` normalised to max 1 (PER Section 3.4).

    ``min_prob`` given: divide by the largest weight over all stored items,
    ``(N min_j P(j))^-beta`` ("global"); ``None``: by the batch's largest.
    """
    w = np.power(n * probs, -beta)
    if min_prob is None:
        return w / w.max()
    return w / (n * min_prob) ** -beta
