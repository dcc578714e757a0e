"""Forks across clones: a merge never drops a side, and an id names one memory
(real clones of a bare hub, gitmem sync, and the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_git

import gitmem
from gitmem import FixedClock, Store
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
