"""The MetaQA-style multi-hop question sets: gold is every entity the relation path reaches, never through
the topic again; halves by topic; four wordings."""

from __future__ import annotations

import csv
from pathlib import Path

from benchmarks.multihop import KB, MAX_GOLD, build, generate, half

LINES = [
    "Heat|written_by|Michael Mann",
    "Heat|directed_by|Michael Mann",
    "Thief|written_by|Michael Mann",
    "Thief|directed_by|Michael Mann",
    "Collateral|written_by|Stuart Beattie",
    "Collateral|directed_by|Michael Mann",
    "Derailed|written_by|Stuart Beattie",
    "Derailed|directed_by|Mikael Hafstrom",
    "Heat|starred_actors|Al Pacino",
    "bad line without fields",
]


def test_gold_is_every_entity_the_path_reaches_never_through_the_topic() -> None:
    kb = KB(LINES)
    assert kb.follow("Stuart Beattie", ("written_by_reverse", "directed_by")) == {"Michael Mann", "Mikael Hafstrom"}
    # Collateral's writer wrote Derailed too; Collateral itself is not passed through again
    assert kb.follow("Collateral", ("written_by", "written_by_reverse", "directed_by")) == {"Mikael Hafstrom"}
    # Michael Mann wrote and directed Heat and Thief: the topic is never an answer
    assert kb.follow("Michael Mann", ("written_by_reverse", "directed_by")) == set()


def test_questions_keep_to_one_half_per_topic_and_come_in_four_wordings(tmp_path: Path) -> None:
    kb = KB(LINES)
    paths = {
        ("written_by_reverse", "directed_by"): (
            ("who directed the films written by [{}]",),
            ("b [{}]",),
            ("c [{}]",),
            ("d [{}]",),
        )
    }
    questions = generate(kb, paths, per_path=10)  # type: ignore[arg-type]
    assert {q.topic for q in questions} == {"Stuart Beattie"}  # Michael Mann's answer set is empty
    assert sorted(q.family for q in questions) == ["a", "b", "c", "d"]
    assert all(q.half == half(q.topic) and 1 <= len(q.answers) <= MAX_GOLD for q in questions)
    kb_file = tmp_path / "kb.txt"
    kb_file.write_text("\n".join(LINES), encoding="utf-8")
    files = build(kb_file, tmp_path / "sets", per_path=(5, 5))
    assert set(files) == {f"{h}_{n}" for h in ("2hop", "3hop") for n in ("tune", "tune_c", "tune_d", "held", "held_b")}
    rows = [r for f in files.values() for r in csv.DictReader(f.open(encoding="utf-8"), delimiter="\t")]
    assert rows and all(r["question"].count("[") == 1 and r["answers"] for r in rows)


def test_pooled_recall_counts_the_questions_of_both_wordings() -> None:
    from benchmarks.bench_retrieval import pooled

    a = {"full": {"evidence_recall": 1.0, "recall_at_budget": 1.0, "questions": 144, "retrieval_p50_ms": 30.0}}
    b = {"full": {"evidence_recall": 0.8611, "recall_at_budget": 0.8611, "questions": 144, "retrieval_p50_ms": 48.5}}
    small = {"full": {"evidence_recall": 0.5, "recall_at_budget": 0.25, "questions": 4}}
    # 144 + 124 of 288 questions: the rounded share of one set gives its count back
    assert pooled(a, b) == {
        "full": {"evidence_recall": round(268 / 288, 6), "recall_at_budget": round(268 / 288, 6), "questions": 288}
    }
    # weighted by size, not the mean of the two shares
    assert pooled(a, small)["full"]["recall_at_budget"] == round(145 / 148, 6)


def test_pooled_paired_counts_add_up_without_a_p_value() -> None:
    from benchmarks.bench_retrieval import pooled

    def run(lost: int, gained: int) -> dict:
        versus = {"questions": 144, "lost": lost, "gained": gained, "p_value": 0.5}
        return {"evidence_recall": 0.9, "recall_at_budget": 0.9, "questions": 144, "versus_full": versus}

    both = pooled({"ablated": run(2, 0)}, {"ablated": run(4, 1)})["ablated"]["versus_full"]
    # the two wordings ask the same topics: their questions are not independent, so no test of the pool
    assert both == {"questions": 288, "lost": 6, "gained": 1}
    plain = {"evidence_recall": 1.0, "recall_at_budget": 1.0, "questions": 1}
    assert "versus_full" not in pooled({"full": plain}, {"full": plain})["full"]
