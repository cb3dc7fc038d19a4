"""Resolution: one graph from the identity clusters of several sources, and its undo.

``merge`` makes one node of each cluster that may be merged (:mod:`metakg.identity.clusters`): its id is the
member id whose prefix comes first in the priority of the cluster's type (``mondo`` before ``doid`` before
``mesh`` ... for a disease), the other members' ids become xrefs and their names aliases, and edges are
rewired to it. ``link`` keeps every node and adds a ``same_as`` edge from each member to the cluster's
canonical node. Every decision is a row of the decision table; the original rows of every node merged away
and every edge rewired are kept beside the result, so a merge can be undone exactly (:func:`unresolve`)
and resolving the same inputs gives the same graph.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import polars as pl

from metakg.config import ONE_PER_ENTITY
from metakg.errors import InputDataError
from metakg.identity.clusters import (
    MAX_CLUSTER,
    Cluster,
    compatible_types,
    effective_types,
    id_clusters,
    id_system,
)
from metakg.identity.curation import Curation, apply_aliases, check_known, on_graph
from metakg.identity.names import NameLink
from metakg.schemas.bundle import Bundle, collapse_edges
from metakg.schemas.curie import normalise_curie, slug
from metakg.schemas.tables import conform_edges, conform_nodes, edge_ids_expr, empty_edges, empty_nodes
from metakg.schemas.vocabulary import TypeVocabulary

Mode = Literal["merge", "link"]

#: The source of the edges ``link`` adds, and their relation.
IDENTITY_SOURCE = "metakg.identity"
SAME_AS = "same_as"

#: Canonical-id priority per type (the nearest type of a cluster's with a list is used; ``*`` otherwise):
#: ontologies that curate one entity per id before the cross-references that map to them.
DEFAULT_PRIORITY: dict[str, list[str]] = {
    "disease": ["mondo", "doid", "orphanet", "omim", "mesh", "umls", "ncit", "icd10", "efo", "wd", "kg"],
    "drug": ["drugbank", "chebi", "chembl", "pubchem", "mesh", "umls", "ctd", "wd", "kg"],
    "chemical": ["chebi", "drugbank", "chembl", "pubchem", "mesh", "ctd", "wd", "kg"],
    "gene_protein": ["ncbigene", "hgnc", "uniprot", "ensembl", "wd", "kg"],
    "phenotype": ["hp", "mondo", "mesh", "umls", "wd", "kg"],
    "*": [
        "mondo", "drugbank", "ncbigene", "hgnc", "uniprot", "chebi", "hp", "uberon", "go", "reactome", "doid",
        "orphanet", "omim", "chembl", "pubchem", "ensembl", "mesh", "umls", "ncit", "efo", "icd10", "ctd",
        "wd", "kg",
    ],
}  # fmt: skip

#: The decision table (``identity.parquet``): one row per node of every cluster.
DECISION_SCHEMA: Mapping[str, pl.DataType] = {
    "cluster": pl.String(),  # the canonical id (merge, link), or the first member's id (a refused cluster)
    "node": pl.String(),  # the member's own id
    "canonical": pl.String(),  # the id it became or links to; null when the cluster was refused
    "decided_by": pl.String(),  # identifier (shared ids or xrefs), curation (a must-link), name (a scorer)
    "scorer": pl.String(),
    "score": pl.Float64(),
    "evidence": pl.List(pl.String()),  # the identifiers two members hold or more
    "problem": pl.String(),  # why a refused cluster was not merged
    "mode": pl.String(),  # merge | link
    "cut": pl.String(),  # a cluster cut from a larger connected part (one id per system, types): why
}


@dataclass(frozen=True)
class Resolution:
    """The resolved graph, its decisions, and the original rows needed to undo it."""

    nodes: pl.DataFrame
    edges: pl.DataFrame
    decisions: pl.DataFrame
    original_nodes: pl.DataFrame  # every member of a merged cluster, as it was (merge mode)
    original_edges: pl.DataFrame  # every edge rewired, as it was, with ``resolved_id`` (merge mode)


def canonical_id(
    cluster: Cluster,
    vocabulary: TypeVocabulary,
    priority: Mapping[str, Sequence[str]],
    preferred: Sequence[str] = (),
) -> str:
    """The member id whose prefix comes first in the priority of the cluster's type (its deepest type, then
    that type's ancestors, then ``*``); prefixes not listed come after, and ties go to the smallest id. A
    member the identity file prefers wins."""
    chosen = sorted(set(preferred) & set(cluster.members))
    if chosen:
        return chosen[0]
    deepest = max(cluster.types, key=lambda t: len(vocabulary.ancestors(t)) if t in vocabulary.parents else 0)
    chain = vocabulary.ancestors(deepest) if deepest in vocabulary.parents else [deepest]
    order = next((list(priority[t]) for t in chain if t in priority), list(priority.get("*", [])))

    def rank(member: str) -> tuple[int, str]:
        prefix = id_system(member)  # MONDO:, DrugBank: ... as a source wrote it rank as their prefix
        return (order.index(prefix) if prefix in order else len(order), member)

    return min(cluster.members, key=rank)


def _deepest(types: Sequence[str], vocabulary: TypeVocabulary) -> str:
    return max(types, key=lambda t: (len(vocabulary.ancestors(t)) if t in vocabulary.parents else 0, t))


def resolve_graph(
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    vocabulary: TypeVocabulary,
    *,
    mode: Mode = "merge",
    priority: Mapping[str, Sequence[str]] | None = None,
    max_size: int = MAX_CLUSTER,
    one_per_entity: Collection[str] = ONE_PER_ENTITY,
    curation: Curation | None = None,
    names: Sequence[NameLink] = (),
    earlier: pl.DataFrame | None = None,
) -> Resolution:
    """Resolve a graph (several bundles' tables merged by id) by its identity clusters, and by what the
    identity file ``curation`` says (must-links joined, cannot-links kept apart, preferred ids chosen,
    aliases added and removed). ``names``: pairs a name scorer calls one entity
    (:func:`metakg.identity.names.name_links`), joined like shared identifiers; a member joined by nothing
    else is decided by ``name``, with the scorer and its best score. ``earlier``: the decision table of an
    earlier resolution of these nodes (the graph as it was before it, :func:`unresolve`): its merges and
    links are kept (joined as must-links are, each member keeping how it was decided and its cluster its id
    unless the identity file prefers another) and its clusters left apart or split stay apart with their
    problem, so a resolution grows source by source and every earlier merge stays undoable.

    Raises:
        InputDataError: the identity file names an id no node has.
    """
    nodes, edges = conform_nodes(nodes), conform_edges(edges)
    order = priority or DEFAULT_PRIORITY
    curated = on_graph(curation or Curation(), nodes["id"].to_list())
    check_known(curated, nodes["id"].to_list())
    prior = _Earlier.of(earlier, set(nodes["id"].to_list()))
    found = id_clusters(
        nodes,
        vocabulary,
        max_size=max_size,
        one_per_entity=one_per_entity,
        must_link=[*curated.must_link, *prior.joined],
        cannot_link=curated.cannot_link,
        named=[(link.a, link.b) for link in names],
        apart=prior.apart,
    )
    by_name: dict[str, NameLink] = {}  # member -> its best name link
    for link in names:
        for member in (link.a, link.b):
            if member not in by_name or link.score > by_name[member].score:
                by_name[member] = link
    own = _own_identifiers(nodes, [m for c in found.clusters if c.named for m in c.named])
    curated_members = {x for pair in curated.must_link for x in pair}
    canonical: dict[str, str] = {}  # member -> canonical id, every member of a mergeable cluster
    kind: dict[str, str] = {}  # canonical id -> the cluster's type
    rows = []
    for cluster in found.clusters:
        twice = sorted(set(curated.preferred) & set(cluster.members))
        if len(twice) > 1 and cluster.problem is None:
            raise InputDataError(
                f"{curated.origin}: preferred names {' and '.join(twice)}, which are one entity (one cluster): "
                "prefer one of them."
            )
        chosen = None
        if cluster.problem is None:
            kept = sorted({prior.canonical[m] for m in cluster.members if m in prior.canonical})
            if kept and not set(curated.preferred) & set(cluster.members):  # the id it had, the first of two
                chosen = canonical_id(replace(cluster, members=tuple(kept)), vocabulary, order)
            else:
                chosen = canonical_id(cluster, vocabulary, order, curated.preferred)
        if chosen is not None and mode == "merge":  # the merged node has the id in its one form
            chosen = normalise_curie(chosen) or chosen
        if chosen is not None:
            kind[chosen] = _deepest(cluster.types, vocabulary)
            canonical.update({member: chosen for member in cluster.members})
        for member in cluster.members:
            named = member in cluster.named and not (own.get(member, set()) & set(cluster.shared))
            decided = "curation" if member in cluster.curated else "name" if named else "identifier"
            scorer, score = (by_name[member].scorer, by_name[member].score) if decided == "name" else (None, None)
            if member in prior.how and member not in curated_members and chosen is not None:
                decided, scorer, score = prior.how[member]
            rows.append(
                {
                    "cluster": chosen or cluster.members[0],
                    "node": member,
                    "canonical": chosen,
                    "decided_by": decided,
                    "scorer": scorer,
                    "score": score,
                    "evidence": list(cluster.shared),
                    "problem": cluster.problem,
                    "mode": mode,
                    "cut": cluster.cut,
                }
            )
    decisions = pl.DataFrame(rows, schema=dict(DECISION_SCHEMA))
    if mode == "link":
        done = Resolution(nodes, _with_same_as(edges, canonical), decisions, empty_nodes(), _empty_originals())
    else:
        done = _merged(nodes, edges, canonical, kind, decisions)
    return _curated_aliases(done, curated, canonical if mode == "merge" else {})


@dataclass(frozen=True)
class _Earlier:
    """What an earlier resolution decided, as constraints on resolving its nodes again: the pairs it
    joined, its clusters left apart (with their problem), each member's canonical id and how it was decided."""

    joined: list[tuple[str, str]]
    apart: list[tuple[list[str], str]]
    canonical: dict[str, str]
    how: dict[str, tuple[str, str | None, float | None]]

    @classmethod
    def of(cls, decisions: pl.DataFrame | None, ids: Collection[str]) -> _Earlier:
        """The constraints of the decision table ``decisions`` on the nodes ``ids`` (rows of other nodes
        are left out)."""
        if decisions is None or decisions.is_empty():
            return cls([], [], {}, {})
        rows = decisions.filter(pl.col("node").is_in(list(ids)))
        joined, apart = [], []
        for (_cluster,), group in rows.group_by("cluster", maintain_order=True):
            members = group["node"].unique(maintain_order=True).to_list()
            merged = group["canonical"].is_not_null().all()
            if merged:
                joined += [(members[0], other) for other in members[1:]]
            elif len(members) > 1:
                apart.append((members, str(group["problem"].drop_nulls().first() or "kept apart earlier")))
        done = rows.filter(pl.col("canonical").is_not_null())
        return cls(
            joined,
            apart,
            dict(zip(done["node"].to_list(), done["canonical"].to_list(), strict=True)),
            {r["node"]: (r["decided_by"], r["scorer"], r["score"]) for r in done.iter_rows(named=True)},
        )


def apart_clashing_ids(
    bundles: Sequence[Bundle], names: Sequence[str], vocabulary: TypeVocabulary
) -> tuple[list[Bundle], list[dict[str, Any]]]:
    """``bundles`` with the ids two of them give to nodes of types that cannot be one entity (a drug and a
    disease both ``mondo:0004975``) kept apart, since joining the bundles by id would make one node of them:
    the node of the type the id's namespace implies keeps the id (else the first bundle's), and each other
    becomes ``kg:<its source>/<the id>`` with the edges of its bundle; ``names`` name the bundles in the
    report, one entry per id (the id, the node that kept it, and the others with their new ids)."""
    if len(bundles) < 2:
        return list(bundles), []
    seen: dict[str, list[tuple[int, str]]] = {}  # id -> (bundle, its effective type) of each bundle holding it
    for number, bundle in enumerate(bundles):
        for node_id, kind in zip(bundle.nodes["id"].to_list(), effective_types(bundle.nodes, vocabulary), strict=True):
            seen.setdefault(node_id, []).append((number, kind))
    taken = set(seen)
    renamed: dict[int, dict[str, str]] = {}
    clashes: list[dict[str, Any]] = []
    for node_id, holders in seen.items():
        if len(holders) < 2 or compatible_types([k for _, k in holders], vocabulary):
            continue
        implied = vocabulary.id_type(node_id)
        keeper = next((h for h in holders if implied and compatible_types([h[1], implied], vocabulary)), holders[0])
        moved = []
        for number, kind in holders:
            if (number, kind) == keeper or compatible_types([kind, keeper[1]], vocabulary):
                continue  # the keeper's bundle, or one whose node may be the keeper's entity
            source = bundles[number].nodes.filter(pl.col("id") == node_id)["source"].drop_nulls().first() or "input"
            new = f"kg:{slug(str(source))}/{slug(node_id)}"
            while new in taken:
                new += "_"
            taken.add(new)
            renamed.setdefault(number, {})[node_id] = new
            moved.append({"bundle": names[number], "type": kind, "id": new})
        clashes.append({"id": node_id, "kept": {"bundle": names[keeper[0]], "type": keeper[1]}, "apart": moved})
    out = []
    for number, bundle in enumerate(bundles):
        moves = renamed.get(number)
        if not moves:
            out.append(bundle)
            continue
        nodes = bundle.nodes.with_columns(pl.col("id").replace(moves))
        edges = bundle.edges.with_columns(pl.col("src").replace(moves), pl.col("dst").replace(moves))
        edges = edges.with_columns(
            edge_ids_expr(pl.col("src"), pl.col("rel"), pl.col("dst"), pl.col("source")).alias("id")
        )
        out.append(Bundle(conform_nodes(nodes), conform_edges(edges), bundle.rejects, manifest=bundle.manifest))
    return out, clashes


def _own_identifiers(nodes: pl.DataFrame, members: Sequence[str]) -> dict[str, set[str]]:
    """The identifiers (id and xrefs, in their one form) of each of ``members``."""
    if not members:
        return {}
    rows = nodes.filter(pl.col("id").is_in(list(members))).select("id", "xrefs").to_dicts()
    return {row["id"]: {normalise_curie(x) or x for x in [row["id"], *(row["xrefs"] or [])]} for row in rows}


def _curated_aliases(done: Resolution, curation: Curation, canonical: Mapping[str, str]) -> Resolution:
    """The identity file's aliases added and removed, on the node each named id now is."""
    nodes = apply_aliases(done.nodes, curation, canonical)
    return Resolution(nodes, done.edges, done.decisions, done.original_nodes, done.original_edges)


def _with_same_as(edges: pl.DataFrame, canonical: Mapping[str, str]) -> pl.DataFrame:
    pairs = [(member, target) for member, target in canonical.items() if member != target]
    if not pairs:
        return edges
    links = pl.DataFrame(
        {
            "src": [m for m, _ in pairs],
            "dst": [t for _, t in pairs],
            "rel": SAME_AS,
            "source": IDENTITY_SOURCE,
            "confidence": 1.0,
            "record_ids": [[f"identity:{t}"] for _, t in pairs],
            "importer": "resolve",
        }
    )
    return conform_edges(pl.concat([edges, conform_edges(links)], how="vertical"))


def _empty_originals() -> pl.DataFrame:
    return empty_edges().with_columns(pl.lit(None, dtype=pl.String).alias("resolved_id"))


def _merged(
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    canonical: Mapping[str, str],
    kind: Mapping[str, str],
    decisions: pl.DataFrame,
) -> Resolution:
    members = list(canonical)
    if not members:
        return Resolution(nodes, edges, decisions, empty_nodes(), _empty_originals())
    form = {m: normalise_curie(m) or m for m in members}  # each member's id in its one form
    to = pl.DataFrame({"id": members, "_to": [canonical[m] for m in members], "_form": [form[m] for m in members]})
    merged_rows = nodes.join(to, on="id", how="inner")
    # the canonical member's row first (its id as written, or in its one form): its name, source, description
    # and provenance are the node's; a member id written otherwise than its one form stays as an alias
    ordered = merged_rows.with_columns(
        (pl.col("_form") == pl.col("_to")).alias("_first"),
        (pl.col("id") == pl.col("_to")).alias("_exact"),
        pl.when(pl.col("_form") != pl.col("id")).then(pl.col("id")).alias("_written"),
    ).sort(["_to", "_first", "_exact", "id"], descending=[False, True, True, False])
    one = (
        ordered.with_columns(
            pl.concat_list(pl.col("name"), pl.col("aliases"), pl.col("_written")).alias("_names"),
            pl.concat_list(pl.col("id"), pl.col("xrefs")).alias("_ids"),
        )
        .group_by("_to", maintain_order=True)
        .agg(
            pl.col("name").first(),
            pl.col("source").first(),
            pl.col("description").drop_nulls().first(),
            pl.col("_names").explode().drop_nulls().unique(maintain_order=True),
            pl.col("_ids").explode().drop_nulls().unique(maintain_order=True),
            pl.col("properties").first(),
            pl.col("revision").first(),
            pl.col("retrieved_at").first(),
            pl.col("valid_from").first(),
        )
        .rename({"_to": "id"})
    )
    written = {v: normalise_curie(v) or v for v in one["_ids"].explode().drop_nulls().unique().to_list()}
    one = one.with_columns(
        pl.col("_names").list.set_difference(pl.concat_list(pl.col("name"))).alias("aliases"),
        pl.col("_ids")
        .list.eval(pl.element().replace_strict(written, return_dtype=pl.String))
        .list.unique(maintain_order=True)
        .list.set_difference(pl.concat_list(pl.col("id")))
        .alias("xrefs"),
        pl.col("id").replace_strict(dict(kind), return_dtype=pl.String).alias("type"),
    ).drop("_names", "_ids")
    kept = nodes.filter(~pl.col("id").is_in(members))
    resolved_nodes = conform_nodes(pl.concat([kept, conform_nodes(one)], how="vertical"))
    touched = pl.col("src").is_in(members) | pl.col("dst").is_in(members)
    rewired = edges.filter(touched).with_columns(
        pl.col("src").replace(dict(canonical)).alias("_src"), pl.col("dst").replace(dict(canonical)).alias("_dst")
    )
    rewired = rewired.with_columns(
        edge_ids_expr(pl.col("_src"), pl.col("rel"), pl.col("_dst"), pl.col("source")).alias("_id")
    )
    originals = rewired.with_columns(pl.col("_id").alias("resolved_id")).drop("_src", "_dst", "_id")
    moved = (
        rewired.filter(pl.col("_src") != pl.col("_dst"))  # an edge between two members of one cluster: in it
        .with_columns(pl.col("_src").alias("src"), pl.col("_dst").alias("dst"), pl.col("_id").alias("id"))
        .drop("_src", "_dst", "_id")
    )
    resolved_edges = conform_edges(
        pl.concat([edges.filter(~touched), conform_edges(collapse_edges(moved))], how="vertical")
    )
    original_nodes = nodes.filter(pl.col("id").is_in(members))
    return Resolution(resolved_nodes, resolved_edges, decisions, original_nodes, originals)


def unresolve(resolved: Resolution, vocabulary: TypeVocabulary, clusters: Sequence[str] | None = None) -> Resolution:
    """Undo a resolution: ``clusters`` (their canonical ids) only, or every one (None). The members of an
    undone cluster come back with their own rows and their edges with their own endpoints; the clusters kept
    are merged again from the original rows (the same code path as :func:`resolve_graph`), so undoing some
    clusters gives the graph resolving without them would have given. The undone clusters' decisions stay
    in the table, with ``canonical`` null and the problem "split"."""
    decisions = resolved.decisions
    undone = pl.col("cluster").is_in(list(clusters)) if clusters is not None else pl.lit(True)
    merged = decisions.filter(pl.col("canonical").is_not_null() & (pl.col("mode") == "merge"))
    # the graph before any merge: the merged nodes replaced by their members, the rewired edges by theirs
    nodes = conform_nodes(
        pl.concat(
            [
                resolved.nodes.filter(~pl.col("id").is_in(merged["canonical"].unique().to_list())),
                conform_nodes(resolved.original_nodes),
            ],
            how="vertical",
        )
    )
    gone = resolved.original_edges["resolved_id"].unique().to_list()
    edges = conform_edges(
        pl.concat(
            [
                resolved.edges.filter(~pl.col("id").is_in(gone)),
                conform_edges(resolved.original_edges.drop("resolved_id")),
            ],
            how="vertical",
        )
    )
    linked = decisions.filter(pl.col("canonical").is_not_null() & (pl.col("mode") == "link")).filter(undone)
    if not linked.is_empty():  # the same_as edges of the undone links
        edges = edges.filter(
            ~(
                (pl.col("source") == IDENTITY_SOURCE)
                & (pl.col("rel") == SAME_AS)
                & pl.col("src").is_in(linked["node"].to_list())
                & pl.col("dst").is_in(linked["canonical"].to_list())
            )
        )
    split = decisions.with_columns(
        pl.when(undone & pl.col("canonical").is_not_null())
        .then(pl.lit("split"))
        .otherwise(pl.col("problem"))
        .alias("problem"),
        pl.when(undone).then(pl.lit(None, dtype=pl.String)).otherwise(pl.col("canonical")).alias("canonical"),
    )
    kept = merged.filter(~undone)
    canonical = dict(zip(kept["node"].to_list(), kept["canonical"].to_list(), strict=True))
    types = dict(zip(nodes["id"].to_list(), effective_types(nodes, vocabulary), strict=True))
    members: dict[str, list[str]] = {}
    for member, target in canonical.items():
        members.setdefault(target, []).append(types.get(member, "entity"))
    kind = {target: _deepest(found, vocabulary) for target, found in members.items()}
    done = _merged(nodes, edges, canonical, kind, split)
    # the clusters kept keep their nodes' aliases as they were (the identity file's included)
    before = resolved.nodes.filter(pl.col("id").is_in(list(kind))).select("id", pl.col("aliases").alias("_was"))
    kept_nodes = (
        done.nodes.join(before, on="id", how="left")
        .with_columns(pl.coalesce("_was", "aliases").alias("aliases"))
        .drop("_was")
    )
    return Resolution(kept_nodes, done.edges, done.decisions, done.original_nodes, done.original_edges)
