"""The LLM judge of name pairs: its prompt, its replies, and `metakg resolve --judge` against a real HTTP
endpoint (a scripted OpenAI-compatible server on 127.0.0.1), cached and metered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg.errors import LLMError
from metakg.identity.judge import JUDGE_VERSION, judge_messages, judge_pairs, parse_verdict
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from tests.fault_server import FaultServer
from tests.unit.cli.test_cli import run
from tests.unit.test_identity_resolve import edges, nodes


@pytest.mark.parametrize(
    ("reply", "same"),
    [("yes", True), ("Yes.", True), (" NO, they differ", False), ("**no**", False), ("maybe", None), ("", None)],
)
def test_a_reply_is_read_by_its_first_word(reply: str, same: bool | None) -> None:
    assert parse_verdict(reply) is same


def test_the_prompt_names_both_records_and_its_version() -> None:
    system, user = judge_messages("Alzheimers disease", "disease", "Alzheimer disease", "disease")
    assert system.role == "system" and "yes or no" in system.content
    assert "'Alzheimers disease' (type: disease)" in user.content and JUDGE_VERSION in user.content


def test_judge_pairs_in_order_and_a_failed_call_is_unclear() -> None:
    def script(request: ChatRequest) -> str:
        text = request.messages[-1].content
        if "boom" in text:
            raise LLMError("the endpoint is down")
        return "yes" if "aspirin" in text else "unsure"

    client = ScriptedClient(script)
    pairs = [("aspirin", "drug", "ASA", "drug"), ("a", "x", "b", "x"), ("boom", "x", "c", "x")]
    verdicts = asyncio.run(judge_pairs(pairs, client))
    assert [v.same for v in verdicts] == [True, None, None] and verdicts[2].error == "the endpoint is down"
    assert verdicts[1].error is None and verdicts[1].reply == "unsure"
    assert len(client.calls) == 3


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    server = FaultServer().start()
    # one entity: the abbreviation of the Wikidata drug's name; not: the two lymphomas
    server.reply_for = lambda body: "Yes." if "'acetylsalicylic acid'" in body["messages"][-1]["content"] else "No"
    monkeypatch.setenv("METAKG_LLM__BASE_URL", server.url)
    monkeypatch.setenv("METAKG_LLM__MODEL", "judge")
    yield server
    server.stop()


def test_resolve_asks_the_judge_below_the_threshold_only(endpoint: FaultServer, tmp_path: Path) -> None:
    left, right = tmp_path / "a", tmp_path / "b"
    write_bundle(
        left,
        Bundle(
            nodes(
                [("kg:a/asa", "acetylsalicylic acids", "drug", []), ("kg:a/l1", "B-cell lymphomas", "disease", [])], "a"
            ),
            edges([("kg:a/asa", "treats", "kg:a/l1")], "a"),
        ),
    )
    write_bundle(
        right,
        Bundle(
            nodes(
                [("wd:Q18216", "acetylsalicylic acid", "drug", []), ("wd:Q1", "T-cell lymphomas", "disease", [])], "b"
            ),
            edges([("wd:Q18216", "treats", "wd:Q1")], "b"),
        ),
    )
    args = ["resolve", str(left), str(right), "--names", "fuzzy", "--threshold", "0.99", "--judge", "--json"]
    _, report = run(*args, "-o", str(tmp_path / "one"))
    judge = report["judge"]
    # fuzzy: 0.95 and 0.94, both under 0.99 and within 0.1 of it: both asked, one yes
    assert (judge["asked"], judge["yes"], judge["no"], judge["unclear"]) == (2, 1, 1, 0)
    assert judge["llm_calls"] == 2 and judge["cache_hits"] == 0 and judge["tokens"] > 0
    assert report["joined_by_name"] == 2 and read_bundle(tmp_path / "one").nodes.height == 3
    shown = run("identity", "show", "kg:a/asa", "-b", str(tmp_path / "one"), "--json")[1]
    assert {m["scorer"] for m in shown["members"]} == {"fuzzy+judge"}
    _, again = run(*args, "-o", str(tmp_path / "two"))
    assert again["judge"]["cache_hits"] == 2 and again["judge"]["llm_calls"] == 2  # answered from the cache
    assert len(endpoint.requests) == 2  # the server was asked once per pair
    _, refused = run("resolve", str(left), str(right), "--judge", "-o", str(tmp_path / "x"), "--json", code=2)
    assert "give a name scorer with --names" in refused["error"]
    bare = ("resolve", str(left), str(right), "--threshold", "0.5", "-o", str(tmp_path / "x"), "--json")
    _, ignored = run(*bare, code=2)  # a threshold with nothing to apply it to was once dropped silently
    assert "give a name scorer with --names" in ignored["error"] and not (tmp_path / "x").exists()


def test_a_judge_that_cannot_be_reached_fails_the_run_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56, item 8: with the LLM unreachable, ``resolve --judge`` is an error naming the endpoint's failure
    (exit status 1, nothing written), not a run that exits 0 with every pair "unclear"."""
    left, right = tmp_path / "a", tmp_path / "b"
    write_bundle(left, Bundle(nodes([("kg:a/asa", "acetylsalicylic acids", "drug", [])], "a"), edges([], "a")))
    write_bundle(right, Bundle(nodes([("wd:Q18216", "acetylsalicylic acid", "drug", [])], "b"), edges([], "b")))
    monkeypatch.setenv("METAKG_LLM__BASE_URL", "http://127.0.0.1:9/v1")  # the discard port: nothing listens
    monkeypatch.setenv("METAKG_LLM__MODEL", "judge")
    monkeypatch.setenv("METAKG_LLM__MAX_RETRIES", "0")
    args = ["resolve", str(left), str(right), "--names", "fuzzy", "--threshold", "0.99", "--judge", "--json"]
    result, failed = run(*args, "-o", str(tmp_path / "one"), code=None)
    assert result.exit_code != 0 and failed["ok"] is False
    assert "the LLM judge answered none of 1 name pair(s)" in failed["error"]
    assert "127.0.0.1:9" in failed["error"] and not (tmp_path / "one").exists()
