"""History of bundles through the CLI: updates with --history, `metakg history`, `snapshot`, `--as-of`, and
the RDF export of the versions."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rdflib import Dataset, Literal, URIRef
from rdflib.namespace import RDF, RDFS

from metakg.schemas.rdf_mapping import HISTORY_GRAPH, MK, node_iri
from tests.unit.cli.test_cli import run


def _versions(tmp_path: Path) -> tuple[Path, str]:
    """A bundle of two versions (migraine removed, fever added), and a time between them."""
    v1, v2 = tmp_path / "v1.tsv", tmp_path / "v2.tsv"
    v1.write_text("aspirin\ttreats\theadache\nheadache\tsymptom of\tmigraine\nibuprofen\ttreats\tpain\n")
    v2.write_text("aspirin\ttreats\theadache\naspirin\ttreats\tfever\nibuprofen\ttreats\tpain\n")
    b = tmp_path / "b"
    run("ingest", "triples", str(v1), "-d", "t", "-o", str(b), "--history", "--json")
    time.sleep(0.01)
    between = datetime.now(UTC).isoformat()
    time.sleep(0.01)
    _, second = run("ingest", "triples", str(v2), "-d", "t", "-o", str(b), "--previous", str(b), "--json")
    assert second["diff"]["edges"]["removed"] == 1
    return b, between


def test_history_snapshot_and_as_of_read_the_earlier_version(tmp_path: Path) -> None:
    b, between = _versions(tmp_path)
    _, gone = run("history", "kg:t/migraine", "--graph", str(b), "--json")
    [version] = gone["versions"]
    assert version["name"] == "migraine" and version["current"] is False and version["retired_at"] > between
    _, kept = run("history", "kg:t/aspirin", "--graph", str(b), "--json")
    assert [v["current"] for v in kept["versions"]] == [True] and kept["versions"][0]["recorded_at"] < between
    _, missing = run("history", "kg:t/nothing", "--graph", str(b), "--json", code=1)
    assert "no node or edge" in missing["error"]

    _, then = run("snapshot", str(b), "--as-of", between, "-o", str(tmp_path / "then"), "--json")
    assert (then["nodes"], then["edges"]) == (5, 3)
    _, old = run("query", "neighbours", str(b), "headache", "--as-of", between, "--json")
    assert {n["node"]["name"] for n in old["neighbours"]} == {"aspirin", "migraine"}
    _, new = run("query", "neighbours", str(b), "headache", "--json")
    assert {n["node"]["name"] for n in new["neighbours"]} == {"aspirin"}
    _, before = run("snapshot", str(b), "--as-of", "2000-01-01", "-o", str(tmp_path / "empty"), "--json")
    assert (before["nodes"], before["edges"]) == (0, 0)
    _, bad = run("snapshot", str(b), "--as-of", "last week", "-o", str(tmp_path / "x"), "--json", code=2)
    assert "ISO 8601" in bad["error"]


def test_as_of_on_a_bundle_without_history_says_how_to_keep_it(tmp_path: Path) -> None:
    v1 = tmp_path / "v1.tsv"
    v1.write_text("a\tr\tb\n")
    run("ingest", "triples", str(v1), "-d", "t", "-o", str(tmp_path / "b"), "--json")
    _, refused = run("query", "neighbours", str(tmp_path / "b"), "a", "--as-of", "2026-01-01", "--json", code=2)
    assert "keeps no history" in refused["error"] and "--history" in refused["error"]


def test_the_rdf_export_carries_the_versions_in_the_history_graph(tmp_path: Path) -> None:
    b, _between = _versions(tmp_path)
    out = tmp_path / "b.nq"
    _, exported = run("export", "rdf", str(b), "-o", str(out), "--format", "nq", "--json")
    assert exported["statements_written"] == exported["statements_expected"]
    # migraine's edge; the two kept ones, now stated by v2.tsv's lines, are the same versions (record ids of a
    # triple file say where its lines are, not what they state)
    assert exported["history"]["retired_edges"] == 1
    data = Dataset()
    data.parse(out, format="nquads")
    history = data.graph(HISTORY_GRAPH)
    migraine = node_iri("kg:t/migraine")
    [version] = list(history.subjects(MK["versionOf"], migraine))
    assert (version, RDF.type, MK["NodeVersion"]) in history
    assert (version, RDFS.label, Literal("migraine", lang="en")) in history
    assert (
        next(history.objects(version, MK["retiredAt"])).toPython()
        > next(history.objects(version, MK["recordedAt"])).toPython()
    )
    # the current graph no longer states the removed edge; its version is in the history graph only
    current = [q for q in data.quads((None, None, migraine, None)) if q[3] != HISTORY_GRAPH]
    assert current == []
    edge_versions = list(history.subjects(RDF.type, MK["EdgeVersion"]))
    assert len(edge_versions) == 1 and any((v, RDF.object, migraine) in history for v in edge_versions)
    assert isinstance(next(history.objects(node_iri("kg:t/aspirin"), MK["recordedAt"])), Literal)
    assert URIRef(str(HISTORY_GRAPH)) in {g.identifier for g in data.graphs()}


def test_a_bundle_keeping_history_is_never_replaced_without_it_unless_told(tmp_path: Path) -> None:
    b, _ = _versions(tmp_path)
    v3 = tmp_path / "v3.tsv"
    v3.write_text("warfarin\ttreats\tthrombosis\n")
    manifest = (b / "manifest.json").read_bytes()
    _, refused = run("ingest", "triples", str(v3), "-d", "t", "-o", str(b), "--json", code=2)
    assert "keeps history" in refused["error"] and "--previous" in refused["fix"]
    assert (b / "manifest.json").read_bytes() == manifest  # nothing lost, nothing written
    _, updated = run("ingest", "triples", str(v3), "-d", "t", "-o", str(b), "--previous", str(b), "--json")
    assert updated["diff"]["edges"]["removed"] == 3  # the update goes on with its history
    _, gone = run("history", "kg:t/migraine", "--graph", str(b), "--json")
    assert gone["versions"]
    run("ingest", "triples", str(v3), "-d", "t", "-o", str(b), "--no-history", "--json")  # told: replaced


def test_without_a_graph_the_neo4j_error_says_a_bundle_can_be_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAKG_NEO4J__URI", "bolt://127.0.0.1:9")  # nothing listens there
    _, history = run("history", "kg:t/a", "--json", code=2)
    assert "cannot reach Neo4j" in history["error"] and "--graph BUNDLE" in history["error"]
    _, named = run("history", "kg:t/a", "--graph", "bolt://127.0.0.1:9", "--json", code=2)
    assert "--graph BUNDLE" not in named["error"]  # a Neo4j named on purpose: no hint about bundles
