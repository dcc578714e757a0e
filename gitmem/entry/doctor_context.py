"""What every health check shares: findings, and the context a check reads a store through.

A :class:`Context` holds one scope's repository, its index's view beside git and, when the
index disagrees with git, a scratch index rebuilt from git, each made once per run; the
checks in :mod:`gitmem.entry.doctor_repo` and :mod:`gitmem.entry.doctor_memories` yield
:class:`Finding`s from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
from gitmem.format.model import Scope
from gitmem.git.db import GitDB
from gitmem.git.locks import pid_alive
from gitmem.git.objects import blob_data, get_commit, get_tree
from gitmem.store.core import Store
from gitmem.store.index import Index, ScratchIndex
from gitmem.store.index_queries import problem_rows

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
    path for path and blob for blob; otherwise, or with ``deep``, they read an index rebuilt
    from git in a scratch file (:meth:`rebuilt`). Call :meth:`close` when the run ends.
    """

    store: Store
    db: GitDB
    scope: Scope
    deep: bool = False
    peers: dict[Scope, Context] = field(default_factory=dict)
    _view: IndexView | None = None
    _view_error: str | None = None
    _view_exc: BaseException | None = None
    _facts: IndexFacts | None = None
    _rebuilt: ScratchIndex | None = None
    _scratch: Path | None = None
    fsck: subprocess.Popen[bytes] | None = None
    """``git fsck`` started early, running beside the other checks."""
    tally: Tally = field(default_factory=Tally)
    """How far the run is: the checks that go through memories one by one step it."""

    @property
    def where(self) -> str:
        return shlex.quote(str(self.db.path))

    def rebuilt(self) -> ScratchIndex:
        """The index a rebuild would make, built once per run in a scratch file beside the
        store's own (which is left as it is), at the commit the index view compared (else
        the tip), without any row provider's tables.

        What the memory checks ask when the store's index disagrees with git, or with
        ``deep``: their findings then rest on git alone, and, asked in SQL a page at a time
        like the store's index, they hold nothing per memory (decoding the store into
        memory held every memory: GBs at a million). Removed by :meth:`close`.
        """
        if self._rebuilt is None:
            view = self.view()
            if view is not None:
                commit = view.commit
            else:
                tip = self.db.tip()
                commit = str(tip.id) if tip is not None else None
            self._scratch = scratch_folder(self.db)
            self._rebuilt = ScratchIndex(
                self.db,
                self.store.index(self.scope).decode,
                self.scope,
                self._scratch / "index.sqlite",
                commit,
            )
            self._rebuilt.catch_up()
        return self._rebuilt

    def close(self) -> None:
        """Remove the scratch index, if this run built one."""
        if self._rebuilt is not None:
            self._rebuilt.close()
            self._rebuilt = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

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
        """The index view when the memory checks may read the store's index."""
        if self.deep:
            return None
        view = self.view()
        return view if view is not None and view.agrees else None

    def index(self) -> Index:
        """The index the memory checks ask: the store's when it matches git, else the
        scratch rebuild (:meth:`rebuilt`)."""
        return self.store.index(self.scope) if self.trusted() is not None else self.rebuilt()

    def facts(self) -> IndexFacts:
        """What the memory checks ask of the memories: SQL over :meth:`index`, a page at a
        time (bounded memory at any size)."""
        if self._facts is None:
            self._facts = IndexFacts(self.index())
        return self._facts

    def problems(self) -> list[tuple[str, str]]:
        """(path, message) of each file under the memory folders that is not a memory."""
        view = self.trusted()
        if view is not None:
            return view.problems
        return self.rebuilt().problems()

    def ever_existed(self, memory_id: str) -> bool:
        """Whether git's history holds a version of ``memory_id`` (a deleted memory)."""
        try:
            return bool(self.index().versions([memory_id]))
        except sqlite3.Error:
            # The store's index failed after it agreed with git: ask the rebuild instead.
            return bool(self.rebuilt().versions([memory_id]))


SCRATCH_PREFIX = "doctor-index-"
"""Folders of scratch indexes in the store's state folder: ``doctor-index-<pid>-<random>``."""


def scratch_folder(db: GitDB) -> Path:
    """A new private folder for a scratch index: in the store's state folder (the index's
    own file system, where its size is expected), else, when that cannot be written (a
    read-only store), the system's temporary folder. Folders a doctor run that died left
    there (their process is gone) are removed first."""
    state = db.state_dir
    with contextlib.suppress(OSError):
        for old in state.glob(SCRATCH_PREFIX + "*"):
            pid = old.name[len(SCRATCH_PREFIX) :].partition("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)
    prefix = f"{SCRATCH_PREFIX}{os.getpid()}-"
    try:
        state.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=state))
    except OSError:
        return Path(tempfile.mkdtemp(prefix=prefix))


def _row_entry(row: Sequence[Any]) -> Entry:
    memory_id, path, blob, supersedes, related = row[:5]
    links = tuple((str(r["id"]), str(r["relationship"])) for r in json.loads(related))
    return Entry(memory_id, path, blob, supersedes, links)


_PAGE = 5_000
"""Index rows read per query by :meth:`IndexFacts.by_blob`: a page of rows in memory, never
all (each query is a walk of the blob index from where the last one stopped)."""

_ENTRY_COLUMNS = "m.id, m.path, m.blob, m.supersedes, m.related"


class IndexFacts:
    """What the memory checks (markers, links, chains, secrets) ask of one scope's
    memories, in SQL over an index's ``memories`` and ``edges`` tables: the store's index
    when it agrees with git, else the scratch rebuild (:meth:`Context.rebuilt`). Nothing
    per memory is held. Each query catches the index up first, as every read of it does."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.index.read(lambda conn: conn.execute(sql, params).fetchall())

    def count(self) -> int:
        return int(self._rows("SELECT count(*) FROM memories")[0][0])

    def by_blob(self) -> Iterator[Entry]:
        """Every memory, by blob id (the order the clean-blob caches are kept in)."""
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
        """Memories with a link (``supersedes``, ``related``) to an id that is not a memory
        of this scope, oldest first: the only ones a dangling link can come from."""
        rows = self._rows(
            f"SELECT {_ENTRY_COLUMNS} FROM memories m WHERE m.id IN ("
            "SELECT e.src FROM edges e WHERE NOT EXISTS "
            "(SELECT 1 FROM memories t WHERE t.id = e.dst)) ORDER BY m.created_us, m.id"
        )
        return [_row_entry(row) for row in rows]

    def existing(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are memories of this scope."""
        # Index.rows with ids: the index's own chunked lookup (ids it lacks are left out).
        rows = self.index.rows(["id"], ids=ids, include_superseded=True, include_archived=True)
        return {str(row[0]) for row in rows}

    def in_chains(self) -> list[Entry]:
        """Memories that supersede one and are superseded by another, oldest first: the
        only ones a version-chain cycle can go through."""
        rows = self._rows(
            f"SELECT {_ENTRY_COLUMNS} FROM memories m WHERE m.supersedes IS NOT NULL AND "
            "EXISTS (SELECT 1 FROM memories s WHERE s.supersedes = m.id) "
            "ORDER BY m.created_us, m.id"
        )
        return [_row_entry(row) for row in rows]

    def forks(self) -> list[tuple[str, list[str]]]:
        """(superseded id, its successors sorted) for each id superseded more than once."""
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
