"""Neo4j load throughput on the same SYNTHETIC PrimeKG-shaped sample, three ways, each into a fresh server:

- metakg's loader: UNWIND ... MERGE batches (``neo4j.batch_size`` rows per transaction);
- one MERGE statement per relationship (auto-commit), the naive baseline (target: batched >= 20x faster);
- ``neo4j-admin database import full`` from the files of ``metakg export neo4j-admin`` (empty database only).

Run: ``make bench`` or ``python -m benchmarks.bench_neo4j_load [--scale 0.005]``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from benchmarks.common import WORK, fresh_server, record, settings_and_data
from metakg.config import Neo4jSettings
from metakg.ingest.primekg import read_primekg
from metakg.ingest.primekg_synthetic import generate
from metakg.loaders import cypher
from metakg.loaders.neo4j_admin import write_admin_import
from metakg.loaders.neo4j_loader import edge_rows, load_bundle
from metakg.loaders.neo4j_store import connect
from metakg.schemas.bundle import Bundle
from metakg.schemas.validation import validate
from metakg.schemas.vocabulary import default_vocabulary

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import neo4j_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--per-row-limit", type=int, default=5000, help="relationships loaded one by one")
    args = parser.parse_args()
    settings, data_dir = settings_and_data(" for the PrimeKG count tables")
    sample = generate(WORK / f"neo4j_sample_{args.scale}", data_dir / "primekg", scale=args.scale)
    raw, _report = read_primekg(sample.path)
    bundle, _validation = validate(raw, default_vocabulary().names, run_gx=False)
    print(
        f"neo4j load benchmark: SYNTHETIC PrimeKG sample, {bundle.nodes.height:,} nodes, {bundle.edges.height:,} edges"
    )
    figures: dict[str, float] = {}

    server = fresh_server("batched")
    try:
        driver = connect(Neo4jSettings(uri=server.uri))
        start = time.perf_counter()
        report = load_bundle(driver, bundle, database="neo4j", target=server.uri, batch_size=settings.neo4j.batch_size)
        figures["batched_seconds"] = time.perf_counter() - start
        assert report.edges_in_neo4j == bundle.edges.height
        figures["batched_rels_per_s"] = bundle.edges.height / figures["batched_seconds"]
        # the edge phase alone (nodes already there), the part the per-row baseline also does
        driver.execute_query("MATCH ()-[r]->() DELETE r", database_="neo4j")
        edges_start = time.perf_counter()
        load_bundle(
            driver,
            Bundle(bundle.nodes.head(0), bundle.edges),
            database="neo4j",
            target=server.uri,
            batch_size=settings.neo4j.batch_size,
        )
        figures["batched_edges_only_rels_per_s"] = bundle.edges.height / (time.perf_counter() - edges_start)
        driver.execute_query("MATCH ()-[r]->() DELETE r", database_="neo4j")
        rows = edge_rows(bundle.edges.head(args.per_row_limit)).to_dicts()
        start = time.perf_counter()
        for row in rows:
            driver.execute_query(
                cypher.merge_edge_single(row["rel"]),
                id=row["id"],
                src=row["src"],
                dst=row["dst"],
                created_at=row["created_at"],
                props=row["props"],
                database_="neo4j",
            )
        figures["per_row_rels_per_s"] = len(rows) / (time.perf_counter() - start)
        driver.close()
    finally:
        neo4j_server.stop(server)

    files = write_admin_import(bundle, WORK / "admin_import")
    home = WORK / "neo4j" / "admin"
    if home.exists():
        import shutil

        shutil.rmtree(home)
    start = time.perf_counter()
    result = neo4j_server.admin_import(home, shlex.split(files["command"])[4:])
    figures["admin_import_seconds"] = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-2000:] + result.stderr[-2000:])
    figures["admin_import_rels_per_s"] = bundle.edges.height / figures["admin_import_seconds"]
    figures["batched_vs_per_row"] = figures["batched_edges_only_rels_per_s"] / figures["per_row_rels_per_s"]
    for key, value in figures.items():
        print(f"  {key:<36} {value:12,.1f}")
    print("  (admin import time includes starting its JVM)")
    record(
        f"neo4j_load_{args.scale}",
        {
            "nodes": bundle.nodes.height,
            "edges": bundle.edges.height,
            "per_row_sample": min(args.per_row_limit, bundle.edges.height),
            **{k: round(v, 1) for k, v in figures.items()},
            "target_batched_vs_per_row": 20,
        },
        synthetic_data=True,
    )


if __name__ == "__main__":
    main()
