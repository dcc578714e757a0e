"""How the store reads memories (:data:`Reader`): :class:`gitmem.store.index.Index` from the
derived index, :class:`TreeReader` from an in-memory index of one commit's tree (the same
queries) where the index cannot answer (a past ``at``, a transaction's staged writes,
``use_index = False``, a store it cannot write: ``Store._reader``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pygit2

from gitmem.base.errors import GitmemError, InvalidMemoryError
from gitmem.format.layout import (
    MEMORY_ROOTS,
    expected_path_form,
    id_from_path,
    is_memory_file,
    memory_path,
)
from gitmem.format.model import Memory, Scope
from gitmem.git.db import GitDB
from gitmem.git.objects import Snapshot
from gitmem.store import lexical
from gitmem.store.commit_changes import version_rows
from gitmem.store.index import Index
from gitmem.store.index_catchup import insert_memory
from gitmem.store.index_queries import Queries, version_list
from gitmem.store.index_rows import marks, raw_path
from gitmem.store.index_schema import SCHEMA
from gitmem.store.results import Problem, Version

T = TypeVar("T")

Decode = Callable[[bytes, str], Memory]
"""Bytes at a path -> the memory (the store's decoder: memfile plus the store's scope)."""


class TreeReader(Queries):
    """Reads served by walking one commit's tree (and, for versions, the history)."""

    semantic = False

    def __init__(
        self,
        db: GitDB,
        snap: Snapshot,
        decode: Decode,
        scope: Scope,
        derive: Callable[[list[Memory]], list[Memory]],
    ) -> None:
        self.db = db
        self.snap = snap
        self.decode = decode
        self.scope = scope
        self.derive = derive
        """The memories as decoded -> as read (version and updated_at from history,
        gitmem.store.memory_versions), for all of a scan at once (one walk of the history)."""
        self._conn: sqlite3.Connection | None = None

    def scan(self) -> tuple[list[Memory], list[Problem]]:
        """Every memory file of the tree, decoded: (memories, problems)."""
        memories: list[Memory] = []
        problems: list[Problem] = []
        seen: dict[str, str] = {}
        snap = self.snap
        paths = (p for root in MEMORY_ROOTS for p in snap.iter_files(root) if is_memory_file(p))
        for path in paths:
            data = snap.read(path)
            if data is None:
                continue
            try:
                if id_from_path(path) is None:
                    raise InvalidMemoryError(
                        f"{path} is not at a memory path ({expected_path_form(path)})"
                    )
                memory = self.decode(data, path)
            except GitmemError as exc:
                problems.append(Problem(path, str(exc), self.scope))
                continue
            if memory.id in seen:
                why = f"duplicate id {memory.id} (also in {seen[memory.id]})"
                problems.append(Problem(path, why, self.scope))
                continue
            seen[memory.id] = path
            memories.append(memory)
        return self.derive(memories), problems

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on an in-memory index of the tree (made on first use): the same
        queries, filters and ranking as the store's index."""
        if self._conn is None:
            self._conn = _scratch_index(self.snap, *self.scan())
        return query(self._conn)

    def versions(self, ids: Sequence[str]) -> list[Version]:
        """:meth:`Queries.versions` by walking every commit: the rows a catch-up makes."""
        wanted = set(ids)
        rows: list[tuple[Any, ...]] = []
        gens: dict[pygit2.Oid, int] = {}
        for commit in self.db.walk(reverse=True):
            gen = 1 + max((gens.get(p, 0) for p in commit.parent_ids), default=0)
            gens[commit.id] = gen
            rows += [r for r in version_rows(self.db.repo, commit, gen) if r[0] in wanted]
        return version_list(rows, ids)


def _scratch_index(
    snap: Snapshot, memories: list[Memory], problems: list[Problem]
) -> sqlite3.Connection:
    """An in-memory index of ``memories`` (core and full-text tables, no history)."""
    words = ", ".join(lexical.COLUMNS)
    fts = f"INSERT INTO fts (rowid, {words}) VALUES (?, {marks(lexical.COLUMNS)})"
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    for statement in (*SCHEMA.split(";"), *lexical.LEXICAL.ddl):
        conn.execute(statement)
    for rowid, memory in enumerate(memories, start=1):
        blob = snap.blob_id(memory.path or memory_path(memory.id))
        insert_memory(conn, memory, str(blob) if blob is not None else "", rowid)
        conn.execute(fts, (rowid, *lexical.fts_row(memory)))
    rows = [(raw_path(p.path), raw_path(p.message)) for p in problems]
    conn.executemany("INSERT OR REPLACE INTO problems VALUES (?, ?)", rows)
    return conn


Reader = Index | TreeReader
"""The reads of one repository, whichever way they are served."""
