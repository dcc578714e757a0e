"""Recall quality: does recall find the memories that answer a question?

The dataset is LoCoMo (Maharana et al., 2024): 10 long conversations between two people
(5,882 dialogue turns) and questions labelled with the turns that hold the answer. One
memory per turn, written through the real ``Store``; the questions of categories 1-4 (5 is
adversarial: a false premise). Split by conversation: **tuning** (the first five) and
**held-out** (the last five, never tuned on). docs/benchmarks.md says how to get the data
(``GITMEM_RECALL_DATA``, or ``bench/data/locomo10.json``); without it the scenario runs on
a small synthetic conversation and says so.

Each conversation is its own store; ``Store.recall`` and plain BM25 (rank-bm25's
``BM25Okapi`` over lowercased ``\\w+`` tokens) rank the same memories. recall@k is the share
of a question's answering memories in the top k, averaged over questions; MRR the mean of
1/rank of the first answering memory within the top 10.

``python -m bench.recall_quality`` prints both splits; ``python -m bench --only
recall-quality`` puts them in the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gitmem
from bench.fixtures import Context
from bench.harness import Row, log, scenario

DATA_ENV = "GITMEM_RECALL_DATA"
DATA_FILE = "locomo10.json"
LOCOMO_BLOB = "d95b872480b413d935821fdc3c84f8a8f5f29e73"
"""git's blob id of the locomo10.json the figures were measured on (the public LoCoMo
repository's data/locomo10.json, commit 3eb6f2c): a different file is reported."""
TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
HELD_OUT = ("conv-44", "conv-47", "conv-48", "conv-49", "conv-50")
CATEGORIES = (1, 2, 3, 4)
DEPTH = 10
"""How deep each method ranks: recall@10 and MRR@10 need no more."""


# -- the dataset ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    """Keys of the turns that answer it."""
    category: int


@dataclass
class Conversation:
    id: str
    turns: list[tuple[str, str]]
    """(turn key, the memory's text), in conversation order."""
    questions: list[Question]


@dataclass
class Dataset:
    name: str
    conversations: list[Conversation]
    splits: dict[str, tuple[str, ...]]
    note: str = ""
    skipped: int = 0
    """Questions left out: their evidence names no turn of the conversation."""


_DIA_RE = re.compile(r"D(\d+):(\d+)")


def turn_text(turn: dict[str, Any]) -> str:
    """One dialogue turn as a memory: ``Speaker: text``, and the caption of a shared image."""
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares an image: {caption}]"
    return text


def load_locomo(path: Path) -> Dataset:
    """Conversations and questions of ``locomo10.json``."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    conversations: list[Conversation] = []
    skipped = 0
    for sample in raw:
        conv = sample["conversation"]
        turns: list[tuple[str, str]] = []
        sessions = sorted(
            (int(k.split("_")[1]), k)
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
        )
        for _, key in sessions:
            for turn in conv[key]:
                turns.append((str(turn["dia_id"]), turn_text(turn)))
        keys = {k for k, _ in turns}
        questions: list[Question] = []
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            # Evidence ids are sometimes written "D8:6; D9:17" or with stray spaces.
            evidence = tuple(
                dict.fromkeys(
                    f"D{m.group(1)}:{m.group(2)}"
                    for ref in qa.get("evidence", [])
                    for m in _DIA_RE.finditer(str(ref))
                    if f"D{m.group(1)}:{m.group(2)}" in keys
                )
            )
            if not evidence:
                skipped += 1
                continue
            questions.append(Question(str(qa["question"]), evidence, int(qa["category"])))
        conversations.append(Conversation(str(sample["sample_id"]), turns, questions))
    blob = _git_blob_id(path.read_bytes())
    note = "" if blob == LOCOMO_BLOB else f"a different locomo10.json (blob {blob[:10]})"
    return Dataset(
        "LoCoMo", conversations, {"tuning": TUNING, "held-out": HELD_OUT}, note, skipped
    )


def _git_blob_id(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def find_data(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """``locomo10.json`` from the argument, ``$GITMEM_RECALL_DATA`` or bench/data/."""
    candidates: list[Path] = []
    for given in (explicit, os.environ.get(DATA_ENV)):
        if given:
            base = Path(given).expanduser()
            candidates += [base, base / DATA_FILE, base / "data" / DATA_FILE]
    candidates.append(Path(__file__).resolve().parent / "data" / DATA_FILE)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def synthetic() -> Dataset:
    """A small made-up conversation with labelled questions: the scenario's fallback (tests)."""
    facts = [
        ("Ana", "I finally adopted a puppy last weekend, a beagle named Biscuit."),
        ("Ben", "My sister is moving to Lisbon in March for her new job."),
        ("Ana", "The pottery class on Thursdays has been so relaxing for me."),
        ("Ben", "I ran my first half marathon in Porto and finished in two hours."),
        ("Ana", "We painted the kitchen a pale green colour, it looks fresh now."),
        ("Ben", "I've been learning to play the cello since January."),
        ("Ana", "My grandmother taught me her recipe for apple strudel."),
        ("Ben", "Our team shipped the new billing service on Friday."),
        ("Ana", "I'm reading a novel about a lighthouse keeper in Norway."),
        ("Ben", "The car broke down on the motorway and we had to call a tow truck."),
    ]
    filler = [
        ("Ana", "Hey Ben! How have you been?"),
        ("Ben", "Good, thanks! Busy week as always."),
        ("Ana", "That sounds great, tell me more."),
        ("Ben", "Haha, yes, I know what you mean."),
        ("Ana", "Talk soon, take care!"),
    ]
    turns: list[tuple[str, str]] = []
    evidence: list[str] = []
    for i, (speaker, text) in enumerate(facts):
        f_speaker, f_text = filler[i % len(filler)]
        turns.append((f"D{i + 1}:1", f"{f_speaker}: {f_text}"))
        turns.append((f"D{i + 1}:2", f"{speaker}: {text}"))
        evidence.append(f"D{i + 1}:2")
    asked = [
        "What kind of dog did Ana adopt?",
        "Where is Ben's sister moving?",
        "What class does Ana take on Thursdays?",
        "Which race did Ben run in Porto?",
        "What colour did Ana paint her kitchen?",
        "What instrument is Ben learning?",
        "Who taught Ana to bake strudel?",
        "What did Ben's team ship?",
        "What is the book Ana is reading about?",
        "What happened to Ben's car?",
    ]
    questions = [Question(q, (e,), 1) for q, e in zip(asked, evidence, strict=True)]
    half = len(questions) // 2
    conversations = [
        Conversation("synthetic-a", turns, questions[:half]),
        Conversation("synthetic-b", turns, questions[half:]),
    ]
    return Dataset(
        "synthetic (LoCoMo not found)",
        conversations,
        {"tuning": ("synthetic-a",), "held-out": ("synthetic-b",)},
        f"set {DATA_ENV} to LoCoMo's locomo10.json for the real figures",
    )


# -- the stores --------------------------------------------------------------------------


@dataclass
class Built:
    """One conversation written into its own store."""

    conversation: Conversation
    store: Any
    ids: list[str]
    """Memory id of each turn, in turn order."""
    texts: list[str]
    """What each memory says (read back from the store), in turn order."""
    key_of: dict[str, str] = field(default_factory=dict)
    """Memory id -> turn key."""


def build_store(path: Path, conversation: Conversation) -> Built:
    """Write the conversation's turns as memories, one transaction; read them back."""
    store = gitmem.init(path, bare=True)
    ids: list[str] = []
    with store.transaction(f"import {conversation.id}") as tx:
        for _key, text in conversation.turns:
            ids.append(tx.create(text, tags=[conversation.id]).id)
    by_id = {m.id: m for m in store.list()}
    texts = [memory_text(by_id[i]) for i in ids]
    built = Built(conversation, store, ids, texts)
    built.key_of = {mid: key for mid, (key, _) in zip(ids, conversation.turns, strict=True)}
    return built


def memory_text(memory: Any) -> str:
    """The text baselines see: title (if any) and body."""
    return f"{memory.title}\n{memory.body}" if memory.title else str(memory.body)


# -- methods: each ranks memory ids for a question --------------------------------------------

Ranker = Callable[[str], list[str]]
"""``rank(question)`` -> memory ids, best first (at most :data:`DEPTH`)."""


def bm25_ranker(built: Built) -> Ranker:
    """rank-bm25's BM25Okapi over the memories' lowercased ``\\w+`` tokens."""
    from rank_bm25 import BM25Okapi

    def tokens(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    bm25 = BM25Okapi([tokens(t) for t in built.texts])
    ids = built.ids

    def rank(question: str) -> list[str]:
        query = tokens(question)
        if not query:
            return []
        scores = bm25.get_scores(query)
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:DEPTH]
        return [ids[i] for i in order if scores[i] > 0]

    return rank


def recall_ranker(built: Built) -> Ranker:
    """``Store.recall`` of this build."""

    def rank(question: str) -> list[str]:
        return [hit.id for hit in built.store.recall(question, limit=DEPTH)]

    return rank


# -- metrics ------------------------------------------------------------------------------------


@dataclass
class Scores:
    questions: int = 0
    recall5: float = 0.0
    recall10: float = 0.0
    mrr: float = 0.0

    def add(self, ranked: Sequence[str], relevant: set[str]) -> None:
        self.questions += 1
        self.recall5 += len(relevant.intersection(ranked[:5])) / len(relevant)
        self.recall10 += len(relevant.intersection(ranked[:10])) / len(relevant)
        for position, key in enumerate(ranked[:DEPTH], start=1):
            if key in relevant:
                self.mrr += 1.0 / position
                break

    def merged(self, other: Scores) -> Scores:
        return Scores(
            self.questions + other.questions,
            self.recall5 + other.recall5,
            self.recall10 + other.recall10,
            self.mrr + other.mrr,
        )

    def figures(self) -> dict[str, float]:
        n = max(1, self.questions)
        return {
            "recall@5": self.recall5 / n,
            "recall@10": self.recall10 / n,
            "MRR": self.mrr / n,
        }


def score(built: Built, ranker: Ranker) -> Scores:
    out = Scores()
    for question in built.conversation.questions:
        ranked = [built.key_of.get(mid, "") for mid in ranker(question.text)]
        out.add(ranked, set(question.evidence))
    return out


# -- the evaluation -----------------------------------------------------------------------------

PLAIN = "plain BM25"
RECALL = "Store.recall"


@dataclass
class Evaluation:
    dataset: Dataset
    results: dict[str, dict[str, Scores]]
    """split -> method -> scores."""
    memories: int


def evaluate(
    dataset: Dataset,
    root: Path,
    *,
    splits: Iterable[str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Evaluation:
    """Write each conversation of the chosen splits into its own store under ``root`` and
    score both methods on its questions."""
    by_id = {c.id: c for c in dataset.conversations}
    results: dict[str, dict[str, Scores]] = {}
    memories = 0
    for split in splits if splits is not None else dataset.splits:
        per: dict[str, Scores] = {}
        for conv_id in dataset.splits[split]:
            conversation = by_id.get(conv_id)
            if conversation is None:
                continue
            built = build_store(root / f"{conv_id}.git", conversation)
            memories += len(built.ids)
            progress(f"{split}: {conv_id}, {len(built.ids)} memories, "
                     f"{len(conversation.questions)} questions")  # fmt: skip
            for name, ranker in ((PLAIN, bm25_ranker(built)), (RECALL, recall_ranker(built))):
                per[name] = per.get(name, Scores()).merged(score(built, ranker))
        results[split] = per
    return Evaluation(dataset, results, memories)


def table(evaluation: Evaluation) -> str:
    """Both methods' figures per split, with the ratio to plain BM25's recall@5."""
    note = evaluation.dataset.note
    lines = [
        f"dataset: {evaluation.dataset.name}" + (f" ({note})" if note else "")
        + f"; {evaluation.memories} memories",
        "",
        "| split | method | questions | recall@5 | recall@10 | MRR | r@5 vs plain BM25 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for split, per in evaluation.results.items():
        base = per[PLAIN].figures()["recall@5"]
        for method, scores in per.items():
            f = scores.figures()
            ratio = f["recall@5"] / base if base else math.nan
            lines.append(
                f"| {split} | {method} | {scores.questions} | {f['recall@5']:.3f} | "
                f"{f['recall@10']:.3f} | {f['MRR']:.3f} | {ratio:.2f}x |"
            )
    return "\n".join(lines)


@scenario("recall-quality", "recall quality on LoCoMo (recall@5), beside plain BM25")
def recall_quality(ctx: Context) -> list[Row]:
    """Both splits of LoCoMo (the synthetic conversation in --tiny or without the data)."""
    path = None if ctx.config.mode == "tiny" else find_data()
    dataset = synthetic() if path is None else load_locomo(path)
    log(f"recall quality on {dataset.name}")
    evaluation = evaluate(dataset, ctx.new_dir("recall-quality"), progress=log)
    rows: list[Row] = []
    for split, per in evaluation.results.items():
        mine, base = per[RECALL].figures(), per[PLAIN].figures()
        rows.append(
            Row(
                f"recall quality, {dataset.name}, {split} split",
                f"{per[RECALL].questions} questions",
                "recall@5",
                mine["recall@5"],
                "plain BM25 (rank-bm25)",
                base["recall@5"],
                compare="quality",
                runs=1,
                target="unchanged within 0.01",
                note=f"recall@10 {mine['recall@10']:.3f} (BM25 {base['recall@10']:.3f}), "
                f"MRR@10 {mine['MRR']:.3f} (BM25 {base['MRR']:.3f})"
                + (f"; {dataset.note}" if dataset.note else ""),
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.recall_quality",
        description="Recall quality on LoCoMo: Store.recall beside plain BM25.",
    )
    p.add_argument("--data", help=f"locomo10.json or its folder (default: ${DATA_ENV})")
    p.add_argument("--split", choices=["tuning", "held-out", "both"], default="both")
    p.add_argument("--synthetic", action="store_true", help="the small synthetic dataset")
    args = p.parse_args(argv)
    path = None if args.synthetic else find_data(args.data)
    if path is None and not args.synthetic:
        print(f"locomo10.json not found (--data or ${DATA_ENV}); see docs/benchmarks.md",
              file=sys.stderr)  # fmt: skip
        return 2
    dataset = synthetic() if path is None else load_locomo(path)
    splits = ["tuning", "held-out"] if args.split == "both" else [args.split]
    with tempfile.TemporaryDirectory(prefix="gitmem-recall-") as tmp:
        progress = lambda m: print(m, file=sys.stderr)  # noqa: E731
        evaluation = evaluate(dataset, Path(tmp), splits=splits, progress=progress)
    print(table(evaluation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
