"""Graph stores: open one (embedded over a bundle, or Neo4j), query it, load bundles into Neo4j.

Whoever opens a store closes it: :func:`open_store` returns a context manager
(``with open_store(settings, bundle) as store: ...``); the Neo4j store it opens owns its driver.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import ValidationError

from metakg.api._shared import Counter, JsonResult, Progress, at_least_one, output_folder, quiet
from metakg.api.bundles import Manifest, validate_bundle
from metakg.config import NEO4J_SCHEMES, Neo4jSettings, Settings, validation_messages
from metakg.documents.reader import cite
from metakg.errors import BundleError, ConfigError, NodeNotFound, OutputError, StoreError, UsageError
from metakg.llm.embedder import Embedder, LazyEmbedder
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.loaders.neo4j_admin import write_admin_import
from metakg.loaders.neo4j_loader import FollowReport, LoadReport, Neo4jLoader
from metakg.loaders.neo4j_loader import graph_as_of as neo4j_graph_as_of
from metakg.loaders.neo4j_loader import versions_of as neo4j_versions_of
from metakg.loaders.neo4j_store import Neo4jStore, connect
from metakg.qa_engine.services import keep_phrases
from metakg.redact import mask_url
from metakg.schemas.bundle import (
    EXTRACTION_FILE,
    Bundle,
    read_bundle,
    read_embeddings,
    read_manifest,
    read_side_table,
    source_entry,
    write_bundle,
)
from metakg.schemas.bundle_dir import writing
from metakg.schemas.curie import normalise_curie
from metakg.schemas.graph_store import GraphPath, GraphStore, Neighbour, NodeRecord, SearchHit, SearchMode
from metakg.schemas.history import as_of as history_as_of
from metakg.schemas.history import read_history
from metakg.schemas.history import versions as history_versions
from metakg.schemas.tables import normalise_relation_expr


def name_embedder(settings: Settings, progress: Progress | None = None) -> Embedder:
    """The configured name embedder (all-MiniLM-L6-v2 by default), loaded on first use: the model that
    embedded the nodes' names, so a query embedded with it can be compared with them."""
    return LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress or quiet)


def open_store(
    settings: Settings,
    graph: str | Path | None = None,
    *,
    neo4j: bool = False,
    as_of: datetime | None = None,
    progress: Progress | None = None,
) -> GraphStore:
    """Open the graph to read: a bundle directory (embedded store), a Neo4j URI, or the configured Neo4j.

    Args:
        settings: the embedder and the Neo4j connection (user, password, database).
        graph: a bundle directory, or a ``bolt://`` / ``neo4j://`` URI; None with ``neo4j`` (or
            ``store.backend = "neo4j"``) for the configured database.
        neo4j: use the configured Neo4j database.
        as_of: answer for the graph as it was recorded at this time (a bundle written with history, or a
            Neo4j database loaded with ``--history``): an embedded store over that snapshot.
        progress: called with stage messages.

    Returns:
        The store, to be closed by the caller (it is a context manager).

    Raises:
        UsageError: both or neither of a graph and ``neo4j``; ``as_of`` on a bundle without history.
        BundleError: the bundle cannot be read.
        StoreError: the bundle is not valid enough to index (run validate first).
        ConfigError: Neo4j cannot be reached.
    """
    embedder = LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress or quiet)
    if neo4j and graph is not None:
        raise UsageError("give either a bundle (--bundle DIR) or --neo4j, not both.")
    if graph is None and not neo4j and settings.store.backend != "neo4j":
        raise UsageError("give a bundle (--bundle DIR, embedded store) or --neo4j (the configured database).")
    if as_of is not None:
        (progress or quiet)(f"rebuilding the graph as of {as_of.isoformat()}")
        return EmbeddedStore.from_bundle(graph_as_of(settings, graph, as_of), embedder=embedder)
    neo4j_settings = _neo4j_settings(settings, graph)
    if neo4j_settings is not None:
        return Neo4jStore(
            connect(neo4j_settings),
            database=neo4j_settings.database,
            embedder=embedder,
            target=neo4j_settings.uri,
            owns_driver=True,
        )
    path = Path(str(graph))
    bundle = read_bundle(path)
    return EmbeddedStore.from_bundle(bundle, embedder=embedder, embeddings=read_embeddings(path, bundle))


def _neo4j_settings(settings: Settings, graph: str | Path | None) -> Neo4jSettings | None:
    """The Neo4j to use for ``graph`` (None: ``graph`` is a bundle directory); any text that looks like a URL
    (``scheme://``, any case, blanks around) is taken as one, never as a folder name to echo.

    Raises:
        UsageError: a URL that is not a Neo4j URI, or is malformed (its password never shown).
    """
    if graph is None:
        return settings.neo4j
    if isinstance(graph, Path) or not re.match(r"^\s*[a-z][a-z0-9+.-]*://", graph, re.I):
        return None
    if not graph.strip().lower().startswith(NEO4J_SCHEMES):
        raise UsageError(
            f"{mask_url(graph.strip())} is not a bundle folder nor a Neo4j URI ({', '.join(NEO4J_SCHEMES)})."
        )
    try:  # validated as the setting is: a user and password in the URI become the settings' own
        return Neo4jSettings.model_validate(settings.neo4j.model_dump() | {"uri": graph.strip()})
    except ValidationError as e:
        raise UsageError(validation_messages(e)) from None


@contextmanager
def _history_store(neo4j_settings: Neo4jSettings, graph: str | Path | None) -> Iterator[Any]:
    """A driver to the Neo4j ``graph`` named (None: the configured one, ``neo4j_settings``); when none was
    named and it cannot be reached, the error says a bundle can be named instead (the more common intent)."""
    try:
        driver = connect(neo4j_settings)
    except ConfigError as e:
        if graph is not None:
            raise
        raise ConfigError(f"{e} No graph was named, so the configured Neo4j was asked: to read a bundle's "
                          "history, name the bundle (metakg history ID --graph BUNDLE, metakg snapshot BUNDLE "
                          "--as-of T -o OUT).") from e  # fmt: skip
    with driver:
        yield driver


def graph_as_of(settings: Settings, graph: str | Path | None, at: datetime) -> Bundle:
    """The graph as it was recorded at ``at``: from a bundle's history (``--history`` on the command that
    wrote it) or from a Neo4j database loaded with ``load neo4j --history`` (None: the configured one).

    Raises:
        UsageError: the bundle keeps no history.
        BundleError: the bundle cannot be read.
        ConfigError: Neo4j cannot be reached.
    """
    neo4j_settings = _neo4j_settings(settings, graph)
    if neo4j_settings is not None:
        with _history_store(neo4j_settings, graph) as driver:
            return neo4j_graph_as_of(driver, neo4j_settings.database, at)
    path = Path(str(graph))
    bundle = read_bundle(path)
    kept = read_history(path, bundle)
    if kept is None:
        raise UsageError(
            f"{path} keeps no history, so it cannot be read as of {at.isoformat()}: write its updates with "
            "--history (sync wikidata, ingest --previous, extract --update)."
        )
    return history_as_of(bundle, kept, at)


@dataclass(frozen=True)
class ElementVersion:
    """One recorded version of a node or an edge: its row as it was (``data``: the columns, ``kind``,
    ``recorded_at``, ``retired_at``, ``valid_from``, ``valid_to`` and ``current``)."""

    data: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """``node`` or ``edge``."""
        return str(self.data["kind"])

    @property
    def current(self) -> bool:
        """The version the graph holds now (else a retired one)."""
        return bool(self.data["current"])

    @property
    def recorded_at(self) -> datetime | None:
        """When metakg recorded it (None: before history was kept)."""
        return self.data.get("recorded_at")

    @property
    def retired_at(self) -> datetime | None:
        """When metakg retired it (None: current)."""
        return self.data.get("retired_at")

    @property
    def valid_from(self) -> datetime | None:
        """The source's own time it held from (a Wikidata modification time)."""
        return self.data.get("valid_from")

    @property
    def valid_to(self) -> datetime | None:
        return self.data.get("valid_to")

    def get(self, column: str) -> Any:
        """A column of the row (``name``, ``type``, ``src``, ``rel``, ``dst``, ``count`` ...), None when it has none."""
        return self.data.get(column)

    def as_dict(self) -> dict[str, Any]:
        """The version as JSON data: times as ISO text, empty columns left out."""
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.data.items() if v is not None}


def element_history(settings: Settings, graph: str | Path | None, element_id: str) -> list[ElementVersion]:
    """Every recorded version of the node or edge ``element_id`` in a bundle or a Neo4j database, oldest
    first (see :func:`metakg.schemas.history.versions`).

    Raises:
        NodeNotFound: no node or edge has that id, now or in the history.
        BundleError: the bundle cannot be read.
        ConfigError: Neo4j cannot be reached.
    """
    neo4j_settings = _neo4j_settings(settings, graph)
    provenance: dict[str, str] = {}
    if neo4j_settings is not None:
        with _history_store(neo4j_settings, graph) as driver:
            found = neo4j_versions_of(driver, neo4j_settings.database, element_id)
    else:
        path = Path(str(graph))
        bundle = read_bundle(path)
        found = history_versions(bundle, read_history(path, bundle), element_id)
        provenance = record_provenance(path)
    if not found:
        raise NodeNotFound(f"no node or edge has the id {element_id!r}, now or in the recorded history.")
    return [
        ElementVersion({**v, "sources": [cite(r, provenance) for r in v.get("record_ids") or []]})
        if v.get("kind") == "edge"
        else ElementVersion(v)
        for v in found
    ]


def record_provenance(bundle: Path) -> dict[str, str]:
    """``{record id: provenance}`` of the document chunks an extraction wrote into the bundle at ``bundle``
    (its ``extraction.parquet``); empty for other bundles or an older extraction."""
    try:
        shell = Bundle(nodes=pl.DataFrame(), edges=pl.DataFrame(), manifest=read_manifest(bundle))
        units = read_side_table(bundle, shell, EXTRACTION_FILE)
    except BundleError:
        return {}
    if units is None or "provenance" not in units.columns:
        return {}
    known = units.filter(pl.col("provenance").is_not_null()).select("record_id", "provenance").unique("record_id")
    return dict(zip(known["record_id"].to_list(), known["provenance"].to_list(), strict=True))


def snapshot(settings: Settings, graph: str | Path | None, at: datetime, out: Path) -> Manifest:
    """Write the graph as it was recorded at ``at`` (see :func:`graph_as_of`) as a bundle at ``out``;
    returns its manifest.

    Raises:
        UsageError: the bundle keeps no history, or ``out`` is the bundle read.
        BundleError: a bundle cannot be read or written.
        ConfigError: Neo4j cannot be reached.
    """
    if _neo4j_settings(settings, graph) is None and Path(str(graph)).resolve() == out.resolve():
        raise UsageError(f"the snapshot would overwrite {out}; write it to a new directory.")
    bundle = graph_as_of(settings, graph, at)
    bundle.manifest = {
        "as_of": at.isoformat(),
        "sources": [source_entry("snapshot", "snapshot", uuid.uuid4().hex, input=str(graph or "neo4j"))],
    }
    with writing(out):
        return Manifest(write_bundle(out, bundle))


#: the largest batch a load takes: the ``neo4j.batch_size`` setting's bound
MAX_BATCH = next(m.le for m in Neo4jSettings.model_fields["batch_size"].metadata if hasattr(m, "le"))

#: the least cosine similarity at which a name found by embedding search counts as the node asked for
MIN_NAME_SIMILARITY = 0.6


def node_by_id(store: GraphStore, text: str) -> NodeRecord | None:
    """The node whose id is ``text`` as written or in its one form (``MONDO:4975`` finds ``mondo:0004975``,
    :func:`~metakg.schemas.curie.normalise_curie`), else None."""
    node = store.get_node(text)
    if node is None and (written := normalise_curie(text)) is not None and written != text:
        node = store.get_node(written)
    return node


def resolve_node(store: GraphStore, text: str, *, min_similarity: float = MIN_NAME_SIMILARITY) -> NodeRecord:
    """A node by id (as written, or in its one form: ``MONDO:4975`` finds ``mondo:0004975``), else the best
    name match: exact, normalised, then by embedding at ``min_similarity`` or more (a name nothing resembles
    must not land on an unrelated node).

    Raises:
        NodeNotFound: nothing matches well enough; the message lists the closest names.
    """
    node = node_by_id(store, text)
    if node is not None:
        return node
    hits = store.search(text, mode="auto", k=3)
    if hits and (hits[0].match != "embedding" or hits[0].score >= min_similarity):
        return hits[0].node
    if not hits:  # auto search leaves out embedding matches below its floor: the closest ones, to show
        try:
            hits = store.search(text, mode="embedding", k=3)
        except StoreError:
            hits = []
    closest = ", ".join(f"{h.node.name} ({h.node.id}, {h.score:.2f})" for h in hits)
    raise NodeNotFound(
        f"no node has the id or name {text!r}"
        + (f"; the closest names are {closest}, below the similarity floor {min_similarity}." if hits else ".")
    )


def search_nodes(store: GraphStore, text: str, *, mode: SearchMode = "auto", k: int = 10) -> list[SearchHit]:
    """Nodes whose name or alias matches ``text``, best first.

    Raises:
        UsageError: ``k`` below 1.
    """
    at_least_one("k", k)
    return store.search(text, mode=mode, k=k)


def as_relations(relations: Sequence[str] | None) -> list[str] | None:
    """Relation filters as stored, whether written as stored (``symptom_of``) or as shown (``symptom of``,
    ``Symptom Of``)."""
    if relations is None:
        return None
    frame = pl.DataFrame({"r": list(relations)}, schema={"r": pl.String})
    return frame.select(normalise_relation_expr(pl.col("r")))["r"].to_list()


def neighbours_of(
    store: GraphStore, text: str, *, relations: Sequence[str] | None = None, limit: int | None = 20
) -> tuple[NodeRecord, list[Neighbour]]:
    """The node ``text`` resolves to and its neighbours (``relations`` as :func:`as_relations` reads them).

    Raises:
        UsageError: ``limit`` below 1; NodeNotFound: ``text`` names no node.
    """
    at_least_one("limit", limit)
    node = resolve_node(store, text)
    return node, store.neighbours(node.id, relations=as_relations(relations), limit=limit)


def paths_between(
    store: GraphStore, a: str, b: str, *, k: int = 1, max_hops: int = 3, relations: Sequence[str] | None = None
) -> tuple[NodeRecord, NodeRecord, list[GraphPath]]:
    """The nodes ``a`` and ``b`` resolve to and up to ``k`` shortest paths between them (``relations`` as
    :func:`as_relations` reads them).

    Raises:
        UsageError: ``k`` or ``max_hops`` below 1; NodeNotFound: ``a`` or ``b`` names no node.
    """
    at_least_one("k", k)
    at_least_one("max_hops", max_hops)
    na, nb = resolve_node(store, a), resolve_node(store, b)
    return na, nb, store.shortest_paths(na.id, nb.id, k=k, max_hops=max_hops, relations=as_relations(relations))


@dataclass(frozen=True)
class Neo4jLoad(JsonResult):
    """A load into Neo4j: the database (``uri``, ``database``), the ``mode`` and relationship layout
    (``rel_types``), the validation run first on a bundle never validated (None: it had been), the rows in the
    bundle and in Neo4j afterwards (for the bundle's sources), and the loader's ``report``: a
    :class:`FollowReport` (follow: loaded, removed, unchanged) or a :class:`LoadReport` (merge: batches)."""

    uri: str
    database: str
    mode: str
    rel_types: str
    validated_first: dict[str, Any] | None
    nodes_in_bundle: int
    edges_in_bundle: int
    nodes_in_neo4j: int
    edges_in_neo4j: int
    report: FollowReport | LoadReport

    spread = ("report",)
    omit_none = ("validated_first",)

    @property
    def complete(self) -> bool:
        """Neo4j holds at least the bundle's rows."""
        return self.nodes_in_neo4j >= self.nodes_in_bundle and self.edges_in_neo4j >= self.edges_in_bundle


def load_neo4j(
    path: Path,
    settings: Settings,
    *,
    batch_size: int | None = None,
    progress: Counter | None = None,
    mode: Literal["follow", "merge"] = "follow",
    history: bool | None = None,
) -> Neo4jLoad:
    """Load a bundle into the configured Neo4j (idempotent, resumable); returns what was done and the counts.

    ``follow`` (the default) makes the database hold exactly the bundle for the bundle's sources: new and
    changed rows are loaded, rows gone from the bundle removed, other sources untouched (see
    :func:`~metakg.loaders.neo4j_loader.follow_bundle`). ``merge`` only adds and updates, never removes.
    ``history`` (follow only; None: as the sources' last load) retires replaced and removed rows into
    versions instead of losing them, so the graph can be read as of any later time. A bundle never
    validated is validated first, in place (as ``metakg validate`` does; ``validated_first`` in the result
    says so), so no row validation would reject reaches the database.

    Raises:
        BundleError: the bundle cannot be read.
        ConfigError: Neo4j cannot be reached.
        UsageError: an unknown mode, history with ``merge``, or a batch size out of range.
    """
    if mode not in ("follow", "merge"):
        raise UsageError(f"unknown load mode {mode!r}; choose follow or merge.")
    if history and mode == "merge":
        raise UsageError("--history keeps the versions a follow-mode load replaces; --mode merge replaces none.")
    if batch_size is not None and not 1 <= batch_size <= MAX_BATCH:
        raise UsageError(f"--batch-size must be from 1 to {MAX_BATCH:,}, got {batch_size}.")
    bundle = read_bundle(path)
    with connect(settings.neo4j) as driver:  # an unreachable server is said before the bundle is touched
        validated_first = None
        if "validation" not in bundle.manifest:  # never validated: rows validation would reject stay out
            checked = validate_bundle(path, settings)
            validated_first = {"ok": checked.ok, "rejected": checked.rejected, "warned": checked.warned}
            bundle = read_bundle(path)
        embeddings = read_embeddings(path, bundle)
        loader = Neo4jLoader(
            driver,
            database=settings.neo4j.database,
            target=settings.neo4j.uri,
            batch_size=batch_size if batch_size is not None else settings.neo4j.batch_size,
            embeddings=embeddings,
            progress=progress,
            rel_types=settings.neo4j.rel_types,
            writers=settings.neo4j.writers,
        )
        report: FollowReport | LoadReport = (
            loader.follow(bundle, history=history) if mode == "follow" else loader.load(bundle, checkpoint_dir=path)
        )
        # the database is ready to ask: its phrase index is built now, not at a later first question, and the
        # server has seen the statements a question runs
        with Neo4jStore(driver, database=settings.neo4j.database, target=settings.neo4j.uri) as store:
            keep_phrases(store, settings.paths.cache_dir)
            store.warm()  # the server plans the reads of a question now, not at the first one
    if isinstance(report, FollowReport):
        nodes = sum(c["nodes"] for c in report.counts_by_source.values())
        edges = sum(c["edges"] for c in report.counts_by_source.values())
    else:
        nodes, edges = report.nodes_in_neo4j or 0, report.edges_in_neo4j or 0
    return Neo4jLoad(settings.neo4j.uri, settings.neo4j.database, mode, report.rel_types, validated_first,
                     bundle.nodes.height, bundle.edges.height, nodes, edges, report)  # fmt: skip


@dataclass(frozen=True)
class AdminImport(JsonResult):
    """The files written for ``neo4j-admin database import full`` (``files`` by role), the ``nodes``, ``edges``
    and name ``keys`` in them, whether they carry ``embeddings``, the ``array_delimiter``, the relationship
    layout (``rel_types``) and the ``command`` to run."""

    files: dict[str, str]
    nodes: int
    edges: int
    keys: int
    embeddings: bool
    array_delimiter: str
    rel_types: str
    command: str


def export_neo4j_admin(path: Path, out_dir: Path, settings: Settings) -> AdminImport:
    """Write neo4j-admin import files for a bundle; returns the files and the command to run.

    Raises:
        BundleError: the bundle cannot be read.
    """
    bundle = read_bundle(path)
    embeddings = read_embeddings(path, bundle)
    output_folder(out_dir, "the neo4j-admin import files")
    try:
        written = write_admin_import(
            bundle, out_dir, database=settings.neo4j.database, rel_types=settings.neo4j.rel_types, embeddings=embeddings
        )
    except OSError as e:
        raise OutputError(f"cannot write the import files into {out_dir}: {e.strerror or e}.") from e
    return AdminImport(**written)
