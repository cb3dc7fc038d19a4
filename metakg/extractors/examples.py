"""Worked examples for ontology-guided prompts: for each text, the most similar training sentence with its gold
triples, as Text2KGBench's own baselines prompted their models.

A training file is JSON Lines: ``{"sent" (or "text"), "triples"}``, the triples as ``{"sub", "rel", "obj"}``
objects (Text2KGBench's DBpedia ``train/`` and its ``ground_truth/`` files) or ``[subject, relation, object]``
lists, or one triple per line as ``{"sent", "sub_label", "rel_label", "obj_label"}`` (its Wikidata ``train/``
files); the lines of one sentence make one example. Similarity is the cosine of the sentences' name-embedding vectors
(MiniLM) when an embedder is given, else the overlap of their words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from metakg.errors import InputDataError
from metakg.extractors.prompts import Example
from metakg.extractors.text2kgbench import jsonl_rows
from metakg.llm.embedder import Embedder

_WORD = re.compile(r"\w+")


def read_examples(path: Path) -> list[Example]:
    """The examples of a training file (lines without a triple are skipped: they show nothing).

    Raises:
        InputDataError: the file cannot be read, a line is not a JSON object, or a line has no sentence.
    """
    found: dict[str, list[tuple[str, str, str]]] = {}
    for number, row in jsonl_rows(path):
        text = row.get("sent") or row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputDataError(f"{path}: line {number}: no 'sent' or 'text'")
        triples = found.setdefault(text.strip(), [])
        if {"sub_label", "rel_label", "obj_label"} <= set(row):
            triples.append((str(row["sub_label"]), str(row["rel_label"]), str(row["obj_label"])))
        for t in row.get("triples") or []:
            if isinstance(t, dict) and {"sub", "rel", "obj"} <= set(t):
                triples.append((str(t["sub"]), str(t["rel"]), str(t["obj"])))
            elif isinstance(t, list | tuple) and len(t) == 3:
                triples.append((str(t[0]), str(t[1]), str(t[2])))
            else:
                raise InputDataError(f"{path}: line {number}: a triple is neither {{sub, rel, obj}} nor [s, r, o]")
    examples = [Example(text, tuple(dict.fromkeys(triples))) for text, triples in found.items() if triples]
    if not examples:
        raise InputDataError(f"{path}: no example with triples")
    return examples


def example_picker(examples: list[Example], embedder: Embedder | None = None) -> Callable[[str], Example]:
    """A function giving, for a text, the most similar example (a text that is itself an example gets the
    next most similar one: a test sentence never shows its own answer)."""
    if embedder is not None:
        vectors = _unit(np.asarray(embedder.embed([e.text for e in examples]), dtype=np.float32))

        def by_vector(text: str) -> Example:
            scores = vectors @ _unit(np.asarray(embedder.embed([text]), dtype=np.float32))[0]
            return _best(examples, scores, text)

        return by_vector
    words = [set(_WORD.findall(e.text.lower())) for e in examples]

    def by_words(text: str) -> Example:
        mine = set(_WORD.findall(text.lower()))
        scores = np.asarray([len(mine & w) / (len(mine | w) or 1) for w in words], dtype=np.float32)
        return _best(examples, scores, text)

    return by_words


def _best(examples: list[Example], scores: np.ndarray, text: str) -> Example:
    order = np.argsort(-scores, kind="stable")
    for index in order:
        if examples[int(index)].text != text.strip():
            return examples[int(index)]
    return examples[int(order[0])]


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
