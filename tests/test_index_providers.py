"""The index's extension point: row providers kept current by catch-up and rebuild,
refilled alone when their version changes; the full-text rows equal a rebuild's."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.errors import InvalidInputError
from gitmem.store import row_providers
from gitmem.store.index_rows import RowChanges
from gitmem.store.row_providers import RowProvider


class Recorder:
    """A provider that keeps (memory id, blob) rows and counts its full fills."""

    def __init__(self, name: str = "probe", version: int = 1, under: str = "") -> None:
        self.fills = 0
        self.calls: list[RowChanges] = []
        self.provider = RowProvider(
            name=name,
            version=version,
            tables=(f"{name}_rows",),
            ddl=(f"CREATE TABLE {name}_rows (rowid_ INTEGER PRIMARY KEY, id TEXT, blob TEXT)",),
            apply=self.apply,
            under=under,
        )

    def apply(self, conn: sqlite3.Connection, repo: pygit2.Repository, changes: RowChanges) -> None:
        assert isinstance(repo, pygit2.Repository)
        self.calls.append(changes)
        if changes.full and not changes.added:
            self.fills += 1
        table = self.provider.tables[0]
        conn.executemany(
            f"DELETE FROM {table} WHERE rowid_ = ?", [(r.rowid,) for r in changes.removed]
        )
        conn.executemany(
            f"INSERT INTO {table} VALUES (?, ?, ?)",
            [(a.rowid, a.memory.id, a.blob) for a in changes.added],
        )


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    row_providers.register(rec.provider)
    try:
        yield rec
    finally:
        row_providers.PROVIDERS.pop(rec.provider.name, None)


def rows(store: Store, table: str) -> list[tuple[Any, ...]]:
    index = store.index()
    index.catch_up()
    conn = index.connect()
    return sorted(conn.execute(f"SELECT id, blob FROM {table}").fetchall())


def core(store: Store) -> list[tuple[Any, ...]]:
    return sorted((r[0], r[1]) for r in store.index().rows(["id", "blob"], include_superseded=True,
                                                           include_archived=True))


def test_a_provider_follows_creates_updates_and_deletes(store: Store, recorder: Recorder) -> None:
    a = store.create("alpha\n")
    b = store.create("beta\n")
    assert rows(store, "probe_rows") == core(store)
    assert recorder.fills == 1
    store.update(a.id, "alpha two\n")
    store.delete(b.id)
    assert rows(store, "probe_rows") == core(store)
    last = recorder.calls[-1]
    assert not last.full
    assert {r.memory.id for r in last.removed} >= {b.id}
    assert recorder.fills == 1  # followed incrementally, never refilled
    store.reindex()
    assert recorder.fills == 2
    assert rows(store, "probe_rows") == core(store)


def test_a_version_bump_refills_only_that_provider(store: Store, recorder: Recorder) -> None:
    for i in range(3):
        store.create(f"note {i}\n")
    assert rows(store, "probe_rows") == core(store)
    lexical_before = _fts_instances(store)
    bumped = Recorder(version=2)
    row_providers.register(bumped.provider)  # replaces the version-1 provider by name
    assert rows(store, "probe_rows") == core(store)
    assert bumped.fills == 1
    assert _fts_instances(store) == lexical_before
    assert store.index().meta()["provider:probe"].startswith("2 ")


def test_a_provider_registered_late_catches_up_whole(store: Store) -> None:
    store.create("before it existed\n")
    store.index().catch_up()
    rec = Recorder(name="late")
    row_providers.register(rec.provider)
    try:
        store.create("after\n")
        assert rows(store, "late_rows") == core(store)
        assert rec.fills == 1
    finally:
        row_providers.PROVIDERS.pop("late", None)


def test_a_failing_provider_leaves_the_store_readable(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store.create("one\n")

    def boom(conn: sqlite3.Connection, repo: pygit2.Repository, changes: RowChanges) -> None:
        conn.execute("INSERT INTO boom_rows VALUES (1)")
        if changes.added and not changes.full:
            raise RuntimeError("provider bug")

    provider = RowProvider("boom", 1, ("boom_rows",), ("CREATE TABLE boom_rows (x)",), boom)
    row_providers.register(provider)
    try:
        store.index().catch_up()  # the fill works
        two = store.create("two\n")
        assert two.id in {m.id for m in store.list()}  # the failure did not stop the read
        assert "row provider boom failed" in caplog.text
        conn = store.index().connect()
        assert conn.execute("SELECT count(*) FROM boom_rows").fetchone() == (0,)
        assert store.index().meta()["provider:boom"] == "1 failed"
        assert store.index().meta()["commit"] == str(store.db().tip().id)  # type: ignore[union-attr]
    finally:
        row_providers.PROVIDERS.pop("boom", None)
    store.index().rebuild()


def test_a_rebuild_fills_every_provider_in_one_pass_over_the_memories(
    store: Store, recorder: Recorder
) -> None:
    for i in range(5):
        store.create(f"note {i}\n")
    other = Recorder(name="other")
    row_providers.register(other.provider)
    try:
        recorder.calls.clear()
        store.reindex()
        assert rows(store, "probe_rows") == core(store) == rows(store, "other_rows")
        mine = [a for c in recorder.calls for a in c.added]
        theirs = [a for c in other.calls for a in c.added]
        assert len(mine) == 5
        # Each row was made into a Memory once and handed to both providers.
        assert all(a is b for a, b in zip(mine, theirs, strict=True))
    finally:
        row_providers.PROVIDERS.pop("other", None)


def test_a_provider_failing_in_a_refill_leaves_the_others_filled(
    store: Store, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(3):
        store.create(f"note {i}\n")

    def boom(conn: sqlite3.Connection, repo: pygit2.Repository, changes: RowChanges) -> None:
        conn.execute("INSERT INTO boom_rows VALUES (1)")
        if changes.added:
            raise RuntimeError("provider bug in a fill")

    provider = RowProvider("boom", 1, ("boom_rows",), ("CREATE TABLE boom_rows (x)",), boom)
    row_providers.register(provider)  # registered after the probe: it fails mid-pass
    try:
        store.reindex()
        assert "row provider boom failed" in caplog.text
        assert rows(store, "probe_rows") == core(store)  # filled whole, once, after the failure
        conn = store.index().connect()
        assert conn.execute("SELECT count(*) FROM boom_rows").fetchone() == (0,)
        meta = store.index().meta()
        assert meta["provider:boom"] == "1 failed"
        assert meta["provider:probe"] == f"1 {store.db().tip().id}"  # type: ignore[union-attr]
    finally:
        row_providers.PROVIDERS.pop("boom", None)
    store.index().rebuild()


def test_a_provider_under_a_prefix_is_handed_and_refilled_from_its_files_only(
    store: Store,
) -> None:
    store.create("a note\n")
    docs = Recorder(name="docs", under="projects/")
    row_providers.register(docs.provider)
    try:
        store.create("overview\n", id="projects/acme/overview")
        store.create("another note\n")
        assert rows(store, "docs_rows") == [r for r in core(store) if r[0].startswith("projects/")]
        assert {a.memory.id for c in docs.calls for a in c.added} == {"projects/acme/overview"}
        # A process that has not loaded it keeps it current while no file under its prefix
        # changes, and leaves it behind (to be refilled) when one does.
        row_providers.PROVIDERS.pop("docs")
        store.create("a third note\n")
        store.index().catch_up()
        tip = str(store.db().tip().id)  # type: ignore[union-attr]
        assert store.index().meta()["provider:docs"] == f"1 {tip} projects/"
        store.create("issues\n", id="projects/acme/known_issues")
        store.index().catch_up()
        assert store.index().meta()["provider:docs"] == f"1 {tip} projects/"
        row_providers.register(docs.provider)
        fills = docs.fills
        assert len(rows(store, "docs_rows")) == 2
        assert docs.fills == fills + 1
    finally:
        row_providers.PROVIDERS.pop("docs", None)


@pytest.mark.parametrize(
    "provider",
    [
        RowProvider("Bad-Name", 1, ("x",), (), lambda c, r, ch: None),
        RowProvider("steal", 1, ("memories",), (), lambda c, r, ch: None),
        RowProvider("twin", 1, ("fts",), (), lambda c, r, ch: None),
    ],
)
def test_bad_providers_are_refused(provider: RowProvider) -> None:
    with pytest.raises(InvalidInputError):
        row_providers.register(provider)


def _fts_instances(store: Store) -> list[tuple[Any, ...]]:
    """Every (memory id, term, column, offset) the full-text table holds."""
    index = store.index()
    index.catch_up()
    conn = index.connect()
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("CREATE VIRTUAL TABLE temp.fts_i USING fts5vocab(main, fts, instance)")
    found = conn.execute(
        "SELECT m.id, v.term, v.col, v.offset FROM temp.fts_i v JOIN memories m ON m.rowid = v.doc"
    ).fetchall()
    count = conn.execute("SELECT count(*) FROM temp.fts_i").fetchone()[0]
    assert count == len(found)  # no term left behind by a removed memory
    return sorted(found)


_TEXTS = st.sampled_from(
    [
        "Deploying to staging needs a tag\n",
        "Fixtures live in tests/conftest.py\n",
        "use sample_user and CamelCase helpers\n",
        "café naïve résumé\n",
        "",
        "one\ntwo\nthree\n",
    ]
)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["create", "update", "delete", "supersede"]),
            st.integers(0, 5),
            _TEXTS,
            st.sampled_from([None, "T", "DeployNotes"]),
        ),
        min_size=1,
        max_size=12,
    )
)
@pytest.mark.slow
def test_fts_rows_after_catch_up_equal_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, str, str | None]]
) -> None:
    store = gitmem.init(tmp_path_factory.mktemp("s") / "store", clock=FixedClock())
    live: list[str] = []
    for op, pick, text, title in ops:
        if op == "create" or not live:
            live.append(store.create(text or "x\n", title=title, tags=["deploy-ops"]).id)
        elif op == "update":
            store.update(live[pick % len(live)], text, title=title, allow_empty=True)
        elif op == "delete":
            store.delete(live.pop(pick % len(live)))
        else:
            old = live.pop(pick % len(live))
            live.append(store.supersede(old, text or "y\n", title=title).id)
        store.index().catch_up()  # follow every step incrementally
    followed = _fts_instances(store)
    store.reindex()
    assert _fts_instances(store) == followed


def test_fts_is_contentless_and_small(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=FixedClock())
    body = "The deploy target is staging; production deploys need a tag.\n" * 20
    store.create(body)
    conn = store.index().connect()
    store.index().catch_up()
    assert conn.execute("SELECT body FROM fts").fetchone() == (None,)  # no second copy
