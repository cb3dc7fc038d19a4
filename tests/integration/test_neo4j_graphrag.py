"""A graph metakg loaded, read with neo4j-graphrag (the library a Neo4j user reaches for first): its
``VectorRetriever`` finds metakg's vector index and returns the nodes metakg's own embedding search
returns, and its ``get_schema`` (APOC, which the project's launcher serves) describes the graph."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from neo4j_graphrag.embeddings.base import Embedder as GraphragEmbedder
from neo4j_graphrag.retrievers import VectorRetriever
from neo4j_graphrag.schema import get_schema, get_structured_schema
from neo4j_graphrag.types import RetrieverResultItem

from metakg.config import Neo4jSettings
from metakg.llm.embedder import OnnxEmbedder
from metakg.loaders.cypher import label_of
from metakg.loaders.neo4j_store import Neo4jStore
from metakg.schemas.bundle import Bundle
from tests.conftest import node_id, small_bundle

# neo4j-graphrag warns that its result records will drop an internal field in its version 2; not ours
pytestmark = pytest.mark.filterwarnings("ignore:The default returned 'id' field:DeprecationWarning")


class MiniLM(GraphragEmbedder):
    """neo4j-graphrag's embedder interface over metakg's ONNX MiniLM: queries embedded as the names were."""

    def __init__(self, model: OnnxEmbedder) -> None:
        super().__init__()
        self.model = model

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.model.embed([text])[0]]


def loaded(driver: Any, settings: Neo4jSettings, minilm: OnnxEmbedder, rel_types: str) -> Bundle:
    bundle = small_bundle()
    vectors = minilm.embed(bundle.nodes["name"].to_list())
    embeddings = pl.DataFrame(
        {"id": bundle.nodes["id"], "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))}
    )
    made = Bundle(bundle.nodes, bundle.edges, manifest={"embeddings": {"model": minilm.name, "dim": minilm.dim}})
    Neo4jStore(driver, database=settings.database).load(made, embeddings=embeddings, rel_types=rel_types)
    return bundle


def test_vector_retriever_returns_what_metakg_search_returns(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, minilm: OnnxEmbedder
) -> None:
    loaded(clean_neo4j, neo4j_settings, minilm, "typed")
    retriever = VectorRetriever(
        clean_neo4j,
        index_name="entity_embedding",
        embedder=MiniLM(minilm),
        return_properties=["id", "name"],
        result_formatter=lambda record: RetrieverResultItem(content=record["node"]["id"]),
        neo4j_database=neo4j_settings.database,
    )
    found = [item.content for item in retriever.search(query_text="a migraine attack", top_k=3).items]
    store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=minilm)
    assert found == [h.node.id for h in store.search("a migraine attack", mode="embedding", k=3)]
    assert found[0] in {node_id(small_bundle(), "migraine"), node_id(small_bundle(), "headache")}
    plain = VectorRetriever(clean_neo4j, "entity_embedding", MiniLM(minilm), neo4j_database=neo4j_settings.database)
    first = plain.search(query_text="a migraine attack", top_k=1).items[0]
    assert "'name':" in first.content and len(first.content) < 1000  # the node's properties, not its vector


def test_get_schema_describes_both_relation_layouts(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, minilm: OnnxEmbedder
) -> None:
    bundle = loaded(clean_neo4j, neo4j_settings, minilm, "typed")
    db = neo4j_settings.database
    typed = get_structured_schema(clean_neo4j, database=db)
    relations = {r["type"] for r in typed["relationships"]}
    assert relations == set(bundle.edges["rel"].unique().to_list())
    assert {"Entity", "Drug", "Disease"} <= set(typed["node_props"])
    labels, _, _ = clean_neo4j.execute_query(
        "MATCH (n:Entity) RETURN n.type AS type, labels(n) AS labels", database_=db
    )
    assert all(sorted(r["labels"]) == sorted(["Entity", label_of(r["type"])]) for r in labels)  # one type label each
    clean_neo4j.execute_query("MATCH (n) DETACH DELETE n", database_=db)
    loaded(clean_neo4j, neo4j_settings, minilm, "generic")
    generic = get_structured_schema(clean_neo4j, database=db)
    assert {r["type"] for r in generic["relationships"]} == {"RELATED"}
    assert "-[:RELATED]->" in get_schema(clean_neo4j, database=db)
