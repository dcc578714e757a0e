"""Prune rules: a :class:`RuleContext` in, a :class:`RuleResult` out, and the built-in
rules (docs/lifecycle-rules.md); :mod:`gitmem.features.lifecycle.rules` maps file types to them.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from gitmem.base.errors import InvalidInputError
from gitmem.features.lifecycle.sections import (
    Section,
    _field_lines,
    _oldest_beyond,
    _with_blank_line_after,
    chronological,
    fenced_lines,
    field_of,
    heading_of,
    iso_dates,
    join_sections,
    lines_of,
    prose_lines,
    section_date,
    split_sections,
)

Action = Literal["archived", "removed", "flagged"]
ACTIONS: tuple[Action, ...] = ("archived", "removed", "flagged")


class LifecycleConfigError(InvalidInputError):
    """A lifecycle section of gitmem.yaml (or a registered rule) that gitmem cannot use."""

    default_hint = "fix the lifecycle section of gitmem.yaml (see docs/lifecycle-rules.md)"


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
        return asdict(self)


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule may look at; ``write_count`` includes the write being made."""

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
    """A rule, its option defaults and the file type of its archive (same folder), if any."""

    apply: RuleFunction
    defaults: Mapping[str, Any] = field(default_factory=dict)
    archive: str | None = None

    def __call__(self, ctx: RuleContext) -> RuleResult:
        return self.apply(ctx)


def whole_number(value: Any, key: str, minimum: int) -> int:
    """``value`` when it is a whole number >= ``minimum``; else an error naming ``key``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise LifecycleConfigError(
            f"gitmem.yaml {key} must be a whole number >= {minimum}, not {value!r}"
        )
    return value


def _int_option(ctx: RuleContext, name: str, minimum: int) -> int:
    """An option of a built-in rule (its default comes from the registry)."""
    key = f"lifecycle.prune.{ctx.file_type}.{name}"
    return whole_number(ctx.options.get(name), key, minimum)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


REVIEW_ARCHIVE = "review_history_archive"

_REVIEW_TITLE_RE = re.compile(r"^review\b", re.I)

ARCHIVE_HEADER = (
    "# Review History Archive\n\n"
    "Older `## Review` sections moved here from review_history.md by gitmem, oldest first.\n\n"
)


def _titled(pattern: re.Pattern[str]) -> Callable[[Section], bool]:
    """Whether a section is a ``##`` one whose title matches ``pattern``."""
    return lambda section: section.level == 2 and bool(pattern.match(section.title))


def prune_review_history(ctx: RuleContext) -> RuleResult:
    """The oldest ``## Review`` sections beyond ``max_reviews`` move to the archive."""
    limit = _int_option(ctx, "max_reviews", 1)
    blocks = split_sections(ctx.body, 2)
    total, moving = _oldest_beyond(blocks, _titled(_REVIEW_TITLE_RE), limit)
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


VERIFY_STATUS = "[VERIFY STATUS]"

_UPDATED_LABELS = frozenset({"updated", "last updated", "status updated", "updated on"})

_RESOLVED_LABELS = frozenset({"resolved", "resolved on", "fixed", "fixed on"})

_WRITTEN_LABELS = frozenset(
    {"date", "reported", "reported on", "created", "opened", "found", "discovered"}
)


@dataclass(frozen=True)
class IssueStatus:
    status: str | None
    resolved: bool
    in_progress: bool
    resolved_on: dt.date | None
    status_updated: dt.date | None


def issue_status(section: Section) -> IssueStatus:
    """What known_issues reads of one ``###`` section (docs/lifecycle-rules.md)."""
    status: str | None = None
    status_dates: list[dt.date] = []
    updated: list[dt.date] = []
    resolved_dates: list[dt.date] = []
    written: list[dt.date] = []
    for label, value in _field_lines(section):
        if label == "status" and status is None:
            status = value
            status_dates = iso_dates(value)
        elif label in _UPDATED_LABELS:
            updated += iso_dates(value)
        elif label in _RESOLVED_LABELS:
            resolved_dates += iso_dates(value)
        elif label in _WRITTEN_LABELS and not written:
            written = iso_dates(value)[:1]
    words = re.sub(r"[^a-z0-9 -]+", " ", (status or "").lower()).split()
    resolved = bool(words) and words[0] == "resolved"
    in_progress = words[:2] == ["in", "progress"] or words[:1] == ["in-progress"]
    resolved_on = max(status_dates or resolved_dates, default=None) if resolved else None
    last_update = max(status_dates + updated, default=None)
    if last_update is None:
        first_written = iso_dates(section.title)[:1] or written
        last_update = first_written[0] if first_written else None
    return IssueStatus(status, resolved, in_progress, resolved_on, last_update)


def _mark_verify(section: Section) -> Section:
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
    """Old resolved issues removed; ``[VERIFY STATUS]`` on issues idle too long."""
    remove_after = _int_option(ctx, "remove_resolved_after_days", 0)
    verify_after = _int_option(ctx, "verify_status_after_days", 0)
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
                when = f"{info.resolved_on.isoformat()}, {_plural(age, 'day')} ago"
                reason = f"resolved on {when} ({remove_after}+ days)"
                actions.append(PruneAction("removed", reason, block.title))
                continue
        if info.status_updated is not None and VERIFY_STATUS not in block.text:
            idle = (ctx.today - info.status_updated).days
            if idle >= verify_after:
                block = _mark_verify(block)
                since = f"since {info.status_updated.isoformat()}; {verify_after}+ days"
                reason = (
                    f"no status update for {_plural(idle, 'day')} ({since}): {VERIFY_STATUS} added"
                )
                actions.append(PruneAction("flagged", reason, block.title))
        kept.append(block)
    if not actions:
        return RuleResult(ctx.body)
    return RuleResult(join_sections(kept), None, tuple(actions))


SUMMARY_TITLE = "Historical Summary"

_SESSION_TITLE_RE = re.compile(r"^(?:test[ \t]+)?session\b", re.I)

_SUMMARY_TITLE_RE = re.compile(r"^historical summary\b", re.I)

_LABEL_COUNT_RE = re.compile(
    r"\b(passed|failed)\b[ \t]*(?:\*\*|__)?[ \t]*[:=][ \t]*(?:\*\*|__)?[ \t]*(\d+)", re.I
)

_COUNT_LABEL_RE = re.compile(r"(?<![\w.])(\d+)[ \t]+(?:tests?[ \t]+)?(passed|failed)\b", re.I)


def session_counts(text: str) -> dict[str, int]:
    """Passed / failed counts a session states (each: first ``Passed: N``, else first
    ``N passed``); a missing key is not stated."""
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
    sessions: int = 0
    first: dt.date | None = None
    last: dt.date | None = None
    passed: int = 0
    passed_stated: int = 0
    failed: int = 0
    failed_stated: int = 0
    headings: tuple[str, ...] = ()

    def plus(self, other: SessionSummary) -> SessionSummary:
        dates = [d for d in (self.first, other.first, self.last, other.last) if d is not None]
        return SessionSummary(
            self.sessions + other.sessions,
            min(dates, default=None),
            max(dates, default=None),
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
    """Read back a rendered summary, leniently (no ``Sessions`` line: count the headings)."""
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


def _one_session(section: Section) -> SessionSummary:
    date, counts = section_date(section), session_counts(section.text)
    passed, failed = counts.get("passed"), counts.get("failed")
    return SessionSummary(
        1,
        date,
        date,
        passed or 0,
        passed is not None,
        failed or 0,
        failed is not None,
        (section.title,),
    )


def prune_test_results_history(ctx: RuleContext) -> RuleResult:
    """Sessions beyond ``max_sessions`` fold into one ``## Historical Summary`` at the end."""
    limit = _int_option(ctx, "max_sessions", 1)
    blocks = split_sections(ctx.body, 2)
    total, folding = _oldest_beyond(blocks, _titled(_SESSION_TITLE_RE), limit)
    if not folding:
        return RuleResult(ctx.body)
    folded = list(folding.values())
    summaries = [i for i, b in enumerate(blocks) if _titled(_SUMMARY_TITLE_RE)(b)]
    parts = [parse_summary(blocks[i]) for i in summaries] + [_one_session(b) for b in folded]
    summary = functools.reduce(SessionSummary.plus, parts, SessionSummary())
    drop = set(folding) | set(summaries)
    rest = join_sections(b for i, b in enumerate(blocks) if i not in drop)
    body = _with_blank_line_after(rest) + summary.render()
    reason = (
        f"{_plural(total, 'session')}, more than {limit}: folded into "
        f"## {SUMMARY_TITLE} ({_plural(summary.sessions, 'session')} summarized)"
    )
    return RuleResult(body, None, tuple(PruneAction("removed", reason, b.title) for b in folded))


VERIFY_PATTERNS = "[VERIFY PATTERNS]"

_PATTERNS_MARKER_RE = re.compile(r"^\[VERIFY PATTERNS\] write (\d+)\b[^\n]*$", re.M)

_COMMENT_LINE_RE = re.compile(r"^[ \t]*<!--.*-->[ \t]*$")


def prune_common_patterns(ctx: RuleContext) -> RuleResult:
    """A ``[VERIFY PATTERNS] write N`` line at the top every ``verify_every_writes``-th
    write, replacing an earlier one."""
    every = _int_option(ctx, "verify_every_writes", 1)
    count = ctx.write_count
    if count <= 0 or count % every:
        return RuleResult(ctx.body)
    marker = (
        f"{VERIFY_PATTERNS} write {count} ({ctx.today.isoformat()}): check that each "
        "pattern below still matches the code, then delete this line."
    )
    flagged_writes = [
        int(match[1])
        for line in prose_lines(ctx.body)
        if (match := _PATTERNS_MARKER_RE.match(line))
    ]
    if count in flagged_writes:
        return RuleResult(ctx.body)
    reason = f"write {count} of common_patterns (every {_plural(every, 'write')})"
    action = PruneAction("flagged", f"{reason}: {VERIFY_PATTERNS} added", None)
    lines = lines_of(ctx.body)
    if flagged_writes:
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
