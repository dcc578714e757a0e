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
import functools
import json
import marshal
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base.clock import format_timestamp, to_utc
from gitmem.base.errors import InvalidInputError
from gitmem.features.lifecycle import records as records_module
from gitmem.features.lifecycle.records import MemoryRecord, current_records
from gitmem.git.objects import tree_entry

if TYPE_CHECKING:
    from gitmem.store.core import Store

VERIFY_KEY = "verify"
REASON_KEY = "verify_reason"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The patterns :func:`backtick_paths` reads bodies with, compiled on first use: a warm
    hook run takes what each memory names from the cache and never needs them."""
    # Fenced code blocks are examples, not references: their spans are not read.
    fence = re.compile(
        r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)", re.M | re.S
    )
    span = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
    # The content of a span that is a path: optional ./ prefixes, /-separated parts, an
    # optional trailing / (a folder), an optional location (:12, :12:3, :12-40, #L12-L40).
    span_path = re.compile(
        r"\s*(?:\./)*([A-Za-z0-9_.@+\-]+(?:/[A-Za-z0-9_.@+\-]+)*)(/?)"
        r"(?::\d+(?:[:-]\d+)?|#L\d+(?:-L?\d+)?)?\s*"
    )
    extension = re.compile(r"[^/.][^/]*\.[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*$")
    return fence, span, span_path, extension


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
    fence, span, span_path, extension = _patterns()
    text = fence.sub("", body) if ("```" in body or "~~~" in body) else body
    out: list[str] = []
    seen: set[str] = set()
    for content in span.findall(text):
        if "/" not in content and "." not in content:
            continue  # most code spans (names, calls) end here, cheaply
        match = span_path.fullmatch(content)
        if match is None:
            continue
        path, slash = match.groups()
        if not slash and "/" not in path and not extension.fullmatch(path):
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
        # The negated running minimum of the chain's committer times: ascending whatever
        # order the times come in, so the first commit not newer than a time is a bisection.
        self._floor: list[int] = []
        self._walker: pygit2.Commit | None = self.head
        self._bases: dict[int, pygit2.Commit | None] = {}
        self._entries: dict[tuple[str, str], pygit2.Oid | None] = {}
        self._renames: dict[pygit2.Oid, dict[str, str]] = {}
        self._changes: dict[pygit2.Oid, tuple[dict[str, str], list[str]]] = {}
        self._diffs: dict[pygit2.Oid, pygit2.Diff] = {}

    def base(self, when: dt.datetime) -> pygit2.Commit | None:
        """The newest first-parent commit at or before ``when`` (walking only as far as needed)."""
        return self.base_at(int(to_utc(when).timestamp()))

    def base_at(self, target: int) -> pygit2.Commit | None:
        """:meth:`base` for a time in whole seconds since the epoch (truncated, as
        ``int(datetime.timestamp())``)."""
        if target in self._bases:
            return self._bases[target]
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
        found = self._chain[i] if i < len(self._chain) else None
        self._bases[target] = found
        return found

    def entry(self, commit: pygit2.Commit, path: str) -> pygit2.Oid | None:
        key = (str(commit.id), path)
        if key not in self._entries:
            try:
                entry = tree_entry(commit.tree, path)
            except ValueError:
                entry = None
            self._entries[key] = entry.id if entry is not None else None
        return self._entries[key]

    def changes(self, base: pygit2.Commit) -> tuple[dict[str, str], list[str]]:
        """Files changed between ``base`` and HEAD (path -> changed/deleted/added), and their
        paths sorted (for :func:`_holds_change`): one tree diff per distinct base, unchanged
        subtrees skipped."""
        key = base.id
        found = self._changes.get(key)
        if found is None:
            assert self.head is not None
            files: dict[str, str] = {}
            if key != self.head.id:
                diff = self.repo.diff(base, self.head)
                self._diffs[key] = diff  # kept for renames(): find_similar works on it
                # status_char() is a plain str; .status builds an enum member per delta,
                # which cost more than the diff itself on a large project.
                for delta in diff.deltas:
                    status = delta.status_char()
                    if status == "D":
                        files[delta.old_file.path] = "deleted"
                    elif status == "A":
                        files[delta.new_file.path] = "added"
                    else:
                        files[delta.old_file.path] = "changed"
            found = self._changes[key] = (files, sorted(files))
        return found

    def renames(self, base: pygit2.Commit) -> dict[str, str]:
        """Where files gone since ``base`` went (old path -> new path), by git's rename
        detection between base and HEAD; computed once per base, on the diff of
        :meth:`changes`."""
        key = base.id
        found = self._renames.get(key)
        if found is None:
            assert self.head is not None
            self.changes(base)
            diff = self._diffs.get(key)
            if diff is None:
                diff = self.repo.diff(base, self.head)
            diff.find_similar()
            found = self._renames[key] = {
                d.old_file.path: d.new_file.path for d in diff.deltas if d.status_char() == "R"
            }
        return found


def _gone(project: _Project, base: pygit2.Commit, path: str, source: str) -> AnchorFinding:
    moved = project.renames(base).get(path)
    if moved is not None:
        return AnchorFinding(path, "renamed", source, moved)
    return AnchorFinding(path, "deleted", source)


def _holds_change(ordered: list[str], folder: str) -> bool:
    """Whether a changed file lies under ``folder``: the paths under it sort together, right
    after ``folder/``, so one bisection finds the first (cheaper than a set of every
    changed file's parent folders, built per base)."""
    prefix = folder + "/"
    i = bisect.bisect_left(ordered, prefix)
    return i < len(ordered) and ordered[i].startswith(prefix)


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
    files, ordered = project.changes(base)
    status = files.get(path)
    if status == "changed":
        return AnchorFinding(path, "changed", source)
    if status == "deleted":
        return _gone(project, base, path, source)
    if status == "added":
        return AnchorFinding(path, "added", source) if source == "anchor" else None
    if _holds_change(ordered, path):
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


def named_paths(memory: MemoryRecord) -> list[tuple[str, str]]:
    """(path, source) of every project path a memory names; anchors first."""
    named = [(p, "anchor") for p in anchors_of(memory.extra)]
    seen = {p for p, _ in named}
    named.extend((p, "body") for p in backtick_paths(memory.body) if p not in seen)
    return named


def reason_text(findings: Iterable[AnchorFinding], head: str) -> str:
    return f"project {head[:12]}: " + "; ".join(f.describe() for f in findings)


class _Candidate:
    """One memory as the check sees it: what it names, and enough to report it.

    Made for every current memory on every hook run, so it is a plain slotted object
    and its ``updated_at`` datetime is built only for the memories that get reported.
    """

    __slots__ = (
        "created",
        "flagged",
        "id",
        "named",
        "path",
        "reason",
        "scope",
        "seconds",
        "title",
        "when",
    )

    def __init__(
        self,
        memory_id: str,
        path: str | None,
        title: str | None,
        created: int,
        when: dt.datetime | int,
        seconds: int,
        named: Sequence[tuple[str, str]],
        flagged: bool,
        reason: str,
        scope: Any,
    ) -> None:
        self.id = memory_id
        self.path = path
        self.title = title
        self.created = created
        """``created_at`` in microseconds since the epoch (the order memories are read in)."""
        self.when = when
        """``updated_at``, or its microseconds since the epoch as the index holds them."""
        self.seconds = seconds
        """``updated_at`` in whole seconds, truncated as ``int(datetime.timestamp())``."""
        self.named = named
        self.flagged = flagged
        self.reason = reason
        self.scope = scope

    @classmethod
    def of(cls, memory: MemoryRecord) -> _Candidate:
        flagged = memory.extra.get(VERIFY_KEY) is True
        named: Sequence[tuple[str, str]] = ()
        if flagged:
            pass
        elif memory.named is not None:
            named = memory.named
        elif "`" in memory.body or "anchors" in memory.extra:
            named = named_paths(memory)
        return cls(
            memory.id,
            memory.path,
            memory.title,
            (to_utc(memory.created_at) - _EPOCH) // _MICROSECOND,
            memory.updated_at,
            int(to_utc(memory.updated_at).timestamp()),
            named,
            flagged,
            str(memory.extra.get(REASON_KEY) or "") if flagged else "",
            memory.store_scope,
        )

    def updated_at(self) -> dt.datetime:
        when = self.when
        return records_module._when(when) if isinstance(when, int) else when

    def checked(
        self, base: str | None, findings: list[AnchorFinding], reason: str
    ) -> CheckedMemory:
        return CheckedMemory(
            self.id,
            self.path,
            self.title,
            self.updated_at(),
            base,
            findings,
            already_flagged=self.flagged,
            reason=reason,
        )


_UNSEEN = AnchorFinding("", "", "")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _examine(
    project: _Project,
    memory: _Candidate,
    seen: dict[tuple[pygit2.Oid | None, str, str], AnchorFinding | None],
) -> tuple[str | None, list[AnchorFinding]]:
    """The base (hex) a memory that names paths compares from, and what it finds there."""
    base = project.base_at(memory.seconds)
    base_id = None if base is None else base.id
    findings: list[AnchorFinding] = []
    for path, source in memory.named:
        # Many memories name the same path and compare from the same base: each
        # (base, path, source) is looked up once.
        key = (base_id, path, source)
        finding = seen.get(key, _UNSEEN)
        if finding is _UNSEEN:
            finding = seen[key] = _finding(project, base, path, source)
        if finding is not None:
            findings.append(finding)
    return (None if base is None else str(base.id)), findings


_Outcome = tuple[_Candidate, str | None, list[AnchorFinding]]
"""A checked memory (flagged, or naming paths), its base and its findings."""


def _outcomes(project: _Project, candidates: Iterable[_Candidate]) -> list[_Outcome]:
    seen: dict[tuple[pygit2.Oid | None, str, str], AnchorFinding | None] = {}
    out: list[_Outcome] = []
    for memory in candidates:
        if memory.flagged:
            out.append((memory, None, []))
        elif memory.named:
            out.append((memory, *_examine(project, memory, seen)))
    return out


def _new_report(repo: pygit2.Repository, project: _Project) -> CheckReport:
    return CheckReport(
        project=str(Path(repo.workdir or repo.path).resolve()),
        head=None if project.head is None else str(project.head.id),
        checked=0,
    )


def _fill(report: CheckReport, outcomes: Iterable[_Outcome]) -> CheckReport:
    assert report.head is not None
    for memory, base, findings in outcomes:
        report.checked += 1
        if memory.flagged:
            report.memories.append(memory.checked(None, [], memory.reason))
        elif findings:
            report.memories.append(
                memory.checked(base, findings, reason_text(findings, report.head))
            )
    return report


def _check(candidates: Iterable[_Candidate], project_path: str | Path) -> CheckReport:
    repo = open_project(project_path)
    project = _Project(repo)
    report = _new_report(repo, project)
    if project.head is None:
        return report
    return _fill(report, _outcomes(project, candidates))


def check_memories(memories: Iterable[MemoryRecord], project_path: str | Path) -> CheckReport:
    """Compare memories with the project's HEAD (no writes)."""
    return _check((_Candidate.of(m) for m in memories), project_path)


def check_project(
    store: Store,
    project_path: str | Path,
    *,
    flag: bool = False,
    agent: str | None = None,
    incremental: bool = True,
) -> CheckReport:
    """Report current memories whose named project files changed since the memory was
    written; with ``flag``, set ``verify: true`` and ``verify_reason`` on the newly
    found ones in one commit per store scope (already flagged ones are left alone).

    Without ``flag`` (as the hooks run it) and with the index on, the answer is carried
    over from the previous run when the store is where it was and the project moved by
    one commit (see :func:`_advance`); ``incremental=False`` always checks everything
    and leaves the saved run alone. The answers are the same either way."""
    if not flag:
        if incremental and store.use_index:
            return _check_incremental(store, project_path)
        return _check(_candidates(store), project_path)
    candidates = _candidates(store)
    report = _check(candidates, project_path)
    todo = [m for m in report.memories if not m.already_flagged]
    by_scope: dict[Any, list[CheckedMemory]] = {}
    scopes = {c.id: c.scope for c in candidates}
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
_CACHE_VERSION = 2
_CACHE_TABLE = (
    "CREATE TABLE IF NOT EXISTS named2 "
    "(blob TEXT PRIMARY KEY, named TEXT NOT NULL, flagged INTEGER NOT NULL, reason TEXT NOT NULL)"
)
_SOURCE_CODES = {"anchor": "a", "body": "b"}
_SOURCES = {"a": "anchor", "b": "body"}


def _encode_named(named: Sequence[tuple[str, str]]) -> str:
    # One string, split without a JSON parser on every hook run: a source letter then the
    # path, NUL-separated (normalize_path and backtick_paths never let a NUL through).
    return "\x00".join(_SOURCE_CODES[source] + path for path, source in named)


def _decode_named(text: str) -> tuple[tuple[str, str], ...]:
    if not text:
        return ()
    return tuple((item[1:], _SOURCES[item[0]]) for item in text.split("\x00"))


def _open_cache(store: Store, scope: Any) -> sqlite3.Connection:
    cache = sqlite3.connect(store.db(scope).state_dir / _CACHE_NAME, timeout=5)
    try:
        if cache.execute("PRAGMA user_version").fetchone()[0] != _CACHE_VERSION:
            # An older layout (one JSON column per blob): replaced, it is derived state.
            cache.execute("DROP TABLE IF EXISTS named")
            cache.execute(_CACHE_TABLE)
            cache.execute(f"PRAGMA user_version = {_CACHE_VERSION}")
            cache.commit()
    except BaseException:
        cache.close()
        raise
    return cache


def _parse(body: str, extra_text: str) -> tuple[str, int, str]:
    """What a memory file names, whether it is flagged and why, as the cache holds them."""
    extra = records_module._extra(extra_text)
    probe = MemoryRecord("", None, None, _EPOCH, _EPOCH, body, extra)
    flagged = extra.get(VERIFY_KEY) is True
    reason = str(extra.get(REASON_KEY) or "") if flagged else ""
    return _encode_named(named_paths(probe)), int(flagged), reason


def _cached_candidates(store: Store, scope: Any) -> list[_Candidate] | None:
    """The current memories of one scope, with what each names from a cache keyed by blob
    id (derived state beside the index): a file's content decides what it names, so only
    new blobs are parsed. None when the index or the cache cannot answer."""
    index = store.index(scope)
    try:
        rows = index.rows(("id", "path", "title", "created_us", "updated_us", "blob"))
        cache = _open_cache(store, scope)
        try:
            wanted = {r[5] for r in rows}
            known = {
                b: (n, f, why)
                for b, n, f, why in cache.execute("SELECT blob, named, flagged, reason FROM named2")
                if b in wanted
            }
            missing_ids = [r[0] for r in rows if r[5] not in known]
            fresh: list[tuple[str, str, int, str]] = []
            if missing_ids:
                for blob, body, extra in index.rows(
                    ("blob", "body", "extra"),
                    ids=missing_ids,
                    include_superseded=True,
                    include_archived=True,
                ):
                    if blob not in known:
                        known[blob] = _parse(body, extra)
                        fresh.append((blob, *known[blob]))
            if fresh:
                if len(known) < 2 * len(wanted):
                    cache.executemany("INSERT OR REPLACE INTO named2 VALUES (?, ?, ?, ?)", fresh)
                else:  # mostly old blobs: start over with the current ones
                    cache.execute("DELETE FROM named2")
                    cache.executemany(
                        "INSERT INTO named2 VALUES (?, ?, ?, ?)",
                        [(b, *entry) for b, entry in known.items() if b in wanted],
                    )
                cache.commit()
        finally:
            cache.close()
    except (sqlite3.DatabaseError, OSError, ValueError):
        return None
    out = []
    for memory_id, path, title, created_us, updated_us, blob in rows:
        entry = known.get(blob)
        if entry is None:
            return None  # the index moved on between the two queries: read it the slow way
        named, flagged, reason = entry
        out.append(
            _Candidate(
                memory_id,
                path,
                title,
                created_us,
                updated_us,
                int(updated_us / 1_000_000),  # as int(datetime.timestamp()) truncates
                _decode_named(named),
                bool(flagged),
                reason,
                index.scope,
            )
        )
    return out


def _candidates(store: Store) -> list[_Candidate]:
    """The current memories with the paths they name, oldest first: from the cache where
    the index is on, else from :func:`current_records` (the same answers either way)."""
    out: list[_Candidate] = []
    for scope in store.scopes:
        found = _cached_candidates(store, scope) if store.use_index else None
        if found is None:
            found = [_Candidate.of(r) for r in current_records(store, scope=scope)]
        out.extend(found)
    if len(store.scopes) > 1:  # each scope's list is already oldest first
        out.sort(key=lambda c: (c.created, c.id))
    return out


# -- carrying a run over to the next project commit ---------------------------------------

_RUN_TABLE = (
    "CREATE TABLE IF NOT EXISTS runs (project TEXT PRIMARY KEY, key TEXT NOT NULL, "
    "head TEXT NOT NULL, outcomes BLOB NOT NULL)"
)
_REGULAR = (0o100644, 0o100755)


def _config(config: pygit2.Config, name: str) -> str | None:
    return str(config[name]) if name in config else None


def _run_key(store: Store, repo: pygit2.Repository) -> str:
    """What a saved run is valid for besides the project HEAD: every store scope at its tip
    (the memories, what they name, and their times follow from it) and the config that
    steers git's rename detection."""
    tips = []
    for scope in store.scopes:
        db = store.db(scope)
        tip = db.tip()
        tips.append([str(scope), str(db.path), None if tip is None else str(tip.id)])
    config = repo.config
    renames = [_config(config, k) for k in ("diff.renames", "diff.renameLimit")]
    return json.dumps([_CACHE_VERSION, _SAVED_FIELDS, tips, renames])


_Saved = tuple[Any, ...]
"""One checked memory as a saved run holds it: id, path, title, created and updated (µs),
updated (whole seconds), named paths (:func:`_encode_named`), flagged, reason, base and
findings (tuples of path, kind, source, new path) and their description (the reason
without its head). Plain values: the run is kept with
:mod:`marshal`, which reads 10k of them in milliseconds and builds nothing but them."""


_SAVED_FIELDS = 12


def _saved(outcome: _Outcome) -> _Saved | None:
    m, base, findings = outcome
    if not isinstance(m.when, int):
        return None  # read without the index: not carried over
    return (
        m.id,
        m.path,
        m.title,
        m.created,
        m.when,
        m.seconds,
        _encode_named(m.named),
        m.flagged,
        m.reason,
        base,
        tuple((f.path, f.kind, f.source, f.new_path) for f in findings),
        "; ".join(f.describe() for f in findings),
    )


def _candidate_of(row: _Saved) -> _Candidate:
    mid, path, title, created, when, seconds, named, flagged, reason = row[:9]
    return _Candidate(
        mid, path, title, created, when, seconds, _decode_named(named), flagged, reason, None
    )


def _fill_saved(report: CheckReport, rows: Iterable[_Saved]) -> CheckReport:
    """:func:`_fill` from saved rows: objects are built only for the memories reported."""
    assert report.head is not None
    head = reason_text([], report.head)  # "project <head>: ", as reason_text starts
    # Findings are immutable and many memories share one (as a full run's do): built once.
    made: dict[tuple[str, str, str, str | None], AnchorFinding] = {}
    for row in rows:
        report.checked += 1
        if row[7]:
            report.memories.append(
                CheckedMemory(
                    row[0],
                    row[1],
                    row[2],
                    records_module._when(row[4]),
                    None,
                    [],
                    already_flagged=True,
                    reason=row[8],
                )
            )
        elif row[10]:
            findings = [made.get(f) or made.setdefault(f, AnchorFinding(*f)) for f in row[10]]
            report.memories.append(
                CheckedMemory(
                    row[0],
                    row[1],
                    row[2],
                    records_module._when(row[4]),
                    row[9],
                    findings,
                    reason=head + row[11],
                )
            )
    return report


def _regular(commit: pygit2.Commit, path: str) -> bool:
    try:
        entry = tree_entry(commit.tree, path)
    except ValueError:
        return False
    return entry is not None and entry.type_str == "blob" and int(entry.filemode) in _REGULAR


def _advance(
    project: _Project, head: str, rows: list[_Saved], renames_plain: bool
) -> list[_Saved] | None:
    """The outcomes a full run at the project's HEAD would give, from those of the run at
    ``head``, when HEAD's first parent is ``head`` (None: run the whole check).

    Why it is exact: HEAD's first-parent chain is the old one with HEAD in front, and a
    memory's base is the first commit of the chain not newer than it, so a memory older
    than HEAD keeps its base, and its finding for a path can only differ
    when the new commit changed that path or something under it -- or,
    for a path gone since the base, when the new commit moved what git's rename detection
    (between base and HEAD) pairs: its sources are the files deleted and its targets the
    files added since the base, so a commit that only edits regular files present at the
    base changes neither. Those memories, and the ones not older than HEAD (whose base
    becomes HEAD), are checked again with the same code as a full run; the others keep
    their findings."""
    now = project.head
    assert now is not None
    if str(now.id) == head:
        return rows
    if not now.parents or str(now.parents[0].id) != head:
        return None
    parent = now.parents[0]
    touched: set[str] = set()
    for delta in project.repo.diff(parent, now).deltas:
        touched.add(delta.old_file.path)
        touched.add(delta.new_file.path)
    # A named path is touched when it is a changed file or a folder above one.
    above = set(touched)
    for path in touched:
        i = path.find("/")
        while i != -1:
            above.add(path[:i])
            i = path.find("/", i + 1)
    stable: dict[str | None, bool] = {}

    def renames_kept(base: str | None) -> bool:
        if not touched:
            return True
        if base not in stable:
            stable[base] = (
                base is not None
                and renames_plain
                and all(
                    _regular(commit, p) and _regular(parent, p) and _regular(now, p)
                    for commit in (project.repo[base].peel(pygit2.Commit),)
                    for p in touched
                )
            )
        return stable[base]

    seen: dict[tuple[pygit2.Oid | None, str, str], AnchorFinding | None] = {}
    out: list[_Saved] = []
    t1 = now.commit_time
    for row in rows:
        if row[7]:  # flagged: reported as it is, whatever the project does
            out.append(row)
            continue
        again = (
            row[5] >= t1
            or any(item[1:] in above for item in row[6].split("\x00"))
            or (any(f[1] in ("deleted", "renamed") for f in row[10]) and not renames_kept(row[9]))
        )
        if again:
            memory = _candidate_of(row)
            fresh = _saved((memory, *_examine(project, memory, seen)))
            if fresh is None:
                return None
            row = fresh
        out.append(row)
    return out


def _check_incremental(store: Store, project_path: str | Path) -> CheckReport:
    """:func:`_check` of every current memory, carried over from the saved run where
    :func:`_advance` can, and saved for the next one."""
    repo = open_project(project_path)
    project = _Project(repo)
    report = _new_report(repo, project)
    if project.head is None:
        return report
    key = _run_key(store, repo)
    value = _config(repo.config, "diff.renames") or "true"
    renames_plain = value.strip().lower() not in ("copies", "copy")
    try:
        cache = _open_cache(store, None)
    except (sqlite3.DatabaseError, OSError):
        return _fill(report, _outcomes(project, _candidates(store)))
    try:
        rows: list[_Saved] | None = None
        try:
            cache.execute(_RUN_TABLE)
            found = cache.execute(
                "SELECT key, head, outcomes FROM runs WHERE project = ?", (report.project,)
            ).fetchone()
            if found is not None and found[0] == key:
                saved = marshal.loads(found[2])
                if not isinstance(saved, list) or any(
                    type(row) is not tuple or len(row) != _SAVED_FIELDS for row in saved
                ):
                    raise ValueError("not a saved run")
                rows = _advance(project, found[1], saved, renames_plain)
        except (sqlite3.DatabaseError, ValueError, TypeError, EOFError, IndexError):
            rows = None  # unreadable: derived state, checked again in full
        outcomes: list[_Outcome] = []
        if rows is None:
            outcomes = _outcomes(project, _candidates(store))
            every = [_saved(o) for o in outcomes]
            rows = [row for row in every if row is not None]
            if len(rows) < len(every):
                rows = None  # read by the scan (the index failed): not carried over
        try:
            if rows is None:
                cache.execute("DELETE FROM runs WHERE project = ?", (report.project,))
            else:
                cache.execute(
                    "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?)",
                    (report.project, key, report.head, marshal.dumps(rows)),
                )
            cache.commit()
        except sqlite3.DatabaseError:
            pass  # derived state: the next run checks everything
    finally:
        cache.close()
    return _fill(report, outcomes) if rows is None else _fill_saved(report, rows)
