"""Bring a base branch into a pull request's branch with gitmem's merge (``gitmem update-branch``):
the merge commit a host's "update branch" button would make, but memory-aware (as ``gitmem
sync``), so the host's plain merge is then clean. Runs in a clone as CI leaves it (a detached
HEAD is attached to ``head`` first); pushing is the caller's job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

import pygit2

from gitmem.base.clock import Clock
from gitmem.base.errors import (
    ConflictError,
    DirtyWorktreeError,
    InvalidInputError,
    NotFoundError,
    StoreError,
)
from gitmem.format.layout import CONFIG_FILE
from gitmem.git.db import GitDB, check_branch_name, operation_in_progress
from gitmem.git.objects import Snapshot, get_commit
from gitmem.store import branchmerge
from gitmem.store import merge as merging

OUTCOMES = ("up-to-date", "clean", "fast-forward", "merge")


@dataclass
class UpdateResult:
    """What :func:`update_branch` did: ``outcome`` one of :data:`OUTCOMES` (``clean``: plain
    git merges them, asked with ``if_conflicting``), the branch's commit ``before`` and after;
    ``attached``: a detached HEAD now names ``branch``."""

    base: str
    branch: str
    outcome: str
    before: str
    commit: str
    attached: bool = False
    conflicting: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    forks: list[merging.Fork] = field(default_factory=list)
    kept_over_delete: list[str] = field(default_factory=list)
    decided: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "forks": [f.to_dict() for f in self.forks],
            "decided": [{"id": memory_id, "field": name} for memory_id, name in self.decided],
        }


def update_branch(
    path: str | os.PathLike[str],
    base: str,
    *,
    head: str | None = None,
    if_conflicting: bool = False,
    clock: Clock | None = None,
) -> UpdateResult:
    """Merge ``base`` (``origin/main``) into ``head`` (else the branch checked out; a
    detached HEAD needs it) as ``gitmem sync`` brings a remote in; nothing changes when the
    base is in already or, with ``if_conflicting``, plain git merges cleanly. Refused, with
    nothing changed, for a dirty work tree, a merge in progress or an unknown base."""
    db = GitDB(path, clock=clock)
    repo = db.repo
    what = operation_in_progress(db.gitdir)
    if what is not None:
        raise ConflictError(
            f"the repository is in the middle of {what[0]}; nothing was merged",
            hint=f"finish or abort it first (git {what[1]} --abort)",
        )
    if head is not None:
        check_branch_name(head)
    try:
        theirs = get_commit(repo, repo.revparse_single(base).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise NotFoundError(
            f"{base!r} does not name a commit here",
            hint="fetch it first (git fetch origin main makes origin/main)",
        ) from None
    detached = not repo.is_bare and repo.head_is_detached
    if detached:
        if head is None:
            raise InvalidInputError(
                "HEAD is detached (as CI checks out a commit): which branch should the base "
                "be merged into?",
                hint="name it: gitmem update-branch BASE --head BRANCH (or git checkout BRANCH)",
            )
        ours = get_commit(repo, repo.head.target)
        _check_attachable(repo, head, ours)
        branch = head
    else:
        branch = head or db.branch
        ref = repo.references.get(f"refs/heads/{branch}")
        if ref is None:
            raise NotFoundError(f"there is no branch {branch!r} here")
        ours = get_commit(repo, ref.target)
    if Snapshot(repo, ours).read(CONFIG_FILE) is None:
        raise StoreError(
            f"{branch} at {str(ours.id)[:10]} is not a gitmem store (no {CONFIG_FILE})"
        )
    touches_worktree = not repo.is_bare and (detached or branch == db.branch)
    if touches_worktree:
        _refuse_dirty(repo)
    result = UpdateResult(base, branch, "up-to-date", str(ours.id), str(ours.id))
    if ours.id == theirs.id or repo.descendant_of(ours.id, theirs.id):
        return result
    if if_conflicting:
        # The paths a plain git merge stops on: libgit2 runs no merge driver, so its
        # in-memory merge answers as a host's button, which has none either.
        try:
            conflicts = repo.merge_commits(ours.id, theirs.id).conflicts or ()
            paths = {entry.path for sides in conflicts for entry in sides if entry is not None}
            result.conflicting = sorted(paths)
        except pygit2.GitError as exc:
            result.conflicting = [f"(plain git cannot merge: {exc})"]
        if not result.conflicting:
            result.outcome = "clean"
            return result
    branchmerge.check_format(repo, theirs, base)
    branchmerge.check_format(repo, ours, branch)
    if detached:
        _attach(repo, branch, ours)
        result.attached = True
    target = GitDB(path, branch=branch, clock=clock)
    kind, tm, _before, after = branchmerge.integrate(target, theirs, f"{base} into {branch}")
    # integrate re-reads the branch under the write lock: "none" means it moved meanwhile
    # to a commit that has the base already.
    result.outcome = "up-to-date" if kind == "none" else kind
    result.commit = str(after.id) if after is not None else result.before
    result.merged = tm.merged
    result.forks = tm.forks
    result.kept_over_delete = tm.kept_over_delete
    result.decided = tm.decided
    return result


def _refuse_dirty(repo: pygit2.Repository) -> None:
    """Refuse changes to tracked files, staged or not (the merge would overwrite or leave
    them out unasked); untracked files (a CI job's reports) are left alone."""
    changed = sorted(repo.status(untracked_files="no"))
    if changed:
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        shown = ", ".join(changed[:5]) + more
        raise DirtyWorktreeError(
            f"the work tree has uncommitted changes ({shown}); nothing was merged",
            hint="commit or stash them (git status shows them), then run it again",
        )


def _check_attachable(repo: pygit2.Repository, branch: str, commit: pygit2.Commit) -> None:
    ref = repo.references.get(f"refs/heads/{branch}")
    if ref is None or ref.target == commit.id or repo.descendant_of(commit.id, ref.target):
        return
    raise ConflictError(
        f"HEAD is detached at {str(commit.id)[:10]}, but the local branch {branch} is at "
        f"{str(ref.target)[:10]}, which HEAD does not contain; nothing was merged",
        hint=f"check out the commit you mean to update: git checkout {branch} (or git "
        f"checkout -B {branch} HEAD to move the branch to HEAD)",
    )


def _attach(repo: pygit2.Repository, branch: str, commit: pygit2.Commit) -> None:
    """Point ``branch`` at HEAD's commit and HEAD at ``branch``: no file or index entry
    changes, since the commit checked out stays the same."""
    name = f"refs/heads/{branch}"
    message = "gitmem update-branch: fast-forward to the detached HEAD"
    repo.create_reference(name, commit.id, force=True, message=message)
    repo.set_head(name)
