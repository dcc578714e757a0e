"""User patterns run under a time bound (reproduction 4 of issue 11), through the library,
the command line (a subprocess: a hang fails the test instead of stalling it) and the
committed secrets policy. No timings are asserted: a pattern that never ends either
ends with a clean error or the subprocess bound fails the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from storetools import plant

from gitmem import InvalidInputError, InvalidMemoryError, RegexTimeoutError, Store
from gitmem.base.errors import EXIT_CODES
from gitmem.format import saferegex
from gitmem.format.secrets import policy_from_config, scan_text

# Exponential for a backtracking matcher: every split of the a's into "a" and "aa"
# is tried before the "!" fails the match (about 10^12 ways for 60 a's).
CATASTROPHIC = r"^(a|aa)+$"
HOSTILE_BODY = "a" * 60 + "!"
BOUND = 120.0


def test_a_catastrophic_pattern_ends_with_a_clear_error() -> None:
    pattern = saferegex.compile(CATASTROPHIC, timeout=0.2)
    with pytest.raises(RegexTimeoutError, match=r"took longer than 0.2 s") as info:
        pattern.search(HOSTILE_BODY)
    assert info.value.exit_code == EXIT_CODES["invalid-input"] == 4
    assert "(a+)+" in info.value.hint
    with pytest.raises(RegexTimeoutError):
        list(pattern.finditer(HOSTILE_BODY))
    with pytest.raises(RegexTimeoutError):
        pattern.sub("x", HOSTILE_BODY)


def test_the_issue_pattern_needs_no_time_out_at_all() -> None:
    # ^(a+)+$ over thirty a's and a "!" is the issue's example: re backtracks for
    # minutes, the regex module answers at once.
    assert saferegex.compile(r"^(a+)+$").search("a" * 30 + "!") is None


@pytest.mark.parametrize(
    ("pattern", "text", "spans"),
    [
        (r"fix\w+", "use fixtures, fixed", ((4, 12), (14, 19))),
        (r"(?<=a)b", "ab cb", ((1, 2),)),  # lookbehind: what RE2 would refuse
        (r"(\w)\1", "aa bc dd", ((0, 2), (6, 8))),  # a backreference
        (r"x*", "abc", ()),  # empty matches are not spans
    ],
)
def test_python_syntax_works_as_re_does(pattern: str, text: str, spans: tuple[object, ...]) -> None:
    assert saferegex.compile(pattern).spans(text) == spans


def test_literal_and_case() -> None:
    pattern = saferegex.compile("a.b(", literal=True, ignore_case=True)
    assert pattern.spans("A.B( axb(") == ((0, 4),)


@pytest.mark.parametrize(
    ("pattern", "complaint"),
    [
        ("(unclosed", "does not compile"),
        ("x" * (saferegex.MAX_PATTERN_CHARS + 1), "too long"),
        (r"(a{1000}){1000}", "multiply past"),
        (r"((a{50}){50}){50}", "multiply past"),
    ],
)
def test_patterns_over_the_bounds_are_refused_before_compiling(
    pattern: str, complaint: str
) -> None:
    with pytest.raises(InvalidInputError, match=complaint):
        saferegex.compile(pattern)


def test_store_search_regex_is_bounded(store: Store) -> None:
    store.create(HOSTILE_BODY, title="hostile")
    with pytest.raises(RegexTimeoutError):
        store.search(CATASTROPHIC, mode="regex")
    assert [m.id for m in store.search("a+!", mode="regex")] != []


def test_cli_search_regex_ends_with_exit_4(store: Store, tmp_path: Path) -> None:
    store.create(HOSTILE_BODY, title="hostile")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gitmem", "--store", str(store.path), "search", "--regex",
             CATASTROPHIC],
            capture_output=True, text=True, timeout=BOUND, check=False, cwd=tmp_path,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("gitmem search --regex never ended")
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith("gitmem: error: regex '^(a|aa)+$' took longer than")
    assert "Traceback" not in done.stderr
    issue = subprocess.run(
        [sys.executable, "-m", "gitmem", "--store", str(store.path), "search", "--regex",
         r"^(a+)+$"],
        capture_output=True, text=True, timeout=BOUND, check=False, cwd=tmp_path,
    )
    assert issue.returncode == 0, issue.stderr


def test_a_committed_secrets_pattern_cannot_hang_writes(store: Store) -> None:
    """A teammate's gitmem.yaml pattern runs over every write: bounded too."""
    # Not anchored at the start: the scan may run it over the whole file, not the body alone.
    unanchored = CATASTROPHIC.removeprefix("^")
    policy = policy_from_config(
        {"secrets": {"patterns": [{"kind": "slow", "regex": unanchored}]}}
    )
    with pytest.raises(RegexTimeoutError):
        scan_text(HOSTILE_BODY, policy.patterns)
    plant(store, "gitmem.yaml",
          "format: 1\nscope: repo\nsecrets:\n  patterns:\n"
          f"    - kind: slow\n      regex: '{unanchored}'\n")
    with pytest.raises(RegexTimeoutError):
        # An id of our choosing: the pattern, unanchored, also runs over the id, and a random
        # uuid ending in "a" (1 in 16) is a quick match there, reported as a secret instead.
        store.create(HOSTILE_BODY, id="mem_00000000-0000-4000-8000-000000000000")
    with pytest.raises(InvalidMemoryError, match=r"secrets.allow\[0\] is not a valid"):
        policy_from_config({"secrets": {"allow": ["(a{1000}){1000}"]}})
