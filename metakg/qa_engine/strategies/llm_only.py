"""``llm_only``: the LLM alone, no graph; the baseline every paper compares against."""

from __future__ import annotations

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Question
from metakg.qa_engine.strategy import Retrieval, RetrieveThenAnswer, StrategySettings


class LLMOnly(RetrieveThenAnswer[StrategySettings]):
    """The question and its choices go to the LLM with no evidence."""

    name = "llm_only"
    summary = "The LLM alone, no graph (baseline)."
    uses_graph = False
    needs_llm = True

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """No evidence."""
        return Retrieval(None)
