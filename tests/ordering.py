"""Ordering two processes or threads in a test by what they have done, not by sleeping.

:func:`wait_for` polls a condition until it holds; :func:`flocks` says who holds, and who waits for, an
``flock`` on a file, from Linux's ``/proc/locks``."""

import os
import time
from pathlib import Path


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
    """``(pid, waiting)`` for each ``flock`` on ``path``'s file: held (``waiting`` False) or blocked on it.

    A line of ``/proc/locks`` reads ``1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF``; a
    process blocked on that lock has a line with ``->`` after the number."""
    inode = os.stat(path).st_ino
    found = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        waiting = len(fields) > 1 and fields[1] == "->"
        fields = [fields[0], *fields[2:]] if waiting else fields
        if len(fields) > 5 and fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
            found.append((int(fields[4]), waiting))
    return found
