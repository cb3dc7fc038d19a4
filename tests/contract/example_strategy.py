"""The example strategy of docs/qa-engine.md ("Adding a strategy"): registered by the tests, not shipped."""

from __future__ import annotations

from pydantic import Field

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Question, path_records
from metakg.qa_engine.primitives import find_starts
from metakg.qa_engine.strategies import REGISTRY
from metakg.qa_engine.strategy import Retrieval, RetrieveThenAnswer, StrategySettings


class FirstEdgesSettings(StrategySettings):
    """``[qa.first_edges]``."""

    k: int = Field(default=3, ge=1, description="Edges kept per start entity, in the store's order.")


class FirstEdges(RetrieveThenAnswer[FirstEdgesSettings]):
    """Evidence: the first ``k`` edges of each start entity, unranked."""

    name = "first_edges"
    summary = "The first k edges of each start entity (an example)."
    Settings = FirstEdgesSettings

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        matches, trace = await find_starts(question, ctx, client)
        paths = [
            path_records([m.node, nb.node], [nb.edge])
            for m in matches
            for nb in ctx.store.neighbours(m.node.id, limit=self.settings.k)
        ]
        return Retrieval(paths, trace)


#: the built-in strategies plus the example
EXAMPLE_REGISTRY = REGISTRY.copy()
EXAMPLE_REGISTRY.register(FirstEdges)
