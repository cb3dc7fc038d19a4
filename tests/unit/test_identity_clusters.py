"""Identity clusters by identifiers: nodes sharing an id or an xref, transitively, checked against an
independent count (networkx's connected components over the same xref graph)."""

from __future__ import annotations

import random

import networkx as nx
import polars as pl

from metakg.identity.clusters import compatible_types, id_clusters
from metakg.schemas.curie import normalise_curie
from metakg.schemas.tables import conform_nodes
from metakg.schemas.vocabulary import default_vocabulary

VOCAB = default_vocabulary()


def table(rows: list[tuple[str, str, list[str]]]) -> pl.DataFrame:
    return conform_nodes(
        pl.DataFrame(
            {
                "id": [r[0] for r in rows],
                "name": [r[0] for r in rows],
                "type": [r[1] for r in rows],
                "source": "t",
                "xrefs": [r[2] for r in rows],
            },
            schema_overrides={"xrefs": pl.List(pl.String)},
        )
    )


def test_primekg_wikidata_and_extracted_nodes_of_one_disease_are_one_cluster() -> None:
    nodes = table(
        [
            ("mondo:0004975", "disease", ["primekg.index:27158"]),  # PrimeKG
            ("wd:Q11081", "disease", ["MONDO:0004975", "mesh:D000544", "DOID:10652"]),  # Wikidata, as synced
            ("kg:notes/alzheimer_s_disease", "entity", ["http://www.wikidata.org/entity/Q11081"]),  # curated link
            ("drugbank:DB00945", "drug", ["primekg.index:14012"]),
            ("wd:Q18216", "drug", ["drugbank:DB00945"]),
            ("kg:notes/headache", "concept", []),
        ]
    )
    found = id_clusters(nodes, VOCAB)
    assert [c.members for c in found.mergeable] == [
        ("drugbank:DB00945", "wd:Q18216"),
        ("kg:notes/alzheimer_s_disease", "mondo:0004975", "wd:Q11081"),
    ]
    alzheimer = found.mergeable[1]
    assert alzheimer.shared == ("mondo:0004975", "wd:Q11081")  # the evidence: ids two members hold
    assert found.refused == []


def test_a_drug_and_a_disease_sharing_an_xref_are_reported_not_merged() -> None:
    nodes = table([("drugbank:DB1", "drug", ["umls:C1"]), ("mondo:0000001", "disease", ["UMLS:c1"])])
    [cluster] = id_clusters(nodes, VOCAB).refused
    assert cluster.problem is not None and "incompatible types: disease, drug" in cluster.problem
    assert cluster.shared == ("umls:C1",)


def test_a_cluster_larger_than_one_entity_has_is_reported() -> None:
    nodes = table([(f"kg:x/{i}", "concept", ["mesh:D000001"]) for i in range(30)])
    [cluster] = id_clusters(nodes, VOCAB, max_size=25).refused
    assert cluster.problem is not None and "implausibly large: 30 nodes" in cluster.problem


def test_type_compatibility_follows_the_is_a_chain() -> None:
    assert compatible_types(["disease", "biomedical_entity", "entity"], VOCAB)
    assert compatible_types(["drug", "chemical"], VOCAB)
    assert not compatible_types(["drug", "disease"], VOCAB)
    assert not compatible_types(["drug", "not_a_type"], VOCAB)


def test_the_cluster_count_equals_an_independent_count_of_connected_xref_components() -> None:
    rng = random.Random(7)
    prefixes = ["MONDO", "mondo", "DOID", "mesh", "MESH", "wd", "http://www.wikidata.org/entity/Q"]
    rows = []
    for i in range(3000):
        refs = []
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            prefix, local = rng.choice(prefixes), rng.randrange(2000)
            refs.append(f"{prefix}{local}" if prefix.startswith("http") else f"{prefix}:{local}")
        rows.append((f"kg:g/{i}", "entity", refs))
    nodes = table(rows)
    found = id_clusters(nodes, VOCAB, max_size=10**6)
    graph = nx.Graph()  # independent: a node joined to every written form's normalisation, by networkx
    for node_id, _type, refs in rows:
        graph.add_node(("node", node_id))
        for ref in [node_id, *refs]:
            graph.add_edge(("node", node_id), ("id", normalise_curie(ref) or ref))
    expected = [
        sorted(n[1] for n in part if n[0] == "node")
        for part in nx.connected_components(graph)
        if sum(1 for n in part if n[0] == "node") >= 2
    ]
    assert len(found.clusters) == len(expected) > 100
    assert sorted(list(c.members) for c in found.clusters) == sorted(expected)
