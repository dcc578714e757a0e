"""What the store's reads return: versions, histories, log entries and problems."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from gitmem.base.clock import format_timestamp
from gitmem.format.model import Memory, Scope

HISTORY_PAGE = 100
"""Versions a ``gitmem history`` shows per call unless told (``python -m bench.history``)."""
LOG_PAGE = 100
"""Commits a ``gitmem log`` shows per call unless told (``python -m bench.history``)."""


@dataclass(frozen=True)
class Version:
    """One step of a memory's history: a commit that changed one file of the chain."""

    memory_id: str
    version: int | None
    commit: str
    time: dt.datetime
    author: str
    agent: str | None
    op: str
    memory: Memory | None
    """The content at that point; None for a deletion."""
    counted: bool = field(default=True, compare=False)
    """Whether the commit is a version of the memory (gitmem.store.memory_versions)."""
    source: tuple[str, str] | None = field(default=None, compare=False, repr=False)
    """(blob id, path) of the content, not read yet: a history reads only its page's."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.memory_id,
            "version": self.version,
            "commit": self.commit,
            "time": format_timestamp(self.time),
            "author": self.author,
            "agent": self.agent,
            "op": self.op,
            "memory": self.memory.to_dict() if self.memory is not None else None,
        }


@dataclass(frozen=True)
class History:
    """A page of a memory's versions, oldest first (``Store.history``)."""

    versions: list[Version]
    warnings: list[str] = field(default_factory=list)
    earlier: int = 0
    """Versions before this page (``Store.history(limit=...)``): 0 on the last page."""

    def __iter__(self) -> Iterator[Version]:
        return iter(self.versions)

    def __len__(self) -> int:
        return len(self.versions)

    def __getitem__(self, index: int) -> Version:
        return self.versions[index]

    def to_dict(self) -> dict[str, Any]:
        """The one JSON shape of a history: the CLI, the web view and MCP print it."""
        versions = [v.to_dict() for v in self.versions]
        return {"versions": versions, "warnings": list(self.warnings), "earlier": self.earlier}


@dataclass(frozen=True)
class LogEntry:
    commit: str
    time: dt.datetime
    author: str
    author_email: str
    subject: str
    ops: list[str]
    ids: list[str]
    supersedes: list[str]
    agent: str | None
    session: str | None
    scope: Scope | None = None
    unlisted: int = 0
    """How many more memories the commit changed than ``ids`` names (a bulk write)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(time=format_timestamp(self.time), scope=self.scope and str(self.scope))
        out["ids_unlisted"] = out.pop("unlisted")
        return out


@dataclass(frozen=True)
class Problem:
    """A file in the store that gitmem cannot read as a memory."""

    path: str
    message: str
    scope: Scope | None = None
