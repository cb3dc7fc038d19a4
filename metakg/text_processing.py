"""Text processing with spaCy (the only module that imports it), shared by extraction and the QA engine.

- Sentence-bounded chunks of documents: a blank English pipeline with the rule-based sentencizer cuts
  at sentence ends and needs no model download. Chunks hold whole sentences up to ``max_chars``; a single
  longer sentence becomes its own chunk, so no text is lost.
- Lemma keys from spaCy's lookup lemmatiser (``spacy-lookups-data``).
- Concept candidates of a question: noun chunks when a trained English pipeline (``en_core_web_sm``) is
  installed, else content-word phrases (maximal runs of tokens that are not stop words or punctuation);
  and a ``PhraseMatcher`` over a graph's entity names that finds the names mentioned in a text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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


@lru_cache(maxsize=1)
def _tokenizer_pipeline() -> Any:
    """A trained English pipeline when one is installed (it has noun chunks), else a blank one."""
    import spacy

    try:
        return spacy.load("en_core_web_sm", disable=["ner", "lemmatizer"])
    except OSError:  # no trained pipeline: spaCy models are not on PyPI
        return spacy.blank("en")


def concept_phrases(text: str, *, max_words: int = 4) -> list[str]:
    """Candidate concepts of ``text``: noun chunks (trained pipeline) or content-word phrases (blank).

    Content-word phrases are the maximal runs of tokens that are neither stop words, punctuation nor
    numbers-only, cut to their last ``max_words`` words (a noun phrase inflects on its last word).
    Leading determiners are dropped from noun chunks. The result keeps text order, without duplicates.
    """
    nlp = _tokenizer_pipeline()
    doc = nlp(text)
    phrases: list[str] = []
    if "parser" in nlp.pipe_names:
        for chunk in doc.noun_chunks:
            words = [t.text for t in chunk if not (t.is_stop or t.is_punct)]
            if words:
                phrases.append(" ".join(words[-max_words:]))
    else:
        run: list[str] = []
        for token in [*doc, None]:
            if token is not None and not (token.is_stop or token.is_punct or token.is_space or token.like_num):
                run.append(token.text)
                continue
            if run:
                phrases.append(" ".join(run[-max_words:]))
            run = []
    seen: set[str] = set()
    unique = []
    for phrase in phrases:
        key = phrase.lower()
        if key not in seen and len(key) > 1:
            seen.add(key)
            unique.append(phrase)
    return unique


_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])")


def spaced(text: str) -> str:
    """``text`` with each Chinese, Japanese or Korean character as a word of its own (those scripts write no
    spaces), underscores as spaces, spacing collapsed, in lower case: the form :class:`PhraseIndex` matches."""
    return " ".join(_CJK.sub(r" \1 ", text.replace("_", " ")).lower().split())


class PhraseIndex:
    """A case-insensitive spaCy ``PhraseMatcher`` over names; finds the longest names mentioned in a text.
    Underscores count as spaces and each CJK character as a word (:func:`spaced`), so ``Panic_disorder``
    and 九一散 are found in running text."""

    def __init__(self, names: Iterable[str], *, max_words: int = 16) -> None:
        """Index ``names`` (duplicates, one-character names, names of stop words only, and names over
        ``max_words`` words are skipped)."""
        from spacy.matcher import PhraseMatcher

        self._nlp = _sentencizer()
        self._matcher = PhraseMatcher(self._nlp.vocab, attr="LOWER")
        self._names: dict[str, str] = {}
        kept = []
        for name in names:
            key = spaced(name)
            if len(name.strip()) > 1 and key not in self._names:
                self._names[key] = name.strip()
                kept.append(key)
        patterns = [
            doc
            for doc in self._nlp.tokenizer.pipe(kept, batch_size=2048)
            if 0 < len(doc) <= max_words and not all(t.is_stop or t.is_punct for t in doc)
        ]
        self._matcher.add("NAME", patterns)
        self.size = len(patterns)

    def find(self, text: str) -> list[str]:
        """The indexed names in ``text`` (as indexed), longest first where matches overlap, in text order."""
        doc = self._nlp.make_doc(spaced(text))
        spans = sorted(self._matcher(doc, as_spans=True), key=lambda s: (-(s.end - s.start), s.start))
        taken: set[int] = set()
        found: list[tuple[int, str]] = []
        for span in spans:
            if taken.isdisjoint(range(span.start, span.end)):
                taken.update(range(span.start, span.end))
                found.append((span.start, self._names.get(span.text, span.text)))
        return [name for _, name in sorted(found)]
