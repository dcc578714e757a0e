"""A fast emitter for the front-matter values gitmem writes itself.

PyYAML's pure-Python dumper costs about a millisecond per key, which would be
most of a write's cost. Nearly every value the store writes is a short string,
an integer, a timestamp, a list of tags or a list of ``{id, relationship}``
mappings; those are emitted here directly. Anything else (or any string that
plain/double-quoted emission could misrepresent) returns None and the caller
falls back to ``yaml.dump``. The tests check that everything emitted here
parses back to the same value.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from gitmem.base.clock import format_timestamp

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# Plain scalars: start with a letter, digit or one of "_./", no character that
# means something to YAML (":", "#", quotes, flow indicators...) anywhere.
_PLAIN_RE = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9 _./@+()=~^-]*")
_PLAIN_FLOW_RE = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9 _./@+()=~^-]*")
_STR_TAG = "tag:yaml.org,2002:str"
_NOT_STR_WORDS = frozenset(
    word
    for base in ("yes", "no", "true", "false", "on", "off", "null")
    for word in (base, base.capitalize(), base.upper())
)
"""The plain scalars starting with a letter that YAML 1.1 (PyYAML's resolver) reads as
a bool or null: its only implicit types keyed on a letter. Numbers, dates, ``.inf``,
``~``, ``<<`` and ``=`` start with something else (tests/test_yamlfast.py checks this
against PyYAML's own resolver table)."""


def _resolves_to_str(text: str) -> bool:
    """Whether a plain scalar reads back as a string (not a bool, number, null, date...).

    Text starting with a letter, ``_`` or ``/`` (ids, titles, tags, keys: nearly all
    of what a write emits) is answered here; anything else asks PyYAML's resolver, whose
    import (~10 ms) a ``gitmem add`` would otherwise pay for a rule this small.
    """
    if text and (text[0].isascii() and (text[0].isalpha() or text[0] in "_/")):
        return text not in _NOT_STR_WORDS
    import yaml.resolver

    tag: str = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return tag == _STR_TAG


def _is_plain(text: str, pattern: re.Pattern[str] = _PLAIN_RE) -> bool:
    """Whether ``text`` is written, and so read, as a plain scalar that is a string: the one
    rule the emitter writes by and :func:`read_entries` reads by."""
    return bool(pattern.fullmatch(text)) and text == text.strip() and _resolves_to_str(text)


def _printable(text: str) -> bool:
    """Characters YAML accepts inside a double-quoted scalar once JSON has escaped C0 controls."""
    for ch in text:
        code = ord(ch)
        if code < 0x20:
            continue  # json.dumps escapes these
        if code == 0x7F or 0x80 <= code < 0xA0 or code in (0x2028, 0x2029, 0xFEFF):
            return False
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            return False
    return True


def scalar(value: Any, *, flow: bool = False) -> str | None:
    """One scalar as YAML text, or None when this emitter does not handle it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        # A naive time is written naive by the codec; only aware ones are ours to spell.
        return format_timestamp(value) if value.tzinfo is not None else None
    if isinstance(value, str):
        pattern = _PLAIN_FLOW_RE if flow else _PLAIN_RE
        if _is_plain(value, pattern):
            return value
        if _printable(value):
            if value and all(ord(c) >= 0x20 for c in value) and value == value.strip(" "):
                # Single quotes, as PyYAML would choose: no escapes but a doubled quote.
                return "'" + value.replace("'", "''") + "'"
            return json.dumps(value, ensure_ascii=False)
    return None


def dump_entry(key: str, value: Any, *, flow: bool | None = None) -> str | None:
    """``key: value`` as YAML text ending in a newline, or None to fall back to yaml.dump.

    Lists of scalars are written in flow style for ``tags`` (or ``flow=True``) and
    in block style otherwise, as the codec's rule says.
    """
    if not _KEY_RE.fullmatch(key) or not _resolves_to_str(key):
        return None
    if isinstance(value, list):
        if not value:
            return f"{key}: []\n"
        if all(not isinstance(v, dict | list) for v in value):
            in_flow = flow if flow is not None else key == "tags"
            items = [scalar(v, flow=in_flow) for v in value]
            if any(i is None for i in items):
                return None
            if in_flow:
                return f"{key}: [{', '.join(i for i in items if i is not None)}]\n"
            return f"{key}:\n" + "".join(f"- {i}\n" for i in items)
        if key == "tags" or flow:
            return None
        lines = [f"{key}:\n"]
        for item in value:
            if not isinstance(item, dict) or not item:
                return None
            first = True
            for k, v in item.items():
                if not isinstance(k, str) or not _KEY_RE.fullmatch(k):
                    return None
                text = scalar(v)
                if text is None:
                    return None
                lines.append(f"{'- ' if first else '  '}{k}: {text}\n")
                first = False
        return "".join(lines)
    if isinstance(value, dict):
        return None
    text = scalar(value)
    return None if text is None else f"{key}: {text}\n"


# -- the reader of the same lines --------------------------------------------------------------

_ENTRY_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*): (.+)")
_INT_RE = re.compile(r"0|[1-9][0-9]{0,17}")
_TIMESTAMP_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
_READ_MAX_CHARS = 64 * 1024
"""Longer front-matter goes to PyYAML (which bounds what it reads; see yamlbounds)."""

Segment = tuple[str, str, tuple[int, int] | None, bool]
"""(lead, text, the value's columns on its line, flow): what gitmem.format.yamlio.segments
gives for one top-level key."""


def read_entries(raw: str) -> tuple[dict[str, Any], dict[str, Segment]] | None:
    """The mapping that ``raw`` (front-matter text, each line ending in a newline) holds,
    and its per-key segments, when every line is one ``key: value`` entry of the kinds
    :func:`dump_entry` writes on one line: a plain, single-quoted or double-quoted (without
    escapes) string, a decimal integer, a UTC timestamp, a flow list of plain strings. None for
    anything else (comments, blank lines, block lists, other spellings, a repeated key):
    the caller parses it with PyYAML, which reads these lines the same way
    (tests/test_yamlfast.py compares the two on generated text). An index build decodes
    every memory, and PyYAML was most of that.
    """
    if not raw.endswith("\n") or "\r" in raw or len(raw) > _READ_MAX_CHARS:
        return None
    value: dict[str, Any] = {}
    pieces: dict[str, Segment] = {}
    for line in raw[:-1].split("\n"):
        known = _RECENT_LINES.get(line)
        if known is None:
            entry = read_line(line)
            if entry is None:
                return None
            # A short line of a scalar: nothing a caller could change in place, and the
            # lines kept stay small (a line may be 64 KiB long).
            if not entry[2][3] and len(line) <= _RECENT_LINE_CHARS:
                if len(_RECENT_LINES) >= _RECENT_MAX:
                    _RECENT_LINES.clear()
                _RECENT_LINES[line] = entry
        else:
            entry = known
        key, read, piece = entry
        if key in value:
            return None
        value[key] = read
        pieces[key] = piece
    return value, pieces


_RECENT_LINES: dict[str, tuple[str, Any, Segment]] = {}
"""What :func:`read_line` made of lines of scalars read lately: many lines are the same in
most memories (``scope: repo``, ``version: 1``, one second's timestamps), and an index
build reads every memory's. A line's entry depends on its text alone."""
_RECENT_MAX = 4096
_RECENT_LINE_CHARS = 200


def read_line(line: str) -> tuple[str, Any, Segment] | None:
    """One front-matter line as :func:`read_entries` reads it: its key, value and segment,
    or None when it is not one ``key: value`` entry of the kinds it reads."""
    match = _ENTRY_RE.fullmatch(line)
    if match is None:
        return None
    key, text = match.groups()
    if not _resolves_to_str(key):
        return None
    flow = text.startswith("[")
    read = _read_flow(text) if flow else _read_scalar(text)
    if read is None:
        return None
    return key, read[0], ("", line + "\n", (len(key) + 2, len(line)), flow)


def _read_scalar(text: str) -> tuple[Any] | None:
    if text.startswith('"'):
        inner = text[1:-1]
        if len(text) < 2 or not text.endswith('"') or '"' in inner or "\\" in inner:
            return None
        return (inner,) if inner.isprintable() else None
    if text.startswith("'"):
        inner = text[1:-1]
        if len(text) < 2 or not text.endswith("'") or "'" in inner.replace("''", ""):
            return None
        # Single quotes escape nothing but a doubled quote.
        return (inner.replace("''", "'"),) if inner.isprintable() else None
    if _INT_RE.fullmatch(text):
        return (int(text),)
    stamp = _TIMESTAMP_RE.fullmatch(text)
    if stamp is not None:
        try:
            year, month, day, hour, minute, second = (int(part) for part in stamp.groups())
            return (dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC),)
        except ValueError:
            return None  # an impossible date: PyYAML says what is wrong with it
    return _read_plain(text)


def _read_plain(text: str) -> tuple[str] | None:
    return (text,) if _is_plain(text) else None


def _read_flow(text: str) -> tuple[list[str]] | None:
    if not text.endswith("]"):
        return None
    inner = text[1:-1]
    if not inner:
        return ([],)
    items: list[str] = []
    for item in inner.split(", "):
        read = _read_plain(item)
        if read is None:
            return None
        items.append(read[0])
    return (items,)
