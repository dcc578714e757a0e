"""Many writers at once: processes and threads on one store, and the locks they meet.

No write may be lost or silently overwritten; every check counts what landed
in git rather than how long anything took.
"""

from __future__ import annotations

import fcntl
import logging
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pygit2
import pytest
from storetools import commit_count, run_git, status_porcelain, tip

import gitmem
from gitmem import ConflictError, LockTimeoutError, Memory, Store
from gitmem.git.groupcommit import Request

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
    old = time.time() - 10 * any_store.db().stale_lock_age
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


def test_held_write_lock_makes_writers_wait_then_fail(store: Store) -> None:
    """A work-tree store serializes writers with an flock; a held one is waited on, not broken."""
    m = store.create("before")
    head = tip(store)
    lock_path = store.db().state_dir / "write.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        store.db().lock_timeout = 0.3
        with pytest.raises(LockTimeoutError):
            store.update(m.id, "while another writer holds the lock")
        assert tip(store) == head
    finally:
        os.close(fd)
    assert store.update(m.id, "after").version == 2
    assert_healthy(store)


def test_held_write_lock_released_while_waiting(store: Store) -> None:
    m = store.create("before")
    lock_path = store.db().state_dir / "write.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    release = threading.Timer(0.2, os.close, args=(fd,))
    release.start()
    try:
        assert store.update(m.id, "waited for the lock").version == 2
    finally:
        release.join()
    assert_healthy(store)


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
    old = time.time() - 10 * store.db().stale_lock_age
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


# -- group commit ----------------------------------------------------------------------------


def acked_create_worker(path: str, worker: int, count: int, out: str,
                        barrier: threading.Barrier) -> None:
    """Creates, writing each acknowledged id (with its commit) to ``out`` as it returns."""
    store = gitmem.open(path)
    barrier.wait()
    with open(out, "w") as fh:
        for i in range(count):
            memory = store.create(f"{worker}-{i}\n", agent=f"worker-{worker}")
            fh.write(f"{memory.id}\n")
            fh.flush()
    stats = store.db()._queue.stats if store.db()._queue is not None else None
    if stats is not None:
        with open(out + ".stats", "w") as fh:
            fh.write(f"{stats.led} {stats.carried} {stats.queued} {stats.retried}\n")


@pytest.mark.slow
def test_eight_processes_group_commit_each_write_once(bare_store: Store, tmp_path: Path) -> None:
    """Eight writer processes on a bare store (group commit): every acknowledged id is on the
    branch exactly once, in one commit of its own by its own author, history is one line."""
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
    queue = gitdir / "gitmem" / "commitq"
    assert not [p.name for p in queue.iterdir() if not p.name.startswith(".")]  # nothing left
    stats = [Path(out + ".stats").read_text().split() for out in outs
             if Path(out + ".stats").exists()]
    print("led, carried, queued, retried per writer:", stats)
    assert_healthy(bare_store)


def test_group_commit_leader_settles_what_dead_writers_left(bare_store: Store) -> None:
    """A request a dead writer queued is committed by the next writer, once (a write in
    flight when its writer died), and a dead writer's half-written temporary file is
    removed. (Dead leaders, journal and all, are killed at random in test_crash.py.)"""
    import subprocess
    import sys

    from gitmem.git import groupcommit

    db = bare_store.db()
    first = bare_store.create("first\n")
    queue = db.state_dir / groupcommit.QUEUE_DIR
    queue.mkdir(parents=True, exist_ok=True)
    tip = db.tip()
    assert tip is not None
    blob = db.repo.create_blob(b"---\nid: notes/dead/queued\n---\nqueued by the dead\n")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    request = groupcommit.Request(
        id=groupcommit.new_request_id(), base=str(tip.id), opaque=False, entries={},
        spellings={}, changes={"notes/dead/queued.md": str(blob)},
        message="create: queued by the dead\n", author=("ghost", "ghost@x.invalid"),
        when=int(time.time()),
    )
    (queue / f"{request.id}.req").write_text(request.to_json())
    (queue / f".{request.id}.res.{dead.pid}.tmp").write_text("half")
    bare_store.create("second\n")
    paths = run_git(db.gitdir, "ls-tree", "-r", "--name-only", "main").split()
    assert "notes/dead/queued.md" in paths
    assert run_git(db.gitdir, "log", "--format=%an", "main").split().count("ghost") == 1
    left = sorted(p.name for p in queue.iterdir())
    assert left == [f"{request.id}.res"]  # its result waits for a writer that never comes
    assert bare_store.read(first.id).body == "first\n"
    assert_healthy(bare_store)


def _queued_request(store: Store, name: str, wake: str | None) -> Request:
    """A request for a path-id note, as a waiting writer queues it (its blob written)."""
    from gitmem.git import groupcommit

    db = store.db()
    tip_commit = db.tip()
    assert tip_commit is not None
    blob = db.repo.create_blob(f"---\nid: notes/q/{name}\n---\nqueued {name}\n".encode())
    return groupcommit.Request(
        id=groupcommit.new_request_id(), base=str(tip_commit.id), opaque=False, entries={},
        spellings={}, changes={f"notes/q/{name}.md": str(blob)},
        message=f"create: queued {name}\n", author=("waiter", "waiter@x.invalid"),
        when=int(time.time()), wake=wake,
    )


def test_group_commit_sends_a_waiters_result_through_its_fifo(bare_store: Store) -> None:
    """The leader hands a queued write's result to the FIFO its writer waits on (a line
    naming the request), and leaves no result file in the queue."""
    from gitmem.git import groupcommit

    db = bare_store.db()
    bare_store.create("first\n")
    queue = db.state_dir / groupcommit.QUEUE_DIR
    name = f"w-{os.getpid()}-1-0123abcd.fifo"
    os.mkfifo(queue / name, 0o600)
    fd = os.open(queue / name, os.O_RDWR | os.O_NONBLOCK)
    try:
        request = _queued_request(bare_store, "piped", name)
        (queue / f"{request.id}.req").write_text(request.to_json())
        bare_store.create("leader\n")  # takes the lock, commits the queued write too
        lines = [line.lstrip("!") for line in os.read(fd, 65536).decode().splitlines()]
    finally:
        os.close(fd)
        (queue / name).unlink()
    mine = [line for line in lines if line.startswith(request.id)]
    assert len(mine) == 1
    kind, commit = mine[0].split()[1:3]
    assert kind == "ok"
    assert run_git(db.gitdir, "log", "-1", "--format=%an", commit).strip() == "waiter"
    assert run_git(db.gitdir, "merge-base", "--is-ancestor", commit, "main").strip() == ""
    assert not list(queue.glob("*.res")) and not list(queue.glob("*.claimed"))
    assert_healthy(bare_store)


def test_group_commit_moves_the_branch_once_for_what_it_took_together(
    bare_store: Store,
) -> None:
    """A leader that finds three requests queued commits its own write and the three as a
    chain of four commits (one author each, queue order after its own), moves the branch
    once (one reflog entry), and only then tells each writer the commit that is its own."""
    from gitmem.git import groupcommit

    db = bare_store.db()
    bare_store.create("first\n")
    db.repo.config["core.logAllRefUpdates"] = "true"  # so every move of main is logged
    before = tip(bare_store)
    queue = db.state_dir / groupcommit.QUEUE_DIR
    requests = [_queued_request(bare_store, f"q{n}", None) for n in range(3)]
    for request in requests:
        (queue / f"{request.id}.req").write_text(request.to_json())
    mine = bare_store.create("leader\n")
    moves = run_git(db.gitdir, "reflog", "show", "--format=%H %gs", "refs/heads/main").splitlines()
    assert [line.split(" ", 1)[1] for line in moves] == ["gitmem: group commit"]
    chain = run_git(db.gitdir, "rev-list", "--reverse", f"{before}..main").split()
    assert len(chain) == 4
    assert moves[0].split()[0] == chain[-1]
    authors = [run_git(db.gitdir, "log", "-1", "--format=%an", c).strip() for c in chain]
    assert authors[1:] == ["waiter"] * 3
    ordered = sorted(requests, key=lambda r: r.id)  # queue order: the request ids' order
    for request, commit in zip(ordered, chain[1:], strict=True):
        result = (queue / f"{request.id}.res").read_text().split()
        assert result[:2] == ["ok", commit]
        changed = run_git(db.gitdir, "diff-tree", "--no-commit-id", "--name-only", "-r", commit)
        assert changed.split() == list(request.changes)
    assert bare_store.read(mine.id).body == "leader\n"
    assert_healthy(bare_store)


@pytest.mark.parametrize("wake", ["../../../victim", "w-1-1-0123abcd.fifo"])
def test_group_commit_opens_no_file_a_request_names_but_its_fifo(
    bare_store: Store, wake: str
) -> None:
    """A request is input: a ``wake`` name that leaves the queue, or that names something
    other than a FIFO, is never written to; the result goes to a result file instead."""
    from gitmem.git import groupcommit

    db = bare_store.db()
    bare_store.create("first\n")
    queue = db.state_dir / groupcommit.QUEUE_DIR
    victim = (queue / wake).resolve() if wake.startswith("..") else queue / wake
    victim.write_text("keep me\n")
    try:
        request = _queued_request(bare_store, "hostile", wake)
        (queue / f"{request.id}.req").write_text(request.to_json())
        bare_store.create("leader\n")
        assert victim.read_text() == "keep me\n"
        result = (queue / f"{request.id}.res").read_text()
    finally:
        victim.unlink()
    assert result.startswith("ok ")
    paths = run_git(db.gitdir, "ls-tree", "-r", "--name-only", "main").split()
    assert "notes/q/hostile.md" in paths


def test_group_commit_journal_a_dead_leader_left_is_settled(bare_store: Store) -> None:
    """A leader killed after moving the branch to a queued write's commit, before telling
    its writer: the next leader finds the commit in the journal and acknowledges it (a
    result file), drops the request; a torn last line (a move that never happened) and a
    line naming something that is not a request id leave no file behind."""
    from gitmem.git import groupcommit

    db = bare_store.db()
    bare_store.create("first\n")
    queue = db.state_dir / groupcommit.QUEUE_DIR
    request = _queued_request(bare_store, "journalled", None)
    rid = request.id
    # What the dead leader did: claimed the request, committed it, journalled, moved main.
    (queue / f"{rid}.claimed").write_text(request.to_json())
    tip_commit = db.tip()
    assert tip_commit is not None
    landed = db.repo.create_commit(
        None,
        _signature(),
        _signature(),
        "create: queued journalled\n",
        _tree_with(bare_store, "notes/q/journalled.md", request),
        [tip_commit.id],
    )
    db.repo.lookup_reference("refs/heads/main").set_target(landed)
    torn = groupcommit.new_request_id()
    (queue / groupcommit.BATCH_NAME).write_text(
        f"{rid} {landed}\n../../escaped {landed}\n{torn} {str(landed)[:17]}"
    )
    bare_store.create("next leader\n")
    assert (queue / f"{rid}.res").read_text().split()[:2] == ["ok", str(landed)]
    assert not (queue / f"{rid}.claimed").exists()
    assert not (queue / groupcommit.BATCH_NAME).exists()
    assert not (db.state_dir.parent / "escaped.res").exists()
    assert not (queue / f"{torn}.res").exists()
    paths = run_git(db.gitdir, "ls-tree", "-r", "--name-only", "main").split()
    assert paths.count("notes/q/journalled.md") == 1  # committed once, not again
    assert_healthy(bare_store)


def _signature() -> pygit2.Signature:
    return pygit2.Signature("waiter", "waiter@x.invalid", int(time.time()), 0)


def _tree_with(store: Store, path: str, request: Request) -> pygit2.Oid:
    from gitmem.git.objects import build_tree

    tip_commit = store.db().tip()
    assert tip_commit is not None
    blob = request.changes[path]
    assert blob is not None
    changes: dict[str, pygit2.Oid | None] = {path: pygit2.Oid(hex=blob)}
    return build_tree(store.db().repo, tip_commit.tree, changes)


@pytest.mark.parametrize("queued", [False, True], ids=["leads-at-once", "queued-then-leads"])
def test_group_commit_leader_whose_write_landed_never_reports_it_failed(
    bare_store: Store, monkeypatch: pytest.MonkeyPatch, queued: bool
) -> None:
    """The leader's own write is on the branch when committing for others fails (here: a
    result cannot be handed over): its caller gets its memory, not the error, and the next
    leader settles the others from the journal and the claimed requests. ``queued``: the
    writer queued behind a held lock and then leads, its own request after the other in
    one group, so telling the other fails after the branch moved to both."""
    from gitmem.git import groupcommit

    db = bare_store.db()
    bare_store.create("first\n")
    queue = db.state_dir / groupcommit.QUEUE_DIR
    request = _queued_request(bare_store, "undelivered", None)
    (queue / f"{request.id}.req").write_text(request.to_json())

    def broken(self: object, request: Request, outcome: object) -> None:
        raise OSError("no space left on device")

    created: list[Memory] = []
    failures: list[BaseException] = []

    def write() -> None:
        try:
            created.append(bare_store.create("leader\n"))
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    with monkeypatch.context() as patch:
        patch.setattr(groupcommit.CommitQueue, "_deliver", broken)
        if not queued:
            write()
        else:
            fd = os.open(db.state_dir / groupcommit.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held: the writer queues behind the other
                thread = threading.Thread(target=write)
                thread.start()
                deadline = time.monotonic() + 10
                while len(list(queue.glob("*.req"))) < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert len(list(queue.glob("*.req"))) == 2
            finally:
                os.close(fd)  # free: the writer leads both, its own second
            thread.join(timeout=30)
    assert not failures, failures
    assert [bare_store.read(m.id).body for m in created] == ["leader\n"]
    bare_store.create("next leader\n")
    assert (queue / f"{request.id}.res").read_text().startswith("ok ")
    assert not list(queue.glob("*.claimed")) and not (queue / groupcommit.BATCH_NAME).exists()
    paths = run_git(db.gitdir, "ls-tree", "-r", "--name-only", "main").split()
    assert paths.count("notes/q/undelivered.md") == 1
    assert_healthy(bare_store)
