"""The index's read queries, on a connection: one SQL for each question, whoever asks.

:class:`gitmem.store.index.Index` runs these after catching up with the branch tip;
:mod:`gitmem.store.quick` runs the same ones on a read-only connection when the index is
already current, without loading libgit2. Nothing here catches up, writes or imports
pygit2.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from gitmem.base.clock import parse_timestamp
from gitmem.base.errors import InvalidInputError
from gitmem.format.model import Memory, Related, Relationship, Scope, Status, Trigger
from gitmem.store.rows import (
    MEMORY_COLUMNS,
    Hit,
    check_columns,
    cooked_path,
    loads_json,
    memory_filters,
    number_params,
)

SCHEMA_VERSION = 6
"""The layout of the core tables (``gitmem.store.index``). Bump it when they change: every
table is dropped and rebuilt. Tables of a row provider carry their own version instead."""
STORE_CONFIG_KEY = "store"
"""``meta`` key: the format and scope the indexed tip's gitmem.yaml gives, as JSON."""
MEMORY_COUNT_KEY = "memories"
"""``meta`` key: how many rows ``memories`` holds, written by every catch-up that changes it."""
FTS_WEIGHTS = "10.0, 1.0, 3.0, 5.0"
"""bm25 weights of the full-text columns (title, body, tags, names; idents unweighted: 1.0)."""


def memory_from_row(row: Sequence[Any], store_scope: Scope) -> Memory:
    """The :class:`Memory` of one ``SELECT MEMORY_COLUMNS`` row."""
    (
        _rowid,
        memory_id,
        path,
        _blob,
        title,
        scope,
        category,
        tags,
        created_at,
        updated_at,
        version,
        supersedes,
        related,
        agent,
        session_id,
        trigger,
        status,
        extra,
        body,
    ) = row
    return Memory(
        id=memory_id,
        body=body,
        created_at=parse_timestamp(created_at),
        updated_at=parse_timestamp(updated_at),
        version=int(version),
        title=title,
        scope=Scope(scope) if scope else None,
        category=category,
        tags=tuple(loads_json(tags)),
        supersedes=supersedes,
        related=tuple(
            Related(r["id"], Relationship(r["relationship"])) for r in loads_json(related)
        ),
        agent=agent,
        session_id=session_id,
        trigger=Trigger(trigger) if trigger else None,
        status=Status(status),
        extra=loads_json(extra),
        path=path,
        store_scope=store_scope,
    )


def memory_count(conn: sqlite3.Connection) -> int:
    """How many memories the index holds (``meta`` keeps the count; older indexes count)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (MEMORY_COUNT_KEY,)).fetchone()
    if row is not None:
        return int(row[0])
    return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])


def load_memories(
    conn: sqlite3.Connection, rowids: Iterable[int], store_scope: Scope
) -> dict[int, Memory]:
    """The memories of these ``memories.rowid`` values."""
    wanted = list(dict.fromkeys(rowids))
    out: dict[int, Memory] = {}
    for i in range(0, len(wanted), 500):  # SQLite bounds the parameters of a query
        chunk = wanted[i : i + 500]
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories "
            f"WHERE rowid IN ({', '.join('?' for _ in chunk)})"
        )
        for row in conn.execute(sql, chunk):
            out[int(row[0])] = memory_from_row(row, store_scope)
    return out


def problem_rows(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Problems by path in git's byte order (SQLite would put the byte paths last)."""
    found = conn.execute("SELECT path, message FROM problems")
    rows = [(cooked_path(p), cooked_path(m)) for p, m in found]
    rows.sort(key=lambda row: row[0].encode("utf-8", "surrogateescape"))
    return rows


def column_rows(
    conn: sqlite3.Connection,
    columns: Sequence[str],
    *,
    ids: Iterable[str] | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    after: tuple[int, str] | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[tuple[Any, ...]]:
    """A few columns of the current memories, oldest first (see ``Index.rows``).

    ``after`` (a ``(created_us, id)`` key), ``offset`` and ``limit`` page through them: each page is
    one walk of the ``(created_us, id)`` index from the key, so a listing of a million
    memories is read a page at a time and never held whole."""
    check_columns(columns)
    where, params = memory_filters(
        include_superseded=include_superseded, include_archived=include_archived
    )
    listed = ", ".join(f"m.{c}" for c in columns)
    if ids is None:
        if after is not None:
            where += " AND " if where else "WHERE "
            where += "(m.created_us, m.id) > (?, ?)"
            params = [*params, *after]
        sql = f"SELECT {listed} FROM memories m {where} ORDER BY m.created_us, m.id"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params = [*params, -1 if limit is None else limit, offset]
        return conn.execute(sql, params).fetchall()
    if after is not None or limit is not None or offset:
        raise InvalidInputError("rows of given ids are not paged")
    wanted = list(dict.fromkeys(ids))
    where += " AND " if where else "WHERE "
    found: list[tuple[Any, ...]] = []
    for i in range(0, len(wanted), 500):  # SQLite bounds the parameters of a query
        chunk = wanted[i : i + 500]
        sql = (
            f"SELECT {listed}, m.created_us, m.id FROM memories m "
            f"{where}m.id IN ({', '.join('?' for _ in chunk)})"
        )
        found.extend(conn.execute(sql, [*params, *chunk]).fetchall())
    found.sort(key=lambda row: (row[-2], row[-1]))
    return [row[:-2] for row in found]


BOUNDED_FROM = 10_000
"""Stores of more memories than this bound the full-text rows a query ranks (recall's
``RANK_CAP``, :data:`SEARCH_CAP`); smaller ones rank every match, as they always did."""
SEARCH_CAP = 2_000
"""Matches an FTS5 search ranks at most, in a store past :data:`BOUNDED_FROM`. FTS5 computes
BM25 for every row that matches before a LIMIT can keep the best: a common word in a million
memories cost two seconds. A query that matches more memories than this ranks the newest
this many (by index row), and, from any age, the newest this many whose title holds one of
its words; every result is still a match. docs/recall.md says what that changes."""


def fts_hits(
    conn: sqlite3.Connection,
    store_scope: Scope,
    query: str,
    *,
    title_text: str,
    limit: int,
    filters: dict[str, Any],
) -> list[Hit]:
    """FTS5 query ranked by bm25 (title weighted), after a title-match tier; past
    :data:`SEARCH_CAP` matches, over a bounded set of them.

    Raises sqlite3.OperationalError for a malformed FTS5 query; the caller decides what
    to do with a query that is not FTS5 syntax.
    """
    needle = title_text.casefold()
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
            if r[20] > 0 and r[0] not in seen
        ]
        rows.sort(key=lambda r: (-r[20], r[19], r[21], r[1]))
    return [
        Hit(memory_from_row(r[:19], store_scope), float(r[20]) * 1000.0 - float(r[19]))
        for r in rows[:limit]
    ]


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
    filters: dict[str, Any],
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
        "CASE WHEN lower(coalesce(m.title, '')) = :needle THEN 2 "
        "WHEN :needle != '' AND instr(lower(coalesce(m.title, '')), :needle) > 0 THEN 1 "
        "ELSE 0 END AS tier, m.created_us "
        "FROM fts JOIN memories m ON m.rowid = fts.rowid "
        f"WHERE fts MATCH :query {where} "
        "ORDER BY tier DESC, rank, m.created_us, m.id LIMIT :limit"
    )
    named = {f"p{i}": p for i, p in enumerate(params)}
    return list(
        conn.execute(
            number_params(sql), {**named, "needle": needle, "query": query, "limit": limit}
        ).fetchall()
    )
