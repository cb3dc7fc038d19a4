"""RoboData's remote tools against the real Virtuoso endpoint loaded with the Wikidata test data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metakg import api
from metakg.config import load_settings
from metakg.qa_engine.robodata.remote import remote_tools
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
    assert q42["label"] == "Douglas Adams" and {"property": "P19", "values": 1, "example": "Q350"} in q42["claims"]
    assert any(hit["id"] == "Q42" for hit in call(sparql_endpoint, "remote_search", text="douglas adams"))
    born = call(sparql_endpoint, "remote_neighbours", id="Q42", property="P19")
    assert born == [{"property": "P19", "id": "Q350", "label": "Cambridge"}]
    into = call(sparql_endpoint, "remote_neighbours", id="Q350", property="P19", direction="in", limit=100)
    assert {"property": "P19", "id": "Q42", "label": "Douglas Adams"} in into
    rows = call(sparql_endpoint, "remote_sparql", query="SELECT ?place WHERE { wd:Q42 wdt:P19 ?place }")
    assert rows == [{"place": "Q350"}]


def test_no_remote_call_writes(sparql_endpoint: Server) -> None:
    tools = remote_tools(api.sparql_client(load_settings(), sparql_endpoint.endpoint))
    before = sparql(sparql_endpoint, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    for query in ("DELETE WHERE { wd:Q42 ?p ?o }", "INSERT DATA { wd:Q42 wdt:P19 wd:Q84 }", "CLEAR ALL"):
        result = tools.call("remote_sparql", {"query": query})
        assert not result.ok and "not a read-only SELECT" in result.text
    assert sparql(sparql_endpoint, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }") == before
    missing = tools.call("remote_entity", {"id": "Q999999999"})
    assert not missing.ok and "nothing on Q999999999" in missing.text
