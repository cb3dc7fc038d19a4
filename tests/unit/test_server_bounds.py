"""Bounds of the server found by the third probe: per-graph keys kept and masked, questions waiting for a slot
holding no worker thread, one embedding of the names however many searches want it."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from metakg import api
from metakg.config import Settings, load_settings
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.server.app import AccessLogSecrets, create_graphs_app, log_secrets
from metakg.server.graphs import parse_graphs
from metakg.server.served import ServedGraph
from tests.conftest import HashEmbedder, small_bundle

KEY = "graph-b-key-0000000000"


def with_server(settings: Settings, **server: Any) -> Settings:
    return settings.model_copy(update={"server": settings.server.model_copy(update=server)})


def test_a_graphs_own_key_guards_it_when_it_is_served_alone_and_never_reaches_the_log(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    api.write_validated(bundle, small_bundle(), load_settings())
    settings = with_server(load_settings(), graph_keys={"b": SecretStr(KEY)})
    graphs = parse_graphs([f"b={bundle}"], False, [], settings)
    with TestClient(create_graphs_app(settings, graphs), base_url="http://127.0.0.1") as client:
        assert client.get("/api/graph").status_code == 401  # once served with no key at all
        assert client.get("/api/graph", headers={"X-API-Key": KEY}).status_code == 200
    record = logging.LogRecord("uvicorn.access", 20, "", 0, '%s - "%s %s"', ("1.2.3.4", "GET", f"/api/x/{KEY}"), None)
    AccessLogSecrets(log_secrets(settings.server)).filter(record)
    assert KEY not in record.getMessage() and "***" in record.getMessage()


def test_questions_waiting_for_a_slot_hold_no_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """44 questions for one slot once held every worker thread: /api/health waited a minute."""
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    release = threading.Event()
    answered = ServedGraph.answer

    def slow(self: ServedGraph, *args: Any, **kwargs: Any) -> Any:
        release.wait(60)
        return answered(self, *args, **kwargs)

    monkeypatch.setattr(ServedGraph, "answer", slow)
    settings = with_server(load_settings(), max_concurrent_asks=1)
    graphs = parse_graphs([str(bundle)], False, [], settings)
    with TestClient(create_graphs_app(settings, graphs), base_url="http://127.0.0.1") as client:
        ask = {"question": "What does aspirin treat?", "use_llm": False}
        with ThreadPoolExecutor(48) as pool:
            asks = [pool.submit(client.post, "/api/ask", json=ask) for _ in range(44)]
            time.sleep(2)  # every question is in: one answering, 43 waiting for the slot
            started = time.monotonic()
            assert client.get("/api/health").status_code == 200
            assert time.monotonic() - started < 5
            release.set()
            assert all(a.result(timeout=120).status_code == 200 for a in asks)


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        self.texts = 0
        self.lock = threading.Lock()

    def embed(self, texts: Any) -> Any:
        with self.lock:
            self.texts += len(texts)
        time.sleep(0.2)  # long enough for the other searches to arrive
        return super().embed(texts)


def test_concurrent_embedding_searches_embed_the_names_once() -> None:
    bundle = small_bundle()
    embedder = CountingEmbedder()
    store = EmbeddedStore.from_bundle(bundle, embedder=embedder)
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: store.search("aspirin", mode="embedding", k=3), range(8)))
    assert all(hits and hits[0].node.name == "aspirin" for hits in found)
    # the names once, and each search's text once
    assert embedder.texts == bundle.nodes.height + 8
    assert isinstance(store._node_vectors(), np.ndarray)


def test_a_full_evaluation_queue_is_busy_and_a_graphs_run_is_found_at_its_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probe round 4: a full queue answered 400 (503 is the API's busy), and a run started on graph b gave the
    default graph's url, a 404."""
    from metakg.server.evaluations import Evaluations

    first, second = tmp_path / "a", tmp_path / "b"
    for path in (first, second):
        api.write_validated(path, small_bundle(), load_settings())
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    (benchmarks / "q.json").write_text("[]", encoding="utf-8")
    release = threading.Event()

    def slow(_self: Evaluations, run: Any, _tick: Any) -> api.EvaluationResult:
        release.wait(30)
        return api.EvaluationResult({}, 0, run.out_dir, list(api.COLUMNS))

    monkeypatch.setattr(Evaluations, "_evaluate", slow)
    settings = with_server(load_settings(), benchmarks_dir=benchmarks)
    graphs = parse_graphs([f"a={first}", f"b={second}"], False, [], settings)
    body = {"benchmark": "q.json", "format": "pilot", "use_llm": False}
    with TestClient(create_graphs_app(settings, graphs), base_url="http://127.0.0.1") as client:
        run = client.post("/graphs/b/api/evaluations", json=body).json()
        assert run["url"] == f"/graphs/b/api/evaluations/{run['id']}"
        assert client.get(run["url"]).status_code == 200
        answers = [client.post("/graphs/b/api/evaluations", json=body).status_code for _ in range(12)]
        assert 503 in answers and 400 not in answers
        release.set()


def test_a_query_value_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """Probe round 4: q=%ff was searched as U+FFFD (and found "-" by embedding)."""
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    graphs = parse_graphs([str(bundle)], False, [], load_settings())
    with TestClient(create_graphs_app(load_settings(), graphs), base_url="http://127.0.0.1") as client:
        refused = client.get("/api/search?q=%ff")
        assert refused.status_code == 400 and "not UTF-8" in refused.json()["error"]
        assert client.get("/api/search?q=%C3%A9t%C3%A9+aspirin").status_code == 200  # UTF-8 escapes are fine
