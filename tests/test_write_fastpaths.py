"""The write path's shortcuts decide exactly what the plain code decided (issue 17).

Each shortcut a create takes (the fields' texts gathered for the secret scan without their
names, one regex for a one-line field's control characters) is held here to the code it
replaced, on the values tests/test_codec.py draws for its own properties.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codec import VALUES

from gitmem.base.errors import InvalidInputError
from gitmem.format import secrets
from gitmem.store import inputs


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
        assert (inputs._CONTROL.search(f"a{char}b") is not None) == refused, hex(code)
    with pytest.raises(InvalidInputError, match="one line"):
        inputs.single_line("title", "two\nlines")
    assert inputs.single_line("title", "  é\u2028x ") == "é\u2028x"
