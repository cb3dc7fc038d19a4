"""Retrieval on Neo4j against the embedded store, on the MetaKGRAG authors' CommonsenseQA KG (real data, the
real MiniLM embedder, a real Neo4j): the same evidence for the same questions, and the batched reads that
make Neo4j fast (a neighbour batch with the neighbours' vectors in one round trip)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg import api
from metakg.config import Neo4jSettings, QASettings, load_settings
from metakg.errors import StoreError
from metakg.llm.embedder import OnnxEmbedder
from metakg.loaders import cypher
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.loaders.neo4j_store import Neo4jStore
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.strategies import REGISTRY
from metakg.schemas.bundle import Bundle, read_bundle
from metakg.schemas.graph_store import GraphStore
from tests.conftest import HashEmbedder, small_bundle

QUESTIONS = 12


@pytest.fixture(scope="module")
def csqa(tmp_path_factory: pytest.TempPathFactory, public_file: Callable[[str], Path]) -> Bundle:
    out = tmp_path_factory.mktemp("retrieval") / "csqa"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("METAKG_PATHS__CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        api.ingest_triples(
            public_file("metakgrag_pilot/commonsenseqa__knowledge_graph.txt"), "commonsenseqa", out, load_settings()
        )
    return read_bundle(out)


@pytest.fixture(scope="module")
def vectors(csqa: Bundle, minilm: OnnxEmbedder, name_vectors: Callable[..., Any]) -> pl.DataFrame:
    found = name_vectors(minilm, csqa.nodes["name"].to_list())
    return pl.DataFrame({"id": csqa.nodes["id"], "vector": pl.Series(found.tolist(), dtype=pl.List(pl.Float32))})


def evidence(store: GraphStore, embedder: OnnxEmbedder, questions: list[Any]) -> dict[str, list[Any]]:
    ctx = QAContext(store=store, embedder=embedder, settings=QASettings(concepts="rules"))
    found: dict[str, list[Any]] = {}
    for name in ("kg_rag", "metakgrag"):
        strategy = REGISTRY.create(name, ctx.settings, ())
        answers = [asyncio.run(strategy.answer(q, ctx)) for q in questions]
        found[name] = [(a.trace.get("start_entities"), [p.triples for p in a.evidence]) for a in answers]
    return found


def pilot_questions(public_file: Callable[[str], Path], limit: int) -> list[Any]:
    """The first ``limit`` CommonsenseQA questions of the MetaKGRAG authors' pilot."""
    questions, _ = api.read_questions(
        public_file("metakgrag_pilot/commonsenseqa__commonsenseqa.json"), "pilot", limit=limit
    )
    return questions


def test_both_stores_return_the_same_evidence(
    csqa: Bundle,
    vectors: pl.DataFrame,
    minilm: OnnxEmbedder,
    clean_neo4j: Any,
    neo4j_settings: Neo4jSettings,
    public_file: Callable[[str], Path],
) -> None:
    """Hubs of more than ``max_neighbours`` edges and equally weighted neighbours are common in this graph:
    the stores agree only because both list neighbours in edge-id order and rank name matches by id."""
    questions = pilot_questions(public_file, QUESTIONS)
    neo4j = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=minilm)
    neo4j.load(csqa, embeddings=vectors)
    embedded = EmbeddedStore.from_bundle(csqa, embedder=minilm, embeddings=vectors)
    on_neo4j = evidence(neo4j, minilm, questions)
    assert on_neo4j == evidence(embedded, minilm, questions)
    assert sum(1 for _, paths in on_neo4j["metakgrag"] if paths) >= QUESTIONS - 2  # the slice finds evidence
    degrees = pl.concat([csqa.edges["src"], csqa.edges["dst"]]).value_counts()
    assert degrees["count"].max() > QASettings().max_neighbours  # some lists are cut: the order matters


def test_a_neighbour_batch_is_one_round_trip_and_brings_the_vectors(
    csqa: Bundle, vectors: pl.DataFrame, minilm: OnnxEmbedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=minilm)
    store.load(csqa, embeddings=vectors)
    ctx = QAContext(store=store, embedder=minilm, settings=QASettings())
    ids = csqa.nodes["id"].head(5).to_list()
    before = store.queries
    ctx.services.prefetch(ids, 100)
    assert store.queries == before + 1
    lists = [ctx.services.neighbours(i, 100, lambda: pytest.fail("read again")) for i in ids]
    assert [[n.edge.id for n in found] for found in lists] == [
        [n.edge.id for n in store.neighbours(i, limit=100)] for i in ids
    ]
    neighbours = [n.node for found in lists for n in found]
    assert neighbours
    counted = store.queries
    ctx.services.similarity.nodes_to(neighbours, ["a question"])  # vectors came with the batch: no query
    assert store.queries == counted
    many, _ = store.neighbours_of([*ids, "kg:commonsenseqa/no such node"], limit=3)
    assert sorted(many) == sorted(ids) and all(len(v) <= 3 for v in many.values())


def test_warming_sends_every_statement_a_question_reads(
    csqa: Bundle,
    vectors: pl.DataFrame,
    minilm: OnnxEmbedder,
    clean_neo4j: Any,
    neo4j_settings: Neo4jSettings,
    public_file: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``load neo4j`` ends with ``warm`` so that the first question after it meets a server that has planned
    and compiled its reads: a read a question sends that ``warm`` does not send makes that question slow."""
    db = neo4j_settings.database
    Neo4jStore(clean_neo4j, database=db).load(csqa, embeddings=vectors)
    sent: list[str] = []
    read = Neo4jStore._run

    def recording(self: Neo4jStore, query: str, **params: Any) -> list[dict[str, Any]]:
        sent.append(query)
        return read(self, query, **params)

    monkeypatch.setattr(Neo4jStore, "_run", recording)
    Neo4jStore(clean_neo4j, database=db, embedder=minilm).warm()
    warmed = set(sent)
    sent.clear()
    evidence(Neo4jStore(clean_neo4j, database=db, embedder=minilm), minilm, pilot_questions(public_file, 3))
    asked = set(sent) - {cypher.NAMES}  # the names of the phrase index: read by the load itself (keep_phrases)
    assert cypher.NEIGHBOURS in asked and cypher.SEARCH_VECTOR in asked  # the questions did read the graph
    assert asked <= warmed, [" ".join(q.split())[:80] for q in asked - warmed]


def test_the_database_records_its_embedding_model_and_a_different_one_is_refused(
    minilm: OnnxEmbedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    bundle = small_bundle()
    found = minilm.embed(bundle.nodes["name"].to_list())
    vectors = pl.DataFrame({"id": bundle.nodes["id"], "vector": pl.Series(found.tolist(), dtype=pl.List(pl.Float32))})
    made_by = Bundle(bundle.nodes, bundle.edges, manifest={"embeddings": {"model": minilm.name, "dim": minilm.dim}})
    db = neo4j_settings.database
    Neo4jStore(clean_neo4j, database=db).load(made_by, embeddings=vectors)
    meta, _, _ = clean_neo4j.execute_query(  # a bookkeeping record: an unlabelled node with its self-loop
        "MATCH (m)-[:METAKG]->(m) WHERE m.kind = 'embedding' RETURN properties(m) AS p", database_=db
    )
    assert meta[0]["p"] == {
        "kind": "embedding", "name": "entity_embedding", "model": minilm.name, "dimensions": minilm.dim,
        "field": "name", "pooling": "mean", "normalised": True, "similarity": "cosine",
    }  # fmt: skip
    assert Neo4jStore(clean_neo4j, database=db, embedder=minilm).search("headache", mode="embedding", k=1)
    other = HashEmbedder()  # another model (and dimension) than the one that made the vectors
    with pytest.raises(StoreError, match=rf"made by {minilm.name} \({minilm.dim} dimensions\)"):
        Neo4jStore(clean_neo4j, database=db, embedder=other).search("headache", mode="embedding", k=1)


def test_the_names_of_many_texts_in_one_query_match_search_text_by_text(
    minilm: OnnxEmbedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=minilm)
    store.load(small_bundle())
    texts = ["aspirin", "ASPIRIN", "  The ASPIRIN! ", "pyrexia", "Influenza.", "ASA", "no such thing", "!!!"]
    before = store.queries
    found = store.search_names(texts, k=2)
    # the index list, the batch, and "!!!" exactly (it has no normalised form, so nothing more is asked for it)
    assert store.queries - before == 3
    for text in texts:
        by_one = store.search(text, mode="exact", k=2) or store.search(text, mode="normalised", k=2)
        assert found[text] == by_one, text
    assert [h.match for h in found["aspirin"]] == ["exact"] and [h.match for h in found["ASPIRIN"]] == ["normalised"]
    assert [h.node.name for h in found["Influenza."]] == ["flu"] and found["no such thing"] == []
