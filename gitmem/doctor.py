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
- ``worktree``: the work tree caught up with the branch, and no uncommitted edits
  in the memory folders;
- ``index``: the SQLite index agrees with a scan of git (same ids, same content,
  same unreadable files);
- ``merge-driver``: ``merge.gitmem.driver`` registered (work-tree stores);
- ``hooks``: gitmem's hooks complete and pointing at an interpreter that exists;
- ``schema``: files under the memory folders that are not valid memories;
- ``links``: ``supersedes`` and ``related`` naming memories that do not exist;
- ``chains``: version-chain cycles and forks (two successors of one memory);
- ``secrets``: memories holding what looks like a credential;
- ``permissions``: a user store readable by others, anything world-writable.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hooks as hooks_mod
from . import merge as merge_mod
from . import secrets as secrets_mod
from .errors import GitmemError, StoreError
from .gitdb import CommitSpec, GitDB, Snapshot
from .layout import MEMORY_ROOTS, is_memory_file
from .model import Memory, Scope
from .store import Problem, Store, open_store
from .versions import successor_map, walk_back

CHECKS: tuple[str, ...] = (
    "fsck",
    "locks",
    "leftovers",
    "worktree",
    "index",
    "merge-driver",
    "hooks",
    "schema",
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
) -> DoctorReport:
    """Run the checks on every scope of ``store`` (or one); with ``fix``, apply the safe fixes."""
    chosen = list(CHECKS if checks is None else checks)
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown:
        raise StoreError(
            f"unknown check(s) {', '.join(unknown)}", hint="checks are: " + ", ".join(CHECKS)
        )
    scopes = [Scope(scope)] if scope is not None else store.scopes
    report = DoctorReport([str(store.db(s).path) for s in scopes], chosen)
    for each in scopes:
        db = store.db(each)
        context = _Context(store, db, each)
        for name in chosen:
            found = list(_CHECKERS[name](context))
            for finding in found:
                finding.scope = str(each)
            report.findings.extend(found)
            if fix:
                _apply(found)
    return report


def _apply(findings: Sequence[Finding]) -> None:
    for finding in findings:
        if not finding.safe or finding.apply is None:
            continue
        try:
            finding.apply()
            finding.fixed = True
        except (OSError, GitmemError, subprocess.SubprocessError) as exc:
            finding.fix_error = str(exc)


@dataclass
class _Context:
    """One scope's repository, with the git scan shared by the checks that need it."""

    store: Store
    db: GitDB
    scope: Scope
    _scan: Store | None = None
    _memories: list[Memory] | None = None
    _problems: list[Problem] | None = None

    @property
    def where(self) -> str:
        return shlex.quote(str(self.db.path))

    def reference(self) -> Store:
        """The store read straight from git (no index): what every other view must agree with."""
        if self._scan is None:
            self._scan = open_store(self.db.path, clock=self.store.clock)
            self._scan.use_index = False
        return self._scan

    def memories(self) -> list[Memory]:
        """Every memory as git has it (read once per run: four checks need them all)."""
        if self._memories is None:
            self._memories = self.reference().list(include_superseded=True, include_archived=True)
        return self._memories

    def problems(self) -> list[Problem]:
        """Files under the memory folders git has that are not valid memories (read once).

        Parsing every memory is most of doctor's cost, so the scan that listed them is not
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


def _git(db: GitDB, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEEP_ENV}
    try:
        return subprocess.run(
            ["git", f"--git-dir={db.gitdir}", *args],
            capture_output=True,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise StoreError("the git binary is not on PATH") from None


_KEEP_ENV = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")


# -- the checks ------------------------------------------------------------------------------


def check_fsck(ctx: _Context) -> Iterator[Finding]:
    result = _git(ctx.db, "fsck", "--strict", "--no-dangling", "--no-progress")
    lines = [
        line.strip()
        for line in (result.stdout + result.stderr).decode("utf-8", "replace").splitlines()
        if line.strip()
    ]
    if result.returncode == 0 and not lines:
        return
    shown = "; ".join(lines[:3]) + (f" (and {len(lines) - 3} more lines)" if len(lines) > 3 else "")
    yield Finding(
        "fsck",
        ERROR if result.returncode != 0 else WARNING,
        f"git fsck --strict reports: {shown or 'exit ' + str(result.returncode)}",
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
    marker_tmp = ctx.db.state_dir / "worktree-synced.tmp"
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


def check_worktree(ctx: _Context) -> Iterator[Finding]:
    db = ctx.db
    if db.workdir is None:
        return
    tip = db.tip()
    marker = db.state_dir / "worktree-synced"
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
    result = subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *MEMORY_ROOTS],
        cwd=db.workdir,
        capture_output=True,
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
    index = ctx.store.index(ctx.scope)
    try:
        indexed = _by_id(index.select(include_superseded=True, include_archived=True))
        indexed_problems = {path for path, _ in index.problems()}
    except Exception as exc:  # any failure of the derived index is a finding, not a crash
        yield _rebuild_finding(ctx, f"the index cannot be read ({type(exc).__name__}: {exc})")
        return
    scanned = _by_id(ctx.memories())
    scanned_problems = {p.path for p in ctx.problems()}
    missing = sorted(set(scanned) - set(indexed))
    extra = sorted(set(indexed) - set(scanned))
    differ = sorted(i for i in set(scanned) & set(indexed) if scanned[i] != indexed[i])
    problems = scanned_problems ^ indexed_problems
    if not (missing or extra or differ or problems):
        return
    parts = []
    for label, ids in (("missing", missing), ("not in git", extra), ("stale", differ)):
        if ids:
            parts.append(
                f"{len(ids)} {label} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
            )
    if problems:
        parts.append(f"{len(problems)} unreadable file(s) seen differently")
    yield _rebuild_finding(ctx, "the index disagrees with git: " + "; ".join(parts))


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


def check_merge_driver(ctx: _Context) -> Iterator[Finding]:
    if ctx.db.workdir is None:
        return  # merges happen in clones with a work tree; a bare store merges nothing
    if merge_mod.driver_registered(ctx.db.path):
        return
    path = ctx.db.path
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
    for problem in ctx.problems():
        quoted = shlex.quote(problem.path)
        fix = (
            f"repair the file by hand (its history: git -C {ctx.where} log -p -- {quoted}), "
            f"or remove it: git -C {ctx.where} rm -- {quoted} && git -C {ctx.where} commit"
        )
        if ctx.db.workdir is None:
            fix = f"in a clone of {ctx.where}: {fix.replace(f'-C {ctx.where} ', '')}, then push"
        yield Finding("schema", ERROR, problem.message, fix=fix, path=problem.path)


def _all_ids(ctx: _Context) -> set[str]:
    """Ids of every scope: a link may point into the other store of a combined view."""
    ids = {m.id for m in ctx.memories()}
    for other in ctx.store.scopes:
        if other != ctx.scope:
            with contextlib.suppress(GitmemError):
                ids |= {m.id for m in _Context(ctx.store, ctx.store.db(other), other).memories()}
    return ids


def check_links(ctx: _Context) -> Iterator[Finding]:
    memories = ctx.memories()
    ids = _all_ids(ctx)
    store = ctx.reference()
    for memory in memories:
        target = memory.supersedes
        if target and target not in ids:
            existed = _ever_existed(store, target)
            yield Finding(
                "links",
                WARNING,
                f"{memory.id} supersedes {target}, which is "
                + ("deleted" if existed else "not in the store"),
                fix=(
                    f"gitmem --store {ctx.where} restore {target}"
                    if existed
                    else f"gitmem --store {ctx.where} edit {memory.id} (remove its supersedes line)"
                ),
                path=memory.path,
            )
        for related in memory.related:
            if related.id in ids or related.id == target:
                continue
            yield Finding(
                "links",
                WARNING,
                f"{memory.id} is related ({related.relationship}) to {related.id}, which is not "
                "in the store",
                fix=f"gitmem --store {ctx.where} edit {memory.id} (drop the link), or "
                f"gitmem --store {ctx.where} restore {related.id} if it was deleted",
                path=memory.path,
            )


def _ever_existed(store: Store, memory_id: str) -> bool:
    try:
        return len(store.history(memory_id)) > 0
    except GitmemError:
        return False


def check_chains(ctx: _Context) -> Iterator[Finding]:
    memories = ctx.memories()
    by_id = {m.id: m for m in memories}
    reported: set[frozenset[str]] = set()
    for memory in memories:
        if not memory.supersedes:
            continue
        chain = walk_back(memory, by_id.get)
        if not any("cycle" in w for w in chain.warnings):
            continue
        members = _cycle_members(memory, by_id)
        key = frozenset(members)
        if key in reported:
            continue
        reported.add(key)
        first = min(members)
        yield Finding(
            "chains",
            ERROR,
            "version chain cycle: " + " -> ".join([*members, members[0]]) + " (each supersedes "
            "the next, so none is the latest)",
            fix=f"gitmem --store {ctx.where} edit {first} (remove its supersedes line)",
            path=by_id[first].path,
        )
    for old_id, successors in sorted(successor_map(memories).items()):
        if len(successors) < 2:
            continue
        names = sorted(m.id for m in successors)
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


def _cycle_members(start: Memory, by_id: dict[str, Memory]) -> list[str]:
    """The ids on the cycle ``start``'s chain runs into, rotated to begin at the smallest."""
    seen: list[str] = []
    current: Memory | None = start
    while current is not None and current.id not in seen:
        seen.append(current.id)
        current = by_id.get(current.supersedes) if current.supersedes else None
    if current is None:
        return seen
    cycle = seen[seen.index(current.id) :]
    pivot = cycle.index(min(cycle))
    return cycle[pivot:] + cycle[:pivot]


def _memory_secrets(ctx: _Context) -> Iterator[tuple[Memory, list[secrets_mod.SecretFinding]]]:
    policy = secrets_mod.policy_from_config(ctx.store.config(ctx.scope).raw)
    snap = ctx.db.snapshot()
    for memory in ctx.memories():
        data = snap.read(memory.path) if memory.path else None
        if data is not None:
            findings = secrets_mod.scan_bytes(data, policy)
            if findings:
                yield memory, findings


def check_secrets(ctx: _Context) -> Iterator[Finding]:
    for memory, findings in _memory_secrets(ctx):
        kinds = ", ".join(f"{f.kind} (line {f.line})" for f in findings)
        yield Finding(
            "secrets",
            WARNING,
            f"{memory.id} holds what looks like a credential: {kinds}",
            fix=(
                f"gitmem --store {ctx.where} edit {memory.id} to remove it, and rotate the "
                "credential: it stays in git history"
            ),
            path=memory.path,
        )


def _world_writable(root: Path) -> Iterator[Path]:
    for directory, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(directory) / name
            with contextlib.suppress(FileNotFoundError):
                st = path.lstat()
                if not stat.S_ISLNK(st.st_mode) and st.st_mode & stat.S_IWOTH:
                    yield path


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
    found = sorted({p for root in roots for p in _world_writable(root)})
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
    "worktree": check_worktree,
    "index": check_index,
    "merge-driver": check_merge_driver,
    "hooks": check_hooks,
    "schema": check_schema,
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
        return {"path": self.path, **self.finding.to_dict()}

    def line(self) -> str:
        return f"{self.path}:{self.finding.line}: {self.finding.kind}: {self.finding.excerpt}"


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
    names = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "-z", "--diff-filter=ACMR"],
        cwd=cwd,
        capture_output=True,
        check=False,
    )
    if names.returncode != 0:
        message = names.stderr.decode("utf-8", "replace").strip().splitlines()
        raise StoreError(
            f"{cwd.resolve()} is not a git repository" + (f" ({message[-1]})" if message else ""),
        )
    policy = secrets_mod.staged_policy(str(cwd))
    out: list[FileFinding] = []
    for name in names.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not name:
            continue
        blob = subprocess.run(
            ["git", "cat-file", "blob", f":{name}"], cwd=cwd, capture_output=True, check=False
        )
        if blob.returncode != 0 or b"\0" in blob.stdout[:8192]:
            continue
        out.extend(FileFinding(name, f) for f in secrets_mod.scan_bytes(blob.stdout, policy))
    return out


def scan_store(store: Store, scope: Scope | str | None = None) -> list[FileFinding]:
    """Credentials in the memories of ``store`` as committed (every scope, or one)."""
    out: list[FileFinding] = []
    for each in [Scope(scope)] if scope is not None else store.scopes:
        ctx = _Context(store, store.db(each), each)
        for memory, findings in _memory_secrets(ctx):
            out.extend(FileFinding(memory.path or memory.id, f) for f in findings)
    return out
