"""metakg diff: added, removed and changed rows, with the columns that changed, per source and relation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from metakg.schemas.diff import EDGE_CONTENT, POSITIONAL_IMPORTERS, content_hash, diff_bundles
from metakg.schemas.tables import conform_edges, edge_ids
from tests.conftest import small_bundle
from tests.unit.cli.test_cli import run


def second_version() -> Bundle:
    """small_bundle with: one node renamed, one node and its edges removed, one edge's confidence changed,
    one edge added, and aliases reordered and provenance rewritten (neither is a change)."""
    old = small_bundle()
    nodes = old.nodes.filter(pl.col("name") != "warfarin").with_columns(
        pl.when(pl.col("name") == "aspirin").then(pl.lit("acetylsalicylic acid")).otherwise("name").alias("name"),
        pl.col("aliases").list.reverse(),
        pl.lit(datetime(2030, 1, 1, tzinfo=UTC)).alias("retrieved_at"),
    )
    kept = set(nodes["id"].to_list())
    edges = old.edges.filter(pl.col("src").is_in(kept) & pl.col("dst").is_in(kept))
    first = edges["id"][0]
    edges = edges.with_columns(
        pl.when(pl.col("id") == first).then(0.25).otherwise("confidence").alias("confidence"),
        pl.lit("another-run").alias("run_id"),
    )
    ids = nodes["id"].to_list()
    new = conform_edges(pl.DataFrame({"src": [ids[1]], "dst": [ids[2]], "rel": ["prevents"], "source": ["test"]}))
    new = new.with_columns(edge_ids(new))
    return Bundle(nodes, pl.concat([edges, new]))


def test_a_diff_counts_every_kind_of_change_and_names_the_columns() -> None:
    old, new = small_bundle(), second_version()
    d = diff_bundles(old, new)
    removed_edges = old.edges.height - (new.edges.height - 1)
    assert (d.nodes.added, d.nodes.removed, d.nodes.changed) == (0, 1, 1)
    assert d.nodes.changed_columns == {"name": 1}  # reordered aliases and a new retrieved_at are no change
    assert d.nodes.unchanged == old.nodes.height - 2
    assert (d.edges.added, d.edges.removed, d.edges.changed) == (1, removed_edges, 1)
    assert d.edges.changed_columns == {"confidence": 1}  # a new run_id is no change
    assert d.edges.by_relation["prevents"] == {"added": 1}
    assert sum(sum(k.values()) for k in d.edges.by_relation.values()) == d.edges.total
    assert d.nodes.by_source == {"test": {"changed": 1, "removed": 1}}
    assert d.nodes.examples["changed"] == ["kg:test/0 acetylsalicylic acid (name)"]
    assert "warfarin" in d.nodes.examples["removed"][0]
    assert diff_bundles(new, new).empty and not d.empty
    back = diff_bundles(new, old)  # the other way round: additions and removals swap
    assert (back.edges.added, back.edges.removed, back.nodes.added) == (removed_edges, 1, 1)


def test_the_examples_are_the_first_rows_by_id_whatever_order_the_join_gives() -> None:
    old, new = small_bundle(), second_version()
    removed = diff_bundles(old, new, examples=2).edges.examples["removed"]
    gone = sorted(set(old.edges["id"].to_list()) - set(new.edges["id"].to_list()))
    assert [line.split(" ", 1)[0] for line in removed] == gone[:2]
    shuffled = Bundle(old.nodes.reverse(), old.edges.sample(fraction=1.0, shuffle=True, seed=3))
    assert diff_bundles(shuffled, new, examples=2).edges.examples["removed"] == removed


def test_cli_diff_json(tmp_path: Path) -> None:
    write_bundle(tmp_path / "old", small_bundle())
    write_bundle(tmp_path / "new", second_version())
    _, out = run("diff", str(tmp_path / "old"), str(tmp_path / "new"), "--json")
    assert out["ok"] is True and out["nodes"]["removed"] == 1 and out["edges"]["added"] == 1
    assert json.dumps(out)  # JSON-ready throughout
    _, same = run("diff", str(tmp_path / "old"), str(tmp_path / "old"), "--json")
    assert same["empty"] is True
    _, missing = run("diff", str(tmp_path / "old"), str(tmp_path / "nope"), "--json", code=1)
    assert missing["error_type"] == "BundleError"


def test_an_ingest_against_its_previous_version_records_the_diff(tmp_path: Path) -> None:
    """A triple file re-ingested over its own bundle (--previous = the output): one line removed, one line
    edited, one added; the manifest and the --json output say exactly that."""
    first = tmp_path / "v1.txt"
    first.write_text("aspirin\ttreats\theadache\nheadache\tsymptom of\tmigraine\nsalt\tcauses\tthirst\n")
    second = tmp_path / "v2.txt"
    second.write_text("aspirin\ttreats\theadache\nheadache\tsymptom of\tstress\ncoffee\tcauses\tinsomnia\n")
    bundle = tmp_path / "kg"
    run("ingest", "triples", str(first), "-d", "t", "-o", str(bundle), "--json")
    _, out = run("ingest", "triples", str(second), "-d", "t", "-o", str(bundle), "--previous", str(bundle), "--json")
    edges, nodes = out["diff"]["edges"], out["diff"]["nodes"]
    assert (edges["added"], edges["removed"], edges["changed"]) == (2, 2, 0)  # an edited line is a new edge
    assert edges["unchanged"] == 1  # the kept triple, now stated by v2.txt's line: a renamed file changes nothing
    assert (nodes["added"], nodes["removed"]) == (3, 3)  # stress, coffee, insomnia; migraine, salt, thirst
    _, info = run("info", str(bundle), "--json")
    assert info["manifest"]["diff"]["edges"]["added"] == 2


def test_a_line_inserted_above_changes_no_edge_after_it(tmp_path: Path) -> None:
    """Record ids name lines; a line inserted at the top shifts every later line, not the edges they state.
    The Neo4j load's content hash agrees with the diff, so it rewrites none of them either."""
    source = tmp_path / "kg.txt"
    lines = ["aspirin\ttreats\theadache", "headache\tsymptom of\tmigraine", "salt\tcauses\tthirst"]
    source.write_text("\n".join(lines) + "\n")
    bundle = tmp_path / "kg"
    run("ingest", "triples", str(source), "-d", "t", "-o", str(bundle), "--json")
    v1 = read_bundle(bundle)
    source.write_text("\n".join(["coffee\tcauses\tinsomnia", *lines, "salt\tcauses\tthirst"]) + "\n")
    _, out = run("ingest", "triples", str(source), "-d", "t", "-o", str(bundle), "--previous", str(bundle), "--json")
    edges = out["diff"]["edges"]
    assert (edges["added"], edges["removed"], edges["changed"]) == (1, 0, 1)
    assert edges["changed_columns"] == {"count": 1}  # salt causes thirst is now stated twice
    v2 = read_bundle(bundle)
    aspirin = pl.col("src").str.contains("aspirin")
    assert v1.edges.filter(aspirin)["record_ids"][0].to_list() == ["kg.txt:1"]
    assert v2.edges.filter(aspirin)["record_ids"][0].to_list() == ["kg.txt:2"]  # the bundle says where it is now

    def hashes(b: Bundle) -> dict[str, str]:
        return dict(b.edges.select("id", content_hash(b.edges, EDGE_CONTENT)).iter_rows())

    before, after = hashes(v1), hashes(v2)
    assert sum(before[i] != after[i] for i in before) == 1  # only the edge stated twice


def test_only_the_record_ids_of_triple_files_and_primekg_are_positions() -> None:
    """A PrimeKG row moves like a line, and a renamed input file changes no edge; a user's own record id
    that ends in digits (an extraction's ``PMID:12345``) is an id, not a position: another one is another
    record."""
    from metakg.extractors.pipeline import IMPORTER as EXTRACT
    from metakg.ingest.primekg import IMPORTER as PRIMEKG
    from metakg.ingest.triples import IMPORTER as TRIPLES

    assert {TRIPLES, PRIMEKG} == set(POSITIONAL_IMPORTERS)
    old = small_bundle()
    first = old.edges["id"][0]

    def stated(bundle: Bundle, importer: str | None, record: str) -> Bundle:
        edges = bundle.edges.with_columns(
            pl.lit(importer, dtype=pl.String).alias("importer"),
            pl.when(pl.col("id") == first).then(pl.lit([record])).otherwise(pl.lit(["x"])).alias("record_ids"),
        )
        return Bundle(bundle.nodes, edges)

    moved = diff_bundles(stated(old, PRIMEKG, "kg.csv row 7"), stated(old, PRIMEKG, "kg.csv row 8"))
    assert moved.edges.changed == 0
    renamed = diff_bundles(stated(old, PRIMEKG, "kg.csv row 7"), stated(old, PRIMEKG, "kg-2026.csv row 7"))
    assert renamed.edges.changed == 0
    other_paper = diff_bundles(stated(old, EXTRACT, "PMID:12345"), stated(old, EXTRACT, "PMID:99999"))
    assert other_paper.edges.changed_columns == {"record_ids": 1}
    unnamed = diff_bundles(stated(old, None, "PMID:12345"), stated(old, None, "PMID:99999"))  # no importer
    assert unnamed.edges.changed_columns == {"record_ids": 1}
