"""The orchestrator's state machine and the tool protocol, without an LLM."""

from __future__ import annotations

import json

import pytest

from metakg.qa_engine.strategies.robodata.fsm import (
    EVALUATION_STATES,
    INSTRUCTIONS,
    SUCCESSORS,
    TOOLSETS,
    State,
    check_transition,
    parse_transition,
    urgency,
)
from metakg.qa_engine.strategies.robodata.tools import ToolBox, local_tools, parse_calls
from tests.unit.qa_engine.handmade import ident, store


def test_every_state_is_reachable_and_only_the_answer_is_final() -> None:
    seen, todo = {State.LOCAL_EVALUATION}, [State.LOCAL_EVALUATION]
    while todo:
        for nxt in SUCCESSORS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert seen == set(State)
    assert [s for s in State if not SUCCESSORS[s]] == [State.ANSWER]
    assert set(INSTRUCTIONS) == set(State) and set(State) >= EVALUATION_STATES
    assert set(TOOLSETS.values()) == {"local", "remote", "update"}


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        ('{"tool_calls": [], "next_state": "Remote_Exploration"}', "remote_exploration"),
        ("I looked around.\nNext state: local_update", "local_update"),
        ("Not local_exploration: go to answer now.", "answer"),  # the last state named
        ("I do not know.", None),
    ],
)
def test_parse_transition(reply: str, named: str | None) -> None:
    assert parse_transition(reply) == named


def test_an_invalid_transition_is_refused_with_the_allowed_states() -> None:
    assert check_transition(State.LOCAL_UPDATE, "local_evaluation") == (State.LOCAL_EVALUATION, None)
    state, refusal = check_transition(State.LOCAL_UPDATE, "answer")
    assert state is None and refusal == (
        "'answer' is not a state you may go to from local_update; choose one of: local_evaluation."
    )
    state, refusal = check_transition(State.REMOTE_EXPLORATION, None)
    assert state is None and "named no next state" in (refusal or "") and "remote_evaluation" in (refusal or "")


def test_urgency_starts_in_the_last_quarter() -> None:
    assert urgency(10, 20) == "" and urgency(14, 20) == ""
    assert "5 turn(s) left" in urgency(15, 20) and "isolated" in urgency(15, 20)
    assert "2 turn(s) left" in urgency(3, 5)  # at least the last two turns


def test_json_in_text_calls_run_with_every_failure_reported_as_text() -> None:
    tools = local_tools(store())
    reply = (
        "I will look. "
        + json.dumps({"tool_calls": [{"tool": "local_neighbours", "args": {"id": ident("alpha")}}]})
        + ' then {"tool": "local_node", "args": {"id": "kg:hand/ghost"}}'
        + ' and [{"name": "local_paths", "arguments": {"source": "x"}}, {"tool": "fly", "args": {}}]'
        + ' and {"tool": "local_search", "args": {"text": "alpha", "colour": "red"}}'
    )
    results = tools.run_reply(reply)
    assert [r.tool for r in results] == ["local_neighbours", "local_node", "local_paths", "fly", "local_search"]
    first = json.loads(results[0].text)
    assert results[0].ok and {n["node"]["name"] for n in first} == {"decoy", "bridge"}
    assert not results[1].ok and "no local node kg:hand/ghost" in results[1].text
    assert not results[2].ok and "target: Field required" in results[2].text
    assert not results[3].ok and "unknown tool 'fly'" in results[3].text and "local_search" in results[3].text
    assert not results[4].ok and "colour: Extra inputs are not permitted" in results[4].text
    path = tools.call("local_paths", {"source": ident("alpha"), "target": ident("beta")})
    assert path.ok and json.loads(path.text)[0]["nodes"][-1] == ident("beta")
    assert parse_calls("no calls here, {broken json") == []


def test_tool_descriptions_and_function_schemas() -> None:
    tools = local_tools(store())
    assert "- local_paths(source: string, target: string, k: integer, max_hops: integer):" in tools.describe()
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in tools.openai_tools()}
    assert schema["local_node"]["required"] == ["id"] and schema["local_node"]["additionalProperties"] is False
    with pytest.raises(ValueError, match="repeat"):
        ToolBox([*tools.tools.values(), tools.tools["local_node"]])


def test_local_triples_match_subject_relation_and_object_on_the_graph_store() -> None:
    tools = local_tools(store())
    assert "local_query" not in tools.tools  # the embedded store runs no query language; triples serve instead

    def triples(**args: str) -> set[tuple[str, str, str]]:
        result = tools.call("local_triples", args)
        assert result.ok, result.text
        return {(t["src"].split("/")[-1], t["rel"], t["dst"].split("/")[-1]) for t in json.loads(result.text)}

    assert triples(subject=ident("alpha")) == {("alpha", "near", "decoy"), ("alpha", "near", "bridge")}
    assert triples(subject=ident("alpha"), object=ident("bridge")) == {("alpha", "near", "bridge")}
    assert triples(object=ident("beta")) == {("zeta", "leads_to", "beta")}
    assert triples(relation="leads_to") == {("decoy", "leads_to", "zeta"), ("zeta", "leads_to", "beta")}
    assert triples(subject=ident("decoy"), relation="near") == {("decoy", "near", "decoy_two")}
    missing = tools.call("local_triples", {"subject": "kg:hand/ghost"})
    assert not missing.ok and "kg:hand/ghost" in missing.text
    (first,) = json.loads(tools.call("local_triples", {"subject": ident("zeta")}).text)
    edge = json.loads(tools.call("local_edge", {"id": first["id"]}).text)
    assert (edge["src"], edge["rel"], edge["dst"]) == (ident("zeta"), "leads_to", ident("beta"))
    assert "no local edge e:nope" in tools.call("local_edge", {"id": "e:nope"}).text
