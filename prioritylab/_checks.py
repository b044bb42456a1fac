"""Input checks shared by the library: clear ``ValueError`` naming the bad value."""

from __future__ import annotations

import math

import numpy as np

MEMINFO = "/proc/meminfo"


def check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_bool(name: str, value) -> bool:
    """A flag: True or False (NumPy's too), not a string such as "no", which ``bool()`` would read as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_range(name: str, value, lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> float:
    """Check ``lo <(=) value <(=) hi``; infinite bounds are allowed.  A boolean or a string is not a number here,
    though ``float()`` reads ``True`` as 1 and ``"0.4"`` as 0.4."""
    if type(value) is not float and isinstance(value, (bool, np.bool_, str, bytes)):  # a float: the usual case
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    ok = not math.isnan(v)
    ok = ok and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        raise ValueError(f"{name} must be in {left}{lo}, {hi}{right}, got {value!r}")
    return v


def as_float_array(name: str, values) -> np.ndarray:
    """``values`` as a contiguous float64 array (no copy when they are one); ``ValueError`` for anything but
    numbers: a string such as ``"2.5"`` would otherwise be read as one, and a boolean as 0 or 1 (the samplers' ``add``
    refuses boolean TD errors too)."""
    arr = np.asarray(values)
    if arr.dtype != np.float64 or not arr.flags.c_contiguous:
        if arr.dtype.kind not in "fiu" and arr.size:
            raise ValueError(f"{name} must be numbers, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    return arr


def check_finite_array(name: str, values, nonnegative: bool = False) -> np.ndarray:
    """Return ``values`` (one-dimensional, or a scalar) as a 1-D float64 array; reject NaN/inf (and negatives)."""
    arr = as_float_array(name, values)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    arr = arr.reshape(-1)
    bad = ~np.isfinite(arr)
    if nonnegative:
        bad |= arr < 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "finite and non-negative" if nonnegative else "finite"
        raise ValueError(f"{name}[{i}] = {arr[i]} must be {what}")
    return arr


_INT64_MAX = np.iinfo(np.int64).max


def as_index_array(name: str, indices) -> np.ndarray:
    """``indices`` as a 1-D contiguous int64 array (a scalar becomes length 1); no range check."""
    arr = np.asarray(indices)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and arr.size:  # dtype.kind: np.issubdtype costs 0.4 us a call
        raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and arr.size and arr.max() > _INT64_MAX:
        i = int(np.argmax(arr))
        raise ValueError(f"{name}[{i}] = {arr[i]} is out of range")
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_total(total: float) -> None:
    """A tree can be sampled only if its total mass is positive and finite."""
    if not 0.0 < total < np.inf:
        raise ValueError(
            f"cannot sample: total mass is {total} (empty, all zero, or overflowing; "
            "finite masses whose sum exceeds the float range cannot be sampled)"
        )


def check_indices(name: str, indices, capacity: int) -> np.ndarray:
    arr = as_index_array(name, indices)
    bad = (arr < 0) | (arr >= capacity)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {arr[i]} is out of range [0, {capacity})")
    return arr


def as_rng(seed) -> np.random.Generator:
    """A Generator from a seed, a SeedSequence or a Generator (used as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError):  # NumPy's own messages name neither the argument nor the value
        raise ValueError(f"seed must be a non-negative integer, a SeedSequence or a Generator, got {seed!r}") from None


def size_text(n: int) -> str:
    """Bytes as every message of the library writes them: in kB, MB or GB (powers of 1,000), the largest unit that
    keeps the figure at least 1 once rounded, to three significant figures at least ("0.87 MB" would read
    "870.0 kB", and 999,999 bytes "1.00 MB", not "1,000.0 kB")."""
    text = f"{n:,} bytes"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        value = n / scale
        if n < 1000 or round(value, 2) < 1:  # below 1 kB the bytes are exact
            break
        text = f"{value:,.2f} {unit}" if round(value, 2) < 10 else f"{value:,.1f} {unit}"
    return text


def available_bytes() -> int | None:
    """``MemAvailable`` of /proc/meminfo, or None where there is no such file."""
    try:
        with open(MEMINFO) as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        return None
    return None  # pragma: no cover
