"""The floor of any online Neo4j load: how fast the server's transactional write path creates relationships
at all, beside what `metakg load neo4j` writes per relationship.

On a SYNTHETIC PrimeKG bundle (made once, as ``bench_primekg_scale`` makes it), each shape runs into a
fresh server whose nodes (ids only, under a uniqueness constraint) are already there; batches of 20,000
rows, one statement per relationship type (a type written in the statement, the server's cheapest form):

- ``bare``: ``MATCH`` both ends, ``CREATE`` the relationship with no property: no load that writes edges
  through Cypher transactions can be faster;
- ``props``: the same with the eight properties every PrimeKG edge carries in metakg's layout;

each with one writer and with two writers (two sessions taking batches from one queue; the driver retries a batch
that meets a lock conflict). The admin import's time for the same bundle is ``bench_primekg_scale``'s.

Run: ``make bench`` or ``python -m benchmarks.bench_neo4j_floor [--scale 0.1]``.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
from typing import Any

import polars as pl

from benchmarks.bench_primekg_scale import bundle_path
from benchmarks.common import fresh_server, record
from tools import neo4j_server

BATCH = 20_000
PROPERTIES = ["id", "display", "source", "confidence", "count", "record_ids", "importer", "run_id"]


def statements(edges: pl.DataFrame, shape: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """The batches of ``edges`` as (statement, rows), one statement per relation."""
    batches = []
    for (rel,), group in edges.group_by(["rel"], maintain_order=True):
        fields = "" if shape == "bare" else " {" + ", ".join(f"{p}: row.{p}" for p in PROPERTIES) + "}"
        statement = (
            "UNWIND $rows AS row MATCH (a:Entity {id: row.src}) MATCH (b:Entity {id: row.dst}) "
            f"CREATE (a)-[:`{rel}`{fields}]->(b)"
        )
        rows = group.select("src", "dst", *([] if shape == "bare" else PROPERTIES)).to_dicts()
        batches += [(statement, rows[i : i + BATCH]) for i in range(0, len(rows), BATCH)]
    return batches


def run(nodes: pl.DataFrame, edges: pl.DataFrame, shape: str, writers: int) -> dict[str, Any]:
    from neo4j import GraphDatabase

    server = fresh_server(f"floor_{shape}_{writers}", heap="4g", pagecache_mb=4096)
    try:
        with GraphDatabase.driver(server.uri) as driver:
            driver.execute_query("CREATE CONSTRAINT entity_id FOR (n:Entity) REQUIRE n.id IS UNIQUE")
            ids = nodes["id"].to_list()
            for i in range(0, len(ids), BATCH):
                driver.execute_query("UNWIND $ids AS id CREATE (:Entity {id: id})", ids=ids[i : i + BATCH])
            jobs: queue.Queue[tuple[str, list[dict[str, Any]]]] = queue.Queue()
            for batch in statements(edges, shape):
                jobs.put(batch)

            def write() -> None:
                with driver.session() as session:
                    while True:
                        try:
                            statement, rows = jobs.get_nowait()
                        except queue.Empty:
                            return
                        # a lock conflict between the writers is transient: execute_write retries the batch
                        session.execute_write(lambda tx, s=statement, r=rows: tx.run(s, rows=r).consume())

            start = time.perf_counter()
            threads = [threading.Thread(target=write) for _ in range(writers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            seconds = time.perf_counter() - start
            created = driver.execute_query("MATCH ()-[r]->() RETURN count(r) AS n").records[0]["n"]
    finally:
        neo4j_server.stop(server)
    assert created == edges.height, f"{shape}/{writers}: {created} of {edges.height} relationships"
    return {"seconds": round(seconds, 1), "rels_per_s": round(edges.height / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=0.1)
    args = parser.parse_args()
    bundle = bundle_path(args.scale)
    nodes = pl.read_parquet(bundle / "nodes.parquet", columns=["id"])
    edges = pl.read_parquet(bundle / "edges.parquet", columns=["src", "dst", "rel", *PROPERTIES])
    print(f"neo4j write floor: SYNTHETIC PrimeKG at scale {args.scale}, {nodes.height:,} nodes, {edges.height:,} edges")
    figures: dict[str, Any] = {"scale": args.scale, "nodes": nodes.height, "edges": edges.height}
    for shape in ("bare", "props"):
        for writers in (1, 2):
            result = run(nodes, edges, shape, writers)
            figures[f"{shape}_{writers}_writer{'s' if writers > 1 else ''}"] = result
            print(f"  {shape:5} {writers} writer(s): {result['seconds']:6.1f} s  {result['rels_per_s']:>8,} rels/s")
    record(f"neo4j_floor_{args.scale}", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
