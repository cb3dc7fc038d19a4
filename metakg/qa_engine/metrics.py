"""Evidence and answer metrics of the evaluation harness, per question.

- **Answer matching** (free text): a reply is correct when it contains a gold answer after normalising both
  (case, punctuation, spaces, lemmas; :func:`answer_match`); exact match (the whole reply is a gold answer)
  is reported beside it. A multiple-choice reply is correct when its letter is the gold letter.
- **Evidence order**: the evidence's distinct entities in the strategy's own order (its paths in order, each
  path's triples head then tail), and its distinct triples in the same order.
- **Gold rank**: the 1-based position of the first gold answer in those orders (None: not in the evidence).
  Recall at a budget of k entities (or triples) is the share of questions whose gold rank is at most k, so
  strategies that retrieve different amounts are compared on the same amount.
- **Evidence size**: entities, triples, and the tokens of the evidence lines the answer prompt would show
  (words and punctuation marks, a tokenizer-independent count).
- **Gold entities of a long answer**: a free-text gold answer longer than :data:`LONG_ANSWER_WORDS` words (a
  doctor's reply in GenMedGPT) is replaced, for the evidence metrics, by the graph's entity names it
  mentions that the question does not (:func:`with_gold_entities`); none found, the question has no gold.
- **On-path share** (precision-like): the share of evidence entities that lie on a shortest path of the
  graph between a start entity (the question's concepts) and a gold answer entity, within ``max_hops``;
  None when no gold entity is that close.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from metakg.qa_engine.core import Answer, EvidencePath, Question
from metakg.qa_engine.primitives import evidence_lines
from metakg.schemas.graph_store import GraphStore, searchable
from metakg.schemas.tables import match_key
from metakg.text_processing import lemma_key

_TOKEN = re.compile(r"\w+|[^\w\s]")
LONG_ANSWER_WORDS = 8


def text_key(text: str) -> str:
    """The comparison key of an answer or entity name: :func:`match_key`, each word lemmatised."""
    return lemma_key(match_key(text))


def answer_match(reply: str, golds: Iterable[str]) -> tuple[bool, bool]:
    """(contains, exact): whether the normalised reply contains a normalised gold answer as whole words, and
    whether it equals one."""
    key = f" {text_key(reply)} "
    keys = [text_key(g) for g in golds if text_key(g)]
    return any(f" {g} " in key for g in keys), any(key.strip() == g for g in keys)


def with_gold_entities(question: Question, find: Callable[[str], list[str]]) -> Question:
    """``question`` with a long free-text gold answer replaced by the entity names ``find`` finds in it (a
    phrase matcher over the graph's names; names the question mentions too are not answers); unchanged
    when every gold answer is short."""
    golds = question.gold_texts
    if question.choices or not golds or all(len(g.split()) <= LONG_ANSWER_WORDS for g in golds):
        return question
    asked = {text_key(name) for name in find(question.text)}
    names = [name for gold in golds for name in find(gold) if text_key(name) not in asked]
    found = tuple(dict.fromkeys(names))
    return replace(question, answers=found, answer_text=found[0] if found else None, answer=None)


def entity_order(paths: Sequence[EvidencePath]) -> list[str]:
    """The evidence's distinct entity names (keys) in the strategy's order."""
    seen: dict[str, None] = {}
    for path in paths:
        for head, _, tail in path.triples:
            seen.setdefault(text_key(head))
            seen.setdefault(text_key(tail))
    return list(seen)


def triple_order(paths: Sequence[EvidencePath]) -> list[tuple[str, str, str]]:
    """The evidence's distinct triples in the strategy's order."""
    return list(dict.fromkeys(t for path in paths for t in path.triples))


def gold_rank(items: Sequence[Iterable[str]], golds: set[str]) -> int | None:
    """The 1-based position of the first item naming a gold key (None: none does)."""
    for rank, names in enumerate(items, start=1):
        if not golds.isdisjoint(names):
            return rank
    return None


def evidence_tokens(paths: Sequence[EvidencePath], limit: int) -> int:
    """Words and punctuation marks of the evidence lines the answer prompt would show."""
    return sum(len(_TOKEN.findall(line)) for line in evidence_lines(paths, limit))


@dataclass
class EvidenceScorer:
    """Scores an answer's evidence against the gold answers; shortest-path checks read ``store``.

    Attributes:
        store: the graph the answers were given over.
        max_evidence: evidence lines the answer prompt shows (for the token count).
        max_hops: how far a gold entity may be from a start entity for the on-path share.
        max_neighbours: neighbours read per node during the shortest-path search.
    """

    store: GraphStore | None
    max_evidence: int = 30
    max_hops: int = 4
    max_neighbours: int = 1000
    _on_path: dict[tuple[frozenset[str], tuple[str, ...]], set[str]] = field(
        default_factory=dict, init=False, repr=False
    )

    def score(self, question: Question, answer: Answer) -> dict[str, Any]:
        """Evidence size, gold ranks, recall and the on-path share of one answer."""
        golds = {text_key(g) for g in question.gold_texts if text_key(g)}
        entities = entity_order(answer.evidence)
        triples = triple_order(answer.evidence)
        ranks = {
            "gold_rank_entities": gold_rank([[e] for e in entities], golds) if golds else None,
            "gold_rank_triples": gold_rank([[text_key(h), text_key(t)] for h, _, t in triples], golds)
            if golds
            else None,
        }
        return {
            "evidence_recall": (ranks["gold_rank_entities"] is not None) if golds else None,
            "evidence_entities": len(entities),
            "evidence_triples": len(triples),
            "evidence_tokens": evidence_tokens(answer.evidence, self.max_evidence),
            **ranks,
            "on_path_share": self.on_path_share(question, answer),
        }

    def on_path_share(self, question: Question, answer: Answer) -> float | None:
        """The share of the evidence's entities on a shortest start-to-gold path (None: no such path)."""
        starts = {s["id"] for s in answer.trace.get("start_entities", [])}
        evidence = {n for path in answer.evidence for n in path.nodes}
        if self.store is None or not starts or not evidence:
            return None
        key = (frozenset(starts), question.gold_texts)
        if key not in self._on_path:  # every run of an evaluation asks this of the same question
            golds = {
                h.node.id
                for g in question.gold_texts
                if searchable(g)
                for h in self.store.search(g, mode="normalised", k=5)
            }
            self._on_path[key] = self.shortest_path_nodes(starts, golds) if golds else set()
        on_path = self._on_path[key]
        return round(len(evidence & on_path) / len(evidence), 4) if on_path else None

    def shortest_path_nodes(self, sources: set[str], targets: set[str]) -> set[str]:
        """Every node on a shortest path (at most ``max_hops`` edges, either direction) from a source to a
        target; empty when no target is that close."""
        from_sources = self._distances(sources, targets)
        best = min((from_sources[t] for t in targets if t in from_sources), default=None)
        if best is None:
            return set()
        from_targets = self._distances(targets, set(), limit=best)
        return {n for n, d in from_sources.items() if d <= best and from_targets.get(n, best + 1) + d == best}

    def _distances(self, seeds: set[str], stop_at: set[str], limit: int | None = None) -> dict[str, int]:
        """Hop distances from ``seeds`` by breadth-first search, up to ``limit`` (default ``max_hops``) hops;
        stops after the level where a node of ``stop_at`` is reached."""
        assert self.store is not None
        depth_limit = self.max_hops if limit is None else limit
        distance = dict.fromkeys(seeds, 0)
        frontier = list(seeds)
        for depth in range(1, depth_limit + 1):
            if stop_at & distance.keys():
                break
            following = []
            for node in frontier:
                for nb in self.store.neighbours(node, limit=self.max_neighbours):
                    if nb.node.id not in distance:
                        distance[nb.node.id] = depth
                        following.append(nb.node.id)
            frontier = following
            if not frontier:
                break
        return distance
