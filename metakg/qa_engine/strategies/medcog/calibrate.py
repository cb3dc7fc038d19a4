"""Calibrating MedCoG's thresholds offline, from runs already made.

Every question was answered once by each of the five fixed routes and once by the monitoring step (its
three scores). A threshold triple then decides each question's route (:func:`.monitor.plan`)
and so its outcome and cost, with no further LLM call. :func:`search` tries every triple of a grid and keeps
the best one for an objective: the highest accuracy (ties: the lowest cost), or the highest accuracy within a
cost budget per question.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from metakg.qa_engine.strategies.medcog.monitor import ROUTES, Assessment, Thresholds, plan

Objective = Literal["accuracy", "budget"]


@dataclass(frozen=True)
class Outcome:
    """One question answered by one route: right or not, and what it cost (USD)."""

    correct: bool
    cost: float


@dataclass(frozen=True)
class Candidate:
    """A threshold triple and what it would have scored on the calibration questions."""

    tau: Thresholds
    accuracy: float
    cost_per_question: float
    routes: dict[str, int] = field(default_factory=dict)


def score(
    tau: Thresholds,
    scores: Mapping[str, Assessment],
    outcomes: Mapping[str, Mapping[str, Outcome]],
    monitor: Mapping[str, float] | None = None,
) -> Candidate:
    """Accuracy, cost per question and route counts of ``tau`` over the questions every route answered; a
    question's cost is its monitoring call's (``monitor``, by question id) plus the picked route's."""
    ids = [q for q in scores if all(q in outcomes.get(r, {}) for r in ROUTES)]
    routes = Counter(plan(scores[q], tau) for q in ids)
    picked = [outcomes[plan(scores[q], tau)][q] for q in ids]
    n = len(picked) or 1
    monitoring = sum((monitor or {}).get(q, 0.0) for q in ids)
    return Candidate(
        tau,
        round(sum(o.correct for o in picked) / n, 4),
        round((sum(o.cost for o in picked) + monitoring) / n, 8),
        {r: routes.get(r, 0) for r in ROUTES},
    )


def search(
    scores: Mapping[str, Assessment],
    outcomes: Mapping[str, Mapping[str, Outcome]],
    grid: Sequence[float],
    objective: Objective = "accuracy",
    budget: float | None = None,
    monitor: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """Every threshold triple of ``grid`` scored, the best first.

    ``accuracy``: the highest accuracy, then the lowest cost. ``budget``: the triples whose cost per question
    is within ``budget`` first, by accuracy then cost; the others after them.

    Raises:
        ValueError: an empty grid, ``budget`` objective without a budget, or no question answered by all
            five routes and the monitoring step.
    """
    if not grid:
        raise ValueError("the threshold grid is empty")
    if objective == "budget" and budget is None:
        raise ValueError("the budget objective needs a cost budget per question")
    if not any(all(q in outcomes.get(r, {}) for r in ROUTES) for q in scores):
        raise ValueError("no question was answered by all five routes and rated by the monitoring step")
    found = [score(Thresholds(c, f, k), scores, outcomes, monitor) for c, f, k in itertools.product(grid, repeat=3)]

    def key(c: Candidate) -> tuple[bool, float, float]:
        over = objective == "budget" and budget is not None and c.cost_per_question > budget
        return (over, -c.accuracy, c.cost_per_question)

    return sorted(found, key=key)
