"""`metakg extract` end to end against a real HTTP server on 127.0.0.1 that injects faults.

The server answers each prompt with one triple naming the question, so every record's fate is visible:
an edge whose record_ids name it, or a reject naming it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg.schemas.bundle import read_bundle
from tests.fault_server import FaultServer
from tests.unit.cli.test_cli import run


def _question(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    return str(user.split("Question: ", 1)[1].split("\n", 1)[0])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    running = FaultServer().start()
    running.reply_for = lambda body: f"Here are the triples:\n{_question(body)[:40]}\\is asked in\\the quiz"
    monkeypatch.setenv("METAKG_LLM__BASE_URL", running.url)
    monkeypatch.setenv("METAKG_LLM__MODEL", "m")
    monkeypatch.setenv("METAKG_LLM__TIMEOUT_S", "1")
    monkeypatch.setenv("METAKG_LLM__BACKOFF_S", "0.01")
    monkeypatch.setenv("METAKG_LLM__CONCURRENCY", "1")
    yield running
    running.stop()


@pytest.fixture
def csqa(data_dir: Path) -> Path:
    return data_dir / "commonsenseqa" / "csqa_dev_official_schema.jsonl"


def record_ids(csqa: Path, n: int) -> list[str]:
    return [json.loads(line)["id"] for line in csqa.read_text().splitlines()[:n]]


def fates(bundle_dir: Path) -> Counter[str]:
    """How many times each record appears across edges and unit-level rejects (must be exactly once)."""
    bundle = read_bundle(bundle_dir)
    seen: Counter[str] = Counter(bundle.edges["record_ids"].explode().to_list())
    unit_level = bundle.rejects.filter(pl.col("check").is_in(["llm_failed", "budget_exhausted", "no_triples"]))
    seen.update(unit_level["record"].to_list())
    return seen


def test_every_fault_is_survived_and_no_record_is_lost_or_doubled(
    server: FaultServer, csqa: Path, tmp_path: Path
) -> None:
    server.script("429:1", "500", "slow:2.5", "drop", "truncated")
    out = tmp_path / "b"
    _, summary = run("extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "6", "--json")
    assert summary["ok"] is True and summary["failed"] == 0
    assert summary["records"] == summary["units"] == 6 and summary["llm_calls"] == 6
    assert summary["retries"] == 5 and summary["triples"] == 6 and summary["rejected_lines"] == 6
    assert fates(out) == Counter(dict.fromkeys(record_ids(csqa, 6), 1))
    edges = read_bundle(out).edges
    assert edges["count"].to_list() == [1] * 6  # no reply was counted twice
    assert summary["validation_ok"] is True


def test_a_unit_that_keeps_failing_is_reported_and_a_rerun_asks_only_it(
    server: FaultServer, csqa: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_LLM__MAX_RETRIES", "1")
    server.script("ok", "500", "500")  # the second prompt fails both attempts
    out = tmp_path / "b"
    result, summary = run("extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "4", "--json", code=1)
    assert summary["ok"] is False and summary["failed"] == 1 and summary["llm_calls"] == 3
    assert len(summary["errors"]) == 1 and "after 2 attempts" in summary["errors"][0]
    assert "500" in summary["errors"][0] or "InternalServerError" in summary["errors"][0]
    ids = record_ids(csqa, 4)
    assert fates(out) == Counter(dict.fromkeys(ids, 1))
    failed = read_bundle(out).rejects.filter(pl.col("check") == "llm_failed")
    assert failed["record"].to_list() == [ids[1]] and "run again" in failed["reason"][0]
    assert "run the same command again" in result.stderr

    asked_before = len(server.requests)
    _, again = run("extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "4", "--json")
    assert again["ok"] is True and again["llm_calls"] == 4 and again["cache_hits"] == 3  # one fresh call
    assert len(server.requests) == asked_before + 1
    assert _question(server.requests[-1]) == _question(server.requests[1])
    assert fates(out) == Counter(dict.fromkeys(ids, 1))


def test_the_budget_stops_the_run_and_a_larger_budget_continues_it(
    server: FaultServer, csqa: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_LLM__PRICES_PER_MTOK", '{"m": [1000000, 0]}')  # $11 per call (11 prompt tokens)
    out = tmp_path / "b"
    args = ["extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "5", "--json"]
    _, first = run(*args, "--budget-usd", "20", code=1)
    assert first["llm_calls"] == 2 and first["skipped_budget"] == 3 and first["cost_usd"] == 22.0
    assert fates(out) == Counter(dict.fromkeys(record_ids(csqa, 5), 1))
    _, second = run(*args, "--budget-usd", "100")
    assert second["cache_hits"] == 2 and second["llm_calls"] == 5 and second["skipped_budget"] == 0
    assert len(server.requests) == 5


def test_bad_arguments_are_usage_errors(server: FaultServer, csqa: Path, tmp_path: Path) -> None:
    _, out = run("extract", str(csqa), "-f", "nope", "-o", str(tmp_path / "b"), "--json", code=2)
    assert "unknown --format" in out["error"]
    _, out = run("extract", str(tmp_path / "missing.jsonl"), "-f", "csqa", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "does not exist" in out["error"]
    _, out = run("extract", str(csqa), "-f", "csqa", "-o", str(tmp_path / "b"), "--concurrency", "0", "--json", code=2)
    assert "--concurrency" in out["error"]
    array = tmp_path / "array.json"
    array.write_text('[{"text": "Aspirin treats headache."}]')
    _, out = run("extract", str(array), "-f", "jsonl", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "is a JSON array" in out["error"] and "jq -c" in out["error"]
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not json\n{}\n")
    _, out = run("extract", str(garbage), "-f", "jsonl", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "no record of" in out["error"] and "garbage.jsonl:1: invalid JSON" in out["error"]
    assert "garbage.jsonl:2: text is missing or empty" in out["error"]
    assert server.requests == []


def test_a_killed_run_resumes_without_asking_any_answered_prompt_again(
    server: FaultServer, csqa: Path, tmp_path: Path
) -> None:
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    server.script(*["slow:0.4"] * 10)
    out = tmp_path / "b"
    args = ["extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "10"]
    child = subprocess.Popen(
        [sys.executable, "-c", "from metakg.cli.main import main; main()", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while len(server.requests) < 4 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert not (out / "manifest.json").exists()  # nothing half-written
    cache = Path(os.environ["METAKG_PATHS__CACHE_DIR"]) / "llm" / "responses.sqlite"
    with sqlite3.connect(cache) as db:
        answered = int(db.execute("SELECT count(*) FROM responses").fetchone()[0])
    assert 3 <= answered < 10
    asked_before = [_question(b) for b in server.requests]

    _, summary = run(*args, "--json")
    assert summary["ok"] is True and summary["cache_hits"] == answered
    assert summary["llm_calls"] == 10  # every prompt answered, the first ones from the cache
    asked_again = Counter(_question(b) for b in server.requests[len(asked_before) :])
    # only the prompt in flight at the kill (concurrency 1) may be asked twice, never an answered one
    assert sum(1 for q in asked_again if q in asked_before) <= 1
    assert fates(out) == Counter(dict.fromkeys(record_ids(csqa, 10), 1))


def test_link_to_gives_mentions_the_ids_of_an_existing_bundle(server: FaultServer, csqa: Path, tmp_path: Path) -> None:
    reference = tmp_path / "ref.tsv"
    reference.write_text("aspirin\ttreats\theadache\nheadache\tsymptom of\tmigraine\n")
    run("ingest", "triples", str(reference), "-d", "ref", "-o", str(tmp_path / "ref"), "--json")
    server.reply_for = lambda body: "Aspirin\\relieves\\headaches\nAspirin\\is sold in\\pharmacies"
    out = tmp_path / "b"
    args = ["extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "2", "--json"]
    _, summary = run(*args, "--link-to", str(tmp_path / "ref"))
    assert summary["resolution"]["linked"] == {"exact": 1, "lemma": 1}
    edges = read_bundle(out).edges
    relieves = edges.filter(pl.col("rel") == "relieves").row(0, named=True)
    assert (relieves["src"], relieves["dst"]) == ("kg:ref/aspirin", "kg:ref/headache")
    assert relieves["count"] == 2 and len(relieves["record_ids"]) == 2
    nodes = {r["id"]: r for r in read_bundle(out).nodes.iter_rows(named=True)}
    assert "headaches" in nodes["kg:ref/headache"]["aliases"] and "kg:b/pharmacies" not in nodes
    assert any(i.endswith("/pharmacies") and i.startswith("kg:csqa_dev_official_schema/") for i in nodes)
    # the extraction merges cleanly into the reference: linked nodes are the same nodes
    run("merge", str(tmp_path / "ref"), str(out), "-o", str(tmp_path / "m"), "--json")
    _, checked = run("validate", str(tmp_path / "m"), "--json")
    assert checked["ok"] is True and checked["nodes"] == 4  # aspirin, headache, migraine, pharmacies
    _, self_link = run(*args, "--link-to", str(out), code=2)
    assert "also the output" in self_link["error"]
