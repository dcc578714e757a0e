"""Front-matter parse and serialize, lossless: an unchanged file re-serializes to its bytes,
and changing one field changes only that field's lines (``git diff`` shows what changed).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gitmem.format.yamlio import Segment

from gitmem.base.errors import InvalidMemoryError, TooLargeError
from gitmem.format.yamlbounds import MAX_DEPTH, MAX_FRONT_MATTER_BYTES
from gitmem.format.yamlbounds import clip as _clip

BOM = "\ufeff"

_OPEN_RE = re.compile(r"---[ \t]*(\r\n|\n)")
# One blank line after the closing delimiter belongs to the separator, so a file written as
# "---\n\nbody" reads back with body "body", and a body that starts with a blank line keeps it.
_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\n|$)(?:\r?\n)?", re.MULTILINE)
_LEGACY_RE = re.compile(r"\A<!--\s*Last Updated:\s*(\d{4}-\d{2}-\d{2})\s*-->")


@dataclass(frozen=True)
class _Source:
    """The raw pieces of a parsed file, kept so an unchanged file re-serializes to the same text."""

    bom: str
    opening: str
    raw: str
    closing: str
    newline: str
    parsed: dict[str, Any]
    segments: dict[str, Segment] | None
    head: str
    tail: str


@dataclass(frozen=True)
class Document:
    """A parsed markdown file: front-matter mapping plus body text."""

    metadata: dict[str, Any]
    body: str
    has_front_matter: bool = True
    source: _Source | None = field(default=None, repr=False, compare=False)

    def with_changes(self, metadata: dict[str, Any], body: str) -> Document:
        """The same file with new metadata and body (a file without front-matter gains
        one only when there is metadata to put in it)."""
        return Document(metadata, body, self.has_front_matter or bool(metadata), self.source)


def decode(data: bytes, *, what: str = "memory file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMemoryError(
            f"{what} is not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from None


def parse(text: str) -> Document:
    """Split and parse a markdown file. Files without front-matter parse with empty metadata."""
    bom = BOM if text.startswith(BOM) else ""
    rest = text[len(bom) :]
    opening = _OPEN_RE.match(rest)
    if opening is None:
        return Document({}, text, has_front_matter=False)
    newline = opening.group(1)
    after_open = opening.end()
    closing = _CLOSE_RE.search(rest, after_open)
    if closing is None:
        raise InvalidMemoryError("front-matter is opened with '---' but never closed")
    raw = rest[after_open : closing.start()]
    if len(raw.encode("utf-8")) > MAX_FRONT_MATTER_BYTES:
        raise TooLargeError(f"front-matter is larger than {MAX_FRONT_MATTER_BYTES} bytes")
    close_end = closing.end()
    from gitmem.format import yamlio

    value, node = yamlio.load_yaml(raw)
    if node is None:
        value = {}  # nothing but comments and blank lines
    if not isinstance(value, dict):
        raise InvalidMemoryError(
            f"front-matter must be a mapping of keys to values, not a {_yaml_kind(value)}"
        )
    for key in value:
        if not isinstance(key, str):
            raise InvalidMemoryError(f"front-matter key {key!r} is not a string")
    segments, head, tail = yamlio.segments(raw, node) or (None, "", "")
    copied = _copy(value)
    source = _Source(
        bom=bom,
        opening=rest[:after_open],
        raw=raw,
        closing=rest[closing.start() : close_end],
        newline=newline,
        parsed=value,
        segments=segments,
        head=head,
        tail=tail,
    )
    return Document(copied, rest[close_end:], True, source)


def _yaml_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    return f"scalar ({type(value).__name__})"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    """Equality that also compares types (``1 == True`` in Python, not in YAML); NaN is
    NaN and ``-0.0`` is not ``0.0``, so an unchanged ``.nan`` keeps its spelling."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def check_writable_depth(metadata: dict[str, Any]) -> None:
    """Refuse a field nested deeper than the reader takes (MAX_DEPTH, the mapping
    included), naming it; counted without recursion (a list nested 100,000 deep is fine)."""
    for key, value in metadata.items():
        stack: list[tuple[Any, int]] = [(value, 2)]
        while stack:
            item, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise InvalidMemoryError(
                    f"front-matter field {_clip(str(key))!r} is nested more than "
                    f"{MAX_DEPTH - 1} levels deep; the reader refuses deeper front-matter, so it "
                    "is not written"
                )
            if isinstance(item, dict):
                stack.extend((v, depth + 1) for v in item.values())
                stack.extend((k, depth + 1) for k in item if isinstance(k, tuple))
            elif isinstance(item, list | tuple):
                stack.extend((v, depth + 1) for v in item)


def _plain(value: Any) -> Any:
    """``value`` as it reads back: an enum member as its plain value, a tuple as a list."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def check_reads_back(text: str, metadata: dict[str, Any], body: str) -> None:
    """Refuse to write ``text`` unless the reader gives back ``metadata`` and ``body``, so a
    value YAML cannot carry fails before the commit, naming the field."""
    try:
        doc = parse(text)
    except InvalidMemoryError as exc:
        raise InvalidMemoryError(
            f"the file would not read back ({exc}); nothing was written"
        ) from None
    for key, value in metadata.items():
        if key not in doc.metadata or not same(_plain(value), doc.metadata[key]):
            raise InvalidMemoryError(
                f"front-matter field {_clip(str(key))!r} would not read back as written "
                f"(a {type(value).__name__} YAML does not carry exactly); nothing was written"
            )
    extra = [k for k in doc.metadata if k not in metadata]
    if extra:
        raise InvalidMemoryError(
            f"front-matter would read back with the unexpected field {_clip(extra[0])!r}"
        )
    if doc.body != body:
        raise InvalidMemoryError("the body would not read back as written; nothing was written")


def dump_mapping(metadata: dict[str, Any], *, flow: bool | None = None) -> str:
    """Top-level entries as YAML text (:func:`gitmem.format.yamlio.dump_mapping`)."""
    for key in metadata:
        if not isinstance(key, str):  # what a reader refuses (parse), a writer does not write
            raise InvalidMemoryError(f"front-matter key {_clip(repr(key))} is not a string")
    from gitmem.format import yamlio

    return yamlio.dump_mapping(metadata, flow=flow)


def serialize(doc: Document) -> str:
    """Turn a document back into file text, reusing raw pieces for everything unchanged."""
    src = doc.source
    if not doc.has_front_matter and not doc.metadata:
        if _OPEN_RE.match(doc.body.removeprefix(BOM)) is None:
            return doc.body
        # The body would read back as front-matter: put an empty block before it.
        return "---\n---\n\n" + doc.body
    if src is None:
        return "---\n" + dump_mapping(doc.metadata) + "---\n\n" + doc.body
    if same(doc.metadata, src.parsed):
        raw = src.raw
    elif src.segments is None:
        raw = _newlines(dump_mapping(doc.metadata), src.newline)
    else:
        parts = [src.head]
        for key, value in doc.metadata.items():
            segment = src.segments.get(key)
            if segment is None:
                parts.append(_newlines(dump_mapping({key: value}), src.newline))
            elif same(value, src.parsed[key]):  # a key with a segment was parsed
                parts += [segment.lead, segment.text]
            else:
                parts += [segment.lead, _rewrite(segment, key, value, src.newline)]
        parts.append(src.tail)
        raw = "".join(parts)
    if raw and not raw.endswith("\n"):
        raw += src.newline
    return src.bom + src.opening + raw + src.closing + doc.body


def _rewrite(segment: Segment, key: str, value: Any, newline: str) -> str:
    """A changed key's new text: only the value is swapped when old and new fit on one
    line, keeping the key's spelling and an inline comment."""
    text = dump_mapping({key: value}, flow=True if segment.flow else None)
    if segment.inline is not None and text.count("\n") == 1:
        from gitmem.format import yamlio

        span = yamlio.single_value_span(text)
        if span is not None:
            start, end = segment.inline
            return segment.text[:start] + text[span[0] : span[1]] + segment.text[end:]
    return _newlines(text, newline)


def _newlines(text: str, newline: str) -> str:
    return text if newline == "\n" else text.replace("\n", newline)


def legacy_last_updated(text: str) -> dt.date | None:
    """The date of a Forge-style ``<!-- Last Updated: YYYY-MM-DD -->`` first line, if any."""
    match = _LEGACY_RE.match(text.lstrip(BOM))
    if match is None:
        return None
    try:
        return dt.date.fromisoformat(match.group(1))
    except ValueError:
        return None
