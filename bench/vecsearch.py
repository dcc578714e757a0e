"""Exact nearest-vector search (``vectors.top_k``) at 10k and 100k memories.

The rows are what the default embedder's vectors become in the index (256-d int8 codes,
one row a blob), written to a scratch database; the queries are random unit vectors. Per
size: the first query of a process (it reads the codes out of SQLite into the int8 matrix)
and the p50 of a warm one, wall and CPU time::

    python -m bench.vecsearch --sizes 10000 100000

``Store.recall``'s p50 at 10k memories (words and vectors together) is
``python -m bench --only recall-latency`` (bench/recall_latency.py).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from gitmem.store import vectors

DIM = 256
K = 10


def build(path: Path, n: int, rng: np.random.Generator) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    for statement in vectors.DDL:
        conn.execute(statement)
    conn.execute("INSERT INTO vector_models (id, model, dim, gen) VALUES (1, 'm', ?, 1)", (DIM,))
    for start in range(0, n, 10_000):
        raw = rng.standard_normal((min(10_000, n - start), DIM)).astype(np.float32)
        codes = vectors.encode(raw / np.linalg.norm(raw, axis=1, keepdims=True))
        conn.executemany(
            "INSERT INTO vectors (model, blob, code) VALUES (1, ?, ?)",
            ((f"{start + i:040x}", code) for i, code in enumerate(codes)),
        )
    conn.commit()
    return conn


def measure(n: int, queries: int) -> None:
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        conn = build(Path(tmp) / "index.sqlite", n, rng)
        asked = rng.standard_normal((queries + 1, DIM)).astype(np.float32)
        vectors.clear_cache()
        started = time.perf_counter()
        vectors.top_k(conn, "m", asked[0], K)
        first = time.perf_counter() - started
        wall, cpu = [], []
        for query in asked[1:]:
            t0, c0 = time.perf_counter(), time.process_time()
            vectors.top_k(conn, "m", query, K)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        conn.close()
    print(
        f"{n:>9,} vectors: first query {first * 1e3:.0f} ms; warm p50 "
        f"{statistics.median(wall) * 1e3:.1f} ms (CPU {statistics.median(cpu) * 1e3:.1f} ms)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)
    for n in args.sizes:
        measure(n, args.queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
