"""Recall's lexical list: a query's words (never syntax) ranked by BM25 over the FTS5 table,
common words and large stores bounded as docs/recall.md says."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gitmem.base import logs
from gitmem.store import index_queries, lexical
from gitmem.store.index_rows import chunks, marks

log = logs.get(__name__)


WEIGHTS: tuple[float, float, float, float, float] = (2.0, 1.0, 2.0, 1.0, 1.0)
"""BM25 weights of the FTS columns: title, body, tags, names (category, id), idents."""
MAX_TERMS = 64
"""A query's words beyond this many are ignored (an agent may paste a whole document)."""


@dataclass(frozen=True)
class Query:
    """A recall query taken apart: the FTS5 expression and the words it searches for."""

    text: str
    terms: tuple[str, ...]
    fts: str
    phrases: tuple[tuple[str, ...], ...] = ()


def parse(text: str) -> Query:
    """The FTS5 query of a recall query: never syntax, whatever the text holds."""
    text = clean(text)
    terms = tuple(lexical.question_terms(text)[:MAX_TERMS])
    # A path or snake_case name also counts as a phrase: its words side by side score again.
    phrases = [
        lexical.words(token)[:8]
        for token in text.split()
        if _JOINED_RE.search(token) and not lexical.identifier_parts(token)
    ][:8]
    fts = lexical.or_query(terms, phrases=phrases) if terms else ""
    return Query(text, terms, fts, tuple(tuple(p) for p in phrases))


_JOINED_RE = re.compile(r"[^\W_][_./\\:-]+[^\W_]")


def clean(text: object) -> str:
    """The query as text SQLite can take: no NUL, no lone surrogates."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    text = text.replace("\x00", " ")
    return text.encode("utf-8", "replace").decode("utf-8")


def best_matches(
    conn: sqlite3.Connection, query: Query, where: str, params: list[Any], depth: int
) -> list[tuple[int, str, int, float]]:
    """(rowid, id, updated_us, bm25 as higher-is-better) of the best matches passing the
    filters: FTS5 ranks on its own first, then the best are checked against the filters,
    deeper while they leave fewer than ``depth``."""
    if not query.fts:
        return []
    weights = ", ".join(str(w) for w in WEIGHTS)
    fetch = depth * 2
    try:
        expression, floor = _plan(conn, query)
        bound = "" if floor is None else f"AND rowid >= {int(floor)} "
        while True:
            ranked = conn.execute(
                f"SELECT rowid, -bm25(fts, {weights}) AS score FROM fts WHERE fts MATCH ? "
                f"{bound}ORDER BY score DESC LIMIT ?",
                (expression, fetch),
            ).fetchall()
            passing = passing_filters(conn, [int(r[0]) for r in ranked], where, params)
            if len(passing) >= depth or len(ranked) < fetch:
                break
            fetch *= 4
    except sqlite3.OperationalError as exc:
        if not is_query_error(exc):
            raise
        log.debug("recall: FTS5 refused %r (%s)", query.fts, exc)
        return []
    out = [(r, *passing[r], float(score)) for r, score in ranked if r in passing]
    out.sort(key=lambda x: (-x[3], -x[2], x[1]))
    return out[:depth]


COMMON = 0.5
"""A query word in more than this share of the memories is left out when rarer words
remain: BM25 gives it no weight, and its posting list is most of a query's cost."""
COMMON_FROM = 1000
"""Stores smaller than this keep every word (the cost is small, the counts noisy)."""
RANK_CAP = 2_000
"""Matches the lexical list ranks at most in a store past ``BOUNDED_FROM`` (FTS5 scores
every match before keeping the best): the rarest words' matches, else the newest."""


def _plan(conn: sqlite3.Connection, query: Query) -> tuple[str, int | None]:
    """The FTS5 expression recall ranks, and the lowest index row it ranks (None: all)."""
    total = index_queries.memory_count(conn)
    if total <= index_queries.BOUNDED_FROM:
        return _selective(conn, query, total), None
    counts = {t: _matches(conn, lexical.or_query([t]), RANK_CAP + 1) for t in query.terms}
    kept: list[str] = []
    budget = 0
    for term in sorted((t for t in query.terms if counts[t]), key=lambda t: counts[t]):
        if budget + counts[term] > RANK_CAP:
            break
        kept.append(term)
        budget += counts[term]
    if kept:
        chosen = set(kept)
        words = [t for t in query.terms if t in chosen]
        phrases = [p for p in query.phrases if chosen.intersection(p)]
        # Their matches add up to RANK_CAP at most: every one of them is ranked.
        return lexical.or_query(words, phrases=phrases), None
    return query.fts, index_queries.newest_floor(conn, query.fts, RANK_CAP)


def _matches(conn: sqlite3.Connection, expression: str, most: int) -> int:
    """How many rows match ``expression``, counted up to ``most`` (the cost is that many)."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)", (expression, most)
    ).fetchone()
    return int(row[0])


def _selective(conn: sqlite3.Connection, query: Query, total: int) -> str:
    """The query's FTS5 expression without its words that are in most of the ``total``
    memories, unless no rarer word matches anything."""
    if len(query.terms) < 2 or total < COMMON_FROM:
        return query.fts
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.recall_vocab USING fts5vocab(main, fts, row)"
    )
    docs: dict[str, int] = {}
    for term, stems in zip(query.terms, lexical.stems(query.terms), strict=True):
        row = conn.execute(
            "SELECT doc FROM temp.recall_vocab WHERE term = ?", (stems[0] if stems else term,)
        ).fetchone()
        if row is not None:
            docs[term] = int(row[0])
    common = {t for t, n in docs.items() if n > COMMON * total}
    if not common or len(common) == len(docs):
        return query.fts
    kept = [t for t in query.terms if t not in common]
    return lexical.or_query(kept, phrases=query.phrases)


def is_query_error(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return not any(k in text for k in ("locked", "busy", "disk", "memory", "readonly", "corrupt"))


def passing_filters(
    conn: sqlite3.Connection, rowids: Sequence[int], where: str, params: list[Any]
) -> dict[int, tuple[str, int]]:
    """Which of these rowids pass the filters: rowid -> (id, updated_us)."""
    out: dict[int, tuple[str, int]] = {}
    for chunk in chunks(rowids):
        sql = (
            "SELECT m.rowid, m.id, m.updated_us FROM memories m "
            f"WHERE m.rowid IN ({marks(chunk)}){where}"
        )
        for row in conn.execute(sql, [*chunk, *params]):
            out[int(row[0])] = (str(row[1]), int(row[2]))
    return out
