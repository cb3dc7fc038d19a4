"""Extraction throughput against the local model server (llama-cpp-python + SmolLM2-135M-Instruct).

For concurrency 1, 4 and 8, ``metakg extract`` runs over the first N CommonsenseQA items (real data) with
a fresh response cache, then the concurrency-1 run is repeated on its warm cache. Recorded: items per
second of the LLM phase, tokens per extracted triple, the cache hit rate and the wall time of the re-run.

Then ``--batch-items`` (200) items go through ``extract --batch openai`` against the stand-in batch server and
directly, side by side (:func:`batch_endpoint`).

Run: ``make bench`` or ``python -m benchmarks.bench_extract [--items 24] [--max-tokens 128] [--batch-items 200]``.
The model is tiny and answers poorly; the figures measure the pipeline and the server, not quality.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import WORK, record
from metakg import api
from metakg.config import load_settings
from metakg.extractors.pipeline import RunStats
from metakg.llm import local_server


def _data_file() -> Path:
    data = os.environ.get("METAKG_PATHS__DATA_DIR") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
    path = Path(data) / "commonsenseqa" / "csqa_dev_official_schema.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path} not found: set METAKG_PATHS__DATA_DIR to the shared data folder")
    return path


def one_run(
    path: Path, base_url: str, model: str, cache: Path, concurrency: int, items: int, max_tokens: int
) -> dict[str, Any]:
    settings = load_settings(
        paths={"cache_dir": cache},
        llm={"base_url": base_url, "model": model, "max_tokens": max_tokens, "timeout_s": 300},
    )
    rate: dict[str, float] = {}

    def count(stats: RunStats) -> None:
        if stats.done == stats.total:  # the LLM phase just ended
            rate["items_per_s"] = stats.items_per_s
            rate["llm_phase_s"] = stats.done / stats.items_per_s if stats.items_per_s else 0.0

    start = time.perf_counter()
    summary = api.extract(
        api.TextSource(path, "csqa", "csqa", limit=items),
        WORK / "extract" / f"bundle_c{concurrency}",
        settings,
        options=api.ExtractOptions(concurrency=concurrency),
        counter=count,
    )
    return {**summary.as_dict(), "total_wall_s": time.perf_counter() - start, **rate}


def simulated_endpoint(path: Path, items: int, max_tokens: int, latency_s: float = 0.5) -> dict[str, Any]:
    """The client's own scaling: a real HTTP server on 127.0.0.1 that answers every request after
    ``latency_s`` and serves requests in parallel, as hosted endpoints do (llama-cpp-python's server
    handles one request at a time, so concurrency cannot speed it up)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.fault_server import FaultServer

    server = FaultServer().start()
    server.reply_for = lambda body: "milk\\is kept in\\fridge"
    figures: dict[str, Any] = {"simulated_latency_s": latency_s}
    try:
        for concurrency in (1, 4, 8):
            server.script(*[f"slow:{latency_s}"] * items)
            cache = WORK / "extract" / f"cache_sim_c{concurrency}"
            shutil.rmtree(cache, ignore_errors=True)
            run = one_run(path, server.url, "simulated", cache, concurrency, items, max_tokens)
            figures[f"simulated_c{concurrency}_items_per_s"] = round(run["items_per_s"], 2)
            print(f"  simulated endpoint, concurrency {concurrency}: {run['items_per_s']:.2f} items/s", flush=True)
    finally:
        server.stop()
    return figures


def batch_endpoint(path: Path, base_url: str, model: str, items: int, max_tokens: int) -> dict[str, Any]:
    """``extract --batch openai`` against the stand-in batch server (tools/batch_server.py: OpenAI's Files and
    Batches routes running every request through the same local model) beside a direct run of the same
    items: wall time, whether the bundles hold the same triples, the preview's prompt tokens against those
    billed, and the billed price against list (a made-up price for the model, to see the batch rate applied)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools.batch_server import BatchServer

    prices = {model: (0.15, 0.6)}
    figures: dict[str, Any] = {"batch_items": items, "batch_max_tokens": max_tokens}
    batch = BatchServer(base_url).start()
    try:
        runs: dict[str, dict[str, Any]] = {}
        for way in ("direct", "batch"):
            cache = WORK / "extract" / f"cache_{way}"
            shutil.rmtree(cache, ignore_errors=True)
            url, key = (base_url, "") if way == "direct" else (batch.url, batch.api_key)
            settings = load_settings(
                paths={"cache_dir": cache},
                llm={"base_url": url, "api_key": key, "model": model, "max_tokens": max_tokens, "timeout_s": 300,
                     "prices_per_mtok": prices},
                batch={"poll_s": 0.5},
            )  # fmt: skip
            source = api.TextSource(path, "csqa", "csqa", limit=items)
            if way == "direct":
                figures["estimate_prompt_tokens"] = api.estimate_extraction(source, settings).prompt_tokens
            start = time.perf_counter()
            options = api.ExtractOptions(batch="openai" if way == "batch" else None)
            summary = api.extract(source, WORK / "extract" / f"bundle_{way}", settings, options=options)
            runs[way] = {**summary.as_dict(), "wall_s": time.perf_counter() - start}
            print(f"  {way}: {runs[way]['wall_s']:.1f} s, {summary.triples} triples", flush=True)
        direct, batched = runs["direct"], runs["batch"]
        listed = sum(
            p * t for p, t in zip(prices[model], (batched["prompt_tokens"], batched["completion_tokens"]), strict=True)
        )
        figures.update(
            direct_wall_s=round(direct["wall_s"], 1),
            batch_wall_s=round(batched["wall_s"], 1),
            batch_same_triples=(direct["triples"], direct["edges"], direct["prompt_tokens"])
            == (batched["triples"], batched["edges"], batched["prompt_tokens"]),
            batch_prompt_tokens=batched["prompt_tokens"],
            estimate_error=round(figures["estimate_prompt_tokens"] / batched["prompt_tokens"] - 1, 4),
            batch_price_ratio=round(batched["cost_usd"] / (listed / 1_000_000), 3) if listed else None,
            batches_created=len(batch.created),
        )
    finally:
        batch.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--batch-items", type=int, default=200, help="items of the batch-against-direct part")
    args = parser.parse_args()
    path = _data_file()
    figures: dict[str, Any] = {"items": args.items, "max_tokens": args.max_tokens}
    with local_server.running() as server:
        figures["model"] = server.model
        for concurrency in (1, 4, 8):
            cache = WORK / "extract" / f"cache_c{concurrency}"
            shutil.rmtree(cache, ignore_errors=True)
            run = one_run(path, server.base_url, server.model, cache, concurrency, args.items, args.max_tokens)
            print(
                f"  concurrency {concurrency}: {run['items_per_s']:.2f} items/s, {run['llm_calls']} calls, "
                f"{run['tokens']} tokens, {run['triples']} triples",
                flush=True,
            )
            figures[f"c{concurrency}_items_per_s"] = round(run["items_per_s"], 3)
            figures[f"c{concurrency}_llm_phase_s"] = round(run["llm_phase_s"], 2)
            if concurrency == 1:
                first = run
        figures["tokens"] = first["tokens"]
        figures["triples"] = first["triples"]
        figures["tokens_per_triple"] = round(first["tokens"] / first["triples"], 1) if first["triples"] else None
        figures["first_run_wall_s"] = round(first["total_wall_s"], 2)
        again = one_run(
            path, server.base_url, server.model, WORK / "extract" / "cache_c1", 1, args.items, args.max_tokens
        )
        figures["rerun_wall_s"] = round(again["total_wall_s"], 2)
        figures["rerun_llm_calls"] = again["llm_calls"]
        figures["rerun_cache_hit_rate"] = round(again["cache_hits"] / again["units"], 3) if again["units"] else None
        figures.update(batch_endpoint(path, server.base_url, server.model, args.batch_items, 48))
    figures.update(simulated_endpoint(path, args.items, args.max_tokens))
    for key, value in figures.items():
        print(f"  {key:<28} {value}")
    record("extract", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
