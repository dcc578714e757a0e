"""What every health check shares: findings, and the context a check reads a store through:
one scope's repository, its index beside git and, when the two disagree (or with ``deep``),
a scratch index rebuilt from git, each made once per run."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pygit2

from gitmem.base.errors import GitmemError
from gitmem.format.layout import id_from_path
from gitmem.format.model import Scope
from gitmem.git.db import GitDB
from gitmem.git.locks import pid_alive
from gitmem.git.objects import blob_data, damaged_hint, get_commit
from gitmem.store.commit_changes import changed_memory_files
from gitmem.store.core import Store
from gitmem.store.index import Index, ScratchIndex
from gitmem.store.index_queries import problem_rows

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass
class Finding:
    """One problem: what is wrong, how bad, and the command (``fix``) that fixes it;
    ``safe``: ``doctor --fix`` applies it (``apply``), as it cannot lose or change a memory."""

    check: str
    severity: str
    message: str
    fix: str | None = None
    safe: bool = False
    scope: str | None = None
    path: str | None = None
    fixed: bool = False
    fix_error: str | None = None
    apply: Callable[[], object] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "apply"}


def damaged_finding(check: str, ctx: Context, exc: BaseException, what: str = "") -> Finding:
    """One line for a damaged repository met by ``check``, with the recovery that can work."""
    message = exc.message if isinstance(exc, GitmemError) else f"git cannot read an object ({exc})"
    if isinstance(exc, KeyError):
        message = f"an object is missing from the repository ({exc.args[0] if exc.args else ''})"
    return Finding(
        check,
        ERROR,
        f"{what}: {message}; the other checks that read memories were skipped"
        if what
        else f"{message} (the {check} check stopped there)",
        fix=damaged_hint(str(ctx.db.gitdir)),
    )


@dataclass(frozen=True)
class Entry:
    """What the memory checks need of one memory: an index row."""

    id: str
    path: str
    blob: str | None
    supersedes: str | None
    related: tuple[tuple[str, str], ...]
    """(id, relationship) of each ``related`` link."""


@dataclass
class IndexView:
    """The index's rows at the commit they reflect beside git's tree at that commit: what
    disagrees, and ``sample``, path -> blob of a spread sample of rows (``CONTENT_SAMPLE``)."""

    commit: str | None
    problems: list[tuple[str, str]]
    sample: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    problem_diff: set[str] = field(default_factory=set)

    @property
    def agrees(self) -> bool:
        return not (self.missing or self.extra or self.stale or self.problem_diff)


CONTENT_SAMPLE = 16
"""Index rows decoded from git and compared field by field on each run (``deep``: all)."""


@dataclass
class Context:
    """One scope's repository, with what the checks share computed once per run. The memory
    checks read the store's index when it matches git's tree, else (or with ``deep``) a
    scratch rebuild (:meth:`rebuilt`): a run without ``--fix`` changes nothing."""

    store: Store
    db: GitDB
    scope: Scope
    deep: bool = False
    peers: dict[Scope, Context] = field(default_factory=dict)
    _view: IndexView | Exception | None = None  # an exception: the index cannot be read
    _entries: list[Entry] | None = None
    _rebuilt: ScratchIndex | None = None

    @property
    def where(self) -> str:
        return shlex.quote(str(self.db.path))

    def rebuilt(self) -> ScratchIndex:
        """The index a rebuild would make at the commit the index view compared (else the
        tip), built once per run in a scratch folder; the store's own is left as it is."""
        if self._rebuilt is None:
            view, tip = self.view(), self.db.tip()
            commit = view.commit if view is not None else str(tip.id) if tip else None
            path = scratch_folder(self.db) / "index.sqlite"
            decode = self.store.index(self.scope).decode
            self._rebuilt = ScratchIndex(self.db, decode, self.scope, path, commit)
            self._rebuilt.catch_up()
        return self._rebuilt

    def close(self) -> None:
        """Remove the scratch index, if this run built one."""
        if self._rebuilt is not None:
            self._rebuilt.close()
            shutil.rmtree(self._rebuilt.path.parent, ignore_errors=True)
            self._rebuilt = None

    def view(self) -> IndexView | None:
        """The index beside git (computed once); None if the index cannot be read."""
        if self._view is None:
            try:
                self._view = _index_view(self.store.index(self.scope), self.db)
            except Exception as exc:  # any failure of the derived index is a finding
                self._view = exc
        return self._view if isinstance(self._view, IndexView) else None

    def forget_view(self) -> None:
        """Look at the index again (it was rebuilt): the next :meth:`view` compares anew."""
        self._view = self._entries = None

    def trusted(self) -> IndexView | None:
        """The index view when the memory checks may read the store's index."""
        view = None if self.deep else self.view()
        return view if view is not None and view.agrees else None

    def index(self) -> Index:
        """The store's index when it matches git, else the scratch rebuild."""
        return self.store.index(self.scope) if self.trusted() is not None else self.rebuilt()

    def entries(self) -> list[Entry]:
        """Every memory of the scope (superseded and archived too), oldest first."""
        if self._entries is None:
            sql = "SELECT id, path, blob, supersedes, related FROM memories ORDER BY created_us, id"
            rows = self.index().read(lambda conn: conn.execute(sql).fetchall())

            def links(rel: str) -> tuple[tuple[str, str], ...]:
                return tuple((str(r["id"]), str(r["relationship"])) for r in json.loads(rel))

            self._entries = [Entry(i, p, b, s, links(rel)) for i, p, b, s, rel in rows]
        return self._entries

    def problems(self) -> list[tuple[str, str]]:
        """(path, message) of each file under the memory folders that is not a memory."""
        view = self.trusted()
        return view.problems if view is not None else self.rebuilt().read(problem_rows)

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
    """A new private folder for a scratch index: in the store's state folder, else (a
    read-only store) the system's temporary folder. Folders a doctor run that died left
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


def memory_files(db: GitDB, commit: str | None) -> dict[str, str]:
    """path -> blob id of every memory file at ``commit`` (regular files under the memory
    roots, as the index sees them)."""
    if commit is None:
        return {}
    tree = get_commit(db.repo, commit).tree
    return {path: str(blob) for path, blob in changed_memory_files(db.repo, None, tree)}


def _index_view(index: Index, db: GitDB) -> IndexView:
    """The caught-up index's rows and problems beside git's files at the commit they
    reflect; the few files the two disagree about are decoded to say how, as a rebuild
    would. Content is compared field by field only for a sample (``_check_content``)."""
    index.catch_up()
    with index.reading() as conn:
        commit = dict(conn.execute("SELECT key, value FROM meta")).get("commit") or None
        found = conn.execute("SELECT id, path, blob FROM memories ORDER BY created_us, id")
        listed = found.fetchall()
        view = IndexView(commit, problem_rows(conn))
    sampled = {path for _, path, _ in listed[:: max(1, -(-len(listed) // CONTENT_SAMPLE))]}
    rows = {p: (i, b) for i, p, b in listed}
    files = memory_files(db, commit)
    problem_paths = {path for path, _ in view.problems}
    for path, blob in files.items():
        if path not in rows:  # decode it to say which side is wrong
            readable = None  # the id of the memory in it, when it is a valid memory
            with contextlib.suppress(GitmemError):
                if id_from_path(path) is not None:
                    readable = index.decode(blob_data(db.repo, pygit2.Oid(hex=blob)), path).id
            if readable is not None:
                view.missing.append(readable)
            if (readable is not None) == (path in problem_paths):
                view.problem_diff.add(path)
            continue
        memory_id, indexed = rows[path]
        if indexed != blob or id_from_path(path) != memory_id:  # the id the index checked
            view.stale.append(memory_id)
        if path in problem_paths:
            view.problem_diff.add(path)  # a file both indexed and called unreadable
        if path in sampled:
            view.sample[path] = blob
    view.extra = [memory_id for path, (memory_id, _) in rows.items() if path not in files]
    view.problem_diff |= problem_paths - files.keys()  # unreadable files git does not have
    for ids in (view.missing, view.extra, view.stale):
        ids.sort()
    return view
