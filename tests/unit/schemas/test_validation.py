"""Validation: every bad row rejected with its reason, good rows kept, counts that add up."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from metakg.schemas.bundle import Bundle
from metakg.schemas.tables import conform_edges, conform_nodes
from metakg.schemas.validation import validate, write_reports
from metakg.schemas.vocabulary import default_vocabulary
from tests.conftest import small_bundle

TYPES = default_vocabulary().names


def bad_bundle() -> Bundle:
    """Null ids, a duplicate id, an id that is no CURIE, an empty name, an unknown type; dangling
    endpoints, confidence 1.7, a bad relation, a repeated edge id (and a mutual pair of a directed relation,
    which is kept)."""
    nodes = pl.DataFrame(
        {
            "id": ["kg:t/a", "kg:t/b", None, "kg:t/a", "kg:t/c", "not a curie", "kg:t/d", "kg:t/e", ""],
            "name": ["a", "b", "null id", "duplicate of a", "", "x", "d", "e", "empty id"],
            "type": ["concept", "drug", "concept", "concept", "concept", "concept", "unicorn", "concept", "concept"],
            "source": "t",
        }
    )
    edges = pl.DataFrame(
        {
            "src": ["kg:t/a", "kg:t/a", "kg:t/a", "kg:t/b", "kg:t/a", "kg:t/e", "kg:t/a", None],
            "rel": ["r", "r", "s", "r", "Bad Rel", "r", "r", "r"],
            "dst": ["kg:t/b", "kg:t/missing", "kg:t/b", "kg:t/a", "kg:t/e", "kg:t/a", "kg:t/c", "kg:t/a"],
            "source": "t",
            "confidence": [0.5, 0.5, 1.7, 0.5, 0.5, None, 0.5, 0.5],
        }
    )
    edges = conform_edges(edges)
    edges = pl.concat([edges, edges.head(1)])  # a repeated edge id
    return Bundle(nodes=conform_nodes(nodes), edges=edges)


def test_every_bad_row_is_rejected_with_its_reason() -> None:
    bundle = bad_bundle()
    out, report = validate(bundle, TYPES)
    rejects = out.rejects.filter(pl.col("stage") == "validate")
    by_check = dict(rejects.group_by("check").len().iter_rows())
    assert by_check == {
        "nodes.id_not_null": 2,
        "nodes.id_unique": 1,
        "nodes.name_not_empty": 1,
        "nodes.id_curie": 1,
        "nodes.type_in_vocabulary": 1,
        "edges.endpoint_exists": 2,  # kg:t/missing, and kg:t/c whose node was rejected for its empty name
        "edges.confidence_in_range": 2,  # 1.7 and null
        "edges.relation_format": 1,
        "edges.endpoints_not_null": 1,
        "edges.id_unique": 1,
    }
    assert set(out.nodes["id"]) == {"kg:t/a", "kg:t/b", "kg:t/e"}
    assert out.nodes.filter(pl.col("id") == "kg:t/a")["name"].to_list() == ["a"]  # the first row is kept
    assert out.edges.height == 2  # a -r-> b and b -r-> a: a directed relation both ways is two facts
    assert report.warnings == ["edges.mutual_directed"] and report.warned == 2
    # counts add up for both tables
    assert report.nodes + rejects.filter(pl.col("table") == "nodes").height == bundle.nodes.height
    assert report.edges + rejects.filter(pl.col("table") == "edges").height == bundle.edges.height
    assert report.rejected == rejects.height
    assert not report.ok and set(report.failures) == set(by_check)
    # every reject names the row and keeps the whole row as JSON
    for row in rejects.iter_rows(named=True):
        assert row["reason"] and row["record"].startswith(f"{row['table']} row ")
        assert isinstance(json.loads(row["payload"]), dict)


def test_great_expectations_sees_the_same_problems() -> None:
    _, report = validate(bad_bundle(), TYPES)
    gx = {c.check: c.gx_unexpected for c in report.checks}
    assert gx["nodes.id_not_null"] == 1  # GX counts the null; the empty string fails the length check
    assert gx["nodes.type_in_vocabulary"] == 1
    assert gx["edges.confidence_in_range"] == 2
    assert gx["edges.relation_format"] == 1
    assert gx["edges.endpoint_exists"] is None  # not expressed in GX: checked in polars


def test_a_clean_bundle_passes_and_revalidation_changes_nothing() -> None:
    out, report = validate(small_bundle(), TYPES)
    assert report.ok and report.rejected == 0 and report.failures == []
    again, second = validate(out, TYPES, run_gx=False)
    assert second.ok and again.nodes.equals(out.nodes) and again.edges.equals(out.edges)


def test_table_level_failure_when_nothing_survives() -> None:
    nodes = conform_nodes(pl.DataFrame({"id": [None], "name": ["x"], "type": ["concept"], "source": ["t"]}))
    _, report = validate(
        Bundle(
            nodes=nodes,
            edges=conform_edges(
                pl.DataFrame({"src": ["kg:t/x"], "dst": ["kg:t/y"], "rel": ["r"], "source": ["t"], "confidence": [1.0]})
            ),
        ),
        TYPES,
    )
    assert report.table_failures == ["nodes.table_not_empty", "edges.table_not_empty"]
    assert not report.ok


def test_self_loops_are_not_mirrors() -> None:
    bundle = small_bundle()
    loop = conform_edges(
        pl.DataFrame({"src": ["kg:test/0"], "dst": ["kg:test/0"], "rel": ["r"], "source": ["t"], "confidence": [1.0]})
    )
    _, report = validate(Bundle(bundle.nodes, pl.concat([bundle.edges, loop])), TYPES, run_gx=False)
    assert report.ok


@pytest.mark.parametrize("html", [True, False])
def test_reports_are_written(tmp_path: Path, html: bool) -> None:
    out, report = validate(bad_bundle(), TYPES, run_gx=False)
    written = write_reports(report, out.rejects, tmp_path, html_report=html)
    summary = json.loads((tmp_path / "validation.json").read_text())
    assert summary["rejected"] == report.rejected and summary["ok"] is False
    assert len(written) == (2 if html else 1)
    if html:
        page = (tmp_path / "validation.html").read_text()
        assert "Validation failed" in page and "edges.mutual_directed" in page and "warning" in page


def test_every_item_of_a_list_column_is_checked() -> None:
    good = small_bundle()
    extra = conform_nodes(
        pl.DataFrame(
            {
                "id": ["kg:test/nullxref", "kg:test/badxref", "kg:test/blankalias", "kg:test/fine"],
                "name": ["n1", "n2", "n3", "n4"],
                "type": "concept",
                "source": "test",
                "aliases": [[], [], ["ok", " "], ["also fine"]],
                "xrefs": [["wd:Q1", None], ["not a curie"], [], ["primekg.index:7"]],
            }
        )
    )
    bundle = Bundle(pl.concat([good.nodes, extra], how="vertical"), good.edges)
    checked, report = validate(bundle, default_vocabulary().names)
    checks = dict(zip(checked.rejects["record"], checked.rejects["check"], strict=True))
    rejected = {r: c for r, c in checks.items() if "kg:test/" in r and c.startswith("nodes.")}
    assert sorted(rejected.values()) == ["nodes.aliases_not_empty", "nodes.xrefs_curie", "nodes.xrefs_curie"]
    assert "kg:test/fine" in checked.nodes["id"].to_list() and report.rejected == 3


def test_symmetric_mirrors_collapse_directed_mutual_pairs_warn_and_exact_duplicates_are_rejected() -> None:
    """A spouse pair stated both ways is one fact; influenced_by both ways is two; a repeated row is an
    error. Only the error fails the bundle, and the records of a collapsed copy join the edge kept."""
    ids = ["kg:t/a", "kg:t/b", "kg:t/c"]
    nodes = conform_nodes(pl.DataFrame({"id": ids, "name": ["a", "b", "c"], "type": "concept", "source": "t"}))
    rows = [
        ("kg:t/a", "spouse", "kg:t/b", "rec1"),
        ("kg:t/b", "spouse", "kg:t/a", "rec2"),  # the mirror: collapses into rec1's edge
        ("kg:t/a", "influenced_by", "kg:t/c", "rec3"),
        ("kg:t/c", "influenced_by", "kg:t/a", "rec4"),  # the other direction: kept, warned
        ("kg:t/b", "twinned_administrative_body", "kg:t/c", "rec5"),
    ]
    edges = conform_edges(
        pl.DataFrame(
            {
                "src": [r[0] for r in rows],
                "rel": [r[1] for r in rows],
                "dst": [r[2] for r in rows],
                "source": "t",
                "confidence": 1.0,
                "record_ids": [[r[3]] for r in rows],
            }
        )
    )
    edges = pl.concat([edges, edges.tail(1)])  # an exact duplicate row
    out, report = validate(Bundle(nodes, edges), TYPES, run_gx=False)
    by_check = {c.check: (c.severity, c.rows, c.rejected) for c in report.checks}
    assert by_check["edges.mirrored_symmetric"] == ("collapsed", 1, 0)
    assert by_check["edges.mutual_directed"] == ("warning", 2, 0)
    assert by_check["edges.id_unique"] == ("error", 1, 1)
    assert (report.collapsed, report.warned, report.rejected) == (1, 2, 1) and not report.ok
    spouse = out.edges.filter(pl.col("rel") == "spouse")
    assert spouse.height == 1 and spouse["record_ids"][0].to_list() == ["rec1", "rec2"] and spouse["count"][0] == 2
    assert out.edges.filter(pl.col("rel") == "influenced_by").height == 2
    assert out.edges.height + report.collapsed + report.rejected == edges.height  # every row accounted for
    _, fine = validate(Bundle(nodes, edges.head(5)), TYPES, run_gx=False)
    assert fine.ok and fine.headline == "Validation passed (2 rows with warnings; 1 mirrored copies collapsed)"
    custom, _ = validate(Bundle(nodes, edges.head(5)), TYPES, run_gx=False, symmetric={"influenced_by"})
    assert custom.edges.filter(pl.col("rel") == "influenced_by").height == 1  # declared symmetric: collapsed


def test_control_characters_in_a_name_or_an_alias_are_rejected() -> None:
    """Probe round 4: a NUL, an escape or a line break written into a name by hand or through the API passed
    validation and reached both exports."""
    good = small_bundle()
    bad = good.nodes.head(3).with_columns(
        pl.Series("id", ["kg:test/nul", "kg:test/esc", "kg:test/ok"]),
        pl.Series("name", ["a\x00b", "fine", "fine too"]),
        pl.Series("aliases", [[], ["x\x1by"], ["also\tfine?"]]),
    )
    bundle = Bundle(pl.concat([good.nodes, bad], how="vertical"), good.edges)
    checked, _ = validate(bundle, default_vocabulary().names)
    checks = dict(zip(checked.rejects["record"], checked.rejects["check"], strict=True))
    found = {r.split("id=")[-1]: c for r, c in checks.items() if "kg:test/" in r}
    assert found == {"kg:test/nul": "nodes.name_control", "kg:test/esc": "nodes.name_control",
                     "kg:test/ok": "nodes.name_control"}  # fmt: skip
