"""The bookkeeping of a Ray run (:func:`run_units_ray`), with a scripted stand-in for the cluster's workers.

The workers are replaced by a function that posts each body to a real HTTP server on 127.0.0.1 (or answers as a
test needs), so these tests pin what the driver does with what comes back: the cache, the meter, the outcomes of
replies that are errors, come twice or never come. The cluster itself is tested in
tests/integration/test_extract_ray.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from metakg.config import LLMSettings
from metakg.errors import LLMError
from metakg.extractors.pipeline import Unit, run_units_ray
from metakg.extractors.prompts import chunk_prompt
from metakg.llm.cache import ResponseCache
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.llm.usage import MeteredClient, UsageMeter
from tests.fault_server import FaultServer


@pytest.fixture
def server() -> Iterator[FaultServer]:
    running = FaultServer().start()
    running.reply_for = lambda body: "ada\\wrote\\notes"
    yield running
    running.stop()


def _client(server: FaultServer, tmp_path: Path) -> MeteredClient:
    settings = LLMSettings(base_url=server.url, model="m", backoff_s=0.01, max_retries=1)
    cache = ResponseCache(tmp_path / "responses.sqlite")
    return MeteredClient(OpenAICompatibleClient(settings, base_url=server.url, cache=cache), UsageMeter())


def _units(n: int) -> list[Unit]:
    return [Unit(f"r{i}#0", f"r{i}", chunk_prompt(f"Ada wrote notes number {i}.")) for i in range(n)]


def _workers(server: FaultServer, node: str = "node-a") -> Any:
    """Posts each body to ``server`` as a worker would, noting the node, the status and the seconds."""

    def dispatch(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
        for i, body in enumerate(bodies):
            reply = httpx.post(server.url + "/chat/completions", content=body, timeout=10)
            yield i, reply.json() | {"metakg": {"node": node, "status": reply.status_code, "seconds": 0.01}}

    return dispatch


def _run(units: list[Unit], client: MeteredClient, dispatch: Any, **kwargs: Any) -> Any:
    return asyncio.run(run_units_ray(units, client, dispatch, max_tokens=32, **kwargs))


def test_replies_from_the_workers_are_cached_metered_and_the_first_prompt_goes_direct(
    server: FaultServer, tmp_path: Path
) -> None:
    client, units = _client(server, tmp_path), _units(5)
    outcomes, stats, nodes = _run(units, client, _workers(server))
    assert [o.status for o in outcomes] == ["ok"] * 5 and [o.unit for o in outcomes] == units
    assert nodes == {"node-a": 4}  # the first prompt went through the client
    assert (stats.done, stats.llm_calls, stats.cache_hits, stats.prompt_tokens) == (5, 5, 0, 55)
    assert {r.tag for r in client.meter.records} == {f"extract:{u.unit_id}" for u in units}
    # the workers sent the body the client sends: the same fields as the client's own request
    assert {json.dumps(sorted(r)) for r in server.requests} == {json.dumps(sorted(server.requests[0]))}

    def never(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
        raise AssertionError(f"{len(bodies)} bodies sent again")

    again, stats, nodes = _run(units, _client(server, tmp_path), never)
    assert [o.completion.cached for o in again if o.completion] == [True] * 5 and nodes == {}
    assert (stats.cache_hits, stats.prompt_tokens) == (5, 0)


def test_error_replies_odd_replies_and_replies_twice_are_accounted_once(server: FaultServer, tmp_path: Path) -> None:
    client, units = _client(server, tmp_path), _units(5)

    def dispatch(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
        good = {"choices": [{"index": 0, "message": {"content": "a\\b\\c"}}], "usage": {"prompt_tokens": 2}}
        note = {"node": "n", "status": 200}
        yield 0, good | {"metakg": note}
        yield 0, good | {"metakg": note}  # a batch redone after a node died
        yield 1, {"error": {"message": "model overloaded"}, "metakg": {"node": "n", "status": 500}}
        yield 2, {"choices": 7, "metakg": note}
        yield 3, good | {"metakg": note}

    outcomes, stats, _ = _run(units, client, dispatch)
    # r0 went direct; the workers' bodies are r1 to r4, in that order
    status = {o.unit.unit_id: (o.status, o.error) for o in outcomes}
    assert status["r0#0"] == status["r1#0"] == status["r4#0"] == ("ok", None)
    assert status["r2#0"] == ("failed", "the endpoint answered HTTP 500: model overloaded")
    assert status["r3#0"][0] == "failed" and "not a chat completion" in str(status["r3#0"][1])
    assert (stats.done, stats.failed) == (5, 2)
    assert len(client.meter.records) == 5  # each unit once: the reply that came twice is not counted again


def test_prompts_that_never_come_back_or_a_run_that_stops_are_failed_with_the_reason(
    server: FaultServer, tmp_path: Path
) -> None:
    units = _units(4)

    def half(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
        yield from list(_workers(server)(bodies))[:1]

    outcomes, _, _ = _run(units, _client(server, tmp_path / "a"), half, why_missing=lambda: "its batch failed (x)")
    assert [o.status for o in outcomes] == ["ok", "ok", "failed", "failed"]
    assert {o.error for o in outcomes[2:]} == {"its batch failed (x)"}

    def stops(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
        yield from list(_workers(server)(bodies))[:1]
        raise LLMError("the Ray run stopped: the cluster went away")

    client = _client(server, tmp_path / "b")
    outcomes, _, _ = _run(units, client, stops)
    assert [o.status for o in outcomes] == ["ok", "ok", "failed", "failed"]
    assert {o.error for o in outcomes[2:]} == {"the Ray run stopped: the cluster went away"}
    assert client.meter.summary().failures == 2  # the ledger holds the failures too


def test_when_the_first_prompt_fails_nothing_goes_to_the_cluster(server: FaultServer, tmp_path: Path) -> None:
    server.script("500", "500")  # the first prompt and its one retry

    def never(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
        raise AssertionError("sent to the cluster")

    outcomes, stats, _ = _run(_units(3), _client(server, tmp_path), never)
    assert [o.status for o in outcomes] == ["failed"] * 3 and stats.failed == 3
    assert all("not sent to the Ray cluster" in str(o.error) for o in outcomes[1:])


def test_the_vllm_engine_rows_carry_the_schema_and_come_back_as_a_chat_completion() -> None:
    from metakg.llm.openai_client import completion_from_json
    from metakg.llm.ray_engine import _from_vllm, _to_vllm

    unit = _units(1)[0]
    schema = {"type": "object", "properties": {"triples": {"type": "array"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0, "max_tokens": 9,
            "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}}  # fmt: skip
    row = _to_vllm({"index": 3, "body": json.dumps(body)})
    assert row["sampling_params"] == {"temperature": 0.0, "max_tokens": 9, "guided_decoding": {"json": schema}}
    assert row["messages"] == body["messages"] and row["index"] == 3
    back = _from_vllm(row | {"generated_text": '{"triples": []}', "num_input_tokens": 12, "num_generated_tokens": 4})
    reply = json.loads(back["reply"])
    assert reply.pop("metakg")["status"] == 200 and back["index"] == 3
    from metakg.llm.client import request

    completion = completion_from_json(reply, request(unit.prompt.messages, model="m"))
    assert (completion.text, completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        '{"triples": []}',
        12,
        4,
    )


def test_usage_errors_of_the_engine_options(tmp_path: Path) -> None:
    from tests.unit.cli.test_cli import run

    data = tmp_path / "notes.txt"
    data.write_text("Ada wrote notes.\n")
    for args, said in [
        (["--engine", "spark"], "unknown --engine 'spark'"),
        (["--engine", "ray", "--batch", "openai"], "choose one"),
        (["--ray-address", "head:6379"], "give --engine ray too"),
    ]:
        _result, out = run("extract", str(data), "-f", "text", "-o", str(tmp_path / "b"), *args, "--json", code=2)
        assert said in out["error"], out


def test_a_cluster_address_where_nothing_listens_is_refused_at_once() -> None:
    from metakg.config import RaySettings
    from metakg.errors import ConfigError
    from metakg.llm.ray_engine import RayCluster

    for address, said in [("127.0.0.2:1", "nothing answers at the Ray address"), ("head", "is not host:port")]:
        with pytest.raises(ConfigError, match=said), RayCluster(RaySettings(), address=address):
            pass
