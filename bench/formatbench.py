"""Format 2 against format 3 (version and updated_at derived from history), in one run.

    python -m bench.formatbench [--memories N] [--updates U] [--reads R] [--repeat K]

Each format gets a bare store of N memories (one transaction) and its index built, then U
single updates of random memories (the update rate; format 3 catches the index up every 64
commits while writing, format 2 at its next read), then: read by id (R random ids, index
caught up), read by id at the tip without the index (a fresh Store each run: from history),
list (index), and an index rebuild (the whole history walked again). Medians of K runs; one
table on stdout.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gitmem
from gitmem import Store


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(
    fmt: int, root: Path, memories: int, updates: int, reads: int, repeat: int
) -> dict[str, float]:
    rng = random.Random(7)
    store: Store = gitmem.init(root / f"f{fmt}.git", bare=True, format=fmt)
    with store.transaction(message="bulk"):
        ids = [store.create(f"memory {i}\nline two\n", title=f"m{i}").id for i in range(memories)]
    store.list()  # an index that has been built, as in any store that was ever read
    start = time.perf_counter()
    for n in range(updates):
        store.update(rng.choice(ids), title=f"changed {n}")
    update_rate = updates / (time.perf_counter() - start)
    sample = [rng.choice(ids) for _ in range(reads)]
    store.list()  # catch the index up once
    read_ms = _median(lambda: [store.read(i) for i in sample], repeat) / reads * 1000
    few = sample[: max(1, reads // 10)]

    def cold_reads() -> None:
        plain = gitmem.open(root / f"f{fmt}.git")  # nothing remembered: history is walked
        plain.use_index = False
        for memory_id in few:
            plain.read(memory_id)

    plain_ms = _median(cold_reads, repeat) / len(few) * 1000
    list_ms = _median(store.list, repeat) * 1000
    rebuild_s = _median(lambda: store.reindex(), repeat)
    return {
        "updates/s": update_rate,
        "read by id, ms (index)": read_ms,
        "read by id, ms (no index, cold)": plain_ms,
        "list, ms": list_ms,
        "index rebuild, s": rebuild_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            fmt: run(fmt, Path(tmp), args.memories, args.updates, args.reads, args.repeat)
            for fmt in (2, 3)
        }
    print(
        f"{args.memories} memories, {args.updates} updates, {args.reads} reads, "
        f"median of {args.repeat}"
    )
    print("| figure | format 2 | format 3 |")
    print("|---|---:|---:|")
    for key in results[2]:
        print(f"| {key} | {results[2][key]:.3g} | {results[3][key]:.3g} |")


if __name__ == "__main__":
    main()
