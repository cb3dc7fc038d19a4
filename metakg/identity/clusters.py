"""Identity by identifiers: nodes that share an id or an xref, directly or through others, are one entity.

Every node's id and xrefs are put in their one form (:func:`metakg.schemas.curie.normalise_curie`); a node
and each of its identifiers are joined, and the connected parts with two nodes or more are the clusters
(PrimeKG's ``mondo:0004975``, the Wikidata item ``wd:Q11081`` whose xrefs hold ``mondo:0004975``, and a
node of another source that lists ``wd:Q11081`` are one cluster). A cluster is refused, with its
evidence, when its members' types cannot be one entity's (a drug and a disease sharing an xref: the types
must lie on one is-a chain of the vocabulary) or when it is larger than anything one entity plausibly has
(``max_size`` nodes: a shared id that is really a category, or a bad mapping chaining many entities).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from metakg.schemas.curie import normalise_curie
from metakg.schemas.vocabulary import TypeVocabulary

#: More nodes than this in one cluster is no single entity (PrimeKG, Wikidata and a few extracted bundles
#: hold an entity once or twice each); such a cluster is reported, not merged.
MAX_CLUSTER = 25

#: Identifiers that never join nodes: PrimeKG's row index of a node is its own, never another source's.
PRIVATE_PREFIXES = ("primekg.index:",)

#: Types that say nothing of what a thing is (an extracted concept, an item of no mapped class): they fit
#: any entity.
GENERIC_TYPES = frozenset({"entity", "concept"})

_CURATED = "\x00must_link:"  # the key a curated pair shares (never an identifier: it holds a NUL)
_NAMED = "\x00name:"  # the key a pair joined by names shares


@dataclass(frozen=True)
class Cluster:
    """Nodes that share identifiers. ``shared``: the identifiers (in their one form) held by two members or
    more, the evidence that joins them; ``problem``: why they are not merged (None: they may be)."""

    members: tuple[str, ...]
    types: tuple[str, ...]
    shared: tuple[str, ...]
    problem: str | None = None
    curated: tuple[str, ...] = ()  # the members a must-link of the identity file joined
    named: tuple[str, ...] = ()  # the members a name scorer joined


@dataclass(frozen=True)
class IdClusters:
    """The clusters of a node table: ``clusters`` every one, mergeable first, each's members sorted."""

    clusters: list[Cluster]

    @property
    def mergeable(self) -> list[Cluster]:
        """The clusters that may become one node."""
        return [c for c in self.clusters if c.problem is None]

    @property
    def refused(self) -> list[Cluster]:
        """The clusters left apart, each with its problem."""
        return [c for c in self.clusters if c.problem is not None]


def compatible_types(types: Sequence[str], vocabulary: TypeVocabulary) -> bool:
    """True when one entity can have all of ``types``: they lie on one is-a chain (``disease`` and
    ``biomedical_entity`` do; ``drug`` and ``disease`` do not), the generic ``entity`` and ``concept`` fitting
    any. A type the vocabulary does not know is compatible with itself only."""
    distinct = set(types) - GENERIC_TYPES
    if len(distinct) <= 1:
        return True
    if any(t not in vocabulary.parents for t in distinct):
        return False
    deepest = max(distinct, key=lambda t: len(vocabulary.ancestors(t)))
    return distinct <= set(vocabulary.ancestors(deepest))


def identifiers(
    nodes: pl.DataFrame, must_link: Sequence[tuple[str, str]] = (), named: Sequence[tuple[str, str]] = ()
) -> pl.DataFrame:
    """``(node, key)`` for every node (its row position) and each of its identifiers in their one form:
    its id and its xrefs, private ones (:data:`PRIVATE_PREFIXES`) left out, each pair once; the two nodes of
    each ``must_link`` pair, and of each pair a name scorer joined (``named``), share a key of their own."""
    pairs = pl.concat(
        [
            nodes.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("node"), pl.col("id").alias("key")),
            nodes.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("node"), pl.col("xrefs").alias("key"))
            .explode("key")
            .drop_nulls("key"),
        ]
    )
    written = pairs["key"].unique().to_list()
    one_form = {value: normalise_curie(value) or value for value in written}
    pairs = pairs.with_columns(pl.col("key").replace_strict(one_form, return_dtype=pl.String))
    for prefix in PRIVATE_PREFIXES:
        pairs = pairs.filter(~pl.col("key").str.starts_with(prefix))
    row_of = dict(zip(nodes["id"].to_list(), range(nodes.height), strict=False))
    for marker, joined in ((_CURATED, must_link), (_NAMED, named)):
        if joined:
            extra = pl.DataFrame(
                {
                    "node": [row_of[x] for a, b in joined for x in (a, b)],
                    "key": [f"{marker}{n}" for n in range(len(joined)) for _ in (0, 1)],
                },
                schema={"node": pl.UInt32, "key": pl.String},
            )
            pairs = pl.concat([pairs, extra])
    return pairs.unique(maintain_order=True)


def id_clusters(
    nodes: pl.DataFrame,
    vocabulary: TypeVocabulary,
    *,
    max_size: int = MAX_CLUSTER,
    must_link: Sequence[tuple[str, str]] = (),
    cannot_link: Sequence[tuple[str, str]] = (),
    named: Sequence[tuple[str, str]] = (),
) -> IdClusters:
    """The identity clusters of ``nodes`` (a node table: ``id``, ``type``, ``xrefs``; several bundles'
    nodes concatenated), each with the identifiers that join it and, when it is not to be merged, why.
    ``must_link`` pairs (node ids) are joined whatever their identifiers; a cluster holding both nodes of a
    ``cannot_link`` pair is left apart. ``named``: pairs a name scorer calls one entity, joined like
    shared identifiers."""
    pairs = identifiers(nodes, must_link, named)
    if pairs.is_empty():
        return IdClusters([])
    codes = pairs["key"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    node_at = pairs["node"].to_numpy().astype(np.int64)
    n_nodes, n_keys = nodes.height, int(codes.max()) + 1
    # a bipartite graph: nodes 0..n-1, keys n..n+k-1; a node and its keys are one part
    graph = coo_matrix(
        (np.ones(len(node_at), dtype=np.int8), (node_at, n_nodes + codes)), shape=(n_nodes + n_keys,) * 2
    )
    _count, labels = connected_components(graph, directed=False)
    part = labels[:n_nodes]
    sizes = np.bincount(part)
    joined = np.flatnonzero(sizes[part] >= 2)
    if not len(joined):
        return IdClusters([])
    ids, types = nodes["id"].to_list(), nodes["type"].to_list()
    by_part: dict[int, list[int]] = {}
    for row in joined.tolist():
        by_part.setdefault(int(part[row]), []).append(row)
    shared_keys = (
        pairs.with_columns(pl.Series("part", part[node_at].astype(np.int64)))
        .filter(pl.col("part").is_in(list(by_part)))
        .group_by("part", "key")
        .agg(pl.col("node").n_unique().alias("holders"))
        .filter(pl.col("holders") >= 2)
        .group_by("part")
        .agg(pl.col("key").sort())
    )
    shared = dict(zip(shared_keys["part"].to_list(), shared_keys["key"].to_list(), strict=True))
    curated_members = {x for pair in must_link for x in pair}
    named_members = {x for pair in named for x in pair}
    clusters = []
    for label, rows in by_part.items():
        members = tuple(sorted(ids[r] for r in rows))
        kinds = tuple(sorted({types[r] for r in rows}))
        inside = set(members)
        problem = None
        apart = [(a, b) for a, b in cannot_link if a in inside and b in inside]
        if apart:
            problem = f"cannot be linked (identity file): {apart[0][0]}, {apart[0][1]}"
        elif len(rows) > max_size:
            problem = f"implausibly large: {len(rows)} nodes share identifiers (more than {max_size})"
        elif not compatible_types(kinds, vocabulary):
            problem = f"incompatible types: {', '.join(kinds)} cannot be one entity"
        evidence = tuple(k for k in shared.get(label, ()) if not k.startswith("\x00"))
        curated = tuple(m for m in members if m in curated_members)
        by_name = tuple(m for m in members if m in named_members)
        clusters.append(Cluster(members, kinds, evidence, problem, curated, by_name))
    clusters.sort(key=lambda c: (c.problem is not None, c.members))
    return IdClusters(clusters)
