"""Forks across clones: a merge never drops a side, and an id names one memory
(real clones of a bare hub, gitmem sync, and the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import FixedClock, Store
from gitmem.store import merge as M
from gitmem.store import sync as S


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
    S.sync(a)
    [fork] = S.sync(b).forks
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
    S.sync(b)
    S.sync(a)
    clock.advance(seconds=5)
    a.restore(m, at=a_edit)
    assert a.read(m).body == "line one by A\nline two\n"
    S.sync(a)
    clock.advance(seconds=5)
    b.update(m, "line one by B, again\nline two\n")
    result = S.sync(b)
    assert fork not in [f.id for f in result.forks]  # not a new fork: it was there
    S.sync(a)
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
    S.sync(a)
    clock.advance(seconds=5)
    a.append(fork, "NOTE-BY-A")
    b.append(fork, "NOTE-BY-B")
    S.sync(a)
    S.sync(b)
    S.sync(a)
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
    S.sync(a)
    clock.advance(seconds=5)
    a.update(m, "line one by A, later\nline two\n")
    clock.advance(seconds=5)
    b.update(m, "line one by B, later\nline two\n")
    S.sync(a)
    [second] = [f.id for f in S.sync(b).forks]
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
