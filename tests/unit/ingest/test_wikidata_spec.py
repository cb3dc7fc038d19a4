"""Wikidata subset specs and batch splitting (logic only; the endpoint tests are in tests/integration)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from metakg.errors import InputDataError
from metakg.ingest.wikidata import QueryTimeout, SparqlClient, SyncError, batched, load_spec


def test_a_spec_with_every_key_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: drugs\nseeds: [Q42]\nproperties: [P50]\nhops: 2\nlanguages: [en, de]\n"
        "classes:\n  - {class: Q12140, property: P715, limit: 10}\n"
        "sparql: 'PREFIX wd: <http://www.wikidata.org/entity/>\n SELECT ?item WHERE { ?item ?p wd:Q5 }'\n"
        "xrefs: {P231: cas}\n"
    )
    spec = load_spec(path)
    assert spec.classes[0].class_ == "Q12140" and spec.xref_properties()["P231"] == "cas"
    assert spec.xref_properties()["P715"] == "drugbank"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: x\nseeds: [Q0x]\n", "seeds"),
        ("name: x\nseeds: [Q1]\nhops: 9\n", "hops"),
        ("name: x\nseeds: [Q1]\nproperties: [50]\n", "properties"),
        ("name: x\n", "selects nothing"),
        ("name: x\nsparql: 'SELECT ?x WHERE { ?x ?p ?o }'\n", "?item"),
        ("name: x\nsparql: 'SELECT ?item WHERE { SERVICE <http://e/> { ?item ?p ?o } }'\n", "read-only"),
        ("name: x\nseeds: [Q1]\nunknown: 1\n", "unknown"),
        ("name: x\nseeds: [Q1]\nxrefs: {Q5: cas}\n", "property ids"),  # once a traceback after the queries
        ("name: x\nseeds: [Q1]\nxrefs: {P231: 'CAS PREFIX'}\n", "CURIE prefixes"),
        ("[1, 2]\n", "mapping"),
        ("name: [unclosed\n", "YAML"),
    ],
)
def test_bad_specs_name_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputDataError, match=r"bad\.yaml") as info:
        load_spec(path)
    assert needle in str(info.value)


class TimesOutAbove(SparqlClient):
    """Answers one row per id, but times out for batches larger than ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__("http://unused", "test")
        self.limit = limit
        self.sizes: list[int] = []

    def select(self, query: str, *, timeout_s: float | None = None) -> list[dict[str, dict[str, str]]]:
        ids = query.split()
        self.sizes.append(len(ids))
        if len(ids) > self.limit:
            raise QueryTimeout("too big")
        return [{"id": {"value": i}} for i in ids]


def test_a_batch_that_times_out_is_split_until_it_passes() -> None:
    client = TimesOutAbove(limit=3)
    ids = [f"Q{i}" for i in range(1, 11)]

    def build(batch: Sequence[str]) -> str:
        return " ".join(batch)

    rows = batched(client, ids, 8, build)
    assert [r["id"]["value"] for r in rows] == ids  # nothing lost or repeated, order kept
    assert client.sizes[:3] == [8, 4, 2] and max(s for s in client.sizes if s <= 3) <= 3
    with pytest.raises(
        SyncError, match=r"alone got no complete answer from http://unused in time .*raise wikidata.timeout_s"
    ):
        batched(TimesOutAbove(limit=0), ["Q1", "Q2"], 2, build)


def test_a_refused_connection_fails_fast() -> None:
    waits: list[float] = []
    client = SparqlClient("http://127.0.0.1:9/sparql", "metakg-test", max_retries=5, backoff_s=2.0, sleep=waits.append)
    with pytest.raises(SyncError, match="refused the connection 2 times") as info:
        client.select("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    assert "wikidata.endpoint" in str(info.value) and waits == [1.0]  # one short wait, not 2 + 4 + 8 + 16 s


def test_a_host_name_that_does_not_resolve_fails_fast() -> None:
    waits: list[float] = []  # .invalid never resolves (RFC 2606): as offline, without a network to lose
    client = SparqlClient(
        "http://metakg.invalid/sparql", "metakg-test", max_retries=5, backoff_s=2.0, sleep=waits.append
    )
    with pytest.raises(SyncError, match="host name could not be resolved") as info:
        client.select("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    assert "offline" in str(info.value) and waits == [1.0]  # not about a minute of backoff
