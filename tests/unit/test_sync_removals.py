"""A sync stops before writing when its removals look like a failing endpoint, not edits to Wikidata."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from metakg.api.bundles import Earlier
from metakg.api.wikidata import check_removals, check_replaced
from metakg.ingest.wikidata import SubsetSpec, SyncError, SyncReport
from metakg.schemas.bundle import Bundle
from metakg.schemas.tables import conform_nodes, empty_edges


def state(*qids: str) -> dict[str, object]:
    return {"entities": {q: {"revision": "1"} for q in qids}}


def report(removed: list[str]) -> SyncReport:
    return SyncReport(removed_ids=removed)


SPEC = SubsetSpec(name="t", seeds=["Q1"])
HELD = state(*(f"Q{i}" for i in range(1, 11)))  # ten entities, Q1 the seed


def test_removals_up_to_the_share_pass_and_beyond_it_stop() -> None:
    check_removals(SPEC, HELD, state(), report(["Q2", "Q3"]), 0.2, "http://x/sparql")  # 2 of 10 = the share
    with pytest.raises(SyncError, match=r"remove 3 of the 10 entities .*30%.*max_removed_share 20%"):
        check_removals(SPEC, HELD, state(), report(["Q2", "Q3", "Q4"]), 0.2, "http://x/sparql")


def test_a_seed_removed_stops_even_under_the_share() -> None:
    with pytest.raises(SyncError, match=r"remove 1 seed\(s\) of the subset \(Q1\).*--allow-removals"):
        check_removals(SPEC, HELD, state(), report(["Q1"]), 0.5, "http://x/sparql")


def test_a_first_sync_that_finds_no_seed_stops_and_one_without_seeds_may_be_empty() -> None:
    with pytest.raises(SyncError, match="none of the subset's 1 seeds"):
        check_removals(SPEC, state(), state(), report([]), 0.2, "http://x/sparql")
    check_removals(
        SubsetSpec(name="t", sparql="SELECT ?item WHERE { ?item ?p ?o }"), state(), state(), report([]), 0.2, "u"
    )


def test_the_endpoint_password_never_reaches_the_message() -> None:
    with pytest.raises(SyncError) as raised:
        check_removals(SPEC, HELD, state(), report(["Q1"]), 0.2, "http://me:hunter2@x/sparql")
    assert "hunter2" not in str(raised.value)


def replaced(*ids: str, sources: tuple[str, ...] = ("wikidata:t",)) -> Earlier:
    nodes = pl.DataFrame({"id": list(ids), "name": list(ids), "type": "concept", "source": sources[0]})
    manifest = {"sources": [{"name": s} for s in sources]}
    return Earlier(Bundle(conform_nodes(nodes), empty_edges(), manifest=manifest), None)


def test_the_bundle_being_replaced_is_guarded_whatever_the_state_file_says(tmp_path: Path) -> None:
    held = replaced(*(f"wd:Q{i}" for i in range(1, 11)))
    check_replaced(SPEC, held, [f"wd:Q{i}" for i in range(1, 9)], 0.2, "u", tmp_path)  # 2 of 10 dropped: allowed
    with pytest.raises(SyncError, match=r"drop 1 seed\(s\) .*wd:Q1"):
        check_replaced(SPEC, held, [f"wd:Q{i}" for i in range(2, 11)], 0.5, "u", tmp_path)
    with pytest.raises(SyncError, match=r"drop 10 of the 10 nodes .*100%"):
        check_replaced(SubsetSpec(name="t", seeds=["Q99"]), held, [], 0.2, "u", tmp_path)


def test_a_bundle_of_other_sources_given_as_output_is_named(tmp_path: Path) -> None:
    other = replaced("kg:x/a", "kg:x/b", sources=("commonsenseqa",))
    with pytest.raises(SyncError, match=r"drop 2 of the 2 nodes .*it holds commonsenseqa"):
        check_replaced(SPEC, other, ["wd:Q1"], 0.2, "u", tmp_path)
