"""Strict parsing of saved sampler state: each helper returns a checked copy or raises
:class:`StateError` naming the field, so a ``load_state_dict`` can check everything before
it assigns anything."""

from __future__ import annotations

import numpy as np

from .kernels import MAX_WRITES


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


def check_keys(state, expected, where: str = "state") -> None:
    """:class:`StateError` naming the first entry of ``state`` that is not among ``expected``."""
    if not isinstance(state, dict):
        raise StateError(f"{where} must be a dict, got {type(state).__name__}")
    extra = [k for k in state if k not in expected]
    if extra:
        raise StateError(f"{where} has an unknown entry {extra[0]!r}")


def check_rng_leaves(value, template, where: str) -> None:
    """``value`` has exactly the structure of the bit generator state ``template``: the same keys,
    integers (never floats or booleans) where it has integers, ``has_uint32`` in {0, 1}."""
    if isinstance(template, dict):
        check_keys(value, template, where)
        for k, t in template.items():
            if k not in value:
                raise StateError(f"{where} lacks the entry {k!r}")
            check_rng_leaves(value[k], t, f"{where}[{k!r}]")
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
    check_rng_leaves(value, probe.bit_generator.state, f"state[{key!r}]")
    try:
        probe.bit_generator.state = value
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        raise StateError(f"state[{key!r}] is not a {bit_generator_type.__name__} state: {err}") from None
    return probe
