"""``kg_rag``: vanilla KG retrieval, the matched entities' neighbourhoods, most question-like first.

Each start entity's ``neighbours`` most relevant one-edge paths are kept, then all of them are ranked by
relevance across the starts (ties keep the start order), so the evidence order, which the answer prompt
and an evidence budget cut, is the most question-like first.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import EvidencePath, Question, path_records
from metakg.qa_engine.events import emit
from metakg.qa_engine.primitives import find_starts, question_walker
from metakg.qa_engine.strategy import Retrieval, RetrieveThenAnswer, StrategySettings


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
        """The ``neighbours`` most question-like one-edge paths around each start entity, ranked together."""
        matches, trace = await find_starts(question, ctx, client)
        search = question_walker(question, ctx)
        found: list[tuple[float, EvidencePath]] = []
        search.prefetch([m.node.id for m in matches])
        for match in matches:
            around = search.neighbours(match.node.id)
            scores = search.step_weights(around)
            for i in np.argsort(-scores, kind="stable")[: self.settings.neighbours]:
                nb = around[int(i)]
                found.append((float(scores[int(i)]), path_records([match.node, nb.node], [nb.edge])))
        paths = [path for _, path in sorted(found, key=lambda item: -item[0])]  # stable: start order breaks ties
        trace["retrieved_triples"] = len(paths)
        emit("retrieved", triples=[list(t) for p in paths for t in p.triples])
        return Retrieval(paths, trace)
