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
