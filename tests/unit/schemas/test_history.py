"""Bundle history: versions retired, not lost; the graph as of a time; one element's versions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from metakg.errors import UsageError
from metakg.schemas.bundle import Bundle
from metakg.schemas.history import History, advance, as_of, parse_time, versions
from metakg.schemas.tables import conform_edges, conform_nodes

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def bundle(nodes: list[tuple[str, str]], edges: list[tuple[str, str, str, int]]) -> Bundle:
    n = conform_nodes(pl.DataFrame({"id": [i for i, _ in nodes], "name": [x for _, x in nodes]}).with_columns(
        pl.lit("concept").alias("type"), pl.lit("s").alias("source")
    ))  # fmt: skip
    e = conform_edges(
        pl.DataFrame(
            {"src": [a for a, _, _, _ in edges], "rel": [r for _, r, _, _ in edges],
             "dst": [b for _, _, b, _ in edges], "count": [c for _, _, _, c in edges]}
        ).with_columns(pl.lit("s").alias("source"))
    )  # fmt: skip
    return Bundle(n, e, manifest={"written_at": T0.isoformat()})


def shape(b: Bundle) -> tuple[set[tuple[str, str]], set[tuple[str, str, str, int]]]:
    return (
        set(b.nodes.select("id", "name").iter_rows()),
        set(b.edges.select("src", "rel", "dst", "count").iter_rows()),
    )


def test_three_versions_each_time_gives_back_its_graph() -> None:
    v1 = bundle([("kg:a", "A"), ("kg:b", "B"), ("kg:c", "C")], [("kg:a", "r", "kg:b", 1), ("kg:b", "r", "kg:c", 1)])
    v2 = bundle([("kg:a", "A"), ("kg:b", "B2"), ("kg:d", "D")], [("kg:a", "r", "kg:b", 2), ("kg:a", "r", "kg:d", 1)])
    v3 = bundle([("kg:a", "A"), ("kg:d", "D")], [("kg:a", "r", "kg:d", 1)])
    t1, t2 = T0 + timedelta(days=1), T0 + timedelta(days=2)
    h2 = advance(v1, None, v2, t1)
    h3 = advance(v2, h2, v3, t2)
    assert shape(as_of(v3, h3, T0)) == shape(v1)
    assert shape(as_of(v3, h3, t1 + timedelta(hours=1))) == shape(v2)
    assert shape(as_of(v3, h3, t2)) == shape(v3)
    assert shape(as_of(v3, h3, T0 - timedelta(days=1))) == (set(), set())  # before anything was recorded
    # b: recorded at T0 as B, changed at t1 to B2, removed at t2
    b = versions(v3, h3, "kg:b")
    assert [(v["name"], v["recorded_at"], v["retired_at"], v["current"]) for v in b] == [
        ("B", T0, t1, False),
        ("B2", t1, t2, False),
    ]
    a = versions(v3, h3, "kg:a")
    assert [(v["recorded_at"], v["current"]) for v in a] == [(T0, True)]  # never changed
    summary = h3.summary()
    assert (summary["retired_nodes"], summary["retired_edges"]) == (3, 3)


def test_valid_to_is_the_successor_valid_from() -> None:
    v1 = bundle([("kg:a", "A")], [])
    v2 = bundle([("kg:a", "A2")], [])
    source_time = datetime(2025, 6, 1, tzinfo=UTC)
    v2.nodes = v2.nodes.with_columns(pl.lit(source_time, dtype=pl.Datetime("us", "UTC")).alias("valid_from"))
    h = advance(v1, History.start(v1, T0), v2, T0 + timedelta(days=1))
    old, new = versions(v2, h, "kg:a")
    assert old["valid_to"] == source_time and new["valid_from"] == source_time and new["current"]


def test_as_of_times_parse_as_utc_and_a_date_means_its_whole_day() -> None:
    assert parse_time("2026-11-24T06:30:00Z") == datetime(2026, 11, 24, 6, 30, tzinfo=UTC)
    assert parse_time("2026-11-24T07:30:00+01:00") == datetime(2026, 11, 24, 6, 30, tzinfo=UTC)
    assert parse_time("2026-11-24") == datetime(2026, 11, 24, 23, 59, 59, 999_999, tzinfo=UTC)
    with pytest.raises(UsageError, match="ISO 8601"):
        parse_time("yesterday")
