"""A memory's ``version`` and ``updated_at``: derived from history, never stored in its file.

A commit is a *version* of a memory when its file differs from the (non-merge) parent's, or
is absent from every parent of a merge, and it is no ``gitmem migrate``; ``version`` counts
those reachable (at least 1), ``updated_at`` is the newest's author time (docs/format.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pygit2
from pygit2.enums import SortMode

from gitmem.base.errors import TooLargeError
from gitmem.base.trailers import OP_TRAILER, parse_trailers
from gitmem.format import memfile
from gitmem.format.layout import MEMORY_ROOTS, history_paths, id_from_path
from gitmem.format.model import Memory
from gitmem.git.diff import memory_blob
from gitmem.git.objects import Snapshot
from gitmem.store.commit_changes import changed_memory_files, is_migration, makes_version


@dataclass(frozen=True)
class Versions:
    """The versions of one memory reachable from one commit."""

    count: int = 0
    newest: int | None = None
    """Author time (seconds since the epoch) of the newest version, None without one."""

    def apply(self, memory: Memory) -> Memory:
        """``memory`` (as decoded from its file) with its derived ``version`` and
        ``updated_at``."""
        updated = memory.created_at
        if self.newest is not None:
            updated = dt.datetime.fromtimestamp(self.newest, dt.UTC)
        return replace(memory, version=max(self.count, 1), updated_at=updated)

    def plus(self, time: int) -> Versions:
        """These versions and one more, made at ``time``."""
        return Versions(self.count + 1, max(time, self.newest if self.newest is not None else time))

    def __add__(self, other: Versions) -> Versions:
        newest = [t for t in (self.newest, other.newest) if t is not None]
        return Versions(self.count + other.count, max(newest) if newest else None)


def walk(
    repo: pygit2.Repository,
    commit: pygit2.Commit | None,
    paths: Iterable[str],
    *,
    hide: pygit2.Oid | None = None,
    limit: int | None = None,
) -> dict[str, Versions] | None:
    """The versions of the memory at each of ``paths`` reachable from ``commit`` (and not
    from ``hide``): one walk for all of them. A plain id is followed to where format 4 put
    it in commits from before the migration. None when ``limit`` commits were not enough."""
    wanted = list(dict.fromkeys(paths))
    out = {path: Versions() for path in wanted}
    if commit is None or not wanted:
        return out
    walker = repo.walk(commit.id, SortMode.NONE)
    if hide is not None:
        walker.hide(hide)
    key_of = {twin: path for path in wanted for twin in history_paths(path)}
    few = len(wanted) <= 8
    for count, each in enumerate(walker, 1):
        if limit is not None and count > limit:
            return None
        if hide is not None and repo.descendant_of(hide, each.id):
            continue  # the walk stops by commit time: behind a slow clock it yields these
        parents = each.parents
        tree = each.tree
        if few:  # a few lookups per commit beat a tree diff
            candidates: Iterable[str] = wanted
        else:  # the diff skips unchanged subtrees: the cost follows the commit's change
            first = parents[0].tree if parents else None
            candidates = dict.fromkeys(
                key_of[p] for p, _ in changed_memory_files(repo, first, tree) if p in key_of
            )
        hits = [
            path
            for path in candidates
            if makes_version(memory_blob(tree, path), [memory_blob(p.tree, path) for p in parents])
        ]
        if hits and not is_migration(v for _, v in parse_trailers(each.message, (OP_TRAILER,))):
            for path in hits:
                out[path] = out[path].plus(each.author.time)
    return out


def as_read(
    repo: pygit2.Repository, commit: pygit2.Commit | None, memories: Mapping[str, Memory | None]
) -> dict[str, Memory | None]:
    """Memories of ``commit``'s files (by path) with their derived ``version`` and
    ``updated_at`` (one walk for all of them): for tools that read the files of a commit
    (review, diff, doctor) rather than going through a Store."""
    wanted = [path for path, memory in memories.items() if memory is not None]
    found = walk(repo, commit, wanted)
    assert found is not None  # no limit
    return {
        path: found[path].apply(memory) if memory is not None else None
        for path, memory in memories.items()
    }


def memory_files(snap: Snapshot) -> dict[str, bytes]:
    """Every memory file of ``snap`` (path -> bytes), but those over the read bound
    (skipped with a warning: :func:`gitmem.git.objects.blob_data`)."""
    files: dict[str, bytes] = {}
    for root in MEMORY_ROOTS:
        for path in snap.iter_files(root):
            if id_from_path(path) is None:
                continue
            try:
                data = snap.read(path)
            except TooLargeError:
                continue
            if data is not None:
                files[path] = data
    return files


def rendered_files(
    repo: pygit2.Repository, commit: pygit2.Commit | None, files: Mapping[str, bytes]
) -> dict[str, bytes]:
    """``files`` of ``commit`` (path -> bytes) with their derived ``updated_at`` and
    ``version`` written in (:func:`gitmem.format.memfile.rendered_text`), so an exported file
    says its version wherever it goes; a file that does not read as a memory is as it is."""
    stored = {path: memfile.read(data, path)[0] for path, data in files.items()}
    read = as_read(repo, commit, stored)
    out = dict(files)
    for path, memory in read.items():
        if memory is not None:
            out[path] = memfile.rendered_text(memory).encode("utf-8")
    return out


def read_memory(snap: Snapshot, path: str) -> bytes | None:
    """The file of the memory at ``path`` in ``snap``, in history from before ``gitmem
    migrate`` too."""
    return next((d for p in history_paths(path) if (d := snap.read(p)) is not None), None)


def read_at(snap: Snapshot, path: str) -> tuple[Memory | None, str | None]:
    """:func:`memfile.read` of the memory at ``path``; a file over the read bound gives its
    reason, like any file that is not a memory."""
    try:
        return memfile.read(read_memory(snap, path), path)
    except TooLargeError as exc:
        return None, f"{path}: {exc}"


def bytes_at(snap: Snapshot, path: str) -> bytes | None:
    """:func:`read_memory`, a file over the read bound as no bytes: there, not read (its
    problem is :func:`read_at`'s reason)."""
    try:
        return read_memory(snap, path)
    except TooLargeError:
        return b""
