"""Audit: blame and undo on multi-agent histories, the memory-aware diff, log filters."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git
from storetools import commit_count

import gitmem
from gitmem import FixedClock, Store
from gitmem.features import audit as A


def by(store: Store, memory_id: str) -> list[tuple[str, str | None, str | None]]:
    return [
        (line.text, line.origin.agent, line.origin.session) for line in A.blame(store, memory_id)
    ]


# -- blame ----------------------------------------------------------------------------------------


def test_blame_names_the_writer_of_each_line(store: Store, clock: FixedClock) -> None:
    memory = store.create("one\ntwo\nthree\n", agent="ada", session_id="s1")
    clock.advance(minutes=1)
    store.update(memory.id, "one\nTWO\nthree\n", agent="bob", session_id="s2")
    clock.advance(minutes=1)
    store.append(memory.id, "four\n", agent="cyd")
    assert by(store, memory.id) == [
        ("one", "ada", "s1"),
        ("TWO", "bob", "s2"),
        ("three", "ada", "s1"),
        ("four", "cyd", None),
    ]
    lines = A.blame(store, memory.id)
    assert lines[0].number == 1 and lines[0].origin.memory_id == memory.id


def test_blame_through_a_merge_keeps_each_sides_writer(tmp_path: Path, clock: FixedClock) -> None:
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    memory = origin.create("one\ntwo\nthree\nfour\n", agent="ada")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "a")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "b")
    a, b = gitmem.open(tmp_path / "a", clock=clock), gitmem.open(tmp_path / "b", clock=clock)
    a.update(memory.id, "ONE\ntwo\nthree\nfour\n", agent="alice", session_id="sa")
    b.update(memory.id, "one\ntwo\nthree\nFOUR\n", agent="bert", session_id="sb")
    a.sync()
    b.sync()
    assert by(b, memory.id) == [
        ("ONE", "alice", "sa"),
        ("two", "ada", None),
        ("three", "ada", None),
        ("FOUR", "bert", "sb"),
    ]


def test_blame_follows_the_supersedes_chain(store: Store, clock: FixedClock) -> None:
    old = store.create("kept line\nold line\n", agent="ada")
    clock.advance(minutes=1)
    new = store.supersede(old.id, "kept line\nnew line\n", agent="bob")
    assert by(store, new.id) == [("kept line", "ada", None), ("new line", "bob", None)]
    assert A.blame(store, new.id)[0].origin.memory_id == old.id


def test_blame_of_a_missing_memory(store: Store) -> None:
    with pytest.raises(gitmem.NotFoundError):
        A.blame(store, "mem_00000000-0000-4000-8000-000000000000")


# -- diff -----------------------------------------------------------------------------------------


def test_diff_by_field_and_body(store: Store, clock: FixedClock) -> None:
    keep = store.create("a\nb\n", title="Keep", tags=["x"])
    gone = store.create("bye\n")
    run_git(store.path, "tag", "v1")
    clock.advance(hours=1)
    store.update(keep.id, "a\nB\n", title="Kept", tags=["x", "y"])
    store.delete(gone.id)
    added = store.create("hello\n")
    entries = {e.id: e for e in A.diff(store, "v1")}
    assert {e: entries[e].status for e in entries} == {
        keep.id: "changed",
        gone.id: "deleted",
        added.id: "added",
    }
    fields = {f.name: (f.before, f.after) for f in entries[keep.id].fields}
    assert fields["title"] == ("Keep", "Kept") and fields["tags"] == (["x"], ["x", "y"])
    assert fields["version"] == (1, 2)
    assert "-b" in entries[keep.id].diff and "+B" in entries[keep.id].diff
    only = A.diff(store, "v1", None, keep.id)
    assert [e.id for e in only] == [keep.id]


def test_cli_diff_arguments(store: Store, clock: FixedClock) -> None:
    memory = store.create("a\n", title="T")
    other = store.create("x\n")
    run_git(store.path, "tag", "v1")
    store.update(memory.id, "b\n")
    store.update(other.id, "y\n")
    cli = Gitmem(store.path, make_runner())
    out = cli("diff", "v1", memory.id).stdout
    assert f"changed {memory.id}" in out and other.id not in out
    both = cli.json("diff", "v1", "HEAD")
    assert {e["id"] for e in both} == {memory.id, other.id}
    assert cli.json("diff", "v1", "HEAD", other.id)[0]["status"] == "changed"
    cli.fails(3, "diff", "no-such-rev")


# -- undo -----------------------------------------------------------------------------------------


@pytest.fixture
def sessions(store: Store, clock: FixedClock) -> tuple[Store, dict[str, str]]:
    kept = store.create("original\n", title="Kept", agent="ada", session_id="s1")
    doomed = store.create("to be deleted\n", agent="ada", session_id="s1")
    clock.advance(minutes=1)
    store.update(kept.id, "changed by the bad session\n", agent="bot", session_id="bad")
    clock.advance(minutes=1)
    made = store.create("made by the bad session\n", agent="bot", session_id="bad")
    store.delete(doomed.id, agent="bot")  # no session: a delete takes only the agent
    return store, {"kept": kept.id, "doomed": doomed.id, "made": made.id}


def test_undo_a_session(sessions: tuple[Store, dict[str, str]]) -> None:
    store, ids = sessions
    before = commit_count(store)
    result = A.undo(store, session="bad", agent="reviewer")
    assert commit_count(store) == before + 1 and len(result.undone) == 2
    kept = store.read(ids["kept"])
    assert kept.body == "original\n" and kept.version == 3  # a new version, not a rewind
    assert store.get(ids["made"]) is None
    assert store.get(ids["doomed"]) is None  # deleted outside the session: stays deleted
    message = run_git(store.path, "log", "-1", "--format=%B")
    assert "Gitmem-Op: undo" in message and f"Gitmem-Undoes: {result.undone[0]}" in message
    assert run_git(store.path, "status", "--porcelain") == ""


def test_undo_one_commit_restores_a_deleted_memory(sessions: tuple[Store, dict[str, str]]) -> None:
    store, ids = sessions
    last = run_git(store.path, "rev-parse", "HEAD").strip()
    result = A.undo(store, commit=last)
    assert result.restored == [ids["doomed"]]
    assert store.read(ids["doomed"]).body == "to be deleted\n"


def test_undo_refuses_when_later_writes_depend(
    sessions: tuple[Store, dict[str, str]], clock: FixedClock
) -> None:
    store, ids = sessions
    clock.advance(minutes=1)
    store.update(ids["kept"], "then someone else edited it\n", agent="cyd")
    before = commit_count(store)
    with pytest.raises(A.UndoRefusedError, match="changed later"):
        A.undo(store, session="bad")
    assert commit_count(store) == before


def test_undo_refuses_to_remove_a_memory_others_link_to(
    sessions: tuple[Store, dict[str, str]],
) -> None:
    store, ids = sessions
    store.supersede(ids["made"], "builds on it\n", agent="cyd")
    with pytest.raises(A.UndoRefusedError, match="links to"):
        A.undo(store, session="bad")


def test_undo_refuses_merges_and_unknown_sessions(tmp_path: Path, clock: FixedClock) -> None:
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    origin.create("x\n")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "a")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "b")
    a, b = gitmem.open(tmp_path / "a", clock=clock), gitmem.open(tmp_path / "b", clock=clock)
    a.create("from a")
    b.create("from b")
    a.sync()
    b.sync()
    with pytest.raises(A.UndoRefusedError, match="merge commit"):
        A.undo(b, commit="HEAD")
    with pytest.raises(gitmem.NotFoundError):
        A.undo(b, session="nobody")
    with pytest.raises(gitmem.InvalidInputError):
        A.undo(b)


def test_cli_undo(sessions: tuple[Store, dict[str, str]]) -> None:
    store, _ = sessions
    cli = Gitmem(store.path, make_runner())
    cli.fails(2, "undo")
    out = cli("undo", "--session", "bad").stdout
    assert "Undid 2 commit(s)" in out
    assert "nothing to undo" in cli.fails(3, "undo", "--session", "nothing to undo")


# -- log filters and formats ----------------------------------------------------------------------


def test_log_filters_by_path_and_category(store: Store, clock: FixedClock) -> None:
    prefs = store.create("tabs", category="coding-preferences", agent="ada")
    fact = store.create("likes tea", category="user-facts", agent="bob")
    doc = store.create("# notes\n", id="projects/demo/notes", title="Notes")
    store.update(prefs.id, "spaces")
    store.delete(fact.id)
    subjects = [e.ids for e in store.log(category="coding-preferences")]
    assert subjects == [[prefs.id], [prefs.id]]
    assert [e.ids for e in store.log(category="user-facts")] == [[fact.id], [fact.id]]
    assert [e.ids for e in store.log(path="projects/")] == [[doc.id]]
    assert [e.ids for e in store.log(path="projects/*/notes.md")] == [[doc.id]]
    assert [e.ids for e in store.log(path=prefs.path)] == [[prefs.id], [prefs.id]]
    assert store.log(path="projects", category="user-facts") == []


def test_log_formats(store: Store) -> None:
    memory = store.create("x", agent="ada", session_id="s9")
    cli = Gitmem(store.path, make_runner())
    out = cli("log", "--format", "{short}\\t{agent}\\t{session}\\t{ops}\\t{ids}", "-n", "1").stdout
    assert out == f"{memory_commit(store)[:10]}\tada\ts9\tcreate\t{memory.id}\n"
    assert cli("log", "--format", "oneline", "-n", "1").stdout.endswith(f" create: {memory.id}\n")
    lines = cli("log", "--format", "jsonl").stdout.splitlines()
    assert len(lines) == 2 and '"ops": ["create"]' in lines[0]
    assert "unknown log field {nope}" in cli.fails(4, "log", "--format", "{nope}")
    assert cli.json("log", "--category", "none-such") == []


def memory_commit(store: Store) -> str:
    return run_git(store.path, "rev-parse", "HEAD").strip()


def test_append_and_delete_record_the_session(any_store: Store) -> None:
    """Every write takes agent and session, so gitmem undo --session finds appends and deletes."""
    m = any_store.create("a\n", title="A")
    any_store.append(m.id, "b", agent="scout", session_id="s-42")
    any_store.delete(m.id, agent="scout", session_id="s-42")
    sessions = [e.session for e in any_store.log(id=m.id)]
    assert sessions[:2] == ["s-42", "s-42"]
