"""The crash harness in full: every command that writes a bundle killed with SIGKILL at 50 random points (half
of them while it builds the new version), then run with the bundle on a tmpfs that fills during the rewrite (no
free space, a third and two thirds of the new version's size). Prints and records how many kills left the old
version, the new one, or an unreadable bundle (the target is 0), and what each full disk left.

    python -m benchmarks.bench_crash [--points 50]

Needs root for the tmpfs (the disk part is skipped otherwise, and says so); the sync case needs Virtuoso and
the Wikidata test data (../shared), the embed case the ONNX model.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import WORK, record  # noqa: E402
from tests import crash_harness as harness  # noqa: E402
from tests.fault_server import FaultServer  # noqa: E402
from tools import sparql_server  # noqa: E402
from tools.wikidata_testdata import write_test_rdf  # noqa: E402

SPEC = "name: q42\nseeds: [Q42]\nproperties: [P69, P19, P31, P106, P800]\nhops: 1\nlanguages: [en]\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=50, help="kill points per command")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    WORK.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="crash-", dir=WORK))
    llm = FaultServer().start()
    llm.reply_for = lambda body: "thing\\relates to\\" + str(len(body["messages"][-1]["content"]))
    cases = [
        harness.ingest_case(200_000),
        harness.primekg_case(200_000),
        harness.merge_case(50_000),
        harness.validate_case(20_000),
        harness.extract_case(40, llm.url),
    ]
    skipped: list[str] = []
    if os.environ.get("METAKG_EMBEDDER__MODEL_DIR"):
        cases.append(harness.embed_case(5_000, {}))
    else:
        skipped.append("embed: no ONNX model (METAKG_EMBEDDER__MODEL_DIR)")
    data = Path(os.environ.get("METAKG_PATHS__DATA_DIR", ROOT.parent / "shared" / "data"))
    server = None
    if (data / "wikidata").is_dir() and shutil.which("virtuoso-t"):
        server = sparql_server.start(work / "virtuoso", data_dirs=(data / "wikidata",))
        for path in write_test_rdf(data / "wikidata", work / "virtuoso", questions=False):
            sparql_server.load(server, path)
        cases.append(harness.sync_case(server.endpoint, SPEC))
    else:
        skipped.append("sync wikidata: no Virtuoso or no Wikidata test data")
    kills: list[dict[str, Any]] = []
    readers: dict[str, Any] = {}
    disks: list[dict[str, Any]] = []
    try:
        print(f"== crash harness: {args.points} SIGKILL points per command", flush=True)
        for case in cases:
            outcome = harness.run_case(case, work / case.name.replace(" ", "_"), args.points, rng)
            kills.append(outcome.as_dict())
            print(f"  {_line(outcome.as_dict())}", flush=True)
        readers = harness.readers_during_rewrites(work / "readers", 30.0, 50_000)
        print(
            f"  readers during rewrites: {readers['reads']} reads while {readers['rewrites']} rewrites ran, "
            f"{readers['failed']} failed",
            flush=True,
        )
        outcome = harness.run_serve_case(work / "serve", args.points, rng, 20_000)
        kills.append(outcome.as_dict())
        print(f"  {_line(outcome.as_dict())}", flush=True)
        why = harness.can_mount_tmpfs(work)
        if why is None:
            print("== full disk: the bundle on a tmpfs holding the old version and part of the new", flush=True)
            for case in cases:
                if case.name == "sync wikidata":
                    continue  # its state file lives outside the bundle's disk; the bundle write is the same code
                for free in (0.0, 0.33, 0.66):
                    folder = work / f"disk-{case.name.replace(' ', '_')}-{free}"
                    found = harness.full_disk(case, folder, free).as_dict()
                    disks.append(found)
                    print(
                        f"  {found['case']:<18} free {free:4.2f}: exit {found['exit_code']}, bundle "
                        f"{found['bundle']}, leftovers {found['leftovers_beside']}; {found['message'][:90]}",
                        flush=True,
                    )
            for free in (0.0, 0.5):
                found = harness.serve_full_disk(work / f"disk-serve-{free}", 20_000, free)
                disks.append(found)
                print(
                    f"  POST /api/triples  free {free:4.2f}: HTTP {found['status']}, bundle {found['bundle']}, "
                    f"new node served {found['new_node_served']}, server up {found['server_up']}",
                    flush=True,
                )
        else:
            skipped.append(f"full disk: {why}")
    finally:
        llm.stop()
        if server is not None:
            sparql_server.stop(server)
        shutil.rmtree(work, ignore_errors=True)
    unreadable = sum(k["unreadable"] for k in kills)
    full = [d for d in disks if d.get("exit_code", d.get("status")) not in (0, 200)]  # the disk filled up
    kept = [d for d in full if d["bundle"] == "old" and not d["leftovers_beside"]]
    roomy = [d for d in disks if d not in full and d["bundle"] == "new"]  # the new version fitted
    print(f"== {sum(k['points'] for k in kills)} kills: {unreadable} unreadable bundles; {len(disks)} runs on a "
          f"small disk: {len(kept)} of the {len(full)} that ran out of space left the old version whole, "
          f"{len(roomy)} had room and wrote the new one", flush=True)  # fmt: skip
    for reason in skipped:
        print(f"  skipped {reason}")
    figures = {"points_per_command": args.points, "kills": kills, "readers": readers, "full_disk": disks}
    path = record("crash", figures | {"skipped": skipped}, synthetic_data=True)
    print(f"recorded {path}")


def _line(found: dict[str, Any]) -> str:
    return (
        f"{found['case']:<18} {found['points']} kills ({found['kills_while_writing']} while writing): "
        f"{found['old']} old, {found['new']} new, {found['unreadable']} unreadable; recovered "
        f"{found['recovered_after']}; run {found['run_s']} s, staged {found['write_s']} s"
    )


if __name__ == "__main__":
    main()
