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
- ``leftovers``: temporary files of a writer that died mid-write, and state folders set
  aside unread (not made for this git directory) with what they hold;
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
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmem.base import logs
from gitmem.base.errors import GitmemError, RepositoryDamagedError, StoreError
from gitmem.entry.doctor_context import (
    CONTENT_SAMPLE,
    ERROR,
    INFO,
    SEVERITIES,
    WARNING,
    Context,
    Finding,
    Progress,
    Tally,
    count_memory_files,
    damaged_finding,
)
from gitmem.entry.doctor_memories import (
    check_chains,
    check_index,
    check_links,
    check_markers,
    check_schema,
    check_secrets,
    check_twins,
)
from gitmem.entry.doctor_repo import (
    FSCK_ARGS,
    check_fsck,
    check_hooks,
    check_leftovers,
    check_locks,
    check_merge,
    check_merge_driver,
    check_permissions,
    check_worktree,
    start_git,
)
from gitmem.format import secrets as secrets_mod
from gitmem.format.model import Scope
from gitmem.git import maintenance
from gitmem.git.objects import get_tree
from gitmem.store.core import Store

__all__ = [
    "CHECKS",
    "CONTENT_SAMPLE",
    "ERROR",
    "INFO",
    "SEVERITIES",
    "WARNING",
    "DoctorReport",
    "Finding",
    "diagnose",
]
"""The doctor's vocabulary: checks and findings are defined with the checks
(doctor_context, doctor_repo, doctor_memories) and named here for callers."""

log = logs.get(__name__)

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
    progress: Progress | None = None,
) -> DoctorReport:
    """Run the checks on every scope of ``store`` (or one); with ``fix``, apply the safe fixes.

    The memory checks (schema, links, chains, secrets) read the derived index once its rows
    match git's tree blob for blob (checked on every run: one tree walk, no decoding), and
    an index rebuilt from git in a scratch file otherwise (removed when the run ends).
    ``deep`` compares every index row with that rebuild's, field by field (what the index
    check samples by default), and runs the memory checks on the rebuild.

    ``progress(done, total)`` follows the run: the checks that read the memories count
    one per memory of their scope, the others one each (:class:`Tally`).
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
    peers: dict[Scope, Context] = {}
    tally = Tally(progress)
    for each in store.scopes:
        peers[each] = Context(store, store.db(each), each, deep=deep, peers=peers, tally=tally)
    try:
        weights = {each: _weights(peers[each], chosen, progress is not None) for each in scopes}
        tally.total = sum(weights[each][name] for each in scopes for name in chosen)
        for each in scopes:
            results = _run_scope(peers[each], chosen, weights[each], fix=fix)
            for name in dict.fromkeys(chosen):
                report.findings.extend(results[name])
    finally:
        for context in peers.values():
            context.close()  # the scratch index a disagreeing one made
    for finding in report.findings:
        # A path or id a hand-made commit filled with a token is not printed either.
        finding.message = secrets_mod.redact(finding.message)
        finding.fix = secrets_mod.redact(finding.fix) if finding.fix else finding.fix
    return report


def _run_scope(
    context: Context, chosen: Sequence[str], weights: dict[str, int], *, fix: bool
) -> dict[str, list[Finding]]:
    """The chosen checks' findings on one scope, by check (fixes applied with ``fix``)."""
    tally = context.tally
    order = list(chosen)
    packing = contextlib.ExitStack()
    if "fsck" in chosen:
        # A git gc moving loose objects into a pack while fsck reads them
        # makes fsck report them missing: wait for it, and start none meanwhile.
        try:
            packing.enter_context(maintenance.exclusive(context.db.gitdir, timeout=120))
        except TimeoutError as exc:
            log.warning("%s; fsck may report objects it moves as missing", exc)
    if "fsck" in chosen and not fix:
        # git fsck is its own process: let it run beside the other checks (reported in
        # its place all the same). Not with --fix, whose repairs may commit meanwhile.
        context.fsck = start_git(context.db, *FSCK_ARGS)
        order = [c for c in chosen if c != "fsck"] + ["fsck"]
    results: dict[str, list[Finding]] = {}
    broken = _broken_tip(context)
    try:
        for name in order:
            tally.start(weights[name])
            if broken is not None and name not in _WITHOUT_TIP:
                # Nothing that reads memories can run on a branch whose commit is gone:
                # the first such check says so, once.
                results[name] = []
                if broken.check == "":
                    broken.check = name
                    broken.scope = str(context.scope)
                    results[name] = [broken]
                tally.finish()
                continue
            try:
                found = list(_CHECKERS[name](context))
            except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
                found = [damaged_finding(name, context, exc)]
            for finding in found:
                finding.scope = str(context.scope)
            results[name] = found
            if fix:
                _apply(found)
            tally.finish()
    finally:
        if context.fsck is not None:  # a check failed before fsck was collected
            context.fsck.kill()
            context.fsck.communicate()
        packing.close()
    return results


MEMORY_CHECKS = frozenset({"index", "schema", "twins", "markers", "links", "chains", "secrets"})
"""The checks that go through every memory of their scope."""


def _weights(ctx: Context, chosen: Sequence[str], counted: bool) -> dict[str, int]:
    """Each chosen check's share of the run's progress: the number of memory files at the
    tip for a check that goes through the memories, else one."""
    memories = 1
    if counted and MEMORY_CHECKS.intersection(chosen):
        try:
            tip = ctx.db.tip()
            memories = max(1, count_memory_files(ctx.db, str(tip.id) if tip else None))
        except (RepositoryDamagedError, KeyError, pygit2.GitError):
            memories = 1  # a damaged branch: the checks that read it stop at once
    return {name: memories if name in MEMORY_CHECKS else 1 for name in chosen}


_WITHOUT_TIP = ("fsck", "locks", "leftovers", "merge", "merge-driver", "hooks", "permissions")
"""The checks that do not read the branch's commit: they still run when it is missing."""


def _broken_tip(ctx: Context) -> Finding | None:
    """A finding when the branch points at a commit (or tree) git cannot read."""
    try:
        tip = ctx.db.tip()
        if tip is not None:
            get_tree(ctx.db.repo, tip.tree_id)
    except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
        return damaged_finding("", ctx, exc, what=f"the branch {ctx.db.branch}")
    return None


def _apply(findings: Sequence[Finding]) -> None:
    for finding in findings:
        if not finding.safe or finding.apply is None:
            continue
        try:
            finding.apply()
            finding.fixed = True
        except (OSError, GitmemError, subprocess.SubprocessError) as exc:
            finding.fix_error = str(exc)


# -- the checks ------------------------------------------------------------------------------


_CHECKERS: dict[str, Callable[[Context], Iterable[Finding]]] = {
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
