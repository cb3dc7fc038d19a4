"""One QA session: the settings, the store questions are answered over, how the LLM is run and the strategy
registry, held together while a process asks (:class:`QASession`).

How the LLM is run is one protocol, :class:`LLMRunner`, with three forms: :class:`NoLLM` (retrieval only,
concepts by rules), :class:`OneShotLLM` (a session opened for one piece of work and closed after it: the
CLI's question or evaluation) and :class:`SharedRunner` (the session a long-lived process keeps,
:class:`~metakg.api.llm.SharedLLM`). The one-shot functions of :mod:`metakg.api.qa` are wrappers over a
session.

    with QASession(settings, StoreChoice(bundle=Path("kg")), runner=NoLLM()) as session:
        answer = session.answer(make_question("What does aspirin treat?"), "metakgrag")
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from metakg.api._shared import Progress, check_identity_settings, quiet
from metakg.api.bundles import embed_bundle
from metakg.api.llm import SharedLLM, llm_session, run_with
from metakg.api.local_graph import local_graph
from metakg.api.stores import open_store, record_provenance
from metakg.api.wikidata import sparql_client
from metakg.config import Settings
from metakg.documents.reader import cite
from metakg.errors import BundleError, OutputError, ResourceBusy, UsageError
from metakg.ingest.wikidata import WikidataFragments
from metakg.llm.client import LLMClient
from metakg.llm.embedder import Embedder, LazyEmbedder
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.progress import Tick
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, Question, Source
from metakg.qa_engine.efficiency import DEFAULT_SCALING, ReferenceSet
from metakg.qa_engine.evaluate import COLUMNS, RunSpec, comparison_table, evaluate, metric_columns
from metakg.qa_engine.events import listening
from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.services import QAServices
from metakg.qa_engine.strategies import REGISTRY as STRATEGIES
from metakg.qa_engine.strategy import Strategy
from metakg.schemas.bundle import read_manifest
from metakg.schemas.graph_store import EdgeSources, GraphStore
from metakg.schemas.tables import empty_edges, empty_nodes
from metakg.schemas.vocabulary import default_vocabulary

T = TypeVar("T")
Work = Callable[[QAContext], Coroutine[Any, Any, T]]


def empty_store_factory(embedder: Embedder) -> Callable[[], GraphStore]:
    """A factory of new, empty embedded stores sharing ``embedder`` (for strategies that grow a local graph)."""

    def make() -> GraphStore:
        return EmbeddedStore(empty_nodes(), empty_edges(), embedder=embedder)

    return make


def check_settings(settings: Settings) -> None:
    """Check what loading the settings cannot: the default strategy exists and every ``[qa.<name>]`` section
    holds that strategy's settings (``config show`` runs it, so a setting ``eval`` would refuse is refused
    there too).

    Raises:
        ConfigError: an unknown default strategy or section, or a bad value (the message names it).
    """
    STRATEGIES.check(settings.qa)
    check_identity_settings(settings)


def qa_context(
    settings: Settings,
    store: GraphStore,
    llm: LLMClient | None,
    *,
    progress: Progress | None = None,
    local: GraphStore | None = None,
    services: QAServices | None = None,
) -> QAContext:
    """A QA context over ``store``: the configured embedder, ``[qa]`` settings, temperature, prices, the SPARQL
    knowledge source, an empty-store factory and the ``local`` graph kept across questions (the caller owns
    it; see :func:`metakg.api.local_graph.local_graph`).

    Raises:
        ConfigError: an unknown default strategy or an invalid ``[qa.<name>]`` section.
    """
    check_settings(settings)
    embedder = LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress or quiet)
    return QAContext(
        store=store,
        embedder=embedder,
        settings=settings.qa,
        llm=llm,
        temperature=settings.llm.temperature,
        prices=settings.llm.prices_per_mtok,
        knowledge_source=WikidataFragments(sparql_client(settings), default_vocabulary()),
        graph_factory=empty_store_factory(embedder),
        local_graph=local,
        cache_dir=settings.paths.cache_dir,
        reuse=services,
    )


def qa_services(settings: Settings, store: GraphStore, bundle: Path | None = None) -> QAServices:
    """Services (caches, the phrase index) to share between the questions a long-lived process answers over
    ``store`` (read from ``bundle``, whose document chunks its answers then cite with their sections); make
    new ones when the graph changes."""
    embedder = LazyEmbedder(settings.embedder, settings.paths.cache_dir, quiet)
    services = QAServices(store, embedder, max_entries=settings.qa.cache_entries, cache_dir=settings.paths.cache_dir)
    services.provenance = record_provenance(bundle) if bundle is not None else {}
    return services


class LLMRunner(Protocol):
    """How a piece of QA work gets its LLM: ``work`` receives a context over ``store`` and is run to its end."""

    def run(
        self,
        settings: Settings,
        store: GraphStore,
        work: Work[T],
        *,
        progress: Progress = quiet,
        services: QAServices | None = None,
    ) -> T: ...


@dataclass(frozen=True)
class NoLLM:
    """Retrieval only: no LLM is asked, the question's concepts are found by rules."""

    def run(
        self,
        settings: Settings,
        store: GraphStore,
        work: Work[T],
        *,
        progress: Progress = quiet,
        services: QAServices | None = None,
    ) -> T:
        rules = settings.model_copy(update={"qa": settings.qa.model_copy(update={"concepts": "rules"})})
        return asyncio.run(work(qa_context(rules, store, None, progress=progress, services=services)))


@dataclass(frozen=True)
class OneShotLLM:
    """An LLM session (and the local graph an agent grows) opened for one piece of work and closed after it."""

    def run(
        self,
        settings: Settings,
        store: GraphStore,
        work: Work[T],
        *,
        progress: Progress = quiet,
        services: QAServices | None = None,
    ) -> T:
        with llm_session(settings, progress=progress) as client, local_graph(settings, progress) as local:
            return run_with(
                client, work(qa_context(settings, store, client, progress=progress, local=local, services=services))
            )


@dataclass(frozen=True)
class SharedRunner:
    """The LLM session a long-lived process keeps (``metakg serve``, ``metakg mcp``), shared by its questions."""

    llm: SharedLLM

    def run(
        self,
        settings: Settings,
        store: GraphStore,
        work: Work[T],
        *,
        progress: Progress = quiet,
        services: QAServices | None = None,
    ) -> T:
        return self.llm.run(
            lambda client, local: work(
                qa_context(settings, store, client, progress=progress, local=local, services=services)
            )
        )


def llm_runner(*, use_llm: bool = True, llm: SharedLLM | None = None) -> LLMRunner:
    """The runner for a call: none without ``use_llm``, the shared session ``llm`` when given, else one-shot."""
    if not use_llm:
        return NoLLM()
    return SharedRunner(llm) if llm is not None else OneShotLLM()


@dataclass(frozen=True)
class EvalOptions:
    """How an evaluation runs: resume from earlier answers (asking failed ones again unless ``keep_failed``),
    the evidence ``budget``, the inference-density ``scaling`` reference (fitted), the run IIE is measured
    against, and a ``tick(label, done, total)`` after each answer."""

    resume: bool = True
    keep_failed: bool = False
    budget: int = 10
    scaling: str | Path | ReferenceSet = DEFAULT_SCALING
    iie_reference: str | None = None
    tick: Tick | None = None


@dataclass(frozen=True)
class StoreChoice:
    """Which store a session opens: the ``bundle`` (embedded) or the configured Neo4j database, as of a time;
    with ``graphless`` and neither given, an empty store (strategies that read no graph)."""

    bundle: Path | None = None
    neo4j: bool = False
    as_of: datetime | None = None
    graphless: bool = False


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation found: the ``summary`` per run label (and the ORACLE row), the number of
    ``questions``, the input lines ``rejected``, the folder ``out``, the comparison table's ``columns``, the
    runs ``skipped`` without an LLM, and whether it was ``retrieval_only``."""

    summary: dict[str, dict[str, Any]]
    questions: int
    out: Path
    columns: list[tuple[str, str]]
    rejected: int = 0
    skipped: list[str] = field(default_factory=list)
    retrieval_only: bool = False

    def failed_runs(self) -> list[str]:
        """The runs whose every answer failed (an unreachable LLM, a graph that matches no question); none for
        a retrieval-only evaluation, whose answers all fail by design."""
        if self.retrieval_only:
            return []
        runs = {label: s for label, s in self.summary.items() if "fail" in s}  # not the ORACLE row
        return [label for label, s in runs.items() if s["questions"] and s["fail"] == s["questions"]]

    @property
    def ok(self) -> bool:
        """No run failed every answer."""
        return not self.failed_runs()

    def table(self) -> str:
        """The comparison table (Markdown): the shared columns, then the strategies' own."""
        return comparison_table(self.summary, self.columns[len(COLUMNS) :])

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON data."""
        return {
            "summary": self.summary,
            "questions": self.questions,
            "rejected": self.rejected,
            "out": str(self.out),
            "columns": [list(c) for c in self.columns],
            "skipped": list(self.skipped),
        }


#: the records cited per evidence edge at most (an edge many records state says how many more)
MAX_SOURCES = 5


def evidence_sources(store: GraphStore, answer: Answer, provenance: dict[str, str]) -> list[Source]:
    """Where each evidence edge is stated: its record ids cited (:func:`cite`), at most :data:`MAX_SOURCES`
    and a count of the rest; edges without records are left out."""
    ids = [e for path in answer.evidence for e in path.edges]
    if not ids or not isinstance(store, EdgeSources):
        return []
    cited: list[Source] = []
    for edge, records in store.edge_records(ids).items():
        shown = list(dict.fromkeys(cite(r, provenance) for r in records))
        if shown:
            more = len(shown) - MAX_SOURCES
            cited.append(Source(edge, tuple(shown[:MAX_SOURCES] + ([f"and {more} more"] if more > 0 else []))))
    return cited


class QASession:
    """Questions over one store with one way of running the LLM and one strategy registry (a context
    manager). ``over`` is a store the caller holds open (left open) or the :class:`StoreChoice` of the store
    to open here (closed with the session). Answers cite the graph's document chunks in their ``sources`` as
    ``services.provenance`` has them, or as the bundle the session opens records them."""

    def __init__(
        self,
        settings: Settings,
        over: GraphStore | StoreChoice,
        *,
        runner: LLMRunner | None = None,
        services: QAServices | None = None,
        registry: StrategyRegistry | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.settings = settings
        self.runner: LLMRunner = runner or OneShotLLM()
        self.registry = registry or STRATEGIES
        self.services = services
        self._progress = progress or quiet
        self._over = over
        self._owned: GraphStore | None = None
        self._cited: dict[str, str] | None = services.provenance if services is not None else None

    @property
    def store(self) -> GraphStore:
        """The store the session answers over (opened by entering the session)."""
        found = self._owned if isinstance(self._over, StoreChoice) else self._over
        if found is None:
            raise RuntimeError("enter the session (with QASession(...) as session) before asking")
        return found

    def __enter__(self) -> QASession:
        if isinstance(self._over, StoreChoice) and self._owned is None:
            where = self._over
            self._owned = open_for_questions(
                self.settings, where.bundle, where.neo4j, graphless=where.graphless, progress=self._progress,
                as_of=where.as_of,
            )  # fmt: skip
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the store the session opened (a store given to it stays open)."""
        owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()

    def strategy(self, name: str | None = None, switches: Sequence[str] = ()) -> Strategy[Any]:
        """The strategy ``name`` (default ``qa.strategy``) with ``switches`` on."""
        return self.registry.create(name or self.settings.qa.strategy, self.settings.qa, list(switches))

    def answer(
        self,
        question: Question,
        strategy: Strategy[Any] | str | None = None,
        *,
        steps: Callable[[dict[str, Any]], None] | None = None,
    ) -> Answer:
        """Answer ``question`` with ``strategy`` (a name, default ``qa.strategy``); ``steps`` receives each step
        of the trace as the strategy takes it. Runs its own event loop: call it from a thread, not a loop.

        Raises:
            UsageError: the strategy needs an LLM even to retrieve, and the session runs without one.
        """
        chosen = strategy if isinstance(strategy, Strategy) else self.strategy(strategy)
        if isinstance(self.runner, NoLLM) and chosen.needs_llm:
            raise UsageError(f"{chosen.name} needs an LLM to answer at all; without one, ask with one of "
                             f"{self.registry.retrieval_only()}.")  # fmt: skip
        if steps is not None:
            with listening(steps):
                return self.answer(question, chosen)
        if isinstance(self.runner, OneShotLLM):
            self._progress(f"answering with {chosen.label}")
        answer = self.runner.run(
            self.settings,
            self.store,
            lambda ctx: chosen.answer(question, ctx),
            progress=self._progress,
            services=self.services,
        )
        answer.sources = evidence_sources(self.store, answer, self._provenance())
        return answer

    def _provenance(self) -> dict[str, str]:
        """How the bundle's document chunks are cited (its extraction's ``provenance``), read once."""
        if self._cited is None:
            bundle = self._over.bundle if isinstance(self._over, StoreChoice) else None
            self._cited = record_provenance(bundle) if bundle is not None else {}
        return self._cited

    def answer_all(self, questions: Sequence[Question], strategy: Strategy[Any] | str | None = None) -> list[Answer]:
        """Answer ``questions`` one after another with ``strategy`` in one run of the LLM (one session)."""
        chosen = strategy if isinstance(strategy, Strategy) else self.strategy(strategy)

        async def answer_each(ctx: QAContext) -> list[Answer]:
            return [await chosen.answer(q, ctx) for q in questions]

        return self.runner.run(self.settings, self.store, answer_each, progress=self._progress, services=self.services)

    def evaluate(
        self, questions: Sequence[Question], runs: Sequence[RunSpec], out_dir: Path, options: EvalOptions
    ) -> EvaluationResult:
        """Every run over ``questions``; the answers, summary and comparison are written into ``out_dir``."""
        summary = self.runner.run(
            self.settings,
            self.store,
            lambda ctx: evaluate(
                list(questions),
                list(runs),
                ctx,
                out_dir,
                self.registry,
                resume=options.resume,
                keep_failed=options.keep_failed,
                budget=options.budget,
                scaling_reference=options.scaling,
                iie_reference=options.iie_reference,
                tick=options.tick,
            ),
            progress=self._progress,
            services=self.services,
        )
        columns = [*COLUMNS, *metric_columns(runs, self.registry)]
        return EvaluationResult(
            summary, len(questions), out_dir, columns, retrieval_only=isinstance(self.runner, NoLLM)
        )


def open_for_questions(
    settings: Settings,
    bundle: Path | None,
    neo4j: bool,
    *,
    graphless: bool,
    progress: Progress,
    as_of: datetime | None = None,
) -> GraphStore:
    """The bundle or Neo4j store (a bundle is given its name embeddings once); with ``graphless`` and neither
    given, an empty store (for strategies that read no graph: the LLM alone, or an agent growing its own).

    Raises:
        UsageError: the store choice is wrong; ConfigError: Neo4j cannot be reached.
    """
    if graphless and bundle is None and not neo4j:
        return EmbeddedStore(empty_nodes(), empty_edges())
    if bundle is not None and not neo4j and as_of is None:
        embedded_names(bundle, settings, progress)
    return open_store(settings, bundle, neo4j=neo4j, as_of=as_of, progress=progress)


def embedded_names(bundle: Path, settings: Settings, progress: Progress) -> None:
    """Give a bundle opened for QA its name embeddings once (``metakg embed``), stored in the bundle, so no
    question embeds the graph's names; a bundle that cannot be written is answered over as it is (its names
    are then embedded in memory by the first question that needs them)."""
    manifest = read_manifest(bundle)
    if "embeddings" in manifest or not manifest.get("counts", {}).get("nodes", 1):
        return
    progress("embedding the node names once for QA; they are stored in the bundle (metakg embed)")
    try:
        embed_bundle(bundle, settings, progress=progress)
    except (BundleError, OutputError, ResourceBusy, OSError) as e:  # read-only, or being written: read as it is
        progress(f"the bundle keeps no name embeddings ({e}); the first question embeds them in memory")
