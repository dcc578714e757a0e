"""Names handed to pygit2 are not kept alive (gitmem.git.objects, "names handed to pygit2").

pygit2 keeps a reference to every name a tree lookup or a tree builder's remove is given,
so a process that looks up a million different paths (an index rebuild) holds every one
of them. These tests count references and traced memory around real lookups.
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from gitmem.format.layout import format4_path
from gitmem.git.diff import memory_blob
from gitmem.git.objects import builder_remove, tree_entry
from gitmem.store.core import Store


def _fresh(text: str) -> str:
    """A string object of its own (not a literal shared with the code)."""
    return "".join(list(text))


def _tree(tmp_path: Path) -> tuple[pygit2.Repository, pygit2.Tree]:
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    leaf = repo.TreeBuilder()
    leaf.insert("a.md", repo.create_blob(b"x"), FileMode.BLOB)
    top = repo.TreeBuilder()
    top.insert("sub", leaf.write(), FileMode.TREE)
    tree = repo[top.write()]
    assert isinstance(tree, pygit2.Tree)
    return repo, tree


def test_tree_entry_finds_what_is_there_and_keeps_no_name(tmp_path: Path) -> None:
    _repo, tree = _tree(tmp_path)
    for path, kind in (("sub/a.md", "blob"), ("sub", "tree"), ("sub/b.md", None), ("x", None)):
        name = _fresh(path)
        before = sys.getrefcount(name)
        for _ in range(100):
            entry = tree_entry(tree, name)
            assert (entry.type_str if entry is not None else None) == kind
        del entry
        assert sys.getrefcount(name) == before, path


def test_builder_remove_removes_and_keeps_no_name(tmp_path: Path) -> None:
    repo, tree = _tree(tmp_path)
    builder = repo.TreeBuilder(tree)
    name = _fresh("sub")
    before = sys.getrefcount(name)
    builder_remove(repo, builder, name)
    assert len(builder) == 0
    assert sys.getrefcount(name) == before


def test_looking_up_many_memories_holds_no_memory_per_lookup(store: Store) -> None:
    ids = [store.create(f"memory {n}").id for n in range(5)]
    commit = store.db().tip()
    assert commit is not None
    tree = commit.tree
    paths = [str(format4_path(i)) for i in ids]  # a history path: both places are looked up
    tracemalloc.start()
    try:
        for n in range(20_000):
            memory_blob(tree, _fresh(paths[n % len(paths)]))
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Each lookup used to keep its path strings (~100 bytes each, two to four per call:
    # 4-8 MB here). A clean run keeps about 2 KB; other threads of a busy test worker can
    # allocate a few hundred KB meanwhile, which is not what this looks for.
    assert kept < 1_000_000, kept
