"""Row providers: other modules' tables in the index (full text, vectors, the knowledge
graph), registered when their module is imported and kept current by every catch-up."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitmem.base.errors import InvalidInputError
from gitmem.store.index_rows import RowChanges
from gitmem.store.index_schema import CORE_TABLES

if TYPE_CHECKING:  # only named: readers of a current index (index_queries) never load it
    import pygit2

_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,40}")

RowApply = Callable[[sqlite3.Connection, "pygit2.Repository", RowChanges], None]


@dataclass(frozen=True)
class RowProvider:
    """Derived tables another module owns (``ddl`` makes ``tables``, in an order DROP can follow),
    kept current by catch-up: ``apply`` runs in its transaction, must not commit and must be
    pure (a catch-up equals a rebuild). A new ``version`` refills them from every current
    memory under ``under`` (a path prefix; "" for all)."""

    name: str
    version: int
    tables: tuple[str, ...]
    ddl: tuple[str, ...]
    apply: RowApply
    under: str = ""


PROVIDERS: dict[str, RowProvider] = {}


FULL_FILL_CHUNK = 1000
"""Memories per :attr:`RowProvider.apply` call while a provider's tables are filled."""


def register(provider: RowProvider) -> None:
    """Add (or replace, by name) a row provider. Raises InvalidInputError for a malformed
    name or a table the core or another provider owns."""
    taken = {t for p in PROVIDERS.values() if p.name != provider.name for t in p.tables}
    bad = [n for n in (provider.name, *provider.tables) if not _NAME_RE.fullmatch(n)]
    bad += sorted((CORE_TABLES | taken) & set(provider.tables))
    if bad:
        names = ", ".join(map(repr, bad))
        raise InvalidInputError(f"row provider {provider.name!r}: bad or taken names {names}")
    PROVIDERS[provider.name] = provider


def provider_state(provider: RowProvider, commit: str) -> str:
    """The ``meta`` value saying ``provider``'s rows reflect ``commit``."""
    state = f"{provider.version} {commit}"
    return f"{state} {provider.under}" if provider.under else state


def provider_key(provider: RowProvider | str) -> str:
    """The ``meta`` key saying which version and commit a provider's rows reflect."""
    return f"provider:{provider if isinstance(provider, str) else provider.name}"
