"""Nearest-vector search: numpy brute force (what gitmem does) beside sqlite-vec.

Issue 12 asked for "brute-force (numpy) or sqlite-vec, whichever measures better to 100k
memories". Python's own ``sqlite3`` module, as built here, cannot load extensions (it has no
``enable_load_extension``), so sqlite-vec could only ever be used through another SQLite
binding; this measures what it would buy. Not part of ``python -m bench`` (it needs two
packages gitmem does not depend on)::

    python -m venv /tmp/v && /tmp/v/bin/pip install numpy sqlite-vec apsw
    PYTHONPATH=. /tmp/v/bin/python -m bench.vecsearch --sizes 10000,100000

Both sides hold the same int8 codes of 256-d unit vectors (gitmem's stored form) and answer
top-10 by cosine for the same queries. Reported, per size: the p50 of a warm query (numpy
over the decoded float32 matrix a long-lived process keeps; sqlite-vec's ``vec0`` KNN
query on int8 rows), and a cold first query in a new connection (numpy: read the codes out
of SQLite, decode, then search, which is what a one-shot ``gitmem recall`` pays).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 256
QUERIES = 50
K = 10


def _codes(n: int, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    raw = rng.standard_normal((n, DIM)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    scale = 127.0 / np.abs(raw).max(axis=1, keepdims=True)
    return np.rint(raw * scale).astype(np.int8)


def _numpy_store(path: Path, codes: np.ndarray[Any, Any]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE vectors (rowid INTEGER PRIMARY KEY, code BLOB)")
        conn.executemany("INSERT INTO vectors VALUES (?, ?)", enumerate(c.tobytes() for c in codes))


def _numpy_load(path: Path) -> np.ndarray[Any, Any]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT code FROM vectors ORDER BY rowid").fetchall()
    matrix = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.int8).reshape(-1, DIM)
    decoded = matrix.astype(np.float32)
    decoded /= np.linalg.norm(decoded, axis=1, keepdims=True)
    return decoded


def _numpy_top(matrix: np.ndarray[Any, Any], query: np.ndarray[Any, Any]) -> list[int]:
    scores = np.einsum("ij,j->i", matrix, query)
    top = np.argpartition(-scores, K - 1)[:K]
    return [int(i) for i in top[np.argsort(-scores[top])]]


def _vec_store(path: Path, codes: np.ndarray[Any, Any]) -> Any:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding int8[{DIM}] distance_metric=cosine)")
    with conn:
        conn.executemany(
            "INSERT INTO v (rowid, embedding) VALUES (?, vec_int8(?))",
            ((i, c.tobytes()) for i, c in enumerate(codes)),
        )
    return conn


def _vec_open(path: Path) -> Any:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def _vec_top(conn: Any, query_code: bytes) -> list[int]:
    rows = conn.execute(
        "SELECT rowid FROM v WHERE embedding MATCH vec_int8(?) AND k = ? ORDER BY distance",
        (query_code, K),
    ).fetchall()
    return [int(r[0]) for r in rows]


def run(size: int, workdir: Path) -> dict[str, float]:
    rng = np.random.default_rng(size)
    codes = _codes(size, rng)
    queries = _codes(QUERIES, rng)
    floats = queries.astype(np.float32)
    floats /= np.linalg.norm(floats, axis=1, keepdims=True)
    npath, vpath = workdir / f"np-{size}.db", workdir / f"vec-{size}.db"
    _numpy_store(npath, codes)
    _vec_store(vpath, codes).close()

    t0 = time.perf_counter()
    matrix = _numpy_load(npath)
    first_np = _numpy_top(matrix, floats[0])
    cold_np = time.perf_counter() - t0
    t0 = time.perf_counter()
    vconn = _vec_open(vpath)
    first_vec = _vec_top(vconn, queries[0].tobytes())
    cold_vec = time.perf_counter() - t0

    warm_np, warm_vec, agree = [], [], 0
    for query, code in zip(floats, queries, strict=True):
        t0 = time.perf_counter()
        a = _numpy_top(matrix, query)
        warm_np.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = _vec_top(vconn, code.tobytes())
        warm_vec.append(time.perf_counter() - t0)
        agree += len(set(a) & set(b))
    vconn.close()
    del first_np, first_vec
    return {
        "numpy warm p50 ms": statistics.median(warm_np) * 1000,
        "sqlite-vec warm p50 ms": statistics.median(warm_vec) * 1000,
        "numpy cold ms": cold_np * 1000,
        "sqlite-vec cold ms": cold_vec * 1000,
        "top-10 overlap": agree / (K * QUERIES),
        "numpy db MB": npath.stat().st_size / 1e6,
        "sqlite-vec db MB": vpath.stat().st_size / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            figures = run(size, Path(tmp))
            print(f"{size:,} vectors: " + ", ".join(f"{k} {v:.3g}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
