"""Search over the current memories: FTS5 (title matches first, then bm25; a query that is
not FTS5 syntax goes to recall, and the result says so), regex or substring (a grep)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gitmem.base.errors import InvalidInputError
from gitmem.format.model import Memory
from gitmem.store.bm25 import is_query_error

if TYPE_CHECKING:
    from gitmem.format.saferegex import SafePattern
    from gitmem.store.index_queries import Queries

Mode = Literal["fts", "regex", "substring"]
MODES: tuple[str, ...] = ("fts", "regex", "substring")
CONTEXT_LINES = 2
_FTS_OPERATORS = {"AND", "OR", "NOT", "NEAR"}
_WORD_RE = re.compile(r"\w+\*?", re.UNICODE)


@dataclass(frozen=True)
class Line:
    """A line of a memory's body that matched (1-based number), with the lines around it."""

    number: int
    text: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @classmethod
    def at(cls, lines: Sequence[str], number: int) -> Line:
        """Line ``number`` of ``lines`` with CONTEXT_LINES either side."""
        start = max(0, number - 1 - CONTEXT_LINES)
        return cls(
            number,
            lines[number - 1],
            tuple(lines[start : number - 1]),
            tuple(lines[number : number + CONTEXT_LINES]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "text": self.text,
            "before": list(self.before),
            "after": list(self.after),
        }


def hit_dict(
    memory_id: str, title: str | None, path: str | None, scope: str | None, score: float,
    lines: Iterable[Line],
) -> dict[str, Any]:
    """A hit as JSON, one shape in search, recall and MCP (schemas/hit.schema.json): the
    memory, its score (comparable within one list) and its matching lines."""
    return {
        "id": memory_id,
        "title": title,
        "path": path,
        "scope": scope,
        "score": score,
        "lines": [line.to_dict() for line in lines],
    }


@dataclass(frozen=True)
class SearchMatch:
    """One hit: which memory, how well it ranks, and where in its body."""

    id: str
    path: str | None
    title: str | None
    score: float
    line_number: int | None
    """1-based line of the body; None when only the title, tags or names matched."""
    line: str
    context_before: tuple[str, ...] = ()
    context_after: tuple[str, ...] = ()
    scope: str | None = None
    spans: tuple[tuple[int, int], ...] = ()
    """Character ranges of ``line`` that matched, for highlighting."""

    @property
    def lines(self) -> tuple[Line, ...]:
        """The matching line with its context, as a recall hit's lines."""
        if self.line_number is None:
            return ()
        return (Line(self.line_number, self.line, self.context_before, self.context_after),)


@dataclass
class SearchResults:
    """The matches, best first, and a notice when the query was not searched as written."""

    query: str
    mode: str
    """``fts``, ``regex``, ``substring``, or ``natural`` when recall answered the query."""
    matches: list[SearchMatch] = field(default_factory=list)
    notice: str | None = None

    def __iter__(self) -> Any:
        return iter(self.matches)

    def __len__(self) -> int:
        return len(self.matches)

    def __getitem__(self, index: int) -> SearchMatch:
        return self.matches[index]

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.matches]

    def to_dict(self) -> dict[str, Any]:
        """The matches as hits, one per memory with its matching lines, best first."""
        hits: dict[str, dict[str, Any]] = {}
        for m in self.matches:
            hit = hits.get(m.id)
            if hit is None:
                hits[m.id] = hit_dict(m.id, m.title, m.path, m.scope, m.score, m.lines)
            else:
                hit["lines"].extend(line.to_dict() for line in m.lines)
        return {
            "query": self.query,
            "mode": self.mode,
            "notice": self.notice,
            "hits": list(hits.values()),
        }


def check_mode(mode: str) -> Mode:
    if mode not in MODES:
        raise InvalidInputError(f"search mode {mode!r} is not one of {', '.join(MODES)}")
    return mode  # type: ignore[return-value]


def query_terms(query: str) -> list[str]:
    """The words of an FTS query, without operators; ``pre*`` stays a prefix."""
    return [w for w in _WORD_RE.findall(query) if w.rstrip("*") not in _FTS_OPERATORS]


def title_text(query: str) -> str:
    """The query as a title would spell it, for the exact/partial title tiers."""
    return " ".join(t.rstrip("*") for t in query_terms(query)).casefold()


_SYNTAX_RE = re.compile(r'\b(?:AND|OR|NOT|NEAR)\b|["*^()]|\w:|(?:^|\s)[-+]\w')


def uses_fts_syntax(query: str) -> bool:
    """Whether the query says it is FTS5 syntax: an operator (``AND``, ``OR``, ``NOT``,
    ``NEAR``), quotes, a prefix ``*``, ``^``, parentheses or a ``column:`` filter."""
    return _SYNTAX_RE.search(query) is not None


def from_recall(memory: Memory, score: float, lines: Sequence[Line]) -> SearchMatch:
    """A recall hit as a search match: its best line, with context, or its title."""
    number = lines[0].number if lines else None
    return _match(memory, score, memory.body.splitlines(), number)


def term_pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    """A regex finding the query's words in a line, as FTS would match them (prefixes too)."""
    parts = []
    for term in terms:
        word = term.rstrip("*")
        if not word:
            continue
        tail = r"\w*" if term.endswith("*") else r"(?!\w)"
        parts.append(r"(?<!\w)" + re.escape(word) + tail)
    if not parts:
        return None
    return re.compile("|".join(parts), re.IGNORECASE)


def locate(memory: Memory, pattern: re.Pattern[str] | None, score: float) -> SearchMatch:
    """The first body line ``pattern`` finds, with two lines of context either side."""
    lines = memory.body.splitlines()
    if pattern is not None:
        for number, line in enumerate(lines, start=1):
            spans = tuple(m.span() for m in pattern.finditer(line) if m.end() > m.start())
            if spans:
                return _match(memory, score, lines, number, spans)
    return _match(memory, score, lines, None)


def _match(
    memory: Memory,
    score: float,
    lines: list[str],
    number: int | None,
    spans: tuple[tuple[int, int], ...] = (),
) -> SearchMatch:
    """Line ``number`` of the body with its context (None: only the title matched)."""
    line = Line.at(lines, number) if number is not None else Line(0, memory.title or "")
    return SearchMatch(
        id=memory.id,
        path=memory.path,
        title=memory.title,
        score=score,
        line_number=number,
        line=line.text,
        context_before=line.before,
        context_after=line.after,
        scope=str(memory.store_scope) if memory.store_scope else None,
        spans=spans,
    )


def full_text_matches(
    query: str, sources: Iterable[Queries], limit: int, filters: Mapping[str, Any]
) -> list[SearchMatch] | str:
    """The best ``limit`` matches of an FTS5 query over every source, or, when the query is
    not FTS5 syntax, why not: the caller then answers it as natural language."""
    terms = query_terms(query)
    title = title_text(query)
    hits: list[tuple[float, Memory]] = []
    for source in sources:
        try:
            hits.extend(source.full_text(query, title, limit, filters))
        except sqlite3.OperationalError as exc:
            if not is_query_error(exc):
                raise
            return f"FTS5 could not parse it: {exc}"
    if not hits and not uses_fts_syntax(query):
        return "no memory holds every word"
    hits.sort(key=lambda pair: -pair[0])
    pattern = term_pattern(terms)
    return [locate(memory, pattern, score) for score, memory in hits[:limit]]


def compile_line_pattern(query: str, mode: Mode) -> SafePattern:
    from gitmem.format import saferegex  # the regex module: only for these two modes

    # The user's pattern runs under a time bound: no regex backtracks without end.
    if mode == "substring":
        return saferegex.compile(query, literal=True, ignore_case=True, what="substring")
    return saferegex.compile(query)


def grep(memories: Iterable[Memory], pattern: SafePattern, limit: int) -> list[SearchMatch]:
    """One match per matching body line, in the order the memories come, up to ``limit``;
    a memory whose title alone matches gives one match with no line number, as FTS does."""
    out: list[SearchMatch] = []
    for memory in memories:
        lines = memory.body.splitlines()
        found = False
        for number, line in enumerate(lines, start=1):
            spans = pattern.spans(line)
            if not spans and not pattern.search(line):
                continue
            found = True
            out.append(_match(memory, float(len(spans) or 1), lines, number, spans))
            if len(out) >= limit:
                return out
        if not found and memory.title and pattern.search(memory.title):
            out.append(_match(memory, 1.0, lines, None))
            if len(out) >= limit:
                return out
    return out
