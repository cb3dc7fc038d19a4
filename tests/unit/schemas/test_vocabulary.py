"""The type vocabulary and its mappings."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from metakg.errors import ConfigError
from metakg.schemas.vocabulary import default_vocabulary, load_vocabulary, parse_vocabulary


def test_hierarchy() -> None:
    vocab = default_vocabulary()
    assert vocab.ancestors("drug") == ["drug", "chemical", "biomedical_entity", "entity"]
    assert vocab.is_a("disease", "biomedical_entity")
    assert not vocab.is_a("concept", "biomedical_entity")
    assert "concept" in vocab.names


def test_every_primekg_node_type_is_mapped(data_dir: Path) -> None:
    table = pl.read_csv(data_dir / "primekg" / "primekg_plus_TableS1_node_types.csv")
    vocab = default_vocabulary()
    for node_type in table["node_type"]:
        assert vocab.primekg[node_type] in vocab.names


def test_wikidata_classes_map_to_types() -> None:
    vocab = default_vocabulary()
    assert vocab.wikidata["Q5"] == "person"
    assert vocab.wikidata["Q12136"] == "disease"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[types.a]\nis_a = 'missing'\n", "unknown type"),
        ("[types.a]\nis_a = 'b'\n[types.b]\nis_a = 'a'\n", "cycle"),
        ("[types.a]\n[primekg]\nx = 'nope'\n", "unknown type"),
        ("[types.a\n", "not valid TOML"),
        ("[prefixes.x]\nsynonyms = ['X1']\n", r"prefixes\.x needs iri"),
        (
            "[prefixes.x]\niri = 'http://x/'\n[prefixes.y]\niri = 'http://y/'\nsynonyms = ['X']\n",
            "already names the prefix 'x'",
        ),
        ("[prefixes.x]\niri = 'http://x/'\npad = -1\n", r"prefixes\.x\.pad"),
        ("[prefixes.x]\niri = 'http://x/'\nspelling = 'X'\n", "unknown keys"),
        ("[types.a]\n[prefixes.x]\niri = 'http://x/'\ntype = 'b'\n", r"prefixes\.x\.type 'b' is not a type"),
        ("[types.a]\n[prefixes.x]\niri = 'http://x/'\ntype = ['a']\n", r"prefixes\.x\.type \['a'\] is not a type"),
        ("[prefixes.x]\niri = 'http://x/'\norganism = {pattern = '^(', human = 'H'}\n", r"x\.organism\.pattern is not"),
        ("[prefixes.x]\niri = 'http://x/'\norganism = {pattern = '^X-', human = 'H'}\n", "a group for the code"),
        ("[prefixes.x]\niri = 'http://x/'\norganism = {pattern = '^(X)'}\n", r"x\.organism\.human"),
        ("[prefixes.x]\niri = 'http://x/'\norganism = {pattern = '^(X)', human = 'X', any = 'A'}\n", "any must"),
        ("[prefixes.x]\niri = 'http://x/'\norganism = 'human'\n", "a table of pattern, human and any"),
        ("[prefixes.x]\niri = 'http://x/'\norganism = {pattern = '^(X)', human = 'h', any = ['H']}\n", "human code"),
    ],
)
def test_bad_vocabularies_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_vocabulary(text)


def test_load_vocabulary_from_file(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text("[types.thing]\n[types.widget]\nis_a = 'thing'\n", encoding="utf-8")
    assert load_vocabulary(path).ancestors("widget") == ["widget", "thing"]
    with pytest.raises(ConfigError, match="does not exist"):
        load_vocabulary(tmp_path / "missing.toml")


def test_a_prefix_names_the_type_of_its_ids_where_it_has_one() -> None:
    vocab = default_vocabulary()
    assert vocab.id_type("NCBITaxon:9606") == "taxon"
    assert vocab.id_type("MONDO:0004975") == "disease"
    assert vocab.id_type("NCBI:351") == "gene_protein"  # a synonym, any case
    assert vocab.id_type("mesh:D000544") is None  # MeSH names diseases, chemicals, processes...
    assert vocab.id_type("hp:0004401") is None  # HP holds disease terms too
    assert vocab.id_type("reactome:R-HSA-1") is None  # pathways, reactions and complexes
    assert vocab.id_type("kg:notes/x") is None and vocab.id_type("no prefix") is None
    for spec in vocab.prefixes.values():  # every type a prefix gives is one of the vocabulary
        assert spec.type is None or spec.type in vocab.parents


def test_an_id_says_its_organism_where_its_namespace_writes_one() -> None:
    vocab = default_vocabulary()
    assert vocab.id_organism("reactome:R-HSA-1500620") == "human"
    assert vocab.id_organism("REACT:R-BTA-1266738") == "reactome:BTA"  # a synonym: cattle
    assert vocab.id_organism("reactome:R-ALL-29356") is None  # a small molecule of every species
    assert vocab.id_organism("kegg.pathway:hsa04210") == "human"
    assert vocab.id_organism("kegg.pathway:map04210") is None  # a reference map
    assert vocab.id_organism("kegg.pathway:mmu04210") == "kegg.pathway:MMU"
    # ids as sources write them, in any case: the code is read all the same
    assert vocab.id_organism("reactome:r-bta-5") == "reactome:BTA"
    assert vocab.id_organism("KEGG_PATHWAY:HSA04210") == "human"
    assert vocab.id_organism("reactome:R-NUL-1") is None and vocab.id_organism("unknown:R-BTA-1") is None
    assert vocab.id_organism("mesh:D008540") is None and vocab.id_organism("no prefix") is None
    # another organism's id is one entity with none but its own organism's
    assert vocab.organisms_apart("reactome:R-BTA-1266738", "mesh:D015509")
    assert vocab.organisms_apart("reactome:R-BTA-1266738", "reactome:R-HSA-1266738")
    assert vocab.organisms_apart("kegg.pathway:mmu04210", "reactome:R-MMU-109581")  # codes of two namespaces
    assert not vocab.organisms_apart("reactome:R-HSA-1500620", "mesh:D008540")
    assert not vocab.organisms_apart("reactome:R-HSA-109581", "kegg.pathway:hsa04210")
    assert not vocab.organisms_apart("reactome:R-BTA-1", "reactome:R-BTA-2")
    assert not vocab.organisms_apart("mesh:D1", "go:0006915")


def test_an_optional_organism_group_that_matches_nothing_names_no_organism() -> None:
    vocab = parse_vocabulary("[prefixes.x]\niri = 'http://x/'\norganism = {pattern = '^([A-Z]{3})?-', human = 'HSA'}\n")
    assert vocab.id_organism("x:-12") is None  # the group took nothing: no organism, not an organism "None"
    assert vocab.id_organism("x:hsa-12") == "human" and vocab.id_organism("x:BTA-1") == "x:BTA"
