"""Recall latency and index size at 10k and 100k memories (issue 12; issue 17's index size).

The store is written with ``git fast-import`` (one commit, every memory a file as gitmem
writes it), then indexed by the ordinary catch-up. Memory text is synthetic but shaped like
prose: a 30,000-word vocabulary drawn with Zipf frequencies (s = 1.1), English stop words
in between, 15-60 words a memory; the questions are English question frames around 2-4
content words drawn the same way ("how do we <w> the <w>?"). A uniform vocabulary (the
other scenarios' 35 words, each in most memories) would make every OR query match every
memory, which no real store does.

Timed, warm, in-process, one query at a time, alternating with the baseline on the same
questions: ``Store.recall`` (hybrid: BM25 + the default embedder's vectors), recall by words
alone, and ``Store.search`` with the question's content words as FTS5 syntax (every word
required: gitmem's search before recall).

    python -m bench --only recall-latency              # the read-size store (10k in full)
    python -m bench.lexbench --sizes 10000 100000      # both sizes, standalone
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gitmem
from bench.fixtures import Context
from bench.harness import Row, log, scenario, size_label
from gitmem.format.layout import memory_path
from gitmem.store import recall as recall_mod

VOCABULARY = 30_000
ZIPF_S = 1.1
_STOP = ("the", "a", "of", "to", "and", "in", "is", "we", "it", "for", "on", "with", "that")
_FRAMES = (
    "how do we {} the {}?",
    "where is the {} for {} {}",
    "what did we decide about {} and {}?",
    "why does the {} {} fail",
    "{} {}",
    "when should I use {} with {} {} {}?",
)


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    def __init__(self, seed: int = 12) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng)
        self.weights = [1.0 / (rank**ZIPF_S) for rank in range(1, VOCABULARY + 1)]

    def content(self, k: int) -> list[str]:
        return self.rng.choices(self.words, weights=self.weights, k=k)

    def memory(self) -> str:
        out: list[str] = []
        for word in self.content(self.rng.randint(10, 40)):
            out.append(word)
            if self.rng.random() < 0.5:
                out.append(self.rng.choice(_STOP))
        return " ".join(out).capitalize() + ".\n"

    def question(self) -> tuple[str, list[str]]:
        frame = self.rng.choice(_FRAMES)
        words = self.content(frame.count("{}"))
        return frame.format(*words), words


def build(path: Path, size: int, corpus: Corpus) -> float:
    """A store of ``size`` memories in one fast-imported commit; returns the seconds."""
    started = time.perf_counter()
    gitmem.init(path, bare=True)
    stamp = "2026-01-01T00:00:00Z"
    chunks: list[bytes] = []
    message = f"import: {size} memories".encode()
    chunks.append(
        b"commit refs/heads/main\n"
        b"committer bench <bench@gitmem.invalid> 1767225600 +0000\n"
        + f"data {len(message)}\n".encode()
        + message
        + b"\nfrom refs/heads/main^0\n"
    )
    for i in range(size):
        memory_id = f"mem_{i:08x}-0000-4000-8000-{corpus.rng.getrandbits(48):012x}"
        text = (
            f"---\nid: {memory_id}\ntitle: Note {i}\nscope: repo\ncreated_at: {stamp}\n"
            f"updated_at: {stamp}\nversion: 1\n---\n\n{corpus.memory()}"
        ).encode()
        chunks.append(
            f"M 100644 inline {memory_path(memory_id)}\ndata {len(text)}\n".encode() + text
            + b"\n"
        )
    subprocess.run(
        ["git", "fast-import", "--quiet"], input=b"".join(chunks), cwd=path, check=True
    )
    return time.perf_counter() - started


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def measure(path: Path, size: int, corpus: Corpus, queries: int = 200) -> dict[str, Any]:
    """Index, warm up, and time recall, word-only recall and search on the same questions."""
    store = gitmem.open(path)
    started = time.perf_counter()
    store.index().catch_up()
    index_seconds = time.perf_counter() - started
    started = time.perf_counter()
    store.recall("warm up the embedder")  # embeds every memory once (vectors.sync)
    embed_seconds = time.perf_counter() - started
    asked = [corpus.question() for _ in range(queries + 20)]
    timings: dict[str, list[float]] = {"recall": [], "words": [], "search": []}
    cpu: dict[str, list[float]] = {"recall": [], "words": [], "search": []}
    found = {"recall": 0, "words": 0, "search": 0}
    for n, (question, words) in enumerate(asked):
        fts = " ".join(words)
        runs = (
            ("recall", lambda q=question: store.recall(q)),
            ("words", lambda q=question: recall_mod.recall(store, q, semantic=False)),
            ("search", lambda f=fts: store.search(f, limit=10)),
        )
        for name, op in runs:
            t0, c0 = time.perf_counter(), time.process_time()
            result = op()
            elapsed, spent = time.perf_counter() - t0, time.process_time() - c0
            if n >= 20:
                timings[name].append(elapsed)
                cpu[name].append(spent)
                found[name] += len(result) > 0
    conn = store.index().connect()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sizes = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    fts_bytes = sum(v for k, v in sizes.items() if k == "fts" or k.startswith("fts_"))
    vector_bytes = sum(v for k, v in sizes.items() if k.startswith("vector"))
    total = Path(store.index().path).stat().st_size
    return {
        "size": size,
        "index_seconds": index_seconds,
        "embed_seconds": embed_seconds,
        "p50": {k: _p50(v) for k, v in timings.items()},
        "p90": {k: statistics.quantiles(v, n=10)[-1] * 1000.0 for k, v in timings.items()},
        "cpu_p50": {k: _p50(v) for k, v in cpu.items()},
        "answered": {k: v / queries for k, v in found.items()},
        "fts_bytes_per_memory": fts_bytes / size,
        "vector_bytes_per_memory": vector_bytes / size,
        "index_bytes_per_memory": total / size,
    }


TARGETS = {10_000: 20.0, 100_000: 50.0}


def rows_for(m: dict[str, Any]) -> list[Row]:
    size = m["size"]
    target = TARGETS.get(size)
    label = f"{size_label(size)} memories"
    note = (
        f"p90 {m['p90']['recall']:.1f} ms; CPU time p50 {m['cpu_p50']['recall']:.1f} ms "
        f"(search {m['cpu_p50']['search']:.1f}); words only p50 {m['p50']['words']:.1f} ms; "
        f"answered {m['answered']['recall']:.0%} vs search {m['answered']['search']:.0%}; "
        f"index: FTS {m['fts_bytes_per_memory']:.0f} B/memory, vectors "
        f"{m['vector_bytes_per_memory']:.0f} B/memory, whole file "
        f"{m['index_bytes_per_memory']:.0f} B/memory"
    )
    return [
        Row(
            "recall latency (hybrid, warm, in-process)",
            label,
            "p50 ms",
            m["p50"]["recall"],
            "`Store.search`, content words as FTS5 (all required)",
            m["p50"]["search"],
            higher_is_better=False,
            runs=200,
            target=f"≤ {target:.0f} ms" if target else "",
            met=(m["p50"]["recall"] <= target) if target else None,
            note=note,
        )
    ]


@scenario("recall-latency", "Store.recall p50 (warm, in-process) and index bytes per memory")
def recall_latency(ctx: Context) -> list[Row]:
    size = ctx.config.read_size
    corpus = Corpus()
    path = ctx.new_dir(f"recall-{size_label(size)}") / "store.git"
    log(f"recall-latency: fast-importing {size:,} memories")
    build(path, size, corpus)
    return rows_for(measure(path, size, corpus, queries=200 if size >= 1000 else 20))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    for size in args.sizes:
        corpus = Corpus()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "store.git"
            seconds = build(path, size, corpus)
            print(f"{size:,} memories fast-imported in {seconds:.1f} s", flush=True)
            m = measure(path, size, corpus, args.queries)
            print(
                f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} size {size:,}: index catch-up "
                f"{m['index_seconds']:.1f} s, first embedding {m['embed_seconds']:.1f} s",
                flush=True,
            )
            for name in ("recall", "words", "search"):
                print(
                    f"  {name:>6}: p50 {m['p50'][name]:.1f} ms (CPU {m['cpu_p50'][name]:.1f} ms), "
                    f"p90 {m['p90'][name]:.1f} ms, "
                    f"answered {m['answered'][name]:.0%}"
                )
            print(
                f"  index: FTS {m['fts_bytes_per_memory']:.0f} B/memory, vectors "
                f"{m['vector_bytes_per_memory']:.0f} B/memory, file "
                f"{m['index_bytes_per_memory']:.0f} B/memory",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
