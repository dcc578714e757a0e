"""The index's read queries, one SQL each; :func:`open_current` opens a current index
read-only so the command line answers without libgit2 (nothing here imports pygit2)."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from gitmem.base import logs, paths
from gitmem.base.clock import parse_timestamp
from gitmem.format.config import FORMAT
from gitmem.format.layout import forks_past, id_prefix, is_path_id, memory_path, one_by_prefix
from gitmem.format.model import Memory, Related, Relationship, Scope, Status, Trigger
from gitmem.store import lexical, vectors
from gitmem.store.index_rows import (
    MEMORY_COLUMNS,
    check_columns,
    chunks,
    cooked_path,
    from_micros,
    loads_json,
    marks,
    memory_filters,
)
from gitmem.store.index_schema import MEMORY_COUNT_KEY, SCHEMA_VERSION, STORE_CONFIG_KEY, connect
from gitmem.store.results import Problem, Version
from gitmem.store.row_providers import provider_key, provider_state

T = TypeVar("T")
log = logs.get(__name__)

FTS_WEIGHTS = "10.0, 1.0, 3.0, 5.0"
"""bm25 weights of the full-text columns (title, body, tags, names; idents unweighted: 1.0)."""


def memory_from_row(row: Sequence[Any], store_scope: Scope) -> Memory:
    """The :class:`Memory` of one ``SELECT MEMORY_COLUMNS`` row (its columns by position)."""
    return Memory(
        id=row[1],
        body=row[18],
        created_at=parse_timestamp(row[8]),
        updated_at=parse_timestamp(row[9]),
        version=int(row[10]),
        title=row[4],
        scope=Scope(row[5]) if row[5] else None,
        category=row[6],
        tags=tuple(loads_json(row[7])),
        supersedes=row[11],
        related=tuple(
            Related(r["id"], Relationship(r["relationship"])) for r in loads_json(row[12])
        ),
        agent=row[13],
        session_id=row[14],
        trigger=Trigger(row[15]) if row[15] else None,
        status=Status(row[16]),
        extra=loads_json(row[17]),
        path=cooked_path(row[2]),
        store_scope=store_scope,
        valid_from=from_micros(row[19]),
        valid_until=from_micros(row[20]),
    )


def memory_count(conn: sqlite3.Connection) -> int:
    """How many memories the index holds (``meta`` keeps the count)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (MEMORY_COUNT_KEY,)).fetchone()
    return 0 if row is None else int(row[0])


def load_memories(
    conn: sqlite3.Connection, rowids: Iterable[int], store_scope: Scope
) -> dict[int, Memory]:
    """The memories of these ``memories.rowid`` values."""
    out: dict[int, Memory] = {}
    for chunk in chunks(rowids):
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE rowid IN ({marks(chunk)})"
        for row in conn.execute(sql, chunk):
            out[int(row[0])] = memory_from_row(row, store_scope)
    return out


def problem_rows(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Problems by path in git's byte order (SQLite would put the byte paths last)."""
    found = conn.execute("SELECT path, message FROM problems")
    rows = [(cooked_path(p), cooked_path(m)) for p, m in found]
    rows.sort(key=lambda row: row[0].encode("utf-8", "surrogateescape"))
    return rows


def version_list(rows: list[tuple[Any, ...]], ids: Sequence[str]) -> list[Version]:
    """``versions`` rows (as :func:`commit_changes.version_rows` makes them) as versions in
    the history's order: by generation, author time, commit id (a merge that took one
    side's file as it was changed nothing), then the order of ``ids``."""
    position: dict[str, int] = {}
    for i, memory_id in enumerate(ids):
        position.setdefault(memory_id, i)
    rows = sorted(rows, key=lambda r: (r[8], r[3], r[2], position[r[0]]))
    return [
        Version(
            memory_id=r[0],
            version=None,
            commit=r[2],
            time=dt.datetime.fromtimestamp(r[3] / 1_000_000, dt.UTC),
            author=r[4],
            agent=r[5],
            op=r[6],
            memory=None,
            counted=bool(r[9]),
            source=(r[7], r[1]) if r[7] is not None else None,
        )
        for r in rows
    ]


class Queries:
    """The index's read queries, one SQL each, whoever asks: :class:`gitmem.store.index.Index`
    runs them caught up with the branch tip, :class:`CurrentIndex` on an index that already
    is. Filters (``**filters``) are those of :func:`memory_filters`."""

    scope: Scope
    semantic: ClassVar[bool] = True
    """Whether recall may rank by the store's vectors here (a tree's scratch index has none)."""

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` (it only reads) on a connection that reflects the tip."""
        raise NotImplementedError

    def _memories(self, sql: str, params: Sequence[Any]) -> list[Memory]:
        return self.read(
            lambda conn: [memory_from_row(r, self.scope) for r in conn.execute(sql, params)]
        )

    def _select(self, order: str, filters: Mapping[str, Any]) -> list[Memory]:
        where, params = memory_filters(**filters)
        return self._memories(
            f"SELECT {MEMORY_COLUMNS} FROM memories m {where} ORDER BY {order}", params
        )

    def memories(self, **filters: Any) -> list[Memory]:
        """The current memories passing the filters, oldest first; the files that are not
        memories are logged as skipped."""
        self.warn_problems()
        return self._select("created_us, id", filters)

    def warn_problems(self) -> None:
        for problem in self.problems():
            log.warning("skipping %s: %s", problem.path, problem.message)

    def candidates(self, filters: Mapping[str, Any]) -> Iterator[Memory]:
        """What a regex or substring search looks at: the memories passing ``filters``."""
        return iter(self._select("path", filters))

    def memory(self, memory_id: str) -> Memory | None:
        found = self._memories(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        return found[0] if found else None

    def successors(self, memory_id: str) -> list[Memory]:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE supersedes = ? ORDER BY id"
        return self._memories(sql, (memory_id,))

    def ids(self) -> set[str]:
        every = self.rows(["id"], include_superseded=True, include_archived=True)
        return {str(row[0]) for row in every}

    def problems(self) -> list[Problem]:
        return [Problem(path, message, self.scope) for path, message in self.read(problem_rows)]

    def count(self, **filters: Any) -> int:
        """How many memories pass the filters (by default every one)."""
        every = {"include_superseded": True, "include_archived": True}
        where, params = memory_filters(**{**every, **filters})
        sql = f"SELECT count(*) FROM memories m {where}"
        return int(self.read(lambda conn: conn.execute(sql, params).fetchone()[0]))

    def rows(self, columns: Sequence[str], **filters: Any) -> list[tuple[Any, ...]]:
        """Columns of the ``memories`` table (``index_rows.ROW_COLUMNS``, values as stored)
        for what :meth:`memories` finds, oldest first, without a :class:`Memory` per row.
        Raises InvalidInputError for an unknown column."""
        check_columns(columns)
        where, params = memory_filters(**filters)
        listed = ", ".join(f"m.{c}" for c in columns)
        sql = f"SELECT {listed} FROM memories m {where} ORDER BY m.created_us, m.id"
        return self.read(lambda conn: conn.execute(sql, params).fetchall())

    def versions(self, ids: Sequence[str]) -> list[Version]:
        """Every change of the files of ``ids``, oldest first, content not read."""
        sql = (
            "SELECT id, path, commit_id, time_us, author, agent, op, blob, gen, counts "
            f"FROM versions WHERE id IN ({marks(ids)})"
        )
        return version_list(self.read(lambda conn: conn.execute(sql, list(ids)).fetchall()), ids)

    def full_text(
        self, query: str, title: str, limit: int, filters: Mapping[str, Any]
    ) -> list[tuple[float, Memory]]:
        """(score, memory) of the best matches of an FTS5 query, ranked by bm25 (title
        weighted) after a title-match tier; past :data:`SEARCH_CAP` matches, over a bounded
        set of them. Raises sqlite3.OperationalError for a malformed FTS5 query: the caller
        decides what to do with a query that is not FTS5 syntax."""

        def hits(conn: sqlite3.Connection) -> list[tuple[float, Memory]]:
            needle = title.casefold()
            floor = None
            if memory_count(conn) > BOUNDED_FROM:
                floor = newest_floor(conn, query, SEARCH_CAP)
            rows = _fts_rows(conn, query, needle, limit, filters, floor)
            words = " OR ".join('"' + w.replace('"', '""') + '"' for w in needle.split())
            if floor is not None and words:
                # Title matches from any age: an older memory the query names still ranks.
                titled = f"({query}) AND {{title}} : ({words})"
                bound = newest_floor(conn, titled, SEARCH_CAP)
                seen = {r[0] for r in rows}
                rows += [
                    r
                    for r in _fts_rows(conn, titled, needle, limit, filters, bound)
                    if r[_N + 1] > 0 and r[0] not in seen
                ]
                rows.sort(key=lambda r: (-r[_N + 1], r[_N], r[_N + 2], r[1]))
            return [
                (float(r[_N + 1]) * 1000.0 - float(r[_N]), memory_from_row(r[:_N], self.scope))
                for r in rows[:limit]
            ]

        return self.read(hits)


BOUNDED_FROM = 10_000
"""Stores of more memories than this bound the full-text rows a query ranks (recall's
``RANK_CAP``, :data:`SEARCH_CAP`); smaller ones rank every match, as they always did."""
SEARCH_CAP = 2_000
"""Matches an FTS5 search ranks at most, in a store past :data:`BOUNDED_FROM`. FTS5 computes
BM25 for every row that matches before a LIMIT can keep the best: a common word in a million
memories cost two seconds. A query that matches more memories than this ranks the newest
this many (by index row), and, from any age, the newest this many whose title holds one of
its words; every result is still a match. docs/recall.md says what that changes."""


_N = MEMORY_COLUMNS.count(",") + 1
"""How many memory columns a row of :func:`_fts_rows` starts with (then rank, tier, time)."""


def newest_floor(conn: sqlite3.Connection, query: str, cap: int) -> int | None:
    """The index row of the ``cap``-th newest match of an FTS5 ``query`` (None: fewer
    match). Reading matches newest first costs what it reads, not what matches."""
    row = conn.execute(
        "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (query, cap - 1),
    ).fetchone()
    return None if row is None else int(row[0])


def _fts_rows(
    conn: sqlite3.Connection,
    query: str,
    needle: str,
    limit: int,
    filters: Mapping[str, Any],
    floor: int | None,
) -> list[tuple[Any, ...]]:
    """The memory columns, bm25, tier and creation time of the best matches (from index
    row ``floor`` on, when given)."""
    where, params = memory_filters(**filters)
    where = where.replace("WHERE", "AND", 1) if where else ""
    if floor is not None:
        where += f" AND fts.rowid >= {int(floor)}"
    sql = (
        f"SELECT {', '.join('m.' + c.strip() for c in MEMORY_COLUMNS.split(','))}, "
        f"bm25(fts, {FTS_WEIGHTS}) AS rank, "
        "CASE WHEN lower(coalesce(m.title, '')) = ? THEN 2 "
        "WHEN ? != '' AND instr(lower(coalesce(m.title, '')), ?) > 0 THEN 1 "
        "ELSE 0 END AS tier, m.created_us "
        "FROM fts JOIN memories m ON m.rowid = fts.rowid "
        f"WHERE fts MATCH ? {where} "
        "ORDER BY tier DESC, rank, m.created_us, m.id LIMIT ?"
    )
    return conn.execute(sql, [needle, needle, needle, query, *params, limit]).fetchall()


_UNUSUAL_CONFIG = (b"worktree", b"include", b"objectformat", b"refstorage")
"""git settings under which git sees the repository otherwise than its plain layout."""

_PROVIDERS = {p.name: p for p in (lexical.LEXICAL, vectors.VECTORS)}
"""The row providers a current index's readers read."""


@dataclass
class CurrentIndex(Queries):
    """A store's index at its branch tip, read-only, in one read transaction."""

    gitdir: Path
    conn: sqlite3.Connection
    scope: Scope

    def close(self) -> None:
        self.conn.close()

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        return query(self.conn)

    def resolve_id(self, prefix: str) -> str | None:
        """What ``Store.resolve_id`` answers where the index alone can tell: an id of a
        current memory, or the one current id starting with ``prefix``. None where the full
        path must look further (no match, forks, a file at the id's path that is no memory)."""
        wanted = id_prefix(prefix)
        has = self.conn.execute("SELECT 1 FROM memories WHERE id = ?", (wanted,)).fetchone()
        if is_path_id(wanted) or has is not None:
            return wanted
        if any(p.path == memory_path(wanted) for p in self.problems()):
            return None
        found = self.conn.execute(
            "SELECT id FROM memories WHERE substr(id, 1, ?) = ?", (len(wanted), wanted)
        )
        ids = [str(row[0]) for row in found]
        return None if forks_past(wanted, ids) else one_by_prefix(wanted, ids)


def open_current(path: Path, *, providers: Sequence[str] = ()) -> CurrentIndex | None:
    """The index of the store at ``path`` when it is current, else None (the caller opens
    the store). Current: a plainly laid out repository whose branch tip, as git's ref files
    name it, is the commit the index holds, in this gitmem's schema and formats, and so are
    the tables of ``providers`` (``"lexical"`` to search, ``"vectors"`` to recall)."""
    located = _locate(path)
    if located is None:
        return None
    gitdir, branch = located
    tip = branch_tip(gitdir, branch)
    db = paths.state_dir(gitdir) / paths.index_name(branch)
    if tip is None or not db.is_file():
        return None
    conn = None
    try:
        conn = connect(db, read_only=True, timeout=30.0)
        conn.execute("BEGIN")  # one snapshot for the check and the answers
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        store = json.loads(meta.get(STORE_CONFIG_KEY) or "{}")
        states = {provider_key(p): provider_state(_PROVIDERS[p], tip) for p in providers}
        if (
            meta.get("schema") == str(SCHEMA_VERSION)
            and meta.get("commit") == tip
            and all(meta.get(key) == state for key, state in states.items())
            and isinstance(store, dict)
            and isinstance(store.get("format"), int)
            and store["format"] == FORMAT
        ):
            return CurrentIndex(gitdir, conn, Scope(str(store.get("scope"))))
    except (sqlite3.Error, ValueError):
        pass
    if conn is not None:
        conn.close()
    return None


def _locate(path: Path) -> tuple[Path, str] | None:
    """(git directory, branch) of a plainly laid out store at ``path``."""
    if path.name == ".git":
        return None
    if (path / ".git").is_dir():
        gitdir, work_tree = path / ".git", True
    elif (path / "HEAD").is_file() and (path / "objects").is_dir():
        gitdir, work_tree = path, False
    else:
        return None
    config = _read_regular(gitdir / "config")
    if config is None or any(word in config.lower() for word in _UNUSUAL_CONFIG):
        return None
    if not work_tree:
        return gitdir, paths.DEFAULT_BRANCH
    if b"bare = true" in config.lower():  # git would not see the work tree
        return None
    head = _read_regular(gitdir / "HEAD") or b""  # the branch checked out is the one written
    if not head.startswith(b"ref: refs/heads/"):
        return None
    return gitdir, head[len(b"ref: refs/heads/") :].decode("utf-8", "replace").strip()


def branch_tip(gitdir: Path, branch: str) -> str | None:
    """The text ``refs/heads/<branch>`` holds in its own file, else in ``packed-refs``;
    None where that is not certain (not a regular file, reftable, an odd name)."""
    if not branch or ".." in branch or branch.startswith("/"):
        return None
    try:
        data = _read_regular(gitdir / "refs" / "heads" / branch, missing_ok=False)
    except FileNotFoundError:  # no loose ref: the packed one counts
        wanted = f"refs/heads/{branch}".encode()
        data = None
        for line in (_read_regular(gitdir / "packed-refs") or b"").splitlines():
            oid, _, name = line.partition(b" ")
            if name == wanted:
                data = oid
    return None if data is None else data.decode("ascii", "replace").strip()


def _read_regular(path: Path, *, missing_ok: bool = True) -> bytes | None:
    """The bytes of ``path`` if it is a regular file, else None (a planted FIFO must not make
    a read wait, nor a link read outside the store). A missing file raises
    FileNotFoundError unless ``missing_ok``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if stat.S_ISREG(os.fstat(fd).st_mode) else None
