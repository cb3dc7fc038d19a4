"""One LLM session for a long-lived process: questions from many threads share one client, whose
concurrency bound holds across all of them, and each question's usage and steps stay its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from metakg import api
from metakg.config import load_settings
from metakg.loaders.embedded_store import EmbeddedStore
from tests.conftest import small_bundle
from tests.fault_server import FaultServer


@pytest.fixture()
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    running = FaultServer().start()
    running.reply = "Answer: A"
    settings = {"BASE_URL": running.url, "MODEL": "m", "TIMEOUT_S": "10", "BACKOFF_S": "0.01", "CONCURRENCY": "2"}
    for key, value in settings.items():
        monkeypatch.setenv(f"METAKG_LLM__{key}", value)
    monkeypatch.setenv("METAKG_QA__CONCEPTS", "rules")
    yield running
    running.stop()


def test_questions_from_many_threads_share_one_bounded_client(endpoint: FaultServer, any_embedder: None) -> None:
    settings = load_settings()
    endpoint.script(*["slow:0.3"] * 6)
    bundle = small_bundle()
    answers: dict[int, Any] = {}
    heard: dict[int, list[str]] = {}
    with EmbeddedStore(bundle.nodes, bundle.edges) as store:
        shared = api.SharedLLM(settings)

        def ask(number: int) -> None:
            question = api.make_question(f"What does aspirin treat? ({number})", ["A: headache", "B: warfarin"])
            heard[number] = []
            answers[number] = api.answer_over(
                settings, store, question, api.create_strategy(settings, "kg_rag"), runner=api.SharedRunner(shared),
                steps=lambda step: heard[number].append(step["kind"]),
            )  # fmt: skip

        try:
            threads = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            client = shared.client
        finally:
            shared.close()
    assert len(endpoint.requests) == 6 and endpoint.max_in_flight == 2  # llm.concurrency, across questions
    assert all(a.status == "ok" and a.choice == "A" and a.usage.llm_calls == 1 for a in answers.values())
    assert all(kinds[:1] == ["concepts"] and "retrieved" in kinds for kinds in heard.values())  # each its own
    assert client is not None and shared.client is None  # closed


def test_a_closed_or_unused_session_starts_nothing(endpoint: FaultServer) -> None:
    shared = api.SharedLLM(load_settings())
    shared.close()
    assert shared.client is None and not endpoint.requests
