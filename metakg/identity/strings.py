"""Edit-distance similarity of names (RapidFuzz; the only module that imports it).

Names are compared by their match keys (:func:`metakg.schemas.tables.match_key`: NFKC, lower case,
punctuation to spaces, no leading article), so a typo is an edit of letters, never of case or punctuation.
How many edits a name may carry grows with its length, as Lucene's fuzzy ``AUTO`` rule does, but stricter
for short names: a one-letter edit of a word of four letters or fewer is another word far too often
(*car*: *cat*, *bar*, *cap*), so short names must match exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein


def max_edits(key: str) -> int:
    """Edits a name of this key may differ by and still be the name asked for: 0 up to 4 characters, 1 up to
    8, 2 beyond."""
    return 0 if len(key) <= 4 else 1 if len(key) <= 8 else 2


def similarity(a: str, b: str) -> float:
    """1 minus the edit distance over the longer length: 1.0 for equal keys, 0.9 for one edit in ten."""
    longest = max(len(a), len(b))
    return 1.0 - Levenshtein.distance(a, b) / longest if longest else 1.0


_NUMBER = re.compile(r"\d+")


def numbers_agree(a: str, b: str) -> bool:
    """False when both names carry numbers and not the same ones (*episodic ataxia type 4* and *type 2*,
    *ALS type 12* and *type 21*): a numbered series names different entities however close its spelling
    or meaning. Numbers compare by value (*type 01* is *type 1*); a name without numbers agrees with any."""
    x, y = _NUMBER.findall(a), _NUMBER.findall(b)
    return not (x and y) or sorted(map(int, x)) == sorted(map(int, y))


def close_scores(key: str, keys: Sequence[str]) -> list[float]:
    """The :func:`similarity` of ``key`` to each of ``keys`` (computed in one call), 0 for a key whose
    numbers disagree with it (:func:`numbers_agree`)."""
    if not keys:
        return []
    scores = process.cdist([key], keys, scorer=Levenshtein.normalized_similarity, dtype=np.float64)[0]
    mine = _NUMBER.findall(key)
    return [
        float(score) if not mine or numbers_agree(key, other) else 0.0
        for score, other in zip(scores.tolist(), keys, strict=True)
    ]


def close_distance(a: str, b: str) -> int:
    """The edit distance of two keys (insertions, deletions, substitutions)."""
    return int(Levenshtein.distance(a, b))


def close_keys(key: str, keys: Sequence[str], *, exact: bool = True) -> list[tuple[int, int]]:
    """The positions in ``keys`` of the keys within :func:`max_edits` of ``key``, with their distances, closest
    first (ties in position order); ``exact=False`` leaves out the key itself (distance 0).

    Args:
        key: the match key asked for (empty: nothing is close).
        keys: the match keys to compare with.
        exact: whether a key equal to ``key`` counts.
    """
    edits = max_edits(key)
    if not key or (edits == 0 and not exact):
        return []
    found = process.extract(key, keys, scorer=Levenshtein.distance, score_cutoff=edits, limit=None)
    hits = [(int(index), int(distance)) for _choice, distance, index in found if exact or distance > 0]
    return sorted(hits, key=lambda hit: (hit[1], hit[0]))
