"""The Neo4j GraphStore (the only module that imports the neo4j driver).

Every statement comes from :mod:`metakg.loaders.cypher` with its values as parameters. The driver is
created by :func:`connect` and passed in, so a store can share it with the loader; ``owns_driver=True``
hands it to the store, which then closes it with itself.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from metakg.config import Neo4jSettings
from metakg.errors import ConfigError, NodeNotFound, StoreError
from metakg.identity.strings import close_distance, max_edits, similarity
from metakg.llm.embedder import Embedder
from metakg.loaders import cypher
from metakg.loaders.neo4j_loader import dynamic_types, load_bundle
from metakg.redact import mask_url
from metakg.schemas.bundle import Bundle
from metakg.schemas.graph_store import (
    ClosingStore,
    Direction,
    EdgeRecord,
    GraphPath,
    Neighbour,
    NodeRecord,
    SearchHit,
    SearchMode,
    Subgraph,
    Vector,
    check_path_query,
    run_search,
)
from metakg.schemas.tables import conform_edges, conform_nodes, match_key

if TYPE_CHECKING:
    from neo4j import Driver, Session


def connect(settings: Neo4jSettings) -> Driver:
    """A verified neo4j ``Driver`` for the configured server.

    Raises:
        ConfigError: the server does not answer, refuses the credentials (the message never holds the
            password), or has no database ``settings.database``.
    """
    import neo4j
    from neo4j.exceptions import AuthError, ClientError, ConfigurationError, ServiceUnavailable

    password = settings.password.get_secret_value()
    auth = (settings.user, password) if password else None
    try:
        # the store's queries are fixed: server notifications (e.g. "property description does not exist" on
        # a graph without descriptions) would only flood the log
        driver = neo4j.GraphDatabase.driver(settings.uri, auth=auth, notifications_min_severity="OFF")
        driver.verify_connectivity()
    except ServiceUnavailable as e:
        raise ConfigError(
            f"cannot reach Neo4j at {mask_url(settings.uri)} ({e}). Start one with `make neo4j-up`, or set NEO4J_URI."
        ) from e
    except AuthError as e:
        raise ConfigError(
            f"Neo4j at {mask_url(settings.uri)} refused user {settings.user!r}: check NEO4J_USER/NEO4J_PASSWORD."
        ) from e
    except (ConfigurationError, ValueError) as e:  # the driver's own message may show the URI: never shown
        raise ConfigError(
            f"the Neo4j address {mask_url(settings.uri)} is not one the driver accepts ({type(e).__name__}): check "
            "NEO4J_URI (neo4j.uri)."
        ) from e
    try:
        driver.execute_query(cypher.PING, database_=settings.database)
    except ClientError as e:
        driver.close()
        if e.code == "Neo.ClientError.Database.DatabaseNotFound":
            raise ConfigError(
                f"Neo4j at {mask_url(settings.uri)} has no database {settings.database!r}: set neo4j.database "
                "(NEO4J_DATABASE) to one it has (`SHOW DATABASES` lists them), or create it."
            ) from e
        raise ConfigError(f"Neo4j at {mask_url(settings.uri)} refused a first query ({e.code}): {e.message}") from e
    return driver


def _node(data: dict[str, Any]) -> NodeRecord:
    return NodeRecord(
        id=data["id"],
        name=data["name"],
        type=data["type"],
        source=data["source"],
        description=data.get("description"),
        aliases=tuple(data.get("aliases") or ()),
        xrefs=tuple(data.get("xrefs") or ()),
    )


def _edge(data: dict[str, Any]) -> EdgeRecord:
    return EdgeRecord(
        id=data["id"],
        src=data["src"],
        dst=data["dst"],
        rel=data["rel"],
        display=data.get("display") or data["rel"],
        source=data["source"],
        confidence=float(data["confidence"]),
        count=int(data.get("count") or 1),
    )


#: nodes the vector index proposes at least, before the exact ranking keeps k (``cypher.SEARCH_VECTOR``)
VECTOR_CANDIDATES = 200
#: nodes the full-text index proposes to an edit-distance search, before the distances of whole keys are measured
FUZZY_CANDIDATES = 100
#: seconds a read-only query may run (``Neo4jStore.read_query``)
READ_QUERY_TIMEOUT_S = 10.0


def _frames(nodes: Sequence[NodeRecord], edges: Sequence[EdgeRecord]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Node and edge records as common-schema frames."""
    node_frame = conform_nodes(
        pl.DataFrame(
            [{**n.__dict__, "aliases": list(n.aliases), "xrefs": list(n.xrefs)} for n in nodes],
            schema={
                "id": pl.String,
                "name": pl.String,
                "type": pl.String,
                "source": pl.String,
                "description": pl.String,
                "aliases": pl.List(pl.String),
                "xrefs": pl.List(pl.String),
            },
        )
    )
    edge_frame = conform_edges(
        pl.DataFrame(
            [e.__dict__ for e in edges],
            schema={
                "id": pl.String,
                "src": pl.String,
                "dst": pl.String,
                "rel": pl.String,
                "display": pl.String,
                "source": pl.String,
                "confidence": pl.Float64,
                "count": pl.Int64,
            },
        )
    )
    return node_frame, edge_frame


class Neo4jStore(ClosingStore):
    """GraphStore over a Neo4j database loaded by :func:`metakg.loaders.neo4j_loader.load_bundle`."""

    def __init__(
        self,
        driver: Driver,
        *,
        database: str = "neo4j",
        embedder: Embedder | None = None,
        target: str = "neo4j",
        owns_driver: bool = False,
    ) -> None:
        """Keep the driver (closed by :meth:`close` when ``owns_driver``); no query is sent until a method is
        called."""
        self._driver = driver
        self._database = database
        self._embedder = embedder
        self._target = target
        self._owns_driver = owns_driver
        self._sessions: dict[int, Session] = {}  # one READ session per thread (a session is not thread-safe)
        self._sessions_lock = threading.Lock()
        self._schema_ready = False  # upserts ensure the constraints and indexes once
        self._dynamic: bool | None = None
        self.queries = 0  # statements sent by the store's read methods (the QA benchmark reports it per question)
        self._index_names: frozenset[str] | None = None  # asked once; loads through the store ask again
        self._embedding_checked: str | None = None  # why the stored vectors do not fit the embedder ("" if they do)
        self._vectors_held: bool | None = None  # a vector index and embeddings to search (asked once)

    def _run(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """Run a read query as an auto-commit transaction of the calling thread's long-lived READ session;
        rows as dicts of the returned values (threads share the driver, each has its own session).

        A session per query (``execute_query``) costs about 20 ms on a local server, against 3 ms here; the
        QA engine sends hundreds of small queries per question. A dropped connection is retried once.
        """
        from neo4j.exceptions import ServiceUnavailable, SessionExpired

        self.queries += 1
        thread = threading.get_ident()
        for attempt in (1, 2):
            session = self._sessions.get(thread)
            if session is None:
                session = self._driver.session(database=self._database, default_access_mode="READ")
                with self._sessions_lock:
                    self._sessions[thread] = session
            try:
                result = session.run(query, params)
                keys = result.keys()
                # the statements return maps and lists, never Node objects: the values are used as they come
                # (Record.data() would walk every list again; for embeddings that doubled the read time)
                return [dict(zip(keys, record.values(), strict=True)) for record in result]
            except (ServiceUnavailable, SessionExpired):
                session.close()
                with self._sessions_lock:
                    self._sessions.pop(thread, None)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the read sessions, and the driver when the store owns it."""
        with self._sessions_lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()
        if self._owns_driver:
            self._driver.close()
            self._owns_driver = False

    def _require(self, node_id: str) -> None:
        if not self._run(cypher.GET_NODES, ids=[node_id]):
            raise NodeNotFound(
                f"no node with id {node_id!r} in this graph; find ids by searching the names.",
                cli_fix="metakg query search GRAPH TEXT",
            )

    def counts(self) -> dict[str, int]:
        """Entity nodes and the relationships between them."""
        return {"nodes": self._run(cypher.COUNT_NODES)[0]["n"], "edges": self._run(cypher.COUNT_EDGES)[0]["n"]}

    def get_node(self, node_id: str) -> NodeRecord | None:
        """The node with this id, or None."""
        rows = self._run(cypher.GET_NODES, ids=[node_id])
        return _node(rows[0]["node"]) if rows else None

    def _indexes(self) -> frozenset[str]:
        """The names of the database's indexes (asked once per store)."""
        if self._index_names is None:
            self._index_names = frozenset(self._run(cypher.INDEXES)[0]["names"])
        return self._index_names

    def _has_vectors(self) -> bool:
        """Whether a vector search can find anything: a vector index, and name embeddings on nodes (an index
        outlives the vectors of a database emptied or reloaded without them; asked once per store)."""
        if self._vectors_held is None:
            self._vectors_held = cypher.VECTOR_INDEX in self._indexes() and bool(self._run(cypher.ANY_EMBEDDING))
        return self._vectors_held

    def neighbours(
        self,
        node_id: str,
        *,
        relations: Sequence[str] | None = None,
        direction: Direction = "both",
        limit: int | None = None,
    ) -> list[Neighbour]:
        """Nodes one edge away (outgoing first, each side in edge-id order), optionally only through
        ``relations``; one query."""
        found, _ = self.neighbours_of([node_id], relations=relations, direction=direction, limit=limit)
        if node_id not in found:
            raise NodeNotFound(
                f"no node with id {node_id!r} in this graph; find ids by searching the names.",
                cli_fix="metakg query search GRAPH TEXT",
            )
        return found[node_id]

    def neighbours_of(
        self,
        ids: Sequence[str],
        *,
        relations: Sequence[str] | None = None,
        direction: Direction = "both",
        limit: int | None = None,
        vectors: bool = False,
    ) -> tuple[dict[str, list[Neighbour]], dict[str, Vector]]:
        """The neighbours of every node of ``ids`` (as :meth:`neighbours` lists them) in one query, and, with
        ``vectors``, the neighbours' stored name embeddings in the same round trip. Ids of no node are left
        out."""
        rows = self._run(
            cypher.NEIGHBOURS,
            ids=list(dict.fromkeys(ids)),
            rels=list(relations) if relations is not None else None,
            limit=limit if limit is not None else cypher.NO_LIMIT,
            out=direction in ("out", "both"),
            vectors=vectors,
            **{"in": direction in ("in", "both")},
        )
        lists: dict[str, list[Neighbour]] = {}
        found_vectors: dict[str, Vector] = {}
        for row in rows:
            lists[row["id"]] = [Neighbour(node=_node(n), edge=_edge(e), direction=way) for n, e, way, _ in row["found"]]
            found_vectors.update((n["id"], v) for n, _, _, v in row["found"] if v is not None)
        return lists, found_vectors

    def search(self, text: str, *, mode: SearchMode = "auto", k: int = 10) -> list[SearchHit]:
        """Nodes matching ``text``: exact name or alias, normalised, within a few edits, or by the vector index.
        Names go through the range index on ``name``; aliases and normalised names through the name keys
        (:data:`cypher.KEY`) a load writes."""
        key = match_key(text)

        def exact() -> list[NodeRecord]:
            if not key:  # a name of punctuation has no key: looked for by a label scan (rare)
                return [_node(r["node"]) for r in self._run(cypher.SEARCH_EXACT_SCAN, text=text.strip(), k=k)]
            self._require_keys()
            return [_node(r["node"]) for r in self._run(cypher.SEARCH_EXACT, text=text.strip(), key=key, k=k)]

        def normalised() -> list[NodeRecord]:
            if not key:  # no letter or digit: no normalised form to look up
                return []
            self._require_keys()
            return [_node(r["node"]) for r in self._run(cypher.SEARCH_KEY, key=key, k=k)]

        def fuzzy() -> list[SearchHit]:
            if max_edits(key) == 0 or cypher.NAMES_INDEX not in self._indexes():
                return []
            rows = self._run(cypher.SEARCH_FUZZY, lucene=cypher.fuzzy_query(key), candidates=FUZZY_CANDIDATES)
            scored = []
            for row in rows:
                node = _node(row["node"])
                distance, closest = min(
                    (close_distance(key, match_key(n)), match_key(n)) for n in (node.name, *node.aliases)
                )
                if distance <= max_edits(key):
                    scored.append((distance, node.id, SearchHit(node, similarity(key, closest), "fuzzy")))
            return [hit for _d, _i, hit in sorted(scored, key=lambda s: s[:2])][:k]

        embeds = self._embedder is not None and (mode == "embedding" or (mode == "auto" and self._has_vectors()))
        return run_search(
            text,
            mode=mode,
            k=k,
            exact=exact,
            normalised=normalised,
            fuzzy=fuzzy,
            embedding=self._embedding_search if embeds else None,  # auto leaves out what the database lacks
        )

    def warm(self, *, rounds: int = 3) -> None:
        """Ask every read of a question a few times, on a node and its neighbours: name searches, neighbour
        lists with their vectors, stored vectors, the embedding checks and the vector index. The server
        plans each statement the first time it sees it and compiles the code that runs it after a few runs;
        done when a load ends, the first question after it pays for neither (measured by ``bench_qa``:
        the first question after a load took about twice as long as the next one when each read was asked
        once)."""
        rows = self._run(cypher.ANY_NODE)
        if not rows:
            return
        node_id, name, vector = rows[0]["id"], rows[0]["name"], rows[0]["v"]
        around, _ = self.neighbours_of([node_id], limit=100)
        near = [nb.node for nb in around.get(node_id, [])][:10]
        ids, names = [node_id] + [n.id for n in near], [name] + [n.name for n in near if n.name]
        self._run(cypher.ANY_EMBEDDING)
        self._run(cypher.META_GET, kind="embedding")
        keys = cypher.KEY_INDEX in self._indexes()  # without it a name search refuses, and says why, at a question
        indexed = vector is not None and cypher.VECTOR_INDEX in self._indexes()
        for _ in range(rounds):
            if keys:
                self.search_names(names, k=10)
            self.neighbours_of(ids, limit=100, vectors=True)
            self.name_vectors(ids)
            if indexed:
                self._run(cypher.SEARCH_VECTOR, k=10, candidates=VECTOR_CANDIDATES, vector=list(vector))

    def search_names(self, texts: Sequence[str], *, k: int = 10) -> dict[str, list[SearchHit]]:
        """Each text's exact matches, else its normalised ones (at most ``k``), for many texts in one query (a
        text without a normalised form is looked for alone)."""
        found: dict[str, list[SearchHit]] = {}
        items = []
        for text in dict.fromkeys(texts):
            key = match_key(text)
            if key:
                items.append({"text": text.strip(), "key": key, "asked": text})
            else:
                found[text] = self.search(text, mode="exact", k=k)
        if items:
            self._require_keys()
            by_text = {r["text"]: r["found"] for r in self._run(cypher.SEARCH_NAMES, items=items)}
            for item in items:
                rows = by_text.get(item["text"], [])
                first = [(node, how) for node, how in rows if how == rows[0][1]][:k] if rows else []
                match: Any = "exact" if first and first[0][1] == 0 else "normalised"
                found[item["asked"]] = [SearchHit(_node(node), 1.0, match) for node, _how in first]
        return found

    def names(self) -> list[str]:
        """Every distinct node name and alias."""
        return list(self._run(cypher.NAMES)[0]["names"])

    def name_vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The ``embedding`` property of these nodes (set by loading a bundle with embeddings)."""
        return {r["id"]: list(r["v"]) for r in self._run(cypher.NAME_VECTORS, ids=list(ids))}

    def _require_keys(self) -> None:
        """Refuse a name search on a database without the index on the name keys (made by ``neo4j-admin
        database import`` alone, never followed by a load), rather than scan for keys it may not have.

        Raises:
            StoreError: no key index, with the load that makes it.
        """
        if cypher.KEY_INDEX in self._indexes() or not self._run(cypher.COUNT_NODES)[0]["n"]:
            return
        raise StoreError(
            "this database lacks the index on metakg's name keys (it was filled by neo4j-admin import, or by an "
            "earlier metakg): load the bundle once more, which creates it and adds any missing key, and rewrites "
            "no row that is unchanged.",
            cli_fix="metakg load neo4j BUNDLE",
        )

    def _check_embedding_model(self, embedder: Embedder) -> str:
        """Why the database's name embeddings cannot be compared with the embedder's vectors ("" when they
        can): none stored, another dimension, or another model (as recorded by the load)."""
        if not self._run(cypher.ANY_EMBEDDING):
            return (
                "this database has a vector index but no name embeddings on its nodes (the import files held "
                "none): load the bundle once more after `metakg embed`, which writes them."
            )
        rows = self._run(cypher.META_GET, kind="embedding")
        rows = [r["p"] for r in rows if r["name"] == cypher.VECTOR_INDEX]
        if not rows:
            return ""  # loaded before the model was recorded
        model, dims = rows[0].get("model"), rows[0].get("dimensions")
        name = getattr(embedder, "name", None)
        if dims != embedder.dim or (model and name and model != name):
            return (
                f"this database's name embeddings were made by {model or 'an unrecorded model'} ({dims} dimensions); "
                f"the configured embedder is {name} ({embedder.dim}): configure that model (embedder.model_dir), "
                "or embed the bundle with this one and load it again."
            )
        return ""

    def _embedding_search(self, text: str, k: int) -> list[SearchHit]:
        if self._embedder is None:
            raise StoreError("embedding search needs an embedder to embed the query; configure the embedder.")
        if cypher.VECTOR_INDEX not in self._indexes():
            if self._run(cypher.ANY_EMBEDDING):  # the vectors are there (neo4j-admin import): the index is not
                raise StoreError(
                    "this database's nodes have name embeddings but no vector index over them (a neo4j-admin "
                    "import writes no indexes): load the bundle once, which builds the indexes and rewrites "
                    "nothing else.",
                    cli_fix="metakg load neo4j BUNDLE",
                )
            raise StoreError(
                "this database has no name embeddings: embed the bundle, then load it again.",
                cli_fix="metakg embed BUNDLE && metakg load neo4j BUNDLE",
            )
        if self._embedding_checked is None:
            self._embedding_checked = self._check_embedding_model(self._embedder)
        if self._embedding_checked:
            raise StoreError(self._embedding_checked)
        vector = self._embedder.embed([text])[0].tolist()
        rows = self._run(cypher.SEARCH_VECTOR, k=k, candidates=max(4 * k, VECTOR_CANDIDATES), vector=vector)
        # Neo4j reports cosine similarity as (1 + cos) / 2; report cos like the embedded store does
        return [SearchHit(_node(r["node"]), max(0.0, min(1.0, 2 * float(r["score"]) - 1)), "embedding") for r in rows]

    def shortest_paths(
        self,
        src: str,
        dst: str,
        *,
        k: int = 1,
        max_hops: int = 3,
        relations: Sequence[str] | None = None,
        directed: bool = False,
    ) -> list[GraphPath]:
        """Up to ``k`` shortest simple paths of at most ``max_hops`` edges (Cypher ``SHORTEST k``)."""
        check_path_query(k, max_hops)
        self._require(src)
        self._require(dst)
        if src == dst:
            return [GraphPath(nodes=(src,), edges=())]
        rels = list(relations) if relations is not None else None
        rows = self._run(cypher.shortest_paths(k, max_hops, directed=directed), src=src, dst=dst, rels=rels)
        return [GraphPath(nodes=tuple(r["nodes"]), edges=tuple(_edge(e) for e in r["edges"])) for r in rows]

    def subgraph(
        self,
        seeds: Sequence[str],
        *,
        hops: int = 1,
        relations: Sequence[str] | None = None,
        max_nodes: int | None = None,
    ) -> Subgraph:
        """Nodes within ``hops`` of ``seeds`` (either direction) and every edge among them."""
        for seed in seeds:
            self._require(seed)
        rels = list(relations) if relations is not None else None
        keep: list[str] = sorted(set(seeds))
        frontier = keep
        for _ in range(hops):
            if not frontier:
                break
            found = [r["id"] for r in self._run(cypher.NEXT_HOP, ids=frontier, rels=rels)]
            seen = set(keep)
            new = [i for i in found if i not in seen]
            if max_nodes is not None:
                new = new[: max(0, max_nodes - len(keep))]
            keep.extend(new)
            frontier = new
        nodes = [_node(r["node"]) for r in self._run(cypher.SUBGRAPH_NODES, ids=keep)]
        edges = [_edge(r["edge"]) for r in self._run(cypher.SUBGRAPH_EDGES, ids=keep, rels=rels)]
        return Subgraph(*_frames(nodes, edges))

    def bundle(self) -> Bundle:
        """Every entity node and every relationship between them (meant for small graphs, such as the local
        graph a RoboData agent grows)."""
        nodes = [_node(r["node"]) for r in self._run(cypher.ALL_NODES)]
        edges = [_edge(r["edge"]) for r in self._run(cypher.ALL_EDGES)]
        return Bundle(*_frames(nodes, edges))

    query_language = "cypher"

    def edge_records(self, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """``{edge id: its record ids}`` for the edges of ``ids`` that exist (:class:`EdgeSources`)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        return {row["id"]: tuple(row["records"] or ()) for row in self._run(cypher.EDGE_RECORDS, ids=wanted)}

    def read_query(self, query: str, *, params: dict[str, Any] | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Run a Cypher query read-only and return at most ``limit`` rows (nodes and relationships as their
        properties). Two guards: the planner's query type (``EXPLAIN``) must be read-only, and the query runs
        in a READ transaction, which the server refuses to let write; it times out after
        ``READ_QUERY_TIMEOUT_S``.

        Raises:
            StoreError: the query writes (or changes the schema), is not valid Cypher, or fails.
        """
        from neo4j import unit_of_work
        from neo4j.exceptions import Neo4jError

        limit = max(1, min(int(limit), 10_000))

        @unit_of_work(timeout=READ_QUERY_TIMEOUT_S)
        def rows(tx: Any) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for record in tx.run(query, params or {}):
                out.append(record.data())
                if len(out) >= limit:
                    break
            return out

        try:
            with self._driver.session(database=self._database, default_access_mode="READ") as session:
                kind = session.run("EXPLAIN " + query, params or {}).consume().query_type
                if kind != "r":
                    raise StoreError(f"only read-only Cypher is allowed; this query is of type {kind!r} (it writes).")
                return session.execute_read(rows)
        except Neo4jError as e:
            raise StoreError(f"the Cypher query failed: {e.message or e}") from None

    def upsert(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        """MERGE nodes (by id) and edges (by edge id); properties given overwrite stored ones. The schema
        is ensured and the server's version asked once per store, not per upsert."""
        if self._dynamic is None:
            self._dynamic = dynamic_types(self._driver, self._database)
        load_bundle(
            self._driver,
            Bundle(conform_nodes(nodes), conform_edges(edges)),
            database=self._database,
            target=self._target,
            ensure_schema=not self._schema_ready,
            dynamic=self._dynamic,
            count=False,
        )
        self._schema_ready = True
        self._index_names = self._embedding_checked = self._vectors_held = None

    def load(self, bundle: Bundle, **options: Any) -> Any:
        """Load a whole bundle (see :func:`metakg.loaders.neo4j_loader.load_bundle` for the options)."""
        self._index_names = self._embedding_checked = self._vectors_held = None
        return load_bundle(self._driver, bundle, database=self._database, target=self._target, **options)
