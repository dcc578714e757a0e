"""Sync a store through a git remote: fetch (the git binary, the user's credentials), merge
memory-aware under the write lock, push; never force. A rejected push merges again."""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pygit2

from gitmem.base.errors import ConflictError, InvalidInputError, StoreError
from gitmem.base.redact import redact_remote
from gitmem.base.trailers import ID_TRAILER, CommitSpec
from gitmem.format import secrets
from gitmem.format.layout import id_from_path
from gitmem.git.command import run_git
from gitmem.git.db import GitDB, check_branch_name, operation_in_progress
from gitmem.git.diff import changed_paths, memory_blob
from gitmem.git.objects import Snapshot, get_commit
from gitmem.store import merge as merging
from gitmem.store import mergedriver
from gitmem.store.branchmerge import TreeMerge, check_format, integrate, merge_spec

GitProgress = Callable[[str], None]
"""Each line git prints while it fetches or pushes (its progress lines end in a carriage
return), credentials redacted: for a terminal to show as git would."""


class RemoteError(StoreError):
    """The remote could not be reached, read or written (network, authentication, path)."""

    default_hint = "check the remote's URL and your access (git remote -v), then sync again"


class HistoryRewrittenError(ConflictError):
    """The remote branch was rewritten (``gitmem purge`` on another clone, a force-push):
    merging it with this clone's old history would bring back what the rewrite removed."""


@dataclass
class SyncResult:
    """What ``Store.sync`` did."""

    remote: str
    branch: str
    fetched: int = 0
    """Commits that came from the remote and were not in the local branch."""
    merge: str = "none"
    """none (nothing new), fast-forward, or merge (a merge commit was made)."""
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    forks: list[merging.Fork] = field(default_factory=list)
    kept_over_delete: list[str] = field(default_factory=list)
    decided: list[tuple[str, str]] = field(default_factory=list)
    """(memory, field) both sides changed differently: the later side's value was kept, the
    other is under the memory's ``merge_decided`` until ``gitmem resolve`` settles it."""
    pushed: bool = False
    attempts: int = 0
    commit: str | None = None
    pending_committed: list[str] = field(default_factory=list)
    """Forks left by ``gitmem merge-driver`` in a plain git merge, committed by this sync."""
    others: list[SyncResult] = field(default_factory=list)
    """The memory branches synced after main (gitmem.store.follow)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["forks"] = [f.to_dict() for f in self.forks]
        out["decided"] = [{"id": memory_id, "field": name} for memory_id, name in self.decided]
        out["others"] = [other.to_dict() for other in self.others]
        return out


def _git(
    db: GitDB, *args: str, lines: GitProgress | None = None
) -> subprocess.CompletedProcess[str]:
    """``git <args>`` on the store, through gitmem's one git policy (:mod:`gitmem.git.command`);
    ``lines`` gets git's ``--progress`` lines of stderr as they come, redacted."""
    shown = None if lines is None else (lambda line: lines(redact_remote(line)))
    if lines is not None:
        args = (args[0], "--progress", *args[1:])
    try:
        result = run_git(args, gitdir=db.gitdir, check=False, timeout=600, stderr_lines=shown)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"git {args[0]} took more than 10 minutes; gave up") from None
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8", "replace"),
        result.stderr.decode("utf-8", "replace"),
    )


def _last_line(text: str) -> str:
    """git's last message line, without any ``user:token@`` a URL in it carries."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return redact_remote(lines[-1]) if lines else "no message"


def _refuse_in_progress(db: GitDB) -> None:
    found = operation_in_progress(db.gitdir)
    if found is not None:
        raise ConflictError(
            f"the store is in the middle of {found[0]}; gitmem sync will not merge on top of it",
            # Abort first: "git add, git commit" of a file that still holds conflict markers
            # stores them (gitmem doctor says how to finish safely).
            hint="abort it (git merge --abort / git rebase --abort: both sides stay committed), "
            "then sync again, which merges memories itself; or finish it only once no file "
            "holds conflict markers (gitmem doctor checks)",
        )


def remote_names(db: GitDB) -> list[str]:
    return [name for name in db.repo.remotes.names() if name]


def remotes(db: GitDB) -> list[tuple[str, str]]:
    """The store's remotes: (name, URL), in git's order (``gitmem remote list``)."""
    return [(r.name or "", r.url or "") for r in db.repo.remotes]


def add_remote(db: GitDB, name: str, url: str) -> str:
    """``git remote add NAME URL`` on the store (its fetch refspec is git's default)."""
    secrets.refuse(name, "the remote name")
    if not name or name.startswith("-") or any(c.isspace() for c in name) or ".." in name:
        raise InvalidInputError(f"remote name {name!r} is not a valid git remote name")
    if not url or url.startswith("-"):
        raise InvalidInputError(f"remote URL {url!r} is not valid")
    if name in remote_names(db):
        raise InvalidInputError(
            f"remote {name} already exists ({db.repo.remotes[name].url})",
            hint=f"git -C {db.path} remote set-url {name} URL changes it",
        )
    try:
        db.repo.remotes.create(name, url)
    except (pygit2.GitError, ValueError) as exc:
        raise InvalidInputError(f"cannot add remote {name!r}: {exc}") from None
    return name


def _fetch(
    db: GitDB, remote: str, branch: str, lines: GitProgress | None = None
) -> pygit2.Commit | None:
    """Fetch the remote branch into ``refs/remotes/<remote>/<branch>``; None if it has none."""
    tracking = f"refs/remotes/{remote}/{branch}"
    result = _git(
        db,
        "fetch",
        "--no-tags",
        "--quiet",
        remote,
        f"+refs/heads/{branch}:{tracking}",
        lines=lines,
    )
    if result.returncode != 0:
        message = result.stderr
        if "couldn't find remote ref" in message:
            return None  # an empty remote, or one without this branch yet: the push creates it
        raise RemoteError(f"cannot fetch from {remote}: {_last_line(message)}")
    try:
        return get_commit(db.repo, db.repo.lookup_reference(tracking).target)
    except KeyError:
        return None


def _refuse_rewritten(
    db: GitDB,
    remote: str,
    branch: str,
    tracking: str,
    before: pygit2.Oid,
    theirs: pygit2.Commit,
) -> None:
    """Refuse to merge a remote branch that no longer descends from what this clone fetched
    before (a ``gitmem purge`` elsewhere): the merge would put back and push every purged
    object. The remote-tracking branch goes back, so the purge's printed steps apply."""
    if before == theirs.id:
        return
    try:
        if db.repo.descendant_of(theirs.id, before):
            return
    except (KeyError, pygit2.GitError):
        return  # the old commit is gone from here: nothing of it to bring back
    db.repo.references.create(tracking, before, force=True)
    raise HistoryRewrittenError(
        f"{remote}/{branch} was rewritten (gitmem purge or a force-push): it no longer "
        f"contains {str(before)[:10]}, which this clone fetched before; merging would bring "
        "back what the rewrite removed",
        hint=f"follow the purge's steps for other clones: git -C {db.path} log --oneline "
        f"{remote}/{branch}..{branch} (work not pushed yet), git -C {db.path} fetch {remote}, "
        f"git -C {db.path} reset --hard {remote}/{branch} (docs/security.md, gitmem purge)",
    )


_RACED = ("fetch first", "non-fast-forward", "lock", "expected", "failed to update ref")
"""A push's summary words for a race: the remote moved, or its ref changed between our
read and its update (another push)."""


def _push(db: GitDB, remote: str, branch: str, shown: GitProgress | None = None) -> str:
    """Push the local branch (never forced): ``pushed``, ``up-to-date`` or ``rejected``."""
    result = _git(
        db,
        "push",
        "--porcelain",
        remote,
        f"{db.ref_name}:refs/heads/{branch}",
        lines=shown,
    )
    lines = [line for line in result.stdout.splitlines() if "\t" in line]
    if result.returncode == 0:
        return "up-to-date" if lines and all(line.startswith("=") for line in lines) else "pushed"
    for line in lines:
        if not line.startswith("!"):
            continue
        summary = line.split("\t")[-1]
        raced = "rejected" in summary and "remote rejected" not in summary
        if raced or any(word in summary for word in _RACED):
            return "rejected"
        raise RemoteError(f"{remote} refused the push: {summary}")
    raise RemoteError(f"cannot push to {remote}: {_last_line(result.stderr)}")


def _landed(db: GitDB, pending: mergedriver.PendingFork, limit: int = 2000) -> bool:
    """Whether the merge that saved ``pending`` landed: the commit it merged is on the
    branch, or (git named none) a commit on the branch (within ``limit``) has the blob the
    driver wrote at its path."""
    if pending.theirs is not None:
        tip = db.tip()
        try:
            merged = pygit2.Oid(hex=pending.theirs)
            return tip is not None and (tip.id == merged or db.repo.descendant_of(tip.id, merged))
        except (ValueError, KeyError, pygit2.GitError):
            return False
    path, target = pending.path, pygit2.Oid(hex=pending.kept_blob)
    for n, commit in enumerate(db.walk()):
        if n >= limit:
            return False
        if Snapshot(db.repo, commit).blob_id(path) == target:
            return True
    return False


def commit_pending_forks(db: GitDB, *, merge_landed: bool = False) -> list[merging.Fork]:
    """Commit the forks ``gitmem merge-driver`` saved during a plain git merge, once its
    merge landed; while a merge is in progress they wait, and an aborted merge's are dropped
    (both versions are in their own commits). ``merge_landed``: the post-merge hook, which
    runs before git removes MERGE_HEAD, skips the wait."""
    pending = mergedriver.load_pending(db.gitdir)
    if not pending:
        return []
    if not merge_landed and operation_in_progress(db.gitdir) is not None:
        return []
    ready = [p for p in pending if _landed(db, p)]
    forks = [p.fork for p in ready]

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        for fork in forks:
            if not snap.exists(fork.path):
                snap.put(fork.path, fork.data)
        tm = TreeMerge(forks=forks)
        spec = merge_spec("keep forks from a git merge", tm)
        spec.trailers[1:1] = [(ID_TRAILER, f.id) for f in forks]
        return spec, None

    if forks:
        db.write(plan)
    for item in pending:
        item.file.unlink(missing_ok=True)
    return forks


MAX_ATTEMPTS = 40
"""Pushes a sync tries (tests/test_sync_contention.py: eight clones at once took up to 21)."""


def sync(
    db: GitDB,
    remote: str = "origin",
    *,
    branch: str | None = None,
    join: bool = False,
    git_progress: GitProgress | None = None,
) -> SyncResult:
    """Fetch ``remote``, merge its branch into the store's, push; a raced push retries after a
    jittered backoff. ``git_progress`` gets git's lines (credentials redacted); ``join``
    merges a hub's unrelated history (``gitmem join``)."""
    _refuse_in_progress(db)
    if remote not in remote_names(db):
        raise InvalidInputError(
            f"the store has no remote {remote!r}"
            + (f" (it has: {', '.join(remote_names(db))})" if remote_names(db) else ""),
            hint="add one with: gitmem remote add NAME URL",
        )
    target = check_branch_name(branch) if branch is not None else db.branch
    result = SyncResult(remote=remote, branch=target)
    result.pending_committed = [f.id for f in commit_pending_forks(db)]
    start = db.tip()
    for attempt in range(1, MAX_ATTEMPTS + 1):
        result.attempts = attempt
        tracking = f"refs/remotes/{remote}/{target}"
        ref = db.repo.references.get(tracking)
        seen = ref.target if ref is not None else None
        fetched_before = seen if isinstance(seen, pygit2.Oid) else None
        theirs = _fetch(db, remote, target, git_progress)
        if theirs is not None:
            if fetched_before is not None:
                _refuse_rewritten(db, remote, target, tracking, fetched_before, theirs)
            local = db.tip()
            walker = db.repo.walk(theirs.id)
            if local is not None:
                walker.hide(local.id)
            result.fetched += sum(1 for _ in walker)
            if local is None or not (
                local.id == theirs.id or db.repo.descendant_of(local.id, theirs.id)
            ):
                check_format(db.repo, theirs, f"{remote}/{target}")
            kind, tm, _, _ = integrate(db, theirs, f"{remote}/{target}", join=join)
            if kind != "none":
                result.merge = "merge" if "merge" in (kind, result.merge) else kind
            result.forks.extend(tm.forks)
            result.kept_over_delete.extend(tm.kept_over_delete)
            result.decided.extend(tm.decided)
        local = db.tip()
        if local is None or (theirs is not None and local.id == theirs.id):
            break
        try:
            outcome = _push(db, remote, target, git_progress)
        except RemoteError as exc:
            if result.merge == "none":
                raise
            # The remote's work is already merged here; say so rather than hide it.
            raise RemoteError(
                f"{exc.message}; the local store has {remote}/{target} merged in "
                f"({str(local.id)[:10]}) but it is not pushed",
                hint="fix the remote's access and run gitmem sync again to push",
            ) from None
        if outcome != "rejected":
            result.pushed = outcome == "pushed"
            break
        if attempt < MAX_ATTEMPTS:  # a "full jitter" backoff
            time.sleep(random.uniform(0.0, min(3.2, 0.05 * 2 ** (attempt - 1))))
    else:
        raise ConflictError(
            f"{remote}/{target} kept moving: the push was rejected {MAX_ATTEMPTS} times",
            hint="sync again",
        )
    end = db.tip()
    result.commit = str(end.id) if end is not None else None
    if start is not None and end is not None and start.id != end.id:
        reported: set[str] = set()
        for path in sorted(changed_paths(start.tree, end.tree)):
            memory_id = id_from_path(path)
            if memory_id is None or memory_id in reported:
                continue
            reported.add(memory_id)
            was, now = memory_blob(start.tree, path), memory_blob(end.tree, path)
            if was == now:
                continue
            before, after = was is not None, now is not None
            bucket = (
                result.changed if before and after else result.added if after else result.deleted
            )
            bucket.append(memory_id)
    if db.workdir is not None and not mergedriver.driver_registered(db.path):
        mergedriver.register_driver(db.path)
    return result
