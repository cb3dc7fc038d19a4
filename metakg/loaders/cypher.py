"""Every Cypher statement metakg sends, as pure functions: text in, no I/O, values always as parameters.

Labels and relationship types cannot be parameters in Cypher; they come from the type vocabulary and from
relation names that passed validation (``RELATION_PATTERN``), are checked again here, and are quoted with
backticks. Hop limits and k are integers checked here before they are written into a pattern.
"""

from __future__ import annotations

import re

from metakg.errors import StoreError
from metakg.schemas.tables import RELATION_PATTERN

ENTITY = "Entity"
VECTOR_INDEX = "entity_embedding"
"""The vector index over the nodes' name embeddings (``n.embedding``)."""
ALIAS_INDEX = "entity_alias_keys"
"""The full-text index (whitespace analyzer) over the alias keys, which finds aliases without a label scan."""
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


def schema_statements(vector_dimensions: int | None) -> list[str]:
    """Constraint and indexes: unique entity id, name lookups, full-text names, optional vector index."""
    statements = [
        f"CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (n:{ENTITY}) REQUIRE n.id IS UNIQUE",
        f"CREATE INDEX entity_name IF NOT EXISTS FOR (n:{ENTITY}) ON (n.name)",
        f"CREATE INDEX entity_name_key IF NOT EXISTS FOR (n:{ENTITY}) ON (n.name_key)",
        f"CREATE FULLTEXT INDEX {NAMES_INDEX} IF NOT EXISTS FOR (n:{ENTITY}) ON EACH [n.name, n.all_names]",
        f"CREATE FULLTEXT INDEX {ALIAS_INDEX} IF NOT EXISTS FOR (n:{ENTITY}) ON EACH [n.alias_key_text] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'whitespace'}}",
    ]
    if vector_dimensions is not None:
        dims = _positive("vector dimensions", vector_dimensions, 4096)
        statements.append(
            f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (n:{ENTITY}) ON n.embedding "
            f"OPTIONS {{indexConfig: {{`vector.dimensions`: {dims}, `vector.similarity_function`: 'cosine'}}}}"
        )
    return statements


def _recorded(x: str) -> str:
    """``SET`` the load's time as ``recorded_at`` of a row whose content is new or changed; a row written
    again with the content it has keeps the time its version was first recorded (a repeated load changes
    nothing, and ``--as-of`` an earlier time still sees the row). Runs before ``+= row.props`` replaces the
    stored ``content_hash`` it compares with."""
    return (
        f"SET {x}.recorded_at = CASE WHEN {x}.content_hash = row.props.content_hash "
        f"THEN coalesce({x}.recorded_at, datetime(row.recorded_at)) ELSE datetime(row.recorded_at) END "
    )


#: the times a load sets on every row it writes, from ISO text (``valid_from``: the source's time of
#: the version, removed when null); ``recorded_at`` is set by :func:`_recorded`
_NODE_TIMES = "n.valid_from = datetime(row.valid_from)"
_EDGE_TIMES = "r.created_at = datetime(row.created_at), r.valid_from = datetime(row.valid_from)"


def merge_nodes(node_type: str) -> str:
    """Upsert a batch ``$rows`` of ``{id, props, recorded_at, valid_from}`` as :Entity plus the type's label."""
    return (
        f"UNWIND $rows AS row MERGE (n:{ENTITY} {{id: row.id}}) "
        f"{_recorded('n')}SET n += row.props, n:{label_of(node_type)}, {_NODE_TIMES}"
    )


def merge_edges(rel: str) -> str:
    """Upsert a batch ``$rows`` of ``{id, src, dst, props}`` as relationships of one type, keyed by edge id."""
    return (
        f"UNWIND $rows AS row MATCH (a:{ENTITY} {{id: row.src}}) MATCH (b:{ENTITY} {{id: row.dst}}) "
        f"MERGE (a)-[r:{rel_type(rel)} {{id: row.id}}]->(b) "
        f"{_recorded('r')}SET r += row.props, {_EDGE_TIMES}"
    )


MERGE_EDGES_GENERIC = (
    f"UNWIND $rows AS row MATCH (a:{ENTITY} {{id: row.src}}) MATCH (b:{ENTITY} {{id: row.dst}}) "
    f"MERGE (a)-[r:{GENERIC_TYPE} {{id: row.id}}]->(b) "
    f"{_recorded('r')}SET r += row.props, r.rel = row.rel, {_EDGE_TIMES}"
)
"""Upsert ``$rows`` of ``{id, src, dst, rel, props}`` as relationships of the one generic type, the relation
as the ``rel`` property (open-vocabulary graphs: a schema of one relationship type stays readable)."""
MERGE_EDGES_ANY_TYPE = (
    f"UNWIND $rows AS row MATCH (a:{ENTITY} {{id: row.src}}) MATCH (b:{ENTITY} {{id: row.dst}}) "
    "MERGE (a)-[r:$(row.rel) {id: row.id}]->(b) "
    f"{_recorded('r')}SET r += row.props, {_EDGE_TIMES}"
)
"""Upsert ``$rows`` of ``{id, src, dst, rel, props}`` of any relationship types in one statement (Neo4j 5.26+
dynamic types): one query plan for all relations, where per-type statements compile once per relation."""
SERVER_VERSION = "CALL dbms.components() YIELD versions RETURN versions[0] AS version"


def merge_edge_single(rel: str) -> str:
    """One edge per statement (``$id, $src, $dst, $props``): the slow baseline of the load benchmark."""
    return (
        f"MATCH (a:{ENTITY} {{id: $src}}) MATCH (b:{ENTITY} {{id: $dst}}) "
        f"MERGE (a)-[r:{rel_type(rel)} {{id: $id}}]->(b) SET r += $props, r.created_at = datetime($created_at)"
    )


LOAD_MARKER_GET = "MATCH (m:MetakgLoad {key: $key}) RETURN m.token AS token"
"""The token of an unfinished load of this bundle into this database (none when there is none)."""
LOAD_MARKER_SET = "MERGE (m:MetakgLoad {key: $key}) SET m.token = $token"
LOAD_MARKER_DELETE = "MATCH (m:MetakgLoad {key: $key}) DELETE m"
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
SEARCH_EXACT = (
    f"MATCH (n:{ENTITY}) WHERE n.name = $text OR $text IN n.aliases RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
)
"""Exact name or alias, by a label scan: for databases loaded before the alias index existed."""
SEARCH_KEY = (
    f"MATCH (n:{ENTITY}) WHERE n.name_key = $key OR $key IN n.alias_keys "
    f"RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
)
"""Normalised name or alias key, by a label scan (see ``SEARCH_EXACT``)."""
_BY_ALIAS = f"CALL db.index.fulltext.queryNodes('{ALIAS_INDEX}', $phrase) YIELD node AS n"
SEARCH_EXACT_INDEXED = (
    f"CALL {{ MATCH (n:{ENTITY} {{name: $text}}) RETURN n UNION {_BY_ALIAS} WHERE $text IN n.aliases RETURN n }} "
    f"RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
)
"""Exact name (range index ``entity_name``) or alias (the alias index finds the nodes having the text's key
as a phrase, ``$phrase``; the exact test follows): no label scan."""
SEARCH_KEY_INDEXED = (
    f"CALL {{ MATCH (n:{ENTITY} {{name_key: $key}}) RETURN n UNION {_BY_ALIAS} WHERE $key IN n.alias_keys RETURN n }} "
    f"RETURN {NODE_RETURN} AS node ORDER BY n.id LIMIT $k"
)
"""Normalised name key (range index ``entity_name_key``) or alias key (alias index): no label scan."""
SEARCH_NAMES = (
    "UNWIND $items AS item CALL { WITH item CALL { "
    f"WITH item MATCH (n:{ENTITY} {{name: item.text}}) RETURN n, 0 AS how UNION "
    f"WITH item CALL db.index.fulltext.queryNodes('{ALIAS_INDEX}', item.phrase) YIELD node AS n "
    "WITH item, n WHERE item.text IN n.aliases RETURN n, 0 AS how UNION "
    f"WITH item MATCH (n:{ENTITY} {{name_key: item.key}}) RETURN n, 1 AS how UNION "
    f"WITH item CALL db.index.fulltext.queryNodes('{ALIAS_INDEX}', item.phrase) YIELD node AS n "
    "WITH item, n WHERE item.key IN n.alias_keys RETURN n, 1 AS how } "
    f"WITH n, how ORDER BY how, n.id RETURN collect([{NODE_RETURN}, how]) AS found }} "
    "RETURN item.text AS text, found"
)
"""The exact (``how`` 0) and normalised (1) name and alias matches of every ``$items`` ``{text, key,
phrase}`` in one round trip, in match order then id order (:data:`SEARCH_EXACT_INDEXED`,
:data:`SEARCH_KEY_INDEXED` for many texts)."""
NAMES_INDEX = "entity_names"
"""The full-text index over the names and aliases (the standard analyzer): users' text search, and the
candidates of an edit-distance search."""
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
EMBEDDING_META_SET = (
    "MERGE (m:MetakgEmbedding {index: $index}) SET m.model = $model, m.dimensions = $dimensions, "
    "m.field = 'name', m.pooling = 'mean', m.normalised = true, m.similarity = 'cosine'"
)
"""What the vector index's vectors are: the model that made them, their dimension and pooling (a node
beside the data, so a reader such as neo4j-graphrag's retrievers can embed its queries alike)."""
EMBEDDING_META = "MATCH (m:MetakgEmbedding {index: $index}) RETURN m.model AS model, m.dimensions AS dimensions"
NAMES = (
    f"MATCH (n:{ENTITY}) UNWIND [n.name] + coalesce(n.aliases, []) AS name "
    "WITH DISTINCT name WHERE name IS NOT NULL RETURN name"
)
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
SOURCE_NODES = f"MATCH (n:{ENTITY}) WHERE n.source IN $sources RETURN n.id AS id, n.content_hash AS hash"
SOURCE_EDGES = (
    f"MATCH (a:{ENTITY})-[r]->(b:{ENTITY}) WHERE r.source IN $sources "
    "RETURN r.id AS id, a.id AS src, b.id AS dst, r.content_hash AS hash"
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
SOURCE_MARK = (
    "UNWIND $sources AS s MERGE (m:MetakgSource {name: s}) "
    "SET m.bundle = $bundle, m.loaded_at = datetime(), m.nodes = $nodes[s], m.edges = $edges[s], m.history = $history"
)
SOURCE_HISTORY = "MATCH (m:MetakgSource) WHERE m.name IN $sources AND m.history RETURN true AS history LIMIT 1"
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
    f"ON CREATE SET v += properties(n), v.labels = labels(n), {_RETIRE}"
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
