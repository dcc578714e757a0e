"""The recall-quality benchmark's data loading and metrics (bench/recall_quality.py).

No figure is asserted: these check that the benchmark counts what it says it counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import recall_quality as rq


def test_recall_at_k_is_the_share_of_answering_memories_found() -> None:
    scores = rq.Scores()
    # Two answering turns, one at rank 3 and one at rank 7.
    ranked = ["x", "y", "D1:1", "z", "w", "v", "D1:2", "u"]
    scores.add(ranked, {"D1:1", "D1:2"})
    figures = scores.figures()
    assert figures["recall@5"] == pytest.approx(0.5)
    assert figures["recall@10"] == pytest.approx(1.0)
    assert figures["MRR"] == pytest.approx(1 / 3)
    scores.add([], {"D2:1"})  # nothing found: counts as zero, the average halves
    assert scores.figures()["recall@10"] == pytest.approx(0.5)


def _locomo(path: Path) -> Path:
    sample = {
        "sample_id": "conv-26",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a beagle."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely!",
                 "blip_caption": "a photo of a dog"},
            ],
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "We moved to Porto."}],
        },
        "qa": [
            {"question": "What dog?", "answer": "beagle", "evidence": ["D1:1"], "category": 1},
            # Evidence written as one string naming two turns, as some LoCoMo labels are.
            {"question": "Where and what?", "answer": "x", "evidence": ["D1:1; D2:1"],
             "category": 4},
            {"question": "Adversarial?", "adversarial_answer": "y", "evidence": ["D1:2"],
             "category": 5},
            {"question": "Unlabelled?", "answer": "z", "evidence": ["D9:9"], "category": 2},
        ],
    }
    file = path / "locomo10.json"
    file.write_text(json.dumps([sample]))
    return file


def test_locomo_loader_reads_turns_and_labels(tmp_path: Path) -> None:
    dataset = rq.load_locomo(_locomo(tmp_path))
    [conv] = dataset.conversations
    assert [k for k, _ in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1][1] == "Ben: Lovely! [shares an image: a photo of a dog]"
    assert [q.evidence for q in conv.questions] == [("D1:1",), ("D1:1", "D2:1")]
    assert dataset.skipped == 1  # category 5 is left out; an unknown turn is skipped
    assert "different locomo10.json" in dataset.note
    assert rq.find_data(tmp_path) == tmp_path / "locomo10.json"


def test_evaluation_writes_through_the_store_and_scores_both_methods(tmp_path: Path) -> None:
    dataset = rq.synthetic()
    evaluation = rq.evaluate(dataset, tmp_path)
    assert set(evaluation.results) == {"tuning", "held-out"}
    tuning = evaluation.results["tuning"]
    assert set(tuning) == {rq.PLAIN, rq.RECALL}
    assert all(s.questions == 5 for s in tuning.values())
    # The synthetic questions share words with their answers: both find most of them.
    assert tuning[rq.PLAIN].figures()["recall@10"] >= 0.8
    assert tuning[rq.RECALL].figures()["recall@10"] >= 0.8
    assert evaluation.memories == 2 * len(dataset.conversations[0].turns)
    assert "| tuning | plain BM25 |" in rq.table(evaluation)
