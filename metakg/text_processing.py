"""Text processing with spaCy (the only module that imports it), shared by extraction and the QA engine.

- Sentence-bounded chunks of documents: a blank English pipeline with the rule-based sentencizer cuts
  at sentence ends and needs no model download. Chunks hold whole sentences up to ``max_chars``; a single
  longer sentence becomes its own chunk, so no text is lost.
- Lemma keys from spaCy's lookup lemmatiser (``spacy-lookups-data``).
- Concept candidates of a question: noun chunks when a trained English pipeline (``en_core_web_sm``) is
  installed, else content-word phrases (maximal runs of tokens that are not stop words or punctuation);
  and a phrase index over a graph's entity names that finds the names mentioned in a text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from metakg.timing import loading


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its position, its character span and its text."""

    index: int
    start: int
    end: int
    text: str


@lru_cache(maxsize=1)
def _sentencizer() -> Any:
    with loading():
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
    try:
        with loading():
            import spacy

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
    with loading():
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
        glue = False  # the last word ends in a hyphen the next word joins ("co-stars" is one word)
        for token in [*doc, None]:
            if token is not None and glue and not (token.is_punct or token.is_space):
                run[-1] += token.text
                glue = False
                continue
            glue = False
            if token is not None and run and _joins(token):
                run[-1] += token.text
                glue = True
                continue
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


def _joins(token: Any) -> bool:
    """A hyphen written between two words with no space around it (spaCy splits "co-stars" in three)."""
    return (
        token.text == "-"
        and token.i > 0
        and not token.doc[token.i - 1].whitespace_
        and not token.whitespace_
        and token.i + 1 < len(token.doc)
    )


_SEP = "\x1f"  # joins a name's tokens into its index key (no token holds it)
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af])")


def spaced(text: str) -> str:
    """``text`` with each Chinese, Japanese or Korean character as a word of its own (those scripts write no
    spaces), underscores as spaces, spacing collapsed, in lower case: the form :class:`PhraseIndex` matches."""
    return " ".join(_CJK.sub(r" \1 ", text.replace("_", " ")).lower().split())


class PhraseIndex:
    """Finds the longest graph names mentioned in a text, case-insensitively, token by token (spaCy's
    tokenizer). Underscores count as spaces and each CJK character as a word (:func:`spaced`), so
    ``Panic_disorder`` and 九一散 are found in running text.

    The index is a dictionary from a name's lower-case token sequence to the name: a text of n tokens costs
    at most n x (longest name) lookups. It is plain data, so :meth:`save` and :meth:`load` keep it on disk
    (the QA services cache it per graph, keyed by the graph's names): building it for 100k names takes
    seconds, loading it a fraction of one.
    """

    FORMAT = 1
    """The version of the saved form; a file of another version is rebuilt."""

    def __init__(self, names: Iterable[str], *, max_words: int = 16) -> None:
        """Index ``names`` (duplicates, one-character names, names of stop words only, and names over
        ``max_words`` words are skipped)."""
        nlp = _sentencizer()
        self._nlp = nlp
        self._entries: dict[str, str] = {}
        keys: dict[str, str] = {}
        for name in names:
            key = spaced(name)
            if len(name.strip()) > 1 and key not in keys:
                keys[key] = name.strip()
        for doc, name in zip(nlp.tokenizer.pipe(list(keys), batch_size=2048), keys.values(), strict=True):
            if 0 < len(doc) <= max_words and not all(t.is_stop or t.is_punct for t in doc):
                self._entries.setdefault(_SEP.join(t.lower_ for t in doc), name)
        self._longest = max((k.count(_SEP) + 1 for k in self._entries), default=0)

    @property
    def size(self) -> int:
        """The number of names indexed."""
        return len(self._entries)

    def find(self, text: str) -> list[str]:
        """The indexed names in ``text`` (as indexed), longest first where matches overlap, in text order."""
        tokens = [t.lower_ for t in self._nlp.make_doc(spaced(text))]
        matches: list[tuple[int, int, str]] = []
        for start in range(len(tokens)):
            for end in range(start + 1, min(len(tokens), start + self._longest) + 1):
                name = self._entries.get(_SEP.join(tokens[start:end]))
                if name is not None:
                    matches.append((start, end, name))
        matches.sort(key=lambda m: (-(m[1] - m[0]), m[0]))
        taken: set[int] = set()
        found: list[tuple[int, str]] = []
        for start, end, name in matches:
            if taken.isdisjoint(range(start, end)):
                taken.update(range(start, end))
                found.append((start, name))
        return [name for _, name in sorted(found)]

    def save(self, path: Path) -> None:
        """Write the index to ``path`` (JSON, written to a temporary file first, then renamed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(path.suffix + ".partial")
        data = {"format": self.FORMAT, "longest": self._longest, "entries": self._entries}
        partial.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> PhraseIndex | None:
        """The index saved at ``path``, or None when there is none or it cannot be read (of another format,
        cut short): the caller builds it again."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != cls.FORMAT:
            return None
        index = cls.__new__(cls)
        index._nlp = _sentencizer()
        index._entries = data["entries"]
        index._longest = int(data["longest"])
        return index
