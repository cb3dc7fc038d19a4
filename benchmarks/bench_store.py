"""Embedded store on a SYNTHETIC 100k-node, 1M-edge graph, side by side with networkx in the same run.

Figures: bundle load time (read + index), neighbour latency, and 3-hop shortest-path latency (k=1 and
k=5) for metakg's embedded store and for networkx on the same graph and the same node pairs.
Run: ``make bench`` or ``python -m benchmarks.bench_store [--nodes N --edges M]``.
"""

from __future__ import annotations

import argparse
import itertools
import random

import networkx as nx
import numpy as np
import polars as pl

from benchmarks.common import WORK, median_ms, peak_rss_mib, record, skewed_endpoints, timed
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from metakg.schemas.tables import conform_edges, conform_nodes


def make_bundle(n_nodes: int, n_edges: int, seed: int = 0) -> Bundle:
    """A synthetic graph: heavy-tailed degrees, 40 relations, unique edge ids."""
    rng = np.random.default_rng(seed)
    src, dst = skewed_endpoints(rng, n_nodes, n_edges)
    ids = pl.Series([f"kg:bench/{i}" for i in range(n_nodes)])
    nodes = conform_nodes(pl.DataFrame({"id": ids, "name": ids, "type": "concept", "source": "bench"}))
    edges = conform_edges(
        pl.DataFrame(
            {
                "src": ids.gather(src),
                "dst": ids.gather(dst),
                "rel": [f"rel_{i}" for i in rng.integers(0, 40, n_edges)],
                "source": "bench",
                "confidence": 1.0,
            }
        )
    ).unique("id", keep="first", maintain_order=True)
    return Bundle(nodes=nodes, edges=edges)


def pairs_at_distance(store: EmbeddedStore, ids: list[str], hops: int, count: int, seed: int) -> list[tuple[str, str]]:
    """Random node pairs whose shortest (undirected) distance is exactly ``hops``."""
    rnd = random.Random(seed)
    found: list[tuple[str, str]] = []
    while len(found) < count:
        a, b = rnd.sample(ids, 2)
        paths = store.shortest_paths(a, b, max_hops=hops)
        if paths and paths[0].hops == hops:
            found.append((a, b))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=100)
    args = parser.parse_args()
    print(f"store benchmark: SYNTHETIC graph, {args.nodes:,} nodes, {args.edges:,} edges")
    times: dict[str, float] = {}
    bundle = make_bundle(args.nodes, args.edges)
    path = WORK / "store_bundle"
    write_bundle(path, bundle)
    with timed("metakg: read bundle + build embedded store", times):
        store = EmbeddedStore.from_bundle(read_bundle(path))
    with timed("networkx: build MultiGraph from the same frames", times):
        graph = nx.MultiGraph()
        graph.add_nodes_from(bundle.nodes["id"].to_list())
        graph.add_edges_from(
            (s, d, e, {"rel": r}) for s, d, e, r in bundle.edges.select("src", "dst", "id", "rel").iter_rows()
        )
        simple = nx.Graph(graph)

    ids = bundle.nodes["id"].to_list()
    rnd = random.Random(1)
    sample = rnd.sample(ids, 1000)
    it = itertools.cycle(sample)
    figures: dict[str, float] = {}
    # metakg returns full node and edge records; networkx here only (neighbour id, edge key) pairs
    figures["neighbours_ms_metakg"] = median_ms(lambda: store.neighbours(next(it)), 1000)
    figures["neighbours_ms_networkx"] = median_ms(
        lambda: [(v, k) for _, v, k in graph.edges(next(it), keys=True)], 1000
    )

    pairs = pairs_at_distance(store, ids, 3, args.pairs, seed=2)
    pit = itertools.cycle(pairs)
    figures["path3_k1_ms_metakg"] = median_ms(lambda: store.shortest_paths(*next(pit), k=1, max_hops=3), len(pairs))
    figures["path3_k1_ms_networkx"] = median_ms(lambda: nx.shortest_path(graph, *next(pit)), len(pairs))
    figures["path3_k5_ms_metakg"] = median_ms(lambda: store.shortest_paths(*next(pit), k=5, max_hops=3), len(pairs))
    figures["path3_k5_ms_networkx"] = median_ms(
        lambda: list(itertools.islice(nx.shortest_simple_paths(simple, *next(pit)), 5)), min(len(pairs), 30)
    )
    for key in ("neighbours", "path3_k1", "path3_k5"):
        figures[f"{key}_speedup"] = figures[f"{key}_ms_networkx"] / figures[f"{key}_ms_metakg"]
    for key, value in figures.items():
        unit = "x" if key.endswith("speedup") else "ms"
        print(f"  {key:<44} {value:9.3f} {unit}")
    print(f"  peak memory {peak_rss_mib():,.0f} MiB (both graphs in one process)")
    record(
        "store_100k_1m",
        {
            "nodes": bundle.nodes.height,
            "edges": bundle.edges.height,
            "pairs_at_3_hops": len(pairs),
            "seconds": {k: round(v, 3) for k, v in times.items()},
            "median_latency": {k: round(v, 4) for k, v in figures.items()},
            "target": "paths at least 10x faster than networkx",
            "peak_rss_mib": round(peak_rss_mib()),
        },
        synthetic_data=True,
    )


if __name__ == "__main__":
    main()
