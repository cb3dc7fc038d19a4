"""`metakg extract --batch` against the real local model: the stand-in batch server (tools/batch_server.py) runs
every request of a batch through llama-cpp-python serving SmolLM2-135M-Instruct, so a batch run and a direct
run ask the same model the same prompts. The model is weak: these tests compare bundles and accounting, never
the quality of the triples.

The batch run here is small (:data:`UNITS`): what it guards (a batch's replies land on the units that asked, the
collector found again after a kill, a rerun served by the cache) does not depend on the number of units.
``make bench`` runs the same comparison over 200 units (``benchmarks/bench_extract.py``, ``batch_same_triples``)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from metakg.llm import local_server
from metakg.schemas.bundle import read_bundle
from tests.unit.cli.test_cli import run
from tools.batch_server import BatchServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
METAKG = [sys.executable, "-c", "from metakg.cli.main import main; main()"]
UNITS = 4
#: what an extraction edge is, apart from the run that made it
SAME = ["id", "src", "rel", "dst", "display", "count", "record_ids", "model", "prompt_hash", "source", "importer"]


@pytest.fixture
def batch_server(local_llm: local_server.LocalServer) -> Iterator[BatchServer]:
    running = BatchServer(local_llm.base_url).start()
    yield running
    running.stop()


@pytest.fixture
def csqa(data_dir: Path) -> Path:
    return data_dir / "commonsenseqa" / "csqa_dev_official_schema.jsonl"


def _environment(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for key, value in values.items():
        monkeypatch.setenv(key, value)


def _edges(bundle: Path) -> pl.DataFrame:
    return read_bundle(bundle).edges.select(SAME).sort("id")


def test_a_batch_run_gives_the_direct_runs_bundle_survives_a_killed_collector_and_reruns_free(
    local_llm: local_server.LocalServer,
    batch_server: BatchServer,
    csqa: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # untyped lines: what this test guards is the journal and the collector, not the reply's form (the test
    # below sends typed JSON, its schema through each provider's batch format)
    common = {"METAKG_LLM__MODEL": local_llm.model, "METAKG_LLM__MAX_TOKENS": "48", "METAKG_LLM__TIMEOUT_S": "120",
              "METAKG_EXTRACT__STRUCTURED": "false"}  # fmt: skip
    args = ["extract", str(csqa), "-f", "csqa", "--limit", str(UNITS), "--json"]

    _environment(monkeypatch, {**common, "METAKG_LLM__BASE_URL": local_llm.base_url})
    _, estimate = run(*args, "--estimate")  # the endpoint's own tokenizer, before any call
    _, direct = run(*args, "-o", str(tmp_path / "direct"), code=None)
    assert direct["llm_calls"] == UNITS and direct["cache_hits"] == 0 and direct["failed"] == 0
    assert direct["edges"] > 0  # the bundles compared below are not both empty

    batch_env = {
        **common,
        "METAKG_LLM__BASE_URL": batch_server.url,
        "METAKG_LLM__API_KEY": batch_server.api_key,
        "METAKG_BATCH__POLL_S": "0.5",
    }
    # the collector is killed while the batch runs: the batch id is in the journal, nothing is written
    batch_server.faults.hold.clear()
    out = tmp_path / "batch"
    child = subprocess.Popen(
        [*METAKG, *args, "-o", str(out), "--batch", "openai"],
        env={**os.environ, **batch_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not batch_server.created and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # polling
    assert len(batch_server.created) == 1 and child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not out.exists()
    batch_server.faults.hold.set()

    _environment(monkeypatch, batch_env)
    _, batched = run(*args, "-o", str(out), "--batch", "openai", code=None)
    assert len(batch_server.created) == 1  # collected, not submitted again
    assert batched["llm_calls"] == UNITS and batched["cache_hits"] == 0 and batched["failed"] == 0
    assert (batched["triples"], batched["edges"], batched["nodes"]) == (
        direct["triples"],
        direct["edges"],
        direct["nodes"],
    )
    assert _edges(out).equals(_edges(tmp_path / "direct"))  # same triples, same provenance apart from the run
    assert read_bundle(out).rejects.height == read_bundle(tmp_path / "direct").rejects.height
    # the preview counted what the batch then billed
    assert abs(estimate["prompt_tokens"] - batched["prompt_tokens"]) <= 0.05 * batched["prompt_tokens"]

    _, again = run(*args, "-o", str(out), "--batch", "openai", code=None)
    assert again["cache_hits"] == UNITS and again["tokens"] == 0 and len(batch_server.created) == 1


def test_anthropic_and_vllm_batches_give_the_same_bundle(
    local_llm: local_server.LocalServer,
    batch_server: BatchServer,
    csqa: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stand_in = f"{shlex.quote(sys.executable)} -m tools.batch_server run-batch --upstream {local_llm.base_url}"
    _environment(
        monkeypatch,
        {
            "METAKG_LLM__MODEL": local_llm.model,
            "METAKG_LLM__MAX_TOKENS": "48",
            "METAKG_LLM__BASE_URL": local_llm.base_url,
            "METAKG_BATCH__POLL_S": "0.3",
            "METAKG_BATCH__ANTHROPIC_BASE_URL": batch_server.anthropic_url,
            "ANTHROPIC_API_KEY": batch_server.api_key,
            "METAKG_BATCH__VLLM_COMMAND": stand_in,
        },
    )
    args = ["extract", str(csqa), "-f", "csqa", "--limit", str(UNITS), "--json"]
    _, direct_run = run(*args, "-o", str(tmp_path / "direct"), code=None)
    assert direct_run["edges"] > 0

    _, anthropic = run(*args, "-o", str(tmp_path / "anthropic"), "--batch", "anthropic", code=None)
    assert anthropic["llm_calls"] == UNITS and anthropic["cache_hits"] == 0 and anthropic["failed"] == 0
    assert batch_server.created[0].startswith("anthropic:msgbatch_")

    _, pending = run(*args, "-o", str(tmp_path / "vllm"), "--batch", "vllm", code=75)
    assert pending["pending"] is True and pending["run"].startswith(stand_in)
    subprocess.run(pending["run"], shell=True, check=True, cwd=ROOT, capture_output=True)
    _, vllm = run(*args, "-o", str(tmp_path / "vllm"), "--batch", "vllm", code=None)
    assert vllm["llm_calls"] == UNITS and vllm["cache_hits"] == 0 and vllm["failed"] == 0

    direct = _edges(tmp_path / "direct").drop("model")
    assert _edges(tmp_path / "anthropic").drop("model").equals(direct)
    assert _edges(tmp_path / "vllm").drop("model").equals(direct)
    ledger = [json.loads(line) for line in (Path(os.environ["METAKG_PATHS__CACHE_DIR"]) / "llm" / "ledger.jsonl")
              .read_text().splitlines()]  # fmt: skip
    assert sum(e["run_id"] == vllm["run_id"] for e in ledger) == UNITS
