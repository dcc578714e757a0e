"""JSON Schema validation of front-matter, against the files in ``schemas/``."""

from __future__ import annotations

import datetime as dt
import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from .clock import format_timestamp
from .errors import InvalidMemoryError

MEMORY_SCHEMA = "memory.schema.json"


def _schema_text(name: str) -> str:
    # Installed wheels carry the schemas inside the package (gitmem/_schemas);
    # a source checkout or an editable install reads the top-level schemas/.
    packaged = resources.files("gitmem").joinpath("_schemas", name)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parent.parent / "schemas" / name).read_text(encoding="utf-8")


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_schema_text(name))
    return data


@functools.cache
def _validator(name: str) -> jsonschema.protocols.Validator:
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
    err = errors[0]
    where = ".".join(str(p) for p in err.absolute_path) or "front-matter"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    raise InvalidMemoryError(f"{what} {where}: {_shorten(err.message)}{more}")


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
