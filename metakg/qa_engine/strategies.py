"""The strategies (``llm_only``, ``kg_rag``, ``metakgrag``) and :func:`answer_question`, which runs any of them.

Every strategy splits into retrieval (evidence paths and a trace) and one shared answering step, so
``retrieve`` alone can be timed or inspected without an LLM.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from metakg.errors import MetakgError, UsageError
from metakg.llm.client import LLMClient, Message, request
from metakg.qa_engine.core import (
    Ablation,
    Answer,
    EvidencePath,
    MeteredClient,
    NoEvidence,
    QAContext,
    Question,
    QuestionError,
    Retrieval,
    Strategy,
    path_records,
)
from metakg.qa_engine.metakgrag import Walker, merge_paths, refine
from metakg.qa_engine.primitives import (
    EntityMatch,
    answer_prompt,
    evidence_lines,
    extract_concepts,
    match_entities,
    parse_choice,
    parse_free_answer,
    similarity,
)


class GraphStrategy:
    """Concept extraction and entity matching shared by the graph strategies."""

    async def starts(
        self, question: Question, ctx: QAContext, client: LLMClient | None
    ) -> tuple[list[EntityMatch], dict[str, Any]]:
        """The start entities of ``question`` and the trace of how they were found; raises NoEvidence."""
        concepts, how = await extract_concepts(question, ctx, client)
        matches = match_entities(concepts, ctx)[: ctx.settings.max_starts]
        trace: dict[str, Any] = {
            "concepts": concepts,
            "concept_method": how,
            "start_entities": [
                {"concept": m.concept, "id": m.node.id, "name": m.node.name, "score": round(m.score, 4), "match": m.how}
                for m in matches
            ],
        }
        if not matches:
            reason = "no concept was found in the question" if not concepts else "no graph entity matches the concepts"
            raise NoEvidence(f"{reason} ({', '.join(concepts) or 'none'}; tau_entity={ctx.settings.tau_entity}).")
        return matches, trace

    @staticmethod
    def walker(question: Question, ctx: QAContext) -> Walker:
        """A greedy walker over the context's store, sharing the context's similarity and neighbour caches."""
        return Walker(ctx.store, similarity(ctx), question.text, ctx.settings, ctx.caches.setdefault("neighbours", {}))


class LLMOnly:
    """The LLM alone, no graph: the baseline every paper compares against."""

    name = "llm_only"

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """No evidence."""
        return Retrieval(None)


class KGRag(GraphStrategy):
    """Vanilla KG-RAG: the matched entities' neighbourhoods (most question-like first), no refinement."""

    name = "kg_rag"

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """One-edge paths around each start entity, ``kg_rag_neighbours`` each."""
        matches, trace = await self.starts(question, ctx, client)
        walker = self.walker(question, ctx)
        paths: list[EvidencePath] = []
        for match in matches:
            around = walker.neighbours(match.node.id)
            scores = np.asarray(walker.q_sim([nb.node for nb in around]))
            for i in np.argsort(-scores, kind="stable")[: ctx.settings.kg_rag_neighbours]:
                nb = around[int(i)]
                paths.append(path_records([match.node, nb.node], [nb.edge]))
        trace["retrieved_triples"] = len(paths)
        return Retrieval(paths, trace)


class MetaKGRAG(GraphStrategy):
    """MetaKGRAG: greedy multi-start paths refined by the Perceive-Evaluate-Adjust cycle (see ``metakgrag``)."""

    name = "metakgrag"

    def __init__(self, ablation: Ablation | None = None) -> None:
        """The full method, or with the ``ablation`` switches off."""
        self.ablation = ablation or Ablation()

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """The refined paths of every start entity, merged, and the cycle trace."""
        matches, trace = await self.starts(question, ctx, client)
        walker = self.walker(question, ctx)
        concepts = list(trace["concepts"])
        finals, starts = [], []
        for match in matches:
            _initial, final, start_trace = refine(match.node, concepts, walker, ctx.settings, self.ablation)
            finals.append(final)
            starts.append(start_trace)
        refined = sum(1 for s in starts if s["refined"])
        trace.update(
            {
                "ablation": self.ablation.label,
                "paths": starts,
                "cycles": sum(len(s["cycles"]) for s in starts),
                "refined_paths": refined,
                "path_refinement_rate": refined / len(starts),
            }
        )
        return Retrieval(merge_paths(finals), trace)


STRATEGIES = ("llm_only", "kg_rag", "metakgrag")


def make_strategy(name: str, ablation: Ablation | None = None) -> Strategy:
    """The strategy called ``name`` (ablations apply to metakgrag only).

    Raises:
        UsageError: an unknown name, or an ablation for a strategy without switches.
    """
    if name == "metakgrag":
        return MetaKGRAG(ablation)
    if ablation is not None and ablation.label != "full":
        raise UsageError(f"ablations ({ablation.label}) apply to metakgrag only, not {name}.")
    if name == "llm_only":
        return LLMOnly()
    if name == "kg_rag":
        return KGRag()
    raise UsageError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}.")


async def respond(
    question: Question, evidence: list[EvidencePath] | None, ctx: QAContext, client: LLMClient, answer: Answer
) -> None:
    """Ask the LLM with the evidence and fill the answer (a fail when a multiple-choice reply has no letter)."""
    lines = None if evidence is None else evidence_lines(evidence, ctx.settings.max_evidence)
    prompt = answer_prompt(question, lines)
    reply = await client.complete(
        request(
            [Message("user", prompt)],
            model=client.model,
            temperature=ctx.temperature,
            max_tokens=ctx.settings.answer_max_tokens,
        ),
        tag=f"qa:{answer.strategy}",
    )
    answer.trace["evidence_lines"] = lines
    answer.trace["reply"] = reply.text
    if question.choices:
        letter = parse_choice(reply.text, question)
        if letter is None:
            answer.status = "fail"
            answer.reason = f"the reply names no choice letter: {reply.text.strip()[:200]!r}"
            return
        answer.choice = letter
        answer.text = question.choice_text[letter]
    else:
        answer.text = parse_free_answer(reply.text)
        if not answer.text:
            answer.status, answer.reason = "fail", "the reply is empty"


async def answer_question(
    strategy: Strategy, question: Question, ctx: QAContext, *, label: str | None = None
) -> Answer:
    """Answer ``question`` with ``strategy``; never raises for a bad question, a failed LLM call or no evidence.

    Failed answers have status ``fail`` and a reason. Usage counts every LLM call made for this question;
    ``retrieval_ms`` is the wall time spent outside the LLM.
    """
    answer = Answer(question_id=question.id, strategy=label or strategy.name)
    metered = MeteredClient(ctx.llm, answer.usage, ctx.prices) if ctx.llm is not None else None
    started = time.perf_counter()
    try:
        question.check()
        retrieval = await strategy.retrieve(question, ctx, metered)
        answer.trace.update(retrieval.trace)
        answer.evidence = retrieval.paths or []
        if metered is None:
            answer.status, answer.reason = "fail", "no LLM is configured (retrieval only)"
        else:
            await respond(question, retrieval.paths, ctx, metered, answer)
    except (QuestionError, NoEvidence, MetakgError) as e:
        answer.status, answer.reason = "fail", str(e)
    finally:
        answer.usage.total_ms = (time.perf_counter() - started) * 1000
        answer.usage.retrieval_ms = max(0.0, answer.usage.total_ms - answer.usage.llm_ms)
    return answer
