"""PrimeKG at full scale: the embedded store beside networkx and Neo4j, and the two ways into Neo4j.

The graph is a full-scale SYNTHETIC PrimeKG (the published node and relation counts, 8.1M kg.csv rows,
about 129k nodes and 4M edges once mirrored rows collapse), made by ``metakg synthetic primekg`` and
turned into a validated bundle by ``metakg ingest primekg``. Each part runs in its own process, so wall
time and peak memory are its own:

- embedded: read the bundle and build the store; neighbours and 3-hop k = 5 shortest paths, p50/p95;
- networkx: a MultiGraph of the same edges, the same neighbours and (on the first 20 pairs) the same
  paths with ``shortest_simple_paths``;
- neo4j: ``metakg load neo4j`` (the batched loader) into a fresh server, then the same neighbours and
  the same pairs with Cypher ``SHORTEST 5``; peak memory of the loading process and of the server;
- admin: ``metakg export neo4j-admin`` files and ``neo4j-admin database import``, wall time and peak
  memory of the import.

The pairs are chosen once, on the embedded store: random node pairs at exactly 3 hops.
Run: ``make bench`` or ``python -m benchmarks.bench_primekg_scale [--scale 1.0 --pairs 100]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import PEAK_OF, RESULTS, WORK, fresh_server, record, settings_and_data

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NEIGHBOUR_SAMPLE = 1000
NETWORKX_PATH_PAIRS = 20


def quantiles(times_s: list[float]) -> dict[str, float]:
    """p50 and p95 of wall times, in milliseconds."""
    ms = np.asarray(times_s) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def timed_each(fn: Any, items: list[Any]) -> list[float]:
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - start)
    return times


def bundle_path(scale: float) -> Path:
    """The synthetic PrimeKG bundle at ``scale`` (made once into the work folder)."""
    from metakg import api

    out = WORK / f"primekg_scale_{scale}"
    if not (out / "manifest.json").is_file():
        settings, data_dir = settings_and_data(" for the PrimeKG count tables")
        from metakg.ingest.primekg_synthetic import generate

        files = generate(WORK / f"primekg_scale_{scale}_csv", data_dir / "primekg", scale=scale)
        api.ingest_primekg(files.path, out, settings)
    if "validation" not in json.loads((out / "manifest.json").read_text(encoding="utf-8")):
        settings, _data_dir = settings_and_data()
        api.validate_bundle(out, settings)  # here, so the Neo4j load times the load alone
    return out


def part_embedded(bundle: Path, work: Path, pairs_wanted: int) -> dict[str, Any]:
    from metakg.loaders.embedded_store import EmbeddedStore
    from metakg.schemas.bundle import read_bundle

    start = time.perf_counter()
    store = EmbeddedStore.from_bundle(read_bundle(bundle))
    load_s = time.perf_counter() - start
    ids = store.bundle().nodes["id"].to_list()
    rnd = random.Random(1)
    sample = rnd.sample(ids, NEIGHBOUR_SAMPLE)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < pairs_wanted:
        a, b = rnd.sample(ids, 2)
        found = store.shortest_paths(a, b, max_hops=3)
        if found and found[0].hops == 3:
            pairs.append((a, b))
    (work / "pairs.json").write_text(json.dumps({"sample": sample, "pairs": pairs}), encoding="utf-8")
    neighbours = timed_each(lambda n: store.neighbours(n), sample)
    paths = timed_each(lambda p: store.shortest_paths(p[0], p[1], k=5, max_hops=3), pairs)
    counts = store.counts()
    return {
        "nodes": counts["nodes"],
        "edges": counts["edges"],
        "load_s": round(load_s, 2),
        "peak_rss_mib": own_peak_mib(),
        "neighbours": quantiles(neighbours),
        "paths_3hop_k5": quantiles(paths),
    }


def part_networkx(bundle: Path, work: Path) -> dict[str, Any]:
    import networkx as nx
    import polars as pl

    chosen = json.loads((work / "pairs.json").read_text(encoding="utf-8"))
    start = time.perf_counter()
    edges = pl.read_parquet(bundle / "edges.parquet", columns=["src", "dst", "id"])
    graph = nx.MultiGraph()
    graph.add_nodes_from(pl.read_parquet(bundle / "nodes.parquet", columns=["id"])["id"].to_list())
    graph.add_edges_from(edges.iter_rows())
    load_s = time.perf_counter() - start
    neighbours = timed_each(lambda n: [(v, k) for _, v, k in graph.edges(n, keys=True)], chosen["sample"])
    simple = nx.Graph(graph)
    pairs = [tuple(p) for p in chosen["pairs"][:NETWORKX_PATH_PAIRS]]
    paths = timed_each(lambda p: list(itertools.islice(nx.shortest_simple_paths(simple, p[0], p[1]), 5)), pairs)
    return {
        "load_s": round(load_s, 2),
        "peak_rss_mib": own_peak_mib(),
        "neighbours": quantiles(neighbours),
        "paths_3hop_k5": quantiles(paths),
        "path_pairs": len(pairs),
    }


def part_neo4j(bundle: Path, work: Path) -> dict[str, Any]:
    from metakg import api
    from tools import neo4j_server

    chosen = json.loads((work / "pairs.json").read_text(encoding="utf-8"))
    settings, _data = settings_and_data()
    server = fresh_server("primekg_scale", heap="4g", pagecache_mb=4096)
    try:
        neo = settings.model_copy(update={"neo4j": settings.neo4j.model_copy(update={"uri": server.uri})})
        start = time.perf_counter()
        api.load_neo4j(bundle, neo)
        load_s = time.perf_counter() - start
        loader_rss = own_peak_mib()
        with api.open_store(neo, neo4j=True) as store:
            store.neighbours(chosen["sample"][0])  # the first query plans the statement
            neighbours = timed_each(lambda n: store.neighbours(n), chosen["sample"])
            store.shortest_paths(*chosen["pairs"][0], k=5, max_hops=3)
            paths = timed_each(lambda p: store.shortest_paths(p[0], p[1], k=5, max_hops=3), chosen["pairs"])
        server_rss = server_peak_mib(server.pid)
    finally:
        neo4j_server.stop(server)
    return {
        "load_s": round(load_s, 1),
        "loader_peak_rss_mib": round(loader_rss),
        "server_peak_rss_mib": server_rss,
        "neighbours": quantiles(neighbours),
        "paths_3hop_k5": quantiles(paths),
    }


def own_peak_mib() -> int:
    """This process's peak resident memory since it started (VmHWM: unlike ``ru_maxrss``, it does not carry
    over the peak of the process that forked it)."""
    return server_peak_mib(os.getpid())


def server_peak_mib(pid: int) -> int:
    """The peak resident memory of a running process (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return -1


def part_admin(bundle: Path, work: Path) -> dict[str, Any]:
    import shutil

    from metakg.loaders.neo4j_admin import write_admin_import
    from metakg.schemas.bundle import read_bundle
    from tools import neo4j_server

    start = time.perf_counter()
    files = write_admin_import(read_bundle(bundle), work / "admin_files")
    export_s = time.perf_counter() - start
    export_rss = own_peak_mib()
    home = WORK / "neo4j" / "primekg_scale_admin"
    shutil.rmtree(home, ignore_errors=True)
    start = time.perf_counter()
    # measured from a small process: this one holds the bundle it exported, which ru_maxrss would carry over
    result = neo4j_server.admin_import(home, shlex.split(files["command"])[4:], prefix=[sys.executable, "-c", PEAK_OF])
    import_s = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-2000:] + result.stderr[-2000:])
    import_rss = int(result.stderr.rstrip().splitlines()[-1].removeprefix("peak_kib ")) / 1024
    shutil.rmtree(work / "admin_files", ignore_errors=True)
    return {
        "export_s": round(export_s, 1),
        "export_peak_rss_mib": round(export_rss),
        "import_s": round(import_s, 1),
        "import_peak_rss_mib": round(import_rss),
        "total_s": round(export_s + import_s, 1),
    }


PARTS = {"embedded": part_embedded, "networkx": part_networkx, "neo4j": part_neo4j, "admin": part_admin}


def run_part(name: str, bundle: Path, work: Path, pairs: int) -> dict[str, Any]:
    """One part in its own process; its figures are the last line it prints."""
    command = [sys.executable, "-m", "benchmarks.bench_primekg_scale", "--part", name, "--bundle", str(bundle)]
    command += ["--work", str(work), "--pairs", str(pairs)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"part {name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    figures = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"  {name:<9} {json.dumps(figures)}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--skip", action="append", default=[], choices=sorted(PARTS), help="leave a part out")
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--bundle", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part is not None:
        part = PARTS[args.part]
        figures = part(args.bundle, args.work, args.pairs) if args.part == "embedded" else part(args.bundle, args.work)
        print(json.dumps(figures))
        return
    bundle = bundle_path(args.scale)
    work = WORK / f"primekg_scale_{args.scale}_work"
    work.mkdir(parents=True, exist_ok=True)
    print(f"PrimeKG at scale {args.scale} (SYNTHETIC): {bundle}", flush=True)
    figures: dict[str, Any] = {"scale": args.scale, "pairs": args.pairs}
    earlier = RESULTS / f"primekg_scale_{args.scale}.json"
    kept = json.loads(earlier.read_text(encoding="utf-8")) if args.skip and earlier.is_file() else {}
    for name in PARTS:
        if name not in args.skip:
            figures[name] = run_part(name, bundle, work, args.pairs)
        elif name in kept:  # a part skipped keeps the figures of the run that measured it, with its time
            figures[name] = {**kept[name], "measured_at": kept[name].get("measured_at", kept.get("at"))}
    if "embedded" in figures and "networkx" in figures:
        e, n = figures["embedded"], figures["networkx"]
        figures["embedded_vs_networkx"] = {
            "load": round(n["load_s"] / e["load_s"], 1),
            "memory": round(n["peak_rss_mib"] / e["peak_rss_mib"], 2),
            "paths_p50": round(n["paths_3hop_k5"]["p50_ms"] / e["paths_3hop_k5"]["p50_ms"], 1),
        }
    if "neo4j" in figures and "admin" in figures:
        figures["batched_vs_admin_import"] = round(figures["neo4j"]["load_s"] / figures["admin"]["total_s"], 1)
    record(f"primekg_scale_{args.scale}", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
