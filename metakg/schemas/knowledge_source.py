"""Services a QA strategy may need beyond the graph it answers over, as small protocols.

The api injects implementations into the QA context (``QAContext.knowledge_source`` and
``QAContext.graph_factory``), so the QA engine depends on these protocols only, never on the modules
that implement them (the Wikidata source, the stores).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from metakg.schemas.graph_store import GraphStore

#: one result row of a SELECT query: variable -> {"type": ..., "value": ..., optional "xml:lang"}
Binding = dict[str, dict[str, str]]


@runtime_checkable
class KnowledgeSource(Protocol):
    """A remote knowledge base answering read-only SPARQL SELECT queries (Wikidata by default)."""

    @property
    def endpoint(self) -> str:
        """The endpoint URL (for traces and provenance)."""
        ...

    def select(self, query: str) -> list[Binding]:
        """The bindings of a SELECT query; raises SyncError when the endpoint fails after its retries."""
        ...


@runtime_checkable
class GraphStoreFactory(Protocol):
    """Makes new, empty, writable graph stores (e.g. the local graph an agent grows while it answers)."""

    def __call__(self) -> GraphStore:
        """A new empty store; the caller owns it and closes it."""
        ...
