"""Writing, reading and merging KG bundles."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from metakg.errors import BundleError
from metakg.schemas.bundle import MANIFEST_FILE, NODES_FILE, Bundle, merge_bundles, read_bundle, write_bundle
from metakg.schemas.tables import conform_edges, conform_nodes
from tests.conftest import small_bundle


def test_round_trip_keeps_every_value(tmp_path: Path) -> None:
    bundle = small_bundle()
    manifest = write_bundle(tmp_path / "b", bundle)
    again = read_bundle(tmp_path / "b", verify=True)
    assert again.nodes.equals(bundle.nodes)
    assert again.edges.equals(bundle.edges)
    assert manifest["counts"]["nodes"] == 10 and manifest["counts"]["edges"] == 9
    assert manifest["counts"]["node_types"] == {"disease": 3, "drug": 3, "phenotype": 2, "concept": 2}
    assert manifest["counts"]["relations"]["treats"] == 4
    assert set(manifest["content_hashes"]) == {"nodes.parquet", "edges.parquet", "rejects.parquet"}
    on_disk = json.loads((tmp_path / "b" / MANIFEST_FILE).read_text())
    assert on_disk["schema_version"] == "1.1"


def test_tampering_is_detected(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", small_bundle())
    small_bundle().nodes.head(2).write_parquet(tmp_path / "b" / NODES_FILE)
    read_bundle(tmp_path / "b", verify=False)  # read as is only when asked
    with pytest.raises(BundleError, match=r"nodes\.parquet changed since the bundle was written"):
        read_bundle(tmp_path / "b")
    (tmp_path / "b" / NODES_FILE).unlink()
    with pytest.raises(BundleError, match=r"nodes\.parquet is missing"):
        read_bundle(tmp_path / "b")


def test_missing_or_incomplete_bundles_are_explained(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="not a KG bundle"):
        read_bundle(tmp_path / "nothing")
    (tmp_path / "half").mkdir()
    small_bundle().nodes.write_parquet(tmp_path / "half" / NODES_FILE)
    with pytest.raises(BundleError, match=r"has no manifest\.json: it is not a bundle"):
        read_bundle(tmp_path / "half")
    write_bundle(tmp_path / "old", small_bundle())
    manifest = json.loads((tmp_path / "old" / MANIFEST_FILE).read_text())
    manifest["schema_version"] = "0.1"
    (tmp_path / "old" / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"schema version 0\.1"):
        read_bundle(tmp_path / "old")


def test_merge_dedups_and_keeps_provenance() -> None:
    a = small_bundle()
    extra_nodes = conform_nodes(
        pl.DataFrame(
            {
                "id": ["kg:test/0", "kg:test/new"],
                "name": ["Aspirin (brand)", "new"],
                "type": ["drug", "concept"],
                "source": ["other", "other"],
                "xrefs": [["chebi:15365"], []],
            }
        )
    )
    repeated = a.edges.head(1).with_columns(
        pl.lit(0.99).alias("confidence"),
        pl.lit(["other.txt:7", "other.txt:9"]).alias("record_ids"),
        pl.lit(2).cast(pl.Int64).alias("count"),
    )
    b = Bundle(nodes=extra_nodes, edges=conform_edges(repeated), manifest={"sources": [{"name": "other"}]})
    merged = merge_bundles([Bundle(a.nodes, a.edges, manifest={"sources": [{"name": "test"}]}), b])
    assert merged.nodes.height == a.nodes.height + 1
    assert merged.edges.height == a.edges.height
    aspirin = merged.nodes.filter(pl.col("id") == "kg:test/0").row(0, named=True)
    assert aspirin["name"] == "aspirin"
    assert "Aspirin (brand)" in aspirin["aliases"]
    assert set(aspirin["xrefs"]) == {"drugbank:DB00945", "wd:Q18216", "chebi:15365"}
    first = merged.edges.filter(pl.col("id") == a.edges["id"][0]).row(0, named=True)
    assert first["count"] == 3 and first["confidence"] == 0.99
    assert first["record_ids"] == ["test.txt:1", "other.txt:7", "other.txt:9"]
    assert [s["name"] for s in merged.manifest["sources"]] == ["test", "other"]
    with pytest.raises(BundleError):
        merge_bundles([])


def test_merge_counts_distinct_records_so_repeating_an_input_changes_nothing() -> None:
    a = small_bundle()
    other = a.edges.head(2).with_columns(
        pl.concat_list(pl.lit("other.txt:") + pl.int_range(pl.len()).cast(pl.String)).alias("record_ids")
    )
    b = Bundle(a.nodes, conform_edges(other))
    counts = dict(zip(a.edges["id"], a.edges["count"], strict=True))
    twice = merge_bundles([a, a])
    assert dict(zip(twice.edges["id"], twice.edges["count"], strict=True)) == counts  # A + A = A
    ab = merge_bundles([a, b])
    expected = {k: v + (1 if k in set(other["id"]) else 0) for k, v in counts.items()}
    assert dict(zip(ab.edges["id"], ab.edges["count"], strict=True)) == expected
    again = merge_bundles([ab, a])  # a merge merged with one of its inputs
    assert dict(zip(again.edges["id"], again.edges["count"], strict=True)) == expected
    # an edge stated twice by one record (count 2, one record id) keeps its count when merged with itself
    doubled = Bundle(a.nodes, a.edges.with_columns(pl.lit(2, dtype=pl.Int64).alias("count")))
    assert set(merge_bundles([doubled, doubled]).edges["count"]) == {2}


def test_manifest_lists_most_frequent_first(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", small_bundle())
    manifest = json.loads((tmp_path / "b" / MANIFEST_FILE).read_text())
    relations = list(manifest["counts"]["relations"].items())
    assert relations[0] == ("treats", 4)
    assert [n for _, n in relations] == sorted((n for _, n in relations), reverse=True)
