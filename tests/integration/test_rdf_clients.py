"""The RDF export read by the clients its users run: Apache Jena's strict parser (as ``riot --validate``, from
the Maven Central jars) and pyoxigraph (SPARQL over the loaded file). A bundle that keeps history: its past
stays in its named graph, so the single-graph formats answer for the current graph only."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pyoxigraph as ox
import pytest

from metakg import api
from metakg.api.bundles import earlier_version, record_update
from metakg.schemas.bundle import Bundle, write_bundle
from metakg.schemas.tables import conform_edges, conform_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools import jena_riot

pytestmark = pytest.mark.integration

FORMATS = {"ttl": ox.RdfFormat.TURTLE, "nt": ox.RdfFormat.N_TRIPLES, "nq": ox.RdfFormat.N_QUADS,
           "trig": ox.RdfFormat.TRIG}  # fmt: skip
PREFIXES = (
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> PREFIX owl: <http://www.w3.org/2002/07/owl#> "
    "PREFIX skos: <http://www.w3.org/2004/02/skos/core#> PREFIX wd: <http://www.wikidata.org/entity/> "
    "PREFIX wdt: <http://www.wikidata.org/prop/direct/> PREFIX mkr: <https://w3id.org/metakg/rel/> "
    "PREFIX mkt: <https://w3id.org/metakg/type/> "
)


def people(name: str) -> Bundle:
    nodes = pl.DataFrame(
        {
            "id": ["wd:Q42", "wd:Q691283"],
            "name": [name, "St John's College"],
            "type": ["person", "organization"],
            "source": "wikidata:test",
            "aliases": [["Douglas Noel Adams"], []],
            "description": ["English writer", None],
        }
    )
    edges = pl.DataFrame(
        {"src": ["wd:Q42"], "rel": ["educated_at"], "dst": ["wd:Q691283"], "display": ["educated at (P69)"],
         "source": ["wikidata:test"]}
    )  # fmt: skip
    return Bundle(conform_nodes(nodes), conform_edges(edges))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Douglas Adams renamed between two versions, the first kept as history."""
    path = tmp_path_factory.mktemp("rdf") / "wd"
    first = people("Douglas Adams")
    record_update(first, None, history=True)
    write_bundle(path, first)
    second = people("Douglas Noël Adams")
    record_update(second, earlier_version(path), history=True)
    write_bundle(path, second)
    return path


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_jena_and_oxigraph_read_every_format_with_the_promised_count(bundle: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"kg.{fmt}"
    result = api.export_rdf(bundle, out, fmt)  # type: ignore[arg-type]
    verdict = jena_riot.validate(out)
    assert verdict.valid, verdict.reason
    store = ox.Store()
    store.load(path=str(out), format=FORMATS[fmt])
    assert len(store) == result.statements_expected == verdict.triples + verdict.quads and result.complete
    named = fmt in ("nq", "trig")
    assert result.history_left_out is not named and verdict.graphs == (2 if named else 0)  # a source, history


@pytest.mark.parametrize("fmt", ["ttl", "nt"])
def test_a_single_graph_format_answers_for_the_current_graph_only(bundle: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"kg.{fmt}"
    api.export_rdf(bundle, out, fmt)  # type: ignore[arg-type]
    store = ox.Store()
    store.load(path=str(out), format=FORMATS[fmt])
    labels = {
        str(r["l"].value)
        for r in store.query(PREFIXES + 'SELECT ?l WHERE { ?s rdfs:label ?l FILTER(CONTAINS(?l, "Douglas")) }')
    }  # type: ignore[union-attr]
    assert labels == {"Douglas Noël Adams"}  # the retired "Douglas Adams" is not a label of anything here


def test_the_history_is_in_its_own_graph_of_trig(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "kg.trig"
    api.export_rdf(bundle, out, "trig")
    store = ox.Store()
    store.load(path=str(out), format=ox.RdfFormat.TRIG)
    current = {
        str(r["l"].value)
        for r in store.query(PREFIXES + "SELECT ?l WHERE { <http://www.wikidata.org/entity/Q42> rdfs:label ?l }")
    }  # type: ignore[union-attr]
    past = {
        str(r["l"].value)
        for r in store.query(
            PREFIXES + "SELECT ?l WHERE { GRAPH <https://w3id.org/metakg/graph/history> { ?v rdfs:label ?l } }"
        )
    }  # type: ignore[union-attr]
    assert current == {"Douglas Noël Adams"} and "Douglas Adams" in past


def test_types_relations_and_labels_link_to_wikidata(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "kg.ttl"
    api.export_rdf(bundle, out, "ttl")
    text = out.read_text(encoding="utf-8")
    assert "schema1:" not in text and "@prefix schema: <http://schema.org/> ." in text
    store = ox.Store()
    store.load(path=str(out), format=ox.RdfFormat.TURTLE)
    assert store.query(PREFIXES + "ASK { mkr:educated_at owl:equivalentProperty wdt:P69 }")
    assert store.query(PREFIXES + "ASK { mkt:person skos:exactMatch wd:Q5 }")
    assert store.query(PREFIXES + "ASK { mkt:organization skos:closeMatch wd:Q43229 }")
    # a Wikidata user's question, asked through the links: who was educated where?
    rows = list(store.query(PREFIXES + "SELECT ?who WHERE { ?p owl:equivalentProperty wdt:P69 . ?who ?p ?where . "  # type: ignore[arg-type]
                            "?who a ?t . ?t skos:exactMatch wd:Q5 }"))  # fmt: skip
    assert [str(r["who"].value) for r in rows] == ["http://www.wikidata.org/entity/Q42"]
    # issue 56, item 16: and in Wikidata's own terms, with no join and no reasoner
    direct = list(store.query(PREFIXES + "SELECT ?where WHERE { wd:Q42 wdt:P69 ?where }"))  # type: ignore[arg-type]
    assert [str(r["where"].value) for r in direct] == [str(r["where"].value) for r in store.query(  # type: ignore[union-attr]
        PREFIXES + "SELECT ?where WHERE { wd:Q42 mkr:educated_at ?where }")] and direct  # fmt: skip
    tagged = list(store.query(PREFIXES + 'SELECT ?l WHERE { ?s rdfs:label ?l FILTER(LANG(?l) = "en") }'))  # type: ignore[arg-type]
    assert len(tagged) >= 2
    plain = tmp_path / "plain.nt"
    api.export_rdf(bundle, plain, "nt", lang="")
    assert '"Douglas Noël Adams"@en' not in plain.read_text(encoding="utf-8")
    assert '"Douglas Noël Adams" .' in plain.read_text(encoding="utf-8") or '"Douglas Noël Adams"' in plain.read_text(
        encoding="utf-8"
    )
