"""A PrimeKG release-sized update: the diff between two releases, and Neo4j following it.

PrimeKG's releases differ by millions of edges. The published per-relation edge counts of the original
PrimeKG and of its 2026 rebuild (PrimeKG-Plus, ``primekg_plus_TableS2_edge_types.csv``: anatomy_protein_present
3.03M -> 1.86M rows, disease_protein 161k -> 517k, ...) give the shape of such an update. Version 1 is a
SYNTHETIC PrimeKG (``--scale 1`` is the full size, about 4M edges); version 2 scales each relation's edges
by new_count / old_count: random edges are removed where a relation shrinks, and new ones between the
relation's endpoints added where it grows. Measured side by side in one run:

- the diff (what ``ingest primekg --previous`` records), in process;
- ``load neo4j`` (follow mode) of version 2 into a database holding version 1;
- the same follow with ``--history`` (every replaced row copied into a version node first), into a second
  database holding version 1;
- a full load of version 2 into an empty database, for the ratios.

Each database then holds version 2 exactly (edge counts checked). Run: ``make bench`` or
``python -m benchmarks.bench_primekg_release [--scale 1.0]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.bench_neo4j_follow import edge_count
from benchmarks.common import WORK, fresh_server, record, settings_and_data
from metakg.config import Neo4jSettings
from metakg.ingest.primekg import read_primekg
from metakg.ingest.primekg_synthetic import generate
from metakg.loaders.neo4j_loader import follow_bundle, load_bundle
from metakg.loaders.neo4j_store import connect
from metakg.schemas.bundle import Bundle
from metakg.schemas.diff import diff_bundles
from metakg.schemas.tables import edge_ids, normalise_relation_expr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import neo4j_server


def release_ratios(table: Path) -> dict[str, float]:
    """new_count / old_count per relation (normalised as metakg names relations)."""
    frame = pl.read_csv(table).with_columns(normalise_relation_expr(pl.col("relation")).alias("rel"))
    return {r: new / old for r, old, new in frame.select("rel", "old_count", "new_count").iter_rows() if old}


def next_release(v1: Bundle, ratios: dict[str, float], seed: int = 5) -> Bundle:
    """``v1`` with each relation's edge count scaled by its ratio (random removals, or new random edges
    between the relation's own endpoints)."""
    rng = np.random.default_rng(seed)
    parts = []
    for (rel,), group in v1.edges.group_by(["rel"], maintain_order=True):
        target = round(group.height * ratios.get(str(rel), 1.0))
        if target <= group.height:
            keep = np.sort(rng.permutation(group.height)[:target])
            parts.append(group[keep])
            continue
        extra = target - group.height
        fresh = group.sample(extra, with_replacement=True, seed=int(rng.integers(1 << 31))).with_columns(
            pl.Series("src", group["src"].gather(rng.integers(0, group.height, extra))),
            pl.Series("dst", group["dst"].gather(rng.integers(0, group.height, extra))),
        )
        parts.extend([group, fresh.with_columns(edge_ids(fresh))])
    edges = pl.concat(parts).unique("id", keep="first", maintain_order=True).filter(pl.col("src") != pl.col("dst"))
    return Bundle(v1.nodes, edges)


def timed_follow(v1: Bundle, v2: Bundle, *, history: bool, figures: dict[str, float | int], key: str) -> None:
    """Load v1 into a fresh database, then time following v2."""
    server = fresh_server("release", heap="3g", pagecache_mb=2048)
    try:
        driver = connect(Neo4jSettings(uri=server.uri))
        started = time.perf_counter()
        follow_bundle(driver, v1, database="neo4j", target=server.uri, batch_size=10_000, history=history)
        figures[f"{key}_load_v1_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        report = follow_bundle(driver, v2, database="neo4j", target=server.uri, batch_size=10_000)
        figures[f"{key}_s"] = round(time.perf_counter() - started, 1)
        assert edge_count(driver) == v2.edges.height, "Neo4j does not hold version 2"
        if history:
            records, _, _ = driver.execute_query("MATCH (v:MetakgVersion) RETURN count(v) AS n")
            figures["versions_kept"] = int(records[0]["n"])
        print(f"  follow to version 2{' with --history' if history else ''}: {figures[f'{key}_s']} s "
              f"({report.edges_loaded:,} edges written, {report.edges_removed:,} removed)", flush=True)  # fmt: skip
        driver.close()
    finally:
        neo4j_server.stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    _settings, data_dir = settings_and_data(" for the PrimeKG count tables")
    sample = generate(WORK / f"primekg_release_{args.scale}", data_dir / "primekg", scale=args.scale)
    v1, _report = read_primekg(sample.path)
    v2 = next_release(v1, release_ratios(data_dir / "primekg" / "primekg_plus_TableS2_edge_types.csv"))
    print(f"release benchmark: SYNTHETIC PrimeKG, {v1.nodes.height:,} nodes; {v1.edges.height:,} edges in version 1, "
          f"{v2.edges.height:,} in version 2 (PrimeKG-Plus per-relation ratios)", flush=True)  # fmt: skip
    figures: dict[str, float | int] = {
        "nodes": v1.nodes.height,
        "edges_v1": v1.edges.height,
        "edges_v2": v2.edges.height,
    }
    started = time.perf_counter()
    changes = diff_bundles(v1, v2)
    figures["diff_s"] = round(time.perf_counter() - started, 1)
    figures.update(edges_added=changes.edges.added, edges_removed=changes.edges.removed)
    print(f"  diff: {figures['diff_s']} s (+{changes.edges.added:,} -{changes.edges.removed:,} edges)", flush=True)
    timed_follow(v1, v2, history=False, figures=figures, key="follow")
    timed_follow(v1, v2, history=True, figures=figures, key="follow_history")
    server = fresh_server("release", heap="3g", pagecache_mb=2048)
    try:
        driver = connect(Neo4jSettings(uri=server.uri))
        started = time.perf_counter()
        load_bundle(driver, v2, database="neo4j", target=server.uri, batch_size=10_000)
        figures["full_reload_v2_s"] = round(time.perf_counter() - started, 1)
        driver.close()
    finally:
        neo4j_server.stop(server)
    figures["reload_over_follow"] = round(figures["full_reload_v2_s"] / max(figures["follow_s"], 0.001), 2)
    figures["history_over_follow"] = round(figures["follow_history_s"] / max(figures["follow_s"], 0.001), 2)
    ratios = f"{figures['reload_over_follow']}x the follow; --history costs {figures['history_over_follow']}x"
    print(f"  full reload of version 2 into an empty database: {figures['full_reload_v2_s']} s ({ratios})")
    record("primekg_release", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
