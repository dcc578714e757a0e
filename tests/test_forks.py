"""Forks across clones: a merge never drops a side, and an id names one memory
(real clones of a bare hub, gitmem sync, and the CLI)."""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import GitmemError
from gitmem.features import conflicts as forks_api
from gitmem.store import merge as M


def clone(tmp_path: Path, name: str, clock: FixedClock) -> Store:
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), name)
    return gitmem.open(tmp_path / name, clock=clock)


def tip(store: Store) -> str:
    commit = store.db().tip()
    assert commit is not None
    return str(commit.id)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock("2026-11-22T10:00:00Z")


@pytest.fixture
def team(tmp_path: Path, clock: FixedClock) -> tuple[Store, Store, str]:
    """Two work-tree clones A and B of a hub holding one memory M."""
    memory = gitmem.init(tmp_path / "hub.git", bare=True, clock=clock).create(
        "line one\nline two\n", title="Shared"
    )
    return clone(tmp_path, "a", clock), clone(tmp_path, "b", clock), memory.id


def _fork_of_a(team: tuple[Store, Store, str], clock: FixedClock) -> tuple[str, str]:
    """A and B edit line 1 of M; A syncs, then B (later) syncs and keeps A's version as a
    fork: (the fork, A's commit of its edit)."""
    a, b, m = team
    a.update(m, "line one by A\nline two\n")
    a_edit = tip(a)
    clock.advance(seconds=5)
    b.update(m, "line one by B\nline two\n")
    a.sync()
    [fork] = b.sync().forks
    assert b.read(fork.id).body == "line one by A\nline two\n"
    return fork.id, a_edit


# -- a merge never drops a side ----------------------------------------------------------------


def test_an_edit_of_a_fork_survives_a_merge_that_loses_the_same_bytes_again(
    team: tuple[Store, Store, str], clock: FixedClock
) -> None:
    """The issue's steps: B appends a note to fork F of A's version; A restores M to that
    very version (the same bytes) and syncs; B edits line 1 again and syncs. The merge
    loses A's bytes again, which name F again: it must not write F afresh over the note."""
    a, b, m = team
    fork, a_edit = _fork_of_a(team, clock)
    clock.advance(seconds=5)
    b.append(fork, "NOTE-ON-FORK")
    b.sync()
    a.sync()
    clock.advance(seconds=5)
    a.restore(m, at=a_edit)
    assert a.read(m).body == "line one by A\nline two\n"
    a.sync()
    clock.advance(seconds=5)
    b.update(m, "line one by B, again\nline two\n")
    result = b.sync()
    assert fork not in [f.id for f in result.forks]  # not a new fork: it was there
    a.sync()
    assert tip(a) == tip(b)
    for store in (a, b):
        assert "NOTE-ON-FORK" in store.read(fork).body
        assert store.read(m).body == "line one by B, again\nline two\n"
        bodies = [x.body for x in store.list(include_superseded=True)]
        assert any(body.startswith("line one by A\n") for body in bodies)  # A's restore


def test_a_fork_both_sides_edited_merges_like_any_memory(
    team: tuple[Store, Store, str], clock: FixedClock
) -> None:
    """A fork is a memory: when both clones append to it, the merge keeps both appends."""
    a, b, _ = team
    fork, _ = _fork_of_a(team, clock)
    a.sync()
    clock.advance(seconds=5)
    a.append(fork, "NOTE-BY-A")
    b.append(fork, "NOTE-BY-B")
    a.sync()
    b.sync()
    a.sync()
    for store in (a, b):
        body = store.read(fork).body
        assert "NOTE-BY-A" in body and "NOTE-BY-B" in body


# -- an id names one memory ---------------------------------------------------------------------


@pytest.fixture
def deleted_with_forks(
    team: tuple[Store, Store, str], clock: FixedClock
) -> tuple[Store, str, list[str], str]:
    """M in B with two forks (A's two rival versions, from two merges), then deleted in B:
    (B, M, its forks, the commit before the delete)."""
    a, b, m = team
    first, _ = _fork_of_a(team, clock)
    a.sync()
    clock.advance(seconds=5)
    a.update(m, "line one by A, later\nline two\n")
    clock.advance(seconds=5)
    b.update(m, "line one by B, later\nline two\n")
    a.sync()
    [second] = [f.id for f in b.sync().forks]
    before = tip(b)
    b.delete(m)
    return b, m, sorted([first, second]), before


def test_a_deleted_memory_with_forks_is_named_by_its_id(
    deleted_with_forks: tuple[Store, str, list[str], str],
) -> None:
    """After gitmem rm M (M has forks), restore M (as rm itself prints), history M,
    show M --at, blame M and diff M work on M, not on a fork."""
    b, m, forks, before = deleted_with_forks
    cli = Gitmem(b.path, make_runner())
    assert b.resolve_id(m) == m
    steps = cli.json("history", m)["versions"]
    assert {step["id"] for step in steps} == {m} and steps[-1]["op"] == "delete"
    shown = cli("show", m, "--at", before)
    assert f"id: {m}\n" in shown.stdout and "line one by B, later" in shown.stdout
    blamed = cli.json("blame", m)  # the last body, before the delete
    assert [line["text"] for line in blamed] == ["line one by B, later", "line two"]
    [entry] = cli.json("diff", before, m)
    assert entry["id"] == m and entry["status"] == "deleted"
    cli("restore", m)
    assert b.read(m).body == "line one by B, later\nline two\n"
    for fork in forks:
        assert b.read(fork).extra[M.FORK_KEY] == m  # untouched


def test_a_prefix_of_a_memory_and_its_forks_names_the_memory(
    deleted_with_forks: tuple[Store, str, list[str], str],
) -> None:
    b, m, forks, _ = deleted_with_forks
    b.restore(m)
    prefix = m[:12]
    assert b.resolve_id(prefix) == m
    assert b.resolve_id(forks[0]) == forks[0]  # an exact id, never read as a prefix
    cli = Gitmem(b.path, make_runner())
    shown = cli("show", prefix)
    assert f"id: {m}\n" in shown.stdout
    assert "has forks" in shown.stderr and forks[0] in shown.stderr


# -- random histories ----------------------------------------------------------------------------

TOKEN = re.compile(r"\bt\d+x\d+\b")
HISTORIES = int(os.environ.get("GITMEM_FORK_HISTORIES", "3"))
STEPS = int(os.environ.get("GITMEM_FORK_STEPS", "45"))
"""Operations per history, over three clones (two with work trees, one bare): about 7 s a
history; GITMEM_FORK_HISTORIES=24 GITMEM_FORK_STEPS=100 for a deeper search."""


@dataclass
class _Clone:
    store: Store
    clock: FixedClock
    n: int = 0

    def token(self, index: int) -> str:
        self.n += 1
        return f"t{index}x{self.n}"

    def seen(self) -> set[str]:
        memories = self.store.list(include_superseded=True, include_archived=True)
        return {t for m in memories for t in TOKEN.findall(m.body)}


@dataclass
class _Ledger:
    """Every line a write acknowledged (token, the commit that wrote it), and every line a
    write removed while its clone saw it (token, the commit that removed it)."""

    acked: list[tuple[str, str]] = field(default_factory=list)
    removed: dict[str, list[str]] = field(default_factory=dict)


def _write(rng: random.Random, clone: _Clone, index: int) -> None:
    """One random write: create, update a line, append, restore an earlier version, edit a
    fork, resolve a fork, delete (a write gitmem refuses, such as resolving a fork whose
    memory is gone, changes nothing). Few memories and mostly their first line, so that
    clones often change the same lines and forks, and restores re-fork old bytes."""
    store = clone.store
    clone.clock.advance(seconds=rng.randint(1, 20))
    memories = store.list(include_superseded=True)
    forks = [m for m in memories if M.FORK_KEY in m.extra]
    choice = rng.random()
    if len(memories) - len(forks) < 2 or choice < 0.05:
        store.create("\n".join(clone.token(index) for _ in range(3)) + "\n", title="m")
        return
    target = rng.choice(memories)
    if choice < 0.35:
        lines = target.body.splitlines() or [""]
        lines[0 if rng.random() < 0.7 else rng.randrange(len(lines))] = clone.token(index)
        store.update(target.id, "\n".join(lines) + "\n")
    elif choice < 0.45:
        store.append(target.id, clone.token(index))
    elif choice < 0.65:
        history = store.history(target.id)
        earlier = [v for v in history if v.memory_id == target.id and v.memory]
        store.restore(target.id, at=rng.choice(earlier[-4:-1] or earlier).commit)
    elif choice < 0.85 and forks:
        store.append(rng.choice(forks).id, clone.token(index))
    elif choice < 0.93 and forks:
        forks_api.resolve(store, rng.choice(forks).id, rng.choice(["ours", "theirs", "both"]))
    else:
        store.delete(target.id)


def _derived(store: Store, at: str | None = None) -> dict[str, tuple[int, str]]:
    memories = store.list(include_superseded=True, include_archived=True, at=at)
    return {m.id: (m.version, m.updated_at.isoformat()) for m in memories}


def _random_history(tmp_path: Path, seed: int) -> tuple[int, int]:
    """One random history; returns (writes, syncs)."""
    rng = random.Random(seed)
    start = "2026-11-22T10:00:00Z"
    gitmem.init(tmp_path / "hub.git", bare=True, clock=FixedClock(start)).create("t0x0\n")
    clones = []
    for i, name in enumerate(["a", "b", "c"]):
        args = ["clone", "-q", *(["--bare"] if i == 2 else []), str(tmp_path / "hub.git"), name]
        run_git(tmp_path, *args)
        clock = FixedClock(start)
        clones.append(_Clone(gitmem.open(tmp_path / name, clock=clock), clock))
    ledger = _Ledger()
    writes = syncs = 0
    for _ in range(STEPS):
        index = rng.randrange(len(clones))
        clone = clones[index]
        if rng.random() < 0.3:
            clone.store.sync()
            syncs += 1
            continue
        before = clone.seen()
        try:
            _write(rng, clone, index)
        except GitmemError:
            continue
        writes += 1
        after, tip_after = clone.seen(), tip(clone.store)
        ledger.acked += [(t, tip_after) for t in after - before]
        for t in before - after:
            ledger.removed.setdefault(t, []).append(tip_after)
    for _ in range(2):
        for clone in clones:
            clone.store.sync()
            syncs += 1
    assert len({tip(c.store) for c in clones}) == 1
    final = clones[0].seen()
    repo = clones[0].store.db().repo
    for token, commit in ledger.acked:
        if token in final:
            continue
        # Removed by a write that saw the line, and that the write acknowledging it had
        # not already seen (a removal it knew of cannot undo it).
        assert any(not repo.descendant_of(commit, r) for r in ledger.removed.get(token, [])), (
            f"{token} written at {commit} is gone, and no write that removed it had seen it"
        )
    # version and updated_at are a function of the commit: the same in every clone, read
    # through its index or from git, and after a clone rebuilt its index.
    expected = _derived(clones[0].store)
    assert expected == _derived(clones[0].store, at="HEAD")
    for clone in clones[1:]:
        assert _derived(clone.store) == expected
    clones[1].store.reindex()
    assert _derived(clones[1].store) == expected
    return writes, syncs


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(HISTORIES))
def test_random_histories_lose_no_acknowledged_line(tmp_path: Path, seed: int) -> None:
    """Random writes in three clones with syncs between: every line a write acknowledged
    is at the converged tip, or a write that had seen it removed it; derived version and
    updated_at read alike everywhere."""
    writes, syncs = _random_history(tmp_path, seed)
    assert writes > STEPS // 2 and syncs > 6


def test_versions_count_once_when_commit_times_are_skewed(tmp_path: Path) -> None:
    """Clones' clocks differ, so a commit can be older than its parents. The index caught up
    at such a commit O, then the branch merged a side whose history it shares with O: a
    walk from the merge that hides O still yields some of O's ancestors (git and libgit2
    stop at commit times), which must not count as versions a second time."""
    clock = FixedClock("2026-06-01T00:00:00Z")
    store = gitmem.init(tmp_path / "s", clock=clock)
    memory = store.create("one\n")
    for text in ("two\n", "three\n"):
        clock.advance(minutes=1)
        store.update(memory.id, text)
    other = store.create("other\n")
    run_git(store.path, "branch", "side")
    side = gitmem.open(store.path, branch="side", clock=FixedClock("2026-07-01T00:00:00Z"))
    side.update(other.id, "on the side\n")
    clock.current = clock.current.replace(year=2020)  # a clock years behind, up to O
    for n in range(8):  # more than git's and libgit2's slop of 5 commits
        store.append(other.id, f"from the slow clock {n}")
    store.index().catch_up()
    run_git(store.path, "merge", "-q", "--no-edit", "side")
    fresh = gitmem.open(store.path)
    assert fresh.read(memory.id).version == 3  # the index at O, the commits since walked
    fresh.index().catch_up()
    listed = {m.id: m.version for m in fresh.list()}  # the index caught up from O
    assert listed == {memory.id: 3, other.id: 10} and fresh.read(memory.id).version == 3
    fresh.reindex()
    assert fresh.read(memory.id).version == 3
