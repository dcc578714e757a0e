"""The write path's checks of fields: a credential in a nested field is named, and one
regex refuses a one-line field's control characters."""

from __future__ import annotations

import sys

import pytest

from gitmem.base.errors import InvalidInputError
from gitmem.format import secrets
from gitmem.store import inputs


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
