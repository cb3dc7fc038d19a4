"""The QA engine's value types: questions, and answers with their evidence, support sets, trace and usage."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from metakg.llm.usage import UsageRecord, UsageSummary
from metakg.schemas.bundle import Bundle
from metakg.schemas.graph_store import EdgeRecord, NodeRecord

_CHOICE = re.compile(r"^\s*\(?([A-Za-z])\s*[:.)]\s*(.*?)\s*$", re.S)


class QuestionError(ValueError):
    """A question the engine cannot ask; the message is the reason reported with the failed answer."""


_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]{2,})[\"\u201d]")


def marked_topic(text: str) -> tuple[str, str | None]:
    """The question without the brackets of its topic entity, and that entity: ``[X]`` (MetaQA's mark,
    the brackets dropped) or a double-quoted name (the quotes kept); None when nothing is marked."""
    bracketed = _BRACKETED.search(text)
    if bracketed:
        return _BRACKETED.sub(r"\1", text), bracketed.group(1).strip() or None
    quoted = _QUOTED.search(text)
    return text, quoted.group(1).strip() if quoted else None


@dataclass(frozen=True)
class Question:
    """A question: free text, or multiple choice with lettered choices ``(("A", "text"), ...)``."""

    text: str
    choices: tuple[tuple[str, str], ...] = ()
    id: str = ""
    answer: str | None = None  # the gold letter (or free-text answer), for evaluation
    answer_text: str | None = None
    answers: tuple[str, ...] = ()  # every gold answer text (a free-text question may have several)
    topic: str | None = None  # the entity the question is about, when it is marked ([X] or "X")

    @property
    def gold_texts(self) -> tuple[str, ...]:
        """The gold answer texts: ``answers``, else ``answer_text`` (empty when the question has no gold)."""
        return self.answers or ((self.answer_text,) if self.answer_text else ())

    @classmethod
    def parse_choices(cls, choices: Sequence[str]) -> tuple[tuple[str, str], ...]:
        """Choices written ``"A: text"`` (also ``A.``, ``A)`` and ``(A)``) as (letter, text) pairs.

        Raises:
            QuestionError: a choice has no letter, a letter repeats, or a choice is empty.
        """
        parsed: list[tuple[str, str]] = []
        for number, choice in enumerate(choices, start=1):
            match = _CHOICE.match(choice)
            if not match or not match.group(2):
                raise QuestionError(f"choice {number} ({choice!r}) has no letter; write choices as 'A: text'.")
            parsed.append((match.group(1).upper(), match.group(2)))
        letters = [letter for letter, _ in parsed]
        if len(set(letters)) != len(letters):
            raise QuestionError(f"choice letters repeat: {', '.join(letters)}.")
        return tuple(parsed)

    def check(self) -> None:
        """Raises :class:`QuestionError` when the question cannot be asked (empty text, empty choice)."""
        if not self.text.strip():
            raise QuestionError("the question is empty.")
        for letter, text in self.choices:
            if not re.fullmatch(r"[A-Z]", letter) or not text.strip():
                raise QuestionError(f"choice {letter!r}: {text!r} needs a capital letter and a text.")

    @property
    def choice_text(self) -> dict[str, str]:
        """Letter -> choice text."""
        return dict(self.choices)


@dataclass(frozen=True)
class EvidencePath:
    """A path of the graph: node ids in walk order, edge ids (all present in the store), and per edge its
    stored direction (src id, dst id) and the triple it reads as (src name, relation, dst name)."""

    nodes: tuple[str, ...]
    edges: tuple[str, ...]
    triples: tuple[tuple[str, str, str], ...]
    ends: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ClaimSupport:
    """A claim of an answer (a sentence) and the graph elements that back it: node and edge ids of the store
    the answer was given over (or of the local graph a strategy built, which its trace names)."""

    claim: str
    nodes: tuple[str, ...] = ()
    edges: tuple[str, ...] = ()
    verified: bool | None = None  # None: not checked; False: some id does not exist
    problems: tuple[str, ...] = ()  # why a checked claim is not supported


@dataclass(frozen=True)
class Source:
    """Where an evidence edge comes from: the input records that state it, cited (``report.pdf p. 12, 3.2
    Methods``, ``quiz.jsonl:7``)."""

    edge: str
    cited: tuple[str, ...]


@dataclass
class QAUsage:
    """What one answer cost: LLM calls (cache hits included), billed tokens and USD (a cached reply costs
    nothing; its tokens are ``saved_tokens``), the list cost (every call priced as if fresh: what the method
    costs, the figure efficiency is measured by), and the time split by where it went."""

    llm_calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    saved_tokens: int = 0
    cost_usd: float = 0.0
    list_cost_usd: float = 0.0
    llm_ms: float = 0.0
    retrieval_ms: float = 0.0
    setup_ms: float = 0.0  # loading models (embedder, spaCy) during this answer: the first answer of a process
    total_ms: float = 0.0
    calls: list[dict[str, Any]] = field(default_factory=list)  # one entry per LLM call, in order

    @property
    def tokens(self) -> int:
        """Billed prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def metered(
        cls, usage: UsageSummary, total_ms: float, records: Sequence[UsageRecord] = (), setup_ms: float = 0.0
    ) -> QAUsage:
        """One answer's usage from its metered calls, its wall time and the part of it spent loading models
        (retrieval: the time outside the LLM and the model loads);
        ``records`` (the calls themselves) become ``calls``: per call its tag, tokens (prompt plus completion,
        whether billed or served by the cache), whether cached, billed and list cost, latency and error."""
        return cls(
            llm_calls=usage.llm_calls,
            cache_hits=usage.cache_hits,
            failures=usage.failures,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            saved_tokens=usage.saved_tokens,
            cost_usd=usage.cost_usd,
            list_cost_usd=usage.list_cost_usd,
            llm_ms=usage.llm_ms,
            retrieval_ms=max(0.0, total_ms - usage.llm_ms - setup_ms),
            setup_ms=setup_ms,
            total_ms=total_ms,
            calls=[
                {
                    "tag": r.tag,
                    "tokens": r.prompt_tokens + r.completion_tokens + r.saved_tokens,
                    "cached": r.cached,
                    "cost_usd": round(r.cost_usd, 8),
                    "list_cost_usd": round(r.list_cost_usd, 8),
                    "latency_ms": round(r.latency_s * 1000, 1),
                    "error": r.error,
                }
                for r in records
            ],
        )


Status = Literal["ok", "fail"]


@dataclass
class Answer:
    """A strategy's answer: text and letter, evidence paths, per-claim support sets, the trace (JSON-ready,
    shaped by the strategy), usage; ``status`` fail has a reason."""

    question_id: str
    strategy: str
    status: Status = "ok"
    text: str = ""
    choice: str | None = None
    reason: str | None = None
    evidence: list[EvidencePath] = field(default_factory=list)
    support: list[ClaimSupport] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)
    usage: QAUsage = field(default_factory=QAUsage)
    #: where the graph's inputs state each evidence edge (set by the session)
    sources: list[Source] = field(default_factory=list)
    local_graph: Bundle | None = field(default=None, repr=False)  # the graph an agent grew (not serialised)

    def fail(self, reason: str) -> None:
        """Mark the answer failed with ``reason``."""
        self.status, self.reason = "fail", reason

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(replace(self, local_graph=None))
        data.pop("local_graph")
        data["usage"]["tokens"] = self.usage.tokens
        return data


class NoEvidence(Exception):
    """Retrieval found nothing to start from; the answer fails with this reason."""


def path_records(nodes: Sequence[NodeRecord], edges: Sequence[EdgeRecord]) -> EvidencePath:
    """An :class:`EvidencePath` from the records along a path (``edges[i]`` links ``nodes[i]``, ``nodes[i+1]``)."""
    names = {n.id: n.name for n in nodes}
    triples = tuple((names.get(e.src, e.src), e.display or e.rel, names.get(e.dst, e.dst)) for e in edges)
    ends = tuple((e.src, e.dst) for e in edges)
    return EvidencePath(tuple(n.id for n in nodes), tuple(e.id for e in edges), triples, ends)
