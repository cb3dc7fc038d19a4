"""Greedy walks over a store for one question: the search kg_rag and MetaKGRAG build their paths with."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metakg.qa_engine.services import QAServices, Similarity
from metakg.schemas.graph_store import EdgeRecord, GraphStore, Neighbour, NodeRecord


@dataclass
class WalkPath:
    """A walk: node records and the edges between consecutive nodes."""

    nodes: list[NodeRecord]
    edges: list[EdgeRecord] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        """Node ids in order."""
        return [n.id for n in self.nodes]

    def prefix(self, index: int) -> WalkPath:
        """The path up to and including node ``index``."""
        return WalkPath(self.nodes[: index + 1], self.edges[:index])


def relation_text(edge: EdgeRecord) -> str:
    """An edge's relation as words: its display text, else its relation, underscores as spaces either way
    (``has_genre`` embeds far from "genres", ``has genre`` near it)."""
    return (edge.display or edge.rel).replace("_", " ")


#: dead ends a greedy extension steps back from, at most, before it keeps a shorter path

#: with a guide, each relation word after the first still uncovered counts this much less
GUIDE_DECAY = 0.8


def jaccard(a: WalkPath, b: WalkPath) -> float:
    """PathSimilarity: Jaccard similarity of the two paths' entity sets."""
    sa, sb = set(a.ids), set(b.ids)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


class Walker:
    """Greedy search over a store for one question; neighbour lists and vectors come from the shared services."""

    def __init__(
        self,
        store: GraphStore,
        services: QAServices,
        question: str | Sequence[str],
        *,
        max_neighbours: int,
        alternatives_weight: float = 0.0,
        relation_weight: float = 0.0,
    ) -> None:
        """Search ``store`` for ``question``, reading at most ``max_neighbours`` neighbours per node.

        ``question`` is one text, or the question's text followed by alternatives (the choices): an entity's
        relevance sim(e, Q) is then ``(1 - w) * sim(e, text) + w * max sim(e, alternative)`` with
        ``w = alternatives_weight``. A step along an edge weighs ``(1 - r) * sim(e, Q) + r * sim(relation,
        question text)`` with ``r = relation_weight`` (the relation decides "directed by" from "written by").
        """
        self.store = store
        self.services = services
        self.sim: Similarity = services.similarity
        self.texts = [question] if isinstance(question, str) else list(question)
        self.alternatives_weight = alternatives_weight
        self.relation_weight = relation_weight
        self.max_neighbours = max_neighbours
        self._q: dict[str, float] = {}
        self.guide: list[str] = []  # relation words of the question, nearest the topic first (see guide_by)

    def guide_by(self, relation_words: Sequence[str]) -> None:
        """Steer each step's relation by the question's relation words instead of its whole text: a step's
        relation score is its similarity to the first word no earlier edge of the path covered (then the
        next ones, each counting less), so "who directed the films written by X" walks written_by, then
        directed_by. ``relation_words`` come nearest the topic first: English chains its relations from
        the answer to the topic ("the director of the films of the writer of X")."""
        self.guide = list(relation_words)

    def neighbours(self, node_id: str) -> list[Neighbour]:
        """The node's neighbours (first ``max_neighbours``), cached across questions."""
        return self.services.neighbours(
            node_id, self.max_neighbours, lambda: self.store.neighbours(node_id, limit=self.max_neighbours)
        )

    def prefetch(self, ids: Sequence[str]) -> None:
        """Read the neighbour lists of these nodes together (one round trip on a store that batches)."""
        self.services.prefetch(ids, self.max_neighbours)

    def q_sim(self, nodes: list[NodeRecord]) -> list[float]:
        """sim(e, Q) for each node (see the constructor for questions with alternatives)."""
        todo = [n for n in nodes if n.id not in self._q]
        if todo:
            sims = self.sim.nodes_to(todo, self.texts)
            scores = sims[:, 0]
            if sims.shape[1] > 1:
                scores = (1 - self.alternatives_weight) * scores + self.alternatives_weight * sims[:, 1:].max(axis=1)
            for node, score in zip(todo, scores, strict=True):
                self._q[node.id] = float(score)
        return [self._q[n.id] for n in nodes]

    def relation_sims(self, edges: Sequence[EdgeRecord], texts: Sequence[str]) -> Any:
        """The similarity, clipped to [0, 1], of each edge's relation (as words) to each text: edges x texts."""
        return self.text_sims([relation_text(e) for e in edges], texts)

    def text_sims(self, relations: Sequence[str], texts: Sequence[str]) -> Any:
        """The similarity, clipped to [0, 1], of each relation text to each text: relations x texts."""
        return np.clip(self.sim.vectors(list(relations)) @ self.sim.vectors(list(texts)).T, 0.0, 1.0)

    def relations_around(self, path: WalkPath) -> list[str]:
        """The distinct relations (as words) of the edges at the path's nodes, its own included."""
        found = {relation_text(e): None for e in path.edges}
        for nb in self._at(path):
            found.setdefault(relation_text(nb.edge))
        return list(found)

    def step_weights(self, options: Sequence[Neighbour], taken: Sequence[EdgeRecord] = ()) -> Any:
        """The weight of each step: the neighbour's relevance, mixed with its edge's relation relevance (to
        the question, or with a guide to the relation words the ``taken`` edges leave uncovered)."""
        weights = np.asarray(self.q_sim([nb.node for nb in options]))
        if self.relation_weight > 0 and options:
            edges = [nb.edge for nb in options]
            to_question = self._guided(edges, taken) if self.guide else self.relation_sims(edges, self.texts[:1])[:, 0]
            weights = (1 - self.relation_weight) * weights + self.relation_weight * to_question
        return weights

    def _guided(self, edges: Sequence[EdgeRecord], taken: Sequence[EdgeRecord]) -> Any:
        to_words = self.relation_sims(edges, self.guide)  # options x words
        left = np.ones(len(self.guide))
        if taken:
            left = 1.0 - self.relation_sims(taken, self.guide).max(axis=0)
        open_words = left > 0.5  # a word an earlier relation matches better than 0.5 is covered
        rank = np.where(open_words, np.cumsum(open_words) - 1, len(self.guide))  # the nearest open word first
        return (to_words * left * GUIDE_DECAY**rank).max(axis=1)

    def around(self, path: WalkPath) -> list[NodeRecord]:
        """The distinct neighbours of the path's nodes that are not on it (candidates for adjustment)."""
        on_path = set(path.ids)
        found: dict[str, NodeRecord] = {}
        for nb in self._at(path):
            if nb.node.id not in on_path:
                found.setdefault(nb.node.id, nb.node)
        return list(found.values())

    def _at(self, path: WalkPath) -> Iterator[Neighbour]:
        """The neighbours of each of the path's nodes in turn (all read at once first)."""
        self.prefetch(path.ids)
        for node in path.nodes:
            yield from self.neighbours(node.id)

    def extend(self, path: WalkPath, hops: int, adjust: dict[str, float], *, step_back: int = 0) -> WalkPath:
        """Greedily add up to ``hops`` edges to ``path``: at each step the unvisited neighbour of highest weight
        (its step weight, :meth:`step_weights`, plus its adjustment). A first step from the start entity to a
        node with nowhere to go is stepped back from (the node stays visited), at most ``step_back`` times."""
        nodes, edges = list(path.nodes), list(path.edges)
        visited = {n.id for n in nodes}
        floor, backtracks = len(nodes), 0
        while len(nodes) - floor < hops:
            candidates = [nb for nb in self.neighbours(nodes[-1].id) if nb.node.id not in visited]
            if not candidates:
                # the first step from the start led nowhere: step back and take the next best, a few times (a
                # later dead end is kept: the path reached something there)
                if floor != 1 or len(nodes) != 2 or backtracks >= step_back:
                    break
                nodes.pop()
                edges.pop()
                backtracks += 1
                continue
            weights = self.step_weights(candidates, edges) + np.asarray(
                [adjust.get(nb.node.id, 0.0) for nb in candidates]
            )
            chosen = candidates[int(np.argmax(weights))]
            nodes.append(chosen.node)
            edges.append(chosen.edge)
            visited.add(chosen.node.id)
        return WalkPath(nodes, edges)
