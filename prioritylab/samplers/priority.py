"""The prioritised samplers' common base: draws proportional to a mass ``raw ** alpha``.

:class:`PrioritySampler` stores raw priorities, gives new items the largest raw priority given so far,
keeps the masses in a :class:`~prioritylab.sumtree.SumTree` and refuses writes whose total
mass would overflow; :func:`is_weights` gives PER's importance-sampling weights.
"""

from __future__ import annotations

import copy

import numpy as np

from .._checks import check_bool, check_finite_array, check_indices, check_positive_int, check_range, check_total
from ..priorities import ABS, mass_of, masses_of, raw_priority
from ..sumtree import SAFE_TOTAL, SumTree, tree_alloc, tree_rebuild, tree_sample
from .base import SampleBatch, Sampler
from .kernels import (
    NO_STAMPS,
    NO_TD,
    NO_TREE,
    OK,
    PriorityOverflow,
    prepare_update,
    refresh_masses,
    store_priorities,
    total_may_overflow,
)  # fmt: skip
from .state import StateError, state_array, state_value


class PrioritySampler(Sampler):
    """A sampler whose draws are proportional to a mass ``raw ** alpha``.

    The rule (``_rule``, ``_rule_param``) turns a TD error into a raw priority.
    New items enter with the largest raw priority any update has given so far, a running maximum
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
        self.stratified = check_bool("stratified", stratified)
        if not (self.stratified or self._uses_tree):  # it has no i.i.d. draws to give
            raise ValueError(f"stratified=False: {type(self).__name__} draws by rank segments or in order, "
                             "never i.i.d. from masses; only the tree samplers (per, lap, pser) take it")  # fmt: skip
        self._track_min = check_bool("track_min", track_min)
        self.tree = SumTree(capacity, track_min=track_min, track_max=False) if self._uses_tree else None
        self._raw = self._slots["raw"]  # zeros
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
        mass = NO_TD if prepared is None else prepared[1]
        return total_may_overflow(self.tree.arrays.tree, n, mass, mass_of(self._max_raw, self.alpha),
                                  self._decay_span)  # fmt: skip

    def may_overflow(self, n: int) -> bool:
        """:meth:`Sampler.may_overflow` with no call into compiled code (a buffer asks before every write): each
        stored mass is at most the largest priority's, so the total is at most ``capacity`` times it, and the
        bound becomes a limit on the largest raw priority, computed once per ``n`` and alpha."""
        if self.tree is None or n <= 0:
            return False
        key = (n, self.alpha)
        limit = self.__dict__.setdefault("_raw_limits", {}).get(key)
        if limit is None:
            # kernels.past_safe_total's bound, total + n (1 + span) top < SAFE_TOTAL, holds when the total is at
            # most capacity * top and top = raw ** alpha stays below half of this mass
            top = SAFE_TOTAL / (2.0 * (self.capacity + n * (1 + self._decay_span)))
            with np.errstate(over="ignore", divide="ignore"):  # alpha 0 or small: no raw priority reaches it
                limit = self._raw_limits[key] = float(np.exp(np.log(top) / self.alpha))
        return self._max_raw >= limit

    def _guard_total(self, idx, raw, mass, td, values, what: str) -> None:
        """Refuse, before writing, priorities that would make the total sampling mass overflow."""
        if self._may_overflow(idx.shape[0], (raw, mass)):
            i = int(np.argmax(np.abs(values)))
            self._try_on_copy(lambda s: s._apply(idx, raw, mass, td), f"{what}[{i}] = {values[i]}")

    def _try_on_copy(self, write, what: str) -> None:
        """Run ``write`` on a copy of the arrays a write touches and raise :class:`PriorityOverflow` if the copy's
        total mass overflows (only past the bound of :meth:`_may_overflow`: a write near the float range)."""
        trial = copy.copy(self)
        for key, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(trial, key, value.copy())
        trial.tree = copy.deepcopy(self.tree)
        write(trial)
        if not np.isfinite(trial.tree.total):
            raise PriorityOverflow(
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
        """The sampler's rule over an array of TD errors (see :mod:`prioritylab.priorities`); ``ValueError`` naming a
        TD error that is not a finite number, as :meth:`update` refuses it."""
        td = check_finite_array("td", td)
        return np.array([raw_priority(self._rule, d, self._rule_param) for d in td])

    # -- reads ---------------------------------------------------------------
    def memory_bytes(self) -> int:
        """Bytes of the per-slot arrays and the sum tree's arrays."""
        tree = 0 if self.tree is None else sum(a.nbytes for a in self.tree.arrays[:3])
        return super().memory_bytes() + tree  # the raw priorities are in the slot record

    @property
    def max_priority(self) -> float:
        """Largest raw priority any update has given, a running maximum (what a new item gets)."""
        return self._max_raw

    @property
    def total(self) -> float:
        """Total sampling mass of the sampleable slots (samplers that draw from the sum tree; ``ValueError`` for
        one that draws by rank or in order, which keeps no masses: read its :meth:`probabilities`)."""
        self._refuse_treeless("total")
        return self.tree.total

    def _refuse_treeless(self, what: str) -> None:
        if self.tree is None:
            raise ValueError(f"{what}: {type(self).__name__} draws by rank or in order and keeps no sampling masses; "
                             "read probabilities()")  # fmt: skip

    def priorities(self, indices) -> np.ndarray:
        """Raw priorities of ``indices``."""
        return self._raw[check_indices("indices", indices, self.capacity)].copy()

    def masses(self) -> np.ndarray:
        """Sampling mass of every slot (0 for empty or held slots); ``ValueError`` as :attr:`total`."""
        self._refuse_treeless("masses()")
        return np.array(self.tree.leaves)

    def probabilities(self) -> np.ndarray:
        """Exact per-slot probability of one draw (``mass / total``; zeros while empty)."""
        leaves = self.masses()
        total = self.tree.total
        return leaves / total if total > 0.0 else np.zeros(self.capacity)

    # -- writes ----------------------------------------------------------------
    def _fusable(self) -> tuple[bool, bool, bool]:
        """The fused kernels implement this class's hooks: new items at the max priority, priorities
        stored as they are.  A subclass that overrides a hook is not fused unless it says so."""
        cls = type(self)

        def plain(*names):
            return all(getattr(cls, n) is getattr(PrioritySampler, n) for n in names)

        add = self.init == "max" and plain("_prepare_add", "_on_add", "_apply", "_may_overflow")
        return add, plain("_on_sampleable", "_may_overflow"), plain("_apply", "_guard_total") and not self.update_inputs

    def _fused_arrays(self):
        a = self.tree.arrays if self.tree is not None else NO_TREE
        return self._raw, a.tree, a.tmin, a.leaf0, self.alpha, self._decay_span

    def _fused_max_raw(self) -> float:
        return self._max_raw

    def _raise_max(self, top: float) -> None:
        if top > self._max_raw:
            self._max_raw = float(top)

    def _prepare_add(self, idx, td):
        if self.init == "td":
            if td is None:
                raise ValueError("init='td' needs td_errors in add()")
            code, pos, _, raw, mass, _ = prepare_update(
                np.zeros(td.shape[0], dtype=np.int64), td, NO_STAMPS, np.zeros(1, dtype=np.int64),
                self._rule, self._rule_param, self._alpha_for_checks,
            )  # fmt: skip
            if code != OK:
                raise self._update_error(code, pos, idx, td, "td_errors")
            return raw, mass
        raw = np.full(idx.shape[0], self._max_raw)
        return raw, masses_of(raw, self.alpha)  # finite: the max priority's mass was checked when it was set

    def _on_add(self, idx, prepared) -> None:
        self._apply(idx, *prepared, None)

    def _apply(self, idx, raw, mass, td) -> None:
        a = self.tree.arrays if self.tree is not None else NO_TREE
        m = store_priorities(a.tree, a.tmin, a.leaf0, self._sampleable, self._raw, self._td, idx, raw, mass,
                             NO_TD if td is None else td)  # fmt: skip
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
        low = (raw < self._least_priority) & (values["_generation"] >= 0)
        if low.any():
            s = int(np.flatnonzero(low)[0])
            raise StateError(f"state['raw'] holds {raw[s]} on written slot {s}, below {self._least_priority_named}, "
                             f"the least priority {self.name}'s rule gives")  # fmt: skip
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
            fresh.set_arrays(tree, tmin, np.empty(0))
            values["tree"] = fresh
        return values


def is_weights(probs, n: int, beta: float, min_prob: float | None) -> np.ndarray:
    """PER importance-sampling weights ``(N P(i))^-beta`` normalised to max 1 (PER Section 3.4), of probabilities
    ``probs`` in (0, 1] of ``n`` stored items, with ``beta`` in [0, 1] and ``min_prob`` (``None``, or in
    [0, min(probs)]: the smallest probability of any stored item cannot exceed one drawn); ``ValueError`` naming the
    first bad value (NaN, a probability of 0, a beta above 1 or a ``min_prob`` above a drawn probability would give
    NaN weights or weights above 1).  The samplers check their own inputs and call :func:`_is_weights`."""
    check_positive_int("n", n)
    beta = check_range("beta", beta, 0.0, 1.0)
    arr = check_finite_array("probs", probs)
    bad = np.flatnonzero(~((arr > 0.0) & (arr <= 1.0)))
    if bad.size:
        raise ValueError(f"probs[{int(bad[0])}] = {float(arr[bad[0]])!r} is not a probability in (0, 1]")
    if min_prob is not None:
        least = float(arr.min()) if arr.size else 1.0
        min_prob = check_range("min_prob", min_prob, 0.0, 1.0)
        if min_prob > least * (1.0 + 1e-12):  # one probability computed in another order: its last bits may differ
            raise ValueError(f"min_prob {min_prob!r} is above a drawn probability, {least!r}: the smallest over the "
                             "stored items cannot be")  # fmt: skip
    return _is_weights(arr, n, beta, min_prob)


def _is_weights(probs: np.ndarray, n: int, beta: float, min_prob: float | None) -> np.ndarray:
    """:func:`is_weights` unchecked: PER importance-sampling weights ``(N P(i))^-beta`` normalised to max 1.

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
