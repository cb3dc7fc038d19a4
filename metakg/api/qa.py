"""Questions over a graph: one question (``ask``), a benchmark (``evaluate_benchmark``), the strategies.

Strategies come from the registry (:data:`STRATEGIES`), each built with its ``[qa.<name>]`` settings. The
context a strategy answers in gets the store, the metered LLM, the embedder, and two services: the
configured SPARQL endpoint as a read-only knowledge source (nothing is sent until a strategy asks) and a
factory of empty embedded stores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from metakg.api._shared import JsonResult, Progress, at_least_one, quiet
from metakg.api.session import (
    EvalOptions,
    EvaluationResult,
    LLMRunner,
    NoLLM,
    OneShotLLM,
    QASession,
    StoreChoice,
    qa_context,
    qa_services,
)
from metakg.config import Settings
from metakg.errors import InputDataError, UsageError
from metakg.ingest.datasets import QUESTION_FORMATS, DatasetFormat, DatasetRead, read_dataset
from metakg.qa_engine.core import Answer, Question, QuestionError, marked_topic
from metakg.qa_engine.efficiency import ReferenceSet, load_reference
from metakg.qa_engine.evaluate import (
    COLUMNS,
    RunSpec,
    comparison_table,
    p_text,
    paired_text,
    run_specs,
    sign_test,
)
from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.services import QAServices
from metakg.qa_engine.strategies import PLUGIN_PROBLEMS
from metakg.qa_engine.strategies import REGISTRY as STRATEGIES
from metakg.qa_engine.strategy import Strategy
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.locks import locked

__all__ = [
    "COLUMNS",
    "EVAL_FORMATS",
    "STRATEGIES",
    "Answer",
    "AnswerSnapshot",
    "Benchmark",
    "Question",
    "RunSpec",
    "Runs",
    "StrategyInfo",
    "answer_over",
    "answer_snapshot",
    "ask",
    "comparison_table",
    "create_strategy",
    "describe_strategies",
    "evaluate_benchmark",
    "make_question",
    "p_text",
    "paired_text",
    "qa_context",
    "qa_services",
    "read_questions",
    "sign_test",
    "strategies_left_out",
    "trace_lines",
]

#: the formats of question sets (the reader registry's, :data:`metakg.ingest.datasets.READERS`)
EVAL_FORMATS: tuple[DatasetFormat, ...] = QUESTION_FORMATS


def make_question(text: str, choices: Sequence[str] = (), *, question_id: str = "q1") -> Question:
    """A question from text and ``"A: ..."`` choices.

    Raises:
        UsageError: a choice without a letter (the message names it).
    """
    try:
        text, topic = marked_topic(text)
        return Question(text, Question.parse_choices(choices), question_id, topic=topic)
    except QuestionError as e:
        raise UsageError(str(e)) from e


def _switches(value: str | Sequence[str] | None) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [s.strip() for s in items if s.strip() and s.strip() != "none"]


def create_strategy(
    settings: Settings, name: str | None = None, switches: str | Sequence[str] | None = None
) -> Strategy[Any]:
    """The strategy ``name`` (default ``qa.strategy``) with its ``[qa.<name>]`` settings and ``switches`` on.

    Raises:
        UsageError: an unknown strategy or switch; ConfigError: an invalid settings section.
    """
    return STRATEGIES.create(name or settings.qa.strategy, settings.qa, _switches(switches))


def ask(
    settings: Settings,
    question: Question,
    *,
    over: StoreChoice | None = None,
    strategy: str | None = None,
    switches: str | Sequence[str] | None = None,
    runner: LLMRunner | None = None,
    progress: Progress | None = None,
    steps: Callable[[dict[str, Any]], None] | None = None,
) -> Answer:
    """Answer one question over the bundle or Neo4j ``over`` names (with ``as_of``, the graph as it was
    recorded then; see :func:`~metakg.api.stores.open_store`) with ``strategy`` (default ``qa.strategy``).

    ``runner``: how the LLM runs (default: a session opened for this question; :class:`NoLLM`: retrieval
    only, concepts by rules, and the answer fails with that reason). The store is opened and closed here;
    ``steps`` receives each step of the trace as it is taken.

    Raises:
        UsageError: an unknown strategy or switch, a strategy that needs an LLM without one, or the store
            choice is wrong.
        ConfigError: an invalid ``[qa.<name>]`` section, or Neo4j cannot be reached.
    """
    say = progress or quiet
    chosen = create_strategy(settings, strategy, switches)
    say("loading the store")
    where = replace(over or StoreChoice(), graphless=not chosen.uses_graph)
    with QASession(settings, where, runner=runner, progress=say) as session:
        return session.answer(question, chosen, steps=steps)


@dataclass(frozen=True)
class AnswerSnapshot(JsonResult):
    """Everything a page needs to show one answer without a server: the ``question`` (text and lettered
    choices), the ``answer`` with its ``trace_lines``, the ``steps`` heard while it was made, the store's
    ``counts``, the records of the evidence ``nodes`` and of their ``neighbours`` (the first
    ``neighbour_limit`` of each)."""

    question: dict[str, Any]
    answer: dict[str, Any]
    steps: list[dict[str, Any]]
    counts: dict[str, Any]
    nodes: dict[str, Any]
    neighbours: dict[str, Any]
    neighbour_limit: int


@dataclass(frozen=True)
class StrategyInfo(JsonResult):
    """A registered strategy: its ``name`` and ``summary``, its settings ``section`` (``qa.<name>``), whether
    it ``uses_graph``, whether it ``needs_llm`` even to retrieve, the ``switches`` an ablation turns on, and
    its ``settings`` (key, type, default, description)."""

    name: str
    summary: str
    section: str
    uses_graph: bool
    needs_llm: bool
    switches: list[str]
    settings: list[dict[str, Any]]


def answer_snapshot(
    store: GraphStore,
    question: Question,
    answer: Answer,
    steps: Sequence[dict[str, Any]] = (),
    *,
    neighbours: int = 25,
) -> AnswerSnapshot:
    """Everything a page needs to show ``answer`` without a server: the question, the answer with its trace
    lines, the ``steps`` heard while it was made, the store's counts, and the records and first
    ``neighbours`` neighbours of every evidence node (read from ``store`` while it is open)."""
    ids = list(dict.fromkeys(n for path in answer.evidence for n in path.nodes))
    records: dict[str, Any] = {}
    around: dict[str, Any] = {}
    for node_id in ids:
        node = store.get_node(node_id)
        if node is None:
            continue
        records[node_id] = asdict(node)
        found = store.neighbours(node_id, limit=neighbours)
        around[node_id] = [asdict(nb) for nb in found]
        for nb in found:
            records.setdefault(nb.node.id, asdict(nb.node))
    return AnswerSnapshot(
        question={"text": question.text, "choices": [f"{letter}: {text}" for letter, text in question.choices]},
        answer=answer.to_dict() | {"trace_lines": trace_lines(answer)},
        steps=list(steps),
        counts=store.counts(),
        nodes=records,
        neighbours=around,
        neighbour_limit=neighbours,
    )


def answer_over(
    settings: Settings,
    store: GraphStore,
    question: Question,
    strategy: Strategy[Any],
    *,
    runner: LLMRunner | None = None,
    progress: Progress | None = None,
    steps: Callable[[dict[str, Any]], None] | None = None,
    services: QAServices | None = None,
) -> Answer:
    """Answer ``question`` with ``strategy`` over a store the caller holds open (``metakg serve`` keeps one
    for the process). ``runner``: how the LLM runs (default: a session opened for this question;
    :class:`SharedRunner` over the session a long-lived process keeps; :class:`NoLLM`: retrieval only).
    ``steps`` receives each step of the trace as the strategy takes it (concepts found, a start's refined
    path, ...); ``services``: caches shared with other questions over this store (:func:`qa_services`).
    Runs its own event loop: call it from a thread, not from a running loop."""
    session = QASession(settings, store, runner=runner, services=services, progress=progress)
    return session.answer(question, strategy, steps=steps)


def trace_lines(answer: Answer) -> list[str]:
    """The short trace the answering strategy writes for people."""
    name = answer.strategy.split("[", 1)[0]
    if name not in STRATEGIES.names:
        return []
    return STRATEGIES.create(name).trace_lines(answer)


def describe_strategies() -> list[StrategyInfo]:
    """Every registered strategy with its summary, settings section, switches and settings."""
    return [StrategyInfo(**d) for d in STRATEGIES.describe()]


def strategies_left_out() -> list[str]:
    """The strategies installed packages name (entry-point group ``metakg.strategies``) that could not be
    loaded, each with the reason."""
    return list(PLUGIN_PROBLEMS)


def read_questions(
    path: Path, fmt: DatasetFormat, *, limit: int | None = None, skip: int = 0
) -> tuple[list[Question], DatasetRead]:
    """The questions of a benchmark file (the records with a question) and the dataset read report;
    ``skip`` leaves out the first questions and ``limit`` keeps the next N.

    Raises:
        InputDataError: the file cannot be read; UsageError: an unknown format, ``limit`` below 1 or
            ``skip`` below 0.
    """
    at_least_one("--limit", limit)
    if skip < 0:
        raise UsageError(f"--skip must be 0 or more, got {skip}.")
    read = read_dataset(path, fmt, limit=None if limit is None else skip + limit)
    questions = [
        Question(
            text=row["question"],
            choices=tuple(zip(row["option_labels"] or [], row["option_texts"] or [], strict=True)),
            id=row["record_id"],
            answer=row["answer"],
            answer_text=row["answer_text"],
            answers=tuple(row["answers"] or ()),
            topic=row["concept"] if fmt == "metaqa" else None,  # MetaQA marks its topic entity [X]
        )
        for row in read.records.iter_rows(named=True)
        if row["kind"] == "qa"
    ]
    return questions[skip:], read


def no_questions(path: Path, fmt: str, skip: int, read: DatasetRead, rejects: Path | None = None) -> InputDataError:
    """The error for a question file that gave no question: with the first reject's reason, and where the
    others are (``rejects``, when they were written)."""
    said = f"{path} holds no question in the {fmt} format after skipping {skip}"
    if read.rejects.height:
        first = read.rejects.row(0, named=True)
        said += f" ({read.rejects.height} records rejected; the first, {first['record']}: {first['reason']}"
        said += f"; every one with its reason in {rejects})" if rejects else ")"
    return InputDataError(said + ".")


@dataclass(frozen=True)
class Benchmark:
    """A question file in one of :data:`EVAL_FORMATS`: ``skip`` leaves out its first questions and ``limit``
    keeps the next N (tune on one part of a file, report on the rest)."""

    path: Path
    fmt: DatasetFormat
    limit: int | None = None
    skip: int = 0


@dataclass(frozen=True)
class Runs:
    """The runs of an evaluation: each strategy, and each with its switch variants (``ablations``: switches,
    or ``all`` for one run per switch), built by ``registry`` (default: the shipped one)."""

    strategies: Sequence[str]
    ablations: Sequence[str] = ()
    registry: StrategyRegistry | None = None

    def check(self) -> None:
        """Refuse an unknown strategy, or an ablation no chosen strategy offers, before anything runs.

        Raises:
            UsageError: naming the strategy or the switch.
        """
        run_specs(self.strategies, self.ablations, self.registry or STRATEGIES)


@locked("out_dir", "the evaluation folder")
def evaluate_benchmark(
    settings: Settings,
    benchmark: Benchmark,
    out_dir: Path,
    runs: Runs,
    *,
    over: GraphStore | StoreChoice | None = None,
    runner: LLMRunner | None = None,
    options: EvalOptions | None = None,
    progress: Progress | None = None,
) -> EvaluationResult:
    """Run strategies (and their switch variants, e.g. MetaKGRAG ablations) over a benchmark; writes the
    answers, summary and comparison into ``out_dir``.

    ``over``: a store the caller holds open (``metakg serve``; left open) or the :class:`StoreChoice` to open
    (``graphless`` there runs over an empty graph, for runs that read none, such as MedCoG's SCoT route
    building a case bank; it is implied when no run reads a graph). ``runner``: how the LLM runs (default:
    a session opened for the run; :class:`NoLLM` evaluates retrieval only). ``options``: resume, the
    evidence ``budget`` of the recall-at-budget figures, the reference set of the inference density
    (``scaling``: a name, a CSV or an eval report of the user's own runs) and the run IIE is measured against
    (both checked before any question is asked), and a ``tick`` after each answer.
    Input lines that are not questions go to ``out_dir/rejects.csv`` with their reason. A re-run resumes
    from the answers in ``out_dir`` (failed ones are asked again unless ``keep_failed``). With
    :class:`NoLLM` only the graph strategies run, retrieval only (concepts by rules): the report then holds
    the evidence metrics and retrieval times, and every answer fails with "retrieval only: the LLM was not
    asked".

    Returns:
        the :class:`EvaluationResult`: the summary keyed by run label, the questions, the rejected input lines,
        the comparison table's columns and the runs left out without an LLM.

    Raises:
        UsageError: unknown strategy, switch or format, or a wrong store choice.
        InputDataError: the benchmark file cannot be read, or it holds no question.
    """
    say = progress or quiet
    options = options or EvalOptions()
    runner = runner or OneShotLLM()
    where = over if over is not None else StoreChoice()
    registry = runs.registry or STRATEGIES
    path, fmt, limit, skip = benchmark.path, benchmark.fmt, benchmark.limit, benchmark.skip
    strategies, ablations, budget = runs.strategies, runs.ablations, options.budget
    iie_reference, use_llm = options.iie_reference, not isinstance(runner, NoLLM)
    if fmt not in EVAL_FORMATS:
        raise UsageError(f"unknown benchmark format {fmt!r}; choose one of {', '.join(EVAL_FORMATS)}.")
    specs = run_specs(strategies, ablations, registry)
    ref_set = options.scaling if isinstance(options.scaling, ReferenceSet) else load_reference(options.scaling)
    try:
        ref_set.fit()
    except ValueError as e:
        raise InputDataError(f"scaling reference {ref_set.name}: {e}.") from e
    if iie_reference is not None and iie_reference not in {s.label for s in specs}:
        raise UsageError(
            f"the IIE reference run {iie_reference!r} is not among the runs ({', '.join(s.label for s in specs)})."
        )
    skipped: list[str] = []
    if not use_llm:
        skipped = [s.label for s in specs if not registry.get(s.strategy).retrieves_alone()]
        specs = [s for s in specs if registry.get(s.strategy).retrieves_alone()]
        if not specs:
            raise UsageError(f"--no-llm evaluates retrieval: choose at least one of {registry.retrieval_only()}.")
    at_least_one("--budget", budget)
    questions, read = read_questions(path, fmt, limit=limit, skip=skip)
    out_dir.mkdir(parents=True, exist_ok=True)
    if read.rejects.height:
        read.rejects.write_csv(out_dir / "rejects.csv")
    if not questions:
        raise no_questions(path, fmt, skip, read, out_dir / "rejects.csv")

    if isinstance(where, StoreChoice) and not any(registry.get(spec.strategy).uses_graph for spec in specs):
        where = replace(where, graphless=True)
    options = replace(options, scaling=ref_set)
    with QASession(settings, where, runner=runner, registry=registry, progress=say) as session:
        result = session.evaluate(questions, specs, out_dir, options)
    return replace(result, rejected=read.rejects.height, skipped=skipped)
