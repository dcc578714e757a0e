"""The bounds every YAML read keeps, apart from :mod:`gitmem.format.yamlio` so that they
can be named without importing PyYAML."""

from __future__ import annotations

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
MAX_NODES = 100_000
"""Nodes one YAML text may hold: bounds the work of a text larger than front-matter."""
MAX_YAML_BYTES = 1024 * 1024
"""The largest YAML text read at all (gitmem.yaml, the local config, merge inputs)."""


def clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
