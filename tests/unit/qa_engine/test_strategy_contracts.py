"""Every registered strategy passes the strategy contract, and none is left without its contract test."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import polars as pl

from metakg.config import QASettings
from metakg.llm.scripted import ScriptedClient
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.strategies import BUILT_IN, REGISTRY
from metakg.schemas.bundle import Bundle
from metakg.schemas.knowledge_source import Binding
from metakg.schemas.tables import empty_edges, empty_nodes
from tests.contract.example_strategy import EXAMPLE_REGISTRY
from tests.contract.installed_strategy import INSTALLED_PROBLEMS, INSTALLED_REGISTRY
from tests.contract.strategy_contract import MC, PRICES, StrategyContract
from tests.unit.qa_engine.handmade import AxisEmbedder, store


class TestLLMOnlyContract(StrategyContract):
    strategy_name = "llm_only"


class TestKGRagContract(StrategyContract):
    strategy_name = "kg_rag"


class TestMetaKGRAGContract(StrategyContract):
    strategy_name = "metakgrag"


class TestMedCoGContract(StrategyContract):
    strategy_name = "medcog"


class HandmadeRemote:
    """A remote knowledge base that is the hand-made graph itself (ids as given), for the contract."""

    endpoint = "http://127.0.0.1:1/sparql"

    def select(self, query: str, *, timeout_s: float | None = None) -> list[Binding]:
        return []

    def fetch(self, ids: Sequence[str], properties: Sequence[str]) -> Bundle:
        whole = store().bundle()
        return Bundle(whole.nodes.filter(pl.col("id").is_in(list(ids))), whole.edges.head(0))


class TestRoboDataContract(StrategyContract):
    strategy_name = "robodata"

    def context(self, client: ScriptedClient | None) -> QAContext:
        return QAContext(
            store=store(),
            embedder=AxisEmbedder(),
            llm=client,
            prices=PRICES,
            knowledge_source=HandmadeRemote(),
            graph_factory=lambda: EmbeddedStore(empty_nodes(), empty_edges()),
        )


class TestExampleStrategyContract(StrategyContract):
    strategy_name = "first_edges"
    registry = EXAMPLE_REGISTRY


class TestInstalledStrategyContract(StrategyContract):
    """A strategy from a package of its own, found through the ``metakg.strategies`` entry points."""

    strategy_name = "word_edges"
    registry = INSTALLED_REGISTRY


def test_an_installed_strategy_is_registered_and_a_broken_one_left_out_with_the_reason() -> None:
    assert INSTALLED_REGISTRY.names[:-1] == tuple(cls.name for cls in BUILT_IN)  # the built-ins first
    assert "word_edges" in INSTALLED_REGISTRY.names and "broken" not in INSTALLED_REGISTRY.names
    (problem,) = INSTALLED_PROBLEMS
    assert "'broken'" in problem and "metakg-example-plugin" in problem and "not a Strategy subclass" in problem
    described = next(d for d in INSTALLED_REGISTRY.describe() if d["name"] == "word_edges")
    assert [s["key"] for s in described["settings"]] == ["k"]


def _contracts() -> list[type[StrategyContract]]:
    found, todo = [], list(StrategyContract.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        found.append(cls)
    return found


def test_every_registered_strategy_has_a_contract_test() -> None:
    contracted = {cls.strategy_name for cls in _contracts()}
    registered = set(REGISTRY.names) | set(EXAMPLE_REGISTRY.names)
    assert not registered - contracted, f"strategies without a StrategyContract subclass: {registered - contracted}"
    assert all(cls.strategy_name in cls.registry.names for cls in _contracts())


def test_the_example_strategy_is_one_module_plus_its_registration() -> None:
    assert "first_edges" not in REGISTRY.names  # not shipped
    settings = QASettings.model_validate({"first_edges": {"k": 1}})
    EXAMPLE_REGISTRY.check(settings)
    strategy = EXAMPLE_REGISTRY.create("first_edges", settings)
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=settings)
    answer = asyncio.run(strategy.answer(MC, ctx))
    assert answer.status == "fail" and answer.reason == "retrieval only: the LLM was not asked (use_llm off)"
    assert answer.evidence and all(len(p.edges) == 1 for p in answer.evidence)
    assert len(answer.evidence) <= len(answer.trace["start_entities"])  # k = 1 edge per start
