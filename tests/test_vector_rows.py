"""Vector rows as derived index state: catch-up (then sync) equals a full rebuild.

Random histories come from tests/test_index.py's World: creates, updates, appends,
supersedes, deletes, restores, archives, transactions, hand edits, broken files and merges
made with the git binary; the index catches up at random points in between.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_index import World, make_store, ops

import gitmem
from gitmem.base.clock import FixedClock
from gitmem.store import vectors
from gitmem.store.core import Store

REPO = Path(__file__).resolve().parent.parent


class HashEmbedder:
    """A deterministic stand-in model: each word adds a fixed pseudo-random direction."""

    def __init__(self, name: str = "hash-test", dim: int = 32) -> None:
        self.name = name
        self.dim = dim
        self.calls = 0
        self.texts = 0

    def token_ids(self, text: str) -> list[int]:
        """Words as token ids, so the document-frequency counts are kept for this model."""
        return [
            int.from_bytes(hashlib.sha256(w.encode()).digest()[:2], "little") % 1000
            for w in text.lower().split()
        ]

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
                out[i] += np.random.default_rng(seed).standard_normal(self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _vector_rows(conn: sqlite3.Connection) -> set[tuple[str, str, bytes]]:
    """Every stored (model, blob, code), for comparing an index with a rebuilt one."""
    sql = "SELECT m.model, v.blob, v.code FROM vectors v JOIN vector_models m ON m.id = v.model"
    return {(str(m), str(b), bytes(c)) for m, b, c in conn.execute(sql)}


def _rows(store: Store, embedder: HashEmbedder) -> dict[str, Any]:
    """Every scope's vector rows and token counts after a sync, checked: one vector for
    each current blob and no other, the counts those of the current blobs' texts."""
    out = {}
    for scope in store.scopes:
        index = store.index(scope)
        vectors.sync(index, embedder)
        conn = index.connect()
        blobs = {r[0] for r in conn.execute("SELECT blob FROM memories")}
        rows = _vector_rows(conn)
        assert sorted(b for m, b, _ in rows if m == embedder.name) == sorted(blobs)
        df = set(conn.execute(
            "SELECT m.model, d.token, d.df FROM vector_df d JOIN vector_models m ON m.id = d.model"
            " WHERE m.model = ?", (embedder.name,)
        ))
        expected: dict[int, int] = {}
        for (body,) in conn.execute(
            "SELECT CASE WHEN title IS NULL THEN body ELSE title || char(10) || body END "
            "FROM memories GROUP BY blob"
        ):
            for token in set(embedder.token_ids(body[: vectors.MAX_TEXT])):
                expected[token] = expected.get(token, 0) + 1
        assert df == {(embedder.name, t, n) for t, n in expected.items()}
        assert not conn.execute(
            "SELECT 1 FROM vector_gone g JOIN vector_models m ON m.id = g.model "
            "WHERE m.model = ?", (embedder.name,)
        ).fetchall()
        out[str(scope)] = (rows, df)
    return out


@settings(
    max_examples=int(os.environ.get("GITMEM_INDEX_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["worktree", "bare", "two-scopes"]),
    steps=st.lists(ops, min_size=1, max_size=12),
    syncs=st.sets(st.integers(0, 11), max_size=4),
)
@pytest.mark.slow
def test_vector_rows_after_catch_up_equal_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    steps: list[tuple[Any, ...]],
    syncs: set[int],
) -> None:
    root = tmp_path_factory.mktemp("vectors")
    clock = FixedClock(gitmem.base.clock.parse_timestamp("2026-11-23T10:00:00Z"))
    store = make_store(kind, root, clock, monkeypatch)
    world = World(store, clock, hands=kind == "worktree")
    embedder = HashEmbedder()
    for number, step in enumerate(steps):
        world.apply(step)
        if number in syncs:  # a recall in between: vectors follow the catch-ups so far
            _rows(store, embedder)
    caught_up = _rows(store, embedder)
    store.reindex()
    rebuilt = _rows(store, embedder)
    assert caught_up == rebuilt


def test_a_changed_memory_gets_a_new_vector_and_the_old_one_goes(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s.git", bare=True)
    a = store.create("the deploy target is staging", title="deploy")
    b = store.create("fixtures live in tests/conftest.py", title="fixtures")
    embedder = HashEmbedder()
    index = store.index()
    assert vectors.sync(index, embedder) == 2
    assert vectors.sync(index, embedder) == 0  # nothing pending: no embedding at all
    calls = embedder.calls
    store.update(a.id, "the deploy target is production now")
    assert vectors.sync(index, embedder) == 1  # only the changed memory
    assert embedder.calls == calls + 1
    store.delete(b.id)
    assert vectors.sync(index, embedder) == 0
    conn = index.connect()
    blobs = {r[0] for r in conn.execute("SELECT blob FROM memories")}
    assert {b for _, b, _ in _vector_rows(conn)} == blobs and len(blobs) == 1
    # Another embedder (the user changed the config): every memory gets its vector.
    other = HashEmbedder("hash-other", 16)
    assert vectors.sync(index, other) == 1
    store.create("a third memory", title="third")
    assert vectors.sync(index, embedder) == 1
    assert vectors.sync(index, other) == 1  # it missed the new memory: caught up too
    assert {m for m, _, _ in _vector_rows(conn)} == {"hash-test", "hash-other"}
    _rows(store, embedder)
    _rows(store, other)
    # A model whose dimension changed under the same name: its vectors are made again.
    assert vectors.sync(index, HashEmbedder("hash-other", 8)) == 2
    assert {len(c) for m, _, c in _vector_rows(conn) if m == "hash-other"} == {8}


def test_nearest_returns_current_rows_by_cosine(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    one = store.create("alpha beta gamma", id="notes/one")
    store.create("delta epsilon", id="notes/two")
    embedder = HashEmbedder()
    index = store.index()
    near = vectors.nearest(index, "alpha beta", 5, embedder=embedder)
    conn = index.connect()
    ids = [conn.execute("SELECT id FROM memories WHERE rowid = ?", (r,)).fetchone()[0]
           for r, _ in near]
    assert ids[0] == one.id and len(ids) == 2
    store.delete(one.id)
    near = vectors.nearest(index, "alpha beta", 5, embedder=embedder)
    assert [conn.execute("SELECT id FROM memories WHERE rowid = ?", (r,)).fetchone()[0]
            for r, _ in near] == ["notes/two"]


def test_nearest_finds_the_memory_by_meaning_with_the_default_embedder(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s.git", bare=True)
    deploy = store.create("The deploy target is staging; production deploys need a tag")
    store.create("Fixtures live in tests/conftest.py")
    store.create("The office coffee machine is on the third floor")
    index = store.index()
    from gitmem.store.embed import get_embedder

    default = get_embedder()
    assert default is not None, "no default embedder"
    found = vectors.nearest(index, "how do we ship a release to staging?", 3, embedder=default)
    assert found, "no default embedder"
    conn = index.connect()
    top = conn.execute("SELECT id FROM memories WHERE rowid = ?", (found[0][0],)).fetchone()[0]
    assert top == deploy.id
    assert [c for _, c in found] == sorted((c for _, c in found), reverse=True)


def test_catch_up_loads_no_embedder_and_no_numpy(tmp_path: Path) -> None:
    """A command that never recalls (list, a hook) keeps the vector rows current without
    importing numpy or an embedder."""
    store = gitmem.init(tmp_path / "s.git", bare=True)
    store.create("one memory")
    script = (
        "import sys, gitmem\n"
        f"s = gitmem.open({str(store.path)!r})\n"
        "assert len(s.list()) == 1\n"
        "print(sorted(m for m in ('numpy', 'gitmem.store.embed', 'tokenizers')\n"
        "             if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    pending = store.index().connect().execute("SELECT count(*) FROM vector_pending")
    assert pending.fetchone()[0] == 1


class _Down(HashEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        self.calls += 1
        from gitmem.base.errors import EmbedderError

        raise EmbedderError("ollama embedder at http://127.0.0.1:9/api/embed is unreachable")


def test_a_failing_embedder_leaves_recall_lexical_and_is_not_retried_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = gitmem.init(tmp_path / "s.git", bare=True)
    store.create("alpha beta")
    down = _Down("down-test")
    index = store.index()
    assert vectors.nearest(index, "alpha", 5, embedder=down) == []
    assert vectors.nearest(index, "alpha", 5, embedder=down) == []
    assert down.calls == 1  # the second query did not wait on the endpoint again
    assert "semantic recall skipped" in caplog.text
    pending = index.connect().execute("SELECT count(*) FROM vector_pending").fetchone()[0]
    assert pending == 1  # nothing half-written: the next try embeds it
    vectors._failed_until.clear()
    assert vectors.nearest(index, "alpha", 5, embedder=HashEmbedder("down-test"))


def _two_memories(tmp_path: Path) -> tuple[Store, Any, HashEmbedder, Any]:
    """A store of two memories whose index has their vectors: (store, the first memory,
    the embedder, the index)."""
    store = gitmem.init(tmp_path / "s.git", bare=True)
    one = store.create("alpha beta gamma", title="one")
    store.create("delta epsilon", title="two")
    embedder = HashEmbedder()
    index = store.index()
    vectors.sync(index, embedder)
    return store, one, embedder, index


def _claim_version(conn: Any, version: int) -> None:
    """Say in ``meta`` that the vector tables are of provider version ``version``."""
    key = "provider:vectors"
    tip = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (f"{version} {tip.split()[1]}", key))


V7_DDL = """
CREATE TABLE vector_models (id INTEGER PRIMARY KEY, model TEXT NOT NULL UNIQUE,
    dim INTEGER NOT NULL, gen INTEGER NOT NULL, complete INTEGER NOT NULL DEFAULT 0,
    n INTEGER NOT NULL DEFAULT 0, trained INTEGER NOT NULL DEFAULT 0,
    lists_id INTEGER NOT NULL DEFAULT 0, live INTEGER NOT NULL DEFAULT 0);
CREATE TABLE vectors (id INTEGER PRIMARY KEY, keys BLOB NOT NULL, codes BLOB NOT NULL);
CREATE TABLE vector_pending (blob BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE vector_df (model INTEGER NOT NULL, token INTEGER NOT NULL,
    df INTEGER NOT NULL, PRIMARY KEY (model, token)) WITHOUT ROWID;
CREATE TABLE vector_gone (model INTEGER NOT NULL, blob TEXT NOT NULL, text TEXT NOT NULL,
    PRIMARY KEY (model, blob)) WITHOUT ROWID;
"""
"""Provider version 7's vector tables (records of many vectors) that gitmem still has."""


def test_an_index_of_an_older_provider_version_drops_its_vector_tables_and_embeds_again(
    tmp_path: Path,
) -> None:
    """An index whose vector tables are an older version's, complete for the model, is
    refilled by the next catch-up (its tables dropped) and the next recall embeds every
    memory again into the new tables."""
    store, one, embedder, index = _two_memories(tmp_path)
    conn = index.connect()
    with conn:
        for table in vectors.VECTORS.tables:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.executescript(V7_DDL)
        conn.execute("INSERT INTO vectors VALUES (1, x'14', x'0102')")
        conn.execute("INSERT INTO vector_models VALUES (1, 'hash-test', 32, 5, 1, 1, 0, 0, 1)")
        _claim_version(conn, 7)
    vectors.clear_cache()
    before = embedder.texts
    near = vectors.nearest(index, "alpha beta", 2, embedder=embedder)
    assert embedder.texts - before == 2 + 1  # both memories embedded again, then the query
    conn = index.connect()
    columns = {r[1] for r in conn.execute("PRAGMA table_info(vectors)")}
    assert columns == {"id", "model", "blob", "code"}
    state = conn.execute("SELECT value FROM meta WHERE key = 'provider:vectors'").fetchone()[0]
    assert state.split()[0] == str(vectors.VECTORS_VERSION)
    assert _ids(conn, near)[0] == one.id and len(near) == 2
    _rows(store, embedder)


def _ids(conn: Any, hits: list[tuple[int, float]]) -> list[str]:
    return [conn.execute("SELECT id FROM memories WHERE rowid = ?", (r,)).fetchone()[0]
            for r, _ in hits]


def test_the_vector_of_a_gone_memory_goes_at_catch_up(tmp_path: Path) -> None:
    """Catch-up deletes the vectors of a deleted memory and of an edited memory's old text
    (no embedder loaded): no query ranks them, however many it asks for."""
    store = gitmem.init(tmp_path / "s.git", bare=True)
    made = [store.create(f"topic{i} alpha{i} beta{i % 3}", title=f"t{i}") for i in range(12)]
    embedder = HashEmbedder()
    index = store.index()
    vectors.sync(index, embedder)
    conn = index.connect()
    gone = {
        conn.execute("SELECT blob FROM memories WHERE id = ?", (m.id,)).fetchone()[0]
        for m in made[:2]
    }
    store.delete(made[0].id)
    store.update(made[1].id, "something else entirely")
    index.catch_up()
    assert not gone & {b for _, b, _ in _vector_rows(conn)}
    assert len(_vector_rows(conn)) == 10
    for k in (1, 3, 11, 20):
        ids = _ids(conn, vectors.nearest(index, f"t0\n{made[0].body}", k, embedder=embedder))
        assert len(ids) == min(k, 11) and made[0].id not in ids
    _rows(store, embedder)


def _git(store: Store, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(store.path), *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_blob_that_comes_back_is_counted_once(tmp_path: Path) -> None:
    """A memory file deleted and then brought back as it was (by hand, with git) is
    embedded again, held once and its tokens counted once; also when it goes and comes
    back between two syncs, and goes again before one."""
    store = gitmem.init(tmp_path / "s")
    one = store.create("alpha beta gamma", title="one")
    store.create("delta epsilon", title="two")
    store.create("zeta eta theta", title="three")
    embedder = HashEmbedder()
    index = store.index()
    vectors.sync(index, embedder)
    conn = index.connect()
    blob = conn.execute("SELECT blob FROM memories WHERE id = ?", (one.id,)).fetchone()[0]
    path = next(p for p in _git(store, "ls-files").split() if "alpha" in
                (store.path / p).read_text())

    def goes() -> None:
        _git(store, "rm", "-q", path)
        _git(store, "commit", "-q", "-m", "hand delete")

    def comes_back() -> None:
        _git(store, "checkout", "HEAD~1", "--", path)
        _git(store, "commit", "-q", "-m", "hand restore")

    goes()
    vectors.sync(index, embedder)
    comes_back()
    assert vectors.sync(index, embedder) == 1  # embedded again
    assert [b for _, b, _ in _vector_rows(conn)].count(blob) == 1
    _rows(store, embedder)
    hits = vectors.nearest(index, "one\nalpha beta gamma", 3, embedder=embedder)
    assert _ids(conn, hits)[0] == one.id and len(set(_ids(conn, hits))) == len(hits) == 3
    for moves in ((goes, comes_back), (goes, comes_back, goes), (comes_back,)):
        for move in moves:
            move()
        vectors.sync(index, embedder)
        _rows(store, embedder)
    hits = vectors.nearest(index, "one\nalpha beta gamma", 5, embedder=embedder)
    assert sorted(_ids(conn, hits)) == sorted(m.id for m in store.list())


def test_a_damaged_vector_row_has_the_vectors_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A code cut short in the index file (the index is untrusted input) is never read as
    a vector: the query that meets it has the vector tables refilled, every memory
    embedded again, and answers from them. The path that reads without writing (recall's,
    for a complete model) raises instead; recall then takes the path that rebuilds."""
    store, one, embedder, index = _two_memories(tmp_path)
    conn = index.connect()
    with conn:
        conn.execute("UPDATE vectors SET code = substr(code, 1, length(code) - 3)")
        conn.execute("UPDATE vector_models SET gen = random()")
    assert vectors.complete(conn, embedder.name)
    from gitmem.base.errors import IndexDamagedError

    with pytest.raises(IndexDamagedError, match="not 32 bytes long"):
        vectors.nearest_in(conn, "alpha beta", 2, embedder)
    before = embedder.texts
    near = vectors.nearest(index, "alpha beta", 2, embedder=embedder)
    assert "vector" in caplog.text and "rebuilt" in caplog.text
    assert embedder.texts - before == 2 + 1  # both memories again, then the query
    assert _ids(index.connect(), near)[0] == one.id and len(near) == 2
    _rows(store, embedder)
