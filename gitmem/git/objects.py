"""Git objects as gitmem reads and writes them: snapshots of a tree, trees built bottom-up
(:func:`build_tree`) along the touched paths only, and the bounded blob read.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import errno
import shlex
import sys
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pygit2
from pygit2.enums import FileMode

from gitmem.base import logs
from gitmem.base.errors import (
    InvalidInputError,
    RepositoryDamagedError,
    StoreError,
    TooLargeError,
)
from gitmem.format.layout import history_paths, memory_path
from gitmem.git import localconfig

log = logs.get(__name__)


@dataclass(frozen=True)
class FastForward:
    """A plan's answer that moves the branch to ``target``, an existing descendant of the tip
    (``gitmem sync`` when only the remote moved); what it staged is the difference."""

    target: pygit2.Commit
    reason: str


Staged = bytes | pygit2.Oid | None
"""A staged change: the file's bytes, the id of its blob already written, or None (removed)."""


def staged_id(data: bytes | pygit2.Oid) -> pygit2.Oid:
    """The blob id of a staged file, without writing it."""
    return data if isinstance(data, pygit2.Oid) else pygit2.hash(data)


class Snapshot:
    """The tree of one commit plus the changes a plan has staged on top of it; with
    ``write_blobs``, :meth:`put` writes each blob at once and stages only its id."""

    def __init__(
        self, repo: pygit2.Repository, commit: pygit2.Commit | None, *, write_blobs: bool = False
    ) -> None:
        self.repo = repo
        self.commit = commit
        self.tree: pygit2.Tree | None = commit.tree if commit is not None else None
        self.write_blobs = write_blobs
        self.written = 0
        """Bytes of the blobs :meth:`put` wrote (``write_blobs``)."""
        self.changes: dict[str, Staged] = {}
        # casefold(path or folder) -> the spellings staged under it: built on the first
        # question (a bulk import never asks), then kept up to date by put and remove.
        self._spellings: dict[str, set[str]] = {}
        self._indexed = 0
        self._folder_folds: dict[str, dict[str, set[str]]] = {}

    def _index(self, path: str) -> None:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            self._spellings.setdefault(prefix.casefold(), set()).add(prefix)

    def committed_spellings(self, folder: str, name: str) -> set[str]:
        """Names in the committed ``folder`` ("" for the root) equal to ``name`` but for case."""
        folds = self._folder_folds.get(folder)
        if folds is None:
            entry = self._entry(folder) if folder else self.tree
            folds = {}
            if isinstance(entry, pygit2.Tree):
                for item in entry:
                    if item.name:
                        folds.setdefault(item.name.casefold(), set()).add(item.name)
            self._folder_folds[folder] = folds
        return folds.get(name.casefold(), set())

    def staged_spellings(self, path: str) -> set[str]:
        """Every staged path or folder that equals ``path`` but for letter case (itself
        included when staged). Entries of removed files may remain: callers confirm."""
        if self._indexed != len(self.changes):
            self._spellings.clear()
            for staged in self.changes:
                self._index(staged)
            self._indexed = len(self.changes)
        return self._spellings.get(path.casefold(), set())

    def _entry(self, path: str) -> pygit2.Object | None:
        return None if self.tree is None else tree_entry(self.tree, path)

    def blob_id(self, path: str) -> pygit2.Oid | None:
        """The committed blob id at ``path`` (staged changes ignored); None if absent."""
        entry = self._entry(path)
        if entry is None or entry.type_str != "blob":
            return None
        return entry.id

    def read(self, path: str) -> bytes | None:
        if path in self.changes:
            data = self.changes[path]
            return blob_data(self.repo, data) if isinstance(data, pygit2.Oid) else data
        entry = self._entry(path)
        if entry is None or entry.type_str != "blob" or entry.filemode == FileMode.LINK:
            # A symlink or a directory is never read as a memory: a link inside a
            # store could point anywhere on the disk of whoever reads it.
            return None
        return blob_data(self.repo, entry.id)

    def exists(self, path: str) -> bool:
        if path in self.changes:
            return self.changes[path] is not None
        return self._entry(path) is not None

    def locate(self, memory_id: str, *, past: bool = False) -> str | None:
        """The path of the memory ``memory_id`` as staged, None when it is not there; ``past``:
        also where format 4 put it, for a commit from before ``gitmem migrate``."""
        path = memory_path(memory_id)
        where = history_paths(path) if past else (path,)  # the current path first
        return next((p for p in where if self.exists(p)), None)

    def put(self, path: str, data: bytes | pygit2.Oid) -> None:
        """Stage ``data`` at ``path``: the file's bytes, or the id of a blob already stored."""
        if self.write_blobs and not isinstance(data, pygit2.Oid):
            self.written += len(data)
            data = create_blob(self.repo, data)
        self._stage(path, data)

    def remove(self, path: str) -> None:
        self._stage(path, None)

    def _stage(self, path: str, data: Staged) -> None:
        new = path not in self.changes
        self.changes[path] = data
        if new and 0 < self._indexed == len(self.changes) - 1:
            self._index(path)
            self._indexed += 1

    def iter_files(self, prefix: str) -> Iterator[str]:
        """Paths of every regular file under the directory ``prefix`` (committed and staged)."""
        seen: set[str] = set()
        entry = self._entry(prefix) if prefix else self.tree
        if entry is not None and entry.type_str == "tree":
            for path in _walk_tree(self.repo, get_tree(self.repo, entry.id), prefix):
                seen.add(path)
                if self.changes.get(path, b"") is not None:
                    yield path
        for path, data in self.changes.items():
            if data is not None and path not in seen and path.startswith(prefix + "/"):
                yield path


# pygit2 (1.21) keeps a reference to every name ``tree[path]`` and ``TreeBuilder.remove``
# are given, so each path looked up stays alive for good; the lookups below give it back
# where a probe of that very call saw exactly one leak.

_DECREF: Any = ctypes.pythonapi.Py_DecRef
_DECREF.argtypes = [ctypes.py_object]
_DECREF.restype = None
_LEAKS: dict[str, bool] = {}


def _leaks(kind: str, call: Callable[[str], object]) -> bool:
    """Whether ``call(name)`` keeps one reference to ``name`` (probed once per ``kind``)."""
    if kind not in _LEAKS:
        probe = "".join(("gitmem-probe-", kind))  # a fresh string nobody else holds
        before = sys.getrefcount(probe)
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            call(probe)
        _LEAKS[kind] = sys.getrefcount(probe) - before == 1
        if _LEAKS[kind]:
            _DECREF(probe)
    return _LEAKS[kind]


def tree_entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    """The entry at ``path`` (``a/b/c`` walks sub-trees), None when there is none. Every
    lookup of a tree by name goes through here (see above)."""
    leaks = _leaks("tree", tree.__getitem__)
    try:
        return tree[path]
    except KeyError:
        return None
    finally:
        if leaks:
            _DECREF(path)


def builder_remove(repo: pygit2.Repository, builder: pygit2.TreeBuilder, name: str) -> None:
    """``builder.remove(name)``, giving back the reference pygit2 keeps (see above)."""
    # Probed on an empty builder: removing the probe changes nothing.
    leaks = _leaks("remove", lambda probe: repo.TreeBuilder().remove(probe))
    try:
        builder.remove(name)
    finally:
        if leaks:
            _DECREF(name)


@contextlib.contextmanager
def _reading(repo: pygit2.Repository, oid: pygit2.Oid | str, what: str) -> Iterator[None]:
    """A missing or unreadable object as RepositoryDamagedError."""
    try:
        yield
    except (KeyError, pygit2.GitError) as exc:
        problem = (
            f"is missing from the repository {repo.path}"
            if isinstance(exc, KeyError)
            else f"in {repo.path} cannot be read ({exc})"
        )
        raise RepositoryDamagedError(
            f"the {what} {oid} {problem}", hint=damaged_hint(repo.path)
        ) from None


def damaged_hint(gitdir: str) -> str:
    """The recovery hint of a damaged repository, naming it."""
    return RepositoryDamagedError.default_hint.replace("STORE", shlex.quote(gitdir.rstrip("/")))


def get_commit(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Commit:
    with _reading(repo, oid, "commit"):
        obj = repo[oid]
    if obj.type_str != "commit":
        raise StoreError(f"{oid} is a {obj.type_str}, not a commit")
    return cast(pygit2.Commit, obj)


def get_tree(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Tree:
    with _reading(repo, oid, "tree"):
        obj = repo[oid]
    if not isinstance(obj, pygit2.Tree):
        raise StoreError(f"{oid} is a {obj.type_str}, not a tree")
    return obj


OVER_READ_LIMIT = "over the read limit"
"""Words of the error :func:`blob_data` raises for a file over :func:`read_limit`."""
_READ_LIMITS: weakref.WeakKeyDictionary[pygit2.Repository, int] = weakref.WeakKeyDictionary()
_WARNED: set[pygit2.Oid] = set()


def read_limit(repo: pygit2.Repository) -> int:
    """The largest file :func:`blob_data` reads from ``repo`` (looked up once per handle)."""
    limit = _READ_LIMITS.get(repo)
    if limit is None:
        limit = _READ_LIMITS[repo] = localconfig.read_limit(repo.path)
    return limit


def readable(repo: pygit2.Repository, oid: pygit2.Oid) -> bool:
    """Whether :func:`blob_data` reads the blob ``oid`` (it is no larger than the bound)."""
    try:
        return int(repo.odb.read_header(oid)[1]) <= read_limit(repo)
    except (KeyError, pygit2.GitError):
        return False


def blob_data(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes:
    """The bytes of the blob ``oid``, every file gitmem reads from git: one over
    :func:`read_limit` (by its header) is never inflated but TooLargeError, warned once."""
    with _reading(repo, oid, "file (blob)"):
        kind, size = repo.odb.read_header(oid)
    if kind != pygit2.enums.ObjectType.BLOB:
        raise StoreError(f"{oid} is a {kind.name.lower()}, not a blob")
    limit = read_limit(repo)
    if size > limit:
        if oid not in _WARNED:
            _WARNED.add(oid)
            log.warning(
                "skipped the file (blob) %s: %d bytes, over the read limit of %d "
                "(`gitmem doctor` names it, `gitmem purge ID` removes it)",
                oid,
                size,
                limit,
            )
        raise TooLargeError(
            f"the file (blob) {oid} is {size} bytes, {OVER_READ_LIMIT} of {limit}",
            hint="`gitmem doctor` names its path; `gitmem purge ID` removes it from history",
        )
    with _reading(repo, oid, "file (blob)"):  # the header read, the content may not inflate
        return cast(pygit2.Blob, repo[oid]).data


def _walk_tree(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str) -> Iterator[str]:
    for entry in tree:
        path = f"{prefix}/{entry.name}" if prefix else str(entry.name)
        if entry.type_str == "tree":
            yield from _walk_tree(repo, get_tree(repo, entry.id), path)
        elif entry.type_str == "blob" and entry.filemode != FileMode.LINK:
            yield path


def build_tree(
    repo: pygit2.Repository, base: pygit2.Tree | None, changes: Mapping[str, Staged]
) -> pygit2.Oid:
    """Write the tree of ``base`` with ``changes`` (:data:`Staged`) applied, rebuilding only
    the touched subtrees: the cost follows the change, never the size of the store."""
    result = _apply(repo, base, _nest(changes))
    return result if result is not None else write_object(repo.TreeBuilder().write)


def _nest(changes: Mapping[str, Staged]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, data in changes.items():
        parts = path.split("/")
        node = nested
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InvalidInputError(f"path {path!r} runs through a file")
            node = child
        node[parts[-1]] = data
    return nested


def _apply(
    repo: pygit2.Repository, tree: pygit2.Tree | None, node: dict[str, Any]
) -> pygit2.Oid | None:
    """The tree ``tree`` with the nested changes ``node`` applied (None: it ends up empty)."""
    builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
    for name, sub in node.items():
        existing = tree_entry(tree, name) if tree is not None else None
        if isinstance(sub, dict):
            subtree = (
                get_tree(repo, existing.id)
                if existing is not None and existing.type_str == "tree"
                else None
            )
            if existing is not None and subtree is None:
                raise InvalidInputError(f"{name!r} is a file where a directory is needed")
            oid, mode = _apply(repo, subtree, sub), FileMode.TREE
        else:
            oid = sub if sub is None or isinstance(sub, pygit2.Oid) else create_blob(repo, sub)
            mode = FileMode.BLOB
        if oid is not None:
            builder.insert(name, oid, mode)
        elif existing is not None:
            builder_remove(repo, builder, name)
    written: pygit2.Oid | None = write_object(builder.write) if len(builder) else None
    return written


VANISHED_DIR_RETRIES = 5


def write_object(write: Callable[[], pygit2.Oid]) -> pygit2.Oid:
    """Run one libgit2 object write, again if a repack removed its empty ``objects/xx/``
    between libgit2's ``mkdir`` and rename (git's writers retry this race too)."""
    for attempt in range(VANISHED_DIR_RETRIES):
        try:
            return write()
        except OSError as exc:
            # pygit2's OSError carries libgit2's message but no errno.
            text = str(exc)
            if attempt + 1 < VANISHED_DIR_RETRIES and (
                exc.errno == errno.ENOENT or "No such file or directory" in text
            ):
                log.debug("object directory vanished during a write (%s); writing again", exc)
                continue
            # A write the file system refused (a read-only store, another user's) gets its
            # errno back, so callers can tell it from a failure.
            for code, phrase in (
                (errno.EROFS, "Read-only file system"),
                (errno.EACCES, "Permission denied"),
            ):
                if exc.errno is None and phrase in text:
                    raise OSError(code, text) from exc
            raise
    raise AssertionError("unreachable")  # the loop returns or raises


def create_blob(repo: pygit2.Repository, data: bytes) -> pygit2.Oid:
    """``repo.create_blob`` through :func:`write_object`."""
    return write_object(lambda: repo.create_blob(data))


def author_time(commit: pygit2.Commit) -> dt.datetime:
    return dt.datetime.fromtimestamp(commit.author.time, dt.UTC)


def differs(snap: Snapshot, path: str, data: Staged) -> bool:
    return snap.blob_id(path) != (None if data is None else staged_id(data))
