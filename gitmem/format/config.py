"""The committed store configuration (``gitmem.yaml`` at the store root).

It is versioned with the memories, so a policy change is a reviewable commit.
Unknown keys are kept: later features (lifecycle policy, hooks) add sections.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gitmem.base.errors import InvalidMemoryError, UnsupportedFormatError
from gitmem.format.model import Scope

FORMAT = 4
"""The newest store format this gitmem reads and writes (``format:`` in gitmem.yaml; a
store that says nothing is format 1). docs/format.md lists what each one changed;
``gitmem migrate`` brings an older store up (gitmem.features.migrate)."""
DEFAULT_FORMAT = 4
"""The format ``gitmem init`` (and a project or user store made on first use) makes without
``--format``: format 4, format 3's derived version and updated_at with memories in 16-way
folders (``memories/a/b/c/d/<id>.md``; docs/format.md). An existing store keeps its format
until ``gitmem migrate --to 4`` (or ``--to 3``)."""
DERIVED_FORMAT = 3
"""The first format whose files do not carry the per-write fields: ``version`` and
``updated_at`` are derived from history (gitmem.store.derived)."""
DEFAULT_MAX_BODY_BYTES = 1024 * 1024

_PLAIN_CONFIG_RE = re.compile(
    r"((?:#[^\n]*\n)*)"
    r"format: ([1-9][0-9]{0,8})\n"
    r"scope: (repo|user)\n"
    r"limits:\n"
    r"  max_body_bytes: ([1-9][0-9]{0,11})\n"
)
"""gitmem.yaml as :func:`initial_text` writes it (comment lines, then the three settings
in its spelling): read without a YAML parser, so that a write, which reads the config
first, does not import PyYAML (~10 ms) for it. Decimal numbers without a leading zero
(YAML 1.1 reads ``010`` as octal), the two scope words, which YAML reads as the same
strings, and comments of characters Python calls printable (all of which YAML accepts;
a character class for them cost 3 ms to compile per process); anything else in the file,
even a comment after a value, goes to the YAML reader (tests/test_config.py checks that
both readers agree)."""


@dataclass(frozen=True)
class StoreConfig:
    scope: Scope = Scope.REPO
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    raw: dict[str, Any] = field(default_factory=dict)
    format: int = 1
    """The store's format version (``format:``; 1 when absent)."""

    @classmethod
    def from_text(cls, text: str) -> StoreConfig:
        plain = _PLAIN_CONFIG_RE.fullmatch(text)
        if plain is not None and all(line.isprintable() for line in plain[1].split("\n")):
            _, version, scope_word, max_body = plain.groups()
            data: Any = {
                "format": int(version),
                "scope": scope_word,
                "limits": {"max_body_bytes": int(max_body)},
            }
            return cls(
                scope=Scope(scope_word), max_body_bytes=int(max_body), raw=data, format=int(version)
            )
        # Here, not at the top: readers that only need FORMAT do not load PyYAML.
        from gitmem.format.codec import load_yaml

        data, _ = load_yaml(text)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InvalidMemoryError("gitmem.yaml must be a mapping")
        limits = data.get("limits") or {}
        if not isinstance(limits, dict):
            raise InvalidMemoryError("gitmem.yaml 'limits' must be a mapping")
        try:
            scope = Scope(data.get("scope", "repo"))
        except ValueError:
            raise InvalidMemoryError(
                f"gitmem.yaml scope {data.get('scope')!r} is not repo or user"
            ) from None
        max_body = limits.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        if not isinstance(max_body, int) or isinstance(max_body, bool) or max_body <= 0:
            raise InvalidMemoryError("gitmem.yaml limits.max_body_bytes must be a positive integer")
        version = data.get("format", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InvalidMemoryError("gitmem.yaml format must be a positive integer")
        return cls(scope=scope, max_body_bytes=max_body, raw=data, format=version)

    def check_supported(self, where: str) -> None:
        """Refuse a store written in a newer format than this gitmem knows: reading it as
        an older one could misread it, and writing could damage it."""
        if self.format > FORMAT:
            raise UnsupportedFormatError(
                f"{where} is a format {self.format} store; this gitmem reads formats up to {FORMAT}"
            )


def initial_text(scope: Scope, format: int = DEFAULT_FORMAT) -> str:
    if not 1 <= format <= FORMAT:
        raise UnsupportedFormatError(
            f"cannot make a format {format} store; this gitmem writes formats 1 to {FORMAT}"
        )
    return (
        "# gitmem store configuration: versioned and reviewable like the memories.\n"
        f"format: {format}\n"
        f"scope: {scope}\n"
        "limits:\n"
        f"  max_body_bytes: {DEFAULT_MAX_BODY_BYTES}\n"
    )


ATTRIBUTES_TEXT = (
    "# memory-aware merges for plain git merge / pull / rebase (gitmem merge-driver)\n"
    "*.md merge=gitmem\n"
)
