"""Every Cypher statement metakg sends, as pure functions: text in, no I/O, values always as parameters.

Labels and relationship types cannot be parameters in Cypher; they come from the type vocabulary and from
relation names that passed validation (``RELATION_PATTERN``), are checked again here, and are quoted with
backticks. Hop limits and k are integers checked here before they are written into a pattern.

The graph's nodes (``:Entity`` plus a label for their type) and relationships carry the bundle's columns only:
what a person or an LLM writing Cypher reads. What metakg keeps for itself lives where schema readers
(``apoc.meta.data``, so neo4j-graphrag's ``get_schema`` and LangChain's ``Neo4jGraph.schema``) never look:
on nodes without a label, reached through relationships between such nodes. Each bookkeeping record is an
unlabelled node with a self-loop of type :data:`META` (``kind``: ``source``, ``embedding``, ``layout``,
``load``, ``keys``); the normalised name and alias keys name search uses are relationships of type
:data:`KEY` looping on the ``keys`` node, ``{key, id}``, with range indexes on both.
"""

from __future__ import annotations

import re

from metakg.errors import StoreError
from metakg.schemas.tables import RELATION_PATTERN

ENTITY = "Entity"
VECTOR_INDEX = "entity_embedding"
"""The vector index over the nodes' name embeddings (``n.embedding``)."""
_LABEL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_REL_RE = re.compile(RELATION_PATTERN)

NODE_RETURN = "n {.id, .name, .type, .source, .description, .aliases, .xrefs}"
GENERIC_TYPE = "RELATED"
"""The one relationship type of a graph loaded with ``rel_types = "generic"``; the relation is ``r.rel``."""
REL = "coalesce(r.rel, type(r))"
"""An edge's relation in either layout: its type (typed), or its ``rel`` property (generic)."""
EDGE_RETURN = f"r {{.id, .display, .source, .confidence, .count, src: startNode(r).id, dst: endNode(r).id, rel: {REL}}}"


def label_of(node_type: str) -> str:
    """The Neo4j label of a vocabulary type: ``gene_protein`` -> ``GeneProtein``.

    Raises:
        StoreError: the type cannot be a label.
    """
    label = "".join(part[:1].upper() + part[1:] for part in node_type.split("_"))
    if not _LABEL_RE.match(label):
        raise StoreError(f"node type {node_type!r} cannot be turned into a Neo4j label.")
    return label


def rel_type(rel: str) -> str:
    """The quoted relationship type of a relation name.

    Raises:
        StoreError: the relation is not snake_case word characters (validate the bundle first).
    """
    if not _REL_RE.match(rel) or "`" in rel:
        raise StoreError(
            f"relation {rel!r} cannot be a relationship type; validate the bundle first.",
            cli_fix="metakg validate BUNDLE",
        )
    return f"`{rel}`"


def _positive(name: str, value: int, upper: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= upper:
        raise StoreError(f"{name} must be an integer from 1 to {upper}, got {value!r}.")
    return value


META = "METAKG"
"""The self-loop type that marks an unlabelled node as a bookkeeping record of metakg's."""
KEY = "METAKG_KEY"
"""The relationship type of a name key: ``{key, id}`` (a normalised name or alias of the entity ``id``)."""
KEY_INDEX = "metakg_key"
KEY_ID_INDEX = "metakg_key_id"
NAMES_INDEX = "entity_names"
"""The full-text index over the names and aliases (the standard analyzer): users' text search, and the
candidates of an edit-distance search."""


def schema_statements(vector_dimensions: int | None) -> list[str]:
    """Constraint and indexes: unique entity id, exact names, full-text names and aliases, the name keys, and
    (with a dimension) the vector index."""
    statements = [
        f"CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (n:{ENTITY}) REQUIRE n.id IS UNIQUE",
        f"CREATE INDEX entity_name IF NOT EXISTS FOR (n:{ENTITY}) ON (n.name)",
        f"CREATE FULLTEXT INDEX {NAMES_INDEX} IF NOT EXISTS FOR (n:{ENTITY}) ON EACH [n.name, n.aliases]",
        f"CREATE INDEX {KEY_INDEX} IF NOT EXISTS FOR ()-[k:{KEY}]-() ON (k.key)",
        f"CREATE INDEX {KEY_ID_INDEX} IF NOT EXISTS FOR ()-[k:{KEY}]-() ON (k.id)",
    ]
    if vector_dimensions is not None:
        dims = _positive("vector dimensions", vector_dimensions, 4096)
        statements.append(
            f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (n:{ENTITY}) ON n.embedding "
            f"OPTIONS {{indexConfig: {{`vector.dimensions`: {dims}, `vector.similarity_function`: 'cosine'}}}}"
        )
    return statements


# ---------------------------------------------------------------------------- bookkeeping (unlabelled nodes)
META_ENSURE = (
    f"OPTIONAL MATCH (m)-[:{META}]->(m) WHERE m.kind = $kind AND m.name = $name "
    f"WITH m WHERE m IS NULL CREATE (n {{kind: $kind, name: $name}})-[:{META}]->(n)"
)
"""Make the record ``$kind``/``$name`` when there is none."""
META_SET = f"MATCH (m)-[:{META}]->(m) WHERE m.kind = $kind AND m.name = $name SET m += $props"
META_GET = f"MATCH (m)-[:{META}]->(m) WHERE m.kind = $kind RETURN m.name AS name, properties(m) AS p"
META_DELETE = f"MATCH (m)-[:{META}]->(m) WHERE m.kind = $kind AND m.name = $name DETACH DELETE m"
KEYS_REPLACE = (
    f"MATCH (a)-[:{META}]->(a) WHERE a.kind = 'keys' WITH a LIMIT 1 UNWIND $rows AS row "
    f"CALL (row) {{ MATCH ()-[k:{KEY} {{id: row.id}}]->() DELETE k }} "
    f"WITH a, row UNWIND row.keys AS key CREATE (a)-[:{KEY} {{key: key, id: row.id}}]->(a)"
)
"""Replace the name keys of ``$rows`` (``{id, keys}``) with those given, on the one ``keys`` record (made
first with :data:`META_ENSURE`)."""
KEYS_ORPHANED = (
    f"UNWIND $ids AS id MATCH ()-[k:{KEY} {{id: id}}]->() WHERE NOT EXISTS {{ MATCH (:{ENTITY} {{id: id}}) }} DELETE k"
)
"""Remove the keys of ``$ids`` whose node is gone."""
UNKEYED = (
    f"MATCH (n:{ENTITY}) WHERE NOT EXISTS {{ MATCH ()-[k:{KEY}]->() WHERE k.id = n.id }} "
    "RETURN n.id AS id, n.name AS name, n.aliases AS aliases"
)
"""Entities without name keys: loaded by ``neo4j-admin database import``, or by an earlier metakg."""
LEGACY_NODES = (
    "MATCH (n) WHERE n:MetakgSource OR n:MetakgEmbedding OR n:MetakgLoad RETURN labels(n) AS labels, properties(n) AS p"
)
LEGACY_DELETE = "MATCH (n) WHERE n:MetakgSource OR n:MetakgEmbedding OR n:MetakgLoad DETACH DELETE n"
LEGACY_NODE_PROPS = (
    f"MATCH (n:{ENTITY}) WHERE n.content_hash IS NOT NULL OR n.name_key IS NOT NULL "
    "CALL (n) { REMOVE n.name_key, n.alias_keys, n.alias_key_text, n.all_names, n.content_hash } "
    "IN TRANSACTIONS OF 10000 ROWS"
)
LEGACY_EDGE_PROPS = (
    f"MATCH (:{ENTITY})-[r]->(:{ENTITY}) WHERE r.content_hash IS NOT NULL "
    "CALL (r) { REMOVE r.content_hash } IN TRANSACTIONS OF 10000 ROWS"
)
LEGACY_INDEXES = ("entity_name_key", "entity_alias_keys")
"""Indexes of the layout before the bookkeeping moved off the graph (dropped when a load finds them)."""


#: the times a load sets on every row it writes, from ISO text (``valid_from``: the source's time of the
#: version, removed when null); with history, also ``recorded_at``, the time of the version
_NODE_TIMES = "n.valid_from = datetime(row.valid_from)"
_EDGE_TIMES = "r.created_at = datetime(row.created_at), r.valid_from = datetime(row.valid_from)"


def _recorded(x: str, history: bool) -> str:
    """With ``history``, ``SET`` the row's ``recorded_at`` (the load's time for a new or changed row; the time
    it had for a row only rewritten, such as an edge moved to another relationship layout)."""
    return f", {x}.recorded_at = datetime(row.recorded_at)" if history else ""


def merge_nodes(node_type: str, *, history: bool = False) -> str:
    """Upsert a batch ``$rows`` of ``{id, props, valid_from[, recorded_at]}`` as :Entity plus the type's label."""
    return (
        f"UNWIND $rows AS row MERGE (n:{ENTITY} {{id: row.id}}) "
        f"SET n += row.props, n:{label_of(node_type)}, {_NODE_TIMES}{_recorded('n', history)}"
    )


#: The edge properties a load writes besides the id, the endpoints, the relation and the times.
EDGE_PROPERTIES = [
    "display",
    "source",
    "confidence",
    "count",
    "record_ids",
    "importer",
    "model",
    "prompt_hash",
    "run_id",
]

#: The start of every batched edge write: each row's two endpoints, by id.
_EDGE_ENDS = f"UNWIND $rows AS row MATCH (a:{ENTITY} {{id: row.src}}) MATCH (b:{ENTITY} {{id: row.dst}}) "


def _edge_write(pattern: str, create: bool, history: bool, rel: bool = False) -> str:
    """The write of one edge row onto ``pattern`` (``(a)-[r:TYPE`` : the relationship left open): MERGE on its
    id then SET the properties; or, for rows known to be absent (``create``), CREATE with every property in
    the pattern (a literal map is the server's cheapest write: about 18% more relationships a second than
    CREATE then SET, measured on a 377k-edge PrimeKG sample). ``rel``: the row's relation is written as the
    ``rel`` property too (the generic layout)."""
    if create:
        fields = ", ".join(f"{p}: row.props.{p}" for p in EDGE_PROPERTIES)
        times = "created_at: datetime(row.created_at), valid_from: datetime(row.valid_from)"
        extra = (", recorded_at: datetime(row.recorded_at)" if history else "") + (", rel: row.rel" if rel else "")
        return f"{_EDGE_ENDS}CREATE {pattern} {{id: row.id, {fields}, {times}{extra}}}]->(b)"
    named = ", r.rel = row.rel" if rel else ""
    return (
        f"{_EDGE_ENDS}MERGE {pattern} {{id: row.id}}]->(b) "
        f"SET r += row.props{named}, {_EDGE_TIMES}{_recorded('r', history)}"
    )


def merge_edges(rel: str, *, history: bool = False, create: bool = False) -> str:
    """Upsert a batch ``$rows`` of ``{id, src, dst, props}`` as relationships of one type, keyed by edge id
    (``create``: rows known to be absent are created, their properties in the CREATE itself, sparing MERGE's
    look along the endpoints' edges)."""
    return _edge_write(f"(a)-[r:{rel_type(rel)}", create, history)


def merge_edges_generic(*, history: bool = False, create: bool = False) -> str:
    """Upsert ``$rows`` of ``{id, src, dst, rel, props}`` as relationships of the one generic type, the
    relation as the ``rel`` property (open-vocabulary graphs: a schema of one relationship type stays
    readable); ``create`` as for :func:`merge_edges`."""
    return _edge_write(f"(a)-[r:{GENERIC_TYPE}", create, history, rel=True)


def merge_edges_any_type(*, history: bool = False, create: bool = False) -> str:
    """Upsert ``$rows`` of ``{id, src, dst, rel, props}`` of any relationship types in one statement (Neo4j
    5.26+ dynamic types): one query plan for all relations, where per-type statements compile once each;
    ``create`` as for :func:`merge_edges`."""
    return _edge_write("(a)-[r:$(row.rel)", create, history)


SERVER_VERSION = "CALL dbms.components() YIELD versions RETURN versions[0] AS version"


def merge_edge_single(rel: str) -> str:
    """One edge per statement (``$id, $src, $dst, $props``): the slow baseline of the load benchmark."""
    return (
        f"MATCH (a:{ENTITY} {{id: $src}}) MATCH (b:{ENTITY} {{id: $dst}}) "
        f"MERGE (a)-[r:{rel_type(rel)} {{id: $id}}]->(b) SET r += $props, r.created_at = datetime($created_at)"
    )


PING = "RETURN 1 AS ok"
"""The first query on a new connection: it fails when the configured database does not exist."""
NO_LIMIT = 2**62
"""The ``$limit`` of an unlimited read: Cypher's LIMIT takes no null, and no graph has this many rows."""
COUNT_NODES = f"MATCH (n:{ENTITY}) RETURN count(n) AS n"
COUNT_EDGES = f"MATCH (:{ENTITY})-[r]->(:{ENTITY}) RETURN count(r) AS n"
GET_NODES = f"UNWIND $ids AS id MATCH (n:{ENTITY} {{id: id}}) RETURN {NODE_RETURN} AS node"
NEIGHBOURS = (
    f"UNWIND $ids AS id MATCH (s:{ENTITY} {{id: id}}) CALL {{ WITH s CALL {{ "
    f"WITH s MATCH (s)-[r]->(n:{ENTITY}) WHERE $out AND ($rels IS NULL OR coalesce(r.rel, type(r)) IN $rels) "
    "RETURN n, r, 'out' AS way, 0 AS o ORDER BY r.id LIMIT $limit "
    "UNION ALL "
    f"WITH s MATCH (s)<-[r]-(n:{ENTITY}) WHERE $in AND ($rels IS NULL OR coalesce(r.rel, type(r)) IN $rels) "
    "RETURN n, r, 'in' AS way, 1 AS o ORDER BY r.id LIMIT $limit } "
    "WITH n, r, way, o ORDER BY o, r.id LIMIT $limit "
    f"RETURN collect([{NODE_RETURN}, {EDGE_RETURN}, way, CASE WHEN $vectors THEN n.embedding END]) AS found }} "
    "RETURN s.id AS id, found"
)
"""The neighbours of every node ``$ids`` in one round trip, a row per node (``found``: [node, edge, way,
name embedding or null] lists): outgoing edges first, then incoming, each side in edge-id order, the first
``$limit``. ``ORDER BY ... LIMIT`` plans as a top-k selection, so a hub's whole list is not sorted."""
SEARCH_EXACT_SCAN = (
    f"MATCH (n:{ENTITY}) WHERE n.name = $text OR $text IN n.aliases RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
)
"""Exact name or alias by a label scan: for a text without a normalised form (punctuation), which has no key."""
_BY_KEY = f"MATCH ()-[k:{KEY} {{key: $key}}]->() MATCH (n:{ENTITY} {{id: k.id}})"
SEARCH_EXACT = (
    f"CALL {{ MATCH (n:{ENTITY} {{name: $text}}) RETURN n UNION {_BY_KEY} WHERE $text IN n.aliases RETURN n }} "
    f"RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
)
"""Exact name (range index ``entity_name``) or alias (the nodes having the text's key, then the exact test)."""
SEARCH_KEY = f"{_BY_KEY} WITH DISTINCT n RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
"""Normalised name or alias: the nodes of the key (range index ``metakg_key``)."""
SEARCH_NAMES = (
    "UNWIND $items AS item CALL { WITH item CALL { "
    f"WITH item MATCH (n:{ENTITY} {{name: item.text}}) RETURN n, 0 AS how UNION "
    f"WITH item MATCH ()-[k:{KEY} {{key: item.key}}]->() MATCH (n:{ENTITY} {{id: k.id}}) "
    "WITH item, n WHERE item.text IN n.aliases RETURN n, 0 AS how UNION "
    f"WITH item MATCH ()-[k:{KEY} {{key: item.key}}]->() MATCH (n:{ENTITY} {{id: k.id}}) RETURN n, 1 AS how }} "
    f"WITH n, how ORDER BY how, n.id RETURN collect([{NODE_RETURN}, how]) AS found }} "
    "RETURN item.text AS text, found"
)
"""The exact (``how`` 0) and normalised (1) name and alias matches of every ``$items`` ``{text, key}`` in one
round trip, in match order then id order (:data:`SEARCH_EXACT`, :data:`SEARCH_KEY` for many texts)."""
SEARCH_FUZZY = (
    f"CALL db.index.fulltext.queryNodes('{NAMES_INDEX}', $lucene, {{limit: $candidates}}) YIELD node AS n "
    f"RETURN {NODE_RETURN} AS node"
)
"""Candidates for an edit-distance search: the nodes whose names hold the key's words within Lucene's fuzzy
edits (``word~1``); the distances of the whole keys are measured by the caller."""


def fuzzy_query(key: str) -> str:
    """The Lucene query of an edit-distance search for a match key: every word, those of five letters or more
    with up to one edit (``~1``), of nine or more with two. A key is word characters and single spaces, so
    nothing needs escaping, and being lower case it holds no operator (``AND``, ``OR``)."""
    words = [w for w in key.split() if w]
    return " ".join(f"{w}~2" if len(w) >= 9 else f"{w}~1" if len(w) >= 5 else w for w in words)


INDEXES = "SHOW INDEXES YIELD name RETURN collect(name) AS names"
NAMES = (
    f"MATCH (n:{ENTITY}) UNWIND [n.name] + coalesce(n.aliases, []) AS name "
    "WITH DISTINCT name WHERE name IS NOT NULL RETURN collect(name) AS names"
)
"""Every distinct name and alias, as one list: one record decodes several times faster than a record per
name (100k names: 0.46 s against 3.45 s on a cold server)."""
ANY_NODE = f"MATCH (n:{ENTITY}) WHERE n.name IS NOT NULL RETURN n.id AS id, n.name AS name, n.embedding AS v LIMIT 1"
ANY_EMBEDDING = f"MATCH (n:{ENTITY}) WHERE n.embedding IS NOT NULL RETURN n.id AS id LIMIT 1"
VECTOR_INDEXES = "SHOW VECTOR INDEXES YIELD name, options RETURN name, options"
OTHER_EMBEDDING = (
    f"MATCH (n:{ENTITY}) WHERE n.embedding IS NOT NULL AND size(n.embedding) <> $dims AND NOT n.id IN $ids "
    "RETURN n.id AS id, size(n.embedding) AS dims LIMIT 1"
)
"""A node the load will not rewrite whose name embedding has another dimension than ``$dims``."""
OTHER_EDGE_SOURCES = (
    f"MATCH (:{ENTITY})-[r]->(:{ENTITY}) WHERE NOT r.source IN $sources RETURN DISTINCT r.source AS source LIMIT 6"
)
"""Sources other than ``$sources`` that edges of the database come from (at most six)."""
OTHER_EMBEDDED = f"MATCH (n:{ENTITY}) WHERE n.embedding IS NOT NULL AND NOT n.id IN $ids RETURN n.id AS id LIMIT 1"
"""A node the load will not rewrite that keeps a name embedding (of whatever model made it)."""
NAME_VECTORS = (
    f"UNWIND $ids AS id MATCH (n:{ENTITY} {{id: id}}) WHERE n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS v"
)
SEARCH_VECTOR = (
    f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $candidates, $vector) YIELD node AS n "
    "WITH n, vector.similarity.cosine(n.embedding, $vector) AS score "
    f"RETURN {NODE_RETURN} AS node, score ORDER BY score DESC, n.id LIMIT $k"
)
"""The ``$k`` nodes whose name embeddings are closest to ``$vector``: the vector index proposes
``$candidates`` (more than k: it is approximate, and quantises vectors), which are ranked by their exact
cosine, ties by id, as the embedded store ranks them."""
NEXT_HOP = (
    f"MATCH (a:{ENTITY})-[r]-(b:{ENTITY}) WHERE a.id IN $ids AND ($rels IS NULL OR coalesce(r.rel, type(r)) IN $rels) "
    "RETURN DISTINCT b.id AS id ORDER BY id"
)
ALL_NODES = f"MATCH (n:{ENTITY}) RETURN {NODE_RETURN} AS node ORDER BY n.id"
ALL_EDGES = f"MATCH (:{ENTITY})-[r]->(:{ENTITY}) RETURN {EDGE_RETURN} AS edge ORDER BY r.id"
SUBGRAPH_NODES = f"MATCH (n:{ENTITY}) WHERE n.id IN $ids RETURN {NODE_RETURN} AS node ORDER BY n.id"
SUBGRAPH_EDGES = (
    f"MATCH (a:{ENTITY})-[r]->(b:{ENTITY}) WHERE a.id IN $ids AND b.id IN $ids "
    f"AND ($rels IS NULL OR coalesce(r.rel, type(r)) IN $rels) RETURN {EDGE_RETURN} AS edge ORDER BY r.id"
)


def shortest_paths(k: int, max_hops: int, *, directed: bool) -> str:
    """Up to k shortest simple paths ($src to $dst, optional $rels) with the SHORTEST k path selector.

    The ``WHERE`` inside the parenthesised pattern is applied during the search, so only simple paths (no
    node twice) are counted towards k.
    """
    k = _positive("k", k, 1000)
    hops = _positive("max_hops", max_hops, 10)
    arrow = "->" if directed else "-"
    return (
        f"MATCH p = SHORTEST {k} ((a:{ENTITY} {{id: $src}})((x)-[r]{arrow}(y)){{1,{hops}}}(b:{ENTITY} {{id: $dst}}) "
        "WHERE all(i IN range(0, size(x) - 1) WHERE NOT x[i] IN x[i + 1..]) AND NOT b IN x "
        "AND ($rels IS NULL OR all(rel IN r WHERE coalesce(rel.rel, type(rel)) IN $rels))) "
        "RETURN [n IN nodes(p) | n.id] AS nodes, "
        "[r IN relationships(p) | r {.id, .display, .source, .confidence, .count, src: startNode(r).id, "
        "dst: endNode(r).id, rel: coalesce(r.rel, type(r))}] AS edges ORDER BY length(p)"
    )


# ---------------------------------------------------------------------------- following a bundle
NODE_CONTENT_RETURN = "n {.name, .type, .source, .description, .aliases, .xrefs, .properties, .revision}"
#: the record ids of the edges whose ids are $ids (the answer's sources)
EDGE_RECORDS = f"MATCH (:{ENTITY})-[r]->(:{ENTITY}) WHERE r.id IN $ids RETURN r.id AS id, r.record_ids AS records"
EDGE_CONTENT_RETURN = "r {.display, .source, .confidence, .count, .record_ids, .importer, .model, .prompt_hash}"
SOURCE_NODES = (
    f"MATCH (n:{ENTITY}) WHERE n.source IN $sources RETURN n.id AS id, {NODE_CONTENT_RETURN} AS c, "
    "n.embedding IS NOT NULL AS embedded, n.recorded_at AS recorded_at"
)
"""The content of the database's nodes of ``$sources``: a load compares it with the bundle's, hashed alike."""
SOURCE_EDGES = (
    f"MATCH (a:{ENTITY})-[r]->(b:{ENTITY}) WHERE r.source IN $sources "
    f"RETURN r.id AS id, a.id AS src, b.id AS dst, type(r) = '{GENERIC_TYPE}' AS generic, "
    f"{EDGE_CONTENT_RETURN} AS c, r.recorded_at AS recorded_at"
)
DELETE_EDGES = (
    f"UNWIND $rows AS row MATCH (a:{ENTITY} {{id: row.src}})-[r]->(b:{ENTITY} {{id: row.dst}}) "
    "WHERE r.id = row.id DELETE r"
)
DELETE_NODES = (
    f"UNWIND $ids AS id MATCH (n:{ENTITY} {{id: id}}) "
    "WHERE NOT EXISTS { MATCH (n)-[r]-() WHERE NOT r.source IN $sources } DETACH DELETE n"
)
"""Remove nodes gone from their sources, unless an edge of another source still uses them."""
# ---------------------------------------------------------------------------- history
VERSION = "MetakgVersion"
#: a version recorded before history was kept counts as recorded at the epoch (always there)
EPOCH = "1970-01-01T00:00:00Z"
_RETIRE = "v.retired_at = datetime($now), v.valid_to = datetime(row.valid_to)"
ARCHIVE_EDGES = (
    f"UNWIND $rows AS row MATCH (a:{ENTITY} {{id: row.src}})-[r]->(b:{ENTITY} {{id: row.dst}}) WHERE r.id = row.id "
    f"MERGE (v:{VERSION} {{kind: 'edge', id: r.id, recorded_at: coalesce(r.recorded_at, datetime($epoch))}}) "
    f"ON CREATE SET v += properties(r), v.src = a.id, v.dst = b.id, v.rel = coalesce(r.rel, type(r)), {_RETIRE}"
)
"""Copy the current version of each edge ``$rows`` (``{id, src, dst, valid_to}``) into a version node, retired
at ``$now``, before it is replaced or deleted; a second run finds the copy (same id and recording time)."""
ARCHIVE_NODES = (
    f"UNWIND $rows AS row MATCH (n:{ENTITY} {{id: row.id}}) "
    "WHERE row.changed OR NOT EXISTS { MATCH (n)-[r]-() WHERE NOT r.source IN $sources } "
    f"MERGE (v:{VERSION} {{kind: 'node', id: n.id, recorded_at: coalesce(n.recorded_at, datetime($epoch))}}) "
    f"ON CREATE SET v += properties(n), v.embedding = null, v.labels = labels(n), {_RETIRE}"
)
"""Copy the current version of each node ``$rows`` (``{id, changed, valid_to}``) that is changed, or that is
gone and will be deleted (no edge of another source uses it), into a version node retired at ``$now``."""
_LIVE = "coalesce({x}.recorded_at, datetime($epoch)) <= datetime($at)"
_WAS = "v.recorded_at <= datetime($at) < v.retired_at"
AS_OF_NODES = (
    f"MATCH (n:{ENTITY}) WHERE {_LIVE.format(x='n')} RETURN properties(n) AS p "
    f"UNION ALL MATCH (v:{VERSION} {{kind: 'node'}}) WHERE {_WAS} RETURN properties(v) AS p"
)
AS_OF_EDGES = (
    f"MATCH (a:{ENTITY})-[r]->(b:{ENTITY}) WHERE {_LIVE.format(x='r')} "
    "RETURN properties(r) AS p, a.id AS src, b.id AS dst, coalesce(r.rel, type(r)) AS rel "
    f"UNION ALL MATCH (v:{VERSION} {{kind: 'edge'}}) WHERE {_WAS} RETURN properties(v) AS p, v.src AS src, "
    "v.dst AS dst, v.rel AS rel"
)
VERSIONS_OF = (
    f"MATCH (n:{ENTITY} {{id: $id}}) RETURN 'node' AS kind, properties(n) AS p, null AS src, null AS dst, "
    "null AS rel, true AS current "
    f"UNION ALL MATCH (a:{ENTITY})-[r]->(b:{ENTITY}) WHERE r.id = $id RETURN 'edge' AS kind, properties(r) AS p, "
    "a.id AS src, b.id AS dst, coalesce(r.rel, type(r)) AS rel, true AS current "
    f"UNION ALL MATCH (v:{VERSION} {{id: $id}}) RETURN v.kind AS kind, properties(v) AS p, v.src AS src, "
    "v.dst AS dst, v.rel AS rel, false AS current"
)
VERSION_INDEX = f"CREATE INDEX metakg_version_id IF NOT EXISTS FOR (v:{VERSION}) ON (v.id)"

COUNTS_BY_SOURCE_NODES = f"MATCH (n:{ENTITY}) RETURN n.source AS source, count(*) AS n"
COUNTS_BY_SOURCE_EDGES = f"MATCH (:{ENTITY})-[r]->(:{ENTITY}) RETURN r.source AS source, count(*) AS n"
