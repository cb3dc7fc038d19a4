"""History of a bundle: every version of every node and edge, retired rather than lost.

A bundle written with history keeps two side tables, ``history_nodes.parquet`` and
``history_edges.parquet``. Each has the columns of its table plus four times:

- ``recorded_at``: when metakg first recorded this version (the update that wrote it);
- ``retired_at``: when an update replaced or removed it (null: the version is current);
- ``valid_from``: the source's own time of the version where it has one (Wikidata: the item's last
  modification), already a column of the nodes and edges;
- ``valid_to``: the source's time of the version that replaced it (null when removed or unknown).

A current version is a row with its ``id`` and ``recorded_at`` only (the content is in the bundle's
table); a retired version carries its whole row. So the graph *as of* a time T is the current rows recorded
at or before T plus the retired versions recorded at or before T and retired after it
(:func:`as_of`), and :func:`versions` lists one element's versions. A row recorded before history was kept
has a null ``recorded_at`` and counts as always there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from metakg.errors import UsageError
from metakg.schemas.bundle import HISTORY_EDGES_FILE, HISTORY_NODES_FILE, Bundle, read_side_table
from metakg.schemas.diff import EDGE_CONTENT, NODE_CONTENT, content_hash
from metakg.schemas.tables import EDGE_SCHEMA, NODE_SCHEMA, conform_edges, conform_nodes

#: the manifest key that lists the history tables
HISTORY_KEY = "history"
TIMES: dict[str, pl.DataType] = {
    "recorded_at": pl.Datetime("us", "UTC"),
    "retired_at": pl.Datetime("us", "UTC"),
    "valid_to": pl.Datetime("us", "UTC"),
}
Kind = Literal["node", "edge"]


def history_schema(kind: Kind) -> dict[str, pl.DataType]:
    """The columns of a history table: the table's own, then the times."""
    return {**(NODE_SCHEMA if kind == "node" else EDGE_SCHEMA), **TIMES}


@dataclass
class History:
    """The version tables of a bundle (see the module text)."""

    nodes: pl.DataFrame
    edges: pl.DataFrame

    @classmethod
    def start(cls, bundle: Bundle, recorded_at: datetime | None) -> History:
        """The history of a bundle whose rows were all recorded at ``recorded_at`` (None: unknown)."""
        return cls(_current(bundle.nodes, "node", recorded_at), _current(bundle.edges, "edge", recorded_at))

    def table(self, kind: Kind) -> pl.DataFrame:
        """The node or edge versions."""
        return self.nodes if kind == "node" else self.edges

    def summary(self) -> dict[str, Any]:
        """For the manifest: retired versions per kind and the first time recorded."""
        first = pl.concat([self.nodes["recorded_at"], self.edges["recorded_at"]]).drop_nulls()
        return {
            "retired_nodes": int(self.nodes["retired_at"].is_not_null().sum()),
            "retired_edges": int(self.edges["retired_at"].is_not_null().sum()),
            "since": first.min().isoformat() if first.len() else None,  # type: ignore[union-attr]
        }


def read_history(path: Path, bundle: Bundle) -> History | None:
    """The history of the bundle at ``path`` (None when it keeps none).

    Raises:
        BundleError: the manifest lists history tables that cannot be read.
    """
    nodes = read_side_table(path, bundle, HISTORY_NODES_FILE)
    edges = read_side_table(path, bundle, HISTORY_EDGES_FILE)
    if nodes is None or edges is None:
        return None
    return History(_conform(nodes, "node"), _conform(edges, "edge"))


def attach(bundle: Bundle, history: History, recorded_at: datetime) -> None:
    """Make ``bundle`` carry ``history`` when written (its side tables and the manifest's ``history``, whose
    ``recorded_at`` is this update's time: an ``--as-of`` time that gives this version back)."""
    bundle.side[HISTORY_NODES_FILE] = history.nodes
    bundle.side[HISTORY_EDGES_FILE] = history.edges
    bundle.manifest[HISTORY_KEY] = history.summary() | {"recorded_at": recorded_at.isoformat()}


def _current(frame: pl.DataFrame, kind: Kind, recorded_at: datetime | None) -> pl.DataFrame:
    schema = history_schema(kind)
    marks = frame.select("id").with_columns(pl.lit(recorded_at, dtype=TIMES["recorded_at"]).alias("recorded_at"))
    return marks.select(
        [pl.col(c) if c in marks.columns else pl.lit(None, dtype=t).alias(c) for c, t in schema.items()]
    )


def _conform(frame: pl.DataFrame, kind: Kind) -> pl.DataFrame:
    return frame.select([
        pl.col(c).cast(t, strict=False) if c in frame.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in history_schema(kind).items()
    ])  # fmt: skip


def advance(previous: Bundle, history: History | None, new: Bundle, now: datetime) -> History:
    """The history after ``new`` replaced ``previous`` at ``now``.

    Rows of ``previous`` removed or changed in ``new`` are retired at ``now`` (whole rows, with the time they
    were recorded; a changed row's ``valid_to`` is its successor's ``valid_from``); new and changed rows are
    recorded at ``now``; unchanged rows keep their recording time. ``history`` is the previous bundle's
    (None: it kept none, so its rows date from when it was written, ``written_at`` in its manifest).
    """
    if history is None:
        written = previous.manifest.get("written_at")
        history = History.start(previous, datetime.fromisoformat(written) if written else None)
    return History(
        _advance_table(previous.nodes, history.nodes, new.nodes, "node", now),
        _advance_table(previous.edges, history.edges, new.edges, "edge", now),
    )


def _advance_table(
    old: pl.DataFrame, versions: pl.DataFrame, new: pl.DataFrame, kind: Kind, now: datetime
) -> pl.DataFrame:
    content = NODE_CONTENT if kind == "node" else EDGE_CONTENT
    stamp = pl.lit(now, dtype=TIMES["recorded_at"])
    retired = versions.filter(pl.col("retired_at").is_not_null())
    current = versions.filter(pl.col("retired_at").is_null()).select("id", "recorded_at").unique("id", keep="last")
    old_h = old.select("id", content_hash(old, content).alias("old_hash"))
    new_h = new.select("id", content_hash(new, content).alias("new_hash"), pl.col("valid_from").alias("next_from"))
    joined = old_h.join(new_h, on="id", how="left")
    gone = joined.filter(pl.col("new_hash").is_null() | (pl.col("new_hash") != pl.col("old_hash")))
    leaving = (
        old.join(gone.select("id", "next_from"), on="id", how="inner")
        .join(current, on="id", how="left")
        .with_columns(stamp.alias("retired_at"), pl.col("next_from").alias("valid_to"))
        .drop("next_from")
    )
    kept = (
        joined.filter(pl.col("new_hash") == pl.col("old_hash"))
        .select("id", pl.lit(True).alias("kept"))
        .join(current, on="id", how="left")
    )
    marks = (  # unchanged rows keep their recording time (null when unknown); new and changed ones are now
        new.select("id")
        .join(kept, on="id", how="left")
        .with_columns(pl.when(pl.col("kept")).then(pl.col("recorded_at")).otherwise(stamp).alias("recorded_at"))
        .drop("kept")
    )
    return pl.concat([_conform(retired, kind), _conform(leaving, kind), _conform(marks, kind)], how="vertical")


def parse_time(text: str) -> datetime:
    """An ``--as-of`` time: ISO 8601 date or date-time (``2026-11-24``, ``2026-11-24T06:30:00Z``,
    ``2026-11-24 06:30+01:00``); a time without offset is UTC, a date is its end (23:59:59.999999 UTC).

    Raises:
        UsageError: the text is not such a time.
    """
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--as-of {text!r} is not an ISO 8601 date or time (2026-11-24, 2026-11-24T06:30:00Z)."
        ) from None
    if len(text.strip()) == 10:  # a date: the whole day counts
        value = value.replace(hour=23, minute=59, second=59, microsecond=999_999)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _valid_at(frame: pl.DataFrame, at: datetime) -> pl.Expr:
    t = pl.lit(at, dtype=TIMES["recorded_at"])
    recorded = pl.col("recorded_at").is_null() | (pl.col("recorded_at") <= t)
    return recorded & (pl.col("retired_at").is_null() | (pl.col("retired_at") > t))


def as_of(bundle: Bundle, history: History, at: datetime) -> Bundle:
    """The graph as metakg had recorded it at ``at``: the current rows recorded by then and the retired
    versions that were current then. Edges whose ends were not there are left out."""
    tables: list[pl.DataFrame] = []
    for kind, frame in (("node", bundle.nodes), ("edge", bundle.edges)):
        versions = history.table(kind)  # type: ignore[arg-type]
        live = versions.filter(pl.col("retired_at").is_null())
        current_ids = live.filter(_valid_at(live, at))["id"]
        unknown = frame.join(versions.select("id"), on="id", how="anti")  # rows history does not list: always
        current = frame.filter(pl.col("id").is_in(current_ids.implode()))
        retired = versions.filter(pl.col("retired_at").is_not_null()).filter(_valid_at(versions, at))
        tables.append(pl.concat([current, unknown, retired.select(frame.columns)], how="vertical"))
    nodes = conform_nodes(tables[0]).unique("id", keep="first", maintain_order=True)
    edges = conform_edges(tables[1]).unique("id", keep="first", maintain_order=True)
    ids = nodes["id"].implode()
    edges = edges.filter(pl.col("src").is_in(ids) & pl.col("dst").is_in(ids))
    manifest = dict(bundle.manifest) | {"as_of": at.isoformat()}
    return Bundle(nodes=nodes, edges=edges, manifest=manifest)


def versions(bundle: Bundle, history: History | None, element_id: str) -> list[dict[str, Any]]:
    """Every version of the node or edge ``element_id``, oldest first: its row, ``kind``, ``recorded_at``,
    ``retired_at``, ``valid_from``, ``valid_to`` and ``current``."""
    found: list[dict[str, Any]] = []
    for kind, frame in (("node", bundle.nodes), ("edge", bundle.edges)):
        table = history.table(kind) if history is not None else None  # type: ignore[arg-type]
        current = frame.filter(pl.col("id") == element_id)
        if current.height:
            row = current.row(0, named=True)
            mark = (
                table.filter((pl.col("id") == element_id) & pl.col("retired_at").is_null())
                if table is not None
                else None
            )
            recorded = mark["recorded_at"][0] if mark is not None and mark.height else None
            found.append(
                {"kind": kind, **row, "recorded_at": recorded, "retired_at": None, "valid_to": None, "current": True}
            )
        if table is not None:
            for row in table.filter((pl.col("id") == element_id) & pl.col("retired_at").is_not_null()).iter_rows(
                named=True
            ):
                found.append({"kind": kind, **row, "current": False})
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(found, key=lambda v: (v["recorded_at"] or epoch, v["current"]))
