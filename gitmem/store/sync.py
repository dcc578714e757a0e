"""Sync a store through a git remote: fetch, merge memory-aware, push; never force.

Talking to the remote goes through the git binary (its credential helpers, ssh
configuration and protocols are the user's own); everything that changes the
local store is done here with pygit2, under the store's write lock and with
compare-and-swap on the branch, like every other write. pygit2 runs no external
merge driver, so the trees are merged here with :mod:`gitmem.store.merge`, the same
functions ``gitmem merge-driver`` runs inside plain ``git merge``.

A failure while fetching (network, authentication, a remote that is gone)
leaves the local store exactly as it was. A rejected push (the remote moved in
between) fetches and merges again, up to ``max_attempts`` times.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pygit2

from gitmem.base.errors import ConflictError, InvalidInputError, OldFormatError, StoreError
from gitmem.base.redact import redact_remote
from gitmem.base.trailers import (
    DECIDED_TRAILER,
    FORK_TRAILER,
    ID_TRAILER,
    KEPT_OVER_DELETE_TRAILER,
    OP_TRAILER,
    CommitSpec,
)
from gitmem.format import codec, secrets
from gitmem.format.config import StoreConfig
from gitmem.format.layout import ATTRIBUTES_FILE, CONFIG_FILE, id_from_path, is_path_id
from gitmem.git.command import run_git
from gitmem.git.db import GitDB, check_branch_name, operation_in_progress
from gitmem.git.diff import changed_paths, memory_blob, memory_blob_at
from gitmem.git.objects import FastForward, Snapshot, blob_data, get_commit
from gitmem.store import derived
from gitmem.store import merge as merging

MERGE_OP = "merge"

GitProgress = Callable[[str], None]
"""Each line git prints while it fetches or pushes (its progress lines end in a carriage
return), credentials redacted: for a terminal to show as git would."""


class RemoteError(StoreError):
    """The remote could not be reached, read or written (network, authentication, path)."""

    default_hint = "check the remote's URL and your access (git remote -v), then sync again"


class HistoryRewrittenError(ConflictError):
    """The remote branch was rewritten (``gitmem purge`` on another clone, a force-push):
    merging it with this clone's old history would bring back what the rewrite removed."""


class MergeConflictError(ConflictError):
    """A file that is not a memory was changed on both sides in a way that cannot merge."""

    default_hint = "merge it with git (git pull), or fix the file on one side, then sync again"


# -- results --------------------------------------------------------------------------------


@dataclass
class TreeMerge:
    """The merge of two trees, as changes to apply on top of ``ours``."""

    changes: dict[str, bytes | None] = field(default_factory=dict)
    forks: list[merging.Fork] = field(default_factory=list)
    kept_over_delete: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    """Memories both sides changed, merged field by field."""
    conflicts: list[str] = field(default_factory=list)
    decided: list[tuple[str, str]] = field(default_factory=list)
    """(memory, field): a plain field both sides changed differently, decided by time."""


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "branch": self.branch,
            "fetched": self.fetched,
            "merge": self.merge,
            "added": self.added,
            "changed": self.changed,
            "deleted": self.deleted,
            "forks": [f.to_dict() for f in self.forks],
            "kept_over_delete": self.kept_over_delete,
            "decided": [{"id": memory_id, "field": name} for memory_id, name in self.decided],
            "pushed": self.pushed,
            "attempts": self.attempts,
            "commit": self.commit,
            "pending_committed": self.pending_committed,
        }


# -- git, the binary ------------------------------------------------------------------------


def _git(
    db: GitDB, *args: str, lines: GitProgress | None = None
) -> subprocess.CompletedProcess[str]:
    """``git <args>`` on the store, through gitmem's one git policy (:mod:`gitmem.git.command`).

    ``lines`` gets each line of git's stderr as it comes, redacted (the caller asks git for
    ``--progress``); without it, git's stderr is only read once it exits.
    """
    shown = None if lines is None else (lambda line: lines(redact_remote(line)))
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


def in_progress(db: GitDB) -> str | None:
    """What git operation the repository is in the middle of, if any."""
    found = operation_in_progress(db.gitdir)
    return found[0] if found is not None else None


def _refuse_in_progress(db: GitDB) -> None:
    what = in_progress(db)
    if what is not None:
        raise ConflictError(
            f"the store is in the middle of {what}; gitmem sync will not merge on top of it",
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


def _progress_flag(lines: GitProgress | None) -> tuple[str, ...]:
    # --quiet --progress: git's progress lines without its list of updated refs.
    return ("--progress",) if lines is not None else ()


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
        *_progress_flag(lines),
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


def _ref_target(repo: pygit2.Repository, name: str) -> pygit2.Oid | None:
    try:
        target = repo.references[name].target
    except (KeyError, pygit2.GitError):
        return None
    return target if isinstance(target, pygit2.Oid) else None


def _refuse_rewritten(
    db: GitDB,
    remote: str,
    branch: str,
    tracking: str,
    before: pygit2.Oid,
    theirs: pygit2.Commit,
) -> None:
    """Refuse to merge a remote branch whose history was rewritten since the last fetch.

    After a ``gitmem purge`` on another clone, the hub's branch no longer descends from what
    this clone fetched before; merging the two would put every purged object back (and push
    it). The remote-tracking branch goes back to where it was, so the purge's steps for
    every other clone (``git log REMOTE/BRANCH..BRANCH``, fetch, reset) apply as printed.
    """
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


def _push(db: GitDB, remote: str, branch: str, shown: GitProgress | None = None) -> str:
    """Push the local branch (never forced): ``pushed``, ``up-to-date`` or ``rejected``."""
    result = _git(
        db,
        "push",
        "--porcelain",
        *_progress_flag(shown),
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
        # A plain rejection (the remote moved: fetch first / non-fast-forward), or the
        # remote's ref changed between our read and its update (a race with another push).
        raced = ("rejected" in summary and "remote rejected" not in summary) or any(
            word in summary
            for word in (
                "fetch first",
                "non-fast-forward",
                "lock",
                "expected",
                "failed to update ref",
            )
        )
        if raced:
            return "rejected"
        raise RemoteError(f"{remote} refused the push: {summary}")
    raise RemoteError(f"cannot push to {remote}: {_last_line(result.stderr)}")


# -- merging trees ----------------------------------------------------------------------------


def _moves(repo: pygit2.Repository, base: pygit2.Tree, side: pygit2.Tree) -> dict[str, str]:
    """Documents one side moved (old path -> new path), by git's rename detection.

    Documents with path ids move by rename detection. A ``memories/`` file's path follows
    from its id, so a deleted memory and a new, similar one are two memories, never a move;
    the one move of a plain id is ``gitmem migrate``'s, from where format 4 put it.
    """
    diff = base.diff_to_tree(side)
    out: dict[str, str] = {}
    gone: dict[str, str] = {}
    came: dict[str, str] = {}
    for delta in diff.deltas:
        kind = delta.status_char()
        path = delta.old_file.path if kind == "D" else delta.new_file.path
        memory_id = id_from_path(path, past=True) if kind in "AD" else None
        if memory_id is not None and not is_path_id(memory_id):
            (gone if kind == "D" else came)[memory_id] = path
    out.update({old: came[memory_id] for memory_id, old in gone.items() if memory_id in came})
    diff.find_similar()
    for delta in diff.deltas:
        old, new = delta.old_file.path, delta.new_file.path
        if delta.status_char() == "R" and _path_id(old) and _path_id(new):
            out[old] = new
    return out


def _path_id(path: str) -> bool:
    return path.endswith(".md") and id_from_path(path) == path[:-3]


def merge_trees(
    repo: pygit2.Repository,
    base: pygit2.Commit | None,
    ours: pygit2.Commit,
    theirs: pygit2.Commit,
    *,
    theirs_wins: frozenset[str] = frozenset(),
) -> TreeMerge:
    """Merge ``theirs`` into ``ours`` against ``base``: changes to apply to ours's tree.

    A memory one side moved (a layered document renamed) and the other side edited is
    merged at its new path, and the old path stays gone: an edit never brings back a path
    its document moved away from.
    """
    ours_snap = Snapshot(repo, ours)
    theirs_snap = Snapshot(repo, theirs)
    out = TreeMerge()
    base_tree = base.tree if base is not None else None
    sides = _DerivedSides(repo, ours, theirs)

    def base_read(path: str) -> bytes | None:
        # The base may be from before `gitmem migrate`, with a memory where format 4 put it.
        found = memory_blob_at(base_tree, path)
        return blob_data(repo, found[1]) if found is not None else None

    def take(path: str, result: merging.FileMerge, at_path: bytes | None, both: bool) -> None:
        """Apply one file's merge; ``at_path`` is what ours has there now."""
        if result.conflict is not None:
            out.conflicts.append(result.conflict)
            return
        if result.data != at_path:
            out.changes[path] = result.data
        if result.memory_id is not None and both:
            out.merged.append(result.memory_id)
        if result.kept_over_delete and result.memory_id is not None:
            out.kept_over_delete.append(result.memory_id)
        if result.memory_id is not None:
            out.decided += [(result.memory_id, name) for name in result.decided]
        for fork in result.forks:
            if ours_snap.read(fork.path) != fork.data:
                out.changes[fork.path] = fork.data
            out.forks.append(fork)

    changed = sorted(changed_paths(base_tree, theirs.tree))
    done: set[str] = set()
    if base_tree is not None:
        ours_moves = _moves(repo, base_tree, ours.tree)
        theirs_moves = _moves(repo, base_tree, theirs.tree)
        for old, new in theirs_moves.items():
            b, o = base_read(old), ours_snap.read(old)
            if old in ours_moves or o is None or o == b or ours_snap.read(new) is not None:
                continue
            # Theirs moved what ours edited: ours's edit goes to the new path.
            t = theirs_snap.read(new)
            take(new, merging.merge_file(new, b, o, t, derived=sides.at(old, new)), None, True)
            out.changes[old] = None
            done.update((old, new))
        for old, new in ours_moves.items():
            b, t = base_read(old), theirs_snap.read(old)
            if old in theirs_moves or old in done or t is None or t == b:
                continue
            # Ours moved what theirs edited: theirs's edit follows it to the new path.
            o = ours_snap.read(new)
            take(new, merging.merge_file(new, b, o, t, derived=sides.at(new, old)), o, True)
            done.update((old, new))
    both: list[tuple[str, bytes | None, bytes | None, bytes | None]] = []
    for path in changed:
        if path in done:
            continue
        b, o, t = base_read(path), ours_snap.read(path), theirs_snap.read(path)
        if o == t:
            continue
        if o == b or (path in theirs_wins and t is not None):
            out.changes[path] = t
            continue
        both.append((path, b, o, t))
    # Each side's derived version and time, one walk per side for every memory both sides
    # changed (only those are ranked).
    sides.prepare([path for path, _, o, t in both if o is not None and t is not None])
    for path, b, o, t in both:
        merged = merging.merge_file(path, b, o, t, derived=sides.at(path, path))
        take(path, merged, o, o is not None and t is not None)
    return out


class _DerivedSides:
    """Each side's versions of a path as of its commit, for the memory-aware merge to rank
    sides by the version and time a reader of each sees."""

    def __init__(
        self, repo: pygit2.Repository, ours: pygit2.Commit, theirs: pygit2.Commit
    ) -> None:
        self.repo, self.ours, self.theirs = repo, ours, theirs
        self._ours: dict[str, derived.Versions] = {}
        self._theirs: dict[str, derived.Versions] = {}

    def _walk(self, commit: pygit2.Commit, paths: list[str]) -> dict[str, derived.Versions]:
        found = derived.walk(self.repo, commit, paths)
        assert found is not None  # no limit
        return found

    def prepare(self, paths: list[str]) -> None:
        wanted = [p for p in paths if id_from_path(p) is not None]
        if wanted:
            self._ours.update(self._walk(self.ours, wanted))
            self._theirs.update(self._walk(self.theirs, wanted))

    def at(self, ours_path: str, theirs_path: str) -> merging.DerivedSides:
        """The sides of a memory at ``ours_path`` in ours and ``theirs_path`` in theirs."""
        if ours_path not in self._ours:
            self._ours.update(self._walk(self.ours, [ours_path]))
        if theirs_path not in self._theirs:
            self._theirs.update(self._walk(self.theirs, [theirs_path]))
        return merging.DerivedSides(self._ours[ours_path], self._theirs[theirs_path])


def _merge_spec(label: str, tm: TreeMerge) -> CommitSpec:
    ids: list[str] = []
    for path in tm.changes:
        memory_id = id_from_path(path)
        if memory_id is not None and memory_id not in ids:
            ids.append(memory_id)
    trailers = [(OP_TRAILER, MERGE_OP)]
    trailers += [(ID_TRAILER, memory_id) for memory_id in ids]
    trailers += [(FORK_TRAILER, f"{f.id} of {f.of}") for f in tm.forks]
    trailers += [(KEPT_OVER_DELETE_TRAILER, memory_id) for memory_id in tm.kept_over_delete]
    trailers += [(DECIDED_TRAILER, f"{memory_id} {name}") for memory_id, name in tm.decided]
    body = None
    if tm.forks:
        body = (
            f"{len(tm.forks)} memor{'y' if len(tm.forks) == 1 else 'ies'} changed on both sides "
            "in the same lines: both versions are kept (gitmem conflicts lists them)."
        )
    return CommitSpec(subject=f"merge: {label}", body=body, trailers=trailers)


# -- moving the branch ---------------------------------------------------------------------------


def _check_format(repo: pygit2.Repository, theirs: pygit2.Commit, label: str) -> None:
    """Refuse a remote branch of another store format before anything merges
    (UnsupportedFormatError; the store stays as it was): a newer one would be misread, and
    an older one is never merged into this one (its hub is converted by ``gitmem
    migrate`` in a clone of it, then pushed: docs/format.md)."""
    data = Snapshot(repo, theirs).read(CONFIG_FILE)
    if data is None:
        return
    config = StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE))
    try:
        config.check_supported(label)
    except OldFormatError as exc:
        raise OldFormatError(
            f"{exc.message}: this gitmem does not merge it",
            hint="convert the hub once, in a clone of it: gitmem clone URL DIR; gitmem "
            "--store DIR migrate; git -C DIR push (docs/format.md)",
        ) from None


check_format = _check_format  # for gitmem update-branch, which merges as sync does


def integrate(
    db: GitDB,
    theirs: pygit2.Commit,
    label: str,
    *,
    join: bool = False,
) -> tuple[str, TreeMerge, pygit2.Commit | None, pygit2.Commit | None]:
    """Bring ``theirs`` into the local branch: (kind, merge, tip before, tip after).

    kind is none (already in), fast-forward or merge. Raises MergeConflictError
    (nothing changed) when a non-memory file cannot be merged, DirtyWorktreeError
    when a file to change has uncommitted edits. Two unrelated histories merge only
    with ``join`` (``gitmem join``: the team's configuration files win). Runs in
    :meth:`GitDB.integrate`, the write loop every write uses: on a lost race the plan
    runs again on the new tip.
    """

    def plan(
        snap: Snapshot,
    ) -> tuple[CommitSpec | FastForward, tuple[str, TreeMerge, pygit2.Commit | None]]:
        repo = snap.repo
        tip = snap.commit
        if tip is not None and (tip.id == theirs.id or repo.descendant_of(tip.id, theirs.id)):
            return CommitSpec("nothing to integrate"), ("none", TreeMerge(), tip)
        if tip is None or repo.descendant_of(theirs.id, tip.id):
            tm = TreeMerge()
            for path in changed_paths(tip.tree if tip else None, theirs.tree):
                tm.changes[path] = Snapshot(repo, theirs).read(path)
            _stage(snap, tm.changes)
            ff = FastForward(theirs, f"gitmem sync: fast-forward {label}")
            return ff, ("fast-forward", tm, tip)
        base_id = repo.merge_base(tip.id, theirs.id)
        base = get_commit(repo, base_id) if base_id is not None else None
        # Two stores made apart (unrelated histories) merge like any other two sides;
        # `gitmem join` brings a personal store into a team's, whose configuration wins.
        wins = frozenset({CONFIG_FILE, ATTRIBUTES_FILE}) if join else frozenset()
        tm = merge_trees(repo, base, tip, theirs, theirs_wins=wins)
        if tm.conflicts:
            raise MergeConflictError(
                "cannot merge " + "; ".join(tm.conflicts) + " (nothing was changed)",
                hint=(
                    f"this store and {label} were made apart; to bring this one into "
                    "that one, keeping both histories and its configuration: gitmem join URL"
                )
                if base is None
                else None,
            )
        _stage(snap, tm.changes)
        spec = replace(_merge_spec(label, tm), merge_parents=(str(theirs.id),))
        return spec, ("merge", tm, tip)

    (kind, tm, before), oid = db.integrate(plan)
    if kind == "none":
        return kind, tm, before, before
    if kind == "fast-forward":
        return kind, tm, before, theirs
    assert oid is not None  # a merge commit always has two parents, so it is always made
    return kind, tm, before, get_commit(db.repo, oid)


def _stage(snap: Snapshot, changes: dict[str, bytes | None]) -> None:
    for path, data in changes.items():
        if data is None:
            snap.remove(path)
        else:
            snap.put(path, data)


# -- forks from the git merge driver ---------------------------------------------------------------


def _landed(db: GitDB, pending: merging.PendingFork, limit: int = 2000) -> bool:
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
    """Commit the forks ``gitmem merge-driver`` saved during a plain git merge.

    A fork is committed once its merge has landed (the blob the driver wrote is
    on the branch); while a merge is still in progress it waits; a fork whose
    merge was aborted is dropped (both versions are still in their own commits).
    ``merge_landed`` (the post-merge hook, which git runs before it removes
    MERGE_HEAD) skips the wait: whether each fork's merge landed is still checked.
    """
    pending = merging.load_pending(db.gitdir)
    if not pending:
        return []
    if not merge_landed and in_progress(db) is not None:
        return []
    ready = [p for p in pending if _landed(db, p)]
    forks = [p.fork for p in ready]

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        for fork in forks:
            if not snap.exists(fork.path):
                snap.put(fork.path, fork.data)
        tm = TreeMerge(forks=forks)
        spec = _merge_spec("keep forks from a git merge", tm)
        spec.trailers[1:1] = [(ID_TRAILER, f.id) for f in forks]
        return spec, None

    if forks:
        db.write(plan)
    for item in pending:
        item.file.unlink(missing_ok=True)
    return forks


# -- sync ---------------------------------------------------------------------------------------


def _backoff(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th rejected push ("full jitter")."""
    return random.uniform(0.0, min(3.2, 0.05 * 2 ** (attempt - 1)))


def sync(
    db: GitDB,
    remote: str = "origin",
    *,
    branch: str | None = None,
    max_attempts: int = 40,
    join: bool = False,
    git_progress: GitProgress | None = None,
) -> SyncResult:
    """Fetch ``remote``, merge its branch into the store's, push; retry when the push races.

    ``git_progress`` gets git's own lines as it fetches and pushes (``--progress``),
    credentials redacted. ``join`` merges a hub's unrelated history (``gitmem join``).

    Between a rejected push and the next fetch the sync sleeps a random time up to a bound
    that doubles each attempt (jittered exponential backoff, 50 ms to 3.2 s): clones that
    lost the race to the same push spread out instead of colliding again in step. Eight
    clones starting to sync at once took up to 21 attempts for their first sync on a loaded
    2-core machine (tests/test_sync_contention.py), hence the bound of 40.
    """
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
    for attempt in range(1, max_attempts + 1):
        result.attempts = attempt
        tracking = f"refs/remotes/{remote}/{target}"
        fetched_before = _ref_target(db.repo, tracking)
        theirs = _fetch(db, remote, target, git_progress)
        if theirs is not None and fetched_before is not None:
            _refuse_rewritten(db, remote, target, tracking, fetched_before, theirs)
        if theirs is not None:
            local = db.tip()
            walker = db.repo.walk(theirs.id)
            if local is not None:
                walker.hide(local.id)
            result.fetched += sum(1 for _ in walker)
            if local is None or not (
                local.id == theirs.id or db.repo.descendant_of(local.id, theirs.id)
            ):
                # (a hub converted here and pushed from here: nothing of its old format
                # is merged)
                _check_format(db.repo, theirs, f"{remote}/{target}")
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
        if attempt < max_attempts:
            time.sleep(_backoff(attempt))
    else:
        raise ConflictError(
            f"{remote}/{target} kept moving: the push was rejected {max_attempts} times",
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
    if db.workdir is not None and not merging.driver_registered(db.path):
        merging.register_driver(db.path)
    return result


def pending_forks(db: GitDB) -> list[merging.PendingFork]:
    return merging.load_pending(Path(db.gitdir))
