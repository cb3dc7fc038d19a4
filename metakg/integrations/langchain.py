"""LangChain's ``Embeddings`` over metakg's name embedder (langchain-core: the only module that imports it).

from metakg.integrations.langchain import MetakgEmbeddings
store = Neo4jVector.from_existing_index(MetakgEmbeddings(), index_name="entity_embedding",
                                        text_node_property="name", url=..., username=..., password=...)
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from metakg import api
from metakg.config import Settings, load_settings


class MetakgEmbeddings(Embeddings):
    """Embeds texts with the model that embedded the graph's node names (``embedder.*`` settings;
    all-MiniLM-L6-v2 by default), loaded on first use."""

    def __init__(self, settings: Settings | None = None) -> None:
        """``settings``: where the model is (default: the environment and settings file, as the CLI reads)."""
        self._model = api.name_embedder(settings or load_settings())

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Each text's vector, unit length."""
        return [[float(x) for x in row] for row in self._model.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        """The query's vector, unit length."""
        return self.embed_documents([text])[0]
