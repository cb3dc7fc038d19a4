"""``kg_rag``: vanilla KG retrieval, the matched entities' neighbourhoods, most question-like first."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import EvidencePath, Question, path_records
from metakg.qa_engine.primitives import find_starts, retrieval_text
from metakg.qa_engine.strategy import Retrieval, RetrieveThenAnswer, StrategySettings
from metakg.qa_engine.walk import Walker


class KGRagSettings(StrategySettings):
    """``[qa.kg_rag]``."""

    neighbours: int = Field(
        default=10, ge=1, description="Neighbours kept per start entity, the most question-like first."
    )


class KGRag(RetrieveThenAnswer[KGRagSettings]):
    """One-edge paths around each start entity, no refinement."""

    name = "kg_rag"
    summary = "Vanilla KG-RAG: the start entities' neighbourhoods, most question-like first (baseline)."
    Settings = KGRagSettings

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """The ``neighbours`` most question-like one-edge paths around each start entity."""
        matches, trace = await find_starts(question, ctx, client)
        walker = Walker(
            ctx.store, ctx.services, retrieval_text(question, ctx.settings), max_neighbours=ctx.settings.max_neighbours
        )
        paths: list[EvidencePath] = []
        for match in matches:
            around = walker.neighbours(match.node.id)
            scores = np.asarray(walker.q_sim([nb.node for nb in around]))
            for i in np.argsort(-scores, kind="stable")[: self.settings.neighbours]:
                nb = around[int(i)]
                paths.append(path_records([match.node, nb.node], [nb.edge]))
        trace["retrieved_triples"] = len(paths)
        return Retrieval(paths, trace)
