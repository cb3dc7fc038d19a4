"""Whoever opens a store closes it: after `ask`, `eval` and `query` on the real Neo4j, no connection of
theirs is left open on the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metakg import api
from metakg.config import Neo4jSettings, load_settings
from tests.conftest import small_bundle
from tests.unit.cli.test_cli import run

pytestmark = pytest.mark.integration


COUNTER = "metakg-test-connection-counter"


def open_connections(driver: Any) -> int:
    """Bolt connections the server holds, less the counting driver's own (told apart by their user agent,
    since a driver's pool may hold several)."""
    records, _, _ = driver.execute_query(
        "CALL dbms.listConnections() YIELD userAgent WHERE userAgent <> $me RETURN count(*) AS n", me=COUNTER
    )
    return int(records[0]["n"])


def settled(driver: Any, want: int | None = None, wait_s: float = 5.0) -> int:
    """The connection count once the server has caught up with closes (``want`` reached, or two equal
    readings in a row): a closed socket may still be listed for a moment; a leaked one stays for ever."""
    import time

    last, deadline = open_connections(driver), time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = open_connections(driver)
        if (want is not None and now == want) or (want is None and now == last):
            return now
        last = now
    return last


@pytest.fixture
def counter(neo4j_settings: Neo4jSettings) -> Any:
    """A driver of its own for counting, so the shared test driver's pooled connections stay as they are."""
    import neo4j

    password = neo4j_settings.password.get_secret_value()
    driver = neo4j.GraphDatabase.driver(
        neo4j_settings.uri, auth=(neo4j_settings.user, password) if password else None, user_agent=COUNTER
    )
    yield driver
    driver.close()


def test_commands_close_their_neo4j_connections(
    clean_neo4j: Any,
    counter: Any,
    neo4j_settings: Neo4jSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    any_embedder: None,
) -> None:
    monkeypatch.setenv("METAKG_NEO4J__URI", neo4j_settings.uri)
    monkeypatch.setenv("METAKG_NEO4J__DATABASE", neo4j_settings.database)
    monkeypatch.setenv("METAKG_QA__CONCEPTS", "rules")
    settings = load_settings()
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), settings)
    api.load_neo4j(bundle, settings)
    before = settled(counter)
    _, answer = run("ask", "What does aspirin treat?", "--neo4j", "--no-llm", "--json")
    assert answer["evidence"]  # it did read the graph
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps({"question": "What does aspirin treat?\nA: warfarin\nB: headache", "answer": "B"}))
    run("eval", str(questions), "-f", "pilot", "--neo4j", "--no-llm", "-o", str(tmp_path / "r"), "-s", "kg_rag")
    run("query", "neighbours", neo4j_settings.uri, "aspirin", "--json")
    with api.open_store(settings, neo4j=True) as store:
        assert store.counts()["nodes"] > 0
        assert open_connections(counter) > before  # the store holds one while open
    assert settled(counter, want=before) == before


def test_a_database_that_does_not_exist_is_a_configuration_error(
    neo4j_settings: Neo4jSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_NEO4J__URI", neo4j_settings.uri)
    monkeypatch.setenv("NEO4J_DATABASE", "nosuchdb")
    result, payload = run("query", "search", neo4j_settings.uri, "aspirin", "--json", code=2)
    assert "no database 'nosuchdb'" in payload["error"] and "NEO4J_DATABASE" in payload["error"]
    assert "Traceback" not in result.stdout + result.stderr
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    result, _ = run("load", "neo4j", str(bundle), code=2)
    assert "no database 'nosuchdb'" in result.stderr
