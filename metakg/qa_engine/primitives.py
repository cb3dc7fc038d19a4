"""Retrieval and answering primitives every strategy shares.

- :class:`Similarity`: cosine similarity of texts with the embedder, each text embedded once per run.
- Concept extraction: with the LLM (one call, a concept per line), or without it: the graph's entity
  names found in the question by a phrase matcher, then noun chunks / content-word phrases.
- Entity matching: each concept's best node by the store's search (exact, normalised, then embedding
  cosine), kept at or above ``tau_entity``.
- Evidence formatting (``Evidence i: head relation tail``), the answer prompt, and a robust parser of the
  multiple-choice letter in a reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metakg.errors import StoreError
from metakg.llm.client import LLMClient, Message, request
from metakg.llm.embedder import Embedder, Vectors
from metakg.qa_engine.core import EvidencePath, QAContext, Question
from metakg.schemas.graph_store import GraphStore, NodeRecord
from metakg.schemas.tables import match_key
from metakg.text_processing import PhraseIndex, concept_phrases, lemma_key


class Similarity:
    """Cosine similarity between texts and nodes; each text and node is embedded (or looked up) once.

    A node's vector is its stored name embedding when the store has one (``metakg embed``, same
    dimension as the embedder), else its name embedded now.
    """

    def __init__(self, embedder: Embedder, store: GraphStore | None = None, *, max_cached: int = 200_000) -> None:
        """Use ``embedder`` for texts, and ``store``'s name embeddings for nodes when it has them."""
        self._embedder = embedder
        self._store = store
        self._texts: dict[str, Vectors] = {}
        self._nodes: dict[str, Vectors] = {}
        self._max = max_cached

    def vectors(self, texts: Sequence[str]) -> Vectors:
        """Unit vectors of ``texts`` (rows in order), embedding only the texts not seen before."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._texts))
        if len(self._texts) + len(missing) > self._max:  # full: start over, and embed all of these
            self._texts.clear()
            missing = list(dict.fromkeys(texts))
        if missing:
            for text, vector in zip(missing, self._embedder.embed(missing), strict=True):
                self._texts[text] = vector
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        return np.stack([self._texts[t] for t in texts])

    def node_vectors(self, nodes: Sequence[NodeRecord]) -> Vectors:
        """Unit vectors of the nodes' names (rows in order): stored embeddings first, else embedded."""
        missing = list({n.id: n for n in nodes if n.id not in self._nodes}.values())
        if len(self._nodes) + len(missing) > self._max:  # full: start over, and look up all of these
            self._nodes.clear()
            missing = list({n.id: n for n in nodes}.values())
        if missing:
            stored = self._store.name_vectors([n.id for n in missing]) if self._store is not None else {}
            for node_id, vector in stored.items():
                if len(vector) == self._embedder.dim:
                    self._nodes[node_id] = np.asarray(vector, dtype=np.float32)
            rest = [n for n in missing if n.id not in self._nodes]
            if rest:
                for node, vector in zip(rest, self.vectors([n.name for n in rest]), strict=True):
                    self._nodes[node.id] = vector
        if not nodes:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        return np.stack([self._nodes[n.id] for n in nodes])

    def nodes_to(self, nodes: Sequence[NodeRecord], texts: Sequence[str]) -> Any:
        """``sim[i, j]`` = cosine(name of nodes[i], texts[j]), clipped to [0, 1]."""
        if not nodes or not texts:
            return np.zeros((len(nodes), len(texts)), dtype=np.float32)
        return np.clip(self.node_vectors(nodes) @ self.vectors(texts).T, 0.0, 1.0)


def similarity(ctx: QAContext) -> Similarity:
    """The context's shared :class:`Similarity` (made on first use)."""
    sim = ctx.caches.get("similarity")
    if sim is None:
        sim = ctx.caches["similarity"] = Similarity(ctx.embedder, ctx.store)
    assert isinstance(sim, Similarity)
    return sim


def phrase_index(ctx: QAContext) -> PhraseIndex:
    """A phrase matcher over the store's names and aliases (built once per context)."""
    index = ctx.caches.get("phrases")
    if index is None:
        index = ctx.caches["phrases"] = PhraseIndex(ctx.store.names())
    assert isinstance(index, PhraseIndex)
    return index


# ---------------------------------------------------------------------------- concepts
def concepts_by_rules(question: Question, ctx: QAContext) -> list[str]:
    """Entity names mentioned in the question (phrase matcher), then its noun/content phrases; no LLM."""
    found = phrase_index(ctx).find(question.text) + concept_phrases(question.text)
    return _unique(found, ctx.settings.max_concepts)


CONCEPT_PROMPT = (
    "List the key concepts of the question below: short noun phrases (1 to 4 words) a knowledge graph "
    "would have as entities. Write one concept per line and nothing else.\n\n"
    "Example question: Where would you put a plate after washing it?\n"
    "plate\nwashing\nkitchen cupboard\n\n"
    "Question: {question}"
)
_LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|concepts?\s*:)\s*", re.I)


def parse_concepts(reply: str, limit: int) -> list[str]:
    """Concept lines from an LLM reply: list marks, quotes and trailing punctuation dropped, 1 to 6 words."""
    concepts = []
    for line in reply.replace(",", "\n").splitlines():
        text = _LIST_MARK.sub("", line).strip().strip("\"'`").rstrip(".;:").strip()
        if text and len(text.split()) <= 6 and not text.lower().startswith(("example", "question", "here")):
            concepts.append(text)
    return _unique(concepts, limit)


async def extract_concepts(question: Question, ctx: QAContext, client: LLMClient | None) -> tuple[list[str], str]:
    """Concepts of ``question`` and how they were found (``llm``, ``rules``, or ``rules (llm gave none)``)."""
    if ctx.settings.concepts == "rules" or client is None:
        return concepts_by_rules(question, ctx), "rules"
    reply = await client.complete(
        request(
            [Message("user", CONCEPT_PROMPT.format(question=question.text.strip()))],
            model=client.model,
            temperature=ctx.temperature,
            max_tokens=96,
        ),
        tag="qa:concepts",
    )
    concepts = grounded(parse_concepts(reply.text, ctx.settings.max_concepts), question.text)
    if not concepts:
        return concepts_by_rules(question, ctx), "rules (llm gave none)"
    return concepts, "llm"


def grounded(concepts: Sequence[str], text: str) -> list[str]:
    """The concepts sharing a word (after lemmatising) with ``text``: drops echoes of the prompt's example
    and invented topics, which small models produce."""
    words = {lemma_key(w) for w in match_key(text).split()}
    return [c for c in concepts if any(lemma_key(w) in words for w in match_key(c).split() if len(w) > 2)]


def _unique(items: Sequence[str], limit: int) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = match_key(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out[:limit]


# ---------------------------------------------------------------------------- entities
@dataclass(frozen=True)
class EntityMatch:
    """A concept's best node and its score (1.0 for an exact or normalised name match)."""

    concept: str
    node: NodeRecord
    score: float
    how: str


def search_node(store: GraphStore, text: str, k: int = 1) -> list[Any]:
    """The store's search (``auto``); without name embeddings (a Neo4j database not embedded) name matches only."""
    try:
        return store.search(text, mode="auto", k=k)
    except StoreError:
        return store.search(text, mode="normalised", k=k)


def match_entities(concepts: Sequence[str], ctx: QAContext) -> list[EntityMatch]:
    """Each concept's best node at or above ``tau_entity``; one match per node (the best), best first."""
    best: dict[str, EntityMatch] = {}
    for concept in concepts:
        hits = search_node(ctx.store, concept, k=1)
        if hits and hits[0].score >= ctx.settings.tau_entity:
            hit = hits[0]
            current = best.get(hit.node.id)
            if current is None or hit.score > current.score:
                best[hit.node.id] = EntityMatch(concept, hit.node, float(hit.score), hit.match)
    return sorted(best.values(), key=lambda m: -m.score)


# ---------------------------------------------------------------------------- evidence and answers
def evidence_lines(paths: Sequence[EvidencePath], limit: int) -> list[str]:
    """``Evidence i: head relation tail`` lines, each triple once, in path order, at most ``limit``."""
    seen: set[tuple[str, str, str]] = set()
    lines: list[str] = []
    for path in paths:
        for triple in path.triples:
            if triple not in seen:
                seen.add(triple)
                lines.append(f"Evidence {len(lines) + 1}: {triple[0]} {triple[1]} {triple[2]}")
                if len(lines) == limit:
                    return lines
    return lines


def answer_prompt(question: Question, evidence: Sequence[str] | None) -> str:
    """The answer prompt: evidence (when given), the question, its choices, and the reply format."""
    parts = []
    if evidence is not None:
        parts.append(
            "Use the evidence from a knowledge graph below where it helps.\n"
            + ("\n".join(evidence) if evidence else "(no evidence was found)")
        )
    parts.append(f"Question: {question.text.strip()}")
    if question.choices:
        parts.append("\n".join(f"{letter}: {text}" for letter, text in question.choices))
        parts.append("Reply with the letter of the best choice, as 'Answer: X'.")
    else:
        parts.append("Reply with a short answer, as 'Answer: ...'.")
    return "\n\n".join(parts)


_LETTER_PATTERNS = tuple(
    re.compile(p, re.M)
    for p in (
        r"(?i:answer)\s*(?i:is)?\s*[:\-]?\s*\(?\**([A-Z])\b",
        r"(?i:answer)\s*(?i:is)?\s*[:\-]?\s*\(?([a-z])(?=\s*$|[.):,])",
        r"^\s*\(?\**([A-Za-z])\**\s*[:.)]?\s*$",
        r"^\s*\(?([A-Z])\s*[:.)]",
        r"(?i:choice|option)\s*\(?([A-Z])\b",
        r"\(([A-Z])\)",
    )
)


def parse_choice(reply: str, question: Question) -> str | None:
    """The chosen letter in ``reply``: ``Answer: B``, ``(B)``, ``B.``, ``the answer is b``, ``option B``,
    or a reply that names exactly one choice text; None when it cannot be told."""
    letters = {letter for letter, _ in question.choices}
    for pattern in _LETTER_PATTERNS:
        for match in pattern.finditer(reply):
            if match.group(1).upper() in letters:
                return match.group(1).upper()
    lowered = match_key(reply)
    named = [letter for letter, text in question.choices if match_key(text) and match_key(text) in lowered]
    return named[0] if len(named) == 1 else None


def parse_free_answer(reply: str) -> str:
    """The text after ``Answer:`` (else the first non-empty line)."""
    match = re.search(r"answer\s*:\s*(.+)", reply, re.I)
    if match:
        return match.group(1).strip()
    return next((line.strip() for line in reply.splitlines() if line.strip()), "")
