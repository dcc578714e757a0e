"""The index's catch-up: the commits after the indexed one, read into rows (the memories
from one tree diff, the versions from walking the new commits, the row providers handed
what changed). When the indexed commit is no ancestor of the tip, it starts from scratch.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pygit2
from pygit2.enums import SortMode

from gitmem.base import logs
from gitmem.base.errors import GitmemError, InvalidInputError
from gitmem.format import codec
from gitmem.format.config import StoreConfig
from gitmem.format.layout import CONFIG_FILE, expected_path_form, id_from_path
from gitmem.format.model import Memory, Scope
from gitmem.git.objects import blob_data, get_commit
from gitmem.store.commit_changes import (
    changed_memory_files,
    insert_versions,
    version_rows,
)
from gitmem.store.index_queries import memory_from_row, problem_rows
from gitmem.store.index_rows import (
    MEMORY_COLUMNS,
    ROW_COLUMNS,
    IndexedMemory,
    IndexStats,
    RowChanges,
    chunks,
    marks,
    micros,
    raw_path,
    row_values,
)
from gitmem.store.index_schema import MEMORY_COUNT_KEY, STORE_CONFIG_KEY, is_damage
from gitmem.store.memory_versions import Versions
from gitmem.store.row_providers import (
    FULL_FILL_CHUNK,
    RowProvider,
    provider_key,
    provider_state,
)

log = logs.get(__name__)

Decoder = Callable[[bytes, str], Memory]
Progress = Callable[[int, int], None]

VERSION_BATCH = 5000
"""Version rows (and commits) written or read at a time: one bulk import can bring a million."""

_INSERT_MEMORY = (
    f"INSERT INTO memories (rowid, {', '.join(ROW_COLUMNS)}) VALUES (?, {marks(ROW_COLUMNS)})"
)


def clear(conn: sqlite3.Connection) -> None:
    """Empty the core tables, so the next catch-up fills them from scratch."""
    for table in ("memories", "tags", "edges", "versions", "commits", "problems"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("DELETE FROM meta WHERE key IN ('commit', ?)", (MEMORY_COUNT_KEY,))


@dataclass
class CatchUp:
    """One catch-up of an index's tables to a commit, inside the caller's write transaction.
    ``failed``: the (row provider, tip) pairs that failed in this process, not retried."""

    conn: sqlite3.Connection
    repo: pygit2.Repository
    decode: Decoder
    scope: Scope
    providers: list[RowProvider]
    failed: set[tuple[str, str]]

    def run(self, tip: pygit2.Commit | None, progress: Progress | None) -> IndexStats:
        """Bring the tables from the commit they reflect to ``tip``."""
        conn, repo = self.conn, self.repo
        # Another process may have caught up while this one waited for the write lock.
        row = conn.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        indexed = str(row[0]) if row is not None else None
        tip_hex = str(tip.id) if tip is not None else None
        stats = IndexStats(commit=tip_hex, memories=0, versions=0)
        if indexed == tip_hex and indexed is not None:
            self._apply_providers(indexed, indexed, [], [])
            _record_store_config(conn, repo, tip)
            return stats
        old: pygit2.Commit | None = None
        if indexed is not None:
            try:
                old = get_commit(repo, indexed)
                if tip is None or not (
                    # a parent needs no ancestry walk (descendant_of is ~1 ms in a long history)
                    old.id == tip.id
                    or old.id in tip.parent_ids
                    or repo.descendant_of(tip.id, old.id)
                ):
                    old = None
            except (KeyError, ValueError, GitmemError, pygit2.GitError):
                old = None  # pruned after a rewrite, or never in this repository
            if old is None:
                log.info("index: %s is not an ancestor of the tip any more; rebuilding", indexed)
                clear(conn)
                stats.rebuilt = True
        if tip is None:
            clear(conn)
            # "" stands for "no commit": providers refill once, then follow it cheaply.
            self._apply_providers("", "", [], [])
            return stats
        # One new commit (every write's catch-up): the version rows reuse its tree diff.
        known: dict[str, pygit2.Oid | None] | None = None
        if old is not None and list(tip.parent_ids) == [old.id]:
            known = dict(changed_memory_files(repo, old.tree, tip.tree))
        # From no base every memory is new: versions are derived and providers refilled
        # from the tables, a page at a time, instead of collecting every id and memory.
        touched: set[str] | None = set() if old is not None else None
        added: list[IndexedMemory] | None = [] if old is not None else None
        removed: list[IndexedMemory] | None = [] if old is not None else None
        stats.applied_commits = self._apply_versions(tip, old, progress, known, touched)
        self._apply_tree_diff(
            old.tree if old is not None else None, tip.tree, added, removed, known
        )
        self._derive(added or [], touched or set(), rebuilt=old is None)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (tip_hex,))
        _record_store_config(conn, repo, tip)
        assert tip_hex is not None
        self._apply_providers(
            tip_hex, str(old.id) if old is not None else None, added or [], removed or []
        )
        stats.memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", (MEMORY_COUNT_KEY, str(stats.memories))
        )
        stats.versions = conn.execute("SELECT count(*) FROM versions").fetchone()[0]
        stats.problems = problem_rows(conn)
        return stats

    def _apply_tree_diff(
        self,
        old: pygit2.Tree | None,
        new: pygit2.Tree,
        added: list[IndexedMemory] | None,
        removed: list[IndexedMemory] | None,
        known: dict[str, pygit2.Oid | None] | None = None,
    ) -> None:
        """Rows for what changed between the trees; what left and came is appended to
        ``removed`` and ``added`` unless they are None (nobody will read them)."""
        conn, repo = self.conn, self.repo
        changes = known.items() if known is not None else changed_memory_files(repo, old, new)
        for path, blob in changes:
            gone = self._forget(path)
            if gone is not None and removed is not None:
                removed.append(gone)
            if blob is None:
                continue
            try:
                if id_from_path(path) is None:
                    raise InvalidInputError(
                        f"{path} is not at a memory path ({expected_path_form(path)})"
                    )
                memory = self.decode(blob_data(repo, blob), path)
            except GitmemError as exc:
                conn.execute(
                    "INSERT OR REPLACE INTO problems VALUES (?, ?)",
                    (raw_path(path), raw_path(str(exc))),
                )
                continue
            rowid = insert_memory(conn, memory, str(blob))
            if added is not None:
                added.append(IndexedMemory(rowid, str(blob), memory))

    def _forget(self, path: str) -> IndexedMemory | None:
        """Delete the row at ``path``; returns what it held, for the row providers."""
        conn = self.conn
        conn.execute("DELETE FROM problems WHERE path = ?", (raw_path(path),))
        row = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE path = ?", (raw_path(path),)
        ).fetchone()
        if row is None:
            return None
        rowid, memory_id, blob = row[0], row[1], row[3]
        gone = IndexedMemory(rowid, blob, memory_from_row(row, self.scope))
        conn.execute("DELETE FROM memories WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM tags WHERE memory = ?", (rowid,))
        conn.execute("DELETE FROM edges WHERE src = ?", (memory_id,))
        return gone

    def _apply_versions(
        self,
        tip: pygit2.Commit,
        old: pygit2.Commit | None,
        progress: Progress | None,
        known: dict[str, pygit2.Oid | None] | None = None,
        touched: set[str] | None = None,
    ) -> int:
        """Version rows of the commits after ``old`` up to ``tip`` (``known``: ``tip``'s diff
        against its only parent ``old``); the rows' ids go into ``touched``."""
        conn, repo = self.conn, self.repo
        # The one new commit of a write needs no walk to sort.
        source = [tip] if known is not None else list(_walk_new(conn, repo, tip, old))
        total = len(source)
        rows: list[tuple[Any, ...]] = []
        gens: dict[str, int] = {}
        new_commits: list[tuple[str, int]] = []
        for count, commit in enumerate(source, 1):
            gen = 1 + max((self._generation(p, gens) for p in commit.parent_ids), default=0)
            gens[str(commit.id)] = gen
            new_commits.append((str(commit.id), gen))
            for row in version_rows(repo, commit, gen, known if commit.id == tip.id else None):
                if touched is not None:
                    touched.add(row[0])
                rows.append(row)
                if len(rows) >= VERSION_BATCH or len(new_commits) >= VERSION_BATCH:
                    insert_versions(conn, rows, new_commits)
                    rows.clear()
                    new_commits.clear()
            if progress is not None and (count % 500 == 0 or count == total):
                progress(count, total)
        insert_versions(conn, rows, new_commits)
        return total

    def _derive(self, added: list[IndexedMemory], touched: set[str], *, rebuilt: bool) -> None:
        """The derived version and updated_at (gitmem.store.memory_versions) of every memory
        this catch-up touched (``rebuilt``: of all), from its version rows: their count and
        newest time, else version 1 at its created_at; ``added`` gets them too."""
        conn = self.conn
        fresh = {item.memory.id: i for i, item in enumerate(added)}
        if rebuilt and not added:
            wanted = [str(row[0]) for row in conn.execute("SELECT id FROM memories")]
        else:
            wanted = sorted(touched | set(fresh))
        found = version_counts(conn, wanted)
        conn.executemany(
            "UPDATE memories SET version = 1, updated_at = created_at, updated_us = created_us "
            "WHERE id = ?",
            [(m,) for m in wanted if m not in found],
        )
        conn.executemany(
            "UPDATE memories SET version = ?, updated_at = ?, updated_us = ? WHERE id = ?",
            [(*_derived_columns(*found[m]), m) for m in wanted if m in found],
        )
        for memory_id, at in fresh.items():
            count, newest = found.get(memory_id, (0, 0))
            versions = Versions(count, newest // 1_000_000 if count else None)
            added[at] = replace(added[at], memory=versions.apply(added[at].memory))

    def _generation(self, oid: pygit2.Oid, gens: dict[str, int]) -> int:
        """A commit's generation: 1 for a root, else one more than its highest parent's
        (from the ``commits`` table; 0 for a parent it lacks, as in a shallow clone)."""
        key = str(oid)
        if key not in gens:
            row = self.conn.execute("SELECT gen FROM commits WHERE id = ?", (key,)).fetchone()
            gens[key] = int(row[0]) if row is not None else 0
        return gens[key]

    def _apply_providers(
        self,
        tip_hex: str,
        base: str | None,
        added: list[IndexedMemory],
        removed: list[IndexedMemory],
    ) -> None:
        """Hand the change from ``base`` to ``tip_hex`` to every provider that reflects
        ``base``; refill the others."""
        conn = self.conn
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'provider:%'"))
        self._follow_unloaded(meta, base, tip_hex, (*added, *removed))
        refill: list[RowProvider] = []
        for provider in self.providers:
            state = meta.get(provider_key(provider))
            if base is None or state != provider_state(provider, base):
                refill.append(provider)
                continue
            changes = RowChanges(False, _under(provider, added), _under(provider, removed))
            if not (changes.added or changes.removed):
                self._followed(provider, tip_hex)
                continue
            # A provider's failure must not take the store's reads down: its work is undone
            # and a later catch-up refills it.
            conn.execute("SAVEPOINT provider")
            try:
                provider.apply(conn, self.repo, changes)
            except Exception as exc:
                self._provider_failed(provider, tip_hex, exc)
                continue
            conn.execute("RELEASE provider")
            self._followed(provider, tip_hex)
        self._refill(tip_hex, refill)

    def _followed(self, provider: RowProvider, tip_hex: str) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)",
            (provider_key(provider), provider_state(provider, tip_hex)),
        )

    def _follow_unloaded(
        self, meta: dict[str, str], base: str | None, tip_hex: str, changed: Sequence[IndexedMemory]
    ) -> None:
        """Move a provider this process has not loaded to ``tip_hex`` when it reflected
        ``base`` and no memory under its path prefix changed."""
        loaded = {provider_key(p) for p in self.providers}
        for key, state in meta.items():
            version, _, rest = state.partition(" ")
            commit, _, under = rest.partition(" ")
            if key in loaded or not under or commit != base or base is None:
                continue
            if not any((m.memory.path or "").startswith(under) for m in changed):
                state = f"{version} {tip_hex} {under}"
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, state))

    def _provider_failed(self, provider: RowProvider, tip_hex: str, exc: Exception) -> None:
        """Undo what ``provider`` wrote since the savepoint and leave its tables empty."""
        conn = self.conn
        if isinstance(exc, sqlite3.DatabaseError) and (
            type(exc) is sqlite3.DatabaseError or is_damage(exc)
        ):
            raise exc  # the database itself is damaged: the caller rebuilds it
        conn.execute("ROLLBACK TO provider")
        conn.execute("RELEASE provider")
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)",
            (provider_key(provider), f"{provider.version} failed"),
        )
        self.failed.add((provider.name, tip_hex))
        log.warning(
            "index: row provider %s failed (%s: %s); its tables are left empty",
            provider.name, type(exc).__name__, exc,
        )  # fmt: skip
        with contextlib.suppress(sqlite3.Error):
            self._create_tables(provider)

    def _create_tables(self, provider: RowProvider) -> None:
        for table in provider.tables:
            self.conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        for statement in provider.ddl:
            self.conn.execute(statement)

    def _refill(self, tip_hex: str, providers: list[RowProvider]) -> None:
        """Make these providers' tables again and hand them every current memory, in one
        pass under one savepoint: a provider that fails undoes the pass, is left empty, and
        the pass runs again for the others."""
        conn = self.conn
        pending = list(providers)
        unders = {p.under for p in pending}
        where, params = "", []
        if len(unders) == 1 and "" not in unders:
            # The prefix's range of paths, and every path kept as bytes (sorted after text).
            (under,) = unders
            where = (
                "WHERE rowid IN (SELECT rowid FROM memories WHERE path >= ? AND path < ? "
                "UNION ALL SELECT rowid FROM memories WHERE path >= x'')"
            )
            params = [under, under[:-1] + chr(ord(under[-1]) + 1)]
        while pending:
            conn.execute("SAVEPOINT provider")
            current = pending[0]
            try:
                for provider in pending:
                    current = provider
                    self._create_tables(provider)
                    provider.apply(conn, self.repo, RowChanges(True))
                cursor = conn.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY rowid", params
                )
                while rows := cursor.fetchmany(FULL_FILL_CHUNK):
                    chunk = tuple(
                        IndexedMemory(r[0], r[3], memory_from_row(r, self.scope)) for r in rows
                    )
                    for provider in pending:
                        current = provider
                        provider.apply(conn, self.repo, RowChanges(True, _under(provider, chunk)))
            except Exception as exc:
                self._provider_failed(current, tip_hex, exc)
                pending.remove(current)
                continue
            conn.execute("RELEASE provider")
            for provider in pending:
                self._followed(provider, tip_hex)
            return


def insert_memory(
    conn: sqlite3.Connection, memory: Memory, blob: str, rowid: int | None = None
) -> int:
    """Insert the rows of ``memory`` (stored in ``blob``): its ``memories`` row (at ``rowid``,
    else the next free one), its tags and its links. Returns its rowid."""
    values = row_values(memory, blob)
    found = conn.execute(_INSERT_MEMORY, [rowid, *(values[c] for c in ROW_COLUMNS)]).lastrowid
    assert found is not None
    edges = [(memory.id, memory.supersedes, "supersedes")] if memory.supersedes else []
    edges += [(memory.id, r.id, str(r.relationship)) for r in memory.related]
    tags = [(found, tag) for tag in dict.fromkeys(memory.tags)]
    conn.executemany("INSERT INTO tags VALUES (?, ?)", tags)
    conn.executemany("INSERT INTO edges VALUES (?, ?, ?)", edges)
    return found


def _under(provider: RowProvider, items: Sequence[IndexedMemory]) -> tuple[IndexedMemory, ...]:
    """The memories of ``items`` whose path is under the provider's prefix."""
    return tuple(i for i in items if (i.memory.path or "").startswith(provider.under))


def version_counts(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """For each of ``ids`` with versions: their count and the newest author time (µs)."""
    found: dict[str, tuple[int, int]] = {}
    for chunk in chunks(ids):
        sql = (
            "SELECT id, count(*), max(time_us) FROM versions "
            f"WHERE counts = 1 AND id IN ({marks(chunk)}) GROUP BY id"
        )
        found.update((str(m), (int(c), int(t))) for m, c, t in conn.execute(sql, chunk))
    return found


def _derived_columns(count: int, newest_us: int) -> tuple[int, str, int]:
    """(version, updated_at, updated_us) of ``count`` versions, the newest at ``newest_us``."""
    when = dt.datetime.fromtimestamp(newest_us // 1_000_000, dt.UTC)
    return count, when.isoformat(), micros(when)


def _walk_new(
    conn: sqlite3.Connection, repo: pygit2.Repository, tip: pygit2.Commit, old: pygit2.Commit | None
) -> Iterable[pygit2.Commit]:
    """The commits after ``old`` up to ``tip``, parents first. A walk that hides ``old``
    stops by commit time, so after a clock ran behind it yields some of ``old``'s ancestors:
    those in the ``commits`` table are skipped."""
    walker = repo.walk(tip.id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    if old is None:
        return walker
    walker.hide(old.id)
    known = "SELECT 1 FROM commits WHERE id = ?"
    return (c for c in walker if conn.execute(known, (str(c.id),)).fetchone() is None)


def _record_store_config(
    conn: sqlite3.Connection, repo: pygit2.Repository, tip: pygit2.Commit | None
) -> None:
    """The tip's gitmem.yaml format and scope in ``meta``, for index_queries.open_current
    (``{}`` when unreadable: the full path then reports it)."""
    found: dict[str, Any] = {}
    try:
        if tip is None:
            raise KeyError(CONFIG_FILE)
        data = blob_data(repo, tip.tree[CONFIG_FILE].id)
        config = StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE))
        found = {"format": config.format, "scope": str(config.scope)}
    except (KeyError, GitmemError, pygit2.GitError):
        pass
    conn.execute(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)", (STORE_CONFIG_KEY, json.dumps(found))
    )
