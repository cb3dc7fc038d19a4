"""Entity resolution within a run and linking to an existing bundle (real spaCy lemma table, real embedder)."""

from __future__ import annotations

import polars as pl

from metakg.extractors.resolution import LinkTarget, resolve_mentions
from metakg.identity.names import LinkRule
from metakg.llm.embedder import OnnxEmbedder
from metakg.schemas.tables import conform_nodes
from metakg.text_processing import lemma_key


def test_lemma_key_lemmatises_the_head_word_only() -> None:
    assert lemma_key("kidney stones") == "kidney stone"
    assert lemma_key("mice") == "mouse"
    assert lemma_key("running shoes") == "running shoe"  # the modifier keeps its form
    assert lemma_key("diabetes") == "diabetes"
    assert lemma_key("") == ""


def test_exact_and_lemma_grouping_without_embeddings() -> None:
    res = resolve_mentions(["The Dogs", "dogs", "dog", "cat", "Cats!", "mouse", "mice"], "t")
    ids = res.ids
    assert ids["The Dogs"] == ids["dogs"] == ids["dog"] == "kg:t/the_dogs"
    assert ids["cat"] == ids["Cats!"] != ids["dog"]
    assert ids["mouse"] == ids["mice"]
    assert res.merged == {"exact": 1, "lemma": 3}
    assert res.groups == 3
    nodes = res.nodes.sort("id")
    assert nodes["id"].to_list() == ["kg:t/cat", "kg:t/mouse", "kg:t/the_dogs"]
    dog = nodes.filter(pl.col("id") == "kg:t/the_dogs").row(0, named=True)
    assert dog["name"] == "The Dogs" and dog["aliases"] == ["dogs", "dog"]


def test_embedding_similarity_merges_synonyms_above_the_threshold(minilm: OnnxEmbedder) -> None:
    mentions = ["fridge", "refrigerator", "cat", "dog", "heart attack"]
    res = resolve_mentions(mentions, "t", embedder=minilm, threshold=0.9)
    assert res.ids["refrigerator"] == res.ids["fridge"]
    assert len({res.ids["cat"], res.ids["dog"], res.ids["heart attack"], res.ids["fridge"]}) == 4
    assert res.merged == {"embedding": 1}
    # a threshold above every pair's similarity merges nothing
    strict = resolve_mentions(mentions, "t", embedder=minilm, threshold=0.999)
    assert len(set(strict.ids.values())) == 5


def _target() -> pl.DataFrame:
    return conform_nodes(
        pl.DataFrame(
            {
                "id": ["mondo:0005148", "drugbank:DB00945", "ncbigene:1636", "mondo:0004975"],
                "name": ["type 2 diabetes mellitus", "Aspirin", "ACE", "Alzheimer disease"],
                "type": ["disease", "drug", "gene", "disease"],
                "source": ["primekg"] * 4,
                "aliases": [["T2D", "type II diabetes"], ["acetylsalicylic acid"], [], []],
            }
        )
    )


def test_linking_takes_canonical_ids_and_carries_the_target_rows() -> None:
    target = LinkTarget.from_nodes(_target())
    mentions = ["aspirin", "T2D", "Type II Diabetes", "headache", "Alzheimer diseases"]
    res = resolve_mentions(mentions, "med", target=target)
    assert res.ids["aspirin"] == "drugbank:DB00945"  # exact, case folded
    assert res.ids["T2D"] == res.ids["Type II Diabetes"] == "mondo:0005148"  # an alias
    assert res.ids["Alzheimer diseases"] == "mondo:0004975"  # lemma
    assert res.ids["headache"] == "kg:med/headache"  # no match: a new node
    assert res.linked == {"exact": 3, "lemma": 1}  # groups: aspirin, T2D, Type II Diabetes; Alzheimer
    rows = {r["id"]: r for r in res.nodes.iter_rows(named=True)}
    assert rows["drugbank:DB00945"]["type"] == "drug" and rows["drugbank:DB00945"]["source"] == "primekg"
    # the surface forms seen become aliases of the canonical node; its name is kept
    assert rows["drugbank:DB00945"]["name"] == "Aspirin"
    assert "aspirin" in rows["drugbank:DB00945"]["aliases"]
    assert set(rows["mondo:0005148"]["aliases"]) >= {"T2D", "type II diabetes", "Type II Diabetes"}
    assert rows["kg:med/headache"]["type"] == "concept"


def test_linking_by_embedding_similarity(minilm: OnnxEmbedder) -> None:
    nodes = _target()
    vectors = minilm.embed(nodes["name"].to_list())
    target = LinkTarget.from_nodes(nodes, vectors, nodes["id"].to_list())
    res = resolve_mentions(["type 2 diabetes", "banana"], "med", embedder=minilm, link=LinkRule(0.85), target=target)
    assert res.ids["type 2 diabetes"] == "mondo:0005148"
    assert res.ids["banana"] == "kg:med/banana"
    assert res.linked == {"embedding": 1}


def test_a_link_needs_a_margin_over_the_next_target_entity(minilm: OnnxEmbedder) -> None:
    nodes = conform_nodes(
        pl.DataFrame(
            {
                "id": ["mondo:1", "mondo:2", "mondo:3"],
                "name": ["type 1 diabetes mellitus", "type 2 diabetes mellitus", "asthma"],
                "type": ["disease"] * 3,
                "source": ["t"] * 3,
                "aliases": [["juvenile diabetes"], [], []],
            }
        )
    )
    names = ["type 1 diabetes mellitus", "juvenile diabetes", "type 2 diabetes mellitus", "asthma"]
    target = LinkTarget.from_nodes(nodes, minilm.embed(names), ["mondo:1", "mondo:1", "mondo:2", "mondo:3"])
    vague = minilm.embed(["diabetes mellitus"])[0]
    sims = [float(vague @ v) for v in minilm.embed(names)]
    type_1, type_2 = max(sims[:2]), sims[2]
    # "diabetes mellitus" is about as close to type 1 as to type 2: linked without a margin, not with one
    loose = resolve_mentions(["diabetes mellitus"], "med", embedder=minilm, link=LinkRule(0.5), target=target)
    assert loose.ids["diabetes mellitus"] in {"mondo:1", "mondo:2"}
    margin = abs(type_1 - type_2) + 0.05
    strict = LinkRule(0.5, margin)
    kept = resolve_mentions(["diabetes mellitus", "asthmatic"], "med", embedder=minilm, link=strict, target=target)
    assert kept.ids["diabetes mellitus"] == "kg:med/diabetes_mellitus"
    # one entity's two names are not each other's runner-up: asthma's only rival is another entity
    assert kept.ids["asthmatic"] == "mondo:3"


def test_a_name_wins_over_another_nodes_alias_with_the_same_key() -> None:
    nodes = conform_nodes(
        pl.DataFrame(
            {
                "id": ["x:1", "x:2"],
                "name": ["angiotensin converting enzyme", "ACE"],
                "type": ["gene_protein", "gene_protein"],
                "source": ["t", "t"],
                "aliases": [["ace"], []],
            }
        )
    )
    target = LinkTarget.from_nodes(nodes)
    assert target.by_key["ace"] == "x:2"
    assert resolve_mentions(["Ace"], "t", target=target).ids["Ace"] == "x:2"


def test_keys_without_blanks_group_and_link_like_the_identity_cascade() -> None:
    res = resolve_mentions(["CAL-51", "cal51", "HeLa", "He La cells"], "t")
    assert res.ids["CAL-51"] == res.ids["cal51"] and res.merged == {"compact": 1}
    target = LinkTarget.from_nodes(
        conform_nodes(
            pl.DataFrame(
                {"id": ["cellosaurus:CVCL_1110"], "name": ["CAL51"], "type": ["cell_line"], "source": ["cellosaurus"]}
            )
        )
    )
    linked = resolve_mentions(["CAL-51", "HeLa"], "t", target=target)
    assert linked.ids["CAL-51"] == "cellosaurus:CVCL_1110" and linked.linked == {"compact": 1}
    assert linked.ids["HeLa"] == "kg:t/hela"


def test_an_identity_file_has_the_last_word_at_extraction() -> None:
    from metakg.identity.curation import Curation

    target = LinkTarget.from_nodes(
        conform_nodes(
            pl.DataFrame(
                {
                    "id": ["wd:Q11081", "wd:Q1066"],
                    "name": ["Alzheimer disease", "memory loss"],
                    "type": ["disease", "phenotype"],
                    "source": ["wikidata", "wikidata"],
                }
            )
        )
    )
    mentions = ["AD", "Alzheimer disease", "forgetfulness", "memory loss", "amnesia"]
    plain = resolve_mentions(mentions, "t", target=target)
    assert plain.ids["Alzheimer disease"] == "wd:Q11081" and plain.ids["AD"] == "kg:t/ad"
    curation = Curation(
        must_link=[("kg:t/ad", "wd:Q11081"), ("kg:t/forgetfulness", "kg:t/amnesia"), ("kg:other/x", "wd:Q1")],
        cannot_link=[("kg:t/memory_loss", "wd:Q1066")],
        add_aliases={"kg:t/forgetfulness": ["absent-mindedness"]},
    )
    res = resolve_mentions(mentions, "t", target=target, curation=curation)
    assert res.ids["AD"] == res.ids["Alzheimer disease"] == "wd:Q11081"  # linked by the curator
    assert res.ids["memory loss"] == "kg:t/memory_loss"  # its exact link undone
    assert res.ids["forgetfulness"] == res.ids["amnesia"] == "kg:t/forgetfulness"  # two groups joined
    assert res.linked == {"exact": 1, "curation": 1, "kept_apart": 1} and res.merged == {"curation": 1}
    node = res.nodes.filter(pl.col("id") == "kg:t/forgetfulness").row(0, named=True)
    assert node["aliases"] == ["amnesia", "absent-mindedness"]
    assert res.nodes.filter(pl.col("id") == "wd:Q1066").is_empty()  # no longer carried
