"""A pattern's ``hints`` only skip texts it cannot match: the scan with hints finds what
every regex over the whole text finds. hypothesis drives both over texts made of the pieces
credentials, names, separators and the Unicode characters whose case folding differs from
``str.lower()`` are made of."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitmem.base import redact
from gitmem.base.errors import InvalidMemoryError
from gitmem.base.redact import ALLOW_MARKER, DEFAULT_PATTERNS, SecretPattern
from gitmem.format.secrets import policy_from_config, scan_text

# Built at run time, like tests/test_secrets.py, so no scanner flags this file.
_TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
_AWS_SECRET = "wJalrXUtnF" + "EMI/K7MDENG/" + "bPxRfiCYzK8Q2LmN0p"
_VALUE = "Zq8" + "xT2vLm9Rk4Pw7Yb"

_PIECES = [
    "password", "PassWord", "passwd", "passphrase", "pwd", "secret", "SECRET", "token",
    "Token", "api_key", "api-key", "apikey", "ApiKey", "access_key", "accessKey",
    "private_key", "private-key", "client_secret", "auth_token", "authToken", "credential",
    "credentials", "bearer", "session_key", "signing-key", "encryption_key", "tokenizer",
    "token_url", "private_key_id", "aws", "AWS_", "aws_secret_access_key", "_", "-", ".",
    "s", "my", "db", "x", "=", ":", ":=", "=>", " = ", ": ", '"', "'", " ", "\n", "\t", ",",
    _VALUE, _VALUE[:12], _AWS_SECRET, _TOKEN, "AKIA" + "Z7Q2LMNO3PXY4RST", "https://u:",
    "p4ss" + "W0rdx9@host", ALLOW_MARKER, "K", "k", "\u212a", "\u017f", "\u0130", "é",
    "Authorization: Bearer ", "eyJ", "sk-ant-", "12345678901234567890",
]  # fmt: skip

_texts = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join) | st.text(max_size=200)


def _unhinted(patterns: tuple[SecretPattern, ...]) -> tuple[SecretPattern, ...]:
    return tuple(dataclasses.replace(p, hints=()) for p in patterns)


_POLICY = policy_from_config(
    {
        "secrets": {
            "patterns": [{"kind": "acme-token", "regex": "acme_[A-Za-z0-9]{8}"}],
            "allow": ["^Zq8"],
            "disable": ["jwt"],
        }
    }
)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(_texts)
@example("token=" + _VALUE)
@example("xtoken=" + _VALUE)
@example("myToken: " + _VALUE)
@example("aws_secret_access_key = " + _AWS_SECRET)
@example("to\u212aen=" + _VALUE)  # Kelvin sign: (?i) folds it to k, and so does lower()
@example("\u0130 token=" + _VALUE)  # lower() makes İ two characters
@example("pa\u017fsword = " + _VALUE)  # long s: (?i) folds it to s, lower() keeps it
@example("ap\u0131_key = " + _VALUE)  # dotless i, the same
def test_hints_skip_only_what_cannot_match(text: str) -> None:
    assert scan_text(text) == scan_text(text, _unhinted(DEFAULT_PATTERNS))
    allow = _POLICY.allow
    assert _POLICY.scan(text) == scan_text(text, _unhinted(_POLICY.patterns), allow=allow)
    for honour in (False, True):
        plain = redact.secret_spans(text, _unhinted(DEFAULT_PATTERNS), honour_marker=honour)
        assert redact.secret_spans(text, honour_marker=honour) == plain


def test_needed_keeps_the_patterns_order() -> None:
    lowered = ("token secret aiza ghp_ " * 2).lower()
    chosen = redact.needed(DEFAULT_PATTERNS, lowered)
    assert chosen == [p for p in DEFAULT_PATTERNS if any(h in lowered for h in p.hints)]
    assert redact.needed(DEFAULT_PATTERNS, "nothing here") == []


def test_the_empty_text_still_compiles_its_allow_list() -> None:
    # A bad committed pattern is reported whatever the text.
    with pytest.raises(InvalidMemoryError):
        scan_text("", allow=["("])
    assert scan_text("") == []


def test_the_hint_folds_cover_every_character_ignorecase_matches_to_a_letter() -> None:
    # The hints are ASCII and looked for in redact.hint_text(text); a character that (?i)
    # matches to an ASCII letter must turn into that letter there, or a pattern whose regex
    # matches the text is skipped.
    any_letter = re.compile("[a-z]", re.IGNORECASE)
    letters = {a: re.compile(a, re.IGNORECASE) for a in "abcdefghijklmnopqrstuvwxyz"}
    for point in range(0x80, 0x110000):
        char = chr(point)
        if any_letter.fullmatch(char) is None:
            continue
        folded = redact.hint_text(char)
        for letter, regex in letters.items():
            if regex.fullmatch(char):
                assert letter in folded, (hex(point), letter, folded)


def test_a_long_s_or_a_dotless_i_in_a_secret_name_is_still_found() -> None:
    for text in ("pa\u017fsword = " + _VALUE, "ap\u0131_key: " + _VALUE):
        assert [f.kind for f in scan_text(text)] == ["secret-assignment"], text
        assert redact.secret_spans(text), text
