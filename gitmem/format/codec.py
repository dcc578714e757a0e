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
import io
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

if TYPE_CHECKING:
    import frontmatter

from gitmem.base.errors import InvalidMemoryError, TooLargeError
from gitmem.format import yamlfast

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_DEPTH = 32
# Nodes one YAML text may hold. 64 KiB of front-matter holds at most ~32,000; the
# budget bounds the work of a larger text (gitmem.yaml, the local config).
MAX_NODES = 100_000
# The largest YAML text read at all (gitmem.yaml, the local config, merge inputs);
# front-matter has its own, smaller bound.
MAX_YAML_BYTES = 1024 * 1024
BOM = "\ufeff"

_OPEN_RE = re.compile(r"---[ \t]*(\r\n|\n)")
_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\n|$)", re.MULTILINE)
_LEGACY_RE = re.compile(r"\A<!--\s*Last Updated:\s*(\d{4}-\d{2}-\d{2})\s*-->")


# The tags front-matter may use: JSON's data model plus timestamps and dates.
# SafeLoader would also build bytes (!!binary), sets (!!set) and lists of
# pairs (!!omap, !!pairs), which JSON Schema validation and JSON output cannot
# hold, so those are refused like any unknown tag.
_ALLOWED_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("null", "bool", "int", "float", "str", "timestamp", "seq", "map")
)


# What PyYAML's constructors raise on a scalar they cannot build (``!!int`` with
# no value, ``!!bool maybe``, ``2026-13-45``...), instead of a YAMLError.
_CONSTRUCT_ERRORS = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError)


class _Hardened:
    """The constructor side shared by the pure-Python and the libyaml loader."""

    yaml_constructors: ClassVar[dict[Any, Any]] = {
        tag: constructor
        for tag, constructor in yaml.SafeLoader.yaml_constructors.items()
        if tag in _ALLOWED_TAGS or tag is None
    }

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)  # type: ignore[misc]
        except InvalidMemoryError:
            raise  # already names what is wrong (an inner node's own error)
        except _CONSTRUCT_ERRORS as exc:
            shown = f" {_clip(node.value)!r}" if isinstance(node, ScalarNode) else ""
            detail = f": {exc}" if isinstance(exc, ValueError | ArithmeticError) else ""
            raise InvalidMemoryError(
                f"front-matter value{shown} at line {node.start_mark.line + 1} "
                f"cannot be read as {node.tag.rsplit(':', 1)[-1]}{detail}"
            ) from None

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
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc,no-any-return]


class _Loader(_Hardened, yaml.SafeLoader):
    """SafeLoader that refuses what a memory's front-matter never needs.

    Aliases are refused outright: a billion-laughs document builds a small DAG
    in memory but explodes when anything walks it (schema validation, JSON
    output). Duplicate keys are refused because YAML would silently keep the
    last one, and a hand edit that repeats ``id`` must not pass unnoticed.
    Tags outside JSON's data model (plus timestamps) are refused, and so are
    merge keys (``<<``), which only make sense with aliases.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise InvalidMemoryError(
                f"front-matter uses a YAML alias (*{event.anchor}) at line "
                f"{event.start_mark.line + 1}; anchors and aliases are not allowed"
            )
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > MAX_NODES:
                raise InvalidMemoryError(f"YAML text holds more than {MAX_NODES} values")
            if self._depth > MAX_DEPTH:
                raise InvalidMemoryError(f"front-matter is nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_CSafeLoader: Any = getattr(yaml, "CSafeLoader", None)


if _CSafeLoader is not None:

    class _FastLoader(_Hardened, _CSafeLoader):  # type: ignore[misc]
        """libyaml's parser with the hardened constructor, about 7x faster than _Loader.

        libyaml composes in C, where aliases and depth cannot be checked node by
        node, so it is only used for text that cannot hold an anchor, an alias, a
        tag or a merge key, and whose nesting is bounded well below MAX_DEPTH
        (see :func:`_fast_path_safe`).
        """


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


def _fast_path_safe(text: str) -> bool:
    if _CSafeLoader is None or any(c in text for c in "&*!") or "<<" in text:
        return False
    if len(text) > 2 * MAX_NODES:
        return False  # every node needs a character and a separator: the budget holds
    bound = depth_bound(text)
    return bound is not None and bound < MAX_DEPTH


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        # The loader refuses aliases, so the dumper must never write one (it would
        # for the same list or mapping object reached twice).
        return True


# PyYAML writes these line breaks raw inside single-quoted and plain scalars,
# where the reader folds them away ('\x85' reads back as ' '); double quotes
# escape them.
_FOLDED_BREAKS = ("\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(ch in value for ch in _FOLDED_BREAKS):
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style='"')
    return dumper.represent_str(str(value))


def _represent_datetime(dumper: yaml.SafeDumper, value: dt.datetime) -> yaml.ScalarNode:
    # Aware times are written the way gitmem writes every timestamp (RFC 3339,
    # UTC, ``Z``). A naive one is written naive, so it reads back as what it was.
    # isoformat, not strftime: glibc's %Y writes year 999 as "999", which YAML
    # does not read as a timestamp.
    if value.tzinfo is None:
        text = value.isoformat()
    else:
        text = value.astimezone(dt.UTC).replace(tzinfo=None).isoformat() + "Z"
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", text)


_Dumper.add_representer(dt.datetime, _represent_datetime)


def _refuse(dumper: yaml.SafeDumper, value: Any) -> yaml.Node:
    # Written as !!set / !!binary these would make a file the loader refuses.
    raise yaml.representer.RepresenterError(
        f"a {type(value).__name__} is not front-matter data "
        "(use text, numbers, booleans, dates, lists and mappings)"
    )


for _type in (set, frozenset, bytes, bytearray):
    _Dumper.add_representer(_type, _refuse)
_Dumper.add_representer(str, _represent_str)
# str and int subclasses (StrEnum values such as Scope.REPO) are written as
# their plain values; SafeDumper would refuse them.
_Dumper.add_multi_representer(str, _represent_str)
_Dumper.add_multi_representer(int, yaml.SafeDumper.represent_int)


@dataclass(frozen=True)
class _Segment:
    """The raw text of one top-level key of a block mapping."""

    lead: str
    """Comment and blank lines between the previous key's value and this key."""
    text: str
    """The key's own lines: from the key to the end of its value, inline comment included."""
    inline: tuple[int, int] | None
    """Columns of the value in ``text`` when it sits on the key's line, else None."""
    flow: bool = False
    """The value was written in flow style (``[a, b]``, ``{k: v}``)."""


@dataclass(frozen=True)
class _Source:
    """The raw pieces of a parsed file, kept so an unchanged file re-serializes to the same text."""

    bom: str
    opening: str
    raw: str
    closing: str
    newline: str
    parsed: dict[str, Any]
    segments: dict[str, _Segment] | None
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

    def to_post(self) -> frontmatter.Post:
        """The document as a :class:`frontmatter.Post`, for tools built on python-frontmatter."""
        import frontmatter  # only here: every command would pay for it at start-up otherwise

        return frontmatter.Post(self.body, **self.metadata)


def decode(data: bytes, *, what: str = "memory file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMemoryError(
            f"{what} is not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from None


def load_yaml(text: str, *, max_bytes: int = MAX_YAML_BYTES) -> tuple[Any, Node | None]:
    """Parse YAML with the hardened loader; returns the value and its node.

    Every YAML text gitmem reads passes here (front-matter, gitmem.yaml, the
    local config): bounded in size, depth (:data:`MAX_DEPTH`) and node count
    (:data:`MAX_NODES`) whichever parser runs.
    """
    if len(text) > max_bytes or (
        len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        raise TooLargeError(f"YAML text is larger than {max_bytes} bytes")
    loader: Any = None
    try:
        # The reader checks for unprintable characters as it is built, so the
        # constructor call belongs inside the try too.
        loader = _FastLoader(text) if _fast_path_safe(text) else _Loader(text)
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
    except _CONSTRUCT_ERRORS as exc:
        # A scalar the resolver or an explicit tag sent to a constructor that
        # cannot build it: an impossible date (2026-13-45), an integer longer
        # than Python converts, ``!!bool maybe``, ``!!timestamp soon``.
        raise InvalidMemoryError(f"front-matter holds a value that cannot be read: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return value, node


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    if node is None:
        value = {}  # nothing but comments and blank lines
    if not isinstance(value, dict):
        raise InvalidMemoryError(
            f"front-matter must be a mapping of keys to values, not a {_yaml_kind(value)}"
        )
    for key in value:
        if not isinstance(key, str):
            raise InvalidMemoryError(f"front-matter key {key!r} is not a string")
    segments, head, tail = _segments(raw, node)
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
    return Document(_copy(value), rest[close_end:], True, source)


def _yaml_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    return f"scalar ({type(value).__name__})"


def _segments(raw: str, node: Node | None) -> tuple[dict[str, _Segment] | None, str, str]:
    """Cut the raw YAML into head, one segment per top-level key, and tail.

    Only block mappings with every key at column 0 on its own line are cut;
    anything else (flow style, complex keys) is re-dumped whole when it changes.
    Comment and blank lines before a key travel with that key (its ``lead``);
    those before the first key (``head``) and after the last value (``tail``)
    stay put whatever changes.
    """
    if node is None:
        return {}, raw, ""
    if not isinstance(node, MappingNode) or node.flow_style:
        return None, "", ""
    # str.splitlines and YAML's marks agree on line breaks here: the extra
    # breaks splitlines knows (\v, \f, \x1c-\x1e) are unprintable in YAML and
    # were refused by the loader.
    lines = raw.splitlines(keepends=True)
    segments: dict[str, _Segment] = {}
    head = ""
    previous_end = -1
    for key_node, value_node in node.value:
        mark = key_node.start_mark
        if mark.column != 0 or not isinstance(key_node, ScalarNode) or mark.line <= previous_end:
            return None, "", ""
        end = _node_end(value_node)
        last_line = end.line if end.column > 0 else end.line - 1
        inline = None
        value_start = value_node.start_mark
        if value_start.line == mark.line == end.line and end.index > value_start.index:
            inline = (value_start.column, end.column)
        if previous_end < 0:
            head = "".join(lines[: mark.line])
            lead = ""
        else:
            lead = "".join(lines[previous_end + 1 : mark.line])
        text = "".join(lines[mark.line : last_line + 1])
        flow = isinstance(value_node, MappingNode | SequenceNode) and bool(value_node.flow_style)
        segments[key_node.value] = _Segment(lead, text, inline, flow)
        previous_end = last_line
    tail = "".join(lines[previous_end + 1 :])
    return segments, head, tail


def _node_end(node: Node) -> yaml.Mark:
    """Where a node's own text ends.

    A block collection's end mark lies at the next token, past any comments
    that follow it, so its end is taken from its last entry instead.
    """
    if isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        return _node_end(last[1] if isinstance(node, MappingNode) else last)
    mark: yaml.Mark = node.end_mark
    return mark


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    """Equality that also compares types (``1 == True`` in Python, not in YAML).

    NaN is the same as NaN and ``-0.0`` differs from ``0.0``, so an unchanged
    ``.nan`` keeps its spelling and a changed sign is written.
    """
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


def value_depth(value: Any, *, limit: int = MAX_DEPTH) -> int:
    """How many YAML nodes deep ``value`` is (a scalar is 1), counted up to ``limit + 1``.

    Iterative, so a caller's list nested 100,000 deep is measured, not a RecursionError.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            stack.extend((k, depth + 1) for k in item if isinstance(k, tuple))
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def check_writable_depth(metadata: dict[str, Any]) -> None:
    """Refuse a front-matter value nested deeper than the reader takes, naming the field.

    The document's mapping is one level, so a field's value may be MAX_DEPTH - 1 deep.
    """
    for key, value in metadata.items():
        if not isinstance(value, dict | list | tuple):
            continue
        depth = value_depth(value, limit=MAX_DEPTH - 1)
        if depth > MAX_DEPTH - 1:
            raise InvalidMemoryError(
                f"front-matter field {_clip(str(key))!r} is nested more than {MAX_DEPTH - 1} "
                "levels deep; the reader refuses deeper front-matter, so it is not written"
            )


def _written_as(value: Any, read: Any) -> bool:
    """Whether ``read`` (the value parsed back) is what was written as ``value``.

    Like :func:`same`, but a str or int subclass (an enum member) reads back as its
    plain value and a tuple as a list, which is what writing them means.
    """
    if isinstance(value, bool) or isinstance(read, bool):
        return type(value) is type(read) and value == read
    if isinstance(value, str):
        return type(read) is str and str.__str__(value) == read
    if isinstance(value, int) and not isinstance(value, bool):
        return type(read) is int and int(value) == read
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, dict) and isinstance(read, dict):
        return list(value) == list(read) and all(_written_as(value[k], read[k]) for k in value)
    if isinstance(value, list) and isinstance(read, list):
        return len(value) == len(read) and all(
            _written_as(a, b) for a, b in zip(value, read, strict=True)
        )
    return same(value, read)


def check_reads_back(text: str, metadata: dict[str, Any], body: str) -> None:
    """Refuse to write ``text`` unless the reader gives back ``metadata`` and ``body``.

    Every file the store writes passes here (``Store._encode``), so a write the
    reader would refuse or read differently (a value YAML cannot carry, a string
    the emitter spelled ambiguously) fails before anything is committed, naming the
    field, instead of leaving a memory no read or update can load.
    """
    try:
        doc = parse(text)
    except InvalidMemoryError as exc:
        raise InvalidMemoryError(
            f"{_culprit(metadata)}would not read back ({exc}); nothing was written"
        ) from None
    for key, value in metadata.items():
        if key not in doc.metadata or not _written_as(value, doc.metadata[key]):
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


def _culprit(metadata: dict[str, Any]) -> str:
    """``front-matter field 'k' `` for the first field that does not read back alone."""
    for key, value in metadata.items():
        try:
            load_yaml(dump_value(key, value))
        except InvalidMemoryError:
            return f"front-matter field {_clip(str(key))!r} "
    return "the file "


def dump_value(key: str, value: Any, *, flow: bool | None = None) -> str:
    """One top-level ``key: value`` entry as YAML text ending in a newline.

    Collections are written in block style, except ``tags`` (and any value
    with ``flow=True``), which are written in flow style when they hold only scalars.
    """
    try:
        fast = yamlfast.dump_entry(key, value, flow=flow)
    except ValueError as exc:  # str() of an integer over Python's 4,300-digit bound
        raise InvalidMemoryError(f"front-matter {_clip(key)!r} cannot be written: {exc}") from None
    if fast is not None:
        return fast
    if flow is None:
        flow = None if key == "tags" else False
    elif flow:
        flow = None
    stream = io.StringIO()
    dumper = _Dumper(
        stream, default_flow_style=flow, sort_keys=False, allow_unicode=True, width=1_000_000
    )
    try:
        dumper.open()
        node = dumper.represent_data({key: value})
        # The entry itself is always a block line: with flow style left to
        # PyYAML, ``{tags: null}`` would come out as a flow mapping.
        if isinstance(node, MappingNode):
            node.flow_style = False
        dumper.serialize(node)
        dumper.close()
    except yaml.representer.RepresenterError as exc:
        problem = exc.args[0] if exc.args else exc
        raise InvalidMemoryError(
            f"front-matter {key!r} holds a value YAML cannot write: {problem}"
        ) from None
    except ValueError as exc:
        raise InvalidMemoryError(f"front-matter {_clip(key)!r} cannot be written: {exc}") from None
    finally:
        dumper.dispose()
    return stream.getvalue()


def dump_mapping(metadata: dict[str, Any]) -> str:
    return "".join(dump_value(k, v) for k, v in metadata.items())


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
                parts.append(_newlines(dump_value(key, value), src.newline))
                continue
            parts.append(segment.lead)
            if key in src.parsed and same(value, src.parsed[key]):
                parts.append(segment.text)
            else:
                parts.append(_rewrite(segment, key, value, src.newline))
        parts.append(src.tail)
        raw = "".join(parts)
    if raw and not raw.endswith("\n"):
        raw += src.newline
    return src.bom + src.opening + raw + src.closing + doc.body


def _rewrite(segment: _Segment, key: str, value: Any, newline: str) -> str:
    """A changed key's new text: only the value is swapped when old and new fit on one line.

    That keeps the key's own spelling and an inline comment after the value.
    """
    text = dump_value(key, value, flow=True if segment.flow else None)
    if segment.inline is not None and text.count("\n") == 1:
        loader = _Loader(text)  # bounded like every other read, though the text is ours
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
        if isinstance(node, MappingNode) and len(node.value) == 1:
            new = node.value[0][1]
            if new.start_mark.line == new.end_mark.line == 0:
                start, end = segment.inline
                value_text = text[new.start_mark.index : new.end_mark.index]
                return segment.text[:start] + value_text + segment.text[end:]
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
