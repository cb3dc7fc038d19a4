"""Extraction on a Ray cluster beside a direct run: prompts per second, scaling from one node to two, overhead.

The endpoint is a real HTTP server on 127.0.0.1 that answers every request after a fixed latency and serves
requests in parallel, as a hosted endpoint or a vLLM server does (the local SmolLM2 server answers one request at
a time, so no engine can go faster against it). The prompts are real: the first N test sentences of a
Text2KGBench ontology. Each run starts from an empty cache.

- direct: ``extract`` in one process, ``--concurrency`` requests in flight;
- Ray, 1 node and 2 nodes (``ray start`` on 127.0.0.1, each node ``--cpus`` CPUs, one request worker per CPU:
  ``ray.worker_cpus = 1``): the same prompts from the cluster's workers;
- the scaling efficiency: the two-node rate over twice the one-node rate;
- Ray's overhead on a small run: the wall time of ``--engine ray`` over 20 prompts less a direct run's.

Run: ``make bench`` or ``python -m benchmarks.bench_ray [--units 200 --latency 0.2 --cpus 2]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import WORK, record, settings_and_data
from metakg import api
from metakg.config import load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SENTENCES = "text2kgbench/wikidata_tekgen/test/ont_1_movie_test.jsonl"


def one_run(data: Path, url: str, units: int, concurrency: int, name: str, address: str | None) -> dict[str, Any]:
    """One extraction over ``units`` prompts with a fresh cache; ``address``: on that Ray cluster."""
    cache = WORK / "ray" / f"cache_{name}"
    shutil.rmtree(cache, ignore_errors=True)
    settings = load_settings(
        paths={"cache_dir": cache},
        llm={"base_url": url, "model": "simulated", "max_tokens": 32, "timeout_s": 60},
        extract={"structured": False, "embeddings": False},
        ray={"worker_cpus": 1.0, "batch_size": 4},
    )
    source = api.TextSource(data, "jsonl", "bench", text_field="sent", id_field="id", limit=units)
    options = api.ExtractOptions(concurrency=concurrency, engine="ray" if address else "local", ray_address=address)
    rate: dict[str, float] = {}

    def count(stats: api.RunStats) -> None:
        if stats.done == stats.total:
            rate["units_per_s"] = stats.items_per_s

    start = time.perf_counter()
    summary = api.extract(source, WORK / "ray" / f"bundle_{name}", settings, options=options, counter=count)
    wall = time.perf_counter() - start
    assert summary.failed == 0, summary.errors
    return {"wall_s": round(wall, 2), "units_per_s": round(rate.get("units_per_s", 0.0), 2),
            "edges": summary.edges, "ray": summary.ray}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the endpoint takes for each request")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of each Ray node (one request worker each)")
    parser.add_argument("--concurrency", type=int, default=8, help="request workers per endpoint at most")
    args = parser.parse_args()
    _settings, data_dir = settings_and_data(" for the Text2KGBench sentences")
    data = data_dir / SENTENCES
    from tests.fault_server import FaultServer
    from tools import ray_cluster

    server = FaultServer().start()
    server.reply_for = lambda body: "the film\\directed by\\a director"
    server.action_for = lambda body: f"slow:{args.latency}"
    figures: dict[str, Any] = {"units": args.units, "latency_s": args.latency, "node_cpus": args.cpus,
                               "concurrency": args.concurrency}  # fmt: skip
    cluster = ray_cluster.start(WORK / "ray" / "cluster", nodes=1, cpus=args.cpus)
    try:
        direct = one_run(data, server.url, args.units, args.cpus, "direct", None)
        print(f"  direct, concurrency {args.cpus}: {direct['units_per_s']} prompts/s", flush=True)
        one = one_run(data, server.url, args.units, args.concurrency, "ray1", cluster.address)
        print(f"  Ray, 1 node: {one['units_per_s']} prompts/s", flush=True)
        ray_cluster.add_node(cluster, cpus=args.cpus)
        two = one_run(data, server.url, args.units, args.concurrency, "ray2", cluster.address)
        print(f"  Ray, 2 nodes: {two['units_per_s']} prompts/s ({two['ray']['units_per_node']})", flush=True)
        small_direct = one_run(data, server.url, 20, args.cpus, "small_direct", None)
        small_ray = one_run(data, server.url, 20, args.concurrency, "small_ray", cluster.address)
        same = direct["edges"] == one["edges"] == two["edges"]
    finally:
        ray_cluster.stop(cluster)
        server.stop()
    figures.update(
        direct_units_per_s=direct["units_per_s"],
        direct_concurrency=args.cpus,
        ray_1_node_units_per_s=one["units_per_s"],
        ray_2_nodes_units_per_s=two["units_per_s"],
        ray_2_nodes_nodes_used=two["ray"]["nodes_used"],
        scaling_efficiency=round(two["units_per_s"] / (2 * one["units_per_s"]), 3) if one["units_per_s"] else None,
        direct_20_wall_s=small_direct["wall_s"],
        ray_20_wall_s=small_ray["wall_s"],
        ray_overhead_20_s=round(small_ray["wall_s"] - small_direct["wall_s"], 2),
        same_edges=same,
    )
    for key, value in figures.items():
        print(f"  {key:<28} {value}")
    record("ray", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
