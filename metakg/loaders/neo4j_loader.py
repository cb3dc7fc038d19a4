"""Load a bundle into Neo4j: constraint and indexes first, then nodes, then edges, in UNWIND ... MERGE batches.

Loading is idempotent (MERGE on the entity id and on the edge id) and resumable: every committed batch is
recorded in a checkpoint file next to the bundle, so a re-run after an interruption skips what is done and
ends with the same counts. The driver is passed in (this module does not import neo4j).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from metakg.loaders import cypher
from metakg.schemas.bundle import Bundle
from metakg.schemas.diff import EDGE_CONTENT, NODE_CONTENT, content_hash
from metakg.schemas.tables import EDGE_SCHEMA, NODE_SCHEMA, conform_edges, conform_nodes, match_key_expr

CHECKPOINT_FILE = "neo4j_load_checkpoint.json"
Counter = Callable[[int, int], None]


@dataclass
class LoadReport:
    """What a load did and what Neo4j holds afterwards."""

    nodes_in_bundle: int
    edges_in_bundle: int
    nodes_in_neo4j: int | None  # None: not counted (``count=False``)
    edges_in_neo4j: int | None
    batches_run: int
    batches_skipped: int
    seconds: float
    checkpoint: str = "none"  # "none", "resumed", or why a checkpoint was discarded
    recorded_at: str = ""  # the time the written rows record (ISO, UTC): an --as-of time for this load

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return dict(self.__dict__)


RelTypes = Literal["typed", "generic"]
"""How relations become relationships: a type per relation, or one generic type with the relation as a
property (:data:`cypher.GENERIC_TYPE`)."""


def _iso_text(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _iso(column: str) -> pl.Expr:
    # times go as ISO text and become DateTimes in Cypher: converting Python datetimes in the driver took a
    # quarter of the load time
    return pl.col(column).dt.to_string("%Y-%m-%dT%H:%M:%S%.6fZ").alias(column)


def node_rows(nodes: pl.DataFrame, embeddings: pl.DataFrame | None = None) -> pl.DataFrame:
    """``id``, ``type``, ``valid_from`` (ISO text) plus a ``props`` struct per node (name keys for search, the
    alias keys and all names as texts for the full-text indexes, the content hash)."""
    frame = nodes.with_columns(
        content_hash(nodes, NODE_CONTENT),
        match_key_expr(pl.col("name")).alias("name_key"),
        pl.col("aliases").list.eval(match_key_expr(pl.element())).alias("alias_keys"),
        pl.concat_list(pl.col("name"), pl.col("aliases")).list.join(" | ").alias("all_names"),
    )
    # the alias keys as one text for the whitespace full-text index ``entity_alias_keys`` (null without aliases)
    aliased = pl.col("alias_keys").list.len() > 0
    frame = frame.with_columns(
        pl.when(aliased).then(pl.col("alias_keys").list.join(" | ")).otherwise(None).alias("alias_key_text")
    )
    columns = ["name", "type", "source", "description", "aliases", "xrefs", "revision", "name_key", "alias_keys",
               "alias_key_text", "all_names", "content_hash"]  # fmt: skip
    if embeddings is not None:
        frame = frame.join(embeddings.rename({"vector": "embedding"}), on="id", how="left", maintain_order="left")
        columns.append("embedding")
    return frame.select("id", "type", _iso("valid_from"), pl.struct(columns).alias("props"))


def edge_rows(edges: pl.DataFrame) -> pl.DataFrame:
    """``id, src, dst, rel, created_at, valid_from`` (times as ISO text) plus a ``props`` struct per edge
    (the other properties and the content hash)."""
    edges = edges.with_columns(content_hash(edges, EDGE_CONTENT))
    columns = ["display", "source", "confidence", "count", "record_ids", "importer", "model", "prompt_hash", "run_id",
               "content_hash"]  # fmt: skip
    return edges.select(
        "id", "src", "dst", "rel", _iso("created_at"), _iso("valid_from"), pl.struct(columns).alias("props")
    )


def _batches(
    frame: pl.DataFrame, key: str | None, size: int, columns: list[str]
) -> Iterator[tuple[str, str, list[Any]]]:
    """(group value, batch id, rows) for each batch of each group (one group when ``key`` is None), in a
    stable order."""
    groups = (
        [("", frame)] if key is None else [(v, frame.filter(pl.col(key) == v)) for v in sorted(frame[key].unique())]
    )
    for value, group in groups:
        rows = group.select(columns)
        for number, start in enumerate(range(0, rows.height, size)):
            yield value, f"{key or 'all'}={value}#{number}", rows.slice(start, size).to_dicts()


def dynamic_types(driver: Any, database: str) -> bool:
    """True when the server takes relationship types from parameters (Neo4j 5.26 and later, 2025.x)."""
    records, _summary, _keys = driver.execute_query(cypher.SERVER_VERSION, database_=database)
    parts = re.findall(r"\d+", str(records[0]["version"]))[:2]
    return len(parts) == 2 and (int(parts[0]), int(parts[1])) >= (5, 26)


def _checkpoint_key(bundle: Bundle, target: str) -> str:
    hashes = json.dumps(bundle.manifest.get("content_hashes", {}), sort_keys=True)
    return hashlib.sha256(f"{target}\n{hashes}".encode()).hexdigest()


def _count(driver: Any, database: str, query: str) -> int:
    records, _summary, _keys = driver.execute_query(query, database_=database)
    return int(records[0]["n"])


def _resume(driver: Any, database: str, key: str, checkpoint_path: Path) -> tuple[set[str], str, str]:
    """The batches a checkpoint records as done, what became of it (``none``, ``resumed`` or why it was
    discarded), and the load's token.

    The checkpoint is tied to the database by a marker node the load writes there: a checkpoint whose
    marker is gone (the database was wiped or replaced) would skip batches that are not in it any more.
    """
    records, _s, _k = driver.execute_query(cypher.LOAD_MARKER_GET, key=key, database_=database)
    marker = records[0]["token"] if records else None
    status = "none"
    if checkpoint_path.is_file():
        try:
            saved = json.loads(checkpoint_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
        if saved.get("key") != key:
            status = "discarded: it was written for another bundle or database"
        elif saved.get("token") is None or saved.get("token") != marker:
            status = "discarded: the database no longer holds the load it records (wiped or replaced)"
        else:
            return set(saved.get("done", [])), "resumed", str(marker)
    token = uuid.uuid4().hex
    driver.execute_query(cypher.LOAD_MARKER_SET, key=key, token=token, database_=database)
    return set(), status, token


def load_bundle(
    driver: Any,
    bundle: Bundle,
    *,
    database: str,
    target: str,
    batch_size: int = 5000,
    embeddings: pl.DataFrame | None = None,
    checkpoint_dir: Path | None = None,
    progress: Counter | None = None,
    statement_hook: Callable[[str], None] | None = None,
    ensure_schema: bool = True,
    dynamic: bool | None = None,
    count: bool = True,
    recorded_at: datetime | None = None,
    rel_types: RelTypes = "typed",
) -> LoadReport:
    """Load ``bundle`` into the database.

    Args:
        driver: a neo4j ``Driver``.
        bundle: a validated bundle.
        database: the database name.
        target: identifies the server and database in the checkpoint (the URI, never the password).
        batch_size: rows per transaction.
        embeddings: name embeddings (``id``, ``vector``) to store and index, when the bundle has them.
        checkpoint_dir: where the checkpoint file lives (the bundle directory); None disables resuming.
        progress: called with (rows done, rows in total) after each batch.
        statement_hook: called before each batch with its id (used by tests to interrupt a load).
        ensure_schema: create the constraints and indexes first (False when the caller knows they exist).
        dynamic: whether the server takes relationship types from parameters (None: ask it).
        count: count the nodes and edges in Neo4j afterwards (False: the report's Neo4j counts are None).
            The last three spare round trips to callers making many small loads (a store's upserts).
        recorded_at: the time every written row records as its ``recorded_at`` (default: now).
        rel_types: ``typed`` (a relationship type per relation) or ``generic`` (one type,
            :data:`cypher.GENERIC_TYPE`, the relation in ``r.rel``: for open-vocabulary graphs).

    Returns:
        The counts in Neo4j after the load.
    """
    start = time.perf_counter()
    checkpoint_path = checkpoint_dir / CHECKPOINT_FILE if checkpoint_dir is not None else None
    key = _checkpoint_key(bundle, target)
    done: set[str] = set()
    checkpoint, token = "none", ""
    if checkpoint_path is not None:
        done, checkpoint, token = _resume(driver, database, key, checkpoint_path)
    dims = None
    if embeddings is not None and embeddings.height:
        dims = len(embeddings["vector"][0])
    for statement in cypher.schema_statements(dims) if ensure_schema or dims else ():
        driver.execute_query(statement, database_=database)
    if dims is not None:
        model = bundle.manifest.get("embeddings", {}).get("model")
        driver.execute_query(
            cypher.EMBEDDING_META_SET, index=cypher.VECTOR_INDEX, model=model, dimensions=dims, database_=database
        )
    stamp = (recorded_at or datetime.now(UTC)).astimezone(UTC)
    recorded = pl.lit(_iso_text(stamp)).alias("recorded_at")
    nodes = node_rows(bundle.nodes, embeddings).with_columns(recorded)
    edges = edge_rows(bundle.edges).with_columns(recorded)
    total = nodes.height + edges.height
    finished = ran = skipped = 0

    def run_batches(
        frame: pl.DataFrame, kind: str, group: str | None, columns: list[str], query_for: Callable[[str], str]
    ) -> None:
        nonlocal finished, ran, skipped
        for value, batch_id, rows in _batches(frame, group, batch_size, columns):
            batch_key = f"{kind}:{batch_id}"
            if batch_key in done:
                skipped += 1
            else:
                if statement_hook is not None:
                    statement_hook(batch_key)
                query = query_for(value)
                with driver.session(database=database) as session:
                    session.execute_write(lambda tx, q=query, r=rows: tx.run(q, rows=r).consume())
                done.add(batch_key)
                ran += 1
                if checkpoint_path is not None:
                    state = {"key": key, "token": token, "done": sorted(done)}
                    checkpoint_path.write_text(json.dumps(state), encoding="utf-8")
            finished += len(rows)
            if progress is not None:
                progress(finished, total)

    run_batches(nodes, "nodes", "type", ["id", "props", "recorded_at", "valid_from"], cypher.merge_nodes)
    columns = ["id", "src", "dst", "created_at", "recorded_at", "valid_from", "props"]
    if rel_types == "generic":  # one relationship type: every relation in shared batches
        run_batches(edges.sort("rel", "id"), "edges", None, [*columns, "rel"], lambda _rel: cypher.MERGE_EDGES_GENERIC)
    elif dynamic_types(driver, database) if dynamic is None else dynamic:  # every relation in shared batches
        for rel in edges["rel"].unique():
            cypher.rel_type(rel)  # the same check as the per-type statements
        run_batches(edges.sort("rel", "id"), "edges", None, [*columns, "rel"], lambda _rel: cypher.MERGE_EDGES_ANY_TYPE)
    else:
        run_batches(edges, "edges", "rel", columns, cypher.merge_edges)
    if checkpoint_path is not None:
        checkpoint_path.unlink(missing_ok=True)  # complete: the next load starts (and merges) from scratch
        driver.execute_query(cypher.LOAD_MARKER_DELETE, key=key, database_=database)
    return LoadReport(
        nodes_in_bundle=bundle.nodes.height,
        edges_in_bundle=bundle.edges.height,
        nodes_in_neo4j=_count(driver, database, cypher.COUNT_NODES) if count else None,
        edges_in_neo4j=_count(driver, database, cypher.COUNT_EDGES) if count else None,
        batches_run=ran,
        batches_skipped=skipped,
        seconds=time.perf_counter() - start,
        checkpoint=checkpoint,
        recorded_at=_iso_text(stamp),
    )


@dataclass
class FollowReport:
    """What following a bundle did: rows loaded (new or changed), removed, left as they were, per table, and
    the database's counts per source afterwards."""

    sources: list[str]
    nodes_loaded: int
    edges_loaded: int
    nodes_removed: int
    edges_removed: int
    nodes_unchanged: int
    edges_unchanged: int
    nodes_kept_for_other_sources: int
    counts_by_source: dict[str, dict[str, int]]
    seconds: float
    load: dict[str, Any]
    history: bool = False
    recorded_at: str = ""  # the time the loaded and retired rows record (ISO, UTC)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return dict(self.__dict__)


def follow_bundle(
    driver: Any,
    bundle: Bundle,
    *,
    database: str,
    target: str,
    batch_size: int = 5000,
    embeddings: pl.DataFrame | None = None,
    progress: Counter | None = None,
    history: bool | None = None,
    rel_types: RelTypes = "typed",
) -> FollowReport:
    """Make the database hold exactly ``bundle`` for the bundle's sources, touching only what differs.

    The database's rows of those sources are read with their content hashes (kept on every row a load
    writes). Rows new or changed in the bundle are loaded (MERGE); edges of those sources gone from the
    bundle are deleted, then their nodes, unless an edge of another source still uses one. Rows of other
    sources are not touched. Every step is idempotent, so a run killed half-way and run again finishes the
    job: the rows already loaded then hash equal and are skipped.

    With ``history`` (None: as the sources' last load did), the version of every row about to be changed or
    deleted is first copied into a ``:MetakgVersion`` node retired now (:data:`cypher.ARCHIVE_EDGES`,
    :data:`cypher.ARCHIVE_NODES`); every loaded row carries ``recorded_at``, so :func:`graph_as_of` and
    :func:`versions_of` can answer for any time since.
    """
    start = time.perf_counter()
    now = datetime.now(UTC)
    sources = sorted({*bundle.nodes["source"].drop_nulls().to_list(), *bundle.edges["source"].drop_nulls().to_list()})
    nodes = node_rows(bundle.nodes, embeddings)
    edges = edge_rows(bundle.edges)
    held_nodes = _read(driver, database, cypher.SOURCE_NODES, sources, {"id": pl.String, "hash": pl.String})
    held_edges = _read(
        driver, database, cypher.SOURCE_EDGES, sources,
        {"id": pl.String, "src": pl.String, "dst": pl.String, "hash": pl.String},
    )  # fmt: skip
    node_hash = nodes.select("id", pl.col("props").struct.field("content_hash").alias("hash"))
    edge_hash = edges.select("id", pl.col("props").struct.field("content_hash").alias("hash"))
    load_nodes = node_hash.join(held_nodes, on=["id", "hash"], how="anti")["id"]
    load_edges = edge_hash.join(held_edges, on=["id", "hash"], how="anti")["id"]
    gone_edges = held_edges.join(edge_hash, on="id", how="anti")
    gone_nodes = held_nodes.join(node_hash, on="id", how="anti")["id"]

    def write(query: str, rows: list[Any], **params: Any) -> None:
        for begin in range(0, len(rows), batch_size):
            chunk = rows[begin : begin + batch_size]
            with driver.session(database=database) as session:
                session.execute_write(lambda tx, c=chunk: tx.run(query, rows=c, ids=c, **params).consume())

    if history is None:
        records, _s, _k = driver.execute_query(cypher.SOURCE_HISTORY, sources=sources, database_=database)
        history = bool(records and records[0]["history"])
    if history:
        driver.execute_query(cypher.VERSION_INDEX, database_=database)
        stamp = {"now": _iso_text(now), "epoch": cypher.EPOCH}
        successors = {
            "node": nodes.select("id", pl.col("valid_from").alias("valid_to")),
            "edge": edges.select("id", pl.col("valid_from").alias("valid_to")),
        }
        leaving_edges = pl.concat(
            [
                gone_edges.select("id", "src", "dst"),
                held_edges.filter(pl.col("id").is_in(load_edges.implode())).select("id", "src", "dst"),
            ]
        ).join(successors["edge"], on="id", how="left")
        write(cypher.ARCHIVE_EDGES, leaving_edges.to_dicts(), **stamp)
        leaving_nodes = pl.concat(
            [
                gone_nodes.to_frame("id").with_columns(changed=pl.lit(False)),
                held_nodes.filter(pl.col("id").is_in(load_nodes.implode())).select("id", changed=pl.lit(True)),
            ]
        ).join(successors["node"], on="id", how="left")
        write(cypher.ARCHIVE_NODES, leaving_nodes.to_dicts(), sources=sources, **stamp)

    write(cypher.DELETE_EDGES, gone_edges.select("id", "src", "dst").to_dicts())
    before = _count(driver, database, cypher.COUNT_NODES)
    write(cypher.DELETE_NODES, gone_nodes.to_list(), sources=sources)
    removed_nodes = before - _count(driver, database, cypher.COUNT_NODES)
    subset = Bundle(
        bundle.nodes.filter(pl.col("id").is_in(load_nodes.implode())),
        bundle.edges.filter(pl.col("id").is_in(load_edges.implode())),
        manifest=bundle.manifest,
    )
    loaded = load_bundle(
        driver, subset, database=database, target=target, batch_size=batch_size,
        embeddings=embeddings, progress=progress, count=False, recorded_at=now, rel_types=rel_types,
    )  # fmt: skip
    counts: dict[str, dict[str, int]] = {}
    for query, key in ((cypher.COUNTS_BY_SOURCE_NODES, "nodes"), (cypher.COUNTS_BY_SOURCE_EDGES, "edges")):
        records, _summary, _keys = driver.execute_query(query, database_=database)
        for record in records:
            counts.setdefault(str(record["source"]), {"nodes": 0, "edges": 0})[key] = int(record["n"])
    bundle_hash = json.dumps(bundle.manifest.get("content_hashes", {}), sort_keys=True)
    driver.execute_query(
        cypher.SOURCE_MARK,
        sources=sources,
        bundle=hashlib.sha256(bundle_hash.encode()).hexdigest(),
        nodes={s: counts.get(s, {}).get("nodes", 0) for s in sources},
        edges={s: counts.get(s, {}).get("edges", 0) for s in sources},
        history=history,
        database_=database,
    )
    return FollowReport(
        sources=sources,
        nodes_loaded=subset.nodes.height,
        edges_loaded=subset.edges.height,
        nodes_removed=removed_nodes,
        edges_removed=gone_edges.height,
        nodes_unchanged=bundle.nodes.height - subset.nodes.height,
        edges_unchanged=bundle.edges.height - subset.edges.height,
        nodes_kept_for_other_sources=gone_nodes.len() - removed_nodes,
        counts_by_source=counts,
        seconds=time.perf_counter() - start,
        load=loaded.as_dict(),
        history=history,
        recorded_at=_iso_text(now),
    )


def _read(driver: Any, database: str, query: str, sources: list[str], schema: dict[str, Any]) -> pl.DataFrame:
    """The rows of a read query as a frame (streamed from one session)."""
    with driver.session(database=database, default_access_mode="READ") as session:
        rows = [record.values() for record in session.run(query, sources=sources)]
    return pl.DataFrame(rows, schema=schema, orient="row")


def _plain(value: Any) -> Any:
    """A driver value as Python: Neo4j times as UTC datetimes."""
    to_native = getattr(value, "to_native", None)
    if to_native is None:
        return value
    native = to_native()
    return native.astimezone(UTC) if isinstance(native, datetime) and native.tzinfo else native


def _version_frames(node_rows_: list[dict[str, Any]], edge_rows_: list[dict[str, Any]]) -> Bundle:
    nodes = conform_nodes(pl.DataFrame(node_rows_, schema=dict(NODE_SCHEMA), strict=False))
    edges = conform_edges(pl.DataFrame(edge_rows_, schema=dict(EDGE_SCHEMA), strict=False))
    return Bundle(
        nodes.unique("id", keep="first", maintain_order=True), edges.unique("id", keep="first", maintain_order=True)
    )


def _row(properties: dict[str, Any], columns: Any, **extra: Any) -> dict[str, Any]:
    return {c: _plain(properties.get(c)) for c in columns} | extra


def graph_as_of(driver: Any, database: str, at: datetime) -> Bundle:
    """The graph the database held at ``at``: the rows recorded by then that are still current, and the
    versions (``:MetakgVersion``) that were current then. Rows loaded before history was kept count as
    always there."""
    params = {"at": _iso_text(at), "epoch": cypher.EPOCH}
    with driver.session(database=database, default_access_mode="READ") as session:
        nodes = [_row(r["p"], NODE_SCHEMA) for r in session.run(cypher.AS_OF_NODES, params)]
        edges = [
            _row(r["p"], EDGE_SCHEMA, src=r["src"], dst=r["dst"], rel=r["rel"])
            for r in session.run(cypher.AS_OF_EDGES, params)
        ]
    bundle = _version_frames(nodes, edges)
    bundle.manifest = {"as_of": at.isoformat()}
    return bundle


def versions_of(driver: Any, database: str, element_id: str) -> list[dict[str, Any]]:
    """Every version the database holds of the node or edge ``element_id``, oldest first: its properties,
    ``kind``, ``recorded_at``, ``retired_at``, ``valid_from``, ``valid_to`` and ``current``."""
    found: list[dict[str, Any]] = []
    with driver.session(database=database, default_access_mode="READ") as session:
        for r in session.run(cypher.VERSIONS_OF, id=element_id):
            schema = NODE_SCHEMA if r["kind"] == "node" else EDGE_SCHEMA
            extra = {"src": r["src"], "dst": r["dst"], "rel": r["rel"]} if r["kind"] == "edge" else {}
            row = _row(r["p"], [*schema, "recorded_at", "retired_at", "valid_to"], **extra)
            if row["recorded_at"] == datetime(1970, 1, 1, tzinfo=UTC):
                row["recorded_at"] = None  # recorded before history was kept
            found.append({"kind": r["kind"], **row, "current": r["current"]})
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(found, key=lambda v: (v["recorded_at"] or epoch, v["current"]))
