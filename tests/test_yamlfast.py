"""The fast emitter must never write YAML that reads back differently from what it was given."""

from __future__ import annotations

import datetime as dt
import json
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


# -- the reader of one-line entries (yamlfast.read_entries) ------------------------------------

_read_keys = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True),
    st.sampled_from(["yes", "on", "null", "No", "id", "Off", "y", "n", "_"]),
)
_tricky = [
    "yes", "No", "null", "~", "true", "0", "012", "0x1F", "1_000", ".inf", ".NaN", "-1", "+1",
    "1e3", "1.5", "2026-11-26", "2026-11-26T08:31:32Z", "2026-13-45T00:00:00Z",
    "2026-02-30T00:00:00Z", "2026-11-26T08:31:32.5Z", "2026-11-26 08:31:32", "=", "a ",
    "a  b", "'q'", "'a''b'", "'a'b'", "''", "'", "' a '", '""', '"', '"a"b"', '"tab\there"',
    '"\\u00e9"', "[]", "[a]", "[a,b]",
    "[a, b]", "[ a]", "[a, yes]", "[a, 1]", "[a, [b]]", "{a: b}", "a #c", "a: b", "@x", "`x",
    "%x", "!x", "&x", "*x", "|", ">", "-", "- a", "? a", "a\u00a0b", "caf\u00e9", "/path/x",
    "12345678901234567890", "0000", "10:20", "<<",
]
_read_values = st.one_of(
    st.from_regex(r"[A-Za-z0-9_./][A-Za-z0-9 _./@+()=~^:#,\[\]'-]{0,12}", fullmatch=True),
    st.sampled_from(_tricky),
    st.text(max_size=12).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.text(max_size=12).map(lambda s: "'" + s.replace("'", "''") + "'"),
    st.text(alphabet="'ab ", max_size=8).map(lambda s: f"'{s}'"),
    st.lists(
        st.one_of(
            st.from_regex(r"[A-Za-z0-9_./][A-Za-z0-9 _./-]{0,6}", fullmatch=True),
            st.sampled_from(["yes", "1", "null", "a ", "", "b,c"]),
        ),
        max_size=4,
    ).map(lambda items: "[" + ", ".join(items) + "]"),
    st.integers(min_value=0, max_value=10**20).map(str),
    timestamps.map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")),
)


@given(st.lists(st.tuples(_read_keys, _read_values), min_size=1, max_size=6))
@settings(max_examples=600, deadline=None)
def test_read_entries_reads_what_pyyaml_reads(entries: list[tuple[str, str]]) -> None:
    from gitmem.format import yamlio

    raw = "".join(f"{key}: {value}\n" for key, value in entries)
    fast = yamlfast.read_entries(raw)
    if fast is None:
        return  # PyYAML reads it (or refuses it)
    value, node = yamlio.load_yaml(raw)  # what the fast path reads, PyYAML must accept
    assert codec.same(fast[0], value), (raw, fast[0], value)
    cut = yamlio.segments(raw, node)
    assert cut is not None
    assert fast[1] == cut[0] and cut[1:] == ("", "")


def test_read_entries_takes_the_lines_gitmem_writes() -> None:
    metadata = {
        "id": "mem_00011c78-771e-4776-a68a-e309358c1bab",
        "title": "Deploys need: a green CI",
        "scope": "repo",
        "tags": ["ci", "python"],
        "created_at": dt.datetime(2026, 11, 26, 8, 31, 32, tzinfo=dt.UTC),
        "version": 3,
        "empty": [],
    }
    raw = "".join(yamlfast.dump_entry(k, v) or "" for k, v in metadata.items())
    fast = yamlfast.read_entries(raw)
    assert fast is not None and codec.same(fast[0], metadata)
    # Anything else is left to PyYAML: a comment, a block list, an escape, CRLF.
    others = ("# c\n", "supersedes:\n- id: x\n", 'title: "a\\"b"\n', "id: x\r\n", "a: 1\na: 2\n")
    for other in others:
        assert yamlfast.read_entries(raw + other) is None, other
