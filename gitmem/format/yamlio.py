"""PyYAML, hardened: the one loader every YAML read goes through, and the one dumper.

libyaml scans and parses (a state machine, no recursion) and dumps; PyYAML's Python
composer builds the nodes, checking aliases, depth and size node by node."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any, ClassVar, NamedTuple

import yaml
from yaml._yaml import CParser
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import InvalidMemoryError, TooLargeError
from gitmem.format.yamlbounds import MAX_DEPTH, MAX_NODES, MAX_YAML_BYTES, clip

# JSON's data model plus timestamps: !!binary, !!set, !!omap are refused like unknown tags.
_STR = "tag:yaml.org,2002:str"
_ALLOWED_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("null", "bool", "int", "float", "str", "timestamp", "seq", "map")
)


# What PyYAML's constructors raise on a scalar they cannot build (``!!bool maybe``).
_CONSTRUCT_ERRORS = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError)


class _Loader(Composer, CParser, SafeConstructor, Resolver):
    """libyaml's events, composed and constructed in Python refusing what front-matter
    never needs: aliases (a billion-laughs document explodes when anything walks it),
    duplicate keys (YAML keeps the last one silently), tags outside JSON's data model plus
    timestamps, and merge keys."""

    yaml_constructors: ClassVar[dict[Any, Any]] = {
        tag: constructor
        for tag, constructor in yaml.SafeLoader.yaml_constructors.items()
        if tag in _ALLOWED_TAGS or tag is None
    }

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        Composer.__init__(self)
        self._depth = 0
        self._nodes = 0

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        if node.tag == _STR and type(node) is ScalarNode:
            return node.value  # most values: what SafeConstructor would make, without its walk
        try:
            return super().construct_object(node, deep=deep)
        except InvalidMemoryError:
            raise  # already names what is wrong (an inner node's own error)
        except _CONSTRUCT_ERRORS as exc:
            shown = f" {clip(node.value)!r}" if isinstance(node, ScalarNode) else ""
            detail = f": {exc}" if isinstance(exc, ValueError | ArithmeticError) else ""
            raise InvalidMemoryError(
                f"front-matter value{shown} at line {node.start_mark.line + 1} "
                f"cannot be read as {node.tag.rsplit(':', 1)[-1]}{detail}"
            ) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping, refusing a repeated or unhashable key (a merge key ``<<`` has no
        constructor here, so it is refused like any tag outside the allowed ones)."""
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in mapping
            except TypeError as exc:
                raise InvalidMemoryError(
                    f"front-matter has an unhashable key at line {key_node.start_mark.line + 1}"
                ) from exc
            if duplicate:
                raise InvalidMemoryError(
                    f"front-matter repeats the key {key!r} at line {key_node.start_mark.line + 1}"
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event: Any = self.peek_event()
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


_SafeDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SafeDumper):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        # The loader refuses aliases, so the dumper must never write one (it would
        # for the same list or mapping object reached twice).
        return True


# Written raw in plain and single-quoted scalars these read back as spaces.
_FOLDED_BREAKS = ("\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(ch in value for ch in _FOLDED_BREAKS):
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style='"')
    return dumper.represent_str(str(value))


def _represent_datetime(dumper: yaml.SafeDumper, value: dt.datetime) -> yaml.ScalarNode:
    # Aware times as RFC 3339 UTC with ``Z``, naive ones naive (isoformat, not strftime).
    text = value.isoformat() if value.tzinfo is None else format_timestamp(value)
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


def load_yaml(text: str, *, max_bytes: int = MAX_YAML_BYTES) -> tuple[Any, Node | None]:
    """Parse YAML with the hardened loader; returns the value and its node. Every YAML
    text gitmem reads passes here, bounded in size, depth and node count."""
    if len(text) > max_bytes or (
        len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        raise TooLargeError(f"YAML text is larger than {max_bytes} bytes")
    loader: Any = None
    try:
        # The reader checks for unprintable characters as it is built, so the
        # constructor call belongs inside the try too.
        loader = _Loader(text)
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


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _node_end(node: Node) -> yaml.Mark:
    """Where a node's own text ends (a block collection's end mark lies past the comments
    that follow it, so its last entry's end is taken)."""
    if isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        return _node_end(last[1] if isinstance(node, MappingNode) else last)
    mark: yaml.Mark = node.end_mark
    return mark


class Segment(NamedTuple):
    """The raw text of one top-level key of a block mapping."""

    lead: str
    """Comment and blank lines between the previous key's value and this key."""
    text: str
    """The key's own lines: from the key to the end of its value, inline comment included."""
    inline: tuple[int, int] | None
    """Columns of the value in ``text`` when it sits on the key's line, else None."""
    flow: bool = False
    """The value was written in flow style (``[a, b]``, ``{k: v}``)."""


def segments(raw: str, node: Node | None) -> tuple[dict[str, Segment], str, str] | None:
    """Cut a block mapping (every key at column 0) into head, one segment per top-level
    key (comment lines before a key travel with it) and tail; None when it cannot be cut."""
    if node is None:
        return {}, raw, ""
    if not isinstance(node, MappingNode) or node.flow_style:
        return None
    # str.splitlines and YAML's marks agree on line breaks here: the extra
    # breaks splitlines knows (\v, \f, \x1c-\x1e) are unprintable in YAML and
    # were refused by the loader.
    lines = raw.splitlines(keepends=True)
    out: dict[str, Segment] = {}
    head = ""
    previous_end = -1
    for key_node, value_node in node.value:
        mark = key_node.start_mark
        if mark.column != 0 or not isinstance(key_node, ScalarNode) or mark.line <= previous_end:
            return None
        end = _node_end(value_node)
        last_line = end.line if end.column > 0 else end.line - 1
        value_start = value_node.start_mark
        one_line = value_start.line == mark.line == end.line and end.index > value_start.index
        inline = (value_start.column, end.column) if one_line else None
        if previous_end < 0:
            head = "".join(lines[: mark.line])
        lead = "".join(lines[previous_end + 1 : mark.line]) if previous_end >= 0 else ""
        text = "".join(lines[mark.line : last_line + 1])
        flow = isinstance(value_node, MappingNode | SequenceNode) and bool(value_node.flow_style)
        out[key_node.value] = Segment(lead, text, inline, flow)
        previous_end = last_line
    tail = "".join(lines[previous_end + 1 :])
    return out, head, tail


def dump_mapping(metadata: dict[str, Any], *, flow: bool | None = None) -> str:
    """Top-level ``key: value`` entries in block style, except that collections of
    scalars in ``tags`` (in every value with ``flow=True``) are written in flow style."""
    stream = io.StringIO()
    dumper = _Dumper(
        stream, default_flow_style=False, sort_keys=False, allow_unicode=True, width=1_000_000
    )
    try:
        pairs = [_represent(dumper, key, value, flow) for key, value in metadata.items()]
        dumper.open()
        dumper.serialize(MappingNode("tag:yaml.org,2002:map", pairs, flow_style=False))
        dumper.close()
    except ValueError as exc:  # a lone surrogate, which the UTF-8 emitter cannot write
        if len(metadata) > 1:  # find the field to name
            for key, value in metadata.items():
                dump_mapping({key: value}, flow=flow)
        raise InvalidMemoryError(
            f"front-matter {clip(str(next(iter(metadata))))!r} cannot be written: {exc}"
        ) from None
    finally:
        dumper.dispose()
    return stream.getvalue()


def _represent(dumper: Any, key: str, value: Any, flow: bool | None) -> tuple[Node, Node]:
    """The nodes of one entry, styled by :func:`dump_mapping`'s rule."""
    try:
        key_node: Node = dumper.represent_data(key)
        node: Node = dumper.represent_data(value)
    except yaml.representer.RepresenterError as exc:
        problem = exc.args[0] if exc.args else exc
        raise InvalidMemoryError(
            f"front-matter {clip(key)!r} holds a value YAML cannot write: {problem}"
        ) from None
    except ValueError as exc:  # str() of an integer over Python's 4,300-digit bound
        raise InvalidMemoryError(f"front-matter {clip(key)!r} cannot be written: {exc}") from None
    if flow or (flow is None and key == "tags"):
        _flow_leaves(node)
    return key_node, node


def _flow_leaves(node: Node) -> None:
    """Write each collection that holds only scalars in flow style."""
    if isinstance(node, SequenceNode):
        children = node.value
    elif isinstance(node, MappingNode):
        children = [child for pair in node.value for child in pair]
    else:
        return
    node.flow_style = all(isinstance(child, ScalarNode) for child in children)
    for child in children:
        _flow_leaves(child)


def single_value_span(text: str) -> tuple[int, int] | None:
    """Where the value of a one-key, one-line ``key: value`` text lies, or None."""
    loader = _Loader(text)  # bounded like every other read, though the text is ours
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    if isinstance(node, MappingNode) and len(node.value) == 1:
        new = node.value[0][1]
        if new.start_mark.line == new.end_mark.line == 0:
            return new.start_mark.index, new.end_mark.index
    return None
