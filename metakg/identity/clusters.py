"""Identity by identifiers: nodes that share an id or an xref, directly or through others, are one entity.

Every node's id and xrefs are put in their one form (:func:`metakg.schemas.curie.normalise_curie`); a node
and each of its identifiers are joined, and the connected parts with two nodes or more are the clusters
(PrimeKG's ``mondo:0004975``, the Wikidata item ``wd:Q11081`` whose xrefs hold ``mondo:0004975``, and a
node of another source that lists ``wd:Q11081`` are one cluster). A cluster is refused, with its
evidence, when its members' types cannot be one entity's (a drug and a disease sharing an xref: the types
must lie on one is-a chain of the vocabulary; a node of a generic type takes the type its id's namespace
implies, :func:`effective_types`) or when it is larger than anything one entity plausibly has
(``max_size`` nodes: a shared id that is really a category, or a bad mapping chaining many entities).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import polars as pl
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from metakg.config import ONE_PER_ENTITY
from metakg.schemas.curie import normalise_curie, prefix_spec
from metakg.schemas.vocabulary import TypeVocabulary, organisms_clash

#: More nodes than this in one cluster is no single entity (PrimeKG, Wikidata and a few extracted bundles
#: hold an entity once or twice each); such a cluster is reported, not merged.
MAX_CLUSTER = 25

#: Identifiers that never join nodes: PrimeKG's row index of a node is its own, never another source's.
PRIVATE_PREFIXES = ("primekg.index:",)

#: The beginning of the problem of a node kept out of a cluster by :data:`ONE_PER_ENTITY`.
KEPT_APART = "kept apart"

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
    cut: str | None = None  # a piece of a larger part that was cut (one id per system, types): why


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


def effective_types(nodes: pl.DataFrame, vocabulary: TypeVocabulary) -> list[str]:
    """Each node's type for identity decisions: its own, or, when that is generic (``entity``, ``concept``),
    the type its id's namespace implies (the vocabulary's prefix ``type``: an item ``ncbitaxon:810``
    typed ``entity`` is a taxon), else the generic type."""
    return [
        vocabulary.id_type(node_id) or kind if kind in GENERIC_TYPES else kind
        for node_id, kind in zip(nodes["id"].to_list(), nodes["type"].to_list(), strict=True)
    ]


def may_be_one(nodes: pl.DataFrame, vocabulary: TypeVocabulary) -> Callable[[str, str], bool]:
    """Whether two nodes of ``nodes`` (by id) may be one entity for what their ids and types say: their
    :func:`effective_types` fit (:func:`compatible_types`) and the organisms their ids and xrefs are about do
    not clash (:func:`~metakg.schemas.vocabulary.organisms_clash`: Reactome's cattle pathway is not MeSH's
    process, nor is a node whose xrefs name it)."""
    ids = nodes["id"].to_list()
    kind = dict(zip(ids, effective_types(nodes, vocabulary), strict=True))
    refs = nodes["xrefs"].to_list() if "xrefs" in nodes.columns else [None] * len(ids)
    organisms = {
        node: found
        for node, xs in zip(ids, refs, strict=True)
        if (found := vocabulary.organisms_of([node, *(xs or ())]))
    }
    none: frozenset[str] = frozenset()

    def check(a: str, b: str) -> bool:
        return compatible_types([kind[a], kind[b]], vocabulary) and not organisms_clash(
            organisms.get(a, none), organisms.get(b, none)
        )

    return check


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
    one_per_entity: Collection[str] = ONE_PER_ENTITY,
    apart: Sequence[tuple[Collection[str], str]] = (),
) -> IdClusters:
    """The identity clusters of ``nodes`` (a node table: ``id``, ``type``, ``xrefs``; several bundles'
    nodes concatenated), each with the identifiers that join it and, when it is not to be merged, why.
    ``must_link`` pairs (node ids) are joined whatever their identifiers; a cluster holding both nodes of a
    ``cannot_link`` pair is left apart. ``named``: pairs a name scorer calls one entity, joined like
    shared identifiers. ``apart``: groups of node ids (an earlier resolution's clusters left apart or split)
    with why; a cluster holding two nodes of one group is left apart with that reason. A connected part
    holding two nodes whose ids are of one system of ``one_per_entity`` is split: its pairs are joined
    strongest first (curated pairs, then the most shared identifiers, then by id), a pair being skipped when
    it would put two such ids in one cluster; a node left alone is reported, as a cluster of one with the
    problem ``kept apart: ...``."""
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
    ids, types = nodes["id"].to_list(), effective_types(nodes, vocabulary)
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
    unique = set(one_per_entity)
    system = {r: id_system(ids[r]) for rows in by_part.values() for r in rows}
    form = {r: normalise_curie(ids[r]) or ids[r] for r in system}  # DrugBank:DB00945 is drugbank:DB00945
    group_of = {node: number for number, (group, _why) in enumerate(apart) for node in group}
    clusters = []
    to_split: list[list[int]] = []
    for label, rows in by_part.items():
        members = tuple(sorted(ids[r] for r in rows))
        kinds = tuple(sorted({types[r] for r in rows}))
        inside = set(members)
        problem = None
        refused = [(a, b) for a, b in cannot_link if a in inside and b in inside]
        held = Counter(group_of[m] for m in members if m in group_of)
        again = next((number for number, n in sorted(held.items()) if n >= 2), None)
        if refused:
            problem = f"cannot be linked (identity file): {refused[0][0]}, {refused[0][1]}"
        elif again is not None:
            problem = apart[again][1]
        elif len(rows) > max_size:
            problem = f"implausibly large: {len(rows)} nodes share identifiers (more than {max_size})"
        elif not compatible_types(kinds, vocabulary):
            if any(ids[r] in named_members for r in rows):  # names chained them: cut, do not refuse all
                to_split.append(rows)
                continue
            problem = _incompatible(rows, ids, types, must_link, vocabulary) or (
                f"incompatible types: {', '.join(kinds)} cannot be one entity"
            )
        elif _twice(rows, system, form, unique):
            to_split.append(rows)
            continue
        evidence = tuple(k for k in shared.get(label, ()) if not k.startswith("\x00"))
        curated = tuple(m for m in members if m in curated_members)
        by_name = tuple(m for m in members if m in named_members)
        clusters.append(Cluster(members, kinds, evidence, problem, curated, by_name))
    if to_split:
        rows_in = sorted(r for rows in to_split for r in rows)
        keys_of: dict[int, list[str]] = {}
        for node, key in pairs.filter(pl.col("node").is_in(rows_in)).iter_rows():
            keys_of.setdefault(node, []).append(key)
        for rows in to_split:
            pieces = _split(rows, keys_of, system, form, unique, ids, types, vocabulary)
            why = next((p for _piece, p in pieces if p is not None), None) or _cut_reason(rows, system, form, unique)
            for piece, problem in pieces:
                members = tuple(sorted(ids[r] for r in piece))
                evidence = tuple(sorted(_shared(piece, keys_of) if len(piece) > 1 else set()))
                evidence = tuple(k for k in evidence if not k.startswith("\x00"))
                clusters.append(
                    Cluster(
                        members,
                        tuple(sorted({types[r] for r in piece})),
                        evidence,
                        problem,
                        tuple(m for m in members if m in curated_members),
                        tuple(m for m in members if m in named_members),
                        f"cut from {len(rows)} nodes that shared identifiers: {why}" if problem is None else None,
                    )
                )
    clusters.sort(key=lambda c: (c.problem is not None, c.members))
    return IdClusters(clusters)


def _incompatible(
    rows: Sequence[int],
    ids: list[str],
    types: Sequence[str],
    must_link: Sequence[tuple[str, str]],
    vocabulary: TypeVocabulary,
) -> str | None:
    """Why a part that a must-link of the identity file joins is refused, when the must-link itself joins
    two types that cannot be one entity (None when the clash lies elsewhere)."""
    kind = {ids[r]: types[r] for r in rows}
    for number, (a, b) in enumerate(must_link, start=1):
        if a in kind and b in kind and not compatible_types((kind[a], kind[b]), vocabulary):
            return (
                f"incompatible types: must_link entry {number} of the identity file joins {a} ({kind[a]}) and "
                f"{b} ({kind[b]}), which cannot be one entity"
            )
    return None


def id_system(node_id: str) -> str:
    """The identifier system of a node id, by its prefix in any spelling (``MONDO:``, ``mondo:``)."""
    written = node_id.split(":", 1)[0]
    spec = prefix_spec(written)
    return spec.name if spec is not None else written


def _twice(rows: Sequence[int], system: dict[int, str], form: dict[int, str], unique: set[str]) -> bool:
    """Whether ``rows`` hold two different ids of one system of ``unique`` (two writings of one id,
    ``MONDO:0005027`` and ``mondo:0005027``, are one id)."""
    seen: dict[str, str] = {}
    for r in rows:
        name = system.get(r, "")
        if name in unique and seen.setdefault(name, form[r]) != form[r]:
            return True
    return False


def _cut_reason(rows: Sequence[int], system: dict[int, str], form: dict[int, str], unique: set[str]) -> str:
    """Why a part was cut when no node of it was left alone: the ids of one system it held."""
    held: dict[str, set[str]] = {}
    for r in rows:
        if system.get(r, "") in unique:
            held.setdefault(system[r], set()).add(form[r])
    name, found = next(((n, f) for n, f in sorted(held.items()) if len(f) > 1), ("", set()))
    if not name:
        return "types that cannot be one entity"
    return f"one entity has one {name} id ({', '.join(sorted(found))})"


def _shared(piece: Sequence[int], keys_of: dict[int, list[str]]) -> set[str]:
    counts: Counter[str] = Counter(k for r in piece for k in set(keys_of.get(r, ())))
    return {k for k, n in counts.items() if n >= 2}


def _split(
    rows: Sequence[int],
    keys_of: dict[int, list[str]],
    system: dict[int, str],
    form: dict[int, str],
    unique: set[str],
    ids: list[str],
    types: Sequence[str],
    vocabulary: TypeVocabulary,
) -> list[tuple[list[int], str | None]]:
    """A connected part cut so that no piece holds two ids of one system of ``unique`` or types that cannot
    be one entity's (a part that names chained, through a node of a generic type): pairs of nodes sharing
    keys are joined strongest first (a curated pair before any other, then by the number of keys shared,
    then by ids), a join that would break either rule skipped (a curated pair may join two ids of one
    system, as the curator says). Returns the pieces, a node left alone with why it was kept apart."""
    holders: dict[str, list[int]] = {}
    for r in rows:
        for key in set(keys_of.get(r, ())):
            holders.setdefault(key, []).append(r)
    weight: Counter[tuple[int, int]] = Counter()
    via: dict[tuple[int, int], str] = {}
    for key, held in holders.items():
        if len(held) < 2:
            continue
        for a, b in combinations(sorted(held), 2):
            weight[(a, b)] += 1_000_000 if key.startswith(_CURATED) else 1
            via.setdefault((a, b), key)
    root = {r: r for r in rows}
    systems = {r: {system[r]: form[r]} if system[r] in unique else {} for r in rows}  # system -> its one id
    kinds = {r: {types[r]} for r in rows}

    def find(r: int) -> int:
        while root[r] != r:
            root[r] = root[root[r]]
            r = root[r]
        return r

    blocked: dict[int, tuple[int, str, bool]] = {}  # a node -> the first node it could not join, how, by type
    for (a, b), w in sorted(weight.items(), key=lambda kv: (-kv[1], ids[kv[0][0]], ids[kv[0][1]])):
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        by_type = not compatible_types(sorted(kinds[ra] | kinds[rb]), vocabulary)
        conflict = any(systems[rb].get(name, one) != one for name, one in systems[ra].items())
        if by_type or (w < 1_000_000 and conflict):
            blocked.setdefault(a, (b, via[(a, b)], by_type))
            blocked.setdefault(b, (a, via[(a, b)], by_type))
            continue
        root[rb] = ra
        systems[ra].update(systems[rb])
        kinds[ra] |= kinds[rb]
    pieces: dict[int, list[int]] = {}
    for r in rows:
        pieces.setdefault(find(r), []).append(r)
    found: list[tuple[list[int], str | None]] = []
    for piece in pieces.values():
        if len(piece) > 1:
            found.append((piece, None))
            continue
        (alone,) = piece
        other, key, by_type = blocked[alone]
        shown = key if not key.startswith("\x00") else "a name match"
        if by_type:
            joined = sorted(kinds[find(other)] - GENERIC_TYPES) or sorted(kinds[find(other)])
            reason = f"a {types[alone]} cannot be one entity with a {' and '.join(joined)}"
            clash = next((m for m in pieces[find(other)] if m != other), other)
        else:
            clash = next(m for m in pieces[find(other)] if system[m] == system[alone] and form[m] != form[alone])
            reason = f"one entity has one {system[alone]} id"
        with_other = f", which is one entity with {ids[clash]}," if clash != other else ""
        found.append((piece, f"{KEPT_APART}: it shares {shown} with {ids[other]}{with_other} and {reason}"))
    return found
