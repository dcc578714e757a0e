"""A Store's reads (one memory, the listing, documents, problems, ids, the log), served by the
index where it can answer, else by git's tree (:mod:`gitmem.store.reader`)."""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import functools
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import replace

import pygit2

from gitmem.base import logs
from gitmem.base.clock import format_timestamp
from gitmem.base.errors import GitmemError, InvalidIdError, InvalidInputError, NotFoundError
from gitmem.base.paths import index_name
from gitmem.format.layout import (
    DOCUMENT_ROOTS,
    FORK_MARK,
    check_id,
    forks_past,
    id_from_path,
    id_prefix,
    is_path_id,
    memory_path,
    one_by_prefix,
)
from gitmem.format.model import Memory, Op, Scope, Status, validity_text
from gitmem.git.db import GitDB
from gitmem.git.diff import blob_at
from gitmem.git.objects import Snapshot, staged_id

# The vector rows register when their module is imported: importing it here keeps them
# current wherever the index is caught up (a provider that missed commits is refilled).
from gitmem.store import memory_versions, vectors  # noqa: F401  (registration)
from gitmem.store.auditlog import read_log, removed_ids
from gitmem.store.index import Index
from gitmem.store.index_catchup import Progress
from gitmem.store.index_rows import IndexStats, valid_micros
from gitmem.store.inputs import tag_tuple, valid_time
from gitmem.store.reader import Reader, TreeReader
from gitmem.store.results import LogEntry, Problem
from gitmem.store.transactions import At, Backend, Transactions

log = logs.get(__name__)

NOT_FOUND_HINT = "gitmem ls --all lists current memories; gitmem log --op delete shows deleted ones"


INDEX_STEPS = 64
"""Commits past the one the index reflects that a read or write counts versions in itself,
walking them, before it catches the index up instead: a writer that never reads walks a
few commits per write, not the whole history."""


KNOWN_VERSIONS = 4096
"""Entries of :attr:`Store._known` kept before it is emptied."""


class Reads(Transactions):
    """The reads of a Store, over its layer of repositories and transactions."""

    def _index(self, backend: Backend, at: At = None) -> Index | None:
        """The backend's index, or None where it cannot answer (a past ``at``, a
        transaction's staged writes, or the index switched off)."""
        if not self.use_index or at is not None:
            return None
        tx = self._active_tx()
        if tx is not None and tx.backend is backend:
            return None
        if backend.index is None and not index_writable(backend.db):
            # A read-only store (a read-only mount, another user's files): the index cannot
            # be built or caught up there, so reads scan git instead of failing.
            return None
        return self.index(backend.scope)

    def reader(self, scope: Scope | str | None = None, *, at: At = None) -> Reader:
        """The reads of one scope's repository (:class:`gitmem.store.reader.Reader`), served
        by the index where it can answer, else by git's tree at ``at``."""
        return self._reader(self._backend(scope), at)

    def _reader(self, backend: Backend, at: At = None) -> Reader:
        """How this read is served: by the index where it can answer (see :meth:`_index`),
        else by git's tree at ``at`` (inside a transaction: as staged)."""
        index = self._index(backend, at)
        if index is not None:
            return index

        snap = self._snapshot(backend, at)
        derive = functools.partial(self._derive, backend, snap)
        decode = functools.partial(self._decode, backend)
        return TreeReader(backend.db, snap, decode, backend.scope, derive)

    def index(self, scope: Scope | str | None = None) -> Index:
        """The derived index of one scope (opened, not yet caught up)."""
        backend = self._backend(scope)
        if backend.index is None:
            decode = functools.partial(self._decode, backend)
            backend.index = Index(backend.db, decode, backend.scope)
        return backend.index

    def reindex(
        self, *, scope: Scope | str | None = None, progress: Progress | None = None
    ) -> builtins.list[IndexStats]:
        """Rebuild the index from git (``gitmem reindex``); returns what each scope holds."""
        return [self.index(b.scope).rebuild(progress) for b in self._ordered(scope)]

    def _load(
        self, backend: Backend, snap: Snapshot, memory_id: str, *, past: bool = False
    ) -> Memory | None:
        """The memory as ``snap`` shows it, with its derived version and updated_at.
        ``past``: ``snap`` is a commit of history, which may be from before ``gitmem
        migrate`` (Snapshot.locate)."""
        path = snap.locate(memory_id, past=past)
        data = snap.read(path) if path is not None else None
        if path is None or data is None:
            return None
        return self._derive(backend, snap, [self._decode(backend, data, path)])[0]

    def _derive(
        self, backend: Backend, snap: Snapshot, memories: builtins.list[Memory]
    ) -> builtins.list[Memory]:
        """Memories as decoded from ``snap``'s files -> as read: version and updated_at from
        the versions in history, plus one for a change staged in ``snap`` (a plan's or a
        transaction's: one commit, one version)."""
        if not memories:
            return memories
        base = snap.commit
        paths = [memory_path(m.id) for m in memories]
        found = self._versions_at(backend, base, paths)
        out: builtins.list[Memory] = []
        for memory, path in zip(memories, paths, strict=True):
            versions = found[path]
            staged = snap.changes.get(path)
            if staged is not None:
                committed = blob_at(base.tree, path) if base is not None else None
                if staged_id(staged) != committed:
                    versions = versions.plus(int(self.clock.now().timestamp()))
            out.append(versions.apply(memory))
        return out

    def _versions_at(
        self, backend: Backend, commit: pygit2.Commit | None, paths: Sequence[str]
    ) -> dict[str, memory_versions.Versions]:
        """The versions of the memories at ``paths`` as of ``commit``: from the index when it
        reflects that commit or one a few commits before it (counting those few), else
        from one walk of the history."""
        if commit is None:
            return {path: memory_versions.Versions() for path in paths}
        key = str(commit.id)
        known = {p: self._known[(key, p)] for p in paths if (key, p) in self._known}
        wanted = [p for p in dict.fromkeys(paths) if p not in known]
        if wanted:
            found = self._indexed_versions(backend, commit, wanted)
            if found is None:
                found = memory_versions.walk(backend.db.repo, commit, wanted)
                assert found is not None  # no limit
            if len(self._known) + len(found) > KNOWN_VERSIONS:
                self._known.clear()
            for path, versions in found.items():
                self._known[(key, path)] = versions
            known.update(found)
        return known

    def _indexed_versions(
        self, backend: Backend, commit: pygit2.Commit, paths: Sequence[str]
    ) -> dict[str, memory_versions.Versions] | None:
        """:meth:`_versions_at` from the index, None where it cannot say: no index, or one
        that reflects neither ``commit`` nor an ancestor at most :data:`INDEX_STEPS`
        commits before it (then, outside a transaction, the index is caught up first)."""
        if not self.use_index:
            return None
        tx = self._active_tx()
        in_tx = tx is not None and tx.backend is backend
        index = backend.index if in_tx else self._index(backend)
        if index is None:
            return None
        repo = backend.db.repo
        for attempt in (1, 2):
            try:
                indexed, counts = index.version_counts([id_from_path(p) or p for p in paths])
            except (sqlite3.Error, GitmemError):
                return None  # the index cannot say; history can
            since: dict[str, memory_versions.Versions] | None = None
            start = pygit2.Oid(hex=indexed) if indexed is not None else None
            if start == commit.id:
                since = {}
            elif start is not None and _first_parents_reach(commit, start, INDEX_STEPS):
                since = memory_versions.walk(repo, commit, paths, hide=start, limit=INDEX_STEPS)
            if since is not None:
                out: dict[str, memory_versions.Versions] = {}
                for path in paths:
                    count, newest = counts.get(id_from_path(path) or path, (0, 0))
                    base = memory_versions.Versions(count, newest // 1_000_000 if count else None)
                    out[path] = base + since.get(path, memory_versions.Versions())
                return out
            if attempt == 2 or in_tx:
                return None
            try:
                index.catch_up()
            except (sqlite3.Error, GitmemError):
                return None
        return None

    def read(
        self,
        id: str,
        *,
        at: At = None,
        scope: Scope | str | None = None,
        valid_at: At = None,
    ) -> Memory:
        """The memory with this id (or a unique prefix of it, as :meth:`resolve_id` finds),
        now or ``at`` a revision or time; with ``valid_at``, only if it held then
        (:meth:`Memory.valid_at`). Raises NotFoundError or AmbiguousIdError."""
        id = id_prefix(id)
        memory = self.get(id, at=at, scope=scope)
        if memory is None and (full := self.resolve_id(id, scope=scope)) != id:
            memory = self.get(full, at=at, scope=scope)
        if memory is None:
            when = f" at {at}" if at is not None else ""
            raise NotFoundError(f"no memory {id}{when}", hint=NOT_FOUND_HINT)
        held = valid_time(valid_at, "valid_at")
        if held is not None and not memory.valid_at(held):
            raise NotFoundError(
                f"{memory.id} was not valid at {format_timestamp(held)} "
                f"(valid {validity_text(memory)})",
                hint="read it without valid_at (--valid-at) to see it",
            )
        return memory

    def _valid_us(self, backend: Backend, at: At, valid_at: At, everything: bool) -> int | None:
        """The valid time a listing keeps memories of, as index microseconds: ``valid_at``;
        else, unless ``everything`` (superseded and expired ones asked for too), the time of
        ``at`` (a revision's commit time), else now. None: no valid-time filter."""
        when = valid_time(valid_at, "valid_at")
        if when is None and everything:
            return None
        if when is None and at is not None:
            with contextlib.suppress(InvalidInputError):
                when = valid_time(at)
            if when is None:
                commit = backend.db.resolve(at)
                when = dt.datetime.fromtimestamp(commit.commit_time, dt.UTC) if commit else None
        return valid_micros(when or self.clock.now())

    def get(self, id: str, *, at: At = None, scope: Scope | str | None = None) -> Memory | None:
        """Like :meth:`read`, but None when there is no such memory."""
        check_id(id)
        for backend in self._ordered(scope):
            memory = self._load(backend, self._snapshot(backend, at), id, past=at is not None)
            if memory is not None:
                return memory
        return None

    def exists(self, id: str, *, at: At = None) -> bool:
        return self.get(id, at=at) is not None

    def resolve_id(self, prefix: str, *, scope: Scope | str | None = None) -> str:
        """The full id of the one memory whose id starts with ``prefix`` (``mem_5f0c`` or
        ``mem_5f0c...``): current memories first, then deleted ones (``restore`` takes a prefix).
        AmbiguousIdError or NotFoundError otherwise; path ids are never abbreviated."""
        wanted = id_prefix(prefix)
        if is_path_id(wanted) or any(
            # whether the file is there, without decoding it (the caller reads it next)
            self._snapshot(b, None).locate(wanted) is not None
            for b in self._ordered(scope)
        ):
            return wanted
        current: set[str] = set()
        for backend in self._ordered(scope):
            current.update(self._reader(backend).ids())
        found = [i for i in current if i.startswith(wanted)]
        if len(forks_past(wanted, found)) == len(found):
            # None, or forks alone: the memory they fork may be one a delete removed.
            deleted: set[str] = set()
            for entry in self.log(op=Op.DELETE, scope=scope):
                deleted.update(entry.ids)
                if entry.unlisted:  # a bulk delete names its first ids only: ask its files
                    deleted.update(removed_ids(self.db(entry.scope).repo, entry.commit))
            found += [i for i in deleted if i.startswith(wanted) and i not in current]
        chosen = one_by_prefix(wanted, found)
        if chosen is None:
            raise NotFoundError(f"no memory {wanted}", hint=NOT_FOUND_HINT)
        forks = [i for i in found if i.startswith(chosen + FORK_MARK)]
        if forks and chosen != wanted:
            log.warning(
                "%s names %s, which has forks: %s (gitmem conflicts lists them)",
                prefix,
                chosen,
                ", ".join(sorted(forks)),
            )
        return chosen

    def list(
        self,
        *,
        scope: Scope | str | None = None,
        category: str | None = None,
        tags: Iterable[str] | None = None,
        include_superseded: bool = False,
        include_archived: bool = False,
        at: At = None,
        valid_at: At = None,
    ) -> builtins.list[Memory]:
        """Memories, oldest first; superseded and archived ones only when asked for. Valid
        time: those valid at ``valid_at``, by default the time of ``at``, else now
        (``include_superseded`` without ``valid_at`` keeps expired ones too). Unreadable files are
        skipped (:meth:`problems`)."""
        wanted_tags = set(tag_tuple(tags)) if tags else set()
        out: builtins.list[Memory] = []
        for backend in self._ordered(scope):
            out.extend(
                self._reader(backend, at).memories(
                    category=category,
                    tags=sorted(wanted_tags),
                    include_superseded=include_superseded,
                    include_archived=include_archived,
                    valid_us=self._valid_us(backend, at, valid_at, include_superseded),
                )
            )
        out.sort(key=lambda m: (m.created_at, m.id))
        if include_superseded:
            replaced = {m.supersedes for m in out if m.supersedes}
            out = [replace(m, status=Status.SUPERSEDED) if m.id in replaced else m for m in out]
        return out

    def documents(
        self, folder: str, *, recursive: bool = False, scope: Scope | str | None = None
    ) -> builtins.list[str]:
        """Path ids of the documents in ``folder`` (``projects/acme``), sorted, from the tip's tree
        (as staged in a transaction): it costs the folder's size. ``recursive``: sub-folders too."""
        folder = folder.strip("/")
        if folder not in DOCUMENT_ROOTS:
            check_id(folder, what="folder")
            if not is_path_id(folder):
                raise InvalidIdError(
                    f"folder {folder!r} is not under one of the document roots "
                    + ", ".join(DOCUMENT_ROOTS)
                )
        found: set[str] = set()
        for backend in self._ordered(scope):
            for path in self._snapshot(backend, None).iter_files(folder):
                if not recursive and "/" in path[len(folder) + 1 :]:
                    continue
                memory_id = id_from_path(path)
                if memory_id is not None:
                    found.add(memory_id)
        return sorted(found)

    def problems(self, *, scope: Scope | str | None = None) -> builtins.list[Problem]:
        """Files under the memory folders that are not valid memories, with the reason."""
        return [p for b in self._ordered(scope) for p in self._reader(b).problems()]

    def log(
        self,
        *,
        agent: str | None = None,
        op: str | Op | None = None,
        id: str | None = None,
        since: str | dt.datetime | dt.date | None = None,
        until: str | dt.datetime | dt.date | None = None,
        limit: int | None = None,
        scope: Scope | str | None = None,
        path: str | None = None,
        category: str | None = None,
    ) -> builtins.list[LogEntry]:
        """Commits, newest first, filtered by their trailers, by ``path`` (a file, a directory or
        a glob they changed) and by ``category`` (of a memory they changed:
        :func:`auditlog.touches`)."""
        return read_log(
            [(b.db, b.scope) for b in self._ordered(scope)],
            agent=agent,
            op=op,
            id=id,
            since=since,
            until=until,
            limit=limit,
            path=path,
            category=category,
        )


def index_writable(db: GitDB) -> bool:
    """Whether this process may create or update the store's index file."""
    state = db.state_dir
    index_file = state / index_name(db.branch)
    if index_file.exists():
        return os.access(index_file, os.W_OK) and os.access(state, os.W_OK)
    return os.access(state if state.exists() else db.gitdir, os.W_OK)


def _first_parents_reach(commit: pygit2.Commit, target: pygit2.Oid, steps: int) -> bool:
    """Whether ``target`` is ``commit`` or one of its first ``steps`` first-parent ancestors."""
    each = commit
    for _ in range(steps + 1):
        if each.id == target:
            return True
        parents = each.parent_ids
        if not parents:
            return False
        if target in parents:
            return True
        each = each.parents[0]
    return False
