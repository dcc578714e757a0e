"""The front-matter JSON Schema (schemas/memory.schema.json) and its validation (DESIGN §2)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gitmem.base.errors import InvalidMemoryError
from gitmem.features.layered import ENTRY_SCHEMA
from gitmem.format import schema
from gitmem.format.codec import parse
from gitmem.format.config import CONFIG_SCHEMA
from gitmem.format.model import (
    BUILTIN_CATEGORIES,
    DERIVED_KEYS,
    KNOWN_KEYS,
    Relationship,
    Scope,
    Status,
    Trigger,
    memory_from_document,
)

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schemas" / "memory.schema.json"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def valid(**changes: Any) -> dict[str, Any]:
    """A minimal valid front-matter mapping; a value of None removes that key."""
    meta: dict[str, Any] = {
        "id": "mem_5f0c2c1e-8a4b-4c1d-9e2f-0123456789ab",
        "created_at": dt.datetime(2026, 11, 22, 10, 30, tzinfo=dt.UTC),
        "updated_at": "2026-11-22T14:02:11Z",
        "version": 1,
    }
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return meta


def error_of(meta: dict[str, Any]) -> str:
    with pytest.raises(InvalidMemoryError) as info:
        schema.validate(meta)
    return str(info.value)


# -- the schema file itself ---------------------------------------------------------------


def test_schema_file_is_a_valid_draft_2020_12_schema() -> None:
    data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert data["$schema"] == DRAFT_2020_12
    jsonschema.Draft202012Validator.check_schema(data)
    assert jsonschema.validators.validator_for(data) is jsonschema.Draft202012Validator


def test_loaded_schema_is_the_file() -> None:
    assert schema.load_schema(schema.MEMORY_SCHEMA) == json.loads(SCHEMA_FILE.read_text("utf-8"))


def test_messages_are_in_jsonschema_s_words() -> None:
    assert "is not one of ['repo', 'user']" in error_of(valid(scope="team"))


def unknown_keywords(node: Any) -> set[str]:
    """The keywords of a schema that gitmem's checker does not know (it would skip them)."""
    if node is True:
        return set()
    # The applicators are the keywords schema._check dispatches on by name.
    applicators = {"required", "properties", "additionalProperties", "items", "$ref", "allOf"}
    known = schema._ANNOTATIONS | applicators | {"if", "not"} | set(schema._RULES)
    found = {key for key in node if key not in known}
    if node.get("additionalProperties", True) not in (True, False):
        found.add("additionalProperties")  # only true or false
    if not node.get("$ref", "#/$defs/").startswith("#/$defs/"):
        found.add("$ref")  # only this schema's $defs
    subs = [*node.get("properties", {}).values(), *node.get("$defs", {}).values()]
    subs += node.get("allOf", [])
    subs += [node[k] for k in ("items", "not", "if", "then", "else") if k in node]
    return found.union(*map(unknown_keywords, subs))


@pytest.mark.parametrize("name", [schema.MEMORY_SCHEMA, ENTRY_SCHEMA, CONFIG_SCHEMA])
def test_every_schema_uses_only_keywords_the_checker_knows(name: str) -> None:
    assert unknown_keywords(schema.load_schema(name)) == set()
    assert unknown_keywords({"type": "array", "maxItems": 3}) == {"maxItems"}


def test_schema_knows_every_field_the_model_knows() -> None:
    data = schema.load_schema(schema.MEMORY_SCHEMA)
    assert set(data["properties"]) == {*KNOWN_KEYS, *DERIVED_KEYS}
    assert data["required"] == ["id", "created_at"]
    assert data["additionalProperties"] is True


@pytest.mark.parametrize(
    ("path", "enum"),
    [
        (("scope",), Scope),
        (("trigger",), Trigger),
        (("status",), Status),
        (("related", "items", "properties", "relationship"), Relationship),
    ],
)
def test_schema_enums_match_the_model(path: tuple[str, ...], enum: Any) -> None:
    node: Any = schema.load_schema(schema.MEMORY_SCHEMA)["properties"]
    for part in path:
        node = node[part]
    # superseded is a listing's mark (Store.list), never written in a file
    assert node["enum"] == [str(member) for member in enum if member is not Status.SUPERSEDED]


# -- what passes ------------------------------------------------------------------------


def test_minimal_memory_is_valid() -> None:
    schema.validate(valid())


def test_full_memory_is_valid() -> None:
    schema.validate(
        valid(
            title="Prefer pytest fixtures over setUp",
            scope="repo",
            category="coding-preferences",
            tags=["testing", "python"],
            version=2,
            supersedes="mem_0a9d",
            related=[{"id": "mem_77e1", "relationship": "refines"}],
            agent="hephaestus",
            session_id="9b1f",
            trigger="cadence",
            status="active",
        )
    )


def test_path_derived_ids_are_valid() -> None:
    schema.validate(valid(id="skill-specific/python-code-review/my-api/review_history"))


@pytest.mark.parametrize("category", [*BUILTIN_CATEGORIES, "team-rituals", "x"])
def test_category_is_an_open_set(category: str) -> None:
    schema.validate(valid(category=category))


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-11-22T10:30:00Z",
        "2026-11-22 10:30:00+00:00",
        "2026-11-22t10:30:00.123z",
        "2026-11-22T10:30:00-0500",
        "2026-11-22",
        dt.datetime(2026, 11, 22, 10, 30, tzinfo=dt.UTC),
        dt.datetime(2026, 11, 22, 10, 30),  # naive: taken as UTC
        dt.date(2026, 11, 22),
    ],
)
def test_timestamp_spellings_are_valid(stamp: Any) -> None:
    schema.validate(valid(created_at=stamp, updated_at=stamp))


def test_unknown_keys_are_allowed_anywhere() -> None:
    schema.validate(
        valid(
            **{"x-reviewed-by": "ana", "confidence": 0.9, "nested": {"when": dt.date(2026, 1, 1)}},
            related=[{"id": "mem_1", "relationship": "relates-to", "note": "extra key"}],
        )
    )


def test_design_example_file_validates_and_builds_a_memory() -> None:
    text = (
        "---\nid: mem_5f0c2c1e-8a4b-4c1d-9e2f-0123456789ab\ntitle: Prefer pytest fixtures\n"
        "scope: repo\ncategory: coding-preferences\ntags: [testing, python]\n"
        "created_at: 2026-11-22T10:30:00Z\nupdated_at: 2026-11-22T14:02:11Z\nversion: 2\n"
        "supersedes: mem_0a9d\nrelated:\n  - id: mem_77e1\n    relationship: refines\n"
        "agent: hephaestus\nsession_id: 9b1f\ntrigger: cadence\n---\n\nbody\n"
    )
    doc = parse(text)
    schema.validate(doc.metadata)
    memory = memory_from_document(doc)
    assert memory.scope is Scope.REPO
    assert memory.trigger is Trigger.CADENCE
    assert memory.related[0].relationship is Relationship.REFINES


# -- what fails, and how the message says so ------------------------------------------------


@pytest.mark.parametrize("field", ["id", "created_at"])
def test_required_fields(field: str) -> None:
    message = error_of(valid(**{field: None}))
    assert message.startswith(f"memory {field}: required field is missing")


def test_every_missing_field_is_named() -> None:
    message = error_of({"title": "t"})
    assert message.startswith("memory id: required field is missing")
    assert "also wrong: created_at" in message


@pytest.mark.parametrize(
    ("changes", "field", "detail"),
    [
        ({"scope": "team"}, "scope", "'team' is not one of ['repo', 'user']"),
        ({"scope": "Repo"}, "scope", "is not one of"),
        ({"trigger": "cron"}, "trigger", "'cron' is not one of ['cadence', 'compaction'"),
        ({"status": "deleted"}, "status", "'deleted' is not one of ['active', 'archived']"),
        (
            {"related": [{"id": "mem_1", "relationship": "likes"}]},
            "related.0.relationship",
            "'likes' is not one of ['supersedes', 'refines', 'contradicts', 'relates-to']",
        ),
        ({"related": [{"id": "mem_1"}]}, "related.0.relationship", "required field is missing"),
        ({"related": [{"relationship": "refines"}]}, "related.0.id", "required field is missing"),
        ({"related": "mem_1"}, "related", "is not of type 'array'"),
        ({"related": ["mem_1"]}, "related.0", "is not of type 'object'"),
        ({"category": ""}, "category", "should be non-empty"),
        ({"category": 7}, "category", "is not of type 'string'"),
        ({"tags": "python"}, "tags", "is not of type 'array'"),
        ({"tags": ["ok", 3]}, "tags.1", "is not of type 'string'"),
        ({"tags": [""]}, "tags.0", "should be non-empty"),
        ({"id": ""}, "id", "should be non-empty"),
        ({"id": "../etc/passwd"}, "id", "does not match"),
        ({"id": "a/../b"}, "id", "does not match"),
        ({"id": "/abs"}, "id", "does not match"),
        ({"id": "has space"}, "id", "does not match"),
        ({"id": 5}, "id", "is not of type 'string'"),
        ({"version": 0}, "version", "less than the minimum of 1"),
        ({"version": "2"}, "version", "is not of type 'integer'"),
        ({"version": True}, "version", "is not of type 'integer'"),
        ({"version": 1.5}, "version", "is not of type 'integer'"),
        ({"created_at": "yesterday"}, "created_at", "does not match"),
        ({"updated_at": 1732271400}, "updated_at", "is not of type 'string'"),
        ({"title": True}, "title", "is not of type 'string'"),
        ({"title": "x" * 501}, "title", "is too long"),
        ({"supersedes": ""}, "supersedes", "should be non-empty"),
        ({"agent": ["a"]}, "agent", "is not of type 'string'"),
        ({"session_id": ""}, "session_id", "should be non-empty"),
    ],
)
def test_bad_fields_are_named(changes: dict[str, Any], field: str, detail: str) -> None:
    message = error_of(valid(**changes))
    assert message.startswith(f"memory {field}: ")
    assert detail in message


def test_what_names_the_file() -> None:
    with pytest.raises(InvalidMemoryError, match=r"^memories/ab/mem_x.md scope: "):
        schema.validate(valid(scope="team"), what="memories/ab/mem_x.md")


def test_long_values_are_shortened_in_messages() -> None:
    message = error_of(valid(scope="z" * 1000))
    assert len(message) < 200
    assert "zzz…' is not one of ['repo', 'user']" in message
    assert "is too long" in error_of(valid(title="x" * 501))


def test_front_matter_that_is_not_a_mapping() -> None:
    message = error_of(["id", "mem_1"])  # type: ignore[arg-type]
    assert message.startswith("memory front-matter: ")
    assert "is not of type 'object'" in message


# -- agreement with jsonschema over random documents ----------------------------------------

FIELD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.sampled_from(["", "repo", "user", "team", "cadence", "active", "archived", "refines",
                     "mem_1", "2026-11-22T10:30:00Z", "2026-11-22", "not a date", "../x"]),
    st.lists(st.sampled_from(["a", "", "python"]), max_size=2),
    st.lists(
        st.fixed_dictionaries(
            {"id": st.sampled_from(["mem_1", ""])},
            optional={"relationship": st.sampled_from(["refines", "likes"])},
        ),
        max_size=2,
    ),
    st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1)),
)
DOCS = st.dictionaries(st.sampled_from([*KNOWN_KEYS, "x-extra"]), FIELD_VALUES, max_size=8)


@given(meta=DOCS)
def test_property_validate_agrees_with_jsonschema(meta: dict[str, Any]) -> None:
    expected = jsonschema.Draft202012Validator(schema.load_schema(schema.MEMORY_SCHEMA)).is_valid(
        schema.to_json_value(meta)
    )
    try:
        schema.validate(meta)
    except InvalidMemoryError as exc:
        assert not expected
        assert str(exc).startswith("memory ")
    else:
        assert expected


# -- jsonschema as the oracle of the validator ------------------------------------------------

_ODD_TEXT = st.sampled_from(
    ["", "x", "mem_1", "a/b", "../x", "a..b", ".x", "2026-11-22", "2026-11-22T10:30:00Z",
     "2026-11-22 10:30", "२०२६-११-२२", "repo", "user", "active", "archived", "refines",
     "hook", "shared-project", "skill-specific", "command", "agent", "x" * 101, "y" * 201]
)
_SCALAR = st.one_of(
    _ODD_TEXT, st.text(max_size=12), st.integers(-3, 3), st.booleans(), st.none(),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["id", "relationship", "x", "layer"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_MEMORY_KEYS = ["id", "title", "scope", "category", "tags", "created_at", "updated_at",
                "version", "supersedes", "related", "agent", "session_id", "trigger", "status",
                "valid_from", "valid_until", "extra_key"]
_ENTRY_KEYS = ["layer", "fileType", "content", "project", "skill", "command", "agent",
               "title", "tags", "other"]


def _documents(keys: list[str], base: dict[str, Any]) -> st.SearchStrategy[Any]:
    changes = st.dictionaries(st.sampled_from(keys), st.one_of(_VALUE, _ODD_TEXT), max_size=5)
    drops = st.sets(st.sampled_from(keys), max_size=2)
    whole = st.builds(
        lambda c, d: {k: v for k, v in {**base, **c}.items() if k not in d}, changes, drops
    )
    return st.one_of(whole, _VALUE)


def _as_jsonschema_says(value: Any, name: str) -> list[tuple[list[str | int], str]]:
    validator = jsonschema.Draft202012Validator(schema.load_schema(name))
    return sorted((list(e.absolute_path), e.message) for e in validator.iter_errors(value))


def _ours(value: Any, name: str) -> list[tuple[list[str | int], str]]:
    return sorted((list(p.path), p.message) for p in schema.problems(value, name))


@given(_documents(_MEMORY_KEYS, schema.to_json_value(valid())))
@example({**schema.to_json_value(valid()), "version": 2.0})  # an integer to JSON Schema
@example({**schema.to_json_value(valid()), "version": True})
@example(["id", 1])
def test_problems_are_jsonschema_s_on_memories(value: Any) -> None:
    assert _ours(value, schema.MEMORY_SCHEMA) == _as_jsonschema_says(value, schema.MEMORY_SCHEMA)


@given(
    _documents(
        _ENTRY_KEYS,
        {"layer": "shared-project", "fileType": "known_issues", "content": "x", "project": "p"},
    )
)
@example({"layer": "agent", "fileType": "a..b", "content": "x", "tags": ["a", "a"]})
@example({"layer": "agent", "fileType": "f", "content": "x", "tags": [1, True, 1.0]})
@example({"layer": "command", "fileType": "f", "content": "x", "x": 1, "y": 2})
def test_problems_are_jsonschema_s_on_layered_entries(value: Any) -> None:
    assert _ours(value, ENTRY_SCHEMA) == _as_jsonschema_says(value, ENTRY_SCHEMA)


def test_no_validation_loads_jsonschema(tmp_path: Path) -> None:
    import subprocess
    import sys

    probe = (
        "import sys, gitmem\n"
        "from gitmem.format import schema\n"
        f"s = gitmem.init({str(tmp_path / 's')!r}, bare=True)\n"
        "s.create('a body', title='t', tags=['x'])\n"
        "try:\n    schema.validate({'id': ''})\nexcept gitmem.GitmemError:\n    pass\n"
        "print('jsonschema' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
