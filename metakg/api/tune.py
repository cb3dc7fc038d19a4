"""``metakg tune``: a small grid over retrieval settings, run without an LLM on a question file.

Every combination of the grid's values is one retrieval-only evaluation (concepts by rules) of one strategy
over the same questions and store; the table ranks them by recall at the evidence budget, then by recall,
then by fewer evidence entities.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from metakg.api._shared import JsonResult, Progress, at_least_one, quiet
from metakg.api.qa import STRATEGIES, Benchmark, no_questions, read_questions
from metakg.api.session import EvalOptions, NoLLM, QASession, StoreChoice
from metakg.api.stores import open_store
from metakg.config import QASettings, Settings
from metakg.errors import ConfigError, UsageError
from metakg.progress import Tick
from metakg.qa_engine.evaluate import RunSpec
from metakg.schemas.locks import locked, require_folder, write_output

__all__ = ["TUNE_COLUMNS", "Grid", "TuneResult", "parse_grid", "tune_benchmark", "tune_table"]


@dataclass(frozen=True)
class TuneResult(JsonResult):
    """The runs of a grid, best first (each: ``settings``, the summary figures and ``folder``), for a
    ``strategy`` over ``questions`` at an evidence ``budget``."""

    strategy: str
    questions: int
    budget: int
    runs: list[dict[str, Any]]

    @property
    def best(self) -> dict[str, Any] | None:
        """The best run (the highest recall at the budget, then recall, then fewer evidence entities)."""
        return self.runs[0] if self.runs else None

    def table(self) -> str:
        """The ranked runs as a Markdown table."""
        return tune_table(self.runs)


TUNE_COLUMNS = (
    ("recall_at_budget", "recall@budget"),
    ("evidence_recall", "recall"),
    ("evidence_entities_per_question", "entities/q"),
    ("evidence_triples_per_question", "triples/q"),
    ("on_path_share", "on-path share"),
    ("retrieval_p50_ms", "retrieval p50 ms"),
)
MAX_RUNS = 200


def _value(text: str) -> Any:
    """``3`` -> 3, ``0.5`` -> 0.5, ``true`` -> True, anything else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@dataclass(frozen=True)
class Grid:
    """Setting paths (``qa.tau_entity``, ``metakgrag.path_hops``) and the values each takes, in the order
    given: every combination of them is one tuning run."""

    values: dict[str, list[Any]]

    def combinations(self) -> list[dict[str, Any]]:
        """Every combination of the values, as {setting path: value}, the first key's values outermost."""
        keys = list(self.values)
        product = itertools.product(*(self.values[k] for k in keys))
        return [dict(zip(keys, values, strict=True)) for values in product]


def parse_grid(items: Sequence[str], strategy: str) -> Grid:
    """``key=v1,v2`` items as a grid of setting paths and values. A key of ``[qa]`` (``tau_entity``, or
    ``qa.tau_entity``) stays shared; any other key is the strategy's (``path_hops`` or ``metakgrag.path_hops``).

    Raises:
        UsageError: an item without ``=`` or values, or a key named twice.
    """
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip().removeprefix("qa.")
        if key == "strategy":
            raise UsageError("--grid strategy: the strategy tuned is --strategy; a grid varies its settings.")
        parsed = [_value(v.strip()) for v in values.split(",") if v.strip()]
        if not sep or not key or not parsed:
            raise UsageError(f"--grid {item!r}: write key=value1,value2 (e.g. path_hops=2,3).")
        path = f"qa.{key}" if key in QASettings.model_fields else f"{strategy}.{key.removeprefix(strategy + '.')}"
        if path in grid:
            raise UsageError(f"--grid names {path} twice.")
        grid[path] = parsed
    return Grid(grid)


def with_overrides(settings: Settings, strategy: str, values: dict[str, Any], *, source: str = "--grid") -> Settings:
    """``settings`` with ``values`` set: a key of ``[qa]`` (``tau_entity`` or ``qa.tau_entity``) in the shared
    section, any other key (``path_hops`` or ``metakgrag.path_hops``) in the strategy's own section.

    Raises:
        ConfigError: a value the settings refuse (the message names ``source`` and the key).
    """
    shared: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in values.items():
        name = key.removeprefix("qa.")
        if name in QASettings.model_fields:
            shared[name] = value
        else:
            own[name.removeprefix(strategy + ".")] = value
    try:
        qa = QASettings.model_validate(settings.qa.model_dump() | shared)
        qa = qa.with_section(strategy, own)
        STRATEGIES.settings(strategy, qa)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{source} {where}: {first['msg']}") from e
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from e
    return settings.model_copy(update={"qa": qa})


def _with(settings: Settings, strategy: str, combination: dict[str, Any]) -> Settings:
    """``settings`` with the combination's values (concepts by rules: no LLM)."""
    return with_overrides(settings, strategy, combination | {"qa.concepts": "rules"}, source=f"--grid {combination}")


@locked("out_dir", "the tuning folder")
def tune_benchmark(
    settings: Settings,
    benchmark: Benchmark,
    out_dir: Path,
    *,
    strategy: str,
    grid: Grid,
    over: StoreChoice | None = None,
    options: EvalOptions | None = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Evaluate ``strategy`` without an LLM for every combination of ``grid`` (from :func:`parse_grid`) over
    the bundle or Neo4j ``over`` names; ``options`` gives the evidence ``budget`` and a ``tick`` per answer.

    Each run's answers and summary go to ``out_dir/run-<n>/``; ``out_dir/tune.json`` and ``tune.md`` hold
    the ranked table.

    Returns:
        the :class:`TuneResult`: the runs best first, and the number of questions.

    Raises:
        UsageError: an unknown strategy, no grid, more than 200 combinations, or bad --skip/--limit/--budget.
        ConfigError: a value the settings refuse.
        InputDataError: the question file cannot be read or holds no question.
    """
    say = progress or quiet
    options = options or EvalOptions()
    where = over or StoreChoice()
    path, fmt, limit, skip = benchmark.path, benchmark.fmt, benchmark.limit, benchmark.skip
    budget, tick = options.budget, options.tick
    at_least_one("--budget", budget)
    cls = STRATEGIES.get(strategy)
    if not cls.retrieves_alone():
        why = "uses no graph" if not cls.uses_graph else "needs an LLM at every step, and tune runs without one"
        raise UsageError(f"{strategy} {why}; tune one of {STRATEGIES.retrieval_only()}.")
    if not grid.values:
        raise UsageError("give at least one --grid key=value1,value2.")
    combinations = grid.combinations()
    if len(combinations) > MAX_RUNS:
        raise UsageError(f"the grid has {len(combinations)} combinations; at most {MAX_RUNS}.")
    configured = [_with(settings, strategy, c) for c in combinations]  # every value is checked before any run
    for number in range(1, len(combinations) + 1):  # each run's folder, before any run (the report's is locked)
        require_folder(out_dir / f"run-{number}", "a tune run")
    questions, read = read_questions(path, fmt, limit=limit, skip=skip)
    if not questions:
        raise no_questions(path, fmt, skip, read)
    runs: list[dict[str, Any]] = []
    with open_store(settings, where.bundle, neo4j=where.neo4j, progress=say) as store:
        for number, (combination, run_settings) in enumerate(zip(combinations, configured, strict=True), start=1):
            folder = out_dir / f"run-{number}"
            say(f"run {number}/{len(combinations)}: {_label(combination)}")
            session = QASession(run_settings, store, runner=NoLLM(), progress=say)
            options = EvalOptions(resume=False, budget=budget, tick=_run_tick(tick, number))
            summary = session.evaluate(questions, [RunSpec(strategy)], folder, options).summary
            runs.append({"settings": combination, "folder": str(folder), **summary[strategy]})
    runs.sort(
        key=lambda r: (
            -(r["recall_at_budget"] or 0),
            -(r["evidence_recall"] or 0),
            r["evidence_entities_per_question"] or 0,
        )
    )
    result = TuneResult(strategy, len(questions), budget, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_output(out_dir / "tune.json", json.dumps(result.as_dict(), indent=2, default=str) + "\n")
    write_output(out_dir / "tune.md", result.table())
    return result


def _run_tick(tick: Tick | None, number: int) -> Tick | None:
    if tick is None:
        return None

    def forward(_label: str, done: int, total: int) -> None:
        tick(f"run {number}", done, total)

    return forward


def _label(combination: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in combination.items())


def tune_table(runs: Sequence[dict[str, Any]]) -> str:
    """The ranked runs as a Markdown table: the settings, then :data:`TUNE_COLUMNS`."""
    head = "| settings | " + " | ".join(title for _, title in TUNE_COLUMNS) + " |"
    rule = "|---|" + "---:|" * len(TUNE_COLUMNS)
    rows = [
        f"| {_label(r['settings'])} | "
        + " | ".join("-" if r.get(k) is None else str(r[k]) for k, _ in TUNE_COLUMNS)
        + " |"
        for r in runs
    ]
    return "\n".join([head, rule, *rows]) + "\n"
