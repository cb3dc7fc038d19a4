"""The usage ledger: every LLM call of a run with its tokens, latency, cost and outcome, per tag."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from metakg.llm.client import Completion


@dataclass(frozen=True)
class LedgerEntry:
    """One call (or cache hit, or failure)."""

    run_id: str
    tag: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    cost_usd: float
    attempts: int
    error: str | None = None


def price(prices: dict[str, tuple[float, float]], model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for these tokens of ``model`` from a table of (prompt, completion) prices per million tokens."""
    prompt_price, completion_price = prices.get(model, (0.0, 0.0))
    return (prompt_tokens * prompt_price + completion_tokens * completion_price) / 1_000_000


class UsageLedger:
    """Collects entries in memory and, when given a path, appends them to a JSON-lines file."""

    def __init__(
        self, run_id: str, prices_per_mtok: dict[str, tuple[float, float]] | None = None, path: Path | None = None
    ) -> None:
        """Start an empty ledger for ``run_id``; nothing is written until the first entry."""
        self.run_id = run_id
        self.prices = prices_per_mtok or {}
        self.path = path
        self.entries: list[LedgerEntry] = []
        self._lock = threading.Lock()

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for these tokens from the price table (0 for models it does not list)."""
        return price(self.prices, model, prompt_tokens, completion_tokens)

    def record(
        self, completion: Completion | None, *, tag: str, model: str, attempts: int = 1, error: str | None = None
    ) -> LedgerEntry:
        """Add one entry: a completion (fresh or cached) or a failure (``completion`` None, ``error`` set)."""
        usage = completion.usage if completion is not None else None
        prompt = usage.prompt_tokens if usage and completion and not completion.cached else 0
        output = usage.completion_tokens if usage and completion and not completion.cached else 0
        entry = LedgerEntry(
            run_id=self.run_id,
            tag=tag,
            model=model,
            prompt_tokens=prompt,
            completion_tokens=output,
            latency_s=completion.latency_s if completion is not None else 0.0,
            cached=bool(completion is not None and completion.cached),
            cost_usd=self.cost(model, prompt, output),
            attempts=attempts,
            error=error,
        )
        with self._lock:
            self.entries.append(entry)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(asdict(entry)) + "\n")
        return entry

    def summary(self, tag_prefix: str = "") -> dict[str, Any]:
        """Totals over the entries whose tag starts with ``tag_prefix`` (all by default)."""
        with self._lock:
            chosen = [e for e in self.entries if e.tag.startswith(tag_prefix)]
        fresh = [e for e in chosen if not e.cached and e.error is None]
        latencies = sorted(e.latency_s for e in fresh)

        def percentile(q: float) -> float:
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0

        return {
            "llm_calls": len(fresh),
            "cache_hits": sum(e.cached for e in chosen),
            "failures": sum(e.error is not None for e in chosen),
            "retries": sum(max(0, e.attempts - 1) for e in chosen),
            "prompt_tokens": sum(e.prompt_tokens for e in chosen),
            "completion_tokens": sum(e.completion_tokens for e in chosen),
            "tokens": sum(e.prompt_tokens + e.completion_tokens for e in chosen),
            "cost_usd": round(sum(e.cost_usd for e in chosen), 6),
            "latency_p50_s": round(percentile(0.5), 4),
            "latency_p95_s": round(percentile(0.95), 4),
            "errors": sorted({e.error for e in chosen if e.error}),
        }
