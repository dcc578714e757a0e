"""What every health check shares: findings, and the context a check reads a store through.

A :class:`Context` holds one scope's repository, its index and the store read straight
from git, each read once per run; the checks in :mod:`gitmem.entry.doctor_repo` and
:mod:`gitmem.entry.doctor_memories` yield :class:`Finding`s from it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmem.base.errors import GitmemError
from gitmem.format.layout import (
    MEMORIES_DIR,
    MEMORY_ROOTS,
    MEMORY_SUFFIX,
    id_from_path,
    is_memory_file,
)
from gitmem.format.model import Memory, Scope
from gitmem.git.db import GitDB
from gitmem.git.objects import Snapshot, blob_data, get_commit, get_tree
from gitmem.store.core import Store
from gitmem.store.discovery import open_store
from gitmem.store.index import Index
from gitmem.store.results import Problem

ERROR, WARNING, INFO = "error", "warning", "info"


SEVERITIES = (ERROR, WARNING, INFO)


@dataclass
class Finding:
    """One problem: what is wrong, how bad, and the command that fixes it."""

    check: str
    severity: str
    message: str
    fix: str | None = None
    """A command (or short instruction) that fixes it."""
    safe: bool = False
    """``doctor --fix`` applies it: it cannot lose or change a memory."""
    scope: str | None = None
    path: str | None = None
    fixed: bool = False
    fix_error: str | None = None
    apply: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "safe": self.safe,
            "scope": self.scope,
            "path": self.path,
            "fixed": self.fixed,
            "fix_error": self.fix_error,
        }


def damaged_finding(check: str, ctx: Context, exc: BaseException, what: str = "") -> Finding:
    """One line for a damaged repository met by ``check``, with the recovery that can work."""
    from gitmem.git.objects import damaged_hint

    if isinstance(exc, GitmemError):
        message = exc.message
    elif isinstance(exc, KeyError):
        message = f"an object is missing from the repository ({exc.args[0] if exc.args else ''})"
    else:
        message = f"git cannot read an object ({exc})"
    prefix = f"{what}: " if what else ""
    return Finding(
        check,
        ERROR,
        f"{prefix}{message}; the other checks that read memories were skipped"
        if what
        else f"{message} (the {check} check stopped there)",
        fix=damaged_hint(str(ctx.db.gitdir)),
    )


@dataclass(frozen=True)
class Entry:
    """What the memory checks need of one memory, from an index row or a decoded file."""

    id: str
    path: str
    blob: str | None
    supersedes: str | None
    related: tuple[tuple[str, str], ...]
    """(id, relationship) of each ``related`` link."""


@dataclass
class IndexView:
    """The index's rows at one commit beside git's tree at that commit."""

    commit: str | None
    rows: list[tuple[Any, ...]]
    """``_ROW_COLUMNS`` of every current memory the index holds, oldest first."""
    problems: list[tuple[str, str]]
    files: dict[str, str]
    """Every memory file git has at ``commit``: path -> blob id."""
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    problem_diff: set[str] = field(default_factory=set)

    @property
    def agrees(self) -> bool:
        return not (self.missing or self.extra or self.stale or self.problem_diff)


_ROW_COLUMNS = ("id", "path", "blob", "supersedes", "related")


CONTENT_SAMPLE = 16
"""Index rows decoded from git and compared field by field on each run (``deep``: all).
Each costs a lookup of the tip commit (about 6 ms at 10k loose objects) and a decode."""


Progress = Callable[[int, int], None]


@dataclass
class Tally:
    """``progress(done, total)`` over a doctor run: each check that goes through the
    memories counts one per memory of its scope (those that walk them one by one step as
    they go), every other check counts one. ``done`` only grows, and ends at ``total``."""

    progress: Progress | None = None
    total: int = 0
    done: int = 0
    _end: int = 0
    _shown: int = -1

    def start(self, weight: int) -> None:
        """A check of ``weight`` units begins."""
        self._end = self.done + max(1, weight)

    def step(self, n: int = 1) -> None:
        """``n`` memories of the current check done (never past its share)."""
        self.done = min(self.done + n, max(self.done, self._end - 1))
        if self.done - self._shown >= max(1, self.total // 200):
            self._report()

    def finish(self) -> None:
        """The current check is done: its whole share counts."""
        self.done = max(self.done, self._end)
        self._report()

    def _report(self) -> None:
        if self.progress is not None and self.done != self._shown:
            self._shown = self.done
            self.progress(self.done, self.total)


@dataclass
class Context:
    """One scope's repository, with what the checks share computed once per run.

    The memory checks read the derived index (no decoding) when its rows match git's tree
    path for path and blob for blob; otherwise, or with ``deep``, every memory is decoded
    from git, as the index would be rebuilt.
    """

    store: Store
    db: GitDB
    scope: Scope
    deep: bool = False
    peers: dict[Scope, Context] = field(default_factory=dict)
    _scan: Store | None = None
    _memories: list[Memory] | None = None
    _problems: list[Problem] | None = None
    _view: IndexView | None = None
    _view_error: str | None = None
    _view_exc: BaseException | None = None
    _entries: list[Entry] | None = None
    fsck: subprocess.Popen[bytes] | None = None
    """``git fsck`` started early, running beside the other checks."""
    tally: Tally = field(default_factory=Tally)
    """How far the run is: the checks that go through memories one by one step it."""

    @property
    def where(self) -> str:
        return shlex.quote(str(self.db.path))

    def reference(self) -> Store:
        """The store read straight from git (no index): what every other view must agree with."""
        if self._scan is None:
            self._scan = open_store(self.db.path, clock=self.store.clock, use_index=False)
        return self._scan

    def memories(self) -> list[Memory]:
        """Every memory as git has it, decoded (read once per run)."""
        if self._memories is None:
            self._memories = self.reference().list(include_superseded=True, include_archived=True)
        return self._memories

    def scanned_problems(self) -> list[Problem]:
        """Files under the memory folders git has that are not valid memories (read once).

        Parsing every memory is most of this cost, so the scan that listed them is not
        repeated when no file is left over: the full scan runs only if some memory file
        under the tip did not come back as a memory.
        """
        if self._problems is None:
            snap = self.db.snapshot()
            parsed = {m.path for m in self.memories()}
            leftover = [
                path
                for root in MEMORY_ROOTS
                for path in snap.iter_files(root)
                if is_memory_file(path) and path not in parsed and snap.read(path) is not None
            ]
            self._problems = self.reference().problems() if leftover else []
        return self._problems

    def view(self) -> IndexView | None:
        """The index beside git (computed once); None if the index cannot be read."""
        if self._view is None and self._view_error is None:
            try:
                self._view = _index_view(self.store.index(self.scope), self.db)
            except Exception as exc:  # any failure of the derived index is a finding
                self._view_error = f"{type(exc).__name__}: {exc}"
                self._view_exc = exc
        return self._view

    def trusted(self) -> IndexView | None:
        """The index view when the memory checks may read it instead of decoding git."""
        if self.deep:
            return None
        view = self.view()
        return view if view is not None and view.agrees else None

    def entries(self) -> list[Entry]:
        """Every memory, oldest first: from the index when it matches git, else decoded."""
        if self._entries is None:
            view = self.trusted()
            if view is not None:
                self._entries = [_row_entry(row) for row in view.rows]
            else:
                snap = self.db.snapshot()
                self._entries = [_memory_entry(m, snap) for m in self.memories()]
        return self._entries

    def problems(self) -> list[tuple[str, str]]:
        """(path, message) of each file under the memory folders that is not a memory."""
        view = self.trusted()
        if view is not None:
            return view.problems
        return [(p.path, p.message) for p in self.scanned_problems()]

    def ever_existed(self, memory_id: str) -> bool:
        """Whether git's history holds a version of ``memory_id`` (a deleted memory)."""
        if self.trusted() is not None:
            with contextlib.suppress(Exception):
                return bool(self.store.index(self.scope).versions([memory_id]))
        try:
            return len(self.reference().history(memory_id)) > 0
        except GitmemError:
            return False


def _row_entry(row: Sequence[Any]) -> Entry:
    memory_id, path, blob, supersedes, related = row
    links = tuple((str(r["id"]), str(r["relationship"])) for r in json.loads(related))
    return Entry(memory_id, path, blob, supersedes, links)


def _memory_entry(memory: Memory, snap: Snapshot) -> Entry:
    path = memory.path or ""
    blob = snap.blob_id(path) if path else None
    return Entry(
        memory.id,
        path,
        str(blob) if blob is not None else None,
        memory.supersedes,
        tuple((r.id, str(r.relationship)) for r in memory.related),
    )


def memory_files(db: GitDB, commit: str | None) -> dict[str, str]:
    """path -> blob id of every memory file at ``commit``: what the index must hold, as the
    index itself and the store's scan see it (regular files under the memory roots)."""
    out: dict[str, str] = {}
    if commit is None:
        return out
    repo = db.repo
    tree = get_commit(repo, commit).tree
    stack: list[tuple[pygit2.Tree, str]] = []
    for root in MEMORY_ROOTS:
        try:
            top = tree[root]
        except KeyError:
            continue
        if top.type_str == "tree":
            stack.append((get_tree(repo, top.id), root))
    while stack:
        folder, prefix = stack.pop()
        for item in folder:
            path = f"{prefix}/{item.name}"
            if item.type_str == "tree":
                stack.append((get_tree(repo, item.id), path))
            elif item.filemode in _REGULAR and is_memory_file(path):
                out[path] = str(item.id)
    return out


_REGULAR = (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE)


def _index_view(index: Index, db: GitDB) -> IndexView:
    """The index's rows and problems beside git's tree at the commit they reflect.

    A query catches the index up to the branch tip first; if the tip did not move while
    the rows were read, they reflect exactly that tip (else read again). Then paths and
    blob ids are compared, and the few files the two disagree about are decoded to say
    how. Content is compared field by field only for a sample (``_check_content``).
    """
    for _attempt in range(5):
        before = db.tip()
        rows = index.rows(_ROW_COLUMNS, include_superseded=True, include_archived=True)
        problems = index.problems()
        after = db.tip()
        commit = str(after.id) if after is not None else None
        if commit == (str(before.id) if before is not None else None):
            break
    view = IndexView(commit, rows, problems, memory_files(db, commit))
    files = view.files
    indexed: dict[str, str] = {}
    for memory_id, path, blob, _supersedes, _related in rows:
        indexed[path] = memory_id
        if path not in files:
            view.extra.append(memory_id)
        elif files[path] != blob or not _id_matches(path, memory_id):
            view.stale.append(memory_id)
    problem_paths = {path for path, _ in problems}
    view.problem_diff = {p for p in problem_paths if p not in files or p in indexed}
    # Files the index has no row for, and files it calls unreadable: decode those (few
    # unless the index is damaged) to say which side is wrong, as a rebuild would.
    for path in sorted(files):
        if path in indexed or (path in problem_paths and path in view.problem_diff):
            continue
        readable = _decodes(index, db, path, files[path])
        if path in problem_paths:
            if readable is not None:
                view.missing.append(readable)
                view.problem_diff.add(path)
        elif readable is not None:
            view.missing.append(readable)
        else:
            view.problem_diff.add(path)
    view.missing.sort()
    view.extra.sort()
    view.stale.sort()
    return view


def _id_matches(path: str, memory_id: str) -> bool:
    """Whether ``path`` is where ``memory_id`` lives, without validating the id again (the
    row's file matched git's blob, and the index only stores ids it checked): a plain id
    as the name of its shard's file, a path id as the path itself."""
    if path.startswith(MEMORIES_DIR + "/"):
        return "/" not in memory_id and path.endswith(f"/{memory_id}{MEMORY_SUFFIX}")
    return path == memory_id + MEMORY_SUFFIX


def _decodes(index: Index, db: GitDB, path: str, blob: str) -> str | None:
    """The id of the memory in this file, or None when it is not a valid memory (decoded
    as the index decodes it)."""
    try:
        if id_from_path(path) is None:
            return None
        return index.decode(blob_data(db.repo, pygit2.Oid(hex=blob)), path).id
    except GitmemError:
        return None
