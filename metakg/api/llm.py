"""The LLM for a run: a cached, metered client (the configured endpoint or the local SmolLM2 server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from metakg.api._shared import Progress, quiet
from metakg.config import Settings
from metakg.llm import local_server
from metakg.llm.cache import ResponseCache
from metakg.llm.client import Completion, Message, request
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.llm.usage import MeteredClient, UsageMeter, UsageSummary

T = TypeVar("T")

#: the usage ledger: one JSON line per LLM request of every run, under the cache directory
LEDGER_FILE = "ledger.jsonl"


@contextmanager
def llm_session(
    settings: Settings, *, run_id: str | None = None, progress: Progress | None = None
) -> Iterator[MeteredClient]:
    """A cached, metered LLM client for one run; starts (and stops) the local server when no endpoint is set.

    Every request is recorded once in the client's meter (``client.meter``), which appends it to the
    ledger ``<cache_dir>/llm/ledger.jsonl``.

    Raises:
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    folder = settings.paths.cache_dir / "llm"
    cache = ResponseCache(folder / "responses.sqlite")
    meter = UsageMeter(run_id or uuid.uuid4().hex, settings.llm.prices_per_mtok, path=folder / LEDGER_FILE)
    try:
        if settings.llm.base_url:
            yield MeteredClient(
                OpenAICompatibleClient(settings.llm, base_url=settings.llm.base_url, cache=cache), meter
            )
            return
        (progress or quiet)("starting the local SmolLM2 server")
        with local_server.running() as server:
            llm = settings.llm.model_copy(update={"model": server.model})
            yield MeteredClient(OpenAICompatibleClient(llm, base_url=server.base_url, cache=cache), meter)
    finally:
        cache.close()


def run_with(client: MeteredClient, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` in a new event loop and close the client's HTTP connections before the loop ends."""

    async def body() -> T:
        try:
            return await work
        finally:
            await client.aclose()

    return asyncio.run(body())


def llm_reply(settings: Settings, prompt: str, *, system: str | None = None) -> tuple[Completion, UsageSummary]:
    """One prompt to the configured model; returns the reply and the usage of the call."""
    with llm_session(settings) as client:
        messages = ([Message("system", system)] if system else []) + [Message("user", prompt)]
        completion = run_with(
            client,
            client.complete(
                request(
                    messages,
                    model=client.model,
                    temperature=settings.llm.temperature,
                    max_tokens=settings.llm.max_tokens,
                ),
                tag="ask",
            ),
        )
        return completion, client.meter.summary()


def start_local_server(port: int) -> local_server.LocalServer:
    """Start the local SmolLM2 server on 127.0.0.1:``port``; stop it with :func:`stop_local_server`.

    Raises:
        ConfigError: the local model is not installed or does not start.
    """
    return local_server.start(port)


def stop_local_server(server: local_server.LocalServer) -> None:
    """Stop a server started by :func:`start_local_server`."""
    local_server.stop(server)
