"""The identity file: must-links, cannot-links, preferred ids and aliases, and its refusals."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from metakg.errors import InputDataError
from metakg.identity.curation import read_curation
from metakg.identity.resolve import resolve_graph, unresolve
from metakg.schemas.vocabulary import default_vocabulary
from tests.unit.test_identity_resolve import edges, graph, nodes

VOCAB = default_vocabulary()


def curation_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "identity.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def with_extracted() -> tuple[pl.DataFrame, pl.DataFrame]:
    g = graph()
    extracted = nodes([("kg:notes/alzheimer_s_disease", "Alzheimer's", "concept", [])], "notes")
    more = edges([("kg:notes/alzheimer_s_disease", "worsens_with", "wd:Q1066")], "notes")
    return pl.concat([g.nodes, extracted]), pl.concat([g.edges, more])


def test_must_link_joins_a_node_that_shares_no_identifier_and_says_so(tmp_path: Path) -> None:
    all_nodes, all_edges = with_extracted()
    curated = read_curation(
        curation_file(tmp_path, "must_link:\n  - [kg:notes/alzheimer_s_disease, 'MONDO:0004975']\n")
    )
    r = resolve_graph(all_nodes, all_edges, VOCAB, curation=curated)
    assert "kg:notes/alzheimer_s_disease" not in set(r.nodes["id"])
    moved = r.edges.filter(pl.col("rel") == "worsens_with").row(0, named=True)
    assert moved["src"] == "mondo:0004975"
    who = dict(zip(r.decisions["node"], r.decisions["decided_by"], strict=True))
    assert who["kg:notes/alzheimer_s_disease"] == "curation" and who["wd:Q11081"] == "identifier"


def test_a_must_link_of_types_that_cannot_be_one_entity_is_refused_naming_the_entry(tmp_path: Path) -> None:
    g = graph()
    curated = read_curation(curation_file(tmp_path, "must_link:\n  - [drugbank:DB01043, 'MONDO:0004975']\n"))
    r = resolve_graph(g.nodes, g.edges, VOCAB, curation=curated)
    assert {"drugbank:DB01043", "mondo:0004975"} <= set(r.nodes["id"])  # nothing merged into a drug-disease
    row = r.decisions.filter(pl.col("node") == "drugbank:DB01043").row(0, named=True)
    assert row["canonical"] is None and row["problem"] == (
        "incompatible types: must_link entry 1 of the identity file joins drugbank:DB01043 (drug) and "
        "mondo:0004975 (disease), which cannot be one entity"
    )


def test_cannot_link_keeps_a_cluster_apart_and_preferred_chooses_its_id(tmp_path: Path) -> None:
    g = graph()
    curated = read_curation(
        curation_file(tmp_path, "cannot_link:\n  - [wd:Q412364, drugbank:DB01043]\npreferred: [wd:Q11081]\n")
    )
    r = resolve_graph(g.nodes, g.edges, VOCAB, curation=curated)
    assert {"wd:Q412364", "drugbank:DB01043"} <= set(r.nodes["id"])
    apart = r.decisions.filter(pl.col("node") == "wd:Q412364").row(0, named=True)
    assert apart["canonical"] is None and "cannot be linked (identity file)" in apart["problem"]
    assert "wd:Q11081" in set(r.nodes["id"]) and "mondo:0004975" not in set(r.nodes["id"])


def test_aliases_are_added_and_removed_on_the_node_the_id_became_and_survive_a_split(tmp_path: Path) -> None:
    g = graph()
    curated = read_curation(
        curation_file(
            tmp_path,
            "aliases:\n  add: {'wd:Q11081': [AD]}\n  remove: {'mondo:0004975': [\"Alzheimer's disease\"]}\n",
        )
    )
    r = resolve_graph(g.nodes, g.edges, VOCAB, curation=curated)
    alz = r.nodes.filter(pl.col("id") == "mondo:0004975").row(0, named=True)
    assert "AD" in alz["aliases"] and "Alzheimer's disease" not in alz["aliases"]
    other = unresolve(r, VOCAB, ["drugbank:DB01043"])  # another cluster split: this one's aliases stay
    assert other.nodes.filter(pl.col("id") == "mondo:0004975")["aliases"].to_list() == [alz["aliases"]]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("must_link: [a, b]\n", "must_link entry 1 must be a pair"),
        ("must_link:\n  - [wd:Q1, wd:Q2, wd:Q3]\n", "must_link entry 1 must be a pair"),
        ("cannot_link:\n  - [wd:Q1, 'WD:q1']\n", "cannot_link entry 1 names wd:Q1 twice"),
        ("must_link:\n  - [wd:Q1, 7]\n", "must_link entry 1: a node id is text"),
        ("preferred: wd:Q1\n", "preferred must be a list"),
        ("aliases:\n  add: [x]\n", "aliases.add must map node ids"),
        ("merge_all: true\n", "unknown sections"),
        ("- a\n- b\n", "is a mapping"),
        ("must_link: [\n", "is not valid YAML"),
        (
            "must_link:\n  - [wd:Q1, wd:Q2]\n  - [wd:Q2, wd:Q3]\ncannot_link:\n  - [wd:Q3, wd:Q1]\n",
            r"cannot_link entry 1 \(wd:Q3, wd:Q1\) contradicts must_link",
        ),
        # issue 56, item 6: a section given twice once kept the last silently (a cannot-link was lost)
        (
            "cannot_link:\n  - [wd:Q1, wd:Q2]\npreferred: [wd:Q1]\ncannot_link:\n  - [wd:Q3, wd:Q4]\n",
            r"'cannot_link' is given twice \(lines 1 and 4\)",
        ),
        ("aliases:\n  add: {wd:Q1: [a], wd:Q1: [b]}\n", r"'wd:Q1' is given twice"),
        ('aliases:\n  add: {wd:Q1: ["bad\\0name"]}\n', "holds a control character"),
        ('aliases:\n  add: {wd:Q1: ["two\\nlines"]}\n', "holds a control character"),
    ],
)
def test_a_malformed_or_contradictory_identity_file_is_refused_naming_the_entry(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(InputDataError, match=says) as refused:
        read_curation(curation_file(tmp_path, text))
    assert "identity.yaml" in str(refused.value)


def test_two_preferred_ids_of_one_cluster_are_refused_naming_both(tmp_path: Path) -> None:
    """Issue 56, item 6: two preferred ids of one entity cannot both be its id (the first was kept silently)."""
    g = graph()
    curated = read_curation(curation_file(tmp_path, "preferred: [wd:Q11081, mondo:0004975]\n"))
    with pytest.raises(InputDataError, match="preferred names mondo:0004975 and wd:Q11081, which are one entity"):
        resolve_graph(g.nodes, g.edges, VOCAB, curation=curated)


def test_an_identity_file_naming_unknown_ids_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    from metakg import api
    from metakg.config import Settings
    from metakg.schemas.bundle import write_bundle

    g = graph()
    write_bundle(tmp_path / "in", g)
    path = curation_file(tmp_path, "must_link:\n  - [wd:Q11081, 'mondo:9999999']\n")
    with pytest.raises(InputDataError, match="must_link entry 1 names mondo:9999999, which no node"):
        api.resolve([tmp_path / "in"], tmp_path / "out", Settings(), identity_file=path)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
