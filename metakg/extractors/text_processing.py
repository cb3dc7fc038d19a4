"""Text processing with spaCy (the only module that imports it): sentence-bounded chunks of documents.

A blank English pipeline with the rule-based sentencizer is enough to cut documents at sentence ends,
and needs no model download. Chunks hold whole sentences up to ``max_chars``; a single longer sentence
becomes its own chunk, so no text is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its position, its character span and its text."""

    index: int
    start: int
    end: int
    text: str


@lru_cache(maxsize=1)
def _sentencizer() -> Any:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.max_length = 10_000_000
    return nlp


def chunk_text(text: str, *, max_chars: int = 1500) -> list[Chunk]:
    """Split ``text`` into chunks of whole sentences, each at most ``max_chars`` (unless one sentence is longer).

    Args:
        text: the document.
        max_chars: the largest chunk size in characters.

    Returns:
        Chunks in document order; their texts, joined, cover every sentence of ``text``.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    doc = _sentencizer()(text)
    chunks: list[Chunk] = []
    start = end = None
    for sentence in doc.sents:
        if not sentence.text.strip():
            continue
        s_start, s_end = sentence.start_char, sentence.end_char
        if start is not None and end is not None and s_end - start > max_chars:
            chunks.append(Chunk(len(chunks), start, end, text[start:end].strip()))
            start = None
        if start is None:
            start = s_start
        end = s_end
    if start is not None and end is not None:
        chunks.append(Chunk(len(chunks), start, end, text[start:end].strip()))
    return chunks


@lru_cache(maxsize=1)
def _lemma_table() -> Any:
    """spaCy's English lemma lookup table (from spacy-lookups-data; no statistical model is needed)."""
    import spacy

    try:
        nlp = spacy.blank("en")
        nlp.add_pipe("lemmatizer", config={"mode": "lookup"})
        nlp.initialize()
        lemmatizer: Any = nlp.get_pipe("lemmatizer")
        table = lemmatizer.lookups.get_table("lemma_lookup")
    except (ValueError, KeyError, OSError) as e:  # pragma: no cover - spacy-lookups-data is a dependency
        raise RuntimeError("spaCy's English lemma table is missing: pip install spacy-lookups-data") from e
    return table  # a spacy.lookups.Table: keys are string hashes, .get(str) works


def lemma_key(key: str) -> str:
    """``key`` (already lower-cased, see ``match_key``) with its last word lemmatised.

    English noun phrases inflect on their head, the last word: "kidney stones" -> "kidney stone", "mice" ->
    "mouse". Modifiers keep their form ("running shoes" -> "running shoe"), so lemmatisation merges plural
    and singular mentions without merging an activity with its verb.
    """
    head, space, last = key.rpartition(" ")
    lemma = _lemma_table().get(last, last)
    return f"{head}{space}{lemma}"
