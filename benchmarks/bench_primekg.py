"""SYNTHETIC full-scale PrimeKG (8.1M rows) to a validated bundle: metakg (polars) vs plain pandas.

Each implementation runs in its own process, started from a small one (``benchmarks.common.run_measured``),
so its wall time and peak memory (max RSS) are its own, whether this run generated the input or found it.
Targets: metakg at least 3x faster and at most half the memory of pandas. The input is SYNTHETIC, made by
metakg.ingest.primekg_synthetic from the published per-type and per-relation counts.

Run: ``make bench`` or ``python -m benchmarks.bench_primekg [--scale 1.0]``.
"""

from __future__ import annotations

import argparse
import resource
import sys

from benchmarks.common import WORK, record, run_measured, settings_and_data
from metakg.ingest.primekg_synthetic import generate

METAKG_CODE = """
import sys, time
from pathlib import Path
from metakg.ingest.primekg import read_primekg
from metakg.schemas.bundle import write_bundle
from metakg.schemas.validation import validate
from metakg.schemas.vocabulary import default_vocabulary
bundle, report = read_primekg(Path(sys.argv[1]))
checked, validation = validate(bundle, default_vocabulary().names, run_gx=False)
write_bundle(Path(sys.argv[2]), checked)
print(f"metakg: {validation.nodes} nodes, {validation.edges} edges, {report.rejected} rejects")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    _settings, data_dir = settings_and_data(" for the PrimeKG count tables")
    folder = WORK / f"primekg_ingest_{args.scale}"  # not bench_primekg_scale's folders
    kg = folder / "synthetic_primekg_kg.csv"
    if not kg.exists():
        print(f"generating a SYNTHETIC PrimeKG-shaped kg.csv at scale {args.scale} ...", flush=True)
        result = generate(folder, data_dir / "primekg", scale=args.scale)
        print(f"  {result.rows:,} rows, {result.nodes:,} nodes -> {kg} ({kg.stat().st_size / 2**20:,.0f} MiB)")
    rows = sum(1 for _ in kg.open("rb")) - 1
    print(f"primekg benchmark: SYNTHETIC kg.csv, {rows:,} rows")
    python = sys.executable
    figures = {}
    for name, command in (
        ("metakg", [python, "-c", METAKG_CODE, str(kg), str(WORK / "bundle_metakg")]),
        ("pandas", [python, "-m", "benchmarks.pandas_primekg", str(kg), str(WORK / "bundle_pandas")]),
    ):
        part = run_measured(command)
        seconds, peak, out = part.seconds, part.peak_mib, part.stdout.strip()
        figures[name] = {"seconds": round(seconds, 1), "peak_rss_mib": round(peak)}
        print(f"  {name:<8} {seconds:8.1f} s   peak {peak:8,.0f} MiB   ({out})", flush=True)
    speedup = figures["pandas"]["seconds"] / figures["metakg"]["seconds"]
    memory = figures["metakg"]["peak_rss_mib"] / figures["pandas"]["peak_rss_mib"]
    print(f"  metakg is {speedup:.1f}x faster (target >= 3x) and uses {memory:.2f} of the memory (target <= 0.5)")
    record(
        f"primekg_ingest_{args.scale}",
        {
            "rows": rows,
            **figures,
            "speedup": round(speedup, 2),
            "memory_ratio": round(memory, 3),
            "targets": {"speedup": 3, "memory_ratio": 0.5},
            "parent_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        },
        synthetic_data=True,
    )


if __name__ == "__main__":
    main()
