"""The Python blocks of docs/neo4j-tools.md run as written, in order, against the real Neo4j holding a graph
metakg loaded: neo4j-graphrag and LangChain find what metakg's own search finds."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from metakg.config import Neo4jSettings
from metakg.llm.embedder import Embedder
from metakg.loaders.neo4j_store import Neo4jStore
from metakg.schemas.bundle import Bundle
from tests.conftest import small_bundle
from tests.integration.test_neo4j import embeddings_of
from tests.integration.test_neo4j_layout import INTERNAL

pytestmark = [
    pytest.mark.integration,
    # neo4j-graphrag warns that its result records will drop an internal field in its version 2; not ours
    pytest.mark.filterwarnings("ignore:The default returned 'id' field:DeprecationWarning"),
]

DOC = Path(__file__).resolve().parents[2] / "docs" / "neo4j-tools.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_neo4j_tools_page_runs_as_written(
    clean_neo4j: Any, neo4j_settings: Neo4jSettings, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = small_bundle()
    made = Bundle(bundle.nodes, bundle.edges, manifest={"embeddings": {"model": embedder.name, "dim": embedder.dim}})
    store = Neo4jStore(clean_neo4j, database=neo4j_settings.database, embedder=embedder)
    store.load(made, embeddings=embeddings_of(bundle, embedder))
    # what `make neo4j-up` prints for a server without authentication
    monkeypatch.setenv("NEO4J_URI", neo4j_settings.uri)
    monkeypatch.setenv("NEO4J_USERNAME", "")
    monkeypatch.setenv("NEO4J_PASSWORD", "")
    monkeypatch.setenv("NEO4J_DATABASE", neo4j_settings.database)
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    namespace: dict[str, Any] = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks[:-1]:  # the last closes the connections: run after the checks below
            exec(compile(block, str(DOC), "exec"), namespace)
    out = printed.getvalue()
    ours = [h.node.id for h in store.search("a painkiller", mode="embedding", k=3)]
    assert f"'id': '{ours[0]}'" in out  # neo4j-graphrag's vector search finds what metakg's finds first
    facts = out[out.index("<Record name='migraine' facts=[") :].split("\n")[0]
    assert "'treats: sumatriptan'" in facts and "'symptom_of: headache'" in facts
    schema = namespace["schema"]
    assert "(:Drug)-[:treats]->" in schema and "Relation patterns" in schema
    printed_schema = out[out.index("Node properties:") :]
    assert not [word for word in INTERNAL if word in printed_schema.split("\n\n")[0]]
    assert namespace["rows"] and {"rel": "treats", "other": "headache"} in namespace["rows"]
    docs = namespace["vectors"].similarity_search("a painkiller", k=3)
    assert docs[0].page_content == store.get_node(ours[0]).name  # type: ignore[union-attr]
    assert namespace["text2cypher"] is not None
    # hybrid search (vector and full-text names) in both libraries; LangChain on a connection of its own
    assert namespace["hybrid"].search(query_text="aspirin", top_k=3).items[0].content.count("'aspirin'")
    hybrid = namespace["hybrid_vectors"].similarity_search("aspirin", k=3)
    assert hybrid[0].page_content == "aspirin" and namespace["hybrid_vectors"]._driver is not clean_neo4j
    with pytest.raises(ValueError, match="Did not find username"):  # what the page warns of
        namespace["Neo4jVector"].from_existing_index(
            namespace["MetakgEmbeddings"](),
            url=neo4j_settings.uri,
            username="",
            password="",
            index_name="entity_embedding",
        )
    exec(compile(blocks[-1], str(DOC), "exec"), namespace)


def test_a_server_started_with_a_password_needs_it_and_the_tools_read_it_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_neo4j import Neo4jGraph

    from metakg.errors import ConfigError
    from metakg.loaders.neo4j_store import connect
    from tests.integration.conftest import neo4j_server

    monkeypatch.setenv("METAKG_NEO4J_PASSWORD", "a-local-password-1")
    server = neo4j_server.start(
        tmp_path / "home", neo4j_server.free_port(), heap="512m", pagecache_mb=64, jvm=neo4j_server.TEST_JVM
    )
    try:
        assert "a-local-password-1" not in (tmp_path / "home" / "neo4j.log").read_text()
        with pytest.raises(ConfigError, match="refused user"):
            connect(Neo4jSettings(uri=server.uri))  # no password: refused
        connect(Neo4jSettings(uri=server.uri, password="a-local-password-1")).close()  # type: ignore[arg-type]
        # what the launcher tells a user to export, read by LangChain's own defaults
        monkeypatch.setenv("NEO4J_URI", server.uri)
        monkeypatch.setenv("NEO4J_USERNAME", "neo4j")
        monkeypatch.setenv("NEO4J_PASSWORD", "a-local-password-1")
        graph = Neo4jGraph(refresh_schema=False)
        assert graph.query("RETURN 1 AS one") == [{"one": 1}]
        graph.close()
    finally:
        neo4j_server.stop(server)
