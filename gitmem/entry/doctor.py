"""``gitmem doctor``: check a store's health, say how to fix each problem, fix the safe ones.

Each check looks at one thing that can go wrong and reports :class:`Finding`\\ s,
every one with the command that fixes it. ``fix=True`` applies the fixes marked
*safe*: those that cannot lose or change a memory (removing a lock file left by a
dead process, rebuilding the derived index, registering the merge driver,
bringing the work tree up to the branch, tightening permissions). Fixes that
touch memories (a broken file, a dangling link, a fork in a version chain) are
left to a person: the finding says which command to run.

The checks, in order (``CHECKS``):

- ``fsck``: ``git fsck --strict`` of the repository;
- ``locks``: git lock files (``index.lock``, ``refs/heads/main.lock``, ...) older
  than the stale age; gitmem's own ``write.lock`` is an ``flock`` and never stale;
- ``leftovers``: temporary files of a writer that died mid-write;
- ``merge``: a git merge (rebase, cherry-pick, revert) left unfinished, and memory files
  holding its conflict markers: how to finish it without committing them;
- ``worktree``: the work tree caught up with the branch, and no uncommitted edits
  in the memory folders;
- ``index``: the SQLite index agrees with a scan of git (same ids, same content,
  same unreadable files);
- ``merge-driver``: ``merge.gitmem.driver`` registered (work-tree stores), and the
  program it runs still there;
- ``hooks``: gitmem's hooks complete and pointing at an interpreter that exists;
- ``schema``: files under the memory folders that are not valid memories;
- ``markers``: memories that hold conflict markers a merge made without gitmem's driver
  committed (one side's text is inside them);
- ``twins``: memory files whose paths differ only in case (``Alice.md``, ``alice.md``),
  which a case-insensitive file system cannot hold both of;
- ``links``: ``supersedes`` and ``related`` naming memories that do not exist;
- ``chains``: version-chain cycles and forks (two successors of one memory);
- ``secrets``: memories holding what looks like a credential;
- ``permissions``: a user store readable by others, anything world-writable (the
  store's own folder included).

A repository that is damaged (a branch pointing at a missing commit, an object that does
not inflate) gives one finding per check it stops, naming the object, with the recovery
that can work (``git fsck``, fetching from a clone), never a crash or advice to reindex.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from gitmem.base import paths as state_paths
from gitmem.base.errors import GitmemError, RepositoryDamagedError, StoreError
from gitmem.base.trailers import CommitSpec
from gitmem.entry import hooks as hooks_mod
from gitmem.format import secrets as secrets_mod
from gitmem.format.layout import (
    MEMORIES_DIR,
    MEMORY_ROOTS,
    MEMORY_SUFFIX,
    id_from_path,
    is_memory_file,
)
from gitmem.format.model import Memory, Scope
from gitmem.git import autopack
from gitmem.git.command import popen_git, run_git
from gitmem.git.db import GitDB
from gitmem.git.objects import Snapshot, blob_data, get_commit, get_tree
from gitmem.store import merge as merge_mod
from gitmem.store.core import Store
from gitmem.store.discovery import open_store
from gitmem.store.index import Index
from gitmem.store.results import Problem

log = logging.getLogger(__name__)

CHECKS: tuple[str, ...] = (
    "fsck",
    "locks",
    "leftovers",
    "merge",
    "worktree",
    "index",
    "merge-driver",
    "hooks",
    "schema",
    "twins",
    "markers",
    "links",
    "chains",
    "secrets",
    "permissions",
)

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)

STALE_LOCK_AGE = 30.0
"""Seconds after which a git lock file is taken to be left by a process that died (as gitdb)."""

_GIT_LOCKS = ("index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")
_TMP_FILE = re.compile(r"^\..+\.(\d+)\.tmp$")
"""A work-tree file being written: ``.<name>.<pid>.tmp`` (renamed over ``<name>`` when whole)."""


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


@dataclass
class DoctorReport:
    """Everything one ``doctor`` run found (and fixed)."""

    stores: list[str]
    checks: list[str]
    findings: list[Finding] = field(default_factory=list)

    @property
    def remaining(self) -> list[Finding]:
        """Errors and warnings not fixed by this run."""
        return [f for f in self.findings if f.severity != INFO and not f.fixed]

    @property
    def healthy(self) -> bool:
        return not self.remaining

    def to_dict(self) -> dict[str, Any]:
        return {
            "stores": self.stores,
            "checks": self.checks,
            "healthy": self.healthy,
            "findings": [f.to_dict() for f in self.findings],
        }


# -- running ---------------------------------------------------------------------------------


def diagnose(
    store: Store,
    *,
    fix: bool = False,
    checks: Iterable[str] | None = None,
    scope: Scope | str | None = None,
    deep: bool = False,
) -> DoctorReport:
    """Run the checks on every scope of ``store`` (or one); with ``fix``, apply the safe fixes.

    The memory checks (schema, links, chains, secrets) read the derived index once its rows
    match git's tree blob for blob (checked on every run: one tree walk, no decoding), and
    the git scan otherwise. ``deep`` also decodes every memory from git and compares it
    field by field with its index row (what the index check samples by default), and runs
    the memory checks on that scan.
    """
    chosen = list(CHECKS if checks is None else checks)
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown:
        raise StoreError(
            f"unknown check(s) {', '.join(unknown)}", hint="checks are: " + ", ".join(CHECKS)
        )
    scopes = [Scope(scope)] if scope is not None else store.scopes
    report = DoctorReport([str(store.db(s).path) for s in scopes], chosen)
    # One context per scope of the store, shared: a link may point into the other scope.
    peers: dict[Scope, _Context] = {}
    for each in store.scopes:
        peers[each] = _Context(store, store.db(each), each, deep=deep, peers=peers)
    for each in scopes:
        context = peers[each]
        order = chosen
        packing = contextlib.ExitStack()
        if "fsck" in chosen:
            # A packing helper moving loose objects into a pack while fsck reads them
            # makes fsck report them missing: wait for it, and start none meanwhile.
            try:
                packing.enter_context(autopack.exclusive(context.db.gitdir, timeout=120))
            except TimeoutError as exc:
                log.warning("%s; fsck may report objects it moves as missing", exc)
        if "fsck" in chosen and not fix:
            # git fsck is its own process: let it run beside the other checks (reported in
            # its place all the same). Not with --fix, whose repairs may commit meanwhile.
            context.fsck = _start_git(context.db, *_FSCK_ARGS)
            order = [c for c in chosen if c != "fsck"] + ["fsck"]
        results: dict[str, list[Finding]] = {}
        broken = _broken_tip(context)
        try:
            for name in order:
                if broken is not None and name not in _WITHOUT_TIP:
                    # Nothing that reads memories can run on a branch whose commit is gone:
                    # the first such check says so, once.
                    results[name] = []
                    if broken.check == "":
                        broken.check = name
                        broken.scope = str(each)
                        results[name] = [broken]
                    continue
                try:
                    found = list(_CHECKERS[name](context))
                except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
                    found = [_damaged(name, context, exc)]
                for finding in found:
                    finding.scope = str(each)
                results[name] = found
                if fix:
                    _apply(found)
        finally:
            if context.fsck is not None:  # a check failed before fsck was collected
                context.fsck.kill()
                context.fsck.communicate()
            packing.close()
        for name in dict.fromkeys(chosen):
            report.findings.extend(results[name])
    for finding in report.findings:
        # A path or id a hand-made commit filled with a token is not printed either.
        finding.message = secrets_mod.redact(finding.message)
        finding.fix = secrets_mod.redact(finding.fix) if finding.fix else finding.fix
    return report


_WITHOUT_TIP = ("fsck", "locks", "leftovers", "merge", "merge-driver", "hooks", "permissions")
"""The checks that do not read the branch's commit: they still run when it is missing."""


def _broken_tip(ctx: _Context) -> Finding | None:
    """A finding when the branch points at a commit (or tree) git cannot read."""
    try:
        tip = ctx.db.tip()
        if tip is not None:
            get_tree(ctx.db.repo, tip.tree_id)
    except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
        return _damaged("", ctx, exc, what=f"the branch {ctx.db.branch}")
    return None


def _damaged(check: str, ctx: _Context, exc: BaseException, what: str = "") -> Finding:
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


def _apply(findings: Sequence[Finding]) -> None:
    for finding in findings:
        if not finding.safe or finding.apply is None:
            continue
        try:
            finding.apply()
            finding.fixed = True
        except (OSError, GitmemError, subprocess.SubprocessError) as exc:
            finding.fix_error = str(exc)


@dataclass(frozen=True)
class _Entry:
    """What the memory checks need of one memory, from an index row or a decoded file."""

    id: str
    path: str
    blob: str | None
    supersedes: str | None
    related: tuple[tuple[str, str], ...]
    """(id, relationship) of each ``related`` link."""


@dataclass
class _IndexView:
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


@dataclass
class _Context:
    """One scope's repository, with what the checks share computed once per run.

    The memory checks read the derived index (no decoding) when its rows match git's tree
    path for path and blob for blob; otherwise, or with ``deep``, every memory is decoded
    from git, as the index would be rebuilt.
    """

    store: Store
    db: GitDB
    scope: Scope
    deep: bool = False
    peers: dict[Scope, _Context] = field(default_factory=dict)
    _scan: Store | None = None
    _memories: list[Memory] | None = None
    _problems: list[Problem] | None = None
    _view: _IndexView | None = None
    _view_error: str | None = None
    _view_exc: BaseException | None = None
    _entries: list[_Entry] | None = None
    fsck: subprocess.Popen[bytes] | None = None
    """``git fsck`` started early, running beside the other checks."""

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

    def view(self) -> _IndexView | None:
        """The index beside git (computed once); None if the index cannot be read."""
        if self._view is None and self._view_error is None:
            try:
                self._view = _index_view(self.store.index(self.scope), self.db)
            except Exception as exc:  # any failure of the derived index is a finding
                self._view_error = f"{type(exc).__name__}: {exc}"
                self._view_exc = exc
        return self._view

    def trusted(self) -> _IndexView | None:
        """The index view when the memory checks may read it instead of decoding git."""
        if self.deep:
            return None
        view = self.view()
        return view if view is not None and view.agrees else None

    def entries(self) -> list[_Entry]:
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


def _row_entry(row: Sequence[Any]) -> _Entry:
    memory_id, path, blob, supersedes, related = row
    links = tuple((str(r["id"]), str(r["relationship"])) for r in json.loads(related))
    return _Entry(memory_id, path, blob, supersedes, links)


def _memory_entry(memory: Memory, snap: Snapshot) -> _Entry:
    path = memory.path or ""
    blob = snap.blob_id(path) if path else None
    return _Entry(
        memory.id,
        path,
        str(blob) if blob is not None else None,
        memory.supersedes,
        tuple((r.id, str(r.relationship)) for r in memory.related),
    )


def _memory_files(db: GitDB, commit: str | None) -> dict[str, str]:
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


def _index_view(index: Index, db: GitDB) -> _IndexView:
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
    view = _IndexView(commit, rows, problems, _memory_files(db, commit))
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


def _start_git(db: GitDB, *args: str) -> subprocess.Popen[bytes]:
    return popen_git(args, gitdir=db.gitdir)


_FSCK_ARGS = ("fsck", "--strict", "--no-dangling", "--no-progress")


# -- the checks ------------------------------------------------------------------------------


def check_fsck(ctx: _Context) -> Iterator[Finding]:
    process, ctx.fsck = ctx.fsck or _start_git(ctx.db, *_FSCK_ARGS), None
    stdout, stderr = process.communicate()
    returncode = process.returncode
    lines = [
        line.strip()
        for line in (stdout + stderr).decode("utf-8", "replace").splitlines()
        if line.strip()
    ]
    if returncode == 0 and not lines:
        return
    shown = "; ".join(lines[:3]) + (f" (and {len(lines) - 3} more lines)" if len(lines) > 3 else "")
    yield Finding(
        "fsck",
        ERROR if returncode != 0 else WARNING,
        f"git fsck --strict reports: {shown or 'exit ' + str(returncode)}",
        fix=(
            f"git --git-dir={shlex.quote(str(ctx.db.gitdir))} fsck --full for details; fetch the "
            "missing objects from a clone (git fetch <clone>) or restore the repository from one"
        ),
    )


def _stale_locks(gitdir: Path) -> Iterator[Path]:
    for name in _GIT_LOCKS:
        path = gitdir / name
        if path.is_file():
            yield path
    refs = gitdir / "refs"
    if refs.is_dir():
        yield from sorted(p for p in refs.rglob("*.lock") if p.is_file())


def check_locks(ctx: _Context) -> Iterator[Finding]:
    now = time.time()
    age_limit = max(ctx.db.stale_lock_age, STALE_LOCK_AGE)
    for lock in _stale_locks(ctx.db.gitdir):
        try:
            age = now - lock.stat().st_mtime
        except FileNotFoundError:
            continue  # released while we looked
        if age <= age_limit:
            yield Finding(
                "locks",
                INFO,
                f"{lock} is held (for {age:.0f} s): a git command is probably running",
                path=str(lock),
            )
            continue
        yield Finding(
            "locks",
            WARNING,
            f"stale lock {lock}, left {age:.0f} s ago by a git process that died",
            fix=f"rm {shlex.quote(str(lock))}",
            safe=True,
            path=str(lock),
            apply=_remover(lock, age_limit),
        )


def _remover(path: Path, min_age: float | None = None) -> Callable[[], None]:
    def remove() -> None:
        # Look again at fix time: a lock taken since the check is a live one, never stolen.
        if min_age is not None:
            try:
                if time.time() - path.stat().st_mtime <= min_age:
                    raise StoreError(f"{path} was taken again; left alone")
            except FileNotFoundError:
                return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    return remove


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_leftovers(ctx: _Context) -> Iterator[Finding]:
    candidates: list[tuple[Path, int | None]] = []
    marker_tmp = ctx.db.state_dir / (state_paths.WORKTREE_SYNCED + ".tmp")
    if marker_tmp.is_file():
        candidates.append((marker_tmp, None))
    if ctx.db.workdir is not None:
        for root in MEMORY_ROOTS:
            top = ctx.db.workdir / root
            if not top.is_dir():
                continue
            for path in top.rglob(".*.tmp"):
                match = _TMP_FILE.match(path.name)
                if match and path.is_file() and not path.is_symlink():
                    candidates.append((path, int(match.group(1))))
    now = time.time()
    for path, pid in candidates:
        try:
            age = now - path.lstat().st_mtime
        except FileNotFoundError:
            continue
        if _writing(pid, age):
            continue  # a write in progress
        yield Finding(
            "leftovers",
            WARNING,
            f"{path} is a temporary file a writer left when it died (no memory is lost: "
            "files are renamed into place only when whole)",
            fix=f"rm {shlex.quote(str(path))}",
            safe=True,
            path=str(path),
            apply=_leftover_remover(path, pid),
        )


def _writing(pid: int | None, age: float) -> bool:
    """Whether a temporary file may still be being written: its writer (named by the pid in
    its name) is alive, or, for a file without a pid, it is younger than the stale age."""
    if pid is not None:
        return pid == os.getpid() or _alive(pid)
    return age <= STALE_LOCK_AGE


def _leftover_remover(path: Path, pid: int | None) -> Callable[[], None]:
    def remove() -> None:
        try:
            age = time.time() - path.lstat().st_mtime
        except FileNotFoundError:
            return
        if _writing(pid, age):  # looked at again: a writer that started since keeps its file
            raise StoreError(f"{path} is being written again; left alone")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    return remove


def _heal(db: GitDB) -> None:
    """Run a write that changes nothing: under the writer lock it brings the work tree up."""

    def plan(_snap: Snapshot) -> tuple[CommitSpec, None]:
        return CommitSpec(subject="doctor: nothing to commit"), None

    db.write(plan)


_IN_PROGRESS = (
    ("MERGE_HEAD", "a git merge", "merge"),
    ("rebase-merge", "a git rebase", "rebase"),
    ("rebase-apply", "a git rebase (or am)", "rebase"),
    ("CHERRY_PICK_HEAD", "a git cherry-pick", "cherry-pick"),
    ("REVERT_HEAD", "a git revert", "revert"),
)

_MARKER_LINE = re.compile(rb"^(?:<{7}|>{7})(?: |$)", re.MULTILINE)
"""A conflict marker line (``<<<<<<< ours``, ``>>>>>>> theirs``) at the start of a line."""


def _in_progress(db: GitDB) -> tuple[str, str] | None:
    """(what, git command) of an unfinished merge, rebase, cherry-pick or revert, if any."""
    for name, what, command in _IN_PROGRESS:
        if (db.gitdir / name).exists():
            return what, command
    return None


def check_merge(ctx: _Context) -> Iterator[Finding]:
    """An unfinished merge, and memory files holding its conflict markers.

    Committing them (``git add && git commit``) would store the markers in the memories,
    or, resolved by taking one side, drop the other side's change. The safe way is to
    abort (both sides stay committed: nothing is lost) and merge again with gitmem's
    driver registered, which merges memories field by field and records forks instead.
    """
    db = ctx.db
    if db.workdir is None:
        return
    state = _in_progress(db)
    if state is None:
        return
    what, command = state
    result = run_git(
        ["status", "--porcelain=v1", "-z", "--untracked-files=no", "--", *MEMORY_ROOTS],
        cwd=db.workdir,
        check=False,
    )
    unmerged: list[str] = []
    marked: list[str] = []
    for entry in result.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "U" in code or code in ("AA", "DD"):
            unmerged.append(path)
        full = db.workdir / path
        with contextlib.suppress(OSError):
            if full.is_file() and not full.is_symlink() and _MARKER_LINE.search(full.read_bytes()):
                marked.append(path)
    files = sorted(set(unmerged) | set(marked))
    shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
    detail = (
        f": {len(files)} memory file(s) in conflict or holding conflict markers ({shown})"
        if files
        else ""
    )
    where = ctx.where
    driver = (
        ""
        if merge_mod.driver_registered(db.path)
        else (f"gitmem --store {where} doctor --fix (registers the merge driver), then ")
    )
    redo = {
        "merge": "gitmem --store {w} sync (or git -C {w} merge again)",
        "rebase": "git -C {w} rebase again",
        "cherry-pick": "git -C {w} cherry-pick again",
        "revert": "git -C {w} revert again",
    }[command].format(w=where)
    yield Finding(
        "merge",
        ERROR,
        f"{what} is in progress and unfinished{detail}; do not git add and commit these "
        "files: that stores the markers, or drops one side's change",
        fix=(
            f"git -C {where} {command} --abort (both sides stay committed: nothing is lost), "
            f"then {driver}{redo}, which merges memories field by field and reports forks "
            "instead of markers"
        ),
        path=files[0] if files else None,
    )


def check_worktree(ctx: _Context) -> Iterator[Finding]:
    db = ctx.db
    if db.workdir is None:
        return
    if _in_progress(db) is not None:
        # The merge check says how to finish it; any advice here (add and commit, or a
        # "heal" that rewrites git's index) would lose one side of it.
        return
    tip = db.tip()
    marker = db.state_dir / state_paths.WORKTREE_SYNCED
    synced = marker.read_text().strip() if marker.is_file() else None
    if tip is not None and synced is not None and synced != str(tip.id):
        yield Finding(
            "worktree",
            WARNING,
            f"the work tree is at {synced[:10]}, behind the branch at {str(tip.id)[:10]} "
            "(a writer died between committing and updating the files)",
            fix=f"gitmem --store {ctx.where} doctor --fix (any gitmem write also does it)",
            safe=True,
            apply=lambda: _heal(db),
        )
        return  # the edits below would all be that lag
    result = run_git(
        ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *MEMORY_ROOTS],
        cwd=db.workdir,
        check=False,
    )
    if result.returncode != 0:
        return
    for entry in result.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if _TMP_FILE.match(Path(path).name):
            continue  # the leftovers check reports these
        what = "untracked" if code == "??" else "has uncommitted changes"
        yield Finding(
            "worktree",
            INFO if code == "??" and not is_memory_file(path) else WARNING,
            f"{path} {what} (gitmem refuses to overwrite it until it is committed or dropped)",
            fix=(
                f"git -C {ctx.where} add -- {shlex.quote(path)} && git -C {ctx.where} commit, "
                f"or drop it: git -C {ctx.where} checkout -- {shlex.quote(path)}"
                if code != "??"
                else f"git -C {ctx.where} add -- {shlex.quote(path)} && git -C {ctx.where} "
                f"commit, or rm {shlex.quote(str(db.workdir / path))}"
            ),
            path=path,
        )


def _by_id(memories: Iterable[Memory]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for memory in memories:
        data = memory.to_dict()
        data.pop("store_scope", None)
        out[memory.id] = data
    return out


def check_index(ctx: _Context) -> Iterator[Finding]:
    from gitmem.store.core import index_writable

    if not index_writable(ctx.store.db(ctx.scope)):
        # Not a fault to rebuild (reindex would fail the same way): reads scan git instead.
        yield Finding(
            "index",
            INFO,
            "the store is read-only for you: its index is not used or updated (reads scan git)",
        )
        return
    view = ctx.view()
    if view is None:
        if isinstance(ctx._view_exc, (RepositoryDamagedError, KeyError, pygit2.GitError)):
            # git's objects are damaged, not the index: a rebuild would fail the same way.
            yield _damaged("index", ctx, ctx._view_exc)
            return
        yield _rebuild_finding(ctx, f"the index cannot be read ({ctx._view_error})")
        return
    if ctx.deep:
        try:
            yield from _deep_index_check(ctx)
        except (RepositoryDamagedError, pygit2.GitError) as exc:
            yield _damaged("index", ctx, exc)
        except Exception as exc:  # any failure of the derived index is a finding, not a crash
            yield _rebuild_finding(ctx, f"the index cannot be read ({type(exc).__name__}: {exc})")
        return
    stale = list(view.stale)
    if view.agrees:
        try:
            stale = _check_content(ctx, view)
        except (RepositoryDamagedError, pygit2.GitError) as exc:
            yield _damaged("index", ctx, exc)
            return
        except Exception as exc:  # as above
            yield _rebuild_finding(ctx, f"the index cannot be read ({type(exc).__name__}: {exc})")
            return
    message = _disagreement(view.missing, view.extra, stale, len(view.problem_diff))
    if message:
        yield _rebuild_finding(ctx, message)


def _check_content(ctx: _Context, view: _IndexView) -> list[str]:
    """Ids among a spread sample of rows whose fields differ from their file decoded from
    git. Matching blob ids say each row was made from the right file; this says it was
    made right (and catches a tampered row) without decoding the whole store."""
    rows = view.rows
    step = max(1, -(-len(rows) // CONTENT_SAMPLE))
    sample = [row[1] for row in rows[::step]]
    index = ctx.store.index(ctx.scope)
    differ = []
    for path in sample:
        memory_id = id_from_path(path) or ""
        indexed = index.get(memory_id)
        try:
            decoded = index.decode(blob_data(ctx.db.repo, pygit2.Oid(hex=view.files[path])), path)
        except RepositoryDamagedError:
            raise  # the object, not the row, is wrong: reported as damage, not as staleness
        except GitmemError:
            differ.append(memory_id)
            continue
        if indexed is None or _by_id([indexed]) != _by_id([decoded]):
            differ.append(memory_id)
    if differ:
        # The rows were read one by one: a write since the view may have changed one.
        now = ctx.db.snapshot()
        changed = {id_from_path(p) for p in sample if str(now.blob_id(p)) != view.files[p]}
        differ = [i for i in differ if i not in changed]
    return sorted(differ)


def _deep_index_check(ctx: _Context) -> Iterator[Finding]:
    """Every memory decoded from git and compared with its index row, field by field."""
    index = ctx.store.index(ctx.scope)
    indexed = _by_id(index.select(include_superseded=True, include_archived=True))
    indexed_problems = {path for path, _ in index.problems()}
    scanned = _by_id(ctx.memories())
    scanned_problems = {p.path for p in ctx.scanned_problems()}
    missing = sorted(set(scanned) - set(indexed))
    extra = sorted(set(indexed) - set(scanned))
    differ = sorted(i for i in set(scanned) & set(indexed) if scanned[i] != indexed[i])
    message = _disagreement(missing, extra, differ, len(scanned_problems ^ indexed_problems))
    if message:
        yield _rebuild_finding(ctx, message)


def _disagreement(missing: list[str], extra: list[str], stale: list[str], problems: int) -> str:
    parts = []
    for label, ids in (("missing", missing), ("not in git", extra), ("stale", stale)):
        if ids:
            parts.append(
                f"{len(ids)} {label} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
            )
    if problems:
        parts.append(f"{problems} unreadable file(s) seen differently")
    return "the index disagrees with git: " + "; ".join(parts) if parts else ""


def _rebuild_finding(ctx: _Context, message: str) -> Finding:
    store, scope = ctx.store, ctx.scope
    return Finding(
        "index",
        WARNING,
        message,
        fix=f"gitmem --store {ctx.where} reindex",
        safe=True,
        apply=lambda: _rebuild(store, scope),
    )


def _rebuild(store: Store, scope: Scope) -> None:
    store.index(scope).rebuild()


def _driver_program(repo: pygit2.Repository) -> str | None:
    """The program the registered merge driver runs, when it is not there any more."""
    try:
        value = str(repo.config[merge_mod.DRIVER_CONFIG])
        words = shlex.split(value)
    except (KeyError, pygit2.GitError, ValueError):
        return None
    if not words:
        return None
    program = words[0]
    if os.sep in program:
        return None if os.access(program, os.X_OK) else program
    return None if shutil.which(program) else program


def check_merge_driver(ctx: _Context) -> Iterator[Finding]:
    if ctx.db.workdir is None:
        return  # merges happen in clones with a work tree; a bare store merges nothing
    path = ctx.db.path
    if merge_mod.driver_registered(ctx.db.path):
        gone = _driver_program(ctx.db.repo)
        if gone is None:
            return
        yield Finding(
            "merge-driver",
            WARNING,
            f"the gitmem merge driver runs {gone}, which is not there any more (a moved or "
            "deleted virtualenv): the next git merge or pull of memory files fails",
            fix=f"git -C {ctx.where} config {merge_mod.DRIVER_CONFIG} "
            f"{shlex.quote(merge_mod.driver_command())}",
            safe=True,
            apply=lambda: merge_mod.register_driver(path),
        )
        return
    yield Finding(
        "merge-driver",
        WARNING,
        "the gitmem merge driver is not registered: plain git merge/pull falls back to a "
        "text merge of memory files",
        fix=f"git -C {ctx.where} config {merge_mod.DRIVER_CONFIG} "
        f"{shlex.quote(merge_mod.driver_command())}",
        safe=True,
        apply=lambda: merge_mod.register_driver(path),
    )


def check_hooks(ctx: _Context) -> Iterator[Finding]:
    path = ctx.db.path
    try:
        status = hooks_mod.status(path)
    except GitmemError:
        return
    states = {h.name: h for h in status.hooks}
    memory_hooks = [states[name] for name in hooks_mod.MEMORY_HOOKS if name in states]
    installed = [h for h in memory_hooks if h.installed]
    reinstall = f"gitmem --store {ctx.where} hooks install"
    if not installed:
        yield Finding(
            "hooks",
            INFO,
            "gitmem's git hooks are not installed (hand edits are not validated or stamped)",
            fix=reinstall,
        )
        return
    broken = [h.name for h in memory_hooks if not h.installed and not h.foreign]
    gone = sorted({h.python for h in installed if h.python and not Path(h.python).exists()})
    reasons = []
    if broken:
        reasons.append(f"missing: {', '.join(broken)}")
    if gone:
        reasons.append(f"they run a Python that no longer exists ({', '.join(gone)})")
    if reasons:
        yield Finding(
            "hooks",
            WARNING,
            "gitmem's hooks are incomplete: " + "; ".join(reasons),
            fix=reinstall,
            safe=True,
            apply=lambda: _reinstall_hooks(path),
        )


def _reinstall_hooks(path: Path) -> None:
    hooks_mod.install(path, "memory")


def check_schema(ctx: _Context) -> Iterator[Finding]:
    for path, message in ctx.problems():
        quoted = shlex.quote(path)
        fix = (
            f"repair the file by hand (its history: git -C {ctx.where} log -p -- {quoted}), "
            f"or remove it: git -C {ctx.where} rm -- {quoted} && git -C {ctx.where} commit"
        )
        if ctx.db.workdir is None:
            fix = f"in a clone of {ctx.where}: {fix.replace(f'-C {ctx.where} ', '')}, then push"
        yield Finding("schema", ERROR, message, fix=fix, path=path)


_NO_MARKERS = "doctor-nomarker-blobs-v1"
"""Blob ids found without conflict markers, kept between runs (as the secrets check's)."""


def check_markers(ctx: _Context) -> Iterator[Finding]:
    """Memories whose committed text holds conflict markers: a plain ``git merge`` without
    the driver stopped on them and someone ran ``git add && git commit``. Nothing is lost
    yet (both sides' text is inside the markers), but readers see the markers."""
    repo = ctx.db.repo
    cache = _CleanBlobs(ctx.db.state_dir / _NO_MARKERS, secrets_mod.DEFAULT_POLICY)
    clean: set[str] = set()
    for entry in ctx.entries():
        if not entry.blob:
            continue
        if entry.blob in cache.known:
            clean.add(entry.blob)
            continue
        data = blob_data(repo, pygit2.Oid(hex=entry.blob))
        starts = re.search(rb"(?m)^<{7}(?: |$)", data)
        if starts is None or not re.search(rb"(?m)^>{7}(?: |$)", data[starts.end() :]):
            clean.add(entry.blob)
            continue
        yield Finding(
            "markers",
            WARNING,
            f"{entry.id} holds conflict markers (<<<<<<< ... >>>>>>>) committed by a merge made "
            "without gitmem's merge driver: both sides' text is inside them",
            fix=(
                f"gitmem --store {ctx.where} show {entry.id}; write the merged text with "
                f"gitmem --store {ctx.where} update {entry.id} (gitmem history {entry.id} has "
                "each side's version)"
            ),
            path=entry.path,
        )
    cache.save(clean)


def check_twins(ctx: _Context) -> Iterator[Finding]:
    """Memory files whose paths differ only in case: made on two clones (``notes/Alice``
    and ``notes/alice``), they merge as two files, and a case-insensitive file system
    (macOS, Windows) checks out only one of them, so edits there land on the wrong one."""
    tip = ctx.db.tip()
    files = _memory_files(ctx.db, str(tip.id) if tip is not None else None)
    groups: dict[str, list[str]] = {}
    for path in files:
        groups.setdefault(path.casefold(), []).append(path)
    for paths in sorted(sorted(group) for group in groups.values() if len(group) > 1):
        ids = [id_from_path(p) or p for p in paths]
        yield Finding(
            "twins",
            WARNING,
            f"{' and '.join(paths)} differ only in case: a case-insensitive file system "
            "(macOS, Windows) holds only one of them",
            fix=(
                f"gitmem --store {ctx.where} show each ({', '.join(ids)}), merge the content "
                f"into one (gitmem update), then gitmem rm the other"
            ),
            path=paths[0],
        )


def _all_ids(ctx: _Context) -> set[str]:
    """Ids of every scope: a link may point into the other store of a combined view."""
    ids = {e.id for e in ctx.entries()}
    for other, peer in ctx.peers.items():
        if other != ctx.scope:
            with contextlib.suppress(GitmemError):
                ids |= {e.id for e in peer.entries()}
    return ids


def check_links(ctx: _Context) -> Iterator[Finding]:
    entries = ctx.entries()
    ids = _all_ids(ctx)
    for entry in entries:
        target = entry.supersedes
        if target and target not in ids:
            existed = ctx.ever_existed(target)
            yield Finding(
                "links",
                WARNING,
                f"{entry.id} supersedes {target}, which is "
                + ("deleted" if existed else "not in the store"),
                fix=(
                    f"gitmem --store {ctx.where} restore {target}"
                    if existed
                    else f"gitmem --store {ctx.where} edit {entry.id} (remove its supersedes line)"
                ),
                path=entry.path,
            )
        for related_id, relationship in entry.related:
            if related_id in ids or related_id == target:
                continue
            yield Finding(
                "links",
                WARNING,
                f"{entry.id} is related ({relationship}) to {related_id}, which is not "
                "in the store",
                fix=f"gitmem --store {ctx.where} edit {entry.id} (drop the link), or "
                f"gitmem --store {ctx.where} restore {related_id} if it was deleted",
                path=entry.path,
            )


def check_chains(ctx: _Context) -> Iterator[Finding]:
    entries = ctx.entries()
    by_id = {e.id: e for e in entries}
    for members in _cycles(entries, by_id):
        first = min(members)
        yield Finding(
            "chains",
            ERROR,
            "version chain cycle: " + " -> ".join([*members, members[0]]) + " (each supersedes "
            "the next, so none is the latest)",
            fix=f"gitmem --store {ctx.where} edit {first} (remove its supersedes line)",
            path=by_id[first].path,
        )
    successors: dict[str, list[str]] = {}
    for entry in entries:
        if entry.supersedes:
            successors.setdefault(entry.supersedes, []).append(entry.id)
    for old_id, names in sorted(successors.items()):
        if len(names) < 2:
            continue
        names = sorted(names)
        yield Finding(
            "chains",
            WARNING,
            f"version-chain fork: {old_id} is superseded by {len(names)} memories "
            f"({', '.join(names)}); readers follow the newest",
            fix=(
                f"gitmem --store {ctx.where} history {old_id}; merge the content into one "
                f"(gitmem update), then gitmem rm the other(s)"
            ),
            path=by_id[old_id].path if old_id in by_id else None,
        )


def _cycles(entries: Sequence[_Entry], by_id: dict[str, _Entry]) -> Iterator[list[str]]:
    """Each ``supersedes`` cycle once, rotated to begin at its smallest id, in the order
    the oldest memory leading into it comes (each memory supersedes at most one, so every
    chain is a path that ends, or runs into exactly one cycle: one pass over all)."""
    done: set[str] = set()
    for entry in entries:
        path: list[str] = []
        on_path: set[str] = set()
        current: _Entry | None = entry
        while current is not None and current.id not in done and current.id not in on_path:
            path.append(current.id)
            on_path.add(current.id)
            current = by_id.get(current.supersedes) if current.supersedes else None
        if current is not None and current.id in on_path:
            cycle = path[path.index(current.id) :]
            pivot = cycle.index(min(cycle))
            yield cycle[pivot:] + cycle[:pivot]
        done.update(path)


def _memory_secrets(ctx: _Context) -> Iterator[tuple[_Entry, list[secrets_mod.SecretFinding]]]:
    policy = secrets_mod.policy_from_config(ctx.store.config(ctx.scope).raw)
    repo = ctx.db.repo
    cache = _CleanBlobs(ctx.db.state_dir / _CLEAN_BLOBS, policy)
    clean: set[str] = set()
    for entry in ctx.entries():
        if not entry.blob:
            continue
        if entry.blob in cache.known:
            clean.add(entry.blob)  # scanned clean under this policy by an earlier run
            continue
        findings = secrets_mod.scan_memory_bytes(
            blob_data(repo, pygit2.Oid(hex=entry.blob)), policy
        )
        if findings:
            yield entry, findings
        else:
            clean.add(entry.blob)
    cache.save(clean)


_CLEAN_BLOBS = "doctor-clean-blobs"


class _CleanBlobs:
    """Blob ids a credential scan found clean, kept between runs (a derived cache, like
    the index: deleting it only costs one full scan).

    A blob's content never changes, so a blob clean once is clean again under the same
    policy and the same scanner; the file's first line is a digest of both (the policy's
    patterns and allow-list, and the source of :mod:`gitmem.format.secrets`), and a file made
    under another is ignored. Only the blobs of current memories are kept.
    """

    def __init__(self, path: Path, policy: secrets_mod.SecretPolicy) -> None:
        self.path = path
        digest = hashlib.sha256(repr(policy).encode("utf-8", "surrogateescape"))
        with contextlib.suppress(OSError):
            digest.update(Path(secrets_mod.__file__).read_bytes())
        self.key = digest.hexdigest()
        self.known: set[str] = set()
        with contextlib.suppress(OSError, UnicodeDecodeError):
            lines = self.path.read_text("ascii").splitlines()
            if lines and lines[0] == self.key:
                self.known = set(lines[1:])

    def save(self, clean: set[str]) -> None:
        if clean == self.known:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        # A store that cannot be written (read-only, another user's) is scanned every run.
        with contextlib.suppress(OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write("\n".join([self.key, *sorted(clean)]) + "\n")
            os.replace(tmp, self.path)
        with contextlib.suppress(OSError):
            tmp.unlink()


def check_secrets(ctx: _Context) -> Iterator[Finding]:
    for entry, findings in _memory_secrets(ctx):
        kinds = ", ".join(f"{f.kind} (line {f.line})" for f in findings)
        yield Finding(
            "secrets",
            WARNING,
            f"{entry.id} holds what looks like a credential: {kinds}",
            fix=(
                f"gitmem --store {ctx.where} edit {entry.id} to remove it, and rotate the "
                "credential: it stays in git history"
            ),
            path=entry.path,
        )


def _world_writable(root: Path) -> Iterator[Path]:
    """Paths below ``root`` (links not followed) that anyone may write: one ``lstat`` each,
    without building a Path per file (a large store has tens of thousands)."""
    with contextlib.suppress(OSError):
        # The folder itself first: ``git init`` under umask 000 leaves it 0777 too.
        if root.lstat().st_mode & stat.S_IWOTH and not root.is_symlink():
            yield root
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                entries = list(listing)
        except OSError:
            continue  # removed, or not readable: nothing to say about what is inside
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & stat.S_IWOTH:
                yield Path(entry.path)
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)


def check_permissions(ctx: _Context) -> Iterator[Finding]:
    top = ctx.db.workdir or ctx.db.gitdir
    if ctx.scope is Scope.USER:
        mode = stat.S_IMODE(top.stat().st_mode)
        if mode & 0o077:
            yield Finding(
                "permissions",
                WARNING,
                f"the user store {top} is open to others (mode {mode:o}); it should be 700",
                fix=f"chmod 700 {shlex.quote(str(top))}",
                safe=True,
                path=str(top),
                apply=lambda: top.chmod(0o700),
            )
    roots = {top, ctx.db.gitdir}
    # The work tree holds .git: walk it once.
    walked = [r for r in roots if not any(r != o and r.is_relative_to(o) for o in roots)]
    found = sorted({p for root in walked for p in _world_writable(root)})
    if found:
        shown = ", ".join(str(p) for p in found[:3]) + (", ..." if len(found) > 3 else "")
        yield Finding(
            "permissions",
            WARNING,
            f"{len(found)} world-writable path(s) in the store: {shown}",
            fix=f"chmod -R o-w {' '.join(shlex.quote(str(r)) for r in sorted(roots))}",
            safe=True,
            apply=lambda: _drop_world_write(found),
        )


def _drop_world_write(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.chmod(stat.S_IMODE(path.lstat().st_mode) & ~stat.S_IWOTH)


_CHECKERS: dict[str, Callable[[_Context], Iterable[Finding]]] = {
    "fsck": check_fsck,
    "locks": check_locks,
    "leftovers": check_leftovers,
    "merge": check_merge,
    "worktree": check_worktree,
    "index": check_index,
    "merge-driver": check_merge_driver,
    "hooks": check_hooks,
    "schema": check_schema,
    "twins": check_twins,
    "markers": check_markers,
    "links": check_links,
    "chains": check_chains,
    "secrets": check_secrets,
    "permissions": check_permissions,
}


# -- gitmem secrets --------------------------------------------------------------------------


@dataclass(frozen=True)
class FileFinding:
    """A credential found in a file (or a staged file, or a memory)."""

    path: str
    finding: secrets_mod.SecretFinding

    def to_dict(self) -> dict[str, Any]:
        return {"path": secrets_mod.redact(self.path), **self.finding.to_dict()}

    def line(self) -> str:
        path = secrets_mod.redact(self.path)  # a file named after a token is not printed either
        return f"{path}:{self.finding.line}: {self.finding.kind}: {self.finding.excerpt}"


MAX_SCAN_BYTES = 16 * 1024 * 1024
"""Files larger than this are skipped by ``gitmem secrets PATH``: not memories or notes."""


def scan_paths(
    paths: Sequence[str | os.PathLike[str]], policy: secrets_mod.SecretPolicy | None = None
) -> list[FileFinding]:
    """Credentials in these files (directories: every file below, ``.git`` skipped).

    Symbolic links are not followed, so a link cannot make the scan read outside.
    """
    out: list[FileFinding] = []
    for given in paths:
        root = Path(given)
        if not root.exists() and not root.is_symlink():
            raise StoreError(f"{root}: no such file or directory")
        for path in _files(root):
            try:
                if path.lstat().st_size > MAX_SCAN_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue  # binary
            out.extend(FileFinding(str(path), f) for f in secrets_mod.scan_bytes(data, policy))
    return out


def _files(root: Path) -> Iterator[Path]:
    if root.is_symlink():
        return
    if root.is_file():
        yield root
        return
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(directory) / name
            if not path.is_symlink() and path.is_file():
                yield path


def scan_staged(repo: str | os.PathLike[str] = ".") -> list[FileFinding]:
    """Credentials in the files staged in the git repository at ``repo`` (its index)."""
    cwd = Path(repo)
    names = run_git(
        ["diff", "--cached", "--name-only", "-z", "--diff-filter=ACMR"], cwd=cwd, check=False
    )
    if names.returncode != 0:
        message = names.stderr.decode("utf-8", "replace").strip().splitlines()
        raise StoreError(
            f"{cwd.resolve()} is not a git repository" + (f" ({message[-1]})" if message else ""),
        )
    policy = hooks_mod.staged_policy(str(cwd))
    out: list[FileFinding] = []
    for name in names.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not name:
            continue
        blob = run_git(["cat-file", "blob", f":{name}"], cwd=cwd, check=False)
        if blob.returncode != 0 or b"\0" in blob.stdout[:8192]:
            continue
        out.extend(FileFinding(name, f) for f in secrets_mod.scan_bytes(blob.stdout, policy))
    return out


def scan_store(store: Store, scope: Scope | str | None = None) -> list[FileFinding]:
    """Credentials in the memories of ``store`` as committed (every scope, or one)."""
    out: list[FileFinding] = []
    for each in [Scope(scope)] if scope is not None else store.scopes:
        ctx = _Context(store, store.db(each), each)
        for entry, findings in _memory_secrets(ctx):
            out.extend(FileFinding(entry.path or entry.id, f) for f in findings)
    return out


@dataclass(frozen=True)
class HistoryFinding:
    """A credential in a past commit: in a file it added, or in its message."""

    commit: str
    """The commit that introduced it (the oldest, in topological order, that holds it)."""
    path: str
    """The file's path in that commit, or ``"(commit message)"``."""
    finding: secrets_mod.SecretFinding
    present: bool
    """Whether a branch tip still holds that file content (else only history does)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "path": secrets_mod.redact(self.path),
            "present": self.present,
            **self.finding.to_dict(),
        }

    def line(self) -> str:
        where = "" if self.present else " (history only)"
        return (
            f"{self.commit[:10]} {secrets_mod.redact(self.path)}:{self.finding.line}: "
            f"{self.finding.kind}: "
            f"{self.finding.excerpt}{where}"
        )


MESSAGE_PATH = "(commit message)"


def _history_tips(repo: pygit2.Repository) -> list[pygit2.Oid]:
    """The commits every local branch, remote-tracking branch and tag points at."""
    tips: list[pygit2.Oid] = []
    for name in repo.references:
        if not name.startswith(("refs/heads/", "refs/remotes/", "refs/tags/")):
            continue
        try:
            target = repo.references[name].peel(pygit2.Commit)
        except (pygit2.GitError, KeyError, ValueError):
            continue  # a symbolic HEAD, a tag of a tree, a ref to a missing object
        if target.id not in tips:
            tips.append(target.id)
    return tips


def scan_history(store: Store, scope: Scope | str | None = None) -> list[HistoryFinding]:
    """Credentials anywhere in the store's history: every blob any commit reachable from a
    branch, remote-tracking branch or tag ever held (each blob scanned once, reported at the
    commit that introduced it) and every commit message.

    What ``gitmem purge`` must remove: a credential deleted from the tip still sits in the
    commit that added it, on every clone.
    """
    from gitmem.features.purge import new_blobs, text_blob

    out: list[HistoryFinding] = []
    for each in [Scope(scope)] if scope is not None else store.scopes:
        db = store.db(each)
        repo = db.repo
        policy = secrets_mod.policy_from_config(store.config(each).raw)
        tips = _history_tips(repo)
        if not tips:
            continue
        present: set[pygit2.Oid] = set()
        for tip in tips:
            for _ in new_blobs(repo, get_commit(repo, tip).tree, present):
                pass
        order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
        walker = repo.walk(tips[0], order)
        for tip in tips[1:]:
            walker.push(tip)
        seen: set[pygit2.Oid] = set()
        for commit in walker:
            hexsha = str(commit.id)
            for found in policy.scan(commit.message):
                out.append(HistoryFinding(hexsha, MESSAGE_PATH, found, True))
            for oid, path in new_blobs(repo, commit.tree, seen):
                data = text_blob(repo, oid, MAX_SCAN_BYTES)
                if data is None:
                    continue
                for found in secrets_mod.scan_memory_bytes(data, policy):
                    out.append(HistoryFinding(hexsha, path, found, oid in present))
    return out
