"""Strategies end to end with a scripted LLM on the hand-made graph: answers, evidence, usage, failures."""

from __future__ import annotations

import asyncio

import pytest

from metakg.config import QASettings
from metakg.errors import LLMError, UsageError
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.core import Ablation, Answer, QAContext, Question
from metakg.qa_engine.strategies import answer_question, make_strategy
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, ident, store

MC = Question(QUESTION, (("A", "zeta"), ("B", "bridge")), "q1", "A", "zeta")
REPLIES = {"key concepts": "alpha\nbeta", "Reply with the letter": "Answer: A"}


def ask(strategy: str, question: Question = MC, client: ScriptedClient | None = None, **qa: object) -> Answer:
    settings = QASettings(path_hops=2, **qa)  # type: ignore[arg-type]
    llm = client if client is not None else ScriptedClient(REPLIES)
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=settings, llm=llm, prices={"scripted": (1.0, 2.0)})
    return asyncio.run(answer_question(make_strategy(strategy), question, ctx))


def test_llm_only_one_call_no_evidence() -> None:
    answer = ask("llm_only")
    assert (answer.status, answer.choice, answer.text) == ("ok", "A", "zeta")
    assert answer.evidence == [] and answer.usage.llm_calls == 1
    assert "evidence" not in answer.trace["reply"].lower()


def test_kg_rag_neighbourhood_evidence() -> None:
    answer = ask("kg_rag", kg_rag_neighbours=1)
    assert answer.status == "ok" and answer.usage.llm_calls == 2  # concepts + answer
    starts = [s["name"] for s in answer.trace["start_entities"]]
    assert set(starts) == {"alpha", "beta"}
    # the most question-like neighbour of each start: decoy for alpha, zeta for beta
    assert sorted(t for p in answer.evidence for t in p.triples) == [
        ("alpha", "near", "decoy"),
        ("zeta", "leads to", "beta"),
    ]


def test_metakgrag_answer_usage_and_evidence_in_the_store() -> None:
    client = ScriptedClient(REPLIES)
    answer = ask("metakgrag", client=client)
    assert answer.status == "ok" and answer.choice == "A"
    u = answer.usage
    assert u.llm_calls == 2 == len(client.calls)
    assert u.prompt_tokens > 0 and u.completion_tokens == 4  # "alpha beta" + "Answer: A" (word counts)
    assert u.cost_usd == pytest.approx((u.prompt_tokens * 1.0 + u.completion_tokens * 2.0) / 1e6)
    assert u.total_ms >= u.retrieval_ms > 0
    graph = store()
    edge_ids = {n.edge.id for node in graph.names() for n in graph.neighbours(ident(node))}
    for path in answer.evidence:
        assert all(graph.get_node(node) is not None for node in path.nodes)
        assert set(path.edges) <= edge_ids
    assert answer.trace["paths"][0]["start"] in {"alpha", "beta"}
    assert answer.trace["evidence_lines"][0].startswith("Evidence 1: ")
    assert 0 <= answer.trace["path_refinement_rate"] <= 1


def test_bad_input_gives_a_failed_answer_not_an_exception() -> None:
    empty = ask("metakgrag", Question("   ", id="e"))
    assert empty.status == "fail" and "empty" in (empty.reason or "")
    nothing = ask("metakgrag", Question("Is the moon made of cheese?", (("A", "yes"),)), concepts="rules")
    assert nothing.status == "fail" and "no graph entity matches" in (nothing.reason or "")
    unlabelled = ask("kg_rag", Question(QUESTION, (("1", "zeta"),)))
    assert unlabelled.status == "fail" and "capital letter" in (unlabelled.reason or "")
    no_letter = ask("llm_only", client=ScriptedClient({"Reply with": "I cannot tell."}))
    assert no_letter.status == "fail" and "names no choice letter" in (no_letter.reason or "")
    assert no_letter.trace["reply"] == "I cannot tell."


def test_an_llm_failure_is_a_failed_answer_with_the_calls_counted() -> None:
    def broken(request: ChatRequest) -> str:
        raise LLMError("the endpoint refused the request (HTTP 500)")

    answer = ask("metakgrag", client=ScriptedClient(broken))
    assert answer.status == "fail" and "HTTP 500" in (answer.reason or "")
    assert answer.usage.llm_calls == 1


def test_free_text_question() -> None:
    client = ScriptedClient({"key concepts": "alpha", "short answer": "Answer: through decoy"})
    answer = ask("metakgrag", Question("How is alpha reached?", id="f"), client=client)
    assert answer.status == "ok" and answer.text == "through decoy" and answer.choice is None


def test_make_strategy_refuses_unknown_names_and_misplaced_ablations() -> None:
    assert make_strategy("metakgrag", Ablation(no_cycle=True)).name == "metakgrag"
    with pytest.raises(UsageError, match="unknown strategy"):
        make_strategy("graphrag")
    with pytest.raises(UsageError, match="metakgrag only"):
        make_strategy("kg_rag", Ablation(no_relevance=True))
    with pytest.raises(ValueError, match="unknown ablation"):
        Ablation.parse("no_magic")
    assert Ablation.parse("no_relevance, no_restart").label == "no_relevance+no_restart"
