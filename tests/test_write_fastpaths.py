"""The write path's shortcuts decide exactly what the plain code decided (issue 17).

Each shortcut a create takes (the front-matter emitted once for the file and its read-back
check, the fields' texts gathered for the secret scan without their names, one regex for a
one-line field's control characters) is held here to the code it replaced, on the values
tests/test_codec.py draws for its own properties.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_codec import BODIES, METADATA, VALUES

from gitmem.base.errors import GitmemError, InvalidInputError
from gitmem.format import codec, secrets
from gitmem.store import checks


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except (GitmemError, TypeError, ValueError) as exc:  # whatever the plain code raised
        return type(exc).__name__, str(exc)


@given(metadata=METADATA, body=BODIES)
@example(metadata={"id": "mem_1", "title": "t", "tags": ["a", "b"]}, body="body\n")
@example(metadata={"big": 10**5000}, body="")  # too many digits: refused either way
@example(metadata={1: "x"}, body="")  # not a key either emitter writes (TypeError, as before)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_emit_writes_what_serialize_writes_and_the_check_agrees(
    metadata: dict[Any, Any], body: str
) -> None:
    plain = _outcome(lambda: codec.serialize(codec.Document(metadata, body)))
    emitted = _outcome(lambda: codec.emit(metadata, body))
    assert plain[0] == emitted[0]
    if plain[0] != "ok":
        assert plain == emitted
        return
    text, made = plain[1], emitted[1]
    assert made.text == text
    # The check told what emit made gives the answer the check that emits again gives.
    codec._EMITTED.clear()
    alone = _outcome(lambda: codec.check_reads_back(text, metadata, body))
    codec._EMITTED.clear()
    told = _outcome(lambda: codec.check_reads_back(made.text, metadata, body, emitted=made))
    assert alone == told


def test_the_check_takes_emit_s_word_only_for_its_own_text_and_metadata() -> None:
    metadata = {"id": "mem_1", "title": "t"}
    made = codec.emit(metadata, "b")
    assert made.front is not None
    # Another text (equal, not the same object) or another metadata: emitted again.
    other = "".join(list(made.text))
    codec.check_reads_back(other, metadata, "b", emitted=made)
    codec.check_reads_back(made.text, dict(metadata), "b", emitted=made)
    # A text that does not hold the body it is checked with is refused even with emit's word.
    with pytest.raises(GitmemError):
        codec.check_reads_back(made.text, metadata, "another body", emitted=made)


@settings(max_examples=300)
@given(st.dictionaries(st.text(max_size=5), VALUES, max_size=6))
def test_the_fields_texts_are_those_the_named_walk_yields(metadata: dict[str, Any]) -> None:
    texts: list[str] = []
    secrets._collect_texts(metadata, texts)
    assert texts == [text for _, text, _ in secrets._field_texts(dict(metadata), "")]


def test_a_credential_in_a_nested_field_is_still_named() -> None:
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    with pytest.raises(secrets.SecretsFoundError, match=r"front-matter field extra\.a\[1\]"):
        secrets.refuse_memory(
            memory_id=None, metadata={"extra": {"a": ["x", token]}}, body=""
        )


def test_one_line_fields_refuse_the_same_characters() -> None:
    # Every code point against the per-character test the regex replaced.
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        refused = code < 32 or code == 127
        assert (checks._CONTROL.search(f"a{char}b") is not None) == refused, hex(code)
    with pytest.raises(InvalidInputError, match="one line"):
        checks.single_line("title", "two\nlines")
    assert checks.single_line("title", "  é\u2028x ") == "é\u2028x"
