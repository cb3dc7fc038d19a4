"""One machine's ceiling: the bundle stages on SYNTHETIC PrimeKG-shaped graphs of growing size.

For each size (about 4M, 16M and 32M edges: ``metakg synthetic primekg`` at 1, 4 and 8 times PrimeKG's
published counts), every stage runs as the CLI command a user runs, each in its own process, timed, its peak
resident memory read by the kernel (``benchmarks.common.run_measured``):

generate (``synthetic primekg``), ingest (``ingest primekg``), validate, resolve (``resolve``, one bundle:
identity by ids), diff (the bundle against itself: every row matched and compared), embed (the node names, with
the ONNX MiniLM model; ``--embed-up-to`` edges, since it grows with the names alone), export (``export
neo4j-admin``), load (``neo4j-admin database import`` of those files into an empty database), ask (the embedded
store: read the bundle and list a node's neighbours, ``query neighbours``).

Recorded per size and stage: seconds and peak MiB, or the error that stopped it (a stage that runs out of
memory is the ceiling); then each stage's growth exponent, the slope of log(seconds) and of log(peak MiB)
against log(edges) between the smallest and the largest size it finished (1: linear), and the largest size at
which every stage finished. Later sizes skip a stage that failed at a smaller one.

Run: ``make bench-ceiling`` or ``python -m benchmarks.bench_ceiling [--scales 1,4,8]`` (an hour or more on two
cores; the work folder needs about 5 GB of disk per 4M edges); ``--add`` keeps the sizes recorded before, so
the sizes can be run one at a time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import PEAK_OF, RESULTS, WORK, record, run_measured, settings_and_data

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
METAKG = str(Path(sys.executable).with_name("metakg"))
STAGES = ("generate", "ingest", "validate", "resolve", "diff", "embed", "export", "load", "ask")
#: the stages whose output the later ones read: generate (the file), ingest (the bundle), export (the import files)
NEEDED = ("generate", "ingest", "export")


def _commands(scale: float, home: Path) -> dict[str, list[str]]:
    csv = home / "csv"
    bundle = home / "bundle"
    return {
        "generate": [METAKG, "synthetic", "primekg", "--scale", str(scale), "-o", str(csv), "--json"],
        "ingest": [METAKG, "ingest", "primekg", str(csv / "synthetic_primekg_kg.csv"), "-o", str(bundle), "--json"],
        "validate": [METAKG, "validate", str(bundle), "--json"],
        "resolve": [METAKG, "resolve", str(bundle), "-o", str(home / "resolved"), "--json"],
        "diff": [METAKG, "diff", str(bundle), str(bundle), "--json"],
        "embed": [METAKG, "embed", str(bundle), "--json"],
        "export": [METAKG, "export", "neo4j-admin", str(bundle), str(home / "admin"), "--json"],
    }


def _ask(home: Path) -> list[str]:
    """``query neighbours`` of the bundle's first node (read here: the ids are the generator's)."""
    import polars as pl

    bundle = home / "bundle"
    first = pl.scan_parquet(bundle / "nodes.parquet").select("id").head(1).collect()["id"][0]
    return [METAKG, "query", "neighbours", str(bundle), first, "--json"]


def _load(home: Path, command: str) -> dict[str, Any]:
    """``neo4j-admin database import full`` (the command the export printed) into an empty database, measured
    from a small process."""
    import time

    from tools import neo4j_server

    target = home / "neo4j"
    shutil.rmtree(target, ignore_errors=True)
    start = time.perf_counter()
    done = neo4j_server.admin_import(target, shlex.split(command)[4:], prefix=[sys.executable, "-c", PEAK_OF])
    seconds = time.perf_counter() - start
    shutil.rmtree(target, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-1500:] + done.stderr[-1500:])
    peak = int(done.stderr.rstrip().splitlines()[-1].removeprefix("peak_kib ")) / 1024
    return {"seconds": round(seconds, 1), "peak_mib": round(peak)}


def one_size(scale: float, skip: set[str], embed_up_to: int) -> dict[str, Any]:
    home = WORK / "ceiling" / f"scale_{scale:g}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    figures: dict[str, Any] = {"scale": scale}
    commands = _commands(scale, home)
    said: dict[str, Any] = {}
    failed: str | None = None
    for stage in STAGES:
        if failed is not None and (failed != "export" or stage == "load"):
            figures[stage] = {"skipped": f"{failed} failed"}
            continue
        if stage in skip:
            figures[stage] = {"skipped": "failed at a smaller size"}
            continue
        if stage == "embed" and figures.get("edges", 0) > embed_up_to:
            figures[stage] = {"skipped": f"above --embed-up-to {embed_up_to:,} edges"}
            continue
        try:
            if stage == "load":
                figures[stage] = _load(home, said["import_command"])
            else:
                measured = run_measured(_ask(home) if stage == "ask" else commands[stage], cwd=ROOT)
                figures[stage] = {"seconds": round(measured.seconds, 1), "peak_mib": round(measured.peak_mib)}
                said = json.loads(measured.stdout.strip().splitlines()[-1])
                if stage == "ingest":
                    figures["edges"], figures["nodes"] = said.get("edges"), said.get("nodes")
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            figures[stage] = {"error": str(e)[-600:]}
            skip.add(stage)
            if stage in NEEDED:  # the stages after it need what it makes (the others read the bundle alone)
                failed = stage
        print(f"  scale {scale:g} {stage}: {figures[stage]}", flush=True)
        if stage == "export":
            shutil.rmtree(home / "csv", ignore_errors=True)  # room on the disk for the import
    shutil.rmtree(home, ignore_errors=True)
    return figures


def exponents(sizes: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per stage, the slope of log(seconds) and log(peak MiB) against log(edges), smallest to largest size done."""
    found: dict[str, dict[str, float]] = {}
    for stage in STAGES:
        done = [(s["edges"], s[stage]) for s in sizes if s.get("edges") and "seconds" in s.get(stage, {})]
        if len(done) < 2:
            continue
        (e0, a), (e1, b) = done[0], done[-1]
        span = math.log(e1 / e0)
        found[stage] = {
            "time": round(math.log(max(b["seconds"], 0.1) / max(a["seconds"], 0.1)) / span, 2),
            "memory": round(math.log(b["peak_mib"] / a["peak_mib"]) / span, 2),
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="1,4,8", help="sizes in PrimeKG's (about 4M edges each)")
    parser.add_argument("--embed-up-to", type=int, default=5_000_000, help="embed the names up to this many edges")
    parser.add_argument("--add", action="store_true", help="keep the sizes recorded before (other scales)")
    args = parser.parse_args()
    settings_and_data(" for PrimeKG's published count tables")
    earlier = RESULTS / "ceiling.json"
    kept = json.loads(earlier.read_text(encoding="utf-8"))["sizes"] if args.add and earlier.is_file() else []
    wanted = [float(s) for s in args.scales.split(",")]
    skip = {stage for s in kept for stage in STAGES if "error" in s.get(stage, {})}
    sizes = [s for s in kept if s["scale"] not in wanted] + [one_size(x, skip, args.embed_up_to) for x in wanted]
    sizes.sort(key=lambda s: s["scale"])
    complete = [s for s in sizes if all("seconds" in s.get(stage, {}) for stage in STAGES if stage != "embed")]
    figures = {
        "sizes": sizes,
        "exponents": exponents(sizes),
        "largest_complete_edges": max((s["edges"] for s in complete), default=None),
        "machine_memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }
    for key, value in figures.items():
        if key != "sizes":
            print(f"  {key:<24} {value}")
    record("ceiling", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
