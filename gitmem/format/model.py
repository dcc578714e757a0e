"""Memory and the small enums around it."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gitmem.base.clock import format_timestamp, parse_timestamp
from gitmem.base.errors import GitmemError, InvalidMemoryError
from gitmem.format.schema import to_json_value

if TYPE_CHECKING:
    from gitmem.format.codec import Document


class Scope(enum.StrEnum):
    REPO = "repo"
    USER = "user"


class Relationship(enum.StrEnum):
    SUPERSEDES = "supersedes"
    REFINES = "refines"
    CONTRADICTS = "contradicts"
    RELATES_TO = "relates-to"


class Trigger(enum.StrEnum):
    CADENCE = "cadence"
    COMPACTION = "compaction"
    MANUAL = "manual"
    HOOK = "hook"
    IMPORT = "import"


class Status(enum.StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    SUPERSEDED = "superseded"
    """Never stored: a listing's mark on a memory another one supersedes."""


class Op(enum.StrEnum):
    """The operation recorded in a commit's ``Gitmem-Op`` trailer."""

    CREATE = "create"
    UPDATE = "update"
    APPEND = "append"
    SUPERSEDE = "supersede"
    DELETE = "delete"
    RESTORE = "restore"
    TRANSACTION = "transaction"
    INIT = "init"
    MIGRATE = "migrate"
    """``gitmem migrate``: converts the files, makes no version of any memory."""
    INVALIDATE = "invalidate"
    """``gitmem invalidate``: a memory's validity ended, with the reason in a trailer."""


UNTITLED = "(untitled)"
"""How a memory without a title is shown wherever titles are (ls, search, recall, pictures)."""

BUILTIN_CATEGORIES: tuple[str, ...] = (
    "coding-preferences",
    "project-conventions",
    "architectural-decisions",
    "user-facts",
    "corrections",
    "patterns",
)

# Front-matter keys gitmem knows, in the order a new file is written.
KNOWN_KEYS: tuple[str, ...] = (
    "id",
    "title",
    "scope",
    "category",
    "tags",
    "created_at",
    "valid_from",
    "valid_until",
    "supersedes",
    "related",
    "agent",
    "session_id",
    "trigger",
    "status",
)

DERIVED_KEYS: tuple[str, ...] = ("updated_at", "version")
"""Derived from history on read, never written into a file (exports and show print them)."""

# Fields a caller may set through create/update/supersede (the rest the store manages).
EDITABLE_FIELDS: frozenset[str] = frozenset(
    {"title", "category", "tags", "related", "agent", "session_id", "trigger", "status"}
    | {"valid_from", "valid_until"}
)


@dataclass(frozen=True)
class Related:
    id: str
    relationship: Relationship

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "relationship": str(self.relationship)}


@dataclass(frozen=True)
class Memory:
    """One memory: front-matter fields (``extra``: unknown keys, verbatim), body, and where
    it was read from. ``version`` and ``updated_at`` are derived from history;
    ``valid_from``/``valid_until`` say when the fact held in the world (:meth:`valid_at`)."""

    id: str
    body: str
    created_at: dt.datetime
    updated_at: dt.datetime
    version: int
    title: str | None = None
    scope: Scope | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    supersedes: str | None = None
    related: tuple[Related, ...] = ()
    agent: str | None = None
    session_id: str | None = None
    trigger: Trigger | None = None
    status: Status = Status.ACTIVE
    valid_from: dt.datetime | None = None
    valid_until: dt.datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    store_scope: Scope | None = field(default=None, compare=False)
    """Which store of a multi-scope Store this memory came from."""
    document: Document | None = field(default=None, repr=False, compare=False)
    """The parsed file this memory came from, kept for lossless re-serialization."""

    @property
    def archived(self) -> bool:
        return self.status is Status.ARCHIVED

    def valid_at(self, when: dt.datetime) -> bool:
        """Whether the fact held at ``when``: ``valid_from <= when < valid_until``."""
        return (self.valid_from is None or self.valid_from <= when) and (
            self.valid_until is None or when < self.valid_until
        )

    def to_metadata(self) -> dict[str, Any]:
        """The front-matter mapping, keeping the original file's key order and unknown keys."""
        known: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "scope": str(self.scope) if self.scope else None,
            "category": self.category,
            "tags": list(self.tags) if self.tags else None,
            "created_at": self.created_at,
            "valid_from": self.valid_from,
            "valid_until": self.valid_until,
            "supersedes": self.supersedes,
            "related": [r.to_dict() for r in self.related] if self.related else None,
            "agent": self.agent,
            "session_id": self.session_id,
            "trigger": str(self.trigger) if self.trigger else None,
            "status": None if self.status is not Status.ARCHIVED else str(self.status),
        }
        original = self.document.metadata if self.document is not None else {}
        before = _fields_of(self.document)
        out: dict[str, Any] = {}
        for key in original:
            if key in DERIVED_KEYS:
                continue
            if key in known:
                if before is not None and key in before and before[key] == getattr(self, key):
                    # Unchanged in meaning: keep the file's own value verbatim (timestamp
                    # spelling, `status: active`, `tags: []`, unknown keys inside `related`).
                    out[key] = original[key]
                elif key == "related" and self.related:
                    out[key] = _related_entries(self.related, original[key])
                elif known[key] is not None:
                    out[key] = known[key]
            elif key in self.extra:
                out[key] = self.extra[key]
        # New keys after the file's own: the known ones in KNOWN_KEYS order, then unknown ones.
        out |= {key: value for key, value in known.items() if key not in out and value is not None}
        out |= {key: value for key, value in self.extra.items() if key not in out}
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the memory (timestamps as RFC 3339 strings), with its
        derived ``updated_at`` and ``version``."""
        meta = {k: to_json_value(v) for k, v in self.rendered_metadata().items()}
        meta["body"] = self.body
        meta["path"] = self.path
        if self.status is Status.SUPERSEDED:  # a listing's mark, never in the file
            meta["status"] = str(self.status)
        if self.store_scope is not None:
            meta["store_scope"] = str(self.store_scope)
        return meta

    def rendered_metadata(self) -> dict[str, Any]:
        """:meth:`to_metadata` with the derived ``updated_at`` and ``version`` after
        ``created_at``: the front-matter ``gitmem show`` prints and an export writes."""
        out: dict[str, Any] = {}
        for key, value in self.to_metadata().items():
            out[key] = value
            if key == "created_at":
                out["updated_at"], out["version"] = self.updated_at, self.version
        return out


def validity_text(memory: Memory) -> str:
    """``2026-03-01 .. 2026-06-01T12:00:00Z`` (an open end left out), or ``always``: how
    history and messages show a memory's valid time."""
    if memory.valid_from is None and memory.valid_until is None:
        return "always"
    ends = [
        "" if t is None else t.date().isoformat() if t.time() == dt.time() else format_timestamp(t)
        for t in (memory.valid_from, memory.valid_until)
    ]
    return " .. ".join(ends).strip()


def _fields_of(document: Document | None) -> dict[str, Any] | None:
    """The known fields as a Memory read from ``document`` holds them, or None if it cannot."""
    if document is None:
        return None
    try:
        before = memory_from_document(document)
    except (GitmemError, ValueError, TypeError, KeyError):
        return None
    return {key: getattr(before, key) for key in KNOWN_KEYS}


def _related_entries(related: tuple[Related, ...], original: Any) -> list[dict[str, Any]]:
    """``related`` as front-matter, reusing the file's own entry (unknown keys and all) for
    every relation that is still there."""
    kept: dict[tuple[str, str], Any] = {}
    for entry in original if isinstance(original, list) else ():
        if isinstance(entry, dict):
            kept.setdefault((str(entry.get("id")), str(entry.get("relationship"))), entry)
    return [kept.get((r.id, str(r.relationship)), r.to_dict()) for r in related]


def _timestamp(meta: dict[str, Any], key: str) -> dt.datetime:
    value = meta[key]
    try:
        return parse_timestamp(value)
    except (TypeError, ValueError):
        raise InvalidMemoryError(
            f"front-matter {key!r} is not an RFC 3339 timestamp: {value!r}"
        ) from None


def check_window(since: dt.datetime | None, until: dt.datetime | None) -> None:
    """Refuse a validity window that ends before it starts (every reader and writer)."""
    if since is not None and until is not None and until < since:
        raise InvalidMemoryError(
            f"valid_until ({format_timestamp(until)}) is before valid_from "
            f"({format_timestamp(since)})"
        )


def memory_from_document(
    doc: Document, *, path: str | None = None, store_scope: Scope | None = None
) -> Memory:
    """Build a Memory from a parsed document whose metadata already passed the schema."""
    meta = doc.metadata
    related = tuple(
        Related(str(r["id"]), Relationship(r["relationship"])) for r in meta.get("related") or ()
    )
    tags = tuple(str(t) for t in meta.get("tags") or ())
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS and k not in DERIVED_KEYS}
    created = _timestamp(meta, "created_at")
    since, until = (
        _timestamp(meta, key) if meta.get(key) is not None else None
        for key in ("valid_from", "valid_until")
    )
    check_window(since, until)
    return Memory(
        id=str(meta["id"]),
        body=doc.body,
        created_at=created,
        updated_at=created,
        version=1,
        title=_opt_str(meta.get("title")),
        scope=Scope(meta["scope"]) if meta.get("scope") else None,
        category=_opt_str(meta.get("category")),
        tags=tags,
        supersedes=_opt_str(meta.get("supersedes")),
        related=related,
        agent=_opt_str(meta.get("agent")),
        session_id=_opt_str(meta.get("session_id")),
        trigger=Trigger(meta["trigger"]) if meta.get("trigger") else None,
        status=Status(meta["status"]) if meta.get("status") else Status.ACTIVE,
        valid_from=since,
        valid_until=until,
        extra=extra,
        path=path,
        document=doc,
        store_scope=store_scope,
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
