"""The index database file: its tables, and every connection made by :func:`connect`, so a
planted or damaged file cannot run a query of its choosing or one without end."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitmem.base import logs

log = logs.get(__name__)

SCHEMA_VERSION = 9
"""The layout of the core tables (:data:`SCHEMA`): a change of it rebuilds every table."""
STORE_CONFIG_KEY = "store"
"""``meta`` key: the format and scope the indexed tip's gitmem.yaml gives, as JSON."""
MEMORY_COUNT_KEY = "memories"
"""``meta`` key: how many rows ``memories`` holds, written by every catch-up that changes it."""

SCHEMA = """
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
    body TEXT NOT NULL,
    valid_from_us INTEGER,
    valid_until_us INTEGER
);
CREATE INDEX memories_created ON memories (created_us, id);
CREATE INDEX memories_updated ON memories (updated_us);
CREATE INDEX memories_category ON memories (category);
CREATE INDEX memories_supersedes ON memories (supersedes);
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
    counts INTEGER NOT NULL -- 1: the commit is a version of the memory (memory_versions.py)
);
CREATE INDEX versions_id ON versions (id, seq);
CREATE TABLE commits (id TEXT PRIMARY KEY, gen INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE problems (path TEXT PRIMARY KEY, message TEXT NOT NULL);
"""
"""The core tables. A row provider's tables (gitmem.store.row_providers) are its own."""
CORE_TABLES = frozenset({"meta", "memories", "tags", "edges", "versions", "commits", "problems"})

QUERY_SECONDS = 120.0
"""Seconds a statement may run from its ``execute`` before SQLite interrupts it: far past
any of gitmem's own, so only a damaged or planted index meets it."""
PROGRESS_STEPS = 10_000
"""SQLite virtual-machine steps between two looks at the clock."""
TIMED_OUT = (
    "a query of the index ran past its time bound; the index may be damaged or not "
    "gitmem's own"
)
REINDEX_HINT = "gitmem reindex rebuilds it from git"
_SQL_TOKEN = re.compile(
    r"""\s+|--[^\n]*|/\*.*?(?:\*/|$)|'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|\w+|.""",
    re.DOTALL,
)


class BoundedConnection(sqlite3.Connection):
    """A connection whose statements run under SQLite's progress handler: one that works
    :data:`QUERY_SECONDS` past the last statement started is interrupted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = time.monotonic()
        self.set_progress_handler(self._past_bound, PROGRESS_STEPS)

    def _past_bound(self) -> bool:
        return time.monotonic() - self.started > QUERY_SECONDS

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.started = time.monotonic()
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        self.started = time.monotonic()
        return super().executemany(sql, parameters)


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is a statement :class:`BoundedConnection` interrupted."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted"


def connect(path: Path, *, read_only: bool, timeout: float) -> sqlite3.Connection:
    """A connection to the index file at ``path`` (read-only: never writes nor creates it),
    its statements under a time bound, ``trusted_schema`` off. Raises sqlite3.DatabaseError,
    as for a corrupt file, when the file or its WAL is not a regular file or the schema
    holds what gitmem never makes (:func:`unexpected_schema`)."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(f"{path}{suffix}").st_mode):
                raise sqlite3.DatabaseError(f"{path}{suffix} is not a file gitmem made")
    where = f"{path.resolve().as_uri()}?mode=ro" if read_only else os.fspath(path)
    conn = sqlite3.connect(
        where, uri=read_only, timeout=timeout, isolation_level=None, factory=BoundedConnection
    )
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        why = unexpected_schema(conn)
        if why is not None:
            raise sqlite3.DatabaseError(f"{path} is not an index gitmem made: {why}")
    except BaseException:
        conn.close()
        raise
    return conn


def unexpected_schema(conn: sqlite3.Connection) -> str | None:
    """What in the schema gitmem never makes (None: nothing): a view or a trigger, a core
    table that is not a plain table, or a virtual table other than an FTS5 table that
    keeps its own content."""
    for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master"):
        if kind in ("view", "trigger"):
            return f"a {kind} {name!r}"
        words = _sql_words(str(sql or ""))
        virtual = [w.upper() for w in words[:3]] == ["CREATE", "VIRTUAL", "TABLE"]
        if name in CORE_TABLES and (kind != "table" or virtual):
            return f"{name!r} is not a plain table"
        if virtual and not _own_content_fts5(words):
            return f"the virtual table {name!r}"
    return None


def _sql_words(sql: str) -> list[str]:
    """The tokens of ``sql``, comments and blanks left out (quoted ones kept quoted)."""
    return [
        t for t in _SQL_TOKEN.findall(sql) if not t.isspace() and not t.startswith(("--", "/*"))
    ]


def _own_content_fts5(words: Sequence[str]) -> bool:
    """Whether a ``CREATE VIRTUAL TABLE`` makes an FTS5 table with no external content."""
    upper = [w.upper() for w in words]
    if "USING" not in upper:
        return False
    at = upper.index("USING")
    if upper[at + 1 : at + 3] != ["FTS5", "("]:
        return False
    for i, word in enumerate(upper[at + 3 :], start=at + 3):
        named = word == "CONTENT" and upper[i + 1 : i + 2] == ["="]
        if named and upper[i + 2 : i + 3] not in (["''"], ['""']):
            return False
    return True


WAL_SHRINK_BYTES = 32 * 1024 * 1024
"""A write-ahead log larger than this after a write is checkpointed and cut: gitmem's
commands exit without closing the index, so SQLite never removes it."""

_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_IOERR = 5, 6, 10


def open_writable(path: Path, busy_timeout: float, write_wait: float) -> sqlite3.Connection:
    """A connection to the index file at ``path`` in WAL mode, made (or remade, when it is
    damaged or of another :data:`SCHEMA_VERSION`) with the core tables."""
    for attempt in range(2):
        conn = None
        try:
            # A schema gitmem never makes fails here as a corrupt file does.
            conn = connect(path, read_only=False, timeout=busy_timeout)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            patiently(conn, "PRAGMA journal_mode = WAL", busy_timeout)
            conn.execute("PRAGMA synchronous = NORMAL")
            _ensure_schema(conn, write_wait)
            return conn
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if attempt or not is_damage(exc):
                raise
            log.warning("index %s is unreadable (%s); rebuilding it", path, exc)
            discard_files(path)
    raise AssertionError("unreachable")


def _schema_version(conn: sqlite3.Connection) -> str | None:
    with contextlib.suppress(sqlite3.OperationalError):
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        return None if row is None else str(row[0])
    return None


def _ensure_schema(conn: sqlite3.Connection, wait: float) -> None:
    if _schema_version(conn) == str(SCHEMA_VERSION):
        return
    patiently(conn, "BEGIN IMMEDIATE", wait)
    try:
        if _schema_version(conn) != str(SCHEMA_VERSION):
            # Virtual tables first: dropping one drops its shadow tables with it.
            tables = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                "'sqlite_%' ORDER BY sql NOT LIKE 'CREATE VIRTUAL%'"
            ).fetchall()
            for (table,) in tables:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            # executescript would commit the open transaction; run statements one by one.
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def discard_files(path: Path) -> None:
    """Delete the index file at ``path`` with its WAL and shared-memory files."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()


def shrink_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Checkpoint and truncate a log grown past :data:`WAL_SHRINK_BYTES` (a reader using it
    makes the checkpoint give up; the next large write tries again)."""
    try:
        size = Path(str(path) + "-wal").stat().st_size
    except OSError:
        return
    if size > WAL_SHRINK_BYTES:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def patiently(conn: sqlite3.Connection, statement: str, wait: float) -> None:
    """Run ``statement``, trying again while another connection holds the lock, for up to
    ``wait`` seconds (another process's rebuild outlasts the busy timeout, and ``PRAGMA
    journal_mode`` answers "locked" at once while another makes a new database)."""
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


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """A database that is corrupt, not a database, or cannot be read (SQLITE_IOERR), as
    opposed to busy, locked or a bad query."""
    if not isinstance(exc, sqlite3.OperationalError):
        return True
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_IOERR
