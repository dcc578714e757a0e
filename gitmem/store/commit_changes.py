"""What changed between two commits, as the index's catch-up needs it: memory files
added, changed and removed, and the version rows a commit adds to the ``versions`` table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pygit2

from gitmem.base.trailers import AGENT_TRAILER, OP_TRAILER, parse_trailers
from gitmem.format.layout import MEMORY_ROOTS, history_paths, id_from_path, is_memory_file
from gitmem.format.model import Op
from gitmem.git.diff import REGULAR_MODES as _REGULAR
from gitmem.git.diff import TREE_MODE as _TREE_MODE
from gitmem.git.diff import blob_at, memory_blob, memory_blob_at
from gitmem.git.diff import tree_entries as _entries
from gitmem.git.objects import tree_entry


def changed_memory_files(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree
) -> Iterator[tuple[str, pygit2.Oid | None]]:
    """(path, new blob or None) for every memory file that differs between the trees.
    Only subtrees whose ids differ are read, so the cost follows the change, not the
    store (libgit2's tree-to-tree diff visits every entry)."""
    for root in MEMORY_ROOTS:
        for path, blob in tree_changes(repo, _subtree(old, root), _subtree(new, root), root):
            if is_memory_file(path):
                yield path, blob


def tree_changes(
    repo: pygit2.Repository, old: pygit2.Oid | None, new: pygit2.Oid | None, prefix: str
) -> Iterator[tuple[str, pygit2.Oid | None]]:
    """(path, new blob or None) of every file that differs between two trees, by name."""
    if old is not None and new is not None and old == new:
        return
    before, after = _entries(repo, old), _entries(repo, new)
    for name in sorted(before.keys() | after.keys()):
        o, n = before.get(name), after.get(name)
        if o == n:
            continue
        path = f"{prefix}/{name}"
        o_tree = pygit2.Oid(raw=o[1]) if o is not None and o[0] == _TREE_MODE else None
        n_tree = pygit2.Oid(raw=n[1]) if n is not None and n[0] == _TREE_MODE else None
        if o_tree is not None or n_tree is not None:
            yield from tree_changes(repo, o_tree, n_tree, path)
        o_blob = o[1] if o is not None and o[0] in _REGULAR else None
        n_blob = n[1] if n is not None and n[0] in _REGULAR else None
        if o_blob == n_blob:
            continue  # only the executable bit changed, or neither side is a file
        yield path, pygit2.Oid(raw=n_blob) if n_blob is not None else None


def _subtree(tree: pygit2.Tree | None, name: str) -> pygit2.Oid | None:
    entry = tree_entry(tree, name) if tree is not None else None
    return entry.id if entry is not None and entry.type_str == "tree" else None


def iter_memory_changes(
    old: pygit2.Tree | None,
    new: pygit2.Tree,
    changes: Iterable[tuple[str, pygit2.Oid | None]],
) -> Iterator[tuple[str, pygit2.Oid | None]]:
    """``changes`` between ``old`` and ``new`` as changes of memories: before ``gitmem migrate`` a
    plain id may be at format 4's path too (``layout.history_paths``); a memory is keyed by its
    path in ``new`` (removed: the one it had). A stream: one commit may change a million files."""
    for path, blob in changes:
        paths = history_paths(path)
        if len(paths) == 1:
            yield path, blob
            continue
        first, second = paths
        twin = second if path == first else first
        twin_new = blob_at(new, twin)
        twin_old = blob_at(old, twin) if old is not None else None
        if twin_new is None and twin_old is None:
            yield path, blob  # the only file of its id: its change is the memory's
            continue
        if twin_new != twin_old and path != first:
            continue  # both paths changed: the pair is settled once, at the current path
        now = memory_blob_at(new, path)
        before = memory_blob_at(old, path)
        if (now[1] if now else None) == (before[1] if before else None):
            continue
        if now is not None:
            yield now
        elif before is not None:
            yield before[0], None


def _memory_changes(
    repo: pygit2.Repository, old: pygit2.Tree, new: pygit2.Tree
) -> dict[str, pygit2.Oid | None]:
    """The memory changes between two trees by path: a merge's rows keep only the memories
    every parent's diff changed, so they look each path up."""
    return dict(iter_memory_changes(old, new, changed_memory_files(repo, old, new)))


def makes_version(now: pygit2.Oid | None, befores: Sequence[pygit2.Oid | None]) -> bool:
    """Whether a commit holding a memory's file as ``now``, whose parents hold it as
    ``befores`` (None where absent), is a version of it: not a merge and the blob differs
    from the parent's, or a merge and the file is absent from every parent (docs/format.md;
    a ``migrate`` commit is never one: :func:`is_migration`)."""
    if now is None:
        return False
    if len(befores) > 1:
        return all(before is None for before in befores)
    return (befores[0] if befores else None) != now


def is_migration(ops: Iterable[str]) -> bool:
    """Whether a commit whose ``Gitmem-Op`` trailers are ``ops`` is a ``gitmem migrate``."""
    return any(op == Op.MIGRATE for op in ops)


def version_rows(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    gen: int,
    changed: dict[str, pygit2.Oid | None] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """One row per memory file this commit changed (against every parent, for merges),
    made as they are read; the last column says whether the commit is a version of the
    memory. ``changed``: what it changed against its only parent, if the caller has it."""
    parents = commit.parents
    tree = commit.tree
    stream: Iterable[tuple[str, pygit2.Oid | None]]
    if len(parents) <= 1:
        base = parents[0].tree if parents else None
        found = changed.items() if changed is not None else changed_memory_files(repo, base, tree)
        stream = iter_memory_changes(base, tree, found)
    else:
        merged = _memory_changes(repo, parents[0].tree, tree)
        for parent in parents[1:]:
            if not merged:
                break
            other = _memory_changes(repo, parent.tree, tree)
            ids = {id_from_path(p, past=True) or p for p in other}
            merged = {p: b for p, b in merged.items() if (id_from_path(p, past=True) or p) in ids}
        stream = sorted(merged.items())
    # Only the trailers read here: the others (an id per memory) are not kept.
    trailers = parse_trailers(commit.message, (OP_TRAILER, AGENT_TRAILER))
    ops = [v for k, v in trailers if k == OP_TRAILER]
    agent = next((v for k, v in trailers if k == AGENT_TRAILER), None)
    migration = is_migration(ops)
    time_us = commit.author.time * 1_000_000
    commit_hex, author = str(commit.id), commit.author.name  # one string for every row
    first_parent = parents[0].tree if parents else None
    for path, blob in stream:
        memory_id = id_from_path(path, past=True)
        if memory_id is None:
            continue
        if len(ops) == 1:
            op = ops[0]
        else:
            existed = memory_blob(first_parent, path) is not None
            op = infer_op(existed, blob is not None, bool(trailers))
        if len(parents) > 1:
            counts = makes_version(blob, [memory_blob(p.tree, path) for p in parents])
        else:
            counts = blob is not None  # a change of the file that leaves one: a version
        yield (
            memory_id,
            path,
            commit_hex,
            time_us,
            author,
            agent,
            op,
            str(blob) if blob is not None else None,
            gen,
            int(counts and not migration),
        )


def infer_op(existed: bool, exists: bool, gitmem_commit: bool) -> str:
    """The operation of a commit with no single ``Gitmem-Op``, from what happened to the file."""
    if not gitmem_commit:
        return "edit" if existed and exists else ("add" if exists else "remove")
    if not existed:
        return "create"
    if not exists:
        return "delete"
    return "update"


def insert_versions(
    conn: sqlite3.Connection, rows: list[tuple[Any, ...]], commits: list[tuple[str, int]]
) -> None:
    if rows:
        conn.executemany(
            "INSERT INTO versions (id, path, commit_id, time_us, author, agent, op, blob, gen, "
            "counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    if commits:
        conn.executemany("INSERT OR IGNORE INTO commits VALUES (?, ?)", commits)
