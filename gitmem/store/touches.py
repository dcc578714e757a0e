"""Which commits touched a path or a memory of a category: the filters of ``Store.log``.

Here, in the store layer, because ``Store.log`` filters with them; the audit commands
(blame, diff, undo) above use the same functions.
"""

from __future__ import annotations

import fnmatch

import pygit2

from gitmem.format import memfile
from gitmem.format.layout import id_from_path
from gitmem.git.objects import blob_data


def _blob(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    try:
        entry = tree[path]
    except KeyError:
        return None
    return entry.id if entry.type_str == "blob" else None


def changed_paths(commit: pygit2.Commit) -> set[str]:
    """Paths this commit changed: differing from every parent (git log's rule for merges)."""
    parents = commit.parents
    if not parents:
        diff = commit.tree.diff_to_tree(swap=True)
        return {d.new_file.path for d in diff.deltas}
    found: set[str] | None = None
    for parent in parents:
        diff = parent.tree.diff_to_tree(commit.tree)
        paths = {p for d in diff.deltas for p in (d.old_file.path, d.new_file.path)}
        found = paths if found is None else found & paths
    return found or set()


def path_matches(path: str, pattern: str) -> bool:
    """A file, a directory (its files), or a glob (``memories/*/mem_5f*``)."""
    pattern = pattern.strip("/")
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    return path == pattern or path.startswith(pattern + "/")


def _category_of(repo: pygit2.Repository, oid: pygit2.Oid | None, path: str) -> str | None:
    if oid is None:
        return None
    memory, _ = memfile.read(blob_data(repo, oid), path)
    return memory.category if memory is not None else None


def touches(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    *,
    path: str | None = None,
    category: str | None = None,
) -> bool:
    """Whether ``commit`` changed a file under ``path`` and/or a memory of ``category``.

    A memory counts for its category as it was after the commit, or before it when
    the commit deleted it.
    """
    paths = changed_paths(commit)
    if path is not None:
        paths = {p for p in paths if path_matches(p, path)}
    if category is None:
        return bool(paths)
    parent = commit.parents[0] if commit.parents else None
    for changed in paths:
        if id_from_path(changed) is None:
            continue
        after = _blob(commit.tree, changed)
        before = _blob(parent.tree, changed) if parent is not None and after is None else None
        if _category_of(repo, after or before, changed) == category:
            return True
    return False
