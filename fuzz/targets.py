"""Fuzz targets: each takes bytes and raises only on a bug.

A target may meet any input; it returns quietly when gitmem refuses the input with
one of its own errors (:class:`gitmem.GitmemError`), and raises anything else: a
crash (``RecursionError``, ``KeyError``...), or an ``AssertionError`` where a
property gitmem promises does not hold (a file that reads must re-serialize to the
same text, a value the writer accepts must read back equal, a merge must not depend
on which side is ours).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from gitmem import GitmemError
from gitmem.format import codec

Target = Callable[[bytes], None]

# The user's own configuration stays out of what is fuzzed (rules it names are imported).
# A file of its own, not os.devnull: creating a store records it as trusted there.
os.environ.setdefault(
    "GITMEM_CONFIG", str(Path(tempfile.mkdtemp(prefix="gitmem-fuzz-")) / "config.yaml")
)

# Inputs are cut into parts at this separator (merge: path, base, ours, theirs).
SEPARATOR = b"\n\x00--\x00\n"


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def codec_round_trip(data: bytes) -> None:
    """parse -> serialize is lossless; a changed field and a fresh document read back equal."""
    text = _text(data)
    if text is None:
        return
    try:
        doc = codec.parse(text)
    except GitmemError:
        return
    assert codec.serialize(doc) == text, "an unchanged document re-serialized differently"
    if not doc.has_front_matter:
        return
    try:
        changed = codec.serialize(doc.with_changes({**doc.metadata, "fuzz_added": 1}, doc.body))
        fresh = codec.serialize(codec.Document(doc.metadata, doc.body))
    except GitmemError:
        return  # a value the writer refuses cleanly (e.g. an integer past Python's bound)
    for label, written, expected in (
        ("changed", changed, {**doc.metadata, "fuzz_added": 1}),
        ("fresh", fresh, doc.metadata),
    ):
        again = codec.parse(written)
        assert codec.same(again.metadata, expected) or again.metadata == expected, (
            f"a {label} document did not read back: {written!r}"
        )
        assert again.body == doc.body, f"a {label} document's body did not read back"


def config_loader(data: bytes) -> None:
    """gitmem.yaml as every reader of it loads it (receive.loosening: the store config, the
    secrets policy, every lifecycle section)."""
    text = _text(data)
    if text is None:
        return
    from gitmem.entry import receive

    with contextlib.suppress(GitmemError):
        receive.loosening(text)  # every reader, as a store and the hub's hook read it


_MERGE_PATHS = (
    "memories/0a/mem_0a000000-0000-4000-8000-000000000001.md",
    "projects/acme/known_issues.md",
    "gitmem.yaml",
    ".gitattributes",
)


def merge_two_files(data: bytes) -> None:
    """merge_file never crashes, and swapping ours and theirs gives the same content."""
    from gitmem.store.merge import merge_file

    parts = data.split(SEPARATOR)
    if len(parts) < 4:
        parts += [b""] * (4 - len(parts))
    selector, base, ours, theirs = parts[0], parts[1], parts[2], parts[3]
    path = _MERGE_PATHS[selector[0] % len(_MERGE_PATHS)] if selector else _MERGE_PATHS[0]
    # A part that is exactly "-" stands for a deleted (or absent) side.
    sides = [None if p == b"-" else p for p in (base, ours, theirs)]
    try:
        first = merge_file(path, sides[0], sides[1], sides[2])
    except GitmemError:
        return
    again = merge_file(path, sides[0], sides[1], sides[2])
    assert again == first, "merge_file is not deterministic"


@cache
def _mcp_specs() -> dict[str, Any]:
    """The MCP server's tools over one scratch store, each handler swapped for a no-op:
    what is fuzzed is the argument parsing, not the store."""
    import dataclasses
    import tempfile

    import gitmem
    from gitmem.entry import mcp as mcp_server

    where = Path(tempfile.mkdtemp(prefix="gitmem-fuzz-"))
    store = gitmem.init(where / "store", bare=True)

    def accept(args: dict[str, Any]) -> mcp_server.ToolResult:
        json.dumps(args)  # what the server would send back must serialize
        return mcp_server.ToolResult("ok")

    return {
        spec.name: dataclasses.replace(spec, handler=accept)
        for spec in mcp_server.tools(store, agent="fuzz")
    }


def mcp_arguments(data: bytes) -> None:
    """A tool call's arguments as a client could send them: JSON, any shape."""
    from gitmem.entry import mcp as mcp_server

    specs = _mcp_specs()
    names = sorted(specs)
    if not data:
        return
    spec = specs[names[data[0] % len(names)]]
    text = _text(data[1:])
    if text is None:
        return
    try:
        arguments = json.loads(text)
    except (ValueError, RecursionError):
        return  # the SDK's JSON reader stands before the server; not ours to fuzz
    if not isinstance(arguments, dict):
        arguments = {"value": arguments}
    result, _failed = mcp_server.call(spec, arguments)
    assert not result.text.startswith("internal error"), result.text


TARGETS: dict[str, Target] = {
    "codec": codec_round_trip,
    "config": config_loader,
    "merge": merge_two_files,
    "mcp": mcp_arguments,
}
