"""The derived SQLite/FTS5 index of one store: fast reads, never the source of truth.

One database per repository at ``<gitdir>/gitmem/index.sqlite`` (WAL mode, a
busy timeout, safe for several processes). It records the commit it reflects.
Before every query it catches up with the branch tip:

- the current memories come from one tree diff between the indexed commit and
  the tip (libgit2 skips unchanged subtrees by object id);
- per-memory version rows come from walking the new commits (merges included)
  and diffing each against its parents.

When the indexed commit is no longer an ancestor of the tip (history rewritten,
branch reset), or the database is missing, corrupt or of an older layout, it is
rebuilt from scratch. Deleting it loses nothing.

Two version numbers say when what is stored is out of date:

- :data:`SCHEMA_VERSION` (``meta.schema``) is the layout of the core tables
  below; a database of another version is dropped whole and rebuilt.
- every :class:`RowProvider` (``meta."provider:<name>"`` = ``"<version> <commit>"``)
  owns derived tables of its own (the full-text table, vectors, graph rows). It
  is handed the memories that changed at each catch-up, inside the same
  transaction; when its version changes, or it missed commits (it was not
  registered when they were indexed), only its tables are dropped and refilled.
  Register one with :func:`register` at import time of the module that owns it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pygit2
from pygit2.enums import SortMode

from gitmem.base import logs, paths
from gitmem.base.errors import GitmemError, InvalidInputError, StoreError
from gitmem.format import codec
from gitmem.format.config import StoreConfig
from gitmem.format.layout import CONFIG_FILE, expected_path_form, id_from_path
from gitmem.format.model import Memory, Scope
from gitmem.git.db import GitDB
from gitmem.git.objects import blob_data, get_commit
from gitmem.store import lexical, queries
from gitmem.store.changes import (
    changed_memory_files,
    insert_versions,
    paths_changed,
    version_rows,
)
from gitmem.store.providers import FULL_FILL_CHUNK, PROVIDERS, RowProvider, provider_key, register
from gitmem.store.queries import (
    MEMORY_COUNT_KEY,
    REINDEX_HINT,
    SCHEMA_VERSION,
    STORE_CONFIG_KEY,
)
from gitmem.store.rows import (
    MEMORY_COLUMNS,
    ROW_COLUMNS,
    Hit,
    IndexedMemory,
    IndexStats,
    RowChanges,
    VersionRow,
    memory_filters,
    micros,
    raw_path,
    row_values,
)

log = logs.get(__name__)

DB_NAME = paths.INDEX_DB

WAL_SHRINK_BYTES = 32 * 1024 * 1024
"""A write-ahead log larger than this after a write transaction is checkpointed and cut to
nothing. SQLite's automatic checkpoint copies the log into the database but keeps the file
at its largest size for reuse, and only the last connection's close removes it; gitmem's
commands end without closing (a fast process exit), so after a large catch-up (a clone or
rebuild of 1M memories left 1.8 GB of log beside a 1.8 GB index) the log stayed on disk."""

Decoder = Callable[[bytes, str], Memory]
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
Progress = Callable[[int, int], None]


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL UNIQUE,
    blob TEXT NOT NULL,
    title TEXT,
    scope TEXT,
    category TEXT,
    tags TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    updated_us INTEGER NOT NULL,
    version NOT NULL, -- no affinity: a number past 64 bits is kept as text
    supersedes TEXT,
    related TEXT NOT NULL,
    agent TEXT,
    session_id TEXT,
    trigger_ TEXT,
    status TEXT NOT NULL,
    extra TEXT NOT NULL,
    layer TEXT,
    project TEXT,
    body TEXT NOT NULL
);
CREATE INDEX memories_created ON memories (created_us, id);
CREATE INDEX memories_updated ON memories (updated_us);
CREATE INDEX memories_category ON memories (category);
CREATE INDEX memories_supersedes ON memories (supersedes);
CREATE INDEX memories_layer ON memories (layer, project);
CREATE INDEX memories_blob ON memories (blob);
CREATE TABLE tags (memory INTEGER NOT NULL, tag TEXT NOT NULL);
CREATE INDEX tags_tag ON tags (tag, memory);
CREATE INDEX tags_memory ON tags (memory);
CREATE TABLE edges (src TEXT NOT NULL, dst TEXT NOT NULL, relationship TEXT NOT NULL);
CREATE INDEX edges_src ON edges (src);
CREATE INDEX edges_dst ON edges (dst, relationship);
CREATE TABLE versions (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    path TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    time_us INTEGER NOT NULL,
    author TEXT NOT NULL,
    agent TEXT,
    op TEXT NOT NULL,
    blob TEXT,
    gen INTEGER NOT NULL,
    counts INTEGER NOT NULL -- 1: the commit is a version of the memory (gitmem.store.derived)
);
CREATE INDEX versions_id ON versions (id, seq);
CREATE TABLE commits (id TEXT PRIMARY KEY, gen INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE problems (path TEXT PRIMARY KEY, message TEXT NOT NULL);
"""

# -- the full-text rows: the first provider ------------------------------------------------


def _apply_lexical(conn: sqlite3.Connection, _repo: pygit2.Repository, changes: RowChanges) -> None:
    # Contentless: a row is deleted by handing back exactly the text it was indexed with,
    # which fts_row recomputes from the memory the catch-up read before deleting it.
    cols = ", ".join(lexical.COLUMNS)
    marks = ", ".join("?" for _ in lexical.COLUMNS)
    if changes.removed:
        conn.executemany(
            f"INSERT INTO fts (fts, rowid, {cols}) VALUES ('delete', ?, {marks})",
            [(r.rowid, *lexical.fts_row(r.memory)) for r in changes.removed],
        )
    if changes.added:
        conn.executemany(
            f"INSERT INTO fts (rowid, {cols}) VALUES (?, {marks})",
            [(a.rowid, *lexical.fts_row(a.memory)) for a in changes.added],
        )


LEXICAL = RowProvider(
    name=lexical.PROVIDER,
    version=lexical.LEXICAL_VERSION,
    tables=("fts",),
    ddl=(
        f"CREATE VIRTUAL TABLE fts USING fts5({', '.join(lexical.COLUMNS)}, "
        f"content = '', tokenize = '{lexical.TOKENIZER}')",
    ),
    apply=_apply_lexical,
)
register(LEXICAL)


_INSERT_MEMORY = (
    f"INSERT INTO memories ({', '.join(ROW_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in ROW_COLUMNS)})"
)

RowParts = tuple[tuple[Any, ...], list[str], list[tuple[str, str, str]]]
"""A memory's ``memories`` row values, its tags and its edges."""

FILL_BATCH = 500
"""Files a first build decodes before it inserts their rows (tags and edges a batch at a time)."""

VERSION_BATCH = 5000
"""Version rows (and commits) inserted, or read back to derive versions, at a time: a bulk
import's one commit can bring a million."""


def _row_parts(memory: Memory, blob: str) -> RowParts:
    values = row_values(memory, blob)
    edges = [(memory.id, memory.supersedes, "supersedes")] if memory.supersedes else []
    edges += [(memory.id, r.id, str(r.relationship)) for r in memory.related]
    return tuple(values[c] for c in ROW_COLUMNS), list(dict.fromkeys(memory.tags)), edges


Decoded = tuple[str, str | None, RowParts | str]
"""A file a first build read: (path, the memory's id and row parts, or None and why not)."""


def _memory_file(repo: pygit2.Repository, path: str, blob: pygit2.Oid) -> bytes:
    """The bytes of the file at ``path`` for decoding; raises GitmemError when ``path`` is
    not a memory path (checked before reading) or the blob cannot be read."""
    if id_from_path(path) is None:
        raise InvalidInputError(f"{path} is not at a memory path ({expected_path_form(path)})")
    return blob_data(repo, blob)


@dataclass
class _Links:
    """Tags and edges of inserted rows, written with one statement each by :meth:`write`."""

    tags: list[tuple[int, str]] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)

    def write(self, conn: sqlite3.Connection) -> None:
        if self.tags:
            conn.executemany("INSERT INTO tags VALUES (?, ?)", self.tags)
            self.tags.clear()
        if self.edges:
            conn.executemany("INSERT INTO edges VALUES (?, ?, ?)", self.edges)
            self.edges.clear()


def _insert_parts(conn: sqlite3.Connection, parts: RowParts, links: _Links | None = None) -> int:
    """Insert a memory's row, tags and edges; returns the row's id. With ``links``, the tags
    and edges wait there for its :meth:`_Links.write` (a batch's in one statement each)."""
    values, tags, edges = parts
    rowid = conn.execute(_INSERT_MEMORY, values).lastrowid
    assert rowid is not None
    pending = _Links() if links is None else links
    pending.tags.extend((rowid, tag) for tag in tags)
    pending.edges.extend(edges)
    if links is None:
        pending.write(conn)
    return rowid


BUILD_GIT_CACHE = 64 << 20
"""Bytes of objects libgit2 keeps cached (all repositories of the process) while a first
build writes its version rows (libgit2's default: 256 MiB). The rows diff each commit's
tree against its parent's, so the trees of the last commit are the ones read again; at a
million memories each commit's tree has 256 folders of ~300 KB, more than any bound that
keeps the process small: the cache filled to its 256 MiB, and the process held 354 MiB at
the end of the rows. At 64 MiB: 236 MiB, for ~10% more of the rows' CPU."""

FILL_GIT_CACHE = 8 << 20
"""The same while the fill reads the tip's files: it reads each folder of the tree once,
so what is cached is not read again (at a million memories it held 69 MiB of them)."""

BUILD_WINDOW = 8 << 20
BUILD_MAPPED = 32 << 20
"""libgit2's pack windows during a first build (elsewhere 32 MiB windows, 128 MiB mapped:
gitmem.git.db). The build reads the trees, which git packs together, and then the blobs
in the tree's order, about the order git packs them in: the windows it maps move forward
through the pack, and pages it has left count in its resident size until the window is
dropped (128 MiB of a million-memory build's 412)."""


@contextlib.contextmanager
def _bounded_git(cache: int | None) -> Iterator[None]:
    """libgit2's cache bounded to ``cache`` bytes and its pack windows to
    :data:`BUILD_WINDOW` and :data:`BUILD_MAPPED` meanwhile (None: all as they are), then
    as they were (what the cache holds past the old bound by then is evicted as objects
    come in)."""
    if cache is None:
        yield
        return
    settings = pygit2.settings
    before = int(settings.cached_memory[1]), settings.mwindow_size, settings.mwindow_mapped_limit
    settings.cache_max_size(min(cache, before[0]))
    settings.mwindow_size = min(BUILD_WINDOW, before[1])
    settings.mwindow_mapped_limit = min(BUILD_MAPPED, before[2])
    try:
        yield
    finally:
        settings.cache_max_size(before[0])
        settings.mwindow_size = before[1]
        settings.mwindow_mapped_limit = before[2]


def _drop_git_caches(repo: pygit2.Repository) -> None:
    """Give back what ``repo`` caches and maps (the objects libgit2 cached, the pack
    windows it mapped: it opens them again when it next reads) and the C heap's free pages
    (glibc keeps freed memory below the heap's top in the process: after a first build's
    version rows, 222 MiB of its 249). Objects still referenced stay valid. Only in a
    process with no other thread: another one may be reading through ``repo``'s handles."""
    if threading.active_count() != 1:
        return
    repo.free()
    trim = _libc_malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _libc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, None on another C library (musl and macOS have none).

    Looked up on first use, among the symbols the process has loaded already
    (``CDLL(None)``): ``ctypes.util.find_library`` runs ``ldconfig -p`` in a subprocess, and
    at import time it did so for every command that loads the index."""
    if os.name != "posix":
        return None
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
        return trim
    except (OSError, AttributeError):
        return None


def _tables_empty(conn: sqlite3.Connection) -> bool:
    """Whether no memory row and no problem row is stored (a first build's fill may skip
    every check a row already there needs)."""
    found = conn.execute(
        "SELECT 1 FROM memories UNION ALL SELECT 1 FROM problems LIMIT 1"
    ).fetchone()
    return found is None


# -- the index --------------------------------------------------------------------------


def _recovering(method: F) -> F:
    """Run an index query; when the database turns out corrupt, rebuild it and run it again."""

    @functools.wraps(method)
    def wrapper(self: Index, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            self._recover(exc)
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Index:
    """The SQLite index of one repository. Every public query catches up first."""

    def __init__(self, db: GitDB, decode: Decoder, scope: Scope) -> None:
        self.db = db
        self.decode = decode
        self.scope = scope
        # One database per branch: a proposal branch's index would otherwise be rebuilt
        # each time main's and its own writes took turns (neither tip descends from both).
        self.path = db.state_dir / paths.index_name(db.branch)
        self._local = threading.local()
        self._catchup_lock = threading.Lock()
        self._failed: set[tuple[str, str]] = set()
        """(row provider, tip) pairs whose rows failed in this process: not retried at that tip."""
        self.busy_timeout = 30.0
        """Seconds one SQLite call waits for another connection's lock."""
        self.write_wait = 1800.0
        """Seconds a catch-up waits for another process's catch-up or rebuild to finish
        (a rebuild of a large store outlasts the busy timeout; a held lock means a live
        process, since the operating system drops the locks of one that died)."""

    # -- connection -------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """This thread's connection to the index file, opened (and the schema made) on first
        use; row providers run their own statements on it (inside :meth:`writing` to write)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            if self._file_id() == self._local.file_id:
                return conn
            # Deleted or replaced under an open connection: let go of the old file (a
            # new database beside its -wal and -shm would meet them) and open the new one.
            self.close()
        self.path.parent.mkdir(exist_ok=True)
        conn = self._open()
        self._local.conn = conn
        self._local.pid = os.getpid()
        self._local.file_id = self._file_id()
        return conn

    def _file_id(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            conn = None
            try:
                # A schema gitmem never makes fails here as a corrupt file does.
                conn = queries.connect(self.path, read_only=False, timeout=self.busy_timeout)
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                _patiently(conn, "PRAGMA journal_mode = WAL", self.busy_timeout)
                conn.execute("PRAGMA synchronous = NORMAL")
                self._ensure_schema(conn)
                return conn
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                if attempt or not _is_damage(exc):
                    raise
                log.warning("index %s is unreadable (%s); rebuilding it", self.path, exc)
                self._discard_files()
        raise AssertionError("unreachable")

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        row = None
        with contextlib.suppress(sqlite3.OperationalError):
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is not None and row[0] == str(SCHEMA_VERSION):
            return
        _patiently(conn, "BEGIN IMMEDIATE", self.write_wait)
        try:
            row = None
            with contextlib.suppress(sqlite3.OperationalError):
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None or row[0] != str(SCHEMA_VERSION):
                # Virtual tables first: dropping one drops its shadow tables with it.
                for virtual in (True, False):
                    tables = [
                        r[0]
                        for r in conn.execute(
                            "SELECT name FROM sqlite_master WHERE type = 'table' "
                            "AND name NOT LIKE 'sqlite_%' AND "
                            f"{'' if virtual else 'NOT '}sql LIKE 'CREATE VIRTUAL%'"
                        )
                    ]
                    for table in tables:
                        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
                # executescript would commit the open transaction; run statements one by one.
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _discard_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(self.path) + suffix).unlink()

    def close(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextlib.contextmanager
    def _query(self) -> Iterator[sqlite3.Connection]:
        """A connection caught up with the tip (query methods recover from corruption)."""
        conn = self.connect()
        self.catch_up()
        yield conn

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """Throw away a database that failed as corrupt, so the retry rebuilds it."""
        if queries.timed_out(exc):
            raise StoreError(f"{self.path}: {queries.TIMED_OUT}", hint=REINDEX_HINT) from exc
        if not _is_damage(exc):
            raise exc  # locked, busy, a malformed FTS query: not corruption
        log.warning("index %s failed (%s); rebuilding it", self.path, exc)
        self.close()
        self._discard_files()

    # -- catching up -------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction, for a row provider's own queries
        (gitmem.store.graphindex): every statement in the block sees the same commit. It does
        not catch up (call :meth:`catch_up` first); call no other method of the index
        inside the block."""
        conn = self.connect()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")

    def indexed_commit(self) -> str | None:
        row = self.connect().execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        return None if row is None else str(row[0])

    def version_counts(self, ids: Sequence[str]) -> tuple[str | None, dict[str, tuple[int, int]]]:
        """(the commit the index reflects, and for each of ``ids`` with versions there: their
        count and the newest one's author time in µs), read in one transaction, as it stands
        (no catch-up): a write asks about the commit it builds on, which the index may not
        reflect yet (gitmem.store.derived says what a version is)."""
        with self.reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
            found = _version_counts(conn, ids)
        return (None if row is None else str(row[0])), found

    def meta(self) -> dict[str, str]:
        """The ``meta`` table as it stands (not caught up): ``schema``, ``commit`` and one
        ``provider:<name>`` = ``"<version> <commit>"`` per row provider that has run."""
        return {str(k): str(v) for k, v in self.connect().execute("SELECT key, value FROM meta")}

    def catch_up(self, progress: Progress | None = None) -> IndexStats | None:
        """Bring the index to the branch tip. Returns None when it already was there."""
        tip = self._tip()
        tip_hex = str(tip.id) if tip is not None else None
        conn = self.connect()
        if self._current(conn, tip_hex):
            return None
        with self.writing(conn):
            # Read the tip again under the write lock: another process may have indexed a
            # newer one meanwhile, and the tip read before would not descend from it.
            return self._catch_up_locked(conn, self._tip(), progress)

    def _tip(self) -> pygit2.Commit | None:
        """The commit this index follows: the branch tip."""
        return self.db.tip()

    def _providers(self) -> Iterable[RowProvider]:
        """The row providers whose tables this index keeps: every registered one."""
        return PROVIDERS.values()

    def _current(self, conn: sqlite3.Connection, tip_hex: str | None) -> bool:
        """Whether the core tables and every registered provider's reflect ``tip_hex``."""
        if tip_hex is None:
            return False
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("commit") != tip_hex or STORE_CONFIG_KEY not in meta:
            return False
        return all(
            meta.get(provider_key(p)) == f"{p.version} {tip_hex}"
            or (p.name, tip_hex) in self._failed
            for p in self._providers()
        )

    def rebuild(self, progress: Progress | None = None) -> IndexStats:
        """Forget everything and index the whole history again."""
        conn = self.connect()
        with self.writing(conn):
            self._clear(conn)
            # Every provider refills its tables too, whatever commit they say they follow.
            conn.execute("DELETE FROM meta WHERE key LIKE 'provider:%'")
            stats = self._catch_up_locked(conn, self._tip(), progress)
            stats.rebuilt = True
            return stats

    @contextlib.contextmanager
    def writing(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction, this thread's and (BEGIN IMMEDIATE) this process's alone."""
        with self._catchup_lock:
            _patiently(conn, "BEGIN IMMEDIATE", self.write_wait)
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            self._shrink_wal(conn)

    def _shrink_wal(self, conn: sqlite3.Connection) -> None:
        """Checkpoint and truncate a log grown past :data:`WAL_SHRINK_BYTES` (a reader still
        using it makes the checkpoint give up, not fail: the next large write tries again)."""
        try:
            size = Path(str(self.path) + "-wal").stat().st_size
        except OSError:
            return
        if size > WAL_SHRINK_BYTES:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _clear(self, conn: sqlite3.Connection) -> None:
        for table in ("memories", "tags", "edges", "versions", "commits", "problems"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute("DELETE FROM meta WHERE key IN ('commit', ?)", (MEMORY_COUNT_KEY,))

    def _catch_up_locked(
        self, conn: sqlite3.Connection, tip: pygit2.Commit | None, progress: Progress | None
    ) -> IndexStats:
        repo = self.db.repo
        # Another process may have caught up while this one waited for the write lock.
        row = conn.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        indexed = str(row[0]) if row is not None else None
        tip_hex = str(tip.id) if tip is not None else None
        stats = IndexStats(commit=tip_hex, memories=0, versions=0)
        if indexed == tip_hex and indexed is not None:
            self._apply_providers(conn, repo, indexed, indexed, [], [])
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
                self._clear(conn)
                old = None
                stats.rebuilt = True
        if tip is None:
            self._clear(conn)
            # "" stands for "no commit": providers refill once, then follow it cheaply.
            self._apply_providers(conn, repo, "", "", [], [])
            return stats
        # One new commit on top of the indexed one (every write's catch-up): its changes are
        # the tree diff, so the version rows take them from there instead of diffing again.
        known: dict[str, pygit2.Oid | None] | None = None
        if old is not None and list(tip.parent_ids) == [old.id]:
            known = paths_changed(repo, old.tree, tip.tree)
        # From no base every memory is new: _derive reads the counts of all of them from
        # the table, so the touched ids (a million after a bulk import) are not collected.
        touched: set[str] | None = set() if old is not None else None
        added: list[IndexedMemory] = []
        removed: list[IndexedMemory] = []
        # From no base (a rebuild, a first index, a rewritten branch) every provider refills
        # from the memories table in chunks (_apply_providers): collecting what was added
        # would only hold the whole store in memory (3 GB at a million memories).
        collect = old is not None
        # Into empty tables (a rebuild, a first index: a million files at a clone) no row
        # can be renamed or replaced: _fill_empty only decodes and inserts.
        empty = old is None and _tables_empty(conn)
        with _bounded_git(BUILD_GIT_CACHE if empty else None):
            stats.applied_commits = self._apply_versions(
                conn, repo, tip, old, progress, known, touched
            )
        if empty:
            # What the version rows left in libgit2's caches and in the C heap goes before
            # the fill.
            _drop_git_caches(repo)
            with _bounded_git(FILL_GIT_CACHE):
                self._fill_empty(conn, repo, changed_memory_files(repo, None, tip.tree))
        else:
            self._apply_tree_diff(
                conn,
                repo,
                old.tree if old is not None else None,
                tip.tree,
                added if collect else None,
                removed if collect else None,
                known,
            )
        self._derive(conn, added, touched or set(), rebuilt=old is None)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('commit', ?)", (tip_hex,))
        _record_store_config(conn, repo, tip)
        assert tip_hex is not None
        self._apply_providers(
            conn, repo, tip_hex, str(old.id) if old is not None else None, added, removed
        )
        stats.memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", (MEMORY_COUNT_KEY, str(stats.memories))
        )
        stats.versions = conn.execute("SELECT count(*) FROM versions").fetchone()[0]
        stats.problems = queries.problem_rows(conn)
        return stats

    def _apply_tree_diff(
        self,
        conn: sqlite3.Connection,
        repo: pygit2.Repository,
        old: pygit2.Tree | None,
        new: pygit2.Tree,
        added: list[IndexedMemory] | None,
        removed: list[IndexedMemory] | None,
        known: dict[str, pygit2.Oid | None] | None = None,
    ) -> None:
        """Rows for what changed between the trees; what left and came is appended to
        ``removed`` and ``added`` unless they are None (nobody will read them)."""
        changes = known.items() if known is not None else changed_memory_files(repo, old, new)
        for path, blob in changes:
            gone = self._forget(conn, path)
            if gone is not None and removed is not None:
                removed.append(gone)
            if blob is None:
                continue
            try:
                memory = self.decode(_memory_file(repo, path, blob), path)
            except GitmemError as exc:
                conn.execute(
                    "INSERT OR REPLACE INTO problems VALUES (?, ?)",
                    (raw_path(path), raw_path(str(exc))),
                )
                continue
            inserted = self._insert(conn, memory, str(blob))
            if added is not None:
                added.append(inserted)

    def _fill_empty(
        self,
        conn: sqlite3.Connection,
        repo: pygit2.Repository,
        changes: Iterable[tuple[str, pygit2.Oid | None]],
    ) -> None:
        """Rows for every memory file of a tree, into empty tables, :data:`FILL_BATCH` files
        at a time in the tree's order."""
        batch: list[Decoded] = []
        for path, blob in changes:
            if blob is None:
                continue  # nothing is removed from an empty table
            try:
                memory = self.decode(_memory_file(repo, path, blob), path)
                batch.append((path, memory.id, _row_parts(memory, str(blob))))
            except GitmemError as exc:  # a problem row
                batch.append((path, None, str(exc)))
            if len(batch) >= FILL_BATCH:
                self._store_decoded(conn, batch)
                batch.clear()
        self._store_decoded(conn, batch)

    def _store_decoded(self, conn: sqlite3.Connection, decoded: list[Decoded]) -> None:
        # A batch's tags and edges go in with one statement each, after its rows (one per
        # memory was a tenth of storing them): the same rows in the same order, as no row
        # of those tables is read meanwhile but by _forget, which they are written before.
        links = _Links()
        for path, memory_id, parts in decoded:
            if memory_id is None or isinstance(parts, str):
                conn.execute(
                    "INSERT OR REPLACE INTO problems VALUES (?, ?)",
                    (raw_path(path), raw_path(str(parts))),
                )
                continue
            _insert_parts(conn, parts, links)
        links.write(conn)

    def _forget(self, conn: sqlite3.Connection, path: str) -> IndexedMemory | None:
        """Delete the row at ``path``; returns what it held, for the row providers."""
        conn.execute("DELETE FROM problems WHERE path = ?", (raw_path(path),))
        row = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE path = ?", (raw_path(path),)
        ).fetchone()
        if row is None:
            return None
        rowid, memory_id, blob = row[0], row[1], row[3]
        gone = IndexedMemory(rowid, blob, self._memory(row))
        conn.execute("DELETE FROM memories WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM tags WHERE memory = ?", (rowid,))
        conn.execute("DELETE FROM edges WHERE src = ?", (memory_id,))
        return gone

    def _apply_providers(
        self,
        conn: sqlite3.Connection,
        repo: pygit2.Repository,
        tip_hex: str,
        base: str | None,
        added: list[IndexedMemory],
        removed: list[IndexedMemory],
    ) -> None:
        """Hand the change from ``base`` to ``tip_hex`` to every provider that reflects
        ``base``; refill the others (new version, missed commits, or a rebuild)."""
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'provider:%'"))
        refill: list[RowProvider] = []
        for provider in self._providers():
            state = meta.get(provider_key(provider))
            if base is None or state != f"{provider.version} {base}":
                refill.append(provider)
                continue
            if not (added or removed):
                self._followed(conn, provider, tip_hex)
                continue
            # A provider's failure must not take the store's reads down with it: its own
            # work is undone (savepoint), its state left behind so a later catch-up
            # refills it, and this process stops retrying at this tip.
            conn.execute("SAVEPOINT provider")
            try:
                provider.apply(conn, repo, RowChanges(False, tuple(added), tuple(removed)))
            except Exception as exc:
                self._provider_failed(conn, provider, tip_hex, exc)
                continue
            conn.execute("RELEASE provider")
            self._followed(conn, provider, tip_hex)
        self._refill(conn, repo, tip_hex, refill)

    def _followed(self, conn: sqlite3.Connection, provider: RowProvider, tip_hex: str) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)",
            (provider_key(provider), f"{provider.version} {tip_hex}"),
        )

    def _provider_failed(
        self, conn: sqlite3.Connection, provider: RowProvider, tip_hex: str, exc: Exception
    ) -> None:
        """Undo what ``provider`` wrote since the savepoint, and leave its tables empty."""
        if isinstance(exc, sqlite3.DatabaseError) and (
            type(exc) is sqlite3.DatabaseError or _is_damage(exc)
        ):
            raise exc  # the database itself is damaged: the caller rebuilds it
        conn.execute("ROLLBACK TO provider")
        conn.execute("RELEASE provider")
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)",
            (provider_key(provider), f"{provider.version} failed"),
        )
        self._failed.add((provider.name, tip_hex))
        log.warning(
            "index: row provider %s failed (%s: %s); its tables are left empty",
            provider.name, type(exc).__name__, exc,
        )
        if provider.tables:
            self._empty(conn, provider)

    def _empty(self, conn: sqlite3.Connection, provider: RowProvider) -> None:
        """Leave a failed provider's tables existing and empty, so its queries find nothing
        rather than rows of another commit."""
        with contextlib.suppress(sqlite3.Error):
            for table in provider.tables:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            for statement in provider.ddl:
                conn.execute(statement)

    def _refill(
        self,
        conn: sqlite3.Connection,
        repo: pygit2.Repository,
        tip_hex: str,
        providers: list[RowProvider],
    ) -> None:
        """Drop these providers' tables, create them again and hand them every current
        memory: one pass over the memories table for all of them (each row is made into a
        Memory once, not once per provider: a third of a rebuild's time with three).

        The pass runs under one savepoint; a provider that fails undoes the whole pass, is
        left empty (as a failure of its incremental apply is), and the pass runs again for
        the others, so no provider ever keeps rows another one's failure half-wrote."""
        pending = list(providers)
        while pending:
            conn.execute("SAVEPOINT provider")
            current = pending[0]
            try:
                for provider in pending:
                    current = provider
                    for table in provider.tables:
                        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
                    for statement in provider.ddl:
                        conn.execute(statement)
                    provider.apply(conn, repo, RowChanges(True))
                cursor = conn.execute(f"SELECT {MEMORY_COLUMNS} FROM memories ORDER BY rowid")
                while True:
                    rows = cursor.fetchmany(FULL_FILL_CHUNK)
                    if not rows:
                        break
                    chunk = tuple(IndexedMemory(r[0], r[3], self._memory(r)) for r in rows)
                    for provider in pending:
                        current = provider
                        provider.apply(conn, repo, RowChanges(True, chunk))
            except Exception as exc:
                self._provider_failed(conn, current, tip_hex, exc)
                pending.remove(current)
                continue
            conn.execute("RELEASE provider")
            for provider in pending:
                self._followed(conn, provider, tip_hex)
            return

    def _insert(self, conn: sqlite3.Connection, memory: Memory, blob: str) -> IndexedMemory:
        return IndexedMemory(_insert_parts(conn, _row_parts(memory, blob)), blob, memory)

    def _apply_versions(
        self,
        conn: sqlite3.Connection,
        repo: pygit2.Repository,
        tip: pygit2.Commit,
        old: pygit2.Commit | None,
        progress: Progress | None,
        known: dict[str, pygit2.Oid | None] | None = None,
        touched: set[str] | None = None,
    ) -> int:
        """Version rows of the commits after ``old`` up to ``tip``; ``known``: what ``tip``
        changed against its only parent ``old``, already diffed. The ids of the rows go
        into ``touched``."""
        total = 0
        if known is not None:
            source: Iterable[pygit2.Commit] = [tip]  # the one new commit: no walk to sort
            total = 1
        elif progress is not None:
            commits = list(_walk_new(conn, repo, tip, old))
            total = len(commits)
            source = commits
        else:
            source = _walk_new(conn, repo, tip, old)
        rows: list[tuple[Any, ...]] = []
        gens: dict[str, int] = {}
        new_commits: list[tuple[str, int]] = []
        count = 0
        for commit in source:
            count += 1
            gen = 1 + max(
                (self._generation(conn, repo, p, gens) for p in commit.parent_ids), default=0
            )
            gens[str(commit.id)] = gen
            new_commits.append((str(commit.id), gen))
            more = version_rows(repo, commit, gen, known if commit.id == tip.id else None)
            for row in more:
                if touched is not None:
                    touched.add(row[0])
                rows.append(row)
                if len(rows) >= VERSION_BATCH:
                    insert_versions(conn, rows, new_commits)
                    rows.clear()
                    new_commits.clear()
            if len(new_commits) >= VERSION_BATCH:
                insert_versions(conn, rows, new_commits)
                rows.clear()
                new_commits.clear()
            if progress is not None and (count % 500 == 0 or count == total):
                progress(count, total)
        insert_versions(conn, rows, new_commits)
        return count

    def _derive(
        self,
        conn: sqlite3.Connection,
        added: list[IndexedMemory],
        touched: set[str],
        *,
        rebuilt: bool,
    ) -> None:
        """The derived version and updated_at (gitmem.store.derived) of every memory this
        catch-up touched (rows added, or new version rows): the count and the newest time
        of its version rows. A row inserted from its file holds version 1 and its
        created_at, right for a memory without versions.

        ``rebuilt``: every row was inserted by this catch-up, so all of them are read from
        the table a page at a time (``touched`` and ``added`` are not needed)."""
        if rebuilt and not added:
            cursor = conn.execute(
                "SELECT id, count(*), max(time_us) FROM versions WHERE counts = 1 GROUP BY id"
            )
            while page := cursor.fetchmany(VERSION_BATCH):
                conn.executemany(
                    "UPDATE memories SET version = ?, updated_at = ?, updated_us = ? WHERE id = ?",
                    [(*_derived_columns(count, newest), str(mid)) for mid, count, newest in page],
                )
            return
        fresh = {item.memory.id: i for i, item in enumerate(added)}
        wanted = touched | set(fresh)
        if not wanted:
            return
        found = _version_counts(conn, sorted(wanted))
        for memory_id in wanted:
            row = conn.execute(
                "SELECT created_at FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                continue
            count, newest = found.get(memory_id, (0, 0))
            if count:
                version, updated_at, updated_us = _derived_columns(count, newest)
            else:
                created = dt.datetime.fromisoformat(row[0])
                version, updated_at, updated_us = 1, created.isoformat(), micros(created)
            conn.execute(
                "UPDATE memories SET version = ?, updated_at = ?, updated_us = ? WHERE id = ?",
                (version, updated_at, updated_us, memory_id),
            )
            at = fresh.get(memory_id)
            if at is not None:
                memory = added[at].memory
                updated = dt.datetime.fromisoformat(updated_at)
                added[at] = replace(
                    added[at], memory=replace(memory, version=version, updated_at=updated)
                )

    def _generation(
        self,
        conn: sqlite3.Connection,
        repo: pygit2.Repository,
        oid: pygit2.Oid,
        gens: dict[str, int],
    ) -> int:
        """A commit's generation: 1 for a root, else one more than its highest parent's.

        Every ancestor of the indexed commit is in the ``commits`` table; one that is
        not (a table damaged by hand) is counted again from its ancestry.
        """
        key = str(oid)
        gen = gens.get(key)
        if gen is not None:
            return gen
        row = conn.execute("SELECT gen FROM commits WHERE id = ?", (key,)).fetchone()
        if row is not None:
            gens[key] = int(row[0])
            return gens[key]
        try:
            for commit in repo.walk(oid, SortMode.TOPOLOGICAL | SortMode.REVERSE):
                gens.setdefault(
                    str(commit.id),
                    1 + max((gens.get(str(p), 0) for p in commit.parent_ids), default=0),
                )
        except (KeyError, ValueError, pygit2.GitError):
            gens.setdefault(key, 0)  # a parent missing from a shallow repository
        return gens.get(key, 0)

    # -- queries -------------------------------------------------------------------------

    def _memory(self, row: Sequence[Any]) -> Memory:
        return queries.memory_from_row(row, self.scope)

    @_recovering
    def select(
        self,
        *,
        category: str | None = None,
        tags: Sequence[str] = (),
        include_superseded: bool = False,
        include_archived: bool = False,
        layer: str | None = None,
        project: str | None = None,
    ) -> list[Memory]:
        where, params = memory_filters(
            category=category,
            tags=tags,
            include_superseded=include_superseded,
            include_archived=include_archived,
            layer=layer,
            project=project,
        )
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories m {where} ORDER BY created_us, id"
        with self._query() as conn:
            return [self._memory(r) for r in conn.execute(sql, params)]

    @_recovering
    def get(self, memory_id: str) -> Memory | None:
        with self._query() as conn:
            row = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
        return None if row is None else self._memory(row)

    @_recovering
    def successors(self, memory_id: str) -> list[Memory]:
        with self._query() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE supersedes = ? ORDER BY id",
                (memory_id,),
            ).fetchall()
        return [self._memory(r) for r in rows]

    @_recovering
    def versions(self, ids: Sequence[str]) -> list[VersionRow]:
        """Version rows of these memories, oldest first.

        A commit comes after its parents (by generation), then by author time and
        commit id, so the order depends on the history alone, never on when the
        index caught up with it; rows of one commit follow the order of ``ids``.
        """
        marks = ", ".join("?" for _ in ids)
        position: dict[str, int] = {}
        for i, memory_id in enumerate(ids):
            position.setdefault(memory_id, i)
        with self._query() as conn:
            rows = conn.execute(
                "SELECT id, path, commit_id, time_us, author, agent, op, counts, blob, gen "
                f"FROM versions WHERE id IN ({marks})",
                list(ids),
            ).fetchall()
        rows.sort(key=lambda r: (r[9], r[3], r[2], position[r[0]]))
        return [
            VersionRow(
                id=r[0],
                path=r[1],
                commit=r[2],
                time=dt.datetime.fromtimestamp(r[3] / 1_000_000, dt.UTC),
                author=r[4],
                agent=r[5],
                op=r[6],
                counts=bool(r[7]),
                blob=r[8],
            )
            for r in rows
        ]

    @_recovering
    def last_blob(self, memory_id: str) -> str | None:
        """The newest blob this memory had in any indexed commit (for deleted ones), newest
        in the order of :meth:`versions`, whenever the index caught up."""
        with self._query() as conn:
            row = conn.execute(
                "SELECT blob FROM versions WHERE id = ? AND blob IS NOT NULL "
                "ORDER BY gen DESC, time_us DESC, commit_id DESC LIMIT 1",
                (memory_id,),
            ).fetchone()
        return None if row is None else row[0]

    @_recovering
    def problems(self) -> list[tuple[str, str]]:
        with self._query() as conn:
            return queries.problem_rows(conn)

    @_recovering
    def stale(self, before: dt.datetime) -> list[Memory]:
        """Current memories whose ``updated_at`` is older than ``before``."""
        with self._query() as conn:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE updated_us < ? ORDER BY updated_us",
                (micros(before),),
            ).fetchall()
        return [self._memory(r) for r in rows]

    @_recovering
    def fts(
        self,
        query: str,
        *,
        title_text: str,
        limit: int,
        filters: dict[str, Any],
    ) -> list[Hit]:
        """FTS5 query ranked by bm25 (title weighted), after a title-match tier.

        Raises sqlite3.OperationalError for a malformed FTS5 query; the caller
        decides whether to fall back to a literal search.
        """
        with self._query() as conn:
            return queries.fts_hits(
                conn, self.scope, query, title_text=title_text, limit=limit, filters=filters
            )

    @_recovering
    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on a connection caught up with the tip (for modules that own
        tables through a :class:`RowProvider`, or query the core ones in their own way).

        ``query`` must only read, and may run twice: a database that fails as corrupt is
        rebuilt and the query run again.
        """
        with self._query() as conn:
            return query(conn)

    def load(self, conn: sqlite3.Connection, rowids: Iterable[int]) -> dict[int, Memory]:
        """The memories of these ``memories.rowid`` values (inside :meth:`read`)."""
        return queries.load_memories(conn, rowids, self.scope)

    @_recovering
    def scan(self, *, filters: dict[str, Any]) -> list[Memory]:
        """Every current memory passing the filters, by path (for regex and substring search)."""
        where, params = memory_filters(**filters)
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories m {where} ORDER BY path"
        with self._query() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [self._memory(row) for row in rows]

    @_recovering
    def rows(
        self,
        columns: Sequence[str],
        *,
        ids: Iterable[str] | None = None,
        include_superseded: bool = False,
        include_archived: bool = False,
    ) -> list[tuple[Any, ...]]:
        """A few columns of the current memories, as tuples, oldest first (``created_us``,
        then id): what :meth:`select` finds, without building a :class:`Memory` per row.

        For callers that need some fields of every memory (staleness, code-aware checks on
        every git hook): at 10k memories, decoding whole memories costs more than the query.
        ``columns`` are names of the ``memories`` table (:data:`ROW_COLUMNS`); values are as
        stored: ``created_us``/``updated_us`` are microseconds since the epoch, ``tags``,
        ``related`` and ``extra`` JSON text (dates, timestamps and maps with non-text keys
        as ``{"$gitmem": kind, "v": ...}`` objects), ``blob`` the file's git blob id. ``ids``
        keeps only those memories (ids not in the index are left out, without error).
        Catches up first, like every query. Raises InvalidInputError for an unknown column.
        """
        with self._query() as conn:
            return queries.column_rows(
                conn,
                columns,
                ids=ids,
                include_superseded=include_superseded,
                include_archived=include_archived,
            )

    @_recovering
    def count(self, *, include_superseded: bool = True, include_archived: bool = True) -> int:
        """How many memories the index holds (by default all: superseded and archived ones
        too); counted in SQL, so a million memories cost no memory."""
        where, params = memory_filters(
            include_superseded=include_superseded, include_archived=include_archived
        )
        with self._query() as conn:
            row = conn.execute(f"SELECT count(*) FROM memories m {where}", params).fetchone()
            return int(row[0])


class ScratchIndex(Index):
    """The core tables of one commit, built in a file the caller names, without any row
    provider's: the rows a rebuild at that commit would make, beside the store's own
    index and without touching it.

    ``gitmem doctor`` asks one about the memories when the store's index disagrees with git
    (the answers must not rest on the damaged index, and decoding the store into memory
    would hold every memory: GBs at a million). Pinned to ``commit``, it never moves to a
    newer tip, so what it says can be set beside an index that reflects that commit.
    """

    def __init__(
        self, db: GitDB, decode: Decoder, scope: Scope, path: Path, commit: str | None
    ) -> None:
        super().__init__(db, decode, scope)
        self.path = path
        self.commit = commit

    def _tip(self) -> pygit2.Commit | None:
        return get_commit(self.db.repo, self.commit) if self.commit is not None else None

    def _providers(self) -> Iterable[RowProvider]:
        return ()


def _version_counts(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """For each of ``ids`` with versions: their count and the newest author time (µs)."""
    found: dict[str, tuple[int, int]] = {}
    for at in range(0, len(ids), 500):
        chunk = list(ids[at : at + 500])
        marks = ", ".join("?" for _ in chunk)
        for memory_id, count, newest in conn.execute(
            "SELECT id, count(*), max(time_us) FROM versions "
            f"WHERE counts = 1 AND id IN ({marks}) GROUP BY id",
            chunk,
        ):
            found[str(memory_id)] = (int(count), int(newest))
    return found


def _derived_columns(count: int, newest_us: int) -> tuple[int, str, int]:
    """(version, updated_at, updated_us) of a memory with ``count`` versions, the newest
    made at ``newest_us``."""
    when = dt.datetime.fromtimestamp(newest_us // 1_000_000, dt.UTC)
    return count, when.isoformat(), micros(when)


def _walk_new(
    conn: sqlite3.Connection, repo: pygit2.Repository, tip: pygit2.Commit, old: pygit2.Commit | None
) -> Iterable[pygit2.Commit]:
    """The commits after ``old`` up to ``tip``, parents first.

    A walk that hides ``old`` stops by commit time, so where a clock ran behind (a commit
    older than its parents) it still yields some of ``old``'s ancestors: those already in
    the ``commits`` table are skipped, or their versions would count twice."""
    walker = repo.walk(tip.id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    if old is None:
        return walker
    walker.hide(old.id)
    known = "SELECT 1 FROM commits WHERE id = ?"
    return (c for c in walker if conn.execute(known, (str(c.id),)).fetchone() is None)


def _record_store_config(
    conn: sqlite3.Connection, repo: pygit2.Repository, tip: pygit2.Commit | None
) -> None:
    """What the tip's gitmem.yaml says of the store (its format and scope) in ``meta``, so a
    reader of a current index knows them without opening git (queries.open_current). An
    unreadable config is recorded as ``{}``: that reader then leaves it to the full path,
    which reports the problem."""
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


_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_IOERR = 5, 6, 10


def _patiently(conn: sqlite3.Connection, statement: str, wait: float) -> None:
    """Run ``statement``, trying again while another connection holds the lock, for up to
    ``wait`` seconds. BEGIN IMMEDIATE waits out the busy timeout on each try (another
    process's rebuild of a large store outlasts it); ``PRAGMA journal_mode`` answers
    "database is locked" at once, without the busy handler, while another connection
    is making a new database (several processes' first query at the same moment)."""
    deadline = time.monotonic() + wait
    delay = 0.001
    while True:
        try:
            conn.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (_SQLITE_BUSY, _SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """A database that is corrupt, not a database, or cannot be read (SQLITE_IOERR: say a
    file truncated or deleted under it), as opposed to busy, locked or a bad query."""
    if not isinstance(exc, sqlite3.OperationalError):
        return True
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_IOERR


