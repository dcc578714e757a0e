"""Packing: writes start ``git gc --auto`` by git's own estimate; ``gitmem gc`` runs ``git gc``.

Tests set git's thresholds low in the store's config (``gc.auto``), so a pile of loose
objects from one transaction crosses them; everything is checked in git afterwards (fsck,
packs, every memory readable), never by timing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from storetools import run_git

import gitmem
from gitmem import Store
from gitmem.base import paths
from gitmem.git import maintenance
from gitmem.git.maintenance import repository_size


def _packs(store: Store) -> list[str]:
    return sorted(p.name for p in (store.db().gitdir / "objects" / "pack").glob("*.pack"))


def _pile(store: Store, count: int = 500, *, until_due: bool = True) -> list[str]:
    """Commits of ``count`` creates each, until packing is due by git's own estimate (one
    fan-out folder's count of loose objects, which varies with the objects' ids)."""
    ids: list[str] = []
    for _ in range(20):
        with store.transaction("a pile of loose objects") as tx:
            ids += [tx.create(f"pile {len(ids) + i}\n").id for i in range(count)]
        if not until_due or maintenance.due(store.db().gitdir, 256, 20):
            break
    return ids


def _assert_sound(store: Store, ids: list[str]) -> None:
    gitdir = store.db().gitdir
    assert run_git(gitdir, "fsck", "--strict", "--no-dangling", "--no-progress").strip() == ""
    scan = gitmem.open(gitdir if store.db().bare else store.path)
    scan.use_index = False
    assert set(ids) <= {m.id for m in scan.list()}


@contextlib.contextmanager
def _held(gitdir: Path) -> Iterator[None]:
    """The packing lock, held as a packer at work holds it."""
    fd = os.open(paths.state_dir(gitdir) / paths.GC_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_due_is_gits_own_estimate(tmp_path: Path) -> None:
    """One fan-out folder's loose objects times 256 against gc.auto, rounded as git rounds;
    packs without a .keep against gc.autoPackLimit; 0 turns each rule off."""
    objects = tmp_path / "objects"
    (objects / "17").mkdir(parents=True)
    (objects / "pack").mkdir()
    for i in range(2):
        (objects / "17" / f"{i:038x}").touch()
    (objects / "17" / "tmp_obj_x").touch()  # not an object
    assert not maintenance.due(tmp_path, 512, 0)  # 2 is not more than 512 / 256
    assert maintenance.due(tmp_path, 256, 0)  # ... but more than 256 / 256
    assert not maintenance.due(tmp_path, 0, 1)
    for name in ("a", "b", "c"):
        (objects / "pack" / f"pack-{name}.idx").touch()
        (objects / "pack" / f"pack-{name}.pack").touch()
    assert maintenance.due(tmp_path, 6700, 2)
    (objects / "pack" / "pack-a.keep").touch()
    assert not maintenance.due(tmp_path, 6700, 2)
    assert not maintenance.due(tmp_path, 6700, 0)


def test_a_new_store_gets_the_thresholds_and_an_old_one_uses_them(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s.git", bare=True)
    gitdir = store.db().gitdir
    assert run_git(gitdir, "config", "--local", "gc.auto").strip() == str(maintenance.GC_AUTO)
    run_git(gitdir, "config", "--unset", "gc.auto")
    run_git(gitdir, "config", "--unset", "gc.autoPackLimit")
    expected = (maintenance.GC_AUTO, maintenance.GC_AUTO_PACK_LIMIT)
    assert maintenance.thresholds(store.db().repo.config) == expected
    run_git(gitdir, "config", "gc.auto", "0")
    assert maintenance.thresholds(store.db().repo.config)[0] == 0


@pytest.mark.slow
@pytest.mark.parametrize("bare", [True, False], ids=["bare", "worktree"])
def test_writes_keep_the_store_packed(tmp_path: Path, bare: bool) -> None:
    store = gitmem.init(tmp_path / ("s.git" if bare else "s"), bare=bare)
    gitdir = store.db().gitdir
    run_git(gitdir, "config", "gc.auto", "256")
    ids = _pile(store)
    pile = run_git(gitdir, "rev-parse", "main").strip()
    for i in range(300):
        if _packs(store):
            break
        ids.append(store.create(f"memory {i}\n").id)
    with maintenance.exclusive(gitdir, timeout=120):  # the packer has finished
        assert _packs(store), "no packing ran"
        # Everything the branch reached when packing started is in a pack (writes made
        # while it ran may still be loose).
        reached = run_git(gitdir, "rev-list", "--objects", pile).split()
        loose = [
            o for o in reached if len(o) == 40 and (gitdir / "objects" / o[:2] / o[2:]).exists()
        ]
        assert loose == []
    ids.append(store.create("after packing\n").id)
    _assert_sound(store, ids)
    if not bare:
        assert run_git(store.path, "status", "--porcelain") == ""


def test_gc_auto_zero_turns_packing_off(bare_store: Store) -> None:
    run_git(bare_store.db().gitdir, "config", "gc.auto", "0")
    ids = _pile(bare_store, 200, until_due=False)
    ids += [bare_store.create(f"memory {i}\n").id for i in range(20)]
    assert _packs(bare_store) == []
    assert repository_size(bare_store.db().gitdir)[1] > 220  # a blob a memory, and more
    _assert_sound(bare_store, ids)


def test_too_many_packs_are_packed_into_one(bare_store: Store) -> None:
    """More packs than gc.autoPackLimit (a sync fetches one each time): git gc --auto packs
    them into one; gc.autoPackLimit 0 turns that rule off."""
    gitdir = bare_store.db().gitdir
    run_git(gitdir, "config", "gc.auto", "0")
    ids: list[str] = []
    for round_ in range(4):
        ids += [bare_store.create(f"r{round_} m{i}\n").id for i in range(2)]
        run_git(gitdir, "repack", "-d", "-q")  # one new pack of this round's objects
    assert len(_packs(bare_store)) == 4
    run_git(gitdir, "config", "gc.auto", "6700")
    run_git(gitdir, "config", "gc.autoPackLimit", "0")
    ids.append(bare_store.create("packs are not counted\n").id)
    with maintenance.exclusive(gitdir, timeout=120):
        assert len(_packs(bare_store)) == 4
    run_git(gitdir, "config", "gc.autoPackLimit", "3")
    ids.append(bare_store.create("now they are\n").id)
    with maintenance.exclusive(gitdir, timeout=120):
        assert len(_packs(bare_store)) == 1
    _assert_sound(bare_store, ids)


def test_one_packer_at_a_time_and_none_lingers(bare_store: Store) -> None:
    gitdir = bare_store.db().gitdir
    run_git(gitdir, "config", "gc.auto", "256")
    with _held(gitdir):  # someone packs: writers start nothing
        ids = _pile(bare_store)
        assert maintenance.due(gitdir, 256, 20)
        assert maintenance.start(gitdir, 256, 20) is None
        assert _packs(bare_store) == []
    helper = maintenance.start(gitdir, 256, 20)
    assert helper is not None
    assert helper.wait(timeout=120) == 0
    with maintenance.exclusive(gitdir, timeout=0):  # it let go as it exited
        assert _packs(bare_store)
    _assert_sound(bare_store, ids)


def test_gitmem_gc_packs_everything_and_waits_for_a_packer(bare_store: Store) -> None:
    gitdir = bare_store.db().gitdir
    run_git(gitdir, "config", "gc.auto", "0")
    ids = [bare_store.create(f"memory {i}\n").id for i in range(5)]
    with _held(gitdir), pytest.raises(TimeoutError), maintenance.exclusive(gitdir, timeout=0.2):
        pass
    (result,) = bare_store.gc()
    assert result.loose_objects_before > 0 and result.loose_objects_after == 0
    assert len(_packs(bare_store)) == 1
    _assert_sound(bare_store, ids)


def test_gitmem_gc_clears_the_lock_a_killed_packer_left(bare_store: Store) -> None:
    """A ``git gc --auto`` killed mid ``pack-refs`` leaves ``packed-refs.lock``; gitmem gc
    removes it once it has stayed (no git holds it) and packs, instead of failing forever."""
    gitdir = bare_store.db().gitdir
    ids = [bare_store.create(f"memory {i}\n").id for i in range(3)]
    lock = gitdir / "packed-refs.lock"
    lock.write_text("")
    os.utime(lock, (time.time() - 60, time.time() - 60))  # left by a packer killed a minute ago
    (result,) = bare_store.gc()
    assert result.loose_objects_after == 0 and not (gitdir / "packed-refs.lock").exists()
    _assert_sound(bare_store, ids)


def test_gc_reports_progress_per_repository(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storetools import assert_progress

    bare_store.create("something to pack\n")
    calls: list[tuple[int, int]] = []
    (result,) = bare_store.gc(progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 1), (1, 1)] and result.loose_objects_after == 0
    # A project's store beside the user's: one step each, in the order they are packed.
    gitmem.init(Path(os.environ["GITMEM_HOME"]), scope="user").create("user fact\n")
    project = tmp_path / "proj"
    project.mkdir()
    run_git(project, "init", "-q")
    gitmem.init_project(project).create("project fact\n")
    monkeypatch.chdir(project)
    both = gitmem.open()
    calls.clear()
    assert len(both.gc(progress=lambda done, total: calls.append((done, total)))) == 2
    assert_progress(calls)
    assert calls == [(0, 2), (1, 2), (2, 2)]


def test_writes_racing_repacks_lose_nothing(bare_store: Store) -> None:
    """``git repack -d`` moves loose objects into a pack and removes the fan-out folders it
    empties while writes land beside it (libgit2 makes ``objects/xx/`` and then renames the
    object into it: :func:`gitmem.git.objects.write_object` writes again when the folder
    went in between). Every write lands and reads back."""
    gitdir = str(bare_store.db().gitdir)
    run_git(gitdir, "config", "gc.auto", "0")  # the repacks below are the only packing
    stop = threading.Event()
    rounds = 0

    def repack_forever() -> None:
        nonlocal rounds
        while not stop.is_set():
            for args in (["repack", "-d", "-q"], ["repack", "-a", "-d", "-q"]):
                subprocess.run(["git", "-C", gitdir, *args], capture_output=True, check=False)
            rounds += 1

    packer = threading.Thread(target=repack_forever)
    packer.start()
    ids: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while (rounds < 3 or len(ids) < 60) and time.monotonic() < deadline:
            ids.append(bare_store.create(f"memory {len(ids)}\n").id)
    finally:
        stop.set()
        packer.join()
    assert rounds >= 1
    _assert_sound(bare_store, ids)


def _deleted_packs_held(gitdir: Path) -> list[str]:
    """Files of ``gitdir``'s ``objects/pack`` this process still holds open or mapped after
    their deletion (Linux's ``/proc``). Only this store's: an earlier test's store that the
    garbage collector has not freed yet may still hold packs of its own."""
    held = set()
    prefix = f"{gitdir.resolve() / 'objects' / 'pack'}/"
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            target = str(fd.readlink())
            if target.startswith(prefix) and target.endswith("(deleted)"):
                held.add(target)
    with Path("/proc/self/maps").open() as maps:
        for line in maps:
            fields = line.split(None, 5)  # address, mode, offset, device, inode, path
            target = fields[5].strip() if len(fields) == 6 else ""
            if target.startswith(prefix) and target.endswith("(deleted)"):
                held.add(target)
    return sorted(held)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("kind", ["worktree", "bare"])
def test_a_long_lived_store_lets_go_of_packs_a_repack_deleted(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgit2 never drops a pack from a handle's list: after ``git repack -a -d`` deleted
    the packs a store had read from, the store would keep them open (their disk space not
    given back) for as long as it lives. Its next use lets them go, and every memory still
    reads and writes."""
    from gitmem.git import db as gitdb

    monkeypatch.setattr(gitdb, "PACKS_CHECK", 0.0)  # look at every use, not once a second
    store = gitmem.init(tmp_path / "s", bare=kind == "bare")
    gitdir = store.db().gitdir
    run_git(gitdir, "config", "gc.auto", "0")
    ids = []
    for round_ in range(4):
        ids += [store.create(f"round {round_} memory {i}\n").id for i in range(5)]
        run_git(gitdir, "repack", "-d", "-q")  # a pack of this round's objects
        assert {store.get(i).id for i in ids} == set(ids)  # read through every pack
    assert len(_packs(store)) == 4
    run_git(gitdir, "repack", "-a", "-d", "-q")  # one pack; the four are deleted
    assert len(_packs(store)) == 1
    ids.append(store.create("after the repack\n").id)
    assert {store.get(i).id for i in ids} == set(ids)
    assert _deleted_packs_held(gitdir) == []
    run_git(gitdir, "fsck", "--no-progress")
