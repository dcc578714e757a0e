"""JSON Schema validation of front-matter, against the files in ``schemas/``.

jsonschema is imported when the first document is validated, not with this module:
importing it costs more than everything else a git hook's ``gitmem check`` loads, and
the model imports :func:`to_json_value` from here.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import InvalidMemoryError

if TYPE_CHECKING:
    import jsonschema
    import jsonschema.protocols

MEMORY_SCHEMA = "memory.schema.json"


def _schema_text(name: str) -> str:
    # Installed wheels carry the schemas inside the package (gitmem/_schemas);
    # a source checkout or an editable install reads the top-level schemas/.
    from importlib import resources  # ~8 ms: only when a schema is read (writes, checks)

    packaged = resources.files("gitmem").joinpath("_schemas", name)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[2] / "schemas" / name).read_text(encoding="utf-8")


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
    errors = sorted(
        _validator(schema).iter_errors(to_json_value(metadata)),
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
