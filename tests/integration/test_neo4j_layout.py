"""What a Neo4j user's tools see of a graph metakg loaded, against the real server: a bulk import followed by
a load has its vectors and name keys; a layout asked for is the layout the database ends in; the schema
neo4j-graphrag's ``get_schema`` reads lists the graph and nothing of metakg's bookkeeping; a database an earlier
metakg loaded is moved to this layout without losing a row."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from neo4j_graphrag.schema import get_schema

from metakg import api
from metakg.config import Neo4jSettings, Settings, load_settings
from metakg.errors import StoreError
from metakg.llm.embedder import Embedder
from metakg.loaders.neo4j_loader import follow_bundle, load_bundle
from metakg.loaders.neo4j_store import Neo4jStore, connect
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle, write_embeddings
from tests.conftest import node_id, small_bundle

pytestmark = pytest.mark.integration

#: what no schema reader may list: metakg's bookkeeping, on rows or as labels
INTERNAL = ("content_hash", "name_key", "alias_keys", "alias_key_text", "all_names", "recorded_at", "Metakg", "METAKG")


def relationship_types(driver: Any, database: str) -> dict[str, int]:
    records, _, _ = driver.execute_query(
        "MATCH (:Entity)-[r]->(:Entity) RETURN type(r) = 'RELATED' AS generic, count(*) AS n", database_=database
    )
    return {("generic" if r["generic"] else "typed"): r["n"] for r in records}


def embedded_bundle(folder: Path, embedder: Embedder, bundle: Bundle | None = None) -> Path:
    write_bundle(folder, bundle or small_bundle())
    read = read_bundle(folder)
    write_embeddings(folder, read, read.nodes["id"], embedder.embed(read.nodes["name"].to_list()),
                     model=embedder.name, dim=embedder.dim)  # fmt: skip
    return folder


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[Any]:
    """A factory: import a bundle's neo4j-admin files into a new database and serve it; (driver, uri)."""
    from tests.integration.conftest import neo4j_server

    started: list[Any] = []

    def make(bundle: Path) -> tuple[Any, str]:
        exported = api.export_neo4j_admin(bundle, tmp_path / "admin", load_settings())
        home = tmp_path / "home"
        done = neo4j_server.admin_import(home, shlex.split(exported.command)[4:])
        assert done.returncode == 0, done.stdout + done.stderr
        server = neo4j_server.start(
            home, neo4j_server.free_port(), heap="512m", pagecache_mb=64, jvm=neo4j_server.TEST_JVM
        )
        driver = connect(Neo4jSettings(uri=server.uri))
        started.append((server, driver))
        return driver, server.uri

    yield make
    for server, driver in started:
        driver.close()
        neo4j_server.discard(server)  # the imported database is the test's alone


def test_an_import_then_a_load_has_vectors_and_keys_and_rewrites_nothing(
    tmp_path: Path, imported: Any, embedder: Embedder
) -> None:
    bundle = embedded_bundle(tmp_path / "b", embedder)
    driver, uri = imported(bundle)
    store = Neo4jStore(driver, embedder=embedder)
    store.warm()  # what `serve --neo4j` does at start: no name search there, so no refusal before a question
    with pytest.raises(StoreError, match="lacks the index on metakg's name keys") as refused:
        store.search("ASPIRIN", mode="normalised")  # the import made no index: said, not "no match"
    assert refused.value.cli_fix == "metakg load neo4j BUNDLE"
    # issue 56, item 14: every node has its vector, only the index is missing: the fix is a load alone
    with pytest.raises(StoreError, match="have name embeddings but no vector index") as unindexed:
        store.search("a migraine attack", mode="embedding", k=2)
    assert unindexed.value.cli_fix == "metakg load neo4j BUNDLE"
    followed = follow_bundle(driver, read_bundle(bundle), database="neo4j", target=uri,
                             embeddings=pl.read_parquet(bundle / "embeddings.parquet"))  # fmt: skip
    assert (followed.nodes_loaded, followed.edges_loaded, followed.nodes_embedded, followed.keys_added) == (0, 0, 0, 0)
    store = Neo4jStore(driver, embedder=embedder)
    assert store.search("ASPIRIN", mode="normalised")[0].node.name == "aspirin"
    found = store.search("a migraine attack", mode="embedding", k=2)
    assert found and found[0].node.id in {node_id(small_bundle(), "migraine"), node_id(small_bundle(), "headache")}


def test_a_load_after_an_import_without_vectors_writes_them(tmp_path: Path, imported: Any, embedder: Embedder) -> None:
    plain = tmp_path / "plain"
    write_bundle(plain, small_bundle())  # exported before `metakg embed`: the files hold no vectors
    driver, uri = imported(plain)
    bundle = embedded_bundle(tmp_path / "b", embedder)
    followed = follow_bundle(driver, read_bundle(bundle), database="neo4j", target=uri,
                             embeddings=pl.read_parquet(bundle / "embeddings.parquet"))  # fmt: skip
    assert followed.nodes_embedded == small_bundle().nodes.height and followed.nodes_loaded == 0
    hits = Neo4jStore(driver, embedder=embedder).search("a painkiller", mode="embedding", k=3)
    assert len(hits) == 3  # once "No match": a vector index over nodes without vectors


def test_the_layout_asked_for_is_the_one_the_database_ends_in(clean_neo4j: Any, neo4j_settings: Neo4jSettings) -> None:
    db, bundle = neo4j_settings.database, small_bundle()
    edges = bundle.edges.height
    first = follow_bundle(clean_neo4j, bundle, database=db, target="t", rel_types="typed", history=True)
    assert relationship_types(clean_neo4j, db) == {"typed": edges} and first.rel_types == "typed"
    times, _, _ = clean_neo4j.execute_query("MATCH (:Entity)-[r]->(:Entity) RETURN r.id AS id, r.recorded_at AS t")
    moved = follow_bundle(clean_neo4j, bundle, database=db, target="t", rel_types="generic")
    assert relationship_types(clean_neo4j, db) == {"generic": edges}  # once 'ok' with 0 :RELATED
    assert (moved.edges_relaid, moved.edges_loaded, moved.edges_removed) == (edges, 0, 0)
    kept, _, _ = clean_neo4j.execute_query("MATCH (:Entity)-[r]->(:Entity) RETURN r.id AS id, r.recorded_at AS t")
    assert {r["id"]: r["t"] for r in kept} == {r["id"]: r["t"] for r in times}  # moved, not changed: same times
    versions, _, _ = clean_neo4j.execute_query("MATCH (v:MetakgVersion) RETURN count(v) AS n")
    assert versions[0]["n"] == 0  # no content changed, so no version was retired
    again = follow_bundle(clean_neo4j, bundle, database=db, target="t")  # auto: as the database has them
    assert again.rel_types == "generic" and again.edges_relaid == 0
    store = Neo4jStore(clean_neo4j, database=db)
    assert store.shortest_paths(node_id(bundle, "aspirin"), node_id(bundle, "migraine"))[0].hops == 2


def test_auto_picks_generic_for_an_open_vocabulary_and_the_schema_tools_read_is_small_and_clean(
    tmp_path: Path,
    clean_neo4j: Any,
    neo4j_settings: Neo4jSettings,
    public_file: Any,
    embedder: Embedder,
    name_vectors: Any,
) -> None:
    """The CommonsenseQA KG (1,685 relations): as typed relations its schema was 230,394 characters. Its first
    500 nodes carry name vectors, so the schema has the vector property and index (Neo4j builds the index of
    all 6,426 in 20 to 100 s of a busy machine, and their number changes nothing here)."""
    settings = Settings(neo4j=neo4j_settings)
    api.ingest_triples(public_file("metakgrag_pilot/commonsenseqa__knowledge_graph.txt"), "commonsenseqa",
                       tmp_path / "csqa", settings)  # fmt: skip
    api.validate_bundle(tmp_path / "csqa", settings)
    bundle = read_bundle(tmp_path / "csqa")
    vectors = name_vectors(embedder, bundle.nodes["name"].to_list())[:500]
    ids = bundle.nodes["id"].head(500)
    write_embeddings(tmp_path / "csqa", bundle, ids, vectors, model=embedder.name, dim=embedder.dim)
    loaded = api.load_neo4j(tmp_path / "csqa", settings)
    assert loaded.rel_types == "generic" and relationship_types(clean_neo4j, neo4j_settings.database) == {
        "generic": bundle.edges.height
    }
    schema = get_schema(clean_neo4j, database=neo4j_settings.database)
    assert len(schema) < 8000, len(schema)
    assert not [word for word in INTERNAL if word in schema], schema
    assert "RELATED {" in schema and "rel: STRING" in schema and "(:Concept)-[:RELATED]->(:Concept)" in schema
    typed = load_bundle(clean_neo4j, small_bundle(), database=neo4j_settings.database, target="t")
    assert typed.rel_types == "generic"  # auto on a database that has a layout: that layout


def test_a_database_an_earlier_metakg_loaded_moves_to_this_layout_losing_nothing(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    db, bundle = neo4j_settings.database, small_bundle()
    follow_bundle(clean_neo4j, bundle, database=db, target="t", history=True)
    # what an earlier metakg kept on the graph: hashes and keys on rows, marker nodes and their indexes
    for statement in (
        "MATCH (n:Entity) SET n.content_hash = 'h', n.name_key = toLower(n.name), n.alias_keys = [], "
        "n.all_names = n.name, n.alias_key_text = 'x'",
        "MATCH (:Entity)-[r]->(:Entity) SET r.content_hash = 'h'",
        "MATCH (m)-[:METAKG]->(m) DETACH DELETE m",
        "MATCH ()-[k:METAKG_KEY]->() DELETE k",
        "CREATE (:MetakgSource {name: 'test', history: true, nodes: 10}), (:MetakgLoad {key: 'k', token: 't'})",
        "CREATE (:MetakgEmbedding {index: 'entity_embedding', model: 'all-MiniLM-L6-v2', dimensions: 384})",
        "CREATE INDEX entity_name_key IF NOT EXISTS FOR (n:Entity) ON (n.name_key)",
    ):
        clean_neo4j.execute_query(statement, database_=db)
    before = {
        r["id"]: r["t"] for r in clean_neo4j.execute_query("MATCH (n:Entity) RETURN n.id AS id, n.recorded_at AS t")[0]
    }
    followed = follow_bundle(clean_neo4j, bundle, database=db, target="t")
    assert followed.load["migrated"] and followed.history  # the source's history flag came along
    assert (followed.nodes_loaded, followed.edges_loaded, followed.keys_added) == (0, 0, bundle.nodes.height)
    left, _, _ = clean_neo4j.execute_query(
        "MATCH (n) WHERE n:MetakgSource OR n:MetakgLoad OR n:MetakgEmbedding OR n.content_hash IS NOT NULL "
        "OR n.name_key IS NOT NULL RETURN count(n) AS n", database_=db,
    )  # fmt: skip
    assert left[0]["n"] == 0
    after = {
        r["id"]: r["t"] for r in clean_neo4j.execute_query("MATCH (n:Entity) RETURN n.id AS id, n.recorded_at AS t")[0]
    }
    assert after == before  # the history's times stay
    assert Neo4jStore(clean_neo4j, database=db).search("ASA", mode="exact")[0].node.name == "aspirin"
