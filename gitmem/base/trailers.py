"""Commit messages and their ``Gitmem-*`` trailers (``Gitmem-Op: create``, ``Gitmem-Id:``,
...), which the log, audit, review and the index read back.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

OP_TRAILER = "Gitmem-Op"
ID_TRAILER = "Gitmem-Id"
IDS_UNLISTED_TRAILER = "Gitmem-Ids-Unlisted"
"""How many more memories a commit changed than its ``Gitmem-Id`` trailers name (a bulk
import names its first thousand)."""
AGENT_TRAILER = "Gitmem-Agent"
SESSION_TRAILER = "Gitmem-Session"
SUPERSEDES_TRAILER = "Gitmem-Supersedes"
PRUNE_TRAILER = "Gitmem-Prune"
FORK_TRAILER = "Gitmem-Fork"
DECIDED_TRAILER = "Gitmem-Decided"
KEPT_OVER_DELETE_TRAILER = "Gitmem-Kept-Over-Delete"
UNDOES_TRAILER = "Gitmem-Undoes"
REASON_TRAILER = "Gitmem-Reason"
"""Why a memory's validity ended (``gitmem invalidate``), beside ``Gitmem-Valid-Until``."""
VALID_UNTIL_TRAILER = "Gitmem-Valid-Until"

_TRAILER_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*):[ \t]*(.*)$")
_UNSAFE_LINE_RE = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Author:
    name: str
    email: str


@dataclass
class CommitSpec:
    """What a plan wants the commit to say."""

    subject: str
    body: str | None = None
    trailers: list[tuple[str, str]] = field(default_factory=list)
    author: Author | None = None
    merge_parents: tuple[str, ...] = ()
    """Further parents (commit ids) after the branch tip: a merge commit (``gitmem sync``)."""


def format_message(spec: CommitSpec) -> str:
    subject = _UNSAFE_LINE_RE.sub(" ", spec.subject).strip() or "gitmem write"
    if len(subject) > 100:
        subject = subject[:99] + "…"
    parts = [subject]
    if spec.body and spec.body.strip():
        parts.append(spec.body.strip())
    if spec.trailers:
        parts.append(
            "\n".join(f"{k}: {_UNSAFE_LINE_RE.sub(' ', v).strip()}" for k, v in spec.trailers)
        )
    return "\n\n".join(parts) + "\n"


def parse_trailers(message: str, keys: Collection[str] | None = None) -> list[tuple[str, str]]:
    """The trailers of a commit message: its last paragraph, when every line is ``Key: value``.
    ``keys`` keeps only those keys (every line is still checked)."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return []
    out: list[tuple[str, str]] = []
    for line in paragraphs[-1].splitlines():
        match = _TRAILER_RE.match(line)
        if match is None:
            return []
        if keys is None or match.group(1) in keys:
            out.append((match.group(1), match.group(2).strip()))
    return out


def _email_local(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return cleaned or "agent"


def agent_author(agent: str) -> Author:
    """The commit author for an agent: ``git log --author=<agent>`` finds its writes."""
    return Author(agent, f"{_email_local(agent)}@agents.gitmem.invalid")
