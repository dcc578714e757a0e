"""gitmem.store.vectors: int8 codes and exact top-k over the index's vector rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitmem.base.errors import IndexDamagedError
from gitmem.store import vectors


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _decode(codes: Sequence[bytes], dim: int) -> np.ndarray:
    """Unit float32 vectors (rows of zeros for zero codes) from int8 codes of ``dim``."""
    out = np.frombuffer(b"".join(codes), dtype=np.int8).reshape(len(codes), dim)
    vecs = out.astype(np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.divide(vecs, norms, out=vecs, where=norms > 0)


def _db(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "index.sqlite")
    for statement in vectors.DDL:
        conn.execute(statement)
    return conn


def _store(conn: sqlite3.Connection, model: str, blobs: Sequence[str], m: np.ndarray) -> None:
    """The rows sync writes for ``m``'s vectors, with a new generation."""
    conn.execute(
        "INSERT OR IGNORE INTO vector_models (model, dim, gen) VALUES (?, ?, 0)",
        (model, m.shape[1]),
    )
    (model_id,) = conn.execute("SELECT id FROM vector_models WHERE model = ?", (model,)).fetchone()
    conn.executemany(
        "INSERT OR REPLACE INTO vectors (model, blob, code) VALUES (?, ?, ?)",
        ((model_id, b, c) for b, c in zip(blobs, vectors.encode(m), strict=True)),
    )
    conn.execute("UPDATE vector_models SET gen = random() WHERE id = ?", (model_id,))


@pytest.mark.parametrize("dim", [3, 256, 1536])
def test_codes_are_a_byte_a_dimension_and_keep_the_direction(dim: int) -> None:
    m = _unit(np.random.default_rng(1), 50, dim)
    codes = vectors.encode(m)
    assert all(len(c) == dim for c in codes)
    cosines = np.sum(_decode(codes, dim) * m, axis=1)
    assert cosines.min() > 0.99


def test_zero_vectors_and_bad_input() -> None:
    m = np.zeros((2, 5), dtype=np.float32)
    m[0] = [0.1, -0.2, 0.3, -0.4, 0.5]
    back = _decode(vectors.encode(m), 5)
    assert np.all(back[1] == 0)
    assert np.sign(back[0]).tolist() == [1, -1, 1, -1, 1]
    with pytest.raises(ValueError, match="NaN"):
        vectors.encode(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="2-d"):
        vectors.encode(np.zeros(4))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=3, max_size=3),
        min_size=1,
        max_size=20,
    )
)
@example([[1e-45, 0.0, -1e-45], [3e-39, -1e-40, 0.0]])  # subnormal float32 rows
def test_any_finite_vectors_round_trip_to_unit_or_zero_rows(rows: list[list[float]]) -> None:
    m = np.asarray(rows, dtype=np.float32)
    back = _decode(vectors.encode(m), 3)
    norms = np.linalg.norm(back, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
    # A row that is not all zeros decodes to a unit row pointing its way, subnormal floats
    # included (their codes were once a cast of infinity: zeros), to within half a step of
    # its peak in each of the 3 dimensions.
    for row, decoded in zip(m.astype(np.float64), back, strict=True):
        if row.any():
            assert float(decoded @ (row / np.linalg.norm(row))) > 0.99, (row, decoded)
        else:
            assert not decoded.any()


@pytest.fixture(params=["integers", "numpy"])
def scoring(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways rows are scored: Python's integers (no numpy loaded, a small store) and
    numpy's (a large store, or numpy loaded already)."""
    monkeypatch.setattr(vectors, "_use_numpy", lambda rows: request.param == "numpy")
    vectors.clear_cache()
    return str(request.param)


def test_top_k_equals_a_numpy_float_reference(tmp_path: Path, scoring: str) -> None:
    """The same blobs, order and cosines as brute force in float64 over the decoded codes
    (ties, equal vectors, by blob id), and nearly the neighbours of the vectors before
    coding; whichever way the rows are scored."""
    rng = np.random.default_rng(2)
    m = _unit(rng, 2000, 64)
    m[50:60] = m[3]  # ties
    blobs = [f"{i:040x}" for i in range(2000)]
    conn = _db(tmp_path)
    order = rng.permutation(2000)  # written in any order: searched in blob order
    _store(conn, "model-a", [blobs[i] for i in order], m[order])
    decoded = _decode(vectors.encode(m), 64).astype(np.float64)
    overlap = []
    for i in range(40):
        query = m[(i * 37) % 2000] + 0.3 * _unit(rng, 1, 64)[0]
        unit = query / np.linalg.norm(query)
        exact = decoded @ unit
        best = np.argsort(-exact, kind="stable")[:10]
        got = vectors.top_k(conn, "model-a", query, 10)
        assert [b for b, _ in got] == [blobs[r] for r in best]
        assert [s for _, s in got] == pytest.approx(exact[best].tolist(), abs=1e-5)
        floats = set(np.argsort(-(m.astype(np.float64) @ unit))[:10].tolist())
        overlap.append(len(floats & {int(b, 16) for b, _ in got}) / 10)
    assert np.mean(overlap) >= 0.95
    every = vectors.top_k(conn, "model-a", query, 3000)
    assert sorted(b for b, _ in every) == blobs
    assert [s for _, s in every] == sorted((s for _, s in every), reverse=True)
    assert [s for _, s in every] == pytest.approx(
        [exact[int(b, 16)] for b, _ in every], abs=1e-5
    )
    tied = vectors.top_k(conn, "model-a", m[3], 11)
    assert [b for b, _ in tied] == [blobs[3], *blobs[50:60]]
    assert vectors.top_k(conn, "other-model", m[0], 5) == []
    assert vectors.top_k(conn, "model-a", np.zeros(64), 5) == []
    assert vectors.top_k(conn, "model-a", m[0], 0) == []
    with pytest.raises(ValueError, match="32-d query"):
        vectors.top_k(conn, "model-a", np.ones(32), 5)


def test_the_matrix_follows_the_generation(tmp_path: Path, scoring: str) -> None:
    """A process keeps a model's matrix until its generation changes, also when another
    connection (another process) wrote."""
    m = _unit(np.random.default_rng(3), 4, 16)
    conn = _db(tmp_path)
    _store(conn, "m", ["a", "b"], m[:2])
    assert [b for b, _ in vectors.top_k(conn, "m", m[1], 5)] == ["b", "a"]
    conn.commit()
    other = sqlite3.connect(tmp_path / "index.sqlite")
    _store(other, "m", ["c"], m[2:3])
    other.commit()
    assert vectors.top_k(conn, "m", m[2], 1)[0][0] == "c"


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE vectors SET code = substr(code, 1, length(code) - 7)",  # cut short
        "UPDATE vectors SET code = 'text'",  # not a blob
    ],
)
def test_a_damaged_row_is_a_clear_error_never_an_answer(
    tmp_path: Path, damage: str, scoring: str
) -> None:
    """The index is untrusted: a reader never ranks a damaged row (:func:`vectors.nearest`
    then has the vector tables rebuilt: tests/test_vector_rows.py)."""
    m = _unit(np.random.default_rng(21), 60, 16)
    conn = _db(tmp_path)
    _store(conn, "m", [f"{i:040x}" for i in range(60)], m)
    conn.execute(damage + " WHERE id = (SELECT max(id) FROM vectors)")
    conn.execute("UPDATE vector_models SET gen = random()")
    with pytest.raises(IndexDamagedError, match="vector"):
        vectors.top_k(conn, "m", m[0], 3)


def test_integer_scores_hold_any_code(scoring: str, tmp_path: Path) -> None:
    """Codes at the bytes' extremes (-128 included, which encode never writes) and zero
    rows score as numpy's float64 reference does, in any dimension."""
    rng = np.random.default_rng(5)
    for dim in (1, 3, 256, 1536):
        raw = rng.integers(-128, 128, size=(30, dim), dtype=np.int8)
        raw[0] = -128
        raw[1] = 127
        raw[2] = 0
        vectors.clear_cache()  # a new in-memory database may reuse the last one's key
        conn = sqlite3.connect(":memory:")
        for statement in vectors.DDL:
            conn.execute(statement)
        conn.execute("INSERT INTO vector_models (model, dim, gen) VALUES ('m', ?, 1)", (dim,))
        conn.executemany(
            "INSERT INTO vectors (model, blob, code) VALUES (1, ?, ?)",
            ((f"{i:040x}", row.tobytes()) for i, row in enumerate(raw)),
        )
        query = rng.standard_normal(dim)
        codes = raw.astype(np.float64)
        norms = np.linalg.norm(codes, axis=1)
        exact = np.divide(codes @ (query / np.linalg.norm(query)), norms, where=norms > 0,
                          out=np.zeros(30))
        got = dict(vectors.top_k(conn, "m", query, 30))
        assert [got[f"{i:040x}"] for i in range(30)] == pytest.approx(exact.tolist(), abs=1e-6)
