"""`metakg extract` end to end against a real HTTP server on 127.0.0.1 that injects faults.

The server answers each prompt with one triple naming the question, so every record's fate is visible:
an edge whose record_ids name it, or a reject naming it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
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


def chats(server: FaultServer) -> list[dict[str, object]]:
    """The chat completions the server was asked for (not the token counts of a preview)."""
    return [r for r in server.requests if "messages" in r]


def test_the_budget_stops_the_run_and_a_larger_budget_continues_it(
    server: FaultServer, csqa: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "b"
    args = ["extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "5", "--json"]
    # priced by the prompt, the preview puts the run over the budget: refused before any call
    # issue 56, item 10: a budget for a model without a price cannot be kept: refused, not silently ignored
    _, unpriced = run(*args, "--budget-usd", "0", code=2)
    assert "has no price in llm.prices_per_mtok" in unpriced["error"] and not chats(server) and not out.exists()
    monkeypatch.setenv("METAKG_LLM__PRICES_PER_MTOK", '{"m": [1000000, 0]}')
    _, refused = run(*args, "--budget-usd", "20", code=2)
    assert "nothing was sent" in refused["error"] and "characters / 4" in refused["error"]
    assert not chats(server) and not out.exists()  # (the preview asked the endpoint for token counts only)
    # priced by the reply ($12 a call: 3 completion tokens), which no preview knows: the run stops at the budget
    monkeypatch.setenv("METAKG_LLM__PRICES_PER_MTOK", '{"m": [0, 4000000]}')
    _, first = run(*args, "--budget-usd", "20", code=1)
    assert first["llm_calls"] == 2 and first["skipped_budget"] == 3 and first["cost_usd"] == 24.0
    assert fates(out) == Counter(dict.fromkeys(record_ids(csqa, 5), 1))
    _, second = run(*args, "--budget-usd", "100")
    assert second["cache_hits"] == 2 and second["llm_calls"] == 5 and second["skipped_budget"] == 0
    assert len(chats(server)) == 5


def test_bad_arguments_are_usage_errors(server: FaultServer, csqa: Path, tmp_path: Path) -> None:
    _, out = run("extract", str(csqa), "-f", "nope", "-o", str(tmp_path / "b"), "--json", code=2)
    assert "unknown --format" in out["error"]
    _, out = run("extract", str(tmp_path / "missing.jsonl"), "-f", "csqa", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "does not exist" in out["error"]
    _, out = run("extract", "/dev/null", "-f", "csqa", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "not a regular file" in out["error"]  # once "does not exist" (probe round 4)
    _, out = run("extract", str(tmp_path), "-f", "csqa", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "is a folder: give one file of it" in out["error"]  # issue 56, item 11: once "does not exist"
    _, out = run("extract", str(csqa), "-f", "csqa", "-o", str(tmp_path / "b"), "--concurrency", "0", "--json", code=2)
    assert "--concurrency" in out["error"]
    array = tmp_path / "array.json"
    array.write_text('[{"text": "Aspirin treats headache."}]')
    _, out = run("extract", str(array), "-f", "jsonl", "-o", str(tmp_path / "b"), "--json", code=1)
    assert "is a JSON array" in out["error"] and "jq -c" in out["error"]
    named_lines = tmp_path / "array.jsonl"  # the printed fix must never name the input as its own output
    named_lines.write_text('[{"text": "Aspirin treats headache."}]')
    _, out = run("extract", str(named_lines), "-f", "jsonl", "-o", str(tmp_path / "b"), "--json", code=1)
    command = out["error"].split("`")[1]
    source, target = (part.strip() for part in command.removeprefix("jq -c '.[]' ").split(">"))
    assert source == str(named_lines) and target == str(tmp_path / "array.lines.jsonl")
    # a link to the name the fix would pick, and an unrelated file already there: the fix names a free name
    real = tmp_path / "sub" / "real.lines.jsonl"
    real.parent.mkdir()
    real.write_text('[{"text": "Aspirin treats headache."}]')
    (tmp_path / "sub" / "real.jsonl").symlink_to("real.lines.jsonl")
    (tmp_path / "sub" / "real.lines-2.jsonl").write_text("someone else's file")
    _, out = run("extract", str(real.parent / "real.jsonl"), "-f", "jsonl", "-o", str(tmp_path / "b"), "--json", code=1)
    target = out["error"].split("`")[1].split(">")[1].strip()
    assert target == str(tmp_path / "sub" / "real.lines-3.jsonl") and not Path(target).exists()
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


def _edges(bundle_dir: Path) -> dict[tuple[str, str, str], tuple[int, tuple[str, ...]]]:
    edges = read_bundle(bundle_dir).edges
    return {
        (r["src"], r["rel"], r["dst"]): (r["count"], tuple(sorted(r["record_ids"])))
        for r in edges.iter_rows(named=True)
    }


def test_an_update_asks_only_for_edited_records_and_retracts_what_only_removed_ones_stated(
    server: FaultServer, csqa: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remove 3 and edit 2 of 20 records: exactly 2 LLM calls (with an empty cache), the triples stated only
    by removed or edited records retracted, shared edges kept with lower counts; the same bundle as a fresh
    extraction of the new dataset."""
    # each record states one triple of its own and one shared by the records with the same question length parity
    server.reply_for = lambda body: (
        f"{_question(body)[:40]}\\is asked in\\the quiz\nthe quiz\\covers\\{('even', 'odd')[len(_question(body)) % 2]}"
    )
    lines = csqa.read_text().splitlines()[:20]
    first = tmp_path / "v1.jsonl"
    first.write_text("\n".join(lines) + "\n")
    b1 = tmp_path / "b1"
    _, one = run("extract", str(first), "-f", "csqa", "-d", "quiz", "-o", str(b1), "--json")
    assert one["llm_calls"] == 20 and (b1 / "extraction.parquet").exists()
    before = _edges(b1)

    items = [json.loads(line) for line in lines]
    removed = {items[i]["id"] for i in (2, 7, 11)}
    edited = {items[i]["id"] for i in (4, 15)}
    for item in items:
        if item["id"] in edited:
            item["question"]["stem"] = "Edited: " + item["question"]["stem"]
    second = tmp_path / "v2.jsonl"
    second.write_text("\n".join(json.dumps(i) for i in items if i["id"] not in removed) + "\n")
    monkeypatch.setenv("METAKG_PATHS__CACHE_DIR", str(tmp_path / "empty-cache"))  # the stored replies, not the cache
    asked = len(server.requests)
    b2 = tmp_path / "b2"
    _, update = run("extract", str(second), "-f", "csqa", "--update", str(b1), "-o", str(b2), "--json")
    assert len(server.requests) - asked == 2 and update["llm_calls"] == 2 and update["reused_units"] == 15
    assert update["records_changes"] == {"unchanged": 15, "changed": 2, "added": 0, "removed": 3}
    after = _edges(b2)

    # checked against the first run's provenance: an edge goes when every record stating it is gone or edited
    gone = removed | edited
    retracted = {k for k, (_, ids) in before.items() if set(ids) <= gone}
    assert retracted and {k for k in before if k not in after} == retracted
    for key, (_, ids) in before.items():
        if key in after and key[1] == "covers":  # a shared edge keeps the records that still state it
            assert set(after[key][1]) == (set(ids) - gone) | (set(after[key][1]) & edited)
            assert after[key][0] == len(after[key][1])
    assert update["edges_changes"] == {
        "added": len(set(after) - set(before)),
        "retracted": len(retracted),
        "kept": len(before) - len(retracted),
    }
    assert len(set(after) - set(before)) == 2  # the two edited questions' own triples
    manifest = json.loads((b2 / "manifest.json").read_text())
    assert manifest["diff"]["edges"]["removed"] == len(retracted)

    # the same bundle as a fresh extraction of the new dataset
    run("extract", str(second), "-f", "csqa", "-d", "quiz", "-o", str(tmp_path / "fresh"), "--json")
    assert _edges(tmp_path / "fresh") == after

    # in place, with the dataset name taken from the bundle: nothing to ask
    asked = len(server.requests)
    _, again = run("extract", str(second), "-f", "csqa", "--update", str(b2), "--json")
    assert len(server.requests) == asked and again["reused_units"] == 17
    assert again["records_changes"] == {"unchanged": 17, "changed": 0, "added": 0, "removed": 0}
    assert again["edges_changes"] == {"added": 0, "retracted": 0, "kept": len(after)} and _edges(b2) == after


def test_update_refuses_a_bundle_that_is_not_an_extraction(server: FaultServer, csqa: Path, tmp_path: Path) -> None:
    reference = tmp_path / "ref.tsv"
    reference.write_text("aspirin\ttreats\theadache\n")
    run("ingest", "triples", str(reference), "-d", "ref", "-o", str(tmp_path / "ref"), "--json")
    args = ["extract", str(csqa), "-f", "csqa", "--limit", "2", "--update", str(tmp_path / "ref"), "--json"]
    _, refused = run(*args, code=2)
    assert "not only an extraction" in refused["error"]
    _, missing = run("extract", str(csqa), "-f", "csqa", "--json", code=2)
    assert "--output" in missing["error"]


def test_line_numbered_records_that_move_keep_their_replies(server: FaultServer, tmp_path: Path) -> None:
    """jsonl records without an id field are numbered by line: deleting the first line moves the next record,
    which keeps its reply (matched by content) under its new id."""
    server.reply_for = lambda body: "Paris\\is capital of\\France" if "Paris is" in str(body) else "Rome\\is in\\Italy"
    text = tmp_path / "docs.jsonl"
    text.write_text('{"text": "Paris is the capital of France."}\n{"text": "Rome is in Italy."}\n')
    run("extract", str(text), "-f", "jsonl", "-d", "docs", "-o", str(tmp_path / "b"), "--json")
    assert len(server.requests) == 2
    text.write_text('{"text": "Rome is in Italy."}\n')
    asked = len(server.requests)
    _, update = run("extract", str(text), "-f", "jsonl", "--update", str(tmp_path / "b"), "--json")
    assert len(server.requests) == asked
    assert update["records_changes"] == {"unchanged": 1, "changed": 0, "added": 0, "removed": 1}
    edges = read_bundle(tmp_path / "b").edges
    assert edges["rel"].to_list() == ["is_in"] and edges["record_ids"].to_list() == [["docs.jsonl:1#0"]]


def test_record_times_become_the_valid_from_of_the_edges_they_state(server: FaultServer, tmp_path: Path) -> None:
    """--time-field: an edge's valid_from is the earliest time of the records stating it; a record whose
    time is not a time is rejected with the reason, not lost."""
    server.reply_for = lambda body: "Rome\\is in\\Italy"
    docs = tmp_path / "news.jsonl"
    docs.write_text(
        '{"text": "Rome is in Italy.", "t": "2024-03-01T10:00:00+01:00"}\n'
        '{"text": "Rome, a city in Italy.", "t": 1672531200}\n'
        '{"text": "Italy has Rome.", "t": "last spring"}\n'
        '{"text": "Rome is Italian."}\n'
    )
    out = tmp_path / "b"
    _, summary = run("extract", str(docs), "-f", "jsonl", "--time-field", "t", "-o", str(out), "--json", code=1)
    assert summary["records"] == 3 and summary["input_rejects"] == 1 and summary["ok"] is False  # 1 of 4 lost
    _, tolerated = run(
        "extract", str(docs), "-f", "jsonl", "--time-field", "t", "-o", str(out), "--max-rejects", "25%", "--json"
    )
    assert tolerated["ok"] is True and tolerated["input_rejects"] == 1
    bundle = read_bundle(out)
    [edge] = bundle.edges.iter_rows(named=True)
    assert edge["count"] == 3 and edge["valid_from"] == datetime(2023, 1, 1, tzinfo=UTC)  # 1672531200
    [rejected] = bundle.rejects.filter(pl.col("record") == "news.jsonl:3").iter_rows(named=True)
    assert "not an ISO 8601 time" in rejected["reason"] and "last spring" in rejected["payload"]


def test_records_that_cannot_be_read_fail_the_run_beyond_max_rejects(server: FaultServer, tmp_path: Path) -> None:
    server.reply_for = lambda body: "Rome\\is in\\Italy"
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "Rome is in Italy."}\n{"text": "Rome again."}\n' + '{"body": "no text"}\n' * 5)
    args = ("extract", str(docs), "-f", "jsonl", "-o", str(tmp_path / "b"), "--json")
    _, out = run(*args, code=1)  # 5 of 7 records unreadable: once exit 0
    assert (out["read"], out["records"], out["input_rejects"]) == (7, 2, 5)
    assert read_bundle(tmp_path / "b").rejects.filter(pl.col("stage") == "ingest").height == 5  # kept, with reasons
    assert run(*args, "--max-rejects", "5")[1]["ok"] is True
    assert run(*args, "--max-rejects", "4", code=1)[1]["ok"] is False
    assert "--max-rejects" in run(*args, "--max-rejects", "lots", code=2)[1]["error"]
    _, estimate = run("extract", str(docs), "-f", "jsonl", "--estimate", "--json")  # issue 56, item 10
    assert estimate["input_rejects"] == 5 and estimate["units"] == 2


def test_extract_applies_an_identity_file(server: FaultServer, csqa: Path, tmp_path: Path) -> None:
    run("extract", str(csqa), "-f", "csqa", "-o", str(tmp_path / "plain"), "--limit", "2", "--json")
    nodes = read_bundle(tmp_path / "plain").nodes
    quiz = nodes.filter(pl.col("name") == "quiz")["id"][0]  # the leading article dropped
    asked = sorted(nodes.filter(pl.col("name") != "quiz")["id"].to_list())
    identity = tmp_path / "identity.yaml"
    identity.write_text(f"must_link:\n  - [{asked[0]}, {asked[1]}]\naliases:\n  add: {{{quiz}: [the test]}}\n")
    out = tmp_path / "curated"
    _, summary = run(
        "extract", str(csqa), "-f", "csqa", "-o", str(out), "--limit", "2", "--identity", str(identity), "--json"
    )
    curated = read_bundle(out)
    assert curated.nodes.height == nodes.height - 1  # the two questions are one node
    assert curated.nodes.filter(pl.col("id") == quiz)["aliases"][0].to_list() == ["the test"]
    assert summary["ok"] is True
    bad = tmp_path / "bad.yaml"
    bad.write_text("must_link: [[only-one]]\n")
    result, _ = run("extract", str(csqa), "-f", "csqa", "-o", str(tmp_path / "x"), "--identity", str(bad), code=None)
    assert result.exit_code != 0 and "bad.yaml: must_link entry 1 must be a pair" in result.output
    assert not (tmp_path / "x").exists()


def test_a_binary_or_latin1_file_given_as_text_is_refused_not_sent(server: FaultServer, tmp_path: Path) -> None:
    """An ELF binary and Latin-1 text went to the model as documents, é as U+FFFD (probe round 4)."""
    elf = tmp_path / "tool.txt"
    elf.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait, crème brûlée\n".encode("latin-1"))
    for path, says in ((elf, "binary data, not text"), (latin, "not UTF-8 text (byte 0xe9")):
        _, out = run("extract", str(path), "-f", "text", "-o", str(tmp_path / "b"), "--json", code=1)
        assert says in out["error"]
        _, auto = run("extract", str(path), "--estimate", "--json", code=None)
        assert auto["ok"] is False or says.split(" (")[0].lower() in str(auto).lower()
    assert not [r for r in server.requests if "messages" in r]


def test_a_cache_that_cannot_be_written_leaves_the_run_uncached_not_failed(
    server: FaultServer, csqa: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only or full cache folder gave a sqlite3 traceback (probe round 4): the run now goes on, warns
    once, and its replies are not cached."""
    cache = tmp_path / "cache"
    (cache / "llm" / "responses.sqlite").mkdir(parents=True)  # no database can be opened there
    (cache / "llm" / "ledger.jsonl").mkdir()  # nor the ledger appended to
    monkeypatch.setenv("METAKG_PATHS__CACHE_DIR", str(cache))
    result, out = run("extract", str(csqa), "-f", "csqa", "--limit", "2", "-o", str(tmp_path / "b"), "--json")
    assert out["llm_calls"] == 2 and out["failed"] == 0 and out["validation_ok"]
    assert "cannot be read" in result.stderr or "cannot be written" in result.stderr
    _, again = run("extract", str(csqa), "-f", "csqa", "--limit", "2", "-o", str(tmp_path / "b"), "--json")
    assert again["cache_hits"] == 0  # nothing was cached, and nothing failed
