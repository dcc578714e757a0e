"""Markdown as the prune rules and quality checks read it: lines, headings, fenced blocks,
sections, field lines and dates (docs/lifecycle-rules.md, "Sections and dates")."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")

_CLOSING_HASHES_RE = re.compile(r"[ \t]+#+$")

_FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+\Z")

_ISO_DATE_RE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")

_FIELD_RE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?([A-Za-z][A-Za-z _-]{0,40}?)(?:\*\*|__)?[ \t]*:"
    r"(?:\*\*|__)?[ \t]*(.*)$"
)


def lines_of(text: str) -> list[str]:
    """The lines of ``text``, each with its ``\\n`` (the last may lack one); lossless."""
    return _LINE_RE.findall(text)


def count_lines(text: str) -> int:
    return len(lines_of(text))


def heading_of(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading line (``## Title ##`` -> (2, "Title"))."""
    match = _HEADING_RE.match(line.rstrip("\n"))
    if match is None:
        return None
    title = _CLOSING_HASHES_RE.sub("", match.group(2) or "").strip()
    if title.strip("#") == "":
        title = ""
    return len(match.group(1)), title


def fenced_lines(lines: Sequence[str]) -> Iterator[tuple[str, bool]]:
    """Each line with True when it is inside a fenced code block (the fences included)."""
    fence: str | None = None
    for line in lines:
        stripped = line.rstrip("\n")
        if fence is None:
            opened = _FENCE_OPEN_RE.match(stripped)
            if opened:
                fence = opened.group(1)
                yield line, True
                continue
            yield line, False
        else:
            yield line, True
            closing = stripped.strip()
            if closing.startswith(fence[0] * len(fence)) and set(closing) <= {fence[0]}:
                fence = None


def prose_lines(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks (without their ``\\n``)."""
    return [line.rstrip("\n") for line, fenced in fenced_lines(lines_of(text)) if not fenced]


@dataclass(frozen=True)
class Section:
    """A block of a document: ``level`` 0 is the preamble before the first heading."""

    level: int
    title: str
    text: str


def split_sections(body: str, level: int) -> list[Section]:
    """Cut ``body`` at each heading of ``level`` or higher outside code fences; the first
    block is the (maybe empty) preamble, and the blocks join back to ``body`` exactly."""
    blocks: list[Section] = []
    current: list[str] = []
    cur_level, cur_title = 0, ""
    for line, fenced in fenced_lines(lines_of(body)):
        head = None if fenced else heading_of(line)
        if head is not None and head[0] <= level:
            blocks.append(Section(cur_level, cur_title, "".join(current)))
            current = []
            cur_level, cur_title = head
        current.append(line)
    blocks.append(Section(cur_level, cur_title, "".join(current)))
    return blocks


def join_sections(blocks: Iterable[Section]) -> str:
    """Blocks back to text; a block that lacks a final newline gets one before the next."""
    out: list[str] = []
    for block in blocks:
        if not block.text:
            continue
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.append(block.text)
    return "".join(out)


def iso_dates(text: str) -> list[dt.date]:
    """Every valid ``YYYY-MM-DD`` in ``text`` (also the date part of ``2026-01-02T10:00Z``)."""
    found: list[dt.date] = []
    for match in _ISO_DATE_RE.finditer(text):
        try:
            found.append(dt.date(int(match[1]), int(match[2]), int(match[3])))
        except ValueError:
            continue
    return found


def field_of(line: str) -> tuple[str, str] | None:
    """``(label, value)`` of a ``**Label**: value`` line; the label lower-cased."""
    match = _FIELD_RE.match(line)
    if match is None:
        return None
    return " ".join(match.group(1).lower().replace("_", " ").split()), match.group(2).strip()


def _field_lines(section: Section) -> Iterator[tuple[str, str]]:
    lines = prose_lines(section.text)
    for line in lines[1:] if section.level else lines:
        if (parsed := field_of(line)) is not None:
            yield parsed


def section_date(section: Section) -> dt.date | None:
    """First ISO date of the heading, else of the first ``Date:`` field line."""
    dates = iso_dates(section.title)
    if dates:
        return dates[0]
    for label, value in _field_lines(section):
        if label == "date":
            found = iso_dates(value)
            if found:
                return found[0]
    return None


def chronological(sections: Sequence[Section]) -> list[int]:
    """Indices of ``sections`` oldest first; an undated one is as old as the dated one
    before it, ties keep document order (docs/lifecycle-rules.md)."""
    effective: list[dt.date] = []
    last = dt.date.min
    for section in sections:
        date = section_date(section)
        if date is not None:
            last = date
        effective.append(last)
    return sorted(range(len(sections)), key=lambda i: (effective[i], i))


def _oldest_beyond(
    blocks: Sequence[Section], wanted: Callable[[Section], bool], limit: int
) -> tuple[int, dict[int, Section]]:
    """How many blocks are ``wanted``, and ``{index: block}`` of those beyond the newest
    ``limit``, oldest first."""
    indices = [i for i, b in enumerate(blocks) if wanted(b)]
    if len(indices) <= limit:
        return len(indices), {}
    order = chronological([blocks[i] for i in indices])
    return len(indices), {indices[j]: blocks[indices[j]] for j in order[: len(indices) - limit]}


def _with_blank_line_after(text: str) -> str:
    stripped = text.rstrip()
    return stripped + "\n\n" if stripped else ""
