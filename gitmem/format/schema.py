"""JSON Schema validation of front-matter, against the files in ``schemas/``.

jsonschema is imported only when a document fails :func:`conforms`, a small checker of the
keywords our schemas use that answers "valid" only when sure: importing jsonschema costs a
process about 100 ms, more than everything else ``gitmem add`` loads but libgit2, and a
valid document (every write's) never needs it. An invalid one (or one the checker is not
sure of) is validated by jsonschema, whose first error names the field, as before.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import InvalidMemoryError

if TYPE_CHECKING:
    import jsonschema
    import jsonschema.protocols

MEMORY_SCHEMA = "memory.schema.json"


def _schema_text(name: str) -> str:
    # Installed wheels carry the schemas inside the package (gitmem/_schemas, mapped in
    # pyproject.toml); a source checkout or an editable install reads the top-level
    # schemas/. Plain paths, not importlib.resources: that costs ~4 ms of imports on every
    # write, and gitmem is never imported from a zip archive (pygit2 is a compiled module).
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_schemas" / name, package.parent / "schemas" / name):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError(f"gitmem's schema {name} is missing from {package}")


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_schema_text(name))
    return data


@functools.cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    import jsonschema

    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


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


def validate(
    metadata: dict[str, Any], *, schema: str = MEMORY_SCHEMA, what: str = "memory"
) -> None:
    """Raise InvalidMemoryError naming the first field that breaks the schema."""
    value = to_json_value(metadata)
    if conforms(value, schema) is True:
        return
    errors = sorted(
        _validator(schema).iter_errors(value),
        key=lambda e: (len(e.absolute_path), str(e.absolute_path)),
    )
    if not errors:
        return
    first = _describe(errors[0])
    others = sorted({_field_of(e) for e in errors[1:]} - {_field_of(errors[0])})
    more = f" (also wrong: {', '.join(others)})" if others else ""
    raise InvalidMemoryError(f"{what} {first}{more}")


def _field_of(err: jsonschema.ValidationError) -> str:
    """The dotted path of the field an error is about (a missing field's own name)."""
    path = [str(p) for p in err.absolute_path]
    if err.validator == "required":
        path.append(_missing(err))
    return ".".join(path) or "front-matter"


def _missing(err: jsonschema.ValidationError) -> str:
    instance = err.instance if isinstance(err.instance, dict) else {}
    required = err.validator_value if isinstance(err.validator_value, list) else []
    names = [str(n) for n in required if n not in instance]
    return next((n for n in names if repr(n) in err.message), names[0] if names else "?")


def _describe(err: jsonschema.ValidationError) -> str:
    if err.validator == "required":
        return f"{_field_of(err)}: required field is missing"
    message = err.message
    shown = repr(err.instance)
    if len(shown) > 60 and shown in message:
        # Clip the value, not the message: "'xxxx…' is too long" must keep its end.
        message = message.replace(shown, shown[:50] + "…" + shown[-1], 1)
    return f"{_field_of(err)}: {_shorten(message)}"


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the checker that spares valid documents jsonschema's import -------------------------

_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "$comment"})
_MAX_DEPTH = 32

Check = Callable[[Any], "bool | None"]
"""A schema node made into a function: True or False where sure, None where not."""


def conforms(value: Any, schema: str = MEMORY_SCHEMA) -> bool | None:
    """Whether ``value`` (JSON-shaped, see :func:`to_json_value`) is valid against the
    schema file ``schema``: True or False where this checker is sure, None where it is not
    (a keyword or value kind it does not handle). Sound both ways, so jsonschema agrees
    with every True and every False (tests/test_schema.py checks it on random documents);
    :func:`validate` asks jsonschema whenever the answer is not True.

    The schema is made into nested functions once per process (:func:`_compiled`): every
    memory an index build decodes is checked, and walking the schema's dicts for each
    one was a fifth of a rebuild."""
    return _compiled(schema)(value)


@functools.cache
def _compiled(schema: str) -> Check:
    root = load_schema(schema)
    return _compile(root, root, 0)


def _yes(_value: Any) -> bool | None:
    return True


def _unsure(_value: Any) -> bool | None:
    return None


def _all(results: list[bool | None]) -> bool | None:
    if False in results:
        return False
    return None if None in results else True


def _compile(node: Any, root: dict[str, Any], depth: int) -> Check:
    if node is True or node == {}:
        return _yes
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return _unsure
    steps: list[Check] = []
    for key, arg in node.items():
        if key in _ANNOTATIONS:
            continue
        maker = _KEYWORDS.get(key)
        if maker is None:
            if key in ("then", "else"):
                continue  # read with "if"
            steps.append(_STOP)  # a keyword this checker does not know: not sure
            break
        steps.append(maker(arg, node, root, depth))

    def check(value: Any) -> bool | None:
        sure = True
        for step in steps:
            result = step(value)
            if result is False:
                return False
            if result is None:
                if step is _STOP:
                    return None
                sure = False
        return True if sure else None

    return check


def _STOP(_value: Any) -> bool | None:
    return None


Maker = Callable[[Any, dict[str, Any], dict[str, Any], int], Check]


def _type(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    kinds: dict[str, type] = {"string": str, "object": dict, "array": list}
    if not isinstance(arg, str):
        return _unsure
    if arg == "integer":

        def integer(value: Any) -> bool | None:
            if isinstance(value, float):
                return None  # 2.0 is an integer to JSON Schema: leave it to jsonschema
            return isinstance(value, int) and not isinstance(value, bool)

        return integer
    kind = kinds.get(arg)
    if kind is None:
        return _unsure
    return lambda value: isinstance(value, kind)


def _strings(arg: Any) -> bool:
    return isinstance(arg, list) and all(isinstance(a, str) for a in arg)


def _enum(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    if not _strings(arg):
        return _unsure
    allowed = frozenset(arg)
    return lambda value: isinstance(value, str) and value in allowed


def _const(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    if not isinstance(arg, str):
        return _unsure
    return lambda value: isinstance(value, str) and value == arg


def _min_length(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    return lambda value: not isinstance(value, str) or len(value) >= arg


def _max_length(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    return lambda value: not isinstance(value, str) or len(value) <= arg


@functools.cache
def _pattern_of(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _pattern(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    # jsonschema runs Python's re.search on the pattern, as here.
    return lambda value: not isinstance(value, str) or _pattern_of(arg).search(value) is not None


def _minimum(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    def minimum(value: Any) -> bool | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return True
        return bool(value >= arg)

    return minimum


def _required(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    return lambda value: not isinstance(value, dict) or all(name in value for name in arg)


def _properties(arg: Any, _node: Any, root: Any, depth: int) -> Check:
    subs = [(key, _compile(sub, root, depth + 1)) for key, sub in arg.items()]

    def properties(value: Any) -> bool | None:
        if not isinstance(value, dict):
            return True
        return _all([check(value[key]) for key, check in subs if key in value])

    return properties


def _additional(arg: Any, node: Any, _root: Any, _depth: int) -> Check:
    if arg is True:
        return _yes
    if arg is not False or "patternProperties" in node:
        return lambda value: True if not isinstance(value, dict) else None
    allowed = frozenset(node.get("properties", {}))
    return lambda value: not isinstance(value, dict) or set(value) <= allowed


def _items(arg: Any, node: Any, root: Any, depth: int) -> Check:
    if "prefixItems" in node:
        return _unsure
    each = _compile(arg, root, depth + 1)
    return lambda value: True if not isinstance(value, list) else _all([each(i) for i in value])


def _unique(arg: Any, _node: Any, _root: Any, _depth: int) -> Check:
    if arg is not True:
        return _yes

    def unique(value: Any) -> bool | None:
        if not isinstance(value, list):
            return True
        if not _strings(value):
            return None
        return len(set(value)) == len(value)

    return unique


def _ref(arg: Any, _node: Any, root: Any, depth: int) -> Check:
    if not isinstance(arg, str) or not arg.startswith("#/$defs/"):
        return _unsure
    target = root.get("$defs", {}).get(arg[len("#/$defs/") :])
    return _unsure if target is None else _compile(target, root, depth + 1)


def _not(arg: Any, _node: Any, root: Any, depth: int) -> Check:
    inner = _compile(arg, root, depth + 1)

    def negated(value: Any) -> bool | None:
        result = inner(value)
        return None if result is None else not result

    return negated


def _all_of(arg: Any, _node: Any, root: Any, depth: int) -> Check:
    subs = [_compile(sub, root, depth + 1) for sub in arg]
    return lambda value: _all([sub(value) for sub in subs])


def _if(arg: Any, node: Any, root: Any, depth: int) -> Check:
    test = _compile(arg, root, depth + 1)
    then = _compile(node.get("then", True), root, depth + 1)
    otherwise = _compile(node.get("else", True), root, depth + 1)

    def conditional(value: Any) -> bool | None:
        result = test(value)
        if result is None:
            return None
        return (then if result else otherwise)(value)

    return conditional


_KEYWORDS: dict[str, Maker] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minLength": _min_length,
    "maxLength": _max_length,
    "pattern": _pattern,
    "minimum": _minimum,
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "items": _items,
    "uniqueItems": _unique,
    "$ref": _ref,
    "not": _not,
    "allOf": _all_of,
    "if": _if,
}
