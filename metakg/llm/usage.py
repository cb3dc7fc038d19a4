"""One usage meter for every LLM call: calls, cache hits, billed tokens, cost and latency.

Every request goes through a :class:`MeteredClient`, which records it exactly once in a
:class:`UsageMeter`: a fresh reply, a reply served by the response cache, or a failure. The meter keeps the
records in memory (and, given a path, appends them to a JSON-lines ledger) and summarises them per run, per
scope (a question, an extraction run) and per stage (the part of a call's tag before the first ``:``).

The accounting rules, the same in every view:

- ``llm_calls`` counts every answered request, cache hits included; ``cache_hits`` counts those the cache
  served; ``failures`` counts requests that got no reply after their retries.
- A cached reply is billed nothing: 0 prompt and completion tokens, $0. Its token counts are reported as
  ``saved_tokens``.
- Percentiles are nearest-rank (:func:`percentile`), everywhere.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from metakg.errors import LLMError
from metakg.llm.client import ChatRequest, Completion, LLMClient

Prices = dict[str, tuple[float, float]]

_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("metakg_usage_scope", default="")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def price(prices: Prices, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for these tokens of ``model`` from a table of (prompt, completion) prices per million tokens."""
    prompt_price, completion_price = prices.get(model, (0.0, 0.0))
    return (prompt_tokens * prompt_price + completion_tokens * completion_price) / 1_000_000


@dataclass(frozen=True)
class UsageRecord:
    """One request: a fresh reply, a cache hit, or a failure (``error`` set)."""

    run_id: str
    scope: str
    tag: str
    model: str
    prompt_tokens: int  # billed: 0 for a cache hit
    completion_tokens: int
    saved_tokens: int  # the token counts a cache hit did not pay for
    latency_s: float
    cached: bool
    cost_usd: float
    attempts: int
    error: str | None = None
    list_cost_usd: float = 0.0  # the call at list price, a cache hit priced as if fresh (the method's cost)

    @property
    def stage(self) -> str:
        """The tag up to its first ``:`` (``qa:concepts`` -> ``qa``)."""
        return self.tag.split(":", 1)[0]


@dataclass(frozen=True)
class UsageSummary:
    """Totals over some records (see the module docstring for what each count means)."""

    llm_calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    saved_tokens: int = 0
    cost_usd: float = 0.0
    list_cost_usd: float = 0.0
    llm_ms: float = 0.0
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    errors: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        """Billed prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def of(cls, records: Sequence[UsageRecord]) -> UsageSummary:
        """The totals of ``records``; latency percentiles over the fresh replies."""
        fresh = [r.latency_s for r in records if not r.cached and r.error is None]
        return cls(
            llm_calls=sum(r.error is None for r in records),
            cache_hits=sum(r.cached for r in records),
            failures=sum(r.error is not None for r in records),
            retries=sum(max(0, r.attempts - 1) for r in records),
            prompt_tokens=sum(r.prompt_tokens for r in records),
            completion_tokens=sum(r.completion_tokens for r in records),
            saved_tokens=sum(r.saved_tokens for r in records),
            cost_usd=sum(r.cost_usd for r in records),
            list_cost_usd=sum(r.list_cost_usd for r in records),
            llm_ms=sum(r.latency_s for r in records) * 1000,
            latency_p50_s=percentile(fresh, 50),
            latency_p95_s=percentile(fresh, 95),
            errors=tuple(sorted({r.error for r in records if r.error})),
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready totals (cost rounded to micro-dollars, times to 0.1 ms)."""
        data = asdict(self)
        data["tokens"] = self.tokens
        data["cost_usd"] = round(self.cost_usd, 6)
        data["list_cost_usd"] = round(self.list_cost_usd, 6)
        data["llm_ms"] = round(self.llm_ms, 1)
        data["errors"] = list(self.errors)
        return data


class UsageMeter:
    """Records every LLM request of a run (thread-safe); optionally appends each to a JSON-lines ledger."""

    def __init__(self, run_id: str = "", prices: Prices | None = None, path: Path | None = None) -> None:
        """An empty meter for ``run_id``; nothing is written until the first record."""
        self.run_id = run_id
        self.prices = prices or {}
        self.path = path
        self._records: list[UsageRecord] = []
        self._by_scope: dict[str, list[UsageRecord]] = {}
        self._lock = threading.Lock()

    @property
    def records(self) -> list[UsageRecord]:
        """A copy of the records so far, in the order they were made."""
        with self._lock:
            return list(self._records)

    def record(
        self,
        completion: Completion | None,
        *,
        tag: str,
        model: str,
        latency_s: float = 0.0,
        attempts: int = 1,
        error: str | None = None,
        rate: float = 1.0,
    ) -> UsageRecord:
        """Record one request under the current scope (see :meth:`scope`): ``completion`` fresh or cached, or
        None with ``error`` for a failure. ``rate``: the share of the list price billed (a provider batch's
        0.5); ``list_cost_usd`` stays at list price."""
        cached = completion is not None and completion.cached
        prompt = completion.usage.prompt_tokens if completion is not None else 0
        output = completion.usage.completion_tokens if completion is not None else 0
        billed_prompt, billed_output = (0, 0) if cached else (prompt, output)
        model = completion.model if completion is not None else model
        entry = UsageRecord(
            run_id=self.run_id,
            scope=_SCOPE.get(),
            tag=tag,
            model=model,
            prompt_tokens=billed_prompt,
            completion_tokens=billed_output,
            saved_tokens=prompt + output if cached else 0,
            latency_s=latency_s,
            cached=cached,
            cost_usd=price(self.prices, model, billed_prompt, billed_output) * rate,
            attempts=0 if cached else attempts,
            error=error,
            list_cost_usd=price(self.prices, model, prompt, output),
        )
        with self._lock:
            self._records.append(entry)
            self._by_scope.setdefault(entry.scope, []).append(entry)
            if self.path is not None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    with self.path.open("a", encoding="utf-8") as fh:
                        fh.write(json.dumps(asdict(entry)) + "\n")
                except OSError as e:  # a read-only or full disk: the run goes on, its usage kept in memory
                    logging.getLogger("metakg").warning(
                        "the usage ledger %s cannot be written (%s): this run's usage is not logged there",
                        self.path, e.strerror or e,
                    )  # fmt: skip
                    self.path = None
        return entry

    def scope_records(self, scope: str) -> list[UsageRecord]:
        """The records of one scope (see :meth:`scope`), in the order they were made."""
        with self._lock:
            return list(self._by_scope.get(scope, ()))

    def summary(self, *, scope: str | None = None, stage: str | None = None) -> UsageSummary:
        """Totals of the run, or of one scope and/or one stage (a scope's records are indexed: reading one
        scope costs its own records, not the run's)."""
        with self._lock:
            chosen = list(self._records if scope is None else self._by_scope.get(scope, ()))
        return UsageSummary.of([r for r in chosen if stage is None or r.stage == stage])

    def by_stage(self) -> dict[str, UsageSummary]:
        """Totals per stage, in the order stages first appeared."""
        stages = list(dict.fromkeys(r.stage for r in self.records))
        return {s: self.summary(stage=s) for s in stages}

    @staticmethod
    @contextmanager
    def scope(name: str) -> Iterator[str]:
        """Record the calls made inside this block (and the tasks it starts) under scope ``name``."""
        token = _SCOPE.set(name)
        try:
            yield name
        finally:
            _SCOPE.reset(token)


class MeteredClient:
    """An ``LLMClient`` that records every request of the wrapped client once in a :class:`UsageMeter`."""

    def __init__(self, inner: LLMClient, meter: UsageMeter) -> None:
        """Wrap ``inner``; records go into ``meter``."""
        self.inner = inner
        self.meter = meter

    @property
    def model(self) -> str:
        """The wrapped client's model."""
        return self.inner.model

    async def complete(self, request: ChatRequest, *, tag: str = "") -> Completion:
        """Send ``request`` through the wrapped client and record it (a failure is recorded, then re-raised)."""
        started = time.perf_counter()
        try:
            completion = await self.inner.complete(request, tag=tag)
        except LLMError as e:
            self.meter.record(
                None,
                tag=tag,
                model=request.model,
                latency_s=time.perf_counter() - started,
                attempts=e.attempts,
                error=str(e)[:300],
            )
            raise
        self.meter.record(
            completion,
            tag=tag,
            model=request.model,
            latency_s=completion.latency_s if not completion.cached else time.perf_counter() - started,
            attempts=completion.attempts,
        )
        return completion

    def cached(self, request: ChatRequest) -> bool:
        """Whether the wrapped client's cache holds a reply to ``request`` (False for a client without one)."""
        holds = getattr(self.inner, "cached", None)
        return bool(holds(request)) if holds is not None else False

    async def count_tokens(self, texts: list[str]) -> list[int] | None:
        """Each text's tokens by the endpoint's tokenizer, or None when the wrapped client cannot tell."""
        counter = getattr(self.inner, "count_tokens", None)
        return await counter(texts) if counter is not None else None

    async def aclose(self) -> None:
        """Close the wrapped client's connections, when it has any."""
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()


def metered(client: LLMClient, prices: Prices | None = None) -> MeteredClient:
    """``client`` itself when it is already metered, else wrapped with a new meter."""
    return client if isinstance(client, MeteredClient) else MeteredClient(client, UsageMeter(prices=prices))
