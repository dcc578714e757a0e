"""gitmem: a Git-native versioned memory store: markdown memories in a git repository, one
commit per write. The public names load on first use (PEP 562), so ``import gitmem``, which
every command and hook pays, loads only the version."""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from gitmem._version import __version__

if TYPE_CHECKING:
    # `X as X`: re-exported names, for type checkers
    from gitmem.base.clock import Clock
    from gitmem.base.clock import FixedClock as FixedClock
    from gitmem.base.clock import SystemClock as SystemClock
    from gitmem.base.errors import AlreadyExistsError as AlreadyExistsError
    from gitmem.base.errors import AmbiguousIdError as AmbiguousIdError
    from gitmem.base.errors import ConflictError as ConflictError
    from gitmem.base.errors import DirtyWorktreeError as DirtyWorktreeError
    from gitmem.base.errors import GitmemError as GitmemError
    from gitmem.base.errors import InvalidIdError as InvalidIdError
    from gitmem.base.errors import InvalidInputError as InvalidInputError
    from gitmem.base.errors import InvalidMemoryError as InvalidMemoryError
    from gitmem.base.errors import LockTimeoutError as LockTimeoutError
    from gitmem.base.errors import MissingDependencyError as MissingDependencyError
    from gitmem.base.errors import NotFoundError as NotFoundError
    from gitmem.base.errors import RegexTimeoutError as RegexTimeoutError
    from gitmem.base.errors import StoreError as StoreError
    from gitmem.base.errors import TooLargeError as TooLargeError
    from gitmem.format.model import Memory as Memory
    from gitmem.format.model import Related as Related
    from gitmem.format.model import Relationship as Relationship
    from gitmem.format.model import Scope as Scope
    from gitmem.format.model import Status as Status
    from gitmem.format.model import Trigger as Trigger
    from gitmem.store.core import Store as Store

# Public name -> the submodule that defines it (imported the first time the name is used).
_LAZY: dict[str, str] = {
    name: module
    for module, names in {
        "base.clock": "FixedClock SystemClock",
        "base.errors": "AlreadyExistsError AmbiguousIdError ConflictError DirtyWorktreeError "
        "GitmemError InvalidIdError InvalidInputError InvalidMemoryError LockTimeoutError "
        "MissingDependencyError NotFoundError RegexTimeoutError StoreError TooLargeError",
        "format.model": "Memory Related Relationship Scope Status Trigger",
        "store.core": "Store",
    }.items()
    for name in names.split()
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


__all__ = [*_LAZY, "__version__", "init", "init_project", "open"]
