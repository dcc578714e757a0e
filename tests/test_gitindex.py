"""gitmem's own git-index writer must leave an index that git itself reads as clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GitRunner

from gitmem import Store
from gitmem.format.layout import memory_path
from gitmem.git.stage import GitIndex, Unsupported


def _assert_git_agrees(store: Store, git: GitRunner) -> None:
    path = store.path
    assert git(path, "status", "--porcelain") == ""
    assert git(path, "diff-index", "--cached", "HEAD") == ""
    staged = sorted(line.split("\t")[1] for line in git(path, "ls-files", "-s").splitlines())
    committed = sorted(git(path, "ls-tree", "-r", "--name-only", "HEAD").splitlines())
    assert staged == committed
    git(path, "fsck", "--strict")


def test_writes_keep_the_index_equal_to_the_tip(store: Store, git: GitRunner) -> None:
    ids = [store.create(f"memory {i}\n", title=f"m{i}").id for i in range(30)]
    for memory_id in ids[:10]:
        store.update(memory_id, "changed\n")
    for memory_id in ids[10:20]:
        store.delete(memory_id)
    store.restore(ids[10])
    _assert_git_agrees(store, git)
    index = GitIndex(store.db().gitdir / "index")
    index.load()
    assert index.get(store.read(ids[0]).path or "") is not None
    assert index.get(memory_path(ids[15])) is None  # deleted


def test_index_written_by_git_with_extensions_is_read_and_rewritten(
    store: Store, git: GitRunner
) -> None:
    first = store.create("one\n", title="one")
    # git's own commit writes a cache tree (TREE); the untracked cache adds UNTR.
    Path(store.path, "notes.txt").write_text("a hand-made file\n")
    git(store.path, "add", "notes.txt")
    git(store.path, "commit", "-qm", "a file by hand")
    git(store.path, "update-index", "--untracked-cache")
    git(store.path, "status", "--porcelain")
    store.update(first.id, "two\n")
    store.create("three\n", title="three")
    _assert_git_agrees(store, git)


def test_index_version_4_falls_back_to_libgit2(store: Store, git: GitRunner) -> None:
    # (A split index is written by neither: libgit2 refuses its 'link' extension too.)
    store.create("one\n", title="one")
    git(store.path, "update-index", "--index-version", "4")
    with pytest.raises(Unsupported):
        GitIndex(store.db().gitdir / "index").load()
    created = store.create("two\n", title="two")
    store.update(created.id, "three\n")
    _assert_git_agrees(store, git)


def test_a_held_index_lock_is_waited_for_then_cleared_when_stale(
    store: Store, git: GitRunner
) -> None:
    import os
    import time

    store.create("one\n", title="one")
    lock = store.db().gitdir / "index.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    store.create("two\n", title="two")
    assert not lock.exists()
    _assert_git_agrees(store, git)


def test_corrupt_index_is_not_parsed(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.write_bytes(b"DIRC\x00\x00\x00\x02\x00\x00\x00\x00" + b"\x00" * 20)
    with pytest.raises(Unsupported, match="checksum"):
        GitIndex(index).load()
