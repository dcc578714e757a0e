"""A user's regular expression, compiled and run under a time bound.

A pattern typed by a user or an agent (``gitmem search --regex``, MCP ``recall``
with ``mode: regex``) runs over text that teammates wrote. Python's ``re`` has no
time bound: ``^(a|aa)+$`` over forty ``a`` and a ``!`` backtracks for hours, and
nothing can interrupt it from the same thread. The ``regex`` module runs the same
syntax (its VERSION0 mode is ``re``'s) and takes a ``timeout``; it also avoids much
of the backtracking ``re`` falls into (``^(a+)+$`` over thirty ``a`` and a ``!``,
issue 11's example, returns at once).

Chosen by measurement against google-re2 (docs/security.md): over 20,000 lines of
prose both ran one pattern in about the same time (246 ms regex, 221 ms re2, 48 ms
re); RE2 is linear by construction, but refuses backreferences and lookaround,
which users of Python's syntax write, and its C++ library writes its own
"Error parsing" lines to stderr. The regex module's bound is checked as it
matches, so it can overshoot on a loaded machine (a 0.5 s bound ended after 2.1 s
with both cores busy); it still ends.

Compiling is not bounded by the timeout, so patterns are bounded in length and in
how far their counted repetitions (``{n}``) multiply before they are compiled.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import regex

from gitmem.base.errors import InvalidInputError, RegexTimeoutError

DEFAULT_TIMEOUT = 1.0
"""Seconds one pattern may spend on one text (one line, one body) before it is stopped."""
MAX_PATTERN_CHARS = 4096
MAX_REPEAT_PRODUCT = 100_000
"""``(a{1000}){1000}`` takes 1.6 s to compile and far more memory; counted repetitions
whose bounds multiply past this are refused before compiling."""

_COUNTED_RE = re.compile(r"(?<!\\)\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


class PatternError(InvalidInputError):
    """A user's pattern that does not compile or is over the bounds; ``reason`` says why."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class SafePattern:
    """A compiled user pattern whose every run stops after ``timeout`` seconds."""

    pattern: str
    compiled: Any
    timeout: float
    what: str

    @property
    def groups(self) -> int:
        return int(self.compiled.groups)

    @property
    def groupindex(self) -> Mapping[str, int]:
        index: Mapping[str, int] = self.compiled.groupindex
        return index

    def _timed_out(self) -> RegexTimeoutError:
        return RegexTimeoutError(
            f"{self.what} {_clip(self.pattern)!r} took longer than {self.timeout:g} s on one "
            "text and was stopped",
            hint="simplify the pattern: nested repetition such as (a+)+ or (a|aa)+ can take "
            "exponential time; a plain search (without --regex) never does",
        )

    def search(self, text: str) -> Any:
        """The first match in ``text`` or None; RegexTimeoutError past the bound."""
        try:
            return self.compiled.search(text, timeout=self.timeout)
        except TimeoutError:
            raise self._timed_out() from None

    def finditer(self, text: str) -> Iterator[Any]:
        """Every match in ``text``; the bound covers the whole iteration."""
        try:
            matches = list(self.compiled.finditer(text, timeout=self.timeout))
        except TimeoutError:
            raise self._timed_out() from None
        return iter(matches)

    def spans(self, text: str) -> tuple[tuple[int, int], ...]:
        """The (start, end) of every non-empty match in ``text``."""
        return tuple(m.span() for m in self.finditer(text) if m.end() > m.start())

    def sub(self, replacement: str, text: str) -> str:
        """``text`` with every match replaced by ``replacement`` (taken literally)."""
        try:
            result: str = self.compiled.sub(lambda _m: replacement, text, timeout=self.timeout)
        except TimeoutError:
            raise self._timed_out() from None
        return result


def compile(  # the name mirrors re.compile on purpose
    pattern: str,
    *,
    ignore_case: bool = False,
    literal: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    what: str = "regex",
) -> SafePattern:
    """Compile a user's pattern (or, with ``literal``, a substring to find) for bounded runs.

    :class:`PatternError` (an InvalidInputError) names the pattern when it does not
    compile or is over the bounds on its size; the runs raise
    :class:`RegexTimeoutError` (exit code 4).
    """
    if not isinstance(pattern, str):
        raise InvalidInputError(f"{what} must be text, not {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        reason = f"it is {len(pattern)} characters long; the bound is {MAX_PATTERN_CHARS}"
        raise PatternError(f"{what} is too long: {reason}", reason=reason)
    source = regex.escape(pattern) if literal else pattern
    if not literal:
        product = 1
        for low, high in _COUNTED_RE.findall(pattern):
            product *= max(int(low), int(high or 0), 1)
            if product > MAX_REPEAT_PRODUCT:
                reason = f"its counted repetitions ({{n}}) multiply past {MAX_REPEAT_PRODUCT:,}"
                raise PatternError(
                    f"{what} {_clip(pattern)!r} repeats too much: {reason}", reason=reason
                )
    flags = regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0)
    try:
        compiled = regex.compile(source, flags)
    except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
        raise PatternError(
            f"{what} {_clip(pattern)!r} does not compile: {exc}", reason=str(exc)
        ) from None
    return SafePattern(pattern, compiled, timeout, what)
