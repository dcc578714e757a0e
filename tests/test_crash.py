"""Crash injection: writers killed with SIGKILL at random moments, and what must hold after.

A child process works on the store (creates, updates, appends, deletes,
supersedes, transactions, index catch-ups and rebuilds, layered-document prunes,
syncs with a remote) and
writes a journal line *before* each operation (``B``) and after it returned
(``A``, the acknowledgement). The parent kills it at a random moment, then checks:

- the store opens without any repair;
- ``git fsck --strict`` is clean and no file in git is an unreadable memory;
- every acknowledged write is there with its content (the one in flight may have
  landed or not, but nothing else);
- the branch never moves backwards;
- no memory file in the work tree is torn: each is the blob of the tip or of the
  commit the work tree was last synced to (the next write brings it forward);
- a lock the dead writer left behind is recovered by the next writer once it is
  stale (time is advanced by ageing the file, as waiting would), a live one never;
- the index, caught up, agrees with a scan of git.

Sizes: ``GITMEM_CRASH_KILLS`` kills per store kind (default 6, so CI stays fast);
docs/reliability.md has the full-size command and the numbers it produced.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from storetools import run_git

import gitmem
from gitmem import GitmemError, Store
from gitmem.entry import doctor as D
from gitmem.format.layout import MEMORY_ROOTS
from gitmem.git import maintenance

KILLS = int(os.environ.get("GITMEM_CRASH_KILLS", "6"))
CTX = multiprocessing.get_context("forkserver")
CTX.set_forkserver_preload(
    ["gitmem", "gitmem.store.core", "gitmem.store.sync", "gitmem.store.index"]
)


# -- the child: a writer that journals what it starts and what it was told succeeded -------------


def child_main(
    path: str,
    journal: str,
    seed: int,
    live: list[str],
    origin: str | None,
    durable: bool,
    trace: str | None = None,
) -> None:
    # A process group of its own: the kill takes the git commands it runs (sync's fetch and
    # push) with it, as a terminal's or a supervisor's kill would. Left running, an orphaned
    # fetch makes fsck see objects it has not finished writing.
    os.setpgid(0, 0)
    # The forkserver started with an earlier test's environment: git's trace (which the
    # packing helpers' git inherits) goes where this test asked, or nowhere.
    if trace is None:
        os.environ.pop("GIT_TRACE2_EVENT", None)
    else:
        os.environ["GIT_TRACE2_EVENT"] = trace
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def note(line: str) -> None:
        os.write(fd, (line + "\n").encode())  # in the kernel once written: survives SIGKILL

    # Packing helpers run detached (a session of their own, so the writer's kill spares
    # them): journal each one's pid, so the parent kills it at the same moment.
    start = maintenance.start

    def journalled_start(gitdir: Path, auto: int, pack_limit: int) -> Any:
        proc = start(gitdir, auto, pack_limit)
        if proc is not None:  # None: another packer holds the lock
            note(f"P {proc.pid}")
        return proc

    maintenance.start = journalled_start  # type: ignore[assignment]

    store = gitmem.open(path, durable=durable)
    note("R")  # ready: the parent's random delay starts now, so kills land in the work
    run_ops(store, seed, live, note, 400, origin=origin)
    os.close(fd)


def run_ops(
    store: Store,
    seed: int,
    live: list[str],
    note: Callable[[str], None],
    count: int,
    *,
    origin: str | None = None,
    shared: str | None = None,
) -> None:
    """``count`` random operations on the memories this worker owns (and appends to a shared
    one), each journalled before (B) and after it returned (A)."""
    rng = random.Random(seed)
    store.allow_secrets = True  # random markers are not credentials; keep the scan out of it
    ids = list(live)
    for n in range(count):
        marker = f"m{seed}x{n}"
        roll = rng.random()
        try:
            if shared is not None and roll < 0.1:
                note(f"B append {shared} {marker}")
                store.append(shared, marker)
                note(f"A append {shared} {marker}")
            elif roll < 0.3 or not ids:
                new = f"notes/crash/k{seed}-{n}" if rng.random() < 0.5 else f"k{seed}-{n}"
                note(f"B create {new} {marker}")
                store.create(f"{marker}\n", id=new, title=f"t {n}")
                note(f"A create {new} {marker}")
                ids.append(new)
            elif roll < 0.5:
                target = rng.choice(ids)
                note(f"B update {target} {marker}")
                store.update(target, body=f"{marker}\n")
                note(f"A update {target} {marker}")
            elif roll < 0.62:
                target = rng.choice(ids)
                note(f"B append {target} {marker}")
                store.append(target, marker)
                note(f"A append {target} {marker}")
            elif roll < 0.7:
                target = ids.pop(rng.randrange(len(ids)))
                note(f"B delete {target} {marker}")
                store.delete(target)
                note(f"A delete {target} {marker}")
            elif roll < 0.78:
                target = rng.choice(ids)
                new = f"k{seed}-{n}s"
                note(f"B supersede {target} {marker} {new}")
                store.supersede(target, f"{marker}\n", id=new)
                note(f"A supersede {target} {marker} {new}")
                ids.append(new)
            elif roll < 0.84:
                first, second = f"k{seed}-{n}a", f"k{seed}-{n}b"
                note(f"B pair {first} {marker} {second}")
                with store.transaction("pair") as tx:
                    tx.create(f"{marker}\n", id=first)
                    tx.create(f"{marker}\n", id=second)
                note(f"A pair {first} {marker} {second}")
                ids += [first, second]
            elif roll < 0.9:
                store.list()  # the index catches up
                store.search(marker)
            elif roll < 0.94:
                _prune_work(store, rng, marker)
            elif roll < 0.97:
                store.index().rebuild()
            elif origin is not None:

                store.sync(origin)
        except GitmemError as exc:
            note(f"E {type(exc).__name__} {exc}".replace("\n", " "))


def _prune_work(store: Store, rng: random.Random, marker: str) -> None:
    """Layered-document appends that prune by their rule, and whole prune runs (outside the
    model: pruning removes text by design; the invariants after a kill still hold)."""
    from gitmem.features.layered import LayeredStore
    from gitmem.features.layers import document_id

    layered = LayeredStore(store)
    doc = document_id("shared-project", "known_issues", project="crash")
    if not store.exists(doc):
        store.create("# Known issues\n", id=doc)
    if rng.random() < 0.6:
        resolved = "resolved 2020-01-01" if rng.random() < 0.5 else "open"
        layered.append(doc, f"### {marker}\nStatus: {resolved}\n")
    else:
        layered.prune()


# -- the parent: the model of what must be in the store ------------------------------------------


@dataclass
class Model:
    """What acknowledged writes say the store holds: id -> the markers that must be in its
    body (None: deleted)."""

    state: dict[str, list[str] | None] = field(default_factory=dict)
    supersedes: dict[str, str] = field(default_factory=dict)
    acked: int = 0
    in_flight_landed: int = 0
    in_flight_lost: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def live(self) -> list[str]:
        return sorted(i for i, m in self.state.items() if m is not None)


def _apply(model: Model, op: str, args: list[str]) -> None:
    if op in {"create", "update"}:
        model.state[args[0]] = [args[1]]
    elif op == "append":
        model.state[args[0]] = [*(model.state.get(args[0]) or []), args[1]]
    elif op == "delete":
        model.state[args[0]] = None
    elif op == "supersede":
        model.state[args[2]] = [args[1]]
        model.supersedes[args[2]] = args[0]
    elif op == "pair":
        model.state[args[0]] = [args[1]]
        model.state[args[2]] = [args[1]]


def _has(memories: dict[str, Any], memory_id: str, markers: list[str] | None) -> bool:
    if markers is None:
        return memory_id not in memories
    memory = memories.get(memory_id)
    return memory is not None and all(m in memory.body for m in markers)


def _holds(model: Model, memories: dict[str, Any], op: str, args: list[str]) -> bool:
    """Whether the store shows the effect of one operation (for the one in flight)."""
    trial = Model(dict(model.state), dict(model.supersedes))
    _apply(trial, op, args)
    touched = {args[0], args[2]} if op in {"supersede", "pair"} else {args[0]}
    if op == "supersede":
        touched = {args[2]}
    return all(_has(memories, i, trial.state[i]) for i in touched)


def absorb(model: Model, journal: Path, memories: dict[str, Any]) -> None:
    """Apply the acknowledged operations; settle the one in flight by what the store shows."""
    pending: tuple[str, list[str]] | None = None
    for line in journal.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind in {"R", "P"}:
            continue
        if kind == "E":
            model.errors.append(rest)
            continue
        op, *args = rest.split(" ")
        if kind == "B":
            pending = (op, args)
        elif kind == "A":
            _apply(model, op, args)
            model.acked += 1
            pending = None
    if pending is not None:
        op, args = pending
        if _holds(model, memories, op, args):
            _apply(model, op, args)
            model.in_flight_landed += 1
        else:
            model.in_flight_lost += 1
    journal.unlink()


def check_model(model: Model, memories: dict[str, Any]) -> None:
    wrong = [
        (i, marker, getattr(memories.get(i), "body", None))
        for i, marker in model.state.items()
        if not _has(memories, i, marker)
    ]
    assert not wrong, f"acknowledged writes missing or wrong: {wrong[:5]}"
    for new, old in model.supersedes.items():
        if model.state.get(new) is not None:
            assert memories[new].supersedes == old


@dataclass
class Tally:
    packers_killed: int = 0
    tmp_packs: int = 0
    orphan_packs: int = 0
    kills: int = 0
    ref_locks: int = 0
    index_locks: int = 0
    leftovers: int = 0
    behind: int = 0


def _tree_blob(repo: Any, commit: Any, path: str) -> bytes | None:
    try:
        entry = commit.tree[path]
    except KeyError:
        return None
    return bytes(repo[entry.id].data)


def _work_tree_files(root: Path) -> Iterator[Path]:
    for top in MEMORY_ROOTS:
        if (root / top).is_dir():
            yield from (p for p in (root / top).rglob("*") if p.is_file())


def kill_packers(journal: Path, tally: Tally) -> None:
    """SIGKILL every ``git gc --auto`` the dead writer started (with its git repack)."""
    if not journal.exists():
        return
    for line in journal.read_text().splitlines():
        if not line.startswith("P "):
            continue
        pid = int(line[2:])
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # finished already
        if b"\0gc\0--auto" in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # its own session: pgid == pid
                tally.packers_killed += 1
    time.sleep(0.05)  # let the kernel reap the group before git reads the repository


def check_packs(gitdir: Path, tally: Tally) -> None:
    """No pack is visible half-written: every index has its pack (git and libgit2 find
    packs by their index; fsck reads them all); a killed repack's temporary file is
    counted, never read. A pack without its index (a kill between a rolled pack's two
    deletions, ``.idx`` first, or between git's renames of a new pack and its index) is
    read by nobody: counted, and every object in it must be in the store besides, so that
    nothing would be lost without it."""
    pack_dir = gitdir / "objects" / "pack"
    if not pack_dir.is_dir():
        return
    names = {entry.name for entry in pack_dir.iterdir()}
    for name in names:
        if name.endswith(".pack") and name[:-5] + ".idx" not in names:
            tally.orphan_packs += 1
            assert_held_elsewhere(gitdir, pack_dir / name)
        elif name.endswith(".idx"):
            assert name[:-4] + ".pack" in names, f"{name} has no pack"
        elif name.startswith("tmp_"):
            tally.tmp_packs += 1


def assert_held_elsewhere(gitdir: Path, pack: Path) -> None:
    """Every object in ``pack`` (indexed by git into a scratch copy, away from the store)
    is one the store reads without it."""
    with tempfile.TemporaryDirectory() as scratch:
        idx = Path(scratch) / "orphan.idx"
        subprocess.run(
            ["git", "index-pack", "-o", str(idx), str(pack)],
            cwd=scratch,
            check=True,
            capture_output=True,
        )
        listed = subprocess.run(
            ["git", "show-index"], input=idx.read_bytes(), check=True, capture_output=True
        ).stdout.decode()
    ids = [line.split()[1] for line in listed.splitlines()]
    found = subprocess.run(
        ["git", f"--git-dir={gitdir}", "cat-file", "--batch-check=%(objectname)"],
        input="".join(f"{i}\n" for i in ids),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert found == ids, f"{pack.name}, without its index, holds objects the store lacks"


def test_a_pack_left_without_its_index_passes_only_when_nothing_is_lost(tmp_path: Path) -> None:
    """The harness's own check: a pack whose index is gone counts as a leftover when every
    object in it is in the store besides (a rolled pack a kill stopped deleting), and
    fails the run when it holds the only copy of something."""
    repo = tmp_path / "r.git"
    run_git(tmp_path, "init", "-q", "--bare", str(repo))
    pack_dir = repo / "objects" / "pack"

    def pack(*texts: str) -> str:
        ids = [run_git(repo, "hash-object", "-w", "--stdin", input=t).strip() for t in texts]
        made = run_git(repo, "pack-objects", "-q", str(pack_dir / "pack"), input="\n".join(ids))
        return f"pack-{made.strip()}"

    rolled, _ = pack("x\n", "y\n"), pack("x\n", "y\n", "z\n")  # the roll-up holds all
    (pack_dir / f"{rolled}.idx").unlink()
    tally = Tally()
    check_packs(repo, tally)
    assert tally.orphan_packs == 1
    only = pack("only here\n")
    run_git(repo, "prune-packed")
    for loose in (repo / "objects").glob("??/*"):
        loose.unlink()  # its sole copy is the pack
    (pack_dir / f"{only}.idx").unlink()
    with pytest.raises(AssertionError, match="holds objects the store lacks"):
        check_packs(repo, Tally())


def check_after_kill(store_path: Path, model: Model, tally: Tally, journal: Path) -> str:
    kill_packers(journal, tally)
    store = gitmem.open(store_path)  # no repair step exists: opening must just work
    db = store.db()
    # A git gc the parent's writes started (not killed) may still be moving loose objects.
    with maintenance.exclusive(db.gitdir):
        check_packs(db.gitdir, tally)
        fsck = subprocess.run(
            ["git", f"--git-dir={db.gitdir}", "fsck", "--strict", "--no-dangling",
             "--no-progress"],
            capture_output=True,
            text=True,
            check=False,
        )
    assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck.stdout + fsck.stderr
    scan = gitmem.open(store_path)
    scan.use_index = False
    memories = {m.id: m for m in scan.list(include_superseded=True, include_archived=True)}
    assert scan.problems() == []
    absorb(model, journal, memories)
    check_model(model, memories)
    # The index, caught up, agrees with git.
    indexed = {m.id: m.version for m in store.list(include_superseded=True, include_archived=True)}
    assert indexed == {i: m.version for i, m in memories.items()}
    tip = db.tip()
    assert tip is not None
    if db.workdir is not None:
        marker = db.state_dir / "worktree-synced"
        synced_hex = marker.read_text().strip() if marker.is_file() else str(tip.id)
        synced = db.repo[synced_hex] if synced_hex != str(tip.id) else tip
        if synced.id != tip.id:
            tally.behind += 1
        for file in _work_tree_files(db.workdir):
            rel = file.relative_to(db.workdir).as_posix()
            if file.name.startswith(".") and file.name.endswith(".tmp"):
                tally.leftovers += 1
                continue
            data = file.read_bytes()
            allowed = {_tree_blob(db.repo, tip, rel), _tree_blob(db.repo, synced, rel)}
            assert data in allowed, f"{rel} in the work tree is torn or foreign"
    # A lock the dead writer held: let time pass (age it); the next writer recovers it.
    for lock, counter in (
        (db.gitdir / "refs" / "heads" / "main.lock", "ref_locks"),
        (db.gitdir / "index.lock", "index_locks"),
    ):
        if lock.exists():
            setattr(tally, counter, getattr(tally, counter) + 1)
            old = time.time() - 120
            os.utime(lock, (old, old))
    return str(tip.id)


def _wait_ready(journal: Path, proc: Any) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.is_alive():
        if journal.exists() and journal.read_bytes().startswith(b"R\n"):
            return
        time.sleep(0.005)


def _wait_acknowledged(journal: Path, proc: Any) -> None:
    """Until the child acknowledged one write (bounded): on a loaded machine a first write can
    take longer than the random delay, and a run of kills that all land before any write
    would test nothing."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.is_alive():
        if journal.exists() and b"\nA " in journal.read_bytes():
            return
        time.sleep(0.005)


def crash_run(
    store: Store,
    kills: int,
    *,
    seed: int,
    origin: str | None = None,
    durable: bool = False,
    between: Callable[[int], None] | None = None,
    gc_auto: int | None = None,
    kill_after: Callable[[int], bool] | None = None,
    max_delay: float = 0.4,
) -> tuple[Model, Tally]:
    """``gc_auto``: set git's ``gc.auto`` so low that packing runs every few dozen writes
    (and is killed with the writer). ``kill_after``: round ``k``'s random delay (up to
    ``max_delay`` seconds) starts only once it says so (or 30 s have passed), so that kills
    land in the work it waits for."""
    rng = random.Random(seed)
    model, tally = Model(), Tally()
    path = store.db().gitdir if store.db().bare else store.path
    if gc_auto is not None:
        gitdir = store.db().gitdir
        bulk = gitmem.open(path)
        bulk.allow_secrets = True

        def loose_pile(k: int, then: Callable[[int], None] | None = between) -> None:
            # Loose objects until packing is due by git's own estimate (one fan-out folder's
            # count, which varies with the ids) from the child's first write on, so kills
            # land inside git gc and its repacks, not only between them. The parent's own
            # writes start no packing (gc.auto 0 while it writes).
            run_git(gitdir, "config", "gc.auto", "0")
            for n in range(20):
                with bulk.transaction(f"bulk {k}") as tx:
                    for i in range(150):
                        tx.create(f"bulk {k} {n} {i}\n", id=f"notes/bulk/k{k}-{n}-m{i}")
                if maintenance.due(gitdir, gc_auto, 0):
                    break
            run_git(gitdir, "config", "gc.auto", str(gc_auto))
            if then is not None:
                then(k)

        between = loose_pile
    journal = Path(str(path) + ".journal")
    last_tip: str | None = None
    repo = store.db().repo
    for k in range(kills):
        if between is not None:
            between(k)
        proc = CTX.Process(
            target=child_main,
            args=(
                str(path),
                str(journal),
                seed * 10_000 + k,
                model.live,
                origin,
                durable,
                os.environ.get("GIT_TRACE2_EVENT"),
            ),
        )
        proc.start()
        _wait_ready(journal, proc)
        if k % 2 == 0:
            # Every other kill lands after at least one acknowledged write, whatever the load;
            # the rest land anywhere from the first instant on, as before.
            _wait_acknowledged(journal, proc)
        if kill_after is not None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and proc.is_alive() and not kill_after(k):
                time.sleep(0.005)
        time.sleep(rng.uniform(0.0, max_delay))
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            proc.kill()
        proc.join()
        tally.kills += 1
        if not journal.exists():
            journal.write_text("")
        tip = check_after_kill(Path(path), model, tally, journal)
        if last_tip is not None and tip != last_tip:
            assert repo.descendant_of(tip, last_tip), "the branch moved backwards"
        last_tip = tip
    # After the last kill: one more write succeeds (stale locks recovered), and doctor's safe
    # fixes leave the repository, the work tree and the index clean. (Links and chains are
    # left out: the workload itself deletes superseded memories and forks chains.)
    final = gitmem.open(path)
    final.create("after the crashes")
    crash_checks = ["fsck", "locks", "leftovers", "worktree", "index", "schema"]
    report = D.diagnose(final, fix=True, checks=crash_checks)
    assert report.healthy, [f.message for f in report.remaining]
    if not final.db().bare:
        assert run_git(final.path, "status", "--porcelain", "--untracked-files=all") == ""
    return model, tally


def _summary(kind: str, model: Model, tally: Tally) -> str:
    return (
        f"{kind}: {tally.kills} kills, {model.acked} acknowledged writes, in flight "
        f"{model.in_flight_landed} landed / {model.in_flight_lost} not, "
        f"{len(model.live)} live memories, work tree behind {tally.behind}x, "
        f"leftover temp files {tally.leftovers}, stale ref locks {tally.ref_locks}, "
        f"index locks {tally.index_locks}, errors {len(model.errors)}, "
        f"packing helpers killed {tally.packers_killed}, temporary pack files {tally.tmp_packs}, "
        f"packs without their index {tally.orphan_packs}"
    )


@pytest.mark.slow
def test_sigkill_writers_of_a_work_tree_store(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    model, tally = crash_run(store, KILLS, seed=1)
    assert model.acked >= KILLS // 2  # the children did real work before being killed
    assert not [e for e in model.errors if not e.startswith(("AlreadyExists", "NotFound"))]
    with capsys.disabled():
        print("\n" + _summary("work tree", model, tally))


@pytest.mark.slow
def test_sigkill_writers_of_a_bare_store(
    bare_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    model, tally = crash_run(bare_store, KILLS, seed=2)
    assert model.acked >= KILLS // 2
    with capsys.disabled():
        print("\n" + _summary("bare", model, tally))


@pytest.mark.slow
@pytest.mark.parametrize("bare", [True, False], ids=["bare", "worktree"])
def test_sigkill_writers_while_the_store_packs_itself(
    tmp_path: Path, bare: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """``git gc --auto`` is due from each writer's first write and is killed with the
    writer, mid-repack or not: nothing acknowledged is lost, fsck stays clean, no pack is
    seen half-written, and packing still works afterwards."""
    store = gitmem.init(tmp_path / ("p.git" if bare else "p"), bare=bare)
    kills = max(4, KILLS - 2)
    model, tally = crash_run(store, kills, seed=4 if bare else 5, gc_auto=256)
    assert model.acked >= kills // 2
    gitdir = store.db().gitdir
    with maintenance.exclusive(gitdir, timeout=120):
        packs = list((gitdir / "objects" / "pack").glob("*.pack"))
    assert packs or tally.packers_killed, "no packing ran between the kills"
    store.gc()  # and packing still works: all the branch reaches ends up in one pack
    assert len(list((gitdir / "objects" / "pack").glob("*.pack"))) == 1
    reached = [line[:40] for line in run_git(gitdir, "rev-list", "--objects", "main").split("\n")]
    assert not [o for o in reached if o and (gitdir / "objects" / o[:2] / o[2:]).is_file()]
    run_git(gitdir, "fsck", "--strict", "--no-progress")
    with capsys.disabled():
        print("\n" + _summary("packing " + ("bare" if bare else "work tree"), model, tally))


@pytest.mark.slow
def test_sigkill_during_syncs_and_durable_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clone that syncs with a remote (merges) and writes with durable=True (fsync)."""
    origin = gitmem.init(tmp_path / "origin.git", bare=True)
    origin.create("from the start")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "clone")
    clone = gitmem.open(tmp_path / "clone", durable=True)
    other = gitmem.open(tmp_path / "origin.git")
    model, tally = crash_run(
        clone,
        max(4, KILLS // 2),
        seed=3,
        origin="origin",
        durable=True,
        between=lambda k: other.create(f"remote write {k}"),  # for the next sync to merge
        gc_auto=256,  # and the clone packs itself between syncs
    )
    assert model.acked > 0
    assert clone.db().durable
    with capsys.disabled():
        print("\n" + _summary("sync + durable", model, tally))


@pytest.mark.parametrize("bare", [False, True], ids=["worktree", "bare"])
def test_a_durable_store_reads_back_what_it_wrote(tmp_path: Path, bare: bool) -> None:
    """durable=True (fsync of objects, refs and work-tree files) changes cost, not results."""
    path = tmp_path / ("d.git" if bare else "d")
    store = gitmem.init(path, bare=bare, durable=True)
    assert store.db().durable
    memory = store.create("one", title="durable")
    store.update(memory.id, body="two")
    store.append(memory.id, "three")
    with store.transaction("pair") as tx:
        tx.create("four", id="notes/durable/four")
    again = gitmem.open(path, durable=True)
    assert again.read(memory.id).body == "two\nthree"
    assert again.read("notes/durable/four").body == "four"
    assert [m.id for m in again.search("three")] == [memory.id]
    run_git(again.db().gitdir, "fsck", "--strict", "--no-progress")
    if not bare:
        assert run_git(path, "status", "--porcelain") == ""


def test_the_next_write_removes_temp_files_of_a_dead_writer(store: Store) -> None:
    """A writer killed inside its file writes leaves `.<name>.<pid>.tmp` beside a memory and
    the synced marker behind the branch; the next write heals the work tree and removes the
    temp file of the dead pid, but never one of a live process."""
    import sys

    first = store.create("one\n", title="first")
    db = store.db()
    marker = db.state_dir / "worktree-synced"
    before = marker.read_text()
    second = store.create("two\n", title="second")
    path = store.path / (second.path or "")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    dead_tmp = path.with_name(f".{path.name}.{dead.pid}.tmp")
    live_tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    dead_tmp.write_bytes(b"half a mem")
    live_tmp.write_bytes(b"being written")
    marker.write_text(before)  # as if the writer died before it recorded the sync
    store.update(first.id, "one, again\n")
    assert not dead_tmp.exists()
    assert live_tmp.exists()
    live_tmp.unlink()
    assert run_git(store.path, "status", "--porcelain") == ""


# -- concurrent writers under kills ----------------------------------------------------------


def creator_main(path: str, journal: str, seed: int) -> None:
    """A writer of a bare store: creates with unique markers, journalled."""
    os.setpgid(0, 0)
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    store = gitmem.open(path)
    store.allow_secrets = True
    os.write(fd, b"R\n")
    for n in range(400):
        marker = f"g{seed}x{n}"
        os.write(fd, f"B {marker}\n".encode())
        store.create(f"{marker}\n", title=f"g {n}")
        os.write(fd, f"A {marker}\n".encode())


@pytest.mark.slow
def test_sigkill_concurrent_writers_of_a_bare_store(
    bare_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four writers of a bare store, one of them holding the write lock at any moment, all
    killed at once at random moments: every acknowledged write is on the branch exactly
    once, one in flight at most once, fsck is clean, and the next writer goes on."""
    rng = random.Random(6)
    gitdir = bare_store.db().gitdir
    acked: set[str] = set()
    in_flight: set[str] = set()
    for k in range(max(3, KILLS // 2)):
        journals = [Path(f"{gitdir}.g{k}-{w}") for w in range(4)]
        procs = [
            CTX.Process(target=creator_main, args=(str(gitdir), str(j), k * 10 + w))
            for w, j in enumerate(journals)
        ]
        for proc in procs:
            proc.start()
        for proc, journal in zip(procs, journals, strict=True):
            _wait_ready(journal, proc)
        _wait_acknowledged(journals[0], procs[0])
        time.sleep(rng.uniform(0.0, 0.3))
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.join()
        for journal in journals:
            pending = None
            for line in journal.read_text().splitlines():
                kind, _, marker = line.partition(" ")
                if kind == "B":
                    pending = marker
                elif kind == "A":
                    acked.add(marker)
                    pending = None
            if pending is not None:
                in_flight.add(pending)
            journal.unlink()
        # A git gc --auto a killed writer started outlives it (its own session): fsck
        # beside a repack moving loose objects into a pack reports them missing.
        with maintenance.exclusive(gitdir):
            fsck = subprocess.run(
                ["git", f"--git-dir={gitdir}", "fsck", "--strict", "--no-dangling",
                 "--no-progress"],
                capture_output=True, text=True, check=False,
            )
        assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck.stdout + fsck.stderr
        scan = gitmem.open(gitdir)
        scan.use_index = False
        bodies = [m.body.strip() for m in scan.list()]
        for marker in acked:
            assert bodies.count(marker) == 1, f"{marker}: {bodies.count(marker)} copies"
        for marker in in_flight:
            assert bodies.count(marker) <= 1
    final = gitmem.open(gitdir)
    final.create("after the kills")
    scan = gitmem.open(gitdir)
    scan.use_index = False
    bodies = [m.body.strip() for m in scan.list()]
    assert all(bodies.count(marker) == 1 for marker in acked)
    assert all(bodies.count(marker) <= 1 for marker in in_flight)
    assert run_git(gitdir, "rev-list", "--merges", "main") == ""
    with capsys.disabled():
        landed = sum(1 for m in in_flight if m in bodies)
        print(f"\nconcurrent writers: {len(acked)} acknowledged, in flight {landed} landed / "
              f"{len(in_flight) - landed} not")
