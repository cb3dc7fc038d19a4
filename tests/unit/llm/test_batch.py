"""Provider batches (metakg.llm.batch) through real HTTP: the local stand-in batch server (tools/batch_server.py,
OpenAI Files/Batches and Anthropic Message Batches routes, spoken to through the providers' own SDKs) in front of
a scripted chat endpoint, so every reply is known. The same flows against the real local model are in
tests/integration/test_extract_batch.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from metakg.config import BatchSettings, LLMSettings
from metakg.errors import BatchPending, ConfigError, LLMError
from metakg.llm.batch import (
    BATCH_DISCOUNT,
    AnthropicBatches,
    BatchJournal,
    BatchRunner,
    OpenAIBatches,
    backend,
    openai_line,
)
from metakg.llm.cache import ResponseCache
from metakg.llm.client import ChatRequest, Message, request
from metakg.llm.usage import UsageMeter
from metakg.schemas.bundle import read_bundle
from tests.fault_server import FaultServer
from tests.unit.cli.test_cli import run
from tools.batch_server import BatchServer, run_batch

ROOT = Path(__file__).resolve().parents[3]
PRICES = {"m": (2.0, 8.0)}


@pytest.fixture
def upstream() -> Iterator[FaultServer]:
    running = FaultServer().start()
    running.reply_for = lambda body: "reply to " + body["messages"][-1]["content"]
    yield running
    running.stop()


@pytest.fixture
def server(upstream: FaultServer) -> Iterator[BatchServer]:
    running = BatchServer(upstream.url).start()
    yield running
    running.stop()


def _requests(n: int, model: str = "m") -> list[tuple[str, ChatRequest]]:
    return [
        (f"t:{i}", request([Message("system", "be brief"), Message("user", f"question {i}")], model=model))
        for i in range(n)
    ]


class Harness:
    """A runner per 'process': the cache, journal and ledger files stay between runners, as on disk."""

    def __init__(self, folder: Path, make: Any) -> None:
        self.folder = folder
        self.make = make  # () -> BatchBackend

    def run(self, tagged: list[tuple[str, ChatRequest]], *, retries: int = 2, wait: bool = True) -> tuple[Any, Any]:
        cache = ResponseCache(self.folder / "responses.sqlite")
        journal = BatchJournal(self.folder / "batches.sqlite")
        meter = UsageMeter("run", PRICES)
        self.meter = meter  # kept when the run raises
        runner = BatchRunner(
            self.make(),
            cache=cache,
            journal=journal,
            meter=meter,
            folder=self.folder / "batches",
            retries=retries,
            poll_s=0.05,
            wait=wait,
        )

        self.runner = runner  # its notes are read after the run

        async def body() -> Any:
            try:
                return await runner.run(tagged)
            finally:
                await runner.aclose()

        try:
            return asyncio.run(body()), meter
        finally:
            cache.close()
            journal.close()

    def journal(self) -> dict[str, str]:
        journal = BatchJournal(self.folder / "batches.sqlite")
        try:
            return journal.states()
        finally:
            journal.close()


def _openai(server: BatchServer) -> Any:
    settings = LLMSettings(base_url=server.url, api_key=SecretStr(server.api_key), model="m", max_retries=1)
    return lambda: OpenAIBatches(settings, "m")


def _anthropic(server: BatchServer) -> Any:
    settings = BatchSettings(anthropic_base_url=server.anthropic_url, anthropic_api_key=SecretStr(server.api_key))
    llm = LLMSettings(model="m", max_retries=1)
    return lambda: backend("anthropic", llm, settings, "m")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_answers_every_request_at_batch_price_and_a_rerun_sends_nothing(
    server: BatchServer, tmp_path: Path, provider: str
) -> None:
    harness = Harness(tmp_path, _openai(server) if provider == "openai" else _anthropic(server))
    tagged = _requests(5)
    answers, meter = harness.run(tagged)
    assert [a.completion.text for a in answers] == [f"reply to question {i}" for i in range(5)]
    assert len(server.created) == 1 and server.created[0].startswith(provider)
    records = meter.records
    assert sorted(r.tag for r in records) == sorted(t for t, _ in tagged) and not any(r.cached for r in records)
    listed = sum(r.list_cost_usd for r in records)
    assert listed > 0 and sum(r.cost_usd for r in records) == pytest.approx(listed * BATCH_DISCOUNT)
    assert set(harness.journal().values()) == {"collected"}

    again, meter = harness.run(tagged)
    assert [a.completion.text for a in again] == [a.completion.text for a in answers]
    assert len(server.created) == 1  # nothing sent: every reply came from the cache
    assert all(r.cached and r.cost_usd == 0 for r in meter.records)


def test_a_request_made_twice_is_sent_once(server: BatchServer, upstream: FaultServer, tmp_path: Path) -> None:
    harness = Harness(tmp_path, _openai(server))
    tagged = _requests(3)
    answers, meter = harness.run([*tagged, ("t:again", tagged[0][1])])
    assert len(upstream.requests) == 3
    assert answers[3].completion.text == answers[0].completion.text
    assert [r.cached for r in meter.records] == [False, False, False, True]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_expired_batch_keeps_its_replies_and_the_rest_go_again(
    server: BatchServer, tmp_path: Path, provider: str
) -> None:
    harness = Harness(tmp_path, _openai(server) if provider == "openai" else _anthropic(server))
    server.faults.expire_after = 2
    answers, _ = harness.run(_requests(5))
    assert all(a.completion is not None for a in answers)
    assert len(server.created) == 2  # the three the first batch never ran went out as a second batch
    if provider == "openai":
        first = server.batches[server.created[0].split(":", 1)[1]]
        assert first["status"] == "expired" and first["request_counts"] == {"total": 5, "completed": 2, "failed": 3}
        second = server.batches[server.created[1].split(":", 1)[1]]
        assert second["request_counts"]["total"] == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_failed_items_are_retried_and_what_never_succeeds_says_why(
    server: BatchServer, tmp_path: Path, provider: str
) -> None:
    harness = Harness(tmp_path, _openai(server) if provider == "openai" else _anthropic(server))
    server.faults.fail_every = 2
    answers, meter = harness.run(_requests(4), retries=0)  # no second batch: the failures stay failures
    failed = [a for a in answers if a.completion is None]
    assert len(failed) == 2 and all(provider in a.error for a in failed)
    assert all(("500" in a.error) if provider == "openai" else ("injected" in a.error) for a in failed)
    assert sum(r.error is not None for r in meter.records) == 2

    server.faults.fail_every = 2
    answers, meter = harness.run(_requests(4), retries=1)  # the two failures again: the first try fails one
    assert all(a.completion is not None for a in answers)
    assert len(server.created) == 3
    assert sum(r.cached for r in meter.records) == 2  # the two answered in the first run come from the cache


def test_a_batch_that_fails_validation_fails_every_item_with_its_reason(server: BatchServer, tmp_path: Path) -> None:
    harness = Harness(tmp_path, _openai(server))
    server.faults.fail_batch = True
    answers, _ = harness.run(_requests(3), retries=0)
    assert all(a.completion is None and "the batch failed: injected validation failure" in a.error for a in answers)
    answers, _ = harness.run(_requests(3), retries=0)
    assert all(a.completion is not None for a in answers)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_run_that_stops_before_the_batch_ends_is_collected_by_the_next_not_sent_again(
    server: BatchServer, tmp_path: Path, provider: str
) -> None:
    harness = Harness(tmp_path, _openai(server) if provider == "openai" else _anthropic(server))
    server.faults.hold.clear()  # the batch stays in progress
    with pytest.raises(BatchPending) as pending:
        harness.run(_requests(4), wait=False)
    assert pending.value.batch_id in harness.journal() and harness.journal()[pending.value.batch_id] == "open"
    server.faults.hold.set()
    answers, meter = harness.run(_requests(4))
    assert all(a.completion is not None for a in answers)
    assert len(server.created) == 1  # collected, not resubmitted
    assert harness.journal() == {pending.value.batch_id: "collected"}
    assert not any(r.cached for r in meter.records)  # the collected replies are this run's fresh calls


def test_a_batch_the_journal_never_saw_is_found_by_its_metadata_not_paid_for_twice(
    server: BatchServer, tmp_path: Path
) -> None:
    # killed between the provider's reply to create and the journal's write: the batch exists, unrecorded
    tagged = _requests(3)
    items = [(r.key(), r) for _, r in tagged]
    made = _openai(server)()

    async def submit_only() -> None:
        try:
            await made.submit(items, tmp_path / "batches", ())
        finally:
            await made.aclose()

    asyncio.run(submit_only())
    assert len(server.created) == 1
    answers, _ = Harness(tmp_path, _openai(server)).run(tagged)
    assert all(a.completion is not None for a in answers) and len(server.created) == 1


def test_a_journal_entry_of_another_extraction_is_left_alone(server: BatchServer, tmp_path: Path) -> None:
    harness = Harness(tmp_path, _openai(server))
    server.faults.hold.clear()
    with pytest.raises(BatchPending) as other:
        harness.run(_requests(2, model="other"), wait=False)
    server.faults.hold.set()
    answers, _ = harness.run(_requests(2))
    assert all(a.completion is not None for a in answers)
    assert harness.journal()[other.value.batch_id] == "open"


def test_vllm_writes_the_request_file_says_the_command_and_reads_its_result(
    upstream: FaultServer, tmp_path: Path
) -> None:
    command = f"{sys.executable} -m tools.batch_server run-batch --upstream {upstream.url}"
    harness = Harness(tmp_path, lambda: backend("vllm", LLMSettings(), BatchSettings(vllm_command=command), "m"))
    tagged = _requests(3)
    with pytest.raises(BatchPending) as pending:
        harness.run(tagged)
    command_line = pending.value.command
    assert command_line is not None and " -i " in command_line and "--model m" in command_line
    source = next((tmp_path / "batches").glob("vllm-*.input.jsonl"))
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    assert [line["custom_id"] for line in lines] == [r.key() for _, r in tagged]
    assert lines[0]["url"] == "/v1/chat/completions" and lines[0]["body"]["model"] == "m"
    with pytest.raises(BatchPending):  # not run yet: the same command again says so again, sends nothing
        harness.run(tagged)
    subprocess.run(command_line, shell=True, check=True, cwd=ROOT, capture_output=True)
    answers, meter = harness.run(tagged)
    assert [a.completion.text for a in answers] == [f"reply to question {i}" for i in range(3)]
    assert not any(r.cached for r in meter.records) and len(upstream.requests) == 3


def _vllm_result(upstream: FaultServer, tmp_path: Path) -> tuple[Harness, list[tuple[str, ChatRequest]], Path]:
    """A vLLM run of two requests left pending, then its request file run through ``upstream``: the harness,
    the requests and the result file (for a test to spoil before the run is taken up again)."""
    harness = Harness(tmp_path, lambda: backend("vllm", LLMSettings(), BatchSettings(), "m"))
    tagged = _requests(2)
    with pytest.raises(BatchPending):
        harness.run(tagged, retries=0)
    source = next((tmp_path / "batches").glob("vllm-*.input.jsonl"))
    target = source.with_name(source.name.replace(".input.", ".output."))
    run_batch(source, target, upstream.url)
    return harness, tagged, target


def test_a_vllm_result_file_with_a_bad_line_fails_its_request_which_a_retry_sends_again(
    upstream: FaultServer, tmp_path: Path
) -> None:
    harness, tagged, target = _vllm_result(upstream, tmp_path)
    kept = target.read_text().splitlines()
    target.write_text(kept[0] + "\n{not json\n")
    answers, _ = harness.run(tagged, retries=0)
    assert answers[0].completion is not None
    assert answers[1].completion is None and "holds no result for this request" in answers[1].error
    # the line itself is said (probe round 4: its reason was made and dropped)
    assert any("line 2 is not a batch result" in n for n in harness.runner.notes), harness.runner.notes
    with pytest.raises(BatchPending):  # with a retry allowed, it goes out again in a batch of its own
        harness.run(tagged, retries=1)
    assert len(list((tmp_path / "batches").glob("vllm-*.input.jsonl"))) == 2


def test_a_vllm_result_file_with_strange_ids_caches_and_bills_only_the_batch_s_requests(
    upstream: FaultServer, tmp_path: Path
) -> None:
    """Issue 56, item 9: results whose ``custom_id`` no request of the batch has (a path, an empty one) are
    neither cached nor billed, and a second result for one request does not replace the first; both are said."""
    harness, tagged, target = _vllm_result(upstream, tmp_path)
    first, second = target.read_text().splitlines()
    stranger, empty, doubled = json.loads(first), json.loads(first), json.loads(second)
    stranger["custom_id"], empty["custom_id"] = "../../etc/passwd", ""
    doubled["response"]["body"]["choices"][0]["message"]["content"] = "a second, later reply"
    target.write_text("\n".join([first, second, json.dumps(stranger), json.dumps(empty), json.dumps(doubled)]))
    answers, meter = harness.run(tagged, retries=0)
    assert [a.completion.text for a in answers] == ["reply to question 0", "reply to question 1"]
    assert len(meter.records) == 2  # the two requests, billed once each
    notes = harness.runner.notes
    assert sum("is no request of this batch" in n for n in notes) == 2 and "'../../etc/passwd'" in notes[0]
    assert any("a second result for custom_id" in n and "the first is kept" in n for n in notes)
    answers, meter = harness.run(tagged, retries=0)  # again: from the cache, nothing from the strangers
    assert [a.completion.text for a in answers] == ["reply to question 0", "reply to question 1"]


def test_a_vllm_request_that_always_fails_ends_failed_after_the_retries_across_runs(tmp_path: Path) -> None:
    """Issue 56, item 1: a vLLM run stops at each batch it writes, so the retry bound must hold across runs:
    with ``retries=1`` a request whose result is an error every time goes out in two request files, then the
    next run ends with it failed (the reason kept) instead of writing a third, a fourth... A later run, after
    the failure was reported, is a new attempt."""
    harness = Harness(tmp_path, lambda: backend("vllm", LLMSettings(), BatchSettings(), "m"))
    tagged = _requests(1)

    def fail_newest() -> None:
        source = sorted((tmp_path / "batches").glob("vllm-*.input.jsonl"), key=lambda f: f.stat().st_mtime)[-1]
        target = source.with_name(source.name.replace(".input.", ".output."))
        lines = [json.loads(line) for line in source.read_text().splitlines()]
        target.write_text("".join(json.dumps({"custom_id": line["custom_id"], "error": None, "response": {
            "status_code": 500, "body": {"error": {"message": "boom"}}}}) + "\n" for line in lines))  # fmt: skip

    for _ in range(2):
        with pytest.raises(BatchPending):
            harness.run(tagged, retries=1)
        fail_newest()
    answers, _ = harness.run(tagged, retries=1)
    assert answers[0].completion is None and "status 500" in answers[0].error and "boom" in answers[0].error
    assert len(list((tmp_path / "batches").glob("vllm-*.input.jsonl"))) == 2
    with pytest.raises(BatchPending):  # reported: the next run tries afresh
        harness.run(tagged, retries=1)


def test_extract_batch_end_to_end_from_the_command_line(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Aspirin treats pain number {i}."}) + "\n"
                            for i in range(6)))  # fmt: skip
    server.faults.hold.clear()
    env = {
        "METAKG_LLM__BASE_URL": server.url,
        "METAKG_LLM__API_KEY": server.api_key,
        "METAKG_LLM__MODEL": "m",
        "METAKG_LLM__PRICES_PER_MTOK": json.dumps(PRICES),
        "METAKG_BATCH__POLL_S": "0.05",
        "METAKG_EXTRACT__EMBEDDINGS": "false",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = ["extract", str(docs), "-f", "jsonl", "--id-field", "id", "-o", str(tmp_path / "b"), "--batch", "openai"]
    _, said = run(*args, "--no-wait", "--json", code=75)
    assert said["pending"] is True and said["batch_id"].startswith("batch_")
    assert not (tmp_path / "b").exists()

    _, said = run(*args, "--budget-usd", "0.000001", "--json", code=2)  # the batch's most is over it: refused
    assert "batch price" in said["error"] and len(server.created) == 1

    server.faults.hold.set()
    _, said = run(*args, "--json", code=None)  # exit 1: every reply line is rejected (no triples)
    assert said["units"] == said["llm_calls"] == 6 and said["cache_hits"] == 0
    assert len(server.created) == 1 and said["cost_usd"] > 0
    assert read_bundle(tmp_path / "b").edges.height == 0  # the scripted replies hold no triples: all rejected
    _, again = run(*args, "--json", code=None)
    assert again["cache_hits"] == 6 and again["cost_usd"] == 0 and len(server.created) == 1

    _, estimate = run(*args, "--estimate", "--json")
    assert estimate["calls"] == 0 and estimate["answered"] == 6

    _, said = run(*args, "--concurrency", "2", "--json", code=2)
    assert "--concurrency" in said["error"]
    _, said = run(*args[:-1], "mail", "--json", code=2)
    assert "unknown --batch" in said["error"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refused_key_is_a_clean_error_that_never_shows_the_key(
    server: BatchServer, tmp_path: Path, provider: str
) -> None:
    wrong = "sk-wrong-" + "x" * 20
    if provider == "openai":
        settings = LLMSettings(base_url=server.url, api_key=SecretStr(wrong), model="m", max_retries=0)
        make: Any = lambda: OpenAIBatches(settings, "m")  # noqa: E731
    else:
        batch = BatchSettings(anthropic_base_url=server.anthropic_url, anthropic_api_key=SecretStr(wrong))
        make = lambda: backend("anthropic", LLMSettings(model="m", max_retries=0), batch, "m")  # noqa: E731
    with pytest.raises(ConfigError) as refused:  # a setting to fix: exit 2 (an LLMError, exit 1, before round 4)
        Harness(tmp_path, make).run(_requests(2))
    assert "AuthenticationError" in str(refused.value) and wrong not in str(refused.value)
    assert "refused the API key" in str(refused.value) and server.created == []


def test_a_retry_of_requests_that_all_failed_is_a_new_batch_not_the_old_one_found_again(
    server: BatchServer, tmp_path: Path
) -> None:
    harness = Harness(tmp_path, _openai(server))
    server.faults.fail_every = 1  # every request of the first batch fails; the batch itself completes
    answers, meter = harness.run(_requests(2), retries=1)
    assert all(a.completion is not None for a in answers)
    assert len(server.created) == 2  # the retry went out as a batch of its own
    assert [r.cost_usd > 0 for r in meter.records] == [True, True]


def test_replies_an_older_batch_holds_for_other_requests_are_kept_and_billed_once(
    server: BatchServer, tmp_path: Path
) -> None:
    harness = Harness(tmp_path, _openai(server))
    server.faults.hold.clear()
    with pytest.raises(BatchPending):
        harness.run(_requests(4), wait=False)
    server.faults.hold.set()
    answers, meter = harness.run(_requests(2))  # half of the open batch's requests
    assert all(a.completion is not None for a in answers)
    extract = [r for r in meter.records if r.tag.startswith("t:")]
    other = [r for r in meter.records if r.tag.startswith("batch:")]
    assert len(extract) == 2 and len(other) == 2 and all(r.cost_usd > 0 for r in other)
    answers, meter = harness.run(_requests(4))  # the other two were kept: nothing is sent or billed again
    assert all(a.completion is not None for a in answers) and len(server.created) == 1
    assert all(r.cached and r.cost_usd == 0 for r in meter.records)


def test_replies_collected_before_a_run_stops_are_billed_in_that_run(upstream: FaultServer, tmp_path: Path) -> None:
    harness = Harness(tmp_path, lambda: backend("vllm", LLMSettings(), BatchSettings(), "m"))
    tagged = _requests(2)
    with pytest.raises(BatchPending):
        harness.run(tagged)
    source = next((tmp_path / "batches").glob("vllm-*.input.jsonl"))
    target = source.with_name(source.name.replace(".input.", ".output."))
    run_batch(source, target, upstream.url)
    target.write_text(target.read_text().splitlines()[0] + "\n")  # the second request has no result
    with pytest.raises(BatchPending):  # its retry is a new vLLM batch, still to run
        harness.run(tagged, retries=1)
    fresh = [r for r in harness.meter.records if r.error is None]
    assert len(fresh) == 1 and fresh[0].cost_usd > 0 and not fresh[0].cached
    assert len(list((tmp_path / "batches").glob("vllm-*.input.jsonl"))) == 2


def test_an_endpoint_without_a_batches_api_says_so(upstream: FaultServer, tmp_path: Path) -> None:
    settings = LLMSettings(base_url=upstream.url, model="m", max_retries=0)  # chat completions only
    with pytest.raises(LLMError, match="has no Files and Batches API"):
        Harness(tmp_path, lambda: OpenAIBatches(settings, "m")).run(_requests(1))


def test_a_schema_goes_to_each_provider_in_its_own_form() -> None:
    """A request held to a JSON schema: OpenAI's and vLLM's batch lines carry it as ``response_format``
    ``json_schema``, Anthropic's as structured output (``output_config.format``), with the limits Anthropic does
    not enforce moved into descriptions; a request without one carries neither."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 80}}, "required": ["name"],
              "additionalProperties": False}  # fmt: skip
    held = request([Message("user", "hi")], model="m", json_schema=schema)
    body = json.loads(openai_line("u1", held))["body"]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    anthropic = AnthropicBatches.params(held)["output_config"]["format"]
    assert anthropic["type"] == "json_schema" and anthropic["schema"]["required"] == ["name"]
    assert "maxLength" not in anthropic["schema"]["properties"]["name"]
    plain = request([Message("user", "hi")], model="m")
    assert "output_config" not in AnthropicBatches.params(plain)
    assert "response_format" not in json.loads(openai_line("u1", plain))["body"]
