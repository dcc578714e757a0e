"""JSON Schema validation of front-matter, against the files in ``schemas/``.

A small validator of the keywords our schemas use (draft 2020-12, jsonschema's wording):
jsonschema's import alone would cost ``gitmem add`` about 100 ms. tests/test_schema.py
holds it to jsonschema as the oracle, and every schema to the keywords it knows.
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
    return checker(load_schema(schema))(value)


def checker(schema: dict[str, Any]) -> Callable[[Any], list[Problem]]:
    """:func:`problems` for a schema held in memory (an MCP tool's input schema)."""

    def problems_of(value: Any) -> list[Problem]:
        found: list[Problem] = []
        _check(schema, value, (), found, schema)
        return found

    return problems_of


def validate(
    metadata: dict[str, Any], *, schema: str = MEMORY_SCHEMA, what: str = "memory"
) -> None:
    """Raise InvalidMemoryError naming the first field that breaks the schema."""
    found = problems(to_json_value(metadata), schema)
    if not found:
        return
    first = min(found, key=lambda p: (len(p.path), str(list(p.path))))
    others = sorted({p.field for p in found} - {first.field})
    more = f" (also wrong: {', '.join(others)})" if others else ""
    message = "required field is missing" if first.missing is not None else first.message
    shown = repr(first.instance)
    if first.missing is None and len(shown) > 60 and shown in message:
        # Clip the value, not the message: "'xxxx…' is too long" must keep its end.
        message = message.replace(shown, shown[:50] + "…" + shown[-1], 1)
    raise InvalidMemoryError(f"{what} {first.field}: {clip(message, 200)}{more}")


# -- the keywords ---------------------------------------------------------------------------

Where = tuple[str | int, ...]

_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "title", "description", "$comment", "default", "then", "else"}
)


def _check(node: Any, value: Any, path: Where, found: list[Problem], root: Any) -> None:
    """Append the problems of ``value`` (at ``path``) under the schema ``node``."""
    if node is True:
        return
    for key, arg in node.items():
        if key in _ANNOTATIONS:
            continue
        if key in _RULES:
            broken, say = _RULES[key]
            if broken(arg, value):
                found.append(Problem(path, say(arg, value), value))
        elif key == "not":
            if _valid(arg, value, root):
                found.append(Problem(path, f"{value!r} should not be valid under {arg!r}", value))
        elif key == "$ref":
            _check(root["$defs"][arg.removeprefix("#/$defs/")], value, path, found, root)
        elif key == "allOf":
            for sub in arg:
                _check(sub, value, path, found, root)
        elif key == "if":
            then = node.get("then" if _valid(arg, value, root) else "else", True)
            _check(then, value, path, found, root)
        elif isinstance(value, list) and key == "items":
            for index, item in enumerate(value):
                _check(arg, item, (*path, index), found, root)
        elif isinstance(value, dict):
            _check_object(key, arg, node, value, path, found, root)


def _check_object(
    key: str,
    arg: Any,
    node: Any,
    value: dict[str, Any],
    path: Where,
    found: list[Problem],
    root: Any,
) -> None:
    if key == "required":
        for name in arg:
            if name not in value:
                found.append(Problem(path, f"{name!r} is a required property", value, name))
    elif key == "properties":
        for name, sub in arg.items():
            if name in value:
                _check(sub, value[name], (*path, name), found, root)
    elif key == "additionalProperties" and arg is False:
        allowed = node.get("properties", {})
        extras = sorted((k for k in value if k not in allowed), key=str)
        if extras:
            verb = "was" if len(extras) == 1 else "were"
            names = ", ".join(repr(extra) for extra in extras)
            message = f"Additional properties are not allowed ({names} {verb} unexpected)"
            found.append(Problem(path, message, value))


def _valid(node: Any, value: Any, root: Any) -> bool:
    found: list[Problem] = []
    _check(node, value, (), found, root)
    return not found


_compiled_re = functools.cache(re.compile)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "number": is_number,
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


_RULES: dict[str, tuple[Callable[[Any, Any], bool], Callable[[Any, Any], str]]] = {
    # keyword: (whether the value breaks it, how jsonschema says so)
    "type": (lambda a, v: not _TYPES[a](v), lambda a, v: f"{v!r} is not of type {a!r}"),
    "enum": (
        lambda a, v: not any(_equal(each, v) for each in a),
        lambda a, v: f"{v!r} is not one of {a!r}",
    ),
    "const": (lambda a, v: not _equal(v, a), lambda a, v: f"{a!r} was expected"),
    "minLength": (
        lambda a, v: isinstance(v, str) and len(v) < a,
        lambda a, v: f"{v!r} " + ("should be non-empty" if a == 1 else "is too short"),
    ),
    "maxLength": (
        lambda a, v: isinstance(v, str) and len(v) > a,
        lambda a, v: f"{v!r} " + ("is expected to be empty" if a == 0 else "is too long"),
    ),
    "pattern": (  # jsonschema runs re.search too
        lambda a, v: isinstance(v, str) and _compiled_re(a).search(v) is None,
        lambda a, v: f"{v!r} does not match {a!r}",
    ),
    "minimum": (
        lambda a, v: is_number(v) and v < a,
        lambda a, v: f"{v!r} is less than the minimum of {a!r}",
    ),
    "maximum": (
        lambda a, v: is_number(v) and v > a,
        lambda a, v: f"{v!r} is greater than the maximum of {a!r}",
    ),
    "uniqueItems": (
        lambda a, v: a is True and isinstance(v, list) and _repeats(v),
        lambda a, v: f"{v!r} has non-unique elements",
    ),
}
