"""The derived SQLite/FTS5 index of one store (one database per branch, WAL mode), caught up
with the branch tip before every query; a missing, corrupt or older one is rebuilt."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pygit2

from gitmem.base import logs, paths
from gitmem.base.errors import StoreError
from gitmem.format.model import Scope
from gitmem.git.db import GitDB
from gitmem.git.objects import get_commit
from gitmem.store import index_schema
from gitmem.store.index_catchup import CatchUp, Decoder, Progress, clear, version_counts
from gitmem.store.index_queries import Queries
from gitmem.store.index_rows import IndexStats
from gitmem.store.index_schema import STORE_CONFIG_KEY
from gitmem.store.row_providers import PROVIDERS, RowProvider, provider_key, provider_state

log = logs.get(__name__)

T = TypeVar("T")


class Index(Queries):
    """The SQLite index of one repository. Every public query catches up first."""

    def __init__(self, db: GitDB, decode: Decoder, scope: Scope) -> None:
        self.db = db
        self.decode = decode
        self.scope = scope
        # One database per branch: else two branches' writes taking turns rebuild it.
        self.path = db.state_dir / paths.index_name(db.branch)
        self._local = threading.local()
        self._catchup_lock = threading.Lock()
        self._failed: set[tuple[str, str]] = set()
        """(row provider, tip) pairs whose rows failed in this process: not retried at that tip."""
        self.busy_timeout = 30.0
        """Seconds one SQLite call waits for another connection's lock."""
        self.write_wait = 1800.0
        """Seconds a catch-up waits for another process's catch-up or rebuild to finish."""

    def connect(self) -> sqlite3.Connection:
        """This thread's connection to the index file, opened (the schema made) on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            if self._file_id() == self._local.file_id:
                return conn
            # Deleted or replaced under an open connection: let go of the old file.
            self.close()
        self.path.parent.mkdir(exist_ok=True)
        if self.db.branch != paths.DEFAULT_BRANCH and not self.path.exists():
            _seed(self.path, self.db.state_dir / paths.INDEX_DB)
        conn = index_schema.open_writable(self.path, self.busy_timeout, self.write_wait)
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

    def close(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """Throw away a database that failed as corrupt, so the retry rebuilds it."""
        if index_schema.timed_out(exc):
            raise StoreError(
                f"{self.path}: {index_schema.TIMED_OUT}", hint=index_schema.REINDEX_HINT
            ) from exc
        if not index_schema.is_damage(exc):
            raise exc  # locked, busy, a malformed FTS query: not corruption
        log.warning("index %s failed (%s); rebuilding it", self.path, exc)
        self.close()
        index_schema.discard_files(self.path)

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction (no catch-up: call :meth:`catch_up`
        first), for a row provider's own queries; call no other method of the index in it."""
        conn = self.connect()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")

    def version_counts(self, ids: Sequence[str]) -> tuple[str | None, dict[str, tuple[int, int]]]:
        """(the commit the index reflects, and for each of ``ids`` with versions: their count
        and the newest one's author time in µs), as it stands (no catch-up)."""
        with self.reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
            found = version_counts(conn, ids)
        return (None if row is None else str(row[0])), found

    def meta(self) -> dict[str, str]:
        """The ``meta`` table as it stands (not caught up)."""
        return {str(k): str(v) for k, v in self.connect().execute("SELECT key, value FROM meta")}

    def catch_up(self, progress: Progress | None = None) -> IndexStats | None:
        """Bring the index to the branch tip. Returns None when it already was there."""
        tip = self._tip()
        tip_hex = str(tip.id) if tip is not None else None
        conn = self.connect()
        if self._current(conn, tip_hex):
            return None
        with self.writing(conn):
            return self._catch_up(conn, progress)

    def _tip(self) -> pygit2.Commit | None:
        return self.db.tip()

    def _providers(self) -> Iterable[RowProvider]:
        return PROVIDERS.values()

    def _current(self, conn: sqlite3.Connection, tip_hex: str | None) -> bool:
        """Whether the core tables and every registered provider's reflect ``tip_hex``."""
        if tip_hex is None:
            return False
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("commit") != tip_hex or STORE_CONFIG_KEY not in meta:
            return False
        return all(
            meta.get(provider_key(p)) == provider_state(p, tip_hex)
            or (p.name, tip_hex) in self._failed
            for p in self._providers()
        )

    def rebuild(self, progress: Progress | None = None) -> IndexStats:
        """Forget everything and index the whole history again."""
        conn = self.connect()
        with self.writing(conn):
            clear(conn)
            # Every provider refills its tables too, whatever commit they say they follow.
            conn.execute("DELETE FROM meta WHERE key LIKE 'provider:%'")
            stats = self._catch_up(conn, progress)
            stats.rebuilt = True
            return stats

    @contextlib.contextmanager
    def writing(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction, this thread's and (BEGIN IMMEDIATE) this process's alone."""
        with self._catchup_lock:
            index_schema.patiently(conn, "BEGIN IMMEDIATE", self.write_wait)
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            index_schema.shrink_wal(conn, self.path)

    def _catch_up(self, conn: sqlite3.Connection, progress: Progress | None) -> IndexStats:
        # The tip is read under the write lock: another process may have indexed a newer
        # one meanwhile, and a tip read before would not descend from it.
        providers = list(self._providers())
        run = CatchUp(conn, self.db.repo, self.decode, self.scope, providers, self._failed)
        return run.run(self._tip(), progress)

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on a connection caught up with the tip. It must only read, and may
        run twice: a database that fails as corrupt is rebuilt and the query run again."""
        try:
            conn = self.connect()
            self.catch_up()
            return query(conn)
        except sqlite3.DatabaseError as exc:
            self._recover(exc)
        conn = self.connect()
        self.catch_up()
        return query(conn)


class ScratchIndex(Index):
    """The core tables of one commit, in a file the caller names, without row providers:
    what ``gitmem doctor`` asks when the store's index disagrees with git."""

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


def _seed(path: Path, main: Path) -> None:
    """Start a branch's index as a copy of main's (the branch was made from main), so its
    first catch-up goes on from there instead of indexing the whole history again."""
    if not main.is_file():
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".seed")
    os.close(fd)
    with contextlib.suppress(sqlite3.Error, OSError):
        src, dst = sqlite3.connect(main), sqlite3.connect(tmp)
        with contextlib.closing(src), contextlib.closing(dst):
            src.backup(dst)
        Path(tmp).replace(path)
    Path(tmp).unlink(missing_ok=True)
