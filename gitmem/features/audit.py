"""Audit: who wrote what (``gitmem log --format``, :func:`blame`, :func:`diff`), and taking
it back (:func:`undo`: an agent session or one commit, refused when later writes depend on it).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import ConflictError, GitmemError, InvalidInputError, NotFoundError
from gitmem.base.printable import printable
from gitmem.base.trailers import (
    AGENT_TRAILER,
    ID_TRAILER,
    OP_TRAILER,
    SESSION_TRAILER,
    UNDOES_TRAILER,
    CommitSpec,
    agent_author,
    parse_trailers,
)
from gitmem.features.review import (
    FieldChange,
    body_diff,
    field_changes,
    memory_paths,
    read_pair,
    resolve_commit,
)
from gitmem.format import memfile
from gitmem.format.layout import check_id, id_from_path, memory_path, one_by_prefix
from gitmem.git.db import GitDB
from gitmem.git.diff import blob_at, commit_changed_paths, memory_blob
from gitmem.git.objects import Snapshot, author_time, blob_data, get_commit

if TYPE_CHECKING:
    from gitmem.store.core import Store

UNDO_OP = "undo"
LOG_FIELDS = (
    "commit",
    "short",
    "time",
    "author",
    "email",
    "agent",
    "session",
    "subject",
    "ops",
    "ids",
    "supersedes",
    "scope",
)
_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


# -- log filters ---------------------------------------------------------------------------------


def format_entry(template: str, values: Mapping[str, Any]) -> str:
    """``gitmem log --format``: ``{field}`` placeholders (LOG_FIELDS), ``\\t``, ``\\n``; a
    field's control characters are shown escaped (a teammate writes subjects and authors)."""
    unknown = [name for name in _PLACEHOLDER_RE.findall(template) if name not in LOG_FIELDS]
    if unknown:
        raise InvalidInputError(
            f"unknown log field {{{unknown[0]}}}: use "
            + ", ".join("{" + name + "}" for name in LOG_FIELDS)
        )

    def value(match: re.Match[str]) -> str:
        item = values.get(match.group(1))
        if isinstance(item, list):
            return printable(",".join(str(x) for x in item))
        return "" if item is None else printable(str(item))

    text = template.replace("\\t", "\t").replace("\\n", "\n")
    return _PLACEHOLDER_RE.sub(value, text)


# -- blame ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Origin:
    """The commit that wrote a line."""

    commit: str
    time: dt.datetime
    author: str
    agent: str | None
    session: str | None
    memory_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "time": format_timestamp(self.time),
            "author": self.author,
            "agent": self.agent,
            "session": self.session,
            "id": self.memory_id,
        }


@dataclass(frozen=True)
class BlameLine:
    number: int
    text: str
    origin: Origin

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.number, "text": self.text, **self.origin.to_dict()}


def _origin(commit: pygit2.Commit, memory_id: str) -> Origin:
    trailers = parse_trailers(commit.message)
    return Origin(
        commit=str(commit.id),
        time=author_time(commit),
        author=commit.author.name,
        agent=next((v for k, v in trailers if k == AGENT_TRAILER), None),
        session=next((v for k, v in trailers if k == SESSION_TRAILER), None),
        memory_id=memory_id,
    )


def _carry(
    lines: list[str], sources: Iterable[tuple[list[str], list[Origin]]], fresh: Origin
) -> list[Origin]:
    """Each line's origin: from the first source holding it at a matching place, else fresh."""
    out: list[Origin | None] = [None] * len(lines)
    for old_lines, old_origins in sources:
        matcher = difflib.SequenceMatcher(None, old_lines, lines, autojunk=False)
        for block in matcher.get_matching_blocks():
            for n in range(block.size):
                if out[block.b + n] is None:
                    out[block.b + n] = old_origins[block.a + n]
    return [o if o is not None else fresh for o in out]


def blame(store: Store, memory_id: str) -> list[BlameLine]:
    """Which commit (agent, session) wrote each line of the memory's current body (of its
    last one, for a memory a delete removed)."""
    check_id(memory_id)
    current = store.get(memory_id)
    backend_db = store.db(current.store_scope if current is not None else None)
    repo = backend_db.repo
    history = store.history(memory_id)
    chain = list(dict.fromkeys(version.memory_id for version in history))
    memo: dict[pygit2.Oid, tuple[list[str], list[Origin]]] = {}
    last_of: dict[str, pygit2.Oid] = {}
    for version in history:
        if version.memory is None:
            continue
        commit = get_commit(repo, version.commit)
        path = memory_path(version.memory_id)
        oid = memory_blob(commit.tree, path)
        if oid is None:
            continue
        if oid not in memo:
            lines = version.memory.body.splitlines()
            sources = [memo[b] for p in commit.parents if (b := memory_blob(p.tree, path)) in memo]
            position = chain.index(version.memory_id)
            if not sources and position > 0 and chain[position - 1] in last_of:
                # A successor's first version: lines carried over from its predecessor.
                sources = [memo[last_of[chain[position - 1]]]]
            memo[oid] = (lines, _carry(lines, sources, _origin(commit, version.memory_id)))
        last_of[version.memory_id] = oid
    tip = backend_db.tip()
    final = memory_blob(tip.tree, memory_path(memory_id)) if tip is not None else None
    if current is None:
        final = last_of.get(memory_id)
    if final is None or final not in memo:
        raise NotFoundError(f"no history for the current body of {memory_id}")
    lines, origins = memo[final]
    return [
        BlameLine(i + 1, text, origin)
        for i, (text, origin) in enumerate(zip(lines, origins, strict=True))
    ]


# -- diff -----------------------------------------------------------------------------------------


@dataclass
class MemoryDiff:
    id: str
    path: str
    status: str  # added, deleted or changed
    fields: list[FieldChange] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fields": [f.to_dict() for f in self.fields]}


def is_revision(store: Store, value: str) -> bool:
    try:
        return resolve_commit(store.db(), value) is not None
    except GitmemError:
        return False


def diff(
    store: Store, rev1: str, rev2: str | None = None, memory_id: str | None = None
) -> list[MemoryDiff]:
    """Memory-aware diff from ``rev1`` to ``rev2`` (default: the tip), optionally of one memory."""
    db = store.db()
    old, new = resolve_commit(db, rev1), resolve_commit(db, rev2) if rev2 else db.tip()
    if new is None:
        raise NotFoundError("the store has no commits")
    old_snap, new_snap = Snapshot(db.repo, old), Snapshot(db.repo, new)
    if memory_id is not None:
        check_id(memory_id)
        paths = [new_snap.locate(memory_id) or old_snap.locate(memory_id) or memory_path(memory_id)]
    else:
        paths = memory_paths(db.repo, old, new)
    out: list[MemoryDiff] = []
    for path, a, b, (before, _), (after, _) in read_pair(db.repo, old_snap, new_snap, paths):
        status = "added" if a is None else "deleted" if b is None else "changed"
        entry = MemoryDiff(id_from_path(path) or path, path, status)
        if before is not None and after is not None:
            entry.fields = field_changes(before, after)
        if before is not None or after is not None:
            entry.diff, _ = body_diff(
                path, before.body if before else "", after.body if after else "", True
            )
        else:
            old_text, new_text = ((x or b"").decode("utf-8", "replace") for x in (a, b))
            entry.diff, _ = body_diff(path, old_text, new_text, True)
        out.append(entry)
    return out


# -- undo -----------------------------------------------------------------------------------------


@dataclass
class UndoResult:
    commit: str | None
    undone: list[str]
    """The commits reverted, oldest first."""
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class UndoRefusedError(ConflictError):
    """Later writes depend on what would be undone."""

    default_hint = "undo the later writes first (gitmem log --id ID shows them), or edit by hand"


def _targets(db: GitDB, session: str | None, commit: str | None) -> list[pygit2.Commit]:
    if (session is None) == (commit is None):
        raise InvalidInputError("give exactly one of a session or a commit to undo")
    if commit is not None:
        found = resolve_commit(db, commit)
        tip = db.tip()
        if tip is None or not (found.id == tip.id or db.repo.descendant_of(tip.id, found.id)):
            raise NotFoundError(f"commit {commit} is not on the store's branch")
        return [found]
    assert session is not None
    by_session: dict[str, list[pygit2.Commit]] = {}
    for c in db.walk(reverse=True):
        for _key, value in parse_trailers(c.message, (SESSION_TRAILER,)):
            by_session.setdefault(value, []).append(c)
    if session not in by_session:  # a unique prefix of a session will do, as of an id
        names = [name for name in by_session if name.startswith(session)]
        session = one_by_prefix(session, names, what=("session", "sessions")) or session
    if session not in by_session:
        raise NotFoundError(f"no commit of session {session!r} in this store")
    return by_session[session]


def undo(
    store: Store,
    *,
    session: str | None = None,
    commit: str | None = None,
    agent: str | None = None,
    message: str | None = None,
) -> UndoResult:
    """Revert every write of ``session`` (or the one ``commit``) in one new commit; refused,
    with nothing written, when a later commit changed one of those files, a remaining
    memory links to one that would be removed, or for a merge commit."""
    db = store.db()
    targets = _targets(db, session, commit)
    target_ids = {c.id for c in targets}
    for target in targets:
        if len(target.parents) > 1:
            raise UndoRefusedError(
                f"{str(target.id)[:10]} is a merge commit; gitmem undo reverts writes"
            )
        if not target.parents:
            raise UndoRefusedError("the store's first commit cannot be undone")
    # Each path's content before the first target write, and after the last one.
    before: dict[str, bytes | None] = {}
    after: dict[str, pygit2.Oid | None] = {}
    for target in targets:
        for path in sorted(commit_changed_paths(target)):
            if path not in before:
                oid = blob_at(target.parents[0].tree, path)
                before[path] = blob_data(db.repo, oid) if oid is not None else None
            after[path] = blob_at(target.tree, path)
    tip = db.tip()
    assert tip is not None
    # A commit not being undone that changed one of the files after a target did: its
    # change would be thrown away by going back to the content before the target.
    later: dict[str, pygit2.Commit] = {}
    touched: set[str] = set()
    for c in db.walk(reverse=True):
        paths = commit_changed_paths(c) & set(before)
        if c.id in target_ids:
            touched |= paths
            continue
        for path in paths & touched:
            later.setdefault(path, c)
    problems: list[str] = []
    for path in before:
        culprit = later.get(path)
        if culprit is not None or blob_at(tip.tree, path) != after[path]:
            by = f" by {str(culprit.id)[:10]} ({culprit.author.name})" if culprit else ""
            problems.append(f"{id_from_path(path) or path} was changed later{by}")
    removing = {id_from_path(p) for p, data in before.items() if data is None}
    removing.discard(None)
    if removing:
        for memory in store.list(include_superseded=True, include_archived=True):
            if memory.id in removing:
                continue
            links = [memory.supersedes] if memory.supersedes else []
            links += [r.id for r in memory.related]
            for link in links:
                if link in removing:
                    problems.append(f"{memory.id} links to {link}, which the undo would remove")
    if problems:
        raise UndoRefusedError("cannot undo: " + "; ".join(problems))
    result = UndoResult(None, [str(c.id) for c in targets])

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        result.restored, result.removed, result.reverted = [], [], []
        for path, data in before.items():
            memory_id = id_from_path(path)
            label = memory_id or path
            if data is None:
                snap.remove(path)
                result.removed.append(label)
            else:
                (result.reverted if snap.exists(path) else result.restored).append(label)
                snap.put(path, memfile.without_derived(data) if memory_id else data)
        what = f"session {session}" if session else f"commit {str(targets[0].id)[:10]}"
        trailers = [(OP_TRAILER, UNDO_OP)]
        trailers += [(ID_TRAILER, i) for i in [id_from_path(p) for p in before] if i]
        trailers += [(UNDOES_TRAILER, str(c.id)) for c in targets]
        if agent:
            trailers.append((AGENT_TRAILER, agent))
        return CommitSpec(
            subject=f"undo: {what}",
            body=message,
            trailers=trailers,
            author=agent_author(agent) if agent else None,
        ), None

    _, oid = db.write(plan)
    result.commit = str(oid) if oid is not None else None
    return result
