"""MedCoG's regulator pieces: the monitoring parser, the routing table and the SCoT reply parser."""

from __future__ import annotations

import itertools

import pytest

from metakg.qa_engine.core import Question
from metakg.qa_engine.strategies.medcog.monitor import (
    MISSING_SCORE,
    ROUTES,
    Assessment,
    Thresholds,
    parse_assessment,
    plan,
    scale,
)
from metakg.qa_engine.strategies.medcog.scot import parse_path, parse_scot, scot_prompt


@pytest.mark.parametrize("high", list(itertools.product([False, True], repeat=3)))
@pytest.mark.parametrize("tau", [0.0, 0.3, 0.5, 0.8])
def test_every_combination_of_scores_and_thresholds_routes_as_the_table_says(
    high: tuple[bool, bool, bool], tau: float
) -> None:
    c, f, k = ((tau + 0.1 if h else tau) for h in high)  # above, or exactly at, the threshold
    route = plan(Assessment(min(c, 1), min(f, 1), min(k, 1)), Thresholds(tau, tau, tau))
    expected = {
        (False, False, False): "zero_shot",
        (True, False, False): "scot",
        (False, True, False): "scot_mem",
        (False, False, True): "scot_kg",
        (True, True, False): "scot_mem",
        (True, False, True): "scot_kg",
        (False, True, True): "scot_kg_mem",
        (True, True, True): "scot_kg_mem",
    }[high]
    assert route == expected and route in ROUTES


def test_each_threshold_gates_its_own_score() -> None:
    scores = Assessment(0.6, 0.6, 0.6)
    assert plan(scores, Thresholds(0.7, 0.7, 0.7)) == "zero_shot"
    assert plan(scores, Thresholds(0.5, 0.7, 0.7)) == "scot"
    assert plan(scores, Thresholds(0.7, 0.5, 0.7)) == "scot_mem"
    assert plan(scores, Thresholds(0.7, 0.7, 0.5)) == "scot_kg"


def test_monitoring_replies_in_json_prose_and_other_scales() -> None:
    json_reply = (
        'Sure! {"complexity": {"score": 0.8, "reason": "two steps"}, "familiarity": 0.3, "Knowledge density": "90%"}'
    )
    found = parse_assessment(json_reply)
    assert found is not None and found.how == "json" and found.missing == ()
    assert (found.complexity, found.familiarity, found.knowledge_density) == (0.8, 0.3, 0.9)
    assert found.reasons == {"complexity": "two steps"}
    prose = parse_assessment("Complexity: 7/10 because it chains.\nFamiliarity - 4\nKnowledge-density: 65%")
    assert prose is not None and prose.how == "prose"
    assert (prose.complexity, prose.familiarity, prose.knowledge_density) == (0.7, 0.4, 0.65)
    assert prose.reasons["complexity"].startswith("Complexity: 7/10")
    partial = parse_assessment('{"complexity": 0.2}')
    assert partial is not None and partial.missing == ("familiarity", "knowledge_density")
    assert partial.familiarity == partial.knowledge_density == MISSING_SCORE


@pytest.mark.parametrize(
    "reply", ["", "I cannot rate this.", '{"complexity": "high"}', "complexity: -3", '{"x": 1}', "density 250"]
)
def test_a_reply_without_a_score_is_unparseable(reply: str) -> None:
    assert parse_assessment(reply) is None


def test_scale() -> None:
    assert (scale(0.5), scale(5, "%"), scale(0.7, "/10"), scale(7, "/10")) == (0.5, 0.05, 0.07, 0.7)
    # no scale said: as asked (0 to 1), clamped; never a guessed rescale (1.2 is "above the top", not 0.12)
    assert (scale(1.2), scale(5), scale(50)) == (1.0, 1.0, 1.0)
    assert scale(101) is None and scale(-0.1) is None and scale(11, "/10") is None


def test_a_scale_the_reply_states_once_reads_its_bare_scores() -> None:
    tenths = parse_assessment("On a scale of 0 to 10: complexity 7, familiarity 2, knowledge density 9.")
    assert tenths is not None and (tenths.complexity, tenths.familiarity, tenths.knowledge_density) == (0.7, 0.2, 0.9)
    unsaid = parse_assessment('{"complexity": 0.3, "familiarity": 1.2, "knowledge_density": 0.8}')
    assert unsaid is not None and unsaid.familiarity == 1.0  # more than certain is familiar, not 0.12
    percent = parse_assessment('In percent: {"complexity": 30, "familiarity": 80, "knowledge_density": 55}')
    assert percent is not None and (percent.complexity, percent.familiarity) == (0.3, 0.8)


def test_scot_prompt_and_reply() -> None:
    question = Question("Which drug treats migraine?", (("A", "aspirin"), ("B", "warfarin")))
    prompt = scot_prompt(question, evidence=["aspirin -[treats]-> migraine"], cases=["Q: ... Answer: A (correct)"])
    assert prompt.index("Similar questions") < prompt.index("knowledge graph") < prompt.index("Question:")
    assert "A: aspirin" in prompt and "Answer: the letter" in prompt
    reply = (
        "Facts:\n1. aspirin -> treats -> migraine\n- warfarin -[interacts with]-> aspirin -[treats]-> pain\n"
        "not a path -> here\nReasoning: aspirin treats migraine, so A.\nAnswer: A"
    )
    parsed = parse_scot(reply)
    assert parsed.paths == [
        ("aspirin", "treats", "migraine"),
        ("warfarin", "interacts with", "aspirin", "treats", "pain"),
    ]
    assert parsed.reasoning == "aspirin treats migraine, so A." and parsed.answer == "A"
    assert parse_path("a -> b") is None and parse_path("a -> -> c") is None
