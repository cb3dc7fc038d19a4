"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 that injects faults."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg.config import LLMSettings
from metakg.errors import ConfigError, LLMError
from metakg.llm.cache import ResponseCache
from metakg.llm.client import Message, request
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.llm.usage import MeteredClient, UsageMeter
from tests.fault_server import ODD_SHAPES, FaultServer


@pytest.fixture
def server() -> Iterator[FaultServer]:
    running = FaultServer().start()
    yield running
    running.stop()


def make_client(server: FaultServer, tmp_path: Path, **overrides: object) -> tuple[MeteredClient, UsageMeter]:
    """The client as the api builds it: cached, wrapped in a usage meter that writes the ledger file."""
    options: dict[str, object] = {
        "model": "test-model",
        "api_key": "sk-secret-never-shown",
        "timeout_s": 1.0,
        "max_retries": 5,
        "backoff_s": 0.01,
        "prices_per_mtok": {"test-model": (1.0, 2.0)},
        **overrides,
    }
    settings = LLMSettings.model_validate(options)
    meter = UsageMeter("run-1", settings.prices_per_mtok, path=tmp_path / "ledger.jsonl")
    inner = OpenAICompatibleClient(settings, base_url=server.url, cache=ResponseCache(tmp_path / "cache.sqlite"))
    return MeteredClient(inner, meter), meter


def ask(text: str = "hello", json_mode: bool = False):  # type: ignore[no-untyped-def]
    return request([Message("user", text)], model="test-model", json_mode=json_mode)


def test_a_plain_reply_is_returned_cached_and_accounted(server: FaultServer, tmp_path: Path) -> None:
    client, ledger = make_client(server, tmp_path)
    first = asyncio.run(client.complete(ask(), tag="q1"))
    assert first.text == "ok reply" and first.usage.prompt_tokens == 11 and not first.cached
    second = asyncio.run(client.complete(ask(), tag="q1"))
    assert second.cached and second.text == "ok reply"
    assert len(server.requests) == 1  # the repeat made no HTTP call
    summary = ledger.summary()  # two calls, one from the cache: billed once, its tokens saved once
    assert (summary.llm_calls, summary.cache_hits, summary.tokens, summary.saved_tokens) == (2, 1, 14, 14)
    assert summary.cost_usd == pytest.approx((11 * 1.0 + 3 * 2.0) / 1e6)
    assert [r.cost_usd for r in ledger.records][1] == 0.0
    assert (tmp_path / "ledger.jsonl").read_text().count("\n") == 2


def test_429_honours_retry_after(server: FaultServer, tmp_path: Path) -> None:
    client, ledger = make_client(server, tmp_path)
    server.script("429:0.6")
    start = time.perf_counter()
    reply = asyncio.run(client.complete(ask()))
    assert reply.text == "ok reply" and time.perf_counter() - start >= 0.6
    assert len(server.requests) == 2 and ledger.summary().retries == 1


def test_every_fault_is_retried_until_a_reply(server: FaultServer, tmp_path: Path) -> None:
    client, ledger = make_client(server, tmp_path)
    server.script("500", "drop", "truncated", "slow:1.5")
    reply = asyncio.run(client.complete(ask(), tag="q"))
    assert reply.text == "ok reply"
    assert len(server.requests) == 5
    entry = ledger.records[-1]
    assert entry.attempts == 5 and entry.error is None


@pytest.mark.parametrize("shape", [*sorted(ODD_SHAPES), "deep"])
def test_a_200_that_is_not_a_chat_completion_is_retried_then_a_clean_error(
    server: FaultServer, tmp_path: Path, shape: str
) -> None:
    client, _ledger = make_client(server, tmp_path, max_retries=1)
    server.script(f"shape:{shape}")
    assert asyncio.run(client.complete(ask(), tag="q")).text == "ok reply"  # retried: the next reply is good
    server.script(f"shape:{shape}", f"shape:{shape}")
    with pytest.raises(LLMError, match=r"not a chat completion|RecursionError"):
        asyncio.run(client.complete(ask("another question"), tag="q"))


@pytest.mark.parametrize("status", [400, 422, 500])
def test_an_error_reply_echoing_the_key_never_passes_it_on(server: FaultServer, tmp_path: Path, status: int) -> None:
    client, _ledger = make_client(server, tmp_path, max_retries=1)
    server.script(f"echo_auth:{status}", f"echo_auth:{status}")
    with pytest.raises(LLMError) as refused:
        asyncio.run(client.complete(ask(f"question {status}"), tag="q"))
    assert "Authorization: Bearer ***" in str(refused.value)  # the endpoint's words, the key masked
    assert "sk-secret-never-shown" not in str(refused.value)
    assert "sk-secret-never-shown" not in (tmp_path / "ledger.jsonl").read_text()


def test_persistent_failure_stops_cleanly_and_says_why(server: FaultServer, tmp_path: Path) -> None:
    client, ledger = make_client(server, tmp_path, max_retries=2)
    server.script("500", "500", "500", "500")
    with pytest.raises(LLMError, match="after 3 attempts") as info:
        asyncio.run(client.complete(ask(), tag="q"))
    assert "sk-secret-never-shown" not in str(info.value)
    assert len(server.requests) == 3
    summary = ledger.summary()
    assert summary.failures == 1 and summary.llm_calls == 0 and summary.errors
    assert ledger.records[-1].attempts == 3
    assert "sk-secret-never-shown" not in (tmp_path / "ledger.jsonl").read_text()


def test_json_mode_falls_back_to_plain_text(server: FaultServer, tmp_path: Path) -> None:
    client, _ = make_client(server, tmp_path)
    server.script("refuse_json")
    reply = asyncio.run(client.complete(ask(json_mode=True)))
    assert reply.text == "ok reply"
    assert "response_format" in server.requests[0] and "response_format" not in server.requests[1]


def test_a_json_schema_steps_down_the_structured_forms_the_endpoint_refuses(
    server: FaultServer, tmp_path: Path
) -> None:
    client, _ = make_client(server, tmp_path)
    server.script("refuse_json", "refuse_json_500")
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    asked = request([Message("user", "rate it")], model="test-model", json_schema=schema)
    assert asked.json_mode and asked.key() != ask("rate it", json_mode=True).key()  # the schema is in the key
    assert asyncio.run(client.complete(asked)).text == "ok reply"
    sent = [body["response_format"] for body in server.requests]
    assert [f["type"] for f in sent] == ["json_schema", "json_object", "json_object"]
    assert sent[0]["json_schema"]["schema"] == schema and sent[1]["schema"] == schema and "schema" not in sent[2]
    asyncio.run(client.complete(request([Message("user", "again")], model="test-model", json_schema=schema)))
    assert server.requests[-1]["response_format"] == {"type": "json_object"}  # remembered


def test_concurrency_is_bounded(server: FaultServer, tmp_path: Path) -> None:
    client, ledger = make_client(server, tmp_path, concurrency=2)
    server.script(*["slow:0.3"] * 6)

    async def many() -> list[str]:
        replies = await asyncio.gather(*(client.complete(ask(f"q{i}"), tag=f"q{i}") for i in range(6)))
        return [r.text for r in replies]

    assert asyncio.run(many()) == ["ok reply"] * 6
    assert server.max_in_flight == 2
    assert ledger.summary().llm_calls == 6


def test_cli_ask_uses_the_configured_endpoint_and_the_cache(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.cli.test_cli import run

    monkeypatch.setenv("METAKG_LLM__BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-never-shown")
    _, first = run("llm", "ask", "What treats migraine?", "--json")
    assert first["reply"] == "ok reply" and first["cached"] is False and first["llm_calls"] == 1
    result, second = run("llm", "ask", "What treats migraine?", "--json")
    assert second["cached"] is True and second["llm_calls"] == 1 and second["cache_hits"] == 1
    assert second["cost_usd"] == 0 and second["tokens"] == 0 and second["saved_tokens"] > 0
    assert len(server.requests) == 1
    assert "sk-secret-never-shown" not in result.stdout + result.stderr
    _, shown = run("config", "show", "--json")
    assert shown["settings"]["llm"]["api_key"] == "**********"


def test_a_key_written_into_the_endpoint_url_never_reaches_a_message(tmp_path: Path) -> None:
    settings = LLMSettings(model="m", max_retries=0, timeout_s=1.0, backoff_s=0.0)
    client = OpenAICompatibleClient(settings, base_url="http://user:sk-in-url@127.0.0.1:9/v1")
    with pytest.raises(LLMError) as info:
        asyncio.run(client.complete(ask()))
    assert "sk-in-url" not in str(info.value) and "user:***@127.0.0.1:9" in str(info.value)


def test_a_refused_connection_fails_fast_while_timeouts_keep_their_patience(tmp_path: Path) -> None:
    settings = LLMSettings(model="m", max_retries=5, backoff_s=0.01, connect_retries=1)
    client = OpenAICompatibleClient(settings, base_url="http://127.0.0.1:9/v1")  # nothing listens there
    with pytest.raises(LLMError, match="refused the connection 2 times") as info:
        asyncio.run(client.complete(ask()))
    assert info.value.attempts == 2 and "llm.base_url" in str(info.value)


def test_the_local_server_refuses_a_busy_port() -> None:
    import socket

    from metakg.llm import local_server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is busy"):
            local_server.start(port)


def test_tools_go_out_through_function_calling_and_the_calls_come_back_in_the_text(
    server: FaultServer, tmp_path: Path
) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    server.calls_for = lambda body: [("lookup", '{"id": "Q42"}'), ("lookup", "not json")]
    client, _ = make_client(server, tmp_path, base_url=server.url)  # a configured endpoint: auto is on
    asked = request([Message("user", "find it")], model="test-model", json_schema={"type": "object"}, tools=tools)
    reply = asyncio.run(client.complete(asked))
    assert json.loads(reply.text) == {"tool_calls": [{"tool": "lookup", "args": {"id": "Q42"}},
                                                     {"tool": "lookup", "args": "not json"}]}  # fmt: skip
    body = server.requests[-1]
    assert body["tools"] == tools and body["tool_choice"] == "required" and "response_format" not in body
    assert asyncio.run(client.complete(asked)).text == reply.text and len(server.requests) == 1  # cached whole
    assert (
        asked.key() != request([Message("user", "find it")], model="test-model", json_schema={"type": "object"}).key()
    )


def test_an_endpoint_refusing_tools_gets_structured_output_from_then_on(server: FaultServer, tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client, _ = make_client(server, tmp_path, function_calling="on")
    server.script("refuse_tools")
    asked = request([Message("user", "find it")], model="test-model", json_schema={"type": "object"}, tools=tools)
    assert asyncio.run(client.complete(asked)).text == "ok reply"
    assert "tools" in server.requests[0] and "tools" not in server.requests[1]
    assert server.requests[1]["response_format"]["type"] == "json_schema"
    asyncio.run(client.complete(request([Message("user", "again")], model="test-model", tools=tools)))
    assert "tools" not in server.requests[-1]  # remembered


def test_the_local_server_gets_no_tools_on_auto(server: FaultServer, tmp_path: Path) -> None:
    """llama-cpp-python ignores tools it cannot force, so on ``auto`` the local server (no base_url) gets the
    JSON-in-text protocol with structured output instead."""
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client, _ = make_client(server, tmp_path)
    asyncio.run(client.complete(request([Message("user", "x")], model="test-model", json_schema={}, tools=tools)))
    assert "tools" not in server.requests[-1] and "response_format" in server.requests[-1]


def test_an_endpoint_ignoring_tools_gets_structured_output_from_then_on(server: FaultServer, tmp_path: Path) -> None:
    """llama-cpp-python takes ``tools`` and ``tool_choice: required`` but, for a model it cannot force,
    replies with text and no call: that reply is dropped and the request asked again without tools."""
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client, meter = make_client(server, tmp_path, base_url=server.url)  # auto: tools are tried
    asked = request([Message("user", "find it")], model="test-model", json_schema={"type": "object"}, tools=tools)
    assert asyncio.run(client.complete(asked)).text == "ok reply"
    assert "tools" in server.requests[0] and "tools" not in server.requests[1]
    assert server.requests[1]["response_format"]["type"] == "json_schema"
    asyncio.run(client.complete(request([Message("user", "again")], model="test-model", tools=tools)))
    assert len(server.requests) == 3 and "tools" not in server.requests[-1]  # remembered: no wasted call
    assert meter.summary().llm_calls == 2  # the ignored reply is not an answer
