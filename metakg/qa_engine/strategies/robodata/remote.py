"""Read-only tools over a remote knowledge base (``KnowledgeSource``: Wikidata, or any SPARQL endpoint
holding Wikidata-shaped data): an entity's labels, description and claims summary, a property, label search,
an entity's neighbours by property in either direction, and a raw SPARQL SELECT.

Every query is built from validated pieces: entity and property ids must match ``Q123`` / ``P123``, and text
enters as an escaped string literal. The raw tool accepts one SELECT or ASK query (parsed; an update or any
other form is refused) with a row limit and a time limit. The search uses the source's search service when
it has one (Wikidata's search API, ``wbsearchentities``: labels and aliases, Wikidata's ranking; a
full-text label scan over the Query Service is slow) and otherwise matches English labels over the
endpoint (exact, then containing).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from metakg.qa_engine.strategies.robodata.tools import Tool, ToolArgs, ToolBox
from metakg.schemas import sparql
from metakg.schemas.knowledge_source import (
    PROLOGUE,
    Binding,
    EntitySearch,
    KnowledgeSource,
    ask_as_select,
    check_select,
)

WD, WDT = sparql.WD, sparql.WDT
#: rows at most of a raw SPARQL query
MAX_ROWS = 200
#: seconds a raw SPARQL query may take
RAW_TIMEOUT_S = 30.0
_ENTITY = re.compile(r"^Q[1-9]\d*$")
_PROPERTY = re.compile(r"^P[1-9]\d*$")


def property_id(value: str) -> str:
    """``value`` when it is a property id like ``P31``; raises ValueError otherwise."""
    if not _PROPERTY.match(value):
        raise ValueError("a property id looks like P31")
    return value


def _short(uri: str) -> str:
    for prefix in (WD, WDT):
        if uri.startswith(prefix):
            return uri[len(prefix) :]
    return uri


class EntityArgs(ToolArgs):
    id: str = Field(description="A Wikidata entity id, e.g. Q42.", json_schema_extra={"pattern": "^Q[1-9][0-9]*$"})

    @field_validator("id")
    @classmethod
    def _entity(cls, value: str) -> str:
        if not _ENTITY.match(value):
            raise ValueError("an entity id looks like Q42")
        return value


class PropertyArgs(ToolArgs):
    id: str = Field(description="A Wikidata property id, e.g. P31.", json_schema_extra={"pattern": "^P[1-9][0-9]*$"})

    @field_validator("id")
    @classmethod
    def _property(cls, value: str) -> str:
        return property_id(value)


class RemoteSearchArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=200, description="A label to look for.")
    k: int = Field(default=5, ge=1, le=20)


class RemoteNeighbourArgs(EntityArgs):
    property: str | None = Field(default=None, description="Only this property, e.g. P22.")
    direction: Literal["out", "in"] = Field(default="out", description="out: the entity's own statements.")
    limit: int = Field(default=20, ge=1, le=100)

    @field_validator("property")
    @classmethod
    def _pid(cls, value: str | None) -> str | None:
        return None if value is None else property_id(value)


class SparqlArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=5000, description="One SELECT or ASK query (wd:, wdt:, rdfs: known).")
    limit: int = Field(default=50, ge=1, le=MAX_ROWS)


def _value(row: Binding, name: str) -> str:
    """The value of ``?name`` in a result row.

    Raises:
        ValueError: the endpoint answered a row without it (the tool then fails with this message).
    """
    try:
        return str(row[name]["value"])
    except (KeyError, TypeError):
        raise ValueError(f"the remote endpoint answered a row without ?{name}; its reply cannot be used") from None


def remote_tools(source: KnowledgeSource) -> ToolBox:
    """The read-only remote tools over ``source``."""

    def entity(a: EntityArgs) -> Any:
        terms = source.select(sparql.entity_terms(a.id))
        claims = source.select(sparql.entity_claims(a.id))
        if not terms and not claims:
            raise KeyError(f"the remote knowledge base has nothing on {a.id}")
        label = next((_value(r, "o") for r in terms if _value(r, "p").endswith("label")), None)
        description = next((_value(r, "o") for r in terms if _value(r, "p").endswith("description")), None)
        summary = [
            {
                "property": _short(_value(r, "p")),
                "values": int(_value(r, "n")),
                "example": _short(_value(r, "example")),
            }
            for r in claims
        ]
        return {"id": a.id, "label": label, "description": description, "claims": summary}

    def prop(a: PropertyArgs) -> Any:
        rows = source.select(sparql.entity_terms(a.id))
        if not rows:
            raise KeyError(f"the remote knowledge base has no label for {a.id}")
        return {"id": a.id} | {
            _short(_value(r, "p")).rsplit("#", 1)[-1].rsplit("/", 1)[-1]: _value(r, "o") for r in rows
        }

    def search(a: RemoteSearchArgs) -> Any:
        served = source.search_entities(a.text, a.k) if isinstance(source, EntitySearch) else None
        if served is not None:  # the search API: labels and aliases, ranked as Wikidata ranks them
            return served
        exact = source.select(sparql.label_search(a.text, a.k, exact=True))
        rows = exact or source.select(sparql.label_search(a.text, a.k, exact=False))
        return [
            {
                "id": _short(_value(r, "item")),
                "label": _value(r, "label"),
                "description": r.get("description", {}).get("value"),
            }
            for r in rows
            if _value(r, "item").startswith(WD)
        ]

    def neighbours(a: RemoteNeighbourArgs) -> Any:
        rows = source.select(sparql.neighbours(a.id, a.direction, a.property, a.limit))
        return [
            {
                "property": _short(_value(r, "p")),
                "id": _short(_value(r, "other")),
                "label": r.get("label", {}).get("value"),
            }
            for r in rows
        ]

    def raw_query(a: SparqlArgs) -> Any:
        query = check_select(a.query, ask=True).rstrip().rstrip(";")
        if re.match(r"(?i)^ASK\b", PROLOGUE.sub("", query, count=1)):
            return {"ask": bool(source.select(ask_as_select(query), timeout_s=RAW_TIMEOUT_S))}
        if not re.search(r"\blimit\s+\d+", query, re.I):
            query += f" LIMIT {a.limit}"
        rows = source.select(query, timeout_s=RAW_TIMEOUT_S)
        return [{k: _short(v["value"]) for k, v in row.items()} for row in rows[: a.limit]]

    return ToolBox(
        [
            Tool(
                "remote_entity", "A remote entity's English label, description and claims summary.", EntityArgs, entity
            ),
            Tool("remote_property", "A remote property's label and description.", PropertyArgs, prop),
            Tool("remote_search", "Remote entities whose label matches a text.", RemoteSearchArgs, search),
            Tool(
                "remote_neighbours",
                "Entities linked to a remote entity (out: its statements; in: statements about it), by property.",
                RemoteNeighbourArgs,
                neighbours,
            ),
            Tool(
                "remote_sparql",
                "Run one read-only SELECT or ASK query on the remote knowledge base (rows and time are limited).",
                SparqlArgs,
                raw_query,
            ),
        ]
    )
