"""The bounds every YAML read keeps, and the scan that decides whether libyaml may parse a
text; apart from :mod:`gitmem.format.yamlio` so that they can be named without PyYAML."""

from __future__ import annotations

import re

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
MAX_NODES = 100_000
"""Nodes one YAML text may hold: bounds the work of a text larger than front-matter."""
MAX_YAML_BYTES = 1024 * 1024
"""The largest YAML text read at all (gitmem.yaml, the local config, merge inputs)."""

_BLOCK_INDICATOR_RE = re.compile(r"[-?:](?=[ \t\n]|\Z)")


def depth_bound(text: str) -> int | None:
    """An upper bound on the nesting depth of the YAML in ``text`` (None: line breaks other
    than LF and CRLF): libyaml composes recursively in C without a depth check. Per line,
    the indent plus one level per block indicator, two nodes a level, plus every flow
    bracket and the leaf.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    if "\x85" in text or "\u2028" in text or "\u2029" in text:
        return None
    block = 0
    for line in text.split("\n"):
        if not line:
            continue
        stripped = line.lstrip(" \t")
        if not stripped or stripped[0] == "#":
            continue
        levels = len(line) - len(stripped) + 1
        if "-" in stripped or "?" in stripped or ":" in stripped:
            levels += len(_BLOCK_INDICATOR_RE.findall(stripped))
        block = max(block, levels)
    return 2 * block + text.count("[") + text.count("{") + 1


def clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


