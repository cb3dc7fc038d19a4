"""MedCoG end to end with a scripted LLM on the hand-made graph: routing, fallback, verification, refinement."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from metakg.config import QASettings
from metakg.errors import ConfigError, UsageError
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, Question
from metakg.qa_engine.evaluate import record, run_specs, summarise
from metakg.qa_engine.metrics import EvidenceScorer
from metakg.qa_engine.strategies import REGISTRY
from metakg.qa_engine.strategies.medcog.monitor import ROUTES
from metakg.qa_engine.strategies.medcog.strategy import parse_pairs
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, ident, store

MC = Question(QUESTION, (("A", "zeta"), ("B", "bridge")), "q1", "A", "zeta")
SCOT = "Facts:\nalpha -> near -> decoy\nReasoning: decoy leads to zeta.\nAnswer: A"


def ask(
    replies: dict[str, str], types: dict[str, str] | None = None, **medcog: object
) -> tuple[Answer, ScriptedClient]:
    client = ScriptedClient(replies)
    settings = QASettings.model_validate({"medcog": medcog})
    ctx = QAContext(store=store(types=types), embedder=AxisEmbedder(), settings=settings, llm=client)
    return asyncio.run(REGISTRY.create("medcog", settings).answer(MC, ctx)), client


def verifying(plan: str) -> dict[str, str]:
    """Replies for a graph-verification route whose planner answers ``plan``; the paths found are enough."""
    return {
        "query | hypothesis": plan,
        "do not fit the question": "none",
        "Are these paths enough": "yes",
        "Work in three parts": SCOT,
    }


def scores(c: float, f: float, k: float) -> str:
    return f'{{"complexity": {c}, "familiarity": {f}, "knowledge_density": {k}}}'


def test_low_scores_answer_zero_shot_in_two_calls() -> None:
    answer, client = ask({"rate the question": scores(0.1, 0.2, 0.3), "Reply with the letter": "Answer: A"})
    assert answer.status == "ok" and answer.choice == "A" and answer.trace["route"] == "zero_shot"
    assert answer.trace["routed_by"] == "scores" and len(client.calls) == 2 and answer.usage.llm_calls == 2


def test_high_complexity_takes_structured_reasoning() -> None:
    answer, client = ask({"rate the question": scores(0.9, 0.2, 0.3), "Work in three parts": SCOT})
    assert answer.trace["route"] == "scot" and answer.choice == "A"
    assert answer.trace["scot_paths"] == [["alpha", "near", "decoy"]] and len(client.calls) == 2


def test_an_unparseable_monitoring_reply_takes_the_fallback_route_and_is_counted() -> None:
    answer, _ = ask({"rate the question": "I would rather not.", "Work in three parts": SCOT})
    assert answer.trace["routed_by"] == "fallback" and answer.trace["route"] == "scot" and answer.status == "ok"
    zero, _ = ask({"rate the question": "??", "Reply with the letter": "Answer: B"}, fallback_route="zero_shot")
    assert zero.trace["route"] == "zero_shot" and zero.choice == "B"
    strategy = REGISTRY.create("medcog", None)
    figures = summarise([record(MC, a, strategy, EvidenceScorer(None)) for a in (answer, zero)], strategy)
    assert figures["monitor_fallbacks"] == 2 and figures["routes"]["scot"] == 1 and figures["routes"]["zero_shot"] == 1


def test_knowledge_density_verifies_against_the_graph() -> None:
    replies = {
        "rate the question": scores(0.2, 0.2, 0.9),
        "query | hypothesis": "1. alpha | beta is linked to alpha\nnot a pair",
        "do not fit the question": "none",
        "Are these paths enough": "yes",
        "Work in three parts": SCOT,
    }
    answer, client = ask(replies)
    assert answer.trace["route"] == "scot_kg" and answer.status == "ok"
    (first,) = answer.trace["verification"]
    assert first["pairs"] == [["alpha", "beta is linked to alpha"]]
    assert first["paths"][0] == "alpha -[near]-> decoy -[leads to]-> zeta -[leads to]-> beta"
    assert answer.evidence and answer.evidence[0].nodes == tuple(ident(n) for n in ("alpha", "decoy", "zeta", "beta"))
    graph = store()
    assert all(graph.get_node(n) is not None for p in answer.evidence for n in p.nodes)
    scot_prompt = client.calls[-1].messages[-1].content
    assert "alpha -[near]-> decoy" in scot_prompt  # the evidence reaches the answer step
    assert len(client.calls) == 5  # monitor, plan, filter, evaluate, answer
    stages = [c["tag"].rsplit(":", 1)[1] for c in answer.usage.calls]  # every call, in order, with its tokens
    assert stages == ["monitor", "plan", "filter", "evaluate", "scot"]
    assert all(c["tokens"] > 0 and not c["cached"] for c in answer.usage.calls)
    assert sum(c["tokens"] for c in answer.usage.calls) == answer.usage.tokens
    assert first["grounding"][0]["dropped"] == []


def test_refinement_stops_after_max_refinements() -> None:
    replies = {
        "rate the question": scores(0.2, 0.2, 0.9),
        "query | hypothesis": "alpha | beta",
        "do not fit the question": "none",
        "Are these paths enough": "no: the dose is missing",
        "Work in three parts": SCOT,
    }
    answer, client = ask(replies, max_refinements=1)
    rounds = answer.trace["verification"]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0]["evaluation"].startswith("no")
    plans = [c.messages[-1].content for c in client.calls if "query | hypothesis" in c.messages[-1].content]
    assert len(plans) == 2 and "the dose is missing" in plans[1]
    assert answer.status == "ok" and answer.evidence  # the last paths still reach the answer


def test_forced_routes_skip_monitoring() -> None:
    answer, client = ask({"Work in three parts": SCOT}, route="scot_mem")
    assert answer.trace["routed_by"] == "forced" and "no case bank" in answer.trace["memory"]
    assert len(client.calls) == 1


def test_parse_pairs() -> None:
    reply = "- migraine | aspirin treats migraine\n2) migraine | aspirin treats migraine\n|\nfever"
    assert parse_pairs(reply, 5) == [("migraine", "aspirin treats migraine")]
    checks = '{"checks": [{"query": "migraine", "hypothesis": "aspirin treats migraine"}, {"query": "x"}]}'
    assert parse_pairs("Sure: " + checks + " done", 5) == [("migraine", "aspirin treats migraine")]
    assert parse_pairs('[{"query": "a", "hypothesis": "b"}, {"query": "c", "hypothesis": "d"}]', 1) == [("a", "b")]
    assert parse_pairs('{"checks": "none"}\nfever | aspirin', 5) == [("fever", "aspirin")]  # lines after bad JSON


def test_a_plan_without_checks_falls_back_to_the_question_against_each_choice() -> None:
    replies = verifying("I am not sure what to check.")
    answer, client = ask(replies, route="scot_kg")
    (first,) = answer.trace["verification"]
    assert first["pairs_from"] == "question"
    assert first["pairs"] == [["alpha, beta", "zeta"], ["alpha, beta", "bridge"]]
    assert first["grounding"][0]["query_ids"] and first["grounding"][0]["hypothesis_ids"] == [ident("zeta")]
    assert first["paths"] and answer.evidence  # the stem's entities reach the choices' entities
    plan = next(c for c in client.calls if "query | hypothesis" in c.messages[-1].content)
    assert plan.json_schema is not None and '"checks"' in plan.json_schema  # asked as structured output
    answer, _ = ask(replies | {"query | hypothesis": '{"checks": [{"query": "alpha", "hypothesis": "beta"}]}'},
                    route="scot_kg")  # fmt: skip
    assert answer.trace["verification"][0]["pairs_from"] == "llm"


def test_the_five_fixed_routes_are_harness_variants() -> None:
    specs = run_specs(["medcog"], ["all"], REGISTRY)
    assert [s.label for s in specs] == ["medcog"] + [f"medcog[route={r}]" for r in ROUTES]
    forced = REGISTRY.create("medcog", None, ["route=scot_kg"])
    assert forced.settings.route == "scot_kg" and forced.label == "medcog[route=scot_kg]"
    assert REGISTRY.create("medcog", None).label == "medcog"
    with pytest.raises(UsageError, match="no switch route=guess"):
        REGISTRY.create("medcog", None, ["route=guess"])


def test_the_llm_drops_a_grounded_entity_that_does_not_fit() -> None:
    replies = {
        "query | hypothesis": "alpha | decoy two and beta",
        "do not fit the question": "2",  # the listed entities: 1. alpha, 2. decoy two, 3. beta
        "Are these paths enough": "yes",
        "Work in three parts": SCOT,
    }
    answer, client = ask(replies, route="scot_kg")
    (entry,) = answer.trace["verification"][0]["grounding"]
    assert entry["dropped"] == ["decoy two"] and "kg:hand/decoy_two" not in entry["hypothesis_ids"]
    paths = answer.trace["verification"][0]["paths"]
    assert paths and not any(p.endswith("decoy two") for p in paths)  # no path ends at the dropped entity
    everything, _ = ask(replies | {"do not fit the question": "1, 2, 3"}, route="scot_kg")
    assert everything.trace["verification"][0]["grounding"][0]["dropped"] == []  # not taken at its word
    _, client = ask(replies, route="scot_kg", filter_groundings=False)
    assert not any("do not fit" in c.messages[-1].content for c in client.calls)


def test_grounding_restricted_by_node_type_with_subtypes() -> None:
    replies = {
        "query | hypothesis": "alpha | decoy two and beta",
        "do not fit the question": "none",
        "Are these paths enough": "yes",
        "Work in three parts": SCOT,
    }
    types = {"beta": "disease", "decoy two": "drug"}
    untyped, _ = ask(replies, types, route="scot_kg")
    assert set(untyped.trace["verification"][0]["grounding"][0]["hypothesis_ids"]) == {
        ident("decoy two"),
        ident("beta"),
    }
    typed, _ = ask(replies, types, route="scot_kg", node_types=["concept", "disease"])
    (entry,) = typed.trace["verification"][0]["grounding"]
    assert entry["query_ids"] == [ident("alpha")] and ident("beta") in entry["hypothesis_ids"]
    assert ident("decoy two") not in entry["hypothesis_ids"]  # its nearest allowed node (zeta) stands in
    assert all(ident("decoy two") not in p.nodes for p in typed.evidence)
    chemical, _ = ask(replies, types, route="scot_kg", node_types=["concept", "chemical"])  # drug is a chemical
    grounded = chemical.trace["verification"][0]["grounding"][0]["hypothesis_ids"]
    assert ident("decoy two") in grounded and ident("beta") not in grounded
    with pytest.raises(ConfigError, match=r"unknown node type.*'medicine'.*the vocabulary has"):
        REGISTRY.create("medcog", QASettings.model_validate({"medcog": {"node_types": ["medicine"]}}))


def test_the_monitoring_calls_list_cost_is_in_the_trace() -> None:
    client = ScriptedClient({"rate the question": scores(0.1, 0.2, 0.3), "Reply with the letter": "Answer: A"})
    settings = QASettings()
    ctx = QAContext(store(), AxisEmbedder(), settings, client, prices={"scripted": (1_000_000.0, 0.0)})
    answer = asyncio.run(REGISTRY.create("medcog", settings).answer(MC, ctx))
    monitor_prompt = client.calls[0].messages[-1].content
    assert answer.trace["monitor_cost_usd"] == len(monitor_prompt.split())  # $1 per prompt word here


def test_the_route_and_each_verification_round_are_reported_as_they_happen() -> None:
    from metakg.qa_engine.events import listening

    replies = {
        "rate the question": scores(0.2, 0.2, 0.9),
        "query | hypothesis": "alpha | beta",
        "do not fit the question": "none",
        "Are these paths enough": "no: the dose is missing",
        "Work in three parts": SCOT,
    }
    heard: list[dict[str, object]] = []
    with listening(heard.append):
        answer, _ = ask(replies, max_refinements=1)
    kinds = [step["kind"] for step in heard]
    assert kinds[0] == "route" and kinds.count("verification") == 2
    assert heard[0]["route"] == "scot_kg" and heard[0]["routed_by"] == "scores"
    rounds = [step for step in heard if step["kind"] == "verification"]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0]["paths"] == answer.trace["verification"][0]["paths"]


def test_a_check_echoing_the_prompts_placeholders_is_rejected_and_counted() -> None:
    echoed = '{"checks": [{"query": "<what is asked about>", "hypothesis": "<a fact an answer rests on>"}]}'
    rejected: list[tuple[str, str]] = []
    assert parse_pairs(echoed, 3, rejected) == [] and len(rejected) == 1
    assert parse_pairs("... | ...\nquery | hypothesis\nalpha | beta", 3) == [("alpha", "beta")]
    replies = verifying(echoed)
    answer, client = ask(replies, route="scot_kg")
    (first,) = answer.trace["verification"]
    assert first["placeholder_checks"] == [["<what is asked about>", "<a fact an answer rests on>"]]
    assert first["pairs_from"] == "question" and first["paths"]  # the stem's names took over
    plan = next(c for c in client.calls if "query | hypothesis" in c.messages[-1].content)
    assert "<" not in plan.messages[-1].content.split("Question:")[0]  # no slot a small model can echo


def test_checks_that_ground_nothing_give_way_and_planning_stops_when_nothing_grounds() -> None:
    nowhere = '{"checks": [{"query": "quantum flux", "hypothesis": "warp drives"}]}'
    replies = verifying(nowhere)
    answer, _ = ask(replies, route="scot_kg")
    (first,) = answer.trace["verification"]
    assert first["pairs_from"] == "question (the checks ground nothing)" and first["paths"]
    # a question whose own names ground nothing either: one plan round, not max_refinements + 1
    lone = Question("What about warp drives?", (("A", "quantum flux"), ("B", "nothing")), "q2", "A")
    client = ScriptedClient(replies)
    settings = QASettings.model_validate({"medcog": {"route": "scot_kg", "max_refinements": 2}})
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=settings, llm=client)
    lonely = asyncio.run(REGISTRY.create("medcog", settings).answer(lone, ctx))
    rounds = lonely.trace["verification"]
    assert len(rounds) == 1 and rounds[0]["stopped"].startswith("nothing grounded")


def test_the_benchmark_counts_placeholder_checks_and_rounds_after_nothing_grounded(tmp_path: Path) -> None:
    from benchmarks.bench_medcog import planning

    def entry(pairs: list[list[str]], source: str, grounded: bool, rejected: int = 0) -> dict[str, Any]:
        ids = ["n1"] if grounded else []
        return {"pairs": pairs, "pairs_from": source, "placeholder_checks": [["...", "..."]] * rejected,
                "grounding": [{"query_ids": ids, "hypothesis_ids": []}]}  # fmt: skip

    rows = [
        [entry([["aspirin", "aspirin treats pain"]], "llm", True), entry([["...", "x"]], "llm", False, rejected=1)],
        [entry([["fever", "fever"]], "question (the checks ground nothing)", False, rejected=2),
         entry([["fever", "flu"]], "question", True)],
    ]  # fmt: skip
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"trace": {"verification": r}}) + "\n" for r in rows), encoding="utf-8")
    assert planning(answers) == {
        "rounds": 4, "llm_checks": 2, "placeholders_rejected": 3, "placeholders_accepted": 1,
        "nothing_grounded": 2, "rounds_after_nothing_grounded": 1,
    }  # fmt: skip
