"""Resolution by identifiers: PrimeKG-format and Wikidata-shaped tables become one graph, every decision is
recorded, and undoing it gives back the inputs exactly."""

from __future__ import annotations

import polars as pl
import pytest

from metakg.identity.clusters import Cluster
from metakg.identity.resolve import SAME_AS, canonical_id, resolve_graph, unresolve
from metakg.schemas.bundle import Bundle, merge_bundles
from metakg.schemas.tables import conform_edges, conform_nodes
from metakg.schemas.vocabulary import default_vocabulary

VOCAB = default_vocabulary()


def nodes(rows: list[tuple[str, str, str, list[str]]], source: str) -> pl.DataFrame:
    return conform_nodes(
        pl.DataFrame(
            {
                "id": [r[0] for r in rows],
                "name": [r[1] for r in rows],
                "type": [r[2] for r in rows],
                "source": source,
                "xrefs": [r[3] for r in rows],
            },
            schema_overrides={"xrefs": pl.List(pl.String)},
        )
    )


def edges(rows: list[tuple[str, str, str]], source: str) -> pl.DataFrame:
    return conform_edges(
        pl.DataFrame(
            {
                "src": [r[0] for r in rows],
                "rel": [r[1] for r in rows],
                "dst": [r[2] for r in rows],
                "source": source,
                "confidence": 0.9,
                "record_ids": [[f"{source}:{i}"] for i in range(len(rows))],
            }
        )
    )


def graph() -> Bundle:
    primekg = Bundle(
        nodes(
            [
                ("mondo:0004975", "Alzheimer disease", "disease", ["primekg.index:1"]),
                ("drugbank:DB01043", "Memantine", "drug", ["primekg.index:2"]),
                ("ncbigene:351", "APP", "gene_protein", ["primekg.index:3"]),
            ],
            "primekg",
        ),
        edges(
            [("drugbank:DB01043", "indication", "mondo:0004975"), ("ncbigene:351", "disease_protein", "mondo:0004975")],
            "primekg",
        ),
    )
    wikidata = Bundle(
        nodes(
            [
                ("wd:Q11081", "Alzheimer's disease", "disease", ["MONDO:0004975", "mesh:D000544", "DOID:10652"]),
                ("wd:Q412364", "memantine", "drug", ["drugbank:DB01043"]),
                ("wd:Q1066", "memory loss", "phenotype", []),
                ("wd:Q12140", "medication", "entity", []),
            ],
            "wikidata",
        ),
        edges(
            [
                ("wd:Q11081", "symptoms_and_signs", "wd:Q1066"),
                ("wd:Q412364", "instance_of", "wd:Q12140"),
                ("wd:Q412364", "drug_or_therapy_used_for_treatment", "wd:Q11081"),  # also PrimeKG's indication
            ],
            "wikidata",
        ),
    )
    return merge_bundles([primekg, wikidata])


def test_one_node_per_shared_entity_with_every_id_and_name_kept() -> None:
    g = graph()
    r = resolve_graph(g.nodes, g.edges, VOCAB)
    assert r.nodes.height == g.nodes.height - 2  # Alzheimer's and memantine: one node each
    ids = set(r.nodes["id"])
    assert {"mondo:0004975", "drugbank:DB01043"} <= ids and not {"wd:Q11081", "wd:Q412364"} & ids
    alz = r.nodes.filter(pl.col("id") == "mondo:0004975").row(0, named=True)
    assert alz["name"] == "Alzheimer disease" and alz["type"] == "disease" and alz["source"] == "primekg"
    assert {"wd:Q11081", "mesh:D000544", "doid:10652"} <= set(alz["xrefs"]) and "mondo:0004975" not in alz["xrefs"]
    assert "Alzheimer's disease" in alz["aliases"]
    assert r.edges.height == g.edges.height  # every edge kept, rewired
    moved = r.edges.filter(pl.col("rel") == "symptoms_and_signs").row(0, named=True)
    assert (moved["src"], moved["dst"]) == ("mondo:0004975", "wd:Q1066")
    treat = r.edges.filter(pl.col("src") == "drugbank:DB01043")  # both sources' statements on one pair of nodes
    assert set(treat["rel"]) == {"indication", "drug_or_therapy_used_for_treatment", "instance_of"}
    assert set(r.decisions["node"]) == {"mondo:0004975", "wd:Q11081", "drugbank:DB01043", "wd:Q412364"}
    assert set(r.decisions["decided_by"]) == {"identifier"} and r.decisions["problem"].null_count() == 4
    row = r.decisions.filter(pl.col("node") == "wd:Q11081").row(0, named=True)
    assert row["canonical"] == "mondo:0004975" and row["evidence"] == ["mondo:0004975"]


def test_a_path_crosses_the_sources_after_the_merge() -> None:
    from metakg.loaders.embedded_store import EmbeddedStore

    g = graph()
    before = EmbeddedStore(g.nodes, g.edges)
    assert before.shortest_paths("ncbigene:351", "wd:Q1066", k=1, max_hops=4) == []
    r = resolve_graph(g.nodes, g.edges, VOCAB)
    [path] = EmbeddedStore(r.nodes, r.edges).shortest_paths("ncbigene:351", "wd:Q1066", k=1, max_hops=4)
    assert list(path.nodes) == ["ncbigene:351", "mondo:0004975", "wd:Q1066"]  # a PrimeKG edge, then a Wikidata one


def frame_rows(frame: pl.DataFrame) -> list[tuple[object, ...]]:
    return sorted(frame.rows(), key=repr)


def test_undoing_gives_back_the_inputs_exactly_and_the_same_inputs_give_the_same_graph() -> None:
    g = graph()
    r = resolve_graph(g.nodes, g.edges, VOCAB)
    again = resolve_graph(g.nodes, g.edges, VOCAB)
    assert r.nodes.equals(again.nodes) and r.edges.equals(again.edges) and r.decisions.equals(again.decisions)
    back = unresolve(r, VOCAB)
    assert frame_rows(back.nodes) == frame_rows(g.nodes)
    assert frame_rows(back.edges) == frame_rows(conform_edges(g.edges))
    assert back.decisions["canonical"].null_count() == back.decisions.height  # every cluster now "split"


def test_splitting_one_cluster_gives_what_resolving_without_it_gives() -> None:
    g = graph()
    r = resolve_graph(g.nodes, g.edges, VOCAB)
    one = unresolve(r, VOCAB, ["mondo:0004975"])
    assert {"mondo:0004975", "wd:Q11081"} <= set(one.nodes["id"]) and "wd:Q412364" not in set(one.nodes["id"])
    # resolving the graph where the two Alzheimer's nodes share nothing: the same nodes and edges
    unlinked = g.nodes.with_columns(
        pl.when(pl.col("id") == "wd:Q11081").then(pl.lit(["mesh:D000544"])).otherwise(pl.col("xrefs")).alias("xrefs")
    )
    alone = resolve_graph(unlinked, g.edges, VOCAB)
    assert frame_rows(one.edges) == frame_rows(alone.edges)
    assert one.nodes.height == alone.nodes.height
    split = one.decisions.filter(pl.col("cluster") == "mondo:0004975")
    assert set(split["problem"]) == {"split"} and split["canonical"].null_count() == 2


def test_link_mode_keeps_every_node_and_adds_same_as_edges_that_undo_removes() -> None:
    g = graph()
    r = resolve_graph(g.nodes, g.edges, VOCAB, mode="link")
    assert r.nodes.height == g.nodes.height
    links = r.edges.filter(pl.col("rel") == SAME_AS)
    assert sorted(zip(links["src"], links["dst"], strict=True)) == [
        ("wd:Q11081", "mondo:0004975"),
        ("wd:Q412364", "drugbank:DB01043"),
    ]
    back = unresolve(r, VOCAB)
    assert frame_rows(back.edges) == frame_rows(conform_edges(g.edges))


@pytest.mark.parametrize(
    ("members", "types", "chosen"),
    [
        (("doid:10652", "mesh:D000544", "mondo:0004975", "wd:Q11081"), ("disease",), "mondo:0004975"),
        (("doid:10652", "wd:Q11081"), ("disease",), "doid:10652"),
        (("chebi:6801", "drugbank:DB01043", "wd:Q412364"), ("drug",), "drugbank:DB01043"),
        (("hgnc:620", "ncbigene:351"), ("gene_protein",), "ncbigene:351"),
        (("kg:a/x", "wd:Q1"), ("concept",), "wd:Q1"),
        (("foo:2", "foo:1"), ("entity",), "foo:1"),  # no prefix listed: the smallest id
        (("wd:Q1476965", "MONDO:0018106"), ("disease", "entity"), "MONDO:0018106"),  # as a source wrote it
        (("wd:Q18", "DrugBank:DB01043"), ("drug",), "DrugBank:DB01043"),
    ],
)
def test_the_canonical_id_follows_the_priority_of_the_clusters_type(
    members: tuple[str, ...], types: tuple[str, ...], chosen: str
) -> None:
    from metakg.identity.resolve import DEFAULT_PRIORITY

    assert canonical_id(Cluster(members, types, ()), VOCAB, DEFAULT_PRIORITY) == chosen


def extracted() -> Bundle:
    return Bundle(
        nodes(
            [
                ("kg:alzheimers_disease", "Alzheimers disease", "disease", []),
                ("kg:memantine_hydrochloride", "memantine", "disease", []),  # a wrong type: stays apart
                ("kg:memory_loss", "Memory loss", "concept", []),
            ],
            "extracted",
        ),
        edges([("kg:memory_loss", "associated_with", "kg:alzheimers_disease")], "extracted"),
    )


def test_names_join_nodes_of_other_sources_with_compatible_types() -> None:
    from metakg.identity.clusters import may_be_one
    from metakg.identity.names import name_links

    g = merge_bundles([graph(), extracted()])
    links = name_links(g.nodes, may_be_one(g.nodes, VOCAB), "fuzzy", 0.9)
    pairs = {(link.a, link.b) for link in links}
    assert ("kg:alzheimers_disease", "wd:Q11081") in pairs  # a typo apart
    assert ("kg:memory_loss", "wd:Q1066") in pairs  # concept fits any type
    assert not any("memantine_hydrochloride" in p for pair in pairs for p in pair)  # a drug is no disease
    r = resolve_graph(g.nodes, g.edges, VOCAB, names=links)
    alz = r.decisions.filter(pl.col("canonical") == "mondo:0004975")
    by = dict(zip(alz["node"], alz["decided_by"], strict=True))
    assert by == {"mondo:0004975": "identifier", "wd:Q11081": "identifier", "kg:alzheimers_disease": "name"}
    row = alz.filter(pl.col("node") == "kg:alzheimers_disease").row(0, named=True)
    assert row["scorer"] == "fuzzy" and 0.9 <= row["score"] < 1.0
    assert row["evidence"] == ["mondo:0004975"]  # no name key among the identifiers
    # the extracted edge now joins the Wikidata phenotype and the PrimeKG disease
    moved = r.edges.filter(pl.col("rel") == "associated_with").row(0, named=True)
    assert (moved["src"], moved["dst"]) == ("wd:Q1066", "mondo:0004975")
    # the same inputs give the same graph; undoing gives the inputs back
    again = resolve_graph(g.nodes, g.edges, VOCAB, names=links)
    assert frame_rows(again.nodes) == frame_rows(r.nodes) and frame_rows(again.edges) == frame_rows(r.edges)
    undone = unresolve(r, VOCAB)
    assert frame_rows(undone.nodes) == frame_rows(conform_nodes(g.nodes))


def test_names_keep_a_taxon_named_like_a_disease_apart() -> None:
    # a genus named like the disease it causes, imported untyped: one name, two entities
    from metakg.identity.clusters import compatible_types, effective_types, may_be_one
    from metakg.identity.names import name_links

    taxon = Bundle(nodes([("ncbitaxon:000", "Alzheimer disease", "entity", [])], "taxa"), edges([], "taxa"))
    g = merge_bundles([graph(), taxon])
    kind = dict(zip(g.nodes["id"], g.nodes["type"], strict=True))
    written = lambda a, b: compatible_types([kind[a], kind[b]], VOCAB)  # noqa: E731
    untyped = {(link.a, link.b) for link in name_links(g.nodes, written, "exact", 1.0)}
    assert ("mondo:0004975", "ncbitaxon:000") in untyped  # by its written type alone: entity fits all
    typed = name_links(g.nodes, may_be_one(g.nodes, VOCAB), "exact", 1.0)
    assert not any("ncbitaxon:000" in (link.a, link.b) for link in typed)
    assert effective_types(g.nodes, VOCAB)[g.nodes["id"].to_list().index("wd:Q12140")] == "entity"


def test_names_keep_another_organisms_pathway_apart() -> None:
    # Reactome's cattle copy of a pathway is named like the process MeSH names for every organism, and
    # like the human pathway: one name, three entities for biomappings' curators; the human one is MeSH's
    from metakg.identity.clusters import may_be_one
    from metakg.identity.names import name_links

    pathways = Bundle(
        nodes(
            [
                ("reactome:R-BTA-1266738", "Developmental Biology", "entity", []),
                ("reactome:R-HSA-1500620", "Meiosis", "entity", []),
                ("reactome:R-CFA-1500620", "Meiosis", "entity", []),
            ],
            "reactome",
        ),
        edges([], "reactome"),
    )
    mesh = Bundle(
        nodes(
            [("mesh:D015509", "Developmental Biology", "entity", []), ("mesh:D008540", "Meiosis", "entity", [])],
            "mesh",
        ),
        edges([], "mesh"),
    )
    g = merge_bundles([pathways, mesh])
    pairs = {(link.a, link.b) for link in name_links(g.nodes, may_be_one(g.nodes, VOCAB), "exact", 1.0)}
    assert pairs == {("mesh:D008540", "reactome:R-HSA-1500620")}
    everything = {(link.a, link.b) for link in name_links(g.nodes, lambda a, b: True, "exact", 1.0)}
    assert ("mesh:D015509", "reactome:R-BTA-1266738") in everything  # names alone would join them
    # a node whose xrefs name the cattle pathway is about cattle too: kept apart from MeSH's term
    item = Bundle(nodes([("wd:Q1", "Developmental Biology", "entity", ["REACT:R-BTA-1266738"])], "wd"), edges([], "wd"))
    h = merge_bundles([mesh, item])
    assert not name_links(h.nodes, may_be_one(h.nodes, VOCAB), "exact", 1.0)
    assert name_links(h.nodes, lambda a, b: True, "exact", 1.0)


def test_a_cannot_link_keeps_a_name_pair_apart() -> None:
    from metakg.identity.clusters import may_be_one
    from metakg.identity.names import name_links

    g = merge_bundles([graph(), extracted()])
    apart = [("kg:memory_loss", "wd:Q1066")]
    links = name_links(g.nodes, may_be_one(g.nodes, VOCAB), "fuzzy", 0.9, apart=apart)
    assert ("kg:memory_loss", "wd:Q1066") not in {(link.a, link.b) for link in links}


def test_two_writings_of_one_id_are_one_entity_in_its_one_form() -> None:
    """Issue 56, item 0: ids that differ only in how they are written (``DrugBank:DB00945`` and
    ``drugbank:DB00945``, ``MONDO:0005027`` and ``mondo:0005027``) are one id, not two ids of one system: their
    nodes join, with a Wikidata item whose xrefs name it; the merged node has the one form, the written form
    stays an alias, and undoing gives the inputs back."""
    written = merge_bundles(
        [
            Bundle(nodes([("DrugBank:DB00945", "aspirin", "drug", []), ("MONDO:0005027", "epilepsy", "disease", [])],
                         "mapping"), edges([("DrugBank:DB00945", "treats", "MONDO:0005027")], "mapping")),
            Bundle(nodes([("drugbank:DB00945", "Aspirin", "drug", []), ("mondo:0005027", "Epilepsy", "disease", [])],
                         "primekg"), edges([], "primekg")),
            Bundle(nodes([("wd:Q18216", "acetylsalicylic acid", "drug", ["DRUGBANK:DB00945"])], "wikidata"),
                   edges([], "wikidata")),
        ]
    )  # fmt: skip
    r = resolve_graph(written.nodes, written.edges, VOCAB)
    assert r.nodes.height == 2 and set(r.nodes["id"]) == {"drugbank:DB00945", "mondo:0005027"}
    aspirin = r.nodes.filter(pl.col("id") == "drugbank:DB00945").row(0, named=True)
    assert aspirin["name"] == "Aspirin"  # the member written in the one form gives the name
    assert {"aspirin", "acetylsalicylic acid", "DrugBank:DB00945"} <= set(aspirin["aliases"])
    assert aspirin["xrefs"] == ["wd:Q18216"]
    assert r.edges.select("src", "dst").row(0) == ("drugbank:DB00945", "mondo:0005027")
    assert r.decisions["problem"].null_count() == r.decisions.height == 5
    assert set(r.decisions["canonical"]) == {"drugbank:DB00945", "mondo:0005027"}
    back = unresolve(r, VOCAB)
    assert frame_rows(back.nodes) == frame_rows(written.nodes)


def test_two_ids_of_one_system_are_still_cut_and_the_cut_is_recorded() -> None:
    """Two different MONDO ids never become one entity, even through a shared xref; when every piece of the
    cut part still has two nodes (no node is left alone), the decision table says the part was cut, and why."""
    g = merge_bundles(
        [
            Bundle(nodes([("mondo:0000001", "a", "disease", ["mesh:D1"]),
                          ("MONDO:0000002", "b", "disease", ["mesh:D1"])], "x"), edges([], "x")),
            Bundle(nodes([("wd:Q1", "a", "disease", ["mondo:0000001"]), ("wd:Q2", "b", "disease", ["MONDO:0000002"])],
                         "y"), edges([], "y")),
        ]
    )  # fmt: skip
    r = resolve_graph(g.nodes, g.edges, VOCAB)
    assert set(r.nodes["id"]) == {"mondo:0000001", "mondo:0000002"}
    cut = r.decisions.filter(pl.col("cut").is_not_null())
    assert cut.height == 4 and r.decisions["problem"].null_count() == 4
    assert "one entity has one mondo id (mondo:0000001, mondo:0000002)" in cut["cut"][0]
