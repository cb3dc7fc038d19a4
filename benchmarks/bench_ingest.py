"""Ingest + validate + write of a synthetic 1M-edge triple file (target: under 30 s on 2 cores).

Run: ``make bench`` or ``python -m benchmarks.bench_ingest [--edges N]``. The input is SYNTHETIC: concept
names and relations drawn with a heavy-tailed popularity; its size and shape, not its content, matter.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import WORK, peak_rss_mib, record, skewed_endpoints, timed
from metakg import api
from metakg.config import load_settings


def make_triple_file(n_edges: int, seed: int = 0) -> tuple[str, int]:
    """Write a synthetic triple file with ``n_edges`` lines; returns its path and byte size."""
    rng = np.random.default_rng(seed)
    n_concepts = max(10, n_edges // 5)
    src, dst = skewed_endpoints(rng, n_concepts, n_edges)
    relations = np.array([f"synthetic relation {i}" for i in range(60)])
    rel = relations[rng.integers(0, len(relations), n_edges)]
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"synthetic_triples_{n_edges}.txt"
    with path.open("w", encoding="utf-8") as fh:
        for s, r, d in zip(src.tolist(), rel.tolist(), dst.tolist(), strict=True):
            fh.write(f"Synthetic Concept {s}\t{r}\tsynthetic concept {d}\n")
    return str(path), path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--edges", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"ingest benchmark: SYNTHETIC triple file with {args.edges:,} lines")
    times: dict[str, float] = {}
    with timed("generate synthetic file (not counted)", times):
        path, size = make_triple_file(args.edges)
    settings = load_settings()
    from pathlib import Path

    out = WORK / "ingest_bundle"
    with timed("ingest (parse, normalise, ids, write bundle)", times):
        report = api.ingest_triples(Path(path), "synthetic", out, settings)
    with timed("validate (GX suites + row checks, rewrite)", times):
        validation = api.validate_bundle(out, settings)
    total = times["ingest (parse, normalise, ids, write bundle)"] + times["validate (GX suites + row checks, rewrite)"]
    print(f"  {'TOTAL ingest + validate + write':<44} {total:9.3f} s   (target < 30 s)")
    print(f"  lines {report.read:,}, edges {report.edges:,}, nodes {report.nodes:,}, rejected {validation.rejected:,}")
    print(f"  peak memory {peak_rss_mib():,.0f} MiB")
    record(
        "ingest_1m",
        {
            "lines": report.read,
            "file_mib": round(size / 2**20, 1),
            "nodes": report.nodes,
            "edges": report.edges,
            "validated_edges": validation.edges,
            "rejected_in_validation": validation.rejected,
            "seconds": {k: round(v, 3) for k, v in times.items()},
            "total_seconds": round(total, 3),
            "target_seconds": 30,
            "peak_rss_mib": round(peak_rss_mib()),
        },
        synthetic_data=True,
    )


if __name__ == "__main__":
    main()
