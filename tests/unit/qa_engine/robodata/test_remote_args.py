"""Remote tools refuse bad ids and anything but one read-only SELECT before a query is sent."""

from __future__ import annotations

import pytest

from metakg.qa_engine.strategies.robodata.remote import remote_tools
from metakg.schemas.knowledge_source import Binding, check_select


class NoEndpoint:
    """A knowledge source that fails the test if any query reaches it."""

    endpoint = "http://127.0.0.1:1/sparql"

    def select(self, query: str, *, timeout_s: float | None = None) -> list[Binding]:
        raise AssertionError(f"a query was sent: {query}")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("DELETE WHERE { ?s ?p ?o }", "updates are refused"),
        ("INSERT DATA { wd:Q1 wdt:P31 wd:Q5 }", "updates are refused"),
        ("ASK { wd:Q42 ?p ?o }", "only SELECT queries are allowed, not AskQuery"),
        ("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", "not ConstructQuery"),
        ("SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }", "SERVICE"),
        ("SELECT ?x WHERE { ?x wdt:P31 wd:Q5 } ; DROP ALL", r"not a valid read-only SELECT query: .* at character 37"),
        ("hello", "not a SPARQL query: the text reads as plain words"),
        ("Who directed Heat?", "search for the name instead"),
    ],
)
def test_only_one_select_passes(query: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_select(query)


def test_an_ask_passes_only_when_asked_for_and_becomes_a_one_row_select() -> None:
    from metakg.schemas.knowledge_source import ask_as_select

    query = "PREFIX ask: <http://example.org/ask#>\nASK WHERE { wd:Q42 wdt:P19 wd:Q350 }"
    assert check_select(query, ask=True) == query
    assert ask_as_select(query) == (
        "PREFIX ask: <http://example.org/ask#>\nSELECT * WHERE { wd:Q42 wdt:P19 wd:Q350 } LIMIT 1"
    )
    assert ask_as_select("ASK { ?s ?p ?o };") == "SELECT * WHERE { ?s ?p ?o } LIMIT 1"


def test_a_select_with_known_prefixes_passes() -> None:
    query = "SELECT ?x ?label WHERE { ?x wdt:P31 wd:Q5 ; rdfs:label ?label } LIMIT 3"
    assert check_select(query) == query


def test_bad_arguments_never_reach_the_endpoint() -> None:
    tools = remote_tools(NoEndpoint())
    assert "an entity id looks like Q42" in tools.call("remote_entity", {"id": "Q42 } ; DROP ALL"}).text
    assert "a property id looks like P31" in tools.call("remote_neighbours", {"id": "Q42", "property": "P3x"}).text
    assert (
        "input should be 'out' or 'in'" in tools.call("remote_neighbours", {"id": "Q1", "direction": "up"}).text.lower()
    )
    refused = tools.call("remote_sparql", {"query": "DELETE WHERE { ?s ?p ?o }"})
    assert not refused.ok and "updates are refused: only read-only SELECT or ASK" in refused.text
    construct = tools.call("remote_sparql", {"query": "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"})
    assert not construct.ok and "only SELECT and ASK queries are allowed" in construct.text
    assert (
        "less than or equal to 200"
        in tools.call("remote_sparql", {"query": "SELECT * WHERE { ?s ?p ?o }", "limit": 500}).text
    )


class Gappy:
    """A knowledge source whose rows lack the variables the tools' queries bind."""

    endpoint = "http://127.0.0.1:1/sparql"

    def select(self, query: str, *, timeout_s: float | None = None) -> list[Binding]:
        return [{"o": {"type": "literal", "value": "Douglas Adams"}}]  # no ?p, ?n, ?example, ?item, ?other


@pytest.mark.parametrize(
    ("tool", "args", "missing"),
    [
        ("remote_entity", {"id": "Q42"}, "?p"),
        ("remote_property", {"id": "P69"}, "?p"),
        ("remote_search", {"text": "Douglas Adams"}, "?item"),
        ("remote_neighbours", {"id": "Q42"}, "?p"),
    ],
)
def test_a_reply_row_without_a_bound_variable_is_a_tool_error_naming_it(
    tool: str, args: dict[str, str], missing: str
) -> None:
    result = remote_tools(Gappy()).call(tool, args)
    assert not result.ok and f"without {missing}" in result.text
