"""Locks and the liveness of the processes that hold them.

gitmem serializes writers with ``flock`` (the kernel releases it when a process dies,
so it is never stale) and reads git's own ``.lock`` files, which a killed process leaves
behind: a lock whose owner is gone may be cleared.
"""

from __future__ import annotations

import errno
import fcntl
import os


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def try_flock(fd: int) -> bool:
    """Take an exclusive ``flock`` on ``fd`` without waiting; False if someone holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True
