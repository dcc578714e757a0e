"""What changed between trees and commits, and what is at a path: one routine each.

Sync, review, audit, the log's filters and the readers all ask these questions of git;
they all ask them here. (The index's catch-up walks memory trees side by side instead,
descending only into subtrees that differ: :mod:`gitmem.store.changes`.)
"""

from __future__ import annotations

import pygit2
from pygit2.enums import FileMode

from gitmem.format.layout import path_twins


def changed_paths(old: pygit2.Tree | None, new: pygit2.Tree | None) -> set[str]:
    """Every path that differs between two trees (both sides of a rename), None for empty."""
    if old is None and new is None:
        return set()
    if old is None:
        assert new is not None
        diff = new.diff_to_tree(swap=True)
    elif new is None:
        diff = old.diff_to_tree()
    else:
        diff = old.diff_to_tree(new)
    paths: set[str] = set()
    for delta in diff.deltas:
        paths.add(delta.old_file.path)
        paths.add(delta.new_file.path)
    return paths


def commit_changed_paths(commit: pygit2.Commit) -> set[str]:
    """Paths this commit changed: differing from every parent (git log's rule for merges)."""
    parents = commit.parents
    if not parents:
        return changed_paths(None, commit.tree)
    found: set[str] | None = None
    for parent in parents:
        paths = changed_paths(parent.tree, commit.tree)
        found = paths if found is None else found & paths
    return found or set()


def blob_at(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    """The file's blob, None when absent or not a regular file (a link is never a memory)."""
    try:
        entry = tree[path]
    except KeyError:
        return None
    return entry.id if entry.type_str == "blob" and entry.filemode != FileMode.LINK else None


def memory_blob_at(tree: pygit2.Tree | None, path: str) -> tuple[str, pygit2.Oid] | None:
    """Where the memory of ``path`` is in ``tree`` and its blob, looking at each path its id
    may be at (format 4's path, then the legacy one, whichever ``path`` is: docs/format.md,
    "Format 4"); None when at neither. Histories follow a plain id across the migration to format 4
    this way, where the file was renamed with its blob unchanged."""
    if tree is None:
        return None
    for each in path_twins(path):
        blob = blob_at(tree, each)
        if blob is not None:
            return each, blob
    return None


def memory_blob(tree: pygit2.Tree | None, path: str) -> pygit2.Oid | None:
    """The blob of :func:`memory_blob_at`, None when the memory is at neither path."""
    found = memory_blob_at(tree, path)
    return found[1] if found is not None else None
