"""Merging another branch's commit into the store's branch, memory-aware: the trees merged
file by file (:mod:`gitmem.store.merge`) and the result committed through the write loop
every write uses (``gitmem sync``, ``join``, ``update-branch``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pygit2

from gitmem.base.errors import ConflictError, OldFormatError, TooLargeError
from gitmem.base.trailers import (
    DECIDED_TRAILER,
    FORK_TRAILER,
    ID_TRAILER,
    KEPT_OVER_DELETE_TRAILER,
    OP_TRAILER,
    CommitSpec,
)
from gitmem.format import codec
from gitmem.format.config import StoreConfig
from gitmem.format.layout import ATTRIBUTES_FILE, CONFIG_FILE, id_from_path, is_path_id
from gitmem.git.db import GitDB
from gitmem.git.diff import blob_at, changed_paths, memory_blob_at
from gitmem.git.objects import FastForward, Snapshot, Staged, blob_data, get_commit, readable
from gitmem.store import memory_versions
from gitmem.store import merge as merging

MERGE_OP = "merge"


class MergeConflictError(ConflictError):
    """A file that is not a memory was changed on both sides in a way that cannot merge."""

    default_hint = "merge it with git (git pull), or fix the file on one side, then sync again"


@dataclass
class TreeMerge:
    """The merge of two trees, as changes to apply on top of ``ours``."""

    changes: dict[str, Staged] = field(default_factory=dict)
    forks: list[merging.Fork] = field(default_factory=list)
    kept_over_delete: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    """Memories both sides changed, merged field by field."""
    conflicts: list[str] = field(default_factory=list)
    decided: list[tuple[str, str]] = field(default_factory=list)
    """(memory, field): a plain field both sides changed differently, decided by time."""


def _moves(repo: pygit2.Repository, base: pygit2.Tree, side: pygit2.Tree) -> dict[str, str]:
    """Documents one side moved (old path -> new path): path ids by git's rename detection;
    a plain id moves only in ``gitmem migrate``, from where format 4 put it."""
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
    """Merge ``theirs`` into ``ours`` against ``base``: changes to apply to ours's tree. A memory
    one side moved (a renamed document) and the other edited is merged at its new path; the
    old path stays gone."""
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
        out.forks.extend(result.forks)  # written once every path is merged: see below

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
        # By blob id first: a file only theirs changed is taken unread (one over the read
        # bound too, which no reader opens).
        found = memory_blob_at(base_tree, path)
        o_id, t_id = blob_at(ours.tree, path), blob_at(theirs.tree, path)
        if o_id == t_id:
            continue
        if o_id == (found[1] if found else None) or (path in theirs_wins and t_id is not None):
            out.changes[path] = t_id
            continue
        try:
            b, o, t = base_read(path), ours_snap.read(path), theirs_snap.read(path)
        except TooLargeError:
            # Both changed it and one side cannot be read: keep ours unless it is the
            # unreadable one (the other stays in its own commit, and doctor names it).
            if o_id is not None and readable(repo, o_id):
                continue
            out.changes[path] = t_id
            continue
        both.append((path, b, o, t))
    # Each side's derived version and time, one walk per side for every memory both sides
    # changed (only those are ranked).
    ranked = [p for p, _, o, t in both if o is not None and t is not None and id_from_path(p)]
    sides.prepare(ranked, ranked)
    for path, b, o, t in both:
        merged = merging.merge_file(path, b, o, t, derived=sides.at(path, path))
        take(path, merged, o, o is not None and t is not None)
    # A fork is named by the bytes that lost, so a later merge that loses the same bytes
    # again names a fork that may already be there, edited since: that fork merged as its
    # own path above (as any memory), and it already holds those bytes in its history.
    forks, out.forks = out.forks, []
    for fork in forks:
        there = out.changes[fork.path] if fork.path in out.changes else ours_snap.read(fork.path)
        if there is None:
            out.changes[fork.path] = fork.data
            out.forks.append(fork)
    return out


class _DerivedSides:
    """Each side's versions of a path as of its commit, for the memory-aware merge to rank
    sides by the version and time a reader of each sees; one walk a side for many paths."""

    def __init__(self, repo: pygit2.Repository, ours: pygit2.Commit, theirs: pygit2.Commit) -> None:
        self.repo = repo
        self.sides: tuple[tuple[pygit2.Commit, dict[str, memory_versions.Versions]], ...]
        self.sides = ((ours, {}), (theirs, {}))

    def prepare(self, ours_paths: list[str], theirs_paths: list[str]) -> None:
        for (commit, known), paths in zip(self.sides, (ours_paths, theirs_paths), strict=True):
            known.update(memory_versions.walk(self.repo, commit, set(paths) - known.keys()) or {})

    def at(self, ours_path: str, theirs_path: str) -> merging.DerivedSides:
        """The sides of a memory at ``ours_path`` in ours and ``theirs_path`` in theirs."""
        self.prepare([ours_path], [theirs_path])
        return merging.DerivedSides(self.sides[0][1][ours_path], self.sides[1][1][theirs_path])


def merge_spec(label: str, tm: TreeMerge) -> CommitSpec:
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


def check_format(repo: pygit2.Repository, theirs: pygit2.Commit, label: str) -> None:
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


def integrate(
    db: GitDB,
    theirs: pygit2.Commit,
    label: str,
    *,
    join: bool = False,
) -> tuple[str, TreeMerge, pygit2.Commit | None, pygit2.Commit | None]:
    """Bring ``theirs`` into the local branch through the write loop: (none, fast-forward or
    merge; the merge; tip before; tip after). MergeConflictError (nothing changed) when a
    non-memory file cannot merge; ``join``: the team's configuration files win."""

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
                tm.changes[path] = blob_at(theirs.tree, path)
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
        spec = replace(merge_spec(label, tm), merge_parents=(str(theirs.id),))
        return spec, ("merge", tm, tip)

    (kind, tm, before), oid = db.write(plan)
    if kind == "none":
        return kind, tm, before, before
    if kind == "fast-forward":
        return kind, tm, before, theirs
    assert oid is not None  # a merge commit always has two parents, so it is always made
    return kind, tm, before, get_commit(db.repo, oid)


def _stage(snap: Snapshot, changes: dict[str, Staged]) -> None:
    for path, data in changes.items():
        if data is None:
            snap.remove(path)
        else:
            snap.put(path, data)
