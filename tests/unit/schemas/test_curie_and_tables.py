"""CURIE helpers, edge ids, name and relation normalisation."""

from __future__ import annotations

import re

import polars as pl
import pytest

from metakg.errors import BundleError, UsageError
from metakg.schemas import curie
from metakg.schemas.tables import (
    conform_edges,
    conform_nodes,
    edge_id,
    edge_ids,
    match_key,
    normalise_name_expr,
    normalise_relation_expr,
)


@pytest.mark.parametrize("value", ["drugbank:DB00945", "wd:Q42", "mondo:0005148", "kg:csqa/road", "kg:x/東京"])
def test_valid_curies(value: str) -> None:
    assert curie.is_curie(value)


@pytest.mark.parametrize("value", ["", "DB00945", ":x", "1abc:x", "kg:has space", "kg:", "kg:tab\there"])
def test_invalid_curies(value: str) -> None:
    assert not curie.is_curie(value)
    with pytest.raises(UsageError):
        curie.split_curie(value)


def test_expand_uses_registry_and_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert curie.expand("wd:Q42") == "http://www.wikidata.org/entity/Q42"
    assert curie.expand("mondo:0005148") == "http://purl.obolibrary.org/obo/MONDO_0005148"
    assert curie.expand("zz:a<b>") == "https://w3id.org/metakg/prefix/zz/a%3Cb%3E"
    monkeypatch.setattr(curie, "_PREFIXES", dict(curie._PREFIXES))  # registered for this test only
    curie._table.cache_clear()
    curie.register_prefix("myorg", "https://example.org/ids/")
    assert curie.expand("myorg:558") == "https://example.org/ids/558"
    assert curie.normalise_curie("https://example.org/ids/558") == "myorg:558"  # its namespace is known now
    with pytest.raises(UsageError):
        curie.register_prefix("bad prefix", "x")
    monkeypatch.undo()
    curie._table.cache_clear()


def test_slug_matches_vectorised_slug() -> None:
    names = ["Road", "New  York City", "a/b?c#d", "100%", '"quoted"', "東京 タワー", "Ｆｕｌｌwidth"]
    vectorised = pl.select(curie.slug_expr(pl.Series(names))).to_series().to_list()
    assert vectorised == [curie.slug(n) for n in names]
    assert curie.slug("a/b?c#d") == "a%2Fb%3Fc%23d"
    assert curie.slug("100%") == "100%25"
    assert curie.slug("Ｆｕｌｌwidth") == "fullwidth"


def test_dataset_names_are_checked() -> None:
    assert curie.check_dataset_name("commonsenseqa") == "commonsenseqa"
    with pytest.raises(UsageError, match="dataset name"):
        curie.check_dataset_name("has space/slash")


def test_edge_id_is_stable_and_vectorised() -> None:
    one = edge_id("kg:a/x", "is_a", "kg:a/y", "src")
    assert one == edge_id("kg:a/x", "is_a", "kg:a/y", "src")
    assert one != edge_id("kg:a/y", "is_a", "kg:a/x", "src")
    assert one != edge_id("kg:a/x", "is_a", "kg:a/y", "other")
    frame = pl.DataFrame({"src": ["kg:a/x"], "rel": ["is_a"], "dst": ["kg:a/y"], "source": ["src"]})
    assert edge_ids(frame).to_list() == [one]
    assert re.fullmatch(r"e:[0-9a-f]{16}", one)


def test_normalisation() -> None:
    names = pl.select(normalise_name_expr(pl.Series(["  New \t York  ", "e\u0301"]))).to_series().to_list()
    assert names == ["New York", "\u00e9"]
    rels = pl.select(normalise_relation_expr(pl.Series(["Is Part Of", "has-function!", "是 的", "!!!"])))
    assert rels.to_series().to_list() == ["is_part_of", "has_function", "是_的", ""]
    assert match_key("The  Road!") == "road" == match_key("road")


def test_conform_fills_optional_columns_and_requires_the_rest() -> None:
    nodes = conform_nodes(pl.DataFrame({"id": ["kg:a/x"], "name": ["x"], "type": ["concept"], "source": ["s"]}))
    assert nodes["aliases"].to_list() == [[]]
    edges = conform_edges(pl.DataFrame({"src": ["kg:a/x"], "dst": ["kg:a/y"], "rel": ["r"], "source": ["s"]}))
    assert edges["count"].to_list() == [1]
    assert edges["id"].to_list() == [edge_id("kg:a/x", "r", "kg:a/y", "s")]
    assert edges["display"].to_list() == ["r"]
    with pytest.raises(BundleError, match="lacks required column"):
        conform_nodes(pl.DataFrame({"id": ["x"]}))


def test_edge_ids_never_change() -> None:
    # BLAKE3("kg:a/x\x1fis_a\x1fkg:a/y\x1fsrc")[:16]: bundles and databases keep these ids, so the value is pinned
    assert edge_id("kg:a/x", "is_a", "kg:a/y", "src") == "e:06793f34219811b6"


@pytest.mark.parametrize(
    ("written", "one_form"),
    [
        ("mondo:0004975", "mondo:0004975"),
        ("MONDO:0004975", "mondo:0004975"),
        ("MONDO:4975", "mondo:0004975"),  # zero-padded as the prefix says
        ("mondo:MONDO:0004975", "mondo:0004975"),  # the prefix repeated in the local id
        ("MONDO_0004975", "mondo:0004975"),  # OBO style, as ClinGen writes it
        ("http://purl.obolibrary.org/obo/MONDO_0004975", "mondo:0004975"),
        ("https://purl.obolibrary.org/obo/MONDO_0004975", "mondo:0004975"),
        ("DOID:2377", "doid:2377"),
        ("doid:DOID:2377", "doid:2377"),  # Wikidata's P699 value behind the doid prefix
        ("http://www.wikidata.org/entity/Q11081", "wd:Q11081"),
        ("https://www.wikidata.org/wiki/Q11081", "wd:Q11081"),
        ("Wikidata:q11081", "wd:Q11081"),
        ("MESH:d000544", "mesh:D000544"),
        ("MeSH_ID:D000544", "mesh:D000544"),
        ("http://id.nlm.nih.gov/mesh/D000544", "mesh:D000544"),
        ("UMLS:c0002395", "umls:C0002395"),
        ("DrugBank:db00945", "drugbank:DB00945"),
        ("https://go.drugbank.com/drugs/DB00945", "drugbank:DB00945"),
        ("NCBIGene:1234", "ncbigene:1234"),
        ("NCBI Gene:1234", "ncbigene:1234"),
        ("https://identifiers.org/ncbigene:1234", "ncbigene:1234"),
        ("HGNC:23336", "hgnc:23336"),
        ("ORPHA:558", "orphanet:558"),
        ("CHEBI:15365", "chebi:15365"),
        ("kg:csqa/car", "kg:csqa/car"),
        ("FOO:bar", "foo:bar"),  # a prefix nobody listed: lower case, the local id untouched
        ("  mesh:D000544 ", "mesh:D000544"),
    ],
)
def test_one_form_for_every_way_a_source_writes_an_id(written: str, one_form: str) -> None:
    assert curie.normalise_curie(written) == one_form
    assert curie.normalise_curie(one_form) == one_form  # the one form is a fixed point


@pytest.mark.parametrize("value", ["", "not an id", "D000544", "https://example.org/x", "mesh:", "a b:c", "x:y z"])
def test_what_is_no_identifier_gives_none(value: str) -> None:
    assert curie.normalise_curie(value) is None


def test_a_bare_local_id_takes_the_prefix_of_its_column() -> None:
    assert curie.normalise_curie("D000544", default_prefix="MeSH") == "mesh:D000544"
    assert curie.normalise_curie("MONDO:0004975", default_prefix="mesh") == "mondo:0004975"  # its own prefix wins


def test_id_lists_keep_their_order_lose_their_repeats_and_keep_what_is_no_id() -> None:
    column = pl.Series("xrefs", [["MONDO:4975", "mondo:0004975", "DOID:10652"], [], None, ["free text"]])
    assert curie.normalise_id_lists(column).to_list() == [
        ["mondo:0004975", "doid:10652"],
        [],
        None,
        ["free text"],
    ]


def test_primekg_sources_are_spellings_of_the_vocabularys_prefixes() -> None:
    from metakg.ingest.primekg import SOURCE_PREFIXES

    assert SOURCE_PREFIXES["NCBI"] == ("ncbigene", 0) and SOURCE_PREFIXES["HPO"] == ("hp", 7)
    assert SOURCE_PREFIXES["MONDO_grouped"] == ("mondo.grouped", 0)
    for prefix, _pad in SOURCE_PREFIXES.values():  # and every one expands to its own namespace
        assert curie.expand(f"{prefix}:1").startswith(curie.PREFIXES[prefix])


def test_a_node_is_found_by_its_id_written_any_way() -> None:
    from metakg.api.stores import resolve_node
    from metakg.loaders.embedded_store import EmbeddedStore

    nodes = conform_nodes(
        pl.DataFrame({"id": ["mondo:0004975"], "name": ["Alzheimer disease"], "type": "disease", "source": "t"})
    )
    store = EmbeddedStore(nodes, conform_edges(pl.DataFrame({"src": [], "rel": [], "dst": [], "source": []})))
    for written in ("mondo:0004975", "MONDO:4975", "http://purl.obolibrary.org/obo/MONDO_0004975"):
        assert resolve_node(store, written).id == "mondo:0004975"


def test_wikidata_external_ids_become_xrefs_in_their_one_form() -> None:
    from metakg.ingest.wikidata.mapping import _xref

    assert _xref("doid", "DOID:10652") == "doid:10652"  # P699 values carry their prefix
    assert _xref("mondo", "0004975") == "mondo:0004975"
    assert _xref("mesh", "D000544") == "mesh:D000544"
    assert _xref("ncbigene", "351") == "ncbigene:351"
