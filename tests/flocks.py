"""Who holds, and who waits for, an ``flock`` on a file: read from Linux's ``/proc/locks``.

Tests use it to order two processes or threads at a lock by what the kernel says, not by sleeping."""

import os
from pathlib import Path


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
