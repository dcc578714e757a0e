"""Recall (``Store.recall``): BM25 over a question's words plus its embedding's cosine, fused
with :data:`FUSION`'s weights, a superseded memory's match counted for its newest version,
contradicting hits named; no query raises. docs/recall.md says why."""

from __future__ import annotations

import contextlib
import functools
import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gitmem.base import logs
from gitmem.format.layout import FORK_MARK
from gitmem.format.model import Memory, Relationship, Scope
from gitmem.store import index_queries, lexical
from gitmem.store.bm25 import (
    Query,
    best_matches,
    clean,
    is_query_error,
    parse,
    passing_filters,
)
from gitmem.store.index_rows import chunks, marks, memory_filters
from gitmem.store.search import Line, hit_dict

if TYPE_CHECKING:
    from gitmem.store.index import Index

log = logs.get(__name__)

DEPTH = 100
"""How many lexical (and semantic) candidates each list brings to fusion."""
SEMANTIC_ONLY_MIN = 0.6
"""A memory none of the query's words matched is recalled only this similar in meaning."""
FUSION: tuple[float, float] = (1.0, 0.2)
"""Weights of the lexical and semantic lists' min-max scaled scores (``python -m
bench.recall_quality``: beat every reciprocal-rank fusion tried)."""
EMBEDDINGS_OFF = "embeddings are off or unavailable: ranked by words only"
"""The results' notice when no embedder answered (configured off, or failed to load)."""
MAX_CHAIN = 64
"""Steps followed from a superseded memory to its newest version."""
LINES = 2
"""Best-matching lines shown per result."""
CHARS_PER_TOKEN = 4
"""The budget's estimate of a token: about four characters of English text."""

EXCERPT_CHARS = 240
"""An excerpt's line is cut to this many characters."""

_LINE_BITS = 20
_TITLE_LINE, _TAGS_LINE = 0, 1


@dataclass(frozen=True)
class RecallHit:
    """One memory recall found: what it is, how well it ranks and why."""

    id: str
    title: str | None
    score: float
    """Higher is better; comparable within one result list only."""
    lines: tuple[Line, ...]
    """The body lines that match the query best, in body order."""
    why: tuple[str, ...]
    """Why it ranked: the words it matched and where, its similarity, an older version."""
    memory: Memory = field(compare=False, repr=False)
    lexical: float | None = None
    """BM25 (higher is better) when the words matched; None when only the meaning did."""
    semantic: float | None = None
    """Cosine similarity to the query, when the embedder's list found it."""

    @property
    def path(self) -> str | None:
        return self.memory.path

    @property
    def scope(self) -> str | None:
        return str(self.memory.store_scope) if self.memory.store_scope else None

    def to_dict(self) -> dict[str, Any]:
        """A search hit's shape (:func:`gitmem.store.search.hit_dict`), and why it ranked."""
        return {
            **hit_dict(self.id, self.title, self.path, self.scope, self.score, self.lines),
            "why": list(self.why),
            "category": self.memory.category,
            "tags": list(self.memory.tags),
            "updated_at": self.memory.updated_at.isoformat(),
            "lexical": self.lexical,
            "semantic": self.semantic,
        }


@dataclass(frozen=True)
class Packed:
    """A memory (whole) or its best lines (excerpt), as packed into a token budget."""

    id: str
    title: str | None
    text: str
    whole: bool
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RecallResults:
    """Recall's answer: hits best first, and a notice when something was left out."""

    query: str
    hits: list[RecallHit] = field(default_factory=list)
    notice: str | None = None
    semantic: bool = False
    """Whether the embedder's list took part in the ranking."""
    budget: int | None = None
    packed: list[Packed] = field(default_factory=list)
    """With a budget: the best memories that fit whole, then excerpts of those that did not."""
    contradictions: list[tuple[str, str, str]] = field(default_factory=list)
    """(id, id, why) of two hits that say opposite things: ``contradicts`` (one links the
    other so) or ``fork`` (the two sides of an unresolved fork)."""

    def __iter__(self) -> Any:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, index: int) -> RecallHit:
        return self.hits[index]

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.packed)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query,
            "notice": self.notice,
            "semantic": self.semantic,
            "hits": [h.to_dict() for h in self.hits],
            "contradictions": [{"ids": [a, b], "why": why} for a, b, why in self.contradictions],
        }
        if self.budget is not None:
            data["budget"] = self.budget
            data["tokens"] = self.tokens
            data["packed"] = [p.to_dict() for p in self.packed]
        return data


@dataclass
class _Candidate:
    rowid: int
    id: str
    updated_us: int
    lexical: float | None = None
    semantic: float | None = None
    via: list[str] = field(default_factory=list)
    fused: float = 0.0


Head = tuple[int, str, int, str]
"""A chain's newest version: rowid, id, updated_us, status."""


def _heads(conn: sqlite3.Connection, ids: Iterable[str], valid: bool) -> dict[str, Head]:
    """For each memory id that has a successor: the newest version of its chain,
    following ``supersedes`` forward (memories without one are left out). A fork (two
    successors) follows the most recently updated one; cycles and long chains stop;
    ``valid``: a memory whose validity was ended stops the chain (it has its window)."""
    ended = " AND o.valid_until_us IS NOT NULL" if valid else " AND 0"
    out: dict[str, Head] = {}
    # One query per step of the chains, for every chain at once.
    frontier = [(s, s) for s in dict.fromkeys(ids)]  # (reached so far, where it started)
    seen = {s: {s} for _, s in frontier}
    for _ in range(MAX_CHAIN):
        if not frontier:
            break
        step: dict[str, Head] = {}
        for chunk in chunks(r for r, _ in frontier):
            for row in conn.execute(
                "SELECT supersedes, rowid, id, updated_us, status FROM memories s "
                f"WHERE supersedes IN ({marks(chunk)}) AND NOT EXISTS "
                f"(SELECT 1 FROM memories o WHERE o.id = s.supersedes{ended})",
                chunk,
            ):
                found = (int(row[1]), str(row[2]), int(row[3]), str(row[4]))
                best = step.get(row[0])
                if best is None or (found[2], found[1]) > (best[2], best[1]):
                    step[row[0]] = found
        nxt: list[tuple[str, str]] = []
        for reached, start in frontier:
            head = step.get(reached)
            if head is None or head[1] in seen[start]:
                continue
            seen[start].add(head[1])
            out[start] = head
            nxt.append((head[1], start))
        frontier = nxt
    return out


def _rank_source(
    conn: sqlite3.Connection,
    scope: Scope,
    query: Query,
    filters: dict[str, Any],
    semantic: list[tuple[int, float]] | None,
    limit: int,
) -> list[tuple[_Candidate, Memory]]:
    """The best ``limit`` lexical (and semantic) candidates of one source with their memories,
    collapsed to chain heads and fused. Superseded memories pass the filters: a chain is
    collapsed onto its newest version."""
    where, params = memory_filters(**{**filters, "include_superseded": True})
    where = (" AND " + where.removeprefix("WHERE ")) if where else ""
    found: dict[int, _Candidate] = {}
    lex = best_matches(conn, query, where, params, DEPTH)
    sem: list[tuple[int, str, int, float]] = []
    if semantic:
        ok = passing_filters(conn, [r for r, _ in semantic], where, params)
        sem = [(r, ok[r][0], ok[r][1], cos) for r, cos in semantic if r in ok]
    heads: dict[str, Head] = {}
    dropped: set[str] = set()
    if not filters["include_superseded"]:
        ids = [mid for _, mid, _, _ in lex] + [mid for _, mid, _, _ in sem]
        heads = _heads(conn, ids, filters["valid_us"] is not None)
        # The newest version must pass the filters itself (category, tags, not archived).
        ok_heads = passing_filters(conn, [h[0] for h in heads.values()], where, params)
        dropped = {mid for mid, h in heads.items() if h[0] not in ok_heads}
    for kind, rows in (("lexical", lex), ("semantic", sem)):
        for rowid, mid, upd, score in rows:
            if mid in dropped:
                continue
            via, head = mid, heads.get(mid)
            if head is not None:
                rowid, mid, upd = head[:3]
            cand = found.setdefault(rowid, _Candidate(rowid, mid, upd))
            if head is not None and via not in cand.via:
                cand.via.append(via)
            if getattr(cand, kind) is None:
                setattr(cand, kind, score)
    kept = [
        c for c in found.values()
        if c.lexical is not None or (c.semantic is not None and c.semantic >= SEMANTIC_ONLY_MIN)
    ]
    for kind, weight in zip(("lexical", "semantic"), FUSION, strict=True):
        scores = [s for c in kept if (s := getattr(c, kind)) is not None]
        lo, hi = min(scores, default=0.0), max(scores, default=0.0)
        for c in kept:
            if (score := getattr(c, kind)) is not None:
                c.fused += weight * ((score - lo) / (hi - lo) if hi > lo else 1.0)
    for c in kept:
        c.fused = c.fused if c.fused > 0 else 1e-9
    kept.sort(key=lambda c: (-c.fused, -c.updated_us, c.id))
    loaded = index_queries.load_memories(conn, [c.rowid for c in kept[:limit]], scope)
    return [(c, loaded[c.rowid]) for c in kept[:limit] if c.rowid in loaded]


def _explain(
    query: Query, memories: Sequence[Memory]
) -> list[tuple[tuple[Line, ...], tuple[str, ...]]]:
    """Best lines and matched words of each memory, by the index's own tokenizer (a
    throw-away FTS5 table of their lines, so stems match exactly as the ranking did)."""
    empty: list[tuple[tuple[Line, ...], tuple[str, ...]]] = [((), ()) for _ in memories]
    if not query.terms or not memories:
        return empty
    rows: list[tuple[int, str]] = []
    for i, memory in enumerate(memories):
        base = i << _LINE_BITS
        title, body, tags, names, _idents = lexical.fts_row(memory)
        rows.append((base + _TITLE_LINE, title))
        rows.append((base + _TAGS_LINE, f"{tags} {names}"))
        for n, text in enumerate(body.splitlines()[: (1 << _LINE_BITS) - 2], start=2):
            rows.append((base + n, f"{text} {' '.join(lexical.identifier_parts(text))}"))
    where: dict[int, dict[str, set[str]]] = {}
    best: dict[int, list[int]] = {}
    try:
        with contextlib.closing(sqlite3.connect(":memory:")) as conn:
            tokenize = f"tokenize = '{lexical.TOKENIZER}'"
            conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(line, {tokenize})")
            conn.executemany("INSERT INTO t (rowid, line) VALUES (?, ?)", rows)
            for term in query.terms:
                quoted = '"' + term.replace('"', '""') + '"'
                for (rowid,) in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (quoted,)):
                    kind = rowid & ((1 << _LINE_BITS) - 1)
                    place = {_TITLE_LINE: "title", _TAGS_LINE: "tags"}.get(kind, "body")
                    where.setdefault(rowid >> _LINE_BITS, {}).setdefault(term, set()).add(place)
            ranked = conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank", (query.fts,))
            for (rowid,) in ranked:
                kind = rowid & ((1 << _LINE_BITS) - 1)
                if kind > _TAGS_LINE:
                    picked = best.setdefault(rowid >> _LINE_BITS, [])
                    if len(picked) < LINES:
                        picked.append(kind - 1)
    except sqlite3.OperationalError as exc:
        if not is_query_error(exc):
            raise
        return empty
    out: list[tuple[tuple[Line, ...], tuple[str, ...]]] = []
    for i, memory in enumerate(memories):
        lines = memory.body.splitlines()
        numbers = sorted(best.get(i, []))
        matched = where.get(i, {})
        words = tuple(
            f"{term} ({', '.join(sorted(places))})" for term, places in matched.items()
        )
        out.append((tuple(Line.at(lines, n) for n in numbers if n <= len(lines)), words))
    return out


def recall(
    readers: Iterable[index_queries.Queries],
    query: str,
    *,
    limit: int = 10,
    category: str | None = None,
    tags: Iterable[str] | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    budget: int | None = None,
    layer: str | None = None,
    project: str | None = None,
    semantic: bool = True,
    valid_us: int | None = None,
) -> RecallResults:
    """The memories of ``readers`` (one a scope) that answer ``query``, best first;
    ``semantic=False`` ranks by words alone (no embedder is loaded); a tree's reader never
    ranks by meaning."""
    parsed = parse(query)
    results = RecallResults(query=clean(query), budget=budget)
    if not parsed.terms:
        results.notice = "the query has no words to look for"
        return results
    filters = {
        "category": category,
        "tags": sorted(set(tags or ())),
        "include_superseded": include_superseded,
        "include_archived": include_archived,
        "layer": layer,
        "project": project,
        "valid_us": valid_us,
    }
    scored: list[tuple[_Candidate, Memory]] = []
    for reader in readers:
        wanted = semantic and FUSION[1] > 0 and reader.semantic
        nearest = _semantic(reader, parsed.text) if wanted else None
        if nearest is None and wanted:
            results.notice = EMBEDDINGS_OFF
        results.semantic = results.semantic or nearest is not None
        rank = functools.partial(
            _rank_source, scope=reader.scope, query=parsed, filters=filters, semantic=nearest,
            limit=limit,
        )
        scored.extend(reader.read(rank))
    # The best ``limit`` of every source's candidates, explained, and packed for a budget.
    scored.sort(key=lambda item: (-item[0].fused, -item[0].updated_us, item[0].id))
    top = scored[:limit]
    explained = _explain(parsed, [m for _, m in top])
    results.contradictions = _contradictions([m for _, m in top])
    for (cand, memory), (lines, words) in zip(top, explained, strict=True):
        why = [f"matched {', '.join(words)}"] if words else []
        if cand.semantic is not None:
            why.append(f"similar in meaning (cosine {cand.semantic:.2f})")
        if cand.via:
            why.append(f"newest version of {', '.join(cand.via)}, which matched")
        why += [
            f"contradicts {b if a == memory.id else a}, also recalled ("
            + ("linked so)" if kind == "contradicts" else "the other side of a fork)")
            for a, b, kind in results.contradictions
            if memory.id in (a, b)
        ]
        results.hits.append(
            RecallHit(
                id=memory.id,
                title=memory.title,
                score=round(cand.fused, 6),
                lines=lines,
                why=tuple(why),
                memory=memory,
                lexical=cand.lexical,
                semantic=cand.semantic,
            )
        )
    if budget is not None:
        results.packed = pack(results.hits, budget)
    return results


class _Unembedded(Exception):
    """A current index whose vectors are not complete: the full path embeds them first."""


def recall_current(
    current: index_queries.CurrentIndex, query: str, **options: Any
) -> RecallResults | None:
    """:func:`recall` over a current index opened read-only (libgit2 not loaded), for
    ``gitmem recall``; None when it cannot answer as the full path would."""
    try:
        return recall([current], query, **options)
    except _Unembedded:
        return None


def _contradictions(memories: Sequence[Memory]) -> list[tuple[str, str, str]]:
    """Pairs of ``memories`` that say opposite things: one links the other ``contradicts``,
    or they are the two sides of an unresolved fork (a fork's id is its memory's and
    FORK_MARK; two memories superseding one)."""
    ids = {m.id for m in memories}
    found: dict[frozenset[str], tuple[str, str, str]] = {}
    first_successor: dict[str, str] = {}
    for memory in memories:
        pairs = [
            (r.id, "contradicts")
            for r in memory.related
            if r.relationship is Relationship.CONTRADICTS and r.id in ids
        ]
        forked = memory.id.rpartition(FORK_MARK)[0]
        if forked in ids:
            pairs.append((forked, "fork"))
        if memory.supersedes and not forked:
            other = first_successor.setdefault(memory.supersedes, memory.id)
            if other != memory.id:
                pairs.append((other, "fork"))
        for other, kind in pairs:
            found.setdefault(frozenset((memory.id, other)), (other, memory.id, kind))
    return list(found.values())


def _semantic(source: index_queries.Queries, text: str) -> list[tuple[int, float]] | None:
    """The memories nearest the query in meaning, (rowid, cosine) best first; None when no
    embedder can be loaded (the embedder module logs why, once)."""
    from gitmem.store import vectors
    from gitmem.store.embed import get_embedder

    text = text[: vectors.MAX_TEXT]
    current = source if isinstance(source, index_queries.CurrentIndex) else None
    index = cast("Index", source)
    embedder = get_embedder(str(current.gitdir if current else index.db.gitdir))
    if embedder is None:
        return None
    if current is not None:  # read-only: nothing may be embedded
        if not vectors.complete(current.conn, embedder.name):
            raise _Unembedded
        try:
            return vectors.nearest_in(current.conn, text, DEPTH, embedder)
        except Exception:  # the full path reports (and remembers) the embedder's failure
            raise _Unembedded from None
    try:
        return vectors.nearest(index, text, DEPTH, embedder=embedder)
    except (sqlite3.DatabaseError, MemoryError):
        raise
    except Exception as exc:  # an embedder's bug must not make a query fail: words still rank
        log.warning("semantic recall skipped: %s: %s", type(exc).__name__, exc)
        return None


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` costs a language model (four characters a token)."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def memory_text(hit: RecallHit) -> str:
    """A memory as handed to an agent: its title as a heading, then its body."""
    body = hit.memory.body.rstrip("\n")
    return f"# {hit.title}\n{body}" if hit.title else body


def pack(hits: Sequence[RecallHit], budget: int) -> list[Packed]:
    """The best memories that fit ``budget`` tokens whole, in rank order; then, with what
    is left, the best lines of those that did not fit."""
    left = max(0, int(budget))
    out: list[Packed] = []
    skipped: list[RecallHit] = []
    for hit in hits:
        text = memory_text(hit)
        cost = estimate_tokens(text)
        if cost <= left:
            out.append(Packed(hit.id, hit.title, text, True, cost))
            left -= cost
        else:
            skipped.append(hit)
    for hit in skipped:
        # An excerpt: the heading, then as many of its best lines (cut short) as fit.
        text = f"# {hit.title} (excerpt)" if hit.title else ""
        added = 0
        for line in hit.lines:
            cut = line.text[: EXCERPT_CHARS - 1] + "\u2026"
            piece = f"{line.number}: {line.text if len(line.text) <= EXCERPT_CHARS else cut}"
            longer = f"{text}\n{piece}" if text else piece
            if estimate_tokens(longer) <= left:
                text, added = longer, added + 1
        if added:
            cost = estimate_tokens(text)
            out.append(Packed(hit.id, hit.title, text, False, cost))
            left -= cost
    return out
