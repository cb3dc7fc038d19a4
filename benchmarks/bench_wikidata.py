"""Wikidata sync throughput against a local Virtuoso holding real Wikidata data (the KGTK "arnold" subset:
labels, descriptions, P31/P279, plus the Q42 files).

The subset is every instance of human (Q5) in that data (13,873 items) with their P279/P31 classes as
types. Recorded: entities per second and queries per 1,000 entities for a first sync and for a
no-change re-sync (revision checks only).

Run: ``make bench`` or ``python -m benchmarks.bench_wikidata [--limit 20000]``.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import sparql_server
from tools.wikidata_testdata import write_test_rdf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20000)
    args = parser.parse_args()
    shared = Path(os.environ.get("METAKG_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
    source = shared / "data" / "wikidata"
    home = WORK / "virtuoso"
    shutil.rmtree(home, ignore_errors=True)
    server = sparql_server.start(home, data_dirs=(source,))
    figures: dict[str, Any] = {}
    try:
        start = time.perf_counter()
        files = [
            *write_test_rdf(source, home),
            source / "kgtk_arnold_labels_en.ttl",
            source / "kgtk_arnold_descriptions_en_part1.ttl",
            source / "kgtk_arnold_descriptions_en_part2.ttl",
        ]
        for path in files:
            sparql_server.load(server, path)
        figures["load_s"] = round(time.perf_counter() - start, 1)
        spec = WORK / "humans.yaml"
        spec.write_text(f"name: humans\nclasses:\n  - class: Q5\n    limit: {args.limit}\nlanguages: [en]\n")
        settings = load_settings(paths={"cache_dir": WORK / "wikidata-cache"})
        shutil.rmtree(WORK / "wikidata-cache", ignore_errors=True)
        out = WORK / "humans"
        for label in ("first_sync", "no_change_resync"):
            start = time.perf_counter()
            summary = api.sync_wikidata(spec, out, settings, endpoint=server.endpoint)
            wall = time.perf_counter() - start
            entities = summary.nodes
            figures[f"{label}_s"] = round(wall, 2)
            figures[f"{label}_entities"] = entities
            figures[f"{label}_entities_fetched"] = summary.entities_fetched
            figures[f"{label}_queries"] = summary.queries
            figures[f"{label}_entities_per_s"] = round(entities / wall, 1)
            figures[f"{label}_queries_per_1000_entities"] = round(1000 * summary.queries / max(entities, 1), 1)
            print(
                f"  {label}: {entities} entities ({summary['entities_fetched']} fetched) in {wall:.1f} s, "
                f"{summary['queries']} queries",
                flush=True,
            )
    finally:
        sparql_server.stop(server)
    for key, value in figures.items():
        print(f"  {key:<44} {value}")
    record("wikidata_sync", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
