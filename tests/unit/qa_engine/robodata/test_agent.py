"""The RoboData orchestrator with a scripted LLM: every state and transition, refusals, the turn limit, memory
summaries, metacognition, and the checked support set of the answer."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import polars as pl

from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.strategies.robodata.agent import Agent, AgentResult, AgentSettings
from metakg.qa_engine.strategies.robodata.tools import NodeArgs, Tool, ToolBox, local_tools
from metakg.schemas.tables import empty_edges, empty_nodes
from tests.unit.qa_engine.handmade import AxisEmbedder, ident, store

QUERY = "What does alpha lead to?"


def remote_and_update(local: EmbeddedStore) -> dict[str, ToolBox]:
    """A 'remote' knowledge base (the hand-made graph) and an update tool copying a node with its edges."""
    remote = store().bundle()

    def info(a: NodeArgs) -> Any:
        row = remote.nodes.filter(pl.col("id") == a.id)
        if row.height == 0:
            raise KeyError(f"no remote entity {a.id}")
        return row.select("id", "name").to_dicts()[0]

    def fetch(a: NodeArgs) -> Any:
        edges = remote.edges.filter((pl.col("src") == a.id) | (pl.col("dst") == a.id))
        ids = {a.id, *edges["src"].to_list(), *edges["dst"].to_list()}
        local.upsert(remote.nodes.filter(pl.col("id").is_in(list(ids))), edges)
        return {"nodes": len(ids), "edges": edges.height}

    return {
        "remote": ToolBox([Tool("entity_info", "A remote entity's label.", NodeArgs, info)]),
        "update": ToolBox([Tool("fetch_node", "Copy an entity and its statements.", NodeArgs, fetch)]),
        "local": local_tools(local),
    }


def state_of(request: ChatRequest) -> str:
    found = re.search(r"You are in the state (\w+)", request.messages[-1].content)
    return found.group(1) if found else "other"


def run(script: Callable[[ChatRequest], str], **settings: Any) -> tuple[AgentResult, ScriptedClient, EmbeddedStore]:
    local = EmbeddedStore(empty_nodes(), empty_edges(), embedder=AxisEmbedder())
    client = ScriptedClient(script)
    ctx = QAContext(store=local, embedder=AxisEmbedder(), llm=client)
    agent = Agent(AgentSettings(**settings), ctx, client, local, remote_and_update(local))
    return asyncio.run(agent.run(QUERY)), client, local


def answer_citing(local_edge: str) -> str:
    sentence = {"text": "Alpha is near decoy.", "nodes": [ident("alpha"), ident("decoy")], "edges": [local_edge]}
    return json.dumps({"sentences": [sentence, {"text": "It also flies.", "nodes": ["kg:hand/ghost"], "edges": []}]})


def walker() -> Callable[[ChatRequest], str]:
    """Visits every state once: remote exploration, remote evaluation, update, local evaluation, local
    exploration, local evaluation again, answer."""
    seen: dict[str, int] = {}
    alpha = ident("alpha")

    def reply(request: ChatRequest) -> str:
        state = state_of(request)
        seen[state] = seen.get(state, 0) + 1
        call = lambda tool, **args: json.dumps({"tool_calls": [{"tool": tool, "args": args}]})  # noqa: E731
        if state == "remote_exploration":
            return call("entity_info", id=alpha) + ' {"next_state": "remote_evaluation"}'
        if state == "remote_evaluation":
            return 'Alpha is relevant. {"next_state": "local_update"}'
        if state == "local_update":
            return call("fetch_node", id=alpha) + ' {"next_state": "local_evaluation"}'
        if state == "local_evaluation":
            return '{"next_state": "local_exploration"}' if seen[state] == 1 else '{"next_state": "answer"}'
        if state == "local_exploration":
            return call("local_neighbours", id=alpha) + ' {"next_state": "local_evaluation"}'
        near = re.search(
            r"\((e:[0-9a-f]+): " + re.escape(alpha) + " -> " + re.escape(ident("decoy")), request.messages[-1].content
        )
        return answer_citing(near.group(1) if near else "e:missing")

    return reply


def test_the_agent_walks_every_state_and_answers_with_a_checked_support_set() -> None:
    result, client, local = run(walker())
    states = [s["state"] for s in result.trace["steps"]]
    assert states == [
        "local_evaluation", "remote_exploration", "remote_evaluation", "local_update",
        "local_evaluation", "local_exploration", "local_evaluation",
    ]  # fmt: skip
    assert result.trace["steps"][0]["reason"] == "the local graph is empty"  # no LLM call for it
    assert result.stats["tool_calls_by_tool"] == {"entity_info": 1, "fetch_node": 1, "local_neighbours": 1}
    assert result.stats["nodes_added"] == 3 and result.stats["edges_added"] == 2 and not result.forced
    first, second = result.claims
    assert first.verified and not second.verified and "kg:hand/ghost" in second.problems[0]
    assert result.stats["support_precision"] == 0.5 and result.text.startswith("Alpha is near decoy.")
    assert local.get_node(ident("decoy")) is not None
    assert len(client.calls) == 7  # six states with a call, then the answer
    answer_request = client.calls[-1]
    assert answer_request.json_schema is not None and "sentences" in answer_request.json_schema


def test_an_invalid_transition_is_refused_and_counted() -> None:
    inner = walker()
    refused = {"done": False}

    def script(request: ChatRequest) -> str:
        if state_of(request) == "local_update" and not refused["done"]:
            refused["done"] = True
            return '{"next_state": "answer"}'  # not allowed from local_update
        return inner(request)

    result, client, _ = run(script)
    update_steps = [s for s in result.trace["steps"] if s["state"] == "local_update"]
    assert len(update_steps) == 2 and "choose one of: local_evaluation" in update_steps[0]["refused"]
    assert result.stats["refused_transitions"] == 1
    later = next(c for c in client.calls if "transition refused" in c.messages[-1].content)
    assert state_of(later) == "local_update"  # the refusal is in the memory the LLM sees next


def test_the_turn_limit_forces_an_answer_with_urgency_on_the_way() -> None:
    def script(request: ChatRequest) -> str:
        if state_of(request) == "other":
            return "Alpha is near decoy."  # no ids cited: flagged
        return '{"next_state": "remote_exploration"}'

    result, client, _ = run(script, max_turns=4)
    assert result.forced and result.stats["forced_answer"] and result.stats["iterations"] == 4
    assert "turn limit is reached" in client.calls[-1].messages[-1].content
    assert any("turn(s) left" in c.messages[-1].content for c in client.calls)
    assert result.claims[0].verified is False and result.stats["support_precision"] == 0.0


def test_memory_is_summarised_at_its_size() -> None:
    def script(request: ChatRequest) -> str:
        prompt = request.messages[-1].content
        if prompt.startswith("Summarise these steps"):
            return "The agent kept exploring without finding alpha."
        if state_of(request) == "remote_exploration":
            call = '{"tool_calls": [{"tool": "entity_info", "args": {"id": "kg:hand/none"}}]}'
            return call + ' {"next_state": "remote_exploration"}'
        return "{}"

    result, client, _ = run(script, max_turns=8, memory_size=6)
    assert result.stats["memory_summaries"] >= 1
    assert result.trace["memory_summaries"][0] == "The agent kept exploring without finding alpha."
    later = [c.messages[-1].content for c in client.calls if "Summary of earlier steps" in c.messages[-1].content]
    assert later  # the summary replaces the old entries in the prompts that follow


def test_metacognition_assesses_before_evaluation_states_and_its_plan_reaches_the_prompt() -> None:
    inner = walker()

    def script(request: ChatRequest) -> str:
        if request.messages[-1].content.startswith("You oversee an agent"):
            return "Fetch alpha's statements before anything else."
        return inner(request)

    result, client, _ = run(script, metacognition=True)
    observed = [s for s in result.trace["steps"] if "meta_observation" in s]
    assert [s["state"] for s in observed] == ["remote_evaluation", "local_evaluation", "local_evaluation"]
    evaluation_prompts = [
        c.messages[-1].content for c in client.calls if state_of(c) in {"remote_evaluation", "local_evaluation"}
    ]
    assert all("Corrective plan from the last assessment: Fetch alpha's" in p for p in evaluation_prompts)
    metas = [c.messages[-1].content for c in client.calls if c.messages[-1].content.startswith("You oversee")]
    assert "Previous observation: none" in metas[0] and "Previous observation: Fetch alpha's" in metas[1]
    _, plain, _ = run(walker())
    assert not any(c.messages[-1].content.startswith("You oversee") for c in plain.calls)  # off by default


def test_the_same_walk_through_function_calling_over_http() -> None:
    """An OpenAI-compatible endpoint with function calling (a real HTTP server; the model is the walker):
    each turn offers the state's tools and ``next_state`` as functions, the model calls them, and the walk,
    the tool calls and the checked answer are the same as through JSON in text."""
    from metakg.config import LLMSettings
    from metakg.llm.client import Message
    from metakg.llm.openai_client import OpenAICompatibleClient
    from metakg.qa_engine.strategies.robodata.fsm import parse_transition
    from metakg.qa_engine.strategies.robodata.tools import parse_calls
    from tests.fault_server import FaultServer

    model = walker()

    def as_request(body: dict[str, Any]) -> ChatRequest:
        return ChatRequest(tuple(Message(m["role"], m["content"]) for m in body["messages"]), body["model"])

    def calls_for(body: dict[str, Any]) -> list[tuple[str, str]]:
        text = model(as_request(body))
        made = [(name, json.dumps(args)) for name, args in parse_calls(text)]
        return [*made, ("next_state", json.dumps({"state": parse_transition(text)}))]

    server = FaultServer().start()
    try:
        server.calls_for = calls_for
        server.reply_for = lambda body: model(as_request(body))
        settings = LLMSettings.model_validate({"model": "m", "base_url": server.url, "backoff_s": 0.01})
        client = OpenAICompatibleClient(settings, base_url=server.url)
        local = EmbeddedStore(empty_nodes(), empty_edges(), embedder=AxisEmbedder())
        ctx = QAContext(store=local, embedder=AxisEmbedder(), llm=client)
        result = asyncio.run(Agent(AgentSettings(), ctx, client, local, remote_and_update(local)).run(QUERY))
    finally:
        server.stop()
    assert [s["state"] for s in result.trace["steps"]][1:4] == [
        "remote_exploration",
        "remote_evaluation",
        "local_update",
    ]
    assert result.stats["tool_calls_by_tool"] == {"entity_info": 1, "fetch_node": 1, "local_neighbours": 1}
    assert result.stats["refused_transitions"] == 0 and result.stats["support_precision"] == 0.5
    offered = [r for r in server.requests if "tools" in r]
    assert len(offered) == 6 and all(r["tool_choice"] == "required" and "response_format" not in r for r in offered)
    remote = next(r for r in offered if any(t["function"]["name"] == "entity_info" for t in r["tools"]))
    choose = next(t for t in remote["tools"] if t["function"]["name"] == "next_state")
    assert choose["function"]["parameters"]["properties"]["state"]["enum"] == [
        "remote_exploration",
        "remote_evaluation",
        "local_evaluation",
    ]
    assert "tools" not in server.requests[-1] and "response_format" in server.requests[-1]  # the answer: a schema


def test_each_turn_of_the_walk_is_reported_as_it_is_taken() -> None:
    from metakg.qa_engine.events import listening

    heard: list[dict[str, Any]] = []
    with listening(heard.append):
        result, _, _ = run(walker())
    assert [step["kind"] for step in heard] == ["state"] * len(result.trace["steps"])
    assert [(s["state"], s.get("next_state")) for s in heard] == [
        (s["state"], s.get("next_state")) for s in result.trace["steps"]
    ]


def test_a_call_failing_the_same_way_is_told_what_to_do_and_not_run_a_third_time() -> None:
    def script(request: ChatRequest) -> str:
        if state_of(request) == "remote_exploration":
            call = '{"tool_calls": [{"tool": "entity_info", "args": {"id": "kg:hand/none"}}]}'
            return call + ' {"next_state": "remote_exploration"}'
        return "{}"

    result, _, _ = run(script, max_turns=6)
    calls = [c for s in result.trace["steps"] for c in s.get("tool_calls", [])]
    ran = [c for c in calls if not c["text"].startswith("not run")]
    assert len(ran) == 2 and "do not repeat it" in ran[1]["text"]
    assert len(calls) > 2 and all("not run: entity_info failed 2 times" in c["text"] for c in calls[2:])
    assert result.stats["repeated_failures_blocked"] == len(calls) - 2


def test_english_sent_to_the_sparql_tool_is_pointed_to_search() -> None:
    from metakg.qa_engine.strategies.robodata.remote import remote_tools
    from tests.unit.qa_engine.robodata.test_remote_args import NoEndpoint

    local = EmbeddedStore(empty_nodes(), empty_edges(), embedder=AxisEmbedder())
    turns = iter(range(100))

    def script(request: ChatRequest) -> str:
        if state_of(request) == "remote_exploration":  # a new English text every turn: the same mistake
            query = json.dumps({"query": f"Who directed the film number {next(turns)}?"})
            return (
                '{"tool_calls": [{"tool": "remote_sparql", "args": '
                + query
                + '}]} {"next_state": "remote_exploration"}'
            )
        return "{}"

    client = ScriptedClient(script)
    ctx = QAContext(store=local, embedder=AxisEmbedder(), llm=client)
    toolsets = {"remote": remote_tools(NoEndpoint()), "local": local_tools(local)}
    result = asyncio.run(Agent(AgentSettings(max_turns=6), ctx, client, local, toolsets).run(QUERY))
    calls = [c for s in result.trace["steps"] for c in s.get("tool_calls", [])]
    failed = [c for c in calls if "not a SPARQL query" in c["text"] and not c["text"].startswith("not run")]
    assert len(failed) == 2 and "call remote_search with the name" in failed[1]["text"]
    assert result.stats["repeated_failures_blocked"] >= 1


def test_the_memory_summary_keeps_what_the_calls_found() -> None:
    def script(request: ChatRequest) -> str:
        prompt = request.messages[-1].content
        if prompt.startswith("Summarise these steps"):
            return "The agent hit a parse error."  # what a small model wrote: the facts are gone
        if state_of(request) == "remote_exploration":
            call = '{"tool_calls": [{"tool": "entity_info", "args": {"id": "' + ident("alpha") + '"}}]}'
            return call + ' {"next_state": "remote_exploration"}'
        return "{}"

    result, _, _ = run(script, max_turns=8, memory_size=4)
    summary = result.trace["memory_summaries"][0]
    assert summary.startswith("The agent hit a parse error.") and ident("alpha") in summary and "alpha" in summary
