"""``metakg serve`` under load: 50 concurrent clients asking retrieval-only questions for 30 s.

The server is the real ``metakg serve`` over the pilot's CommonsenseQA KG (with name embeddings) on a free
port of 127.0.0.1; the clients post the first 100 pilot questions in turn to ``/api/ask`` with
``use_llm: false`` (no LLM time: what is measured is the server and retrieval). Figures: requests, errors,
throughput, latency p50/p95 (queueing included: the server answers ``server.max_concurrent_asks`` at a
time), and the server's resident memory sampled every 5 s. The load runs ``--rounds`` times back to back
(the same questions again): memory that grows in the first round (caches, allocator arenas) and stays put
in the later ones is a plateau; growth that repeats round after round is a leak.

Run: ``make bench`` or ``python -m benchmarks.bench_serve [--clients 50 --seconds 30 --rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.bench_qa import PILOT_QUESTIONS, csqa_bundle
from benchmarks.common import record, serving, settings_and_data

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mib(pid: int) -> float:
    """The process's resident memory now (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1.0


async def load(url: str, questions: list[dict[str, Any]], clients: int, seconds: float, pid: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    memory: list[float] = []
    stop = time.monotonic() + seconds

    async def client(number: int, http: httpx.AsyncClient) -> None:
        turn = number
        while time.monotonic() < stop:
            body = questions[turn % len(questions)]
            turn += clients
            started = time.perf_counter()
            try:
                answer = await http.post(url + "/api/ask", json=body)
                if answer.status_code != 200:
                    errors[str(answer.status_code)] = errors.get(str(answer.status_code), 0) + 1
                    continue
            except httpx.HTTPError as e:
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                continue
            latencies.append(time.perf_counter() - started)

    async def sample() -> None:
        while time.monotonic() < stop:
            memory.append(round(rss_mib(pid), 1))
            await asyncio.sleep(5)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(sample(), *(client(i, http) for i in range(clients)))
        elapsed = time.perf_counter() - started
    memory.append(round(rss_mib(pid), 1))
    ms = np.asarray(latencies) * 1000
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "errors": errors,
        "throughput_per_s": round(len(latencies) / elapsed, 2),
        "p50_ms": round(float(np.percentile(ms, 50)), 1) if len(ms) else None,
        "p95_ms": round(float(np.percentile(ms, 95)), 1) if len(ms) else None,
        "server_rss_mib": memory,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3, help="Load rounds back to back (memory plateau vs leak).")
    args = parser.parse_args()
    settings, data_dir = settings_and_data()
    from metakg import api

    bundle = csqa_bundle(settings, data_dir)
    asked, _read = api.read_questions(data_dir / PILOT_QUESTIONS, "pilot", limit=100)
    questions = [
        {"question": q.text, "choices": [f"{letter}: {text}" for letter, text in q.choices], "use_llm": False}
        for q in asked
    ]
    with serving(bundle) as (url, server):
        httpx.post(url + "/api/ask", json=questions[0], timeout=120)  # the first answer loads the models
        before = round(rss_mib(server.pid), 1)
        rounds = [asyncio.run(load(url, questions, args.clients, args.seconds, server.pid)) for _ in range(args.rounds)]
    for number, figures in enumerate(rounds, start=1):
        print(
            f"metakg serve, round {number}, {figures['clients']} clients for {figures['seconds']} s: "
            f"{figures['requests']} answers, errors {figures['errors'] or 0}, {figures['throughput_per_s']}/s, "
            f"p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms; server memory {figures['server_rss_mib']} MiB"
        )
    ends = [before] + [figures["server_rss_mib"][-1] for figures in rounds]
    growth = [round(b - a, 1) for a, b in itertools.pairwise(ends)]
    print(f"server memory after warm-up {before} MiB, growth per round {growth} MiB")
    record(
        "serve",
        rounds[0] | {"rounds": rounds, "rss_after_warmup_mib": before, "rss_growth_per_round_mib": growth},
        synthetic_data=False,
    )


if __name__ == "__main__":
    main()
