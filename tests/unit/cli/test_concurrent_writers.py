"""Two real processes writing the same bundle: one wins, the other fails with a clear message, and the
bundle is never a mix of both or unreadable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl

from metakg.schemas.bundle import read_bundle

METAKG = [sys.executable, "-c", "from metakg.cli.main import main; main()"]


def test_two_ingests_into_one_bundle_never_both_succeed(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("".join(f"head {i}\trelates to\ttail {i % 5000}\n" for i in range(600_000)), encoding="utf-8")
    out = tmp_path / "x"
    for _round in range(3):
        runs = [
            subprocess.Popen(
                [*METAKG, "ingest", "triples", str(big), "-d", name, "-o", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("aaa", "bbb")
        ]
        results = [(run.wait(timeout=300), run.communicate()[1]) for run in runs]
        codes = sorted(code for code, _ in results)
        assert codes != [0, 0], "both writers reported success"
        assert 0 in codes, results  # the other one ran its course
        for code, stderr in results:
            if code != 0:
                assert "another metakg process is writing the bundle" in stderr, stderr
        bundle = read_bundle(out)  # whole, and its hashes match its tables
        datasets = {i.split("/")[0] for i in bundle.nodes["id"].str.strip_prefix("kg:").to_list()}
        assert len(datasets) == 1 and bundle.edges.height == 600_000
        assert bundle.edges["src"].str.starts_with(f"kg:{datasets.pop()}/").all()
        assert bundle.edges.filter(pl.col("count") != 1).height == 0
