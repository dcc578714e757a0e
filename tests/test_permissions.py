"""Permissions: the user store is its owner's alone, and nothing gitmem writes is world-writable.

Run with the umasks people have (022, and 002 where each user has a private
group): every file and directory gitmem, git and the index create in a store is
checked after a round of writes, index use, hooks and maintenance. gitmem
follows the umask like git does; with a umask that allows world-writable files
(000), ``gitmem doctor`` reports them and ``--fix`` removes the bit
(tests/test_doctor.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner

import gitmem
from gitmem import Store
from gitmem.entry import hooks as gh


@pytest.fixture(params=[0o022, 0o002], ids=["umask-022", "umask-002"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def _exercise(store: Store) -> None:
    memory = store.create("one", title="t", id="notes/perm/one")
    store.update(memory.id, body="two")
    store.append(memory.id, "three")
    store.supersede(memory.id, "four")
    store.search("four")
    store.index().rebuild()
    store.delete(memory.id)
    if not store.db().bare:
        gh.install(store.path, "memory")
    store.gc()


def _world_writable(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue  # an index's -wal file, gone when a background helper's connection closed
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & stat.S_IWOTH:
            found.append(str(path.relative_to(root)))
    return found


@pytest.mark.parametrize("bare", [False, True], ids=["worktree", "bare"])
def test_user_store_is_owner_only(tmp_path: Path, umask: int, bare: bool) -> None:
    path = tmp_path / ("user.git" if bare else "user")
    store = gitmem.init(path, scope="user", bare=bare)
    _exercise(store)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert _world_writable(path) == []


def test_user_store_in_an_existing_empty_directory_is_owner_only(
    tmp_path: Path, umask: int
) -> None:
    path = tmp_path / "existing"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    gitmem.init(path, scope="user")
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_the_default_user_store_is_owner_only(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / ".gitmem"
    monkeypatch.setenv("GITMEM_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    Gitmem(None, make_runner())("add", "a first memory makes the user store")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert _world_writable(home) == []


@pytest.mark.parametrize("bare", [False, True], ids=["worktree", "bare"])
def test_nothing_in_a_repo_store_is_world_writable(tmp_path: Path, umask: int, bare: bool) -> None:
    path = tmp_path / ("repo.git" if bare else "repo")
    store = gitmem.init(path, bare=bare)
    _exercise(store)
    assert _world_writable(path) == []
    # Whatever the umask allows for group, others never get write access to the index or locks.
    state = store.db().state_dir
    for name in ("index.sqlite", "write.lock"):
        if (state / name).exists():
            assert not (state / name).stat().st_mode & stat.S_IWOTH


def test_work_tree_files_are_not_world_writable_even_under_umask_000(tmp_path: Path) -> None:
    """The memory files and folders gitmem writes in the work tree get 0o664/0o775 before
    the umask, so even a umask of 000 leaves others read-only. (Git's own objects follow
    the umask, as git does; doctor reports and fixes those.)"""
    store = gitmem.init(tmp_path / "repo")
    before = os.umask(0)
    try:
        store.create("one", id="projects/acme/known_issues")
        memory = store.create("two", title="t")
        store.update(memory.id, "two, again")
    finally:
        os.umask(before)
    written = [
        tmp_path / "repo" / "projects",
        tmp_path / "repo" / "projects" / "acme",
        tmp_path / "repo" / "projects" / "acme" / "known_issues.md",
        tmp_path / "repo" / (memory.path or ""),
        (tmp_path / "repo" / (memory.path or "")).parent,
    ]
    for path in written:
        assert not path.stat().st_mode & stat.S_IWOTH, path
