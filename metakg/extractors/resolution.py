"""Entity resolution of extracted mentions: within the run, and against an existing bundle (linking).

A mention is a subject or object string as the model wrote it. Mentions are grouped by the keys and the
scorer of :mod:`metakg.identity.names` (its ``cascade``, whose precision and recall `metakg identity eval`
measures), each step looser than the one before: the same **exact** key (case, whitespace, punctuation
and a leading article ignored), the same **lemma** key (the head word lemmatised: "kidney stones" =
"kidney stone"), the same key without blanks (**compact**: "CAL-51" = "CAL51"), then **embedding**
cosine similarity of the group names at or above a threshold. A group becomes one node.

With a link target (the nodes of another bundle, e.g. PrimeKG or Wikidata), each group takes the target's
canonical id when one of its mentions matches a target name or alias by the same keys, or by embedding
similarity (again at or above the threshold); the target's node row is carried into the output so the
edges validate on their own and merge cleanly with the target bundle later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from metakg.identity.curation import Curation, apply_aliases
from metakg.identity.names import DEFAULT_LINKS, GROUP_THRESHOLD, LinkRule, compact, keys_of
from metakg.llm.embedder import Embedder, Vectors
from metakg.progress import Progress
from metakg.schemas.curie import dataset_id_expr
from metakg.schemas.tables import conform_nodes, match_key_expr
from metakg.text_processing import lemma_key

Method = str  # exact | lemma | compact | embedding (how a mention joined its group, or a group was linked)
BLOCK = 1024


@dataclass
class LinkTarget:
    """The nodes of an existing bundle indexed by exact key, lemma key and (optionally) name embedding."""

    nodes: pl.DataFrame
    by_key: dict[str, str]
    by_lemma: dict[str, str]
    by_compact: dict[str, str]
    vectors: Vectors | None = None
    vector_ids: list[str] = field(default_factory=list)

    @classmethod
    def from_nodes(
        cls, nodes: pl.DataFrame, vectors: Vectors | None = None, vector_ids: Sequence[str] = ()
    ) -> LinkTarget:
        """Index ``nodes`` (common-schema node rows). Names win over aliases; the first node wins a tie.

        ``vectors`` are unit-length name embeddings of the nodes ``vector_ids`` (for example a bundle's
        ``embeddings.parquet``); without them linking uses exact and lemma keys only.
        """
        # every name first, then every alias: a name wins over another node's alias with the same key
        names = pl.concat(
            [
                nodes.select("id", pl.col("name").alias("n")),
                nodes.select("id", pl.col("aliases").alias("n")).explode("n"),
            ]
        ).drop_nulls("n")
        keyed = names.with_columns(match_key_expr(pl.col("n")).alias("key")).filter(pl.col("key") != "")
        by_key: dict[str, str] = {}
        by_lemma: dict[str, str] = {}
        by_compact: dict[str, str] = {}
        for node_id, key in keyed.select("id", "key").iter_rows():
            by_key.setdefault(key, node_id)
            by_lemma.setdefault(lemma_key(key), node_id)
            by_compact.setdefault(compact(key), node_id)
        return cls(conform_nodes(nodes), by_key, by_lemma, by_compact, vectors, list(vector_ids))


@dataclass
class Resolution:
    """Every mention's node id, how it was resolved, and the node rows of all ids used."""

    ids: dict[str, str]
    nodes: pl.DataFrame
    merged: dict[Method, int]  # mentions that joined another mention's group, by method
    linked: dict[Method, int]  # groups that took a link-target id, by method
    groups: int

    def as_dict(self) -> dict[str, object]:
        """Counts for reports."""
        return {
            "mentions": len(self.ids),
            "groups": self.groups,
            "merged": dict(self.merged),
            "linked": dict(self.linked),
        }


def _best_earlier(vectors: Vectors, threshold: float) -> list[int]:
    """For each row i, the most similar row j < i with cosine >= threshold, or -1 (blockwise, O(n) memory per block)."""
    n = len(vectors)
    best = [-1] * n
    for start in range(0, n, BLOCK):
        block = vectors[start : start + BLOCK] @ vectors[: start + BLOCK].T
        for offset in range(block.shape[0]):
            i = start + offset
            if i == 0:
                continue
            row = block[offset, :i]
            j = int(np.argmax(row))
            if row[j] >= threshold:
                best[i] = j
    return best


def resolve_mentions(
    mentions: Sequence[str],
    dataset: str,
    *,
    node_type: str = "concept",
    embedder: Embedder | None = None,
    threshold: float = GROUP_THRESHOLD,
    link: LinkRule = DEFAULT_LINKS["cascade"],
    target: LinkTarget | None = None,
    curation: Curation | None = None,
    progress: Progress | None = None,
) -> Resolution:
    """Group ``mentions`` (distinct, in first-seen order) into nodes and link the groups to ``target``;
    ``curation`` (an identity file) has the last word (:func:`_curate`).

    Args:
        mentions: distinct mention strings; the first mention of a group names its node.
        dataset: scopes the ids of new nodes, ``kg:<dataset>/<slug>``.
        node_type: the vocabulary type of new nodes.
        embedder: enables the embedding step (None: exact and lemma only).
        threshold: the cosine similarity at or above which two mentions of the run are the same entity.
        link: when a group is linked to a target entity by embedding similarity (its threshold, and its
            margin over the best other target entity).
        target: the link target, or None.
        curation: must-links, cannot-links and aliases a curator wrote, by node id.
        progress: called with stage names.
    """
    say = progress or (lambda _s: None)
    keys = keys_of(mentions)
    lemmas = [lemma_key(k) for k in keys]
    compacts = [compact(k) for k in keys]
    # 1-3: exact, lemma, then compact keys; a group is the list of mention indexes, its first the representative
    group_of_lemma: dict[str, int] = {}
    group_of_compact: dict[str, int] = {}
    groups: list[list[int]] = []
    merged: dict[Method, int] = {}
    for i, (lemma, squeezed) in enumerate(zip(lemmas, compacts, strict=True)):
        g = group_of_lemma.get(lemma)
        method = "exact" if g is not None and keys[groups[g][0]] == keys[i] else "lemma"
        if g is None:
            g = group_of_compact.get(squeezed)
            method = "compact"
        if g is None:
            group_of_lemma[lemma] = group_of_compact[squeezed] = len(groups)
            groups.append([i])
        else:
            groups[g].append(i)
            group_of_lemma.setdefault(lemma, g)
            group_of_compact.setdefault(squeezed, g)
            merged[method] = merged.get(method, 0) + 1
    # 3: embedding similarity between group representatives (a group joins the earlier group it is closest to)
    rep_vectors: Vectors | None = None
    if embedder is not None and len(groups) > 1:
        say(f"embedding {len(groups)} entity names")
        rep_vectors = embedder.embed([mentions[g[0]] for g in groups])
        best = _best_earlier(rep_vectors, threshold)
        root = list(range(len(groups)))
        for gi, j in enumerate(best):
            if j >= 0:
                r = root[j]
                # join j's root only when close to the root itself too, so chains of near-synonyms do not drift
                if float(rep_vectors[gi] @ rep_vectors[r]) >= threshold:
                    root[gi] = r
        if any(r != gi for gi, r in enumerate(root)):
            joined: dict[int, list[int]] = {}
            for gi, r in enumerate(root):
                joined.setdefault(r, []).extend(groups[gi])
                if r != gi:
                    merged["embedding"] = merged.get("embedding", 0) + len(groups[gi])
            keep = sorted(joined)
            groups = [joined[r] for r in keep]
            rep_vectors = rep_vectors[keep]
    # linking: each group to a target id
    linked: dict[Method, int] = {}
    group_target: list[str | None] = [None] * len(groups)
    group_method: list[Method] = [""] * len(groups)  # how each group was linked
    if target is not None:
        say("linking to the target bundle")
        for gi, members in enumerate(groups):
            found = (
                (method, index[own[m]])
                for method, index, own in (
                    ("exact", target.by_key, keys),
                    ("lemma", target.by_lemma, lemmas),
                    ("compact", target.by_compact, compacts),
                )
                for m in members
                if own[m] in index
            )
            method, hit = next(found, ("", None))
            if hit is not None:
                group_target[gi], group_method[gi] = hit, method
                linked[method] = linked.get(method, 0) + 1
        open_groups = [gi for gi, t in enumerate(group_target) if t is None]
        if embedder is not None and target.vectors is not None and len(target.vectors) and open_groups:
            vectors = (
                rep_vectors[open_groups]
                if rep_vectors is not None
                else embedder.embed([mentions[groups[gi][0]] for gi in open_groups])
            )
            for start in range(0, len(open_groups), BLOCK):
                sims = vectors[start : start + BLOCK] @ target.vectors.T
                for offset, hits in enumerate(_two_best(sims, target.vector_ids)):
                    hit = link.pick(hits)
                    if hit is not None:
                        group_target[open_groups[start + offset]] = hit
                        group_method[open_groups[start + offset]] = "embedding"
                        linked["embedding"] = linked.get("embedding", 0) + 1
    if curation is not None and not curation.empty:
        groups, group_target = _curate(
            mentions, groups, group_target, group_method, dataset, target, curation, merged, linked
        )
    done = _assemble(mentions, groups, group_target, dataset, node_type, target, merged, linked)
    if curation is not None:
        done.nodes = apply_aliases(done.nodes, curation)
    return done


def _two_best(sims: np.ndarray, ids: Sequence[str], depth: int = 16) -> list[list[tuple[str, float]]]:
    """Per row of ``sims`` (one mention against every target name): the best entity and the best other
    entity among the ``depth`` nearest names, with their scores (one entity may have several names)."""
    depth = min(depth, sims.shape[1])
    near = np.argpartition(-sims, depth - 1, axis=1)[:, :depth]
    found = []
    for row, columns in zip(sims, near, strict=True):
        hits: list[tuple[str, float]] = []
        for j in sorted(columns.tolist(), key=lambda c: -row[c]):
            if not hits or ids[j] != hits[0][0]:
                hits.append((ids[j], float(row[j])))
                if len(hits) == 2:
                    break
        found.append(hits)
    return found


def _curate(
    mentions: Sequence[str],
    groups: list[list[int]],
    group_target: list[str | None],
    group_method: list[Method],
    dataset: str,
    target: LinkTarget | None,
    curation: Curation,
    merged: dict[Method, int],
    linked: dict[Method, int],
) -> tuple[list[list[int]], list[str | None]]:
    """Apply an identity file to the groups, by node id (the id a group gets, ``kg:<dataset>/<slug>``, or
    the target id it links to): a cannot-link undoes the link of a group to that target; a must-link joins
    two groups of the run, or links a group to that target. Entries naming nothing of this run are left
    alone (an identity file serves many runs)."""
    reps = pl.DataFrame({"rep": [mentions[g[0]] for g in groups]}, schema={"rep": pl.String})
    own_ids = reps.select(dataset_id_expr(dataset, pl.col("rep"))).to_series().to_list()
    target_ids = set(target.nodes["id"].to_list()) if target is not None else set()
    for a, b in curation.cannot_link:
        for gi, linked_to in enumerate(group_target):
            if linked_to is not None and {own_ids[gi], linked_to} == {a, b}:
                group_target[gi] = None
                linked[group_method[gi]] -= 1
                linked["kept_apart"] = linked.get("kept_apart", 0) + 1
    root = list(range(len(groups)))

    def find(gi: int) -> int:
        while root[gi] != gi:
            gi = root[gi]
        return gi

    index = {own: gi for gi, own in enumerate(own_ids)}
    for a, b in curation.must_link:
        for mine, other in ((a, b), (b, a)):
            if mine not in index:
                continue
            gi = find(index[mine])
            if other in index and find(index[other]) != gi:
                joined = find(index[other])
                root[joined] = gi
                merged["curation"] = merged.get("curation", 0) + len(groups[joined])
            elif other in target_ids and group_target[gi] != other:
                group_target[gi] = other
                linked["curation"] = linked.get("curation", 0) + 1
            break
    for method in [m for m, n in linked.items() if n == 0]:
        del linked[method]
    if all(find(gi) == gi for gi in range(len(groups))):
        return groups, group_target
    kept: dict[int, list[int]] = {}
    for gi, members in enumerate(groups):
        kept.setdefault(find(gi), []).extend(members)
    order = sorted(kept)
    return [kept[gi] for gi in order], [group_target[gi] for gi in order]


def _assemble(
    mentions: Sequence[str],
    groups: list[list[int]],
    group_target: list[str | None],
    dataset: str,
    node_type: str,
    target: LinkTarget | None,
    merged: dict[Method, int],
    linked: dict[Method, int],
) -> Resolution:
    rows = pl.DataFrame(
        {
            "group": [gi for gi, members in enumerate(groups) for _ in members],
            "mention": [mentions[m] for members in groups for m in members],
            "target": [group_target[gi] for gi, members in enumerate(groups) for _ in members],
            "order": [m for members in groups for m in members],
        },
        schema={"group": pl.Int64, "mention": pl.String, "target": pl.String, "order": pl.Int64},
    )
    rep = rows.group_by("group", maintain_order=True).agg(pl.col("mention").first().alias("rep"))
    rows = rows.join(rep, on="group", how="left", maintain_order="left").with_columns(
        pl.coalesce(pl.col("target"), dataset_id_expr(dataset, pl.col("rep"))).alias("id")
    )
    ids = dict(zip(rows["mention"].to_list(), rows["id"].to_list(), strict=True))
    new_nodes = (
        rows.filter(pl.col("target").is_null())
        .sort("order")
        .group_by("id", maintain_order=True)
        .agg(pl.col("mention").first().alias("name"), pl.col("mention").slice(1).alias("aliases"))
        .with_columns(pl.lit(node_type).alias("type"), pl.lit(dataset).alias("source"))
    )
    frames = [conform_nodes(new_nodes)]
    if target is not None:
        surface = rows.filter(pl.col("target").is_not_null()).group_by("target").agg(pl.col("mention").alias("_m"))
        carried = (
            target.nodes.join(surface, left_on="id", right_on="target", how="inner")
            .with_columns(
                pl.concat_list(pl.col("aliases").fill_null([]), pl.col("_m"))
                .list.unique(maintain_order=True)
                .list.set_difference(pl.concat_list(pl.col("name")))
                .alias("aliases")
            )
            .drop("_m")
        )
        frames.append(conform_nodes(carried))
    nodes = pl.concat(frames, how="vertical")
    return Resolution(ids=ids, nodes=nodes, merged=merged, linked=linked, groups=len(groups))
