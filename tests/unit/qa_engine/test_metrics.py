"""Evidence and answer metrics on the hand-made graph, where every value is known by hand.

Graph (handmade.py)::

    alpha -- decoy -- decoy two
      |        \\
    bridge     zeta -- beta

The only shortest path from alpha to beta is alpha > decoy > zeta > beta (3 hops).
"""

from __future__ import annotations

import itertools

import pytest

from metakg.qa_engine.core import Answer, EvidencePath, Question
from metakg.qa_engine.evaluate import comparison_table, p_text, recall_at, record, sign_test, summarise, versus
from metakg.qa_engine.metrics import (
    EvidenceScorer,
    answer_match,
    entity_order,
    evidence_tokens,
    triple_order,
    with_gold_entities,
)
from metakg.qa_engine.strategies import REGISTRY
from metakg.text_processing import PhraseIndex
from tests.unit.qa_engine.handmade import ident, store

QUESTION = Question("What links alpha and beta?", id="q", answer="beta", answer_text="beta", answers=("beta",))


def path(*names: str) -> EvidencePath:
    triples = tuple((a, "near", b) for a, b in itertools.pairwise(names))
    ids = tuple(ident(n) for n in names)
    return EvidencePath(ids, tuple(f"e{i}" for i in range(len(triples))), triples)


def answer(*paths: EvidencePath) -> Answer:
    found = Answer("q", "kg_rag", evidence=list(paths))
    found.trace["start_entities"] = [{"id": ident("alpha"), "name": "alpha", "score": 1.0}]
    return found


def test_orders_ranks_and_sizes() -> None:
    evidence = [path("alpha", "decoy", "decoy two"), path("alpha", "decoy", "zeta", "beta")]
    assert entity_order(evidence) == ["alpha", "decoy", "decoy two", "zeta", "beta"]
    assert len(triple_order(evidence)) == 4  # alpha-decoy appears in both paths, counted once
    scores = EvidenceScorer(store()).score(QUESTION, answer(*evidence))
    assert scores["evidence_recall"] is True
    assert (scores["gold_rank_entities"], scores["gold_rank_triples"]) == (5, 4)
    assert (scores["evidence_entities"], scores["evidence_triples"]) == (5, 4)
    # "Evidence 1: alpha near decoy" is 6 tokens (Evidence, 1, :, alpha, near, decoy); "decoy two" is two
    assert scores["evidence_tokens"] == 6 + 7 + 6 + 6 and evidence_tokens(evidence, 2) == 6 + 7
    # on a shortest alpha-beta path: alpha, decoy, zeta, beta; not decoy two
    assert scores["on_path_share"] == 0.8


def test_evidence_without_the_answer() -> None:
    scores = EvidenceScorer(store()).score(QUESTION, answer(path("alpha", "decoy", "decoy two")))
    assert scores["evidence_recall"] is False and scores["gold_rank_entities"] is None
    assert scores["on_path_share"] == round(2 / 3, 4)
    side = EvidenceScorer(store()).score(QUESTION, answer(path("alpha", "bridge")))
    assert side["on_path_share"] == 0.5
    far = EvidenceScorer(store(), max_hops=2).score(QUESTION, answer(path("alpha", "decoy")))
    assert far["on_path_share"] is None  # beta is 3 hops away


def test_shortest_path_nodes() -> None:
    scorer = EvidenceScorer(store())
    on = scorer.shortest_path_nodes({ident("alpha")}, {ident("beta")})
    assert on == {ident(n) for n in ("alpha", "decoy", "zeta", "beta")}
    assert scorer.shortest_path_nodes({ident("bridge")}, {ident("decoy two")}) == {
        ident(n) for n in ("bridge", "alpha", "decoy", "decoy two")
    }
    assert scorer.shortest_path_nodes({ident("alpha")}, {ident("alpha")}) == {ident("alpha")}


def test_recall_at_an_equal_budget() -> None:
    strategy = REGISTRY.create("kg_rag", None)
    scorer = EvidenceScorer(store())
    late = record(QUESTION, answer(path("alpha", "decoy", "decoy two"), path("zeta", "beta")), strategy, scorer)
    early = record(QUESTION, answer(path("alpha", "decoy", "zeta", "beta")), strategy, scorer)
    missing = record(QUESTION, answer(path("alpha", "bridge")), strategy, scorer)
    rows = [late, early, missing]
    assert [r["evidence_metrics"]["gold_rank_entities"] for r in rows] == [5, 4, None]
    assert recall_at(rows, 4) == round(1 / 3, 4) and recall_at(rows, 5) == round(2 / 3, 4)
    assert recall_at(rows, 2, "triples") == 0.0 and recall_at(rows, 3, "triples") == round(2 / 3, 4)
    summary = summarise(rows, strategy, budget=4)
    assert summary["evidence_recall"] == round(2 / 3, 4) and summary["recall_at_budget"] == round(1 / 3, 4)
    assert summary["evidence_entities_per_question"] == round((5 + 4 + 2) / 3, 2)
    assert summary["evidence_triples_per_question"] == round((3 + 3 + 1) / 3, 2)


def test_sign_test_is_exact_mcnemar() -> None:
    assert sign_test(0, 0) == 1.0 and sign_test(1, 0) == 1.0  # one question apart says nothing
    assert sign_test(3, 0) == pytest.approx(0.25)  # 2 * (1/2)^3
    assert sign_test(6, 0) == pytest.approx(0.03125) and sign_test(0, 6) == sign_test(6, 0)  # two-sided
    assert sign_test(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert sign_test(5, 5) == 1.0  # capped
    # not rounded: 14 against 1 is below 0.001, and a table says so
    assert sign_test(14, 1) == pytest.approx(2 * 16 / 2**15) and p_text(sign_test(14, 1)) == "<0.001"
    assert p_text(sign_test(8, 2)) == "0.109" and p_text(1.0) == "1"
    assert 0.3 < sign_test(5000, 4990) < 1  # ten thousand questions, at once


def test_an_ablation_is_compared_with_its_full_run_question_by_question() -> None:
    strategy = REGISTRY.create("kg_rag", None)
    scorer = EvidenceScorer(store())
    hit = record(QUESTION, answer(path("alpha", "decoy", "zeta", "beta")), strategy, scorer)  # rank 4
    miss = record(QUESTION, answer(path("alpha", "bridge")), strategy, scorer)

    def rows(*found: dict) -> list[dict]:
        return [r | {"question_id": str(i), "correct": r is hit} for i, r in enumerate(found)]

    full, ablated = rows(hit, hit, hit, miss), rows(hit, miss, miss, hit)
    paired = versus(full, ablated, budget=10, graded=True)
    # questions 1 and 2 lost, question 3 gained; the recall of both runs would only say 0.75 against 0.5
    assert paired["recall_at_budget"] == {"questions": 4, "lost": 2, "gained": 1, "p_value": 1.0}
    assert paired["correct"]["lost"] == 2 and paired["correct"]["gained"] == 1
    # the budget decides what a hit is: at 3 entities the rank-4 answers are misses in both runs
    assert versus(full, ablated, budget=3)["recall_at_budget"] == {
        "questions": 4,
        "lost": 0,
        "gained": 0,
        "p_value": 1.0,
    }
    assert "correct" not in versus(full, ablated, budget=3)
    # a question only one run answered is not paired
    assert versus(full, ablated[:2], budget=10)["recall_at_budget"]["questions"] == 2
    table = comparison_table(
        {"full": {"questions": 4}, "ablated": {"questions": 4, "versus": {"run": "full", **paired}}}
    )
    assert table.splitlines()[0].endswith("| vs full run |")
    assert "| ablated | 4 |" in table
    assert table.splitlines()[-1].endswith("| recall@budget -2 +1 (p 1); answers -2 +1 (p 1) |")
    assert "vs full run" not in comparison_table({"full": {"questions": 4}})
    # no question with a gold answer in the graph: no recall comparison to show, only the answers'
    unscored = [r | {"evidence_metrics": None} for r in ablated]
    blind = versus([r | {"evidence_metrics": None} for r in full], unscored, budget=10, graded=True)
    assert blind["recall_at_budget"]["questions"] == 0
    shown = comparison_table({"ablated": {"questions": 4, "versus": {"run": "full", **blind}}}).splitlines()[-1]
    assert shown.endswith("| answers -2 +1 (p 1) |")


def test_free_text_answers_match_by_normalised_containment() -> None:
    assert answer_match("Answer: The Barkleys of Broadway.", ["Top Hat", "the barkleys of broadway"]) == (True, False)
    assert answer_match("top hat", ["Top Hat", "Kitty Foyle"]) == (True, True)
    assert answer_match("Hatter", ["Hat"]) == (False, False)  # whole words only
    assert answer_match("movies", ["movie"]) == (True, True)  # lemmas
    assert answer_match("", ["x"]) == (False, False)
    strategy = REGISTRY.create("llm_only", None)
    replied = Answer("q", "llm_only", text="It is Kitty Foyle, I think")
    row = record(Question("?", id="q", answers=("Top Hat", "Kitty Foyle")), replied, strategy, EvidenceScorer(None))
    assert (row["correct"], row["exact"], row["gold_answers"]) == (True, False, ["Top Hat", "Kitty Foyle"])
    assert row["evidence_recall"] is None  # llm_only uses no graph


def test_a_long_gold_answer_becomes_the_entities_it_names() -> None:
    index = PhraseIndex(["panic disorder", "panic attacks", "electrocardiogram", "psychotherapy"])
    question = Question(
        "Doctor, I have sudden panic attacks.",
        answer="It sounds like panic disorder; start psychotherapy and get an electrocardiogram to be sure.",
        answer_text="It sounds like panic disorder; start psychotherapy and get an electrocardiogram to be sure.",
    )
    found = with_gold_entities(question, index.find)
    assert found.gold_texts == ("panic disorder", "psychotherapy", "electrocardiogram")  # not panic attacks
    short = Question("Who directed Top Hat?", answers=("Mark Sandrich",))
    assert with_gold_entities(short, index.find) is short
    nothing = with_gold_entities(
        Question("q?", answer_text="a reply that names no entity of the graph at all"), index.find
    )
    assert nothing.gold_texts == ()
