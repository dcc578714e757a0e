"""``Store.log``: the commits, filtered by trailers, by the files they touched, by category
(the audit commands above use the same functions)."""

from __future__ import annotations

import datetime as dt
import fnmatch
import heapq
from collections.abc import Iterator, Sequence

import pygit2

from gitmem.base.trailers import (
    AGENT_TRAILER,
    ID_TRAILER,
    IDS_UNLISTED_TRAILER,
    OP_TRAILER,
    SESSION_TRAILER,
    SUPERSEDES_TRAILER,
    parse_trailers,
)
from gitmem.format import memfile
from gitmem.format.layout import id_from_path, memory_path
from gitmem.format.model import Op, Scope
from gitmem.git.db import GitDB
from gitmem.git.diff import blob_at, commit_changed_paths, memory_blob
from gitmem.git.objects import author_time, blob_data, get_commit
from gitmem.store.inputs import valid_time
from gitmem.store.results import LogEntry


def path_matches(path: str, pattern: str) -> bool:
    """A file, a directory (its files), or a glob (``memories/*/mem_5f*``)."""
    pattern = pattern.strip("/")
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    return path == pattern or path.startswith(pattern + "/")


def touches(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    *,
    path: str | None = None,
    category: str | None = None,
) -> bool:
    """Whether ``commit`` changed a file under ``path`` and/or a memory of ``category`` (as it
    was after the commit, or before it when the commit deleted it)."""
    paths = commit_changed_paths(commit)
    if path is not None:
        paths = {p for p in paths if path_matches(p, path)}
    if category is None:
        return bool(paths)
    parent = commit.parents[0] if commit.parents else None
    for changed in paths:
        if id_from_path(changed) is None:
            continue
        oid = blob_at(commit.tree, changed)
        if oid is None and parent is not None:
            oid = blob_at(parent.tree, changed)
        memory = memfile.read(blob_data(repo, oid), changed)[0] if oid is not None else None
        if memory is not None and memory.category == category:
            return True
    return False


def read_log(
    repositories: Sequence[tuple[GitDB, Scope]],
    *,
    agent: str | None = None,
    op: str | Op | None = None,
    id: str | None = None,
    since: str | dt.datetime | dt.date | None = None,
    until: str | dt.datetime | dt.date | None = None,
    limit: int | None = None,
    path: str | None = None,
    category: str | None = None,
) -> list[LogEntry]:
    """``Store.log``: the commits of ``repositories``, newest first, filtered by the facts in
    their trailers, the files they changed (``path``) and the category of the memories they
    changed (``category``)."""
    since_dt = valid_time(since, "since")
    until_dt = valid_time(until, "until")
    entries: list[LogEntry] = []
    if limit == 0:
        return entries
    for db, scope in repositories:
        # With a limit, the newest `limit` entries by author time are kept as the walk
        # (newest commit time first) goes, and it stops at a commit older than all of them:
        # a call costs its page, not the history (a commit's author time is never after
        # its commit time, but for clocks set by hand).
        kept: list[tuple[dt.datetime, int, LogEntry]] = []
        walk = db.walk() if limit is None else _newest_first(db)
        for n, commit in enumerate(walk):
            full = limit is not None and kept and len(kept) >= limit
            if full and commit.commit_time < kept[0][0].timestamp():
                break
            entry = _log_entry(commit, scope)
            if since_dt and entry.time < since_dt:
                continue
            if until_dt and entry.time > until_dt:
                continue
            if agent and agent not in {entry.agent, entry.author}:
                continue
            if op and str(op) not in entry.ops:
                continue
            # A bulk write names its first ids only: for the rest, whether it changed the file.
            if (
                id
                and id not in entry.ids
                and id not in entry.supersedes
                and not (entry.unlisted and _changed_file(commit, memory_path(id)))
            ):
                continue
            if (path or category) and not touches(db.repo, commit, path=path, category=category):
                continue
            if limit is None:
                entries.append(entry)
            elif len(kept) < limit:
                heapq.heappush(kept, (entry.time, -n, entry))
            elif limit:
                heapq.heappushpop(kept, (entry.time, -n, entry))
        entries.extend(entry for _, _, entry in sorted(kept, key=lambda k: -k[1]))
    entries.sort(key=lambda e: e.time, reverse=True)
    return entries[:limit] if limit is not None else entries


def _newest_first(db: GitDB) -> Iterator[pygit2.Commit]:
    """The branch's commits by commit time, newest first, read as they are reached: libgit2
    sorts by time (or topologically) only after reading every commit (100,000: 9 s)."""
    tip = db.tip()
    if tip is None:
        return
    queue = [(-tip.commit_time, str(tip.id), tip)]
    seen = {tip.id}
    while queue:
        _, _, commit = heapq.heappop(queue)
        yield commit
        for parent in commit.parents:
            if parent.id not in seen:
                seen.add(parent.id)
                heapq.heappush(queue, (-parent.commit_time, str(parent.id), parent))


def _changed_file(commit: pygit2.Commit, path: str) -> bool:
    """Whether ``commit`` changed the memory at ``path`` (against its first parent; at
    either of a plain id's paths, so the migration to format 4's rename is no change)."""
    parent = commit.parents[0] if commit.parents else None
    before = memory_blob(parent.tree, path) if parent is not None else None
    return memory_blob(commit.tree, path) != before


def removed_ids(repo: pygit2.Repository, commit_hex: str) -> list[str]:
    """The ids of the memory files a commit removed (against its first parent): for a
    bulk delete, whose trailers name its first ids only."""
    commit = get_commit(repo, commit_hex)
    return [
        memory_id
        for path in sorted(commit_changed_paths(commit))
        if memory_blob(commit.tree, path) is None and (memory_id := id_from_path(path)) is not None
    ]


def _log_entry(commit: pygit2.Commit, scope: Scope) -> LogEntry:
    trailers = parse_trailers(commit.message)
    return LogEntry(
        commit=str(commit.id),
        time=author_time(commit),
        author=commit.author.name,
        author_email=commit.author.email,
        subject=commit.message.splitlines()[0] if commit.message else "",
        ops=[v for k, v in trailers if k == OP_TRAILER],
        ids=[v for k, v in trailers if k == ID_TRAILER],
        supersedes=[v for k, v in trailers if k == SUPERSEDES_TRAILER],
        agent=next((v for k, v in trailers if k == AGENT_TRAILER), None),
        session=next((v for k, v in trailers if k == SESSION_TRAILER), None),
        scope=scope,
        unlisted=_count(next((v for k, v in trailers if k == IDS_UNLISTED_TRAILER), "0")),
    )


def _count(text: str) -> int:
    """A count trailer's value; a hand-made commit's nonsense counts as "some" (1)."""
    try:
        return max(0, int(text))
    except ValueError:
        return 1
