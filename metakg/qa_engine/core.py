"""The QA engine's value types: questions, answers with evidence and usage, the strategy protocol, the context.

A strategy reads the graph only through :class:`~metakg.schemas.graph_store.GraphStore` and talks to
models only through the ``LLMClient`` and ``Embedder`` protocols, all carried by :class:`QAContext`.
Every LLM call of one question goes through a :class:`MeteredClient`, so an answer reports exactly the
calls, tokens, cost and LLM latency it used.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from metakg.config import QASettings
from metakg.llm.client import ChatRequest, Completion, LLMClient
from metakg.llm.embedder import Embedder
from metakg.llm.ledger import price
from metakg.schemas.graph_store import EdgeRecord, GraphStore, NodeRecord

_CHOICE = re.compile(r"^\s*\(?([A-Za-z])\s*[:.)]\s*(.*?)\s*$", re.S)


class QuestionError(ValueError):
    """A question the engine cannot ask; the message is the reason reported with the failed answer."""


@dataclass(frozen=True)
class Question:
    """A question: free text, or multiple choice with lettered choices ``(("A", "text"), ...)``."""

    text: str
    choices: tuple[tuple[str, str], ...] = ()
    id: str = ""
    answer: str | None = None  # the gold letter (or free-text answer), for evaluation
    answer_text: str | None = None

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


@dataclass
class QAUsage:
    """What one answer cost: LLM calls (cache hits included), tokens, USD, and time split by where it went."""

    llm_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    llm_ms: float = 0.0
    retrieval_ms: float = 0.0
    total_ms: float = 0.0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


Status = Literal["ok", "fail"]


@dataclass
class Answer:
    """A strategy's answer: text and letter, evidence paths, the trace, usage; ``status`` fail has a reason."""

    question_id: str
    strategy: str
    status: Status = "ok"
    text: str = ""
    choice: str | None = None
    reason: str | None = None
    evidence: list[EvidencePath] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)
    usage: QAUsage = field(default_factory=QAUsage)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(self)
        data["usage"]["tokens"] = self.usage.tokens
        return data


class MeteredClient:
    """An ``LLMClient`` that counts the calls, tokens, cost and latency of one question."""

    def __init__(self, inner: LLMClient, usage: QAUsage, prices: dict[str, tuple[float, float]]) -> None:
        """Wrap ``inner``; counts go into ``usage``."""
        self._inner = inner
        self._usage = usage
        self._prices = prices

    @property
    def model(self) -> str:
        """The wrapped client's model."""
        return self._inner.model

    async def complete(self, request: ChatRequest, *, tag: str = "") -> Completion:
        """Send ``request`` through the wrapped client and count it."""
        started = time.perf_counter()
        try:
            completion = await self._inner.complete(request, tag=tag)
        finally:
            self._usage.llm_calls += 1
            self._usage.llm_ms += (time.perf_counter() - started) * 1000
        self._usage.cache_hits += int(completion.cached)
        self._usage.prompt_tokens += completion.usage.prompt_tokens
        self._usage.completion_tokens += completion.usage.completion_tokens
        self._usage.cost_usd += price(
            self._prices, completion.model, completion.usage.prompt_tokens, completion.usage.completion_tokens
        )
        return completion


@dataclass
class QAContext:
    """What a strategy works with: the store, the LLM (None for retrieval only), the embedder, the settings."""

    store: GraphStore
    embedder: Embedder
    settings: QASettings
    llm: LLMClient | None = None
    temperature: float = 0.0
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    caches: dict[str, Any] = field(default_factory=dict)  # per-store helpers kept across questions


@dataclass(frozen=True)
class Ablation:
    """MetaKGRAG switches; each True turns one mechanism off."""

    no_completeness: bool = False
    no_relevance: bool = False
    no_restart: bool = False
    no_cycle: bool = False

    NAMES = ("no_completeness", "no_relevance", "no_restart", "no_cycle")

    @classmethod
    def parse(cls, names: str | Sequence[str] | None) -> Ablation:
        """From ``"no_relevance,no_restart"`` (or a list); ``none`` or empty means the full method.

        Raises:
            ValueError: an unknown switch.
        """
        if names is None:
            return cls()
        items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
        unknown = [n for n in items if n not in cls.NAMES and n != "none"]
        if unknown:
            raise ValueError(f"unknown ablation {', '.join(unknown)}; choose from {', '.join(cls.NAMES)}.")
        return cls(**{n: True for n in items if n != "none"})

    @property
    def label(self) -> str:
        """``full`` or the switches joined by ``+``."""
        on = [n for n in self.NAMES if getattr(self, n)]
        return "+".join(on) if on else "full"


class NoEvidence(Exception):
    """Retrieval found nothing to start from; the answer fails with this reason."""


@dataclass
class Retrieval:
    """Evidence paths (None: the strategy uses no graph) and the retrieval trace."""

    paths: list[EvidencePath] | None
    trace: dict[str, Any] = field(default_factory=dict)


class Strategy(Protocol):
    """A QA strategy: retrieval only; answering with the evidence is shared (``strategies.respond``)."""

    name: str

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """Evidence for ``question`` (``client`` is metered, None without an LLM); raises NoEvidence."""
        ...


def path_records(nodes: Sequence[NodeRecord], edges: Sequence[EdgeRecord]) -> EvidencePath:
    """An :class:`EvidencePath` from the records along a path (``edges[i]`` links ``nodes[i]``, ``nodes[i+1]``)."""
    names = {n.id: n.name for n in nodes}
    triples = tuple((names.get(e.src, e.src), e.display or e.rel, names.get(e.dst, e.dst)) for e in edges)
    ends = tuple((e.src, e.dst) for e in edges)
    return EvidencePath(tuple(n.id for n in nodes), tuple(e.id for e in edges), triples, ends)
