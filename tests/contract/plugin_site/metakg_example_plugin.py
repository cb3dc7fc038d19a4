"""A strategy shipped in a package of its own (``metakg_example_plugin``), found through the
``metakg.strategies`` entry-point group: the evidence is each start entity's neighbours whose relation
names a word of the question, else its first ``k``."""

from __future__ import annotations

from pydantic import Field

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Question, path_records
from metakg.qa_engine.primitives import find_starts
from metakg.qa_engine.strategy import Retrieval, RetrieveThenAnswer, StrategySettings


class WordEdgesSettings(StrategySettings):
    """``[qa.word_edges]``."""

    k: int = Field(default=3, ge=1, description="Edges kept per start entity when no relation names a word.")


class WordEdges(RetrieveThenAnswer[WordEdgesSettings]):
    """Each start entity's edges whose relation is a word of the question, else its first ``k`` edges."""

    name = "word_edges"
    summary = "Edges whose relation is a word of the question (an installed example)."
    Settings = WordEdgesSettings

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        matches, trace = await find_starts(question, ctx, client)
        words = set(question.text.lower().replace("?", " ").split())
        paths = []
        for m in matches:
            around = ctx.store.neighbours(m.node.id, limit=50)
            named = [nb for nb in around if set(nb.edge.rel.split("_")) & words] or around[: self.settings.k]
            paths += [path_records([m.node, nb.node], [nb.edge]) for nb in named]
        return Retrieval(paths, trace)


class NotAStrategy:
    """What a broken plugin names: the registry leaves it out and says why."""
