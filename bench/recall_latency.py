"""``Store.recall`` latency: warm, in process, one question at a time.

The store is one fast-imported commit, indexed by the ordinary catch-up. Its memories are
synthetic but shaped like prose: a 30,000-word vocabulary drawn with Zipf frequencies
(s = 1.1), English stop words between, 10-40 content words a memory; the questions are
English question frames around 2-4 content words drawn the same way. (The other scenarios'
35-word vocabulary puts every word in most memories, which no real store does.) The
baseline, alternated question by question: ``Store.search`` of the question's content words.
"""

from __future__ import annotations

import random
import statistics
import time

import gitmem
from bench.fixtures import Context, fast_import, fields_for, memory_text, new_memory_id
from bench.harness import Row, log, scenario, size_label
from gitmem.format.layout import memory_path

VOCABULARY = 30_000
ZIPF_S = 1.1
FLOOR_MS = 20.0
"""``Store.recall`` p50 at 10k memories."""
_STOP = ("the", "a", "of", "to", "and", "in", "is", "we", "it", "for", "on", "with", "that")
_FRAMES = (
    "how do we {} the {}?",
    "where is the {} for {} {}",
    "what did we decide about {} and {}?",
    "why does the {} {} fail",
    "{} {}",
    "when should I use {} with {} {} {}?",
)


class Corpus:
    """Zipf-distributed made-up words, as memories and as questions."""

    def __init__(self, seed: int = 12) -> None:
        self.rng = random.Random(seed)
        syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
        words: set[str] = set()
        while len(words) < VOCABULARY:
            words.add("".join(self.rng.choices(syllables, k=self.rng.randint(2, 4))))
        self.words = sorted(words)
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


def build(ctx: Context, size: int, corpus: Corpus) -> gitmem.Store:
    """A bare store of ``size`` memories in one fast-imported commit, its index caught up."""
    path = ctx.new_dir(f"recall-{size_label(size)}") / "store.git"
    gitmem.init(path, bare=True)
    files = []
    for i in range(size):
        memory_id = new_memory_id(corpus.rng)
        fields = fields_for(i, corpus.rng, body=corpus.memory())
        text = memory_text(memory_id, fields, created=gitmem.SystemClock().now())
        files.append((memory_path(memory_id), text.encode()))
    fast_import(path, [(f"import: {size} memories", files)])
    return ctx.indexed(path)


@scenario("recall-latency", "Store.recall p50 (warm, in process), beside Store.search")
def recall_latency(ctx: Context) -> list[Row]:
    size = ctx.config.recall_size
    corpus = Corpus()
    log(f"recall-latency: {size:,} memories, fast-imported")
    store = build(ctx, size, corpus)
    store.recall("warm up the embedder")  # embeds every memory once
    queries = 200 if size >= 1000 else 20
    walls: dict[str, list[float]] = {"recall": [], "search": []}
    cpus: list[float] = []
    for n in range(queries + 20):
        question, words = corpus.question()
        for name in ("recall", "search"):
            t0, c0 = time.perf_counter(), time.process_time()
            if name == "recall":
                store.recall(question)
            else:
                store.search(" ".join(words), limit=10)
            if n >= 20:  # the first 20 warm up
                walls[name].append(time.perf_counter() - t0)
                cpus += [time.process_time() - c0] if name == "recall" else []
    p50 = statistics.median(walls["recall"]) * 1e3
    return [
        Row(
            "recall (hybrid: words and the default embedder), warm, in process",
            f"{size_label(size)} memories",
            "p50 ms",
            p50,
            "`Store.search`, the question's content words",
            statistics.median(walls["search"]) * 1e3,
            higher_is_better=False,
            runs=queries,
            target=f"≤ {FLOOR_MS:.0f} ms at 10k",
            met=p50 <= FLOOR_MS if size == 10_000 else None,
            note=f"p90 {statistics.quantiles(walls['recall'], n=10)[-1] * 1e3:.1f} ms; CPU time "
            f"p50 {statistics.median(cpus) * 1e3:.1f} ms",
        )
    ]
