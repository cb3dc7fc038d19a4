"""What ``metakg serve`` and ``metakg mcp`` serve: one graph opened for the process, with its QA session
(one LLM session and the caches every question shares), the lock that makes a write wait for the reads,
and the evaluations; every bound and check of a request is written here once, for HTTP and MCP alike."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio

from metakg import api
from metakg.config import Settings
from metakg.errors import BundleChanged, ConfigError, NodeNotFound, ResourceBusy, UsageError
from metakg.server.evaluations import Evaluations

#: the most results a route or tool returns, whatever it is asked for
MAX_K = 100
MAX_LIMIT = 1000
#: the most neighbours one request returns: the page shows up to this many around a node
MAX_NEIGHBOURS = 5000
MAX_HOPS = 6
#: seconds a question waits for one of the ``max_concurrent_asks`` slots (and a write for the reads to end)
ASK_WAIT_S = 60.0

SearchMode = Literal["exact", "normalised", "fuzzy", "embedding", "auto"]
Direction = Literal["out", "in", "both"]


class FieldError(UsageError):
    """A request field the graph refuses (HTTP: a 422 naming the field)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class ReadWriteLock:
    """Many readers or one writer: reads of the served graph go together, a write waits for them to end and
    holds off new ones (used only when the server allows writes)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def writing(self, timeout: float) -> Iterator[bool]:
        """Yields whether the write may go ahead (False: the readers did not finish within ``timeout``)."""
        with self._cond:
            ready = self._cond.wait_for(lambda: not self._writing and not self._readers, timeout)
            if ready:
                self._writing = True
        try:
            yield ready
        finally:
            if ready:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()


def bounded(name: str, value: int, upper: int) -> int:
    """``value`` when it is from 1 to ``upper``.

    Raises:
        UsageError: naming ``name`` and the range.
    """
    if not 1 <= value <= upper:
        raise UsageError(f"{name} must be from 1 to {upper}, got {value}.")
    return value


class ServedGraph:
    """One graph served to many clients (a context manager): the bundle (embedded) or the configured Neo4j
    database, opened on entering and closed on leaving, after the evaluations and the LLM session."""

    def __init__(
        self, settings: Settings, *, bundle: Path | None = None, neo4j: bool = False, evaluations: bool = True
    ) -> None:
        """
        Raises:
            UsageError: neither or both of a bundle and Neo4j.
        """
        if (bundle is None) == (not neo4j):
            raise UsageError("serve a bundle (--bundle DIR) or the configured Neo4j database (--neo4j), one of them.")
        self.settings = settings
        self.bundle = bundle
        self.neo4j = neo4j
        self.limits = settings.server
        self._with_evaluations = evaluations
        self._lock = ReadWriteLock()
        self._slots = threading.BoundedSemaphore(self.limits.max_concurrent_asks)
        self._waiting: anyio.CapacityLimiter | None = None  # the slots as routes await them (answer_async)
        self._opened: Any = None
        self._store: Any = None
        self.token: str | None = None  # the bundle version served: a write refuses to replace another
        self.llm: api.SharedLLM | None = None
        self.services: Any = None
        self._evaluations: Evaluations | None = None

    # ------------------------------------------------------------------ lifetime
    def __enter__(self) -> ServedGraph:
        bundle = self.bundle
        self.token = api.bundle_token(bundle) if bundle is not None else None
        self._opened = api.open_store(self.settings, bundle, neo4j=self.neo4j)
        self._store = self._opened.__enter__()
        try:
            if bundle is not None and api.bundle_token(bundle) != self.token:
                self.token = None  # it changed while being opened: which version is served is unknown
            warm = getattr(self._store, "warm", None)
            if callable(warm):  # a database server plans and compiles a question's reads now, not at the first one
                warm()
            # one LLM session for every question (started by the first that needs it): one local server,
            # and llm.concurrency bounds the requests of all questions together
            self.llm = api.SharedLLM(self.settings)
            self.services = api.qa_services(self.settings, self._store, bundle)
            if self._with_evaluations:
                self._evaluations = Evaluations(
                    self.settings,
                    self._store,
                    llm=self.llm,
                    benchmarks_dir=self.limits.benchmarks_dir or self.settings.paths.data_dir,
                    runs_dir=self.settings.paths.cache_dir / "evaluations",
                    max_queued=self.limits.max_queued_evaluations,
                    guard=self.reading,  # a write waits for a running evaluation, as for a question
                )
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop the evaluations (before the store closes under a running one), the LLM session, the store."""
        evaluations, llm, opened = self._evaluations, self.llm, self._opened
        self._evaluations = self.llm = self._opened = self._store = None
        try:
            if evaluations is not None:
                evaluations.close()
            if llm is not None:
                llm.close()
        finally:
            if opened is not None:
                opened.__exit__(None, None, None)

    @property
    def store(self) -> Any:
        """The open store (a GraphStore)."""
        if self._store is None:
            raise ConfigError("the graph is not open (the server is starting or stopping).")
        return self._store

    @property
    def evaluations(self) -> Evaluations:
        """The evaluation runs over the graph."""
        if self._evaluations is None:
            raise ConfigError("this server runs no evaluations.")
        return self._evaluations

    def reading(self) -> AbstractContextManager[None]:
        """Hold off writes while the graph is read (nothing to hold off on a read-only server)."""
        return self._lock.reading() if self.limits.allow_writes else nullcontext()

    # ------------------------------------------------------------------ reads
    def resolve(self, ref: str) -> Any:
        """The node ``ref`` names: an id (in any spelling of its CURIE) or a name, resolved as search does.

        Raises:
            NodeNotFound: nothing resembles it (the closest names are listed).
        """
        with self.reading():
            return api.resolve_node(self.store, ref)

    def node(self, node_id: str) -> Any:
        """One node by id (as written or in its one form: ``MONDO:4975`` is ``mondo:0004975``).

        Raises:
            NodeNotFound: no node has that id.
        """
        with self.reading():
            found = api.node_by_id(self.store, node_id)
        if found is None:
            raise NodeNotFound(f"no node with id {node_id!r}; find ids with /api/search.")
        return found

    def neighbours(
        self, node_id: str, *, relations: Sequence[str] | None = None, direction: Direction = "both", limit: int = 50
    ) -> list[Any]:
        """The node's neighbours: outgoing first, then incoming, each side in edge-id order."""
        bounded("limit", limit, MAX_NEIGHBOURS)
        with self.reading():
            known = api.node_by_id(self.store, node_id)
            return list(
                self.store.neighbours(
                    known.id if known else node_id,
                    relations=api.as_relations(relations) if relations else None,
                    direction=direction,
                    limit=limit,
                )
            )

    def search(self, text: str, *, mode: SearchMode = "auto", k: int = 10) -> list[Any]:
        """Nodes matching the text, best first."""
        bounded("k", k, MAX_K)
        with self.reading():
            return list(self.store.search(text, mode=mode, k=k))

    def paths(self, src: str, dst: str, *, k: int = 3, max_hops: int = 3, directed: bool = False) -> list[Any]:
        """Up to ``k`` shortest simple paths between two node ids, shortest first."""
        bounded("k", k, MAX_K)
        bounded("max_hops", max_hops, MAX_HOPS)
        with self.reading():
            return list(self.store.shortest_paths(src, dst, k=k, max_hops=max_hops, directed=directed))

    # ------------------------------------------------------------------ questions
    def question(
        self,
        text: str,
        choices: Sequence[str] = (),
        *,
        strategy: str | None = None,
        switches: Sequence[str] = (),
        overrides: dict[str, Any] | None = None,
    ) -> tuple[Settings, api.Question, Any]:
        """The settings for one question (with its strategy ``overrides``), the question and the strategy.

        Raises:
            FieldError: the question is too long, or an override is refused.
            UsageError: an unknown strategy or switch.
        """
        if len(text) > self.limits.max_question_chars:
            raise FieldError("question", f"longer than {self.limits.max_question_chars} characters")
        question = api.make_question(text, list(choices))
        chosen = strategy or self.settings.qa.strategy
        built = api.create_strategy(self.settings, chosen, list(switches) or None)  # the name and switches first
        if not overrides:
            return self.settings, question, built
        for key, instead in (("qa.strategy", "the request's strategy field"), ("qa.local_kg", "the server's settings")):
            if key in overrides:  # read before the overrides apply: taken and then ignored, once
                raise FieldError("settings", f"{key} is not a per-question setting; give it through {instead}")
        try:
            cfg = api.with_overrides(self.settings, chosen, overrides, source="settings")
        except ConfigError as e:
            raise FieldError("settings", str(e)) from e
        return cfg, question, api.create_strategy(cfg, chosen, list(switches) or None)

    def answer(
        self,
        cfg: Settings,
        question: api.Question,
        strategy: Any,
        *,
        use_llm: bool = True,
        steps: Callable[[dict[str, Any]], None] | None = None,
    ) -> api.Answer:
        """Answer in one of the ``max_concurrent_asks`` slots, the graph held for reading, with the process's
        LLM session and caches. Runs its own event loop: call it from a thread.

        Raises:
            ResourceBusy: no slot came free within :data:`ASK_WAIT_S` seconds.
        """
        if not self._slots.acquire(timeout=ASK_WAIT_S):
            raise ResourceBusy("the server is answering as many questions as it allows")
        try:
            with self.reading():
                runner = api.llm_runner(use_llm=use_llm, llm=self.llm)
                return api.answer_over(cfg, self.store, question, strategy, runner=runner, services=self.services,
                                       steps=steps)  # fmt: skip
        finally:
            self._slots.release()

    async def answer_async(
        self,
        cfg: Settings,
        question: api.Question,
        strategy: Any,
        *,
        use_llm: bool = True,
        steps: Callable[[dict[str, Any]], None] | None = None,
    ) -> api.Answer:
        """:meth:`answer` from a route's event loop: the wait for a slot is awaited in the loop, so questions
        waiting for one hold no worker thread (the other routes, ``/api/health`` among them, keep answering);
        the answer runs in a worker thread once a slot is free.

        Raises:
            ResourceBusy: no slot came free within :data:`ASK_WAIT_S` seconds.
        """
        if self._waiting is None:  # made in the loop (anyio's limiters belong to one)
            self._waiting = anyio.CapacityLimiter(self.limits.max_concurrent_asks)
        try:
            with anyio.fail_after(ASK_WAIT_S):
                await self._waiting.acquire()
        except TimeoutError:
            raise ResourceBusy("the server is answering as many questions as it allows") from None
        try:
            call = functools.partial(self.answer, cfg, question, strategy, use_llm=use_llm, steps=steps)
            return await anyio.to_thread.run_sync(call)
        finally:
            self._waiting.release()

    # ------------------------------------------------------------------ writes
    def add_triples(self, triples: Sequence[tuple[str, str, str]], dataset: str) -> api.TriplesAdded:
        """Add triples as ``metakg ingest triples`` reads them, once every read has ended; a served bundle is
        validated and written back, and the caches start afresh.

        Raises:
            ResourceBusy: the reads did not end within :data:`ASK_WAIT_S` seconds.
            BundleChanged: the bundle changed while the server opened it.
        """
        with self._lock.writing(timeout=ASK_WAIT_S) as ready:
            if not ready:
                raise ResourceBusy("the graph is being read; try again shortly")
            if self.bundle is not None and self.token is None:
                raise BundleChanged(
                    f"{self.bundle} changed while this server opened it; restart the server, then repeat the change."
                )
            added = api.add_triples(self.settings, self.store, triples, dataset, bundle=self.bundle, expect=self.token)
            self.token = added.token
            self.services = api.qa_services(self.settings, self.store, self.bundle)  # the old caches know the old graph
            return replace(added, token=None)
