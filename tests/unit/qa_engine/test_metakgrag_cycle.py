"""The Perceive-Evaluate-Adjust cycle on the hand-made graph: missing concept, pivot, corrected path, stops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from metakg.llm.embedder import Vectors
from metakg.qa_engine.core import Answer
from metakg.qa_engine.services import QAServices
from metakg.qa_engine.strategies import REGISTRY
from metakg.qa_engine.strategies.metakgrag.strategy import (
    Concepts,
    MetaKGRAGSettings,
    diagnose,
    merge_paths,
    refine,
    unmark_held,
)
from metakg.qa_engine.walk import Walker, WalkPath, jaccard
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, ident, store

CONCEPTS = ["alpha", "beta concept"]
INITIAL = ["alpha", "decoy", "decoy two"]
CORRECTED = ["alpha", "decoy", "zeta", "beta"]


def walker_over(graph: Any) -> Walker:
    return Walker(graph, QAServices(graph, AxisEmbedder(), max_entries=1000), QUESTION, max_neighbours=100)


def run(settings: MetaKGRAGSettings | None = None, **switches: bool) -> tuple[WalkPath, WalkPath, dict[str, Any]]:
    graph = store()
    # tau_support 0.1: on this graph the tuned 0.35 would flag beta (support 0.3) and mix the two checks
    settings = (settings or MetaKGRAGSettings(path_hops=2, tau_support=0.1)).model_copy(update=switches)
    start = graph.get_node(ident("alpha"))
    assert start is not None
    walker = walker_over(graph)
    refined = refine(walker.extend(WalkPath([start]), settings.path_hops, {}), Concepts(CONCEPTS), walker, settings)
    return refined.initial, refined.final, refined.trace


def names(path: WalkPath) -> list[str]:
    return [n.name for n in path.nodes]


def test_the_cycle_finds_the_missing_concept_the_pivot_and_the_corrected_path() -> None:
    initial, final, trace = run()
    assert names(initial) == INITIAL
    first, second = trace["cycles"]
    assert first["missing_concepts"] == ["beta concept"]
    assert first["coverage"]["beta concept"] == pytest.approx(0.2, abs=0.01)
    assert first["misleading_entities"] == []
    assert first["pivot"] == "decoy"
    assert first["pivot_reason"].startswith("completeness")
    assert first["adjustments"] == {ident("zeta"): 0.25}  # bridge is not relevant to beta
    assert first["new_path"] == CORRECTED
    assert first["path_similarity"] == pytest.approx(2 / 5)
    assert second["missing_concepts"] == [] and second["misleading_entities"] == []
    assert trace["stop"] == "no deficiency"
    assert names(final) == CORRECTED and trace["refined"] is True
    # the edges of the corrected path exist and link consecutive nodes
    for edge, (a, b) in zip(final.edges, zip(final.ids, final.ids[1:], strict=False), strict=True):
        assert {edge.src, edge.dst} == {a, b}


def test_convergence_by_path_similarity() -> None:
    _, final, trace = run(MetaKGRAGSettings(path_hops=2, tau_similarity=0.3))  # 0.4 > 0.3: stop after one cycle
    assert len(trace["cycles"]) == 1
    assert trace["stop"].startswith("converged")
    assert names(final) == CORRECTED


def test_convergence_by_n_max() -> None:
    _, final, trace = run(MetaKGRAGSettings(path_hops=2, n_max=1))
    assert len(trace["cycles"]) == 1 and trace["stop"] == "n_max (1) cycles"
    assert names(final) == CORRECTED


def test_no_cycle_and_no_completeness_keep_the_initial_path() -> None:
    _, final, trace = run(no_cycle=True)
    assert trace["cycles"] == [] and names(final) == INITIAL and trace["refined"] is False
    _, final, trace = run(no_completeness=True)
    assert trace["stop"] == "no deficiency" and names(final) == INITIAL


def test_no_restart_restarts_from_the_start_entity() -> None:
    _, final, trace = run(no_restart=True)
    first = trace["cycles"][0]
    assert first["pivot"] == "alpha" and "no strategic restart" in first["pivot_reason"]
    assert first["new_path"] == ["alpha", "decoy", "zeta"]  # two hops from the start: beta is out of reach
    assert names(final) != CORRECTED


def test_relevance_deficiency_penalises_the_misleading_entity() -> None:
    # GlobalSupport: decoy 0.45, decoy two 0.40, zeta 0.55, beta 0.35; tau_support 0.42 flags decoy two, then beta
    settings = MetaKGRAGSettings(path_hops=2, tau_support=0.42, keep_better=False, retry_from_start=False)
    _, final, trace = run(settings, no_completeness=True)
    first = trace["cycles"][0]
    assert first["missing_concepts"] == [] and first["misleading_entities"] == [ident("decoy two")]
    assert first["pivot"] == "decoy" and first["pivot_reason"].startswith("relevance")
    assert first["adjustments"] == {ident("decoy two"): -0.25}
    assert first["new_path"] == CORRECTED
    second = trace["cycles"][1]
    assert second["misleading_entities"] == [ident("beta")]  # beta is the only way on: the path stays
    assert second["path_similarity"] == 1.0 and trace["stop"].startswith("converged")
    assert names(final) == CORRECTED


def test_a_pivot_that_gives_back_the_same_path_restarts_at_the_start_entity() -> None:
    # as above, but in the second cycle the restart from the pivot (zeta) gives the same path back: the walk
    # starts again at alpha, with beta penalised, instead of stopping as converged
    settings = MetaKGRAGSettings(path_hops=2, tau_support=0.42, keep_better=False)
    _, _, trace = run(settings, no_completeness=True)
    second = trace["cycles"][1]
    assert second["misleading_entities"] == [ident("beta")]
    assert second["pivot"] == "alpha" and second["pivot_reason"].endswith("restarts at the start entity")
    assert second["new_path"] != CORRECTED and second["path_similarity"] < 1.0
    # the paper preset stops as converged (the test above)
    assert MetaKGRAGSettings(preset="paper").retry_from_start is False


def test_diagnosis_global_support_and_jaccard() -> None:
    graph = store()
    settings = MetaKGRAGSettings()
    walker = walker_over(graph)
    path = WalkPath([n for n in (graph.get_node(ident(x)) for x in CORRECTED) if n is not None])
    found = diagnose(path, Concepts(CONCEPTS), walker, settings)
    assert found.coverage == pytest.approx({"alpha": 1.0, "beta concept": 0.98}, abs=0.01)
    # alpha covers 1 of 2 concepts and is orthogonal to Q: 0.5 * 0.5 + 0.5 * 0
    assert found.support[ident("alpha")] == pytest.approx(0.25, abs=1e-3)
    assert found.support[ident("zeta")] == pytest.approx(0.55, abs=0.01)
    assert jaccard(path, path) == 1.0 and jaccard(path, WalkPath(path.nodes[:2])) == 0.5


def initial_path(walker: Walker) -> WalkPath:
    start = walker.store.get_node(ident("alpha"))
    assert start is not None
    return walker.extend(WalkPath([start]), 2, {})  # alpha > decoy > decoy two


def test_the_choices_are_covered_as_one_concept() -> None:
    walker = walker_over(store())
    path = initial_path(walker)
    strict = MetaKGRAGSettings(tau_coverage=0.9)
    found = diagnose(path, Concepts(["alpha"], ["beta concept", "decoy two"]), walker, strict)
    group = "one of: beta concept | decoy two"
    assert found.coverage[group] == pytest.approx(1.0) and found.missing == []  # decoy two is on the path
    found = diagnose(path, Concepts(["alpha"], ["beta concept", "bridge"]), walker, strict)
    # no choice reaches 0.9 (bridge: 0.785 through decoy, beta concept: 0.2): every choice is missing
    assert found.coverage["one of: beta concept | bridge"] == pytest.approx(0.785, abs=1e-3)
    assert found.missing == ["beta concept", "bridge"]
    assert set(found.coverage) == {"alpha", "one of: beta concept | bridge"}


def test_a_correction_that_covers_less_is_rejected() -> None:
    # bridge is missing at tau_coverage 0.9; with delta 1 the restart from alpha takes bridge (0.5 + 1) over
    # decoy (0.9), and the new path alpha > bridge covers decoy two at 0.4 only: 1.4 < 1.785 before
    walker = walker_over(store())
    concepts = Concepts(["decoy two", "bridge"])
    settings = MetaKGRAGSettings(path_hops=2, tau_coverage=0.9, delta=1.0, no_restart=True)
    _, final, trace, *_ = refine(initial_path(walker), concepts, walker, settings)
    assert trace["cycles"][0]["rejected"] and trace["cycles"][0]["coverage_change"] == pytest.approx(-0.385, abs=1e-3)
    assert trace["stop"].startswith("correction rejected") and names(final) == INITIAL
    assert not trace["refined"] and trace["kept_last"] == [] and "near_tie" not in trace["cycles"][0]
    # within tie_margin (0.385 < 0.4) it covers only a little less: a near tie, and the rejected path is kept last
    near = refine(initial_path(walker), concepts, walker, settings.model_copy(update={"tie_margin": 0.4}))
    assert names(near.final) == INITIAL and near.trace["cycles"][0]["near_tie"] is True
    assert [names(p)[:2] for p in near.kept_last] == [["alpha", "bridge"]] == [p[:2] for p in near.trace["kept_last"]]
    lines = REGISTRY.create("metakgrag").trace_lines(Answer("q", "metakgrag", trace={"paths": [near.trace]}))
    assert any("it covers only 0.3852 less (a near tie): it is kept last" in line for line in lines)
    loose = settings.model_copy(update={"keep_better": False})
    _, final, trace, *_ = refine(initial_path(walker), concepts, walker, loose)
    assert names(final)[:2] == ["alpha", "bridge"] and trace["refined"]


def test_a_correction_that_covers_as_much_keeps_the_path_it_corrects_too() -> None:
    # only "alpha" is asked about: every path from alpha covers it fully, so the relevance check's corrections
    # (decoy two flagged, then zeta) tie; the check cannot tell the paths apart and keeps both, each once
    walker = walker_over(store())
    settings = MetaKGRAGSettings(path_hops=2, tau_support=0.42)
    refined = refine(initial_path(walker), Concepts(["alpha"]), walker, settings)
    assert all(c["tied"] and c["coverage_change"] == 0.0 for c in refined.trace["cycles"])
    assert names(refined.final) == ["alpha", "decoy", "zeta"]
    assert [names(p) for p in refined.kept_too] == [INITIAL] == refined.trace["kept_too"]
    evidence = merge_paths([refined.final, *refined.kept_too])
    assert [e.nodes[-1] for e in evidence] == [ident("zeta"), ident("decoy two")]  # the correction first
    alone = refine(initial_path(walker), Concepts(["alpha"]), walker, settings.model_copy(update={"keep_tied": False}))
    assert names(alone.final) == ["alpha", "decoy", "zeta"] and alone.kept_too == [] and alone.trace["kept_too"] == []
    assert "tied" not in alone.trace["cycles"][0]
    assert MetaKGRAGSettings(preset="paper").keep_tied is False


def test_a_correction_that_covers_only_a_little_more_keeps_the_path_it_corrects_last() -> None:
    # the correction to alpha > decoy > zeta > beta gains coverage of "beta concept": within tie_margin it is a
    # near tie, and the initial path is kept, marked, after everything else; above it, it is not kept
    _, final, trace = run()
    gain = trace["cycles"][0]["coverage_change"]
    assert gain > 0 and names(final) == CORRECTED and trace["kept_last"] == []
    walker = walker_over(store())
    near = MetaKGRAGSettings(path_hops=2, tau_support=0.1, tie_margin=gain + 0.01)
    refined = refine(initial_path(walker), Concepts(CONCEPTS), walker, near)
    assert names(refined.final) == CORRECTED and refined.trace["cycles"][0]["near_tie"] is True
    assert refined.kept_too == [] and [names(p) for p in refined.kept_last] == [INITIAL] == refined.trace["kept_last"]
    lines = REGISTRY.create("metakgrag").trace_lines(Answer("q", "metakgrag", trace={"paths": [refined.trace]}))
    assert f"  kept last: {' > '.join(INITIAL)}" in lines
    assert any(f"it covers only {gain} more (a near tie)" in line for line in lines)
    far = refine(initial_path(walker), Concepts(CONCEPTS), walker, near.model_copy(update={"tie_margin": gain - 0.01}))
    assert names(far.final) == CORRECTED and far.kept_last == [] and "near_tie" not in far.trace["cycles"][0]
    assert MetaKGRAGSettings().tie_margin == 0.15 and MetaKGRAGSettings(preset="paper").tie_margin == 0.0
    # without keep_tied nothing is kept last
    untied = refine(initial_path(walker), Concepts(CONCEPTS), walker, near.model_copy(update={"keep_tied": False}))
    assert untied.kept_last == [] and "near_tie" not in untied.trace["cycles"][0]
    # a correction rejected by a keep_margin above its gain covered more, not less: not a near tie
    strict = near.model_copy(update={"keep_margin": gain + 0.1, "tie_margin": 5.0})
    refused = refine(initial_path(walker), Concepts(CONCEPTS), walker, strict)
    assert refused.trace["cycles"][0]["rejected"] and "near_tie" not in refused.trace["cycles"][0]
    assert refused.kept_last == [] and names(refused.final) == INITIAL


def test_a_path_kept_last_that_the_evidence_already_holds_is_not_marked() -> None:
    walker = walker_over(store())
    settings = MetaKGRAGSettings(path_hops=2, tau_support=0.1, tie_margin=1.0)
    refined = refine(initial_path(walker), Concepts(CONCEPTS), walker, settings)
    assert refined.trace["kept_last"] == [INITIAL] and refined.last_marks == [(refined.trace["cycles"][0], "near_tie")]
    unmark_held(refined, {(e.nodes, e.edges) for e in merge_paths([refined.final])})  # held: not the kept path
    assert refined.trace["kept_last"] == [INITIAL] and refined.trace["cycles"][0]["near_tie"] is True
    # the evidence before the paths kept last (a neighbourhood step, another start's path) holds it already
    unmark_held(refined, {(e.nodes, e.edges) for e in merge_paths(refined.kept_last)})
    assert refined.trace["kept_last"] == [] and "near_tie" not in refined.trace["cycles"][0]


def test_merged_paths_leave_out_the_evidence_already_kept() -> None:
    walker = walker_over(store())
    first = initial_path(walker)
    kept = merge_paths([first])
    assert merge_paths([first], kept) == [] and merge_paths([first, first]) == kept


def test_paper_preset_and_explicit_values() -> None:
    tuned, paper = MetaKGRAGSettings(), MetaKGRAGSettings(preset="paper")
    assert (tuned.path_hops, tuned.keep_better, tuned.rank_paths, tuned.tau_coverage) == (3, True, True, 0.5)
    assert (tuned.relation_coverage, tuned.guide_relations, tuned.neighbourhood, tuned.keep_margin) == (
        True,
        True,
        3,
        0.0,
    )
    assert (tuned.tau_support, paper.tau_support) == (0.35, 0.25)
    assert (paper.path_hops, paper.keep_better, paper.rank_paths, paper.tau_coverage) == (3, False, False, 0.6)
    # none of the departures in the paper preset
    assert (paper.relation_coverage, paper.guide_relations, paper.neighbourhood, paper.keep_margin) == (
        False,
        False,
        0,
        0.0,
    )
    assert MetaKGRAGSettings(preset="paper", path_hops=4).path_hops == 4  # an explicit value wins
    with pytest.raises(ValueError, match="preset"):
        MetaKGRAGSettings(preset="newest")  # type: ignore[arg-type]


class RelationEmbedder(AxisEmbedder):
    """AxisEmbedder that also knows the relations: "leads to" reads like the question, "near" does not."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        known = {"leads to": (1, 0, 0, 0, 0), "near": (0, 0, 0, 0, 1)}
        base = AxisEmbedder.embed(self, texts)
        return np.asarray([known.get(t, tuple(row)) for t, row in zip(texts, base, strict=True)], dtype=np.float32)


def test_the_relation_weighs_in_each_step() -> None:
    graph = store()
    services = QAServices(graph, RelationEmbedder(), max_entries=1000)
    decoy = graph.get_node(ident("decoy"))
    assert decoy is not None
    plain = Walker(graph, services, QUESTION, max_neighbours=100)
    assert names(plain.extend(WalkPath([decoy]), 1, {})) == ["decoy", "decoy two"]  # 0.8 beats zeta's 0.6
    by_relation = Walker(graph, services, QUESTION, max_neighbours=100, relation_weight=0.5)
    options = by_relation.neighbours(ident("decoy"))
    weights = dict(zip([nb.node.name for nb in options], by_relation.step_weights(options), strict=True))
    # decoy two: 0.5 * 0.8 + 0.5 * sim("near", Q) = 0.4; zeta: 0.5 * 0.6 + 0.5 * sim("leads to", Q) = 0.8
    assert weights["decoy two"] == pytest.approx(0.4, abs=1e-3) and weights["zeta"] == pytest.approx(0.8, abs=1e-3)
    assert names(by_relation.extend(WalkPath([decoy]), 1, {})) == ["decoy", "zeta"]
