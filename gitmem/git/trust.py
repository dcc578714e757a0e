"""Which stores the user trusts (their git config may make git run programs): the list
``trusted_stores`` of the user's own configuration (``"*"``: all), filled by ``gitmem init``
and ``gitmem trust``. Another user's store is read when named, written only when trusted.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitmem.base.errors import InvalidInputError, StoreError
from gitmem.git import localconfig

if TYPE_CHECKING:
    import pygit2


SECTION = "trusted_stores"
ALL = "*"


def git_dir_of(path: str | os.PathLike[str]) -> Path:
    """The git directory of the store at ``path``: ``<path>/.git``, or ``path`` when bare."""
    target = Path(path).expanduser().resolve()
    dot_git = target / ".git"
    return dot_git if dot_git.is_dir() else target


def _entries(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(
            f"{localconfig.config_path()}: {SECTION} must be a list of store paths"
        )
    return list(value)


def trusted() -> list[str]:
    """The trusted git directories as recorded (``"*"`` trusts every store)."""
    return _entries(localconfig.load_cached().section(SECTION))


def is_trusted(path: str | os.PathLike[str]) -> bool:
    """Whether the store (or git directory) at ``path`` is trusted."""
    entries = trusted()
    return bool(entries) and (ALL in entries or str(git_dir_of(path)) in entries)


def is_trusted_repository_at(cwd: str | os.PathLike[str]) -> bool:
    """Whether the repository git finds from ``cwd`` is trusted (False when there is none)."""
    import pygit2

    try:
        found = pygit2.discover_repository(os.fspath(cwd))
    except (pygit2.GitError, OSError):
        return False
    return found is not None and is_trusted(found)


def trust(path: str | os.PathLike[str]) -> Path:
    """Trust the store at ``path`` from now on; returns its git directory."""
    gitdir = git_dir_of(path)
    if not ((gitdir / "HEAD").is_file() and (gitdir / "objects").is_dir()):
        raise StoreError(f"no git repository at {Path(path).expanduser()}")

    def change(data: dict[str, Any]) -> None:
        entries = _entries(data.get(SECTION))
        # Stores deleted since they were recorded (temporary stores, tests) are dropped,
        # so the list does not grow without end.
        kept = [e for e in entries if e == ALL or Path(e).is_dir()]
        if str(gitdir) not in kept:
            kept.append(str(gitdir))
        data[SECTION] = kept

    localconfig.update(change)
    return gitdir


def untrust(path: str | os.PathLike[str]) -> bool:
    """Stop trusting the store at ``path``; False when it was not on the list."""
    gitdir = str(git_dir_of(path))
    removed: list[bool] = []

    def change(data: dict[str, Any]) -> None:
        entries = _entries(data.get(SECTION))
        kept = [e for e in entries if e != gitdir and e != str(path)]
        removed.append(len(kept) != len(entries))
        data[SECTION] = kept

    localconfig.update(change)
    return removed[0]


_named: set[str] = set()
"""Git directories of the stores the user named in this process."""
_owner_check = threading.Lock()


def name(path: str | os.PathLike[str]) -> None:
    """Note that the user named the store at ``path`` (``--store``, ``$GITMEM_DIR``,
    ``gitmem.open``), not found it by walking up: another user's is then read."""
    _named.add(str(git_dir_of(path)))


def _owner_is_another(gitdir: Path) -> bool:
    try:
        owners = {gitdir.stat().st_uid}
        if gitdir.name == ".git":
            owners.add(gitdir.parent.stat().st_uid)
    except OSError:
        return False
    return owners != {os.geteuid()}


def foreign_access(path: str | os.PathLike[str]) -> Literal["write", "read"] | None:
    """What this process may do with the store at ``path`` when another user owns it:
    ``"write"`` once trusted, ``"read"`` when named, else nothing (None)."""
    gitdir = git_dir_of(path)
    if is_trusted(gitdir):
        return "write"
    return "read" if str(gitdir) in _named else None


def open_repository(
    path: str | os.PathLike[str], *, relaxed: bool = False
) -> tuple[pygit2.Repository, bool]:
    """libgit2's repository at ``path`` (no search) and whether its process-wide owner check
    was relaxed, under a lock, for a store :func:`foreign_access` allows (else StoreError)."""
    import pygit2

    flags = pygit2.enums.RepositoryOpenFlag.NO_SEARCH
    if not relaxed:
        try:
            return pygit2.Repository(os.fspath(path), flags), False
        except pygit2.GitError as exc:
            if "not owned by current user" not in str(exc):
                raise
        if foreign_access(path) is None:
            raise StoreError(
                f"{path} belongs to another user: gitmem opens another user's store only "
                "when you name it or trust it",
                hint=f"read it with --store {path}, or trust it: gitmem trust {path}",
            ) from None
    settings: Any = pygit2.settings
    with _owner_check:
        before = settings.owner_validation
        settings.owner_validation = False
        try:
            return pygit2.Repository(os.fspath(path), flags), True
        finally:
            settings.owner_validation = before


def safe_directories(gitdir: str | os.PathLike[str] | None) -> list[str]:
    """The ``safe.directory`` values, for git's command line, that let git work on another
    user's store at ``gitdir`` when :func:`foreign_access` allows it."""
    if gitdir is None:
        return []
    path = git_dir_of(gitdir)
    if not _owner_is_another(path) or foreign_access(path) is None:
        return []
    return [str(path), str(path.parent)] if path.name == ".git" else [str(path)]
