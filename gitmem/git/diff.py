"""What changed between trees and commits, and what is at a path: one routine each (the
index's catch-up walks trees side by side instead: :mod:`gitmem.store.commit_changes`).
"""

from __future__ import annotations

import pygit2
from pygit2.enums import FileMode

from gitmem.format.layout import history_paths
from gitmem.git.objects import tree_entry


def changed_paths(old: pygit2.Tree | None, new: pygit2.Tree | None) -> set[str]:
    """Every path that differs between two trees (both sides of a rename), None for empty."""
    if old is not None:
        diff = old.diff_to_tree(new) if new is not None else old.diff_to_tree()
    elif new is not None:
        diff = new.diff_to_tree(swap=True)
    else:
        return set()
    return {path for d in diff.deltas for path in (d.old_file.path, d.new_file.path)}


def commit_changed_paths(commit: pygit2.Commit) -> set[str]:
    """Paths this commit changed: differing from every parent (git log's rule for merges)."""
    if not commit.parents:
        return changed_paths(None, commit.tree)
    return set.intersection(*(changed_paths(p.tree, commit.tree) for p in commit.parents))


def blob_at(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    """The file's blob, None when absent or not a regular file (a link is never a memory)."""
    entry = tree_entry(tree, path)
    if entry is None:
        return None
    return entry.id if entry.type_str == "blob" and entry.filemode != FileMode.LINK else None


def memory_blob_at(tree: pygit2.Tree | None, path: str) -> tuple[str, pygit2.Oid] | None:
    """Where the memory of ``path`` is in ``tree`` and its blob, None when it is not there
    (:func:`history_paths`: histories follow an id across the migration from format 4)."""
    if tree is None:
        return None
    for each in history_paths(path):
        blob = blob_at(tree, each)
        if blob is not None:
            return each, blob
    return None


def memory_blob(tree: pygit2.Tree | None, path: str) -> pygit2.Oid | None:
    """The blob of :func:`memory_blob_at`, None when the memory is at neither path."""
    found = memory_blob_at(tree, path)
    return found[1] if found is not None else None


TREE_MODE = 0o40000
REGULAR_MODES = (0o100644, 0o100755)


def tree_entries(repo: pygit2.Repository, tree: pygit2.Oid | None) -> dict[str, tuple[int, bytes]]:
    """name -> (mode, raw object id) of a tree's entries ({} for None or a non-tree)."""
    found = repo[tree] if tree is not None else None  # a missing tree raises KeyError
    if not isinstance(found, pygit2.Tree):
        return {}
    return {str(entry.name): (entry.filemode, entry.id.raw) for entry in found}
