"""The bounds every YAML read keeps, and the scan that decides whether libyaml may parse a text.

Apart from :mod:`gitmem.format.yamlio` (which loads PyYAML) so that writing a memory,
which checks these bounds without parsing YAML, does not pay for PyYAML's import.
"""

from __future__ import annotations

import re

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
# Nodes one YAML text may hold. 64 KiB of front-matter holds at most ~32,000; the
# budget bounds the work of a larger text (gitmem.yaml, the local config).
MAX_NODES = 100_000
# The largest YAML text read at all (gitmem.yaml, the local config, merge inputs);
# front-matter has its own, smaller bound.
MAX_YAML_BYTES = 1024 * 1024

# A block indicator: "-", "?" or ":" followed by a blank or the end of the text.
# Each one can open at most one block collection (one indent level).
_BLOCK_INDICATOR_RE = re.compile(r"[-?:](?=[ \t\n]|\Z)")


def depth_bound(text: str) -> int | None:
    """An upper bound on the nesting depth of the YAML node tree in ``text``, or None.

    libyaml composes recursively in C, with no depth check and no Python
    recursion limit: a front-matter of 26,000 ``? `` indicators overflowed the C
    stack and killed the process. So the fast loader only sees text whose depth
    is bounded from above by this scan, which costs one pass in C-backed
    string methods.

    The bound follows the scanner: block nesting is the scanner's indent stack,
    strictly increasing columns. At the first token of a line the stack is
    unwound to that token's column (at most ``column + 1`` entries remain), and
    later on that line only a block indicator (``-``, ``?``, ``:`` + blank) pushes
    a level. A mapping's value may be a sequence at the same indent, so a node
    chain is at most two nodes per indent level, plus one per flow bracket in
    the whole text (quoted brackets counted too: it is an upper bound), plus the
    leaf. Line breaks other than LF and CRLF (CR alone, NEL, LS, PS) would make
    this line split differ from the scanner's: None then, and the caller uses
    the loader that checks depth node by node.
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


