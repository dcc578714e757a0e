"""gitmem.store.vectors: compact codes and brute-force top-k over an SQLite table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitmem.store import vectors


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.mark.parametrize(("dim", "kind", "size"), [(256, "int8", 257), (384, "int4", 193),
                                                   (768, "binary", 97), (1536, "binary", 193)])
def test_codes_fit_300_bytes_and_keep_the_direction(dim: int, kind: str, size: int) -> None:
    rng = np.random.default_rng(1)
    m = _unit(rng, 50, dim)
    assert vectors.kind_for(dim) == kind
    codes = vectors.encode(m)
    assert all(len(c) == size <= vectors.MAX_CODE_BYTES for c in codes)
    back = vectors.decode(codes, dim)
    cosines = np.sum(back * m, axis=1)
    floor = {"int8": 0.999, "int4": 0.98, "binary": 0.75}[kind]
    assert cosines.min() > floor


def test_odd_dimensions_and_zero_vectors() -> None:
    m = np.zeros((2, 5), dtype=np.float32)
    m[0] = [0.1, -0.2, 0.3, -0.4, 0.5]
    for kind in ("int8", "int4", "binary"):
        back = vectors.decode(vectors.encode(m, kind), 5)
        assert back.shape == (2, 5)
        assert np.all(back[1] == 0)
        assert np.sign(back[0]).tolist() == [1, -1, 1, -1, 1]


def test_bad_vectors_and_codes_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        vectors.encode(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="2-d"):
        vectors.encode(np.zeros(4))
    with pytest.raises(ValueError, match="do not fit"):
        vectors.kind_for(5000)
    with pytest.raises(ValueError, match="mixed or unknown"):
        vectors.decode([b"\x09abc"], 3)
    with pytest.raises(ValueError, match="bytes long"):
        vectors.decode([b"\x01ab"], 3)
    conn = sqlite3.connect(":memory:")
    vectors.ensure_schema(conn)
    with pytest.raises(ValueError, match="not a vector code"):
        vectors.store_vectors(conn, "m", [("b", b"\x01" + b"\x00" * 400)])


def _db(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    vectors.ensure_schema(conn)
    vectors.ensure_schema(conn)  # idempotent
    return conn


def test_top_k_matches_exact_search_on_decoded_vectors(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    m = _unit(rng, 300, 64)
    blobs = [f"{i:040x}" for i in range(300)]
    conn = _db(tmp_path)
    assert vectors.store_vectors(conn, "model-a", zip(blobs, vectors.encode(m), strict=True)) == 300
    query = m[17] + 0.01 * rng.standard_normal(64).astype(np.float32)
    got = vectors.top_k(conn, "model-a", query, 10)
    decoded = vectors.decode(vectors.encode(m), 64)
    exact = decoded @ (query / np.linalg.norm(query))
    order = np.argsort(-exact, kind="stable")[:10]
    assert [b for b, _ in got] == [blobs[i] for i in order]
    assert got[0][0] == blobs[17] and got[0][1] == pytest.approx(exact[17], abs=1e-5)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    # Filters: only allowed blobs come back, however near the others are.
    allowed = blobs[100:]
    filtered = vectors.top_k(conn, "model-a", query, 5, allowed_blobs=allowed)
    assert len(filtered) == 5 and all(b in set(allowed) for b, _ in filtered)
    assert vectors.top_k(conn, "model-a", query, 5, allowed_blobs=["not-there"]) == []
    assert vectors.top_k(conn, "other-model", query, 5) == []
    assert vectors.top_k(conn, "model-a", np.zeros(64), 5) == []
    with pytest.raises(ValueError, match="32-d query"):
        vectors.top_k(conn, "model-a", np.ones(32), 5)


def test_top_k_past_the_cache_bound_reads_chunks_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past CACHE_VECTORS, top_k reads the vectors a chunk at a time and keeps only the
    best (a million decoded vectors are a gigabyte): the same blobs, scores and order,
    ties by row included, with and without a filter."""
    rng = np.random.default_rng(5)
    m = _unit(rng, 200, 32)
    m[50:60] = m[3]  # ties: equal vectors, ordered by row
    blobs = [f"{i:040x}" for i in range(200)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "model-a", zip(blobs, vectors.encode(m), strict=True))
    query = m[3] + 0.01 * rng.standard_normal(32).astype(np.float32)
    allowed = set(blobs[55:])
    vectors.clear_cache()
    whole = [vectors.top_k(conn, "model-a", query, k) for k in (1, 5, 12, 300)]
    whole_f = [vectors.top_k(conn, "model-a", query, k, allowed_blobs=allowed) for k in (1, 8)]
    vectors.clear_cache()
    monkeypatch.setattr(vectors, "CACHE_VECTORS", 10)
    monkeypatch.setattr(vectors, "SCAN_CHUNK", 7)
    assert [vectors.top_k(conn, "model-a", query, k) for k in (1, 5, 12, 300)] == whole
    assert [
        vectors.top_k(conn, "model-a", query, k, allowed_blobs=allowed) for k in (1, 8)
    ] == whole_f
    assert [b for b, _ in whole[2][:11]] == [blobs[3], *blobs[50:60]]
    assert vectors.top_k(conn, "model-a", query, 5, allowed_blobs=["not-there"]) == []
    assert vectors._matrices == {}  # nothing kept past the bound


def test_missing_remove_prune_and_the_cache_follow_writes(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    m = _unit(rng, 4, 16)
    conn = _db(tmp_path)
    codes = vectors.encode(m)
    vectors.store_vectors(conn, "m", [("a", codes[0]), ("b", codes[1])])
    assert vectors.missing(conn, "m", ["a", "b", "c", "c"]) == {"c"}
    assert vectors.missing(conn, "other", ["a"]) == {"a"}
    assert [b for b, _ in vectors.top_k(conn, "m", m[1], 5)] == ["b", "a"]
    vectors.store_vectors(conn, "m", [("c", codes[2])])  # the cached matrix must see it
    assert vectors.top_k(conn, "m", m[2], 1)[0][0] == "c"
    conn.commit()
    # Another connection (another process) writes: the generation tells this one.
    other = sqlite3.connect(tmp_path / "index.sqlite")
    vectors.store_vectors(other, "m", [("d", codes[3])])
    other.commit()
    assert vectors.top_k(conn, "m", m[3], 1)[0][0] == "d"
    assert vectors.remove(conn, ["d"]) == 1
    assert vectors.top_k(conn, "m", m[3], 4)[0][0] != "d"
    assert vectors.prune(conn, ["a"]) == 2
    assert [b for b, _ in vectors.top_k(conn, "m", m[1], 5)] == ["a"]
    assert vectors.missing(conn, "m", ["a", "b"]) == {"b"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=3, max_size=3),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(["int8", "int4", "binary"]),
)
@example([[1e-45, 0.0, -1e-45], [3e-39, -1e-40, 0.0]], "int8")  # subnormal float32 rows
@example([[1e-45, 0.0, -1e-45], [3e-39, -1e-40, 0.0]], "int4")
def test_any_finite_vectors_round_trip_to_unit_or_zero_rows(
    rows: list[list[float]], kind: str
) -> None:
    m = np.asarray(rows, dtype=np.float32)
    back = vectors.decode(vectors.encode(m, kind), 3)
    norms = np.linalg.norm(back, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
    # A row that is not all zeros decodes to a unit row pointing its way, subnormal floats
    # included (their codes were a cast of infinity: zeros); int8 and int4 keep its direction
    # to within their steps (3 dimensions: each off by half a step of its peak at most), the
    # sign bits of binary at least on its side.
    for row, decoded in zip(m.astype(np.float64), back, strict=True):
        if row.any():
            cosine = float(decoded @ (row / np.linalg.norm(row)))
            assert cosine > (0.0 if kind == "binary" else 0.99), (row, decoded)
        else:
            assert not decoded.any()


def _clustered(rng: np.random.Generator, n: int, dim: int, centres: int) -> np.ndarray:
    """Unit vectors around ``centres`` random directions (what an inverted file expects)."""
    middle = _unit(rng, centres, dim)
    m = middle[rng.integers(0, centres, n)] + 0.35 * _unit(rng, n, dim)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.fixture
def small_ivf(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inverted file from 100 vectors on (50,000 in use), a few lists, few probes."""
    monkeypatch.setattr(vectors, "IVF_FROM", 100)
    monkeypatch.setattr(vectors, "MIN_LISTS", 4)
    monkeypatch.setattr(vectors, "LISTS_PER_ROOT", 0.5)
    monkeypatch.setattr(vectors, "MIN_PROBE", 2)
    monkeypatch.setattr(vectors, "PROBE_ROWS", 50)
    monkeypatch.setattr(vectors, "CACHE_VECTORS", 99)  # lists on every query, not a matrix
    vectors.clear_cache()


def _lists(conn: sqlite3.Connection, model: str = "m") -> dict[str, int]:
    return {blob: lst for _, lst, blob, _ in vectors.entries(conn, model)}


def test_lists_are_trained_past_the_threshold_and_a_query_reads_only_its_lists(
    tmp_path: Path, small_ivf: None
) -> None:
    rng = np.random.default_rng(7)
    m = _clustered(rng, 400, 32, 12)
    blobs = [f"{i:040x}" for i in range(400)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(blobs[:90], vectors.encode(m[:90]), strict=True))
    assert not vectors.train_due(conn, "m")  # 90 < IVF_FROM: exact search, no lists
    assert set(_lists(conn).values()) == {0}
    vectors.store_vectors(conn, "m", zip(blobs[90:], vectors.encode(m[90:]), strict=True))
    assert vectors.train_due(conn, "m")
    lists = vectors.train(conn, "m")
    assert lists == vectors.list_count(400) == 10
    assert not vectors.train_due(conn, "m")
    # Every vector sits in the list of its nearest centroid.
    centroids = np.frombuffer(
        b"".join(r[0] for r in conn.execute("SELECT centroid FROM vector_lists ORDER BY list")),
        dtype="<f4",
    ).reshape(lists, 32)
    decoded = vectors.decode(vectors.encode(m), 32)
    nearest_list = np.argmax(decoded @ centroids.T, axis=1)
    assert _lists(conn) == {b: int(x) for b, x in zip(blobs, nearest_list, strict=True)}
    assert conn.execute("SELECT n, trained FROM vector_models").fetchone() == (400, 400)
    for i in (3, 117, 301):
        query = m[i] + 0.02 * rng.standard_normal(32).astype(np.float32)
        got = vectors.top_k(conn, "m", query, 5)
        assert got[0][0] == blobs[i]  # the known nearest neighbour
        probed = set(np.argsort(-(centroids @ (query / np.linalg.norm(query))))[:2])
        assert {_lists(conn)[b] for b, _ in got} <= probed  # only probed lists were read
        exact = vectors.top_k(conn, "m", query, 5, exact=True)
        assert exact[0][0] == got[0][0] and exact[0][1] == pytest.approx(got[0][1], abs=1e-5)
    # A filter that leaves nothing in the probed lists reads further ones.
    far = [blobs[i] for i in range(400) if nearest_list[i] != nearest_list[3]][:3]
    got = vectors.top_k(conn, "m", m[3], 2, allowed_blobs=far)
    assert len(got) == 2 and {b for b, _ in got} <= set(far)
    # New vectors go straight to their nearest list.
    extra = _clustered(np.random.default_rng(8), 3, 32, 2)
    vectors.store_vectors(conn, "m", zip(["ee" * 20, "ef" * 20, "f0" * 20],
                                         vectors.encode(extra), strict=True))
    near = np.argmax(vectors.decode(vectors.encode(extra), 32) @ centroids.T, axis=1)
    assert [_lists(conn)[b] for b in ("ee" * 20, "ef" * 20, "f0" * 20)] == near.tolist()


def test_lists_are_trained_again_past_the_growth_factor(tmp_path: Path, small_ivf: None) -> None:
    rng = np.random.default_rng(9)
    m = _clustered(rng, 500, 16, 8)
    blobs = [f"{i:040x}" for i in range(500)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(blobs[:120], vectors.encode(m[:120]), strict=True))
    vectors.train(conn, "m")
    first = conn.execute("SELECT trained, lists_id FROM vector_models").fetchone()
    assert first[0] == 120
    vectors.store_vectors(conn, "m", zip(blobs[120:240], vectors.encode(m[120:240]), strict=True))
    assert not vectors.train_due(conn, "m")  # 240 = 2 x 120: not past the factor yet
    vectors.store_vectors(conn, "m", zip(blobs[240:], vectors.encode(m[240:]), strict=True))
    assert vectors.train_due(conn, "m")
    assert vectors.train(conn, "m") == vectors.list_count(500)
    trained, lists_id = conn.execute("SELECT trained, lists_id FROM vector_models").fetchone()
    assert trained == 500 and lists_id != first[1]
    count = conn.execute("SELECT count(*) FROM vector_lists").fetchone()[0]
    assert count == vectors.list_count(500) > vectors.list_count(120)
    assert vectors.list_count(120) < len(set(_lists(conn).values())) <= count
    # Shrinking past the factor trains again too; below IVF_FROM search is exact.
    vectors.remove(conn, blobs[:260])
    assert conn.execute("SELECT n FROM vector_models").fetchone()[0] == 240
    assert vectors.train_due(conn, "m")
    vectors.remove(conn, blobs[260:450])
    assert not vectors.train_due(conn, "m")
    query = m[470]
    assert vectors.top_k(conn, "m", query, 3) == vectors.top_k(conn, "m", query, 3, exact=True)
    assert vectors.top_k(conn, "m", query, 1)[0][0] == blobs[470]


def test_a_replaced_or_removed_vector_leaves_its_list(tmp_path: Path, small_ivf: None) -> None:
    rng = np.random.default_rng(11)
    m = _clustered(rng, 200, 16, 6)
    blobs = [f"{i:040x}" for i in range(200)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(blobs, vectors.encode(m), strict=True))
    vectors.train(conn, "m")
    before = _lists(conn)
    # The same blob stored again (it came back while its old vector was still there) is
    # held twice, in the list of each vector, and search counts it once.
    moved = next(i for i in range(1, 200) if before[blobs[i]] != before[blobs[0]])
    vectors.store_vectors(conn, "m", [(blobs[0], vectors.encode(m[moved : moved + 1])[0])])
    held = [(lst, b) for _, lst, b, _ in vectors.entries(conn) if b == blobs[0]]
    assert sorted(lst for lst, _ in held) == sorted([before[blobs[0]], before[blobs[moved]]])
    assert conn.execute("SELECT n FROM vector_models").fetchone()[0] == 201
    for exact in (False, True):
        got = [b for b, _ in vectors.top_k(conn, "m", m[moved], 10, exact=exact)]
        assert got.count(blobs[0]) == 1 and len(got) == 10
    vectors.remove(conn, [blobs[5]])  # writes the records again: blob 0 is held once
    assert blobs[5] not in _lists(conn) and len(vectors.entries(conn)) == 199
    assert all(b != blobs[5] for b, _ in vectors.top_k(conn, "m", m[5], 10))
    assert vectors.prune(conn, blobs[:100]) == 100
    assert conn.execute("SELECT n FROM vector_models").fetchone()[0] == len(_lists(conn)) == 99
    assert len(vectors.entries(conn)) == 99


def test_up_to_the_cache_bound_a_second_query_is_exact_from_the_matrix(
    tmp_path: Path, small_ivf: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With lists and few enough vectors to keep, a process's first query probes the lists
    (a one-shot command reads a few lists, not every code) and later ones search the kept
    matrix exactly."""
    monkeypatch.setattr(vectors, "CACHE_VECTORS", 1000)
    monkeypatch.setattr(vectors, "PROBE_ROWS", 1)
    rng = np.random.default_rng(12)
    m = _clustered(rng, 300, 16, 6)
    blobs = [f"{i:040x}" for i in range(300)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(blobs, vectors.encode(m), strict=True))
    vectors.train(conn, "m")
    query = _unit(rng, 1, 16)[0]
    exact = vectors.top_k(conn, "m", query, 20, exact=True)
    vectors.clear_cache()
    first = vectors.top_k(conn, "m", query, 20)
    assert vectors._matrices == {} and len({_lists(conn)[b] for b, _ in first}) <= 2
    assert first != exact  # two lists of 300 vectors hold fewer than the exact 20 best
    assert vectors.top_k(conn, "m", query, 20) == exact


def test_lists_with_keys_that_are_not_git_ids_are_read_row_by_row(
    tmp_path: Path, small_ivf: None
) -> None:
    rng = np.random.default_rng(13)
    m = _clustered(rng, 200, 16, 5)
    keys = [f"key-{i}" if i % 3 else f"{i:040x}" for i in range(200)]  # text and blob ids
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(keys, vectors.encode(m), strict=True))
    vectors.train(conn, "m")
    for i in (1, 3, 101):
        got = vectors.top_k(conn, "m", m[i], 3)
        assert got[0][0] == keys[i]
        exact = vectors.top_k(conn, "m", m[i], 3, exact=True)
        assert got[0][0] == exact[0][0]


def test_a_list_whose_record_numbers_run_out_is_numbered_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record's id is its model, list and place in the list; new records go after the
    list's last. A list that has no number left is written again (a blob held twice kept
    once), and a list that would need more records than it has numbers is refused before
    anything is written (with 2 bits and a vector a record: 4 vectors a list)."""
    monkeypatch.setattr(vectors, "SEQ_BITS", 2)
    monkeypatch.setattr(vectors, "record_capacity", lambda conn, size: 1)
    rng = np.random.default_rng(3)
    codes = vectors.encode(_unit(rng, 8, 16))
    blobs = [f"{i:040x}" for i in range(8)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(blobs[:3], codes[:3], strict=True))
    vectors.store_vectors(conn, "m", [(blobs[0], codes[0])])  # held twice: 4 records
    vectors.store_vectors(conn, "m", [(blobs[3], codes[3])])
    ids = [r[0] for r in conn.execute("SELECT id FROM vectors ORDER BY id")]
    assert ids == [vectors.row_id(1, 0, seq) for seq in range(4)]  # renumbered, then 3
    assert vectors.missing(conn, "m", blobs) == set(blobs[4:])
    with pytest.raises(ValueError, match="over 2"):
        vectors.store_vectors(conn, "m", [(blobs[7], codes[7])])
    query = vectors.decode([codes[2]], 16)[0]
    assert vectors.top_k(conn, "m", query, 1)[0][0] == blobs[2]
    assert {b for _, b, _ in vectors.rows(conn)} == set(blobs[:4])


def test_records_are_packed_to_fill_their_pages() -> None:
    """A record of 257-byte codes (the default embedder's) and their 20-byte keys fills
    four overflow pages of 4 KiB to the byte and leaves 537 bytes on its leaf (seven to a
    leaf): 61 vectors, 278 bytes each (tests/test_vector_rows.py measures a whole file)."""
    assert vectors.record_capacity(None, 257) == 61


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE vectors SET codes = substr(codes, 1, length(codes) - 7)",  # truncated codes
        "UPDATE vectors SET keys = substr(keys, 1, length(keys) - 1)",  # a key cut short
        "UPDATE vectors SET keys = x'00' || substr(keys, 2)",  # keys of no known layout
        "UPDATE vectors SET codes = CAST(x'02' || substr(codes, 2) AS BLOB)",  # another kind
        "UPDATE vectors SET codes = x'02' || substr(codes, 2)",  # text, not UTF-8
        "UPDATE vectors SET codes = 'text', keys = 1",  # not blobs at all
    ],
)
def test_a_damaged_record_is_a_clear_error_never_an_answer(tmp_path: Path, damage: str) -> None:
    """The index is derived, but a reader must never rank what a damaged record holds:
    every path that reads records raises IndexDamagedError (:func:`vectors.nearest` then
    has the vector tables rebuilt: tests/test_vector_rows.py)."""
    from gitmem.base.errors import IndexDamagedError

    rng = np.random.default_rng(21)
    m = _unit(rng, 60, 16)
    blobs = [f"{i:040x}" for i in range(60)]
    conn = _db(tmp_path)
    vectors.store_vectors(conn, "m", zip(blobs, vectors.encode(m), strict=True))
    conn.execute(damage + " WHERE id = (SELECT max(id) FROM vectors)")
    vectors.clear_cache()
    with pytest.raises(IndexDamagedError, match="vector record"):
        vectors.top_k(conn, "m", m[0], 3)
    with pytest.raises(IndexDamagedError):
        vectors.top_k(conn, "m", m[0], 3, exact=True)
    with pytest.raises(IndexDamagedError):
        vectors.store_vectors(conn, "m", [("ab" * 20, vectors.encode(m[:1])[0])])
    with pytest.raises(IndexDamagedError):
        vectors.missing(conn, "m", ["cd" * 20])
