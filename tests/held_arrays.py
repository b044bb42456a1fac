"""What an object holds, counted from its attributes: the reference for the samplers' ``memory_bytes()``."""

import numpy as np


def held_array_bytes(obj) -> int:
    """``nbytes`` of every distinct NumPy array ``obj`` holds: its attributes, arrays in its lists and tuples,
    and those of the library objects it holds (its sum tree), each array counted once."""
    seen: dict[int, int] = {}

    def visit(value, depth: int) -> None:
        if isinstance(value, np.ndarray):
            if isinstance(value.base, np.ndarray) and value.base.dtype.names:  # a field of a record array
                value = value.base
            seen[id(value)] = value.nbytes
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item, depth)
        elif depth == 0 and type(value).__module__.startswith("prioritylab.") and hasattr(value, "__dict__"):
            for item in vars(value).values():
                visit(item, depth + 1)

    for value in vars(obj).values():
        visit(value, 0)
    return sum(seen.values())
