"""Locks and the liveness of the processes that hold them: gitmem's writers take ``flock``
(never stale); git's own ``.lock`` files, which a killed process leaves, may be cleared.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import time
from pathlib import Path

from gitmem.base import logs

log = logs.get(__name__)

STALE_LOCK_AGE = 30.0
"""Seconds after which a git ``.lock`` file is taken to be a dead process's (git: ms)."""

TEMP_FILE = re.compile(r"^\..+\.(\d+)\.tmp$")
"""``.<name>.<pid>.tmp``: a file gitmem is writing, naming its process if left behind."""


def temp_path(path: Path) -> Path:
    """Where this process writes ``path`` before renaming it into place (:data:`TEMP_FILE`)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is alive (this one is; another user's counts as alive)."""
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


def clear_stale_lock(lock: Path, max_age: float) -> None:
    """Remove git's ``lock`` file when older than ``max_age`` seconds: its writer died."""
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > max_age:
        log.warning("removing stale lock %s (left %.0f s ago by a process that died)", lock, age)
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
