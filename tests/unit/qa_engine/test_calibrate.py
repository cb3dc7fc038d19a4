"""MedCoG threshold calibration on a hand-made result table where the best thresholds are known."""

from __future__ import annotations

import pytest

from metakg.qa_engine.strategies.medcog.calibrate import Outcome, score, search
from metakg.qa_engine.strategies.medcog.monitor import ROUTES, Assessment, Thresholds

# q1 (low scores) and q3 (high complexity) are right on every route; q2 (high knowledge density) only on
# the routes with graph verification. Zero-shot is the cheapest route, the graph the dearest.
SCORES = {
    "q1": Assessment(0.1, 0.1, 0.1),
    "q2": Assessment(0.3, 0.1, 0.9),
    "q3": Assessment(0.9, 0.1, 0.2),
}
COST = {"zero_shot": 0.001, "scot": 0.004, "scot_mem": 0.006, "scot_kg": 0.010, "scot_kg_mem": 0.012}
RIGHT = {"q1": set(ROUTES), "q2": {"scot_kg", "scot_kg_mem"}, "q3": set(ROUTES)}
OUTCOMES = {r: {q: Outcome(r in RIGHT[q], COST[r]) for q in SCORES} for r in ROUTES}
GRID = [0.0, 0.5, 1.0]


def test_the_known_best_thresholds_win() -> None:
    best = search(SCORES, OUTCOMES, GRID)[0]
    # all right needs q2 on a _kg route (tau_k < 0.9); the cheapest such triple sends q1 and q3 to
    # zero-shot (tau_c >= 0.9, tau_f >= 0.1, tau_k >= 0.2): (1.0, 0.5, 0.5), first of the ties in grid order
    assert best.accuracy == 1.0 and best.tau == Thresholds(1.0, 0.5, 0.5)
    assert best.routes == {"zero_shot": 2, "scot": 0, "scot_mem": 0, "scot_kg": 1, "scot_kg_mem": 0}
    assert best.cost_per_question == pytest.approx((0.001 + 0.010 + 0.001) / 3)


def test_the_monitoring_call_is_part_of_every_questions_cost() -> None:
    monitor = dict.fromkeys(SCORES, 0.0005)
    best = search(SCORES, OUTCOMES, GRID, monitor=monitor)[0]
    assert best.tau == Thresholds(1.0, 0.5, 0.5)  # the same cost for every triple: the ranking is unchanged
    assert best.cost_per_question == pytest.approx((0.001 + 0.010 + 0.001) / 3 + 0.0005)
    # zero-shot everywhere costs 0.001 a question, 0.0015 with monitoring: a budget of 0.0012 no longer fits
    assert all(c.cost_per_question > 0.0012 for c in search(SCORES, OUTCOMES, GRID, monitor=monitor))
    fits = search(SCORES, OUTCOMES, GRID, objective="budget", budget=0.0016, monitor=monitor)[0]
    assert fits.routes["zero_shot"] == 3 and fits.cost_per_question == pytest.approx(0.0015)


def test_a_budget_trades_accuracy_for_cost() -> None:
    cheap = search(SCORES, OUTCOMES, GRID, objective="budget", budget=0.002)[0]
    assert cheap.cost_per_question <= 0.002 and cheap.accuracy == round(2 / 3, 4)  # q2 given up
    assert cheap.routes["zero_shot"] == 3


def test_every_triple_is_scored_and_bad_calls_are_refused() -> None:
    assert len(search(SCORES, OUTCOMES, GRID)) == 27
    everything = score(Thresholds(0.0, 0.0, 0.0), SCORES, OUTCOMES)
    assert everything.routes["scot_kg_mem"] == 3 and everything.accuracy == 1.0
    with pytest.raises(ValueError, match="empty"):
        search(SCORES, OUTCOMES, [])
    with pytest.raises(ValueError, match="needs a cost budget"):
        search(SCORES, OUTCOMES, GRID, objective="budget")
    with pytest.raises(ValueError, match="all five routes"):
        search(SCORES, {"scot": OUTCOMES["scot"]}, GRID)
