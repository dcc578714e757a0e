"""The derived SQLite index against real repositories: its answers equal a scan of git.

Every check here asks the same store twice, once served from the index and once
with ``use_index`` off (the reference implementation walks git), and compares
the answers whole: ids, order, every field, scopes, versions, commits, ops and
content. The index is then abused the ways it will be in the wild (history
rewritten, merges made with the git binary, files deleted, corrupted or left
by an older gitmem, several processes at once) and must answer the same.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import logging
import multiprocessing
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from storetools import memory_text, plant, plant_symlink, run_git, tip

import gitmem
from gitmem import FixedClock, GitmemError, Memory, Store
from gitmem.format.layout import memory_path, new_id
from gitmem.store.discovery import init_project_store, open_store
from gitmem.store.index_rows import IndexStats
from gitmem.store.index_schema import SCHEMA_VERSION

SPAWN = multiprocessing.get_context("spawn")
CATEGORIES = ["patterns", "corrections", "user-facts"]
TAGS = ["alpha", "beta", "gamma", "delta"]
BROKEN = "---\nid: [unclosed\n---\nbody\n"


# -- comparing the index with a scan of git ----------------------------------------------


def outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A call's result, or the error it raised (type and message), so both can be compared."""
    try:
        return ("ok", call(*args, **kwargs))
    except GitmemError as exc:
        return ("error", type(exc).__name__, str(exc))


def mem(m: Memory | None) -> Any:
    """Everything a caller sees of a memory (equality ignores the scope it came from)."""
    if m is None:
        return None
    return (m.id, str(m.store_scope), m)


def listing(store: Store, **filters: Any) -> Any:
    return [mem(m) for m in store.list(**filters)]


def successors(store: Store, memory_id: str) -> Any:
    return [mem(m) for m in store.successors(memory_id)]


def latest(store: Store, memory_id: str) -> Any:
    return mem(store.latest_version(memory_id))


def hist(store: Store, memory_id: str) -> Any:
    h = store.history(memory_id)
    rows = [
        (v.memory_id, v.version, v.commit, v.time, v.author, v.agent, v.op, mem(v.memory))
        for v in h
    ]
    return rows, h.warnings


def answers(store: Store, ids: list[str], *, use_index: bool, few: bool = False) -> dict[str, Any]:
    """Every query the index serves, asked every way, keyed by what was asked.

    The filters come from the fixed vocabulary the tests write with (so both sides
    ask the same questions); ``few`` asks fewer: for big stores, and where the point is
    that the index recovers rather than how it answers each filter.
    """
    categories: list[str | None] = [None, *CATEGORIES[:2], "no-such-category"]
    tag_sets: list[tuple[str, ...] | None] = [None, ("alpha",), ("beta",), ("alpha", "beta"),
                                              ("no-such-tag",)]
    scopes: list[str | None] = [None, *map(str, store.scopes)] if len(store.scopes) > 1 else [None]
    if few:
        categories, tag_sets = categories[:2], tag_sets[:2]
    saved = store.use_index
    store.use_index = use_index
    try:
        out: dict[str, Any] = {}
        for scope, category, tag_set, sup, arch in itertools.product(
            scopes, categories, tag_sets, (False, True), (False, True)
        ):
            key = f"list scope={scope} category={category} tags={tag_set} sup={sup} arch={arch}"
            out[key] = outcome(listing, store, scope=scope, category=category, tags=tag_set,
                               include_superseded=sup, include_archived=arch)
        for scope in scopes:
            out[f"problems scope={scope}"] = [
                (p.path, p.message, str(p.scope)) for p in store.problems(scope=scope)
            ]
        for memory_id in [*ids, "mem_never-created"]:
            out[f"successors {memory_id}"] = outcome(successors, store, memory_id)
            out[f"latest_version {memory_id}"] = outcome(latest, store, memory_id)
            out[f"history {memory_id}"] = outcome(hist, store, memory_id)
        return out
    finally:
        store.use_index = saved


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key


def assert_matches_scan(
    store: Store, ids: list[str] | None = None, *, few: bool = False
) -> dict[str, Any]:
    """The index's answers equal the scan's; returns them (for comparing with a rebuild)."""
    if ids is None:
        ids = sorted({m.id for m in store.list(include_superseded=True, include_archived=True)})
    from_index = answers(store, ids, use_index=True, few=few)
    for scope in store.scopes:
        assert store.index(scope).meta().get("commit") == tip(store, scope)
    assert_same(from_index, answers(store, ids, use_index=False, few=few))
    return from_index


# -- random stores ------------------------------------------------------------------------

keys = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.dates())
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.dates(),
    st.datetimes(
        min_value=dt.datetime(1900, 1, 1), timezones=st.just(dt.UTC), allow_imaginary=False
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)
    ),
    max_leaves=5,
)
extras = st.dictionaries(st.sampled_from(["layer", "project", "note", "x-data"]), values,
                         max_size=2)
tag_lists = st.lists(st.sampled_from(TAGS), max_size=3)
categories = st.sampled_from([None, *CATEGORIES])
targets = st.integers(0, 1000)

simple_ops = st.one_of(
    st.tuples(st.just("create"), categories, tag_lists, extras, targets),
    st.tuples(st.just("update"), targets, categories, tag_lists, extras),
    st.tuples(st.just("append"), targets),
    st.tuples(st.just("supersede"), targets, categories, tag_lists),
    st.tuples(st.just("delete"), targets),
    st.tuples(st.just("restore"), targets),
    st.tuples(st.just("archive"), targets, st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.000001, 1.0, 86400.0])),
    st.tuples(st.just("query")),
)
hand_ops = st.one_of(
    st.tuples(st.just("plant-broken")),
    st.tuples(st.just("fix"), targets),
    st.tuples(st.just("plant-stray")),
    st.tuples(st.just("hand-delete"), targets),
    st.tuples(st.just("hand-edit"), targets),
    st.tuples(st.just("merge"), st.integers(0, 8), targets, st.integers(-48, 48)),
)
ops = st.one_of(
    simple_ops,
    simple_ops,
    st.tuples(st.just("tx"), targets, st.lists(simple_ops, min_size=1, max_size=3)),
    hand_ops,
)


class World:
    """A store under random operations, and every id it has handed out."""

    def __init__(self, store: Store, clock: FixedClock, hands: bool) -> None:
        self.store = store
        self.clock = clock
        self.hands = hands
        self.ids: list[str] = []
        self.broken: list[str] = []
        self.counter = 0

    def pick(self, n: int) -> str | None:
        return self.ids[n % len(self.ids)] if self.ids else None

    def apply(self, op: tuple[Any, ...], scope: str | None = None) -> None:
        # A refused operation (gone, exists, wrong scope) writes nothing; go on.
        with contextlib.suppress(GitmemError):
            self._apply(op, scope)

    def _apply(self, op: tuple[Any, ...], scope: str | None) -> None:
        store = self.store
        kind = op[0]
        self.counter += 1
        body = f"body {self.counter}\n"
        if kind == "create":
            _, category, tags, extra, n = op
            where = scope or str(store.scopes[n % len(store.scopes)])
            m = store.create(body, title=f"t{self.counter}", category=category, tags=tags,
                             extra=extra, scope=where, agent=f"agent-{n % 3}")
            self.ids.append(m.id)
        elif kind == "update" and self.ids:
            _, n, category, tags, extra = op
            store.update(self.pick(n), body if n % 2 else None, category=category, tags=tags,
                         extra=extra)
        elif kind == "append" and self.ids:
            store.append(self.pick(op[1]), f"line {self.counter}")
        elif kind == "supersede" and self.ids:
            _, n, category, tags = op
            m = store.supersede(self.pick(n), body, category=category, tags=tags or None)
            self.ids.append(m.id)
        elif kind == "delete" and self.ids:
            store.delete(self.pick(op[1]))
        elif kind == "restore" and self.ids:
            store.restore(self.pick(op[1]))
        elif kind == "archive" and self.ids:
            store.update(self.pick(op[1]), status="archived" if op[2] else "active")
        elif kind == "advance":
            self.clock.advance(seconds=op[1])
        elif kind == "query":
            store.list()
        elif kind == "tx":
            where = str(store.scopes[op[1] % len(store.scopes)])
            with store.transaction(scope=where):
                for inner in op[2]:
                    self.apply(inner, where)
        elif not self.hands or scope is not None:
            return  # hand edits go through a work tree, never inside a transaction
        elif kind == "plant-broken":
            memory_id = new_id()
            plant(store, memory_path(memory_id), BROKEN)
            self.broken.append(memory_id)
            self.ids.append(memory_id)
        elif kind == "fix" and self.broken:
            memory_id = self.broken.pop(op[1] % len(self.broken))
            plant(store, memory_path(memory_id), memory_text(memory_id, f"fixed {self.counter}\n"))
        elif kind == "plant-stray":
            plant(store, f"memories/zz/stray-{self.counter}.txt", "not a memory\n")
        elif kind in ("hand-delete", "hand-edit") and self.ids:
            memory_id = self.pick(op[1])
            assert memory_id is not None
            path = memory_path(memory_id)
            if not (store.path / path).exists():
                return
            if kind == "hand-delete":
                run_git(store.path, "rm", "-q", "--", path)
                run_git(store.path, "commit", "-q", "-m", "hand delete")
            else:
                text = (store.path / path).read_text() + f"edited by hand {self.counter}\n"
                plant(store, path, text)
        elif kind == "merge":
            self.merge(*op[1:])

    def merge(self, back: int, n: int, hours: int) -> None:
        """A branch from an older commit, one hand commit on it dated ``hours`` from the
        store's clock, merged into main with the git binary."""
        root = self.store.path
        depth = int(run_git(root, "rev-list", "--count", "--first-parent", "main"))
        branch = f"side-{self.counter}"
        run_git(root, "checkout", "-q", "-b", branch, f"main~{back % depth}")
        memory_id = self.pick(n)
        with dated(self.clock.now() + dt.timedelta(hours=hours)):
            if memory_id is not None and (root / memory_path(memory_id)).exists():
                path = memory_path(memory_id)
                plant(self.store, path, (root / path).read_text() + f"side {self.counter}\n")
            else:
                memory_id = new_id()
                plant(self.store, memory_path(memory_id), memory_text(memory_id))
                self.ids.append(memory_id)
            run_git(root, "checkout", "-q", "main")
            merged = run_git(root, "merge", "-q", "--no-ff", "-X", "theirs", "-m", "merge",
                             branch, check=False)
        if run_git(root, "status", "--porcelain"):
            run_git(root, "merge", "--abort")  # a modify/delete conflict: leave it unmerged
        del merged


@contextlib.contextmanager
def dated(when: dt.datetime) -> Iterator[None]:
    """The git binary's commits inside the block are authored and committed at ``when``."""
    saved = {k: os.environ.get(k) for k in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")}
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S+0000")
    os.environ.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def make_store(kind: str, root: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch) -> Store:
    if kind == "worktree":
        return gitmem.init(root / "store", clock=clock)
    if kind == "bare":
        return gitmem.init(root / "bare.git", bare=True, clock=clock)
    assert kind == "two-scopes"
    project = root / "project"
    pygit2.init_repository(str(project), initial_head="main")
    init_project_store(project, clock=clock)
    monkeypatch.setenv("GITMEM_HOME", str(root / "user-store"))
    gitmem.init(root / "user-store", scope="user", clock=clock)
    return open_store(cwd=project, clock=clock)


@settings(
    max_examples=int(os.environ.get("GITMEM_INDEX_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kind=st.sampled_from(["worktree", "bare", "two-scopes"]),
       steps=st.lists(ops, min_size=1, max_size=14))
@example(  # one memory changed on both sides of a merge, the side's commit the older
    kind="worktree",
    steps=[("create", None, [], {}, 0), ("append", 0), ("append", 0), ("query",),
           ("merge", 2, 0, -1)],
)
@example(  # deleted on main; a side branch from before holds an older, broken version
    kind="worktree",
    steps=[("create", None, [], {}, 0), ("plant-broken",), ("fix", 0), ("update", 1, None, [], {}),
           ("hand-delete", 1), ("plant-broken",), ("merge", 4, 0, 0)],
)
@example(  # a memory and its successor written by one commit
    kind="two-scopes",
    steps=[("create", None, [], {}, 1), ("tx", 1, [("create", None, [], {}, 0),
                                                  ("supersede", 1, None, [])])],
)
@pytest.mark.slow
def test_random_stores_index_equals_scan(
    kind: str,
    steps: list[tuple[Any, ...]],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FixedClock("2026-11-22T10:00:00Z")
    store = make_store(kind, tmp_path_factory.mktemp("random"), clock, monkeypatch)
    world = World(store, clock, hands=kind != "bare")
    for step in steps:
        world.apply(step)
    incremental = assert_matches_scan(store, world.ids)
    # A rebuild from scratch answers exactly what the caught-up index did.
    for stats in store.reindex():
        assert stats.rebuilt
    assert_same(answers(store, world.ids, use_index=True), incremental)


# -- the use_index switch really switches ---------------------------------------------


def test_scan_path_never_touches_the_index(any_store: Store) -> None:
    """The reference answers come from git alone, else comparing them would prove nothing."""
    any_store.use_index = False
    a = any_store.create("a\n", title="A", category="patterns", tags=["alpha"])
    b = any_store.supersede(a.id, "b\n")
    any_store.delete(a.id)
    assert [m.id for m in any_store.list(include_superseded=True)] == [b.id]
    assert any_store.latest_version(a.id).id == b.id
    assert [v.op for v in any_store.history(b.id)] == ["create", "supersede", "delete"]
    assert any_store.problems() == []
    assert not any_store.index().path.exists()
    off = gitmem.open(any_store.db().gitdir if any_store.db().bare else any_store.path)
    off.use_index = False
    off.list()
    assert not off.index().path.exists()
    assert any_store.index().path.parent == any_store.db().gitdir / "gitmem"


def test_store_constructor_switch(store: Store) -> None:
    off = Store(list(store._backends.values()), use_index=False)
    off.create("x\n")
    assert len(off.list()) == 1
    assert not store.index().path.exists()
    assert len(store.list()) == 1
    assert store.index().path.exists()


# -- catching up -------------------------------------------------------------------------


def test_catch_up_applies_only_the_new_commits(any_store: Store, clock: FixedClock) -> None:
    store = any_store
    a = store.create("a\n", title="A", category="patterns", tags=["alpha"])
    clock.advance(seconds=1)
    b = store.create("b\n", title="B")
    index = store.index()
    assert [m.id for m in store.list()] == [a.id, b.id]
    assert index.meta().get("commit") == tip(store)
    assert index.catch_up() is None  # nothing new

    clock.advance(seconds=5)
    store.update(a.id, "a2\n", tags=["beta"])
    store.delete(b.id)
    c = store.supersede(a.id, "a3\n", category="corrections")
    store.restore(b.id)
    store.append(b.id, "more")
    stats = index.catch_up()
    assert isinstance(stats, IndexStats)
    assert not stats.rebuilt
    assert stats.applied_commits == 2  # restore read the index, caught up to the three before
    assert stats.commit == tip(store) == index.meta().get("commit")
    assert stats.memories == 3
    assert index.catch_up() is None

    assert [m.id for m in store.list()] == [b.id, c.id]
    assert store.latest_version(a.id).id == c.id
    assert [(v.memory_id, v.op, v.version) for v in store.history(c.id)] == [
        (a.id, "create", 1), (a.id, "update", 2), (c.id, "supersede", 1)
    ]
    assert [(v.op, v.version) for v in store.history(b.id)] == [
        ("create", 1), ("delete", None), ("restore", 2), ("append", 3)
    ]
    assert_matches_scan(store, [a.id, b.id, c.id])


def test_every_query_catches_up_first(any_store: Store) -> None:
    store = any_store
    a = store.create("a\n")
    assert store.successors(a.id) == []
    b = store.supersede(a.id, "b\n")
    assert [m.id for m in store.successors(a.id)] == [b.id]
    c = store.supersede(b.id, "c\n")
    assert store.latest_version(a.id).id == c.id
    store.update(c.id, status="archived")
    assert store.list() == []
    assert [m.id for m in store.list(include_archived=True)] == [c.id]
    assert len(store.history(c.id)) == 4
    store.delete(c.id)
    assert [v.op for v in store.history(c.id)][-1] == "delete"
    assert store.index().meta().get("commit") == tip(store)


def test_reindex_rebuilds_and_reports_progress(any_store: Store) -> None:
    store = any_store
    ids = [store.create(f"{i}\n", tags=["alpha"]).id for i in range(4)]
    store.delete(ids[0])
    before = assert_matches_scan(store, ids)
    calls: list[tuple[int, int]] = []
    [stats] = store.reindex(progress=lambda done, total: calls.append((done, total)))
    commits = int(run_git(store.db().gitdir, "rev-list", "--count", "main"))
    assert stats.rebuilt
    assert stats.applied_commits == commits == 6
    assert stats.memories == 3
    assert stats.versions == 5  # four creates and a delete; the init commit holds no memory
    assert stats.commit == tip(store)
    assert calls and calls[-1] == (commits, commits)
    assert calls == sorted(calls)
    assert_same(answers(store, ids, use_index=True), before)
    # A rebuild without a progress callback works as well.
    [again] = store.reindex()
    assert again.rebuilt and again.memories == 3


def test_get_and_count_come_from_the_caught_up_index(
    any_store: Store, clock: FixedClock
) -> None:
    a = any_store.create("a\n")
    clock.advance(days=10)
    b = any_store.create("b\n")
    clock.advance(days=10)
    c = any_store.supersede(b.id, "c\n")
    index = any_store.index()
    assert index.count() == 3
    clock.advance(days=10)
    any_store.update(a.id, "a2\n")
    any_store.delete(c.id)
    assert index.count() == 2
    assert index.memory(a.id) == any_store.read(a.id)
    assert index.memory(c.id) is None
    assert index.memory("mem_never-created") is None


def test_transaction_reads_its_own_writes_then_the_index_catches_up(store: Store) -> None:
    a = store.create("a\n", category="patterns")
    store.list()
    with store.transaction() as tx:
        b = tx.create("b\n", category="patterns")
        c = tx.supersede(a.id, "c\n")
        # Inside the block reads see the staged writes (the index cannot).
        assert {m.id for m in store.list(category="patterns")} == {b.id, c.id}
        assert store.latest_version(a.id).id == c.id
    assert store.index().meta().get("commit") != tip(store)
    assert {m.id for m in store.list(category="patterns")} == {b.id, c.id}
    # One commit with two ops: the history rows of both ids come from it.
    rows = [(v.memory_id, v.op) for v in store.history(c.id)]
    assert rows[0] == (a.id, "create")
    assert {r[0] for r in rows[1:]} == {c.id}
    assert_matches_scan(store, [a.id, b.id, c.id])


# -- hand edits: broken files, renames, merges, rewritten history -------------------------


def test_hand_committed_broken_files_are_problems_until_fixed(store: Store) -> None:
    good = store.create("good\n")
    broken_id = new_id()
    path = memory_path(broken_id)
    plant(store, path, BROKEN)
    plant(store, "memories/zz/notes.txt", "not a memory\n")
    plant(store, memory_path(new_id()), b"\xff\xfe not utf-8 \x00\n")
    problems = {p.path for p in store.problems()}
    assert path in problems and "memories/zz/notes.txt" in problems
    assert len(problems) == 3
    assert [m.id for m in store.list()] == [good.id]
    assert_matches_scan(store, [good.id, broken_id])

    plant(store, path, memory_text(broken_id, "fixed\n"), message="fix it")
    assert path not in {p.path for p in store.problems()}
    assert {m.id for m in store.list()} == {good.id, broken_id}
    assert [v.op for v in store.history(broken_id)] == ["add", "edit"]
    run_git(store.path, "rm", "-q", "memories/zz/notes.txt")
    run_git(store.path, "commit", "-q", "-m", "tidy")
    assert len(store.problems()) == 1
    assert_matches_scan(store, [good.id, broken_id])


def test_odd_tree_entries_under_memories(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """What a person's git can put there: a link, files outside the shard layout, the
    executable bit, a name that is not UTF-8."""
    # The warnings would name the Latin-1 path, which pytest-xdist cannot send back.
    caplog.set_level(logging.CRITICAL, logger="gitmem")
    store.create("a\n")
    plant_symlink(store, memory_path(new_id()), "../../gitmem.yaml")
    plant(store, "memories/README.md", "about this store\n")
    plant(store, "memories/ab/cd/deep.md", "too deep\n")
    executable = new_id()
    path = memory_path(executable)
    plant(store, path, memory_text(executable))
    (store.path / path).chmod(0o755)
    run_git(store.path, "add", path)
    run_git(store.path, "commit", "-q", "-m", "chmod +x")
    (store.path / "memories" / "zz").mkdir()
    with open(os.fsencode(store.path / "memories" / "zz") + b"/\xff\xfe.md", "wb") as fh:
        fh.write(b"x\n")
    run_git(store.path, "add", "memories/zz")
    run_git(store.path, "commit", "-q", "-m", "a name in Latin-1")
    assert len(store.problems()) == 3
    assert [v.op for v in store.history(executable)] == ["add"]  # a mode is not a version
    assert_matches_scan(store)
    run_git(store.path, "rm", "-q", "-r", "memories/zz")
    run_git(store.path, "commit", "-q", "-m", "gone")
    assert len(store.problems()) == 2
    assert_matches_scan(store)


def test_a_memory_replaced_by_a_link_is_gone_with_its_history_kept(store: Store) -> None:
    a = store.create("a\n")
    path = memory_path(a.id)
    run_git(store.path, "rm", "-q", path)
    plant_symlink(store, path, "../../gitmem.yaml")
    assert store.list() == [] and store.problems() == []
    assert [(v.op, v.memory is not None) for v in store.history(a.id)] == [
        ("create", True), ("remove", False)
    ]
    assert_matches_scan(store, [a.id])


@pytest.mark.parametrize(
    "front_matter",
    [
        "version: 99999999999999999999999\n",  # beyond SQLite's 64-bit integers
        "extra_map: {1: one, 2020-01-02: two, true: yes}\n",
        "extra_when: 2020-01-02T03:04:05.123456+02:00\n",
        'extra_tagged: {"$gitmem": date, v: "2020-01-01"}\n',
        "created_at: 9999-12-31T23:59:59.999999Z\n",
        "created_at: 0001-01-01T00:00:00Z\n",
    ],
)
def test_hand_written_front_matter_reads_back_exactly(store: Store, front_matter: str) -> None:
    memory_id = new_id()
    lines = memory_text(memory_id).splitlines(keepends=True)
    key = front_matter.split(":", 1)[0]
    lines = [line for line in lines if not line.startswith(key + ":")]
    lines.insert(1, front_matter)
    plant(store, memory_path(memory_id), "".join(lines))
    store.create("beside it\n")
    assert_matches_scan(store, [memory_id])


def test_created_at_order_is_exact_to_the_microsecond(store: Store) -> None:
    """Ties broken by id, so the order must never come from a rounded timestamp."""
    ids = sorted(new_id() for _ in range(3))
    stamps = ["9999-01-01T00:00:00.000003Z", "9999-01-01T00:00:00.000002Z",
              "9999-01-01T00:00:00.000001Z"]
    for memory_id, stamp in zip(ids, stamps, strict=True):
        text = memory_text(memory_id).replace("created_at: 2026-11-22T09:00:00Z",
                                              f"created_at: {stamp}")
        plant(store, memory_path(memory_id), text)
    assert [m.id for m in store.list()] == list(reversed(ids))
    assert_matches_scan(store, ids)


def git_mv(store: Store, old: str, new: str, text: str | None = None) -> None:
    (store.path / new).parent.mkdir(parents=True, exist_ok=True)
    run_git(store.path, "mv", old, new)
    if text is not None:
        (store.path / new).write_text(text)
        run_git(store.path, "add", new)
    run_git(store.path, "commit", "-q", "-m", f"move {old}")


@pytest.mark.slow
def test_renames_by_hand(store: Store) -> None:
    a = store.create("a\n", title="A")
    b = store.create("b\n", title="B")
    store.list()
    index = store.index()
    # A real rename: the file moves and its id changes with it.
    renamed = new_id()
    text = (store.path / memory_path(a.id)).read_text().replace(a.id, renamed)
    git_mv(store, memory_path(a.id), memory_path(renamed), text)
    # A move that keeps the old id inside: the path and the id disagree.
    stray = new_id()
    git_mv(store, memory_path(b.id), memory_path(stray))
    stats = index.catch_up()
    assert stats is not None and not stats.rebuilt and stats.applied_commits == 2
    assert [m.id for m in store.list()] == [renamed]
    assert store.get(a.id) is None
    assert [p.path for p in store.problems()] == [memory_path(stray)]
    assert [v.op for v in store.history(renamed)] == ["add"]
    assert [v.op for v in store.history(a.id)] == ["create", "remove"]
    assert_matches_scan(store, [a.id, b.id, renamed, stray])
    # Moved back where it belongs: no problem any more.
    git_mv(store, memory_path(stray), memory_path(b.id))
    assert store.problems() == []
    assert sorted(m.id for m in store.list()) == sorted([b.id, renamed])
    # Into the wrong shard: not at a memory path.
    wrong = f"memories/zz/{b.id}.md"
    git_mv(store, memory_path(b.id), wrong)
    assert [p.path for p in store.problems()] == [wrong]
    assert_matches_scan(store, [a.id, b.id, renamed, stray])


def at_time(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """Date the git binary's next commits (author and committer)."""
    monkeypatch.setenv("GIT_AUTHOR_DATE", when)
    monkeypatch.setenv("GIT_COMMITTER_DATE", when)


@pytest.mark.parametrize("side_first", [False, True], ids=["side-later", "side-earlier"])
def test_merges_bring_version_rows_from_both_sides(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, side_first: bool
) -> None:
    """A branch made and merged with the git binary; the index walks both parents."""
    a = store.create("a\n", title="A")
    clock.advance(seconds=1)
    b = store.create("b\n", title="B")
    store.list()
    index = store.index()
    base = tip(store)
    side_time = "2026-11-22T09:00:00Z" if side_first else "2026-11-23T09:00:00Z"
    clock.advance(hours=3)  # main's own commit lands between the two

    run_git(store.path, "checkout", "-q", "-b", "side")
    at_time(monkeypatch, side_time)
    plant(store, memory_path(a.id), (store.path / memory_path(a.id)).read_text() + "side\n",
          message="side: edit a")
    side_a = run_git(store.path, "rev-parse", "HEAD").strip()
    c_id = new_id()
    side_c = plant(store, memory_path(c_id), memory_text(c_id, "c\n"), message="side: add c")
    run_git(store.path, "checkout", "-q", "main")

    main_b = store.update(b.id, "b2\n")
    main_commit = tip(store)
    assert [m.id for m in store.list()] == [a.id, b.id]  # the index is at main's commit
    assert index.meta().get("commit") == main_commit

    at_time(monkeypatch, "2026-11-24T09:00:00Z")
    run_git(store.path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = tip(store)
    stats = index.catch_up()
    assert stats is not None and not stats.rebuilt
    assert stats.applied_commits == 3  # two from the side, and the merge
    assert index.meta().get("commit") == merge

    assert [m.id for m in store.list()] == [c_id, a.id, b.id]
    assert [v.commit for v in store.history(a.id)][-1] == side_a
    assert [v.commit for v in store.history(c_id)] == [side_c]
    assert [v.commit for v in store.history(b.id)][-1] == main_commit
    assert store.read(b.id) == main_b
    assert base is not None and merge not in {v.commit for v in store.history(a.id)}
    assert_matches_scan(store, [a.id, b.id, c_id])


@pytest.mark.parametrize("side_time", ["2026-11-23T09:00:00Z", "2026-11-22T11:00:00Z"],
                         ids=["side-later", "side-earlier"])
def test_a_conflicted_merge_resolved_by_hand_is_a_version(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, side_time: str
) -> None:
    """Both sides change one memory; with the side's commit older than main's, a full walk
    and a catch-up meet the two in different orders, and history must not care."""
    a = store.create("a\n", title="A")
    path = memory_path(a.id)
    store.list()
    run_git(store.path, "checkout", "-q", "-b", "side")
    at_time(monkeypatch, side_time)
    plant(store, path, (store.path / path).read_text() + "from side\n", message="side")
    run_git(store.path, "checkout", "-q", "main")
    clock.advance(hours=3)
    store.append(a.id, "from main")
    store.list()
    at_time(monkeypatch, "2026-11-24T09:00:00Z")
    # Without gitmem's merge driver (a clone that never registered it): git's text merge
    # conflicts, and a person resolves it by hand.
    run_git(store.path, "config", "--remove-section", "merge.gitmem", check=False)
    run_git(store.path, "merge", "-q", "-m", "merge side", "side", check=False)
    resolved = (store.path / path).read_text()
    resolved = "".join(
        line for line in resolved.splitlines(keepends=True)
        if not line.startswith(("<<<<<<<", "=======", ">>>>>>>"))
    )
    (store.path / path).write_text(resolved)
    run_git(store.path, "add", path)
    run_git(store.path, "commit", "-q", "--no-edit")
    merge = tip(store)
    rows = store.history(a.id)
    assert rows[-1].commit == merge and rows[-1].op == "edit"
    assert "from side" in rows[-1].memory.body and "from main" in rows[-1].memory.body  # type: ignore[union-attr]
    assert len(rows) == 4
    assert_matches_scan(store, [a.id])


@pytest.mark.slow
@pytest.mark.parametrize("rewrite", ["reset", "amend", "reset-and-prune"])
def test_rewritten_history_rebuilds(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, rewrite: str
) -> None:
    a = store.create("a\n", title="A", tags=["alpha"])
    clock.advance(seconds=1)
    b = store.create("b\n", title="B")
    keep = tip(store)
    clock.advance(seconds=30)
    c = store.supersede(a.id, "c\n")
    store.delete(b.id)
    assert [m.id for m in store.list()] == [c.id]
    index = store.index()
    gone = index.meta().get("commit")
    if rewrite == "amend":
        at_time(monkeypatch, "2026-11-25T09:00:00Z")
        run_git(store.path, "commit", "-q", "--amend", "-m", "delete b, reworded")
    else:
        run_git(store.path, "reset", "-q", "--hard", str(keep))
    if rewrite == "reset-and-prune":
        (store.db().gitdir / "ORIG_HEAD").unlink()
        run_git(store.path, "reflog", "expire", "--expire=now", "--all")
        run_git(store.path, "gc", "-q", "--prune=now")
        kind = run_git(store.path, "cat-file", "-t", str(gone), check=False)
        assert kind == "", "the old tip should be gone from the object store"
    stats = index.catch_up()
    assert stats is not None and stats.rebuilt
    assert index.meta().get("commit") == tip(store)
    ids = [a.id, b.id, c.id]
    assert_matches_scan(store, ids)
    if rewrite == "amend":
        assert [m.id for m in store.list()] == [c.id]
        assert [v.commit for v in store.history(b.id)][-1] == tip(store)
    else:
        assert [m.id for m in store.list()] == [a.id, b.id]
        assert store.successors(a.id) == []
        assert gone not in {v.commit for i in (a.id, b.id) for v in store.history(i)}
    # Writing on the rewritten branch is an ordinary catch-up again.
    store.create("d\n")
    again = index.catch_up()
    assert again is not None and not again.rebuilt and again.applied_commits == 1
    assert_matches_scan(store, ids)


def test_bare_store_branch_moved_back(bare_store: Store) -> None:
    a = bare_store.create("a\n")
    first = tip(bare_store)
    bare_store.update(a.id, "a2\n")
    assert bare_store.list()[0].body == "a2\n"
    run_git(bare_store.db().gitdir, "update-ref", "refs/heads/main", str(first))
    assert bare_store.list()[0].body == "a\n"
    assert [v.version for v in bare_store.history(a.id)] == [1]
    assert_matches_scan(bare_store, [a.id])


# -- the index lost, broken or out of date ----------------------------------------------


def db_files(store: Store) -> list[Path]:
    path = store.index().path
    return [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]


def filled(store: Store, clock: FixedClock) -> list[str]:
    a = store.create("a\n", title="A", category="patterns", tags=["alpha"])
    clock.advance(seconds=1)
    b = store.create("b\n", title="B", tags=["beta"])
    c = store.supersede(a.id, "c\n")
    store.delete(b.id)
    assert_matches_scan(store, [a.id, b.id, c.id], few=True)
    return [a.id, b.id, c.id]


def reopen(store: Store) -> Store:
    db = store.db()
    return gitmem.open(db.gitdir if db.bare else store.path)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["all", "main-only", "wal-only"])
def test_index_deleted_mid_use(any_store: Store, clock: FixedClock, which: str) -> None:
    ids = filled(any_store, clock)
    main, wal, shm = db_files(any_store)
    doomed = {"all": [main, wal, shm], "main-only": [main], "wal-only": [wal]}[which]
    for path in doomed:
        path.unlink(missing_ok=True)
    # The store that had it open, one opened afresh, and a write in between.
    assert_matches_scan(any_store, ids, few=True)
    fresh = reopen(any_store)
    assert_matches_scan(fresh, ids, few=True)
    d = any_store.create("d\n", tags=["alpha"])
    assert_matches_scan(any_store, [*ids, d.id], few=True)
    assert_matches_scan(fresh, [*ids, d.id], few=True)
    assert fresh.index().path.exists()


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(max(path.stat().st_size, 8192)))


def tail_garbage(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 3)
        fh.write(os.urandom(size - size // 3))


def truncate_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def truncate_all(path: Path) -> None:
    os.truncate(path, 0)


def header_only(path: Path) -> None:
    os.truncate(path, 100)


@pytest.mark.parametrize(
    "damage", [garbage, tail_garbage, truncate_half, truncate_all, header_only],
    ids=lambda f: f.__name__,
)
@pytest.mark.slow
@pytest.mark.parametrize("open_while_damaged", [False, True], ids=["closed", "open"])
def test_corrupt_index_is_rebuilt_silently(
    any_store: Store,
    clock: FixedClock,
    damage: Callable[[Path], None],
    open_while_damaged: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = filled(any_store, clock)
    index = any_store.index()
    if not open_while_damaged:
        index.close()
    # Checkpoint so the main file holds the data (else damage to it may hit empty pages).
    with contextlib.closing(sqlite3.connect(index.path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damage(index.path)
    assert_matches_scan(any_store, ids, few=True)
    assert_matches_scan(reopen(any_store), ids, few=True)
    d = any_store.create("d\n")
    assert_matches_scan(any_store, [*ids, d.id], few=True)
    with contextlib.closing(sqlite3.connect(index.path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.slow
def test_corrupt_write_ahead_log(any_store: Store, clock: FixedClock) -> None:
    ids = filled(any_store, clock)
    index = any_store.index()
    index.close()
    _, wal, _ = db_files(any_store)
    wal.write_bytes(os.urandom(64 * 1024))
    assert_matches_scan(any_store, ids, few=True)
    assert_matches_scan(reopen(any_store), ids, few=True)


def sql(path: Path, statement: str, *params: str) -> None:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(statement, params)


def meta(path: Path, key: str) -> str | None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


@pytest.mark.slow
def test_older_schema_is_rebuilt(any_store: Store, clock: FixedClock) -> None:
    ids = filled(any_store, clock)
    path = any_store.index().path
    sql(path, "UPDATE meta SET value = ? WHERE key = 'schema'", str(SCHEMA_VERSION - 1))
    assert_matches_scan(any_store, ids)  # the open connection goes on, and still answers right
    fresh = reopen(any_store)
    assert_matches_scan(fresh, ids)
    assert meta(path, "schema") == str(SCHEMA_VERSION)
    assert meta(path, "commit") == tip(any_store)


@pytest.mark.slow
def test_an_older_layout_is_replaced(any_store: Store, clock: FixedClock) -> None:
    """What an older gitmem might have left: other tables, other columns, an old version."""
    ids = filled(any_store, clock)
    any_store.index().close()
    path = any_store.index().path
    for p in db_files(any_store):
        p.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
            "INSERT INTO meta VALUES ('schema', '0'), ('commit', 'deadbeef');"
            "CREATE TABLE memories (id TEXT, body TEXT);"
            "INSERT INTO memories VALUES ('mem_ghost', 'boo');"
            "CREATE TABLE leftovers (x);"
            "CREATE VIRTUAL TABLE fts USING fts5(body);"
        )
    fresh = reopen(any_store)
    assert_matches_scan(fresh, ids)
    assert "mem_ghost" not in {m.id for m in fresh.list(include_superseded=True)}
    assert meta(path, "schema") == str(SCHEMA_VERSION)


def test_a_stranger_sqlite_file_is_replaced(store: Store, clock: FixedClock) -> None:
    ids = filled(store, clock)
    store.index().close()
    for p in db_files(store):
        p.unlink(missing_ok=True)
    sql(store.index().path, "CREATE TABLE notes (text TEXT)")
    assert_matches_scan(reopen(store), ids)


def test_an_index_from_another_repository_is_rebuilt(
    tmp_path: Path, clock: FixedClock
) -> None:
    """A copied index (say, the whole .git copied beside another store) names a commit
    this repository does not have."""
    one = gitmem.init(tmp_path / "one", clock=clock)
    two = gitmem.init(tmp_path / "two", clock=clock)
    one.create("one\n", tags=["alpha"])
    x = two.create("two\n")
    one.list()
    one.index().close()
    (two.db().gitdir / "gitmem").mkdir(exist_ok=True)
    for src in db_files(one):
        if src.exists():
            (two.db().gitdir / "gitmem" / src.name).write_bytes(src.read_bytes())
    stats = two.index().catch_up()
    assert stats is not None and stats.rebuilt
    assert [m.id for m in two.list()] == [x.id]
    assert_matches_scan(two, [x.id])


# -- several processes at once --------------------------------------------------------------


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def write_worker(path: str, count: int, acked: Any, started: Any) -> None:
    store = gitmem.open(path)
    started.wait()
    previous: str | None = None
    for i in range(count):
        if previous is not None and i % 4 == 0:
            memory = store.supersede(previous, f"again {i}\n", tags=["again"])
        else:
            memory = store.create(f"write {i}\n", category=CATEGORIES[i % 3], tags=[TAGS[i % 4]])
        acked.put(memory.id)  # acknowledged: the commit has landed
        previous = memory.id
        if i % 10 == 0:
            store.list()  # the writer queries as well, so three processes share the index


def read_worker(path: str, done: Any, started: Any, report: Any) -> None:
    handler = _Records()
    logging.getLogger("gitmem").addHandler(handler)
    logging.getLogger("gitmem").setLevel(logging.DEBUG)
    store = gitmem.open(path)
    errors: list[str] = []
    sizes: list[int] = []
    rounds = 0
    started.wait()
    while True:
        finished = done.is_set()
        try:
            listed = store.list(include_superseded=True)
            sizes.append(len(listed))
            if listed:
                newest = listed[-1]
                assert store.latest_version(newest.id).version >= newest.version
                assert store.history(newest.id)[-1].commit
            store.list(category=CATEGORIES[rounds % 3], tags=[TAGS[rounds % 4]])
            store.problems()
        except Exception as exc:  # every error is a failure; report it rather than die
            errors.append(repr(exc))
        rounds += 1
        if finished:
            break
    rebuilds = [m for m in handler.messages if "rebuild" in m]
    report.put((errors, sizes, rounds, rebuilds))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["worktree", "bare"])
def test_two_processes_query_while_a_third_writes(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    store = make_store(kind, tmp_path, clock, monkeypatch)
    store.create("before\n")
    store.list()  # an index already there, to catch up from
    location = str(store.db().gitdir if store.db().bare else store.path)
    acked, report = SPAWN.Queue(), SPAWN.Queue()
    done, started = SPAWN.Event(), SPAWN.Barrier(3)
    writer = SPAWN.Process(target=write_worker, args=(location, 60, acked, started))
    readers = [
        SPAWN.Process(target=read_worker, args=(location, done, started, report))
        for _ in range(2)
    ]
    for p in [writer, *readers]:
        p.start()
    writer.join(timeout=300)
    done.set()
    for p in readers:
        p.join(timeout=300)
    assert [p.exitcode for p in [writer, *readers]] == [0, 0, 0]
    ids = [acked.get(timeout=5) for _ in range(60)]
    for _ in readers:
        errors, sizes, rounds, rebuilds = report.get(timeout=5)
        assert errors == []
        assert rounds >= 2
        assert sizes == sorted(sizes), "a reader saw the store go back in time"
        assert sizes[-1] == 61  # its last round began after the writer had finished
        assert rebuilds == [], "catching up must never throw the index away"
    after = reopen(store)
    listed = {m.id for m in after.list(include_superseded=True)}
    assert set(ids) <= listed and len(listed) == 61
    assert_matches_scan(after, ids[::6], few=True)


# -- a project store read together with the user store -----------------------------------


@pytest.mark.slow
def test_project_and_user_scopes_list_from_both_indexes(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store("two-scopes", tmp_path, clock, monkeypatch)
    assert [str(s) for s in store.scopes] == ["repo", "user"]
    project = store.create("project fact\n", category="patterns", tags=["alpha"])
    clock.advance(seconds=1)
    user = store.create("user fact\n", category="patterns", tags=["alpha"], scope="user")
    clock.advance(seconds=1)
    newer = store.supersede(user.id, "user fact, revised\n")
    assert newer.store_scope is not None and str(newer.store_scope) == "user"

    assert [(m.id, str(m.store_scope)) for m in store.list(category="patterns")] == [
        (project.id, "repo"), (newer.id, "user")
    ]
    assert [m.id for m in store.list(scope="user", include_superseded=True)] == [user.id, newer.id]
    assert [m.id for m in store.list(scope="repo")] == [project.id]
    assert store.latest_version(user.id).id == newer.id
    repo_index, user_index = store.index("repo"), store.index("user")
    assert repo_index.path != user_index.path
    assert repo_index.meta().get("commit") == tip(store, "repo")
    assert user_index.meta().get("commit") == tip(store, "user")
    assert [m.id for m in repo_index.memories()] == [project.id]
    assert [m.id for m in user_index.memories()] == [newer.id]

    # Each scope catches up on its own: a write to one leaves the other's index alone.
    before = repo_index.meta().get("commit")
    store.create("another user fact\n", scope="user", tags=["beta"])
    stats = user_index.catch_up()
    assert stats is not None and stats.applied_commits == 1 and not stats.rebuilt
    assert repo_index.catch_up() is None and repo_index.meta().get("commit") == before
    assert_matches_scan(store)
    # A fresh open from inside the project finds both stores and both indexes.
    (tmp_path / "project" / "src").mkdir()
    again = open_store(cwd=tmp_path / "project" / "src", clock=clock)
    assert len(again.list(tags=["alpha"])) == 2
    assert_matches_scan(again)


def test_a_query_waits_out_a_catch_up_longer_than_the_busy_timeout(any_store: Store) -> None:
    """Another process rebuilding a large store holds the write lock for a long time;
    a query that needs to catch up waits for it instead of failing "database is locked"."""
    a = any_store.create("a\n")
    any_store.list()
    index = any_store.index()
    index.close()
    index.busy_timeout = 0.05  # far shorter than the other writer takes
    holding, release = threading.Event(), threading.Event()

    def long_writer() -> None:
        with contextlib.closing(sqlite3.connect(index.path, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            holding.set()
            release.wait(timeout=30)
            conn.execute("COMMIT")

    other = threading.Thread(target=long_writer)
    other.start()
    try:
        assert holding.wait(timeout=30)
        b = any_store.create("b\n")  # the index must catch up, so it needs the lock
        threading.Timer(1.0, release.set).start()
        assert {m.id for m in any_store.list()} == {a.id, b.id}
    finally:
        release.set()
        other.join()
    assert index.meta().get("commit") == tip(any_store)


def first_query_worker(path: str, started: Any, report: Any) -> None:
    store = gitmem.open(path)
    started.wait()
    try:
        report.put(("ok", len(store.list(include_superseded=True))))
    except Exception as exc:  # report rather than die: the parent asserts on it
        report.put(("error", repr(exc)))


@pytest.mark.slow
def test_processes_creating_the_index_at_once(tmp_path: Path, clock: FixedClock) -> None:
    """Nobody has built the index yet and four processes query at the same moment."""
    store = gitmem.init(tmp_path / "bare.git", bare=True, clock=clock)
    for i in range(20):
        store.create(f"{i}\n")
    for round_ in range(3):
        for path in db_files(store):
            path.unlink(missing_ok=True)
        started, report = SPAWN.Barrier(4), SPAWN.Queue()
        procs = [
            SPAWN.Process(target=first_query_worker, args=(str(store.db().gitdir), started, report))
            for _ in range(4)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0] * 4
        assert sorted(report.get(timeout=5) for _ in procs) == [("ok", 20)] * 4, round_


@pytest.mark.slow
def test_threads_query_while_the_store_writes(any_store: Store) -> None:
    """One Store shared by threads: each has its own connection, catch-ups take turns."""
    stop = threading.Event()
    errors: list[str] = []
    seen: list[list[int]] = [[] for _ in range(3)]

    def reader(k: int) -> None:
        while not stop.is_set():
            try:
                listed = any_store.list(include_superseded=True)
                seen[k].append(len(listed))
                if listed:
                    any_store.history(listed[-1].id)
            except Exception as exc:  # collected, asserted below
                errors.append(repr(exc))

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    ids = [any_store.create(f"{i}\n").id for i in range(15)]
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    for sizes in seen:
        assert sizes == sorted(sizes)
    assert {m.id for m in any_store.list()} == set(ids)
    assert_matches_scan(any_store, ids[:3])


@pytest.mark.parametrize("shrink", [True, False])
def test_a_large_write_leaves_no_write_ahead_log_behind(
    store: Store, monkeypatch: pytest.MonkeyPatch, shrink: bool
) -> None:
    """gitmem's commands exit without closing the index, so SQLite never removes its log:
    after a large catch-up (1.8 GB beside a 1M index) the log stayed on disk. A log past the
    bound is checkpointed and cut after the write; below it, SQLite's own rules apply."""
    from gitmem.store import index_schema

    for n in range(40):
        store.create(f"memory {n} about the build cache", title=f"m{n}")
    monkeypatch.setattr(index_schema, "WAL_SHRINK_BYTES", 0 if shrink else 1 << 40)
    index = store.index()
    index.rebuild()
    wal = Path(str(index.path) + "-wal")
    assert wal.exists()  # the connection is still open: WAL mode keeps the file
    assert (wal.stat().st_size == 0) == shrink
    assert len(store.search("cache", limit=100)) == 40


_LIST_BRANCH = """
import sys
import gitmem
print(len(gitmem.open(sys.argv[1], branch="topic").list()))
"""


def test_a_branch_whose_index_file_is_read_only_is_read_from_git(tmp_path: Path) -> None:
    """Each branch has its own index file: the one checked for writing is the branch's."""
    import shutil
    import subprocess
    import sys

    store = gitmem.init(tmp_path / "s")
    topic = gitmem.open(store.path, branch="topic")
    topic.create("one")
    assert len(topic.list()) == 1  # the branch's index file exists and is current
    topic.create("two")  # and is behind now: the next read would write it
    index_file = topic.index().path
    argv = [sys.executable, "-c", _LIST_BRANCH, str(store.path)]
    if os.geteuid() == 0:  # root ignores file modes: a read-only bind mount of the file
        if shutil.which("unshare") is None:
            pytest.skip("root without unshare: cannot make a file read-only")
        script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
        argv = ["unshare", "-m", "sh", "-c", script, "sh", str(index_file), *argv]
    else:
        index_file.chmod(0o444)
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no read-only bind mount here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2"]
