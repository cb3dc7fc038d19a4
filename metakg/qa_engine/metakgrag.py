"""MetaKGRAG (Yuan et al., arXiv 2508.09460): greedy multi-start paths refined by Perceive-Evaluate-Adjust.

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

The cycle stops when no deficiency is found, when the new path's Jaccard similarity to the previous one
exceeds ``tau_similarity``, or after ``n_max`` cycles. The final paths are merged without duplicates.
Ablations turn off the completeness check, the relevance check, the strategic restart (restart from the
start entity instead of the pivot), or the whole cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metakg.config import QASettings
from metakg.qa_engine.core import Ablation, EvidencePath, path_records
from metakg.qa_engine.primitives import Similarity
from metakg.schemas.graph_store import EdgeRecord, GraphStore, Neighbour, NodeRecord


@dataclass
class Path:
    """A walk: node records and the edges between consecutive nodes."""

    nodes: list[NodeRecord]
    edges: list[EdgeRecord] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        """Node ids in order."""
        return [n.id for n in self.nodes]

    def prefix(self, index: int) -> Path:
        """The path up to and including node ``index``."""
        return Path(self.nodes[: index + 1], self.edges[:index])


def jaccard(a: Path, b: Path) -> float:
    """PathSimilarity: Jaccard similarity of the two paths' entity sets."""
    sa, sb = set(a.ids), set(b.ids)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


class Walker:
    """Greedy search over a store for one question; neighbour lists are cached in ``neighbour_cache``."""

    def __init__(
        self,
        store: GraphStore,
        sim: Similarity,
        question: str,
        settings: QASettings,
        neighbour_cache: dict[str, list[Neighbour]],
    ) -> None:
        """Search ``store`` for ``question``; similarities come from ``sim``."""
        self.store = store
        self.sim = sim
        self.question = question
        self.settings = settings
        self._neighbours = neighbour_cache
        self._q: dict[str, float] = {}

    def neighbours(self, node_id: str) -> list[Neighbour]:
        """The node's neighbours (first ``max_neighbours``), cached."""
        found = self._neighbours.get(node_id)
        if found is None:
            if len(self._neighbours) > 100_000:
                self._neighbours.clear()
            found = self._neighbours[node_id] = self.store.neighbours(node_id, limit=self.settings.max_neighbours)
        return found

    def q_sim(self, nodes: list[NodeRecord]) -> list[float]:
        """sim(e, Q) for each node."""
        todo = [n for n in nodes if n.id not in self._q]
        if todo:
            for node, score in zip(todo, self.sim.nodes_to(todo, [self.question])[:, 0], strict=True):
                self._q[node.id] = float(score)
        return [self._q[n.id] for n in nodes]

    def around(self, path: Path) -> list[NodeRecord]:
        """The distinct neighbours of the path's nodes that are not on it (candidates for adjustment)."""
        on_path = set(path.ids)
        found: dict[str, NodeRecord] = {}
        for node in path.nodes:
            for nb in self.neighbours(node.id):
                if nb.node.id not in on_path:
                    found.setdefault(nb.node.id, nb.node)
        return list(found.values())

    def extend(self, path: Path, hops: int, adjust: dict[str, float]) -> Path:
        """Greedily add up to ``hops`` edges to ``path``: at each step the unvisited neighbour of highest weight."""
        nodes, edges = list(path.nodes), list(path.edges)
        visited = {n.id for n in nodes}
        for _ in range(hops):
            options: dict[str, Neighbour] = {}
            for nb in self.neighbours(nodes[-1].id):
                if nb.node.id not in visited and nb.node.id not in options:
                    options[nb.node.id] = nb
            if not options:
                break
            candidates = list(options.values())
            weights = np.asarray(self.q_sim([nb.node for nb in candidates])) + np.asarray(
                [adjust.get(nb.node.id, 0.0) for nb in candidates]
            )
            chosen = candidates[int(np.argmax(weights))]
            nodes.append(chosen.node)
            edges.append(chosen.edge)
            visited.add(chosen.node.id)
        return Path(nodes, edges)


@dataclass
class Diagnosis:
    """One Perceive-Evaluate pass over a path."""

    coverage: dict[str, float]
    missing: list[str]
    support: dict[str, float]
    misleading: list[str]


def diagnose(path: Path, concepts: list[str], walker: Walker, settings: QASettings, ablation: Ablation) -> Diagnosis:
    """Perceive (coverage map) and Evaluate (completeness and relevance deficiencies) one path."""
    sim_ec = walker.sim.nodes_to(path.nodes, concepts)  # entities x concepts
    coverage = {c: float(sim_ec[:, j].max()) if path.nodes else 0.0 for j, c in enumerate(concepts)}
    scope = (sim_ec > settings.tau_c).mean(axis=1) if concepts else np.zeros(len(path.nodes))
    q = np.asarray(walker.q_sim(path.nodes))
    support_values = settings.alpha * scope + (1 - settings.alpha) * q
    support = {n.id: float(s) for n, s in zip(path.nodes, support_values, strict=True)}
    missing = [] if ablation.no_completeness else [c for c in concepts if coverage[c] < settings.tau_coverage]
    misleading = (
        []
        if ablation.no_relevance
        else [n.id for n in path.nodes[1:] if support[n.id] < settings.tau_support]  # the start entity stays
    )
    return Diagnosis(coverage, missing, support, misleading)


def refine(
    start: NodeRecord, concepts: list[str], walker: Walker, settings: QASettings, ablation: Ablation
) -> tuple[Path, Path, dict[str, Any]]:
    """The initial greedy path from ``start``, its refinement, and the trace of every cycle."""
    adjust: dict[str, float] = {}
    initial = path = walker.extend(Path([start]), settings.path_hops, adjust)
    cycles: list[dict[str, Any]] = []
    stop = "no cycle (ablation)" if ablation.no_cycle else f"n_max ({settings.n_max}) cycles"
    for cycle in range(0 if ablation.no_cycle else settings.n_max):
        found = diagnose(path, concepts, walker, settings, ablation)
        entry: dict[str, Any] = {
            "cycle": cycle + 1,
            "path": [n.name for n in path.nodes],
            "coverage": {c: round(v, 4) for c, v in found.coverage.items()},
            "missing_concepts": found.missing,
            "misleading_entities": found.misleading,
        }
        cycles.append(entry)
        if not found.missing and not found.misleading:
            stop = "no deficiency"
            break
        changes: dict[str, float] = {}
        if found.missing:
            relevant = walker.around(path)
            near = walker.sim.nodes_to(relevant, found.missing).max(axis=1) if relevant else []
            for node, score in zip(relevant, near, strict=True):
                if score > settings.tau_c:
                    changes[node.id] = changes.get(node.id, 0.0) + settings.delta
        for node_id in found.misleading:
            changes[node_id] = changes.get(node_id, 0.0) - settings.delta
        for node_id, change in changes.items():
            adjust[node_id] = adjust.get(node_id, 0.0) + change
        if ablation.no_restart:
            pivot, reason = 0, "start entity (no strategic restart)"
        elif found.missing:
            f = walker.sim.nodes_to(path.nodes, found.missing).max(axis=1)
            pivot, reason = int(np.argmax(f)), "completeness: closest to the missing concepts"
        else:
            pivot = int(np.argmax([found.support[n.id] for n in path.nodes]))
            reason = "relevance: highest GlobalSupport"
        new = walker.extend(path.prefix(pivot), settings.path_hops, adjust)
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
        path = new
        if similarity > settings.tau_similarity:
            stop = "converged: path similarity above tau_similarity"
            break
    trace = {
        "start": start.name,
        "start_id": start.id,
        "initial_path": [n.name for n in initial.nodes],
        "cycles": cycles,
        "final_path": [n.name for n in path.nodes],
        "refined": initial.ids != path.ids or [e.id for e in initial.edges] != [e.id for e in path.edges],
        "stop": stop,
    }
    return initial, path, trace


def merge_paths(paths: list[Path]) -> list[EvidencePath]:
    """The final paths as evidence, each distinct path once, in order."""
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    merged = []
    for path in paths:
        evidence = path_records(path.nodes, path.edges)
        key = (evidence.nodes, evidence.edges)
        if key not in seen:
            seen.add(key)
            merged.append(evidence)
    return merged
