"""The strategy contract: every registered QA strategy has a test class that subclasses this one.

A subclass names its strategy (``strategy_name``) and, when it is not a built-in, the registry that holds
it. The contract runs the strategy on the hand-made graph of :mod:`tests.unit.qa_engine.handmade` with a
scripted LLM and checks what the QA engine promises of every strategy: it never raises on bad input, its
usage counts every call it made, every evidence and support id exists in the store, its trace serialises
to JSON, it is deterministic, and it describes itself to the harness and the CLI.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from metakg.config import QASettings
from metakg.errors import LLMError
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, Question
from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.strategies import REGISTRY
from metakg.qa_engine.strategy import Strategy
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, store

PRICES = {"scripted": (1.0, 2.0)}
MC = Question(QUESTION, (("A", "zeta"), ("B", "bridge")), "mc", "A", "zeta")
BAD = [
    Question("   ", id="empty"),
    Question("Is the moon made of cheese?", (("A", "yes"), ("B", "no")), "nothing"),
    Question(QUESTION, (("1", "zeta"),), "unlabelled"),
    Question(QUESTION, (("A", ""),), "empty-choice"),
    Question("x" * 20_000, id="huge"),
    Question("MATCH (n) DETACH DELETE n; ' \" \\ 東京 <data>", id="hostile"),
]


def default_script(request: ChatRequest) -> str:
    """Concepts of the hand-made question, then 'Answer: A' for anything else."""
    prompt = request.messages[-1].content if request.messages else ""
    return "alpha\nbeta" if "key concepts" in prompt else "Answer: A"


class StrategyContract:
    """Behaviour every registered strategy must show."""

    strategy_name: ClassVar[str]
    registry: ClassVar[StrategyRegistry] = REGISTRY
    script: ClassVar[Callable[[ChatRequest], str]] = staticmethod(default_script)

    def strategy(self) -> Strategy[Any]:
        return self.registry.create(self.strategy_name, QASettings())

    def context(self, client: ScriptedClient | None) -> QAContext:
        return QAContext(store=store(), embedder=AxisEmbedder(), llm=client, prices=PRICES)

    def answer(self, question: Question = MC, client: ScriptedClient | None = None) -> tuple[Answer, ScriptedClient]:
        client = client if client is not None else ScriptedClient(self.script)
        return asyncio.run(self.strategy().answer(question, self.context(client))), client

    # ---------------------------------------------------------------- robustness
    @pytest.mark.parametrize("question", BAD, ids=[q.id for q in BAD])
    def test_bad_input_gives_an_answer_not_an_exception(self, question: Question) -> None:
        answer, _ = self.answer(question)
        assert answer.status in ("ok", "fail") and answer.question_id == question.id
        if answer.status == "fail":
            assert answer.reason

    @pytest.mark.parametrize("reply", ["", "I cannot tell.", "Answer: Z", "\x00" * 10, "Answer: " + "A" * 5000])
    def test_any_reply_gives_an_answer_not_an_exception(self, reply: str) -> None:
        answer, _ = self.answer(client=ScriptedClient(lambda r: reply if "key concepts" not in str(r) else "alpha"))
        assert answer.status in ("ok", "fail")

    def test_a_failing_llm_is_a_failed_answer_with_the_failure_counted(self) -> None:
        def broken(request: ChatRequest) -> str:
            raise LLMError("the endpoint refused the request (HTTP 500)")

        answer, _ = self.answer(client=ScriptedClient(broken))
        assert answer.status == "fail" and "HTTP 500" in (answer.reason or "")
        assert answer.usage.failures >= 1 and answer.usage.cost_usd == 0

    def test_without_an_llm_it_answers_or_fails_cleanly(self) -> None:
        answer = asyncio.run(self.strategy().answer(MC, self.context(None)))
        assert answer.status in ("ok", "fail") and answer.usage.llm_calls == 0

    # ---------------------------------------------------------------- accounting and ids
    def test_usage_counts_every_call(self) -> None:
        answer, client = self.answer()
        u = answer.usage
        assert u.llm_calls == len(client.calls) and u.cache_hits == 0
        assert u.prompt_tokens == sum(len(m.content.split()) for r in client.calls for m in r.messages)
        assert u.cost_usd == pytest.approx((u.prompt_tokens * 1.0 + u.completion_tokens * 2.0) / 1e6)
        assert u.total_ms >= u.retrieval_ms >= 0

    def test_every_evidence_and_support_id_exists_in_the_store(self) -> None:
        answer, _ = self.answer()
        graph = store()
        edge_ids = {
            nb.edge.id
            for name in graph.names()
            for hit in graph.search(name, k=1)
            for nb in graph.neighbours(hit.node.id)
        }
        for path in answer.evidence:
            assert all(graph.get_node(n) is not None for n in path.nodes)
            assert set(path.edges) <= edge_ids
        for claim in answer.support:
            assert all(graph.get_node(n) is not None for n in claim.nodes) and set(claim.edges) <= edge_ids

    def test_the_answer_and_its_trace_serialise_to_json(self) -> None:
        answer, _ = self.answer()
        data = json.loads(json.dumps(answer.to_dict()))
        assert data["strategy"] == self.strategy().label and isinstance(data["trace"], dict)

    def test_deterministic_with_the_scripted_client(self) -> None:
        def stable(answer: Answer) -> dict[str, Any]:
            data = answer.to_dict()
            data["usage"] = {k: v for k, v in data["usage"].items() if not k.endswith("_ms")}
            data["usage"]["calls"] = [{k: v for k, v in c.items() if k != "latency_ms"} for c in data["usage"]["calls"]]
            return data

        first, _ = self.answer()
        second, _ = self.answer()
        assert stable(first) == stable(second)

    # ---------------------------------------------------------------- self-description
    def test_it_describes_itself(self) -> None:
        cls = self.registry.get(self.strategy_name)
        assert cls.name == self.strategy_name and cls.summary.strip()
        described = next(d for d in self.registry.describe() if d["name"] == self.strategy_name)
        json.dumps(described)
        assert all(f["description"] for f in described["settings"]), "every setting says what it does"
        answer, _ = self.answer()
        strategy = self.strategy()
        metrics = strategy.metrics(answer)
        assert all(isinstance(v, int | float) for v in metrics.values())
        json.dumps(cls.summarise([metrics, metrics]))
        json.dumps(cls.summarise([]))
        assert all(isinstance(line, str) for line in strategy.trace_lines(answer))
        for switch in cls.switches():
            assert self.registry.create(self.strategy_name, switches=[switch]).label.endswith(f"[{switch}]")
