"""Many writers at once: processes and threads on one store, and the locks they meet.

No write may be lost or silently overwritten; every check counts what landed
in git rather than how long anything took.
"""

from __future__ import annotations

import fcntl
import json
import logging
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest
from storetools import commit_count, run_git, status_porcelain, tip

import gitmem
from gitmem import ConflictError, LockTimeoutError, Store
from gitmem.git.locks import STALE_LOCK_AGE

SPAWN = multiprocessing.get_context("spawn")


def location(store: Store) -> str:
    return str(store.db().gitdir if store.db().bare else store.path)


# -- workers: top level, so a spawned process can import them ------------------------------


def create_worker(path: str, worker: int, count: int, barrier: threading.Barrier) -> None:
    store = gitmem.open(path)
    barrier.wait()
    for i in range(count):
        store.create(f"{worker}-{i}\n", agent=f"worker-{worker}")


def counter_worker(path: str, memory_id: str, count: int, barrier: threading.Barrier) -> None:
    """Read-modify-write with optimistic concurrency: retry on ConflictError."""
    store = gitmem.open(path)
    barrier.wait()
    for _ in range(count):
        while True:
            current = store.read(memory_id)
            try:
                store.update(memory_id, f"{int(current.body) + 1}",
                             expected_version=current.version)
                break
            except ConflictError:
                continue


def append_worker(path: str, memory_id: str, worker: int, count: int,
                  barrier: threading.Barrier) -> None:
    store = gitmem.open(path)
    barrier.wait()
    for i in range(count):
        store.append(memory_id, f"worker {worker} line {i}")


def run_processes(target: object, args_list: list[tuple[object, ...]]) -> None:
    barrier = SPAWN.Barrier(len(args_list))
    procs = [SPAWN.Process(target=target, args=(*args, barrier)) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * len(procs)


def assert_healthy(store: Store) -> None:
    fsck = run_git(store.db().gitdir, "fsck", "--strict", "--no-dangling")
    assert "error" not in fsck.lower()
    if not store.db().bare:
        assert status_porcelain(store) == ""


# -- processes -------------------------------------------------------------------------------


@pytest.mark.slow
def test_four_processes_create_one_hundred_each(any_store: Store) -> None:
    workers, count = 4, 100
    run_processes(create_worker, [(location(any_store), w, count) for w in range(workers)])
    memories = any_store.list()
    assert len(memories) == workers * count
    bodies = sorted(m.body for m in memories)
    assert bodies == sorted(f"{w}-{i}\n" for w in range(workers) for i in range(count))
    assert commit_count(any_store) == workers * count + 1  # plus the init commit
    for w in range(workers):
        assert len(any_store.log(agent=f"worker-{w}")) == count
    # Each commit's parent is the previous one: history is one line, nothing was forked away.
    assert run_git(any_store.db().gitdir, "rev-list", "--merges", "main") == ""
    assert_healthy(any_store)


@pytest.mark.slow
def test_two_processes_read_modify_write_one_memory(any_store: Store) -> None:
    m = any_store.create("0")
    per_worker = 40
    run_processes(counter_worker, [(location(any_store), m.id, per_worker)] * 2)
    final = any_store.read(m.id)
    assert final.body == str(2 * per_worker)  # no increment lost
    assert final.version == 1 + 2 * per_worker
    assert commit_count(any_store) == 2 + 2 * per_worker
    assert_healthy(any_store)


@pytest.mark.slow
def test_two_processes_append_to_one_memory(any_store: Store) -> None:
    m = any_store.create("start")
    per_worker = 40
    run_processes(append_worker, [(location(any_store), m.id, w, per_worker) for w in range(2)])
    final = any_store.read(m.id)
    lines = final.body.split("\n")
    assert lines[0] == "start"
    assert sorted(lines[1:]) == sorted(
        f"worker {w} line {i}" for w in range(2) for i in range(per_worker))
    for w in range(2):  # each writer's lines land in the order it wrote them
        mine = [line for line in lines if line.startswith(f"worker {w} ")]
        assert mine == [f"worker {w} line {i}" for i in range(per_worker)]
    assert final.version == 1 + 2 * per_worker
    assert [v.version for v in any_store.history(m.id)] == list(range(1, 2 + 2 * per_worker))
    assert_healthy(any_store)


# -- threads ---------------------------------------------------------------------------------


def test_threads_in_one_process(any_store: Store) -> None:
    shared = any_store.create("shared")
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def creator(worker: int) -> None:
        try:
            barrier.wait()
            for i in range(15):
                any_store.create(f"t{worker}-{i}")
        except BaseException as exc:
            errors.append(exc)

    def appender(worker: int) -> None:
        try:
            barrier.wait()
            for i in range(15):
                any_store.append(shared.id, f"a{worker}-{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=creator, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=appender, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    bodies = {m.body for m in any_store.list()}
    assert {f"t{w}-{i}" for w in range(4) for i in range(15)} <= bodies
    final = any_store.read(shared.id)
    assert sorted(final.body.split("\n")[1:]) == sorted(
        f"a{w}-{i}" for w in range(2) for i in range(15))
    assert final.version == 31
    assert commit_count(any_store) == 2 + 4 * 15 + 2 * 15
    assert_healthy(any_store)


# -- locks -----------------------------------------------------------------------------------


def ref_lock(store: Store) -> Path:
    return store.db().gitdir / "refs" / "heads" / "main.lock"


def test_stale_ref_lock_is_removed(any_store: Store, caplog: pytest.LogCaptureFixture) -> None:
    lock = ref_lock(any_store)
    lock.write_text("left by a writer that died\n")
    old = time.time() - 10 * STALE_LOCK_AGE
    os.utime(lock, (old, old))
    with caplog.at_level(logging.WARNING, logger="gitmem"):
        m = any_store.create("written after the stale lock")
    assert not lock.exists()
    assert "stale lock" in caplog.text
    assert any_store.read(m.id).body == "written after the stale lock"
    assert run_git(any_store.db().gitdir, "log", "-1", "--format=%s").startswith("create:")
    assert_healthy(any_store)


def test_fresh_ref_lock_is_not_stolen(any_store: Store) -> None:
    m = any_store.create("before")
    lock = ref_lock(any_store)
    lock.write_text("held by a live writer\n")
    head = tip(any_store)
    any_store.db().lock_timeout = 0.3
    with pytest.raises(ConflictError) as info:
        any_store.update(m.id, "while the ref is locked")
    assert info.value.hint
    assert lock.read_text() == "held by a live writer\n"
    assert tip(any_store) == head
    assert any_store.read(m.id).body == "before"
    lock.unlink()
    assert any_store.update(m.id, "after the lock was released").version == 2
    assert_healthy(any_store)


def test_held_write_lock_makes_writers_wait_then_fail(any_store: Store) -> None:
    """A store serializes its writers with an flock; a held one is waited on, not broken."""
    m = any_store.create("before")
    head = tip(any_store)
    lock_path = any_store.db().state_dir / "write.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        any_store.db().lock_timeout = 0.3
        with pytest.raises(LockTimeoutError):
            any_store.update(m.id, "while another writer holds the lock")
        assert tip(any_store) == head
    finally:
        os.close(fd)
    assert any_store.update(m.id, "after").version == 2
    assert_healthy(any_store)


def test_held_write_lock_released_while_waiting(any_store: Store) -> None:
    m = any_store.create("before")
    lock_path = any_store.db().state_dir / "write.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    release = threading.Timer(0.2, os.close, args=(fd,))
    release.start()
    try:
        assert any_store.update(m.id, "waited for the lock").version == 2
    finally:
        release.join()
    assert_healthy(any_store)


def test_busy_git_index_does_not_fail_a_landed_write(store: Store,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A person's git holding index.lock: the commit lands, the work tree catches up later."""
    index_lock = store.db().gitdir / "index.lock"
    index_lock.write_text("")
    with caplog.at_level(logging.WARNING, logger="gitmem"):
        m = store.create("written while git held the index")
    assert index_lock.exists()  # a live lock is never removed
    assert "work tree" in caplog.text
    assert store.read(m.id).body == "written while git held the index"
    assert commit_count(store) == 2
    index_lock.unlink()
    store.create("the next write")
    assert_healthy(store)


def test_stale_index_lock_is_removed(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    index_lock = store.db().gitdir / "index.lock"
    index_lock.write_text("")
    old = time.time() - 10 * STALE_LOCK_AGE
    os.utime(index_lock, (old, old))
    with caplog.at_level(logging.WARNING, logger="gitmem"):
        store.create("written after a crashed git left index.lock")
    assert not index_lock.exists()
    assert "stale lock" in caplog.text
    assert_healthy(store)


# -- automatic packing racing writers -------------------------------------------------------


@pytest.mark.slow
def test_writers_race_automatic_packing(any_store: Store) -> None:
    """Four writer processes while the store packs itself (gc.auto set so low that packing is
    due from the first write on): every write lands, nothing packing moves is lost."""
    from gitmem.git import maintenance

    gitdir = any_store.db().gitdir
    run_git(gitdir, "config", "gc.auto", "256")
    with any_store.transaction("a pile of loose objects") as tx:
        for i in range(600):
            tx.create(f"pile {i}\n")
    workers, count = 4, 40
    run_processes(create_worker, [(location(any_store), w, count) for w in range(workers)])
    with maintenance.exclusive(gitdir, timeout=120):  # the last packer has finished
        assert list((gitdir / "objects" / "pack").glob("*.pack")), "no packing ran"
    bodies = {m.body for m in any_store.list()}
    assert {f"{w}-{i}\n" for w in range(workers) for i in range(count)} <= bodies
    assert commit_count(any_store) == 2 + workers * count
    assert_healthy(any_store)


# -- writer processes ------------------------------------------------------------------------


def acked_create_worker(path: str, worker: int, count: int, out: str,
                        barrier: threading.Barrier) -> None:
    """Creates, writing each acknowledged id to ``out`` as it returns."""
    store = gitmem.open(path)
    barrier.wait()
    with open(out, "w") as fh:
        for i in range(count):
            memory = store.create(f"{worker}-{i}\n", agent=f"worker-{worker}")
            fh.write(f"{memory.id}\n")
            fh.flush()


@pytest.mark.slow
def test_eight_processes_each_write_once(bare_store: Store, tmp_path: Path) -> None:
    """Eight writer processes on a bare store: every acknowledged id is on the branch exactly
    once, in one commit of its own by its own author, history is one line."""
    workers, count = 8, 25
    outs = [str(tmp_path / f"acked-{w}") for w in range(workers)]
    run_processes(
        acked_create_worker,
        [(location(bare_store), w, count, outs[w]) for w in range(workers)],
    )
    acked = [line for out in outs for line in Path(out).read_text().split()]
    assert len(acked) == workers * count
    gitdir = bare_store.db().gitdir
    ids_in_log = run_git(
        gitdir, "log", "--format=%(trailers:key=Gitmem-Id,valueonly)", "main"
    ).split()
    assert sorted(i for i in ids_in_log if i in set(acked)) == sorted(acked)  # each exactly once
    assert commit_count(bare_store) == workers * count + 1
    assert run_git(gitdir, "rev-list", "--merges", "main") == ""
    for w in range(workers):
        assert len(bare_store.log(agent=f"worker-{w}")) == count  # one author per write
    assert {m.id for m in bare_store.list()} >= set(acked)
    assert_healthy(bare_store)


def test_a_planted_write_queue_request_is_never_committed(bare_store: Store) -> None:
    """A bare store committed in a project carries its ``gitmem/`` folder: a request file
    planted in the write queue an earlier gitmem kept there (``gitmem/commitq/``) is never
    read, let alone committed by the victim's next write."""
    db = bare_store.db()
    bare_store.create("first\n")
    tip_commit = db.tip()
    assert tip_commit is not None
    blob = db.repo.create_blob(b"---\nid: notes/planted\n---\nplanted\n")
    queue = db.state_dir / "commitq"
    queue.mkdir(parents=True, exist_ok=True)
    request_id = f"{time.time_ns():020d}-1-0123abcd"
    request = {
        "id": request_id, "base": str(tip_commit.id), "opaque": False, "entries": {},
        "spellings": [], "changes": {"notes/planted.md": str(blob)},
        "message": "create: planted\n", "author": ["attacker", "attacker@x.invalid"],
        "when": int(time.time()), "wake": None, "prebuilt": None,
    }
    (queue / f"{request_id}.req").write_text(json.dumps(request))
    bare_store.create("second\n")
    assert "notes/planted.md" not in run_git(db.gitdir, "ls-tree", "-r", "--name-only", "main")
    assert "attacker" not in run_git(db.gitdir, "log", "--format=%an%n%cn", "main")
    assert sorted(p.name for p in queue.iterdir()) == [f"{request_id}.req"]
