"""Version chains: ``supersedes`` links back to the root, successors forward. Links are
written by hand too, so a walk ends on a cycle, a gap or a depth bound with a warning.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from gitmem.format.model import Memory

DEFAULT_MAX_DEPTH = 1000


@dataclass(frozen=True)
class Chain:
    """A version chain, root first, ending at the memory it was asked for."""

    ids: list[str]
    memories: list[Memory]
    warnings: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Memory]:
        return iter(self.memories)


RENAMED_FROM = "renamed_from"
"""The front-matter key naming the id a memory had before it was moved (the memory tool's
rename writes it), so its history goes on from the old id's, as ``git log --follow`` does."""


def earlier(memory: Memory) -> str | None:
    """The memory ``memory`` goes on from: the one it supersedes, else the one it was
    renamed from."""
    old = memory.extra.get(RENAMED_FROM)
    return memory.supersedes or (old if isinstance(old, str) and old else None)


def walk_back(
    start: Memory,
    lookup: Callable[[str], Memory | None],
    max_depth: int = DEFAULT_MAX_DEPTH,
    link: Callable[[Memory], str | None] = operator.attrgetter("supersedes"),
) -> Chain:
    """Follow ``link`` (``supersedes``, or :func:`earlier`) from ``start`` to the root."""
    ids = [start.id]
    memories = [start]
    warnings: list[str] = []
    seen = {start.id}
    current = start
    while target := link(current):
        how = "supersedes" if target == current.supersedes else "was renamed from"
        if target in seen:
            warnings.append(
                f"version chain has a cycle: {current.id} {how} {target}, already in the chain"
            )
            break
        if len(ids) > max_depth:
            warnings.append(f"version chain is deeper than {max_depth}; stopped at {current.id}")
            break
        previous = lookup(target)
        if previous is None:
            warnings.append(f"{current.id} {how} {target}, which is not in the store")
            break
        seen.add(target)
        ids.append(target)
        memories.append(previous)
        current = previous
    ids.reverse()
    memories.reverse()
    return Chain(ids, memories, warnings)


def newest(memories: Sequence[Memory]) -> Memory:
    """Of several successors, the one every reader follows: highest version, later
    ``updated_at``, then id."""
    return max(memories, key=lambda m: (m.version, m.updated_at, m.id))


def walk_forward(
    start_id: str,
    next_of: Callable[[str], Sequence[Memory]],
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> tuple[str, list[str]]:
    """The newest memory reachable from ``start_id`` through successors (of several, the one
    :func:`newest` picks, so every reader picks the same one), and warnings."""
    current = start_id
    seen = {start_id}
    warnings: list[str] = []
    for _ in range(max_depth):
        nexts = [m for m in next_of(current) if m.id not in seen]
        if not nexts:
            return current, warnings
        if len(nexts) > 1:
            warnings.append(
                f"{current} has {len(nexts)} successors "
                f"({', '.join(sorted(m.id for m in nexts))}); "
                "following the newest"
            )
        best = newest(nexts)
        seen.add(best.id)
        current = best.id
    warnings.append(f"successor chain is deeper than {max_depth}; stopped at {current}")
    return current, warnings
