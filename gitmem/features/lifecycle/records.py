"""Light records of the current memories from the index: lifecycle checks run on every hook
and need a few fields of every memory, where whole ``Memory`` objects would cost most.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gitmem.format.model import Scope

if TYPE_CHECKING:
    from gitmem.store.core import Store

_KEYS = ("anchors", "verify", "verify_reason")


@dataclass(frozen=True)
class MemoryRecord:
    id: str
    path: str | None
    title: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    body: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    store_scope: Scope | None = None


def _when(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)


def _extra(text: str) -> dict[str, Any]:
    if not any(f'"{k}"' in text for k in _KEYS):
        return {}
    data = json.loads(text)
    return {k: data[k] for k in _KEYS if k in data} if isinstance(data, dict) else {}


def current_records(
    store: Store,
    *,
    scope: Scope | str | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    text: bool = True,
) -> list[MemoryRecord]:
    """The memories ``Store.list()`` would give, as light records, oldest first;
    ``text=False`` leaves out body and extra (enough for staleness)."""
    columns = ("id", "path", "title", "created_us", "updated_us") + (
        ("body", "extra") if text else ()
    )
    out: list[MemoryRecord] = []
    for each in [Scope(scope)] if scope is not None else store.scopes:
        rows = store.reader(each).rows(
            columns, include_superseded=include_superseded, include_archived=include_archived
        )
        out += [
            MemoryRecord(
                r[0],
                r[1],
                r[2],
                _when(r[3]),
                _when(r[4]),
                r[5] if text else "",
                _extra(r[6]) if text else {},
                each,
            )
            for r in rows
        ]
    out.sort(key=lambda r: (r.created_at, r.id))
    return out
