"""The committed store configuration (``gitmem.yaml``, schemas/config.schema.json): whoever
can push writes it, so its policy only tightens (what loosens is ignored, :func:`loosened`);
the user's own settings for a store (:class:`PolicyMapping`) may loosen.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from gitmem.base import logs
from gitmem.base.errors import InvalidMemoryError, OldFormatError, UnsupportedFormatError
from gitmem.format import schema
from gitmem.format.model import Scope
from gitmem.format.schema import is_number

FORMAT = 6
"""The store format this gitmem reads and writes (``format:`` in gitmem.yaml, 1 when absent);
an older store is read only by ``gitmem migrate``, a newer one is refused (docs/format.md)."""
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
CONFIG_SCHEMA = "config.schema.json"


@dataclass(frozen=True)
class StoreConfig:
    scope: Scope = Scope.REPO
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    raw: dict[str, Any] = field(default_factory=dict)
    format: int = 1
    """The store's format version (``format:``; 1 when absent)."""

    @classmethod
    def from_text(cls, text: str) -> StoreConfig:
        from gitmem.format.yamlio import load_yaml  # PyYAML: only for readers of a config

        data, _ = load_yaml(text)
        if not isinstance(data, dict | None):
            raise InvalidMemoryError("gitmem.yaml must be a mapping")
        data = data or {}
        schema.validate(data, schema=CONFIG_SCHEMA, what="gitmem.yaml")
        max_body = (data.get("limits") or {}).get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        return cls(
            scope=Scope(data.get("scope", "repo")),
            max_body_bytes=min(max_body, DEFAULT_MAX_BODY_BYTES),
            raw=data,
            format=int(data.get("format", 1)),
        )

    def with_local(self, local: Mapping[str, Any], where: str) -> StoreConfig:
        """This config with the user's own settings beside it: ``max_body_bytes`` is theirs
        when set, else the committed one up to the built-in 1 MiB."""
        raw = PolicyMapping(self.raw, local, where)
        mine = local_part(raw, "limits").get("max_body_bytes")
        if mine is None:
            committed = (self.raw.get("limits") or {}).get("max_body_bytes")
            committed_limit(raw, "limits.max_body_bytes", committed, DEFAULT_MAX_BODY_BYTES)
            return dataclasses.replace(self, raw=raw)
        mine_only = {"limits": {"max_body_bytes": mine}}
        schema.validate(mine_only, schema=CONFIG_SCHEMA, what=f"{where}:")
        return dataclasses.replace(self, raw=raw, max_body_bytes=mine)

    def check_supported(self, where: str) -> None:
        """Refuse a store of another format: a newer one could be misread or damaged, an
        older one is read by ``gitmem migrate`` only (:class:`OldFormatError`)."""
        if self.format > FORMAT:
            raise UnsupportedFormatError(
                f"{where} is a format {self.format} store; this gitmem reads format {FORMAT}"
            )
        if self.format < FORMAT:
            raise OldFormatError(
                f"{where} is a format {self.format} store; run `gitmem migrate` to convert it "
                "(one commit)"
            )


def initial_text(scope: Scope) -> str:
    return (
        "# gitmem store configuration: versioned and reviewable like the memories.\n"
        f"format: {FORMAT}\n"
        f"scope: {scope}\n"
        "limits:\n"
        f"  max_body_bytes: {DEFAULT_MAX_BODY_BYTES}\n"
    )


ATTRIBUTES_TEXT = (
    "# memory-aware merges for plain git merge / pull / rebase (gitmem merge-driver)\n"
    "*.md merge=gitmem\n"
)


# -- policy: a committed file only tightens ------------------------------------------------

log = logs.get("gitmem")

GENERIC_WHERE = "your own gitmem configuration under stores: {<git dir>: ...} (docs/security.md)"


class PolicyMapping(dict[str, Any]):
    """gitmem.yaml's mapping with the user's own settings for this store beside it
    (:attr:`local`, in gitmem.yaml's shape); a plain mapping carries none."""

    def __init__(self, committed: Mapping[str, Any], local: Mapping[str, Any], where: str) -> None:
        super().__init__(committed)
        self.local = local
        self.where = where  # where the user sets them, for messages


def local_part(raw: Mapping[str, Any] | None, *path: str) -> Mapping[str, Any]:
    """The user's own settings for this store at ``path`` (``"lifecycle", "staleness"``):
    {} for a plain mapping or where the local configuration sets nothing."""
    found: Any = getattr(raw, "local", None) or {}
    for depth, key in enumerate(path, 1):
        found = found.get(key)
        if found is None:
            return {}
        if not isinstance(found, Mapping):
            where = ".".join(path[:depth])
            raise InvalidMemoryError(f"{local_where(raw)}: {where} must be a mapping")
    mapping: Mapping[str, Any] = found
    return mapping


def local_where(raw: Mapping[str, Any] | None) -> str:
    """Where the user's own settings for this store go, for messages."""
    return str(getattr(raw, "where", "") or GENERIC_WHERE)


_collecting: ContextVar[list[str] | None] = ContextVar("gitmem_loosened", default=None)
_warned: set[str] = set()


@contextlib.contextmanager
def collecting_loosened() -> Iterator[list[str]]:
    """Gather what committed settings try to loosen instead of warning of it (the hub's
    hook refuses such a push)."""
    found: list[str] = []
    token = _collecting.set(found)
    try:
        yield found
    finally:
        _collecting.reset(token)


def loosened(raw: Mapping[str, Any] | None, key: str, what: str, *, local_key: str = "") -> None:
    """Say that gitmem.yaml's ``key`` would loosen policy (``what`` it would do) and is
    ignored: one warning per process, or collected (:func:`collecting_loosened`).
    ``local_key`` names the local setting that does it, when it is not ``key`` itself."""
    sink = _collecting.get()
    if sink is not None:
        sink.append(
            f"gitmem.yaml {key} {what}; a store's committed file may only tighten policy "
            f"({local_key or key} belongs in each user's own configuration, per store)"
        )
        return
    message = (
        f"gitmem.yaml {key} {what}: ignored, a store's committed file may only tighten "
        f"policy; to do it on this machine, set {local_key or key} in {local_where(raw)}"
    )
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def committed_limit(
    raw: Mapping[str, Any] | None,
    key: str,
    committed: Any,
    default: Any,
    *,
    higher_is_tighter: bool = False,
) -> Any:
    """``committed`` where it is not a number (the caller reports that) or tightens
    ``default``; else ``default``, with :func:`loosened`."""
    if not is_number(committed) or not is_number(default):
        return committed
    if committed < default if higher_is_tighter else committed > default:
        change = "lowers" if higher_is_tighter else "raises"
        loosened(raw, key, f"{change} the limit to {committed} (built-in: {default})")
        return default
    return committed
