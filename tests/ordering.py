"""Ordering two processes or threads in a test by what they have done, not by sleeping.

:func:`wait_for` polls a condition until it holds; :func:`flocks` says who holds, and who waits for, an
``flock`` on a file, from Linux's ``/proc/locks``."""

import time
from pathlib import Path

from prioritylab.deep.run import flocks as run_flocks


def wait_for(condition, timeout: float = 60, what: str = "", while_=None) -> None:
    """Return once ``condition()`` holds; ``AssertionError`` naming ``what`` after ``timeout`` seconds, or as
    soon as ``while_()`` (when given: what must stay true meanwhile) is false."""
    end = time.monotonic() + timeout
    while not condition():
        if while_ is not None and not while_():
            raise AssertionError(f"stopped waiting for {what}: what had to hold meanwhile no longer does")
        if time.monotonic() >= end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def flocks(path: Path) -> list[tuple[int, bool]]:
    """``(pid, waiting)`` for each ``flock`` on ``path``'s file: held (``waiting`` False) or blocked on it; read
    from ``/proc/locks`` by the run lock's own reader, :func:`prioritylab.deep.run.flocks`."""
    return run_flocks(path)
