"""Identity by names, for entities that share no identifier: blocking, then scorers.

Every name (and alias) is compared by its match key (:func:`metakg.schemas.tables.match_key_expr`: NFKC,
lower case, punctuation to spaces, no leading article). Blocking finds the candidates of a name cheaply;
a scorer then rates each candidate from 0 to 1, and a pair at or above the scorer's threshold is one entity.

Scorers, from the strictest:

- ``exact``: the same match key (1.0), else 0;
- ``lemma``: the same key once its head word is lemmatised (*kidney stones* = *kidney stone*), else 0;
- ``fuzzy``: 1 minus the edit distance over the longer key (RapidFuzz); *acetylsalicylic acid* and
  *acetylsalicylic acide* score 0.95;
- ``embedding``: the cosine similarity of the two names' sentence embeddings (all-MiniLM-L6-v2);
- ``cascade`` (metakg's default): 1.0 when the lemma keys agree or the keys without blanks do
  (*CAL-51* = *CAL51*, cell-line and gene-style names), else the embedding score (the fuzzy score
  without an embedder). Measured on the gold sets' tuning halves (`metakg identity eval`), the meaning of
  a name separates right from wrong pairs better than its spelling (*hypertension* / *hypotension* are one
  letter apart), and mixing the fuzzy score in lowered F1 on every set, most on links into a large catalog.

The fuzzy and embedding scores (and the cascade's, which is one of them) are 0 for two names carrying
different numbers (*episodic ataxia type 2* / *type 4*): spelling and meaning both put the members of a
numbered series close together, and they are different entities.

Blocking per scorer: the key itself (exact), the lemma key (lemma), shared character trigrams, the rarest
first (fuzzy), the nearest vectors (embedding), all three (cascade). Each candidate entity is scored by
its best name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl

from metakg.identity.strings import close_scores, numbers_agree
from metakg.llm.embedder import Embedder
from metakg.schemas.tables import match_key_expr
from metakg.text_processing import lemma_key

Scorer = Literal["exact", "lemma", "fuzzy", "embedding", "cascade"]
SCORERS: tuple[Scorer, ...] = ("exact", "lemma", "fuzzy", "embedding", "cascade")

#: The score at or above which a scorer calls two names one entity, until `metakg identity eval` measures
#: better ones on gold mappings (exact and lemma only ever give 1 or 0). ``embedding`` and ``cascade``: the
#: best F1 with precision at least 0.95 on the tuning half of biomappings' reviewed pairs, pairs whose ids
#: cannot be one entity's (types, organisms) left out as `resolve` leaves them. ``fuzzy`` stays strict: the
#: tuning half would take 0.55, which a graph of thousands of names cannot afford (biomappings' pairs were
#: proposed by lexical matching, so most of its pairs are spelled alike, right or wrong).
DEFAULT_THRESHOLDS: dict[Scorer, float] = {
    "exact": 1.0,
    "lemma": 1.0,
    "fuzzy": 0.92,
    "embedding": 0.8,
    "cascade": 0.8,
}

#: Grouping the mentions of one extraction run (`extract.group_threshold`) is stricter than `resolve`:
#: mentions carry no ids whose types or organisms could keep two apart, and one wrong group mixes two
#: entities' triples. 0.94 is the cascade's point at precision 0.97 on biomappings' tuning half.
GROUP_THRESHOLD = 0.94


@dataclass(frozen=True)
class LinkRule:
    """When a mention is linked to its best candidate in a catalog: the best score reaches ``threshold`` and
    beats the best *other* entity's score by at least ``margin`` (a score of 1.0, equal keys, needs no
    margin). The margin keeps a mention from being linked to one of two near-equal candidates, and keeps
    most mentions whose entity is missing from the catalog unlinked."""

    threshold: float
    margin: float = 0.0

    def accepts(self, best: Any, runner_up: Any) -> Any:
        """Whether a best score links, beside the best other entity's score (numbers, or arrays of them)."""
        return (best >= self.threshold) & ((best >= 1.0) | (best - runner_up >= self.margin))

    def pick(self, hits: Sequence[tuple[str, float]]) -> str | None:
        """The linked entity among ``hits`` (entities with their scores, best first), or None."""
        if not hits:
            return None
        runner_up = hits[1][1] if len(hits) > 1 else 0.0
        return hits[0][0] if self.accepts(hits[0][1], runner_up) else None


#: Linking a mention to a catalog (`extract --link-to`, the link gold sets of `metakg identity eval`) is a
#: choice of one among candidates, unlike calling two names one entity: its defaults were picked on the
#: tuning halves of seven public link sets as the best mean F1 among rules that link at most one mention
#: in eight whose entity is missing from the catalog (docs/identity.md#linking-a-mention).
DEFAULT_LINKS: dict[Scorer, LinkRule] = {
    "exact": LinkRule(1.0),
    "lemma": LinkRule(1.0),
    "fuzzy": LinkRule(0.63, 0.08),
    "embedding": LinkRule(0.75, 0.08),
    "cascade": LinkRule(0.75, 0.08),
}

#: Similarity scores computed at once (queries x catalog names): the block of queries shrinks as the
#: catalog grows, so that PrimeKG-sized catalogs are scored in about 256 MB blocks.
SIMILARITY_CELLS = 64_000_000

#: Candidates a fuzzy query scores at most (those sharing the most rare trigrams with it).
FUZZY_CANDIDATES = 200


def keys_of(texts: Sequence[str]) -> list[str]:
    """The match keys of ``texts`` (vectorised: the stores' own name search code)."""
    if not texts:
        return []
    frame = pl.DataFrame({"t": pl.Series(list(texts), dtype=pl.String())})
    return frame.select(match_key_expr(pl.col("t")).fill_null("")).to_series().to_list()


def compact(key: str) -> str:
    """A match key without its blanks: *cal 51* and *cal51* are one name."""
    return key.replace(" ", "")


def trigrams(key: str) -> set[str]:
    """The character trigrams of a key, padded so short keys have some (``car``: ``  c``, `` ca``, ...)."""
    padded = f"  {key} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


@dataclass
class NameTable:
    """The names of a set of entities: one row per (entity, name), indexed for every scorer."""

    ids: list[str]
    names: list[str]
    keys: list[str] = field(init=False)
    lemmas: list[str] = field(init=False)
    by_key: dict[str, list[int]] = field(init=False)
    by_lemma: dict[str, list[int]] = field(init=False)
    by_compact: dict[str, list[int]] = field(init=False)
    _grams: dict[str, np.ndarray] | None = field(default=None, init=False)
    _vectors: np.ndarray | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.keys = keys_of(self.names)
        self.lemmas = [lemma_key(k) if k else "" for k in self.keys]
        self.by_key, self.by_lemma, self.by_compact = {}, {}, {}
        for row, (key, lemma) in enumerate(zip(self.keys, self.lemmas, strict=True)):
            if key:
                self.by_key.setdefault(key, []).append(row)
                self.by_lemma.setdefault(lemma, []).append(row)
                self.by_compact.setdefault(compact(key), []).append(row)

    @classmethod
    def from_nodes(cls, nodes: pl.DataFrame) -> NameTable:
        """Every name and alias of a node table."""
        names = pl.concat(
            [
                nodes.select("id", pl.col("name").alias("n")),
                nodes.select("id", pl.col("aliases").alias("n")).explode("n"),
            ]
        ).drop_nulls("n")
        return cls(names["id"].to_list(), names["n"].to_list())

    def grams(self) -> dict[str, np.ndarray]:
        """Trigram -> its rows, in row order (built on first use)."""
        if self._grams is None:
            index: dict[str, list[int]] = {}
            for row, key in enumerate(self.keys):
                for gram in trigrams(key):
                    index.setdefault(gram, []).append(row)
            self._grams = {gram: np.asarray(rows, dtype=np.int32) for gram, rows in index.items()}
        return self._grams

    def vectors(self, embedder: Embedder) -> np.ndarray:
        """Unit name embeddings of every row (made on first use)."""
        if self._vectors is None:
            self._vectors = np.asarray(embedder.embed(self.names), dtype=np.float32)
        return self._vectors


def _best_per_entity(table: NameTable, scored: list[tuple[int, float]], k: int) -> list[tuple[str, float]]:
    best: dict[str, float] = {}
    for row, score in scored:
        entity = table.ids[row]
        if score > best.get(entity, -1.0):
            best[entity] = score
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:k]


def candidates(
    queries: Sequence[str],
    table: NameTable,
    scorer: Scorer,
    *,
    k: int = 5,
    embedder: Embedder | None = None,
) -> list[list[tuple[str, float]]]:
    """For each query name, up to ``k`` entities of ``table`` with their ``scorer`` score, best first (ties by
    id); an entity is scored by its best name. Scores of exact and lemma are 1.0 (others are not candidates).

    Raises:
        ValueError: the embedding scorer without an embedder.
    """
    query_keys = keys_of(queries)
    if scorer == "embedding" or (scorer == "cascade" and embedder is not None):
        if embedder is None:
            raise ValueError("the embedding scorer needs an embedder")
        return _by_vectors(queries, query_keys, table, scorer, k, embedder)
    found: list[list[tuple[str, float]]] = []
    for key in query_keys:
        found.append(_best_per_entity(table, _by_key(key, table, scorer), k) if key else [])
    return found


def _by_key(key: str, table: NameTable, scorer: Scorer) -> list[tuple[int, float]]:
    """The rows of ``table`` a non-empty key finds with ``scorer`` (cascade without vectors: the lemma key
    and the key without blanks, then fuzzy), each with its score."""
    if scorer == "exact":
        return [(r, 1.0) for r in table.by_key.get(key, [])]
    lemma_rows = table.by_lemma.get(lemma_key(key), [])
    if scorer == "lemma":
        return [(r, 1.0) for r in lemma_rows]
    rows = _gram_rows(key, table)
    close = list(zip(rows, close_scores(key, [table.keys[r] for r in rows]), strict=True))
    if scorer == "fuzzy":
        return close
    return [(r, 1.0) for r in lemma_rows + table.by_compact.get(compact(key), [])] + close


def _gram_rows(key: str, table: NameTable) -> list[int]:
    """The rows sharing the most of the 12 rarest character trigrams of ``key``, most first (ties by row)."""
    grams = table.grams()
    held = sorted((len(grams[g]), g) for g in trigrams(key) if g in grams)[:12]
    if not held:
        return []
    found, counts = np.unique(np.concatenate([grams[g] for _n, g in held]), return_counts=True)
    order = np.lexsort((found, -counts))[:FUZZY_CANDIDATES]
    rows: list[int] = found[order].tolist()
    return rows


def _by_vectors(
    queries: Sequence[str], query_keys: list[str], table: NameTable, scorer: Scorer, k: int, embedder: Embedder
) -> list[list[tuple[str, float]]]:
    """Candidates by the nearest name vectors (embedding), or by vectors, lemma key, key without blanks and
    trigrams at once, each scored by its embedding score unless the keys agree (cascade)."""
    if not queries:
        return []
    matrix = table.vectors(embedder)
    asked = np.asarray(embedder.embed(list(queries)), dtype=np.float32)
    top = min(len(table.ids), k * 4)
    found: list[list[tuple[str, float]]] = []
    step = max(16, min(1024, SIMILARITY_CELLS // max(1, len(matrix))))  # about 256 MB of scores per block
    for start in range(0, len(asked), step):
        sims = asked[start : start + step] @ matrix.T
        rows = np.argpartition(-sims, top - 1, axis=1)[:, :top] if top < sims.shape[1] else None
        for offset in range(sims.shape[0]):
            near = rows[offset] if rows is not None else np.arange(sims.shape[1])
            key = query_keys[start + offset]
            if scorer == "embedding":
                scored = [(int(r), _agreed(float(sims[offset, r]), key, table.keys[r])) for r in near]
            else:
                if not key:
                    found.append([])
                    continue
                same = set(table.by_lemma.get(lemma_key(key), ())) | set(table.by_compact.get(compact(key), ()))
                pool = {int(r) for r in near} | same | set(_gram_rows(key, table))
                scored = [(r, 1.0 if r in same else _agreed(float(sims[offset, r]), key, table.keys[r])) for r in pool]
            found.append(_best_per_entity(table, scored, k))
    return found


def pair_scores(
    left: Sequence[str], right: Sequence[str], scorer: Scorer, *, embedder: Embedder | None = None
) -> np.ndarray:
    """The ``scorer`` score of each pair of names ``(left[i], right[i])``.

    Raises:
        ValueError: lengths differ, or the embedding scorer without an embedder.
    """
    if len(left) != len(right):
        raise ValueError("left and right must pair up")
    if scorer == "cascade":
        same = pair_scores(left, right, "lemma") == 1.0
        same |= np.array(
            [x != "" and compact(x) == compact(y) for x, y in zip(keys_of(left), keys_of(right), strict=True)]
        )
        close = pair_scores(left, right, "fuzzy")
        if embedder is not None:
            close = pair_scores(left, right, "embedding", embedder=embedder)
        return np.where(same, 1.0, close)
    if scorer == "embedding":
        if embedder is None:
            raise ValueError("the embedding scorer needs an embedder")
        if not left:
            return np.zeros(0, dtype=np.float32)
        a = np.asarray(embedder.embed(list(left)), dtype=np.float32)
        b = np.asarray(embedder.embed(list(right)), dtype=np.float32)
        scores: np.ndarray = np.clip((a * b).sum(axis=1), -1.0, 1.0)
        agree = [numbers_agree(x, y) for x, y in zip(keys_of(left), keys_of(right), strict=True)]
        return np.where(agree, scores, 0.0).astype(np.float32)
    a_keys, b_keys = keys_of(left), keys_of(right)
    if scorer == "exact":
        return np.array([float(x == y and x != "") for x, y in zip(a_keys, b_keys, strict=True)])
    if scorer == "lemma":
        return np.array([float(x != "" and lemma_key(x) == lemma_key(y)) for x, y in zip(a_keys, b_keys, strict=True)])
    return np.array([close_scores(x, [y])[0] if x and y else 0.0 for x, y in zip(a_keys, b_keys, strict=True)])


def _agreed(score: float, a: str, b: str) -> float:
    """An embedding score of two keys, 0 when their numbers disagree."""
    return score if numbers_agree(a, b) else 0.0


@dataclass(frozen=True)
class NameLink:
    """Two nodes a scorer calls one entity by their names."""

    a: str
    b: str
    scorer: str
    score: float


def name_links(
    nodes: pl.DataFrame,
    may_be_one: Callable[[str, str], bool],
    scorer: Scorer,
    threshold: float,
    *,
    embedder: Embedder | None = None,
    apart: Sequence[tuple[str, str]] = (),
    k: int = 5,
) -> list[NameLink]:
    """The pairs of nodes of different sources whose names (or aliases) ``scorer`` rates at or above
    ``threshold`` and that ``may_be_one`` accepts (two node ids; for `metakg resolve`, their types and
    organisms, :func:`metakg.identity.clusters.may_be_one`), each pair once with its best score; pairs in
    ``apart`` (the identity file's cannot-links) are left out. A node is compared with its ``k`` best
    candidates.

    Raises:
        ValueError: the embedding scorer without an embedder.
    """
    if nodes.is_empty():
        return []
    table = NameTable.from_nodes(nodes)
    ids, names = nodes["id"].to_list(), nodes["name"].to_list()
    source = dict(zip(ids, nodes["source"].to_list(), strict=True))
    never = {frozenset(pair) for pair in apart}
    best: dict[tuple[str, str], float] = {}
    for node, hits in zip(ids, candidates(names, table, scorer, k=k, embedder=embedder), strict=True):
        for other, score in hits:
            if other == node or score < threshold or source[other] == source[node]:
                continue
            pair = (node, other) if node < other else (other, node)
            if frozenset(pair) in never or not may_be_one(node, other):
                continue
            best[pair] = max(score, best.get(pair, 0.0))
    return [NameLink(a, b, scorer, round(score, 4)) for (a, b), score in sorted(best.items())]
