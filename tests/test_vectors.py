"""gitmem.store.vectors: compact codes and brute-force top-k over an SQLite table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
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
def test_any_finite_vectors_round_trip_to_unit_or_zero_rows(
    rows: list[list[float]], kind: str
) -> None:
    m = np.asarray(rows, dtype=np.float32)
    back = vectors.decode(vectors.encode(m, kind), 3)
    norms = np.linalg.norm(back, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
