"""neo4j-graphrag's ``Embedder`` over metakg's name embedder (neo4j-graphrag: the only module that imports it).

from metakg.integrations.neo4j_graphrag import MetakgEmbedder
retriever = VectorRetriever(driver, "entity_embedding", MetakgEmbedder())
"""

from __future__ import annotations

from neo4j_graphrag.embeddings.base import Embedder

from metakg import api
from metakg.config import Settings, load_settings


class MetakgEmbedder(Embedder):
    """Embeds a query text with the model that embedded the graph's node names (``embedder.*`` settings;
    all-MiniLM-L6-v2 by default), loaded on the first query."""

    def __init__(self, settings: Settings | None = None) -> None:
        """``settings``: where the model is (default: the environment and settings file, as the CLI reads)."""
        super().__init__()
        self._model = api.name_embedder(settings or load_settings())

    def embed_query(self, text: str) -> list[float]:
        """The text's vector, unit length, as a list of floats."""
        return [float(x) for x in self._model.embed([text])[0]]
