"""The GraphStore protocol: the one read/write interface the QA engine sees, and its value types."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt
import polars as pl

from metakg.errors import StoreError, UsageError

Direction = Literal["out", "in", "both"]
Vector = Sequence[float] | npt.NDArray[np.float32]
SearchMode = Literal["exact", "normalised", "fuzzy", "embedding", "auto"]
"""How a name search matches; ``auto`` tries every way in that order (see :func:`run_search`)."""


@dataclass(frozen=True)
class NodeRecord:
    """One node, as the common schema describes it."""

    id: str
    name: str
    type: str
    source: str
    description: str | None = None
    aliases: tuple[str, ...] = ()
    xrefs: tuple[str, ...] = ()


@dataclass(frozen=True)
class EdgeRecord:
    """One edge (always in its stored direction, src to dst)."""

    id: str
    src: str
    dst: str
    rel: str
    display: str
    source: str
    confidence: float
    count: int = 1


@dataclass(frozen=True)
class Neighbour:
    """A node next to the asked one, the edge that links them and which way that edge points."""

    node: NodeRecord
    edge: EdgeRecord
    direction: Literal["out", "in"]


@dataclass(frozen=True)
class GraphPath:
    """A simple path: ``nodes[i]`` and ``nodes[i+1]`` are linked by ``edges[i]`` (in either direction)."""

    nodes: tuple[str, ...]
    edges: tuple[EdgeRecord, ...]

    @property
    def hops(self) -> int:
        """Number of edges."""
        return len(self.edges)


@dataclass(frozen=True)
class SearchHit:
    """A node found by name or embedding search, with its score in [0, 1] and how it matched."""

    node: NodeRecord
    score: float
    match: Literal["exact", "normalised", "fuzzy", "embedding"]


@dataclass(frozen=True)
class Subgraph:
    """Nodes and edges (common-schema frames) around some seeds."""

    nodes: pl.DataFrame
    edges: pl.DataFrame


@runtime_checkable
class GraphStore(Protocol):
    """Read and write access to one knowledge graph. Ids are the common schema's CURIEs.

    A store is a context manager: whoever opens one closes it (``with open_store(...) as store:``), which
    releases what it holds (the Neo4j store's session and, when it opened it, its driver).
    """

    def close(self) -> None:
        """Release the store's resources; closing twice is harmless."""
        ...

    def __enter__(self) -> GraphStore: ...

    def __exit__(self, *exc: object) -> None: ...

    def counts(self) -> dict[str, int]:
        """``{"nodes": n, "edges": m}``."""
        ...

    def get_node(self, node_id: str) -> NodeRecord | None:
        """The node with this id, or None."""
        ...

    def neighbours(
        self,
        node_id: str,
        *,
        relations: Sequence[str] | None = None,
        direction: Direction = "both",
        limit: int | None = None,
    ) -> list[Neighbour]:
        """Nodes one edge away, optionally only through ``relations``; raises NodeNotFound.

        The order is the same in every store, so a ``limit`` keeps the same neighbours everywhere: the
        outgoing edges first, then the incoming ones, each side in edge-id order."""
        ...

    def search(self, text: str, *, mode: SearchMode = "auto", k: int = 10) -> list[SearchHit]:
        """Nodes whose name or alias matches ``text``, best first (name matches in node-id order)."""
        ...

    def names(self) -> list[str]:
        """Every distinct node name and alias (for phrase matching questions against the graph)."""
        ...

    def name_vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored name embeddings of these nodes (``metakg embed``); nodes without one are left out."""
        ...

    def shortest_paths(
        self,
        src: str,
        dst: str,
        *,
        k: int = 1,
        max_hops: int = 3,
        relations: Sequence[str] | None = None,
        directed: bool = False,
    ) -> list[GraphPath]:
        """Up to ``k`` shortest simple paths of at most ``max_hops`` edges, shortest first."""
        ...

    def subgraph(
        self,
        seeds: Sequence[str],
        *,
        hops: int = 1,
        relations: Sequence[str] | None = None,
        max_nodes: int | None = None,
    ) -> Subgraph:
        """The nodes within ``hops`` of the seeds and the edges among them."""
        ...

    def upsert(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        """Insert or update nodes (by id) and edges (by edge id)."""
        ...


@runtime_checkable
class BatchReads(Protocol):
    """A store whose reads cost a round trip (Neo4j): many nodes' neighbours, with the neighbours' stored
    name embeddings, in one; the name matches of many texts in one."""

    def search_names(self, texts: Sequence[str], *, k: int = 10) -> dict[str, list[SearchHit]]:
        """Each text's name matches as ``search`` finds them before it turns to embeddings: its exact name
        or alias matches, else its normalised ones, at most ``k`` (an empty list when neither matches)."""
        ...

    def neighbours_of(
        self,
        ids: Sequence[str],
        *,
        relations: Sequence[str] | None = None,
        direction: Direction = "both",
        limit: int | None = None,
        vectors: bool = False,
    ) -> tuple[dict[str, list[Neighbour]], dict[str, Vector]]:
        """``({id: neighbours as GraphStore.neighbours lists them}, {neighbour id: name embedding})``; ids
        of no node are left out, and the embeddings only with ``vectors``."""
        ...


@runtime_checkable
class EdgeSources(Protocol):
    """A store that tells which input records state its edges (their ``record_ids``: ``report.pdf#p12``,
    ``quiz:7``), the answer's sources."""

    def edge_records(self, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """``{edge id: its record ids}`` for the edges of ``ids`` that exist (others are left out)."""
        ...


@runtime_checkable
class ReadQueries(Protocol):
    """A store that runs a user's or an LLM's query in its own language, read-only (Neo4j: Cypher)."""

    query_language: str

    def read_query(self, query: str, *, params: dict[str, Any] | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """At most ``limit`` result rows as plain dicts; raises StoreError when the query would write or fails."""
        ...


class ClosingStore:
    """Context-manager support for stores: ``with store:`` closes it on the way out."""

    def close(self) -> None:
        """Nothing to release (stores holding connections override this)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_path_query(k: int, max_hops: int) -> None:
    """The argument check both stores run before a path query.

    Raises:
        StoreError: ``k`` or ``max_hops`` is below 1.
    """
    if k < 1 or max_hops < 1:
        raise StoreError(f"k and max_hops must be at least 1 (got k={k}, max_hops={max_hops}).")


def searchable(text: str) -> bool:
    """Whether ``text`` has something to search for: a character that is neither a blank nor a control or
    format character."""
    return bool("".join(ch for ch in text if unicodedata.category(ch)[0] != "C").strip())


#: ``auto`` search fills its ``k`` hits with name-embedding matches scored at least this (the cosine; with the
#: default all-MiniLM-L6-v2, *car* and *automobile* 0.86, *car* and *engine* 0.63, *painkiller drug
#: acetylsalicylic* and *aspirin* 0.44, while names of nothing alike score 0.2 to 0.39: *migraine* and *flu*),
#: so a short list is not padded with nodes unlike the text; ``embedding`` mode returns its best ``k``.
AUTO_EMBEDDING_FLOOR = 0.4


def run_search(
    text: str,
    *,
    mode: SearchMode,
    k: int,
    exact: Callable[[], list[NodeRecord]],
    normalised: Callable[[], list[NodeRecord]],
    fuzzy: Callable[[], list[SearchHit]],
    embedding: Callable[[str, int], list[SearchHit]] | None,
) -> list[SearchHit]:
    """The search policy every store shares.

    One mode asks one way: ``exact`` (the name or an alias as written), ``normalised`` (the same after case,
    punctuation and a leading article are ignored), ``fuzzy`` (a match key within a few letter edits: typos)
    or ``embedding`` (name-embedding similarity). ``auto`` asks them all in that order and returns up to ``k``
    nodes, each once and in the first way that found it, so a name's exact node comes first and the rest are
    filled with the nodes most like it (*car* gives car, then automobile, vehicle, ...: those scored at least
    :data:`AUTO_EMBEDDING_FLOOR`, so fewer than ``k`` when no more are alike), and a typo still finds its node
    (*automobil*).

    Args:
        text: what to look for.
        mode: ``exact``, ``normalised``, ``fuzzy``, ``embedding`` or ``auto``.
        k: at most this many hits.
        exact: the store's exact name/alias lookup.
        normalised: the store's normalised-key lookup.
        fuzzy: the store's edit-distance lookup (scores in (0, 1], closest first).
        embedding: the store's vector search, or None when it cannot embed (``auto`` then leaves it out).

    A text without a letter or digit (punctuation, control characters, emoji) has no normalised form, so the
    stores' normalised and fuzzy lookups find nothing for it rather than every node whose name is punctuation.

    Raises:
        UsageError: the text is empty, or only blanks and control characters.
        StoreError: ``k`` < 1, or embedding search asked for without an embedder.
    """
    if k < 1:
        raise StoreError(f"k must be at least 1, got {k}.")
    if not searchable(text):
        raise UsageError("nothing to search for: the text is empty, or only blanks and control characters.")
    if mode == "exact":
        return [SearchHit(node, 1.0, "exact") for node in exact()]
    if mode == "normalised":
        return [SearchHit(node, 1.0, "normalised") for node in normalised()]
    if mode == "fuzzy":
        return fuzzy()[:k]
    if mode == "embedding":
        if embedding is None:
            raise StoreError(
                "embedding search needs an embedder or the bundle's name embeddings.", cli_fix="metakg embed BUNDLE"
            )
        return embedding(text, k)
    hits: dict[str, SearchHit] = {}

    def add(found: Iterable[SearchHit]) -> None:
        for hit in found:
            if len(hits) < k:
                hits.setdefault(hit.node.id, hit)

    add(SearchHit(node, 1.0, "exact") for node in exact())
    add(SearchHit(node, 1.0, "normalised") for node in normalised() if len(hits) < k)
    if len(hits) < k:
        add(fuzzy())
    if len(hits) < k and embedding is not None:  # the nodes already found may come back among them
        add(hit for hit in embedding(text, k + len(hits)) if hit.score >= AUTO_EMBEDDING_FLOOR)
    return list(hits.values())
