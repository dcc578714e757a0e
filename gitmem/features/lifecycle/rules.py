"""Prune rules for the layered Forge documents, a registry keyed by file type.

A rule is a PURE function over markdown text: no git, no store, no clock of its own.
The caller (``gitmem/features/layered.py``) reads the document body (without front-matter),
counts the writes from git history, takes ``today`` from the store's injected clock
and calls :func:`apply_rule`; it then writes what the result says in one commit.

    result = apply_rule("review_history", body, today=date, write_count=n,
                        archive_text=archive_body_or_None, config=store_config.raw)
    result.body            # the new body text (== body when nothing applies)
    result.archive_text    # full new body of the archive file, or None: write nothing
    result.actions         # (PruneAction(action, reason, section), ...)
    rule_for("review_history").archive   # "review_history_archive": the archive's file type

Built-in rules (defaults; every option is configurable in the committed ``gitmem.yaml``
under ``lifecycle.prune.<file_type>.<option>``):

- ``review_history`` (``max_reviews: 10``): more than ``max_reviews`` ``## Review``
  sections -> the oldest move to ``review_history_archive.md`` (same folder).
- ``known_issues`` (``remove_resolved_after_days: 30``, ``verify_status_after_days: 90``):
  ``###`` issues Resolved 30+ days ago are removed; no status update for 90+ days ->
  ``[VERIFY STATUS]`` added once.
- ``test_results_history`` (``max_sessions: 15``): older ``## Session`` / ``## Test
  Session`` sections are folded into one ``## Historical Summary`` at the bottom.
- ``common_patterns`` (``verify_every_writes: 5``): every 5th write a
  ``[VERIFY PATTERNS]`` marker line is added (once per flagged write).

A project adds or replaces a rule without editing gitmem, never by naming code in the
committed ``gitmem.yaml`` (whoever can push to the store would run code on every clone):

- in code: :func:`register_rule`;
- installed: an entry point in the group ``gitmem.rules`` (name = the file type,
  value = ``module:callable``), in the project's or a plugin's package metadata;
- locally: the user's own configuration file (:mod:`gitmem.git.localconfig`)::

      rules:
        decisions: "myproject.memory_rules:prune_decisions"   # module:callable

The committed ``gitmem.yaml`` may only choose among rules already there::

    lifecycle:
      rules:
        common_patterns: null         # disable a rule
        decisions: known_issues       # use the rule of another file type

A ``module:callable`` there is refused with a warning (naming the local way to opt in)
and never imported. The named object is a :class:`PruneRule` or any callable
``(RuleContext) -> RuleResult``.
Size limits (:func:`size_warnings`) are warnings, never failures. Exact definitions
(dates, status update dates, accepted test-count forms) are in docs/lifecycle-rules.md.
"""

from __future__ import annotations

import datetime as dt
import importlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gitmem.base.errors import InvalidInputError

log = logging.getLogger("gitmem")

Action = Literal["archived", "removed", "flagged"]
ACTIONS: tuple[Action, ...] = ("archived", "removed", "flagged")


class LifecycleConfigError(InvalidInputError):
    """A lifecycle section of gitmem.yaml (or a registered rule) that gitmem cannot use."""

    default_hint = "fix the lifecycle section of gitmem.yaml (see docs/lifecycle-rules.md)"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PruneAction:
    """One thing a rule did: ``section`` is the heading text (no ``#``), None = the document."""

    action: Action
    reason: str
    section: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise InvalidInputError(
                f"prune action {self.action!r} is not one of {', '.join(ACTIONS)}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason, "section": self.section}


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule may look at. ``write_count`` counts the writes of the file so far,
    the one being made included (0 when unknown); ``archive_text`` is the current body of
    the rule's archive file (None when it does not exist or the rule has no archive)."""

    file_type: str
    body: str
    today: dt.date
    write_count: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    archive_text: str | None = None
    archive_name: str | None = None


@dataclass(frozen=True)
class RuleResult:
    """What to write: the new body, the archive's full new body (None: leave it alone)."""

    body: str
    archive_text: str | None = None
    actions: tuple[PruneAction, ...] = ()

    def __post_init__(self) -> None:
        # Custom rules may hand over a list; keep the result immutable and hashable.
        object.__setattr__(self, "actions", tuple(self.actions))

    def to_dict(self) -> dict[str, Any]:
        return {
            "body": self.body,
            "archiveText": self.archive_text,
            "actions": [a.to_dict() for a in self.actions],
        }


RuleFunction = Callable[[RuleContext], RuleResult]


@dataclass(frozen=True)
class PruneRule:
    """A rule with its option defaults and, when it archives, the archive's file type
    (a file ``<archive>.md`` in the same folder as the document)."""

    apply: RuleFunction
    defaults: Mapping[str, Any] = field(default_factory=dict)
    archive: str | None = None
    description: str = ""

    def __call__(self, ctx: RuleContext) -> RuleResult:
        return self.apply(ctx)


# --------------------------------------------------------------------------- markdown


_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES_RE = re.compile(r"[ \t]+#+$")
_FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_ISO_DATE_RE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# "**Status**: x", "**Status:** x", "Status: x", "- **Status**: x", "__Status__: x"
_FIELD_RE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?([A-Za-z][A-Za-z _-]{0,40}?)(?:\*\*|__)?[ \t]*:"
    r"(?:\*\*|__)?[ \t]*(.*)$"
)


def lines_of(text: str) -> list[str]:
    """The lines of ``text``, each with its ``\\n`` (the last may lack one); lossless."""
    return _LINE_RE.findall(text)


def count_lines(text: str) -> int:
    """Lines as an editor counts them: a final line without ``\\n`` counts, "" has none."""
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

    @property
    def heading_line(self) -> str:
        return "" if self.level == 0 else lines_of(self.text)[0]


def split_sections(body: str, level: int) -> list[Section]:
    """Cut ``body`` at every heading of ``level`` or higher (fewer ``#``) outside code
    fences. The first block is the preamble (level 0, maybe empty); joining every
    block's ``text`` gives back ``body`` exactly."""
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


def _field_lines(section: Section) -> Iterator[tuple[str, str, str]]:
    """``(label, value, line)`` of each field line in the section's body (heading excluded)."""
    lines = prose_lines(section.text)
    for line in lines[1:] if section.level else lines:
        parsed = field_of(line)
        if parsed is not None:
            yield parsed[0], parsed[1], line


def section_date(section: Section) -> dt.date | None:
    """First ISO date of the heading, else of the first ``Date:`` field line."""
    dates = iso_dates(section.title)
    if dates:
        return dates[0]
    for label, value, _ in _field_lines(section):
        if label == "date":
            found = iso_dates(value)
            if found:
                return found[0]
    return None


def chronological(sections: Sequence[Section]) -> list[int]:
    """Indices of ``sections`` oldest first. A section without a date counts as old as the
    dated section before it (older than all when none precedes it); ties keep document
    order, so undated documents are taken as written oldest first (appended)."""
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
    """How many blocks are ``wanted``, and those beyond the newest ``limit`` of them:
    ``{block index: block}`` in chronological order, oldest first (empty: none)."""
    indices = [i for i, b in enumerate(blocks) if wanted(b)]
    if len(indices) <= limit:
        return len(indices), {}
    order = chronological([blocks[i] for i in indices])
    return len(indices), {indices[j]: blocks[indices[j]] for j in order[: len(indices) - limit]}


def _with_blank_line_after(text: str) -> str:
    """``text`` ending in exactly one blank line (for a block followed by a heading)."""
    stripped = text.rstrip()
    return stripped + "\n\n" if stripped else ""


# --------------------------------------------------------------------------- options


def _int_option(ctx: RuleContext, name: str, default: int, minimum: int) -> int:
    value = ctx.options.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise LifecycleConfigError(
            f"gitmem.yaml lifecycle.prune.{ctx.file_type}.{name} must be a whole number "
            f">= {minimum}, not {value!r}"
        )
    return value


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


# --------------------------------------------------------------------------- review_history

DEFAULT_MAX_REVIEWS = 10
REVIEW_ARCHIVE = "review_history_archive"
_REVIEW_TITLE_RE = re.compile(r"^review\b", re.I)
ARCHIVE_HEADER = (
    "# Review History Archive\n\n"
    "Older `## Review` sections moved here from review_history.md by gitmem, oldest first.\n\n"
)


def _is_review(section: Section) -> bool:
    return section.level == 2 and bool(_REVIEW_TITLE_RE.match(section.title))


def prune_review_history(ctx: RuleContext) -> RuleResult:
    """More than ``max_reviews`` ``## Review`` sections: the oldest move to the archive.

    The archive keeps its preamble (a default header when new or empty) and then every
    level-2 section in date order, oldest first; a section whose text is already in the
    archive is not added twice, so moving is idempotent.
    """
    limit = _int_option(ctx, "max_reviews", DEFAULT_MAX_REVIEWS, 1)
    blocks = split_sections(ctx.body, 2)
    total, moving = _oldest_beyond(blocks, _is_review, limit)
    if not moving:
        return RuleResult(ctx.body)
    moved = list(moving.values())
    body = join_sections(b for i, b in enumerate(blocks) if i not in moving)
    archive_name = f"{ctx.archive_name or REVIEW_ARCHIVE}.md"
    reason = f"{_plural(total, 'review')}, more than {limit}: the oldest moved to {archive_name}"
    actions = tuple(PruneAction("archived", reason, b.title) for b in moved)
    return RuleResult(body, _archive_with(ctx.archive_text, moved), actions)


def _archive_with(archive_text: str | None, moved: Sequence[Section]) -> str:
    existing = split_sections(archive_text or "", 2)
    # The header is everything before the first ## section (a # title included).
    first = next((i for i, s in enumerate(existing) if s.level == 2), len(existing))
    header = join_sections(existing[:first])
    preamble = header if header.strip() else ARCHIVE_HEADER
    sections = [s for s in existing[first:] if s.text.strip()]
    known = {s.text.strip() for s in sections}
    for section in moved:
        if section.text.strip() not in known:
            known.add(section.text.strip())
            sections.append(section)
    ordered = [sections[i] for i in chronological(sections)]
    parts = [_with_blank_line_after(preamble)] + [_with_blank_line_after(s.text) for s in ordered]
    return "".join(parts).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- known_issues

DEFAULT_REMOVE_RESOLVED_AFTER_DAYS = 30
DEFAULT_VERIFY_STATUS_AFTER_DAYS = 90
VERIFY_STATUS = "[VERIFY STATUS]"
_UPDATED_LABELS = frozenset({"updated", "last updated", "status updated", "updated on"})
_RESOLVED_LABELS = frozenset({"resolved", "resolved on", "fixed", "fixed on"})
_WRITTEN_LABELS = frozenset(
    {"date", "reported", "reported on", "created", "opened", "found", "discovered"}
)


def _status_words(value: str) -> list[str]:
    return re.sub(r"[^a-z0-9 -]+", " ", value.lower()).split()


@dataclass(frozen=True)
class IssueStatus:
    """What the known_issues rule reads of one ``###`` section (see docs/lifecycle-rules.md)."""

    status: str | None
    resolved: bool
    in_progress: bool
    resolved_on: dt.date | None
    status_updated: dt.date | None


def issue_status(section: Section) -> IssueStatus:
    """The status of one issue section.

    - status: the value of its first ``Status:`` field line;
    - resolved / in progress: the status value's first word is ``resolved`` / its first
      words are ``in progress`` (or ``in-progress``), ignoring case, emoji and markup;
    - resolved_on: the latest date on the status line, else on a ``Resolved:``/``Fixed:`` line;
    - status_updated: the latest date on the status line or an ``Updated:`` /
      ``Last Updated:`` / ``Status Updated:`` line; else the first date of the heading or of
      a ``Date:`` / ``Reported:`` / ``Created:`` / ``Opened:`` / ``Found:`` line (when the
      issue was written, its last known status); else None (age unknown: never flagged).
    """
    status: str | None = None
    status_dates: list[dt.date] = []
    updated: list[dt.date] = []
    resolved_dates: list[dt.date] = []
    written: list[dt.date] = []
    for label, value, _ in _field_lines(section):
        if label == "status" and status is None:
            status = value
            status_dates = iso_dates(value)
        elif label in _UPDATED_LABELS:
            updated += iso_dates(value)
        elif label in _RESOLVED_LABELS:
            resolved_dates += iso_dates(value)
        elif label in _WRITTEN_LABELS and not written:
            written = iso_dates(value)[:1]
    words = _status_words(status or "")
    resolved = bool(words) and words[0] == "resolved"
    in_progress = words[:2] == ["in", "progress"] or words[:1] == ["in-progress"]
    resolved_on = max(status_dates or resolved_dates, default=None) if resolved else None
    last_update = max(status_dates + updated, default=None)
    if last_update is None:
        first_written = iso_dates(section.title)[:1] or written
        last_update = first_written[0] if first_written else None
    return IssueStatus(status, resolved, in_progress, resolved_on, last_update)


def _mark_verify(section: Section) -> Section:
    """The section with `` [VERIFY STATUS]`` at the end of its status line (else heading)."""
    lines = lines_of(section.text)
    target = 0
    for i, (line, fenced) in enumerate(fenced_lines(lines)):
        if i == 0 or fenced:
            continue
        parsed = field_of(line.rstrip("\n"))
        if parsed is not None and parsed[0] == "status":
            target = i
            break
    line = lines[target]
    ending = "\n" if line.endswith("\n") else ""
    lines[target] = f"{line.rstrip()} {VERIFY_STATUS}{ending}"
    return Section(section.level, section.title, "".join(lines))


def prune_known_issues(ctx: RuleContext) -> RuleResult:
    """``###`` issues: Resolved 30+ days ago -> removed; In Progress kept whatever its age;
    no status update for 90+ days -> ``[VERIFY STATUS]`` added once."""
    remove_after = _int_option(
        ctx, "remove_resolved_after_days", DEFAULT_REMOVE_RESOLVED_AFTER_DAYS, 0
    )
    verify_after = _int_option(ctx, "verify_status_after_days", DEFAULT_VERIFY_STATUS_AFTER_DAYS, 0)
    blocks = split_sections(ctx.body, 3)
    kept: list[Section] = []
    actions: list[PruneAction] = []
    for block in blocks:
        if block.level != 3:
            kept.append(block)
            continue
        info = issue_status(block)
        if info.resolved and not info.in_progress and info.resolved_on is not None:
            age = (ctx.today - info.resolved_on).days
            if age >= remove_after:
                actions.append(
                    PruneAction(
                        "removed",
                        f"resolved on {info.resolved_on.isoformat()}, {_plural(age, 'day')} "
                        f"ago ({remove_after}+ days)",
                        block.title,
                    )
                )
                continue
        if info.status_updated is not None and VERIFY_STATUS not in block.text:
            idle = (ctx.today - info.status_updated).days
            if idle >= verify_after:
                block = _mark_verify(block)
                actions.append(
                    PruneAction(
                        "flagged",
                        f"no status update for {_plural(idle, 'day')} (since "
                        f"{info.status_updated.isoformat()}; {verify_after}+ days): "
                        f"{VERIFY_STATUS} added",
                        block.title,
                    )
                )
        kept.append(block)
    if not actions:
        return RuleResult(ctx.body)
    return RuleResult(join_sections(kept), None, tuple(actions))


# --------------------------------------------------------------------------- test_results_history

DEFAULT_MAX_SESSIONS = 15
SUMMARY_TITLE = "Historical Summary"
_SESSION_TITLE_RE = re.compile(r"^(?:test[ \t]+)?session\b", re.I)
_SUMMARY_TITLE_RE = re.compile(r"^historical summary\b", re.I)
# "Passed: 12", "**Passed**: 12", "**Failed:** 3", "Tests passed: 12", "failed = 0"
_LABEL_COUNT_RE = re.compile(
    r"\b(passed|failed)\b[ \t]*(?:\*\*|__)?[ \t]*[:=][ \t]*(?:\*\*|__)?[ \t]*(\d+)", re.I
)
# "12 passed", "3 failed", "12 tests passed", "1 test failed"
_COUNT_LABEL_RE = re.compile(r"(?<![\w.])(\d+)[ \t]+(?:tests?[ \t]+)?(passed|failed)\b", re.I)


def _is_session(section: Section) -> bool:
    return section.level == 2 and bool(_SESSION_TITLE_RE.match(section.title))


def _is_summary(section: Section) -> bool:
    return section.level == 2 and bool(_SUMMARY_TITLE_RE.match(section.title))


def session_counts(text: str) -> dict[str, int]:
    """The passed / failed counts a session states: for each of the two, the first
    ``Passed: N`` form (label, colon or ``=``, bold allowed) anywhere in the text, else the
    first ``N passed`` form (``N tests passed`` too). Missing keys = not stated."""
    counts: dict[str, int] = {}
    for match in _LABEL_COUNT_RE.finditer(text):
        counts.setdefault(match[1].lower(), int(match[2]))
    for match in _COUNT_LABEL_RE.finditer(text):
        key = match[2].lower()
        if key not in counts:
            counts[key] = int(match[1])
    return counts


@dataclass(frozen=True)
class SessionSummary:
    """The numbers of a Historical Summary section (parsed back when folding)."""

    sessions: int = 0
    first: dt.date | None = None
    last: dt.date | None = None
    passed: int = 0
    passed_stated: int = 0
    failed: int = 0
    failed_stated: int = 0
    headings: tuple[str, ...] = ()

    def plus(self, other: SessionSummary) -> SessionSummary:
        firsts = [d for d in (self.first, other.first) if d is not None]
        lasts = [d for d in (self.last, other.last) if d is not None]
        return SessionSummary(
            self.sessions + other.sessions,
            min(firsts, default=None),
            max(lasts, default=None),
            self.passed + other.passed,
            self.passed_stated + other.passed_stated,
            self.failed + other.failed,
            self.failed_stated + other.failed_stated,
            self.headings + other.headings,
        )

    def render(self) -> str:
        if self.first is None or self.last is None:
            span = "not stated"
        else:
            span = f"{self.first.isoformat()} to {self.last.isoformat()}"
        lines = [
            f"## {SUMMARY_TITLE}",
            "",
            "Older test sessions folded into one summary by gitmem "
            "(later runs fold newer ones in).",
            "",
            f"- Sessions: {self.sessions}",
            f"- Date range: {span}",
            self._total_line("Passed", self.passed, self.passed_stated),
            self._total_line("Failed", self.failed, self.failed_stated),
            "- Sessions summarized:",
            *(f"  - {heading}" for heading in self.headings),
        ]
        return "\n".join(lines) + "\n"

    def _total_line(self, label: str, total: int, stated: int) -> str:
        if stated == 0:
            return f"- {label}: not stated"
        return f"- {label}: {total} (stated in {stated} of {_plural(self.sessions, 'session')})"


_SUM_SESSIONS_RE = re.compile(r"^- Sessions: (\d+)\s*$")
_SUM_RANGE_RE = re.compile(r"^- Date range: (\S+) to (\S+)\s*$")
_SUM_TOTAL_RE = re.compile(r"^- (Passed|Failed): (\d+)(?: \(stated in (\d+) of \d+ sessions?\))?")
_SUM_HEADING_RE = re.compile(r"^ {2,}[-*] (.*?)\s*$")


def parse_summary(section: Section) -> SessionSummary:
    """Read back a summary :meth:`SessionSummary.render` wrote (leniently: a missing
    ``Sessions`` line counts the listed headings, a total without "stated in" counts as
    stated by every session)."""
    sessions: int | None = None
    first = last = None
    totals: dict[str, tuple[int, int | None]] = {}
    headings: list[str] = []
    in_list = False
    for line in prose_lines(section.text)[1:]:
        if match := _SUM_SESSIONS_RE.match(line):
            sessions = int(match[1])
        elif match := _SUM_RANGE_RE.match(line):
            dates = iso_dates(match[1]) + iso_dates(match[2])
            if len(dates) == 2:
                first, last = dates
        elif match := _SUM_TOTAL_RE.match(line):
            stated = None if match[3] is None else int(match[3])
            totals[match[1].lower()] = (int(match[2]), stated)
        elif line.startswith("- Sessions summarized"):
            in_list = True
            continue
        if in_list:
            if match := _SUM_HEADING_RE.match(line):
                headings.append(match[1])
            elif line.strip():
                in_list = False
    count = len(headings) if sessions is None else sessions

    def total(key: str) -> tuple[int, int]:
        value, stated = totals.get(key, (0, 0))
        return value, count if stated is None else stated

    passed, passed_stated = total("passed")
    failed, failed_stated = total("failed")
    return SessionSummary(
        count, first, last, passed, passed_stated, failed, failed_stated, tuple(headings)
    )


def summarize_sessions(sessions: Sequence[Section]) -> SessionSummary:
    """The summary of ``sessions`` (given oldest first)."""
    dates = [d for d in (section_date(s) for s in sessions) if d is not None]
    passed = failed = passed_stated = failed_stated = 0
    for section in sessions:
        counts = session_counts(section.text)
        if "passed" in counts:
            passed += counts["passed"]
            passed_stated += 1
        if "failed" in counts:
            failed += counts["failed"]
            failed_stated += 1
    return SessionSummary(
        len(sessions),
        min(dates, default=None),
        max(dates, default=None),
        passed,
        passed_stated,
        failed,
        failed_stated,
        tuple(s.title for s in sessions),
    )


def prune_test_results_history(ctx: RuleContext) -> RuleResult:
    """More than ``max_sessions`` sessions: all but the newest are folded into one
    ``## Historical Summary`` at the bottom (an existing summary is folded in too)."""
    limit = _int_option(ctx, "max_sessions", DEFAULT_MAX_SESSIONS, 1)
    blocks = split_sections(ctx.body, 2)
    total, folding = _oldest_beyond(blocks, _is_session, limit)
    if not folding:
        return RuleResult(ctx.body)
    folded = list(folding.values())
    summaries = [i for i, b in enumerate(blocks) if _is_summary(b)]
    summary = SessionSummary()
    for i in summaries:
        summary = summary.plus(parse_summary(blocks[i]))
    summary = summary.plus(summarize_sessions(folded))
    drop = set(folding) | set(summaries)
    rest = join_sections(b for i, b in enumerate(blocks) if i not in drop)
    body = _with_blank_line_after(rest) + summary.render()
    reason = (
        f"{_plural(total, 'session')}, more than {limit}: folded into "
        f"## {SUMMARY_TITLE} ({_plural(summary.sessions, 'session')} summarized)"
    )
    return RuleResult(body, None, tuple(PruneAction("removed", reason, b.title) for b in folded))


# --------------------------------------------------------------------------- common_patterns

DEFAULT_VERIFY_EVERY_WRITES = 5
VERIFY_PATTERNS = "[VERIFY PATTERNS]"
_PATTERNS_MARKER_RE = re.compile(r"^\[VERIFY PATTERNS\] write (\d+)\b[^\n]*$", re.M)
_COMMENT_LINE_RE = re.compile(r"^[ \t]*<!--.*-->[ \t]*$")


def patterns_marker(write_count: int, today: dt.date) -> str:
    return (
        f"{VERIFY_PATTERNS} write {write_count} ({today.isoformat()}): check that each "
        "pattern below still matches the code, then delete this line."
    )


def prune_common_patterns(ctx: RuleContext) -> RuleResult:
    """Every ``verify_every_writes``-th write (``write_count % n == 0``, count > 0) a
    ``[VERIFY PATTERNS] write N`` line is put at the top (after a leading comment such as
    ``<!-- Last Updated: ... -->`` and a ``#`` title), replacing an earlier one; a marker
    for the same write is never added twice."""
    every = _int_option(ctx, "verify_every_writes", DEFAULT_VERIFY_EVERY_WRITES, 1)
    count = ctx.write_count
    if count <= 0 or count % every:
        return RuleResult(ctx.body)
    marker = patterns_marker(count, ctx.today)
    flagged_writes = [
        int(match[1])
        for line in prose_lines(ctx.body)
        if (match := _PATTERNS_MARKER_RE.match(line))
    ]
    if count in flagged_writes:
        return RuleResult(ctx.body)
    action = PruneAction(
        "flagged",
        f"write {count} of common_patterns (every {_plural(every, 'write')}): "
        f"{VERIFY_PATTERNS} added",
        None,
    )
    lines = lines_of(ctx.body)
    if flagged_writes:
        # One marker at a time: the newest flag replaces the first marker outside code.
        for i, (line, fenced) in enumerate(fenced_lines(lines)):
            if not fenced and _PATTERNS_MARKER_RE.match(line.rstrip("\n")):
                lines[i] = marker + ("\n" if line.endswith("\n") else "")
                break
        return RuleResult("".join(lines), None, (action,))
    at = 0
    while at < len(lines) and (
        not lines[at].strip() or _COMMENT_LINE_RE.match(lines[at].rstrip("\n"))
    ):
        at += 1
    if at < len(lines) and (head := heading_of(lines[at])) is not None and head[0] == 1:
        at += 1
    before = "".join(lines[:at])
    after = "".join(lines[at:])
    if before and not before.endswith("\n"):
        before += "\n"
    gap_before = "\n" if before.strip() and not before.endswith("\n\n") else ""
    gap_after = "\n" if after.strip() and not after.startswith("\n") else ""
    body = f"{before}{gap_before}{marker}\n{gap_after}{after}"
    return RuleResult(body, None, (action,))


# --------------------------------------------------------------------------- registry

_FILE_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_file_type(file_type: str) -> str:
    if not isinstance(file_type, str) or not _FILE_TYPE_RE.match(file_type):
        raise InvalidInputError(
            f"file type {file_type!r} is not a plain name (letters, digits, '.', '_', '-')"
        )
    return file_type


def _as_rule(
    rule: PruneRule | RuleFunction, defaults: Mapping[str, Any] | None, archive: str | None
) -> PruneRule:
    if isinstance(rule, PruneRule):
        if defaults is None and archive is None:
            return rule
        return PruneRule(
            rule.apply,
            dict(rule.defaults if defaults is None else defaults),
            rule.archive if archive is None else archive,
            rule.description,
        )
    if not callable(rule):
        raise InvalidInputError(f"a prune rule must be callable, not {type(rule).__name__}")
    return PruneRule(rule, dict(defaults or {}), archive, (rule.__doc__ or "").strip())


class RuleRegistry:
    """File type -> :class:`PruneRule`. :data:`DEFAULT_REGISTRY` holds the built-in rules;
    :func:`registry_from_config` copies it and applies ``lifecycle.rules`` of gitmem.yaml."""

    def __init__(self, rules: Mapping[str, PruneRule] | None = None) -> None:
        self._rules: dict[str, PruneRule] = dict(rules or {})

    def register(
        self,
        file_type: str,
        rule: PruneRule | RuleFunction,
        *,
        defaults: Mapping[str, Any] | None = None,
        archive: str | None = None,
    ) -> PruneRule:
        """Add or replace the rule of ``file_type``; returns the registered rule."""
        _check_file_type(file_type)
        if archive is not None:
            _check_file_type(archive)
        registered = _as_rule(rule, defaults, archive)
        self._rules[file_type] = registered
        return registered

    def unregister(self, file_type: str) -> None:
        """No rule for ``file_type`` (a no-op when there is none)."""
        self._rules.pop(file_type, None)

    def get(self, file_type: str) -> PruneRule | None:
        return self._rules.get(file_type)

    def file_types(self) -> list[str]:
        return sorted(self._rules)

    def copy(self) -> RuleRegistry:
        return RuleRegistry(self._rules)

    def options_for(self, file_type: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """The rule's defaults overridden by ``lifecycle.prune.<file_type>``. Keys the
        rule's defaults do not name, or values of another type, are refused (typos would
        otherwise be silently ignored); a rule without defaults takes any keys."""
        rule = self.get(file_type)
        defaults = dict(rule.defaults) if rule is not None else {}
        prune = lifecycle_section(config, "prune")
        raw = prune.get(file_type)
        if raw is None:
            return defaults
        if not isinstance(raw, Mapping):
            raise LifecycleConfigError(f"gitmem.yaml lifecycle.prune.{file_type} must be a mapping")
        merged = dict(defaults)
        for key, value in raw.items():
            where = f"gitmem.yaml lifecycle.prune.{file_type}.{key}"
            if defaults and key not in defaults:
                known = ", ".join(sorted(defaults))
                raise LifecycleConfigError(f"{where}: unknown option (known: {known})")
            if key in defaults and not _same_kind(defaults[key], value):
                raise LifecycleConfigError(
                    f"{where} must be a {type(defaults[key]).__name__}, not {value!r}"
                )
            merged[key] = value
        return merged

    def apply(
        self,
        file_type: str,
        body: str,
        *,
        today: dt.date,
        write_count: int = 0,
        archive_text: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> RuleResult:
        """Run the rule of ``file_type`` (an unchanged result when it has none)."""
        rule = self.get(file_type)
        if rule is None:
            return RuleResult(body)
        if isinstance(today, dt.datetime):
            today = today.date()
        ctx = RuleContext(
            file_type=file_type,
            body=body,
            today=today,
            write_count=write_count,
            options=self.options_for(file_type, config),
            archive_text=archive_text if rule.archive else None,
            archive_name=rule.archive,
        )
        result = rule(ctx)
        if not isinstance(result, RuleResult):
            raise LifecycleConfigError(
                f"the prune rule of {file_type} returned {type(result).__name__}, not a RuleResult"
            )
        if result.archive_text is not None and rule.archive is None:
            raise LifecycleConfigError(
                f"the prune rule of {file_type} wrote an archive but declares none"
            )
        return result


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def lifecycle_section(config: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """``lifecycle.<key>`` of a raw gitmem.yaml mapping ({} when absent)."""
    lifecycle: Any = (config or {}).get("lifecycle")
    if lifecycle is None:
        return {}
    if not isinstance(lifecycle, Mapping):
        raise LifecycleConfigError("gitmem.yaml 'lifecycle' must be a mapping")
    section: Any = lifecycle.get(key)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise LifecycleConfigError(f"gitmem.yaml lifecycle.{key} must be a mapping")
    return section


def load_rule(spec: str) -> PruneRule:
    """The rule named ``"package.module:attribute"`` (a :class:`PruneRule` or a callable)."""
    module_name, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not sep or not module_name or not attr:
        raise LifecycleConfigError(f"prune rule {spec!r} must be written 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise LifecycleConfigError(
            f"prune rule {spec!r}: cannot import {module_name}: {exc}"
        ) from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise LifecycleConfigError(
                f"prune rule {spec!r}: {module_name} has no {attr}"
            ) from None
    if not isinstance(target, PruneRule) and not callable(target):
        raise LifecycleConfigError(f"prune rule {spec!r} is not callable")
    return _as_rule(target, None, None)


DEFAULT_REGISTRY = RuleRegistry()
DEFAULT_REGISTRY.register(
    "review_history",
    PruneRule(
        prune_review_history,
        {"max_reviews": DEFAULT_MAX_REVIEWS},
        REVIEW_ARCHIVE,
        "oldest ## Review sections beyond max_reviews move to the archive",
    ),
)
DEFAULT_REGISTRY.register(
    "known_issues",
    PruneRule(
        prune_known_issues,
        {
            "remove_resolved_after_days": DEFAULT_REMOVE_RESOLVED_AFTER_DAYS,
            "verify_status_after_days": DEFAULT_VERIFY_STATUS_AFTER_DAYS,
        },
        None,
        "resolved issues removed after N days; [VERIFY STATUS] on issues idle for M days",
    ),
)
DEFAULT_REGISTRY.register(
    "test_results_history",
    PruneRule(
        prune_test_results_history,
        {"max_sessions": DEFAULT_MAX_SESSIONS},
        None,
        "sessions beyond max_sessions folded into one ## Historical Summary",
    ),
)
DEFAULT_REGISTRY.register(
    "common_patterns",
    PruneRule(
        prune_common_patterns,
        {"verify_every_writes": DEFAULT_VERIFY_EVERY_WRITES},
        None,
        "[VERIFY PATTERNS] every Nth write",
    ),
)


def register_rule(
    file_type: str,
    rule: PruneRule | RuleFunction,
    *,
    defaults: Mapping[str, Any] | None = None,
    archive: str | None = None,
) -> PruneRule:
    """Add or replace the rule of ``file_type`` in :data:`DEFAULT_REGISTRY`."""
    return DEFAULT_REGISTRY.register(file_type, rule, defaults=defaults, archive=archive)


def unregister_rule(file_type: str) -> None:
    DEFAULT_REGISTRY.unregister(file_type)


def rule_for(file_type: str, registry: RuleRegistry | None = None) -> PruneRule | None:
    """The rule of ``file_type`` (None when it has none)."""
    return (registry or DEFAULT_REGISTRY).get(file_type)


ENTRY_POINT_GROUP = "gitmem.rules"
"""Installed rules: entry points in this group, named by the file type they prune."""

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def installed_rules() -> dict[str, PruneRule]:
    """The rules installed packages declare (entry points of :data:`ENTRY_POINT_GROUP`)."""
    from importlib.metadata import entry_points

    out: dict[str, PruneRule] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            _check_file_type(point.name)
            target = point.load()
            if not isinstance(target, PruneRule) and not callable(target):
                raise LifecycleConfigError(f"{point.value} is not callable")
            out[point.name] = _as_rule(target, None, None)
        except Exception as exc:  # one broken plugin must not stop every prune
            _warn_once(f"installed prune rule {point.name!r} ({point.value}) not loaded: {exc}")
    return out


def local_rules(gitdir: str | None = None) -> Mapping[str, Any]:
    """``rules`` of the user's own configuration file (a store's entry wins when given)."""
    from gitmem.git import localconfig

    section = localconfig.load_cached().section("rules", gitdir=gitdir)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise LifecycleConfigError(
            f"{localconfig.config_path()}: 'rules' must map file types to 'module:function'"
        )
    return section


def _committed_rule(registry: RuleRegistry, file_type: str, spec: Any) -> None:
    if spec is None or spec is False:
        registry.unregister(file_type)
        return
    if not isinstance(spec, str):
        raise LifecycleConfigError(
            f"gitmem.yaml lifecycle.rules.{file_type} must be the name of a rule or null"
        )
    if ":" in spec or ("." in spec and registry.get(spec) is None):
        from gitmem.git import localconfig

        _warn_once(
            f"gitmem.yaml lifecycle.rules.{file_type} names Python code ({spec!r}); gitmem "
            "never imports code a store names, so it is ignored. To run it, opt in on this "
            f"machine: add 'rules: {{{file_type}: \"{spec}\"}}' to "
            f"{localconfig.config_path()} (or install it as a '{ENTRY_POINT_GROUP}' entry point)"
        )
        return
    rule = registry.get(spec)
    if rule is None:
        raise LifecycleConfigError(
            f"gitmem.yaml lifecycle.rules.{file_type}: no rule named {spec!r} "
            f"(known: {', '.join(registry.file_types())})"
        )
    registry.register(file_type, rule)


def registry_from_config(
    config: Mapping[str, Any] | None,
    base: RuleRegistry | None = None,
    *,
    gitdir: str | None = None,
) -> RuleRegistry:
    """A copy of ``base`` (default: :data:`DEFAULT_REGISTRY`) with, in order, the installed
    rules, ``lifecycle.rules`` of gitmem.yaml (``<file_type>: null`` removes a rule,
    ``<file_type>: <other file type>`` reuses that one's rule) and the user's own ``rules``
    (``<file_type>: "package.module:function"``, imported: the user wrote it)."""
    registry = (base or DEFAULT_REGISTRY).copy()
    for file_type, rule in installed_rules().items():
        registry.register(file_type, rule)
    for file_type, spec in lifecycle_section(config, "rules").items():
        _committed_rule(registry, _check_file_type(str(file_type)), spec)
    for file_type, spec in local_rules(gitdir).items():
        _check_file_type(str(file_type))
        if spec is None or spec is False:
            registry.unregister(str(file_type))
        elif isinstance(spec, str):
            registry.register(str(file_type), load_rule(spec))
        else:
            raise LifecycleConfigError(
                f"rules.{file_type} in your gitmem configuration must be "
                "'package.module:function' or null"
            )
    return registry


def apply_rule(
    file_type: str,
    body: str,
    *,
    today: dt.date,
    write_count: int = 0,
    archive_text: str | None = None,
    config: Mapping[str, Any] | None = None,
    registry: RuleRegistry | None = None,
) -> RuleResult:
    """Run the rule of ``file_type`` over ``body`` with options from ``config`` (the raw
    gitmem.yaml mapping, ``StoreConfig.raw``). ``registry`` defaults to
    ``registry_from_config(config)``. No rule: the body comes back unchanged, no actions."""
    reg = registry if registry is not None else registry_from_config(config)
    return reg.apply(
        file_type,
        body,
        today=today,
        write_count=write_count,
        archive_text=archive_text,
        config=config,
    )


# --------------------------------------------------------------------------- size limits

DEFAULT_SIZE_LIMITS: Mapping[str, int] = {
    "default": 500,
    "project_overview": 200,
    "review_history": 300,
}


def size_limits_from_config(config: Mapping[str, Any] | None) -> dict[str, int]:
    """``DEFAULT_SIZE_LIMITS`` overridden by ``lifecycle.size_limits`` of gitmem.yaml."""
    limits = dict(DEFAULT_SIZE_LIMITS)
    for key, value in lifecycle_section(config, "size_limits").items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise LifecycleConfigError(
                f"gitmem.yaml lifecycle.size_limits.{key} must be a whole number >= 1"
            )
        limits[str(key)] = value
    return limits


def size_warnings(
    file_type: str, line_count: int, limits: Mapping[str, int] | None = None
) -> list[str]:
    """Warnings (never errors) for a document over its line limit: the file type's own
    limit when it has one, else ``default`` (500 lines for any file)."""
    table = DEFAULT_SIZE_LIMITS if limits is None else {**DEFAULT_SIZE_LIMITS, **limits}
    if file_type in table and file_type != "default":
        limit, which = table[file_type], f"the {file_type} limit"
    else:
        limit, which = table["default"], "the limit for any file"
    if line_count <= limit:
        return []
    return [
        f"{file_type} has {line_count} lines, more than {which} of {limit}; "
        "consider pruning or splitting it"
    ]
