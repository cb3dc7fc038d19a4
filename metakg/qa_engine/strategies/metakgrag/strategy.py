"""``metakgrag``: MetaKGRAG (Yuan et al., arXiv 2508.09460), greedy multi-start paths refined by
Perceive-Evaluate-Adjust.

From each start entity a greedy search follows, at every step, the neighbour with the highest weight:
its similarity to the question plus the adjustments made so far. The cycle then looks at the path:

- **Perceive**: coverage(c) = max over path entities e of sim(c, e), for every concept c.
- **Evaluate**: a *completeness* deficiency is a concept with coverage below ``tau_coverage``; a
  *relevance* deficiency is a path entity whose GlobalSupport(e) = alpha * EntityScope(e) +
  (1 - alpha) * sim(e, Q) is below ``tau_support``, where EntityScope(e) is the share of concepts c
  with sim(e, c) > ``tau_c``.
- **Adjust**: +delta on every entity seen near the path that is relevant (sim > ``tau_c``) to a missing
  concept, -delta on each misleading entity; then restart the greedy search from the pivot, the path
  entity with the highest max-similarity to the missing concepts (completeness) or the highest
  GlobalSupport (relevance). The path up to the pivot is kept.

Departures, each a setting (the ``paper`` preset turns them off): a relation-like concept ("directed")
is covered by the relation of a path's edge, not by an entity name that falls short of ``tau_coverage``,
and an entity reached by such an edge counts it in its EntityScope (``relation_coverage``); a relation word
the path covers only through an edge that serves another one is missing (``one_edge_each``); when only
relation words are missing the walk restarts from every entity of the path, drawn toward neighbours with an
edge onward that reads like a missing word, and the restart whose relations read most like the question's
relation words is the correction (``restart_search``; without it, the walk restarts at the start entity),
and when that restart starts past the start entity, the search's restart from the start entity is kept last
(``keep_start_restart``; it may be the path the correction replaced);
when a pivot's restart gives back the same path the walk restarts at the start entity (``retry_from_start``:
the first step was the wrong one); a correction is kept
only when it covers at least ``keep_margin`` more than the path it corrects (``keep_better``; the tuned
margin is 0: one that covers less is dropped), and one that covers exactly as much keeps the path it
corrects in the evidence too, after it (``keep_tied``); one that covers at most ``tie_margin`` more (a near
tie: usually a similarity moved, no missing concept covered) keeps it last, after the neighbourhood, and one rejected
for covering at most ``tie_margin`` less is itself kept last. Off by default
(measured, see the docs): a rejected correction for both deficiencies followed by the one for the misleading
entities alone (``relevance_fallback``).

The cycle stops when no deficiency is found, when the new path's Jaccard similarity to the previous one
exceeds ``tau_similarity``, or after ``n_max`` cycles. The final paths are merged without duplicates.
Ablation switches (the settings ``no_completeness``, ``no_relevance``, ``no_restart``, ``no_cycle``) turn
off the completeness check, the relevance check, the strategic restart (restart from the start entity
instead of the pivot, by the plain greedy walk: no restart search, no step back from a dead end, see
``step_back``), or the
whole cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import Field, model_validator

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, EvidencePath, Question, path_records
from metakg.qa_engine.events import emit
from metakg.qa_engine.primitives import choice_concepts, find_starts, question_walker
from metakg.qa_engine.strategy import Retrieval, RetrieveThenAnswer, StrategySettings
from metakg.qa_engine.walk import Walker, WalkPath, jaccard, relation_text

PAPER = {
    "path_hops": 3,
    "n_max": 3,
    "tau_similarity": 0.8,
    "tau_coverage": 0.6,
    "tau_c": 0.3,
    "tau_support": 0.25,
    "alpha": 0.5,
    "delta": 0.25,
    "keep_better": False,
    "keep_margin": 0.0,
    "keep_tied": False,
    "tie_margin": 0.0,
    "relevance_fallback": False,
    "relation_coverage": False,
    "guide_relations": False,
    "neighbourhood": 0,
    "step_back": 0,
    "retry_from_start": False,
    "restart_search": False,
    "keep_start_restart": False,
    "rank_paths": False,
    "one_edge_each": False,
    "coverage": "path",
}
"""The ``paper`` preset: the paper's values where it gives them (n_max, tau_similarity, tau_coverage, tau_c,
delta), this implementation's first choices elsewhere, and none of the departures."""


class MetaKGRAGSettings(StrategySettings):
    """``[qa.metakgrag]``. The defaults are the ``tuned`` preset, chosen with ``metakg tune`` on the first
    500 pilot CommonsenseQA questions (retrieval only, MiniLM embeddings); ``preset = "paper"`` gives the
    paper's values (:data:`PAPER`). A setting given explicitly overrides its preset."""

    preset: Literal["tuned", "paper"] = Field(
        default="tuned", description="Defaults for the settings not given: tuned (measured) or paper."
    )
    path_hops: int = Field(default=3, ge=1, le=10, description="Edges a greedy search adds to a path.")
    n_max: int = Field(default=3, ge=0, le=20, description="Most Perceive-Evaluate-Adjust cycles per path.")
    tau_similarity: float = Field(
        default=0.8, ge=0, le=1, description="Stop when a new path's Jaccard similarity to the last exceeds this."
    )
    tau_coverage: float = Field(default=0.5, ge=0, le=1, description="A concept covered below this is missing.")
    tau_c: float = Field(default=0.3, ge=0, le=1, description="sim(e, c) above this counts c in EntityScope(e).")
    tau_support: float = Field(
        default=0.35, ge=0, le=1, description="A path entity with GlobalSupport below this is misleading."
    )
    alpha: float = Field(default=0.5, ge=0, le=1, description="Weight of EntityScope in GlobalSupport.")
    delta: float = Field(default=0.25, ge=0, le=1, description="Weight adjustment per deficiency.")
    keep_better: bool = Field(
        default=True,
        description="Keep a corrected path only when it covers the concepts better than the path it corrects; "
        "otherwise keep that path and stop.",
    )
    keep_margin: float = Field(
        default=0.0,
        ge=0,
        le=5,
        description="With keep_better: how much more (summed coverage) a correction must cover to be kept.",
    )
    relevance_fallback: bool = Field(
        default=False,
        description="With keep_better: when the correction for missing concepts and misleading entities together "
        "is rejected, try the correction for the misleading entities alone before stopping.",
    )
    keep_tied: bool = Field(
        default=True,
        description="With keep_better and keep_margin 0: when a correction covers exactly as much as the path it "
        "corrects, keep that path in the evidence too, right after the correction (the check cannot tell which "
        "is right).",
    )
    tie_margin: float = Field(
        default=0.15,
        ge=0,
        le=5,
        description="With keep_better and keep_tied: a correction that covers more than the path it corrects, but "
        "by at most this much (summed coverage), is a near tie: that path stays in the evidence too, after the "
        "neighbourhood; a correction rejected for covering at most this much less is kept there itself.",
    )
    relation_coverage: bool = Field(
        default=True,
        description='A concept may be covered by the relation of a path\'s edge ("directed" by directed_by), '
        "not only by an entity's name; a relation word is not covered by a name short of tau_coverage.",
    )
    guide_relations: bool = Field(
        default=True,
        description="Steer each step by the question's relation words still uncovered, nearest the start "
        "entity's mention first, instead of by the whole question.",
    )
    neighbourhood: int = Field(
        default=3,
        ge=0,
        le=100,
        description="One-edge steps kept per start entity beside the paths, the best first (the answers one "
        "edge away that one path per start leaves out).",
    )
    step_back: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Times a walk from the start entity may step back from a first step into a node with "
        "nowhere to go and take the next best (initial paths, and restarts at the start entity).",
    )
    restart_search: bool = Field(
        default=True,
        description="When only relation words are missing: restart from every entity of the path, the first step "
        "drawn toward neighbours with an edge onward that reads like a missing word, and keep the restart whose "
        "relations read most like the question's relation words (instead of one restart at the start entity).",
    )
    keep_start_restart: bool = Field(
        default=True,
        description="With restart_search: when a kept correction restarts past the start entity, the restart the "
        "search drew from the start entity is kept too, after all other evidence (the relation words' "
        "similarity that chose between them is weak).",
    )
    retry_from_start: bool = Field(
        default=True,
        description="When a restart from the pivot gives back the same path, restart at the start entity (the "
        "first step was the wrong one) instead of stopping as converged.",
    )
    one_edge_each: bool = Field(
        default=True,
        description="A relation word the path covers only through an edge that serves another one is missing: one "
        'directed_by edge does not answer both "director" and "films directed". Only words that read clearly '
        "like one relation (clear_margin) take an edge of their own.",
    )
    clear_margin: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="With one_edge_each: how much closer a relation word must read to its closest relation around "
        "the path than to the next for it to take an edge of its own.",
    )
    rank_paths: bool = Field(
        default=True,
        description="Order the final paths by how well they cover the concepts (best first) instead of by "
        "start entity: the evidence order the answer prompt and an evidence budget cut.",
    )
    coverage: Literal["path", "question"] = Field(
        default="path",
        description="Completeness is judged on the path alone (the paper), or on all the question's initial "
        "paths (a concept another start's path covers is not missing).",
    )

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") == "paper":
            return PAPER | data
        return data

    no_completeness: bool = Field(default=False, description="Ablation: no completeness check.")
    no_relevance: bool = Field(default=False, description="Ablation: no relevance check.")
    no_restart: bool = Field(
        default=False,
        description="Ablation: restart from the start entity, not the pivot, by the plain greedy walk (no restart "
        "search, no step back).",
    )
    no_cycle: bool = Field(default=False, description="Ablation: no cycle at all (the initial greedy paths).")


SWITCHES = ("no_completeness", "no_relevance", "no_restart", "no_cycle")


class MetaKGRAG(RetrieveThenAnswer[MetaKGRAGSettings]):
    """Greedy multi-start paths refined by the Perceive-Evaluate-Adjust cycle."""

    name = "metakgrag"
    summary = "MetaKGRAG: greedy multi-start paths refined by a Perceive-Evaluate-Adjust cycle."
    Settings = MetaKGRAGSettings
    metric_columns = (("prr", "PRR"), ("cycles_per_question", "cycles/q"))

    @classmethod
    def switches(cls) -> tuple[str, ...]:
        """The ablation switches."""
        return SWITCHES

    async def retrieve(self, question: Question, ctx: QAContext, client: LLMClient | None) -> Retrieval:
        """The refined paths of every start entity, merged, and the cycle trace."""
        matches, trace = await find_starts(question, ctx, client)
        search = question_walker(question, ctx)
        concepts = Concepts(list(trace["question_concepts"]), choice_concepts(question, ctx.settings))
        search.prefetch([m.node.id for m in matches])
        # with a marked topic, the other starts' concepts ("cast": a tag) still tell the topic's path where to go
        named = [m for m in matches if m.concept == question.topic] if question.topic else matches
        guides = [
            relation_words(question.text, trace["question_concepts"], m.concept, named or matches)
            if self.settings.guide_relations
            else []
            for m in matches
        ]
        initials = []
        for match, guide in zip(matches, guides, strict=True):
            search.guide_by(guide)
            initials.append(
                search.extend(WalkPath([match.node]), self.settings.path_hops, {}, step_back=self.settings.step_back)
            )
        refined: list[Refinement] = []
        for number, initial in enumerate(initials):
            others = [p for i, p in enumerate(initials) if i != number] if self.settings.coverage == "question" else []
            search.guide_by(guides[number])
            one = refine(initial, concepts, search, self.settings, others)
            one.trace["relation_words"] = guides[number]
            one.trace["coverage_score"] = round(
                sum(diagnose(one.final, concepts, search, self.settings).coverage.values()), 4
            )
            refined.append(one)
        if self.settings.rank_paths:  # stable: the start order breaks ties
            refined.sort(key=lambda one: -one.trace["coverage_score"])
        starts = [one.trace for one in refined]
        n_refined = sum(1 for s in starts if s["refined"])
        on = [s for s in SWITCHES if getattr(self.settings, s)]
        trace.update(
            {
                "ablation": "+".join(on) if on else "full",
                "paths": starts,
                "cycles": sum(len(s["cycles"]) for s in starts),
                "refined_paths": n_refined,
                "path_refinement_rate": n_refined / len(starts),
            }
        )
        evidence = merge_paths([p for one in refined for p in (one.final, *one.kept_too)])
        if self.settings.neighbourhood:
            evidence += neighbourhood(matches, guides, search, self.settings.neighbourhood, evidence)
        held = {(e.nodes, e.edges) for e in evidence}
        evidence += merge_paths([p for one in refined for p in one.kept_last], evidence)
        for one in refined:  # a path kept last that the evidence already held (a neighbourhood step) is not marked
            unmark_held(one, held)
        return Retrieval(evidence, trace)

    def metrics(self, answer: Answer) -> dict[str, float]:
        """Paths, refined paths and cycles of one answer."""
        trace = answer.trace
        return {
            "paths": len(trace.get("paths", [])),
            "refined_paths": trace.get("refined_paths", 0),
            "cycles": trace.get("cycles", 0),
        }

    @classmethod
    def summarise(cls, metrics: Sequence[dict[str, float]]) -> dict[str, Any]:
        """The path refinement rate (refined paths over all final paths) and cycles per question."""
        paths = sum(m.get("paths", 0) for m in metrics)
        return {
            "prr": round(sum(m.get("refined_paths", 0) for m in metrics) / paths, 4) if paths else None,
            "cycles_per_question": round(sum(m.get("cycles", 0) for m in metrics) / len(metrics), 3)
            if metrics
            else None,
        }

    def trace_lines(self, answer: Answer) -> list[str]:
        """Concepts and starts, then each start's initial path, its cycles and why it stopped."""
        lines = super().trace_lines(answer)
        for path in answer.trace.get("paths", []):
            lines.append(f"from {path['start']}: {' > '.join(path['initial_path'])}")
            for cycle in path["cycles"]:
                by, coverage = cycle.get("covered_by", {}), cycle.get("coverage", {})
                missing = (
                    ", ".join(
                        f"{c} (best {by[c]} {coverage[c]})" if c in by and c in coverage else c
                        for c in cycle["missing_concepts"]
                    )
                    or "-"
                )
                step = f"  cycle {cycle['cycle']}: missing {missing}; misleading {len(cycle['misleading_entities'])}"
                if "pivot" in cycle:
                    step += (
                        f"; pivot {cycle['pivot']} -> {' > '.join(cycle['new_path'])} (sim {cycle['path_similarity']})"
                    )
                if "rejected_first" in cycle:
                    first = cycle["rejected_first"]
                    step += (
                        f"; the correction for both, {' > '.join(first['new_path'])}, covered less "
                        f"({first['coverage_change']}): the misleading entities alone were corrected"
                    )
                if cycle.get("tied"):
                    step += "; it covers as much: the path it corrects is kept too"
                change = abs(cycle.get("coverage_change", 0.0))
                if cycle.get("near_tie") and cycle.get("rejected"):
                    step += f"; it covers only {change} less (a near tie): it is kept last"
                elif cycle.get("near_tie"):
                    step += f"; it covers only {change} more (a near tie): the path it corrects is kept last"
                if cycle.get("start_restart_kept"):
                    step += "; the search's restart from the start entity is kept last too"
                lines.append(step)
            lines.append(f"  stop: {path['stop']}{'; refined' if path['refined'] else ''}")
            lines.extend(f"  kept too: {' > '.join(kept)}" for kept in path.get("kept_too", []))
            lines.extend(f"  kept last: {' > '.join(kept)}" for kept in path.get("kept_last", []))
        return lines


@dataclass
class Diagnosis:
    """One Perceive-Evaluate pass over a path. ``covered_by``: for each concept, what covers it best: an
    entity of the path (``entity: <name>``) or, for a relation-like concept ("directed", "written by"), the
    relation of one of its edges (``relation: <relation>``)."""

    coverage: dict[str, float]
    missing: list[str]
    support: dict[str, float]
    misleading: list[str]
    covered_by: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Concepts:
    """What a path should cover: the question's concepts, each on its own, and the alternatives (the choices
    of a multiple-choice question), covered as one concept when any of them is."""

    required: list[str]
    alternatives: list[str] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        """Every concept text, required first."""
        return self.required + self.alternatives

    @property
    def group(self) -> str:
        """The coverage-map key of the alternatives."""
        return "one of: " + " | ".join(self.alternatives)

    def __len__(self) -> int:
        return len(self.required) + (1 if self.alternatives else 0)


def diagnose(
    path: WalkPath, concepts: Concepts, walker: Walker, settings: MetaKGRAGSettings, others: Sequence[WalkPath] = ()
) -> Diagnosis:
    """Perceive (coverage map) and Evaluate (completeness and relevance deficiencies) one path; a concept
    the ``others`` paths cover is not missing."""
    texts, n_required = concepts.texts, len(concepts.required)
    sim_ec = walker.sim.nodes_to(path.nodes, texts)  # entities x concepts
    best = sim_ec.max(axis=0) if path.nodes else np.zeros(len(texts))
    by = [f"entity: {path.nodes[int(i)].name}" for i in sim_ec.argmax(axis=0)] if path.nodes else [""] * len(texts)
    elsewhere = [n for p in others for n in p.nodes]
    if elsewhere:
        best = np.maximum(best, walker.sim.nodes_to(elsewhere, texts).max(axis=0))
    relevant = sim_ec > settings.tau_c
    shared: dict[str, str] = {}
    if settings.relation_coverage:
        # an entity name that only resembles a relation word ("Drama" for "acted", 0.472) is noise: below
        # tau_coverage it covers nothing, and only the relations of the path's edges can
        for j, c in enumerate(concepts.required):
            if c in walker.guide and best[j] < settings.tau_coverage:
                best[j], by[j] = 0.0, "nothing"
    if settings.relation_coverage and path.edges:
        # a relation-like concept is covered by a relation of the path's edges, never by an entity name
        relations = [relation_text(e) for e in path.edges]
        sim_rc = walker.relation_sims(path.edges, texts)
        named = best.copy()
        for j in range(n_required):
            r = int(np.argmax(sim_rc[:, j]))
            if sim_rc[r, j] > best[j]:
                best[j], by[j] = float(sim_rc[r, j]), f"relation: {relations[r]}"
        if settings.one_edge_each and not settings.no_completeness:  # what it finds is only ever missing
            shared = shared_edges(path, sim_rc[:, :n_required], concepts.required, named, walker, settings)
            for j, c in enumerate(concepts.required):
                if c in shared:
                    by[j] += f" (the edge that serves {shared[c]})"
        # and an entity reached by such an edge serves that concept: it is in the concept's scope
        relevant[1:, :n_required] |= sim_rc[:, :n_required] > settings.tau_c
    coverage = {c: float(best[j]) for j, c in enumerate(concepts.required)}
    hits = relevant[:, :n_required].sum(axis=1)
    if concepts.alternatives:
        coverage[concepts.group] = float(best[n_required:].max())
        hits = hits + relevant[:, n_required:].any(axis=1)
    scope = hits / len(concepts) if len(concepts) else np.zeros(len(path.nodes))
    q = np.asarray(walker.q_sim(path.nodes))
    support_values = settings.alpha * scope + (1 - settings.alpha) * q
    support = {n.id: float(s) for n, s in zip(path.nodes, support_values, strict=True)}
    missing: list[str] = []
    if not settings.no_completeness:
        missing = [c for c in concepts.required if coverage[c] < settings.tau_coverage or c in shared]
        if concepts.alternatives and coverage[concepts.group] < settings.tau_coverage:
            missing += concepts.alternatives
    misleading = (
        []
        if settings.no_relevance
        else [n.id for n in path.nodes[1:] if support[n.id] < settings.tau_support]  # the start entity stays
    )
    covered_by = {c: by[j] for j, c in enumerate(concepts.required)}
    return Diagnosis(coverage, missing, support, misleading, covered_by)


def shared_edges(
    path: WalkPath, sims: Any, texts: Sequence[str], named: Any, walker: Walker, settings: MetaKGRAGSettings
) -> dict[str, str]:
    """The clear relation words (:func:`clear_words`) the path covers only through an edge that serves another
    one, each with that other word: given one edge each (greedily, the closest pairs first, not the pairing
    that covers the most words), they fall short of
    ``tau_coverage``, by their edge and by the ``named`` coverage of the path's names alike. ``sims``: the
    path's edges x ``texts``."""
    if sum(t in walker.guide for t in texts) < 2:
        return {}  # one relation word cannot share an edge: the neighbours need not be read
    clear = set(clear_words(path, walker, settings))
    words = [j for j, t in enumerate(texts) if t in clear]
    if len(words) < 2:
        return {}
    given, edge = one_edge_each(sims[:, words])
    serves = {int(e): texts[j] for j, e in zip(words, edge, strict=True) if e >= 0}
    return {
        texts[j]: serves.get(int(np.argmax(sims[:, j])), "another word")
        for k, j in enumerate(words)
        if sims[:, j].max() >= settings.tau_coverage > max(given[k], named[j])
    }


def one_edge_each(sims: Any) -> tuple[Any, Any]:
    """For a matrix of edges x words: each word's similarity to the edge it is given and that edge's index
    (-1: none left), each edge given to one word at most, the most similar pairs first."""
    n_edges, n_words = sims.shape
    best, by = np.zeros(n_words), np.full(n_words, -1)
    used: set[int] = set()
    for flat in np.argsort(-sims, axis=None, kind="stable"):
        e, w = divmod(int(flat), n_words)
        if by[w] >= 0 or e in used:
            continue
        best[w], by[w] = sims[e, w], e
        used.add(e)
        if len(used) == min(n_edges, n_words):
            break
    return best, by


def clear_words(path: WalkPath, walker: Walker, settings: MetaKGRAGSettings) -> list[str]:
    """The question's relation words that read clearly like one relation around the path (the relations of the
    neighbours the walker reads, at most ``max_neighbours`` per node): their similarity to the closest
    relation beats the next by ``clear_margin`` or more; with one relation around, every word is clear.
    "directed" (0.84 like directed by, 0.43 next) is clear; "films" (0.54 like starred actors, 0.52 like
    directed by) names the kind of entity the path passes, not one of its edges."""
    if not walker.guide:
        return []
    relations = walker.relations_around(path)
    if not relations:
        return []
    sims = walker.text_sims(relations, walker.guide)  # relations x words
    top = -np.sort(-sims, axis=0)
    gap = top[0] - (top[1] if len(relations) > 1 else 0.0)
    return [w for w, g in zip(walker.guide, gap, strict=True) if g >= settings.clear_margin]


TIE = 1e-6
"""Two summed coverages closer than this are equal (both are sums of the same similarities)."""


class Refinement(NamedTuple):
    """One start's path before and after the cycle, the cycle's trace, the paths ``keep_tied`` keeps
    beside the final one (the latest first), and the paths kept after all other evidence: the near ties'
    and the restarts from the start entity ``keep_start_restart`` keeps."""

    initial: WalkPath
    final: WalkPath
    trace: dict[str, Any]
    kept_too: list[WalkPath]
    kept_last: list[WalkPath]
    last_marks: list[tuple[dict[str, Any], str]]
    """For each of ``kept_last``: the cycle's trace entry that kept it and its mark there."""


def refine(
    initial: WalkPath,
    concepts: Concepts,
    walker: Walker,
    settings: MetaKGRAGSettings,
    others: Sequence[WalkPath] = (),
) -> Refinement:
    """The refinement of the ``initial`` greedy path, and the trace of every cycle; concepts covered by the
    ``others`` paths (the question's other initial paths) are not missing."""
    adjust: dict[str, float] = {}
    path = initial
    start = initial.nodes[0]
    cycles: list[dict[str, Any]] = []
    kept_too: list[WalkPath] = []
    near: list[tuple[dict[str, Any], str, WalkPath]] = []  # the cycles that keep a path last, the mark, the path
    stop = "no cycle (ablation)" if settings.no_cycle else f"n_max ({settings.n_max}) cycles"
    for cycle in range(0 if settings.no_cycle else settings.n_max):
        found = diagnose(path, concepts, walker, settings, others)
        entry: dict[str, Any] = {
            "cycle": cycle + 1,
            "path": [n.name for n in path.nodes],
            "coverage": {c: round(v, 4) for c, v in found.coverage.items()},
            "covered_by": found.covered_by,
            "missing_concepts": found.missing,
            "misleading_entities": found.misleading,
        }
        cycles.append(entry)
        if not found.missing and not found.misleading:
            stop = "no deficiency"
            break
        attempts = [found.missing]
        if settings.relevance_fallback and settings.keep_better and found.missing and found.misleading:
            attempts.append([])  # if the correction for both is rejected: the relevance one alone
        for attempt, missing in enumerate(attempts):
            if attempt:  # the first was rejected; the trace keeps what it proposed
                entry["rejected_first"] = {k: entry[k] for k in ("pivot", "new_path", "coverage_change")}
            trial = dict(adjust)
            new, pivot, reason, changes, from_start = _correct(path, missing, found, trial, walker, settings)
            similarity = jaccard(path, new)
            entry.update(
                {
                    "pivot": path.nodes[pivot].name,
                    "pivot_id": path.nodes[pivot].id,
                    "pivot_reason": reason,
                    "adjustments": {i: round(v, 3) for i, v in changes.items()},
                    "new_path": [n.name for n in new.nodes],
                    "path_similarity": round(similarity, 4),
                }
            )
            rejected = False
            if settings.keep_better:
                before, after = (
                    sum(found.coverage.values()),
                    sum(diagnose(new, concepts, walker, settings, others).coverage.values()),
                )
                entry["coverage_change"] = round(after - before, 4)
                rejected = after < before + settings.keep_margin - TIE  # equal within TIE is a tie, not a loss
            if not rejected:
                adjust = trial
                break
        if rejected:
            entry["rejected"] = True
            stop = f"correction rejected: coverage gain under keep_margin ({settings.keep_margin})"
            if settings.keep_tied and TIE < before - after < settings.tie_margin + TIE and not _same(new, path):
                # covers a little less: a near tie the other way; the rejected path is kept last
                entry["near_tie"] = True
                near.append((entry, "near_tie", new))
            break
        if settings.keep_better and settings.keep_tied and TIE <= after - before < settings.tie_margin + TIE:
            # a near tie: a similarity moved a little; the path it corrects stays in the evidence, after
            # everything else
            entry["near_tie"] = True
            near.append((entry, "near_tie", path))
        if settings.keep_better and settings.keep_tied and abs(after - before) < TIE and not _same(new, path):
            # the check cannot tell the two apart: the path it corrects stays in the evidence, after it
            entry["tied"] = True
            kept_too.append(path)
        if settings.keep_start_restart and from_start is not None and not _same(from_start, new):
            # the search chose a restart past the start entity by a weak similarity: the one from the start
            # entity is kept last, a second reading of the relation words
            entry["start_restart_kept"] = True
            near.append((entry, "start_restart_kept", from_start))
        path = new
        if similarity > settings.tau_similarity:
            stop = "converged: path similarity above tau_similarity"
            break
    kept_too = _distinct([p for p in reversed(kept_too) if not _same(p, path)])
    kept_last: list[WalkPath] = []
    last_marks: list[tuple[dict[str, Any], str]] = []
    for cycle_entry, mark, kept in near:  # a path already in the evidence keeps nothing: not marked
        if _same(kept, path) or any(_same(kept, k) for k in [*kept_too, *kept_last]):
            cycle_entry.pop(mark, None)
        else:
            kept_last.append(kept)
            last_marks.append((cycle_entry, mark))
    trace = {
        "start": start.name,
        "start_id": start.id,
        "initial_path": [n.name for n in initial.nodes],
        "cycles": cycles,
        "final_path": [n.name for n in path.nodes],
        "refined": not _same(initial, path),
        "kept_too": [[n.name for n in p.nodes] for p in kept_too],
        "kept_last": [[n.name for n in p.nodes] for p in kept_last],
        "stop": stop,
    }
    emit("path", **trace)  # one start's refinement, as soon as it is done
    return Refinement(initial, path, trace, kept_too, kept_last, last_marks)


def relation_words(text: str, concepts: Sequence[str], start: str, matches: Sequence[Any]) -> list[str]:
    """The question's concepts that name no start entity, nearest the ``start`` concept's mention first:
    what the steps from that start should follow ("directed", "films written")."""
    grounded = {m.concept for m in matches}
    lowered = text.lower()
    at = lowered.find(start.lower())
    words = [c for c in concepts if c not in grounded and c.lower() != start.lower()]
    return sorted(words, key=lambda c: abs(lowered.find(c.lower()) - at) if at >= 0 else 0)


def neighbourhood(
    matches: Sequence[Any], guides: Sequence[list[str]], walker: Walker, k: int, evidence: Sequence[EvidencePath]
) -> list[EvidencePath]:
    """Each start's ``k`` best one-edge steps (by the step weight of the path's first step) not already in
    ``evidence``, all ranked together: the answers one edge away, kept beside the paths."""
    have = {t for path in evidence for t in path.triples}
    found: list[tuple[float, int, EvidencePath]] = []
    for number, (match, guide) in enumerate(zip(matches, guides, strict=True)):
        walker.guide_by(guide)
        around = walker.neighbours(match.node.id)
        scores = walker.step_weights(around)
        kept = 0
        for i in np.argsort(-scores, kind="stable"):
            nb = around[int(i)]
            step = path_records([match.node, nb.node], [nb.edge])
            if step.triples[0] in have:
                continue
            found.append((float(scores[int(i)]), number, step))
            kept += 1
            if kept == k:
                break
    return [step for _, _, step in sorted(found, key=lambda item: (-item[0], item[1]))]


def _relation_pull(path: WalkPath, nodes: Sequence[Any], missing: Sequence[str], walker: Walker) -> Any:
    """For each of ``nodes`` (neighbours of the path): the best similarity of the relation of an edge joining
    it to the path to a ``missing`` concept."""
    best: dict[str, float] = {}
    on_path = set(path.ids)
    for node in path.nodes:
        around = [nb for nb in walker.neighbours(node.id) if nb.node.id not in on_path]
        if not around:
            continue
        scores = walker.relation_sims([nb.edge for nb in around], missing).max(axis=1)
        for nb, score in zip(around, scores, strict=True):
            best[nb.node.id] = max(best.get(nb.node.id, 0.0), float(score))
    return np.asarray([best.get(n.id, 0.0) for n in nodes])


def _correct(
    path: WalkPath,
    missing: list[str],
    found: Diagnosis,
    adjust: dict[str, float],
    walker: Walker,
    settings: MetaKGRAGSettings,
) -> tuple[WalkPath, int, str, dict[str, float], WalkPath | None]:
    """Adjust (in place) and restart for the ``missing`` concepts and ``found``'s misleading entities: the new
    path, the pivot's index on ``path``, why it was chosen, this correction's own adjustments, and the restart
    search's restart from the start entity (None without the search; the new path itself when it chose it)."""
    changes: dict[str, float] = {}
    if missing:
        relevant = walker.around(path)
        near = walker.sim.nodes_to(relevant, missing).max(axis=1) if relevant else np.zeros(0)
        if settings.relation_coverage and relevant:  # a missing relation word draws the edges that carry it
            near = np.maximum(near, _relation_pull(path, relevant, missing, walker))
        for node, score in zip(relevant, near, strict=True):
            if score > settings.tau_c:
                changes[node.id] = changes.get(node.id, 0.0) + settings.delta
    for node_id in found.misleading:
        changes[node_id] = changes.get(node_id, 0.0) - settings.delta
    for node_id, change in changes.items():
        adjust[node_id] = adjust.get(node_id, 0.0) + change
    if settings.no_restart:
        pivot, reason = 0, "start entity (no strategic restart)"
    elif missing and settings.relation_coverage and set(missing) <= set(walker.guide):
        # only relation words are missing: no entity is closer to them than another, and any relation of
        # the path may be the wrong one
        if settings.restart_search:
            new, pivot, from_start = _search_restart(path, missing, adjust, walker, settings)
            reason = (
                "completeness: only relation words are missing; of the restarts from each entity of the path, the "
                f"one whose relations read most like the question's relation words (from {path.nodes[pivot].name})"
            )
            return new, pivot, reason, changes, from_start
        pivot, reason = 0, "completeness: only relation words are missing, the walk restarts at the start entity"
    elif missing:
        f = walker.sim.nodes_to(path.nodes, missing).max(axis=1)
        pivot, reason = int(np.argmax(f)), "completeness: closest to the missing concepts"
    else:
        pivot = int(np.argmax([found.support[n.id] for n in path.nodes]))
        reason = "relevance: highest GlobalSupport"
    # the strategic restart steps back from dead ends; without it (ablation) the walk is the plain greedy one
    new = walker.extend(
        path.prefix(pivot), settings.path_hops, adjust, step_back=0 if settings.no_restart else settings.step_back
    )
    if pivot and settings.retry_from_start and not settings.no_restart and _same(new, path):
        # the pivot leads back to the same path: the adjustments changed nothing after it; the first step
        # may be the wrong one, so walk again from the start entity
        pivot, reason = 0, reason + "; it gave the same path, the walk restarts at the start entity"
        new = walker.extend(path.prefix(0), settings.path_hops, adjust, step_back=settings.step_back)
    return new, pivot, reason, changes, None


def _search_restart(
    path: WalkPath, missing: list[str], adjust: dict[str, float], walker: Walker, settings: MetaKGRAGSettings
) -> tuple[WalkPath, int, WalkPath]:
    """The restart for missing relation words (``restart_search``), its pivot, and the restart from the start
    entity: a restart from every entity
    of the path (one that gives the path back is not a correction), each with its first step drawn toward
    the neighbours from which a missing relation leads on (:func:`_lookahead`); the one whose relations read
    most like the question's relation words wins, the earliest pivot on a tie."""
    words = list(walker.guide)
    best: tuple[float, int, WalkPath] | None = None
    from_start: WalkPath | None = None
    for k in range(len(path.nodes)):
        drawn = dict(adjust)
        for node_id, pull in _lookahead(path, k, missing, walker, settings).items():
            drawn[node_id] = drawn.get(node_id, 0.0) + pull
        new = walker.extend(path.prefix(k), settings.path_hops, drawn, step_back=settings.step_back)
        if not k:
            from_start = new
        if k and _same(new, path):
            continue
        fit = float(walker.relation_sims(new.edges, words).max(axis=0).sum()) if new.edges else 0.0
        if best is None or fit > best[0] + TIE:
            best = (fit, k, new)
    assert best is not None and from_start is not None  # the restart from the start entity is always a candidate
    return best[2], best[1], from_start


def _lookahead(
    path: WalkPath, k: int, missing: list[str], walker: Walker, settings: MetaKGRAGSettings
) -> dict[str, float]:
    """A pull toward each neighbour of the path's ``k``-th entity (off the path) with an edge onward whose
    relation reads like a ``missing`` word above tau_c: delta times that similarity. The greedy step sees one
    edge ahead; the missing relation is often two ("the genres of the films starring X": which film has one)."""
    pivot = path.nodes[k]
    on_path = set(path.ids)
    around = [nb for nb in walker.neighbours(pivot.id) if nb.node.id not in on_path]
    walker.prefetch([nb.node.id for nb in around])
    onward = [[x.edge for x in walker.neighbours(nb.node.id) if x.node.id not in on_path] for nb in around]
    edges = [edge for edges_of in onward for edge in edges_of]
    if not edges:
        return {}
    best_of_edge = walker.relation_sims(edges, missing).max(axis=1)  # one product for every onward edge
    per_neighbour = np.split(best_of_edge, np.cumsum([len(edges_of) for edges_of in onward])[:-1])
    pulls: dict[str, float] = {}
    for nb, best_of in zip(around, per_neighbour, strict=True):
        if best_of.size and (best := float(best_of.max())) > settings.tau_c:
            pulls[nb.node.id] = settings.delta * best
    return pulls


def unmark_held(one: Refinement, held: set[tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
    """Take out of ``one``'s trace the paths kept last that ``held`` (the evidence before them) already has,
    and their cycles' marks: they added nothing."""
    kept = []
    for path, (entry, mark) in zip(one.kept_last, one.last_marks, strict=True):
        record = path_records(path.nodes, path.edges)
        if (record.nodes, record.edges) in held:
            entry.pop(mark, None)
        else:
            kept.append([n.name for n in path.nodes])
    one.trace["kept_last"] = kept


def _same(a: WalkPath, b: WalkPath) -> bool:
    """Whether two paths take the same nodes by the same edges."""
    return a.ids == b.ids and [e.id for e in a.edges] == [e.id for e in b.edges]


def _distinct(paths: list[WalkPath]) -> list[WalkPath]:
    """Each path once, in order."""
    kept: list[WalkPath] = []
    for path in paths:
        if not any(_same(path, other) for other in kept):
            kept.append(path)
    return kept


def merge_paths(paths: list[WalkPath], have: Sequence[EvidencePath] = ()) -> list[EvidencePath]:
    """The final paths as evidence, each distinct path once, in order, leaving out those in ``have``."""
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = {(e.nodes, e.edges) for e in have}
    merged = []
    for path in paths:
        evidence = path_records(path.nodes, path.edges)
        key = (evidence.nodes, evidence.edges)
        if key not in seen:
            seen.add(key)
            merged.append(evidence)
    return merged
