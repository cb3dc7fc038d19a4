"""The graph's schema as an LLM writing Cypher needs it (Text2Cypher): the labels, the properties with what
they hold, the relationship layout, and the relations with the labels they join, most frequent first.

A schema read by ``apoc.meta.data`` (neo4j-graphrag's ``get_schema``, LangChain's ``Neo4jGraph.schema``) lists
properties and relationship types, but for a graph loaded generic its one type ``RELATED`` hides every
relation in ``r.rel``; this one names them, with their counts and readable forms, for a bundle and for Neo4j
alike. Give it to ``Text2CypherRetriever(neo4j_schema=...)`` or set it as ``Neo4jGraph.schema``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from metakg.api._shared import at_least_one
from metakg.api.stores import _neo4j_settings, open_store
from metakg.config import Settings
from metakg.loaders.cypher import ENTITY, GENERIC_TYPE, label_of
from metakg.loaders.neo4j_loader import layout_for
from metakg.schemas.bundle import read_bundle

#: the properties of every node and relationship metakg loads, with what they hold (the Text2Cypher prompt)
NODE_PROPERTIES = (
    ("id", "STRING", "unique: a CURIE (mondo:0005148, drugbank:DB00945, wd:Q42) or kg:<dataset>/<name>"),
    ("name", "STRING", "the preferred name"),
    ("type", "STRING", "the vocabulary type (its label is the type in CamelCase)"),
    ("source", "STRING", "the source that stated it"),
    ("description", "STRING", "a sentence, when the source gave one"),
    ("aliases", "LIST<STRING>", "other names"),
    ("xrefs", "LIST<STRING>", "ids of the same entity in other sources"),
    ("embedding", "LIST<FLOAT>", "the name's vector (vector index entity_embedding); not for matching text"),
)
EDGE_PROPERTIES = (
    ("display", "STRING", "the relation as the source wrote it"),
    ("source", "STRING", "the source that stated it"),
    ("confidence", "FLOAT", "0 to 1"),
    ("count", "INTEGER", "how many records state it"),
    ("record_ids", "LIST<STRING>", "those records"),
)
#: the ``LIMIT`` of the aggregation read from Neo4j (patterns beyond it are left out)
MAX_PATTERNS = 10_000


@dataclass
class GraphSchema:
    """A graph's schema for Text2Cypher (:func:`graph_schema`); ``text`` is the prompt form."""

    layout: str  # typed | generic
    labels: dict[str, int]  # label -> nodes
    patterns: list[dict[str, Any]]  # {src, rel, dst, edges, display}, most edges first
    relations: int  # distinct relations in the graph
    text: str = ""
    shown: int = 0  # patterns in ``text``
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return dict(self.__dict__)


def graph_schema(settings: Settings, graph: str | Path | None = None, *, top: int = 50) -> GraphSchema:
    """The schema of a bundle (``graph`` a folder) or of Neo4j (a URI, or None for the configured database),
    its relation patterns most frequent first, ``top`` of them in the text.

    Raises:
        UsageError: ``top`` below 1.
        BundleError: the bundle cannot be read; ConfigError: Neo4j cannot be reached.
    """
    at_least_one("--top", top)
    if graph is not None and _neo4j_settings(settings, graph) is None:
        bundle = read_bundle(Path(str(graph)))
        label = pl.col("type").map_elements(label_of, return_dtype=pl.String)
        nodes = bundle.nodes.select("id", label.alias("label"))
        labels = dict(nodes.group_by("label").len().sort("len", descending=True).iter_rows())
        edges = bundle.edges.join(nodes.rename({"id": "src", "label": "src_label"}), on="src").join(
            nodes.rename({"id": "dst", "label": "dst_label"}), on="dst"
        )
        grouped = edges.group_by("src_label", "rel", "dst_label").agg(
            pl.len().alias("edges"), pl.col("display").first()
        )
        patterns = [
            {
                "src": r["src_label"],
                "rel": r["rel"],
                "dst": r["dst_label"],
                "edges": r["edges"],
                "display": r["display"],
            }
            for r in grouped.sort(["edges", "rel"], descending=[True, False]).iter_rows(named=True)
        ]
        layout = layout_for(bundle.edges["rel"], settings.neo4j.rel_types)
        found = GraphSchema(layout, labels, patterns, bundle.edges["rel"].n_unique())
    else:
        found = _neo4j_schema(settings, graph)
    found.shown = min(top, len(found.patterns))
    found.text = schema_text(found, top)
    return found


def _neo4j_schema(settings: Settings, graph: str | Path | None) -> GraphSchema:
    with open_store(settings, graph, neo4j=graph is None) as store:
        labels = {
            label_of(r["type"]): r["n"]
            for r in store.read_query(  # type: ignore[attr-defined]
                f"MATCH (n:{ENTITY}) RETURN n.type AS type, count(*) AS n ORDER BY n DESC", limit=MAX_PATTERNS
            )
            if r["type"]
        }
        rows = store.read_query(  # type: ignore[attr-defined]
            f"MATCH (a:{ENTITY})-[r]->(b:{ENTITY}) RETURN a.type AS src, coalesce(r.rel, type(r)) AS rel, "
            f"b.type AS dst, type(r) = '{GENERIC_TYPE}' AS generic, count(*) AS edges, head(collect(r.display)) "
            "AS display ORDER BY edges DESC, rel",
            limit=MAX_PATTERNS,
        )
    patterns = [
        {"src": label_of(r["src"]), "rel": r["rel"], "dst": label_of(r["dst"]), "edges": r["edges"],
         "display": r["display"]}
        for r in rows
        if r["src"] and r["dst"]
    ]  # fmt: skip
    generic = sum(r["edges"] for r in rows if r["generic"]) > sum(r["edges"] for r in rows if not r["generic"])
    return GraphSchema("generic" if generic else "typed", labels, patterns, len({p["rel"] for p in patterns}))


def schema_text(schema: GraphSchema, top: int) -> str:
    """The prompt form: what a node and a relationship hold, then the relation patterns, ``top`` of them."""
    lines = [
        f"Node label :{ENTITY} on every node, with one label for its type: "
        + ", ".join(f"{label} ({n})" for label, n in schema.labels.items()),
        f"Node properties ({ENTITY}): " + "; ".join(f"{n}: {t} ({what})" for n, t, what in NODE_PROPERTIES),
    ]
    edge_props = "; ".join(f"{n}: {t} ({what})" for n, t, what in EDGE_PROPERTIES)
    if schema.layout == "generic":
        lines.append(
            f"Relationships: every one is of type {GENERIC_TYPE}; the relation is its property rel (STRING, "
            f"snake_case), one of {schema.relations}: match it as (a)-[r:{GENERIC_TYPE} {{rel: 'is_a'}}]->(b). "
            f"Relationship properties: rel; {edge_props}"
        )
    else:
        lines.append(
            f"Relationships: one type per relation (snake_case), {schema.relations} of them: match one as "
            f"(a)-[r:treats]->(b). Relationship properties: {edge_props}"
        )
    shown = schema.patterns[:top]
    lines.append(
        f"Relation patterns, most frequent first ({len(shown)} of {len(schema.patterns)}):"
        if len(shown) < len(schema.patterns)
        else "Relation patterns, most frequent first:"
    )
    for p in shown:
        rel = f"{GENERIC_TYPE} {{rel: '{p['rel']}'}}" if schema.layout == "generic" else p["rel"]
        written = f', written "{p["display"]}"' if p.get("display") and p["display"] != p["rel"] else ""
        lines.append(f"(:{p['src']})-[:{rel}]->(:{p['dst']})  {p['edges']} edges{written}")
    lines.append(
        "Names: match a node by name with n.name = 'text' (exact, case-sensitive) or toLower(n.name) = 'text', or "
        "with the full-text index: CALL db.index.fulltext.queryNodes('entity_names', 'text') YIELD node."
    )
    return "\n".join(lines)
