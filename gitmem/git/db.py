"""The git layer: a write is a *plan* that reads a :class:`Snapshot` of the branch tip,
stages changes and says what the commit should say; :meth:`GitDB.write` runs it under the
writer lock, commits, moves the branch with compare-and-swap and brings a work tree along.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pygit2
from pygit2.enums import SortMode

from gitmem.base import logs, paths
from gitmem.base.clock import Clock, SystemClock, parse_timestamp, to_utc
from gitmem.base.errors import (
    ConflictError,
    InvalidInputError,
    LockTimeoutError,
    NotFoundError,
    StoreError,
)
from gitmem.base.trailers import (
    Author,
    CommitSpec,
    _email_local,
    format_message,
)
from gitmem.git import includes, maintenance, trust
from gitmem.git.locks import STALE_LOCK_AGE, clear_stale_lock, try_flock
from gitmem.git.objects import (
    FastForward,
    Snapshot,
    build_tree,
    differs,
    get_commit,
    write_object,
)
from gitmem.git.worktree import WorkTree

log = logs.get(__name__)

# libgit2 caches only trees under 4 KiB by default; a big store's memories/ trees are larger.
pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.TREE, 1 << 20)
# libgit2 keeps up to 8 GiB of packs mapped; a rebuild reading every blob would map a whole
# pack. git's 32-bit defaults keep resident memory bounded.
pygit2.settings.mwindow_size = 32 << 20
pygit2.settings.mwindow_mapped_limit = 128 << 20

T = TypeVar("T")

DEFAULT_BRANCH = paths.DEFAULT_BRANCH
PACKS_CHECK = 1.0
"""Seconds between a handle's looks at ``objects/pack`` (:meth:`GitDB._release_vanished_packs`)."""


def _head_branch(repo: pygit2.Repository) -> str | None:
    """The branch HEAD names (born or not), or None for a detached HEAD."""
    try:
        target = repo.references["HEAD"].target
    except (KeyError, pygit2.GitError):
        return None
    if isinstance(target, str) and target.startswith("refs/heads/"):
        return target[len("refs/heads/") :]
    return None


def operation_in_progress(gitdir: Path) -> tuple[str, str] | None:
    """(what, git command) of an unfinished merge, rebase, cherry-pick or revert, if any."""
    for name, what, command in (
        ("MERGE_HEAD", "a git merge", "merge"),
        ("rebase-merge", "a git rebase", "rebase"),
        ("rebase-apply", "a git rebase (or am)", "rebase"),
        ("CHERRY_PICK_HEAD", "a git cherry-pick", "cherry-pick"),
        ("REVERT_HEAD", "a git revert", "revert"),
    ):
        if (gitdir / name).exists():
            return what, command
    return None


def check_branch_name(name: str) -> str:
    """``name`` if it is a valid branch name holding no credential (it is pushed and kept like
    a commit message); else InvalidInputError."""
    from gitmem.format import secrets

    secrets.refuse(name, "the branch name")
    if not pygit2.reference_is_valid_name(f"refs/heads/{name}"):
        raise InvalidInputError(f"{name!r} is not a valid branch name")
    return name


class GitDB:
    """One git repository seen as a store: snapshots, writes, and the branch they move.
    Each thread, and each process after a fork, opens its own pygit2 Repository."""

    lock_timeout = 60.0
    """Seconds a write waits for the store's writer lock."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        branch: str | None = None,
        clock: Clock | None = None,
        durable: bool = False,
        lazy: bool = False,
    ) -> None:
        # Before libgit2 reads the config: an include of a FIFO would block the open forever.
        includes.check(path)
        try:
            repo, self.foreign = trust.open_repository(path)
        except (pygit2.GitError, KeyError) as exc:
            raise StoreError(f"{os.fspath(path)} is not a git repository: {exc}") from None
        self.read_only = self.foreign and trust.foreign_access(path) != "write"
        """Another user's store the user named but does not trust: read, never written."""
        # A work-tree store writes to the branch checked out; a bare store, a detached HEAD
        # and anything unnamed to main. An explicit branch is made from main's tip on first
        # use (``lazy``: by its first write, reading as main until then).
        checked_out = _head_branch(repo)
        if branch is None:
            branch = checked_out if repo.workdir and checked_out else DEFAULT_BRANCH
        else:
            check_branch_name(branch)
        self.path = Path(path)
        self.branch = branch
        self.ref_name = f"refs/heads/{branch}"
        self.lazy = lazy
        if branch != DEFAULT_BRANCH and not lazy and self.ref_name not in repo.references:
            base = repo.references.get(f"refs/heads/{DEFAULT_BRANCH}")
            if base is not None:
                with contextlib.suppress(pygit2.AlreadyExistsError, pygit2.GitError):
                    repo.references.create(self.ref_name, base.target)
        self.clock: Clock = clock or SystemClock()
        self.durable = durable
        self.gitdir = Path(repo.path)
        self.workdir: Path | None = (
            Path(repo.workdir) if repo.workdir and branch == checked_out else None
        )
        self.state_dir = paths.state_dir(self.gitdir)
        self.worktree: WorkTree | None = None
        """The files and git's index a write updates (None: bare, or another branch out)."""
        if self.workdir is not None:
            self.worktree = WorkTree(lambda: self.repo, self.workdir, self.gitdir, durable)
        self._signing: bool | None = None  # read from git's config on the first commit
        self._local = threading.local()
        self._local.repo = repo
        self._local.pid = os.getpid()
        if durable:
            # Process-wide in libgit2: once one durable store is open, all fsync. The raw
            # option: pygit2's settings turned it from a property into a method.
            option: Any = pygit2.option
            option(pygit2.GIT_OPT_ENABLE_FSYNC_GITDIR, True)

    @property
    def repo(self) -> pygit2.Repository:
        local = self._local
        repo: pygit2.Repository | None = getattr(local, "repo", None)
        if repo is None or local.pid != os.getpid():
            repo = trust.open_repository(self.gitdir, relaxed=self.foreign)[0]
            local.repo = repo
            local.pid = os.getpid()
            local.packs_mtime = False  # a new handle: nothing to let go of yet
        now = time.monotonic()
        if now >= getattr(local, "packs_next", 0.0):
            local.packs_next = now + PACKS_CHECK
            self._release_vanished_packs(repo)
        return repo

    def _release_vanished_packs(self, repo: pygit2.Repository) -> None:
        """Free ``repo``'s object database when ``objects/pack`` changed since the last look:
        libgit2 keeps a deleted pack open (its disk space held) in a long-lived process."""
        local = self._local
        try:
            mtime = (self.gitdir / "objects" / "pack").stat().st_mtime_ns
        except OSError:
            mtime = None
        seen = getattr(local, "packs_mtime", False)
        if mtime == seen:
            return
        local.packs_mtime = mtime
        if seen is not False:
            log.debug("objects/pack of %s changed: reopening its object database", self.gitdir)
            repo.free()

    @property
    def bare(self) -> bool:
        return self.workdir is None

    def tip(self) -> pygit2.Commit | None:
        repo = self.repo
        for name in (self.ref_name, f"refs/heads/{DEFAULT_BRANCH}")[: 1 + self.lazy]:
            with contextlib.suppress(KeyError):
                return get_commit(repo, repo.lookup_reference(name).target)
        return None

    def resolve(self, at: str | dt.datetime | dt.date | None) -> pygit2.Commit | None:
        """The commit for a revision (id, branch, tag, ``HEAD~3``) or a point in time: the
        newest commit on the branch made at or before it (None: nothing existed yet)."""
        if at is None:
            return self.tip()
        if isinstance(at, str):
            with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
                commit: pygit2.Commit = self.repo.revparse_single(at).peel(pygit2.Commit)
                return commit
            try:
                when = parse_timestamp(at)
            except ValueError:
                raise NotFoundError(f"no revision or date {at!r} in this store") from None
        else:
            when = parse_timestamp(at) if not isinstance(at, dt.datetime) else to_utc(at)
        limit = when.timestamp()
        return next((commit for commit in self.walk() if commit.commit_time <= limit), None)

    def snapshot(self, at: str | dt.datetime | dt.date | None = None) -> Snapshot:
        return Snapshot(self.repo, self.resolve(at))

    def walk(self, *, reverse: bool = False) -> Iterator[pygit2.Commit]:
        tip = self.tip()
        if tip is None:
            return
        # Topological too: commits made within one second must still come child first.
        mode = SortMode.TOPOLOGICAL | SortMode.TIME
        if reverse:
            mode |= SortMode.REVERSE
        yield from self.repo.walk(tip.id, mode)

    def _identity(self, role: str) -> tuple[str | None, str | None]:
        """git's precedence: ``GIT_<role>_NAME``/``_EMAIL`` over user.name and user.email."""
        config = self.repo.config
        return (
            os.environ.get(f"GIT_{role}_NAME") or _config_get(config, "user.name"),
            os.environ.get(f"GIT_{role}_EMAIL") or _config_get(config, "user.email"),
        )

    def default_author(self) -> Author:
        name, email = self._identity("AUTHOR")
        name = name or "gitmem-user"
        return Author(name, email or f"{_email_local(name)}@gitmem.invalid")

    def committer(self) -> Author:
        """Who runs gitmem (git's committer identity), else gitmem's own; the author stays
        the agent that wrote the memory."""
        name, email = self._identity("COMMITTER")
        return Author(name, email) if name and email else Author("gitmem", "gitmem@gitmem.invalid")

    def signing(self) -> bool:
        """Whether commits are signed: ``commit.gpgsign`` and a trusted store (a store's own
        ``gpg.program`` is as untrusted as the rest of it: unsigned, with one warning)."""
        if self._signing is None:
            try:
                wanted = self.repo.config.get_bool("commit.gpgsign")
            except (KeyError, pygit2.GitError, ValueError):
                wanted = False
            if wanted and not trust.is_trusted(self.gitdir):
                log.warning(
                    "commit.gpgsign is set, but %s is not a trusted store: its commits "
                    "are not signed (gitmem trust %s signs them)",
                    self.path,
                    self.path,
                )
                wanted = False
            self._signing = wanted
        return self._signing

    def make_commit(
        self,
        author: Author,
        when: int,
        message: str,
        tree: pygit2.Oid,
        parents: Sequence[pygit2.Oid],
    ) -> pygit2.Oid:
        """Create (not yet on any branch) a commit by ``author`` at ``when``, signed when
        :meth:`signing` says so."""
        committer = self.committer()
        if not self.signing():
            repo = self.repo
            return write_object(
                lambda: repo.create_commit(
                    None,
                    pygit2.Signature(author.name, author.email, when, 0),
                    pygit2.Signature(committer.name, committer.email, when, 0),
                    message,
                    tree,
                    list(parents),
                )
            )
        # git signs as the user configured it (gpg.format openpgp or ssh, user.signingkey):
        # `git commit-tree -S` does exactly that, for a trusted store only.
        from gitmem.git.command import run_git

        args = ["commit-tree", str(tree), "-S", "-F", "-"]
        for parent in parents:
            args += ["-p", str(parent)]
        stamp = f"@{when} +0000"
        result = run_git(
            args,
            gitdir=self.gitdir,
            input=message.encode("utf-8"),
            trusted=True,
            timeout=120,
            extra_env={
                "GIT_AUTHOR_NAME": author.name,
                "GIT_AUTHOR_EMAIL": author.email,
                "GIT_AUTHOR_DATE": stamp,
                "GIT_COMMITTER_NAME": committer.name,
                "GIT_COMMITTER_EMAIL": committer.email,
                "GIT_COMMITTER_DATE": stamp,
            },
        )
        return pygit2.Oid(hex=result.stdout.decode().strip())

    def write(
        self, plan: Callable[[Snapshot], tuple[CommitSpec | FastForward, T]]
    ) -> tuple[T, pygit2.Oid | None]:
        """Run ``plan`` on the tip under the writer lock, commit what it staged (or fast-forward)
        and move the branch with CAS, running the plan again on a lost one. Returns the plan's
        value and the new commit id (None when nothing changed)."""
        if self.read_only:
            raise StoreError(
                f"{self.gitdir} belongs to another user: gitmem reads it but writes only to "
                "a store you own or trust",
                hint=f"to write to it as git's safe.directory would let you: gitmem trust "
                f"{self.path} (or work on a copy: git clone {self.path} COPY)",
            )
        deadline = time.monotonic() + self.lock_timeout
        attempt = 0
        while True:
            attempt += 1
            with self.writer_lock(deadline):
                repo = self.repo
                ref = repo.references.get(self.ref_name)
                tip = get_commit(repo, ref.target) if ref is not None else self.tip()
                if self.worktree is not None:
                    self.worktree.heal(tip)
                snap = Snapshot(repo, tip)
                spec, value = plan(snap)
                changes = {p: d for p, d in snap.changes.items() if differs(snap, p, d)}
                merging = isinstance(spec, CommitSpec) and bool(spec.merge_parents)
                if isinstance(spec, CommitSpec) and not changes and not merging:
                    return value, None
                if self.worktree is not None:
                    self.worktree.check_clean(snap, changes)
                if isinstance(spec, FastForward):
                    oid, reason = spec.target.id, spec.reason
                else:
                    tree = build_tree(repo, snap.tree, changes)
                    now = self.clock.now()
                    author = spec.author or self.default_author()
                    parents = [tip.id] if tip is not None else []
                    parents += [pygit2.Oid(hex=p) for p in spec.merge_parents]
                    oid = self.make_commit(
                        author, int(now.timestamp()), format_message(spec), tree, parents
                    )
                    reason = f"gitmem: {spec.subject}"
                try:
                    if ref is None:
                        repo.references.create(self.ref_name, oid)
                    else:
                        ref.set_target(oid, reason)
                except (pygit2.GitError, pygit2.AlreadyExistsError, OSError) as exc:
                    # A lost compare-and-swap or a busy ref lock: clear a stale lock, back off.
                    clear_stale_lock(self.gitdir / (self.ref_name + ".lock"), STALE_LOCK_AGE)
                    if time.monotonic() > deadline:
                        raise ConflictError(
                            f"could not move {self.ref_name} after {attempt} attempts: {exc}",
                            hint="another writer kept the branch busy; try again",
                        ) from exc
                    time.sleep(min(0.2, 0.001 * 2 ** min(attempt, 8)) * random.uniform(0.5, 1.5))
                    continue
                if self.worktree is not None:
                    try:
                        self.worktree.update(get_commit(repo, oid), changes)
                    except (pygit2.GitError, OSError) as exc:
                        # The commit has landed: raising now would tell the caller a
                        # write failed that did not (a retry would write it twice). The
                        # next write heals the work tree, as after a killed writer.
                        log.warning(
                            "committed %s, but could not update the work tree (%s); "
                            "the next write brings it up to date",
                            str(oid)[:12],
                            exc,
                        )
            # Outside the lock: starting git when packing is due must not hold writers up.
            maintenance.after_write(self.gitdir, repo.config)
            return value, oid

    @contextlib.contextmanager
    def writer_lock(self, deadline: float) -> Iterator[None]:
        """Serialize the store's writers: one ``flock`` on ``<gitdir>/gitmem/write.lock``."""
        self.state_dir.mkdir(exist_ok=True)
        fd = os.open(self.state_dir / paths.WRITE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            delay = 0.001
            while not try_flock(fd):
                if time.monotonic() > deadline:
                    raise LockTimeoutError(
                        "another gitmem writer held the store's write lock for too long",
                        hint="wait for it to finish, or check for a hung gitmem process",
                    )
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(0.01, delay * 2)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock


def _config_get(config: pygit2.Config, key: str) -> str | None:
    try:
        value = config[key]
    except (KeyError, pygit2.GitError):
        return None
    return str(value) if value else None
