"""The strategy contract: ``answer(question, ctx) -> Answer``, and the retrieve-then-answer base.

:meth:`Strategy.answer` is a template method: it owns the flow every strategy shares (check the question,
meter the LLM calls of this answer, time it, turn every expected failure into a failed answer with its
reason) and calls :meth:`Strategy.solve`, the one step a strategy owns. A strategy never raises for a bad
question, a failed LLM call or a graph without evidence.

Retrieve-then-answer methods subclass :class:`RetrieveThenAnswer` and write only :meth:`~RetrieveThenAnswer.retrieve`;
the answer step (evidence lines in a prompt, the reply parsed for a choice letter or a short answer) is shared.

A strategy describes itself to the registry, the harness and the CLI through class attributes and hooks:
``name``, ``summary``, ``Settings`` (its ``[qa.<name>]`` settings model), ``uses_graph``, ``needs_llm`` (it
cannot even retrieve without one: left out of runs without an LLM, not tunable), ``switches()``
(boolean settings the harness may turn on one by one, e.g. MetaKGRAG's ablations), ``metrics()`` and
``summarise()`` (per-question and per-run figures for the evaluation report), ``metric_columns`` (their
comparison-table columns) and ``trace_lines()`` (a short human-readable trace).
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from metakg.errors import MetakgError
from metakg.llm.client import LLMClient
from metakg.llm.usage import MeteredClient, UsageMeter, UsageSummary
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, EvidencePath, NoEvidence, QAUsage, Question, QuestionError
from metakg.qa_engine.primitives import answer_prompt, ask_llm, evidence_lines, parse_choice, parse_free_answer
from metakg.timing import load_ms


def switch_setting(switch: str) -> tuple[str, Any]:
    """The setting a switch sets: ``no_cycle`` -> (``no_cycle``, True), ``route=scot`` -> (``route``, ``scot``)."""
    key, sep, value = switch.partition("=")
    return (key, value) if sep else (key, True)


class StrategySettings(BaseModel):
    """Base of a strategy's settings model (its ``[qa.<name>]`` section); unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


S = TypeVar("S", bound=StrategySettings)


class Strategy(ABC, Generic[S]):
    """A QA strategy. Subclasses set ``name`` and ``summary``, may set ``Settings`` (and the type parameter to
    the same model), and implement :meth:`solve`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Settings: ClassVar[type[StrategySettings]] = StrategySettings
    uses_graph: ClassVar[bool] = True
    needs_llm: ClassVar[bool] = False
    metric_columns: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, settings: S | None = None) -> None:
        """The strategy with ``settings`` (default: its settings model's defaults).

        Raises:
            TypeError: ``settings`` is not an instance of the strategy's ``Settings`` model.
        """
        self.settings: S = settings if settings is not None else cast(S, self.Settings())
        if not isinstance(self.settings, self.Settings):
            raise TypeError(f"{self.name} takes {self.Settings.__name__}, not {type(self.settings).__name__}")

    @staticmethod
    def read_reply(answer: Answer, question: Question, text: str, *, free_text: str | None = None) -> None:
        """Put what a reply answers into ``answer``: for a multiple-choice question the letter it names (in
        ``free_text`` when given, else in ``text``) and that choice's text; otherwise ``free_text`` or the short
        answer read from ``text``. A reply naming no letter, or an empty free-text answer, fails the answer
        with that reason. Every strategy's answer step ends here."""
        if question.choices:
            letter = parse_choice(free_text or text, question)
            if letter is None:
                shown = text.strip()
                shown = shown if len(shown) <= 200 else "..." + shown[-200:]
                answer.fail(f"the reply names no choice letter: {shown!r}")
                return
            answer.choice, answer.text = letter, question.choice_text[letter]
        else:
            answer.text = free_text or parse_free_answer(text)
            if not answer.text:
                answer.fail("the reply is empty")

    @classmethod
    def retrieves_alone(cls) -> bool:
        """Whether it retrieves evidence from the graph without an LLM (what ``eval --no-llm`` and ``tune``
        measure)."""
        return cls.uses_graph and not cls.needs_llm

    @classmethod
    def switches(cls) -> tuple[str, ...]:
        """Settings the harness may turn on to evaluate variants: a boolean setting's name (MetaKGRAG's
        ablations) or ``key=value`` (MedCoG's forced routes, ``route=scot``); none by default."""
        return ()

    @property
    def label(self) -> str:
        """The name, with the switches that are on: ``metakgrag[no_relevance+no_restart]``, ``medcog[route=scot]``."""
        set_to = {s: switch_setting(s) for s in self.switches()}
        on = [s for s, (key, value) in set_to.items() if getattr(self.settings, key, None) == value]
        return f"{self.name}[{'+'.join(on)}]" if on else self.name

    async def answer(self, question: Question, ctx: QAContext) -> Answer:
        """Answer ``question``; never raises for a bad question, a failed LLM call or missing evidence.

        A failed answer has status ``fail`` and a reason. Its usage counts every LLM call made for it
        (recorded once in the context's meter); ``retrieval_ms`` is the wall time spent outside the LLM and
        outside model loads (``setup_ms``: the embedder and spaCy, loaded by the first answer of a process).
        """
        answer = Answer(question_id=question.id, strategy=self.label)
        client = ctx.llm if isinstance(ctx.llm, MeteredClient) else None
        started, loads = time.perf_counter(), load_ms()
        with UsageMeter.scope(f"qa:{self.label}:{question.id}:{uuid.uuid4().hex[:12]}") as scope:
            try:
                question.check()
                await self.solve(question, ctx, client, answer)
            except (QuestionError, NoEvidence, MetakgError) as e:
                answer.fail(str(e))
        total_ms = (time.perf_counter() - started) * 1000
        usage = client.meter.summary(scope=scope) if client is not None else UsageSummary()
        records = client.meter.scope_records(scope) if client is not None else []
        answer.usage = QAUsage.metered(usage, total_ms, records, setup_ms=load_ms() - loads)
        return answer

    @abstractmethod
    async def solve(self, question: Question, ctx: QAContext, client: MeteredClient | None, answer: Answer) -> None:
        """Fill ``answer`` (text, choice, evidence, support, trace) for a checked question.

        ``client`` is the metered LLM (None: retrieval only). Raise :class:`NoEvidence`, ``QuestionError``
        or a ``MetakgError`` to fail the answer with that reason, or call ``answer.fail``.
        """

    def metrics(self, answer: Answer) -> dict[str, float]:
        """Per-question figures for the evaluation report (none by default)."""
        return {}

    @classmethod
    def summarise(cls, metrics: Sequence[dict[str, float]]) -> dict[str, Any]:
        """Per-run figures from the questions' :meth:`metrics` (none by default)."""
        return {}

    def trace_lines(self, answer: Answer) -> list[str]:
        """A short human-readable trace of ``answer`` (none by default)."""
        return []


@dataclass
class Retrieval:
    """Evidence paths (None: the strategy uses no graph) and the retrieval trace."""

    paths: list[EvidencePath] | None
    trace: dict[str, Any] = field(default_factory=dict)


class RetrieveThenAnswer(Strategy[S]):
    """Retrieve evidence, then the shared answer step. Subclasses implement :meth:`retrieve` only."""

    @abstractmethod
    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """Evidence for ``question`` (``client`` is metered, None without an LLM); raises NoEvidence."""

    async def solve(self, question: Question, ctx: QAContext, client: MeteredClient | None, answer: Answer) -> None:
        """Retrieve, then answer with the evidence (a fail without an LLM: retrieval only)."""
        retrieval = await self.retrieve(question, ctx, client)
        answer.trace.update(retrieval.trace)
        answer.evidence = retrieval.paths or []
        if client is None:
            answer.fail("retrieval only: the LLM was not asked (use_llm off)")
            return
        await answer_with_evidence(question, retrieval.paths, ctx, client, answer)

    def trace_lines(self, answer: Answer) -> list[str]:
        """The concepts and start entities, when the strategy found them."""
        trace = answer.trace
        if "concepts" not in trace:
            return []
        starts = [f"{s['name']} ({s['score']})" for s in trace.get("start_entities", [])]
        return [
            f"concepts, by {trace['concept_method']}: {', '.join(trace['concepts']) or '-'}",
            f"start entities: {', '.join(starts) or '-'}",
        ]


async def answer_with_evidence(
    question: Question, evidence: list[EvidencePath] | None, ctx: QAContext, client: LLMClient, answer: Answer
) -> None:
    """Ask the LLM with the evidence (None: no graph) and fill the answer; a fail when a multiple-choice reply
    names no letter or a free-text reply is empty."""
    lines = None if evidence is None else evidence_lines(evidence, ctx.settings.max_evidence)
    reply = await ask_llm(
        client, ctx, answer_prompt(question, lines), ctx.settings.answer_max_tokens, f"qa:{answer.strategy}"
    )
    answer.trace["evidence_lines"] = lines
    answer.trace["reply"] = reply.text
    Strategy.read_reply(answer, question, reply.text)
