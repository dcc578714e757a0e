"""The index's rows: the one encoding of a memory as ``memories`` columns
(:func:`row_values`), typed JSON for front-matter values JSON cannot hold, the row types
the index returns, and the SQL filters every listing shares."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gitmem.base.errors import InvalidInputError
from gitmem.format.model import Memory

T = TypeVar("T")

ROW_COLUMNS: tuple[str, ...] = (
    "id", "path", "blob", "title", "scope", "category", "tags", "created_at", "created_us",
    "updated_at", "updated_us", "version", "supersedes", "related", "agent", "session_id",
    "trigger_", "status", "extra", "body", "valid_from_us", "valid_until_us",
)
"""The columns of the ``memories`` table that ``Queries.rows`` can return."""


MEMORY_COLUMNS = ", ".join(
    ["rowid", *(c for c in ROW_COLUMNS if c not in ("created_us", "updated_us"))]
)
"""What :func:`gitmem.store.index_queries.memory_from_row` reads, in its order."""


def tagged_json(value: Any) -> Any:
    """A front-matter value as plain JSON, dates and mappings with keys that are not all
    text tagged, so that ``loads_json(dumps_json(v)) == v``."""
    if isinstance(value, dt.datetime):
        return {"$gitmem": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$gitmem": "date", "v": value.isoformat()}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and "$gitmem" not in value:
            return {k: tagged_json(v) for k, v in value.items()}
        return {"$gitmem": "map", "v": [[tagged_json(k), tagged_json(v)] for k, v in value.items()]}
    if isinstance(value, list | tuple):
        return [tagged_json(v) for v in value]
    if value is None or isinstance(value, str | int | float):
        return value
    raise TypeError(f"cannot index a {type(value).__name__}")


def json_hook(obj: dict[str, Any]) -> Any:
    kind = obj.get("$gitmem")
    if kind == "datetime":
        return dt.datetime.fromisoformat(obj["v"])
    if kind == "date":
        return dt.date.fromisoformat(obj["v"])
    if kind == "map":
        return dict(obj["v"])
    return obj


def dumps_json(value: Any) -> str:
    if not value and isinstance(value, list | dict):
        return "[]" if isinstance(value, list) else "{}"  # most memories' related and extra
    return json.dumps(tagged_json(value), ensure_ascii=False)


_DECODER = json.JSONDecoder(object_hook=json_hook)
"""One decoder for every row (``json.loads`` with a hook makes a new one per call)."""


def loads_json(text: str) -> Any:
    if text == "[]":
        return []  # most memories' related, and extra's "{}": read for every row a refill reads
    if text == "{}":
        return {}
    if not isinstance(text, str) or text.startswith("\ufeff"):
        return json.loads(text, object_hook=json_hook)  # what json.loads says of these
    return _DECODER.decode(text)


def chunks(items: Iterable[T]) -> Iterator[list[T]]:
    """``items`` without repeats, 500 at a time: SQLite bounds the parameters of a query."""
    wanted = list(dict.fromkeys(items))
    for i in range(0, len(wanted), 500):
        yield wanted[i : i + 500]


def marks(chunk: Sized) -> str:
    return ", ".join("?" * len(chunk))


def big_int(value: int | None) -> int | str | None:
    """An integer as SQLite can hold it: as text past 64 bits (versions are written by hand too)."""
    if value is None or -(2**63) <= value < 2**63:
        return value
    return str(value)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def micros(value: dt.datetime) -> int:
    return int(value.timestamp() * 1_000_000)


def valid_micros(value: dt.datetime | None) -> int | None:
    """A valid-time bound as its column holds it: exact microseconds since the epoch."""
    return None if value is None else (value - _EPOCH) // dt.timedelta(microseconds=1)


def from_micros(value: int | None) -> dt.datetime | None:
    return None if value is None else _EPOCH + dt.timedelta(microseconds=value)


def row_values(memory: Memory, blob: str) -> dict[str, Any]:
    """The ``memories`` row of ``memory`` (stored in blob ``blob``), column by column, as
    ``Queries.rows`` returns it: the one encoding of a memory as index columns (the
    tree-served reader answers ``rows`` with it too)."""
    return {
        "id": memory.id,
        "path": memory.path,
        "blob": blob,
        "title": memory.title,
        "scope": str(memory.scope) if memory.scope else None,
        "category": memory.category,
        "tags": dumps_json(list(memory.tags)),
        "created_at": memory.created_at.isoformat(),
        "created_us": micros(memory.created_at),
        "updated_at": memory.updated_at.isoformat(),
        "updated_us": micros(memory.updated_at),
        "version": big_int(memory.version),
        "supersedes": memory.supersedes,
        "related": dumps_json([r.to_dict() for r in memory.related]),
        "agent": memory.agent,
        "session_id": memory.session_id,
        "trigger_": str(memory.trigger) if memory.trigger else None,
        "status": str(memory.status),
        "extra": dumps_json(memory.extra),
        "body": memory.body,
        "valid_from_us": valid_micros(memory.valid_from),
        "valid_until_us": valid_micros(memory.valid_until),
    }


def check_columns(columns: Sequence[str]) -> None:
    """Raise InvalidInputError unless every one of ``columns`` is in :data:`ROW_COLUMNS`."""
    unknown = [c for c in columns if c not in ROW_COLUMNS]
    if unknown or not columns:
        raise InvalidInputError(
            f"unknown index column(s): {', '.join(unknown) or '(none given)'} "
            f"(known: {', '.join(ROW_COLUMNS)})"
        )


@dataclass
class IndexStats:
    commit: str | None
    memories: int
    versions: int
    rebuilt: bool = False
    applied_commits: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class IndexedMemory:
    """One memory as a catch-up hands it to a :class:`RowProvider`."""

    rowid: int
    """Its ``memories.rowid`` (key your rows by it, or by ``memory.id``). A rowid freed by a
    removal may be given to a memory added in the same catch-up: apply removals first."""
    blob: str
    """The git blob id of its file: the same text always has the same blob."""
    memory: Memory


@dataclass(frozen=True)
class RowChanges:
    """What a catch-up changed, for one call of :attr:`RowProvider.apply`: a changed memory
    is in ``removed`` (its old row) and ``added`` (its new one); apply ``removed`` first."""

    full: bool
    """The tables were just made empty: ``added`` holds current memories (over this and
    the following calls of the same fill)."""
    added: tuple[IndexedMemory, ...] = ()
    removed: tuple[IndexedMemory, ...] = ()


def raw_path(text: str) -> str | bytes:
    """Text for SQLite: a path that is not UTF-8 (surrogate escapes) is kept as bytes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")
    return text


def cooked_path(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def memory_filters(
    *,
    category: str | None = None,
    tags: Sequence[str] = (),
    include_superseded: bool = False,
    include_archived: bool = False,
    layer: str | None = None,
    project: str | None = None,
    valid_us: int | None = None,
) -> tuple[str, list[Any]]:
    """A ``WHERE`` clause over ``memories m`` (and its parameters) for the listing filters.

    ``valid_us``: only memories valid then (:meth:`Memory.valid_at`); a superseded one whose
    validity was ended (``valid_until``) is judged by its window, not hidden as replaced."""
    clauses: list[str] = []
    params: list[Any] = []
    if valid_us is not None:
        clauses.append("coalesce(m.valid_from_us, ?) <= ? AND ? < coalesce(m.valid_until_us, ?)")
        params += [valid_us, valid_us, valid_us, valid_us + 1]
    if category is not None:
        clauses.append("m.category = ?")
        params.append(category)
    for tag in tags:
        clauses.append("EXISTS (SELECT 1 FROM tags t WHERE t.memory = m.rowid AND t.tag = ?)")
        params.append(tag)
    if not include_superseded:
        ended = "m.valid_until_us IS NOT NULL OR " if valid_us is not None else ""
        clauses.append(f"({ended}NOT EXISTS (SELECT 1 FROM memories s WHERE s.supersedes = m.id))")
    if not include_archived:
        clauses.append("m.status != 'archived'")
    # Front-matter keys of layered documents, read from the extra keys: no column of theirs.
    for key, value in (("layer", layer), ("project", project)):
        if value is not None:
            clauses.append(f"json_extract(m.extra, '$.{key}') = ?")
            params.append(value)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params
