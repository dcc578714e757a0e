"""Automatic packing: writes start a background ``git repack`` the way ``gc --auto`` would.

Each test sets git's own thresholds low in the store's config (``gc.auto``), so a few
dozen writes cross them; everything is checked in git afterwards (fsck, packs, every
memory readable), never by timing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pygit2
import pytest
from storetools import run_git

import gitmem
from gitmem import Store
from gitmem.git import autopack
from gitmem.git.maintenance import repository_size


def _configure(store: Store, **settings: str) -> None:
    for key, value in settings.items():
        run_git(store.db().gitdir, "config", key.replace("_", "."), value)
    store.db().autopack._limits = None  # re-read now, not after CONFIG_TTL


def _loose(store: Store) -> int:
    return repository_size(store.db().gitdir)[1]


def _packs(store: Store) -> list[str]:
    pack_dir = store.db().gitdir / "objects" / "pack"
    return sorted(p.name for p in pack_dir.glob("*.pack"))


def _create_until_launched(store: Store, limit: int = 400) -> list[str]:
    ids: list[str] = []
    db = store.db()
    for i in range(limit):
        ids.append(store.create(f"memory {i}\n", title=f"m{i}").id)
        if db.autopack.launched:
            break
    assert db.autopack.launched, "no packing started"
    return ids


def _make_due(store: Store) -> autopack.Thresholds:
    """Writes until packing is due, with this test's writer kept from starting it."""
    db = store.db()
    _configure(store, gc_auto="256")
    limits = autopack.read_thresholds(db.repo.config)
    db.autopack.enabled = False
    for i in range(400):
        store.create(f"m {i}\n")
        if autopack.due(db.gitdir, limits):
            return limits
    raise AssertionError("packing never became due")


def _write_until_due(store: Store, limits: autopack.Thresholds, most: int = 2000) -> None:
    """Creates until packing is due by ``limits`` (a sample of 1/256 of the loose objects
    decides, so how many it takes varies)."""
    for i in range(most):
        store.create(f"m {i}\n")
        if autopack.due(store.db().gitdir, limits):
            return
    raise AssertionError("packing never became due")


def _assert_sound(store: Store, ids: list[str]) -> None:
    gitdir = store.db().gitdir
    fsck = run_git(gitdir, "fsck", "--strict", "--no-dangling", "--no-progress")
    assert fsck.strip() == ""
    scan = gitmem.open(store.db().gitdir if store.db().bare else store.path)
    scan.use_index = False
    present = {m.id for m in scan.list()}
    assert set(ids) <= present
    for entry in (gitdir / "objects" / "pack").iterdir():
        # Never a half-written pack in sight: each pack has its index and the reverse.
        name = entry.name
        if name.endswith(".pack"):
            assert (gitdir / "objects" / "pack" / (name[:-5] + ".idx")).exists()
        if name.endswith(".idx"):
            assert (gitdir / "objects" / "pack" / (name[:-4] + ".pack")).exists()


def _store_with_empty_sample(
    tmp_path: Path, dirs: tuple[str, ...] = (autopack.SAMPLE_DIR,)
) -> Store:
    """A new bare store with nothing in the fan-out folders ``dirs`` (git's sample,
    ``objects/17``, by default), for the tests that count what they put there. A store's
    first commit is loose and its id changes with the commit's time: it fell in
    ``objects/17`` in one store of 256 (in ``autopack.WIDE_SAMPLE`` in one of 16) and made
    those counts one more than the test meant. Another time (a fixed clock, a second later)
    gives another id."""
    for n in range(64):
        clock = gitmem.FixedClock("2026-01-01T00:00:00Z")
        clock.advance(seconds=n)
        store = gitmem.init(tmp_path / f"s{n}.git", bare=True, clock=clock)
        objects = store.db().gitdir / "objects"
        if not any((objects / name).exists() for name in dirs):
            return store
    raise AssertionError(f"64 first commits in {dirs}")


def test_thresholds_are_gits(tmp_path: Path) -> None:
    store = _store_with_empty_sample(tmp_path)
    db = store.db()
    # Nothing set: gitmem's count (2,048, growing with the packs up to 4,096), its narrower
    # delta window, one thread, and its pack limit (10: every pack costs each object a
    # write makes).
    assert autopack.read_thresholds(db.repo.config) == autopack.Thresholds(4096, 10, 2048, 4, 1)
    run_git(db.gitdir, "config", "gc.autoPackLimit", "50")  # git's own default, set
    assert autopack.read_thresholds(
        gitmem.open(db.gitdir).db().repo.config
    ) == autopack.Thresholds(4096, 50, 2048, 4, 1)
    run_git(db.gitdir, "config", "gc.auto", "3k")
    run_git(db.gitdir, "config", "gc.autoPackLimit", "0")
    run_git(db.gitdir, "config", "pack.window", "10")
    run_git(db.gitdir, "config", "pack.threads", "2")
    fresh = gitmem.open(db.gitdir).db()
    # Set: taken as git takes them, and git's own window and threads.
    assert autopack.read_thresholds(fresh.repo.config) == autopack.Thresholds(3072, 0)
    # git's estimate: due when objects/17 holds more than DIV_ROUND_UP(6700, 256) = 27.
    sample = db.gitdir / "objects" / "17"
    sample.mkdir(exist_ok=True)
    limits = autopack.Thresholds(6700, 50)
    for n in range(27):
        (sample / f"{n:038x}").write_bytes(b"")
    assert autopack.due(db.gitdir, limits) is None
    (sample / f"{99:038x}").write_bytes(b"")
    assert "loose objects" in (autopack.due(db.gitdir, limits) or "")
    assert autopack.due(db.gitdir, autopack.Thresholds(0, 50)) is None
    for entry in sample.iterdir():
        entry.unlink()


def test_loose_objects_outweighing_the_packs_make_packing_due(tmp_path: Path) -> None:
    store = _store_with_empty_sample(tmp_path)
    db = store.db()
    limits = autopack.Thresholds(6700, 50)  # far from git's count rule
    sample = db.gitdir / "objects" / "17"
    sample.mkdir(exist_ok=True)
    (sample / f"{1:038x}").write_bytes(b"x" * 600)
    assert autopack.due(db.gitdir, limits) is None  # one object is no sample
    (sample / f"{2:038x}").write_bytes(b"x" * 600)  # ~300 KiB of loose objects, no pack
    assert "KiB of loose objects" in (autopack.due(db.gitdir, limits) or "")
    fake = db.gitdir / "objects" / "pack" / "pack-test.pack"
    fake.parent.mkdir(exist_ok=True)
    fake.write_bytes(b"\0" * 700_000)  # packs twice the loose estimate: not due
    assert autopack.due(db.gitdir, limits) is None
    assert autopack.due(db.gitdir, autopack.Thresholds(0, 50)) is None  # gc.auto=0: off
    fake.unlink()
    for entry in sample.iterdir():
        entry.unlink()


def test_the_helper_counts_a_wider_sample_than_gits(tmp_path: Path) -> None:
    """git's estimate reads ``objects/17`` alone; the helper also counts the sixteen
    directories of :data:`autopack.WIDE_SAMPLE` and finds packing due on either count: loose
    objects that miss ``objects/17`` are due to the helper (and packed by it, every one),
    not to git's rule, and an empty ``objects/17`` beside them makes no difference."""
    # Nothing loose in the wide sample to start with: a first commit there was counted, and
    # packed by the first repack, which left 16 loose objects, no longer due (1 run, not 2).
    store = _store_with_empty_sample(tmp_path, autopack.WIDE_SAMPLE)
    db = store.db()
    repo, objects = db.repo, db.gitdir / "objects"
    limits = autopack.Thresholds(256, 50)  # due past 256: 16 in the wide sample, 1 in 17
    written: list[str] = []
    n = 0
    while autopack.loose_count(objects, autopack.WIDE_SAMPLE) <= 16:
        data = f"loose {n}\n".encode()
        n += 1
        oid = str(pygit2.hash(data))
        if oid[:2] != autopack.SAMPLE_DIR and oid[:2] in autopack.WIDE_SAMPLE:
            written.append(str(repo.create_blob(data)))
    assert autopack.loose_count(objects, [autopack.SAMPLE_DIR]) == 0
    assert autopack.due(db.gitdir, limits) is None  # git's own estimate: nothing loose
    reason = autopack.due(db.gitdir, limits, wide=True) or ""
    assert reason == f"about {17 * 16} loose objects (gc.auto 256)"
    # Unreachable blobs: git repack -d leaves them loose, the all-into-one round keeps them.
    assert autopack.run(db.gitdir, limits=limits) == 2
    assert autopack.loose_count(objects, autopack.WIDE_SAMPLE) == 0
    assert autopack.due(db.gitdir, limits, wide=True) is None
    for oid in written:
        assert run_git(db.gitdir, "cat-file", "-t", oid).strip() == "blob"


def test_the_default_count_grows_with_the_packs() -> None:
    grows = autopack.Thresholds(autopack.GROWN_AUTO, 50, 2048)
    assert grows.loose_limit(0) == 2048  # a new store: as before
    assert grows.loose_limit(3000 * autopack.BYTES_PER_LOOSE) == 3000
    assert grows.loose_limit(10**9) == 4096 < 6700  # below git's own default, with room
    assert autopack.Thresholds(3072, 50).loose_limit(10**9) == 3072  # gc.auto set: fixed
    # Beside a roll-up the helper looks at half the count, whatever the packs; the rest as is.
    assert grows.halved() == autopack.Thresholds(2048, 50, 1024)
    assert grows.halved().loose_limit(0) == 1024 and grows.halved().loose_limit(10**9) == 2048
    assert autopack.Thresholds(6700, 10, 0, 4, 1).halved() == autopack.Thresholds(3350, 10, 0, 4, 1)
    assert autopack.Thresholds(1, 50).halved().enabled  # on stays on


def test_a_big_store_holds_more_loose_objects_before_packing(tmp_path: Path) -> None:
    """The same loose objects are due in a small store and not in one with 20 MB of packs
    (unless ``gc.auto`` is set, which is taken as it stands)."""
    store = _store_with_empty_sample(tmp_path)
    db = store.db()
    sample = db.gitdir / "objects" / "17"
    sample.mkdir(exist_ok=True)
    for n in range(12):  # estimated 3,072 loose objects: past 2,048
        (sample / f"{n:038x}").write_bytes(b"x" * 100)
    grows = autopack.Thresholds(autopack.GROWN_AUTO, 50, 2048)
    assert "3072 loose objects (gc.auto 2048)" in (autopack.due(db.gitdir, grows) or "")
    big = db.gitdir / "objects" / "pack" / "pack-test.pack"
    big.parent.mkdir(exist_ok=True)
    with big.open("wb") as out:
        out.truncate(20 * 1024 * 1024)  # 20 MiB of packs: 4,096 loose objects allowed
    assert autopack.due(db.gitdir, grows) is None
    writer = autopack.AutoPacker(db.gitdir)
    assert not writer._due(grows)  # the write path's check agrees
    assert "loose objects (gc.auto 2048)" in (
        autopack.due(db.gitdir, autopack.Thresholds(2048, 50)) or ""
    )
    big.unlink()
    assert writer._due(grows)
    for entry in sample.iterdir():
        entry.unlink()


def test_the_loose_repack_uses_gitmems_window_and_threads_unless_git_sets_them(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in git's own trace of the helper's repack: ``--window=4`` and ``--threads=1``
    when git's config sets no ``pack.window`` or ``pack.threads``, nothing added when it
    does, so git's setting applies; and glibc's allocator settings in the repack's
    environment, unless the environment has its own."""
    import json

    gitdir = bare_store.db().gitdir
    monkeypatch.setenv("GIT_TRACE2_ENV_VARS", "GLIBC_TUNABLES")  # traced as a def_param

    def repack_seen(limits: autopack.Thresholds, n: int) -> tuple[list[str], str | None]:
        trace = tmp_path / f"trace-{n}.json"
        bare_store.db().autopack.enabled = False
        for i in range(400):
            bare_store.create(f"window {n} {i}\n")
            if autopack.due(gitdir, limits):
                break
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        assert autopack.run(gitdir, limits=limits) >= 1
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        events = [json.loads(line) for line in trace.read_text().splitlines()]
        for event in events:
            if event.get("event") == "start" and "repack" in event["argv"]:
                sid = event["sid"]
                tunables = [
                    e["value"]
                    for e in events
                    if e.get("sid") == sid
                    and e.get("event") == "def_param"
                    and e.get("param") == "GLIBC_TUNABLES"
                ]
                return list(event["argv"]), (tunables[0] if tunables else None)
        raise AssertionError("no repack in git's trace")

    # gc.auto 256: due once objects/17 holds 2; the window and threads as the writer read
    # git's config.
    argv, tunables = repack_seen(autopack.Thresholds(256, 50, 0, 4, 1), 1)
    assert "--window=4" in argv
    assert "--threads=1" in argv
    assert tunables == autopack.MALLOC_TUNABLES
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")  # the user's own
    argv, tunables = repack_seen(autopack.Thresholds(256, 50), 2)
    assert not any(a.startswith(("--window", "--threads")) for a in argv)
    assert tunables == "glibc.malloc.arena_max=2"


def test_writes_pack_by_size_before_gits_count_is_reached(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s.git", bare=True)
    _configure(store, gc_auto="100000")  # git's rule would wait for 100,000 loose objects
    ids = _create_until_launched(store, limit=3000)
    db = store.db()
    assert autopack.wait_idle(db.gitdir, db.autopack.last_launch)
    assert _packs(store), "the helper wrote no pack"
    assert len(ids) < 1500  # packed long before git's count, which no store this size meets
    _assert_sound(store, ids)


@pytest.mark.parametrize("bare", [True, False], ids=["bare", "worktree"])
def test_writes_keep_the_store_packed(tmp_path: Path, bare: bool) -> None:
    store = gitmem.init(tmp_path / ("s.git" if bare else "s"), bare=bare)
    _configure(store, gc_auto="256")  # due once objects/17 holds 2 loose objects
    ids = _create_until_launched(store)
    db = store.db()
    assert autopack.wait_idle(db.gitdir, db.autopack.last_launch)
    assert _packs(store), "the helper wrote no pack"
    assert autopack.due(db.gitdir, autopack.read_thresholds(db.repo.config)) is None
    assert (db.state_dir / autopack.LAST_NAME).read_text().startswith("ok")
    ids.append(store.create("after packing\n").id)
    _assert_sound(store, ids)
    if not bare:
        assert run_git(store.path, "status", "--porcelain") == ""


def test_gc_auto_zero_is_honoured(bare_store: Store) -> None:
    _configure(bare_store, gc_auto="0")
    ids = [bare_store.create(f"memory {i}\n").id for i in range(120)]
    assert bare_store.db().autopack.launched == 0
    assert _packs(bare_store) == []
    assert _loose(bare_store) >= 5 * 120  # blob, trees, commit per create: all still loose
    _assert_sound(bare_store, ids)


def test_pack_limit_packs_everything_into_one(bare_store: Store) -> None:
    """More packs than gc.autoPackLimit (a sync fetches one each time): all into one, as
    ``git gc --auto`` does; gc.autoPackLimit=0 turns that rule off."""
    gitdir = bare_store.db().gitdir
    _configure(bare_store, gc_auto="0")
    ids: list[str] = []
    largest: str | None = None
    for round_ in range(4):
        bulk = os.urandom(20_000).hex() if round_ == 1 else ""  # this round's pack: the largest
        ids += [bare_store.create(f"r{round_} m{i}\n{bulk}\n").id for i in range(3)]
        before = set(_packs(bare_store))
        run_git(gitdir, "repack", "-d", "-q")  # one new pack of this round's objects
        if bulk:
            (largest,) = set(_packs(bare_store)) - before
    assert len(_packs(bare_store)) == 4
    assert autopack.largest_pack(gitdir / "objects") == largest
    _configure(bare_store, gc_auto="6700", gc_autoPackLimit="0")
    ids.append(bare_store.create("packs are not counted\n").id)
    assert bare_store.db().autopack.launched == 0
    _configure(bare_store, gc_autoPackLimit="3")
    ids.append(bare_store.create("now they are\n").id)
    db = bare_store.db()
    assert db.autopack.launched == 1
    assert autopack.wait_idle(gitdir, db.autopack.last_launch)
    # The rest rolled into one beside the largest, which was not copied: never two copies of
    # the whole store on disk at once.
    assert len(_packs(bare_store)) == 2
    assert largest in _packs(bare_store)
    _assert_sound(bare_store, ids)
    # gc.autoPackLimit 1 asks for one pack: then the largest goes in too (two would still be
    # too many, and every helper would repack again for nothing).
    assert autopack.run(gitdir, limits=autopack.Thresholds(6700, 1)) == 1
    assert len(_packs(bare_store)) == 1
    _assert_sound(bare_store, ids)


def test_one_helper_at_a_time_and_a_failure_backs_off(bare_store: Store) -> None:
    import fcntl

    db = bare_store.db()
    _configure(bare_store, gc_auto="256")
    db.state_dir.mkdir(exist_ok=True)
    fd = os.open(db.state_dir / autopack.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a helper at work
        limits = autopack.read_thresholds(db.repo.config)
        _write_until_due(bare_store, limits, most=400)
        bare_store.create("due, but a helper is at work\n")
        assert db.autopack.launched == 0
        assert autopack.run(db.gitdir) == 0  # a second helper leaves at once
    finally:
        os.close(fd)
    # A helper that failed a moment ago: writers wait a minute before starting another.
    (db.state_dir / autopack.LAST_NAME).write_text("failed: git exploded\n")
    bare_store.create("one more\n")
    assert db.autopack.launched == 0
    old = time.time() - 2 * autopack.RETRY_AFTER_FAILURE
    os.utime(db.state_dir / autopack.LAST_NAME, (old, old))
    bare_store.create("and another\n")
    assert db.autopack.launched == 1
    assert autopack.wait_idle(db.gitdir, db.autopack.last_launch)
    assert _packs(bare_store)


@pytest.mark.slow
def test_writes_survive_a_repack_removing_empty_object_directories(bare_store: Store) -> None:
    """``git repack -d`` ends with a ``prune-packed`` that removes every fan-out directory
    it empties. libgit2 creates ``objects/xx/`` and then renames the object into it; a
    removal in between failed the write ("failed to rename lockfile ... No such file or
    directory", seen in CI). Writes now go through :func:`gitmem.git.db.write_object`,
    which writes again: here every write lands while git empties directories beside it.
    """
    import subprocess
    import threading

    db = bare_store.db()
    db.autopack.enabled = False  # the repacks below are the only packing
    gitdir = str(db.gitdir)
    stop = threading.Event()
    rounds = 0

    def repack_forever() -> None:
        nonlocal rounds
        while not stop.is_set():
            for args in (["repack", "-d", "-q"], ["prune-packed"]):
                subprocess.run(["git", "-C", gitdir, *args], capture_output=True, check=False)
            rounds += 1

    packer = threading.Thread(target=repack_forever)
    packer.start()
    ids: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while (rounds < 40 or len(ids) < 300) and time.monotonic() < deadline:
            ids.append(bare_store.create(f"memory {len(ids)}\n", title=f"m{len(ids)}").id)
    finally:
        stop.set()
        packer.join()
    assert rounds >= 10, f"only {rounds} repacks ran beside the writes"
    _assert_sound(bare_store, ids)


def test_gc_and_fsck_hold_the_packing_lock(bare_store: Store) -> None:
    """``gitmem gc`` and doctor's fsck take the helper's lock: no helper repacks beside
    them (a repack moving loose objects made fsck report them missing, seen in CI), and
    they wait for one already at work."""
    import fcntl

    db = bare_store.db()
    limits = _make_due(bare_store)
    assert autopack.due(db.gitdir, limits)
    with autopack.exclusive(db.gitdir):
        assert autopack.run(db.gitdir) == 0  # a helper started now leaves at once
        assert autopack.due(db.gitdir, limits)
    assert autopack.run(db.gitdir) >= 1  # and runs once the lock is free
    # A helper at work: gc waits for it, and says so if it never finishes.
    fd = os.open(db.state_dir / autopack.LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(TimeoutError), autopack.exclusive(db.gitdir, timeout=0.2):
            pass
    finally:
        os.close(fd)
    (result,) = bare_store.gc()
    assert result.loose_after == 0


def test_gc_reports_progress_per_repository(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storetools import assert_progress

    bare_store.create("something to pack\n")
    calls: list[tuple[int, int]] = []
    (result,) = bare_store.gc(progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 1), (1, 1)] and result.loose_after == 0
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


def test_writers_finding_packing_due_at_once_start_one_helper(bare_store: Store) -> None:
    """The lock is taken by the writer as it starts the helper, so a second writer looking
    a moment later (while the first helper is still starting up) starts none."""
    limits = _make_due(bare_store)
    gitdir = bare_store.db().gitdir
    writers = [autopack.AutoPacker(gitdir) for _ in range(4)]
    repo = bare_store.db().repo
    started = [w.after_write(repo) for w in writers]
    assert started == [True, False, False, False]
    assert autopack._busy(gitdir)  # the helper holds the lock from its start
    assert autopack.launch(gitdir, limits) is None
    assert autopack.wait_idle(gitdir, writers[0].last_launch, timeout=120)
    assert not autopack._busy(gitdir)
    assert _packs(bare_store)
    assert autopack.due(gitdir, limits) is None


def test_a_helper_given_the_thresholds_does_not_load_pygit2(bare_store: Store) -> None:
    """What the writer read travels on the command line: the helper starts without pygit2
    (most of its start-up), and the thresholds it was given are the ones it applies."""
    import subprocess
    import sys

    limits = _make_due(bare_store)
    gitdir = bare_store.db().gitdir
    script = (
        "import sys\n"
        "from gitmem.git import autopack\n"
        "code = autopack.main(sys.argv[1:])\n"
        "print(code, 'pygit2' in sys.modules)\n"
    )

    def helper(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-P", "-c", script, str(gitdir), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return done.stdout.strip()

    # Told packing is off (gc.auto 0), it packs nothing though git's config says otherwise.
    assert helper("--auto", "0", "--pack-limit", "50") == "0 False"
    assert autopack.due(gitdir, limits) is not None
    assert helper("--auto", str(limits.auto), "--pack-limit", str(limits.pack_limit)) == (
        "0 False"
    )
    assert autopack.due(gitdir, limits) is None
    assert _packs(bare_store)


def test_the_writer_hands_the_helper_everything_it_read() -> None:
    """What :func:`launch` puts on the command line comes back as the same thresholds."""
    for limits in (
        autopack.Thresholds(4096, 50, 2048, 4, 1),
        autopack.Thresholds(3072, 0),
        autopack.Thresholds(256, 7, 0, 4),
        autopack.Thresholds(256, 7, 0, 0, 3),
    ):
        argv = ["g", "--auto", str(limits.auto), "--pack-limit", str(limits.pack_limit)]
        if limits.floor:
            argv += ["--auto-floor", str(limits.floor)]
        if limits.window:
            argv += ["--window", str(limits.window)]
        if limits.threads:
            argv += ["--threads", str(limits.threads)]
        assert autopack._parse(argv) == (Path("g"), None, limits, 0.0)
    argv = ["g", "--lock-fd", "3", "--auto", "256", "--pack-limit", "7", "--linger-ms", "2500"]
    assert autopack._parse(argv) == (Path("g"), 3, autopack.Thresholds(256, 7), 2.5)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "no git directory"),
        (["g", "--lock-fd"], "has no value"),
        (["g", "--lock-fd", "x"], "whole number"),
        (["g", "--lock-fd", "1"], "not a descriptor"),
        (["g", "--auto", "5"], "go together"),
        (["g", "--pack-limit", "5", "--pack-limit", "6"], "repeated"),
        (["g", "--nice", "5"], "unknown"),
        (["g", "--auto-floor", "5"], "needs --auto"),
        (["g", "--window", "4"], "needs --auto"),
        (["g", "--threads", "1"], "needs --auto"),
        (["g", "--linger-ms", "-1"], "--linger-ms takes 0 to 30000"),
        (["g", "--linger-ms", "600000"], "--linger-ms takes 0 to 30000"),
    ],
)
def test_the_helper_refuses_a_bad_command_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert autopack.main(argv) == 2
    assert message in capsys.readouterr().err


# -- the helper a writer starts stays for the next repack --------------------------------


def _lingering_helper(store: Store) -> subprocess.Popen[bytes]:
    """The helper this test's writer started, once its first repack is done (the state
    says so and the lock is free) while the helper itself still lingers."""
    _configure(store, gc_auto="256")  # due once objects/17 holds 2 loose objects
    _create_until_launched(store)
    db = store.db()
    helper = db.autopack._helper
    assert helper is not None
    assert autopack.wait_idle(db.gitdir, db.autopack.last_launch)
    assert helper.poll() is None, "the helper left at once"
    return helper


def _repacks_recorded(store: Store) -> int:
    last = (store.db().state_dir / autopack.LAST_NAME).read_text()
    return int(last.split("repacks ")[1])


def test_the_helper_stays_for_the_next_repack_and_no_other_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After its repack the helper a writer started lets the lock go and watches the store
    (for :data:`autopack.LINGER` seconds): the next repack due is its own, the writer starts
    no second helper for it, and it leaves once nothing has fallen due for that long."""
    monkeypatch.setattr(autopack, "LINGER", 6.0)  # room for a slow machine's writes
    store = gitmem.init(tmp_path / "s.git", bare=True)
    helper = _lingering_helper(store)
    db = store.db()
    assert not autopack._busy(db.gitdir)
    first = _repacks_recorded(store)
    packs = len(_packs(store))
    ids: list[str] = []
    deadline = time.monotonic() + 30
    while _repacks_recorded(store) == first and time.monotonic() < deadline:
        if len(ids) < 2000:  # until packing is due again (a sample of 1/256 of them)
            ids.append(store.create(f"more {len(ids)}\n").id)
        else:
            time.sleep(0.05)
    assert _repacks_recorded(store) > first, "the lingering helper never repacked"
    assert len(_packs(store)) > packs
    assert db.autopack.launched == 1 and helper.poll() is None
    assert helper.wait(timeout=autopack.LINGER + 30) == 0
    _assert_sound(store, ids)


def test_a_lingering_helper_leaves_when_the_config_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gc.auto`` 0 set while a helper lingers: it leaves without packing again (a new
    helper would read the config; this one was handed the writer's thresholds)."""
    monkeypatch.setattr(autopack, "LINGER", 25.0)  # so only the config can end it sooner
    store = gitmem.init(tmp_path / "s.git", bare=True)
    helper = _lingering_helper(store)
    first = _repacks_recorded(store)
    _configure(store, gc_auto="0")
    assert helper.wait(timeout=15) == 0
    assert _repacks_recorded(store) == first


def test_a_lingering_helper_leaves_the_next_repack_to_one_holding_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another helper (or ``gitmem gc``) took the lock while one lingered: packing fell
    due, the lingering helper cannot take the lock back, and it leaves without packing."""
    monkeypatch.setattr(autopack, "LINGER", 25.0)  # so only the lock can end it sooner
    store = gitmem.init(tmp_path / "s.git", bare=True)
    helper = _lingering_helper(store)
    db = store.db()
    first = _repacks_recorded(store)
    db.autopack.enabled = False
    with autopack.exclusive(db.gitdir, timeout=5):
        _write_until_due(store, autopack.read_thresholds(db.repo.config))
        assert helper.wait(timeout=15) == 0
    assert _repacks_recorded(store) == first


# -- a big store's loose repack: only what is new since the last record -------------------


def _git_commands(trace: Path) -> list[list[str]]:
    import json

    return [
        list(e["argv"])
        for e in map(json.loads, trace.read_text().splitlines())
        if e.get("event") == "start"
    ]


def _loose_ids(gitdir: Path) -> set[str]:
    objects = gitdir / "objects"
    return {
        f"{d.name}{f.name}"
        for d in objects.iterdir()
        if len(d.name) == 2
        for f in d.iterdir()
        if len(f.name) == 38
    }


def _pack_ids(idx: Path) -> set[str]:
    import subprocess

    out = subprocess.run(
        ["git", "show-index"], input=idx.read_bytes(), capture_output=True, check=True
    ).stdout.decode()
    return {line.split()[1] for line in out.splitlines()}


def _packed_round(
    store: Store, limits: autopack.Thresholds, trace: Path, monkeypatch: pytest.MonkeyPatch
) -> list[list[str]]:
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    assert autopack.run(store.db().gitdir, limits=limits) >= 1
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    return _git_commands(trace)


def _tips_now(gitdir: Path) -> list[str]:
    return sorted(run_git(gitdir, "for-each-ref", "--format=%(objectname)").split())


def test_a_big_stores_loose_repack_packs_only_what_is_new(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past :data:`autopack.BOUNDED_FROM` of packs the helper records the refs' commits once
    it has packed, and the next loose repack packs what they reach beyond the record (git's
    ``pack-objects`` given both, no walk of the whole history): exactly the loose objects
    the writes since made, every one of them packed and its loose copy gone."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    gitdir = bare_store.db().gitdir
    tips_file = gitdir / "gitmem" / autopack.TIPS_NAME
    limits = _make_due(bare_store)
    # No record yet: git's own repack, and the record written.
    first = _packed_round(bare_store, limits, tmp_path / "t1.json", monkeypatch)
    assert any("repack" in argv for argv in first)
    assert tips_file.read_text().split() == _tips_now(gitdir)
    packs_before = set((gitdir / "objects" / "pack").glob("*.idx"))
    _make_due(bare_store)
    written = _loose_ids(gitdir)
    second = _packed_round(bare_store, limits, tmp_path / "t2.json", monkeypatch)
    assert not any("repack" in argv for argv in second)
    assert any("pack-objects" in argv and "--revs" in argv for argv in second)
    assert any("prune-packed" in argv for argv in second)
    (new_pack,) = set((gitdir / "objects" / "pack").glob("*.idx")) - packs_before
    assert _pack_ids(new_pack) == written  # what the writes since made, and nothing else
    assert _loose_ids(gitdir) == set()
    assert tips_file.read_text().split() == _tips_now(gitdir)
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


@pytest.mark.parametrize(
    "record",
    ["0123456789abcdef0123456789abcdef01234567\n", "--all\n../../etc/passwd\n", "", "\xff\xfe"],
    ids=["a-commit-gone", "not-ids", "empty", "not-text"],
)
def test_a_record_that_does_not_hold_means_the_whole_walk(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str
) -> None:
    """A recorded commit that is gone (a purge and a prune since, say) makes git refuse the
    bounded pack: the helper repacks the usual way. A record that is not a list of ids is
    never handed to git. Either way everything is packed and the record is written anew."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    gitdir = bare_store.db().gitdir
    tips_file = gitdir / "gitmem" / autopack.TIPS_NAME
    limits = _make_due(bare_store)
    tips_file.parent.mkdir(exist_ok=True)
    tips_file.write_bytes(record.encode("latin-1"))
    commands = _packed_round(bare_store, limits, tmp_path / "t.json", monkeypatch)
    assert any("repack" in argv for argv in commands)
    bounded = [argv for argv in commands if "pack-objects" in argv and "--revs" in argv]
    assert len(bounded) == (1 if record.startswith("0123") else 0)
    assert _loose_ids(gitdir) == set()
    assert tips_file.read_text().split() == _tips_now(gitdir)
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def test_the_bounded_repack_follows_a_branch_moved_back(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch moved to an older commit and written on from there (a reset, a purge's
    rewrite): the new commits' objects are packed from the record all the same, and the
    commits left behind stay in their pack (nothing packed is ever deleted)."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    gitdir = bare_store.db().gitdir
    limits = _make_due(bare_store)
    _packed_round(bare_store, limits, tmp_path / "t1.json", monkeypatch)
    left_behind = run_git(gitdir, "rev-parse", "main").strip()
    first = run_git(gitdir, "rev-list", "--max-parents=0", "main").strip()
    run_git(gitdir, "update-ref", "refs/heads/main", first)  # back to the store's first commit
    fresh = gitmem.open(gitdir)
    fresh.db().autopack.enabled = False
    _make_due(fresh)
    _packed_round(fresh, limits, tmp_path / "t2.json", monkeypatch)
    assert _loose_ids(gitdir) == set()
    assert run_git(gitdir, "cat-file", "-t", left_behind).strip() == "commit"
    _assert_sound(fresh, [m.id for m in fresh.list()])


def _loose_in_sample(gitdir: Path, count: int) -> set[str]:
    """``count`` unreachable loose blobs in ``objects/17``, git's sample folder (content
    tried until its id starts there): loose objects no commit reaches."""
    import hashlib

    repo = gitmem.open(gitdir).db().repo
    made: set[str] = set()
    n = 0
    while len(made) < count:
        data = f"unreachable {n}\n".encode()
        n += 1
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().startswith("17"):
            made.add(str(repo.create_blob(data)))
    return made


def test_a_big_store_still_due_after_its_loose_repack_packs_new_writes_loose_again(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Still due right after a loose repack: when the refs moved meanwhile (writers kept
    writing), what is left is new writes, and the next round is another loose repack, not
    a roll-up of every pack (at 100k on a fast disk, rolling up again and again let loose
    objects pile up to 50,000). When they did not move, what is left is unreachable, and the
    next round rolls everything up as before, unreachable objects kept in the pack."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    gitdir = bare_store.db().gitdir
    limits = _make_due(bare_store)
    _packed_round(bare_store, limits, tmp_path / "t1.json", monkeypatch)  # the record
    _make_due(bare_store)
    real = autopack._pack_new
    rounds: list[int] = []

    def writers_meanwhile(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        rounds.append(1)
        if len(rounds) == 1:  # a writer lands commits while the first round packs
            _make_due(bare_store)

    monkeypatch.setattr(autopack, "_pack_new", writers_meanwhile)
    commands = _packed_round(bare_store, limits, tmp_path / "t2.json", monkeypatch)
    assert len(rounds) == 2
    assert not any("repack" in argv for argv in commands)
    assert _loose_ids(gitdir) == set()
    # Now loose objects nothing reaches, and refs that stay put: rolled up, kept.
    monkeypatch.setattr(autopack, "_pack_new", real)
    _make_due(bare_store)
    unreachable = _loose_in_sample(gitdir, 3)
    commands = _packed_round(bare_store, limits, tmp_path / "t3.json", monkeypatch)
    assert any("repack" in argv and "-a" in argv for argv in commands)
    assert _loose_ids(gitdir) == set()
    for oid in unreachable:
        assert run_git(gitdir, "cat-file", "-t", oid).strip() == "blob"
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


# -- a big store's roll-up takes the small packs only -----------------------------------------


@pytest.mark.parametrize(
    ("sizes", "rolled"),
    [
        ([], []),
        ([5, 9], []),  # the largest never goes: one pack is left to choose
        ([5, 5, 5], [0, 1]),
        ([1, 2, 10, 50, 100], [0, 1]),  # 10 is more than twice 1 + 2: it stays
        ([1, 2, 5, 9, 100], [0, 1, 2, 3]),  # 5 < 2 x 3, 9 < 2 x 8: taken; 100 is the largest
        ([3, 3, 3, 3, 3, 40], [0, 1, 2, 3, 4]),
        ([1, 1, 3, 30, 31], [0, 1, 2]),  # 3 < 2 x 2; 30 > 2 x 5
        ([1, 1, 4, 30, 31], [0, 1]),  # 4 is not less than 2 x 2
    ],
)
def test_the_roll_up_takes_the_smallest_packs_and_never_the_largest(
    sizes: list[int], rolled: list[int]
) -> None:
    packs = [(size, f"pack-{i:040x}.pack") for i, size in enumerate(sizes)]
    assert autopack.roll_selection(packs) == [packs[i][1] for i in rolled]


def test_a_pack_a_killed_roll_up_left_without_its_index_is_deleted_next_time(
    tmp_path: Path,
) -> None:
    """A kill between a rolled pack's two deletions (``.idx`` first) leaves a ``.pack`` no
    reader lists and ``git gc`` keeps; the helper names what it deletes beforehand, and the
    next helper deletes such a pack once it is a minute old. A named pack that still has
    its index, a young one (git renames a new pack a moment before its index) and a name
    git does not make are left alone."""
    store = gitmem.init(tmp_path / "s.git", bare=True)
    gitdir = store.db().gitdir
    pack_dir = gitdir / "objects" / "pack"
    made: list[str] = []
    for round_ in range(3):
        store.create(f"round {round_}\n")
        before = set(_packs(store))
        run_git(gitdir, "repack", "-d", "-q")
        (new,) = set(_packs(store)) - before
        made.append(new)
    objects = _all_objects(gitdir)
    orphan, young, live = made
    old = time.time() - 2 * autopack.ORPHAN_AGE
    for name in (orphan, young):  # its objects in another pack too, as after a roll-up
        ids = "\n".join(_pack_ids(pack_dir / (name[:-5] + ".idx")))
        run_git(gitdir, "pack-objects", "-q", str(pack_dir / "pack"), input=ids)
        (pack_dir / (name[:-5] + ".idx")).unlink()
    os.utime(pack_dir / orphan, (old, old))
    state = gitdir / "gitmem"
    state.mkdir(exist_ok=True)
    outside = tmp_path / "outside.pack"
    outside.write_text("not git's\n")
    named = [orphan, young, live, "../../../outside.pack"]
    (state / autopack.DELETING_NAME).write_text("".join(f"{name}\n" for name in named))
    autopack.run(gitdir, limits=autopack.Thresholds(0, 0))  # nothing due: no repack
    assert not (pack_dir / orphan).exists()
    assert (pack_dir / young).exists() and (pack_dir / live).exists()
    assert (pack_dir / (live[:-5] + ".idx")).exists() and outside.exists()
    assert (state / autopack.DELETING_NAME).read_text() == f"{young}\n"
    assert _all_objects(gitdir) == objects
    autopack._delete_packs(pack_dir, [], "0" * 40, state)  # a roll-up meanwhile: still named
    assert (state / autopack.DELETING_NAME).read_text() == f"{young}\n"
    os.utime(pack_dir / young, (old, old))
    autopack.run(gitdir, limits=autopack.Thresholds(0, 0))
    assert not (pack_dir / young).exists()
    assert not (state / autopack.DELETING_NAME).exists()
    assert _all_objects(gitdir) == objects


@pytest.mark.parametrize(
    ("sizes", "cap", "rolled"),
    [
        ([1, 2, 5, 9, 100], 8, [0, 1, 2]),  # 1 + 2 + 5 fits; with 9 it would not
        ([1, 2, 5, 9, 100], 17, [0, 1, 2, 3]),  # all that the factor takes fit
        ([6, 7, 8, 100], 10, [0, 1]),  # the first two go whatever the cap
        ([6, 7, 8, 100], None, [0, 1, 2]),
    ],
)
def test_a_roll_up_takes_no_more_than_its_cap_past_the_first_two(
    sizes: list[int], cap: int | None, rolled: list[int]
) -> None:
    packs = [(size, f"pack-{i:040x}.pack") for i, size in enumerate(sizes)]
    assert autopack.roll_selection(packs, cap) == [packs[i][1] for i in rolled]


def test_the_roll_up_cap_is_a_third_of_the_packs() -> None:
    """However small the store: a roll-up's copy lives beside the packs it rolls, so a
    floor under the cap let a young store's roll-up add two thirds of it at once."""
    mib = 1 << 20

    def packs(*sizes: int) -> list[tuple[int, str]]:
        return [(size * mib, f"pack-{i:040x}.pack") for i, size in enumerate(sizes)]

    assert autopack.roll_cap(packs(1, 2, 30)) == 11 * mib
    assert autopack.roll_cap(packs(10, 20, 30, 60)) == 40 * mib
    assert autopack.roll_cap([]) == 0
    # A store of 24 MB of packs (~20k memories): the two smallest and the next while they
    # stay within 8 MB; the 6 MB pack would make 10.
    young = packs(1, 1, 2, 6, 14)
    assert autopack.roll_selection(young, autopack.roll_cap(young)) == [
        name for _, name in young[:3]
    ]


def test_a_pack_without_its_index_or_kept_cruft_or_promised_is_never_rolled(tmp_path: Path) -> None:
    pack_dir = tmp_path / "objects" / "pack"
    pack_dir.mkdir(parents=True)
    a, d = "pack-" + "a" * 40, "pack-" + "d" * 40
    for stem, size, extras in [
        (a, 10, [".idx"]),
        ("pack-" + "b" * 40, 20, [".idx", ".keep"]),  # kept by its owner
        ("pack-" + "c" * 40, 5, []),  # still being written (git renames its .idx in last)
        (d, 30, [".idx", ".rev"]),
        ("pack-" + "e" * 40, 3, [".idx", ".mtimes"]),  # a cruft pack (git gc --cruft)
        ("pack-" + "f" * 40, 4, [".idx", ".promisor"]),  # a partial clone's
        ("pack-x\n^pack-" + "d" * 40, 2, [".idx"]),  # no name git makes: one line each
    ]:
        (pack_dir / f"{stem}.pack").write_bytes(b"x" * size)
        for extra in extras:
            (pack_dir / f"{stem}{extra}").write_bytes(b"")
    objects = tmp_path / "objects"
    assert autopack.rollable_packs(objects) == [(10, f"{a}.pack"), (30, f"{d}.pack")]
    assert autopack.pack_count(objects) == 5  # as git counts them for gc.autoPackLimit


def _ids(*letters: str) -> tuple[str, ...]:
    return tuple(letter * 40 for letter in letters)


SPANS = {
    "pack-" + "1" * 40 + ".pack": (_ids("a"), _ids("b")),
    "pack-" + "2" * 40 + ".pack": (_ids("b"), _ids("c", "d")),  # two refs at its end
    "pack-" + "3" * 40 + ".pack": (_ids("c", "d"), _ids("e")),
}


@pytest.mark.parametrize(
    ("rolled", "spans", "run", "span"),
    [
        ([1, 2, 3], {}, [1, 2, 3], ("a", "e")),
        ([3, 1, 2], {}, [1, 2, 3], ("a", "e")),  # oldest first, whatever the order given
        ([2, 3], {}, [2, 3], ("b", "e")),
        ([1, 3], {}, None, None),  # a gap: the span between is in no pack rolled
        ([1, 5, 3], {}, None, None),  # and a pack the helper did not make of a span
        ([1, 2, 5], {}, [1, 2], ("a", "cd")),  # the run without that pack
        ([1, 2, 3, 4], {4: (_ids("e"), _ids("f"))}, [1, 2, 3, 4], ("a", "f")),
        ([1, 2, 3, 4], {4: (_ids("x"), _ids("a"))}, [4, 1, 2, 3], ("x", "e")),  # one before
        ([1, 2, 3, 4], {4: (_ids("b"), _ids("f"))}, [1, 2, 3], ("a", "e")),  # a fork
        ([1, 2, 4], {4: (_ids("c", "d"), _ids("a"))}, None, None),  # around to the start
        ([1, 4], {4: (_ids("b"), _ids("b"))}, None, None),  # an empty span
    ],
)
def test_packs_roll_up_by_their_spans_where_they_follow_one_another(
    rolled: list[int],
    spans: dict[int, autopack.Span],
    run: list[int] | None,
    span: tuple[str, str] | None,
) -> None:
    def pack(k: int) -> str:
        return "pack-" + str(k) * 40 + ".pack"

    known = dict(SPANS) | {pack(k): span for k, span in spans.items()}
    found = autopack.span_run([pack(k) for k in rolled], known)
    if run is None or span is None:
        assert found is None
    else:
        assert found == ([pack(k) for k in run], (_ids(*span[0]), _ids(*span[1])))


def test_a_spans_record_keeps_only_what_it_can_hand_git(tmp_path: Path) -> None:
    state, a, b = tmp_path, "pack-" + "1" * 40 + ".pack", "pack-" + "2" * 40 + ".pack"
    good = f"{a} {'a' * 40} {'b' * 40},{'c' * 40}"
    (state / autopack.SPANS_NAME).write_text(
        "\n".join(
            [
                good,
                f"{b} {'a' * 40}",  # no end
                f"{b} --all {'b' * 40}",  # an option for git, not an id
                f"pack-x.pack {'a' * 40} {'b' * 40}",  # no name git makes
                f"{b} {'a' * 40} {'b' * 40} ^{a}",  # more than a span
                f"{b}  {'b' * 40}",  # an empty start
            ]
        )
    )
    assert autopack._read_spans(state) == {a: (_ids("a"), _ids("b", "c"))}
    (state / autopack.SPANS_NAME).write_bytes(b"\xff\xfe" + good.encode())
    assert autopack._read_spans(state) == {}
    (state / autopack.SPANS_NAME).unlink()
    assert autopack._read_spans(state) == {}


def test_a_roll_up_deletes_nothing_an_index_it_cannot_read_may_hold(tmp_path: Path) -> None:
    """The check before the rolled packs go: every id their indexes list is in the new
    pack's index; an index that is not git's version 2 (or shorter than it says) is never
    taken to hold anything."""
    repo = tmp_path / "r.git"
    run_git(tmp_path, "init", "-q", "--bare", str(repo))
    pack_dir = repo / "objects" / "pack"

    def pack(*texts: str) -> str:
        ids = [
            run_git(repo, "hash-object", "-w", "--stdin", input=text).strip() for text in texts
        ]
        return run_git(repo, "pack-objects", "-q", str(pack_dir / "pack"), input="\n".join(ids))

    one, two, both = pack("x\n"), pack("y\n"), pack("x\n", "y\n", "z\n")

    def name(made: str) -> str:
        return f"pack-{made.strip()}.pack"

    assert autopack._covers(pack_dir, both.strip(), [name(one), name(two)])
    assert not autopack._covers(pack_dir, one.strip(), [name(two)])
    idx = pack_dir / f"pack-{two.strip()}.idx"
    idx.write_bytes(idx.read_bytes()[:-60])  # cut short
    assert not autopack._covers(pack_dir, both.strip(), [name(one), name(two)])
    idx.write_bytes(b"\x00" * 2000)  # not an index at all
    assert not autopack._covers(pack_dir, both.strip(), [name(two)])
    assert not autopack._covers(pack_dir, both.strip(), ["pack-" + "0" * 64 + ".pack"])


def _all_objects(gitdir: Path) -> set[str]:
    listed = run_git(gitdir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(listed.split())


def _packs_for_a_roll_up(store: Store) -> tuple[str, str, str]:
    """A store of five packs and a kept one: the largest (a round of big memories), three
    small ones, one holding only a blob nothing reaches; then a few writes left loose.
    Returns the largest pack's name, the kept pack's name and the unreachable blob."""
    gitdir = store.db().gitdir
    pack_dir = gitdir / "objects" / "pack"
    _configure(store, gc_auto="0")
    largest = kept = ""
    for round_ in range(5):
        bulk = os.urandom(30_000).hex() if round_ == 1 else ""
        for i in range(3):
            store.create(f"r{round_} m{i}\n{bulk}\n")
        before = set(_packs(store))
        run_git(gitdir, "repack", "-d", "-q")
        (made,) = set(_packs(store)) - before
        if round_ == 0:
            kept = made
            (pack_dir / (made[:-5] + ".keep")).write_text("kept by hand\n")
        if bulk:
            largest = made
    blob = str(store.db().repo.create_blob(b"reached by nothing\n"))
    run_git(gitdir, "pack-objects", "-q", str(pack_dir / "pack"), input=f"{blob}\n")
    run_git(gitdir, "prune-packed")
    for i in range(3):
        store.create(f"left loose {i}\n")
    return largest, kept, blob


def test_a_big_store_rolls_up_only_its_small_packs(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past :data:`autopack.BOUNDED_FROM`, too many packs roll up the small ones only, read
    by ``git pack-objects --stdin-packs`` (no walk of the whole history, no ``git repack
    -a``): the largest and a kept pack stay as they are, every object is still there (the
    blob nothing reaches too), the loose ones stay loose for the next loose repack, and
    the helper's record of what is packed is left alone (loose objects remain)."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    monkeypatch.setattr(autopack, "ROLL_CAP_SHARE", 1)  # all small packs, whatever their bytes
    gitdir = bare_store.db().gitdir
    largest, kept, blob = _packs_for_a_roll_up(bare_store)
    tips_file = gitdir / "gitmem" / autopack.TIPS_NAME
    tips_file.parent.mkdir(exist_ok=True)
    record = "".join(f"{tip}\n" for tip in _tips_now(gitdir))
    tips_file.write_text(record)  # as a loose repack would have left it
    loose, objects = _loose_ids(gitdir), _all_objects(gitdir)
    assert len(_packs(bare_store)) == 6 and len(loose) > 0
    limits = autopack.Thresholds(6700, 3, window=4, threads=1)
    assert autopack.due(gitdir, limits) == f"5 {autopack.PACKS_REASON} 3)"
    commands = _packed_round(bare_store, limits, tmp_path / "t.json", monkeypatch)
    assert not any("repack" in argv for argv in commands)
    (roll,) = [argv for argv in commands if "--stdin-packs" in argv]
    assert "--revs" not in roll
    assert "--window=4" in roll and "--threads=1" in roll  # the loose repack's settings
    packs = _packs(bare_store)
    assert len(packs) == 3 and largest in packs and kept in packs
    assert _all_objects(gitdir) == objects
    assert run_git(gitdir, "cat-file", "-t", blob).strip() == "blob"
    assert _loose_ids(gitdir) == loose
    assert tips_file.read_text() == record
    assert not (gitdir / "gitmem" / autopack.DELETING_NAME).exists()  # deleted, all of them
    assert autopack.due(gitdir, limits) is None
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def _span_packs(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A big store (the threshold lowered) of a large pack and three the helper's loose
    repacks made, one span of history after another. Returns those three pack names."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    # No cap on a roll-up's bytes: a third of a test's few-KB packs may stop short of the
    # three (the cap has tests of its own; these are about spans).
    monkeypatch.setattr(autopack, "ROLL_CAP_SHARE", 1)
    store.db().autopack.enabled = False  # no helper of the writer's in the way
    for i in range(10):  # the largest pack by far (never rolled up)
        store.create(f"big {i}\n{os.urandom(50_000).hex()}\n")
    made: list[str] = []
    for round_ in range(4):
        for i in range(150):  # rounds of much the same size: roll_selection takes all three
            store.create(f"round {round_} {i}\n")
        limits = _make_due(store)
        before = set(_packs(store))
        no_roll_up = autopack.Thresholds(limits.auto, 0, limits.floor)
        _packed_round(store, no_roll_up, tmp_path / f"s{round_}.json", monkeypatch)
        made += sorted(set(_packs(store)) - before)
    sizes = sorted(_pack_sizes(store))
    assert len(made) == 4 and sizes[-1] > sum(sizes[:-1]) and sizes[2] < 2 * sum(sizes[:2])
    return made[1:]  # the first round is git's own repack, before any record


def _pack_sizes(store: Store) -> list[int]:
    return [p.stat().st_size for p in (store.db().gitdir / "objects" / "pack").glob("*.pack")]


def test_packs_the_helper_made_one_span_after_another_roll_up_by_their_span(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loose repacks of a big store record the span of history each pack holds; too
    many packs then roll up by the spans of those taken (``git pack-objects --revs
    --sparse``, neither ``--stdin-packs`` nor ``git repack``): every object is still
    there, the rolled packs are gone, the new pack is recorded with the whole span, loose
    objects and the record of what is packed are left as they were."""
    gitdir = bare_store.db().gitdir
    made = _span_packs(bare_store, tmp_path, monkeypatch)
    spans = autopack._read_spans(gitdir / "gitmem")
    assert set(spans) == set(made)
    run = autopack.span_run(made, spans)
    assert run is not None and run[0] == made
    for i in range(3):
        bare_store.create(f"left loose {i}\n")
    tips_file = gitdir / "gitmem" / autopack.TIPS_NAME
    record, loose, objects = tips_file.read_text(), _loose_ids(gitdir), _all_objects(gitdir)
    limits = autopack.Thresholds(1 << 30, 3, window=4, threads=1)
    assert autopack.due(gitdir, limits) == f"4 {autopack.PACKS_REASON} 3)"
    commands = _packed_round(bare_store, limits, tmp_path / "t.json", monkeypatch)
    assert not any("repack" in argv or "--stdin-packs" in argv for argv in commands)
    (roll,) = [argv for argv in commands if "--sparse" in argv]
    assert "--unpacked" not in roll and "--window=4" in roll and "--threads=1" in roll
    packs = _packs(bare_store)
    assert len(packs) == 2 and not set(made) & set(packs)
    assert _all_objects(gitdir) == objects
    assert _loose_ids(gitdir) == loose and tips_file.read_text() == record
    (new,) = autopack._read_spans(gitdir / "gitmem").items()
    assert new[0] in packs
    assert new[1] == run[1]
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def test_a_capped_roll_up_leaves_the_packs_past_its_cap(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cap below the third smallest pack's bytes, a roll-up takes the two smallest
    only (the first two go whatever the cap): the other packs stay as they are, and every
    object is still there."""
    gitdir = bare_store.db().gitdir
    made = _span_packs(bare_store, tmp_path, monkeypatch)
    monkeypatch.setattr(autopack, "ROLL_CAP_SHARE", 1 << 30)  # a cap of a few bytes
    by_size = [name for _, name in autopack.rollable_packs(gitdir / "objects")]
    assert by_size[:3] == sorted(made, key=by_size.index)  # the three small ones first
    objects, before = _all_objects(gitdir), set(_packs(bare_store))
    _packed_round(bare_store, autopack.Thresholds(1 << 30, 3), tmp_path / "t.json", monkeypatch)
    packs = set(_packs(bare_store))
    assert len(packs - before) == 1  # the new pack
    assert before - packs == set(by_size[:2])
    assert _all_objects(gitdir) == objects
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def test_loose_objects_are_packed_beside_a_roll_up_under_way(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A roll-up runs in a thread of the helper: writes landing while it copies make loose
    objects due, and the helper packs them then, not after it (the first roll-up here is
    held back, the writes going on, until a loose repack's pack is in the record). Each
    keeps the other's lines in the record of spans (every pack but the largest has one,
    one span after another from the rolled packs' start), and every object is still
    there."""
    gitdir = bare_store.db().gitdir
    state = gitdir / "gitmem"
    made = _span_packs(bare_store, tmp_path, monkeypatch)
    limits = autopack.Thresholds(256, 3, window=4, threads=1)
    assert autopack.due(gitdir, limits) == f"4 {autopack.PACKS_REASON} 3)"
    before = set(autopack._read_spans(state))
    run = autopack.span_run(made, autopack._read_spans(state))
    assert run is not None
    whole = run[1]
    objects = _all_objects(gitdir)
    order: list[str] = []
    real = autopack._pack_objects

    def held_back(*args: object, **kwargs: object) -> str | None:
        if order:  # a later roll-up (of the loose repacks' packs): as it comes
            return real(*args, **kwargs)  # type: ignore[arg-type]
        for i in range(5000):  # writes until the helper packs them beside this roll-up
            if set(autopack._read_spans(state)) - before:
                break
            bare_store.create(f"beside {i}\n")
        else:
            raise AssertionError("no loose repack beside the roll-up")
        order.append("loose packed")
        made_now = real(*args, **kwargs)  # type: ignore[arg-type]
        order.append("rolled")
        return made_now

    monkeypatch.setattr(autopack, "_pack_objects", held_back)
    assert autopack.run(gitdir, limits=limits) >= 2
    assert order == ["loose packed", "rolled"]
    spans = autopack._read_spans(state)
    packs = set(_packs(bare_store))
    assert not set(made) & packs and set(spans) <= packs
    assert len(spans) == len(packs) - 1  # all but the largest: none lost
    # One span after another from the rolled packs' start: the roll-up's, then the loose
    # repacks' (or, where a later roll-up took some, its span of theirs).
    following = {span[0]: span[1] for span in spans.values()}
    at = whole[0]
    while at in following:
        at = following.pop(at)
    assert following == {}
    assert _all_objects(gitdir) >= objects
    assert autopack.due(gitdir, limits, wide=True) is None
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def test_packs_picked_with_one_that_holds_no_span_roll_up_by_name(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two of the three packs picked make a run of spans, the first has none (made before
    the record, say): all three roll up by name, in one roll-up, as before spans. (Rolling
    the run alone left the pack count up and roll-ups came 2-4x as often.)"""
    gitdir = bare_store.db().gitdir
    first, second, third = _span_packs(bare_store, tmp_path, monkeypatch)
    spans = autopack._read_spans(gitdir / "gitmem")
    del spans[first]
    autopack._write_spans(gitdir / "gitmem", spans, gitdir / "objects" / "pack")
    objects = _all_objects(gitdir)
    commands = _packed_round(
        bare_store, autopack.Thresholds(1 << 30, 3), tmp_path / "t.json", monkeypatch
    )
    assert not any("--sparse" in argv and "--unpacked" not in argv for argv in commands)
    assert any("--stdin-packs" in argv for argv in commands)
    packs = _packs(bare_store)
    assert len(packs) == 2 and not {first, second, third} & set(packs)
    assert _all_objects(gitdir) == objects
    assert autopack._read_spans(gitdir / "gitmem") == {}
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def test_a_span_reaching_back_further_than_its_packs_copies_no_other_packs_objects(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spans record whose first span starts at the store's first commit (written by hand
    here): the roll-up walks the whole history, but every other pack is named with
    ``--keep-pack``, so the new pack holds exactly the objects of the three it replaces,
    not a second copy of the largest."""
    gitdir = bare_store.db().gitdir
    first, second, third = _span_packs(bare_store, tmp_path, monkeypatch)
    spans = autopack._read_spans(gitdir / "gitmem")
    root = run_git(gitdir, "rev-list", "--max-parents=0", "HEAD").split()
    spans[first] = (tuple(root), spans[first][1])
    autopack._write_spans(gitdir / "gitmem", spans, gitdir / "objects" / "pack")
    pack_dir = gitdir / "objects" / "pack"
    held = set().union(*(_pack_ids(pack_dir / (p[:-5] + ".idx")) for p in (first, second, third)))
    objects = _all_objects(gitdir)
    commands = _packed_round(
        bare_store, autopack.Thresholds(1 << 30, 3), tmp_path / "t.json", monkeypatch
    )
    (roll,) = [argv for argv in commands if "--sparse" in argv and "--unpacked" not in argv]
    assert sum(arg.startswith("--keep-pack=") for arg in roll) == 1  # the largest
    packs = _packs(bare_store)
    assert len(packs) == 2 and not {first, second, third} & set(packs)
    (made,) = [p for p in packs if p in autopack._read_spans(gitdir / "gitmem")]
    assert _pack_ids(pack_dir / (made[:-5] + ".idx")) == held
    assert _all_objects(gitdir) == objects
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


@pytest.mark.parametrize("record", ["narrower than its packs", "from a commit that is gone"])
def test_a_span_that_does_not_hold_its_packs_rolls_them_up_by_name(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str
) -> None:
    """A spans record that does not hold (written by hand here): either its pack leaves out
    objects of the packs it stands for, which then stay, or git refuses it. The helper then
    rolls the packs up with ``--stdin-packs``, nothing is lost, and those packs are never
    again taken by their spans."""
    gitdir = bare_store.db().gitdir
    first, second, third = _span_packs(bare_store, tmp_path, monkeypatch)
    spans = autopack._read_spans(gitdir / "gitmem")
    end, fake = spans[first][1], ("f" * 40,)
    if record == "narrower than its packs":  # still one after another, starting too late
        spans[first], spans[second] = (end, fake), (fake, spans[second][1])
    else:
        spans[first] = (("0" * 40,), end)
    lines = "".join(f"{n} {','.join(a)} {','.join(b)}\n" for n, (a, b) in spans.items())
    (gitdir / "gitmem" / autopack.SPANS_NAME).write_text(lines)
    objects = _all_objects(gitdir)
    commands = _packed_round(
        bare_store, autopack.Thresholds(1 << 30, 3), tmp_path / "t.json", monkeypatch
    )
    assert any("--sparse" in argv and "--unpacked" not in argv for argv in commands)
    assert any("--stdin-packs" in argv for argv in commands)
    assert _all_objects(gitdir) >= objects
    assert not {first, second, third} & set(autopack._read_spans(gitdir / "gitmem"))
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


def test_a_roll_up_git_refuses_rolls_up_the_usual_way(
    bare_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git refusing ``--stdin-packs`` (one older than 2.32 does not know it; an option no
    git knows stands in for that here): the helper rolls all but the largest pack up with
    ``git repack -a``, as in a small store, and nothing is lost."""
    monkeypatch.setattr(autopack, "BOUNDED_FROM", 0)
    monkeypatch.setattr(autopack, "ROLL_ARGS", (*autopack.ROLL_ARGS, "--no-such-option"))
    gitdir = bare_store.db().gitdir
    largest, kept, blob = _packs_for_a_roll_up(bare_store)
    objects = _all_objects(gitdir)
    commands = _packed_round(
        bare_store, autopack.Thresholds(6700, 3), tmp_path / "t.json", monkeypatch
    )
    assert any("--stdin-packs" in argv for argv in commands)
    assert any("repack" in argv and f"--keep-pack={largest}" in argv for argv in commands)
    packs = _packs(bare_store)
    assert len(packs) == 3 and largest in packs and kept in packs
    assert _all_objects(gitdir) >= objects
    assert run_git(gitdir, "cat-file", "-t", blob).strip() == "blob"
    assert _loose_ids(gitdir) == set()  # git repack -a packs the loose objects too
    _assert_sound(bare_store, [m.id for m in bare_store.list()])


# -- a long-lived handle and the packs a repack deleted -------------------------------------


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
