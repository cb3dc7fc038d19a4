"""One graph from several bundles (`metakg resolve`), what was decided (`metakg identity show`) and its
undo (`metakg identity split`), and how right name matching is (`metakg identity eval`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from metakg.api._shared import JsonResult, Progress, cache_folder, check_identity_settings, quiet
from metakg.api.llm import llm_session, run_with
from metakg.config import Settings
from metakg.errors import LLMError, NodeNotFound, UsageError
from metakg.identity.clusters import KEPT_APART, may_be_one
from metakg.identity.curation import read_curation
from metakg.identity.evaluate import (
    GOLD_FORMATS,
    GoldFormat,
    evaluate_clusters,
    evaluate_gold,
    read_gold,
    read_id_pairs,
    write_report,
)
from metakg.identity.judge import JUDGE_BAND, judge_pairs
from metakg.identity.names import DEFAULT_THRESHOLDS, SCORERS, NameLink, Scorer, name_links
from metakg.identity.resolve import (
    DEFAULT_PRIORITY,
    Mode,
    Resolution,
    apart_clashing_ids,
    resolve_graph,
    unresolve,
)
from metakg.llm.embedder import LazyEmbedder
from metakg.schemas.bundle import (
    IDENTITY_EDGES_FILE,
    IDENTITY_FILE,
    IDENTITY_NODES_FILE,
    Bundle,
    declared_types,
    merge_bundles,
    read_bundle,
    read_manifest,
    read_side_table,
    write_bundle,
)
from metakg.schemas.bundle_dir import bundle_path, writing
from metakg.schemas.curie import normalise_curie
from metakg.schemas.locks import open_output, require_folder
from metakg.schemas.vocabulary import default_vocabulary

#: the name scorers (`metakg identity eval --scorer`, `metakg resolve --names`) and gold formats
NAME_SCORERS = SCORERS
__all__ = [
    "GOLD_FORMATS",
    "NAME_SCORERS",
    "ClusterScore",
    "ClusterView",
    "IdentityCounts",
    "NameScoring",
    "Resolved",
    "Split",
    "curated_bundle",
    "identity_eval",
    "identity_eval_bundle",
    "identity_show",
    "identity_split",
    "resolve",
]

#: the refused clusters a report lists (the decision table holds them all)
SHOWN_REFUSED = 20


@dataclass(frozen=True)
class IdentityCounts(JsonResult):
    """What a resolution (or the undoing of part of one) left: ``nodes_before`` and after, the ``edges``, the
    ``clusters`` joined and the ``nodes_in_clusters``; the groups ``refused`` (types that cannot be one entity,
    too large) with the first examples; the nodes ``kept_apart`` by the curator's cannot-links, with examples;
    and the nodes ``joined_by_name``."""

    nodes_before: int
    nodes: int
    edges: int
    clusters: int
    nodes_in_clusters: int
    refused: int
    refused_examples: list[dict[str, Any]]
    kept_apart: int
    kept_apart_examples: list[dict[str, Any]]
    joined_by_name: int

    def recorded(self, *, left_out: tuple[str, ...] = ("refused_examples",)) -> dict[str, Any]:
        """The counts a manifest records (the examples are in the decision table)."""
        return {k: v for k, v in self.as_dict().items() if k not in left_out}


@dataclass(frozen=True)
class Resolved(JsonResult):
    """A resolution: the new ``bundle``, its ``inputs``, the ``mode``, its counts, what the LLM ``judge``
    was asked and answered (None: no judge), and the ids two inputs give to nodes of types that cannot be
    one entity (``id_clashes``: each kept apart, the later node under an id of its own)."""

    bundle: Path
    inputs: list[Path]
    mode: Mode
    counts: IdentityCounts
    judge: dict[str, Any] | None
    id_clashes: list[dict[str, Any]] = field(default_factory=list)

    spread = ("counts",)


@dataclass(frozen=True)
class ClusterView(JsonResult):
    """One identity cluster: its id, the ``canonical`` node (None: left apart, ``problem`` says why), the
    ``mode``, the identifiers (``evidence``) that join it and each member's decision (node, decided_by,
    scorer, score)."""

    cluster: str
    canonical: str | None
    mode: str
    problem: str | None
    evidence: list[str]
    members: list[dict[str, Any]]


@dataclass(frozen=True)
class Split(JsonResult):
    """What ``identity split`` undid: the ``bundle`` rewritten, the clusters ``split``, and the ``nodes`` and
    ``edges`` it holds now; ``apart``: the clusters named that were apart already (split before, or refused),
    for which nothing was done (none split: no new version was written)."""

    bundle: Path
    split: list[str]
    nodes: int
    edges: int
    apart: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NameScoring(JsonResult):
    """Name scorers against a gold mapping (also ``summary.json``): the ``gold`` set, its ``kind`` (pairs or
    links) and ``rows``, the ``target_precision`` thresholds are tuned for, how the halves are ``split``, and
    per scorer the tuned threshold, the held-out figures at it and at the default threshold."""

    gold: str
    kind: str
    rows: int
    target_precision: float
    split: str
    scorers: list[dict[str, Any]]


@dataclass(frozen=True)
class ClusterScore(JsonResult):
    """A graph's identity against gold id pairs (also ``summary.json``): the ``bundle`` (``resolved`` when it
    holds decisions), the ``pairs`` and those ``covered`` by its nodes, the pairs it ``called`` one entity
    and the ``right`` ones among them, the gold ``positives``, precision, recall and F1, and the first
    wrong and missed pairs."""

    bundle: Path
    resolved: bool
    gold: str
    pairs: int
    covered: int
    precision: float
    recall: float
    f1: float
    called: int
    right: int
    positives: int
    wrong_examples: list[list[str]]
    missed_examples: list[list[str]]


def _summary(resolution: Resolution, before: int) -> IdentityCounts:
    decisions = resolution.decisions
    kept = decisions.filter(pl.col("canonical").is_not_null())
    alone = decisions.filter(pl.col("canonical").is_null())
    kept_apart = alone.filter(pl.col("problem").str.starts_with(KEPT_APART))
    refused = alone.filter(~pl.col("problem").str.starts_with(KEPT_APART))
    shown = (
        refused.group_by("cluster", maintain_order=True)
        .agg(pl.col("node"), pl.col("evidence").first(), pl.col("problem").first())
        .head(SHOWN_REFUSED)
    )
    return IdentityCounts(
        nodes_before=before,
        nodes=resolution.nodes.height,
        edges=resolution.edges.height,
        clusters=kept["cluster"].n_unique(),
        nodes_in_clusters=kept.height,
        refused=refused["cluster"].n_unique(),
        refused_examples=shown.to_dicts(),
        kept_apart=kept_apart.height,
        kept_apart_examples=kept_apart.select("node", "evidence", "problem").head(SHOWN_REFUSED).to_dicts(),
        joined_by_name=kept.filter(pl.col("decided_by") == "name").height,
    )


def resolve(
    paths: Sequence[Path],
    out: Path,
    settings: Settings,
    *,
    mode: Mode = "merge",
    identity_file: Path | None = None,
    names: Scorer | None = None,
    threshold: float | None = None,
    judge: bool = False,
    progress: Progress = quiet,
) -> Resolved:
    """Resolve the bundles at ``paths`` into one bundle at ``out``: nodes that share an identifier become one
    (``merge``) or are linked by ``same_as`` edges (``link``); the decisions and what undoing them needs are
    tables of the new bundle. Returns the counts and the refused clusters (the first 20).

    ``identity_file``: a curator's must-links, cannot-links, preferred ids and aliases
    (:mod:`metakg.identity.curation`), applied on top of the identifiers. ``names``: a name scorer that
    also joins nodes of different sources and compatible types whose names it rates at or above
    ``threshold`` (its default threshold when None); off when None. ``judge``: the pairs scored less than
    :data:`~metakg.identity.judge.JUDGE_BAND` below the threshold are put to the configured LLM
    (:mod:`metakg.identity.judge`), and those it calls one entity are joined too.

    Raises:
        UsageError: ``out`` is one of the inputs, no input is given, or a threshold or judge is asked for
            without a name scorer; BundleError: an input cannot be read
            or ``out`` cannot be written; InputDataError: the identity file is malformed, contradicts itself
            or names an id no node has (nothing is written).
    """
    if not paths:
        raise UsageError("give at least one bundle to resolve.")
    if any(bundle_path(p) == bundle_path(out) for p in paths):
        raise UsageError(f"the output {out} is also an input; resolve into a new directory.")
    if names is not None and names not in SCORERS:
        raise UsageError(f"unknown name scorer {names!r}: choose among {', '.join(SCORERS)}.")
    if threshold is not None and not 0.0 < threshold <= 1.0:
        raise UsageError(f"the name threshold must be above 0 and at most 1, got {threshold}.")
    if judge and names is None:
        raise UsageError("--judge asks the LLM about name pairs: give a name scorer with --names.")
    if threshold is not None and names is None:
        raise UsageError("--threshold is the name score that joins two nodes: give a name scorer with --names.")
    check_identity_settings(settings)
    priority = {**DEFAULT_PRIORITY, **settings.identity.prefix_priority}
    curation = read_curation(identity_file) if identity_file is not None else None
    with writing(out):
        progress(f"reading {len(paths)} bundle(s)")
        bases, earlier = _as_before([(p, read_bundle(p)) for p in paths])
        vocabulary = default_vocabulary().with_types(declared_types(bases))
        bases, clashes = apart_clashing_ids(bases, [str(p) for p in paths], vocabulary)
        merged = merge_bundles(bases)
        links: list[NameLink] = []
        judged: dict[str, Any] | None = None
        if names is not None:
            progress(f"matching the names of {merged.nodes.height:,} nodes ({names})")
            embedder = (
                LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress)
                if names in ("embedding", "cascade")
                else None
            )
            cut = DEFAULT_THRESHOLDS[names] if threshold is None else threshold
            links = name_links(
                merged.nodes,
                may_be_one(merged.nodes, vocabulary),
                names,
                cut - JUDGE_BAND if judge else cut,
                embedder=embedder,
                apart=curation.cannot_link if curation else (),
            )
            if judge:
                links, judged = _judged(links, cut, merged.nodes, settings, progress)
        progress(f"resolving {merged.nodes.height:,} nodes by their identifiers")
        result = resolve_graph(
            merged.nodes,
            merged.edges,
            vocabulary,
            mode=mode,
            priority=priority,
            max_size=settings.identity.max_cluster,
            one_per_entity=settings.identity.one_per_entity,
            curation=curation,
            names=links,
            earlier=earlier,
        )
        summary = _summary(result, merged.nodes.height)
        manifest = dict(merged.manifest) | {
            "identity": {
                "mode": mode,
                "identity_file": str(identity_file) if identity_file else None,
                "names": None
                if names is None
                else {"scorer": names, "threshold": DEFAULT_THRESHOLDS[names] if threshold is None else threshold},
                **summary.recorded(),
                **({"id_clashes": clashes[:SHOWN_REFUSED], "id_clashes_count": len(clashes)} if clashes else {}),
            }
        }
        _write_resolution(out, result, merged.rejects, manifest)
    return Resolved(out, list(paths), mode, summary, judged, clashes)


def _as_before(read: Sequence[tuple[Path, Bundle]]) -> tuple[list[Bundle], pl.DataFrame | None]:
    """The bundles as they were before any resolution of theirs (every merge and link undone) and the
    decision tables of those resolutions, one table (None when no input was resolved)."""
    bases, decisions = [], []
    for path, bundle in read:
        earlier = _resolution(path, bundle) if "identity" in bundle.manifest else None
        if earlier is None:
            bases.append(bundle)
            continue
        vocabulary = default_vocabulary().with_types(bundle.manifest.get("types") or {})
        undone = unresolve(earlier, vocabulary)
        manifest = {k: v for k, v in bundle.manifest.items() if k not in ("identity", "embeddings")}
        bases.append(Bundle(undone.nodes, undone.edges, bundle.rejects, manifest=manifest))
        decisions.append(earlier.decisions)
    if not decisions:
        return bases, None
    return bases, pl.concat(decisions, how="vertical").unique(["cluster", "node"], maintain_order=True)


def with_identity(read: Sequence[tuple[Path, Bundle]], merged: Bundle) -> Bundle:
    """``merged`` (the union of the bundles ``read``) with the identity tables of those that were resolved,
    together, so that every merge they made can still be shown and split; ``merged`` as it is when none was.

    Raises:
        BundleError: a resolved input's identity tables cannot be read.
    """
    earlier = [_resolution(path, bundle) for path, bundle in read if "identity" in bundle.manifest]
    if not earlier:
        return merged

    def union(frames: Sequence[pl.DataFrame], key: Sequence[str]) -> pl.DataFrame:
        return pl.concat(frames, how="vertical").unique(list(key), maintain_order=True)

    done = Resolution(
        merged.nodes,
        merged.edges,
        union([r.decisions for r in earlier], ["cluster", "node"]),
        union([r.original_nodes for r in earlier], ["id"]),
        union([r.original_edges for r in earlier], ["id", "resolved_id"]),
    )
    summary = _summary(done, merged.nodes.height)
    modes = sorted(set(done.decisions["mode"].drop_nulls().to_list()))
    manifest = dict(merged.manifest) | {
        "identity": {"mode": "/".join(modes) or None, "merged_from": len(earlier)}
        | summary.recorded(left_out=("refused_examples", "nodes_before"))
    }
    side = {
        IDENTITY_FILE: done.decisions,
        IDENTITY_NODES_FILE: done.original_nodes,
        IDENTITY_EDGES_FILE: done.original_edges,
    }
    return Bundle(merged.nodes, merged.edges, merged.rejects, manifest=manifest, side=side)


def _judged(
    links: list[NameLink], cut: float, nodes: pl.DataFrame, settings: Settings, progress: Progress
) -> tuple[list[NameLink], dict[str, Any]]:
    """The links at or above ``cut``, and those below it that the LLM judge calls one entity (their scorer
    marked ``+judge``), with what the judge was asked and what it cost."""
    sure = [link for link in links if link.score >= cut]
    unsure = [link for link in links if link.score < cut]
    report: dict[str, Any] = {"asked": len(unsure), "yes": 0, "no": 0, "unclear": 0, "band": JUDGE_BAND}
    if not unsure:
        return sure, report
    row = {r["id"]: r for r in nodes.select("id", "name", "type").to_dicts()}
    pairs = [(row[x.a]["name"], row[x.a]["type"], row[x.b]["name"], row[x.b]["type"]) for x in unsure]
    progress(f"asking the LLM judge about {len(pairs):,} name pair(s) just below the threshold")
    with llm_session(settings, progress=progress) as client:
        verdicts = run_with(client, judge_pairs(pairs, client, concurrency=settings.llm.concurrency))
        usage = client.meter.summary()
    errors = list(dict.fromkeys(v.error for v in verdicts if v.error is not None))
    if len(errors) and all(v.error is not None for v in verdicts):  # nothing was judged: say so, write nothing
        raise LLMError(f"the LLM judge answered none of {len(verdicts):,} name pair(s): {errors[0]}")
    joined = []
    for link, verdict in zip(unsure, verdicts, strict=True):
        if verdict.error is None:
            report["yes" if verdict.same else "no" if verdict.same is False else "unclear"] += 1
        if verdict.same:
            joined.append(NameLink(link.a, link.b, f"{link.scorer}+judge", link.score))
    report |= {
        "failed": len(verdicts) - sum(v.error is None for v in verdicts),
        "errors": errors[:3],
        "llm_calls": usage.llm_calls,
        "cache_hits": usage.cache_hits,
        "tokens": usage.tokens,
        "cost_usd": round(usage.cost_usd, 6),
    }
    return sure + joined, report


def _write_resolution(
    path: Path, done: Resolution, rejects: pl.DataFrame, manifest: dict[str, Any], *, expect: str | None = None
) -> None:
    """Write a resolved graph with its decisions and the original rows its undo needs."""
    side = {
        IDENTITY_FILE: done.decisions,
        IDENTITY_NODES_FILE: done.original_nodes,
        IDENTITY_EDGES_FILE: done.original_edges,
    }
    write_bundle(path, Bundle(done.nodes, done.edges, rejects, manifest=manifest, side=side), expect=expect)


def _resolution(path: Path, bundle: Bundle) -> Resolution:
    tables = [read_side_table(path, bundle, name) for name in (IDENTITY_FILE, IDENTITY_NODES_FILE, IDENTITY_EDGES_FILE)]
    decisions, original_nodes, original_edges = tables
    if decisions is None or original_nodes is None or original_edges is None:
        raise UsageError(f"{path} was not made by metakg resolve: it has no identity decisions.")
    return Resolution(bundle.nodes, bundle.edges, decisions, original_nodes, original_edges)


def _named(resolution: Resolution) -> pl.DataFrame:
    """Every node id and name of a resolved graph, the merged members' included (as they were)."""
    return pl.concat([resolution.nodes.select("id", "name"), resolution.original_nodes.select("id", "name")])


def _clusters_of(decisions: pl.DataFrame, refs: Sequence[str], nodes: pl.DataFrame) -> list[str]:
    """The clusters the ids in ``refs`` name (a cluster's id, or one of its members', in any written form),
    or a node's exact name when it is no id (``nodes``: the graph before resolving, id and name)."""
    found = []
    for ref in refs:
        forms = {ref, normalise_curie(ref) or ref}
        hits = decisions.filter(pl.col("cluster").is_in(list(forms)) | pl.col("node").is_in(list(forms)))
        if hits.is_empty() and ref.strip().lower().startswith("kg:"):  # kg:<dataset>/<slug> ids ignore case
            folded = ref.strip().casefold()
            hits = decisions.filter(
                (pl.col("cluster").str.to_lowercase() == folded) | (pl.col("node").str.to_lowercase() == folded)
            )
        if hits.is_empty():
            named = nodes.filter(pl.col("name").str.to_lowercase() == ref.strip().lower())["id"].to_list()
            hits = decisions.filter(pl.col("node").is_in(named))
        if hits.is_empty():
            raise NodeNotFound(
                f"{ref!r} is no node id, cluster id or node name in an identity cluster of this bundle: of the "
                f"{decisions['cluster'].n_unique()} clusters, the first is {decisions['cluster'][0]!r}."
                if decisions.height
                else f"this bundle has no identity cluster: {ref!r} is in none."
            )
        found.extend(hits["cluster"].unique(maintain_order=True).to_list())
    return list(dict.fromkeys(found))


def identity_show(path: Path, ref: str) -> ClusterView:
    """The identity cluster of the node ``ref`` (its id, a member's, or the cluster's), with every decision.

    Raises:
        UsageError: the bundle was not resolved; NodeNotFound: ``ref`` is in no cluster.
    """
    bundle = read_bundle(path)
    resolution = _resolution(path, bundle)
    decisions = resolution.decisions
    [cluster] = _clusters_of(decisions, [ref], _named(resolution))[:1]
    rows = decisions.filter(pl.col("cluster") == cluster)
    return ClusterView(
        cluster=cluster,
        canonical=rows["canonical"][0],
        mode=rows["mode"][0],
        problem=rows["problem"][0],
        evidence=rows["evidence"][0].to_list(),
        members=rows.select("node", "decided_by", "scorer", "score").to_dicts(),
    )


def identity_split(path: Path, refs: Sequence[str], settings: Settings) -> Split:
    """Undo the merges (or links) of the clusters ``refs`` name, in place: their members come back with their
    own rows and edges; every other cluster stays as it was.

    Raises:
        UsageError: the bundle was not resolved, or no cluster is named; NodeNotFound: a ref is in no cluster;
        BundleError: the bundle changed since it was read, or cannot be written.
    """
    if not refs:
        raise UsageError("name at least one node or cluster to split.")
    with writing(path):
        bundle = read_bundle(path)
        resolution = _resolution(path, bundle)
        named = _clusters_of(resolution.decisions, refs, _named(resolution))
        joined = set(resolution.decisions.filter(pl.col("canonical").is_not_null())["cluster"].to_list())
        clusters = [c for c in named if c in joined]
        apart = [c for c in named if c not in clusters]
        if not clusters:  # nothing to undo: the same graph again would only be a new version of it
            return Split(path, [], bundle.nodes.height, bundle.edges.height, apart)
        done = unresolve(resolution, default_vocabulary().with_types(bundle.manifest.get("types") or {}), clusters)
        summary = _summary(done, resolution.nodes.height)
        manifest = dict(bundle.manifest)
        manifest["identity"] = dict(manifest.get("identity", {})) | summary.recorded(
            left_out=("refused_examples", "nodes_before")
        )
        manifest.pop("embeddings", None)  # the nodes changed: their name embeddings are made again when needed
        _write_resolution(path, done, bundle.rejects, manifest, expect=bundle.token)
    return Split(path, clusters, done.nodes.height, done.edges.height, apart)


def identity_eval(
    gold_path: Path,
    out: Path,
    settings: Settings,
    *,
    fmt: GoldFormat = "sssom",
    second: Path | None = None,
    scorers: Sequence[Scorer] = SCORERS,
    limit: int | None = None,
    progress: Progress = quiet,
) -> NameScoring:
    """Score each name scorer against a gold mapping: the operating point tuned on one half, the held-out
    half's precision, recall and F1 at it and at the default threshold; the curve as ``out/curve.csv`` and
    ``out/pr-curve.png``, the figures as ``out/summary.json`` (returned).

    Raises:
        InputDataError: the gold files cannot be read, lack a column or hold nothing to score.
        UsageError: an unknown scorer, a limit below 1.
        OutputError: ``out`` cannot be written.
    """
    unknown = [s for s in scorers if s not in SCORERS]
    if unknown:
        raise UsageError(f"unknown scorer {', '.join(unknown)}: choose among {', '.join(SCORERS)}.")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}.")
    progress(f"reading the gold mapping {gold_path}")
    gold = read_gold(fmt, gold_path, second=second, limit=limit)
    embedder = (
        LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress)
        if {"embedding", "cascade"} & set(scorers)
        else None
    )
    results = []
    for scorer in scorers:
        progress(f"scoring with {scorer}")
        results.extend(evaluate_gold(gold, [scorer], embedder=embedder))
    return NameScoring(**write_report(gold, results, out))


def curated_bundle(settings: Settings, bundle: Path, identity_file: Path, progress: Progress = quiet) -> Path:
    """``bundle`` resolved with an identity file, for questions (`metakg ask --identity`): made once by
    :func:`resolve` into the cache, under a digest of the bundle's manifest, the file's text and the
    ``[identity]`` settings, and reused while none of them changes.

    Raises:
        BundleError: the bundle cannot be read; InputDataError: the identity file is malformed or names an
            id the bundle lacks.
    """
    read_curation(identity_file)  # refuses a bad file before any work
    parts = [
        read_manifest(bundle),
        identity_file.read_text(encoding="utf-8"),
        settings.identity.model_dump(mode="json"),
    ]
    content = json.dumps(parts, sort_keys=True, default=str)
    out = cache_folder(settings, "identity") / hashlib.sha256(content.encode("utf-8")).hexdigest()[:20]
    if not (out / "manifest.json").is_file():
        progress(f"resolving {bundle} with the identity file {identity_file}")
        resolve([bundle], out, settings, identity_file=identity_file, progress=progress)
    return out


def identity_eval_bundle(gold_path: Path, bundle_dir: Path, out: Path) -> ClusterScore:
    """Score a graph's identity (a bundle made by :func:`resolve`, or any bundle: its nodes as they are)
    against gold identifier pairs (:func:`~metakg.identity.evaluate.read_id_pairs`); writes and returns
    ``out/summary.json``.

    Raises:
        InputDataError: the gold file is malformed; BundleError: the bundle cannot be read; OutputError:
            ``out`` cannot be written.
    """
    gold = read_id_pairs(gold_path)
    bundle = read_bundle(bundle_dir)
    decisions = read_side_table(bundle_dir, bundle, IDENTITY_FILE)
    canonical: dict[str, str] = {}
    if decisions is not None:
        kept = decisions.filter(pl.col("canonical").is_not_null())
        canonical = dict(zip(kept["node"].to_list(), kept["canonical"].to_list(), strict=True))
    score = ClusterScore(bundle_dir, decisions is not None, **evaluate_clusters(gold, bundle.nodes, canonical))
    require_folder(out, "the evaluation output")
    out.mkdir(parents=True, exist_ok=True)
    with open_output(out / "summary.json") as fh:
        fh.write(json.dumps(score.as_dict(), indent=1) + "\n")
    return score
