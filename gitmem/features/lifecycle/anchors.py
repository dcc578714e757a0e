"""Code-aware staleness (``gitmem check``): the project files a memory names (``anchors``,
code spans), compared between the memory's base commit and HEAD (docs/lifecycle.md); each
lookup is done once per base and path, with no saved state.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base.clock import format_timestamp, to_utc
from gitmem.base.errors import InvalidInputError
from gitmem.features.lifecycle.sections import prose_lines
from gitmem.format.model import Memory
from gitmem.git.objects import tree_entry

if TYPE_CHECKING:
    from gitmem.store.core import Store

VERIFY_KEY = "verify"
REASON_KEY = "verify_reason"


_SPAN_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SPAN_PATH_RE = re.compile(
    r"\s*(?:\./)*([A-Za-z0-9_.@+\-]+(?:/[A-Za-z0-9_.@+\-]+)*)(/?)"
    r"(?::\d+(?:[:-]\d+)?|#L\d+(?:-L?\d+)?)?\s*"
)
_EXTENSION_RE = re.compile(r"[^/.][^/]*\.[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*$")


def normalize_path(value: str) -> str | None:
    """A repo-relative path in git's spelling, or None when ``value`` cannot be one."""
    path = value.strip()
    while path.startswith("./"):
        path = path[2:]
    path = path.rstrip("/")
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        return None
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    return path


def backtick_paths(body: str) -> list[str]:
    """Paths in ``body``'s single-backtick spans outside fences, in order, once each."""
    text = "\n".join(prose_lines(body)) if ("```" in body or "~~~" in body) else body
    out: list[str] = []
    seen: set[str] = set()
    for content in _SPAN_RE.findall(text):
        if "/" not in content and "." not in content:
            continue  # most code spans (names, calls) end here, cheaply
        match = _SPAN_PATH_RE.fullmatch(content)
        if match is None:
            continue
        path, slash = match.groups()
        if not slash and "/" not in path and not _EXTENSION_RE.fullmatch(path):
            continue
        dotted = path.startswith(".") or "/." in path
        if dotted and any(part in (".", "..") for part in path.split("/")):
            continue
        if path not in seen:
            seen.add(path)
            out.append(path)
    return out


def anchors_of(extra: Mapping[str, Any]) -> list[str]:
    """The ``anchors`` front-matter entries that are usable paths."""
    value = extra.get("anchors")
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    paths = (normalize_path(item) for item in items if isinstance(item, str))
    return list(dict.fromkeys(path for path in paths if path is not None))


@dataclass(frozen=True)
class AnchorFinding:
    path: str
    kind: str  # changed | deleted | renamed | added | missing
    source: str  # anchor | body
    new_path: str | None = None

    def describe(self) -> str:
        if self.kind == "renamed":
            return f"{self.path} renamed to {self.new_path}"
        return f"{self.path} {self.kind}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckedMemory:
    id: str
    path: str | None
    title: str | None
    updated_at: dt.datetime
    base: str | None  # None: older than the project's history
    already_flagged: bool = False
    reason: str = ""
    findings: list[AnchorFinding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "updated_at": format_timestamp(self.updated_at)}


@dataclass
class CheckReport:
    project: str
    head: str | None
    checked: int  # memories naming a project path, flagged ones included
    memories: list[CheckedMemory] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        kinds = Counter(finding.kind for memory in self.memories for finding in memory.findings)
        return dict(sorted(kinds.items()))

    def summary(self) -> str:
        if self.head is None:
            return f"gitmem check: {self.project} has no commits yet; nothing to compare"
        if not self.memories:
            return f"gitmem check: {self.checked} anchored memories, all up to date"
        kinds = ", ".join(f"{n} {kind}" for kind, n in self.counts().items())
        earlier = sum(1 for m in self.memories if m.already_flagged)
        text = (
            f"gitmem check: {len(self.memories)} of {self.checked} anchored memories "
            f"need verification"
        )
        details = [d for d in (kinds, f"{earlier} flagged earlier" if earlier else "") if d]
        if details:
            text += f" ({'; '.join(details)})"
        if self.flagged:
            text += f"; flagged {len(self.flagged)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "head": self.head,
            "checked": self.checked,
            "counts": self.counts(),
            "memories": [m.to_dict() for m in self.memories],
            "flagged": list(self.flagged),
            "commits": list(self.commits),
        }


def open_project(path: str | Path) -> pygit2.Repository:
    found = pygit2.discover_repository(str(path))
    if found is None:
        raise InvalidInputError(f"{path} is not inside a git repository")
    return pygit2.Repository(found)


class _Project:
    """HEAD of a project repository and the lookups the check needs, each done once."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.head: pygit2.Commit | None = None
        if not repo.head_is_unborn:
            self.head = repo.head.peel(pygit2.Commit)
        self._chain: list[pygit2.Commit] = []
        # The negated running minimum of the chain's committer times: ascending whatever
        # order the times come in, so the first commit not newer than a time is a bisection.
        self._floor: list[int] = []
        self._walker: pygit2.Commit | None = self.head
        self._entries: dict[tuple[pygit2.Oid, str], tuple[pygit2.Oid, bool] | None] = {}
        self._renames: dict[pygit2.Oid, dict[str, str]] = {}

    def base(self, when: dt.datetime) -> pygit2.Commit | None:
        """The newest first-parent commit at or before ``when`` (walking only as far as needed)."""
        target = int(to_utc(when).timestamp())
        while self._walker is not None and (not self._floor or -self._floor[-1] > target):
            commit = self._walker
            self._chain.append(commit)
            floor = -commit.commit_time
            self._floor.append(max(floor, self._floor[-1]) if self._floor else floor)
            self._walker = commit.parents[0] if commit.parents else None
        # Committer times along first parents are not always monotonic (a wrong clock):
        # the base is the first commit from HEAD that is not newer than the memory, so a
        # commit in front of HEAD never changes the base of a memory older than it.
        i = bisect.bisect_left(self._floor, -target)
        return self._chain[i] if i < len(self._chain) else None

    def entry(self, commit: pygit2.Commit, path: str) -> tuple[pygit2.Oid, bool] | None:
        """The object at ``path`` in ``commit`` and whether it is a folder; None: no entry."""
        key = (commit.id, path)
        if key not in self._entries:
            try:
                entry = tree_entry(commit.tree, path)
            except ValueError:
                entry = None
            self._entries[key] = None if entry is None else (entry.id, entry.type_str == "tree")
        return self._entries[key]

    def renames(self, base: pygit2.Commit) -> dict[str, str]:
        """Old path -> new path of files renamed between ``base`` and HEAD (one diff per base)."""
        found = self._renames.get(base.id)
        if found is None:
            diff = self.repo.diff(base, self.head)
            diff.find_similar()
            found = self._renames[base.id] = {
                d.old_file.path: d.new_file.path for d in diff.deltas if d.status_char() == "R"
            }
        return found


def _finding(
    project: _Project, base: pygit2.Commit | None, path: str, source: str
) -> AnchorFinding | None:
    """What became of ``path`` between ``base`` and HEAD (a folder's object changes when
    anything under it does)."""
    assert project.head is not None
    now = project.entry(project.head, path)
    # Older than the project's history (no base) or unchanged: an anchor that names nothing
    # at HEAD is still worth saying.
    before = now if base is None else project.entry(base, path)
    if before == now:
        missing = now is None and source == "anchor"
        return AnchorFinding(path, "missing", source) if missing else None
    if before is None:
        return AnchorFinding(path, "added", source) if source == "anchor" else None
    if now is not None and (before[1] or not now[1]):
        return AnchorFinding(path, "changed", source)
    if before[1]:
        return AnchorFinding(path, "deleted", source)
    assert base is not None
    moved = project.renames(base).get(path)  # a file gone, or a folder in its place
    if moved is not None:
        return AnchorFinding(path, "renamed", source, moved)
    return AnchorFinding(path, "deleted", source)


def _check(memories: Iterable[Memory], project_path: str | Path) -> CheckReport:
    repo = open_project(project_path)
    project = _Project(repo)
    report = CheckReport(
        project=str(Path(repo.workdir or repo.path).resolve()),
        head=None if project.head is None else str(project.head.id),
        checked=0,
    )
    if project.head is None or report.head is None:
        return report
    # Many memories name the same path from the same base: each is looked up once.
    seen: dict[tuple[pygit2.Oid | None, str, str], AnchorFinding | None] = {}
    for memory in memories:
        if memory.extra.get(VERIFY_KEY) is True:
            report.checked += 1
            reason = str(memory.extra.get(REASON_KEY) or "")
            found = CheckedMemory(
                memory.id, memory.path, memory.title, memory.updated_at, None, True, reason
            )
        else:
            # Every project path it names, anchors first (most memories name none: no parse).
            anchors = anchors_of(memory.extra)
            body = backtick_paths(memory.body) if "`" in memory.body else []
            named = [(p, "anchor") for p in anchors] + [
                (p, "body") for p in body if p not in anchors
            ]
            if not named:
                continue
            report.checked += 1
            base = project.base(memory.updated_at)
            base_id = None if base is None else base.id
            findings = []
            for path, source in named:
                key = (base_id, path, source)
                if key not in seen:
                    seen[key] = _finding(project, base, path, source)
                if (finding := seen[key]) is not None:
                    findings.append(finding)
            if not findings:
                continue
            found = CheckedMemory(
                memory.id,
                memory.path,
                memory.title,
                memory.updated_at,
                None if base_id is None else str(base_id),
                reason=f"project {report.head[:12]}: " + "; ".join(f.describe() for f in findings),
                findings=findings,
            )
        report.memories.append(found)
    return report


def check_project(
    store: Store, project_path: str | Path, *, flag: bool = False, agent: str | None = None
) -> CheckReport:
    """Current memories whose named project files changed since they were written; ``flag``
    sets ``verify`` and ``verify_reason`` on the newly found ones, one commit per scope."""
    records = store.list()
    report = _check(records, project_path)
    if not flag:
        return report
    scopes = {r.id: r.store_scope for r in records}
    by_scope: dict[Any, list[CheckedMemory]] = {}
    for checked in report.memories:
        if not checked.already_flagged:
            by_scope.setdefault(scopes.get(checked.id), []).append(checked)
    for scope, group in by_scope.items():
        message = f"check: flag {len(group)} memories for verification"
        with store.transaction(message, scope=scope) as tx:
            for checked in group:
                store.update(
                    checked.id, extra={VERIFY_KEY: True, REASON_KEY: checked.reason}, agent=agent
                )
        if tx.commit is not None:
            report.commits.append(tx.commit)
        report.flagged.extend(c.id for c in group)
    return report
