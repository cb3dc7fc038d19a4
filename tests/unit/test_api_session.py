"""The QA session: one store, one way of running the LLM, one registry; the one-shot api functions wrap it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from metakg import api
from metakg.config import Settings, load_settings
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.services import QAServices
from metakg.schemas.graph_store import GraphStore
from tests.conftest import small_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("session") / "kg"
    api.write_validated(path, small_bundle(), load_settings())
    return path


class Scripted:
    """A runner of the protocol's own: every context gets one scripted client (counts the runs)."""

    def __init__(self, reply: str) -> None:
        self.client = ScriptedClient({}, default=reply)
        self.runs = 0

    def run(
        self, settings: Settings, store: GraphStore, work: Any, *, progress: Any = None, services: Any = None
    ) -> Any:
        self.runs += 1
        return asyncio.run(work(api.qa_context(settings, store, self.client, services=services)))


def test_the_runner_follows_the_call() -> None:
    assert isinstance(api.llm_runner(use_llm=False), api.NoLLM)
    assert isinstance(api.llm_runner(), api.OneShotLLM)
    shared = api.SharedLLM(load_settings())
    try:
        runner = api.llm_runner(llm=shared)
        assert isinstance(runner, api.SharedRunner) and runner.llm is shared
        assert isinstance(api.llm_runner(use_llm=False, llm=shared), api.NoLLM)  # retrieval only asks nobody
    finally:
        shared.close()


def test_a_session_opens_and_closes_its_store_and_answers_without_an_llm(bundle: Path) -> None:
    settings = load_settings()
    question = api.make_question("What does aspirin treat?")
    closed: list[bool] = []
    with api.QASession(settings, api.StoreChoice(bundle), runner=api.NoLLM()) as session:
        store = session.store
        close = store.close
        store.close = lambda: (closed.append(True), close())[1]  # type: ignore[method-assign]
        answer = session.answer(question, "kg_rag")
        assert answer.evidence and answer.status == "fail"  # retrieval only: evidence, no answer
        assert "retrieval only" in (answer.reason or "")
        steps: list[dict[str, Any]] = []
        session.answer(question, "metakgrag", steps=steps.append)
        assert steps  # each step of the trace, as it was taken
        assert not closed
    assert closed == [True]  # the store the session opened is closed with it
    with pytest.raises(RuntimeError, match="enter the session"):
        _ = session.store


def test_a_store_given_to_a_session_stays_open_and_a_runner_of_ones_own_is_used(bundle: Path) -> None:
    settings = load_settings()
    runner = Scripted("B")
    question = api.make_question("Which is a drug?", ["A: headache", "B: aspirin"])
    with api.open_store(settings, bundle) as store:
        services = api.qa_services(settings, store)
        with api.QASession(settings, store, runner=runner, services=services) as session:
            answers = session.answer_all([question, question], "llm_only")
        assert [a.choice for a in answers] == ["B", "B"] and runner.runs == 1  # one run for all the questions
        assert len(runner.client.calls) == 2
        assert store.counts()["nodes"] > 0  # still open
        assert isinstance(services, QAServices)


def test_evaluate_writes_the_report_and_the_wrapper_returns_the_same(bundle: Path, tmp_path: Path) -> None:
    settings = load_settings()
    questions = [api.make_question("What does aspirin treat?", question_id="q1")]
    options = api.EvalOptions(resume=False, budget=5)
    with api.QASession(settings, api.StoreChoice(bundle), runner=api.NoLLM()) as session:
        result = session.evaluate(questions, [api.RunSpec("kg_rag")], tmp_path / "run", options)
    assert result.summary["kg_rag"]["questions"] == 1 and result.questions == 1 and result.retrieval_only
    assert result.ok and result.failed_runs() == []  # every answer fails retrieval only, by design
    assert "| kg_rag |" in result.table() and result.as_dict()["summary"] == result.summary
    assert (tmp_path / "run" / "summary.json").is_file() and (tmp_path / "run" / "answers-kg_rag.jsonl").is_file()


def test_a_run_whose_every_answer_failed_is_a_failed_run(tmp_path: Path) -> None:
    summary = {
        "llm_only": {"questions": 3, "fail": 3},
        "kg_rag": {"questions": 3, "fail": 1},
        "ORACLE": {"questions": 3, "accuracy": 0.3},
    }
    result = api.EvaluationResult(summary, 3, tmp_path, list(api.COLUMNS))
    assert result.failed_runs() == ["llm_only"] and not result.ok
    assert api.EvaluationResult(summary, 3, tmp_path, list(api.COLUMNS), retrieval_only=True).ok
