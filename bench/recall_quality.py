"""Recall quality: does recall find the memories that answer a question?

The dataset is LoCoMo (Maharana et al., 2024, "Evaluating Very Long-Term Conversational
Memory of LLM Agents"): 10 long conversations between two people (5,882 dialogue turns, 19 to
32 sessions each) and 1,986 questions about them, each labelled with the turns that hold the
answer (``evidence``: dialogue ids such as ``D3:7``). It is the long-term conversational-memory
kind of recall an agent does; the labels are per turn, so one memory per turn gives exact
relevance labels. Questions of category 5 (adversarial: the premise is false, the answer is
"not mentioned") are left out, as retrieval evaluations of LoCoMo do; categories 1-4 remain.

Data files are never committed: the bench reads ``locomo10.json`` from ``GITMEM_RECALL_DATA``
(a file, or a folder holding ``locomo10.json`` or ``data/locomo10.json``), else from
``bench/data/locomo10.json`` (git-ignored). docs/benchmarks.md says how to get it. Without
it the scenario runs on a small synthetic conversation (and says so in the table), which is
how the test suite runs it.

Splits, by conversation (a memory never serves both): **tuning** = the first five
conversations (conv-26, conv-30, conv-41, conv-42, conv-43), **held-out** = the last five
(conv-44, conv-47, conv-48, conv-49, conv-50). Tune on the tuning split only; the held-out
figures are reported, never optimised.

Each conversation is its own store (questions are about one conversation), written through
the real ``Store`` in one ``store.transaction()``; every method ranks the same memories:

* plain BM25: rank-bm25's ``BM25Okapi`` over lowercased ``\\w+`` tokens, no stemming, no stop
  words (the issue's baseline);
* the embedder alone: the default embedder, brute-force cosine;
* gitmem's previous search: ``Store.search`` as it was before recall (FTS5 MATCH of the query,
  every word required, a query FTS5 rejects searched again as quoted literal words), kept here
  as a frozen copy over its own FTS5 table with the same tokenizer and weights, so the
  baseline does not move as search.py changes;
* ``Store.search`` and ``Store.recall`` of this build (recall when it exists);
* configurations for tuning: BM25 stemmed/unstemmed, with/without stop words, and
  reciprocal-rank fusion of BM25 with the embedder.

recall@k = the share of a question's answering memories found in the top k, averaged over
questions; MRR = the mean of 1/rank of the first answering memory within the top 10.

``python -m bench.recall_quality`` prints every configuration's figures per split (quick
tuning runs); ``python -m bench --only recall-quality`` puts the main ones in the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gitmem
from bench.harness import Row, log, scenario, size_label

if TYPE_CHECKING:
    from bench.fixtures import Context

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
RRF_K = 60

# A common English stop-word list (the question words included: they carry nothing in a
# memory about them). Used only by the "stop words" configurations.
_STOP_TEXT = """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can could did didn't do does doesn't doing don't
    down during each few for from further had has have having he her here hers herself him
    himself his how i if in into is isn't it it's its itself just let's me more most my myself
    no nor not now of off on once only or other our ours ourselves out over own same she should
    so some such than that that's the their theirs them themselves then there there's these
    they this those through to too under until up very was wasn't we were weren't what what's
    when where which while who whom why will with would you your yours yourself yourselves s t
    d ll m re ve"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


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
    seconds: float = 0.0


def build_store(path: Path, conversation: Conversation) -> Built:
    """Write the conversation's turns as memories, one transaction; read them back."""
    store = gitmem.init(path, bare=True)
    started = time.perf_counter()
    ids: list[str] = []
    with store.transaction(f"import {conversation.id}") as tx:
        for _key, text in conversation.turns:
            ids.append(tx.create(text, tags=[conversation.id]).id)
    seconds = time.perf_counter() - started
    by_id = {m.id: m for m in store.list()}
    texts = [memory_text(by_id[i]) for i in ids]
    built = Built(conversation, store, ids, texts, seconds=seconds)
    built.key_of = {mid: key for mid, (key, _) in zip(ids, conversation.turns, strict=True)}
    return built


def memory_text(memory: Any) -> str:
    """The text baselines see: title (if any) and body."""
    return f"{memory.title}\n{memory.body}" if memory.title else str(memory.body)


# -- methods: each ranks memory ids for a question --------------------------------------------

Ranker = Callable[..., list[str]]
"""``rank(question, depth=DEPTH)`` -> memory ids, best first (at most ``depth``)."""


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _stemmer() -> Callable[[list[str]], list[str]] | None:
    try:
        import Stemmer  # PyStemmer: Snowball's English stemmer
    except ImportError:
        return None
    stem = Stemmer.Stemmer("english")
    return stem.stemWords  # type: ignore[no-any-return]


def bm25_ranker(built: Built, *, stem: bool = False, stop: bool = False) -> Ranker | None:
    """rank-bm25's BM25Okapi over the memories (plain: lowercased ``\\w+`` tokens)."""
    from rank_bm25 import BM25Okapi

    stemmer = _stemmer() if stem else None
    if stem and stemmer is None:
        return None

    def analyse(text: str) -> list[str]:
        words = tokens(text)
        if stop:
            words = [w for w in words if w not in STOP_WORDS]
        return stemmer(words) if stemmer is not None else words

    corpus = [analyse(t) for t in built.texts]
    bm25 = BM25Okapi(corpus)
    ids = built.ids

    def rank(question: str, depth: int = DEPTH) -> list[str]:
        query = analyse(question)
        if not query:
            return []
        scores = bm25.get_scores(query)
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:depth]
        return [ids[i] for i in order if scores[i] > 0]

    return rank


def semantic_scores(built: Built, embedder: Any, question: str, k: int) -> list[tuple[str, float]]:
    """(memory id, cosine) of the ``k`` memories nearest the question through gitmem's own
    semantic path (``vectors.nearest``: int8 vectors in the index, the query's tokens
    weighted by rarity for the static default)."""
    from gitmem.store import vectors

    index = built.store.index()
    found = vectors.nearest(index, question, k, embedder=embedder)
    if not found:
        return []
    conn = index.connect()
    names = dict(
        conn.execute(
            f"SELECT rowid, id FROM memories WHERE rowid IN ({','.join('?' * len(found))})",
            tuple(r for r, _ in found),
        ).fetchall()
    )
    return [(str(names[r]), c) for r, c in found if r in names]


def embed_ranker(built: Built, embedder: Any) -> Ranker:
    """The embedder alone, as recall's semantic list gets it (``vectors.nearest``)."""

    def rank(question: str, depth: int = DEPTH) -> list[str]:
        return [mid for mid, _ in semantic_scores(built, embedder, question, depth)]

    return rank


def rrf(rankers: Sequence[tuple[Ranker, float]], k: int = RRF_K, depth: int = 50) -> Ranker:
    """Reciprocal-rank fusion: score = sum of weight / (k + rank) over the rankings."""

    def rank(question: str, out: int = DEPTH) -> list[str]:
        scores: dict[str, float] = {}
        for ranker, weight in rankers:
            for position, mid in enumerate(ranker(question, depth), start=1):
                scores[mid] = scores.get(mid, 0.0) + weight / (k + position)
        return sorted(scores, key=lambda m: -scores[m])[:out]

    return rank


def previous_search_ranker(built: Built) -> Ranker:
    """gitmem's search before recall, frozen: FTS5 MATCH (every word required), bm25 with
    title 10, body 1, tags 3, names 5 after the title tier; a query FTS5 rejects is run
    again as quoted literal words (search.literal_fts_query as it was)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE fts USING fts5(title, body, tags, names, "
        "tokenize = 'unicode61 remove_diacritics 2')"
    )
    memories = {m.id: m for m in built.store.list()}
    for rowid, mid in enumerate(built.ids, start=1):
        m = memories[mid]
        names = " ".join(x for x in (m.category, m.id) if x)
        conn.execute(
            "INSERT INTO fts (rowid, title, body, tags, names) VALUES (?, ?, ?, ?, ?)",
            (rowid, m.title or "", m.body, " ".join(m.tags), names),
        )
    titles = [(memories[mid].title or "").casefold() for mid in built.ids]
    ids = built.ids
    words_re = re.compile(r"\w+\*?", re.UNICODE)
    operators = {"AND", "OR", "NOT", "NEAR"}

    def run(query: str, needle: str, depth: int) -> list[str]:
        rows = conn.execute(
            "SELECT rowid, bm25(fts, 10.0, 1.0, 3.0, 5.0) FROM fts WHERE fts MATCH ?", (query,)
        ).fetchall()

        def tier(rowid: int) -> int:
            title = titles[rowid - 1]
            if title and title == needle:
                return 2
            return 1 if needle and needle in title else 0

        rows.sort(key=lambda r: (-tier(r[0]), r[1], r[0]))
        return [ids[r[0] - 1] for r in rows[:depth]]

    def rank(question: str, depth: int = DEPTH) -> list[str]:
        terms = [w for w in words_re.findall(question) if w.rstrip("*") not in operators]
        needle = " ".join(t.rstrip("*") for t in terms).casefold()
        try:
            return run(question, needle, depth)
        except sqlite3.OperationalError:
            words = [w.rstrip("*") for w in words_re.findall(question)]
            literal = " ".join('"' + w.replace('"', '""') + '"' for w in words if w)
            return run(literal, needle, depth) if literal else []

    return rank


def store_search_ranker(built: Built) -> Ranker:
    """``Store.search`` of this build, default mode."""

    def rank(question: str, depth: int = DEPTH) -> list[str]:
        try:
            return list(built.store.search(question, limit=depth).ids)
        except gitmem.GitmemError:
            return []

    return rank


def has_recall() -> bool:
    return hasattr(gitmem.Store, "recall")


def store_recall_ranker(built: Built) -> Ranker:
    """``Store.recall`` of this build (whatever it returns: objects or mappings with an id)."""

    def rank(question: str, depth: int = DEPTH) -> list[str]:
        results = built.store.recall(question, limit=depth)
        out: list[str] = []
        for item in results:
            mid = item.get("id") if isinstance(item, dict) else getattr(item, "id", None)
            if mid is not None:
                out.append(str(mid))
        return out

    return rank


def recall_rerank_ranker(built: Built, embedder: Any, alpha: float, pool: int = 50) -> Ranker:
    """``Store.recall``'s top ``pool`` reranked by ``score / best score + alpha * cosine``
    (cosine from ``vectors.nearest``): the semantic side as a tie-breaker on the lexical
    candidates."""
    everything = len(built.ids)

    def rank(question: str, depth: int = DEPTH) -> list[str]:
        hits = [
            (str(getattr(h, "id", "")), float(getattr(h, "score", 0.0)))
            for h in built.store.recall(question, limit=pool)
        ]
        if not hits:
            return []
        cosine = dict(semantic_scores(built, embedder, question, everything))
        best = max(sc for _, sc in hits) or 1.0
        fused = [(mid, sc / best + alpha * cosine.get(mid, 0.0)) for mid, sc in hits]
        fused.sort(key=lambda pair: -pair[1])
        return [mid for mid, _ in fused[:depth]]

    return rank


# -- metrics ------------------------------------------------------------------------------------


@dataclass
class Scores:
    questions: int = 0
    recall5: float = 0.0
    recall10: float = 0.0
    mrr: float = 0.0
    seconds: float = 0.0

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
            self.seconds + other.seconds,
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
    started = time.perf_counter()
    for question in built.conversation.questions:
        ranked = [built.key_of.get(mid, "") for mid in ranker(question.text)]
        out.add(ranked, set(question.evidence))
    out.seconds = time.perf_counter() - started
    return out


# -- the evaluation -----------------------------------------------------------------------------

PLAIN = "plain BM25"
EMBED = "embedder alone"
PREVIOUS = "previous search"
SEARCH = "Store.search"
RECALL = "Store.recall"


def methods(built: Built, embedder: Any, *, configs: bool) -> dict[str, Ranker]:
    """The methods evaluated on one store: baselines, gitmem, and (``configs``) tuning
    configurations."""
    plain = bm25_ranker(built)
    assert plain is not None
    out: dict[str, Ranker] = {PLAIN: plain}
    vectors = embed_ranker(built, embedder) if embedder is not None else None
    if vectors is not None:
        out[EMBED] = vectors
    out[PREVIOUS] = previous_search_ranker(built)
    out[SEARCH] = store_search_ranker(built)
    if has_recall():
        out[RECALL] = store_recall_ranker(built)
    if not configs:
        return out
    variants: dict[str, Ranker] = {}
    for stem in (False, True):
        for stop in (False, True):
            if not stem and not stop:
                continue
            found = bm25_ranker(built, stem=stem, stop=stop)
            if found is not None:
                label = "BM25 " + "+".join(
                    n for n, on in (("stemmed", stem), ("stop words", stop)) if on
                )
                variants[label] = found
    out.update(variants)
    if vectors is not None and has_recall():
        for alpha in (0.2, 0.5):
            out[f"Store.recall top 50 + {alpha} x cosine (rerank)"] = recall_rerank_ranker(
                built, embedder, alpha
            )
    if vectors is not None and has_recall():
        out["RRF k=60 (Store.recall + 0.3 x embedder)"] = rrf([(out[RECALL], 1.0), (vectors, 0.3)])
    if vectors is not None:
        best_lex = variants.get("BM25 stemmed+stop words", plain)
        for label, lex in (("plain BM25", plain), ("BM25 stemmed+stop words", best_lex)):
            for k in (10, 60):
                out[f"RRF k={k} ({label} + embedder)"] = rrf([(lex, 1.0), (vectors, 1.0)], k)
            out[f"RRF k=60 ({label} x2 + embedder)"] = rrf([(lex, 2.0), (vectors, 1.0)])
    return out


@dataclass
class Evaluation:
    dataset: Dataset
    embedder_name: str | None
    results: dict[str, dict[str, Scores]]
    """split -> method -> scores."""
    memories: int
    write_seconds: float


def evaluate(
    dataset: Dataset,
    root: Path,
    *,
    embedder: Any = None,
    configs: bool = False,
    splits: Iterable[str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Evaluation:
    """Write each conversation of the chosen splits into its own store under ``root`` and
    score every method on its questions."""
    wanted = list(splits) if splits is not None else list(dataset.splits)
    by_id = {c.id: c for c in dataset.conversations}
    results: dict[str, dict[str, Scores]] = {}
    memories = 0
    write_seconds = 0.0
    for split in wanted:
        per: dict[str, Scores] = {}
        for conv_id in dataset.splits[split]:
            conversation = by_id.get(conv_id)
            if conversation is None:
                continue
            built = build_store(root / f"{conv_id}.git", conversation)
            memories += len(built.ids)
            write_seconds += built.seconds
            progress(
                f"{split}: {conv_id}, {len(built.ids)} memories, "
                f"{len(conversation.questions)} questions"
            )
            for name, ranker in methods(built, embedder, configs=configs).items():
                per[name] = per.get(name, Scores()).merged(score(built, ranker))
        results[split] = per
    name = getattr(embedder, "name", None) if embedder is not None else None
    return Evaluation(dataset, name, results, memories, write_seconds)


def default_embedder() -> Any:
    """The default embedder as installed (None when it is not available)."""
    try:
        from gitmem.store.embed import load_embedder
    except ImportError:
        return None
    try:
        return load_embedder(None)
    except gitmem.GitmemError:
        return None


def table(evaluation: Evaluation) -> str:
    """Every method's figures per split, with the ratio to plain BM25's recall@5."""
    lines = [
        f"dataset: {evaluation.dataset.name}"
        + (f" ({evaluation.dataset.note})" if evaluation.dataset.note else ""),
        f"embedder: {evaluation.embedder_name or 'none'}; {evaluation.memories} memories",
        "",
        "| split | method | questions | recall@5 | recall@10 | MRR | r@5 vs plain BM25 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for split, per in evaluation.results.items():
        base = per[PLAIN].figures()["recall@5"] if PLAIN in per else math.nan
        for method, scores in per.items():
            f = scores.figures()
            ratio = f["recall@5"] / base if base else math.nan
            lines.append(
                f"| {split} | {method} | {scores.questions} | {f['recall@5']:.3f} | "
                f"{f['recall@10']:.3f} | {f['MRR']:.3f} | {ratio:.2f}x |"
            )
    return "\n".join(lines)


# -- the scenario in ``python -m bench`` ---------------------------------------------------------

TARGET_RATIO = 1.15
"""Issue 12: Store.recall's recall@5 at least 1.15x plain BM25's, same memories, same run."""


def _scenario_rows(evaluation: Evaluation) -> list[Row]:
    rows: list[Row] = []
    dataset = evaluation.dataset
    for split, per in evaluation.results.items():
        if PLAIN not in per:
            continue
        base = per[PLAIN].figures()
        held = " (never tuned on)" if split == "held-out" else ""
        for method in (PLAIN, EMBED, PREVIOUS, SEARCH, RECALL):
            if method not in per:
                continue
            f = per[method].figures()
            target = f"recall@5 ≥ {TARGET_RATIO}x plain BM25" if method == RECALL else ""
            met = (f["recall@5"] >= TARGET_RATIO * base["recall@5"]) if target else None
            label = {
                EMBED: f"embedder alone ({evaluation.embedder_name})",
                PREVIOUS: "previous search (FTS5, literal fallback; frozen copy)",
                SEARCH: "Store.search (this build)",
                RECALL: "Store.recall",
                PLAIN: "plain BM25 (rank-bm25 BM25Okapi, \\w+ lowercased)",
            }[method]
            rows.append(
                Row(
                    f"recall quality, {dataset.name}, {split} split{held}",
                    f"{per[method].questions} questions",
                    "recall@5",
                    f["recall@5"],
                    "plain BM25" if method != PLAIN else "",
                    base["recall@5"] if method != PLAIN else None,
                    compare="quality",
                    runs=1,
                    target=target,
                    met=met,
                    note=f"{label}: recall@10 {f['recall@10']:.3f} (BM25 "
                    f"{base['recall@10']:.3f}), MRR@10 {f['MRR']:.3f} (BM25 {base['MRR']:.3f})"
                    + (f"; {dataset.note}" if dataset.note else ""),
                )
            )
    if not has_recall():
        rows.append(
            Row(
                f"recall quality, {dataset.name}: Store.recall",
                "—",
                "recall@5",
                None,
                note="pending: Store.recall does not exist yet (issue 12)",
            )
        )
    return rows


@scenario("recall-quality", "recall quality on LoCoMo (recall@5/10, MRR) vs plain BM25")
def recall_quality(ctx: Context) -> list[Row]:
    """The tuning and held-out splits of LoCoMo (or the synthetic fallback in --tiny mode or
    when the data file is not there), every method on the same memories."""
    path = None if ctx.config.mode.startswith("tiny") else find_data()
    dataset = synthetic() if path is None else load_locomo(path)
    embedder = default_embedder()
    log(f"recall quality on {dataset.name}, embedder {getattr(embedder, 'name', None)}")
    evaluation = evaluate(
        dataset, ctx.new_dir("recall-quality"), embedder=embedder, progress=log
    )
    return _scenario_rows(evaluation)


def short_memories(count: int, seed: int) -> list[str]:
    """``count`` distinct short memories: LoCoMo's turns when the data is there (numbered, so
    repeats differ), else sentences made from a small vocabulary."""
    import random

    path = find_data()
    if path is not None:
        turns = [t for c in load_locomo(path).conversations for _, t in c.turns]
        return [f"{turns[i % len(turns)]} (#{i})" for i in range(count)]
    rng = random.Random(seed)
    words = re.findall(
        r"\w+",
        "deploy staging production tag fixtures tests conftest agent prefers pytest over "
        "unittest the team meets on monday release notes live in docs changelog database "
        "migrations run before the api starts cache keys expire after one hour retry "
        "timeout is thirty seconds users sign in with sso billing runs nightly",
    )
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(6, 24))) + f" ({i})"
        for i in range(count)
    ]


@scenario("embed-catchup", "embedding catch-up (vectors.sync) and vector bytes on disk")
def embed_catchup(ctx: Context) -> list[Row]:
    """A store of short memories (the read size), its index caught up; then every memory
    embedded by ``vectors.sync`` with the default embedder, beside the lexical catch-up of
    the same memories; then the vector rows' bytes on disk and a warm ``nearest``."""
    import sqlite3 as sqlite

    from gitmem.store import vectors

    embedder = default_embedder()
    if embedder is None:
        return [Row("embedding catch-up", "—", "memories/s", None,
                    note="no default embedder installed (pip install 'gitmem-store[embed]')")]
    size = ctx.config.read_size
    texts = short_memories(size, ctx.config.seed)
    path = ctx.new_dir("embed-catchup") / "s.git"
    store = gitmem.init(path, bare=True)
    with store.transaction("import short memories") as tx:
        for text in texts:
            tx.create(text)
    index = store.index()
    started, cpu = time.perf_counter(), time.process_time()
    index.catch_up()
    lexical_s = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    written = vectors.sync(index, embedder)
    sync_s, sync_cpu = time.perf_counter() - started, time.process_time() - cpu
    # Re-embedding alone (no SQLite), for the embedder's own rate.
    started = time.perf_counter()
    embedder.embed(texts)
    embed_s = time.perf_counter() - started
    conn = index.connect()
    codes = [code for _, _, _, code in vectors.entries(conn)]
    alone = path.parent / "vectors-only.sqlite"
    with contextlib.closing(sqlite.connect(alone)) as db:
        vectors.ensure_schema(db)
        vectors.store_vectors(
            db, embedder.name, ((f"{i:040x}", c) for i, c in enumerate(codes)),
            dim=embedder.dim,
        )
        db.commit()
    per_memory = alone.stat().st_size / max(1, len(codes))
    latencies = []
    for i in range(20):
        t0 = time.perf_counter()
        vectors.nearest(index, texts[(i * 7919) % len(texts)], 50, embedder=embedder)
        latencies.append(time.perf_counter() - t0)
    label = f"{size_label(size)} short memories"
    avg_chars = sum(map(len, texts)) / len(texts)
    return [
        Row(
            "embedding catch-up: `vectors.sync` of every memory",
            label,
            "memories/s",
            written / sync_s if sync_s else None,
            "lexical catch-up of the same memories (index rows and FTS)",
            size / lexical_s if lexical_s else None,
            runs=1,
            target="≥ 10,000/s on 2 cores",
            met=(written / sync_s >= 10_000) if sync_s else None,
            note=f"{written / sync_cpu:,.0f}/s of CPU time; the embedder alone "
            f"{size / embed_s:,.0f}/s (warm word cache); {embedder.name}; memories of "
            f"{avg_chars:.0f} characters on average",
        ),
        Row(
            "vector rows on disk (SQLite, int8 codes)",
            label,
            "MB per 10k memories",
            per_memory * 10_000 / 1e6,
            compare="none",
            runs=1,
            note=f"{per_memory:.0f} bytes a memory: a {len(codes[0]) if codes else 0}-byte "
            "code, the 20-byte blob id and SQLite's b-tree",
        ),
        Row(
            "semantic query: `vectors.nearest` (embed the query, top 50), warm",
            label,
            "p50 ms",
            statistics.median(latencies) * 1e3,
            compare="none",
            runs=1,
            higher_is_better=False,
            note="brute-force numpy over the decoded int8 matrix",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    import tempfile

    p = argparse.ArgumentParser(
        prog="python -m bench.recall_quality",
        description="Recall quality on LoCoMo: every method and tuning configuration.",
    )
    p.add_argument("--data", help=f"locomo10.json or its folder (default: ${DATA_ENV})")
    p.add_argument(
        "--split",
        choices=["tuning", "held-out", "both"],
        default="tuning",
        help="which split to score (default: tuning; tune on nothing else)",
    )
    p.add_argument("--no-configs", action="store_true", help="only the baselines and gitmem")
    p.add_argument("--no-embedder", action="store_true", help="leave the embedder out")
    p.add_argument("--synthetic", action="store_true", help="the small synthetic dataset")
    args = p.parse_args(argv)
    path = None if args.synthetic else find_data(args.data)
    if path is None and not args.synthetic:
        print(f"locomo10.json not found (--data or ${DATA_ENV}); see docs/benchmarks.md",
              file=sys.stderr)
        return 2
    dataset = synthetic() if path is None else load_locomo(path)
    embedder = None if args.no_embedder else default_embedder()
    splits = ["tuning", "held-out"] if args.split == "both" else [args.split]
    with tempfile.TemporaryDirectory(prefix="gitmem-recall-") as tmp:
        evaluation = evaluate(
            dataset,
            Path(tmp),
            embedder=embedder,
            configs=not args.no_configs,
            splits=splits,
            progress=lambda m: print(m, file=sys.stderr),
        )
    print(table(evaluation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
