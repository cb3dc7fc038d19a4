"""The OpenAI-compatible client against hostile endpoints (real HTTP servers on 127.0.0.1): a reply dripped
byte by byte, a connection dropped mid-body, a cache shared by two endpoints, credentials in the URL."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg.config import LLMSettings
from metakg.errors import LLMError
from metakg.llm.cache import ResponseCache
from metakg.llm.client import ChatRequest, Completion, Message, request
from metakg.llm.openai_client import OpenAICompatibleClient
from tests.fault_server import FaultServer


@pytest.fixture
def server() -> Iterator[FaultServer]:
    running = FaultServer().start()
    yield running
    running.stop()


@pytest.fixture
def other() -> Iterator[FaultServer]:
    running = FaultServer().start()
    running.reply = "the other endpoint's reply"
    yield running
    running.stop()


def settings(**overrides: object) -> LLMSettings:
    options: dict[str, object] = {"model": "test-model", "timeout_s": 1.0, "max_retries": 5, "backoff_s": 0.01}
    return LLMSettings.model_validate(options | overrides)


def ask(text: str = "hello") -> ChatRequest:
    return request([Message("user", text)], model="test-model")


def test_a_reply_dripped_byte_by_byte_is_cut_at_the_deadline_and_retried(server: FaultServer) -> None:
    """Each byte comes well within the timeout, the reply as a whole would take ~20 s: llm.timeout_s (1 s)
    is the deadline of the whole attempt, so two dripping attempts cost ~2 s before the third answers."""
    client = OpenAICompatibleClient(settings(), base_url=server.url)
    server.script("drip:0.05", "drip:0.05")
    start = time.monotonic()
    reply = asyncio.run(client.complete(ask()))
    elapsed = time.monotonic() - start
    assert reply.text == "ok reply" and reply.attempts == 3 and len(server.requests) == 3
    assert 2.0 <= elapsed < 6.0


def test_a_reply_that_always_drips_ends_as_llm_error_within_the_deadlines(server: FaultServer) -> None:
    client = OpenAICompatibleClient(settings(max_retries=1), base_url=server.url)
    server.script("drip:0.05", "drip:0.05")
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"after 2 attempts .*no complete reply within 1 s \(llm.timeout_s\)") as info:
        asyncio.run(client.complete(ask()))
    assert time.monotonic() - start < 5.0  # 2 attempts x 1 s, not 2 x 20 s
    assert info.value.attempts == 2 and len(server.requests) == 2


def test_a_connection_dropped_mid_body_is_retried_then_a_clean_error(server: FaultServer) -> None:
    client = OpenAICompatibleClient(settings(), base_url=server.url)
    server.script("drop_mid_body", "truncated")  # chunked and content-length bodies cut short
    assert asyncio.run(client.complete(ask())).attempts == 3
    failing = OpenAICompatibleClient(settings(max_retries=1), base_url=server.url)
    server.script("drop_mid_body", "drop_mid_body")
    with pytest.raises(LLMError, match="after 2 attempts") as info:
        asyncio.run(failing.complete(ask("again")))
    assert info.value.attempts == 2


def test_the_cache_never_replays_one_endpoints_reply_for_another(
    server: FaultServer, other: FaultServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = OpenAICompatibleClient(settings(base_url=server.url), base_url=server.url, cache=cache)
    second = OpenAICompatibleClient(settings(base_url=other.url), base_url=other.url, cache=cache)
    assert asyncio.run(first.complete(ask())).text == "ok reply"
    answer = asyncio.run(second.complete(ask()))
    assert answer.text == "the other endpoint's reply" and not answer.cached and len(other.requests) == 1
    again = asyncio.run(first.complete(ask()))  # each endpoint still has its own reply cached
    assert again.cached and again.text == "ok reply" and len(server.requests) == 1
    other_model = request([Message("user", "hello")], model="another-model")
    assert asyncio.run(second.complete(other_model)).cached is False and len(other.requests) == 2


def test_credentials_in_the_url_do_not_split_the_cache_and_an_old_cache_file_still_opens(
    server: FaultServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache.put(ask(), Completion(text="an answer cached before endpoints were in the key", model="test-model"))
    with_user = server.url.replace("http://", "http://alice:pw@")
    client = OpenAICompatibleClient(settings(base_url=with_user), base_url=with_user, cache=cache)
    assert asyncio.run(client.complete(ask())).text == "ok reply"  # the old entry misses, no error
    plain = OpenAICompatibleClient(settings(base_url=server.url), base_url=server.url, cache=cache)
    assert asyncio.run(plain.complete(ask())).cached  # the same endpoint, whoever logs in
    assert cache.get(ask()) is not None and len(server.requests) == 1  # old keys still readable


def test_the_local_server_is_one_endpoint_whatever_its_port(
    server: FaultServer, other: FaultServer, tmp_path: Path
) -> None:
    """The local server starts on a free port each run: its replies must survive a restart (no base_url)."""
    cache = ResponseCache(tmp_path / "cache.sqlite")
    asyncio.run(OpenAICompatibleClient(settings(), base_url=server.url, cache=cache).complete(ask()))
    hit = asyncio.run(OpenAICompatibleClient(settings(), base_url=other.url, cache=cache).complete(ask()))
    assert hit.cached and hit.text == "ok reply" and not other.requests


def test_userinfo_in_the_endpoint_url_is_basic_auth_to_the_real_host_and_never_shown(
    server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    base_url = server.url.replace("http://", "http://alice:s3cret%40pw@")
    client = OpenAICompatibleClient(settings(api_key="sk-key", base_url=base_url), base_url=base_url)
    with caplog.at_level(logging.DEBUG):
        assert asyncio.run(client.complete(ask())).text == "ok reply"
        server.script("500", "500")
        failing = OpenAICompatibleClient(settings(max_retries=1, base_url=base_url), base_url=base_url)
        with pytest.raises(LLMError) as info:
            asyncio.run(failing.complete(ask("fails")))
    sent = server.headers[0]
    assert sent["authorization"] == "Basic " + base64.b64encode(b"alice:s3cret@pw").decode()
    assert sent["host"] == f"127.0.0.1:{server.port}"
    assert "s3cret" not in str(info.value) and "alice:***@127.0.0.1" in str(info.value)
    credential = base64.b64encode(b"alice:s3cret@pw").decode()
    assert caplog.records  # the SDK and httpx log each request at DEBUG/INFO: never the password, nor its base64
    assert not [r for r in caplog.records if "s3cret" in r.getMessage() or credential in r.getMessage()]
