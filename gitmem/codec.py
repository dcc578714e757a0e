"""Front-matter parse and serialize, lossless.

A memory file is ``---`` + YAML front-matter + ``---`` + markdown body. Reading
and re-writing a file that nothing changed must give back the same bytes, and
changing one field must change only that field's lines, so that ``git diff``
and pull-request review show exactly what an agent changed.

python-frontmatter's own ``loads`` strips the text and re-dumps the whole
mapping, which loses the body's exact bytes, key spelling and comments. So the
split into pieces is done here, keeping each raw piece; YAML is read with a
hardened :class:`yaml.SafeLoader` (no aliases, no python tags, no duplicate
keys, bounded depth) and :class:`frontmatter.Post` is offered as the
interchange object for tools built on python-frontmatter (:meth:`Document.to_post`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

import frontmatter
import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node

from .clock import format_timestamp
from .errors import InvalidMemoryError, TooLargeError

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
BOM = "\ufeff"

_OPEN_RE = re.compile(r"---[ \t]*(\r\n|\n)")
_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\n|$)", re.MULTILINE)
_LEGACY_RE = re.compile(r"\A<!--\s*Last Updated:\s*(\d{4}-\d{2}-\d{2})\s*-->")


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses what a memory's front-matter never needs.

    Aliases are refused outright: a billion-laughs document builds a small DAG
    in memory but explodes when anything walks it (schema validation, JSON
    output). Duplicate keys are refused because YAML would silently keep the
    last one, and a hand edit that repeats ``id`` must not pass unnoticed.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise InvalidMemoryError(
                f"front-matter uses a YAML alias (*{event.anchor}) at line "
                f"{event.start_mark.line + 1}; anchors and aliases are not allowed"
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise InvalidMemoryError(f"front-matter is nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError as exc:
                raise InvalidMemoryError(
                    f"front-matter has an unhashable key at line {key_node.start_mark.line + 1}"
                ) from exc
            if duplicate:
                raise InvalidMemoryError(
                    f"front-matter repeats the key {key!r} at line {key_node.start_mark.line + 1}"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    pass


def _represent_datetime(dumper: yaml.SafeDumper, value: dt.datetime) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", format_timestamp(value))


_Dumper.add_representer(dt.datetime, _represent_datetime)


@dataclass(frozen=True)
class _Source:
    """The raw pieces of a parsed file, kept so an unchanged file re-serializes to the same text."""

    bom: str
    opening: str
    raw: str
    closing: str
    newline: str
    parsed: dict[str, Any]
    segments: dict[str, str] | None
    head: str


@dataclass(frozen=True)
class Document:
    """A parsed markdown file: front-matter mapping plus body text."""

    metadata: dict[str, Any]
    body: str
    has_front_matter: bool = True
    source: _Source | None = field(default=None, repr=False, compare=False)

    def with_changes(self, metadata: dict[str, Any], body: str) -> Document:
        return Document(metadata, body, True, self.source)

    def to_post(self) -> frontmatter.Post:
        """The document as a :class:`frontmatter.Post`, for tools built on python-frontmatter."""
        return frontmatter.Post(self.body, **self.metadata)


def decode(data: bytes, *, what: str = "memory file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMemoryError(
            f"{what} is not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from None


def load_yaml(text: str) -> tuple[Any, Node | None]:
    """Parse YAML with the hardened loader; returns the value and its node."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        value = None if node is None else loader.construct_document(node)
    except InvalidMemoryError:
        raise
    except yaml.constructor.ConstructorError as exc:
        raise InvalidMemoryError(
            f"front-matter uses a YAML tag that is not allowed: {_yaml_problem(exc)}"
        ) from None
    except yaml.YAMLError as exc:
        raise InvalidMemoryError(f"front-matter is not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise InvalidMemoryError("front-matter is nested too deeply") from None
    finally:
        loader.dispose()
    return value, node


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def parse(text: str, *, max_front_matter_bytes: int = MAX_FRONT_MATTER_BYTES) -> Document:
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
    if len(raw.encode("utf-8")) > max_front_matter_bytes:
        raise TooLargeError(f"front-matter is larger than {max_front_matter_bytes} bytes")
    close_end = closing.end()
    # One blank line after the closing delimiter belongs to the separator, so a
    # file written as "---\n\nbody" reads back with body "body", and a body that
    # itself starts with a blank line keeps it.
    for blank in ("\r\n", "\n"):
        if rest.startswith(blank, close_end):
            close_end += len(blank)
            break
    value, node = load_yaml(raw)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise InvalidMemoryError(
            f"front-matter must be a mapping of keys to values, not a {_yaml_kind(value)}"
        )
    for key in value:
        if not isinstance(key, str):
            raise InvalidMemoryError(f"front-matter key {key!r} is not a string")
    segments, head = _segments(raw, node)
    source = _Source(
        bom=bom,
        opening=rest[:after_open],
        raw=raw,
        closing=rest[closing.start() : close_end],
        newline=newline,
        parsed=value,
        segments=segments,
        head=head,
    )
    return Document(_copy(value), rest[close_end:], True, source)


def _yaml_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    return f"scalar ({type(value).__name__})"


def _segments(raw: str, node: Node | None) -> tuple[dict[str, str] | None, str]:
    """Cut the raw YAML into one text segment per top-level key, when the layout allows it.

    Only plain block mappings with every key at column 0 on its own line are cut;
    anything else (flow style, complex keys) is re-dumped whole when it changes.
    """
    if not isinstance(node, MappingNode) or node.flow_style:
        return None, ""
    lines = raw.splitlines(keepends=True)
    starts: list[tuple[str, int]] = []
    for key_node, _ in node.value:
        mark = key_node.start_mark
        if mark.column != 0 or not isinstance(key_node.value, str):
            return None, ""
        if starts and starts[-1][1] >= mark.line:
            return None, ""
        starts.append((key_node.value, mark.line))
    if not starts:
        return None, raw
    head = "".join(lines[: starts[0][1]])
    segments: dict[str, str] = {}
    for i, (key, line) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(lines)
        text = "".join(lines[line:end])
        if not text.endswith("\n"):
            text += "\n"
        segments[key] = text
    return segments, head


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    """Equality that also compares types (``1 == True`` in Python, not in YAML)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def dump_value(key: str, value: Any) -> str:
    """One top-level ``key: value`` entry as YAML text ending in a newline."""
    flow = None if key == "tags" else False
    text = yaml.dump(
        {key: value},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=flow,
        width=1_000_000,
    )
    return str(text)


def dump_mapping(metadata: dict[str, Any]) -> str:
    return "".join(dump_value(k, v) for k, v in metadata.items())


def serialize(doc: Document) -> str:
    """Turn a document back into file text, reusing raw pieces for everything unchanged."""
    src = doc.source
    if not doc.has_front_matter and not doc.metadata:
        return doc.body
    if src is None:
        return "---\n" + dump_mapping(doc.metadata) + "---\n\n" + doc.body
    if same(doc.metadata, src.parsed):
        raw = src.raw
    elif src.segments is None:
        raw = _newlines(dump_mapping(doc.metadata), src.newline)
    else:
        parts = [src.head]
        for key, value in doc.metadata.items():
            if key in src.segments and same(value, src.parsed.get(key)):
                parts.append(src.segments[key])
            else:
                parts.append(_newlines(dump_value(key, value), src.newline))
        raw = "".join(parts)
    if raw and not raw.endswith("\n"):
        raw += src.newline
    return src.bom + src.opening + raw + src.closing + doc.body


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
