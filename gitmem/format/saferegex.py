"""A user's regular expression run under a time bound by the ``regex`` module (``re``
cannot be interrupted; docs/security.md says why not RE2). Compiling is not bounded by
the timeout, so a pattern is bounded in length and in its size with every repetition
written out, counted on the regex module's own parse of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import regex
from regex import _regex_core

from gitmem.base.errors import InvalidInputError, RegexTimeoutError
from gitmem.format.yamlbounds import clip

_core: Any = _regex_core
"""The regex module's own parser (private, untyped): the tree :func:`size` counts is the one
``regex.compile`` compiles; tests/test_saferegex.py holds the two together."""

DEFAULT_TIMEOUT = 1.0
"""Seconds one pattern may spend on one text (one line, one body) before it is stopped."""
MAX_PATTERN_CHARS = 4096
MAX_SIZE = 100_000
"""Nodes of the parse tree with repetitions written out (:func:`size`); past it a pattern is
refused before compiling (python -m bench.saferegex_bound measures the costliest accepted)."""


class PatternError(InvalidInputError):
    """A user's pattern that does not compile or is over the bounds; ``reason`` says why."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class SafePattern:
    """A compiled user pattern whose every run stops after ``timeout`` seconds."""

    pattern: str
    compiled: Any
    timeout: float
    what: str

    def _timed_out(self) -> RegexTimeoutError:
        return RegexTimeoutError(
            f"{self.what} {clip(self.pattern)!r} took longer than {self.timeout:g} s on one "
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


def compile(  # the name mirrors re.compile on purpose
    pattern: str,
    *,
    ignore_case: bool = False,
    literal: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    what: str = "regex",
) -> SafePattern:
    """Compile a user's pattern (or, with ``literal``, a substring to find) for bounded runs:
    :class:`PatternError` when it does not compile or is over the bounds; the runs raise
    :class:`RegexTimeoutError`."""
    if not isinstance(pattern, str):
        raise InvalidInputError(f"{what} must be text, not {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        reason = f"it is {len(pattern)} characters long; the bound is {MAX_PATTERN_CHARS}"
        raise PatternError(f"{what} is too long: {reason}", reason=reason)
    source = regex.escape(pattern) if literal else pattern
    flags = regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0)
    try:
        items = 0 if literal else size(pattern, flags)
        compiled = None if items > MAX_SIZE else regex.compile(source, flags)
    except (regex.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise PatternError(
            f"{what} {clip(pattern)!r} does not compile: {exc}", reason=str(exc)
        ) from None
    if compiled is None:
        reason = f"written out, its repetitions come to more than {MAX_SIZE:,} items"
        raise PatternError(f"{what} {clip(pattern)!r} repeats too much: {reason}", reason=reason)
    return SafePattern(pattern, compiled, timeout, what)


def _parse(pattern: str, flags: int) -> Any:
    """The regex module's parse tree of ``pattern``, built as ``regex.compile`` builds it
    (its ``_compile``: a global flag set inline, ``a(?i)b``, parses again with it)."""
    while True:
        source = _core.Source(pattern)
        info = _core.Info(flags, source.char_type, {})
        info.guess_encoding = regex.UNICODE
        source.ignore_space = bool(info.flags & regex.VERBOSE)
        try:
            return _core._parse_pattern(source, info)
        except _core._UnscopedFlagSet:
            flags = info.global_flags


def size(pattern: str, flags: int = regex.VERSION0) -> int:
    """How many nodes ``pattern`` compiles to with every repetition written out (a literal
    string one per character, a repeat its body times its largest count), up to
    ``MAX_SIZE + 1``; ``regex.error`` for a pattern that does not parse."""
    done: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(_parse(pattern, flags), False)]
    root = id(stack[0][0])
    while stack:
        node, expanded = stack.pop()
        children = [
            child
            for value in vars(node).values()
            for child in (value if isinstance(value, list | tuple) else (value,))
            if isinstance(child, _core.RegexBase)
        ]
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in children)
            continue
        own = len(node.characters) if isinstance(node, _core.String) else 1
        total = own + sum(done[id(child)] for child in children)
        if isinstance(node, _core.GreedyRepeat):  # lazy and possessive repeats are ones too
            most = node.max_count if node.max_count is not None else node.min_count
            total *= max(most, 1)
        done[id(node)] = min(total, MAX_SIZE + 1)
    return done[root]
