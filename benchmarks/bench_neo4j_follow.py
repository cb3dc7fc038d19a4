"""Keeping Neo4j equal to a new version of a bundle: applying a 1% diff versus loading the new version again.

A SYNTHETIC PrimeKG-shaped bundle (``--scale 1`` is the full size, about 4M edges) is version 1. Version 2
removes 0.5% of its edges, changes the confidence of 0.25% and adds 0.25% new ones (1% of the edges
differ). Measured side by side in one run:

- ``metakg diff`` of the two versions (in process: the two bundles are in memory);
- ``load neo4j`` (follow mode) of version 2 into a database holding version 1: only the differences are
  written, and the rows gone are removed;
- a full load of version 2 into an empty database (what keeping Neo4j current cost before), for the ratio.

The database then holds version 2 exactly (edge counts checked). Run: ``make bench`` or
``python -m benchmarks.bench_neo4j_follow [--scale 1.0]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import WORK, fresh_server, record, settings_and_data
from metakg.config import Neo4jSettings
from metakg.ingest.primekg import read_primekg
from metakg.ingest.primekg_synthetic import generate
from metakg.loaders import cypher
from metakg.loaders.neo4j_loader import follow_bundle, load_bundle
from metakg.loaders.neo4j_store import connect
from metakg.schemas.bundle import Bundle
from metakg.schemas.diff import diff_bundles
from metakg.schemas.tables import edge_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import neo4j_server


def second_version(v1: Bundle, share: float = 0.01, seed: int = 3) -> Bundle:
    """``v1`` with ``share`` of its edges differing: half removed, a quarter changed, a quarter new."""
    rng = np.random.default_rng(seed)
    n = v1.edges.height
    picked = rng.permutation(n)
    removed = picked[: int(n * share / 2)]
    changed = picked[int(n * share / 2) : int(n * share * 3 / 4)]
    added = int(n * share / 4)
    edges = v1.edges.with_row_index("_i")
    edges = edges.filter(~pl.col("_i").is_in(removed)).with_columns(
        pl.when(pl.col("_i").is_in(changed)).then(0.5).otherwise("confidence").alias("confidence")
    )
    ids = v1.nodes["id"]
    fresh = v1.edges.head(added).with_columns(
        pl.Series("src", ids.gather(rng.integers(0, ids.len(), added))),
        pl.Series("dst", ids.gather(rng.integers(0, ids.len(), added))),
        pl.lit("bench_added").alias("rel"),
    )
    fresh = fresh.with_columns(edge_ids(fresh))
    return Bundle(v1.nodes, pl.concat([edges.drop("_i"), fresh]).unique("id", keep="first", maintain_order=True))


def edge_count(driver: object) -> int:
    records, _, _ = driver.execute_query(cypher.COUNT_EDGES)  # type: ignore[attr-defined]
    return int(records[0]["n"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    _settings, data_dir = settings_and_data(" for the PrimeKG count tables")
    sample = generate(WORK / f"neo4j_follow_{args.scale}", data_dir / "primekg", scale=args.scale)
    v1, _report = read_primekg(sample.path)
    v2 = second_version(v1)
    print(
        f"follow benchmark: SYNTHETIC PrimeKG, {v1.nodes.height:,} nodes, {v1.edges.height:,} edges; v2 differs in 1%"
    )
    figures: dict[str, float | int] = {
        "nodes": v1.nodes.height,
        "edges_v1": v1.edges.height,
        "edges_v2": v2.edges.height,
    }
    started = time.perf_counter()
    changes = diff_bundles(v1, v2)
    figures["diff_s"] = round(time.perf_counter() - started, 1)
    edges = changes.edges
    figures.update(edges_added=edges.added, edges_removed=edges.removed, edges_changed=edges.changed)
    print(f"  metakg diff: {figures['diff_s']} s (+{edges.added} -{edges.removed} ~{edges.changed} edges)")

    server = fresh_server("follow", heap="3g", pagecache_mb=2048)
    try:
        driver = connect(Neo4jSettings(uri=server.uri))
        started = time.perf_counter()
        follow_bundle(driver, v1, database="neo4j", target=server.uri, batch_size=10_000)
        figures["load_v1_s"] = round(time.perf_counter() - started, 1)
        print(f"  version 1 loaded: {figures['load_v1_s']} s")
        started = time.perf_counter()
        report = follow_bundle(driver, v2, database="neo4j", target=server.uri, batch_size=10_000)
        figures["follow_v2_s"] = round(time.perf_counter() - started, 1)
        figures.update(edges_loaded=report.edges_loaded, edges_deleted=report.edges_removed)
        assert edge_count(driver) == v2.edges.height, "Neo4j does not hold version 2"
        print(f"  follow to version 2: {figures['follow_v2_s']} s ({report.edges_loaded} edges written, "
              f"{report.edges_removed} removed)")  # fmt: skip
        driver.close()
    finally:
        neo4j_server.stop(server)
    server = fresh_server("follow", heap="3g", pagecache_mb=2048)
    try:
        driver = connect(Neo4jSettings(uri=server.uri))
        started = time.perf_counter()
        load_bundle(driver, v2, database="neo4j", target=server.uri, batch_size=10_000)
        figures["full_reload_v2_s"] = round(time.perf_counter() - started, 1)
        driver.close()
    finally:
        neo4j_server.stop(server)
    figures["reload_over_follow"] = round(figures["full_reload_v2_s"] / max(figures["follow_v2_s"], 0.001), 1)
    print(f"  full reload of version 2 into an empty database: {figures['full_reload_v2_s']} s "
          f"({figures['reload_over_follow']}x the follow)")  # fmt: skip
    record("neo4j_follow", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
