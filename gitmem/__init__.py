"""gitmem: a Git-native versioned memory store.

Memories are markdown files with YAML front-matter in a git repository; every
write is one commit with trailers saying who remembered what, and when.

    >>> import gitmem
    >>> store = gitmem.init("/tmp/memory")              # doctest: +SKIP
    >>> m = store.create("Use pytest fixtures", title="Testing style")  # doctest: +SKIP
    >>> store.history(m.id)                             # doctest: +SKIP
"""

from __future__ import annotations

import os

from ._version import __version__
from .clock import Clock, FixedClock, SystemClock
from .errors import (
    AlreadyExistsError,
    ConflictError,
    DirtyWorktreeError,
    GitmemError,
    InvalidIdError,
    InvalidInputError,
    InvalidMemoryError,
    LockTimeoutError,
    NotFoundError,
    StoreError,
    TooLargeError,
)
from .model import (
    BUILTIN_CATEGORIES,
    Memory,
    Op,
    Related,
    Relationship,
    Scope,
    Status,
    Trigger,
)
from .store import History, LogEntry, Problem, Store, Transaction, Version
from .store import init_project_store as _init_project_store
from .store import init_store as _init_store
from .store import open_store as _open_store
from .versions import Chain


def init(
    path: str | os.PathLike[str],
    *,
    bare: bool = False,
    scope: Scope | str = Scope.REPO,
    clock: Clock | None = None,
    durable: bool = False,
) -> Store:
    """Create a store at ``path`` and open it. ``bare=True`` makes a store without a work tree."""
    return _init_store(path, bare=bare, scope=scope, clock=clock, durable=durable)


def open(
    path: str | os.PathLike[str] | None = None,
    *,
    clock: Clock | None = None,
    durable: bool = False,
) -> Store:
    """Open the store at ``path``, or find the default one (see :func:`gitmem.store.open_store`)."""
    return _open_store(path, clock=clock, durable=durable)


def init_project(project: str | os.PathLike[str], *, clock: Clock | None = None) -> Store:
    """Create the repo-scope store ``<project>/.gitmem/`` and exclude it from the project's git."""
    return _init_project_store(project, clock=clock)


__all__ = [
    "BUILTIN_CATEGORIES",
    "AlreadyExistsError",
    "Chain",
    "Clock",
    "ConflictError",
    "DirtyWorktreeError",
    "FixedClock",
    "GitmemError",
    "History",
    "InvalidIdError",
    "InvalidInputError",
    "InvalidMemoryError",
    "LockTimeoutError",
    "LogEntry",
    "Memory",
    "NotFoundError",
    "Op",
    "Problem",
    "Related",
    "Relationship",
    "Scope",
    "Status",
    "Store",
    "StoreError",
    "SystemClock",
    "TooLargeError",
    "Transaction",
    "Trigger",
    "Version",
    "__version__",
    "init",
    "init_project",
    "open",
]
