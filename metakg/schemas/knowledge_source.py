"""Services a QA strategy may need beyond the graph it answers over, as small protocols.

The api injects implementations into the QA context (``QAContext.knowledge_source`` and
``QAContext.graph_factory``), so the QA engine depends on these protocols only, never on the modules
that implement them (the Wikidata source, the stores).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from metakg.schemas.bundle import Bundle
from metakg.schemas.graph_store import GraphStore

#: one result row of a SELECT query: variable -> {"type": ..., "value": ..., optional "xml:lang"}
Binding = dict[str, dict[str, str]]

#: the prefixes every query to a Wikidata-shaped knowledge source may use without declaring them (the
#: client sends them before each query)
WIKIDATA_PREFIXES = (
    "PREFIX wd: <http://www.wikidata.org/entity/>\n"
    "PREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    "PREFIX skos: <http://www.w3.org/2004/02/skos/core#>\n"
    "PREFIX schema: <http://schema.org/>\n"
    "PREFIX owl: <http://www.w3.org/2002/07/owl#>\n"
)


def check_select(query: str, prefixes: str = WIKIDATA_PREFIXES, *, ask: bool = False) -> str:
    """``query`` when it is one read-only SELECT query (or, with ``ask``, an ASK query) with no federated
    ``SERVICE`` call; raises ValueError saying why not. The query is parsed (after ``prefixes``), so an
    update, a CONSTRUCT or DESCRIBE, or text that is no query at all is refused by the grammar, not by
    keyword spotting."""
    from rdflib.plugins.sparql import prepareQuery

    forms = ("SelectQuery", "AskQuery") if ask else ("SelectQuery",)
    wanted = " or ".join(f[:-5].upper() for f in forms)
    body = PROLOGUE.sub("", query.lstrip(), count=1)
    if re.match(r"(?i)(?:insert|delete|load|clear|drop|create|copy|move|add|with)\b", body):
        raise ValueError(f"updates are refused: only read-only {wanted} queries run here")
    if not re.search(r"(?i)\b(?:select|ask|construct|describe|insert|delete|load|clear|drop|create)\b", query) or (
        "{" not in query
    ):
        raise ValueError(
            f"not a SPARQL query: the text reads as plain words (a {wanted} query has the form SELECT ?x WHERE "
            "{ ... }); to find an entity by its name, search for the name instead"
        )
    try:
        prepared = prepareQuery(prefixes + query)
    except Exception as e:  # rdflib raises pyparsing and its own errors for anything that is not a query
        raise ValueError(f"not a valid read-only {wanted} query: {_where(str(e), query, len(prefixes))}") from None
    if prepared.algebra.name not in forms:
        raise ValueError(f"only {' and '.join(f[:-5].upper() for f in forms)} queries are allowed, not "
                         f"{prepared.algebra.name}")  # fmt: skip
    if re.search(r"(?i)\bSERVICE\b", query):
        raise ValueError("federated SERVICE calls are not allowed")
    return query


def _where(message: str, query: str, skipped: int) -> str:
    """A parser's message with its position counted in the caller's own ``query`` (the parser read
    ``skipped`` characters of prefixes first), and the text found there."""
    found = re.search(r"at char (\d+)", message)
    first = re.split(r",?\s*\(at char|\s*\(line:", message)[0].strip()[:160]
    if not found:
        return first
    at = max(0, int(found.group(1)) - skipped)
    line = query.count("\n", 0, at) + 1
    column = at - (query.rfind("\n", 0, at) + 1) + 1
    return f"{first} at character {at} (line {line}, column {column}): {query[at : at + 30]!r}"


#: the prologue of a SPARQL query: its BASE and PREFIX declarations
PROLOGUE = re.compile(r"^\s*(?:(?:BASE\s*<[^>]*>|PREFIX\s+[\w.-]*:\s*<[^>]*>)\s*)*", re.I)


def ask_as_select(query: str) -> str:
    """An ASK query (already checked) as a SELECT of at most one row: the ASK is true when a row comes back.
    Every endpoint then answers in the same result shape."""
    head = PROLOGUE.match(query)
    start = head.end() if head else 0
    body = re.sub(r"(?i)^ASK\s*(?:WHERE\s*)?", "SELECT * WHERE ", query[start:], count=1)
    return query[:start] + body.rstrip().rstrip(";") + " LIMIT 1"


@runtime_checkable
class KnowledgeSource(Protocol):
    """A remote knowledge base answering read-only SPARQL SELECT queries (Wikidata by default)."""

    @property
    def endpoint(self) -> str:
        """The endpoint URL (for traces and provenance)."""
        ...

    def select(self, query: str, *, timeout_s: float | None = None) -> list[Binding]:
        """The bindings of a SELECT query, within ``timeout_s`` (None: the source's own limit); raises
        SyncError when the endpoint fails after its retries (QueryTimeout when the time is up)."""
        ...


@runtime_checkable
class EntityFetcher(KnowledgeSource, Protocol):
    """A knowledge source that also maps entities into the common schema, as the Wikidata sync does."""

    def fetch(self, ids: Sequence[str], properties: Sequence[str]) -> Bundle:
        """The nodes of ``ids`` and their ``properties`` statements among them, as a sync maps them."""
        ...


@runtime_checkable
class EntitySearch(Protocol):
    """A knowledge source with a search service for entities by label (Wikidata's search API)."""

    def search_entities(self, text: str, k: int) -> list[dict[str, str | None]] | None:
        """Up to ``k`` matches (id, label, description), or None when no search service is configured."""
        ...


@runtime_checkable
class GraphStoreFactory(Protocol):
    """Makes new, empty, writable graph stores (e.g. the local graph an agent grows while it answers)."""

    def __call__(self) -> GraphStore:
        """A new empty store; the caller owns it and closes it."""
        ...


@runtime_checkable
class Checkpointed(Protocol):
    """A store that keeps its contents somewhere durable when asked (a local graph kept as a bundle)."""

    def checkpoint(self) -> None:
        """Make what the store holds now durable (nothing to do when nothing changed)."""
        ...
