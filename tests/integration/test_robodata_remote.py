"""RoboData's remote tools against the real Virtuoso endpoint loaded with the Wikidata test data."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg import api
from metakg.config import load_settings
from metakg.ingest.wikidata import WikidataFragments
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.strategies.robodata.remote import remote_tools
from metakg.qa_engine.strategies.robodata.update import update_tools
from metakg.schemas.bundle import read_bundle
from metakg.schemas.tables import empty_edges, empty_nodes
from metakg.schemas.vocabulary import default_vocabulary
from tests.integration.test_wikidata_sync import sparql
from tools.sparql_server import Server

pytestmark = pytest.mark.integration


def call(server: Server, tool: str, **args: Any) -> Any:
    tools = remote_tools(api.sparql_client(load_settings(), server.endpoint))
    result = tools.call(tool, args)
    assert result.ok, result.text
    return json.loads(result.text)


def test_entity_search_neighbours_and_select(sparql_endpoint: Server) -> None:
    q42 = call(sparql_endpoint, "remote_entity", id="Q42")
    assert q42["label"] == "Douglas Adams" and q42["claims"][0]["values"] >= 6  # the most used property first
    assert any(c["property"] == "P106" and c["values"] == 6 for c in q42["claims"])  # six occupations
    assert any(hit["id"] == "Q42" for hit in call(sparql_endpoint, "remote_search", text="douglas adams"))
    born = call(sparql_endpoint, "remote_neighbours", id="Q42", property="P19")
    assert born == [{"property": "P19", "id": "Q350", "label": "Cambridge"}]
    into = call(sparql_endpoint, "remote_neighbours", id="Q350", property="P19", direction="in", limit=100)
    assert {"property": "P19", "id": "Q42", "label": "Douglas Adams"} in into
    rows = call(sparql_endpoint, "remote_sparql", query="SELECT ?place WHERE { wd:Q42 wdt:P19 ?place }")
    assert rows == [{"place": "Q350"}]
    assert call(sparql_endpoint, "remote_sparql", query="ASK { wd:Q42 wdt:P19 wd:Q350 }") == {"ask": True}
    assert call(sparql_endpoint, "remote_sparql", query="ASK WHERE { wd:Q42 wdt:P19 wd:Q84 }") == {"ask": False}


def test_a_raw_query_stops_at_its_time_limit(sparql_endpoint: Server) -> None:
    from metakg.ingest.wikidata import QueryTimeout

    client = api.sparql_client(load_settings(), sparql_endpoint.endpoint)
    heavy = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"  # a cross product of everything
    started = time.perf_counter()
    # cut off by the client, or refused at once by the endpoint's own estimate (Virtuoso): a timeout either way
    with pytest.raises(QueryTimeout, match=r"no answer within 1 s|time limit"):
        client.select(heavy, timeout_s=1)
    assert client.retries == 0 and time.perf_counter() - started < 10  # not retried
    tools = remote_tools(client)
    result = tools.call("remote_sparql", {"query": heavy})
    assert not result.ok and "remote_sparql failed" in result.text


def test_no_remote_call_writes(sparql_endpoint: Server) -> None:
    tools = remote_tools(api.sparql_client(load_settings(), sparql_endpoint.endpoint))
    before = sparql(sparql_endpoint, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    for query in ("DELETE WHERE { wd:Q42 ?p ?o }", "INSERT DATA { wd:Q42 wdt:P19 wd:Q84 }", "CLEAR ALL"):
        result = tools.call("remote_sparql", {"query": query})
        assert not result.ok and "updates are refused" in result.text
    assert sparql(sparql_endpoint, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }") == before
    missing = tools.call("remote_entity", {"id": "Q999999999"})
    assert not missing.ok and "nothing on Q999999999" in missing.text


def test_update_tools_map_statements_exactly_as_a_sync_does(sparql_endpoint: Server, tmp_path: Path) -> None:
    settings = load_settings()
    fetcher = WikidataFragments(api.sparql_client(settings, sparql_endpoint.endpoint), default_vocabulary())
    local = EmbeddedStore(empty_nodes(), empty_edges())
    tools = update_tools(fetcher, local)
    born = tools.call("fetch_relationships", {"id": "Q42", "property": "P19"})
    assert born.ok and json.loads(born.text)["nodes_added"] == 2 and json.loads(born.text)["statements"] == 1
    into = tools.call("fetch_relationships", {"id": "Q350", "property": "P19", "direction": "in", "limit": 3})
    assert into.ok and json.loads(into.text)["statements"] >= 1
    assert json.loads(tools.call("fetch_node", {"id": "Q42"}).text)["nodes_added"] == 0  # already there: merged
    assert not tools.call("fetch_node", {"id": "Q999999999"}).ok
    # a sync of Q42 and Q350 with P19 gives the same rows for them
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: born\nseeds: [Q42, Q350]\nproperties: [P19]\nlanguages: [en]\n")
    api.sync_wikidata(spec, tmp_path / "synced", settings, endpoint=sparql_endpoint.endpoint,
                      state_path=tmp_path / "state.json")  # fmt: skip
    synced = read_bundle(tmp_path / "synced")
    mine = local.bundle()
    columns = ["id", "name", "type", "source", "description", "xrefs", "revision"]
    ours = mine.nodes.filter(pl.col("id").is_in(["wd:Q42", "wd:Q350"])).select(columns).sort("id")
    q42 = ours.filter(pl.col("id") == "wd:Q42").row(0, named=True)
    assert ours.height == 2 and q42["type"] == "person" and q42["revision"] == "595492361"  # provenance kept
    assert ours.equals(synced.nodes.select(columns).sort("id"))
    edge = ["id", "src", "dst", "rel", "display", "source", "record_ids"]
    q42_edges = mine.edges.filter(pl.col("src") == "wd:Q42").select(edge)
    assert q42_edges.height == 1 and q42_edges.equals(synced.edges.select(edge))
    assert (tmp_path / "synced" / "nodes.parquet").is_file()


def test_a_scripted_plan_answers_from_wikidata_with_a_support_set_the_endpoint_confirms(
    sparql_endpoint: Server,
) -> None:
    """Where was Douglas Adams born? The agent searches, copies Q42's P19 statement and cites it."""
    base = load_settings()
    settings = base.model_copy(
        update={"wikidata": base.wikidata.model_copy(update={"endpoint": sparql_endpoint.endpoint})}
    )
    call = lambda tool, **args: json.dumps({"tool_calls": [{"tool": tool, "args": args}]})  # noqa: E731

    def plan(request: ChatRequest) -> str:
        prompt = request.messages[-1].content
        state = re.search(r"You are in the state (\w+)", prompt)
        if state is None:  # the answer: cite the edge the local graph shows between Q42 and Q350
            edge = re.search(r"\((e:[0-9a-f]+): wd:Q42 -> wd:Q350\)", prompt)
            sentence = {"text": "Douglas Adams was born in Cambridge.", "nodes": ["wd:Q42", "wd:Q350"],
                        "edges": [edge.group(1) if edge else "e:none"]}  # fmt: skip
            return json.dumps({"sentences": [sentence]})
        return {
            "remote_exploration": call("remote_search", text="Douglas Adams") + ' {"next_state": "remote_evaluation"}',
            "remote_evaluation": '{"next_state": "local_update"}',
            "local_update": call("fetch_relationships", id="Q42", property="P19")
            + ' {"next_state": "local_evaluation"}',
            "local_evaluation": '{"next_state": "answer"}',
        }[state.group(1)]

    question = api.make_question("Where was Douglas Adams born?")
    client = ScriptedClient(plan)
    local = EmbeddedStore(empty_nodes(), empty_edges())
    ctx = api.qa_context(settings, local, client)
    answer = asyncio.run(api.create_strategy(settings, "robodata").answer(question, ctx))
    assert answer.status == "ok" and answer.text == "Douglas Adams was born in Cambridge."
    (claim,) = answer.support
    assert claim.verified and claim.problems == ()
    stats = answer.trace["stats"]
    assert stats["tool_calls_by_tool"] == {"remote_search": 1, "fetch_relationships": 1}
    assert stats["nodes_added"] == 2 and stats["edges_added"] == 1 and stats["support_precision"] == 1.0
    assert stats["remote_queries"] >= 4  # the search, the linked ids, the revisions, the entities and labels
    # checked independently against the endpoint's data: the cited nodes and the statement behind the edge
    (row,) = sparql(sparql_endpoint, "SELECT ?o WHERE { <http://www.wikidata.org/entity/Q42> "
                                     "<http://www.wikidata.org/prop/direct/P19> ?o }")  # fmt: skip
    assert row["o"]["value"] == "http://www.wikidata.org/entity/Q350"
    assert set(answer.trace["local_graph"]["nodes"]) == {"wd:Q42", "wd:Q350"}


def douglas_adams_plan(request: ChatRequest) -> str:
    """Search, copy Q42's P19 statement, answer citing it; with the statement already local, answer at once."""
    call = lambda tool, **args: json.dumps({"tool_calls": [{"tool": tool, "args": args}]})  # noqa: E731
    prompt = request.messages[-1].content
    state = re.search(r"You are in the state (\w+)", prompt)
    edge = re.search(r"\((e:[0-9a-f]+): wd:Q42 -> wd:Q350\)", prompt)
    if state is None:
        sentence = {"text": "Douglas Adams was born in Cambridge.", "nodes": ["wd:Q42", "wd:Q350"],
                    "edges": [edge.group(1) if edge else "e:none"]}  # fmt: skip
        return json.dumps({"sentences": [sentence]})
    if state.group(1) == "local_evaluation":
        return '{"next_state": "answer"}' if edge else '{"next_state": "remote_exploration"}'
    return {
        "remote_exploration": call("remote_search", text="Douglas Adams") + ' {"next_state": "remote_evaluation"}',
        "remote_evaluation": '{"next_state": "local_update"}',
        "local_update": call("fetch_relationships", id="Q42", property="P19") + ' {"next_state": "local_evaluation"}',
    }[state.group(1)]


def ask_twice_over_a_kept_graph(settings: Any) -> list[Any]:
    """Two questions through one kept local graph; the second finds the statement the first copied."""
    answers = []
    with api.local_graph(settings) as kept:
        assert kept is not None
        ctx = api.qa_context(settings, EmbeddedStore(empty_nodes(), empty_edges()), ScriptedClient(douglas_adams_plan),
                             local=kept)  # fmt: skip
        strategy = api.create_strategy(settings, "robodata")
        for n in (1, 2):
            question = api.make_question("Where was Douglas Adams born?", question_id=f"q{n}")
            answers.append(asyncio.run(strategy.answer(question, ctx)))
    return answers


def test_a_local_graph_kept_as_a_bundle_grows_across_questions_and_is_written_after_each(
    sparql_endpoint: Server, tmp_path: Path
) -> None:
    base = load_settings()
    kept = tmp_path / "local-kg"
    settings = api.with_local_kg(
        base.model_copy(update={"wikidata": base.wikidata.model_copy(update={"endpoint": sparql_endpoint.endpoint})}),
        kept,
    )
    first, second = ask_twice_over_a_kept_graph(settings)
    assert first.status == second.status == "ok" and first.support[0].verified and second.support[0].verified
    assert first.trace["stats"]["nodes_added"] == 2 and first.trace["stats"]["remote_queries"] >= 4
    # the second question found the statement in the kept graph: no remote call, nothing added
    assert second.trace["stats"]["remote_queries"] == 0 and second.trace["stats"]["nodes_added"] == 0
    assert [s["state"] for s in second.trace["steps"]] == ["local_evaluation"]
    assert second.trace["local_graph"]["kept"] == {"nodes": 2, "edges": 1}
    assert set(second.local_graph.nodes["id"].to_list()) == {"wd:Q42", "wd:Q350"}  # the cited part
    on_disk = read_bundle(kept)
    assert sorted(on_disk.nodes["id"].to_list()) == ["wd:Q350", "wd:Q42"] and on_disk.edges.height == 1
    assert on_disk.nodes.filter(pl.col("id") == "wd:Q42")["revision"][0]  # mapped as the sync maps it
    # a second process cannot open the same kept graph while it is in use
    from metakg.errors import ResourceBusy

    with api.local_graph(settings), pytest.raises(ResourceBusy), api.local_graph(settings):
        pass
    third, _ = ask_twice_over_a_kept_graph(settings)  # reopened: the graph read back answers at once
    assert third.trace["stats"]["remote_queries"] == 0 and third.support[0].verified


def test_a_local_graph_kept_in_neo4j(sparql_endpoint: Server, clean_neo4j: Any, neo4j_settings: Any) -> None:
    base = load_settings()
    settings = api.with_local_kg(
        base.model_copy(
            update={
                "wikidata": base.wikidata.model_copy(update={"endpoint": sparql_endpoint.endpoint}),
                "neo4j": neo4j_settings,
            }
        ),
        "neo4j",
    )
    first, second = ask_twice_over_a_kept_graph(settings)
    assert first.status == second.status == "ok" and first.support[0].verified and second.support[0].verified
    assert first.trace["stats"]["edges_added"] == 1 and second.trace["stats"]["remote_queries"] == 0
    rows, _, _ = clean_neo4j.execute_query("MATCH (a:Entity)-[r:place_of_birth]->(b:Entity) RETURN a.id, b.id")
    assert [(r["a.id"], r["b.id"]) for r in rows] == [("wd:Q42", "wd:Q350")]
