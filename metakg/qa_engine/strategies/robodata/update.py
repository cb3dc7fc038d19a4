"""Update tools: the only tools that write, and only into the local graph. They copy remote entities and
statements through an ``EntityFetcher``, which maps them exactly as the Wikidata sync does (ids ``wd:Q42``,
types from P31, xrefs, revision and provenance), so the local graph merges cleanly with a synced bundle."""

from __future__ import annotations

from typing import Any, Literal

import polars as pl
from pydantic import Field, field_validator

from metakg.qa_engine.strategies.robodata.remote import WD, EntityArgs, property_id
from metakg.qa_engine.strategies.robodata.tools import Tool, ToolBox
from metakg.schemas import sparql
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.knowledge_source import EntityFetcher


class FetchRelationshipsArgs(EntityArgs):
    property: str = Field(description="The property whose statements to copy, e.g. P19.")
    direction: Literal["out", "in"] = Field(default="out", description="out: the entity's statements; in: about it.")
    limit: int = Field(default=20, ge=1, le=100, description="Statements at most.")

    @field_validator("property")
    @classmethod
    def _pid(cls, value: str) -> str:
        return property_id(value)


def update_tools(fetcher: EntityFetcher, local: GraphStore) -> ToolBox:
    """``fetch_node`` and ``fetch_relationships`` writing into ``local``."""

    def added(before: dict[str, int]) -> dict[str, int]:
        after = local.counts()
        return {"nodes_added": after["nodes"] - before["nodes"], "edges_added": after["edges"] - before["edges"]}

    def fetch_node(a: EntityArgs) -> Any:
        before = local.counts()
        fragment = fetcher.fetch([a.id], [])
        if fragment.nodes.height == 0:
            raise KeyError(f"the remote knowledge base has no entity {a.id}")
        local.upsert(fragment.nodes, fragment.edges)
        return {"node": fragment.nodes["id"][0], "name": fragment.nodes["name"][0]} | added(before)

    def fetch_relationships(a: FetchRelationshipsArgs) -> Any:
        rows = fetcher.select(sparql.linked(a.id, a.property, a.direction, a.limit))
        linked = [r["other"]["value"][len(WD) :] for r in rows if r["other"]["value"].startswith(WD)]
        if not linked:
            return {"statements": 0, "note": f"{a.id} has no {a.property} statement ({a.direction})"}
        before = local.counts()
        fragment = fetcher.fetch([a.id, *linked], [a.property])
        end = "src" if a.direction == "out" else "dst"
        edges = fragment.edges.filter(pl.col(end) == f"wd:{a.id}")
        local.upsert(fragment.nodes, edges)
        return {
            "statements": edges.height,
            "edges": [
                {"id": e, "src": s, "rel": r, "dst": d}
                for e, s, r, d in edges.select("id", "src", "rel", "dst").iter_rows()
            ],
        } | added(before)

    return ToolBox(
        [
            Tool("fetch_node", "Copy a remote entity into the local graph.", EntityArgs, fetch_node),
            Tool(
                "fetch_relationships",
                "Copy the statements of one property from (out) or to (in) a remote entity, with the linked "
                "entities, into the local graph.",
                FetchRelationshipsArgs,
                fetch_relationships,
            ),
        ]
    )
