"""JSON Schema validation of front-matter, against the files in ``schemas/``.

A small validator of the keywords our schemas use (draft 2020-12, jsonschema's wording),
compiled once per schema into functions: jsonschema's import alone would cost ``gitmem
add`` about 100 ms. tests/test_schema.py holds it to jsonschema as the oracle.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import InvalidMemoryError
from gitmem.format.yamlbounds import clip

MEMORY_SCHEMA = "memory.schema.json"


def _schema_text(name: str) -> str:
    # Wheels carry the schemas in gitmem/_schemas; a source checkout reads schemas/. Plain
    # paths: importlib.resources would cost imports on every write, and gitmem never runs
    # from a zip archive (pygit2 is a compiled module).
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_schemas" / name, package.parent / "schemas" / name):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError(f"gitmem's schema {name} is missing from {package}")


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_schema_text(name))
    return data


def to_json_value(value: Any) -> Any:
    """YAML values as JSON would hold them: timestamps and dates become strings."""
    if type(value) is str:
        return value  # most values: answered before the four checks below
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    return value


class Problem(NamedTuple):
    """One way a value breaks the schema, in jsonschema's words, at the path to the value
    (for a missing field: to its mapping, and ``missing`` names it)."""

    path: tuple[str | int, ...]
    message: str
    instance: Any
    missing: str | None = None

    @property
    def field(self) -> str:
        """The dotted path of the field (a missing field's own name)."""
        parts = [str(p) for p in self.path]
        if self.missing is not None:
            parts.append(self.missing)
        return ".".join(parts) or "front-matter"


def problems(value: Any, schema: str = MEMORY_SCHEMA) -> list[Problem]:
    """Every way ``value`` (JSON-shaped, see :func:`to_json_value`) breaks the schema."""
    return _compiled(schema)(value)


def checker(schema: dict[str, Any]) -> Callable[[Any], list[Problem]]:
    """:func:`problems` for a schema held in memory (an MCP tool's input schema)."""
    check = _compile(schema, schema)

    def problems_of(value: Any) -> list[Problem]:
        found: list[Problem] = []
        check(value, (), found)
        return found

    return problems_of


def validate(
    metadata: dict[str, Any], *, schema: str = MEMORY_SCHEMA, what: str = "memory"
) -> None:
    """Raise InvalidMemoryError naming the first field that breaks the schema."""
    found = problems(to_json_value(metadata), schema)
    if not found:
        return
    found.sort(key=lambda p: (len(p.path), str(list(p.path))))
    first = found[0]
    others = sorted({p.field for p in found[1:]} - {first.field})
    more = f" (also wrong: {', '.join(others)})" if others else ""
    raise InvalidMemoryError(f"{what} {_describe(first)}{more}")


def _describe(problem: Problem) -> str:
    if problem.missing is not None:
        return f"{problem.field}: required field is missing"
    message = problem.message
    shown = repr(problem.instance)
    if len(shown) > 60 and shown in message:
        # Clip the value, not the message: "'xxxx…' is too long" must keep its end.
        message = message.replace(shown, shown[:50] + "…" + shown[-1], 1)
    return f"{problem.field}: {clip(message, 200)}"


# -- the schema made into functions ------------------------------------------------------

Where = tuple[str | int, ...]
Check = Callable[[Any, Where, list[Problem]], None]
"""A schema node made into a function: appends the problems of a value at a path."""
Rule = tuple[Callable[[Any], bool], Callable[[Any], str]]
"""A keyword that tests the value itself: whether the value breaks it, and how jsonschema
says so."""

_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "title", "description", "$comment", "default", "then", "else"}
)


@functools.cache
def _compiled(schema: str) -> Callable[[Any], list[Problem]]:
    return checker(load_schema(schema))


def _compile(node: Any, root: dict[str, Any]) -> Check:
    if node is True:
        return _nothing
    if not isinstance(node, dict):
        raise ValueError(f"schema node {node!r} is not an object or true")
    steps: list[Check] = []
    for key, arg in node.items():
        if key in _ANNOTATIONS:
            continue  # then/else are read with "if"
        if key in _RULES:
            steps.append(_ruled(*_RULES[key](arg, root)))
        elif key in _KEYWORDS:
            steps.append(_KEYWORDS[key](arg, node, root))
        else:
            raise ValueError(f"schema keyword {key!r} is not one gitmem's validator knows")
    if len(steps) == 1:
        return steps[0]

    def check(value: Any, path: Where, found: list[Problem]) -> None:
        for step in steps:
            step(value, path, found)

    return check


def _ruled(broken: Callable[[Any], bool], say: Callable[[Any], str]) -> Check:
    def check(value: Any, path: Where, found: list[Problem]) -> None:
        if broken(value):
            found.append(Problem(path, say(value), value))

    return check


def _nothing(value: Any, path: Where, found: list[Problem]) -> None:
    return None


def _valid(check: Check, value: Any) -> bool:
    found: list[Problem] = []
    check(value, (), found)
    return not found


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    # JSON Schema counts 2.0 as an integer.
    "integer": lambda v: is_number(v) and (isinstance(v, int) or float(v).is_integer()),
}


def _equal(one: Any, two: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, in lists and mappings too (jsonschema's rule)."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(one[k], two[k]) for k in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    return bool(one == two)


def _repeats(value: list[Any]) -> bool:
    return any(_equal(item, other) for i, item in enumerate(value) for other in value[:i])


def _type(arg: Any, _root: Any) -> Rule:
    test = _TYPES[arg]
    return (lambda v: not test(v)), (lambda v: f"{v!r} is not of type {arg!r}")


def _min_length(arg: Any, _root: Any) -> Rule:
    words = "should be non-empty" if arg == 1 else "is too short"
    return (lambda v: isinstance(v, str) and len(v) < arg), (lambda v: f"{v!r} {words}")


def _max_length(arg: Any, _root: Any) -> Rule:
    words = "is expected to be empty" if arg == 0 else "is too long"
    return (lambda v: isinstance(v, str) and len(v) > arg), (lambda v: f"{v!r} {words}")


def _pattern(arg: Any, _root: Any) -> Rule:
    search = re.compile(arg).search  # jsonschema runs re.search too
    return (
        (lambda v: isinstance(v, str) and search(v) is None),
        (lambda v: f"{v!r} does not match {arg!r}"),
    )


def _not(arg: Any, root: Any) -> Rule:
    inner = _compile(arg, root)
    return (lambda v: _valid(inner, v)), (lambda v: f"{v!r} should not be valid under {arg!r}")


_RULES: dict[str, Callable[[Any, Any], Rule]] = {
    "type": _type,
    "enum": lambda arg, _root: (
        (lambda v: not any(_equal(each, v) for each in arg)),
        (lambda v: f"{v!r} is not one of {arg!r}"),
    ),
    "const": lambda arg, _root: (
        (lambda v: not _equal(v, arg)),
        (lambda v: f"{arg!r} was expected"),
    ),
    "minLength": _min_length,
    "maxLength": _max_length,
    "pattern": _pattern,
    "minimum": lambda arg, _root: (
        (lambda v: is_number(v) and v < arg),
        (lambda v: f"{v!r} is less than the minimum of {arg!r}"),
    ),
    "maximum": lambda arg, _root: (
        (lambda v: is_number(v) and v > arg),
        (lambda v: f"{v!r} is greater than the maximum of {arg!r}"),
    ),
    "uniqueItems": lambda arg, _root: (
        (lambda v: arg is True and isinstance(v, list) and _repeats(v)),
        (lambda v: f"{v!r} has non-unique elements"),
    ),
    "not": _not,
}


def _required(arg: Any, _node: Any, _root: Any) -> Check:
    def required(value: Any, path: Where, found: list[Problem]) -> None:
        if isinstance(value, dict):
            for name in arg:
                if name not in value:
                    message = f"{name!r} is a required property"
                    found.append(Problem(path, message, value, name))

    return required


def _properties(arg: Any, _node: Any, root: Any) -> Check:
    subs = [(key, _compile(sub, root)) for key, sub in arg.items()]

    def properties(value: Any, path: Where, found: list[Problem]) -> None:
        if isinstance(value, dict):
            for key, check in subs:
                if key in value:
                    check(value[key], (*path, key), found)

    return properties


def _additional(arg: Any, node: Any, _root: Any) -> Check:
    if arg is True:
        return _nothing
    if arg is not False or "patternProperties" in node:
        raise ValueError("additionalProperties takes true or false here")
    allowed = frozenset(node.get("properties", {}))

    def additional(value: Any, path: Where, found: list[Problem]) -> None:
        if not isinstance(value, dict):
            return
        extras = sorted((k for k in value if k not in allowed), key=str)
        if extras:
            verb = "was" if len(extras) == 1 else "were"
            names = ", ".join(repr(extra) for extra in extras)
            message = f"Additional properties are not allowed ({names} {verb} unexpected)"
            found.append(Problem(path, message, value))

    return additional


def _items(arg: Any, _node: Any, root: Any) -> Check:
    each = _compile(arg, root)

    def items(value: Any, path: Where, found: list[Problem]) -> None:
        if isinstance(value, list):
            for index, item in enumerate(value):
                each(item, (*path, index), found)

    return items


def _ref(arg: Any, _node: Any, root: Any) -> Check:
    if not isinstance(arg, str) or not arg.startswith("#/$defs/"):
        raise ValueError(f"$ref {arg!r} is not a reference to this schema's $defs")
    return _compile(root["$defs"][arg.removeprefix("#/$defs/")], root)


def _all_of(arg: Any, _node: Any, root: Any) -> Check:
    subs = [_compile(sub, root) for sub in arg]

    def all_of(value: Any, path: Where, found: list[Problem]) -> None:
        for sub in subs:
            sub(value, path, found)

    return all_of


def _if(arg: Any, node: Any, root: Any) -> Check:
    test = _compile(arg, root)
    then = _compile(node.get("then", True), root)
    otherwise = _compile(node.get("else", True), root)

    def if_(value: Any, path: Where, found: list[Problem]) -> None:
        (then if _valid(test, value) else otherwise)(value, path, found)

    return if_


_KEYWORDS: dict[str, Callable[[Any, dict[str, Any], dict[str, Any]], Check]] = {
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "items": _items,
    "$ref": _ref,
    "allOf": _all_of,
    "if": _if,
}
