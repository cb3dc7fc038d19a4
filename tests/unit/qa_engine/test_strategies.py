"""Strategies end to end with a scripted LLM on the hand-made graph: answers, evidence, usage, failures."""

from __future__ import annotations

import asyncio

import pytest

from metakg.config import QASettings
from metakg.errors import ConfigError, LLMError, UsageError
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, Question
from metakg.qa_engine.strategies import REGISTRY
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, ident, store

MC = Question(QUESTION, (("A", "zeta"), ("B", "bridge")), "q1", "A", "zeta")
REPLIES = {"key concepts": "alpha\nbeta", "Reply with the letter": "Answer: A"}


def ask(strategy: str, question: Question = MC, client: ScriptedClient | None = None, **qa: object) -> Answer:
    settings = QASettings.model_validate({"metakgrag": {"path_hops": 2}, **qa})
    llm = client if client is not None else ScriptedClient(REPLIES)
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=settings, llm=llm, prices={"scripted": (1.0, 2.0)})
    return asyncio.run(REGISTRY.create(strategy, settings).answer(question, ctx))


def test_llm_only_one_call_no_evidence() -> None:
    answer = ask("llm_only")
    assert (answer.status, answer.choice, answer.text) == ("ok", "A", "zeta")
    assert answer.evidence == [] and answer.usage.llm_calls == 1
    assert "evidence" not in answer.trace["reply"].lower()


def test_kg_rag_neighbourhood_evidence() -> None:
    answer = ask("kg_rag", kg_rag={"neighbours": 1}, ground_choices=False)
    assert answer.status == "ok" and answer.usage.llm_calls == 2  # concepts + answer
    starts = [s["name"] for s in answer.trace["start_entities"]]
    assert set(starts) == {"alpha", "beta"}
    # the most question-like neighbour of each start: decoy for alpha, zeta for beta
    assert sorted(t for p in answer.evidence for t in p.triples) == [
        ("alpha", "near", "decoy"),
        ("zeta", "leads to", "beta"),
    ]
    # ranked together, most question-like first: decoy (0.9 to the question) before zeta (0.6)
    assert [p.triples[0] for p in answer.evidence] == [("alpha", "near", "decoy"), ("zeta", "leads to", "beta")]


def test_the_choices_draw_retrieval_to_answer_candidates() -> None:
    # alpha's most question-like neighbour is decoy (0.9); with the choices grounded, bridge (a choice,
    # 0.5 to the question) weighs 0.3 * 0.5 + 0.7 * 1.0 = 0.85 against decoy's 0.3 * 0.9 + 0.7 * sim(decoy, zeta)
    grounded = ask("kg_rag", kg_rag={"neighbours": 1})
    assert ("alpha", "near", "bridge") in [t for p in grounded.evidence for t in p.triples]
    assert grounded.trace["concepts"] == ["alpha", "beta", "zeta", "bridge"]
    assert grounded.trace["question_concepts"] == ["alpha", "beta"]
    assert {s["name"] for s in grounded.trace["start_entities"]} == {"alpha", "beta"}  # never a choice
    stem_only = ask("kg_rag", kg_rag={"neighbours": 1}, ground_choices=False)
    assert stem_only.trace["concepts"] == ["alpha", "beta"]


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
    assert (answer.usage.llm_calls, answer.usage.failures, answer.usage.cost_usd) == (0, 1, 0.0)


def test_free_text_question() -> None:
    client = ScriptedClient({"key concepts": "alpha", "short answer": "Answer: through decoy"})
    answer = ask("metakgrag", Question("How is alpha reached?", id="f"), client=client)
    assert answer.status == "ok" and answer.text == "through decoy" and answer.choice is None


def test_the_registry_refuses_unknown_names_switches_and_settings() -> None:
    assert REGISTRY.create("metakgrag", switches=["no_cycle"]).label == "metakgrag[no_cycle]"
    with pytest.raises(UsageError, match="unknown strategy 'graphrag'; choose from llm_only, kg_rag, metakgrag"):
        REGISTRY.create("graphrag")
    with pytest.raises(UsageError, match="kg_rag has no switch no_relevance; it offers: none"):
        REGISTRY.create("kg_rag", switches=["no_relevance"])
    with pytest.raises(UsageError, match="no switch no_magic"):
        REGISTRY.create("metakgrag", switches=["no_magic"])
    strategy = REGISTRY.create("metakgrag", switches=["no_restart", "no_relevance"])
    assert strategy.label == "metakgrag[no_relevance+no_restart]"  # switches in the strategy's order
    with pytest.raises(ConfigError, match=r"qa\.metakgrag\.n_max: Input should be less than or equal to 20"):
        REGISTRY.check(QASettings.model_validate({"metakgrag": {"n_max": 99}}))
    with pytest.raises(ConfigError, match=r"qa\.metakgrag\.tau_x: Extra inputs are not permitted"):
        REGISTRY.check(QASettings.model_validate({"metakgrag": {"tau_x": 1}}))
    with pytest.raises(ConfigError, match=r"\[qa\.graphrag\] names no strategy"):
        REGISTRY.check(QASettings.model_validate({"graphrag": {}}))
    with pytest.raises(ConfigError, match=r"qa\.strategy 'graphrag' is not a strategy"):
        REGISTRY.check(QASettings(strategy="graphrag"))
    # a section's values reach the strategy, with env-style strings coerced
    assert REGISTRY.create("metakgrag", QASettings.model_validate({"metakgrag": {"n_max": "2"}})).settings.n_max == 2


@pytest.mark.parametrize("rank_paths", [True, False])
def test_metakgrag_orders_its_paths_by_coverage_or_by_start(rank_paths: bool) -> None:
    answer = ask("metakgrag", metakgrag={"path_hops": 2, "rank_paths": rank_paths, "n_max": 0, "neighbourhood": 0})
    firsts = [p.nodes[0] for p in answer.evidence]
    starts = [s["id"] for s in answer.trace["start_entities"]]
    assert sorted(firsts) == sorted(starts) and len(firsts) == 2
    by_path = {p["start_id"]: p for p in answer.trace["paths"]}
    assert [by_path[f]["start_id"] for f in firsts] == [p["start_id"] for p in answer.trace["paths"]]
    scores = [p["coverage_score"] for p in answer.trace["paths"]]
    if rank_paths:
        assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
        assert firsts != starts  # here the better-covering path starts at the second start entity
    else:
        assert firsts == starts


@pytest.mark.parametrize("margin", [5.0, 0.15])
def test_metakgrag_keeps_a_near_tie_s_path_after_all_other_evidence(margin: float) -> None:
    # from alpha the correction gains 1.6 coverage: a near tie only under a margin that large, and then the
    # path it replaced comes last, after the neighbourhood's one-edge step alpha > bridge
    client = ScriptedClient({"key concepts": "alpha\nbeta concept", "Answer": "zeta"})
    answer = ask("metakgrag", Question(QUESTION, (), "q2"), client, metakgrag={"path_hops": 2, "tie_margin": margin})
    last = [ident(n) for n in ("alpha", "decoy", "decoy_two")]
    from_alpha = next(p for p in answer.trace["paths"] if p["start"] == "alpha")
    assert from_alpha["final_path"] == ["alpha", "decoy", "zeta", "beta"]
    evidence = [list(p.nodes) for p in answer.evidence]
    assert [ident("alpha"), ident("bridge")] in evidence  # the neighbourhood
    if margin > 1:
        assert from_alpha["kept_last"] == [["alpha", "decoy", "decoy two"]] and evidence[-1] == last
        assert evidence.index([ident("alpha"), ident("bridge")]) < len(evidence) - 1
    else:
        assert from_alpha["kept_last"] == [] and last not in evidence
