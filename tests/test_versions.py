"""Version chains, history, latest versions, forks, cycles, and reads at a revision or a time."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from storetools import memory_text, plant, run_git, tip

from gitmem import FixedClock, Memory, NotFoundError, Store
from gitmem.format.layout import memory_path
from gitmem.format.versions import walk_back

START = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
X = "mem_aaaaaaaa-0000-4000-8000-000000000001"
Y = "mem_bbbbbbbb-0000-4000-8000-000000000002"
Z = "mem_cccccccc-0000-4000-8000-000000000003"


def hours(n: float) -> dt.datetime:
    return START + dt.timedelta(hours=n)


def three_supersedes(store: Store, clock: FixedClock) -> list[Memory]:
    """A → B → C → D, with in-place updates along the way; one step per hour."""
    a = store.create("a1", title="A", category="patterns", agent="alpha")
    noise = store.create("unrelated")
    clock.advance(hours=1)
    store.update(a.id, "a2")
    clock.advance(hours=1)
    b = store.supersede(a.id, "b1", agent="beta", session_id="s-b")
    store.update(noise.id, "unrelated, changed")  # same hour, other file: not in the history
    clock.advance(hours=1)
    store.append(b.id, "b2", agent="gamma")
    clock.advance(hours=1)
    c = store.supersede(b.id, "c1")
    clock.advance(hours=1)
    store.update(c.id, title="C")
    clock.advance(hours=1)
    d = store.supersede(c.id, "d1", agent="delta")
    clock.advance(hours=1)
    store.update(d.id, "d2")
    return [a, b, c, d]


def test_history_across_three_supersedes(any_store: Store, clock: FixedClock) -> None:
    a, b, c, d = three_supersedes(any_store, clock)
    history = any_store.history(d.id)
    assert history.warnings == []
    steps = [(v.memory_id, v.version, v.op) for v in history]
    assert steps == [
        (a.id, 1, "create"),
        (a.id, 2, "update"),
        (b.id, 1, "supersede"),  # a superseding memory is a new memory: its own versions
        (b.id, 2, "append"),
        (c.id, 1, "supersede"),
        (c.id, 2, "update"),
        (d.id, 1, "supersede"),
        (d.id, 2, "update"),
    ]
    assert [v.time for v in history] == [hours(n) for n in range(8)]
    assert [v.author for v in history] == [
        "alpha", "Test User", "beta", "gamma", "Test User", "Test User", "delta", "Test User"]
    assert [v.agent for v in history] == [
        "alpha", None, "beta", "gamma", None, None, "delta", None]
    assert [v.memory.body if v.memory else None for v in history] == [
        "a1", "a2", "b1", "b1\nb2", "c1", "c1", "d1", "d2"]
    assert [v.memory.title if v.memory else None for v in history] == [
        "A", "A", "A", "A", "A", "C", "C", "C"]
    # Each step names the commit that made it, as git itself lists them.
    gitdir = any_store.db().gitdir
    for v in history:
        touched = run_git(gitdir, "show", "--name-only", "--format=", v.commit).split()
        assert v.memory is not None and touched == [v.memory.path]
        assert run_git(gitdir, "show", f"{v.commit}:{v.memory.path}").endswith(v.memory.body)
    as_dict = history[2].to_dict()
    assert as_dict["op"] == "supersede" and as_dict["time"] == "2026-11-22T12:00:00Z"
    assert as_dict["memory"]["supersedes"] == a.id


def test_history_of_a_middle_link_stops_there(any_store: Store, clock: FixedClock) -> None:
    a, b, _, _ = three_supersedes(any_store, clock)
    assert [(v.memory_id, v.version) for v in any_store.history(b.id)] == [
        (a.id, 1), (a.id, 2), (b.id, 1), (b.id, 2)]
    assert [v.version for v in any_store.history(a.id)] == [1, 2]


def test_version_chain_and_depth_bound(any_store: Store, clock: FixedClock) -> None:
    a, b, c, d = three_supersedes(any_store, clock)
    history = any_store.history(d.id)
    assert list(dict.fromkeys(v.memory_id for v in history)) == [a.id, b.id, c.id, d.id]
    assert history.warnings == []
    assert {v.memory_id for v in any_store.history(a.id)} == {a.id}
    short = walk_back(d, any_store.get, max_depth=2)
    assert short.ids == [b.id, c.id, d.id]
    assert len(short.warnings) == 1 and "deeper than 2" in short.warnings[0]


def test_latest_version_and_successors(any_store: Store, clock: FixedClock) -> None:
    a, b, c, d = three_supersedes(any_store, clock)
    for m in (a, b, c, d):
        assert any_store.latest_version(m.id).id == d.id
    assert any_store.latest_version(d.id).version == 2
    assert [s.id for s in any_store.successors(a.id)] == [b.id]
    assert any_store.successors(d.id) == []
    assert [m.id for m in any_store.list()] == [any_store.list()[0].id, d.id]  # noise, then D
    assert {m.id for m in any_store.list(include_superseded=True)} >= {a.id, b.id, c.id, d.id}


def test_fork_two_supersedes_of_one_memory(any_store: Store, clock: FixedClock,
                                           caplog: pytest.LogCaptureFixture) -> None:
    root = any_store.create("root")
    clock.advance(minutes=1)
    left = any_store.supersede(root.id, "left branch", agent="left")
    clock.advance(minutes=1)
    right = any_store.supersede(root.id, "right branch", agent="right")
    assert left.version == right.version == 1
    assert {s.id for s in any_store.successors(root.id)} == {left.id, right.id}
    # Both sides of the fork stay visible; the root is superseded.
    assert {m.id for m in any_store.list()} == {left.id, right.id}
    with caplog.at_level(logging.WARNING, logger="gitmem"):
        latest = any_store.latest_version(root.id)
    assert latest.id == right.id  # same version: the later updated_at wins
    assert "2 successors" in caplog.text
    # A newer version on the left side makes it the latest.
    clock.advance(minutes=1)
    any_store.update(left.id, "left, improved")
    assert any_store.latest_version(root.id).id == left.id
    # Each side's history runs back through the shared root.
    assert [v.memory_id for v in any_store.history(left.id)] == [root.id, left.id, left.id]
    assert [v.memory_id for v in any_store.history(right.id)] == [root.id, right.id]


def test_cycle_made_by_hand_ends_with_a_warning(store: Store,
                                                caplog: pytest.LogCaptureFixture) -> None:
    plant(store, memory_path(X), memory_text(X, "x\n", supersedes=Y))
    plant(store, memory_path(Y), memory_text(Y, "y\n", supersedes=X))
    with caplog.at_level(logging.WARNING, logger="gitmem"):
        history = store.history(X)
    assert {v.memory_id for v in history} == {X, Y}
    assert [v.op for v in history] == ["add", "add"]  # commits made by hand, not by gitmem
    assert any("cycle" in w for w in history.warnings)
    assert "cycle" in caplog.text
    assert any("cycle" in w for w in store.history(Y).warnings)
    assert store.latest_version(X).id in {X, Y}
    assert store.latest_version(Y).id in {X, Y}
    assert {m.id for m in store.list(include_superseded=True)} == {X, Y}


def test_self_cycle_made_by_hand(store: Store) -> None:
    plant(store, memory_path(X), memory_text(X, supersedes=X))
    history = store.history(X)
    assert [v.memory_id for v in history] == [X]
    assert any("cycle" in w for w in history.warnings)
    assert store.latest_version(X).id == X


def test_long_cycle_made_by_hand_with_git_plumbing(store: Store) -> None:
    """X → Y → Z → X, written in one commit with git's plumbing rather than a work tree."""
    gitdir = store.db().gitdir
    entries = []
    for me, prev in ((X, Z), (Y, X), (Z, Y)):
        blob = run_git(gitdir, "hash-object", "-w", "--stdin",
                       input=memory_text(me, supersedes=prev)).strip()
        entries.append((memory_path(me), blob))
    for path, blob in entries:
        run_git(store.path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    run_git(store.path, "commit", "-q", "-m", "a cycle, by plumbing")
    run_git(store.path, "checkout", "-q", "--", ".")
    for start in (X, Y, Z):
        history = store.history(start)
        assert {v.memory_id for v in history} == {X, Y, Z}
        assert any("cycle" in w for w in history.warnings)
        assert len(history) == 3
        assert store.latest_version(start).id in {X, Y, Z}


def test_supersedes_naming_a_deleted_memory(any_store: Store, clock: FixedClock) -> None:
    a = any_store.create("original", title="orig")
    clock.advance(hours=1)
    b = any_store.supersede(a.id, "replacement")
    clock.advance(hours=1)
    assert any_store.delete(a.id) is True
    history = any_store.history(b.id)
    assert [(v.memory_id, v.op, v.version) for v in history] == [
        (a.id, "create", 1), (b.id, "supersede", 1), (a.id, "delete", None)]
    assert history[2].memory is None
    assert history[0].memory is not None and history[0].memory.body == "original"
    assert any_store.history(a.id).versions[0].memory_id == a.id  # a deleted memory's own history
    with pytest.raises(NotFoundError):
        any_store.history("mem_00000000-0000-4000-8000-000000000000")


def test_history_keeps_commit_order_within_one_second(any_store: Store) -> None:
    """Agents write many times a second: steps must follow the commits, not the sort of ids."""
    a = any_store.create("a1")
    any_store.update(a.id, "a2")
    b = any_store.supersede(a.id, "b1")
    any_store.update(a.id, "a3, after it was superseded")
    any_store.append(b.id, "b2")
    any_store.delete(a.id)
    steps = [(v.memory_id, v.op) for v in any_store.history(b.id)]
    assert steps == [
        (a.id, "create"), (a.id, "update"), (b.id, "supersede"), (a.id, "update"),
        (b.id, "append"), (a.id, "delete")]
    commits = run_git(any_store.db().gitdir, "rev-list", "--reverse", "main").split()[1:]
    assert [v.commit for v in any_store.history(b.id)] == commits


def test_history_with_a_broken_predecessor(store: Store) -> None:
    """A predecessor that cannot be read is reported, not fatal."""
    plant(store, memory_path(X), "---\nid: [broken\n---\nbody\n")
    plant(store, memory_path(Y), memory_text(Y, supersedes=X))
    plant(store, memory_path(Z), memory_text(Z, supersedes="../../etc/passwd"))
    history = store.history(Y)
    assert Y in {v.memory_id for v in history}
    assert history.warnings
    history_z = store.history(Z)
    assert [v.memory_id for v in history_z] == [Z]
    assert history_z.warnings


def test_hand_edits_show_in_history(store: Store) -> None:
    m = store.create("by gitmem\n")
    text = (store.path / (m.path or "")).read_text()
    plant(store, m.path or "", text.replace("by gitmem", "by hand"), "fix a typo")
    history = store.history(m.id)
    assert [v.op for v in history] == ["create", "edit"]
    assert history[1].author == "Test User" and history[1].agent is None
    assert history[1].memory is not None and history[1].memory.body == "by hand\n"


# -- at= -----------------------------------------------------------------------------------


@pytest.fixture
def timeline(any_store: Store, clock: FixedClock) -> tuple[Store, Memory, list[str]]:
    """One memory written at 11:00, 12:00 and 13:00 (v1..v3); returns the commit ids."""
    clock.advance(hours=1)
    m = any_store.create("v1")
    commits = [tip(any_store) or ""]
    for n in (2, 3):
        clock.advance(hours=1)
        any_store.update(m.id, f"v{n}")
        commits.append(tip(any_store) or "")
    return any_store, m, commits


def test_at_commit_id(timeline: tuple[Store, Memory, list[str]]) -> None:
    store, m, commits = timeline
    for n, commit in enumerate(commits, start=1):
        assert store.read(m.id, at=commit).body == f"v{n}"
        assert store.read(m.id, at=commit[:10]).body == f"v{n}"
    init = run_git(store.db().gitdir, "rev-list", "--max-parents=0", "main").strip()
    assert store.get(m.id, at=init) is None
    assert store.list(at=init) == []


def test_at_branch_head_and_ancestry(timeline: tuple[Store, Memory, list[str]]) -> None:
    store, m, _ = timeline
    assert store.read(m.id, at="main").body == "v3"
    assert store.read(m.id, at="HEAD").body == "v3"
    assert store.read(m.id, at="HEAD~1").body == "v2"
    assert store.read(m.id, at="main~2").body == "v1"
    assert store.read(m.id, at="HEAD^^").body == "v1"
    assert store.get(m.id, at="HEAD~3") is None
    gitdir = store.db().gitdir
    run_git(gitdir, "branch", "before-v3", "HEAD~1")
    run_git(gitdir, "tag", "-a", "-m", "first version", "v1-tag", "HEAD~2")
    assert store.read(m.id, at="before-v3").body == "v2"
    assert store.read(m.id, at="v1-tag").body == "v1"
    assert store.read(m.id, at="refs/tags/v1-tag").version == 1


def test_at_date_and_time(timeline: tuple[Store, Memory, list[str]]) -> None:
    store, m, _ = timeline
    assert store.read(m.id, at=hours(1)).body == "v1"
    assert store.read(m.id, at=hours(1.5)).body == "v1"
    assert store.read(m.id, at=hours(2)).body == "v2"
    assert store.read(m.id, at="2026-11-22T12:59:59Z").body == "v2"
    assert store.read(m.id, at="2026-11-22T13:30:00+01:00").body == "v2"  # 12:30Z, in +01:00
    assert store.read(m.id, at="2026-11-22T14:00:00+01:00").body == "v3"
    assert store.read(m.id, at="2026-11-22T13:00:00Z").body == "v3"
    assert store.read(m.id, at=dt.datetime(2026, 11, 22, 12, 30)).body == "v2"  # naive: UTC
    assert store.read(m.id, at=dt.date(2026, 11, 23)).body == "v3"
    assert store.get(m.id, at=hours(0.5)) is None  # the store existed, the memory not yet
    assert store.list(at=hours(0.5)) == []
    assert store.get(m.id, at="2020-01-01") is None  # before the store existed
    assert [x.body for x in store.list(at=hours(2))] == ["v2"]
