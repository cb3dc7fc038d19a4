"""``metakg calibrate medcog`` and ``metakg casebank build``: MedCoG's thresholds from one evaluation of
its five fixed routes, and its case bank from SCoT runs.

The evaluation (``metakg eval --strategy medcog --ablation all``) answers every question with the monitoring
step and with each fixed route; the response cache makes a rerun free. The threshold search then runs
offline (:mod:`metakg.qa_engine.strategies.medcog.calibrate`) and the chosen thresholds are written as a settings file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from metakg.api._shared import DEFAULT_GRID, JsonResult, Progress, output_folder
from metakg.api.qa import Benchmark, Runs, evaluate_benchmark
from metakg.api.session import EvalOptions, StoreChoice
from metakg.config import Settings
from metakg.errors import InputDataError, UsageError
from metakg.llm.embedder import LazyEmbedder
from metakg.progress import Tick
from metakg.qa_engine.evaluate import list_cost_of
from metakg.qa_engine.strategies.medcog.calibrate import Candidate, Objective, Outcome, search
from metakg.qa_engine.strategies.medcog.casebank import CaseBank
from metakg.qa_engine.strategies.medcog.monitor import ROUTES, Assessment
from metakg.schemas.locks import check_replaceable, require_folder, write_output

__all__ = [
    "DEFAULT_GRID",
    "Calibration",
    "CasebankGrowth",
    "Goal",
    "build_casebank",
    "calibrate_medcog",
    "grow_casebank",
    "grow_from_report",
]


@dataclass(frozen=True)
class CasebankGrowth(JsonResult):
    """What a case bank run added: the ``bank`` folder, its ``cases`` in all, the cases ``added`` (of which
    ``correct``), and the answers ``without_reply`` (an LLM failure) left out."""

    bank: Path
    cases: int
    added: int
    correct: int
    without_reply: int

    def summary(self) -> str:
        """One line for people."""
        return (
            f"added {self.added} cases ({self.correct} correct, {self.without_reply} without a reply left out); "
            f"{self.cases} cases in {self.bank}"
        )


@dataclass(frozen=True)
class Calibration(JsonResult):
    """The chosen thresholds: the ``best`` triple (thresholds, accuracy, cost per question, route counts), the
    ``top`` ten, the ``questions`` rated and answered by every route, those ``unrated`` (the monitor fell
    back), and the ``settings`` file the best triple was written to."""

    best: dict[str, Any]
    top: list[dict[str, Any]]
    questions: int
    unrated: int
    settings: Path


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _as_dict(candidate: Candidate) -> dict[str, Any]:
    tau = candidate.tau
    return {
        "tau_c": tau.complexity,
        "tau_f": tau.familiarity,
        "tau_k": tau.knowledge_density,
        "accuracy": candidate.accuracy,
        "cost_per_question": candidate.cost_per_question,
        "routes": candidate.routes,
    }


@dataclass(frozen=True)
class Goal:
    """What calibration looks for: the threshold values tried for each of tau_c, tau_f and tau_k, and the
    ``objective`` (``accuracy``, ties to the cheapest; or ``budget``: the best within ``budget`` USD per
    question)."""

    grid: Sequence[float] = DEFAULT_GRID
    objective: Objective = "accuracy"
    budget: float | None = None


def calibrate_medcog(
    settings: Settings,
    benchmark: Benchmark,
    out_dir: Path,
    goal: Goal | None = None,
    *,
    over: StoreChoice | None = None,
    settings_out: Path | None = None,
    progress: Progress | None = None,
    tick: Tick | None = None,
) -> Calibration:
    """Evaluate MedCoG's monitoring and its five fixed routes over the ``benchmark``'s questions (on the
    bundle or Neo4j ``over`` names), then pick the thresholds the ``goal`` asks for.

    Writes the evaluation into ``out_dir``, ``out_dir/calibration.json`` (every triple, best first) and the
    chosen ``[qa.medcog]`` thresholds into ``settings_out`` (default ``out_dir/medcog.toml``).

    Returns:
        ``best`` (thresholds, accuracy, cost per question, route counts), ``top`` (the ten best),
        ``questions`` (answered by every route and rated), ``unrated`` (monitoring fell back) and ``settings``.

    Raises:
        UsageError: a grid value outside [0, 1], a budget objective without a budget, or a forced
            ``[qa.medcog] route`` (the monitoring step must run).
        InputDataError: no question was both rated and answered by every route.
    """
    goal = goal or Goal()
    grid, objective, budget = goal.grid, goal.objective, goal.budget
    if not grid or any(not 0 <= g <= 1 for g in grid):
        raise UsageError(f"--grid values must lie in [0, 1], got {list(grid)}.")
    if objective == "budget" and budget is None:
        raise UsageError("--objective budget needs --budget USD per question.")
    if settings.qa.section("medcog").get("route", "meta") != "meta":
        raise UsageError('calibration needs the monitoring step: set [qa.medcog] route = "meta".')
    if settings_out is not None:  # checked before the questions are asked, not after; its folder made
        check_replaceable(settings_out)
        output_folder(settings_out.parent, "--settings-out")
    evaluate_benchmark(
        settings,
        benchmark,
        out_dir,
        Runs(["medcog"], ["all"]),
        over=over,
        options=EvalOptions(tick=tick),
        progress=progress,
    )
    meta = _rows(out_dir / "answers-medcog.jsonl")
    scores = {
        r["question_id"]: Assessment(t["complexity"], t["familiarity"], t["knowledge_density"])
        for r in meta
        if (t := r["trace"]).get("routed_by") == "scores"
    }
    outcomes = {
        route: {
            r["question_id"]: Outcome(r["correct"] is True, list_cost_of(r["usage"]))
            for r in _rows(out_dir / f"answers-medcog[route={route}].jsonl")
        }
        for route in ROUTES
    }
    try:
        monitor = {r["question_id"]: float(r["trace"].get("monitor_cost_usd", 0.0)) for r in meta}
        ranked = search(scores, outcomes, sorted(set(grid)), objective, budget, monitor)
    except ValueError as e:
        failed = [r for r in meta if r.get("status") == "fail"]
        # an answer that failed outright (an LLM not reached) says so; a fallback means a reply not understood
        first = (failed[0].get("reason") or "no reason given") if failed else ""
        why = (
            f"{len(failed)} of {len(meta)} monitoring answers failed, the first: {first}"
            if failed
            else f"{len(meta) - len(scores)} monitoring replies unparseable"
        )
        raise InputDataError(f"cannot calibrate: {e} ({why}).") from e
    best = ranked[0]
    thresholds = (
        "# MedCoG thresholds chosen by `metakg calibrate medcog`\n[qa.medcog]\n"
        f"tau_c = {best.tau.complexity}\ntau_f = {best.tau.familiarity}\ntau_k = {best.tau.knowledge_density}\n"
    )
    target = settings_out or out_dir / "medcog.toml"
    write_output(target, thresholds)
    table = [_as_dict(c) for c in ranked]
    write_output(out_dir / "calibration.json", json.dumps(table, indent=1) + "\n")
    answered = sum(1 for q in scores if all(q in outcomes[r] for r in ROUTES))
    return Calibration(table[0], table[:10], answered, len(meta) - len(scores), target)


def build_casebank(
    settings: Settings,
    benchmark: Benchmark,
    out: Path,
    *,
    route: str = "scot",
    over: StoreChoice | None = None,
    progress: Progress | None = None,
    tick: Tick | None = None,
) -> CasebankGrowth:
    """Answer the ``benchmark``'s questions with MedCoG's fixed ``route`` (``scot`` or ``scot_kg``) and keep
    each trajectory with its reward in the case bank at ``out`` (merged into the bank already there: a bank
    grows run by run). Answers without a reply (an LLM failure) are left out and counted. The ``scot`` route
    needs no graph: when ``over`` names no bundle or Neo4j it runs over an empty one.

    Raises:
        UsageError: a route other than ``scot`` or ``scot_kg``.
    """
    if route not in ("scot", "scot_kg"):
        raise UsageError(f"a case bank is built from the scot or scot_kg route, not {route!r}.")
    run_settings = settings.model_copy(update={"qa": settings.qa.with_section("medcog", {"route": route})})
    work = out / "build"
    where = replace(over or StoreChoice(), graphless=route == "scot")  # SCoT alone reads no graph
    evaluate_benchmark(
        run_settings, benchmark, work, Runs(["medcog"]), over=where, options=EvalOptions(tick=tick), progress=progress
    )
    rows = _rows(work / "answers-medcog.jsonl")  # the run is named by its spec; its route is fixed in settings
    return grow_casebank(settings, rows, out, source=benchmark.path.name, progress=progress)


def check_casebank(path: Path) -> None:
    """Refuse ``path`` as a case bank before any work when it is a file (the bank, a folder, would replace it).

    Raises:
        UsageError: ``path`` is a file.
    """
    require_folder(path, "the case bank")


def grow_casebank(
    settings: Settings, rows: Sequence[dict[str, Any]], out: Path, *, source: str, progress: Progress | None = None
) -> CasebankGrowth:
    """Add the answers of evaluated ``rows`` that hold a SCoT reply to the bank at ``out`` (made when absent).

    Raises:
        UsageError: ``out`` is a file (:func:`check_casebank`).
    """
    check_casebank(out)
    kept = [
        (r["question_id"], r["question"], r["trace"]["reply"], int(r["correct"] is True))
        for r in rows
        if r["trace"].get("reply") and r["trace"].get("route", "").startswith("scot")
    ]
    embedder = LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress)
    bank = CaseBank.build(kept, embedder, source=source, model=embedder.name)
    if (out / "manifest.json").is_file():
        bank = CaseBank.read(out).merge(bank)
    bank.write(out)
    return CasebankGrowth(out, len(bank), len(kept), sum(k[3] for k in kept), len(rows) - len(kept))


def grow_from_report(
    settings: Settings, report: Path, labels: Sequence[str], bank: Path, progress: Progress | None = None
) -> CasebankGrowth:
    """Grow the bank at ``bank`` with the SCoT answers of the MedCoG runs among ``labels`` in an ``eval``
    report folder (``eval --grow``): the next run's memory routes see this run's trajectories."""
    rows = [
        row
        for label in labels
        if label.startswith("medcog") and (report / f"answers-{label}.jsonl").is_file()
        for row in _rows(report / f"answers-{label}.jsonl")
    ]
    return grow_casebank(settings, rows, bank, source=report.name, progress=progress)
