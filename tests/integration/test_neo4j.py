"""The Neo4j loader and store against a real Neo4j 5 server started by the project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg.config import Neo4jSettings
from metakg.llm.embedder import Embedder
from metakg.loaders.graph_store import GraphStore
from metakg.loaders.neo4j_loader import CHECKPOINT_FILE, load_bundle
from metakg.loaders.neo4j_store import Neo4jStore
from metakg.schemas.bundle import Bundle, write_bundle
from tests.conftest import small_bundle
from tests.contract.graph_store_contract import GraphStoreContract

pytestmark = pytest.mark.integration


def embeddings_of(bundle: Bundle, embedder: Embedder) -> pl.DataFrame:
    vectors = embedder.embed(bundle.nodes["name"].to_list())
    return pl.DataFrame({"id": bundle.nodes["id"], "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})


class TestNeo4jStoreContract(GraphStoreContract):
    @pytest.fixture
    def store(  # type: ignore[override]
        self, bundle: Bundle, embedder: Embedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
    ) -> GraphStore:
        store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=embedder, target=neo4j_settings.uri)
        store.load(bundle, embeddings=embeddings_of(bundle, embedder))
        return store


def counts(driver: Any, database: str) -> tuple[int, int]:
    nodes, _, _ = driver.execute_query("MATCH (n:Entity) RETURN count(n) AS n", database_=database)
    edges, _, _ = driver.execute_query("MATCH (:Entity)-[r]->(:Entity) RETURN count(r) AS n", database_=database)
    return nodes[0]["n"], edges[0]["n"]


def test_load_is_idempotent(clean_neo4j: Any, neo4j_settings: Neo4jSettings) -> None:
    bundle = small_bundle()
    db = neo4j_settings.database
    first = load_bundle(clean_neo4j, bundle, database=db, target="t", batch_size=3)
    assert (first.nodes_in_neo4j, first.edges_in_neo4j) == (bundle.nodes.height, bundle.edges.height)
    before, _, _ = clean_neo4j.execute_query(
        "MATCH (n:Entity) RETURN n.id AS id, properties(n) AS p ORDER BY id", database_=db
    )
    second = load_bundle(clean_neo4j, bundle, database=db, target="t", batch_size=4)
    after, _, _ = clean_neo4j.execute_query(
        "MATCH (n:Entity) RETURN n.id AS id, properties(n) AS p ORDER BY id", database_=db
    )
    assert (second.nodes_in_neo4j, second.edges_in_neo4j) == (first.nodes_in_neo4j, first.edges_in_neo4j)
    assert [r.data() for r in before] == [r.data() for r in after]
    labels, _, _ = clean_neo4j.execute_query("MATCH (n:Entity {id: 'kg:test/0'}) RETURN labels(n) AS l", database_=db)
    assert set(labels[0]["l"]) == {"Entity", "Drug"}


def test_interrupted_load_resumes_to_the_same_counts(
    tmp_path: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    bundle = small_bundle()
    write_bundle(tmp_path / "b", bundle)  # gives the bundle content hashes for the checkpoint key
    seen: list[str] = []

    def crash_after_five(batch: str) -> None:
        seen.append(batch)
        if len(seen) > 5:
            raise KeyboardInterrupt("killed half-way")

    with pytest.raises(KeyboardInterrupt):
        load_bundle(
            clean_neo4j,
            bundle,
            database=neo4j_settings.database,
            target="t",
            batch_size=2,
            checkpoint_dir=tmp_path / "b",
            statement_hook=crash_after_five,
        )
    assert (tmp_path / "b" / CHECKPOINT_FILE).is_file()
    partial = counts(clean_neo4j, neo4j_settings.database)
    assert partial[0] + partial[1] < bundle.nodes.height + bundle.edges.height
    report = load_bundle(
        clean_neo4j, bundle, database=neo4j_settings.database, target="t", batch_size=2, checkpoint_dir=tmp_path / "b"
    )
    assert report.batches_skipped == 5
    assert (report.nodes_in_neo4j, report.edges_in_neo4j) == (bundle.nodes.height, bundle.edges.height)
    assert not (tmp_path / "b" / CHECKPOINT_FILE).exists()
