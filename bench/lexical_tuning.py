"""Tuning Store.recall's lexical ranking on the recall-quality benchmark's TUNING split.

Builds the tuning split's stores once (bench/recall_quality.py: LoCoMo, one memory per
dialogue turn), then scores ``Store.recall`` under each configuration: BM25 field weights,
the stop-word list, the identifier phrases, the stemmer (FTS5's porter tokenizer against
Snowball via PyStemmer, applied before a plain unicode61 tokenizer), and the fusion weights
with the embedder. Never run on the held-out split: that one is reported, not tuned on.

    GITMEM_RECALL_DATA=/path/to/locomo10.json python -m bench.lexical_tuning
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import recall_quality as rq
from gitmem.store import index as index_mod
from gitmem.store import lexical
from gitmem.store import providers as providers_mod
from gitmem.store import recall as recall_mod


@contextlib.contextmanager
def patched(obj: Any, **values: Any) -> Iterator[None]:
    old = {k: getattr(obj, k) for k in values}
    for k, v in values.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(obj, k, v)


def snowball() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Snowball English (PyStemmer) applied by gitmem before a non-stemming tokenizer."""
    import Stemmer  # type: ignore[import-not-found]

    stem = Stemmer.Stemmer("english")
    plain_row, plain_parse = lexical.fts_row, recall_mod.parse

    def stemmed(text: str) -> str:
        return " ".join(stem.stemWords([w.lower() for w in lexical._WORD_RE.findall(text)]))

    def fts_row(memory: Any) -> tuple[str, str, str, str, str]:
        return tuple(stemmed(c) for c in plain_row(memory))  # type: ignore[return-value]

    def parse(text: str) -> recall_mod.Query:
        q = plain_parse(text)
        terms = tuple(dict.fromkeys(stem.stemWords(list(q.terms))))
        return recall_mod.Query(text, terms, lexical.or_query(terms))

    @contextlib.contextmanager
    def on() -> Iterator[None]:
        with (
            patched(lexical, fts_row=fts_row, TOKENIZER="unicode61 remove_diacritics 2"),
            patched(recall_mod, parse=parse),
        ):
            yield

    return on


def reindexed(built: list[rq.Built], ddl_tokenizer: str) -> None:
    provider = index_mod.LEXICAL
    fresh = providers_mod.RowProvider(
        provider.name,
        provider.version + 1000 + len(ddl_tokenizer),
        provider.tables,
        (
            f"CREATE VIRTUAL TABLE fts USING fts5({', '.join(lexical.COLUMNS)}, "
            f"content = '', tokenize = '{ddl_tokenizer}')",
        ),
        provider.apply,
    )
    providers_mod.register(fresh)
    for b in built:
        b.store.index().rebuild()


def evaluate(built: list[rq.Built]) -> dict[str, float]:
    total = rq.Scores()
    for b in built:
        total = total.merged(rq.score(b, rq.store_recall_ranker(b)))
    return total.figures()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="locomo10.json")
    parser.add_argument("--only", help="run only configurations whose label has this text")
    args = parser.parse_args(argv)
    path = rq.find_data(args.data)
    dataset = rq.load_locomo(path) if path is not None else rq.synthetic()
    wanted = set(dataset.splits["tuning"])
    with tempfile.TemporaryDirectory() as tmp:
        built = [
            rq.build_store(Path(tmp) / c.id, c) for c in dataset.conversations if c.id in wanted
        ]
        plain = rq.Scores()
        for b in built:
            ranker = rq.bm25_ranker(b)
            assert ranker is not None
            plain = plain.merged(rq.score(b, ranker))
        base = plain.figures()["recall@5"]
        print(f"{dataset.name}, tuning split: {sum(len(b.ids) for b in built)} memories")
        print("| configuration | recall@5 | recall@10 | MRR | vs plain BM25 |")
        print("|---|---:|---:|---:|---:|")

        def row(label: str, figures: dict[str, float]) -> None:
            print(
                f"| {label} | {figures['recall@5']:.3f} | {figures['recall@10']:.3f} | "
                f"{figures['MRR']:.3f} | {figures['recall@5'] / base:.2f}x |",
                flush=True,
            )

        row("plain BM25 (rank-bm25)", plain.figures())
        configs: list[tuple[str, Callable[[], contextlib.AbstractContextManager[None]]]] = [
            ("recall as built", contextlib.nullcontext),
            ("no stop words", lambda: patched(lexical, STOP_WORDS=frozenset())),
            ("bench's stop list", lambda: patched(lexical, STOP_WORDS=rq.STOP_WORDS)),
            ("no phrases", lambda: patched(recall_mod, _JOINED_RE=__import__("re").compile("$^"))),
        ]
        for weights in [(1, 1, 1, 1, 1), (5, 1, 2, 2, 1), (2, 1, 1, 1, 0.5), (2, 1, 2, 1, 2)]:
            configs.append(
                (f"weights {weights}", lambda w=weights: patched(recall_mod, WEIGHTS=w))
            )
        for k in (10.0, 60.0):
            for sem in (0.25, 0.5, 1.0):
                configs.append(
                    (
                        f"fusion k={k:g} lexical 1 + semantic {sem}",
                        lambda k=k, sem=sem: patched(recall_mod, RRF_K=k, FUSION=(1.0, sem)),
                    )
                )
        for sem in (0.1, 0.2, 0.35, 0.5):
            configs.append(
                (
                    f"fusion linear (min-max) lexical 1 + semantic {sem}",
                    lambda sem=sem: patched(recall_mod, FUSION_MODE="linear", FUSION=(1.0, sem)),
                )
            )
        for floor in (0.3, 0.4, 0.5, 0.6, 2.0):
            configs.append(
                (
                    f"fusion linear 1 + 0.2, semantic-only floor {floor}",
                    lambda floor=floor: patched(
                        recall_mod, FUSION_MODE="linear", FUSION=(1.0, 0.2),
                        SEMANTIC_ONLY_MIN=floor,
                    ),
                )
            )
        for label, make in configs:
            if args.only and args.only not in label:
                continue
            with make():
                row(label, evaluate(built))
        if not args.only or "snowball" in args.only:
            try:
                on = snowball()
            except ImportError:
                print("| snowball | (PyStemmer not installed) | | | |")
            else:
                with on():
                    reindexed(built, lexical.TOKENIZER)
                    row("snowball (PyStemmer) instead of porter", evaluate(built))
                reindexed(built, lexical.TOKENIZER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
