"""Health checks of the git repository: fsck, locks, leftovers, an unfinished merge, the
work tree, the merge driver, the hooks and permissions (``gitmem doctor``)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shlex
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pygit2

from gitmem.base import paths as state_paths
from gitmem.base.errors import GitmemError, StoreError
from gitmem.base.trailers import CommitSpec
from gitmem.entry import hooks as hooks_mod
from gitmem.entry.doctor_context import ERROR, INFO, WARNING, Context, Finding
from gitmem.entry.doctor_memories import has_markers
from gitmem.format.layout import MEMORY_ROOTS, is_memory_file
from gitmem.format.model import Scope
from gitmem.git.command import run_git
from gitmem.git.db import GitDB, operation_in_progress
from gitmem.git.diff import blob_at, changed_paths
from gitmem.git.locks import STALE_LOCK_AGE, TEMP_FILE, pid_alive
from gitmem.store import mergedriver
from gitmem.store.sync import commit_pending_forks

_GIT_LOCKS = ("index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")


def check_fsck(ctx: Context) -> Iterator[Finding]:
    result = run_git(
        ["fsck", "--strict", "--no-dangling", "--no-progress"], gitdir=ctx.db.gitdir, check=False
    )
    output = (result.stdout + result.stderr).decode("utf-8", "replace")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if result.returncode == 0 and not lines:
        return
    shown = "; ".join(lines[:3]) + (f" (and {len(lines) - 3} more lines)" if len(lines) > 3 else "")
    yield Finding(
        "fsck",
        ERROR if result.returncode != 0 else WARNING,
        f"git fsck --strict reports: {shown or f'exit {result.returncode}'}",
        fix=(
            f"git --git-dir={shlex.quote(str(ctx.db.gitdir))} fsck --full for details; fetch the "
            "missing objects from a clone (git fetch <clone>) or restore the repository from one"
        ),
    )


def _age(path: Path) -> float | None:
    """Seconds since ``path`` was last written (None: it is gone)."""
    try:
        return time.time() - path.lstat().st_mtime
    except FileNotFoundError:
        return None


def _remove(path: Path, busy: Callable[[float], bool]) -> None:
    """Remove ``path`` unless, looked at again at fix time, ``busy(age)`` says it is in use
    again: a lock taken, or a file written, since the check is never stolen."""
    age = _age(path)
    if age is not None and busy(age):
        raise StoreError(f"{path} is in use again; left alone")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def check_locks(ctx: Context) -> Iterator[Finding]:
    gitdir = ctx.db.gitdir
    for lock in [*(gitdir / name for name in _GIT_LOCKS), *sorted(gitdir.glob("refs/**/*.lock"))]:
        age = _age(lock) if lock.is_file() else None
        if age is None:
            continue  # none, or released while we looked
        if age <= STALE_LOCK_AGE:
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
            apply=functools.partial(_remove, lock, lambda age: age <= STALE_LOCK_AGE),
        )


def check_leftovers(ctx: Context) -> Iterator[Finding]:
    marker_tmp = ctx.db.state_dir / (state_paths.WORKTREE_SYNCED + ".tmp")
    candidates: list[tuple[Path, int | None]] = [(marker_tmp, None)] if marker_tmp.is_file() else []
    if ctx.db.workdir is not None:
        for root in MEMORY_ROOTS:
            for path in (ctx.db.workdir / root).rglob(".*.tmp"):
                match = TEMP_FILE.match(path.name)
                if match and path.is_file() and not path.is_symlink():
                    candidates.append((path, int(match.group(1))))
    for folder in state_paths.set_aside_folders(ctx.db.gitdir):
        # Set aside unread (gitmem.base.paths.state_dir): nothing in it is used or committed.
        held = state_paths.held(folder)
        yield Finding(
            "leftovers",
            WARNING,
            f"{folder} is a state folder gitmem set aside unread: it was not made for this "
            "git directory (it came with a copy, clone or extract, or predates gitmem's "
            f"stamps){'; it holds ' + '; '.join(held) if held else ''}. Nothing in it is "
            "used or committed",
            fix=(
                "look through it if it may be yours (an unfinished edit: copy edits/<id>.md "
                "and its .base back into the state folder, then gitmem edit <id>), then "
                f"rm -r {shlex.quote(str(folder))}"
            ),
            path=str(folder),
        )
    for path, pid in candidates:
        age = _age(path)
        if age is None or _writing(pid, age):
            continue  # gone, or a write in progress
        yield Finding(
            "leftovers",
            WARNING,
            f"{path} is a temporary file a writer left when it died (no memory is lost: "
            "files are renamed into place only when whole)",
            fix=f"rm {shlex.quote(str(path))}",
            safe=True,
            path=str(path),
            apply=functools.partial(_remove, path, functools.partial(_writing, pid)),
        )


def _writing(pid: int | None, age: float) -> bool:
    """Whether a temporary file may still be being written: its writer (named by the pid in
    its name) is alive, or, for a file without a pid, it is younger than the stale age."""
    if pid is not None:
        return pid == os.getpid() or pid_alive(pid)
    return age <= STALE_LOCK_AGE


def check_merge(ctx: Context) -> Iterator[Finding]:
    """An unfinished merge and the memory files holding its conflict markers (the fix: abort
    and merge again with gitmem's driver, never commit the markers); once none is, forks
    the merge driver left waiting on no commit."""
    db = ctx.db
    if db.workdir is None:
        return
    state = operation_in_progress(db.gitdir)
    if state is None:  # none: forks the merge driver left waiting on no commit
        try:
            pending = mergedriver.load_pending(db.gitdir)
        except GitmemError as exc:
            yield Finding(
                "merge",
                WARNING,
                f"{exc} (a fork a git merge kept: it may hold an edit on no commit)",
                fix="read it, keep its edit with gitmem add or update, then rm it from "
                f"{mergedriver.pending_dir(db.gitdir)}",
            )
            return
        if pending:
            yield Finding(
                "merge",
                WARNING,
                f"{len(pending)} fork(s) a plain git merge or rebase kept wait in "
                f"{mergedriver.pending_dir(db.gitdir)}, on no commit, so a git push does not "
                f"carry them: {', '.join(p.fork.id for p in pending)}",
                fix=f"gitmem --store {ctx.where} conflicts (commits those whose merge landed)",
                safe=True,
                apply=lambda: commit_pending_forks(db),
            )
        return
    what, command = state
    files: list[str] = []
    for code, path in _status(db.workdir, "no"):
        full = db.workdir / path
        with contextlib.suppress(OSError):
            if full.is_file() and not full.is_symlink() and has_markers(full.read_bytes()):
                code = "UU"
        if "U" in code or code in ("AA", "DD"):
            files.append(path)
    files.sort()
    shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
    detail = f": {len(files)} memory file(s) in conflict or holding conflict markers ({shown})"
    where = ctx.where
    driver = f"gitmem --store {where} doctor --fix (registers the merge driver), then "
    if mergedriver.driver_registered(db.path):
        driver = ""
    redo = f"git -C {where} {command} again"
    if command == "merge":
        redo = f"gitmem --store {where} sync (or {redo})"
    yield Finding(
        "merge",
        ERROR,
        f"{what} is in progress and unfinished{detail if files else ''}; do not git add and "
        "commit these files: that stores the markers, or drops one side's change",
        fix=(
            f"git -C {where} {command} --abort (both sides stay committed: nothing is lost), "
            f"then {driver}{redo}, which merges memories field by field and reports forks "
            "instead of markers"
        ),
        path=files[0] if files else None,
    )


def _status(workdir: Path, untracked: str) -> Iterator[tuple[str, str]]:
    """(code, path) of each entry ``git status`` gives under the memory folders."""
    args = ["status", "--porcelain=v1", "-z", f"--untracked-files={untracked}"]
    result = run_git([*args, "--", *MEMORY_ROOTS], cwd=workdir, check=False)
    for entry in result.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if len(entry) >= 4 and result.returncode == 0:
            yield entry[:2], entry[3:]


def _left_behind(db: GitDB, synced: str, tip: pygit2.Commit) -> list[str]:
    """The paths a writer that died after moving the branch left at the commit it last
    synced: the file, or git's index entry, still holds that commit's version where the tip
    has another. Empty when a plain git command (commit, pull, checkout) moved the branch:
    it brings the files and git's index along itself, and leaves the marker where it was."""
    try:
        old: pygit2.Commit = db.repo[synced].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return []  # gone (a rebase dropped it, then gc): nothing to compare against
    try:
        index = {entry.path: entry.id for entry in pygit2.Index(str(db.gitdir / "index"))}
    except pygit2.GitError:
        index = {}  # an index libgit2 cannot read: the files alone say
    worktree = db.worktree
    assert worktree is not None
    changed = sorted(changed_paths(old.tree, tip.tree))
    return [p for p in changed if blob_at(old.tree, p) in (worktree.blob(p), index.get(p))]


def check_worktree(ctx: Context) -> Iterator[Finding]:
    db = ctx.db
    if db.workdir is None:
        return
    if operation_in_progress(db.gitdir) is not None:
        # The merge check says how to finish it; any advice here (add and commit, or a
        # "heal" that rewrites git's index) would lose one side of it.
        return
    tip = db.tip()
    marker = db.state_dir / state_paths.WORKTREE_SYNCED
    synced = marker.read_text().strip() if marker.is_file() else None
    if tip is not None and synced is not None and synced != str(tip.id):
        behind = _left_behind(db, synced, tip)
        if behind:
            yield Finding(
                "worktree",
                WARNING,
                f"the work tree is at {synced[:10]}, behind the branch at {str(tip.id)[:10]} "
                f"in {len(behind)} file(s), e.g. {behind[0]} (a writer died between committing "
                "and updating the files)",
                fix=f"gitmem --store {ctx.where} doctor --fix (any gitmem write also does it)",
                safe=True,
                # A write that changes nothing: under the writer lock it brings the work tree up.
                apply=lambda: db.write(
                    lambda _: (CommitSpec(subject="doctor: nothing to commit"), None)
                ),
            )
            return  # the edits below would all be that lag
    for code, path in _status(db.workdir, "all"):
        if TEMP_FILE.match(Path(path).name):
            continue  # the leftovers check reports these
        new = code == "??"
        drop = f"rm {shlex.quote(str(db.workdir / path))}"
        yield Finding(
            "worktree",
            INFO if new and not is_memory_file(path) else WARNING,
            f"{path} {'untracked' if new else 'has uncommitted changes'} (gitmem refuses to "
            "overwrite it until it is committed or dropped)",
            fix=f"git -C {ctx.where} add -- {shlex.quote(path)} && git -C {ctx.where} commit, or "
            + (drop if new else f"drop it: git -C {ctx.where} checkout -- {shlex.quote(path)}"),
            path=path,
        )


def _driver_program(repo: pygit2.Repository) -> str | None:
    """The program the registered merge driver runs, when it is not there any more."""
    try:
        program = shlex.split(str(repo.config[mergedriver.DRIVER_CONFIG]))[0]
    except (KeyError, IndexError, pygit2.GitError, ValueError):
        return None
    return None if shutil.which(program) else program  # a path is checked as it is


def check_merge_driver(ctx: Context) -> Iterator[Finding]:
    if ctx.db.workdir is None:
        return  # merges happen in clones with a work tree; a bare store merges nothing
    path = ctx.db.path
    if not mergedriver.driver_registered(path):
        message = (
            "the gitmem merge driver is not registered: plain git merge/pull falls back to a "
            "text merge of memory files"
        )
    elif (gone := _driver_program(ctx.db.repo)) is not None:
        message = (
            f"the gitmem merge driver runs {gone}, which is not there any more (a moved or "
            "deleted virtualenv): the next git merge or pull of memory files fails"
        )
    else:
        return
    yield Finding(
        "merge-driver",
        WARNING,
        message,
        fix=f"git -C {ctx.where} config {mergedriver.DRIVER_CONFIG} "
        f"{shlex.quote(mergedriver.driver_command())}",
        safe=True,
        apply=lambda: mergedriver.register_driver(path),
    )


def check_hooks(ctx: Context) -> Iterator[Finding]:
    path = ctx.db.path
    try:
        status = hooks_mod.status(path)
    except GitmemError:
        return
    memory_hooks = [h for h in status.hooks if h.name in hooks_mod.MEMORY_HOOKS]
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
    reasons = [f"missing: {', '.join(broken)}"] if broken else []
    reasons += [f"they run a Python that no longer exists ({', '.join(gone)})"] if gone else []
    if reasons:
        yield Finding(
            "hooks",
            WARNING,
            "gitmem's hooks are incomplete: " + "; ".join(reasons),
            fix=reinstall,
            safe=True,
            apply=lambda: hooks_mod.install(path, "memory"),
        )


def _world_writable(root: Path) -> Iterator[Path]:
    """Paths in ``root``, itself first (``git init`` under umask 000 leaves it 0777 too), that
    anyone may write; links are not followed."""
    below = (f"{d}/{n}" for d, dirs, files in os.walk(root) for n in (*dirs, *files))
    for place in itertools.chain([str(root)], below):
        with contextlib.suppress(OSError):
            mode = os.lstat(place).st_mode
            if mode & stat.S_IWOTH and not stat.S_ISLNK(mode):
                yield Path(place)


def check_permissions(ctx: Context) -> Iterator[Finding]:
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
