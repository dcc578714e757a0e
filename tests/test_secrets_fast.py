"""The secret scan's fast paths find exactly what the plain scan finds (issue 17).

``redact.needed`` (each hint looked for once) and ``redact.finditer`` (a pattern's regex
tried only where one of its ``starts`` literals begins) replace a loop that ran every
pattern's hints and regex over the whole text. The reference below is that loop without
its hints (every regex over the whole text: hints may only skip what cannot match);
hypothesis drives both over texts made of the pieces credentials, names, separators and the
Unicode characters whose case folding differs from ``str.lower()`` are made of.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitmem.base import redact
from gitmem.base.errors import InvalidMemoryError
from gitmem.base.redact import (
    ALLOW_MARKER,
    DEFAULT_PATTERNS,
    NOT_A_SECRET_NAME,
    Matcher,
    SecretPattern,
    plausible,
)
from gitmem.format import secrets
from gitmem.format.secrets import SecretFinding, policy_from_config, scan_text

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
]

_texts = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join) | st.text(max_size=200)


def _reference_scan(
    text: str,
    patterns: Iterable[SecretPattern] | None = None,
    *,
    allow: Sequence[Matcher] = (),
) -> list[SecretFinding]:
    """scan_text before the fast paths (main at 6641db3), but for the compiled allow-list."""
    chosen = DEFAULT_PATTERNS if patterns is None else tuple(patterns)
    hits: list[secrets._Hit] = []
    taken: list[tuple[int, int]] = []
    for pattern in chosen:  # every regex, hints or not: they may only skip what cannot match
        for match in pattern.regex.finditer(text):
            try:
                start, end = match.span(pattern.group)
            except (IndexError, re.error):
                start, end = match.span()
            if start < 0:
                continue
            secret = text[start:end]
            if not secret or not plausible(pattern, secret):
                continue
            if pattern.name_group is not None and NOT_A_SECRET_NAME.search(
                match.group(pattern.name_group) or ""
            ):
                continue
            if any(a.search(secret) for a in allow):
                continue
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            taken.append((start, end))
            hits.append(secrets._Hit(start, end, pattern.kind, pattern.keep))
    if not hits:
        return []
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    findings: list[SecretFinding] = []
    hits.sort(key=lambda h: h.start)
    for hit in hits:
        index = bisect.bisect_right(line_starts, hit.start) - 1
        line_start = line_starts[index]
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        line = text[line_start:line_end]
        if ALLOW_MARKER in line:
            continue
        same_line = [h for h in hits if line_start <= h.start < line_end]
        findings.append(
            SecretFinding(hit.kind, index + 1, secrets._excerpt(line, line_start, hit, same_line))
        )
    return findings


_POLICY = policy_from_config(
    {
        "secrets": {
            "patterns": [{"kind": "acme-token", "regex": "acme_[A-Za-z0-9]{8}"}],
            "allow": ["^Zq8"],
            "disable": ["jwt"],
        }
    }
)


@settings(max_examples=600, deadline=None)
@given(_texts)
@example("token=" + _VALUE)
@example("xtoken=" + _VALUE)
@example("myToken: " + _VALUE)
@example("aws_secret_access_key = " + _AWS_SECRET)
@example("to\u212aen=" + _VALUE)  # Kelvin sign: (?i) folds it to k, and so does lower()
@example("\u0130 token=" + _VALUE)  # lower() makes İ two characters: positions would shift
@example("pa\u017fsword = " + _VALUE)  # long s: (?i) folds it to s, lower() keeps it
@example("ap\u0131_key = " + _VALUE)  # dotless i, the same
def test_the_scan_finds_what_the_plain_scan_finds(text: str) -> None:
    assert scan_text(text) == _reference_scan(text)
    assert _POLICY.scan(text) == _reference_scan(text, _POLICY.patterns, allow=_POLICY.allow)


@settings(max_examples=400, deadline=None)
@given(_texts)
def test_each_pattern_matches_where_its_regex_matches(text: str) -> None:
    lowered = redact.hint_text(text)
    for pattern in DEFAULT_PATTERNS:
        fast = [m.span() for m in redact.finditer(pattern, text, lowered)]
        assert fast == [m.span() for m in pattern.regex.finditer(text)], pattern.kind


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_redaction_spans_are_unchanged(text: str) -> None:
    for honour in (False, True):
        spans = []
        for pattern in DEFAULT_PATTERNS:
            for match in pattern.regex.finditer(text):
                try:
                    start, end = match.span(pattern.group)
                except (IndexError, re.error):
                    start, end = match.span()
                secret = text[start:end]
                if start < 0 or not secret or not plausible(pattern, secret):
                    continue
                if pattern.name_group is not None and NOT_A_SECRET_NAME.search(
                    match.group(pattern.name_group) or ""
                ):
                    continue
                if any(start < t_end and t_start < end for t_start, t_end, _ in spans):
                    continue
                if honour:
                    line_start = text.rfind("\n", 0, start) + 1
                    line_end = text.find("\n", start)
                    line = text[line_start : line_end if line_end >= 0 else len(text)]
                    if ALLOW_MARKER in line:
                        continue
                spans.append((start, end, pattern.kind))
        assert redact.secret_spans(text, honour_marker=honour) == sorted(spans)


def test_every_starts_literal_is_lowercase_and_hinted_patterns_keep_their_order() -> None:
    for pattern in DEFAULT_PATTERNS:
        assert all(s == s.lower() and s for s in pattern.starts), pattern.kind
    lowered = ("token secret aiza ghp_ " * 2).lower()
    chosen = redact.needed(DEFAULT_PATTERNS, lowered)
    assert chosen == [p for p in DEFAULT_PATTERNS if any(h in lowered for h in p.hints)]
    assert redact.needed(DEFAULT_PATTERNS, "nothing here") == []


def test_the_empty_text_still_compiles_its_allow_list() -> None:
    # The early return for "" comes after the allow-list is compiled: a bad committed
    # pattern is reported whatever the text.
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
