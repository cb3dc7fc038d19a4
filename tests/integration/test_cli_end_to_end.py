"""The real `metakg` executable, run as a user runs it: the demo, and a whole pipeline on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

METAKG = Path(sys.executable).parent / "metakg"
pytestmark = pytest.mark.integration


def metakg(*args: str, code: int = 0, cwd: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [str(METAKG), *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == code, result.stdout + result.stderr
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_demo_runs_on_the_real_commonsenseqa_kg(tmp_path: Path, data_dir: Path) -> None:
    out = metakg("demo", "-o", str(tmp_path / "csqa"), env={"METAKG_LLM__LOCAL_THREADS": "1"})  # beside other workers
    source = data_dir / "metakgrag_pilot" / "commonsenseqa__knowledge_graph.txt"
    lines = sum(1 for line in source.read_text(encoding="utf-8").splitlines() if line.strip())
    assert out["ok"] is True and out["read"] == lines == 5779
    assert out["accepted"] == lines
    assert out["neighbours"] > 0 and out["paths"] > 0
    # three CommonsenseQA questions answered by metakgrag with the local model (started by the demo)
    assert len(out["answers"]) == 3
    for answer in out["answers"]:
        assert answer["strategy"] == "metakgrag" and answer["usage"]["llm_calls"] == 2
        assert answer["evidence"] and answer["trace"]["paths"]
        assert answer["status"] == "ok" or "choice letter" in answer["reason"]
    assert (tmp_path / "csqa" / "validation.html").is_file()
    info = metakg("info", str(tmp_path / "csqa"))
    assert info["nodes"] == out["nodes"] and info["edges"] == out["edges"]
    assert info["rejected"] == out["rejected"]  # the rejects table holds both stages' rejects
    validation_rejects = out["rejected"] - (out["read"] - out["accepted"])
    assert out["edges"] + validation_rejects == out["ingest_edges"]  # validation only removed edges here


def test_pipeline_on_bad_input_accounts_for_every_line(tmp_path: Path) -> None:
    source = tmp_path / "bad.tsv"
    source.write_bytes(
        b"aspirin\ttreats\theadache\n"
        b"headache\tis symptom of\tmigraine\n"
        b"migraine\tis symptom of\theadache\n"  # the line above the other way: a directed relation, kept
        b"two\tcolumns\n"
        b"four\tcolumns\there\tx\n"
        b"\xff\xfe\tr\tx\n"
        b"\tr\tempty head\n" + b"x" * 1_000_000 + b"\tr\ty\n" + b"aspirin\ttreats\theadache\n"
    )
    bundle = tmp_path / "b"
    ingest = metakg("ingest", "triples", str(source), "-d", "demo", "-o", str(bundle), code=1)
    assert (ingest["read"], ingest["accepted"], ingest["rejected"]) == (9, 4, 5)
    assert ingest["edges"] == 3
    validation = metakg("validate", str(bundle))
    assert validation["failures"] == [] and validation["warnings"] == ["edges.mutual_directed"]
    assert validation["warned"] == 2 and validation["edges_in"] == validation["edges"] == 3
    info = metakg("info", str(bundle))
    assert info["rejected"] == ingest["rejected"] + validation["rejected"]
    rdf = metakg("export", "rdf", str(bundle), "-o", str(tmp_path / "kg.nq"), "--format", "nq")
    assert rdf["statements_written"] == rdf["statements_expected"]
    path = metakg("query", "path", str(bundle), "aspirin", "migraine")
    assert path["count"] == 1 and path["paths"][0]["nodes"][-1] == "kg:demo/migraine"
