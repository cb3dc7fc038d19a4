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


def test_a_generic_node_takes_the_type_its_namespace_implies() -> None:
    # an NCBI taxon imported untyped sharing a (wrong) xref with a disease
    nodes = table(
        [
            ("ncbitaxon:810", "entity", ["umls:C2"]),
            ("mondo:0000002", "disease", ["umls:C2"]),
            ("kg:notes/flu", "concept", ["umls:C3"]),
            ("mondo:0000003", "disease", ["umls:C3"]),
        ]
    )
    found = id_clusters(nodes, VOCAB)
    [refused] = found.refused
    assert refused.members == ("mondo:0000002", "ncbitaxon:810")
    assert refused.problem is not None and "disease, taxon" in refused.problem
    assert [c.members for c in found.mergeable] == [("kg:notes/flu", "mondo:0000003")]  # kg: implies nothing


def test_names_chaining_incompatible_types_through_an_untyped_node_are_cut_not_refused() -> None:
    # biomappings' homonyms: the genus Chlamydia, MeSH's untyped term and the disease, all one name
    nodes = table([("ncbitaxon:810", "entity", []), ("mesh:D002690", "entity", []), ("doid:11263", "disease", [])])
    named = [("doid:11263", "mesh:D002690"), ("mesh:D002690", "ncbitaxon:810")]  # each pair's types fit
    found = id_clusters(nodes, VOCAB, named=named)
    assert [c.members for c in found.mergeable] == [("doid:11263", "mesh:D002690")]
    [alone] = found.refused
    assert alone.members == ("ncbitaxon:810",)
    assert alone.problem == (
        "kept apart: it shares a name match with mesh:D002690, which is one entity with doid:11263, and a "
        "taxon cannot be one entity with a disease"
    )
    # by identifiers alone the same chain is refused whole, with its evidence
    shared = table([("ncbitaxon:810", "entity", ["umls:C1"]), ("mesh:D002690", "entity", ["umls:C1", "doid:11263"])])
    [refused] = id_clusters(pl.concat([shared, table([("doid:11263", "disease", [])])]), VOCAB).refused
    assert refused.problem is not None and refused.problem.startswith("incompatible types")


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


def test_a_cluster_never_holds_two_ids_of_one_system() -> None:
    # two MONDO diseases that Wikidata's coarser item (two DOIDs) and a shared MeSH id would chain together:
    # MONDO:1 shares two ids with the item, MONDO:2 one, so MONDO:1 joins and MONDO:2 is kept apart
    nodes = table(
        [
            ("MONDO:0000001", "disease", ["DOID:1", "MESH:D1"]),
            ("mondo:0000002", "disease", ["doid:2", "mesh:D1"]),
            ("wd:Q1", "disease", ["DOID:1", "DOID:2", "MESH:D1"]),
            ("kg:notes/a", "concept", ["wd:Q1"]),  # extracted nodes are not one-per-entity: it joins
            ("kg:notes/b", "concept", ["wd:Q1"]),
        ]
    )
    found = id_clusters(nodes, VOCAB)
    assert [c.members for c in found.mergeable] == [("MONDO:0000001", "kg:notes/a", "kg:notes/b", "wd:Q1")]
    [alone] = found.refused
    assert alone.members == ("mondo:0000002",) and alone.problem is not None
    assert alone.problem.startswith("kept apart: it shares ") and "MONDO:0000001" in alone.problem
    assert "one mondo id" in alone.problem
    # without the check the whole part is one cluster, as connected components say
    [whole] = id_clusters(nodes, VOCAB, one_per_entity=()).mergeable
    assert len(whole.members) == 5


def test_kept_apart_nodes_form_their_own_cluster_and_a_must_link_overrides() -> None:
    nodes = table(
        [
            ("mondo:0000001", "disease", ["doid:1"]),
            ("wd:Q1", "disease", ["doid:1", "mesh:D1"]),
            ("mondo:0000002", "disease", ["mesh:D1", "umls:C2"]),
            ("wd:Q2", "disease", ["umls:C2", "mesh:D1"]),
        ]
    )
    found = id_clusters(nodes, VOCAB)
    # mondo:2 and Q2 share two ids (the strongest pair), mondo:1 and Q1 one; Q1 and mondo:2 would chain them
    assert sorted(c.members for c in found.mergeable) == [
        ("mondo:0000001", "wd:Q1"),
        ("mondo:0000002", "wd:Q2"),
    ]
    assert found.refused == []
    curated = id_clusters(nodes, VOCAB, must_link=[("mondo:0000001", "mondo:0000002")])
    # the curator has the last word on the two MONDO ids; one entity still has one Wikidata item
    assert [c.members for c in curated.mergeable] == [("mondo:0000001", "mondo:0000002", "wd:Q2")]
    assert [c.members for c in curated.refused] == [("wd:Q1",)]


def test_splitting_keeps_every_node_and_no_cluster_holds_a_system_twice() -> None:
    rng = random.Random(11)
    rows = []
    for i in range(600):
        own = rng.choice(["mondo:%07d", "wd:Q%d", "kg:g/%d"]) % i
        refs = [f"doid:{rng.randrange(300)}" for _ in range(rng.choice([1, 1, 2]))]
        rows.append((own, "disease", refs))
    nodes = table(rows)
    found = id_clusters(nodes, VOCAB, max_size=10**6)
    unchecked = id_clusters(nodes, VOCAB, max_size=10**6, one_per_entity=())
    for cluster in found.mergeable:
        systems = [m.split(":")[0] for m in cluster.members if not m.startswith("kg:")]
        assert len(systems) == len(set(systems)), cluster.members
    # the pieces of the checked run cover exactly the parts of the unchecked one
    pieces = sorted(m for c in found.clusters for m in c.members)
    assert pieces == sorted(m for c in unchecked.clusters for m in c.members)
    assert all(len(c.members) == 1 and c.problem and c.problem.startswith("kept apart") for c in found.refused)
    assert len(found.refused) > 10 and len(found.mergeable) > len(unchecked.mergeable)
