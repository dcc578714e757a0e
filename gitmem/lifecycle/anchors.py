"""Code-aware staleness: memories that name files of a project repository.

A memory names project files in two ways:

- ``anchors`` in its front-matter: a list of repo-relative paths (a single
  string is taken as a list of one); a path may also name a directory;
- file paths written in its body as inline code spans (see :func:`backtick_paths`).

:func:`check_project` compares them with the project's ``HEAD``. For each memory
the *base* is the newest commit on HEAD's first-parent chain whose committer time
is at or before the memory's ``updated_at``; a named path is reported when its
object differs between base and HEAD (``changed``), is gone at HEAD (``renamed``
when git's rename detection between base and HEAD finds where it went, else
``deleted``). Explicit anchors are also reported when they were created after the
memory (``added``) or exist in neither (``missing``); body paths only count when
they existed at the base, so a span that merely looks like a path costs nothing.

Cost: one query of the index, one walk down the first-parent chain (stopping at
the oldest memory that names a path), one tree lookup per distinct (base, path),
and one rename-detecting diff per distinct base where a named path disappeared.
No per-memory git walks.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2
from pygit2.enums import DeltaStatus

from gitmem.clock import format_timestamp, to_utc
from gitmem.errors import InvalidInputError
from gitmem.lifecycle import records as records_module
from gitmem.lifecycle.records import MemoryRecord, current_records

if TYPE_CHECKING:
    from gitmem.store import Store

VERIFY_KEY = "verify"
REASON_KEY = "verify_reason"

# Fenced code blocks are examples, not references: their spans are not read.
_FENCE_RE = re.compile(
    r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)", re.M | re.S
)
_SPAN_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# The content of a span that is a path: optional ./ prefixes, /-separated parts, an
# optional trailing / (a folder), an optional location (:12, :12:3, :12-40, #L12-L40).
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
    """File paths written in ``body`` as inline code spans, in order, without repeats.

    A span counts when, after trimming spaces, a leading ``./`` and a trailing
    location (``:12``, ``:12:3``, ``:12-40``, ``#L12``, ``#L12-L40``), it is made of
    letters, digits and ``_ . @ + -`` in ``/``-separated parts (no spaces, no
    ``..``, not absolute, no URL) and either has a ``/`` or ends in an extension
    with a letter (``README.md``, ``src/app.py``, ``docs/``). Spans inside fenced
    code blocks and double-backtick spans are not read.
    """
    text = _FENCE_RE.sub("", body) if ("```" in body or "~~~" in body) else body
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
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    out: list[str] = []
    for item in items:
        path = normalize_path(item) if isinstance(item, str) else None
        if path is not None and path not in out:
            out.append(path)
    return out


@dataclass(frozen=True)
class AnchorFinding:
    path: str
    kind: str
    """changed | deleted | renamed | added | missing"""
    source: str
    """anchor (front-matter) | body (a backtick span)"""
    new_path: str | None = None

    def describe(self) -> str:
        if self.kind == "renamed":
            return f"{self.path} renamed to {self.new_path}"
        return f"{self.path} {self.kind}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "source": self.source,
            "new_path": self.new_path,
        }


@dataclass(frozen=True)
class CheckedMemory:
    id: str
    path: str | None
    title: str | None
    updated_at: dt.datetime
    base: str | None
    """The project commit the memory is compared from (None: older than the history)."""
    findings: list[AnchorFinding]
    already_flagged: bool = False
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "title": self.title,
            "updated_at": format_timestamp(self.updated_at),
            "base": self.base,
            "already_flagged": self.already_flagged,
            "reason": self.reason,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass
class CheckReport:
    project: str
    head: str | None
    checked: int
    """Memories that name at least one project path (flagged ones included)."""
    memories: list[CheckedMemory] = field(default_factory=list)
    """Memories that need verification: new findings, or flagged earlier and not yet verified."""
    flagged: list[str] = field(default_factory=list)
    """Ids flagged by this run (``flag=True``)."""
    commits: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for memory in self.memories:
            for finding in memory.findings:
                out[finding.kind] = out.get(finding.kind, 0) + 1
        return dict(sorted(out.items()))

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
        self._times: list[int] = []  # negated committer times, ascending for bisect
        self._walker: pygit2.Commit | None = self.head
        self._entries: dict[tuple[str, str], pygit2.Oid | None] = {}
        self._renames: dict[str, dict[str, str]] = {}
        self._changes: dict[pygit2.Oid, tuple[dict[str, str], set[str]]] = {}

    def base(self, when: dt.datetime) -> pygit2.Commit | None:
        """The newest first-parent commit at or before ``when`` (walking only as far as needed)."""
        target = int(to_utc(when).timestamp())
        while self._walker is not None and (
            not self._chain or self._chain[-1].commit_time > target
        ):
            commit = self._walker
            self._chain.append(commit)
            self._times.append(-commit.commit_time)
            self._walker = commit.parents[0] if commit.parents else None
        i = bisect.bisect_left(self._times, -target)
        # Committer times along first parents are not always monotonic: take the first
        # commit (from HEAD) that is not newer than the memory.
        while i < len(self._chain) and self._chain[i].commit_time > target:
            i += 1
        return self._chain[i] if i < len(self._chain) else None

    def entry(self, commit: pygit2.Commit, path: str) -> pygit2.Oid | None:
        key = (str(commit.id), path)
        if key not in self._entries:
            try:
                self._entries[key] = commit.tree[path].id
            except (KeyError, ValueError):
                self._entries[key] = None
        return self._entries[key]

    def changes(self, base: pygit2.Commit) -> tuple[dict[str, str], set[str]]:
        """Files changed between ``base`` and HEAD (path -> changed/deleted/added), and the
        folders that hold them: one tree diff per distinct base, unchanged subtrees skipped."""
        key = base.id
        if key not in self._changes:
            assert self.head is not None
            files: dict[str, str] = {}
            if base.id != self.head.id:
                for delta in self.repo.diff(base, self.head).deltas:
                    if delta.status == DeltaStatus.DELETED:
                        files[delta.old_file.path] = "deleted"
                    elif delta.status == DeltaStatus.ADDED:
                        files[delta.new_file.path] = "added"
                    else:
                        files[delta.old_file.path] = "changed"
            folders = {p.rsplit("/", i)[0] for p in files for i in range(1, p.count("/") + 1)}
            self._changes[key] = (files, folders)
        return self._changes[key]

    def renames(self, base: pygit2.Commit) -> dict[str, str]:
        key = str(base.id)
        if key not in self._renames:
            assert self.head is not None
            diff = self.repo.diff(base, self.head)
            diff.find_similar()
            self._renames[key] = {
                d.old_file.path: d.new_file.path
                for d in diff.deltas
                if d.status == DeltaStatus.RENAMED
            }
        return self._renames[key]


def _gone(project: _Project, base: pygit2.Commit, path: str, source: str) -> AnchorFinding:
    moved = project.renames(base).get(path)
    if moved is not None:
        return AnchorFinding(path, "renamed", source, moved)
    return AnchorFinding(path, "deleted", source)


def _finding(
    project: _Project, base: pygit2.Commit | None, path: str, source: str
) -> AnchorFinding | None:
    assert project.head is not None
    if base is None:
        # Older than the project's history: nothing to compare with, but an anchor that
        # names no file at HEAD is still worth saying.
        if source == "anchor" and project.entry(project.head, path) is None:
            return AnchorFinding(path, "missing", source)
        return None
    files, folders = project.changes(base)
    status = files.get(path)
    if status == "changed":
        return AnchorFinding(path, "changed", source)
    if status == "deleted":
        return _gone(project, base, path, source)
    if status == "added":
        return AnchorFinding(path, "added", source) if source == "anchor" else None
    if path in folders:
        before = project.entry(base, path)
        now = project.entry(project.head, path)
        if before is None:
            return AnchorFinding(path, "added", source) if source == "anchor" else None
        if now is None:
            return AnchorFinding(path, "deleted", source)
        return AnchorFinding(path, "changed", source)
    if source == "anchor" and project.entry(project.head, path) is None:
        return AnchorFinding(path, "missing", source)
    return None


def _findings(
    project: _Project, base: pygit2.Commit | None, named: Sequence[tuple[str, str]]
) -> list[AnchorFinding]:
    out = []
    for path, source in named:
        finding = _finding(project, base, path, source)
        if finding is not None:
            out.append(finding)
    return out


def named_paths(memory: MemoryRecord) -> list[tuple[str, str]]:
    """(path, source) of every project path a memory names; anchors first."""
    named = [(p, "anchor") for p in anchors_of(memory.extra)]
    seen = {p for p, _ in named}
    named.extend((p, "body") for p in backtick_paths(memory.body) if p not in seen)
    return named


def reason_text(findings: Iterable[AnchorFinding], head: str) -> str:
    return f"project {head[:12]}: " + "; ".join(f.describe() for f in findings)


def _checked(
    memory: MemoryRecord,
    base: pygit2.Commit | None,
    findings: list[AnchorFinding],
    reason: str,
    *,
    already_flagged: bool = False,
) -> CheckedMemory:
    return CheckedMemory(
        memory.id,
        memory.path,
        memory.title,
        memory.updated_at,
        None if base is None else str(base.id),
        findings,
        already_flagged=already_flagged,
        reason=reason,
    )


def check_memories(memories: Iterable[MemoryRecord], project_path: str | Path) -> CheckReport:
    """Compare memories with the project's HEAD (no writes)."""
    repo = open_project(project_path)
    project = _Project(repo)
    report = CheckReport(
        project=str(Path(repo.workdir or repo.path).resolve()),
        head=None if project.head is None else str(project.head.id),
        checked=0,
    )
    if project.head is None:
        return report
    head_id = str(project.head.id)
    for memory in memories:
        if memory.extra.get(VERIFY_KEY) is True:
            report.checked += 1
            reason = str(memory.extra.get(REASON_KEY) or "")
            report.memories.append(_checked(memory, None, [], reason, already_flagged=True))
            continue
        if memory.named is not None:
            named = list(memory.named)
        elif "`" not in memory.body and "anchors" not in memory.extra:
            continue
        else:
            named = named_paths(memory)
        if not named:
            continue
        report.checked += 1
        base = project.base(memory.updated_at)
        findings = _findings(project, base, named)
        if findings:
            reason = reason_text(findings, head_id)
            report.memories.append(_checked(memory, base, findings, reason))
    return report


def check_project(
    store: Store, project_path: str | Path, *, flag: bool = False, agent: str | None = None
) -> CheckReport:
    """Report current memories whose named project files changed since the memory was
    written; with ``flag``, set ``verify: true`` and ``verify_reason`` on the newly
    found ones in one commit per store scope (already flagged ones are left alone)."""
    records = check_records(store)
    report = check_memories(records, project_path)
    if not flag:
        return report
    todo = [m for m in report.memories if not m.already_flagged]
    by_scope: dict[Any, list[CheckedMemory]] = {}
    scopes = {r.id: r.store_scope for r in records}
    for checked in todo:
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


# -- the paths each memory names, cached by blob ------------------------------------------

_CACHE_NAME = "lifecycle-named.sqlite"
_CACHE_SCHEMA = "CREATE TABLE IF NOT EXISTS named (blob TEXT PRIMARY KEY, named TEXT, extra TEXT)"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _cached_records(store: Store, scope: Any) -> list[MemoryRecord] | None:
    """Records with ``named`` filled from a cache keyed by blob id (derived state beside the
    index): a file's content decides what it names, so only new blobs are parsed."""
    from gitmem import index as index_module

    index = store.index(scope)
    where, params = index_module._filters()
    sql = (
        "SELECT id, path, title, created_us, updated_us, blob "
        f"FROM memories m {where} ORDER BY created_us, id"
    )
    try:
        with index._query() as conn:
            rows = conn.execute(sql, params).fetchall()
            cache = sqlite3.connect(store.db(scope).state_dir / _CACHE_NAME, timeout=5)
            try:
                cache.execute(_CACHE_SCHEMA)
                wanted = {r[5] for r in rows}
                known = {
                    b: (n, e)
                    for b, n, e in cache.execute("SELECT blob, named, extra FROM named")
                    if b in wanted
                }
                missing = sorted(wanted - set(known))
                fresh: list[tuple[str, str, str]] = []
                for i in range(0, len(missing), 500):
                    chunk = missing[i : i + 500]
                    marks = ", ".join("?" for _ in chunk)
                    for blob, body, extra in conn.execute(
                        f"SELECT blob, body, extra FROM memories WHERE blob IN ({marks})", chunk
                    ):
                        small = records_module._extra(extra)
                        probe = MemoryRecord("", None, None, _EPOCH, _EPOCH, body, small)
                        entry = (blob, json.dumps(named_paths(probe)), json.dumps(small))
                        known[blob] = (entry[1], entry[2])
                        fresh.append(entry)
                if fresh:
                    if len(known) < 2 * len(wanted):
                        cache.executemany("INSERT OR REPLACE INTO named VALUES (?, ?, ?)", fresh)
                    else:  # mostly old blobs: start over with the current ones
                        cache.execute("DELETE FROM named")
                        cache.executemany(
                            "INSERT INTO named VALUES (?, ?, ?)",
                            [(b, n, e) for b, (n, e) in known.items()],
                        )
                    cache.commit()
            finally:
                cache.close()
    except (sqlite3.DatabaseError, OSError, ValueError):
        return None
    out = []
    for memory_id, path, title, created_us, updated_us, blob in rows:
        named, extra = known[blob]
        out.append(
            MemoryRecord(
                memory_id,
                path,
                title,
                records_module._when(created_us),
                records_module._when(updated_us),
                "",
                json.loads(extra),
                index.scope,
                tuple((p, src) for p, src in json.loads(named)),
            )
        )
    return out


def check_records(store: Store) -> list[MemoryRecord]:
    """The current memories with the paths they name: from the cache where the index is on,
    else from :func:`current_records` (the same answers either way)."""
    out: list[MemoryRecord] = []
    for scope in store.scopes:
        found = _cached_records(store, scope) if store.use_index else None
        out.extend(found if found is not None else current_records(store, scope=scope))
    out.sort(key=lambda r: (r.created_at, r.id))
    return out
