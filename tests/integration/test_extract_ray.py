"""`metakg extract --engine ray` on a real Ray cluster: two nodes on 127.0.0.1 started with `ray start`.

Against the real local model (SmolLM2 under llama-cpp-python): the prompts sent from the cluster's workers give
the bundle a direct run gives, a second run asks nothing, and a worker node killed mid-run, then the driver killed,
lose no prompt. Against a scripted endpoint: prompts the endpoint refuses are failed prompts with their reasons,
the others are answered.

The unit count of the real-model runs is ``METAKG_RAY_TEST_UNITS`` (200 by default; ``make test`` runs 60 to keep
CI within its time, ``make test-ray`` runs 200: docs/testing.md).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg.llm import local_server
from metakg.schemas.bundle import read_bundle
from tests.fault_server import FaultServer
from tools import ray_cluster as rc

pytestmark = pytest.mark.integration

UNITS = int(os.environ.get("METAKG_RAY_TEST_UNITS", "200"))
SENTENCES = "text2kgbench/wikidata_tekgen/test/ont_1_movie_test.jsonl"


@pytest.fixture(scope="module")
def model() -> Iterator[local_server.LocalServer]:
    """The local model on one thread, for this module alone (its tests run beside the other model tests)."""
    running = local_server.start(threads=1)
    yield running
    local_server.stop(running)


def _env(cache: Path, base_url: str, model: str, **extra: str) -> dict[str, str]:
    """The CLI's environment: the endpoint, a cache of the run's own, untyped lines (short prompts) and short
    replies, and request workers that take half a CPU (two on each one-CPU node)."""
    return {
        **os.environ,
        "METAKG_LLM__BASE_URL": base_url,
        "METAKG_LLM__MODEL": model,
        "METAKG_LLM__MAX_TOKENS": "24",
        "METAKG_LLM__TIMEOUT_S": "120",
        "METAKG_PATHS__CACHE_DIR": str(cache),
        "METAKG_EXTRACT__STRUCTURED": "false",
        "METAKG_RAY__WORKER_CPUS": "0.5",
        "METAKG_RAY__BATCH_SIZE": "4",
        "RAY_ADDRESS": "",
        **extra,
    }


def _extract(data: Path, out: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    command = [str(Path(sys.executable).with_name("metakg")), "extract", str(data), "-f", "jsonl", "--text-field",
               "sent", "--id-field", "id", "--limit", str(UNITS), "-o", str(out), "--json", *args]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(process: subprocess.Popen[str], code: int | None = 0) -> dict[str, Any]:
    out, err = process.communicate(timeout=900)
    assert "Traceback" not in err, err[-3000:]
    assert code is None or process.returncode == code, err[-3000:]
    lines = out.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def _cached(cache: Path) -> int:
    """Replies in the run's response cache so far."""
    path = cache / "llm" / "responses.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM responses").fetchone()[0])
    except sqlite3.OperationalError:  # created but not yet holding the table
        return 0


def _when(condition: Callable[[], bool], process: subprocess.Popen[str], timeout: float = 600) -> bool:
    """Wait until ``condition`` holds (True) or the run ended first (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.2)
    raise AssertionError("the run neither reached the point nor ended")


def _graph(bundle_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The bundle's edges and nodes without what names the run (run id, times)."""
    bundle = read_bundle(bundle_dir)
    edges = bundle.edges.select("id", "src", "rel", "dst", "count", "record_ids", "model", "prompt_hash").sort("id")
    nodes = bundle.nodes.select("id", "name", "type").sort("id")
    return edges, nodes


@pytest.fixture(scope="module")
def direct(model: local_server.LocalServer, data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle of a direct run (the local engine) over the same units, with a cache of its own."""
    home = tmp_path_factory.mktemp("direct")
    summary = _finish(_extract(data_dir / SENTENCES, home / "kg", _env(home / "cache", model.base_url, model.model)))
    assert summary["units"] == UNITS and summary["llm_calls"] == UNITS and summary["failed"] == 0
    return home / "kg"


def test_a_ray_run_gives_the_direct_runs_bundle_and_a_second_run_asks_nothing(
    ray_cluster: rc.Cluster, model: local_server.LocalServer, direct: Path, data_dir: Path, tmp_path: Path
) -> None:
    env = _env(tmp_path / "cache", model.base_url, model.model)
    ray = ("--engine", "ray", "--ray-address", ray_cluster.address)
    first = _finish(_extract(data_dir / SENTENCES, tmp_path / "kg", env, *ray))
    assert (first["units"], first["llm_calls"], first["cache_hits"], first["failed"]) == (UNITS, UNITS, 0, 0)
    # the first prompt goes straight to the endpoint (it learns the reply format), the others from the workers
    assert first["ray"]["units_on_workers"] == UNITS - 1 and first["ray"]["nodes"] == 2
    assert first["ray"]["address"] == ray_cluster.address
    ray_edges, ray_nodes = _graph(tmp_path / "kg")
    direct_edges, direct_nodes = _graph(direct)
    assert ray_edges.height > 0
    assert ray_edges.equals(direct_edges) and ray_nodes.equals(direct_nodes)
    ledger = [json.loads(line) for line in (tmp_path / "cache" / "llm" / "ledger.jsonl").read_text().splitlines()]
    assert sum(not r["cached"] and r["error"] is None for r in ledger) == UNITS  # every call in the usage ledger

    again = _finish(_extract(data_dir / SENTENCES, tmp_path / "kg2", env, *ray))
    # a cache hit counts as a call that cost nothing: no token was billed, and nothing went to the workers
    assert (again["cache_hits"], again["tokens"], again["ray"]["units_on_workers"]) == (UNITS, 0, 0)
    assert _graph(tmp_path / "kg2")[0].equals(direct_edges)


def test_a_worker_node_killed_then_the_driver_killed_lose_no_prompt(
    ray_cluster: rc.Cluster, model: local_server.LocalServer, direct: Path, data_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    env = _env(cache, model.base_url, model.model)
    ray = ("--engine", "ray", "--ray-address", ray_cluster.address)
    run = _extract(data_dir / SENTENCES, tmp_path / "kg", env, *ray)
    worker = ray_cluster.workers[-1]
    try:
        reached = _when(lambda: _cached(cache) >= UNITS // 6, run)
        assert reached, "the run ended before a sixth of its prompts were answered"
        worker.kill()  # the node dies whole: its raylet and the request workers on it
        at_kill = _cached(cache)
        driver_killed = _when(lambda: _cached(cache) >= at_kill + UNITS // 6, run)
        if driver_killed:
            run.send_signal(signal.SIGKILL)
        run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    answered = _cached(cache)
    assert answered >= at_kill
    if not driver_killed:  # the run finished after the node died, before the driver could be killed
        assert answered == UNITS
    resumed = _finish(_extract(data_dir / SENTENCES, tmp_path / "kg", env, *ray))
    assert resumed["failed"] == 0 and resumed["cache_hits"] == answered
    assert resumed["llm_calls"] - resumed["cache_hits"] == UNITS - answered  # only what the cache lacked
    assert _graph(tmp_path / "kg")[0].equals(_graph(direct)[0])


def test_prompts_the_endpoint_refuses_are_failed_prompts_with_reasons(ray_cluster: rc.Cluster, tmp_path: Path) -> None:
    server = FaultServer().start()
    try:
        # refuses any structured-output form with a 500, as llama-cpp-python's server does for the first form it
        # lacks: the first prompt, sent directly, learns to ask in plain text, and the workers then do too
        def action(body: dict[str, Any]) -> str | None:
            text = body["messages"][-1]["content"]
            if "response_format" in body:
                return "refuse_json_500"
            return "500" if "Refused" in text else "status:503" if "Overloaded" in text else None

        server.action_for = action
        server.reply_for = lambda body: '{"triples": [{"subject": "Ada", "relation": "wrote", "object": "Notes", ' \
            '"subject_type": "person", "object_type": "document"}]}'  # fmt: skip
        words = ["Fine", "Refused", "Fine", "Overloaded", "Fine", "Fine", "Refused", "Fine", "Fine"]
        rows = [{"id": f"r{i}", "sent": f"Sentence {i}: {word}."} for i, word in enumerate(words)]
        data = tmp_path / "rows.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        env = _env(tmp_path / "cache", server.url, "scripted", METAKG_EXTRACT__STRUCTURED="true",
                   METAKG_LLM__MAX_RETRIES="1", METAKG_LLM__BACKOFF_S="0.05", METAKG_RAY__BATCH_SIZE="1")  # fmt: skip
        summary = _finish(_extract(data, tmp_path / "kg", env, "--engine", "ray", "--ray-address", ray_cluster.address),
                          code=1)  # fmt: skip
    finally:
        server.stop()
    assert (summary["units"], summary["failed"], summary["llm_calls"]) == (9, 3, 6)
    assert any("HTTP 500: boom" in e for e in summary["errors"])
    # the 503, past the retries: its batch failed on the cluster, with the reason
    assert any("no reply came back from the Ray cluster" in e and "Service Unavailable" in e for e in summary["errors"])
    rejects = read_bundle(tmp_path / "kg").rejects
    failed = set(rejects.filter(pl.col("check") == "llm_failed")["record"].to_list())
    assert failed == {"r1#0", "r3#0", "r6#0"}  # each record's one chunk
    assert sum("response_format" in r for r in server.requests) == 3  # the first prompt's three forms, refused
