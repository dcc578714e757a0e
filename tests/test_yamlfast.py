"""The fast emitter must never write YAML that reads back differently from what it was given."""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.format import yamlfast
from gitmem.format.codec import load_yaml

timestamps = st.datetimes(
    min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.just(dt.UTC)
).map(lambda d: d.replace(microsecond=0))
scalars = st.one_of(st.text(), st.integers(), st.booleans(), timestamps, st.none())
keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,20}", fullmatch=True)
related = st.lists(
    st.fixed_dictionaries({"id": st.text(min_size=1), "relationship": st.text()}), max_size=3
)


def _reads_back(key: str, value: Any) -> None:
    text = yamlfast.dump_entry(key, value)
    if text is None:
        return  # falls back to yaml.dump, which is PyYAML's own business
    parsed, _ = load_yaml(text)
    assert parsed == {key: value}, text
    assert type(parsed[key]) is type(value)


@settings(max_examples=200)
@given(keys, scalars)
def test_scalars_read_back(key: str, value: Any) -> None:
    _reads_back(key, value)


@settings(max_examples=200)
@given(st.lists(st.text(min_size=1), max_size=5))
def test_tag_lists_read_back(tags: list[str]) -> None:
    _reads_back("tags", tags)


@settings(max_examples=200)
@given(related)
def test_related_lists_read_back(value: list[dict[str, str]]) -> None:
    _reads_back("related", value)


def test_strings_that_yaml_would_misread_are_quoted() -> None:
    for text in [
        "yes",
        "no",
        "on",
        "null",
        "~",
        "1.5",
        "0x1f",
        "2026-11-22",
        "=",
        "- a",
        "a: b",
        "#x",
        " x",
    ]:
        line = yamlfast.dump_entry("title", text)
        assert line is not None and line[7] in "'\"", line
        assert yaml.safe_load(line) == {"title": text}


def test_common_values_are_handled_without_fallback() -> None:
    assert (
        yamlfast.dump_entry("title", "Prefer pytest fixtures") == "title: Prefer pytest fixtures\n"
    )
    assert yamlfast.dump_entry("tags", ["testing", "python"]) == "tags: [testing, python]\n"
    stamp = dt.datetime(2026, 11, 22, 10, 30, tzinfo=dt.UTC)
    assert yamlfast.dump_entry("created_at", stamp) == "created_at: 2026-11-22T10:30:00Z\n"
    assert yamlfast.dump_entry("related", [{"id": "mem_1", "relationship": "refines"}]) == (
        "related:\n- id: mem_1\n  relationship: refines\n"
    )
    assert yamlfast.dump_entry("nested", {"a": 1}) is None
