"""Nearest-vector search: numpy brute force (what gitmem does) beside sqlite-vec.

Issue 12 asked for "brute-force (numpy) or sqlite-vec, whichever measures better to 100k
memories". Python's own ``sqlite3`` module, as built here, cannot load extensions (it has no
``enable_load_extension``), so sqlite-vec could only ever be used through another SQLite
binding; this measures what it would buy. Not part of ``python -m bench`` (it needs two
packages gitmem does not depend on)::

    python -m venv /tmp/v && /tmp/v/bin/pip install numpy sqlite-vec apsw
    PYTHONPATH=. /tmp/v/bin/python -m bench.vecsearch --sizes 10000,100000

``--store PATH`` measures an existing store instead (gitmem's own venv is enough): its lists
against exact search on the same vectors (recall@10, latency), warm recall and search, the
process's peak memory (``on_store``)::

    python -m bench.vecsearch --store /path/to/store

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
from collections.abc import Sequence
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


RECALL_QUERIES = (
    "how does the retry loop time out", "database migration steps", "which tests are flaky",
    "deploy to staging", "benchmark memory 4242", "cache invalidation policy", "timeout retry",
    "schema migration", "logging configuration", "error handling in the parser",
)
SEARCH_WORDS = ("migration", "retry", "flaky")


def on_store(path: str, titles: int, probe_rows: Sequence[int] = ()) -> dict[str, Any]:
    """An existing store's index, its embedder and vectors made current first: the lists
    (``vectors.top_k``) against exact search on the same vectors (recall@10: the share of
    the exact top 10 found; tie-aware: the share of the found 10 that score at least the
    exact 10th), both timed in this process, then warm ``Store.recall`` and ``Store.search``
    (the same-run baseline is the exact search). Queries: the fixed questions above and the
    titles of ``titles`` memories picked at random (seeded). ``probe_rows``: settings of
    ``vectors.PROBE_ROWS`` to compare (each reported apart from the landed one)."""
    import random
    import resource

    import gitmem
    from gitmem.store import vectors
    from gitmem.store.embed import get_embedder

    store = gitmem.open(path)
    index = store.index()
    t0 = time.perf_counter()
    store.recall("warm up")
    out: dict[str, Any] = {"first recall s": time.perf_counter() - t0}
    embedder = get_embedder(str(index.db.gitdir))
    assert embedder is not None, "no embedder"
    conn = index.connect()
    model = vectors._model(conn, embedder.name)
    assert model is not None
    out["vectors"] = model.n
    out["lists"] = conn.execute(
        "SELECT count(*) FROM vector_lists WHERE model = ?", (model.id,)
    ).fetchone()[0]
    top = int(conn.execute("SELECT max(rowid) FROM memories").fetchone()[0])
    rng = random.Random(1)
    texts = list(RECALL_QUERIES)
    while len(texts) < len(RECALL_QUERIES) + titles:
        row = conn.execute(
            "SELECT title, body FROM memories WHERE rowid >= ? LIMIT 1", (rng.randint(1, top),)
        ).fetchone()
        if row is not None:
            texts.append(row[0] or row[1][:80])
    idf = vectors.idf_weights(conn, embedder.name)
    weighted = getattr(embedder, "embed_weighted", None)
    queries = [weighted(t, idf) if weighted is not None and idf is not None
               else embedder.embed([t])[0] for t in texts]
    exact_t, exact_all = [], []
    for query in queries:
        t0 = time.perf_counter()
        exact_all.append(vectors.top_k(conn, embedder.name, query, K, exact=True))
        exact_t.append(time.perf_counter() - t0)
    out["exact p50 ms"] = statistics.median(exact_t) * 1000
    chosen = vectors.PROBE_ROWS
    for rows in probe_rows or (chosen,):
        vectors.PROBE_ROWS = rows
        vectors.clear_cache()
        found_t, found_cpu, overlap, tie_ok = [], [], 0, 0
        for query, exact in zip(queries, exact_all, strict=True):
            vectors._probed.clear()  # every query by its lists, as past CACHE_VECTORS
            t0, c0 = time.perf_counter(), time.process_time()
            found = vectors.top_k(conn, embedder.name, query, K)
            found_t.append(time.perf_counter() - t0)
            found_cpu.append(time.process_time() - c0)
            overlap += len({b for b, _ in found} & {b for b, _ in exact})
            tie_ok += sum(1 for _, s in found if s >= exact[-1][1] - 1e-6)
        tag = "" if rows == chosen else f" @{rows} rows"
        out[f"probed{tag}"] = vectors.probes(out["lists"], model.n) if out["lists"] else 0
        out[f"recall@10{tag}"] = overlap / (K * len(queries))
        out[f"recall@10 tie-aware{tag}"] = tie_ok / (K * len(queries))
        out[f"top_k p50 ms{tag}"] = statistics.median(found_t) * 1000
        out[f"top_k cpu p50 ms{tag}"] = statistics.median(found_cpu) * 1000
    vectors.PROBE_ROWS = chosen
    vectors.clear_cache()
    for name, run_one, items in (
        ("recall", store.recall, RECALL_QUERIES * 3),
        ("search", store.search, SEARCH_WORDS * 5),
    ):
        times, cpu = [], []
        for item in items:
            t0, c0 = time.perf_counter(), time.process_time()
            run_one(item)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        times.sort()
        out[f"{name} p50 ms"] = statistics.median(times) * 1000
        out[f"{name} p90 ms"] = times[int(len(times) * 0.9)] * 1000
        out[f"{name} cpu p50 ms"] = statistics.median(cpu) * 1000
    out["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--store", help="measure this store's index instead (on_store)")
    parser.add_argument("--titles", type=int, default=100)
    parser.add_argument("--probe-rows", default="", help="PROBE_ROWS settings to compare")
    args = parser.parse_args()
    if args.store:
        rows = [int(x) for x in args.probe_rows.split(",") if x]
        figures = on_store(args.store, args.titles, rows)
        print(args.store + ": " + ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
        ))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            figures = run(size, Path(tmp))
            print(f"{size:,} vectors: " + ", ".join(f"{k} {v:.3g}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
