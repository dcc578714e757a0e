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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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
from gitmem.store.queries import problem_rows
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
    """The index's rows at one commit beside git's tree at that commit: what disagrees.

    Computed as one walk of both in path order (``_index_view``), so nothing per memory is
    held: at 1M memories the rows and git's path -> blob map were ~600 MB in memory."""

    commit: str | None
    count: int
    """Rows the index holds (current memories, superseded and archived included)."""
    problems: list[tuple[str, str]]
    sample: dict[str, str] = field(default_factory=dict)
    """path -> git's blob id for a spread sample of rows, oldest first (``CONTENT_SAMPLE``)."""
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    problem_diff: set[str] = field(default_factory=set)

    @property
    def agrees(self) -> bool:
        return not (self.missing or self.extra or self.stale or self.problem_diff)


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
    _facts: Facts | None = None
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

    def forget_view(self) -> None:
        """Look at the index again (it was rebuilt): the next :meth:`view` compares anew."""
        self._view = self._view_error = self._view_exc = self._facts = None

    def trusted(self) -> IndexView | None:
        """The index view when the memory checks may read it instead of decoding git."""
        if self.deep:
            return None
        view = self.view()
        return view if view is not None and view.agrees else None

    def facts(self) -> Facts:
        """What the memory checks ask of the memories: from the index when it matches git
        (SQL, a page at a time: bounded memory at any size), else from the decoded store."""
        if self._facts is None:
            if self.trusted() is not None:
                self._facts = IndexFacts(self.store.index(self.scope))
            else:
                snap = self.db.snapshot()
                self._facts = ScanFacts([_memory_entry(m, snap) for m in self.memories()])
        return self._facts

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
    memory_id, path, blob, supersedes, related = row[:5]
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


class Facts(Protocol):
    """What the memory checks (markers, links, chains, secrets) ask of one scope's
    memories. Two answers: :class:`IndexFacts` (SQL over an index that agrees with git,
    nothing per memory held) and :class:`ScanFacts` (the decoded store, when it does not)."""

    def count(self) -> int: ...

    def by_blob(self) -> Iterator[Entry]:
        """Every memory, by blob id (the order the clean-blob caches are kept in)."""
        ...

    def linking_out(self) -> list[Entry]:
        """Memories with a link (``supersedes``, ``related``) to an id that is not a memory
        of this scope, oldest first: the only ones a dangling link can come from."""
        ...

    def existing(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are memories of this scope."""
        ...

    def in_chains(self) -> list[Entry]:
        """Memories that supersede one and are superseded by another, oldest first: the
        only ones a version-chain cycle can go through."""
        ...

    def forks(self) -> list[tuple[str, list[str]]]:
        """(superseded id, its successors sorted) for each id superseded more than once."""
        ...

    def path_of(self, memory_id: str) -> str | None: ...


class ScanFacts:
    """:class:`Facts` from a list of entries (the store decoded from git)."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self._by_id = {e.id: e for e in entries}

    def count(self) -> int:
        return len(self.entries)

    def by_blob(self) -> Iterator[Entry]:
        return iter(sorted(self.entries, key=lambda e: e.blob or ""))

    def linking_out(self) -> list[Entry]:
        ids = self._by_id
        return [
            e
            for e in self.entries
            if (e.supersedes and e.supersedes not in ids) or any(r not in ids for r, _ in e.related)
        ]

    def existing(self, ids: Iterable[str]) -> set[str]:
        return {i for i in ids if i in self._by_id}

    def in_chains(self) -> list[Entry]:
        targets = {e.supersedes for e in self.entries if e.supersedes}
        return [e for e in self.entries if e.supersedes and e.id in targets]

    def forks(self) -> list[tuple[str, list[str]]]:
        successors: dict[str, list[str]] = {}
        for entry in self.entries:
            if entry.supersedes:
                successors.setdefault(entry.supersedes, []).append(entry.id)
        return [(old, sorted(new)) for old, new in sorted(successors.items()) if len(new) > 1]

    def path_of(self, memory_id: str) -> str | None:
        entry = self._by_id.get(memory_id)
        return entry.path if entry is not None else None


_PAGE = 5_000
"""Index rows read per query by :meth:`IndexFacts.by_blob`: a page of rows in memory, never
all (each query is a walk of the blob index from where the last one stopped)."""

_ENTRY_COLUMNS = "m.id, m.path, m.blob, m.supersedes, m.related"


class IndexFacts:
    """:class:`Facts` from SQL over the index's ``memories`` and ``edges`` tables. Each
    query catches the index up first, as every read of it does."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.index.read(lambda conn: conn.execute(sql, params).fetchall())

    def count(self) -> int:
        return int(self._rows("SELECT count(*) FROM memories")[0][0])

    def by_blob(self) -> Iterator[Entry]:
        after: tuple[str, int] | None = None
        while True:
            where = "WHERE (m.blob, m.rowid) > (?, ?) " if after is not None else ""
            page = self._rows(
                f"SELECT {_ENTRY_COLUMNS}, m.rowid FROM memories m {where}"
                f"ORDER BY m.blob, m.rowid LIMIT {_PAGE}",
                after or (),
            )
            for row in page:
                yield _row_entry(row)
            if len(page) < _PAGE:
                return
            after = (page[-1][2], page[-1][5])

    def linking_out(self) -> list[Entry]:
        rows = self._rows(
            f"SELECT {_ENTRY_COLUMNS} FROM memories m WHERE m.id IN ("
            "SELECT e.src FROM edges e WHERE NOT EXISTS "
            "(SELECT 1 FROM memories t WHERE t.id = e.dst)) ORDER BY m.created_us, m.id"
        )
        return [_row_entry(row) for row in rows]

    def existing(self, ids: Iterable[str]) -> set[str]:
        # Index.rows with ids: the index's own chunked lookup (ids it lacks are left out).
        rows = self.index.rows(["id"], ids=ids, include_superseded=True, include_archived=True)
        return {str(row[0]) for row in rows}

    def in_chains(self) -> list[Entry]:
        rows = self._rows(
            f"SELECT {_ENTRY_COLUMNS} FROM memories m WHERE m.supersedes IS NOT NULL AND "
            "EXISTS (SELECT 1 FROM memories s WHERE s.supersedes = m.id) "
            "ORDER BY m.created_us, m.id"
        )
        return [_row_entry(row) for row in rows]

    def forks(self) -> list[tuple[str, list[str]]]:
        rows = self._rows(
            "SELECT supersedes, id FROM memories WHERE supersedes IN (SELECT supersedes "
            "FROM memories WHERE supersedes IS NOT NULL GROUP BY supersedes "
            "HAVING count(*) > 1) ORDER BY supersedes, id"
        )
        out: dict[str, list[str]] = {}
        for old, new in rows:
            out.setdefault(old, []).append(new)
        return sorted(out.items())

    def path_of(self, memory_id: str) -> str | None:
        rows = self._rows("SELECT path FROM memories WHERE id = ?", (memory_id,))
        return str(rows[0][0]) if rows else None


def iter_memory_files(db: GitDB, commit: str | None) -> Iterator[tuple[str, str]]:
    """(path, blob id) of every memory file at ``commit`` (regular files under the memory
    roots, as the index and the store's scan see them), in path order (Python's, which for
    the index's UTF-8 paths is SQLite's): one folder's entries in memory at a time.

    Each folder is sorted with a ``/`` after a sub-folder's name, so the paths come out in
    the order of the whole strings whatever order a (hand-made) tree keeps its entries in."""
    if commit is None:
        return
    repo = db.repo
    tree = get_commit(repo, commit).tree
    tops: list[tuple[str, pygit2.Object]] = []
    for root in MEMORY_ROOTS:
        try:
            top = tree[root]
        except KeyError:
            continue
        if top.type_str == "tree":
            tops.append((root + "/", top))
    # A stack of folders' remaining entries, each (sort key, path, object) in reverse.
    stack: list[list[tuple[str, str, pygit2.Object]]] = [
        sorted(((key, key[:-1], top) for key, top in tops), reverse=True)
    ]
    while stack:
        folder = stack[-1]
        if not folder:
            stack.pop()
            continue
        _key, path, item = folder.pop()
        if item.type_str == "tree":
            children = get_tree(repo, item.id)
            stack.append(
                sorted(
                    (
                        (
                            f"{child.name}{'/' if child.type_str == 'tree' else ''}",
                            f"{path}/{child.name}",
                            child,
                        )
                        for child in children
                    ),
                    reverse=True,
                )
            )
        elif item.filemode in _REGULAR and is_memory_file(path):
            yield path, str(item.id)


def case_twins(repo: pygit2.Repository, tree: pygit2.Tree | None) -> Iterator[list[str]]:
    """Each group of memory files whose paths differ only in case, sorted.

    Folder by folder: the entries of one folder (and of its case-twin folders, which a
    case-insensitive file system makes one) grouped by their case-folded name; only one
    folder's entries are in memory at a time, not every path of the store."""
    if tree is None:
        return
    stack: list[list[tuple[pygit2.Tree, str]]] = []
    for root in MEMORY_ROOTS:
        with contextlib.suppress(KeyError):
            top = tree[root]
            if top.type_str == "tree":
                stack.append([(get_tree(repo, top.id), root)])
    while stack:
        folders = stack.pop()
        groups: dict[str, list[tuple[pygit2.Object, str]]] = {}
        for folder, prefix in folders:
            for item in folder:
                name = str(item.name)
                groups.setdefault(name.casefold(), []).append((item, f"{prefix}/{name}"))
        for items in groups.values():
            files = [
                path
                for item, path in items
                if item.type_str == "blob" and item.filemode in _REGULAR and is_memory_file(path)
            ]
            if len(files) > 1:
                yield sorted(files)
            subfolders = [(get_tree(repo, i.id), path) for i, path in items if i.type_str == "tree"]
            if subfolders:
                stack.append(subfolders)


def count_memory_files(db: GitDB, commit: str | None) -> int:
    return sum(1 for _ in iter_memory_files(db, commit))


_REGULAR = (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE)


def _index_view(index: Index, db: GitDB) -> IndexView:
    """The index's rows and problems beside git's tree at the commit they reflect.

    In one read transaction of a caught-up index: the commit it reflects, its problems,
    and its rows in path order, walked beside git's memory files at that commit in the same
    order; the few files the two disagree about are decoded to say how, as a rebuild would.
    Content is compared field by field only for a sample (``_check_content``).
    """
    index.catch_up()
    with index.reading() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        commit = str(row[0]) if row is not None and row[0] else None
        count = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        view = IndexView(commit, count, problem_rows(conn))
        step = max(1, -(-count // CONTENT_SAMPLE))
        sampled = {
            str(path)
            for (path,) in conn.execute(
                "SELECT path FROM (SELECT path, row_number() OVER (ORDER BY created_us, id) "
                "AS n FROM memories) WHERE (n - 1) % ? = 0",
                (step,),
            )
        }
        problem_paths = {path for path, _ in view.problems}
        seen_problems: set[str] = set()
        files = iter_memory_files(db, commit)
        pending = next(files, None)

        def unindexed(path: str, blob: str) -> None:
            # A file the index has no row for: decode it to say which side is wrong.
            if path in problem_paths:
                seen_problems.add(path)
            readable = _decodes(index, db, path, blob)
            if path in problem_paths:
                if readable is not None:
                    view.missing.append(readable)
                    view.problem_diff.add(path)
            elif readable is not None:
                view.missing.append(readable)
            else:
                view.problem_diff.add(path)

        for memory_id, path, blob in conn.execute(
            "SELECT id, path, blob FROM memories ORDER BY path"
        ):
            while pending is not None and pending[0] < path:
                unindexed(*pending)
                pending = next(files, None)
            if pending is None or pending[0] != path:
                view.extra.append(memory_id)
                continue
            if pending[1] != blob or not _id_matches(path, memory_id):
                view.stale.append(memory_id)
            if path in problem_paths:
                seen_problems.add(path)
                view.problem_diff.add(path)  # a file both indexed and called unreadable
            if path in sampled:
                view.sample[path] = pending[1]
            pending = next(files, None)
        while pending is not None:
            unindexed(*pending)
            pending = next(files, None)
    view.problem_diff |= problem_paths - seen_problems  # unreadable files git does not have
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
