"""The Neo4j loader and store against a real Neo4j 5 server started by the project."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg.config import Neo4jSettings
from metakg.errors import StoreError
from metakg.llm.embedder import Embedder
from metakg.loaders.neo4j_loader import CHECKPOINT_FILE, load_bundle
from metakg.loaders.neo4j_store import Neo4jStore
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from metakg.schemas.graph_store import GraphStore
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


class TestNeo4jGenericRelationsContract(GraphStoreContract):
    """The same contract with every relation in one relationship type (``--rel-types generic``)."""

    @pytest.fixture
    def store(  # type: ignore[override]
        self, bundle: Bundle, embedder: Embedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
    ) -> GraphStore:
        store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=embedder, target=neo4j_settings.uri)
        store.load(bundle, embeddings=embeddings_of(bundle, embedder), rel_types="generic")
        return store

    def test_one_relationship_type_holds_every_relation(self, store: GraphStore, bundle: Bundle) -> None:
        assert isinstance(store, Neo4jStore)
        types = store.read_query("MATCH (:Entity)-[r]->(:Entity) RETURN DISTINCT type(r) AS t")
        relations = store.read_query("MATCH (:Entity)-[r]->(:Entity) RETURN DISTINCT r.rel AS rel ORDER BY rel")
        assert [t["t"] for t in types] == ["RELATED"]
        assert [r["rel"] for r in relations] == sorted(bundle.edges["rel"].unique().to_list())


def counts(driver: Any, database: str) -> tuple[int, int]:
    nodes, _, _ = driver.execute_query("MATCH (n:Entity) RETURN count(n) AS n", database_=database)
    edges, _, _ = driver.execute_query("MATCH (:Entity)-[r]->(:Entity) RETURN count(r) AS n", database_=database)
    return nodes[0]["n"], edges[0]["n"]


def edges_by_type(driver: Any, database: str) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(
        "MATCH (a:Entity)-[r]->(b:Entity) RETURN a.id AS a, type(r) AS t, b.id AS b, properties(r) AS p ORDER BY r.id",
        database_=database,
    )
    return [{**r.data(), "p": {k: v for k, v in r["p"].items() if k != "created_at"}} for r in records]


def test_both_edge_statements_load_the_same_graph(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shared batches with parameterised types (Neo4j 5.26+) and per-type statements (older servers) agree."""
    from metakg.loaders import neo4j_loader

    db = neo4j_settings.database
    assert neo4j_loader.dynamic_types(clean_neo4j, db)  # the test server is 5.26
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # both loads record the same time, so the rows compare equal
    report = load_bundle(clean_neo4j, small_bundle(), database=db, target="t", batch_size=4, recorded_at=at)
    # one batch per node type, the name keys of the 10 nodes in 3, the 9 edges of 5 relations in 3 shared batches
    assert report.batches_run == 4 + 3 + 3
    dynamic = edges_by_type(clean_neo4j, db)
    clean_neo4j.execute_query("MATCH ()-[r]->() DELETE r", database_=db)
    monkeypatch.setattr(neo4j_loader, "dynamic_types", lambda driver, database: False)
    load_bundle(clean_neo4j, small_bundle(), database=db, target="t2", batch_size=4, recorded_at=at)
    assert edges_by_type(clean_neo4j, db) == dynamic and len(dynamic) == small_bundle().edges.height


def test_load_is_idempotent(clean_neo4j: Any, neo4j_settings: Neo4jSettings) -> None:
    bundle = small_bundle()
    db = neo4j_settings.database
    first = load_bundle(clean_neo4j, bundle, database=db, target="t", batch_size=3)
    assert (first.nodes_in_neo4j, first.edges_in_neo4j) == (bundle.nodes.height, bundle.edges.height)
    before, _, _ = clean_neo4j.execute_query(
        "MATCH (n:Entity) RETURN n.id AS id, properties(n) AS p ORDER BY id", database_=db
    )
    edges_before = edges_by_type(clean_neo4j, db)
    second = load_bundle(clean_neo4j, bundle, database=db, target="t", batch_size=4)
    after, _, _ = clean_neo4j.execute_query(
        "MATCH (n:Entity) RETURN n.id AS id, properties(n) AS p ORDER BY id", database_=db
    )
    assert (second.nodes_in_neo4j, second.edges_in_neo4j) == (first.nodes_in_neo4j, first.edges_in_neo4j)
    assert [r.data() for r in before] == [r.data() for r in after]  # recorded_at too: nothing changed
    assert edges_by_type(clean_neo4j, db) == edges_before
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
    assert report.batches_skipped == 5 and report.checkpoint == "resumed"
    assert (report.nodes_in_neo4j, report.edges_in_neo4j) == (bundle.nodes.height, bundle.edges.height)
    assert not (tmp_path / "b" / CHECKPOINT_FILE).exists()


def test_cli_load_query_and_reload(
    tmp_path: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings, data_dir: Path
) -> None:
    """The real `metakg` executable: PrimeKG-derived rows -> bundle -> Neo4j, twice, then queried there."""
    from tests.integration.test_cli_end_to_end import metakg
    from tests.unit.ingest.test_primekg import literature_as_kg

    kg, n_nodes, n_edges = literature_as_kg(data_dir, tmp_path / "kg.csv")
    bundle = tmp_path / "plus"
    ingest = metakg("ingest", "primekg", str(kg), "-o", str(bundle))
    assert (ingest["nodes"], ingest["edges"]) == (n_nodes, n_edges)
    metakg("validate", str(bundle))
    env = {"NEO4J_URI": neo4j_settings.uri, "NEO4J_DATABASE": neo4j_settings.database}
    first = metakg("load", "neo4j", str(bundle), "--batch-size", "50", env=env)
    assert (first["nodes"], first["edges"]) == (n_nodes, n_edges)
    second = metakg("load", "neo4j", str(bundle), env=env)
    assert (second["nodes"], second["edges"]) == (n_nodes, n_edges)

    def counts(value: Any, key: str = "") -> list[tuple[str, Any]]:  # every count in the JSON, nested ones too
        if isinstance(value, dict):
            return [found for k, v in value.items() for found in counts(v, k)]
        return [(key, value)] if key.endswith(("_in_neo4j", "_loaded", "_removed")) else []

    assert all(v is None or v >= 0 for _, v in counts(second)), counts(second)  # once a nested -1 for "not counted"
    neighbours = metakg(
        "query", "neighbours", neo4j_settings.uri, "mondo.grouped:10079_16781_16207", "--limit", "5", env=env
    )
    assert neighbours["count"] == 5 and neighbours["node"]["name"] == "Canavan disease"
    path = metakg("query", "path", neo4j_settings.uri, "Canavan disease", "leukodystrophy", env=env)
    assert path["count"] == 1 and path["paths"][0]["nodes"][-1] == "mondo:0019046"


def test_a_bundle_never_validated_is_validated_before_its_rows_reach_neo4j(
    tmp_path: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    from tests.integration.test_cli_end_to_end import metakg
    from tests.unit.schemas.test_validation import bad_bundle

    write_bundle(tmp_path / "a", bad_bundle())
    env = {"NEO4J_URI": neo4j_settings.uri, "NEO4J_DATABASE": neo4j_settings.database}
    loaded = metakg("load", "neo4j", str(tmp_path / "a"), env=env)
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text(encoding="utf-8"))
    rejected = manifest["validation"]["rejected"]
    assert rejected > 0 and loaded["validated_first"]["rejected"] == rejected
    kept = read_bundle(tmp_path / "a")
    assert (loaded["nodes"], loaded["edges"]) == (kept.nodes.height, kept.edges.height)  # the rejected rows stay out


def test_neo4j_admin_import_files_load_into_a_real_database(tmp_path: Path) -> None:
    """`metakg export neo4j-admin` files, imported with neo4j-admin from the same jars, then served."""
    from tests.integration.conftest import neo4j_server
    from tests.integration.test_cli_end_to_end import metakg

    bundle = small_bundle()
    write_bundle(tmp_path / "b", bundle)
    exported = metakg("export", "neo4j-admin", str(tmp_path / "b"), str(tmp_path / "admin"))
    arguments = shlex.split(exported["import_command"])
    assert arguments[:4] == ["neo4j-admin", "database", "import", "full"]
    home = tmp_path / "home"
    result = neo4j_server.admin_import(home, arguments[4:])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "IMPORT DONE" in result.stdout
    assert (tmp_path / "admin" / "import.report").exists()  # the report lands beside the files, not in the cwd
    server = neo4j_server.start(home, neo4j_server.free_port(), heap="512m", pagecache_mb=64, jvm=neo4j_server.TEST_JVM)
    try:
        from metakg.loaders.neo4j_store import connect

        driver = connect(Neo4jSettings(uri=server.uri))
        store = Neo4jStore(driver)
        assert store.counts() == {"nodes": bundle.nodes.height, "edges": bundle.edges.height}
        aspirin = store.get_node("kg:test/0")
        assert aspirin is not None and set(aspirin.aliases) == {"acetylsalicylic acid", "ASA"}
        assert store.shortest_paths("kg:test/0", "kg:test/2")[0].hops == 2
        from metakg.loaders.neo4j_loader import follow_bundle

        # the imported rows hold what a load writes: following the same bundle rewrites nothing
        followed = follow_bundle(driver, read_bundle(tmp_path / "b"), database="neo4j", target=server.uri)
        assert (followed.nodes_loaded, followed.edges_loaded, followed.edges_removed) == (0, 0, 0)
        assert (followed.keys_added, followed.edges_relaid, followed.nodes_embedded) == (0, 0, 0)
        store.close()
        driver.close()
    finally:
        neo4j_server.discard(server)  # the imported database is the test's alone


def test_a_checkpoint_outliving_its_database_is_discarded(
    tmp_path: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    bundle = small_bundle()
    write_bundle(tmp_path / "b", bundle)
    options: dict[str, Any] = {"database": neo4j_settings.database, "target": "t", "batch_size": 2}

    def crash(batch: str) -> None:
        if batch.startswith("edges"):
            raise KeyboardInterrupt("killed half-way")

    with pytest.raises(KeyboardInterrupt):
        load_bundle(clean_neo4j, bundle, checkpoint_dir=tmp_path / "b", statement_hook=crash, **options)
    assert (tmp_path / "b" / CHECKPOINT_FILE).is_file()
    clean_neo4j.execute_query("MATCH (n) DETACH DELETE n", database_=neo4j_settings.database)  # wiped meanwhile
    report = load_bundle(clean_neo4j, bundle, checkpoint_dir=tmp_path / "b", **options)
    assert report.checkpoint.startswith("discarded: the database no longer holds") and report.batches_skipped == 0
    assert (report.nodes_in_neo4j, report.edges_in_neo4j) == (bundle.nodes.height, bundle.edges.height)
    marker, _, _ = clean_neo4j.execute_query(
        "MATCH (m)-[:METAKG]->(m) WHERE m.kind = 'load' RETURN count(m) AS n", database_=neo4j_settings.database
    )
    assert marker[0]["n"] == 0  # a finished load leaves no marker


def test_medcog_kg_verification_on_the_real_primekg_files_in_neo4j(
    tmp_path: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings, data_dir: Path, model_dir: Path
) -> None:
    """MedCoG's checks on Neo4j: the same known DrugMechDB path, and every evidence id exists in Neo4j."""
    from benchmarks.primekg_real import write_real_kg
    from metakg import api
    from metakg.config import load_settings
    from tests.unit.qa_engine.test_medcog_real import check_real_verification

    base = load_settings()
    settings = base.model_copy(
        update={
            "neo4j": neo4j_settings,
            "embedder": base.embedder.model_copy(update={"model_dir": model_dir}),
        }
    )
    kg, _rows = write_real_kg(data_dir / "primekg", tmp_path / "kg.csv")
    api.ingest_primekg(kg, tmp_path / "bundle", settings)
    api.embed_bundle(tmp_path / "bundle", settings)
    api.load_neo4j(tmp_path / "bundle", settings)
    with api.open_store(settings, neo4j=True) as store:
        check_real_verification(settings, store, tmp_path / "bundle")


def test_read_query_returns_rows_and_refuses_every_write(clean_neo4j: Any, neo4j_settings: Neo4jSettings) -> None:
    """The local query tool on Neo4j: read-only Cypher runs; writes, schema changes and bad Cypher are refused
    with a reason and change nothing; the store hands its whole graph back as a bundle."""
    import json

    from metakg.errors import StoreError
    from metakg.qa_engine.strategies.robodata.tools import local_tools

    bundle = small_bundle()
    store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, target=neo4j_settings.uri)
    store.load(bundle)
    ids = sorted(bundle.nodes["id"].to_list())
    rows = store.read_query("MATCH (n:Entity) RETURN n.id AS id ORDER BY id", limit=3)
    assert [r["id"] for r in rows] == ids[:3]
    rows = store.read_query("MATCH (n:Entity {id: $id}) RETURN n", params={"id": ids[0]})
    assert rows[0]["n"]["id"] == ids[0]  # a node comes back as its properties
    before = counts(clean_neo4j, neo4j_settings.database)
    writes = [
        "CREATE (:Entity {id: 'kg:test/new', name: 'new'})",
        "MATCH (n:Entity) DETACH DELETE n",
        "MATCH (n:Entity) SET n.name = 'changed' RETURN n.id",
        "MERGE (n:Entity {id: 'kg:test/merged'}) RETURN n",
        "CREATE INDEX entity_name_probe IF NOT EXISTS FOR (n:Entity) ON (n.name)",
        "MATCH (n:Entity) CALL { WITH n CREATE (:Probe) } RETURN count(*)",
    ]
    for query in writes:
        with pytest.raises(StoreError, match=r"read-only|failed"):
            store.read_query(query)
    with pytest.raises(StoreError, match="failed"):
        store.read_query("MATCH (n:Entity RETURN n")
    assert counts(clean_neo4j, neo4j_settings.database) == before
    names, _, _ = clean_neo4j.execute_query("MATCH (n:Entity) RETURN collect(n.name) AS names")
    assert "changed" not in names[0]["names"]
    tools = local_tools(store)
    refused = tools.call("local_query", {"query": writes[0]})
    assert not refused.ok and "read-only" in refused.text
    ok = tools.call("local_query", {"query": "MATCH (a:Entity)-[r]->(b:Entity) RETURN a.id, type(r), b.id", "limit": 2})
    assert ok.ok and len(json.loads(ok.text)) == 2
    whole = store.bundle()
    assert sorted(whole.nodes["id"].to_list()) == ids
    assert sorted(whole.edges["id"].to_list()) == sorted(bundle.edges["id"].to_list())
    store.close()


def held(driver: Any, source: str) -> tuple[dict[str, str], dict[str, tuple[str, str, str, float]]]:
    """The nodes (id -> name) and edges (id -> src, rel, dst, confidence) Neo4j holds for one source."""
    nodes, _, _ = driver.execute_query("MATCH (n:Entity {source: $s}) RETURN n.id AS id, n.name AS name", s=source)
    edges, _, _ = driver.execute_query(
        "MATCH (a:Entity)-[r]->(b:Entity) WHERE r.source = $s "
        "RETURN r.id AS id, a.id AS src, type(r) AS rel, b.id AS dst, r.confidence AS c",
        s=source,
    )
    return {r["id"]: r["name"] for r in nodes}, {r["id"]: (r["src"], r["rel"], r["dst"], r["c"]) for r in edges}


def expected(bundle: Bundle) -> tuple[dict[str, str], dict[str, tuple[str, str, str, float]]]:
    nodes = dict(bundle.nodes.select("id", "name").iter_rows())
    edges = {
        e: (s, r, d, c) for e, s, r, d, c in bundle.edges.select("id", "src", "rel", "dst", "confidence").iter_rows()
    }
    return nodes, edges


def test_neo4j_follows_the_bundle_and_leaves_other_sources_alone(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    """Version 1 loaded, then version 2 (a node and its edges removed, a node renamed, an edge's confidence
    changed, an edge added): Neo4j then holds exactly version 2 for its source, only the differences were
    written, another source's rows are untouched, and a follow killed half-way ends the same when run again."""
    from metakg.loaders.neo4j_loader import follow_bundle
    from metakg.schemas.tables import conform_edges, conform_nodes, edge_ids
    from tests.unit.schemas.test_diff import second_version

    driver, database = clean_neo4j, neo4j_settings.database
    other = Bundle(
        conform_nodes(pl.DataFrame({"id": ["kg:other/x"], "name": ["x"], "type": ["concept"], "source": ["other"]})),
        conform_edges(
            pl.DataFrame({"src": ["kg:other/x"], "dst": ["kg:test/0"], "rel": ["mentions"], "source": ["other"]})
        ),
    )
    other.edges = other.edges.with_columns(edge_ids(other.edges))
    v1, v2 = small_bundle(), second_version()
    follow = lambda b, **kw: follow_bundle(driver, b, database=database, target=neo4j_settings.uri, **kw)  # noqa: E731
    follow(v1)
    follow(other)
    assert held(driver, "test") == expected(v1) and held(driver, "other") == expected(other)
    report = follow(v2)
    assert held(driver, "test") == expected(v2)
    assert held(driver, "other") == expected(other)  # the other source's node and edge are untouched
    assert (report.nodes_loaded, report.nodes_removed) == (1, 1)  # the renamed node; warfarin
    assert (report.edges_loaded, report.edges_removed) == (2, v1.edges.height - v2.edges.height + 1)
    assert report.nodes_unchanged == v2.nodes.height - 1 and report.edges_unchanged == v2.edges.height - 2
    assert report.counts_by_source["test"] == {"nodes": v2.nodes.height, "edges": v2.edges.height}
    assert follow(v2).nodes_loaded == 0 and follow(v2).edges_removed == 0  # following again writes nothing

    class Killed(Exception):
        pass

    def kill_after_two(done: int, total: int) -> None:
        if done >= 2:
            raise Killed

    with pytest.raises(Killed):  # back to version 1, killed after two one-row batches
        follow(v1, batch_size=1, progress=kill_after_two)
    assert held(driver, "test") != expected(v1)
    follow(v1, batch_size=1)
    assert held(driver, "test") == expected(v1) and held(driver, "other") == expected(other)
    # edges a follow knows are new are created, not merged: none is ever there twice
    rows, _, _ = driver.execute_query(
        "MATCH (:Entity)-[r]->(:Entity) RETURN count(r) AS n, count(DISTINCT r.id) AS ids", database_=database
    )
    assert rows[0]["n"] == rows[0]["ids"] == v1.edges.height + other.edges.height


def test_with_history_neo4j_reads_any_earlier_load_back(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    """Version 1 loaded with --history, another source, then version 2 (history kept by default): the graph
    as of the first load's time is version 1 exactly, as of the second it is version 2 plus the other source;
    the renamed node lists both versions; a history-keeping follow killed half-way and run again keeps one
    copy of each retired version."""
    from metakg.loaders.neo4j_loader import follow_bundle, graph_as_of, versions_of
    from metakg.schemas.history import parse_time
    from metakg.schemas.tables import conform_edges, conform_nodes, edge_ids
    from tests.unit.schemas.test_diff import second_version

    driver, database = clean_neo4j, neo4j_settings.database
    other = Bundle(
        conform_nodes(pl.DataFrame({"id": ["kg:other/x"], "name": ["x"], "type": ["concept"], "source": ["other"]})),
        conform_edges(
            pl.DataFrame({"src": ["kg:other/x"], "dst": ["kg:test/0"], "rel": ["mentions"], "source": ["other"]})
        ),
    )
    other.edges = other.edges.with_columns(edge_ids(other.edges))
    v1, v2 = small_bundle(), second_version()
    follow = lambda b, **kw: follow_bundle(driver, b, database=database, target=neo4j_settings.uri, **kw)  # noqa: E731
    first = follow(v1, history=True)
    follow(other)
    second = follow(v2)
    assert first.history and second.history  # kept because the source's last load kept it
    assert held(driver, "test") == expected(v2)

    def shape(b: Bundle, source: str) -> tuple[dict[str, str], dict[str, tuple[str, str, str, float]]]:
        return expected(Bundle(b.nodes.filter(pl.col("source") == source), b.edges.filter(pl.col("source") == source)))

    then = graph_as_of(driver, database, parse_time(first.recorded_at))
    assert shape(then, "test") == expected(v1) and shape(then, "other") == ({}, {})
    assert (then.nodes.height, then.edges.height) == (v1.nodes.height, v1.edges.height)
    now = graph_as_of(driver, database, parse_time(second.recorded_at))
    assert shape(now, "test") == expected(v2) and shape(now, "other") == expected(other)
    renamed = versions_of(driver, database, "kg:test/0")
    assert [(v["name"], v["current"]) for v in renamed] == [("aspirin", False), ("acetylsalicylic acid", True)]
    assert renamed[0]["retired_at"] == renamed[1]["recorded_at"] == parse_time(second.recorded_at)
    assert held(driver, "test") == expected(v2)  # reading the past changed nothing
    from metakg import api
    from metakg.config import Settings

    cfg = Settings(neo4j=neo4j_settings)
    at = parse_time(first.recorded_at)
    with api.open_store(cfg, neo4j_settings.uri, as_of=at) as store:
        assert store.counts() == {"nodes": v1.nodes.height, "edges": v1.edges.height}
    manifest = api.snapshot(cfg, neo4j_settings.uri, at, tmp_path / "then")
    assert (manifest.nodes, manifest.edges) == (v1.nodes.height, v1.edges.height)
    assert [v.get("name") for v in api.element_history(cfg, neo4j_settings.uri, "kg:test/0")] == [
        "aspirin", "acetylsalicylic acid",
    ]  # fmt: skip

    class Killed(Exception):
        pass

    def kill_after_two(done: int, total: int) -> None:
        if done >= 2:
            raise Killed

    with pytest.raises(Killed):
        follow(v1, batch_size=1, progress=kill_after_two)
    back = follow(v1, batch_size=1)
    assert held(driver, "test") == expected(v1)
    records, _, _ = driver.execute_query(
        "MATCH (v:MetakgVersion) RETURN v.kind AS kind, v.id AS id, v.recorded_at AS at, count(*) AS n"
    )
    assert records and all(r["n"] == 1 for r in records)  # the re-run found the copies the killed run made
    between = graph_as_of(driver, database, parse_time(second.recorded_at))
    assert shape(between, "test") == expected(v2)  # version 2 is still readable after going back
    assert shape(graph_as_of(driver, database, parse_time(back.recorded_at)), "test") == expected(v1)


def test_load_keeps_the_phrase_index_of_the_database(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``load neo4j`` the first question of another process reads the phrase index the load built (and
    finds the server has planned its reads: ``warm``, which an empty database also takes)."""
    from metakg import api
    from metakg.config import load_settings
    from metakg.qa_engine.services import QAServices, phrases_file
    from metakg.text_processing import PhraseIndex
    from tests.conftest import HashEmbedder

    base = load_settings()
    settings = base.model_copy(
        update={"neo4j": neo4j_settings, "paths": base.paths.model_copy(update={"cache_dir": tmp_path / "cache"})}
    )
    api.write_validated(tmp_path / "kg", small_bundle(), settings)
    store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, target=neo4j_settings.uri)
    store.warm()  # an empty database: nothing to ask, no error
    assert store.names() == []
    api.load_neo4j(tmp_path / "kg", settings)  # ends by keeping the phrase index and warming the reads
    assert phrases_file(store.names(), tmp_path / "cache").is_file()
    store.warm()

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the phrase index was built at the question")

    monkeypatch.setattr(PhraseIndex, "__init__", refuse)
    services = QAServices(store, HashEmbedder(), max_entries=100, cache_dir=tmp_path / "cache")
    assert "aspirin" in [n.lower() for n in services.phrases.find("what does aspirin treat")]


def test_an_ontology_typed_extraction_loads_with_its_classes_as_labels(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, tmp_path: Path
) -> None:
    """A bundle extracted under an ontology (types declared in its manifest) loads into Neo4j: each node has
    the label of its class (``AnimatedFilm``, ``Human``), a value node ``Value``, and the store reads each
    node's type back, as the page and the QA engine see it."""
    from metakg import api
    from metakg.config import load_settings
    from tests.unit.extractors.test_ontology_extraction import extract

    base = load_settings()
    settings = base.model_copy(
        update={"neo4j": neo4j_settings, "paths": base.paths.model_copy(update={"cache_dir": tmp_path / "cache"})}
    )
    result, declared = extract()
    result.bundle.manifest = {"types": declared}
    assert api.write_validated(tmp_path / "anime", result.bundle, settings).ok
    loaded = api.load_neo4j(tmp_path / "anime", settings)
    assert (loaded.nodes_in_neo4j, loaded.edges_in_neo4j) == (result.bundle.nodes.height, result.bundle.edges.height)
    db = neo4j_settings.database
    rows, _, _ = clean_neo4j.execute_query("MATCH (n:Entity) RETURN n.name AS name, labels(n) AS l", database_=db)
    labels = {r["name"]: set(r["l"]) for r in rows}
    assert labels["Akira"] == {"Entity", "AnimatedFilm"} and labels["Katsuhiro Otomo"] == {"Entity", "Human"}
    assert labels["Japan"] == {"Entity", "Country"} and labels["1988"] == {"Entity", "Value"}
    with api.open_store(settings, neo4j=True) as store:
        akira = api.resolve_node(store, "Akira")
        assert akira.type == "animated_film"


class _Halved:
    """The session's embedder with each vector cut to its first half: another dimension, same names."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, f"{inner.name}-half", inner.dim // 2

    def embed(self, texts: list[str]) -> Any:
        return self.inner.embed(texts)[:, : self.dim]


def test_a_vector_index_of_another_dimension_is_rebuilt_unless_other_nodes_keep_vectors_of_it(
    embedder: Embedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    """An index built for another dimension would leave the new vectors out of it without a word: a load makes it
    again for its own vectors, and refuses while nodes it leaves alone keep vectors of the old dimension."""
    database, half = neo4j_settings.database, _Halved(embedder)
    bundle = small_bundle()
    store = Neo4jStore(clean_neo4j, database=database, embedder=half, target=neo4j_settings.uri)
    store.load(bundle, embeddings=embeddings_of(bundle, half))  # (the database held an index for embedder.dim)
    hits = store.search("aspirin", mode="embedding", k=1)
    assert [h.node.name for h in hits] == ["aspirin"]  # the vectors are in the index: it was made for half.dim
    other = Bundle(
        bundle.nodes.head(1).with_columns(pl.lit("ex:other").alias("id"), pl.lit("other").alias("name")),
        bundle.edges.head(0),
    )
    with pytest.raises(StoreError, match=rf"built for {half.dim}-dimension .* this bundle's have {embedder.dim}"):
        load_bundle(clean_neo4j, other, database=database, target=neo4j_settings.uri,
                    embeddings=embeddings_of(other, embedder))  # fmt: skip
    dims, _, _ = clean_neo4j.execute_query(
        "SHOW VECTOR INDEXES YIELD options RETURN options.indexConfig['vector.dimensions'] AS d", database_=database
    )
    assert [r["d"] for r in dims] == [half.dim]  # refused before anything was dropped


def test_auto_search_leaves_out_a_vector_index_that_holds_no_vectors(
    embedder: Embedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    """A database emptied (or reloaded without vectors) keeps its vector index: ``auto`` then searches the
    other ways, and only ``embedding``, asked for by name, says there are no vectors."""
    database = neo4j_settings.database
    store = Neo4jStore(clean_neo4j, database=database, embedder=embedder, target=neo4j_settings.uri)
    store.load(small_bundle())  # no embeddings; the fixture's database has the vector index
    assert [h.node.name for h in store.search("asprin", mode="auto", k=1)] == ["aspirin"]  # fuzzy, no error
    with pytest.raises(StoreError, match="no name embeddings"):
        store.search("aspirin", mode="embedding", k=1)


def _other_source() -> Bundle:
    """A second source of two nodes and one edge (``kg:other/...``)."""
    from metakg.schemas.tables import conform_edges, conform_nodes, edge_ids

    nodes = pl.DataFrame({"id": ["kg:other/x", "kg:other/y"], "name": ["x", "y"], "type": ["concept"] * 2,
                          "source": ["other"] * 2})  # fmt: skip
    edges = pl.DataFrame({"src": ["kg:other/x"], "dst": ["kg:other/y"], "rel": ["mentions"], "source": ["other"]})
    bundle = Bundle(conform_nodes(nodes), conform_edges(edges))
    bundle.edges = bundle.edges.with_columns(edge_ids(bundle.edges))
    return bundle


def test_probe_round4_long_ids_two_layouts_and_another_models_vectors_are_refused_before_anything_is_written(
    embedder: Embedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    """Three loads that once went wrong: a 9,000-character id (a server error mid-load, as a traceback),
    a source in the other relationship layout than the database's other sources (a wrong schema, and a later
    merge load doubled every edge), vectors of another model of the same dimension (mixed in one index)."""
    from metakg.loaders.neo4j_loader import follow_bundle

    driver, database = clean_neo4j, neo4j_settings.database
    bundle = small_bundle()
    long = Bundle(bundle.nodes.head(1).with_columns(pl.lit("kg:long/" + "L" * 9000).alias("id")), bundle.edges.head(0))
    with pytest.raises(StoreError, match=r"node id .* 9,008 bytes long .* at most 8,000 bytes"):
        load_bundle(driver, long, database=database, target="t")
    assert counts(driver, database) == (0, 0)

    load_bundle(driver, bundle, database=database, target="t", rel_types="typed")
    from metakg.errors import UsageError

    with pytest.raises(UsageError, match=r"keeps its edges in the typed relationship layout .*--rel-types typed"):
        load_bundle(driver, _other_source(), database=database, target="t", rel_types="generic")
    with pytest.raises(UsageError, match="typed relationship layout"):
        follow_bundle(driver, _other_source(), database=database, target="t", rel_types="generic")
    assert counts(driver, database) == (bundle.nodes.height, bundle.edges.height)  # nothing of it written
    follow_bundle(driver, bundle, database=database, target="t", rel_types="generic")  # its own layout: may move
    before = counts(driver, database)
    follow_bundle(driver, bundle, database=database, target="t")  # again: nothing doubled
    assert counts(driver, database) == before == (bundle.nodes.height, bundle.edges.height)

    class OtherModel:
        name, dim = "another-model", embedder.dim

        def embed(self, texts: Any) -> Any:
            return embedder.embed([t[::-1] for t in texts])

    mine = embeddings_of(bundle, embedder)
    withvectors = Bundle(bundle.nodes, bundle.edges, manifest={"embeddings": {"model": embedder.name}})
    load_bundle(driver, withvectors, database=database, target="t", embeddings=mine)
    other = _other_source()
    other.manifest = {"embeddings": {"model": OtherModel.name}}
    with pytest.raises(StoreError, match=f"made by {embedder.name} .* this bundle's by another-model"):
        load_bundle(driver, other, database=database, target="t", embeddings=embeddings_of(other, OtherModel()))


def test_probe_round4_a_source_without_history_stays_in_the_past_reads_after_it_is_written_again(
    embedder: Embedder, clean_neo4j: Any, neo4j_settings: Neo4jSettings
) -> None:
    """A source loaded before another kept history has rows without recorded_at (there from the start);
    written again unchanged (its nodes given their name embeddings), they were stamped now and vanished from
    the reads of earlier times."""
    import time

    from metakg.loaders.neo4j_loader import follow_bundle, graph_as_of

    driver, database = clean_neo4j, neo4j_settings.database
    bundle = small_bundle()
    follow_bundle(driver, bundle, database=database, target="t", rel_types="typed")  # no history
    follow_bundle(driver, _other_source(), database=database, target="t", history=True)
    time.sleep(0.05)
    earlier = datetime.now(UTC)
    time.sleep(0.05)
    embedded = Bundle(bundle.nodes, bundle.edges, manifest={"embeddings": {"model": embedder.name}})
    follow_bundle(driver, embedded, database=database, target="t", embeddings=embeddings_of(bundle, embedder))
    past = graph_as_of(driver, database, earlier)
    assert set(bundle.nodes["id"].to_list()) <= set(past.nodes["id"].to_list())
    assert set(bundle.edges["id"].to_list()) <= set(past.edges["id"].to_list())
