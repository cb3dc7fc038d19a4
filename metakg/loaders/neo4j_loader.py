"""Load a bundle into Neo4j: constraint and indexes first, then nodes, their name keys, then edges, in
UNWIND ... MERGE batches.

The graph's nodes and relationships carry the bundle's columns only; what metakg keeps for itself (which
sources were loaded and how, the embedding model, the relationship layout, an unfinished load, the name keys
search uses) lives on unlabelled bookkeeping nodes that schema readers never list (see
:mod:`metakg.loaders.cypher`). A load that follows a bundle reads the database's rows back and compares
their content with the bundle's, hashed alike, so nothing on a row exists for metakg's sake alone.

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
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from metakg.errors import StoreError, UsageError
from metakg.loaders import cypher
from metakg.progress import Counter
from metakg.schemas.bundle import Bundle
from metakg.schemas.diff import EDGE_CONTENT, NODE_CONTENT, content_hash
from metakg.schemas.tables import EDGE_SCHEMA, NODE_SCHEMA, conform_edges, conform_nodes, match_key_expr

CHECKPOINT_FILE = "neo4j_load_checkpoint.json"

RelTypes = Literal["auto", "typed", "generic"]
"""How relations become relationships: a type per relation (``typed``), or one generic type with the relation
as a property (``generic``, :data:`cypher.GENERIC_TYPE`); ``auto``: as the database has them, else by the
graph (:func:`layout_for`)."""
GENERIC_ABOVE = 64
"""A graph of more distinct relations than this is loaded generic by ``auto``: an open vocabulary (an LLM's
1,685 relations for CommonsenseQA) as relationship types makes a schema of thousands of patterns, which no
LLM reading it for Text2Cypher can use; PrimeKG's 30 relations or a Wikidata subset's properties stay types."""
#: the node columns a load writes (the content a follow-mode load compares is :data:`NODE_CONTENT`)
NODE_PROPERTIES = ["name", "type", "source", "description", "aliases", "xrefs", "properties", "revision"]
#: the edge columns a load writes besides its endpoints, relation and times (the statements name them)
EDGE_PROPERTIES = cypher.EDGE_PROPERTIES
EMBEDDING_META = {"field": "name", "pooling": "mean", "normalised": True, "similarity": "cosine"}
"""What the vector index's vectors are, besides their model and dimension (kept with them, so a reader such
as neo4j-graphrag's retrievers can embed its queries alike)."""


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
    recorded_at: str = ""  # the time the written rows record (ISO, UTC), when history is kept
    rel_types: str = "typed"  # the relationship layout the edges were written in
    migrated: bool = False  # the database held the bookkeeping of an earlier metakg on its rows; moved off

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return dict(self.__dict__)


def _iso_text(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _iso(column: str) -> pl.Expr:
    # times go as ISO text and become DateTimes in Cypher: converting Python datetimes in the driver took a
    # quarter of the load time
    return pl.col(column).dt.to_string("%Y-%m-%dT%H:%M:%S%.6fZ").alias(column)


def node_rows(nodes: pl.DataFrame, embeddings: pl.DataFrame | None = None) -> pl.DataFrame:
    """``id``, ``type``, ``valid_from`` (ISO text) plus a ``props`` struct per node: its columns, and its name
    embedding when ``embeddings`` has one."""
    columns = list(NODE_PROPERTIES)
    frame = nodes
    if embeddings is not None:
        frame = frame.join(embeddings.rename({"vector": "embedding"}), on="id", how="left", maintain_order="left")
        columns.append("embedding")
    return frame.select("id", "type", _iso("valid_from"), pl.struct(columns).alias("props"))


def edge_rows(edges: pl.DataFrame) -> pl.DataFrame:
    """``id, src, dst, rel, created_at, valid_from`` (times as ISO text) plus a ``props`` struct per edge."""
    return edges.select(
        "id", "src", "dst", "rel", _iso("created_at"), _iso("valid_from"), pl.struct(EDGE_PROPERTIES).alias("props")
    )


def name_keys(nodes: pl.DataFrame) -> pl.DataFrame:
    """``id`` and ``keys``: the distinct normalised forms of each node's name and aliases, what the store's
    name search looks up. A name without a letter or digit has the empty key, which no search asks for; it
    marks the node as keyed all the same."""
    names = pl.concat_list(pl.col("name"), pl.col("aliases").fill_null(pl.lit([], dtype=pl.List(pl.String))))
    keys = names.list.eval(match_key_expr(pl.element())).list.unique(maintain_order=True)
    return nodes.select("id", keys.alias("keys"))


def layout_for(rels: pl.Series, requested: RelTypes = "auto") -> Literal["typed", "generic"]:
    """The layout ``requested``, or for ``auto`` the one the graph's relations call for: generic beyond
    :data:`GENERIC_ABOVE` distinct relations, typed otherwise."""
    if requested != "auto":
        return requested
    return "generic" if rels.n_unique() > GENERIC_ABOVE else "typed"


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


# ---------------------------------------------------------------------------- bookkeeping
def read_meta(driver: Any, database: str, kind: str) -> dict[str, dict[str, Any]]:
    """The bookkeeping records of ``kind``, by name."""
    records, _s, _k = driver.execute_query(cypher.META_GET, kind=kind, database_=database)
    return {r["name"]: dict(r["p"]) for r in records}


def write_meta(driver: Any, database: str, kind: str, name: str, props: dict[str, Any]) -> None:
    """Make or update the bookkeeping record ``kind``/``name``."""
    driver.execute_query(cypher.META_ENSURE, kind=kind, name=name, database_=database)
    driver.execute_query(cypher.META_SET, kind=kind, name=name, props=props, database_=database)


def recorded_layout(driver: Any, database: str) -> Literal["typed", "generic"] | None:
    """The relationship layout the database's last load wrote (None: never loaded by metakg)."""
    layout = read_meta(driver, database, "layout").get("relations", {}).get("rel_types")
    return "typed" if layout == "typed" else "generic" if layout == "generic" else None


def keeps_history(driver: Any, database: str) -> bool:
    """Whether a source of the database keeps history: then every row written records its time, so the graph
    read as of an earlier time leaves out what arrived later, whatever its source."""
    return any(bool(meta.get("history")) for meta in read_meta(driver, database, "source").values())


def choose_layout(driver: Any, database: str, rels: pl.Series, requested: RelTypes) -> Literal["typed", "generic"]:
    """The layout a load writes: the one ``requested``, or for ``auto`` the one the database's last load wrote,
    else the one the graph calls for (:func:`layout_for`)."""
    if requested != "auto":
        return requested
    return recorded_layout(driver, database) or layout_for(rels)


#: the longest string (UTF-8 bytes) a load writes into an indexed property: Neo4j's range indexes hold keys of
#: at most 8,191 bytes (with a little room for the key's own framing)
MAX_INDEXED_BYTES = 8_000


def check_indexable(bundle: Bundle) -> None:
    """Refuse a bundle holding a node id, an edge id or a name key longer than Neo4j can index, before anything
    is written (the server's error came mid-load as a traceback).

    Raises:
        StoreError: naming the first such row and its length.
    """
    keys = name_keys(bundle.nodes.select("id", "name", "aliases")).explode("keys").drop_nulls("keys")
    for what, frame, column in (
        ("node id", bundle.nodes, "id"), ("edge id", bundle.edges, "id"), ("name", keys, "keys"),
    ):  # fmt: skip
        long = frame.filter(pl.col(column).str.len_bytes() > MAX_INDEXED_BYTES)
        if long.height:
            first = long.row(0, named=True)
            node = f" of node {first['id'][:80]}" if what == "name" else ""
            raise StoreError(
                f"a {what}{node} is {len(first[column].encode()):,} bytes long ({first[column][:60]!r}...): Neo4j "
                f"indexes strings of at most {MAX_INDEXED_BYTES:,} bytes; {long.height:,} row(s) are longer. "
                "Shorten them in the source, or leave those rows out of the bundle."
            )


def check_layout(driver: Any, database: str, layout: str, bundle: Bundle) -> None:
    """Refuse to write ``bundle``'s edges in ``layout`` when the database keeps other sources' edges in the
    other layout: its schema and a reader's queries know one layout (a mixed database once described its
    relations wrongly, and a later merge load wrote every edge of a source a second time).

    Raises:
        UsageError: naming the database's layout, the sources that keep it and the option that fits.
    """
    recorded = recorded_layout(driver, database)
    if recorded is None or recorded == layout:
        return
    mine = sorted({*bundle.nodes["source"].drop_nulls().to_list(), *bundle.edges["source"].drop_nulls().to_list()})
    found, _summary, _keys = driver.execute_query(cypher.OTHER_EDGE_SOURCES, sources=mine, database_=database)
    others = sorted(str(r["source"]) for r in found)
    if others:
        raise UsageError(
            f"the database keeps its edges in the {recorded} relationship layout (sources {', '.join(others[:5])}"
            f"{' ...' if len(others) > 5 else ''}); writing these in the {layout} layout would mix two layouts. "
            f"Load with --rel-types {recorded} (or auto), or into another database."
        )


def migrate_legacy(driver: Any, database: str) -> bool:
    """Move the bookkeeping an earlier metakg kept on the graph (``content_hash``, ``name_key``, ``alias_keys``,
    ``alias_key_text`` and ``all_names`` on rows; ``:MetakgSource``, ``:MetakgEmbedding`` and ``:MetakgLoad``
    nodes; the indexes on them) off it, keeping what it says; True when there was any. The name keys are
    written again afterwards by :func:`write_missing_keys`; ``recorded_at`` and ``:MetakgVersion`` stay (they
    are the history's)."""
    records, _s, _k = driver.execute_query(cypher.INDEXES, database_=database)
    indexes = set(records[0]["names"]) if records else set()
    legacy_indexes = [name for name in cypher.LEGACY_INDEXES if name in indexes]
    nodes, _s, _k = driver.execute_query(cypher.LEGACY_NODES, database_=database)
    if not legacy_indexes and not nodes:
        return False
    for record in nodes:
        labels, props = set(record["labels"]), dict(record["p"])
        if "MetakgSource" in labels and props.get("name"):
            write_meta(driver, database, "source", str(props.pop("name")), props)
        elif "MetakgEmbedding" in labels:
            write_meta(driver, database, "embedding", str(props.pop("index", cypher.VECTOR_INDEX)), props)
    driver.execute_query(cypher.LEGACY_DELETE, database_=database)
    for name in [*legacy_indexes, *([cypher.NAMES_INDEX] if legacy_indexes else [])]:
        driver.execute_query(f"DROP INDEX `{name}` IF EXISTS", database_=database)  # a fixed name, checked above
    with driver.session(database=database) as session:  # IN TRANSACTIONS needs an auto-commit query
        session.run(cypher.LEGACY_NODE_PROPS).consume()
        session.run(cypher.LEGACY_EDGE_PROPS).consume()
    return True


def write_keys(driver: Any, database: str, keys: pl.DataFrame, batch_size: int) -> None:
    """Replace the name keys of the nodes of ``keys`` (``id``, ``keys``) with those given."""
    driver.execute_query(cypher.META_ENSURE, kind="keys", name="names", database_=database)
    rows = keys.to_dicts()
    for begin in range(0, len(rows), batch_size):
        chunk = rows[begin : begin + batch_size]
        with driver.session(database=database) as session:
            session.execute_write(lambda tx, c=chunk: tx.run(cypher.KEYS_REPLACE, rows=c).consume())


def write_missing_keys(driver: Any, database: str, batch_size: int) -> int:
    """Give every entity without name keys its keys (nodes written by ``neo4j-admin database import`` of
    other files, or by an earlier metakg); returns how many were missing."""
    with driver.session(database=database, default_access_mode="READ") as session:
        rows = [record.values() for record in session.run(cypher.UNKEYED)]
    if not rows:
        return 0
    frame = pl.DataFrame(rows, schema={"id": pl.String, "name": pl.String, "aliases": pl.List(pl.String)}, orient="row")
    write_keys(driver, database, name_keys(frame), batch_size)
    return frame.height


def _checkpoint_key(bundle: Bundle, target: str) -> str:
    hashes = json.dumps(bundle.manifest.get("content_hashes", {}), sort_keys=True)
    return hashlib.sha256(f"{target}\n{hashes}".encode()).hexdigest()


def _count(driver: Any, database: str, query: str) -> int:
    records, _summary, _keys = driver.execute_query(query, database_=database)
    return int(records[0]["n"])


def _resume(driver: Any, database: str, key: str, checkpoint_path: Path) -> tuple[set[str], str, str]:
    """The batches a checkpoint records as done, what became of it (``none``, ``resumed`` or why it was
    discarded), and the load's token.

    The checkpoint is tied to the database by a bookkeeping record the load writes there (``load``): a
    checkpoint whose record is gone (the database was wiped or replaced) would skip batches that are not in
    it any more.
    """
    marker = read_meta(driver, database, "load").get(key, {}).get("token")
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
    write_meta(driver, database, "load", key, {"token": token})
    return set(), status, token


def _with_times(frame: pl.DataFrame, kept: pl.DataFrame | None) -> pl.DataFrame:
    """``frame``'s ``recorded_at`` with the times ``kept`` gives for its rows (rows written again unchanged),
    a null one included: a row of a source loaded before any kept history has none, and reads as there from
    the start (stamping it now once hid a whole source from the reads of earlier times)."""
    if kept is None or kept.is_empty():
        return frame
    marked = kept.rename({"recorded_at": "_kept"}).with_columns(pl.lit(True).alias("_is_kept"))
    joined = frame.join(marked, on="id", how="left", maintain_order="left")
    times = pl.when(pl.col("_is_kept")).then(pl.col("_kept")).otherwise(pl.col("recorded_at"))
    return joined.with_columns(times.alias("recorded_at")).drop("_kept", "_is_kept")


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
    recorded_at: str = ""  # the time the loaded and retired rows record (ISO, UTC), when history is kept
    rel_types: str = "typed"  # the relationship layout the edges are in now
    edges_relaid: int = 0  # edges whose content was unchanged, moved to the requested relationship layout
    nodes_embedded: int = 0  # nodes whose content was unchanged that got their name embedding (an import)
    keys_added: int = 0  # entities given name keys they lacked (an import, an earlier metakg)
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return dict(self.__dict__)


def _held(rows: list[Any], columns: list[str], schema: dict[str, Any], content: tuple[str, ...]) -> pl.DataFrame:
    """The rows a database holds (``id``, content map ``c``, extras) as a frame of the bundle's types, with the
    content hash a bundle's rows get (:func:`content_hash`)."""
    flat = [{**{c: row[c] for c in columns}, **(row["c"] or {})} for row in rows]
    frame = pl.DataFrame(flat, schema={**{c: schema[c] for c in columns}, **{c: schema[c] for c in content}})
    return frame.with_columns(content_hash(frame, content).alias("hash"))


@dataclass(frozen=True)
class _Plan:
    """What following a bundle has to do, from the database's rows of its sources (``held_*``, hashed as the
    bundle's are): the rows new or changed, those gone from the bundle, the unchanged edges to move to
    another relationship layout (``relaid``) and the unchanged nodes lacking their name embedding."""

    held_nodes: pl.DataFrame
    held_edges: pl.DataFrame
    changed_nodes: pl.Series
    changed_edges: pl.Series
    gone_nodes: pl.Series
    gone_edges: pl.DataFrame
    relaid: pl.DataFrame
    unembedded: pl.Series


class _Batches:
    """Runs the UNWIND batches of one load, each in its own write transaction, skipping those an interrupted
    load committed (``done``) and recording each one committed in the checkpoint file."""

    def __init__(self, loader: Neo4jLoader, done: set[str], checkpoint: tuple[Path, str, str] | None,
                 total: int, hook: Callable[[str], None] | None) -> None:  # fmt: skip
        self.loader, self.done, self.checkpoint, self.total, self.hook = loader, done, checkpoint, total, hook
        self.finished = self.ran = self.skipped = 0

    def run(
        self, frame: pl.DataFrame, kind: str, group: str | None, columns: list[str], query_for: Callable[[str], str]
    ) -> None:
        """Every batch of ``frame`` not done yet, up to ``loader.writers`` transactions at once: while the server
        commits one batch, the next is built and sent (a checkpoint records only committed batches)."""
        loader = self.loader
        pending: deque[tuple[Future[None], str, int]] = deque()
        with ThreadPoolExecutor(max_workers=loader.writers, thread_name_prefix="metakg-neo4j-writer") as pool:
            try:
                for value, batch_id, rows in _batches(frame, group, loader.batch_size, columns):
                    batch_key = f"{kind}:{batch_id}"
                    if batch_key in self.done:
                        self.skipped += 1
                        self._advance(len(rows))
                        continue
                    if self.hook is not None:
                        self.hook(batch_key)
                    pending.append((pool.submit(self._write, query_for(value), rows), batch_key, len(rows)))
                    while len(pending) >= loader.writers:
                        self._finish(*pending.popleft())
                while pending:
                    self._finish(*pending.popleft())
            except BaseException:
                for future, _key, _n in pending:
                    future.cancel()
                for future, batch_key, _n in pending:  # a batch that committed meanwhile is recorded
                    if not future.cancelled() and future.exception() is None:
                        self._committed(batch_key)
                raise

    def _write(self, query: str, rows: list[Any]) -> None:
        loader = self.loader
        with loader.driver.session(database=loader.database) as session:
            session.execute_write(lambda tx: tx.run(query, rows=rows).consume())

    def _finish(self, future: Future[None], batch_key: str, size: int) -> None:
        future.result()
        self._committed(batch_key)
        self._advance(size)

    def _committed(self, batch_key: str) -> None:
        self.done.add(batch_key)
        self.ran += 1
        if self.checkpoint is not None:
            path, key, token = self.checkpoint
            path.write_text(json.dumps({"key": key, "token": token, "done": sorted(self.done)}), "utf-8")

    def _advance(self, size: int) -> None:
        self.finished += size
        if self.loader.progress is not None:
            self.loader.progress(self.finished, self.total)


class Neo4jLoader:
    """Writes bundles into one Neo4j database: :meth:`load` merges a bundle's rows in (resumable batches),
    :meth:`follow` makes the database hold exactly the bundle for the bundle's sources.

    Args:
        driver: a neo4j ``Driver`` (the caller's: it closes it).
        database: the database name.
        target: identifies the server and database in the checkpoint (the URI, never the password).
        batch_size: rows per transaction.
        writers: transactions in flight at once (each batch in its own; 1: one after the other).
        embeddings: name embeddings (``id``, ``vector``) to store and index, when the bundle has them.
        progress: called with (rows done, rows in total) after each batch.
        rel_types: ``typed``, ``generic`` or ``auto`` (:data:`RelTypes`).
    """

    def __init__(
        self,
        driver: Any,
        *,
        database: str,
        target: str,
        batch_size: int = 5000,
        embeddings: pl.DataFrame | None = None,
        progress: Counter | None = None,
        rel_types: RelTypes = "auto",
        writers: int = 2,
    ) -> None:
        self.driver, self.database, self.target = driver, database, target
        self.batch_size, self.embeddings, self.progress, self.rel_types = batch_size, embeddings, progress, rel_types
        self.writers = max(1, writers)

    # ------------------------------------------------------------------ load (merge)
    def load(
        self,
        bundle: Bundle,
        *,
        checkpoint_dir: Path | None = None,
        statement_hook: Callable[[str], None] | None = None,
        ensure_schema: bool = True,
        dynamic: bool | None = None,
        count: bool = True,
        recorded_at: datetime | None = None,
        kept_times: pl.DataFrame | None = None,
        absent_edges: pl.Series | None = None,
    ) -> LoadReport:
        """Load ``bundle`` (validated) into the database: nodes, their name keys, then edges.

        Args:
            checkpoint_dir: where the checkpoint file lives (the bundle directory); None disables resuming.
            statement_hook: called before each batch with its id (used by tests to interrupt a load).
            ensure_schema: create the constraints and indexes first (False when the caller knows they exist).
            dynamic: whether the server takes relationship types from parameters (None: ask it).
            count: count the nodes and edges in Neo4j afterwards (False: the report's Neo4j counts are None).
                The last three spare round trips to callers making many small loads (a store's upserts).
            recorded_at: with history, the time every written row records as its ``recorded_at``; None writes
                no recording time (no history).
            kept_times: with history, rows (``id``, ``recorded_at`` ISO text) written again without a change of
                content (an edge moved to another relationship layout), which keep the time they had.
            absent_edges: ids of edges the caller knows the database does not hold (a follow's plan): they are
                created, not merged (MERGE looks along both endpoints' edges first, which costs most at hubs).

        Returns:
            The counts in Neo4j after the load.
        """
        driver, database = self.driver, self.database
        start = time.perf_counter()
        check_indexable(bundle)
        checkpoint_path = checkpoint_dir / CHECKPOINT_FILE if checkpoint_dir is not None else None
        key = _checkpoint_key(bundle, self.target)
        migrated = migrate_legacy(driver, database) if ensure_schema else False
        done: set[str] = set()
        checkpoint, token = "none", ""
        if checkpoint_path is not None:
            done, checkpoint, token = _resume(driver, database, key, checkpoint_path)
        layout = choose_layout(driver, database, bundle.edges["rel"], self.rel_types)
        check_layout(driver, database, layout, bundle)  # before anything is written
        self._ensure_schema(bundle, ensure_schema)
        if recorded_at is None and keeps_history(driver, database):
            recorded_at = datetime.now(UTC)  # a database keeping history records when every row arrived
        history = recorded_at is not None
        nodes, edges = node_rows(bundle.nodes, self.embeddings), edge_rows(bundle.edges)
        if history:
            stamp = pl.lit(_iso_text(recorded_at)).alias("recorded_at")  # type: ignore[arg-type]
            nodes, edges = (_with_times(f.with_columns(stamp), kept_times) for f in (nodes, edges))
        keys = name_keys(bundle.nodes)
        saving = (checkpoint_path, key, token) if checkpoint_path is not None else None
        batches = _Batches(self, done, saving, nodes.height + keys.height + edges.height, statement_hook)
        times = ["recorded_at"] if history else []
        batches.run(
            nodes, "nodes", "type", ["id", "props", "valid_from", *times],
            lambda t: cypher.merge_nodes(t, history=history),
        )  # fmt: skip
        if keys.height:
            driver.execute_query(cypher.META_ENSURE, kind="keys", name="names", database_=database)
        batches.run(keys, "keys", None, ["id", "keys"], lambda _v: cypher.KEYS_REPLACE)
        if absent_edges is not None and absent_edges.len():
            absent = pl.col("id").is_in(absent_edges.implode())
            self._write_edges(batches, edges.filter(absent), layout, history, dynamic, create=True)
            edges = edges.filter(~absent)
        self._write_edges(batches, edges, layout, history, dynamic)
        if bundle.edges.height:
            write_meta(driver, database, "layout", "relations", {"rel_types": layout})
        if checkpoint_path is not None:
            checkpoint_path.unlink(missing_ok=True)  # complete: the next load starts (and merges) from scratch
            driver.execute_query(cypher.META_DELETE, kind="load", name=key, database_=database)
        return LoadReport(
            nodes_in_bundle=bundle.nodes.height,
            edges_in_bundle=bundle.edges.height,
            nodes_in_neo4j=_count(driver, database, cypher.COUNT_NODES) if count else None,
            edges_in_neo4j=_count(driver, database, cypher.COUNT_EDGES) if count else None,
            batches_run=batches.ran,
            batches_skipped=batches.skipped,
            seconds=time.perf_counter() - start,
            checkpoint=checkpoint,
            recorded_at=_iso_text(recorded_at) if recorded_at is not None else "",
            rel_types=layout,
            migrated=migrated,
        )

    def _ensure_schema(self, bundle: Bundle, ensure: bool) -> None:
        """The constraints and indexes (the vector index when there are embeddings, with its model)."""
        embeddings = self.embeddings
        dims = len(embeddings["vector"][0]) if embeddings is not None and embeddings.height else None
        if dims is not None:
            self._fit_vector_index(dims, bundle.nodes["id"], bundle.manifest.get("embeddings", {}).get("model"))
        for statement in cypher.schema_statements(dims) if ensure or dims else ():
            self.driver.execute_query(statement, database_=self.database)
        if dims is not None:
            model = bundle.manifest.get("embeddings", {}).get("model")
            meta = {"model": model, "dimensions": dims} | EMBEDDING_META
            write_meta(self.driver, self.database, "embedding", cypher.VECTOR_INDEX, meta)

    def _fit_vector_index(self, dims: int, ids: pl.Series, model: str | None = None) -> None:
        """Make way for name embeddings of ``dims`` dimensions made by ``model``: a vector index built for
        another dimension would leave every new vector out of it without a word, so it is dropped (and made
        again for ``dims``) when no node outside the bundle (``ids``) keeps an embedding of its dimension; and
        vectors of another model than the database's, of the same dimension, would share one index with them,
        their similarities meaningless, so they are refused while nodes outside the bundle keep those.

        Raises:
            StoreError: nodes the load leaves alone hold embeddings of the index's dimension, or of another
                model.
        """
        stored = read_meta(self.driver, self.database, "embedding").get(cypher.VECTOR_INDEX, {}).get("model")
        if stored and model and stored != model:
            other, _summary, _keys = self.driver.execute_query(
                cypher.OTHER_EMBEDDED, ids=ids.to_list(), database_=self.database
            )
            if other:
                raise StoreError(
                    f"this database's name embeddings were made by {stored} (e.g. on {other[0]['id']}) and this "
                    f"bundle's by {model}: one vector index cannot hold both. Embed the bundle with {stored} "
                    "(metakg embed, embedder settings), or load it into another database."
                )
        held = vector_index_dims(self.driver, self.database)
        if held in (None, dims):
            return
        other, _summary, _keys = self.driver.execute_query(
            cypher.OTHER_EMBEDDING, dims=dims, ids=ids.to_list(), database_=self.database
        )
        if other:
            raise StoreError(
                f"this database's vector index is built for {held}-dimension name "
                f"embeddings, which other nodes keep (e.g. {other[0]['id']}), and this bundle's have {dims}: embed "
                "every bundle of this database with one model, or load this one into another database."
            )
        self.driver.execute_query(f"DROP INDEX {cypher.VECTOR_INDEX} IF EXISTS", database_=self.database)

    def _write_edges(
        self,
        batches: _Batches,
        edges: pl.DataFrame,
        layout: str,
        history: bool,
        dynamic: bool | None,
        *,
        create: bool = False,
    ) -> None:
        """The edges in ``layout``: one generic type, or a type per relation (in shared batches when the server
        takes types from parameters, else a statement per relation); ``create``: edges known to be absent."""
        columns = ["id", "src", "dst", "created_at", "valid_from", "props", *(["recorded_at"] if history else [])]
        kind = "new edges" if create else "edges"  # their own batch ids in a checkpoint
        if layout == "generic":  # one relationship type: every relation in shared batches
            query = cypher.merge_edges_generic(history=history, create=create)
            batches.run(edges.sort("rel", "id"), kind, None, [*columns, "rel"], lambda _rel: query)
        elif dynamic_types(self.driver, self.database) if dynamic is None else dynamic:
            for rel in edges["rel"].unique():
                cypher.rel_type(rel)  # the same check as the per-type statements
            query = cypher.merge_edges_any_type(history=history, create=create)
            batches.run(edges.sort("rel", "id"), kind, None, [*columns, "rel"], lambda _rel: query)
        else:
            batches.run(
                edges, kind, "rel", columns, lambda rel: cypher.merge_edges(rel, history=history, create=create)
            )

    # ------------------------------------------------------------------ follow
    def follow(self, bundle: Bundle, *, history: bool | None = None) -> FollowReport:
        """Make the database hold exactly ``bundle`` for the bundle's sources, touching only what differs.

        The database's rows of those sources are read back with their content and hashed as the bundle's rows
        are. Rows new or changed in the bundle are loaded (MERGE); edges of those sources gone from the bundle
        are deleted, then their nodes, unless an edge of another source still uses one. Rows of other sources
        are not touched. Edges in another relationship layout than the loader's ``rel_types`` (``typed`` or
        ``generic``; ``auto`` keeps the database's) are moved to it. What a database made outside metakg lacks
        is added: name embeddings (after ``neo4j-admin database import`` of files without them) and name keys.
        Every step is idempotent, so a run killed half-way and run again finishes the job: the rows already
        loaded then hash equal and are skipped.

        With ``history`` (None: as the sources' last load did), the version of every row about to be changed or
        deleted is first copied into a ``:MetakgVersion`` node retired now (:data:`cypher.ARCHIVE_EDGES`,
        :data:`cypher.ARCHIVE_NODES`); every loaded row carries ``recorded_at``, so :func:`graph_as_of` and
        :func:`versions_of` can answer for any time since.
        """
        driver, database = self.driver, self.database
        start = time.perf_counter()
        now = datetime.now(UTC)
        migrated = migrate_legacy(driver, database)
        sources = sorted(
            {*bundle.nodes["source"].drop_nulls().to_list(), *bundle.edges["source"].drop_nulls().to_list()}
        )
        layout = choose_layout(driver, database, bundle.edges["rel"], self.rel_types)
        check_layout(driver, database, layout, bundle)
        plan = self._plan(bundle, sources, layout)
        sources_meta = read_meta(driver, database, "source")
        if history is None:
            history = any(bool(sources_meta.get(s, {}).get("history")) for s in sources)
        if history:
            self._archive(bundle, plan, sources, now)
        removed_nodes = self._remove(plan, sources)
        stamped = history or any(bool(m.get("history")) for m in sources_meta.values())
        loaded = self._load_changes(bundle, plan, layout, now if stamped else None)
        keys_added = write_missing_keys(driver, database, self.batch_size)
        counts = self._record_sources(bundle, sources, now, history)
        changed_nodes, changed_edges = plan.changed_nodes.len(), plan.changed_edges.len()
        return FollowReport(
            sources=sources,
            nodes_loaded=changed_nodes,
            edges_loaded=changed_edges,
            nodes_removed=removed_nodes,
            edges_removed=plan.gone_edges.height,
            nodes_unchanged=bundle.nodes.height - changed_nodes,
            edges_unchanged=bundle.edges.height - changed_edges,
            nodes_kept_for_other_sources=plan.gone_nodes.len() - removed_nodes,
            counts_by_source=counts,
            seconds=time.perf_counter() - start,
            load=loaded.as_dict() | {"migrated": migrated or loaded.migrated},
            history=history,
            recorded_at=_iso_text(now) if history else "",
            rel_types=layout,
            edges_relaid=plan.relaid.height,
            nodes_embedded=plan.unembedded.len(),
            keys_added=keys_added,
        )

    def _plan(self, bundle: Bundle, sources: list[str], layout: str) -> _Plan:
        """Compare the database's rows of ``sources`` with the bundle's."""
        driver, database = self.driver, self.database
        held_nodes = _held(
            _read(driver, database, cypher.SOURCE_NODES, sources), ["id", "embedded", "recorded_at"],
            {**dict(NODE_SCHEMA), "embedded": pl.Boolean, "recorded_at": pl.Datetime("us", "UTC")}, NODE_CONTENT,
        )  # fmt: skip
        held_edges = _held(
            _read(driver, database, cypher.SOURCE_EDGES, sources), ["id", "src", "dst", "generic", "recorded_at"],
            {**dict(EDGE_SCHEMA), "generic": pl.Boolean, "recorded_at": pl.Datetime("us", "UTC")}, EDGE_CONTENT,
        )  # fmt: skip
        node_hash = bundle.nodes.select("id", content_hash(bundle.nodes, NODE_CONTENT).alias("hash"))
        edge_hash = bundle.edges.select("id", content_hash(bundle.edges, EDGE_CONTENT).alias("hash"))
        changed_nodes = node_hash.join(held_nodes.select("id", "hash"), on=["id", "hash"], how="anti")["id"]
        changed_edges = edge_hash.join(held_edges.select("id", "hash"), on=["id", "hash"], how="anti")["id"]
        # unchanged rows written again: edges in the other layout, nodes lacking the name embedding the bundle has
        relaid = held_edges.filter(
            pl.col("id").is_in(edge_hash["id"].implode()) & ~pl.col("id").is_in(changed_edges.implode())
            & (pl.col("generic") != (layout == "generic"))
        )  # fmt: skip
        model = bundle.manifest.get("embeddings", {}).get("model")
        stored_model = read_meta(driver, database, "embedding").get(cypher.VECTOR_INDEX, {}).get("model")
        unembedded = pl.Series("id", [], dtype=pl.String)
        if self.embeddings is not None and self.embeddings.height:
            lacking = held_nodes.filter(~pl.col("embedded")) if stored_model == model else held_nodes
            unembedded = lacking.filter(
                pl.col("id").is_in(node_hash["id"].implode()) & ~pl.col("id").is_in(changed_nodes.implode())
            )["id"]
        return _Plan(
            held_nodes=held_nodes,
            held_edges=held_edges,
            changed_nodes=changed_nodes,
            changed_edges=changed_edges,
            gone_nodes=held_nodes.join(node_hash, on="id", how="anti")["id"],
            gone_edges=held_edges.join(edge_hash, on="id", how="anti"),
            relaid=relaid,
            unembedded=unembedded,
        )

    def _write(self, query: str, rows: list[Any], **params: Any) -> None:
        """``query`` over ``rows`` (as ``rows`` and ``ids``), a write transaction per batch."""
        for begin in range(0, len(rows), self.batch_size):
            chunk = rows[begin : begin + self.batch_size]
            with self.driver.session(database=self.database) as session:
                session.execute_write(lambda tx, c=chunk: tx.run(query, rows=c, ids=c, **params).consume())

    def _archive(self, bundle: Bundle, plan: _Plan, sources: list[str], now: datetime) -> None:
        """Copy the version of every row about to be changed or deleted into a version retired ``now``."""
        self.driver.execute_query(cypher.VERSION_INDEX, database_=self.database)
        stamp = {"now": _iso_text(now), "epoch": cypher.EPOCH}

        def successors(frame: pl.DataFrame) -> pl.DataFrame:
            return frame.select("id", pl.col("valid_from").dt.to_string("%Y-%m-%dT%H:%M:%S%.6fZ").alias("valid_to"))

        changed_edges = plan.held_edges.filter(pl.col("id").is_in(plan.changed_edges.implode()))
        leaving_edges = pl.concat(
            [plan.gone_edges.select("id", "src", "dst"), changed_edges.select("id", "src", "dst")]
        ).join(successors(bundle.edges), on="id", how="left")
        self._write(cypher.ARCHIVE_EDGES, leaving_edges.to_dicts(), **stamp)
        changed_nodes = plan.held_nodes.filter(pl.col("id").is_in(plan.changed_nodes.implode()))
        leaving_nodes = pl.concat(
            [
                plan.gone_nodes.to_frame("id").with_columns(changed=pl.lit(False)),
                changed_nodes.select("id", changed=pl.lit(True)),
            ]
        ).join(successors(bundle.nodes), on="id", how="left")
        self._write(cypher.ARCHIVE_NODES, leaving_nodes.to_dicts(), sources=sources, **stamp)

    def _remove(self, plan: _Plan, sources: list[str]) -> int:
        """Delete the edges gone from the bundle (and those to lay again), then the nodes gone that no edge of
        another source uses; returns the nodes deleted."""
        self._write(
            cypher.DELETE_EDGES, pl.concat([plan.gone_edges, plan.relaid]).select("id", "src", "dst").to_dicts()
        )
        before = _count(self.driver, self.database, cypher.COUNT_NODES)
        self._write(cypher.DELETE_NODES, plan.gone_nodes.to_list(), sources=sources)
        self._write(cypher.KEYS_ORPHANED, plan.gone_nodes.to_list())
        return before - _count(self.driver, self.database, cypher.COUNT_NODES)

    def _load_changes(self, bundle: Bundle, plan: _Plan, layout: RelTypes, recorded_at: datetime | None) -> LoadReport:
        """Load the rows new or changed, the edges to lay again and the nodes to embed; rows rewritten without
        a change keep the time they were recorded at."""
        load_nodes = pl.concat([plan.changed_nodes, plan.unembedded]).unique()
        load_edges = pl.concat([plan.changed_edges, plan.relaid["id"]]).unique()
        kept = None
        if recorded_at is not None:
            rewritten = [
                plan.relaid.select("id", "recorded_at"),
                plan.held_nodes.filter(pl.col("id").is_in(plan.unembedded.implode())).select("id", "recorded_at"),
            ]
            kept = pl.concat(rewritten).unique("id").with_columns(_iso("recorded_at"))
        subset = Bundle(
            bundle.nodes.filter(pl.col("id").is_in(load_nodes.implode())),
            bundle.edges.filter(pl.col("id").is_in(load_edges.implode())),
            manifest=bundle.manifest,
        )
        inner = Neo4jLoader(self.driver, database=self.database, target=self.target, batch_size=self.batch_size,
                            embeddings=self.embeddings, progress=self.progress, rel_types=layout,
                            writers=self.writers)  # fmt: skip
        # edges no row of the database has (new ones, and those laid again, deleted by _remove) are created
        held = plan.held_edges.filter(~pl.col("id").is_in(plan.relaid["id"].implode()))["id"]
        absent = load_edges.filter(~load_edges.is_in(held.implode()))
        return inner.load(subset, count=False, recorded_at=recorded_at, kept_times=kept, absent_edges=absent)

    def _record_sources(
        self, bundle: Bundle, sources: list[str], now: datetime, history: bool
    ) -> dict[str, dict[str, int]]:
        """The database's rows per source now, recorded with the bundle followed for each of ``sources``."""
        counts: dict[str, dict[str, int]] = {}
        for query, key in ((cypher.COUNTS_BY_SOURCE_NODES, "nodes"), (cypher.COUNTS_BY_SOURCE_EDGES, "edges")):
            records, _summary, _keys = self.driver.execute_query(query, database_=self.database)
            for record in records:
                counts.setdefault(str(record["source"]), {"nodes": 0, "edges": 0})[key] = int(record["n"])
        bundle_hash = hashlib.sha256(json.dumps(bundle.manifest.get("content_hashes", {}), sort_keys=True).encode())
        for source in sources:
            write_meta(self.driver, self.database, "source", source, {
                "bundle": bundle_hash.hexdigest(), "loaded_at": _iso_text(now), "history": history,
                "nodes": counts.get(source, {}).get("nodes", 0), "edges": counts.get(source, {}).get("edges", 0),
            })  # fmt: skip
        return counts


#: the keyword arguments that make a :class:`Neo4jLoader` (the others go to the method called)
LOADER_OPTIONS = ("batch_size", "embeddings", "progress", "rel_types", "writers")


def _loader(driver: Any, database: str, target: str, options: dict[str, Any]) -> Neo4jLoader:
    own = {k: options.pop(k) for k in LOADER_OPTIONS if k in options}
    return Neo4jLoader(driver, database=database, target=target, **own)


def vector_index_dims(driver: Any, database: str) -> int | None:
    """The dimension metakg's vector index is built for (None: there is no such index)."""
    rows, _summary, _keys = driver.execute_query(cypher.VECTOR_INDEXES, database_=database)
    held = [dict(r["options"] or {}).get("indexConfig", {}) for r in rows if r["name"] == cypher.VECTOR_INDEX]
    return held[0].get("vector.dimensions") if held else None


def load_bundle(driver: Any, bundle: Bundle, *, database: str, target: str, **options: Any) -> LoadReport:
    """:meth:`Neo4jLoader.load` by a loader made for this one load (``options``: the loader's, then the
    method's)."""
    return _loader(driver, database, target, options).load(bundle, **options)


def follow_bundle(driver: Any, bundle: Bundle, *, database: str, target: str, **options: Any) -> FollowReport:
    """:meth:`Neo4jLoader.follow` by a loader made for this one load (``options``: the loader's, and
    ``history``)."""
    return _loader(driver, database, target, options).follow(bundle, **options)


def _read(driver: Any, database: str, query: str, sources: list[str]) -> list[dict[str, Any]]:
    """The rows of a read query as dicts, driver times as Python ones (streamed from one session)."""
    with driver.session(database=database, default_access_mode="READ") as session:
        return [{k: _plain(v) for k, v in record.items()} for record in session.run(query, sources=sources)]


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
