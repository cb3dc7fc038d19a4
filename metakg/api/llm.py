"""The LLM for a run: a cached, metered client (the configured endpoint or the local SmolLM2 server)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol, TypeVar

from metakg.api._shared import Progress, cache_folder, quiet
from metakg.api.local_graph import local_graph
from metakg.config import Settings
from metakg.llm import local_server
from metakg.llm.batch import BatchJournal, BatchRunner, backend
from metakg.llm.cache import ResponseCache
from metakg.llm.client import Completion, Message, request
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.llm.usage import MeteredClient, UsageMeter, UsageSummary
from metakg.schemas.graph_store import GraphStore

T = TypeVar("T")
logger = logging.getLogger("metakg.llm")

#: the usage ledger: one JSON line per LLM request of every run, under the cache directory
LEDGER_FILE = "ledger.jsonl"


def session_model(settings: Settings) -> str:
    """The model a run's requests name: ``llm.model`` at a configured endpoint, the local server's alias when
    none is set."""
    return settings.llm.model if settings.llm.base_url else local_server.MODEL_ALIAS


@contextmanager
def llm_session(
    settings: Settings, *, run_id: str | None = None, progress: Progress | None = None
) -> Iterator[MeteredClient]:
    """A cached, metered LLM client for one run; starts (and stops) the local server when no endpoint is set.

    Every request is recorded once in the client's meter (``client.meter``), which appends it to the
    ledger ``<cache_dir>/llm/ledger.jsonl``.

    Raises:
        ConfigError: no endpoint configured and the local model cannot be started, or the cache folder cannot
            be made.
    """
    folder = cache_folder(settings, "llm")
    cache = ResponseCache(folder / "responses.sqlite")
    meter = UsageMeter(run_id or uuid.uuid4().hex, settings.llm.prices_per_mtok, path=folder / LEDGER_FILE)
    try:
        if settings.llm.base_url:
            yield MeteredClient(
                OpenAICompatibleClient(settings.llm, base_url=settings.llm.base_url, cache=cache), meter
            )
            return
        (progress or quiet)("starting the local SmolLM2 server")
        with local_server.running(threads=settings.llm.local_threads) as server:
            llm = settings.llm.model_copy(update={"model": server.model})
            yield MeteredClient(OpenAICompatibleClient(llm, base_url=server.base_url, cache=cache), meter)
    finally:
        cache.close()


@contextmanager
def with_endpoint(settings: Settings, *, progress: Progress | None = None) -> Iterator[Settings]:
    """``settings`` with an endpoint for a command that makes many runs: the configured one, else the local
    server, started once for the whole block and stopped after it (each :func:`llm_session` would start its
    own).

    Raises:
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    if settings.llm.base_url:
        yield settings
        return
    (progress or quiet)("starting the local SmolLM2 server")
    with local_server.running(threads=settings.llm.local_threads) as server:
        llm = settings.llm.model_copy(update={"base_url": server.base_url, "model": server.model})
        yield settings.model_copy(update={"llm": llm})


#: the journal of submitted provider batches (see metakg.llm.batch), beside the cache
BATCH_JOURNAL_FILE = "batches.sqlite"


@contextmanager
def batch_session(
    settings: Settings, provider: str, *, run_id: str | None = None, wait: bool = True, progress: Progress | None = None
) -> Iterator[BatchRunner]:
    """A batch runner for one run through ``provider`` (``openai``, ``anthropic`` or ``vllm``) with the same
    response cache and ledger as :func:`llm_session`, and the journal of submitted batches
    (``<cache_dir>/llm/batches.sqlite``; request and result files in ``<cache_dir>/llm/batches/``).

    Raises:
        ConfigError: the provider is unknown or not configured, or the cache folder cannot be made.
    """
    folder = cache_folder(settings, "llm")
    chosen = backend(provider, settings.llm, settings.batch, settings.llm.model)
    cache = ResponseCache(folder / "responses.sqlite")
    journal = BatchJournal(folder / BATCH_JOURNAL_FILE)
    meter = UsageMeter(run_id or uuid.uuid4().hex, settings.llm.prices_per_mtok, path=folder / LEDGER_FILE)
    try:
        yield BatchRunner(
            chosen,
            cache=cache,
            journal=journal,
            meter=meter,
            folder=folder / "batches",
            retries=settings.batch.retries,
            poll_s=settings.batch.poll_s,
            wait=wait,
            progress=progress,
        )
    finally:
        journal.close()
        cache.close()


class _Closable(Protocol):
    async def aclose(self) -> None: ...


def run_with(client: _Closable, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` in a new event loop and close ``client``'s connections (an LLM client, a batch runner)
    before the loop ends."""

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


def start_local_server(port: int, threads: int | None = None) -> local_server.LocalServer:
    """Start the local SmolLM2 server on 127.0.0.1:``port`` with ``threads`` CPU threads (None: one per core);
    stop it with :func:`stop_local_server`.

    Raises:
        ConfigError: the local model is not installed or does not start.
    """
    return local_server.start(port, threads=threads)


def stop_local_server(server: local_server.LocalServer) -> None:
    """Stop a server started by :func:`start_local_server`."""
    local_server.stop(server)


class SharedLLM:
    """One LLM session for a long-lived process (``metakg serve``, ``metakg mcp``): started on first use (the
    local SmolLM2 server too, once), its client driven by one event loop in its own thread, so the client's
    concurrency bound (``llm.concurrency``) holds across every question the process answers at once. Work
    is submitted from any thread with :meth:`run`; each question's usage is still metered apart. Close it
    to stop the loop, the client and the local server.

    The session is opened on the loop's own thread, which lives until :meth:`close`: a local server is tied
    to the thread that started it (it stops when that thread ends), so a short-lived request thread must not
    start it. A local server that died anyway is started again by the next question."""

    def __init__(self, settings: Settings, *, progress: Progress | None = None) -> None:
        self._settings = settings
        self._progress = progress or quiet
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: local_server.LocalServer | None = None
        self.client: MeteredClient | None = None
        self.local: GraphStore | None = None
        self.restarts = 0

    def _open(self, stack: ExitStack) -> None:
        """Open the session (on the loop's thread): the local server when no endpoint is set, the client."""
        settings = self._settings
        if not settings.llm.base_url:
            self._progress("starting the local SmolLM2 server")
            server = local_server.start(threads=settings.llm.local_threads)
            stack.callback(local_server.stop, server)
            self._server = server
            settings = settings.model_copy(
                update={"llm": settings.llm.model_copy(update={"base_url": server.base_url, "model": server.model})}
            )
        self.client = stack.enter_context(llm_session(settings, progress=self._progress))
        self.local = stack.enter_context(local_graph(self._settings, self._progress))

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._server is not None and self._server.process.poll() is not None:
                logger.warning(
                    "the local LLM server exited (status %s); starting it again", self._server.process.returncode
                )
                self._shut()
                self.restarts += 1
            if self._loop is not None:
                return self._loop
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="metakg-llm", daemon=True)
            thread.start()
            stack = ExitStack()

            async def open_here() -> None:
                self._open(stack)

            try:
                asyncio.run_coroutine_threadsafe(open_here(), loop).result()
            except BaseException:
                stack.close()
                self._server = self.client = self.local = None
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout=30)
                loop.close()
                raise
            self._thread, self._stack, self._loop = thread, stack, loop
            return loop

    def run(self, work: Callable[[MeteredClient, GraphStore | None], Coroutine[Any, Any, T]]) -> T:
        """Run ``work(client, local graph)`` on the session's loop and wait for its result; the caller's
        context variables (a step listener, a usage scope) go with it.

        Raises:
            ConfigError: the LLM cannot be started (the next call tries again).
        """
        loop = self._start()
        assert self.client is not None
        context = contextvars.copy_context()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        coroutine = work(self.client, self.local)

        def begin() -> None:
            task = loop.create_task(coroutine, context=context)
            task.add_done_callback(lambda t: _settle(t, done))

        loop.call_soon_threadsafe(begin)
        return done.result()

    def close(self) -> None:
        """Close the client on its loop, stop the loop, then the session (and the local server)."""
        with self._lock:
            self._shut()

    def _shut(self) -> None:
        loop, stack, client, thread = self._loop, self._stack, self.client, self._thread
        self._loop = self._stack = self.client = self._thread = self._server = None
        self.local = None
        if loop is None or stack is None:
            return
        if client is not None:
            try:
                asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=30)
            except Exception:  # closing connections to a server that is gone may fail; the rest must still close
                logger.debug("closing the LLM client failed", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=30)
        loop.close()
        stack.close()


def _settle(task: asyncio.Task[T], done: concurrent.futures.Future[T]) -> None:
    if task.cancelled():
        done.cancel()
    elif (error := task.exception()) is not None:
        done.set_exception(error)
    else:
        done.set_result(task.result())
