"""Extraction throughput against the local model server (llama-cpp-python + SmolLM2-135M-Instruct).

For concurrency 1, 4 and 8, ``metakg extract`` runs over the first N CommonsenseQA items (real data) with
a fresh response cache, then the concurrency-1 run is repeated on its warm cache. Recorded: items per
second of the LLM phase, tokens per extracted triple, the cache hit rate and the wall time of the re-run.

Run: ``make bench`` or ``python -m benchmarks.bench_extract [--items 24] [--max-tokens 128]``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    path = _data_file()
    figures: dict[str, Any] = {"items": args.items, "max_tokens": args.max_tokens, "synthetic_data": False}
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
    figures.update(simulated_endpoint(path, args.items, args.max_tokens))
    for key, value in figures.items():
        print(f"  {key:<28} {value}")
    record("extract", figures)


if __name__ == "__main__":
    main()
