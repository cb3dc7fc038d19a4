"""`metakg extract` against the real local model (llama-cpp-python serving SmolLM2-135M-Instruct).

The model is tiny: these tests check that the run finishes, every record is accounted for, the bundle
validates, usage is logged and a repeated run is free, never the quality of the triples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metakg.llm import local_server
from metakg.schemas.bundle import read_bundle
from tests.unit.cli.test_cli import run

pytestmark = pytest.mark.integration


def _ledger(cache_dir: Path) -> list[dict[str, object]]:
    path = cache_dir / "llm" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _accounted(bundle_dir: Path, units: int) -> None:
    bundle = read_bundle(bundle_dir)
    in_edges = set(bundle.edges["record_ids"].explode().drop_nulls().to_list())
    # a unit with no triple is in the rejects: its reply lines with their reasons, or "no_triples"
    rejected = set(bundle.rejects.filter(bundle.rejects["stage"] == "extract")["record"].to_list())
    assert len(in_edges | rejected) == units


@pytest.mark.parametrize(
    ("fmt", "path", "limit"),
    [
        ("csqa", "commonsenseqa/csqa_dev_official_schema.jsonl", 20),
        ("medagents", "medagentsbench/medqa_test_hard.jsonl", 10),
    ],
)
def test_extraction_with_the_local_model_validates_and_a_rerun_is_free(
    local_llm: local_server.LocalServer,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
    path: str,
    limit: int,
) -> None:
    monkeypatch.setenv("METAKG_LLM__BASE_URL", local_llm.base_url)
    monkeypatch.setenv("METAKG_LLM__MODEL", local_llm.model)
    monkeypatch.setenv("METAKG_LLM__MAX_TOKENS", "128")
    monkeypatch.setenv("METAKG_LLM__TIMEOUT_S", "120")
    cache_dir = Path(os.environ["METAKG_PATHS__CACHE_DIR"])
    out = tmp_path / "b"
    args = ["extract", str(data_dir / path), "-f", fmt, "-o", str(out), "--limit", str(limit), "--json"]
    _, first = run(*args)
    assert first["ok"] is True and first["records"] == first["units"] == limit
    assert first["llm_calls"] == limit and first["failed"] == 0 and first["tokens"] > 0
    assert first["validation_ok"] is True and first["edges"] > 0  # the one-shot prompt gets some triples out
    _accounted(out, limit)
    ledger = [e for e in _ledger(cache_dir) if e["run_id"] == first["run_id"]]
    assert len(ledger) == limit and all(e["prompt_tokens"] > 0 and e["latency_s"] > 0 for e in ledger)

    _, second = run(*args)
    assert second["llm_calls"] == second["cache_hits"] == limit and second["tokens"] == second["cost_usd"] == 0
    assert (second["triples"], second["edges"]) == (first["triples"], first["edges"])


def test_extract_starts_and_stops_the_local_model_when_no_endpoint_is_set(
    local_llm: local_server.LocalServer, tmp_path: Path, data_dir: Path
) -> None:
    # local_llm is only requested so that a missing install fails (in CI) before this test runs
    out = tmp_path / "b"
    text = tmp_path / "doc.txt"
    text.write_text("Aspirin reduces fever. Aspirin is sold without a prescription. " * 3)
    _, summary = run("extract", str(text), "-f", "text", "-o", str(out), "--json", code=None)
    assert summary["units"] == 1 and summary["llm_calls"] == 1 and summary["model"] == local_llm.model
    assert summary["failed"] == 0
