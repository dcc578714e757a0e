"""Near-duplicates: stored memories that say much the same as a new one, found by recall's
words and kept by the overlap of their stemmed content words (``gitmem add`` and the MCP
``remember`` tool offer to update one of them instead)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gitmem.base import logs
from gitmem.base.printable import printable
from gitmem.format.model import Memory
from gitmem.store import lexical
from gitmem.store.bm25 import clean
from gitmem.store.recall import RecallHit, recall

if TYPE_CHECKING:
    from gitmem.store.reader import Reader


log = logs.get(__name__)


NEAR_DUPLICATE = 0.8
"""Two memories are near-duplicates from this Dice similarity of their stemmed content words."""


_DUPLICATE_QUERY_CHARS = 2000


def near_duplicates(
    reader: Reader, memory: Memory, *, limit: int = 3
) -> list[tuple[RecallHit, float]]:
    """Memories of ``reader`` that say much the same as ``memory`` (stored), most similar
    first: what recall finds for its title and body by words alone, kept when their content
    words overlap enough. ``memory`` itself and the memory it supersedes are left out."""
    text = "\n".join(x for x in (memory.title, memory.body[:_DUPLICATE_QUERY_CHARS]) if x)
    found = [
        h
        for h in recall([reader], text, limit=limit + 5, semantic=False)
        if h.id not in (memory.id, memory.supersedes)
    ]
    if not found:
        return []
    texts = [text, *("\n".join(x for x in (h.title, h.memory.body) if x) for h in found)]
    # The content words of each text as the index's tokenizer stems them.
    stop = lexical.STOP_WORDS
    kept = [" ".join(w for w in lexical.words(clean(t)) if w not in stop) for t in texts]
    sets = [set(each) for each in lexical.stems(kept)]
    mine = sets[0]
    out: list[tuple[RecallHit, float]] = []
    for hit, theirs in zip(found, sets[1:], strict=True):
        if mine and theirs:
            dice = 2 * len(mine & theirs) / (len(mine) + len(theirs))
            if dice >= NEAR_DUPLICATE:
                out.append((hit, round(dice, 3)))
    out.sort(key=lambda pair: -pair[1])
    return out[:limit]


def duplicates_report(reader: Reader, memory: Memory, *, limit: int = 3) -> list[dict[str, Any]]:
    """:func:`near_duplicates` as JSON-ready entries (id, title, similarity). Never raises:
    the memory is stored by then, and a failed check must not make that write an error."""
    try:
        found = near_duplicates(reader, memory, limit=limit)
    except Exception as exc:
        log.warning("near-duplicate check skipped: %s: %s", type(exc).__name__, exc)
        return []
    return [{"id": h.id, "title": h.title, "similarity": sim} for h, sim in found]


def duplicates_text(
    entries: Sequence[dict[str, Any]], *, how: str = "gitmem update {id} (or gitmem supersede)"
) -> list[str]:
    """One line per near-duplicate, offering the update instead (``how`` names the way)."""
    return [
        f"similar to {e['id']}"
        + (f" ({printable(e['title'])})" if e["title"] else "")  # a teammate's title
        + f", {round(100 * e['similarity'])}% the same words: to change that memory "
        f"instead, {how.format(id=e['id'])}"
        for e in entries
    ]
