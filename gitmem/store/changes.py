"""What changed between two commits, as the index's catch-up needs it.

Memory files added, changed and removed between two trees (walking only the subtrees
whose ids differ), and the version rows a commit adds to the ``versions`` table.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pygit2

from gitmem.base.trailers import AGENT_TRAILER, OP_TRAILER, parse_trailers
from gitmem.format.layout import MEMORY_ROOTS, id_from_path, is_memory_file
from gitmem.git.objects import blob_data
from gitmem.store.rows import big_int

_REGULAR = (0o100644, 0o100755)

_VERSION_RE = re.compile(rb"^version:[ \t]*['\"]?(\d+)", re.MULTILINE)
"""A version line in front-matter (read without parsing the file)."""


def changed_memory_files(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree
) -> Iterator[tuple[str, pygit2.Oid | None]]:
    """(path, new blob or None) for every memory file that differs between the trees.

    Walks the two trees side by side and descends only into subtrees whose ids
    differ, so the cost follows the change (one shard of ~1/256 of the
    memories), not the store. libgit2's tree-to-tree diff visits every entry.
    """
    for root in MEMORY_ROOTS:
        for path, blob in tree_changes(
            repo, _subtree(repo, old, root), _subtree(repo, new, root), root
        ):
            if is_memory_file(path):
                yield path, blob


def tree_changes(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None, prefix: str
) -> Iterator[tuple[str, pygit2.Oid | None]]:
    if old is not None and new is not None and old.id == new.id:
        return
    before = {str(e.name): e for e in old} if old is not None else {}
    after = {str(e.name): e for e in new} if new is not None else {}
    for name in sorted(before.keys() | after.keys()):
        o, n = before.get(name), after.get(name)
        if o is not None and n is not None and o.id == n.id and o.filemode == n.filemode:
            continue
        path = f"{prefix}/{name}"
        o_tree = _as_tree(repo, o)
        n_tree = _as_tree(repo, n)
        if o_tree is not None or n_tree is not None:
            yield from tree_changes(repo, o_tree, n_tree, path)
        o_blob = o.id if o is not None and o.filemode in _REGULAR else None
        n_blob = n.id if n is not None and n.filemode in _REGULAR else None
        if o_blob == n_blob:
            continue  # only the executable bit changed, or neither side is a file
        yield path, n_blob


def _as_tree(repo: pygit2.Repository, entry: pygit2.Object | None) -> pygit2.Tree | None:
    if entry is None or entry.type_str != "tree":
        return None
    obj = repo[entry.id]
    return obj if isinstance(obj, pygit2.Tree) else None


def _subtree(repo: pygit2.Repository, tree: pygit2.Tree | None, name: str) -> pygit2.Tree | None:
    if tree is None:
        return None
    try:
        entry = tree[name]
    except KeyError:
        return None
    if entry.type_str != "tree":
        return None
    obj = repo[entry.id]
    return obj if isinstance(obj, pygit2.Tree) else None


def paths_changed(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree
) -> dict[str, pygit2.Oid | None]:
    return dict(changed_memory_files(repo, old, new))


def version_rows(
    repo: pygit2.Repository, commit: pygit2.Commit, gen: int
) -> list[tuple[Any, ...]]:
    """One row per memory file this commit changed (against every parent, for merges)."""
    parents = commit.parents
    if not parents:
        changed = paths_changed(repo, None, commit.tree)
    else:
        changed = paths_changed(repo, parents[0].tree, commit.tree)
        for parent in parents[1:]:
            if not changed:
                break
            other = paths_changed(repo, parent.tree, commit.tree)
            changed = {p: b for p, b in changed.items() if p in other}
    if not changed:
        return []
    trailers = parse_trailers(commit.message)
    ops = [v for k, v in trailers if k == OP_TRAILER]
    agent = next((v for k, v in trailers if k == AGENT_TRAILER), None)
    time_us = commit.author.time * 1_000_000
    rows: list[tuple[Any, ...]] = []
    first_parent = parents[0].tree if parents else None
    for path, blob in sorted(changed.items()):
        memory_id = id_from_path(path)
        if memory_id is None:
            continue
        version: int | None = None
        if blob is not None:
            match = _VERSION_RE.search(blob_data(repo, blob)[:65536])
            version = int(match.group(1)) if match else None
        if len(ops) == 1:
            op = ops[0]
        else:
            existed = first_parent is not None and _has(first_parent, path)
            op = infer_op(existed, blob is not None, bool(trailers))
        rows.append(
            (
                memory_id,
                path,
                str(commit.id),
                time_us,
                commit.author.name,
                agent,
                op,
                big_int(version),
                str(blob) if blob is not None else None,
                gen,
            )
        )
    return rows


def _has(tree: pygit2.Tree, path: str) -> bool:
    try:
        tree[path]
    except KeyError:
        return False
    return True


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
            "INSERT INTO versions (id, path, commit_id, time_us, author, agent, op, version, blob, "
            "gen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    if commits:
        conn.executemany("INSERT OR IGNORE INTO commits VALUES (?, ?)", commits)
