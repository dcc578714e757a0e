"""Every Store operation and its documented semantics, against real git repositories."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from storetools import commit_count, run_git, tip

import gitmem
from gitmem import (
    AlreadyExistsError,
    ConflictError,
    FixedClock,
    InvalidInputError,
    Memory,
    NotFoundError,
    Related,
    Relationship,
    Scope,
    Status,
    Store,
    StoreError,
    Trigger,
)
from gitmem.format.layout import memory_path

START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
UUID_ID = re.compile(r"mem_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def show(store: Store, path: str, rev: str = "main") -> str:
    return run_git(store.db().gitdir, "show", f"{rev}:{path}")


# -- create / read ------------------------------------------------------------------------


def test_create_with_every_field(any_store: Store, clock: FixedClock) -> None:
    before = commit_count(any_store)
    other = any_store.create("the one it refines\n", title="older")
    m = any_store.create(
        "Fixtures live in `tests/conftest.py`.\n",
        title="Prefer pytest fixtures",
        category="coding-preferences",
        tags=["testing", "python"],
        related=[(other.id, "refines"), {"id": "mem_elsewhere", "relationship": "contradicts"}],
        agent="hephaestus",
        session_id="9b1f-session",
        trigger="cadence",
        extra={"confidence": 0.9, "source": "review"},
        message="learned while reviewing",
    )
    assert UUID_ID.fullmatch(m.id)
    assert m.path == memory_path(m.id)
    assert m.title == "Prefer pytest fixtures"
    assert m.category == "coding-preferences"
    assert m.tags == ("testing", "python")
    assert m.related == (
        Related(other.id, Relationship.REFINES),
        Related("mem_elsewhere", Relationship.CONTRADICTS),
    )
    assert m.agent == "hephaestus"
    assert m.session_id == "9b1f-session"
    assert m.trigger is Trigger.CADENCE
    assert m.status is Status.ACTIVE
    assert m.scope is Scope.REPO
    assert m.store_scope is Scope.REPO
    assert m.version == 1
    assert m.created_at == m.updated_at == clock.now()
    assert m.supersedes is None
    assert m.extra == {"confidence": 0.9, "source": "review"}
    assert commit_count(any_store) == before + 2

    again = any_store.read(m.id)
    assert again == m
    text = show(any_store, m.path)
    assert text.startswith(f"---\nid: {m.id}\n")
    for line in (
        "title: Prefer pytest fixtures",
        "category: coding-preferences",
        "tags: [testing, python]",
        "created_at: 2026-11-22T10:00:00Z",
        "agent: hephaestus",
        "session_id: 9b1f-session",
        "trigger: cadence",
        "confidence: 0.9",
        f"- id: {other.id}",
        "  relationship: refines",
    ):
        assert line + "\n" in text
    assert "supersedes" not in text and "version" not in text and "updated_at" not in text
    assert text.endswith("---\n\nFixtures live in `tests/conftest.py`.\n")
    message = run_git(any_store.db().gitdir, "log", "-1", "--format=%B")
    assert message.startswith("create: Prefer pytest fixtures\n\nlearned while reviewing\n")


def test_create_minimal_and_with_given_id(any_store: Store) -> None:
    m = any_store.create("just a body")
    assert m.title is None and m.category is None and m.tags == () and m.related == ()
    assert any_store.read(m.id).body == "just a body"
    named = any_store.create(b"bytes body\n", id="team-style.v2")
    assert named.id == "team-style.v2"
    assert named.path is not None and named.path.endswith("/team-style.v2.md")
    assert any_store.read("team-style.v2").body == "bytes body\n"


def test_create_refuses_a_taken_id(any_store: Store) -> None:
    any_store.create("first", id="taken")
    head = tip(any_store)
    with pytest.raises(AlreadyExistsError):
        any_store.create("second", id="taken")
    assert tip(any_store) == head
    assert any_store.read("taken").body == "first"


def test_read_get_exists(any_store: Store) -> None:
    m = any_store.create("here")
    assert any_store.read(m.id).body == "here"
    assert any_store.get(m.id) == any_store.read(m.id)
    assert any_store.exists(m.id)
    missing = "mem_00000000-0000-4000-8000-000000000000"
    assert any_store.get(missing) is None
    assert not any_store.exists(missing)
    with pytest.raises(NotFoundError):
        any_store.read(missing)


def test_read_at_an_earlier_commit(any_store: Store, clock: FixedClock) -> None:
    before_create = tip(any_store)
    m = any_store.create("first text\n", title="v1")
    first = tip(any_store)
    clock.advance(hours=1)
    any_store.update(m.id, "second text\n", title="v2")
    assert any_store.read(m.id).body == "second text\n"
    old = any_store.read(m.id, at=first)
    assert (old.body, old.title, old.version) == ("first text\n", "v1", 1)
    assert any_store.get(m.id, at=before_create) is None
    assert not any_store.exists(m.id, at=before_create)
    with pytest.raises(NotFoundError):
        any_store.read(m.id, at=before_create)


# -- update -------------------------------------------------------------------------------


def test_update_body_and_fields_bumps_version(any_store: Store, clock: FixedClock) -> None:
    """version and updated_at are derived from the commits (tests/test_derived_versions.py)."""
    m = any_store.create("old body\n", title="t", category="patterns", tags=["a"], agent="x")
    before = commit_count(any_store)
    clock.advance(minutes=5)
    u = any_store.update(
        m.id,
        "new body\n",
        title="new title",
        category="corrections",
        tags=["b", "c"],
        related=[("mem_other", "relates-to")],
        trigger="manual",
        session_id="s2",
    )
    assert u.id == m.id and u.path == m.path
    assert u.version == 2
    assert u.created_at == m.created_at
    assert u.updated_at == START + dt.timedelta(minutes=5)
    assert (u.body, u.title, u.category, u.tags) == ("new body\n", "new title", "corrections",
                                                     ("b", "c"))
    assert u.related == (Related("mem_other", Relationship.RELATES_TO),)
    assert u.trigger is Trigger.MANUAL and u.session_id == "s2"
    assert u.agent == "x"  # not given: kept
    assert any_store.read(m.id) == u
    assert commit_count(any_store) == before + 1
    text = show(any_store, m.path)
    assert "updated_at" not in text and "version" not in text
    assert "created_at: 2026-11-22T10:00:00Z\n" in text


def test_update_fields_only_keeps_body(any_store: Store) -> None:
    m = any_store.create("keep me\n", title="a")
    u = any_store.update(m.id, title="b")
    assert u.body == "keep me\n" and u.title == "b" and u.version == 2


def test_update_extra_merges_and_removes(any_store: Store) -> None:
    m = any_store.create("x", extra={"keep": 1, "drop": "me", "change": "old"})
    u = any_store.update(m.id, extra={"drop": None, "change": "new", "added": [1, 2]})
    assert u.extra == {"keep": 1, "change": "new", "added": [1, 2]}
    text = show(any_store, m.path or "")
    assert "drop" not in text
    assert "keep: 1\n" in text and "change: new\n" in text
    assert any_store.read(m.id).extra == u.extra


def test_update_status_archives(any_store: Store) -> None:
    m = any_store.create("x")
    u = any_store.update(m.id, status="archived")
    assert u.status is Status.ARCHIVED and u.archived
    assert "status: archived\n" in show(any_store, m.path or "")
    back = any_store.update(m.id, status=Status.ACTIVE)
    assert back.status is Status.ACTIVE and back.version == 3


def test_update_that_changes_nothing_makes_no_commit(any_store: Store, clock: FixedClock) -> None:
    m = any_store.create("same\n", title="same", tags=["t"], extra={"k": "v"})
    head = tip(any_store)
    clock.advance(hours=1)
    for result in (
        any_store.update(m.id),
        any_store.update(m.id, "same\n"),
        any_store.update(m.id, title="same", tags=["t"]),
        any_store.update(m.id, extra={"k": "v"}),
        any_store.update(m.id, extra={"absent": None}),
    ):
        assert result.version == 1
        assert result.updated_at == m.updated_at
    assert tip(any_store) == head


def test_update_expected_version(any_store: Store) -> None:
    m = any_store.create("v1")
    u = any_store.update(m.id, "v2", expected_version=1)
    assert u.version == 2
    head = tip(any_store)
    with pytest.raises(ConflictError):
        any_store.update(m.id, "from a stale read", expected_version=1)
    with pytest.raises(ConflictError):
        any_store.append(m.id, "stale append", expected_version=1)
    assert tip(any_store) == head
    assert any_store.read(m.id).body == "v2"
    assert any_store.update(m.id, "v3", expected_version=2).version == 3


def test_update_of_a_missing_memory(any_store: Store) -> None:
    head = tip(any_store)
    with pytest.raises(NotFoundError):
        any_store.update("mem_00000000-0000-4000-8000-000000000000", "x")
    assert tip(any_store) == head


# -- append -------------------------------------------------------------------------------


def test_append_adds_a_line(any_store: Store) -> None:
    m = any_store.create("first line", agent="a1")
    a = any_store.append(m.id, "second line\n", agent="a2")
    assert a.body == "first line\nsecond line\n"
    assert a.version == 2
    b = any_store.append(m.id, "third")
    assert b.body == "first line\nsecond line\nthird"
    assert b.version == 3
    assert any_store.read(m.id).body == "first line\nsecond line\nthird"
    ops = run_git(any_store.db().gitdir, "log", "-2",
                  "--format=%(trailers:key=Gitmem-Op,valueonly)")
    assert ops.split() == ["append", "append"]
    assert run_git(any_store.db().gitdir, "log", "-1", "--skip=1", "--format=%an").strip() == "a2"


def test_append_to_an_empty_body(any_store: Store) -> None:
    m = any_store.create("", allow_empty=True)
    assert any_store.append(m.id, "only line").body == "only line"


# -- delete / restore -----------------------------------------------------------------------


def test_delete_returns_true_then_false(any_store: Store) -> None:
    m = any_store.create("to go", title="doomed")
    assert any_store.delete(m.id) is True
    head = tip(any_store)
    assert any_store.get(m.id) is None
    with pytest.raises(NotFoundError):
        any_store.read(m.id)
    assert any_store.delete(m.id) is False
    assert any_store.delete("never-existed") is False
    assert tip(any_store) == head
    assert run_git(any_store.db().gitdir, "log", "-1", "--format=%s").strip() == "delete: doomed"
    if not any_store.db().bare:
        assert not (any_store.path / (m.path or "")).exists()
        assert not (any_store.path / (m.path or "")).parent.exists()


def test_restore_a_deleted_memory(any_store: Store, clock: FixedClock) -> None:
    m = any_store.create("precious\n", title="keep", tags=["x"])
    any_store.update(m.id, "precious, revised\n")
    any_store.delete(m.id)
    clock.advance(days=1)
    r = any_store.restore(m.id)
    assert r.body == "precious, revised\n"
    assert r.title == "keep" and r.tags == ("x",)
    assert r.version == 3  # one above the last version it had
    assert r.created_at == m.created_at
    assert r.updated_at == START + dt.timedelta(days=1)
    assert any_store.read(m.id) == r
    assert run_git(any_store.db().gitdir, "log", "-1",
                   "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "restore"


def test_restore_rolls_back_with_at(any_store: Store) -> None:
    m = any_store.create("good\n", title="good")
    good = tip(any_store)
    any_store.update(m.id, "bad\n", title="bad")
    head = tip(any_store)
    with pytest.raises(AlreadyExistsError):
        any_store.restore(m.id)  # it exists: only a roll-back with at= makes sense
    assert tip(any_store) == head
    r = any_store.restore(m.id, at=good)
    assert (r.body, r.title, r.version) == ("good\n", "good", 3)
    assert any_store.read(m.id).body == "good\n"


def test_restore_of_something_never_stored(any_store: Store) -> None:
    head = tip(any_store)
    with pytest.raises(NotFoundError):
        any_store.restore("mem_00000000-0000-4000-8000-000000000000")
    assert tip(any_store) == head


# -- supersede ------------------------------------------------------------------------------


def test_supersede_carries_fields_and_leaves_the_old_file(any_store: Store,
                                                         clock: FixedClock) -> None:
    old = any_store.create(
        "use unittest\n",
        title="Testing style",
        category="coding-preferences",
        tags=["testing"],
        related=[("mem_ref", "refines")],
        agent="first-agent",
    )
    old_blob = run_git(any_store.db().gitdir, "rev-parse", f"main:{old.path}").strip()
    clock.advance(hours=2)
    new = any_store.supersede(old.id, "use pytest\n", agent="second-agent", session_id="s9")
    assert new.id != old.id
    assert new.supersedes == old.id
    assert new.version == 1  # a new memory
    assert (new.title, new.category, new.tags) == ("Testing style", "coding-preferences",
                                                   ("testing",))
    assert new.related == old.related
    assert new.scope is Scope.REPO
    assert new.agent == "second-agent" and new.session_id == "s9"
    assert new.created_at == START + dt.timedelta(hours=2)
    assert run_git(any_store.db().gitdir, "rev-parse", f"main:{old.path}").strip() == old_blob
    assert any_store.read(old.id) == old
    assert f"supersedes: {old.id}\n" in show(any_store, new.path or "")
    changed = run_git(any_store.db().gitdir, "show", "--name-only", "--format=", "main").split()
    assert changed == [new.path]


def test_supersede_given_fields_override(any_store: Store) -> None:
    old = any_store.create("a", title="old title", category="patterns", tags=["x"])
    new = any_store.supersede(old.id, "b", title="new title", tags=["y"], id="my-successor")
    assert new.id == "my-successor"
    assert (new.title, new.category, new.tags) == ("new title", "patterns", ("y",))
    u = any_store.update(old.id, "old, edited")  # the old memory can still be edited in place
    assert u.version == 2
    assert any_store.read(new.id).version == 1


def test_supersede_refuses_a_taken_id(any_store: Store) -> None:
    old = any_store.create("a")
    any_store.create("b", id="exists")
    head = tip(any_store)
    with pytest.raises(AlreadyExistsError):
        any_store.supersede(old.id, "c", id="exists")
    with pytest.raises(InvalidInputError):
        any_store.supersede(old.id, "c", id=old.id)
    assert tip(any_store) == head


# -- list -----------------------------------------------------------------------------------


def test_list_filters(any_store: Store, clock: FixedClock) -> None:
    a = any_store.create("a", category="patterns", tags=["py", "test"])
    clock.advance(seconds=1)
    b = any_store.create("b", category="patterns", tags=["py"])
    clock.advance(seconds=1)
    c = any_store.create("c", category="corrections", tags=["test"])
    clock.advance(seconds=1)
    d = any_store.create("d", category="patterns", status="archived")
    clock.advance(seconds=1)
    e = any_store.supersede(b.id, "b2")

    def ids(memories: list[Memory]) -> list[str]:
        return [m.id for m in memories]

    assert ids(any_store.list()) == [a.id, c.id, e.id]  # oldest first
    assert ids(any_store.list(include_superseded=True)) == [a.id, b.id, c.id, e.id]
    assert ids(any_store.list(include_archived=True)) == [a.id, c.id, d.id, e.id]
    assert ids(any_store.list(include_superseded=True, include_archived=True)) == [
        a.id, b.id, c.id, d.id, e.id]
    assert ids(any_store.list(category="patterns")) == [a.id, e.id]
    assert ids(any_store.list(category="patterns", include_archived=True)) == [a.id, d.id, e.id]
    assert ids(any_store.list(tags=["test"])) == [a.id, c.id]
    assert ids(any_store.list(tags=["py", "test"])) == [a.id]
    assert ids(any_store.list(tags="py")) == [a.id, e.id]
    assert ids(any_store.list(category="nothing")) == []
    assert ids(any_store.list(scope="repo")) == [a.id, c.id, e.id]
    assert all(m.store_scope is Scope.REPO for m in any_store.list())


def test_list_at_an_earlier_commit(any_store: Store) -> None:
    a = any_store.create("a")
    then = tip(any_store)
    any_store.create("b")
    any_store.delete(a.id)
    assert [m.id for m in any_store.list(at=then)] == [a.id]


# -- log -----------------------------------------------------------------------------------


def test_log_filters(any_store: Store, clock: FixedClock) -> None:
    a = any_store.create("a", agent="alpha", session_id="s-a")
    clock.advance(hours=1)
    b = any_store.create("b", agent="beta")
    clock.advance(hours=1)
    any_store.update(a.id, "a2")
    clock.advance(hours=1)
    c = any_store.supersede(a.id, "a3", agent="beta")
    entries = any_store.log()
    assert [e.ops for e in entries] == [["supersede"], ["update"], ["create"], ["create"], ["init"]]
    assert entries[-1].subject == "init: gitmem store"
    assert [e.ids for e in any_store.log(agent="beta")] == [[c.id], [b.id]]
    assert [e.ids for e in any_store.log(agent="alpha")] == [[a.id]]
    assert any_store.log(agent="alpha")[0].session == "s-a"
    assert [e.ids for e in any_store.log(op="create")] == [[b.id], [a.id]]
    assert [e.ops for e in any_store.log(id=a.id)] == [["supersede"], ["update"], ["create"]]
    assert any_store.log(id=a.id)[0].supersedes == [a.id]
    window = any_store.log(since=START + dt.timedelta(minutes=30), until="2026-11-22T12:30:00Z")
    assert [e.ops for e in window] == [["update"], ["create"]]
    assert len(any_store.log(limit=2)) == 2
    assert all(e.time <= START + dt.timedelta(hours=3) for e in entries)


# -- transactions -----------------------------------------------------------------------------


def test_transaction_is_one_commit(any_store: Store) -> None:
    existing = any_store.create("existing")
    before = commit_count(any_store)
    with any_store.transaction(message="import three") as tx:
        a = any_store.create("a", title="A")
        b = tx.create("b", title="B")
        any_store.update(existing.id, "changed")
        any_store.append(a.id, "more")
        any_store.delete(b.id)
    assert commit_count(any_store) == before + 1
    assert tx.commit == tip(any_store)
    assert any_store.read(a.id).body == "a\nmore"
    assert any_store.get(b.id) is None
    assert any_store.read(existing.id).body == "changed"
    gitdir = any_store.db().gitdir
    assert run_git(gitdir, "log", "-1", "--format=%s").strip() == "import three"
    ops = run_git(gitdir, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").split()
    assert ops == ["create", "update", "append", "delete"]
    ids = run_git(gitdir, "log", "-1", "--format=%(trailers:key=Gitmem-Id,valueonly)").split()
    assert ids == [a.id, b.id, existing.id]


def test_transaction_is_all_or_nothing(any_store: Store) -> None:
    existing = any_store.create("existing")
    head = tip(any_store)
    created: list[Memory] = []
    with pytest.raises(RuntimeError, match="changed my mind"), any_store.transaction():
        created.append(any_store.create("never stored"))
        any_store.update(existing.id, "never changed")
        raise RuntimeError("changed my mind")
    assert tip(any_store) == head
    assert any_store.get(created[0].id) is None
    assert any_store.read(existing.id).body == "existing"
    # An operation that fails inside the block aborts the whole transaction too.
    with pytest.raises(NotFoundError), any_store.transaction():
        any_store.create("also never stored", id="tx-victim")
        any_store.update("missing-memory", "x")
    assert tip(any_store) == head
    assert any_store.get("tx-victim") is None


def test_reads_inside_a_transaction_see_staged_writes(any_store: Store) -> None:
    """A create and an update staged in one transaction: one commit, one version."""
    other_view = gitmem.open(any_store.db().gitdir if any_store.db().bare else any_store.path)
    with any_store.transaction():
        m = any_store.create("staged", title="staged")
        assert any_store.read(m.id).body == "staged"
        assert [x.id for x in any_store.list()] == [m.id]
        any_store.update(m.id, "staged twice")
        assert any_store.read(m.id).version == 1
        assert other_view.get(m.id) is None  # not visible outside before the commit
    assert other_view.read(m.id).body == "staged twice"
    assert other_view.read(m.id).version == 1


def test_empty_transaction_makes_no_commit(any_store: Store) -> None:
    head = tip(any_store)
    with any_store.transaction() as tx:
        pass
    assert tx.commit is None
    assert tip(any_store) == head


def test_transactions_do_not_nest(any_store: Store) -> None:
    with any_store.transaction(), pytest.raises(InvalidInputError), any_store.transaction():
        pass


def test_transaction_replays_after_another_writer(any_store: Store) -> None:
    where = any_store.db().gitdir if any_store.db().bare else any_store.path
    other = gitmem.open(where)
    shared = any_store.create("0\n")
    with any_store.transaction(message="batch") as tx:
        mine = any_store.create("mine")
        any_store.append(shared.id, "from the transaction")
        # Another writer (its own Store, as another process would have) lands first.
        theirs = other.create("theirs")
        other.append(shared.id, "from the other writer")
        their_tip = tip(other)
    assert tip(any_store) == tx.commit
    parents = run_git(any_store.db().gitdir, "log", "-1", "--format=%P").split()
    assert parents == [their_tip]
    assert any_store.read(mine.id).body == "mine"
    assert any_store.read(theirs.id).body == "theirs"
    final = any_store.read(shared.id)
    assert final.body == "0\nfrom the other writer\nfrom the transaction"
    assert final.version == 3


def test_transaction_replay_fails_cleanly_on_a_conflict(any_store: Store) -> None:
    where = any_store.db().gitdir if any_store.db().bare else any_store.path
    other = gitmem.open(where)
    m = any_store.create("v1")
    with pytest.raises(ConflictError), any_store.transaction():
        any_store.create("bystander", id="tx-bystander")
        any_store.update(m.id, "mine", expected_version=1)
        other.update(m.id, "theirs")
        their_tip = tip(other)
    assert tip(any_store) == their_tip
    assert any_store.read(m.id).body == "theirs"
    assert any_store.get("tx-bystander") is None


def test_transaction_is_per_thread(any_store: Store) -> None:
    seen: list[str | None] = []
    with any_store.transaction():
        m = any_store.create("staged")

        def look() -> None:
            found = any_store.get(m.id)
            seen.append(found.id if found else None)

        t = threading.Thread(target=look)
        t.start()
        t.join()
    assert seen == [None]
    assert any_store.exists(m.id)


# -- opening stores ------------------------------------------------------------------------------


def test_open_explicit_path(tmp_path: Path) -> None:
    first = gitmem.init(tmp_path / "s")
    m = first.create("hello")
    assert gitmem.open(tmp_path / "s").read(m.id).body == "hello"
    assert gitmem.open(str(tmp_path / "s")).read(m.id).body == "hello"
    bare = gitmem.init(tmp_path / "b.git", bare=True)
    n = bare.create("bare hello")
    assert gitmem.open(tmp_path / "b.git").read(n.id).body == "bare hello"
    with pytest.raises(StoreError):
        gitmem.open(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    run_git(tmp_path / "plain", "init", "-q")
    with pytest.raises(StoreError):
        gitmem.open(tmp_path / "plain")


def test_init_on_an_existing_store_opens_it(tmp_path: Path) -> None:
    first = gitmem.init(tmp_path / "s")
    m = first.create("kept")
    head = tip(first)
    again = gitmem.init(tmp_path / "s")
    assert again.read(m.id).body == "kept"
    assert tip(again) == head
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file.txt").write_text("something else")
    with pytest.raises(StoreError):
        gitmem.init(tmp_path / "full")


def test_open_uses_gitmem_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = gitmem.init(tmp_path / "env-store")
    m = target.create("from env")
    monkeypatch.setenv("GITMEM_DIR", str(tmp_path / "env-store"))
    monkeypatch.chdir(tmp_path)
    opened = gitmem.open()
    assert opened.path == tmp_path / "env-store"
    assert opened.read(m.id).body == "from env"
    # GITMEM_DIR wins over a project store, and naming nothing is an error, not a new store.
    run_git(tmp_path, "init", "-q", "project")
    gitmem.init_project(tmp_path / "project")
    monkeypatch.chdir(tmp_path / "project")
    assert gitmem.open().read(m.id).body == "from env"
    monkeypatch.setenv("GITMEM_DIR", str(tmp_path / "missing"))
    with pytest.raises(StoreError):
        gitmem.open()
    assert not (tmp_path / "missing").exists()


def test_open_walks_up_to_the_project_store(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    run_git(project, "init", "-q")
    made = gitmem.init_project(project)
    m = made.create("project fact")
    monkeypatch.chdir(deep)
    opened = gitmem.open()
    assert opened.path.resolve() == (project / ".gitmem").resolve()
    assert opened.read(m.id).body == "project fact"
    assert opened.scopes == [Scope.REPO]  # no user store exists yet: none is created
    assert not Path(os.environ["GITMEM_HOME"]).exists()


def test_open_creates_the_user_store_on_first_use(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["GITMEM_HOME"])
    assert not home.exists()
    elsewhere = tmp_path / "not-a-project"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    store = gitmem.open()
    assert store.path == home
    assert store.default_scope is Scope.USER
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    m = store.create("about me", category="user-facts")
    assert m.scope is Scope.USER and m.store_scope is Scope.USER
    assert "scope: user\n" in (home / "gitmem.yaml").read_text()
    # The second open finds it, and does not re-create it.
    head = tip(store)
    again = gitmem.open()
    assert again.read(m.id).body == "about me"
    assert tip(again) == head


def test_project_store_spans_repo_and_user_scopes(tmp_path: Path, clock: FixedClock,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    user = gitmem.open(clock=clock)  # creates the user store
    u = user.create("likes tabs", title="user pref")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    run_git(project, "init", "-q")
    gitmem.init_project(project, clock=clock)
    monkeypatch.chdir(project / "sub")
    store = gitmem.open(clock=clock)
    assert store.scopes == [Scope.REPO, Scope.USER]
    assert store.default_scope is Scope.REPO
    clock.advance(seconds=1)
    r = store.create("uses spaces", title="repo convention")
    clock.advance(seconds=1)
    u2 = store.create("prefers short answers", scope="user")
    assert r.store_scope is Scope.REPO and u2.store_scope is Scope.USER
    listed = {m.id: m.store_scope for m in store.list()}
    assert listed == {u.id: Scope.USER, r.id: Scope.REPO, u2.id: Scope.USER}
    assert [m.id for m in store.list(scope="user")] == [u.id, u2.id]
    assert [m.id for m in store.list(scope=Scope.REPO)] == [r.id]
    # Each write went to its own repository.
    assert gitmem.open(project / ".gitmem").get(u2.id) is None
    assert gitmem.open(os.environ["GITMEM_HOME"]).read(u2.id).body == "prefers short answers"
    # Reads and updates find a memory in whichever scope holds it.
    assert store.read(u.id).store_scope is Scope.USER
    updated = store.update(u.id, "likes tabs, strongly")
    assert updated.store_scope is Scope.USER and updated.version == 2
    assert gitmem.open(os.environ["GITMEM_HOME"]).read(u.id).version == 2
    with pytest.raises(InvalidInputError):
        store.create("x", scope="team")
    assert [e.scope for e in store.log(op="update")] == [Scope.USER]


def test_init_project_excludes_the_store(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    run_git(project, "init", "-q")
    (project / "code.py").write_text("print('hi')\n")
    store = gitmem.init_project(project)
    store.create("remember this")
    exclude = (project / ".git" / "info" / "exclude").read_text()
    assert "/.gitmem/" in exclude.splitlines()
    assert run_git(project, "status", "--porcelain", "--untracked-files=all") == "?? code.py\n"
    assert run_git(project, "check-ignore", ".gitmem/gitmem.yaml").strip() == ".gitmem/gitmem.yaml"
    # Running it again opens the same store and does not repeat the line.
    gitmem.init_project(project)
    assert (project / ".git" / "info" / "exclude").read_text().count("/.gitmem/") == 1


def test_init_project_outside_a_git_repository(tmp_path: Path) -> None:
    (tmp_path / "not-git").mkdir()
    with pytest.raises(StoreError):
        gitmem.init_project(tmp_path / "not-git")
    assert not (tmp_path / "not-git" / ".gitmem").exists()
