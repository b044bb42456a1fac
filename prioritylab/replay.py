"""Ring-buffer storage and the thin buffer that composes it with a sampler.

Three separate parts (see docs/architecture.md):

* :class:`RingStorage` holds the transition arrays, one per field, and nothing
  else;
* the writer logic of :class:`ReplayBuffer` owns the ring position and the
  episode boundaries and tells the sampler which slots were written;
* the sampler (:mod:`prioritylab.samplers`) holds priorities over slots only.

The agent never touches a tree: it gets ``(data, SampleBatch)`` from
:meth:`ReplayBuffer.sample` and gives TD errors back to
:meth:`ReplayBuffer.update`, which passes the generation stamps along so that
updates for slots overwritten in between are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._checks import check_positive_int
from .samplers import SampleBatch, Sampler


class RingStorage:
    """Fixed-capacity arrays, one per field, allocated on the first write.

    ``fields`` maps a name to ``(shape, dtype)`` of one item; if omitted, the
    layout is taken from the first transition written.
    """

    def __init__(self, capacity: int, fields: Mapping[str, tuple[tuple[int, ...], np.dtype]] | None = None):
        self.capacity = check_positive_int("capacity", capacity)
        self._data: dict[str, np.ndarray] = {}
        if fields:
            self._allocate({k: (tuple(shape), np.dtype(dt)) for k, (shape, dt) in fields.items()})

    def _allocate(self, fields) -> None:
        self._data = {k: np.zeros((self.capacity, *shape), dtype=dt) for k, (shape, dt) in fields.items()}

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self._data)

    def validate(self, transition: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Check ``transition`` against the layout (or the first one) and cast it to the
        storage dtypes, without changing anything; :meth:`store` of the result cannot fail."""
        values = {k: np.asarray(v) for k, v in transition.items()}
        if self._data:
            layout = {k: (v.shape[1:], v.dtype) for k, v in self._data.items()}
        else:
            layout = {k: (v.shape, v.dtype) for k, v in values.items()}
        missing, extra = set(layout) - set(values), set(values) - set(layout)
        if missing or extra:
            raise ValueError(f"transition fields differ from storage: missing {sorted(missing)}, extra {sorted(extra)}")
        out = {}
        for k, arr in values.items():
            shape, dtype = layout[k]
            if arr.shape != shape:
                raise ValueError(f"field {k!r} has shape {arr.shape}, storage expects {shape}")
            if dtype.kind not in "biuf" or not np.can_cast(arr.dtype, dtype, "same_kind"):
                raise ValueError(f"field {k!r} of dtype {arr.dtype} cannot be stored as {dtype}")
            with np.errstate(over="ignore"):
                arr = arr.astype(dtype, copy=False)
            if dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise ValueError(f"field {k!r} holds a non-finite value (as {dtype}): {arr}")
            out[k] = arr
        return out

    def store(self, slot: int, values: Mapping[str, np.ndarray]) -> None:
        """Write already validated ``values`` at ``slot``."""
        if not self._data:
            self._allocate({k: (v.shape, v.dtype) for k, v in values.items()})
        for k, arr in values.items():
            self._data[k][slot] = arr

    def write(self, slot: int, transition: Mapping[str, np.ndarray]) -> None:
        self.store(slot, self.validate(transition))

    def gather(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        return {k: v[slots] for k, v in self._data.items()}

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "data": {k: v.copy() for k, v in self._data.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.assign(self.parse_state(state))

    def assign(self, data: dict[str, np.ndarray]) -> None:
        """Take arrays returned by :meth:`parse_state` as the storage."""
        self._data = data

    def parse_state(self, state: dict) -> dict[str, np.ndarray]:
        """Check a :meth:`state_dict` and return its arrays (no side effect)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"state is for capacity {state['capacity']}, storage has {self.capacity}")
        data = {k: np.array(v) for k, v in state["data"].items()}
        bad = [k for k, v in data.items() if v.ndim == 0 or v.shape[0] != self.capacity]
        if bad:
            raise ValueError(f"state fields {bad} do not have {self.capacity} rows")
        return data


class ReplayBuffer:
    """Storage + writer + sampler.

    ``add`` writes one transition at the ring position; ``episode_start=True``
    marks the first transition of an episode (PSER does not decay across it).
    """

    def __init__(self, sampler: Sampler, storage: RingStorage | None = None):
        self.sampler = sampler
        self.storage = storage if storage is not None else RingStorage(sampler.capacity)
        if self.storage.capacity != sampler.capacity:
            raise ValueError(f"storage capacity {self.storage.capacity} != sampler capacity {sampler.capacity}")
        self.capacity = sampler.capacity
        self.position = 0  # next slot to write
        self._pending_start = True

    def __len__(self) -> int:
        return self.sampler.size

    def add(self, transition: Mapping[str, np.ndarray], episode_start: bool | None = None, td_error=None) -> int:
        """Write ``transition``; return its slot.

        ``episode_start`` defaults to "the previous transition ended an
        episode", read from a ``done`` field if the transition has one.
        """
        slot = self.position
        start = self._pending_start if episode_start is None else bool(episode_start)
        td = None if td_error is None else np.atleast_1d(np.asarray(td_error, dtype=np.float64))
        values = self.storage.validate(transition)
        done = values.get("done")
        if done is not None and done.size != 1:
            raise ValueError(f"field 'done' must be a single flag, got shape {done.shape}")
        self.sampler.add(np.array([slot]), episode_start=np.array([start]), td_errors=td)  # checks, then writes
        self.storage.store(slot, values)
        self._pending_start = bool(done) if done is not None else False
        self.position = (slot + 1) % self.capacity
        return slot

    def sample(self, batch_size: int, beta: float | None = None) -> tuple[dict[str, np.ndarray], SampleBatch]:
        batch = self.sampler.sample(batch_size, beta)
        return self.storage.gather(batch.indices), batch

    def update(self, batch: SampleBatch, td_errors) -> None:
        self.sampler.update(batch.indices, td_errors, batch.generations)

    def state_dict(self) -> dict:
        return {
            "sampler": self.sampler.state_dict(),
            "storage": self.storage.state_dict(),
            "position": self.position,
            "pending_start": self._pending_start,
        }

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`; checked in full before anything changes."""
        data = self.storage.parse_state(state["storage"])
        position = int(state["position"])
        if not 0 <= position < self.capacity:
            raise ValueError(f"state['position'] = {position} is out of range [0, {self.capacity})")
        pending = bool(state["pending_start"])
        self.sampler.load_state_dict(state["sampler"])  # atomic itself; the last step that can fail
        self.storage.assign(data)
        self.position, self._pending_start = position, pending
