"""The context a strategy answers in: the store, the models, the shared settings, the services.

A strategy reads the graph only through :class:`~metakg.schemas.graph_store.GraphStore`, talks to models
only through the ``LLMClient`` and ``Embedder`` protocols, and reaches anything else (a remote knowledge
base, new local graphs) through the protocols of :mod:`metakg.schemas.knowledge_source`, all carried here.
The api builds contexts; tests build them from hand-made stores and scripted clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from metakg.config import QASettings
from metakg.llm.client import LLMClient
from metakg.llm.embedder import Embedder
from metakg.llm.usage import MeteredClient, Prices, UsageMeter, metered
from metakg.qa_engine.services import QAServices
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.knowledge_source import GraphStoreFactory, KnowledgeSource


@dataclass
class QAContext:
    """What a strategy works with.

    Attributes:
        store: the graph questions are answered over.
        embedder: text embeddings (entity matching, similarities).
        settings: the retrieval settings every strategy shares (``[qa]``).
        llm: the chat model, None for retrieval only. Wrapped in a usage meter when it is not metered yet,
            so every call of every question is recorded once (:mod:`metakg.llm.usage`).
        temperature: sampling temperature of every call.
        prices: USD per million (prompt, completion) tokens per model, for a meter made here.
        knowledge_source: a remote knowledge base (e.g. Wikidata over SPARQL), for strategies that explore one.
        graph_factory: makes new empty local stores, for strategies that grow their own graph.
        local_graph: a local graph kept across questions (``[qa] local_kg``), owned by whoever made the
            context; strategies that grow a graph grow this one instead of a new one per question.
        cache_dir: where services keep what outlives a process (the graph's phrase index); None: nothing kept.
        reuse: the services of another context over the same store, to share (their caches and phrase index
            outlive this context; a long-lived process keeps one for all its questions).
        services: caches and helpers shared across questions (``reuse``, else made from the store and
            embedder).
    """

    store: GraphStore
    embedder: Embedder
    settings: QASettings = field(default_factory=QASettings)
    llm: LLMClient | None = None
    temperature: float = 0.0
    prices: Prices = field(default_factory=dict)
    knowledge_source: KnowledgeSource | None = None
    graph_factory: GraphStoreFactory | None = None
    local_graph: GraphStore | None = None
    cache_dir: Path | None = None
    reuse: QAServices | None = field(default=None, repr=False)
    services: QAServices = field(init=False)

    def __post_init__(self) -> None:
        self.services = self.reuse or QAServices(
            self.store, self.embedder, max_entries=self.settings.cache_entries, cache_dir=self.cache_dir
        )
        if self.llm is not None:
            self.llm = metered(self.llm, self.prices)

    @property
    def meter(self) -> UsageMeter | None:
        """The usage meter of the context's LLM (None without an LLM)."""
        return self.llm.meter if isinstance(self.llm, MeteredClient) else None
