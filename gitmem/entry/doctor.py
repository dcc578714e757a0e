"""``gitmem doctor``: check a store's health, say how to fix each problem, fix the safe ones.

Each check (``CHECKS``; docs/reliability.md) reports :class:`Finding`\\ s, each with the
command that fixes it; ``fix=True`` applies the *safe* ones, which cannot lose or change a
memory. A damaged repository gives one finding per check it stops, never a crash.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmem.base import logs
from gitmem.base.errors import GitmemError, RepositoryDamagedError, StoreError
from gitmem.entry import doctor_memories as memories
from gitmem.entry import doctor_repo as repo
from gitmem.entry.doctor_context import INFO, Context, Finding, damaged_finding, memory_files
from gitmem.format import secrets as secrets_mod
from gitmem.format.model import Scope
from gitmem.git import maintenance
from gitmem.git.objects import get_tree
from gitmem.store.core import Store
from gitmem.store.index_catchup import Progress

log = logs.get(__name__)


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
    ``deep`` compares every index row with a rebuild from git (by default a sample) and runs
    the memory checks on the rebuild; ``progress(done, total)`` follows the run."""
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
    for each in store.scopes:
        peers[each] = Context(store, store.db(each), each, deep=deep, peers=peers)
    try:
        weights = {each: _weights(peers[each], chosen, progress is not None) for each in scopes}
        done, total = 0, sum(weights[each][name] for each in scopes for name in chosen)
        for each in scopes:
            results: dict[str, list[Finding]] = {}  # a check named twice: its last run
            for name, found in _run_scope(peers[each], chosen, fix=fix):
                results[name] = found
                done += weights[each][name]
                if progress is not None:
                    progress(done, total)
            report.findings.extend(f for found in results.values() for f in found)
    finally:
        for context in peers.values():
            context.close()  # the scratch index a disagreeing one made
    for finding in report.findings:
        # A path or id a hand-made commit filled with a token is not printed either.
        finding.message = secrets_mod.redact(finding.message)
        finding.fix = secrets_mod.redact(finding.fix) if finding.fix else finding.fix
    return report


def _run_scope(
    context: Context, chosen: Sequence[str], *, fix: bool
) -> Iterator[tuple[str, list[Finding]]]:
    """Each chosen check's findings on one scope, in turn (fixes applied with ``fix``)."""
    with contextlib.ExitStack() as packing:
        if "fsck" in chosen:
            # A git gc moving loose objects into a pack while fsck reads them
            # makes fsck report them missing: wait for it, and start none meanwhile.
            try:
                packing.enter_context(maintenance.exclusive(context.db.gitdir, timeout=120))
            except TimeoutError as exc:
                log.warning("%s; fsck may report objects it moves as missing", exc)
        broken = None  # a finding when the branch points at a commit (or tree) git cannot read
        try:
            tip = context.db.tip()
            if tip is not None:
                get_tree(context.db.repo, tip.tree_id)
        except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
            broken = damaged_finding("", context, exc, what=f"the branch {context.db.branch}")
        for name in chosen:
            if broken is not None and name not in _WITHOUT_TIP:
                # Nothing that reads memories can run on a branch whose commit is gone:
                # the first such check says so, once.
                found = [] if broken.check else [broken]
                broken.check = broken.check or name
            else:
                try:
                    found = list(_CHECKERS[name](context))
                except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
                    found = [damaged_finding(name, context, exc)]
            for finding in found:
                finding.scope = str(context.scope)
                if fix and finding.safe and finding.apply is not None:
                    try:
                        finding.apply()
                        finding.fixed = True
                    except (OSError, GitmemError, subprocess.SubprocessError) as exc:
                        finding.fix_error = str(exc)
            yield name, found


MEMORY_CHECKS = frozenset({"index", "schema", "twins", "markers", "links", "chains", "secrets"})
"""The checks that go through every memory of their scope."""


def _weights(ctx: Context, chosen: Sequence[str], counted: bool) -> dict[str, int]:
    """Each chosen check's share of the run's progress: the number of memory files at the
    tip for a check that goes through the memories, else one."""
    count = 1
    if counted and MEMORY_CHECKS.intersection(chosen):
        with contextlib.suppress(RepositoryDamagedError, KeyError, pygit2.GitError):
            tip = ctx.db.tip()  # damaged: the checks that read it stop at once
            count = max(1, len(memory_files(ctx.db, str(tip.id) if tip else None)))
    return {name: count if name in MEMORY_CHECKS else 1 for name in chosen}


_WITHOUT_TIP = ("fsck", "locks", "leftovers", "merge", "merge-driver", "hooks", "permissions")
"""The checks that do not read the branch's commit: they still run when it is missing."""


_CHECKERS: dict[str, Callable[[Context], Iterable[Finding]]] = {
    "fsck": repo.check_fsck,
    "locks": repo.check_locks,
    "leftovers": repo.check_leftovers,
    "merge": repo.check_merge,
    "worktree": repo.check_worktree,
    "index": memories.check_index,
    "merge-driver": repo.check_merge_driver,
    "hooks": repo.check_hooks,
    "schema": memories.check_schema,
    "twins": memories.check_twins,
    "markers": memories.check_markers,
    "links": memories.check_links,
    "chains": memories.check_chains,
    "secrets": memories.check_secrets,
    "permissions": repo.check_permissions,
}
CHECKS = tuple(_CHECKERS)
