"""What the full-text index holds of a memory, and how a question becomes an FTS5 query.
:func:`fts_row` is a pure function of the memory (change it: bump :data:`LEXICAL_VERSION`)."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from gitmem.format.model import Memory
from gitmem.store.index_rows import RowChanges
from gitmem.store.row_providers import RowProvider, register

if TYPE_CHECKING:  # only named: readers of a current index never load it
    import pygit2

PROVIDER = "lexical"
LEXICAL_VERSION = 2
"""Bump when :func:`fts_row`, the tokenizer or the table's columns change."""

TOKENIZER = "porter unicode61 remove_diacritics 2"
COLUMNS: tuple[str, ...] = ("title", "body", "tags", "names", "idents")

_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
"""What unicode61 calls a token, near enough: runs of letters and digits."""
_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""The parts of a camel-case or letters-and-digits identifier (ASCII case changes)."""
_MAX_IDENT_LEN = 64

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don down
    during each else ever few for from further get gets got had hadn has hasn have haven having he
    her here hers herself him himself his how i if in into is isn it its itself just let lets me
    more most much must mustn my myself no nor not now of off on once only or other ought our ours
    ourselves out over own really same say says shall shan she should shouldn so some such tell
    than that the their theirs them themselves then there these they this those through to too
    under until up upon us very was wasn we were weren what whats when where which while who whom
    whose why will with won would wouldn yes yet you your yours yourself yourselves s t d ll m o re
    ve y
    """.split()  # noqa: SIM905 -- a word list reads better as text
)
"""English function words dropped from questions (``how do we deploy`` -> ``deploy``).

Only at query time: the index keeps every word, so a phrase search still finds them."""


def identifier_parts(text: str) -> list[str]:
    """The pieces of identifiers unicode61 would keep whole, lower-cased, in order:
    ``parseHTTPRequest`` -> ``parse``, ``http``, ``request``; ``utf8`` -> ``utf``, ``8``.
    Words with nothing to split give nothing (the tokenizer already has them)."""
    out: list[str] = []
    for word in _WORD_RE.findall(text):
        plain = word.isalpha() and (word.islower() or word.isupper() or word[1:].islower())
        if plain or len(word) > _MAX_IDENT_LEN or not word.isascii():
            continue  # nothing to split: plain, capitalised or all-caps words, and non-ASCII
        parts = _PART_RE.findall(word)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


def fts_row(memory: Memory) -> tuple[str, str, str, str, str]:
    """The five FTS columns of a memory: title, body, tags, names (category and id), idents."""
    title = memory.title or ""
    names = " ".join(x for x in (memory.category, memory.id) if x)
    tags = " ".join(memory.tags)
    # Not the names: a mem_<uuid> id would fill the column with hex fragments.
    idents = " ".join(identifier_parts("\n".join((title, tags, memory.body))))
    return title, memory.body, tags, names, idents


def words(text: str) -> list[str]:
    """The query's words as the tokenizer would cut them (before stemming), with the parts
    of identifiers after each identifier: ``sample_user`` -> ``sample``, ``user``;
    ``CamelCase`` -> ``camelcase``, ``camel``, ``case``."""
    out: list[str] = []
    for word in _WORD_RE.findall(text):
        out.append(word.lower())
        parts = identifier_parts(word)
        out.extend(p for p in parts if p != word.lower())
    return out


def question_terms(text: str) -> list[str]:
    """The words of a natural-language query worth searching for, without repeats: stop
    words go, unless nothing else is left (``"who are you"`` still searches)."""
    found = list(dict.fromkeys(words(text)))
    kept = [w for w in found if w not in STOP_WORDS]
    return kept or found


def stems(texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens as the index's tokenizer stems them (a throw-away FTS5 table)."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(texts))
        out: list[list[str]] = [[] for _ in texts]
        for doc, term in conn.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
            out[int(doc)].append(str(term))
    return out


def or_query(terms: Iterable[str], *, phrases: Sequence[Sequence[str]] = ()) -> str:
    """An FTS5 query matching any of ``terms`` (each quoted: never syntax), plus each
    phrase of several words as one more alternative (adjacent words score again)."""
    parts = ['"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms) if t]
    for phrase in phrases:
        if len(phrase) > 1:
            parts.append('"' + " ".join(w.replace('"', '""') for w in phrase) + '"')
    return " OR ".join(parts)


def _apply(conn: sqlite3.Connection, _repo: pygit2.Repository, changes: RowChanges) -> None:
    # Contentless: a row is deleted by handing back the text it was indexed with.
    cols = ", ".join(COLUMNS)
    marks = ", ".join("?" for _ in COLUMNS)
    if changes.removed:
        conn.executemany(
            f"INSERT INTO fts (fts, rowid, {cols}) VALUES ('delete', ?, {marks})",
            [(r.rowid, *fts_row(r.memory)) for r in changes.removed],
        )
    if changes.added:
        conn.executemany(
            f"INSERT INTO fts (rowid, {cols}) VALUES (?, {marks})",
            [(a.rowid, *fts_row(a.memory)) for a in changes.added],
        )


LEXICAL = RowProvider(
    name=PROVIDER,
    version=LEXICAL_VERSION,
    tables=("fts",),
    ddl=(
        f"CREATE VIRTUAL TABLE fts USING fts5({', '.join(COLUMNS)}, "
        f"content = '', tokenize = '{TOKENIZER}')",
    ),
    apply=_apply,
)
register(LEXICAL)
