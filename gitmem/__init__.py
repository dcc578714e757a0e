"""gitmem: a Git-native versioned memory store.

Memories are markdown files with YAML front-matter in a git repository; every write is one
commit with trailers saying who remembered what, and when. The public names are loaded on
first use (PEP 562), so ``import gitmem``, which every command and hook pays, loads only
the version.

    >>> import gitmem
    >>> store = gitmem.init("/tmp/memory")              # doctest: +SKIP
    >>> m = store.create("Use pytest fixtures", title="Testing style")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from gitmem._version import __version__

if TYPE_CHECKING:
    from gitmem.base.clock import Clock, FixedClock, SystemClock
    from gitmem.base.errors import (
        AlreadyExistsError,
        AmbiguousIdError,
        ConflictError,
        DirtyWorktreeError,
        GitmemError,
        InvalidIdError,
        InvalidInputError,
        InvalidMemoryError,
        LockTimeoutError,
        MissingDependencyError,
        NotFoundError,
        RegexTimeoutError,
        StoreError,
        TooLargeError,
    )
    from gitmem.format.model import (
        BUILTIN_CATEGORIES,
        Memory,
        Op,
        Related,
        Relationship,
        Scope,
        Status,
        Trigger,
    )
    from gitmem.format.versions import Chain
    from gitmem.store.core import Store
    from gitmem.store.results import History, LogEntry, Problem, Version
    from gitmem.store.transactions import Transaction

# Public name -> the submodule that defines it (imported the first time the name is used).
_LAZY: dict[str, str] = {
    "Clock": "base.clock",
    "FixedClock": "base.clock",
    "SystemClock": "base.clock",
    "AlreadyExistsError": "base.errors",
    "AmbiguousIdError": "base.errors",
    "ConflictError": "base.errors",
    "DirtyWorktreeError": "base.errors",
    "GitmemError": "base.errors",
    "InvalidIdError": "base.errors",
    "InvalidInputError": "base.errors",
    "InvalidMemoryError": "base.errors",
    "LockTimeoutError": "base.errors",
    "MissingDependencyError": "base.errors",
    "NotFoundError": "base.errors",
    "StoreError": "base.errors",
    "RegexTimeoutError": "base.errors",
    "TooLargeError": "base.errors",
    "BUILTIN_CATEGORIES": "format.model",
    "Memory": "format.model",
    "Op": "format.model",
    "Related": "format.model",
    "Relationship": "format.model",
    "Scope": "format.model",
    "Status": "format.model",
    "Trigger": "format.model",
    "History": "store.results",
    "LogEntry": "store.results",
    "Problem": "store.results",
    "Store": "store.core",
    "Transaction": "store.transactions",
    "Version": "store.results",
    "Chain": "format.versions",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def init(
    path: str | os.PathLike[str],
    *,
    bare: bool = False,
    scope: Scope | str = "repo",
    clock: Clock | None = None,
    durable: bool = False,
) -> Store:
    """Create a store at ``path`` and open it. ``bare=True`` makes a store without a work tree.

    ``scope`` is ``"repo"`` (the default) or ``"user"`` (a :class:`Scope` or its value)."""
    from gitmem.store.discovery import init_store

    return init_store(path, bare=bare, scope=scope, clock=clock, durable=durable)


def open(
    path: str | os.PathLike[str] | None = None,
    *,
    clock: Clock | None = None,
    durable: bool = False,
    branch: str | None = None,
) -> Store:
    """Open the store at ``path``, or find the default one; ``branch``: write to that branch
    (a proposal for review) instead of the one checked out."""
    from gitmem.store.discovery import open_store

    return open_store(path, clock=clock, durable=durable, branch=branch)


def init_project(
    project: str | os.PathLike[str], *, clock: Clock | None = None, follow_branches: bool = False
) -> Store:
    """Create the repo-scope store ``<project>/.gitmem/`` and exclude it from the project's
    git; ``follow_branches``: its memory follows the code's branches (gitmem.store.follow)."""
    from gitmem.store.discovery import init_project_store
    from gitmem.store.follow import set_follow

    store = init_project_store(project, clock=clock)
    if follow_branches:
        set_follow(store.db().repo, True)
    return store


__all__ = [
    "BUILTIN_CATEGORIES",
    "AlreadyExistsError",
    "AmbiguousIdError",
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
    "MissingDependencyError",
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
    "RegexTimeoutError",
    "TooLargeError",
    "Transaction",
    "Trigger",
    "Version",
    "__version__",
    "init",
    "init_project",
    "open",
]
