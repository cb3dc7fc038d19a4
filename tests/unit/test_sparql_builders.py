"""The SPARQL builders: exact text for the sync's and the agent's queries, and nothing unchecked written in."""

from __future__ import annotations

import pytest

from metakg.schemas import sparql


def test_the_sync_queries_are_written_as_the_sync_sends_them() -> None:
    assert sparql.linked_items(["Q1", "Q42"], ["P31"]) == (
        "SELECT DISTINCT ?o WHERE { VALUES ?s { wd:Q1 wd:Q42 } VALUES ?p { wdt:P31 } ?s ?p ?o . FILTER(isIRI(?o)) }"
    )
    assert sparql.class_members("Q12136", "P699", 100, 200) == (
        "SELECT DISTINCT ?item WHERE { ?item wdt:P31 wd:Q12136 . ?item wdt:P699 ?x . } "
        "ORDER BY ?item LIMIT 100 OFFSET 200"
    )
    assert 'FILTER(LANG(?o) IN ("en", "de"))' in sparql.terms(["Q42"], ["en", "de"])
    assert "VALUES ?p { wd:P31 wd:P279 }" in sparql.property_labels(["P31", "P279"], "en")


def test_the_agent_queries_escape_text_and_check_ids() -> None:
    query = sparql.label_search('Douglas "Adams" \\ }', 5, exact=True)
    assert 'LCASE(STR(?label)) = "douglas \\"adams\\" \\\\ }"' in query and query.endswith("LIMIT 5")
    assert "wd:Q42 ?p ?other" in sparql.neighbours("Q42", "out", None, 10)
    assert "?other wdt:P19 wd:Q42" in sparql.linked("Q42", "P19", "in", 3)
    assert "wd:P31 ?p ?o" in sparql.entity_terms("P31")


@pytest.mark.parametrize(
    "build",
    [
        lambda: sparql.item("Q42 } ; DROP ALL"),
        lambda: sparql.items(["Q1", "wd:Q2"]),
        lambda: sparql.prop("P31> ?x"),
        lambda: sparql.class_members("Q5", None, -1, 0),
        lambda: sparql.class_members("Q5", None, True, 0),  # type: ignore[arg-type]
        lambda: sparql.statement_pattern("Q42", "?p } INSERT", "out"),
        lambda: sparql.neighbours("Q42", "out", "P31 } #", 10),
    ],
)
def test_nothing_unchecked_is_written_into_a_query(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]
