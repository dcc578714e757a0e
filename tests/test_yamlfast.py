"""The fast emitter must never write YAML that reads back differently from what it was given."""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.base.errors import InvalidMemoryError
from gitmem.format import codec, yamlfast
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


def _yaml_says_str(text: str) -> bool:
    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    return bool(tag == "tag:yaml.org,2002:str")


def test_letter_initial_rule_matches_pyyaml_table() -> None:
    # The emitter decides letter-initial scalars without PyYAML: that is exact only while
    # PyYAML's implicit resolvers keyed on a letter are bool and null alone.
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items():
        if first and (first.isalpha() or first in "_/"):
            assert {tag for tag, _ in resolvers} <= {
                "tag:yaml.org,2002:bool",
                "tag:yaml.org,2002:null",
            }, first


def _case_variants(word: str) -> list[str]:
    out = [""]
    for ch in word:
        out = [p + c for p in out for c in {ch.lower(), ch.upper()}]
    return out


def test_bool_and_null_words_in_every_case_agree_with_pyyaml() -> None:
    words = ["yes", "no", "true", "false", "on", "off", "null", "y", "n", "nan", "inf", "none"]
    for word in words:
        for text in [*_case_variants(word), word + "s", "_" + word, "/" + word]:
            assert yamlfast._resolves_to_str(text) == _yaml_says_str(text), text


@settings(max_examples=500)
@given(st.from_regex(r"[A-Za-z0-9_./~=<+-][A-Za-z0-9 _./@+()=~^:-]{0,12}", fullmatch=True))
def test_resolves_to_str_agrees_with_pyyaml(text: str) -> None:
    assert yamlfast._resolves_to_str(text) == _yaml_says_str(text)


def _typed(value: Any) -> Any:
    """A value with every type spelled out, so == also compares types (1 vs True)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, dt.datetime):
        return ("datetime", value, value.utcoffset())
    return (type(value).__name__, value)


metadata_values = st.dictionaries(
    keys, st.one_of(scalars, st.lists(st.text(min_size=1), max_size=3), related), max_size=6
)


@settings(max_examples=200)
@given(metadata_values, st.text(), st.sampled_from(["title", "tags", "updated_at"]))
def test_a_file_served_from_the_write_memo_reads_as_yaml_reads_it(
    metadata: dict[str, Any], body: str, changed: str
) -> None:
    # A file the write path proved (check_reads_back without a parse) is served from a
    # memo when read back in the same process: it must be exactly what YAML reads, and
    # re-serializing it with a change must give the same text as from a YAML parse.
    text = codec.serialize(codec.Document(metadata, body))
    try:
        codec.check_reads_back(text, metadata, body)
    except InvalidMemoryError:
        return  # refused, as before the memo: nothing is served
    memo = codec.parse(text)
    codec._EMITTED.clear()
    parsed = codec.parse(text)
    assert _typed(memo.metadata) == _typed(parsed.metadata)
    assert memo.body == parsed.body
    new = {**parsed.metadata, changed: "a new value"}
    assert codec.serialize(memo.with_changes(new, body)) == codec.serialize(
        parsed.with_changes(new, body)
    )


def test_the_write_memo_is_bounded() -> None:
    for n in range(codec._EMITTED_KEEP + 5):
        metadata = {"id": f"mem_{n}", "title": "t"}
        text = codec.serialize(codec.Document(metadata, "b"))
        codec.check_reads_back(text, metadata, "b")
    assert len(codec._EMITTED) == codec._EMITTED_KEEP
