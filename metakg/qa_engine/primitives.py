"""Retrieval and answering primitives every strategy shares.

- Concept extraction: with the LLM (one call, a concept per line), or without it: the graph's entity
  names found in the question by a phrase matcher, then noun chunks / content-word phrases.
- Entity matching: each concept's best node by the store's search (exact, normalised, then embedding
  cosine), kept at or above ``tau_entity``.
- Evidence formatting (``Evidence i: head relation tail``), the answer prompt, and a robust parser of the
  multiple-choice letter in a reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metakg.config import QASettings
from metakg.errors import ConfigError, StoreError
from metakg.llm.client import Completion, LLMClient, Message, request
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import EvidencePath, NoEvidence, Question
from metakg.qa_engine.events import emit
from metakg.qa_engine.walk import Walker
from metakg.schemas.graph_store import BatchReads, GraphStore, NodeRecord, searchable
from metakg.schemas.tables import match_key
from metakg.schemas.vocabulary import TypeVocabulary
from metakg.text_processing import concept_phrases, lemma_key


# ---------------------------------------------------------------------------- LLM calls
async def ask_llm(
    client: LLMClient,
    ctx: QAContext,
    prompt: str,
    max_tokens: int,
    tag: str,
    json_schema: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> Completion:
    """One user-message call at the context's temperature, recorded under ``tag`` (with ``json_schema``, the
    reply is asked in that shape where the endpoint offers structured output; ``tools`` are offered through
    function calling where the client uses it, their calls returned in the text)."""
    asked = request(
        [Message("user", prompt)],
        model=client.model,
        temperature=ctx.temperature,
        max_tokens=max_tokens,
        json_schema=json_schema,
        tools=tools,
    )
    return await client.complete(asked, tag=tag)


# ---------------------------------------------------------------------------- concepts
def question_walker(question: Question, ctx: QAContext) -> Walker:
    """The greedy search for ``question``. With ``ground_choices``, an entity's relevance mixes its
    similarity to the stem and to its closest choice (weight ``choice_weight``); measured on the pilot
    CommonsenseQA set, this draws the walks to answer candidates far better than one text of the stem and
    the choices joined."""
    texts = [question.text]
    if ctx.settings.ground_choices and question.choices:
        texts += [text for _, text in question.choices]
    return Walker(
        ctx.store,
        ctx.services,
        texts,
        max_neighbours=ctx.settings.max_neighbours,
        alternatives_weight=ctx.settings.choice_weight,
        relation_weight=ctx.settings.relation_weight,
    )


def concepts_by_rules(question: Question, ctx: QAContext) -> list[str]:
    """Entity names mentioned in the question (phrase matcher), then its noun/content phrases; no LLM. A phrase
    never runs into a marked topic entity: "[X] wrote" gives X and "wrote", not "X wrote"."""
    pieces = question.text.split(question.topic) if question.topic else [question.text]
    found = ctx.services.phrases.find(question.text) + [p for piece in pieces for p in concept_phrases(piece)]
    return _unique(found, ctx.settings.max_concepts)


CONCEPT_PROMPT = (
    "List the key concepts of the question below: short noun phrases (1 to 4 words) a knowledge graph "
    "would have as entities. Write one concept per line and nothing else.\n\n"
    "Example question: Where would you put a plate after washing it?\n"
    "plate\nwashing\nkitchen cupboard\n\n"
    "Question: {question}"
)
_LIST_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|concepts?\s*:)\s*", re.I)


def _clean(line: str) -> str:
    return _LIST_MARK.sub("", line).strip().strip("\"'`").rstrip(".;:").strip()


def parse_concepts(reply: str, limit: int, question: str = "") -> list[str]:
    """Concept lines from an LLM reply: list marks, quotes and trailing punctuation dropped, 1 to 6 words.

    A line with commas is one concept when it appears in ``question`` as written (a title such as "No God,
    No Master"), else a comma-separated list of concepts."""
    asked = f" {match_key(question)} "
    concepts = []
    for line in reply.splitlines():
        whole = _clean(line)
        parts = [whole] if "," not in whole or f" {match_key(whole)} " in asked else whole.split(",")
        for part in parts:
            text = _clean(part)
            if text and len(text.split()) <= 6 and not text.lower().startswith(("example", "question", "here")):
                concepts.append(text)
    return _unique(concepts, limit)


async def extract_concepts(question: Question, ctx: QAContext, client: LLMClient | None) -> tuple[list[str], str]:
    """Concepts of the question's stem and how they were found (``llm``, ``rules``, ``rules, the LLM giving none``).

    The graph's own names found in the stem (phrase matcher) come first either way: they are grounded by
    construction, and the LLM's paraphrases of them ("the writer of No God") ground worse. The LLM's
    concepts (those sharing a word with the stem) follow; without an LLM, or when it gives none, the stem's
    noun and content-word phrases do.
    """
    if ctx.settings.concepts == "rules" or client is None:
        return concepts_by_rules(question, ctx), "rules"
    reply = await ask_llm(client, ctx, CONCEPT_PROMPT.format(question=question.text.strip()), 96, "qa:concepts")
    concepts = grounded(parse_concepts(reply.text, ctx.settings.max_concepts, question.text), question.text)
    if not concepts:
        return concepts_by_rules(question, ctx), "rules, the LLM giving none"
    return _unique(ctx.services.phrases.find(question.text) + concepts, ctx.settings.max_concepts), "llm"


def choice_concepts(question: Question, settings: QASettings) -> list[str]:
    """The choices of a multiple-choice question as concepts (``ground_choices``), else none."""
    return _unique([text for _, text in question.choices], len(question.choices)) if settings.ground_choices else []


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
    """A concept's candidate nodes: its exact name matches, else its normalised ones, else its embedding hits
    (none without name embeddings). The first way that finds something decides, so the thresholds of
    grounding (``tau_entity``, ``tau_margin``) compare hits of one kind; typo matches are left to people's
    searches."""
    for mode in ("exact", "normalised"):
        hits = store.search(text, mode=mode, k=k)
        if hits:
            return hits
    return _embedding_hits(store, text, k)


def match_entities(concepts: Sequence[str], ctx: QAContext, types: Collection[str] | None = None) -> list[EntityMatch]:
    """Each concept's best node at or above ``tau_entity``; one match per node (the best), best first.

    An embedding match must also beat the concept's runner-up by ``tau_margin``: a generic word ("genre")
    is about as close to many nodes (every genre) and grounds to none of them.

    With ``types`` (type names, subtypes included: :func:`allowed_types`), only nodes of those types count:
    the store's best ``TYPED_CANDIDATES`` hits are filtered, then its embedding hits when no name match
    is left; the runner-up of the margin is the next hit of an allowed type.
    """
    concepts = [c for c in concepts if searchable(c)]  # a blank concept names nothing (and a search refuses it)
    best: dict[str, EntityMatch] = {}
    margin = ctx.settings.tau_margin
    k = 2 if margin > 0 else 1
    # a store that reads in round trips finds every concept's name matches in one
    named = ctx.store.search_names(concepts, k=k) if not types and isinstance(ctx.store, BatchReads) else None
    for concept in concepts:
        if types:
            hits = _typed_hits(ctx.store, concept, types)
        elif named is not None:
            hits = named.get(concept) or _embedding_hits(ctx.store, concept, k)
        else:
            hits = search_node(ctx.store, concept, k=k)
        if not hits or hits[0].score < ctx.settings.tau_entity:
            continue
        hit = hits[0]
        if hit.match == "embedding" and len(hits) > 1 and hit.score - hits[1].score < margin:
            continue
        current = best.get(hit.node.id)
        if current is None or hit.score > current.score:
            best[hit.node.id] = EntityMatch(concept, hit.node, float(hit.score), hit.match)
    return sorted(best.values(), key=lambda m: -m.score)


def as_written(match: EntityMatch, question: Question) -> bool:
    """Whether ``match``'s entity name appears in the question as written, case included."""
    return re.search(rf"(?<!\w){re.escape(match.node.name)}(?!\w)", question.text) is not None


def without_fragments(matches: Sequence[EntityMatch]) -> list[EntityMatch]:
    """``matches`` without those whose concept is a run of words inside another concept matched by name."""
    named = [f" {match_key(m.concept)} " for m in matches if m.how != "embedding"]
    return [
        m
        for m in matches
        if not any(f" {match_key(m.concept)} " in whole and whole.strip() != match_key(m.concept) for whole in named)
    ]


def _embedding_hits(store: GraphStore, text: str, k: int) -> list[Any]:
    """The store's embedding hits (none without name embeddings): what ``auto`` search gives when no name
    matches."""
    try:
        return store.search(text, mode="embedding", k=k)
    except StoreError:
        return []


#: store hits looked at per concept when grounding is restricted to node types
TYPED_CANDIDATES = 25


def _typed_hits(store: GraphStore, concept: str, types: Collection[str]) -> list[Any]:
    hits = [h for h in search_node(store, concept, k=TYPED_CANDIDATES) if h.node.type in types]
    if hits and hits[0].match != "embedding":
        return hits
    try:
        return [h for h in store.search(concept, mode="embedding", k=TYPED_CANDIDATES) if h.node.type in types]
    except StoreError:  # no name embeddings: the name matches are all there is
        return hits


def allowed_types(names: Sequence[str], vocabulary: TypeVocabulary) -> frozenset[str]:
    """``names`` and every type of ``vocabulary`` under them.

    Raises:
        ConfigError: a name is not a type of the vocabulary (the message lists them).
    """
    unknown = [n for n in names if n not in vocabulary.names]
    if unknown:
        raise ConfigError(
            f"unknown node type(s) {', '.join(map(repr, unknown))}; the vocabulary has "
            f"{', '.join(sorted(vocabulary.names))}."
        )
    return frozenset(t for t in vocabulary.names if any(vocabulary.is_a(t, n) for n in names))


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
        r"(?i:answer|choice|option)\s*(?i:is)?\s*[:\-]?\s*[(\[\'\"‘“]?\**([A-Z])\b",
        r"(?i:answer)\s*(?i:is)?\s*[:\-]?\s*\(?([a-z])(?=\s*$|[.):,])",
        r"^\s*\(?\**([A-Za-z])\**\s*[:.)]?\s*$",
        r"^\s*\(?([A-Z])\s*[:.)]",
        r"(?i:choice|option)\s*\(?([A-Z])\b",
        r"\(([A-Z])\)",
    )
)


def json_values(text: str, opens: str = "{[", *, first: bool = False) -> list[Any]:
    """The JSON values a reply holds, in order, each decoded where one of ``opens`` starts it (a start that does
    not decode is passed over). ``first``: only the value at the first start, or none when it does not
    decode."""
    values: list[Any] = []
    decoder, at = json.JSONDecoder(), 0
    while True:
        starts = [i for i in (text.find(c, at) for c in opens) if i >= 0]
        if not starts:
            return values
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            if first:
                return values
            at = start + 1
            continue
        values.append(value)
        if first:
            return values
        at = start + end


def parse_choice(reply: str, question: Question) -> str | None:
    """The chosen letter in ``reply``: ``Answer: B``, ``(B)``, ``B.``, ``the answer is b``, ``option B``,
    ``The best choice is 'B'.``, or a reply that names exactly one choice text; None when it cannot be told."""
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


# ---------------------------------------------------------------------------- start entities
async def find_starts(
    question: Question, ctx: QAContext, client: LLMClient | None
) -> tuple[list[EntityMatch], dict[str, Any]]:
    """The start entities of ``question`` (at most ``max_starts``) and the trace of how they were found.

    Start entities come from the stem's concepts, best match first; among equal matches, the most relevant
    entity (its similarity to the stem and, with ``ground_choices``, the choices; :func:`question_walker`)
    first. The choices join the
    concepts (``trace["concepts"]``, what a strategy checks coverage against) but are never start entities:
    evidence that starts at a choice says nothing about how the question leads to it.

    A concept that is a part of another concept matched by name (*Glass* of *Shattered Glass*) starts
    nothing: the whole title was meant. A marked topic entity (``Question.topic``: MetaQA's ``[X]``, a
    quoted name) is a concept of its own, and when it grounds by name, concepts that ground by embedding
    alone start nothing ("movies" is close to the film *Movie Movie*, "acted" to the tag *action*).

    Raises:
        NoEvidence: no concept was found, or no entity matches one.
    """
    stem, how = await extract_concepts(question, ctx, client)
    if question.topic and searchable(question.topic):
        stem = _unique([question.topic, *stem], len(stem) + 1)
    found = match_entities(stem, ctx)
    if question.topic and any(m.how != "embedding" for m in match_entities([question.topic], ctx)):
        # the topic grounds by name: it leads, and another concept starts a path only when it names an entity
        # as the question writes it ("saw" in "what years saw releases" is not the film Saw)
        found = [m for m in found if m.how != "embedding" and (m.concept == question.topic or as_written(m, question))]
    found = without_fragments(found)
    if found:
        closeness = question_walker(question, ctx).q_sim([m.node for m in found])
        order = sorted(range(len(found)), key=lambda i: (-round(found[i].score, 4), -closeness[i]))
        found = [found[i] for i in order]
    matches = found[: ctx.settings.max_starts]
    trace: dict[str, Any] = {
        "concepts": _unique(stem + choice_concepts(question, ctx.settings), len(stem) + len(question.choices)),
        "question_concepts": stem,
        "concept_method": how,
        "start_entities": [
            {"concept": m.concept, "id": m.node.id, "name": m.node.name, "score": round(m.score, 4), "match": m.how}
            for m in matches
        ],
    }
    emit("concepts", concepts=trace["concepts"], method=how, starts=[m["name"] for m in trace["start_entities"]])
    if not matches:
        reason = "no concept was found in the question" if not stem else "no graph entity matches the concepts"
        raise NoEvidence(f"{reason} ({', '.join(stem) or 'none'}; tau_entity={ctx.settings.tau_entity}).")
    return matches, trace
