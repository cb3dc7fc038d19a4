"""The RDF mapping and export: parse the output back and compare with what the mapping promises."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rdflib import RDFS, SKOS, Dataset, Graph, Literal, URIRef

from metakg.errors import OutputError
from metakg.loaders.rdf_export import write_rdf
from metakg.schemas.rdf_mapping import MKR, bundle_quads, expected_triple_count, node_iri, source_graph
from metakg.schemas.vocabulary import default_vocabulary
from tests.conftest import small_bundle

VOCAB = default_vocabulary()


def parse(path: Path, fmt: str) -> Graph | Dataset:
    if fmt in ("nq", "trig"):
        ds = Dataset()
        ds.parse(path, format={"nq": "nquads", "trig": "trig"}[fmt])
        return ds
    g = Graph()
    g.parse(path, format={"nt": "nt", "ttl": "turtle"}[fmt])
    return g


@pytest.mark.parametrize("fmt", ["ttl", "nt", "nq", "trig"])
@pytest.mark.parametrize("provenance", [True, False])
def test_round_trip_counts_match_the_mapping(tmp_path: Path, fmt: str, provenance: bool) -> None:
    bundle = small_bundle()
    out = tmp_path / f"kg.{fmt}"
    written = write_rdf(bundle_quads(bundle.nodes, bundle.edges, VOCAB, provenance=provenance), out, fmt)  # type: ignore[arg-type]
    parsed = parse(out, fmt)
    expected = expected_triple_count(
        bundle.nodes, bundle.edges, VOCAB, provenance=provenance, named_graphs=fmt in ("nq", "trig")
    )
    assert len(parsed) == expected == written


def test_values_survive_exactly(tmp_path: Path) -> None:
    bundle = small_bundle()
    out = tmp_path / "kg.nt"
    write_rdf(bundle_quads(bundle.nodes, bundle.edges, VOCAB), out, "nt")
    g = parse(out, "nt")
    tricky = 'O\'Brien \\ "quoted" MATCH (n) 東京'
    subject = node_iri("kg:test/8")
    assert (subject, RDFS.label, Literal(tricky, lang="en")) in g
    aspirin = node_iri("kg:test/0")
    assert (aspirin, SKOS.exactMatch, URIRef("http://www.wikidata.org/entity/Q18216")) in g
    assert (aspirin, SKOS.altLabel, Literal("ASA", lang="en")) in g
    assert (aspirin, MKR["treats"], node_iri("kg:test/1")) in g


def test_named_graph_per_source(tmp_path: Path) -> None:
    bundle = small_bundle()
    out = tmp_path / "kg.nq"
    write_rdf(bundle_quads(bundle.nodes, bundle.edges, VOCAB, provenance=False), out, "nq")
    ds = parse(out, "nq")
    assert isinstance(ds, Dataset)
    graph = ds.graph(source_graph("test"))
    assert len(graph) == bundle.edges.height


def test_export_is_chunked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metakg.loaders.rdf_export as rdf_export

    monkeypatch.setattr(rdf_export, "CHUNK", 7)
    bundle = small_bundle()
    seen: list[int] = []
    out = tmp_path / "kg.nt"
    written = write_rdf(bundle_quads(bundle.nodes, bundle.edges, VOCAB), out, "nt", progress=seen.append)
    assert len(seen) > 5 and seen[-1] == written
    assert len(parse(out, "nt")) == expected_triple_count(bundle.nodes, bundle.edges, VOCAB, named_graphs=False)


@pytest.mark.parametrize("fmt", ["ttl", "nt", "nq", "trig"])
def test_a_failed_export_leaves_no_temporary_file(tmp_path: Path, fmt: str) -> None:
    bundle = small_bundle()
    quads = list(bundle_quads(bundle.nodes, bundle.edges, default_vocabulary()))

    def breaks_midway() -> Iterator[Any]:
        yield from quads[:5]
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError):
        write_rdf(breaks_midway(), tmp_path / f"kg.{fmt}", fmt)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "taken").mkdir()
    with pytest.raises(OutputError, match="is a folder"):
        write_rdf(iter(quads), tmp_path / "taken", fmt)  # type: ignore[arg-type]  # a folder is in the way
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
