"""Name matching measured on public gold mappings: metakg's scorers beside neo4j-graphrag's resolvers.

Gold sets (read in place from the shared data directory's ``er/``, never copied): biomappings' reviewed
right and wrong mappings (pairs, the only set here with wrong pairs, so the only one whose pair precision
means something), MONDO's exact matches to DOID and MeSH (subject label -> object; MeSH names from the
MeSH-to-Wikipedia title table, as the MeSH file has no object labels), the BC5CDR and NCBI-disease test
corpora (an annotated mention -> its MeSH entry: extraction's linking step), DrugBank's open vocabulary
(synonym -> drug), KGTK's Wikidata aliases (alias -> item) and the phenotype synonym table (synonym ->
term). MONDO to UMLS is left out: no file here names UMLS concepts. Each is sampled (``--limit`` rows
spread over the set by id hash, ``--pairs-limit`` for biomappings) and split in two by a hash of the gold id
(``metakg.identity.evaluate.half``); every figure is on the held-out half.

metakg: each scorer at its default threshold (the default operating point) and at the threshold tuned on
the other half; beside each resolver, metakg's cascade at its best recall among thresholds at least as
precise as that resolver (one curve's point against another's, at equal precision).

neo4j-graphrag (1.x): its own resolver classes, run on a real Neo4j (the project's launcher, APOC included) over
the same held-out rows, each at its default threshold: ``SinglePropertyExactMatchResolver`` (equal names),
``FuzzyMatchResolver`` (RapidFuzz WRatio >= 0.8) and ``SpaCySemanticMatchResolver`` (cosine >= 0.8). spaCy's
vector models are not on PyPI and cannot be fetched here, so the semantic resolver is given the same
all-MiniLM-L6-v2 vectors as metakg's embedding scorer (its ``nlp`` argument); its algorithm is its own. A pair
is called one entity when both names end up in one node after the resolver's merges; a mention is linked when
its node holds catalog names, right when they are all its entity's.

Biomappings is also resolved as one graph (one node per id, as in a KG, not two per row): metakg as
``resolve --names`` does it and each neo4j-graphrag resolver, scored by pairwise precision over every
merge whose truth is known (a labelled pair, or two ids of one identifier system, which name two entities)
and recall over the right pairs; beside them a resolver that merges everything, which per-row pair F1
would rank first when most labelled pairs are right.

Run: ``make bench`` or ``python -m benchmarks.bench_identity [--limit 600 --sets biomappings,drugbank]``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.common import fresh_server, record, settings_and_data
from metakg.config import ONE_PER_ENTITY
from metakg.identity.clusters import id_clusters, id_system, may_be_one
from metakg.identity.evaluate import (
    Gold,
    GoldFormat,
    GoldPairs,
    Scored,
    _point,
    evaluate_gold,
    half,
    read_gold,
)
from metakg.identity.evaluate import scored as score_rows
from metakg.identity.names import DEFAULT_LINKS, DEFAULT_THRESHOLDS, SCORERS, LinkRule, NameLink, Scorer, name_links
from metakg.llm.embedder import Embedder, OnnxEmbedder
from metakg.schemas.curie import normalise_curie
from metakg.schemas.vocabulary import default_vocabulary

#: name -> (format, file, second file) under er/
SETS: dict[str, tuple[GoldFormat, str, str | None]] = {
    "biomappings": ("sssom", "positive.sssom.tsv", "negative.sssom.tsv"),
    "mondo-doid": ("sssom-links", "mondo_exactmatch_doid.sssom.tsv", None),
    "mondo-mesh": ("sssom-links", "mondo_exactmatch_mesh.sssom.tsv", "meshdesc_wiki.json"),
    "bc5cdr": ("pubtator", "CDR_TestSet.PubTator.txt", "meshdesc_wiki.json"),
    "ncbi-disease": ("pubtator", "NCBItestset_corpus.txt", "meshdesc_wiki.json"),
    "drugbank": ("drugbank", "drugbank_vocabulary.csv", None),
    "kgtk-wikidata": ("kgtk", "labels.en.tsv.gz", "aliases.en.tsv.gz"),
    "phenotype": ("ssslm", "phenotype.ssslm.tsv.gz", None),
}
RESOLVERS = ("exact", "fuzzy", "semantic")
#: metakg's scorers run as resolvers over the pair set's graph
GRAPH_SCORERS: tuple[Scorer, ...] = ("exact", "fuzzy", "cascade")
#: biomappings, the set whose precision the target is on, is sampled wider than the link sets: 300 held-out
#: pairs put a 95% interval of about +-0.03 around a precision of 0.95, 3,000 about +-0.01
PAIRS_LIMIT = 6000


class _Doc:
    def __init__(self, vector: np.ndarray) -> None:
        self.vector = vector


class MiniLMAsSpacy:
    """What ``SpaCySemanticMatchResolver`` asks of a spaCy pipeline (``nlp(text).vector``), from MiniLM."""

    def __init__(self, embedder: Embedder, texts: list[str]) -> None:
        vectors = np.asarray(embedder.embed(texts), dtype=np.float64) if texts else np.zeros((0, 1))
        self._vectors = dict(zip(texts, vectors, strict=True))
        self._embedder = embedder

    def __call__(self, text: str) -> _Doc:
        if text not in self._vectors:
            self._vectors[text] = np.asarray(self._embedder.embed([text])[0], dtype=np.float64)
        return _Doc(self._vectors[text])


def held_out_nodes(gold: Gold) -> tuple[list[str], list[str], list[Any]]:
    """The held-out half as entity nodes: (marker, name) per node and what each row asks.

    Pairs: nodes ``L{i}`` and ``R{i}`` per held-out row; links: ``M{i}`` per held-out mention and ``C{j}`` per
    catalog name of the held-out mentions' catalog (the entities of those mentions and the others sampled)."""
    markers, names = [], []
    if isinstance(gold, GoldPairs):
        rows = [i for i, key in enumerate(gold.keys) if half(key) == 1]
        for i in rows:
            markers += [f"L{i}", f"R{i}"]
            names += [gold.left[i], gold.right[i]]
        return markers, names, rows
    rows = [i for i, g in enumerate(gold.gold) if half(g) == 1]
    for i in rows:
        markers.append(f"M{i}")
        names.append(gold.mentions[i])
    for j, name in enumerate(gold.catalog_names):
        markers.append(f"C{j}")
        names.append(name)
    return markers, names, rows


def run_resolver(driver: Any, which: str, markers: list[str], names: list[str], embedder: Embedder) -> dict[str, str]:
    """Load the nodes, run one neo4j-graphrag resolver, and return marker -> the node it ended in."""
    from neo4j_graphrag.components.resolver import (
        FuzzyMatchResolver,
        SinglePropertyExactMatchResolver,
        SpaCySemanticMatchResolver,
    )

    driver.execute_query("MATCH (n) DETACH DELETE n")
    rows = [{"m": m, "name": n} for m, n in zip(markers, names, strict=True)]
    for start in range(0, len(rows), 5000):
        driver.execute_query(
            "UNWIND $rows AS row CREATE (:Marker {m: row.m})-[:OF]->(:__Entity__:Thing {name: row.name})",
            rows=rows[start : start + 5000],
        )
    if which == "exact":
        resolver: Any = SinglePropertyExactMatchResolver(driver)
    elif which == "fuzzy":
        resolver = FuzzyMatchResolver(driver)
    else:
        resolver = SpaCySemanticMatchResolver(driver, nlp=MiniLMAsSpacy(embedder, sorted(set(names))))
    asyncio.run(resolver.run())
    found, _, _ = driver.execute_query("MATCH (m:Marker)-[:OF]->(e) RETURN m.m AS m, elementId(e) AS e")
    return {r["m"]: r["e"] for r in found}


def pair_graph(gold: GoldPairs) -> tuple[pl.DataFrame, list[tuple[str, str, bool]]]:
    """The held-out pairs as a graph: one node per distinct id (its first label, its namespace as its
    source, no type of its own) and the labelled id pairs (each once; a pair labelled both ways left out).
    This is what a resolver meets in a graph: a MeSH term mapped in three rows is one node, not three."""
    name_of: dict[str, str] = {}
    labelled: dict[tuple[str, str], set[bool]] = {}
    for i, key in enumerate(gold.keys):
        if half(key) != 1:
            continue
        a, b = (normalise_curie(x) or x for x in (gold.left_ids[i], gold.right_ids[i]))
        if a == b:
            continue
        name_of.setdefault(a, gold.left[i])
        name_of.setdefault(b, gold.right[i])
        labelled.setdefault((a, b) if a < b else (b, a), set()).add(gold.match[i])
    ids = sorted(name_of)
    nodes = pl.DataFrame(
        {
            "id": ids,
            "name": [name_of[x] for x in ids],
            "type": ["entity"] * len(ids),
            "source": [id_system(x) for x in ids],
            "xrefs": [[] for _ in ids],
            "aliases": [[] for _ in ids],
        },
        schema={
            "id": pl.String,
            "name": pl.String,
            "type": pl.String,
            "source": pl.String,
            "xrefs": pl.List(pl.String),
            "aliases": pl.List(pl.String),
        },
    )
    pairs = [(a, b, next(iter(seen))) for (a, b), seen in sorted(labelled.items()) if len(seen) == 1]
    return nodes, pairs


def metakg_resolver(
    nodes: pl.DataFrame, scorer: Scorer, embedder: Embedder, threshold: float | None = None
) -> dict[str, str]:
    """What ``metakg resolve --names SCORER`` does to these nodes, at ``threshold`` (the scorer's default when
    None): node id -> the cluster it ends in (name links between sources and compatible types, then identity
    clusters: one id per system, at most 25 nodes, types on one is-a chain)."""
    cut = DEFAULT_THRESHOLDS[scorer] if threshold is None else threshold
    return clusters_of(nodes, typed_links(nodes, scorer, cut, embedder))


def typed_links(nodes: pl.DataFrame, scorer: Scorer, threshold: float, embedder: Embedder) -> list[NameLink]:
    """The name links ``resolve --names`` makes among ``nodes`` at ``threshold``."""
    return name_links(nodes, may_be_one(nodes, default_vocabulary()), scorer, threshold, embedder=embedder)


def clusters_of(nodes: pl.DataFrame, links: list[NameLink]) -> dict[str, str]:
    """Node id -> its cluster once ``links`` are joined as ``resolve`` joins them."""
    found = id_clusters(nodes, default_vocabulary(), named=[(link.a, link.b) for link in links])
    node_of = {x: x for x in nodes["id"].to_list()}
    for cluster in found.mergeable:
        node_of.update({m: cluster.members[0] for m in cluster.members})
    return node_of


def score_graph(pairs: list[tuple[str, str, bool]], node_of: dict[str, str]) -> dict[str, Any]:
    """Pairwise precision, recall and F1 of a partition of the pair graph's nodes: a labelled pair in one node
    is a right or a wrong merge by its label; two ids of one system of ``ONE_PER_ENTITY`` in one node (two
    MeSH descriptors, two DOID diseases) are a wrong merge too, as each such system gives an entity one id,
    unless the right pairs themselves join them (the gold's own chains are not held against a resolver).
    Pairs of other ids that nobody labelled do not count."""
    gold_root: dict[str, str] = {}

    def find(x: str) -> str:
        gold_root.setdefault(x, x)
        while gold_root[x] != x:
            gold_root[x] = gold_root[gold_root[x]]
            x = gold_root[x]
        return x

    for a, b, match in pairs:
        if match:
            gold_root[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for node, group in node_of.items():
        groups.setdefault(group, []).append(node)
    unique = set(ONE_PER_ENTITY)
    same_system = 0
    for members in groups.values():
        by_system: dict[str, list[str]] = {}
        for m in members:
            if (system := id_system(m)) in unique:
                by_system.setdefault(system, []).append(m)
        for held in by_system.values():
            together = Counter(find(m) for m in held)
            same_system += len(held) * (len(held) - 1) // 2 - sum(n * (n - 1) // 2 for n in together.values())
    right = sum(1 for a, b, match in pairs if match and node_of[a] == node_of[b])
    wrong = sum(1 for a, b, match in pairs if not match and node_of[a] == node_of[b])
    point = _point(0.0, right + wrong + same_system, right, sum(1 for *_, match in pairs if match))
    found = asdict(point)
    labelled = _point(0.0, right + wrong, right, point.total)
    found.update(
        wrong_labelled=wrong,
        wrong_same_system=same_system,
        nodes_after=len(groups),
        labelled_only={"precision": labelled.precision, "recall": labelled.recall, "f1": labelled.f1},
    )
    return found


def compare_on_graph(gold: GoldPairs, driver: Any, embedder: Embedder) -> dict[str, Any]:
    """The held-out pairs as one graph (:func:`pair_graph`), resolved by metakg (as ``resolve --names``) and by
    each neo4j-graphrag resolver, scored by :func:`score_graph`; beside them, a resolver that merges
    everything (what pair F1 alone would reward when most labelled pairs are right)."""
    nodes, pairs = pair_graph(gold)
    ids, names = nodes["id"].to_list(), nodes["name"].to_list()
    positives = sum(1 for *_, match in pairs if match)
    print(
        f"  as one graph: {nodes.height:,} nodes (one per id), {len(pairs):,} labelled pairs "
        f"({positives:,} right); wrong merges also count two ids of one system in one node"
    )
    found: dict[str, Any] = {"nodes": nodes.height, "pairs": len(pairs), "right_pairs": positives}
    runs: list[tuple[str, Any]] = [
        (f"metakg {s}", lambda s=s: metakg_resolver(nodes, s, embedder)) for s in GRAPH_SCORERS
    ]
    if driver is not None:
        runs += [(f"neo4j-graphrag {w}", lambda w=w: run_resolver(driver, w, ids, names, embedder)) for w in RESOLVERS]
    runs.append(("merge everything", lambda: dict.fromkeys(ids, "all")))
    for label, run in runs:
        began = time.perf_counter()
        scored = score_graph(pairs, run())
        scored["seconds"] = round(time.perf_counter() - began, 1)
        found[label] = scored
        only = scored["labelled_only"]
        print(
            f"  {label:<26} {scored['precision']:6.3f} {scored['recall']:6.3f} {scored['f1']:6.3f}  "
            f"({scored['nodes_after']:,} nodes; wrong: {scored['wrong_labelled']:,} labelled, "
            f"{scored['wrong_same_system']:,} same-system; labelled pairs only: P {only['precision']:.3f} "
            f"F1 {only['f1']:.3f}; {scored['seconds']} s)"
        )
    return found


def at_equal_precision(curve: list[Any], precision: float) -> dict[str, Any] | None:
    """metakg's held-out point with the best recall among those at least as precise as ``precision`` (a
    resolver's), or None: the fair comparison of one point on a precision-recall curve with another."""
    reaching = [p for p in curve if p.predicted and p.precision >= precision]
    return asdict(max(reaching, key=lambda p: (p.recall, p.threshold))) if reaching else None


def score_resolver(gold: Gold, rows: list[int], node_of: dict[str, str]) -> dict[str, Any]:
    """Precision, recall and F1 of the merges a resolver made, on the held-out rows, and how many nodes the
    loaded ones became. Pairs also get the figures with metakg's type check applied to the resolver's
    merges (a pair whose ids' namespaces imply incompatible types not called): the resolver given the
    type knowledge metakg's scorers have, which its labels cannot express (a MeSH node fits any type)."""
    scored = _score(gold, rows, node_of)
    scored["nodes_after"] = len(set(node_of.values()))
    if isinstance(gold, GoldPairs):
        scored["with_types"] = _score(gold, rows, node_of, gold.kept_apart(default_vocabulary()))
    return scored


def _score(gold: Gold, rows: list[int], node_of: dict[str, str], apart: np.ndarray | None = None) -> dict[str, Any]:
    if isinstance(gold, GoldPairs):
        called = [i for i in rows if node_of[f"L{i}"] == node_of[f"R{i}"] and (apart is None or not apart[i])]
        right = sum(gold.match[i] for i in called)
        return asdict(_point(0.0, len(called), right, sum(gold.match[i] for i in rows)))
    entities_in: dict[str, set[str]] = {}
    for j, entity in enumerate(gold.catalog_ids):
        entities_in.setdefault(node_of[f"C{j}"], set()).add(entity)
    linked = [i for i in rows if entities_in.get(node_of[f"M{i}"])]
    right = sum(entities_in[node_of[f"M{i}"]] == {gold.gold[i]} for i in linked)
    return asdict(_point(0.0, len(linked), right, len(rows)))


#: the rule for the link defaults: at most this share of mentions whose entity is missing gets linked
UNLINKABLE_CAP = 0.125


def pick_link_rule(rows: list[Scored]) -> tuple[LinkRule, float, float]:
    """The link rule with the best mean F1 over the tuning halves of ``rows`` (one per link set) among those
    that link at most :data:`UNLINKABLE_CAP` of the mentions whose entity is missing (mean over the sets),
    ties to the higher threshold: how :data:`metakg.identity.names.DEFAULT_LINKS` was chosen. Returns the
    rule, its mean tuning F1 and its mean unlinkable share."""
    best: tuple[float, float, LinkRule, float] | None = None
    for threshold in (round(0.6 + i / 100, 2) for i in range(41)):
        for margin in (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1):
            f1s, missing = [], []
            for r in rows:
                tune = r.halves == 0
                called = r.calls(tune, threshold, margin)
                right = int((called & r.right).sum())
                f1s.append(_point(threshold, int(called.sum()), right, int(tune.sum())).f1)
                missing.append(r.unlinkable(tune, threshold, margin) or 0.0)
            if float(np.mean(missing)) <= UNLINKABLE_CAP:
                key = (float(np.mean(f1s)), threshold, LinkRule(threshold, margin), float(np.mean(missing)))
                if best is None or key[:2] > best[:2]:
                    best = key
    assert best is not None
    return best[2], round(best[0], 4), round(best[3], 4)


def check_link_defaults(link_rows: dict[str, dict[Scorer, Scored]]) -> dict[str, Any]:
    """Each scorer's link rule as the tuning halves pick it, beside the shipped default."""
    print(
        f"link defaults picked on the tuning halves of {len(link_rows)} link sets "
        f"(best mean F1, unlinkable <= {UNLINKABLE_CAP}):"
    )
    checked = {}
    for scorer in ("fuzzy", "embedding", "cascade"):
        rule, f1, missing = pick_link_rule([rows[scorer] for rows in link_rows.values()])
        shipped = DEFAULT_LINKS[scorer]  # type: ignore[index]
        same = rule == shipped
        print(
            f"  {scorer:<10} picked {rule.threshold:.2f} + margin {rule.margin:.2f} (mean F1 {f1:.3f}, unlinkable "
            f"{missing:.3f}); shipped {shipped.threshold:.2f} + {shipped.margin:.2f}{'' if same else '  <- differs'}"
        )
        checked[scorer] = {"picked": asdict(rule), "mean_f1": f1, "unlinkable": missing, "shipped": asdict(shipped)}
    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=600, help="Rows sampled per link set (both halves).")
    parser.add_argument(
        "--pairs-limit",
        type=int,
        default=PAIRS_LIMIT,
        help="Rows sampled from the pair set (biomappings, both halves).",
    )
    parser.add_argument("--sets", default=",".join(SETS), help="Comma-separated gold sets.")
    parser.add_argument("--no-neo4j", action="store_true", help="metakg's scorers only.")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated run still stops its Neo4j server
    settings, data = settings_and_data(" (the gold mappings are in its er/ folder)")
    er = Path(data) / "er"
    model = settings.embedder.model_dir
    if model is None:
        sys.exit("needs the ONNX embedding model (METAKG_EMBEDDER__MODEL_DIR)")
    embedder = OnnxEmbedder(Path(model))
    server = None if args.no_neo4j else fresh_server("identity", heap="2g", pagecache_mb=256)
    driver = None
    figures: dict[str, Any] = {
        "limit": args.limit,
        "pairs_limit": args.pairs_limit,
        "sets": {},
    }
    link_rows: dict[str, dict[Scorer, Scored]] = {}
    try:
        if server is not None:
            from metakg.config import Neo4jSettings
            from metakg.loaders.neo4j_store import connect

            driver = connect(Neo4jSettings(uri=server.uri))
        for name in args.sets.split(","):
            fmt, file, second = SETS[name]
            started = time.perf_counter()
            limit = args.pairs_limit if fmt == "sssom" else args.limit
            gold = read_gold(fmt, er / file, second=er / second if second else None, limit=limit)
            results = evaluate_gold(gold, SCORERS, embedder=embedder)
            entry: dict[str, Any] = {
                "kind": "pairs" if isinstance(gold, GoldPairs) else "links",
                "rows": len(gold.left) if isinstance(gold, GoldPairs) else len(gold.mentions),
                "negatives": isinstance(gold, GoldPairs) and not all(gold.match),
                "metakg": {
                    r.scorer: {
                        "default_threshold": r.at_default.threshold,
                        "margin": r.margin,
                        "at_default": asdict(r.at_default),
                        "tuned_threshold": r.threshold,
                        "tuned": asdict(r.held_out),
                    }
                    for r in results
                },
                "neo4j_graphrag": {},
            }
            print(f"{name}: {entry['rows']:,} {entry['kind']} sampled, figures on the held-out half")
            print(f"  {'':<26} {'P':>6} {'R':>6} {'F1':>6}   (unlinkable: linked were the entity missing)")
            for r in results:
                p = r.at_default
                label = f"metakg {r.scorer} @{p.threshold:.2f}" + (f"+{r.margin:.2f}" if r.margin else "")
                extra = f"   {p.unlinkable:.3f}" if p.unlinkable is not None else ""
                print(f"  {label:<26} {p.precision:6.3f} {p.recall:6.3f} {p.f1:6.3f}{extra}")
            if not isinstance(gold, GoldPairs):
                link_rows[name] = {s: score_rows(gold, s, embedder) for s in ("fuzzy", "embedding", "cascade")}
            if driver is not None:
                markers, names, rows = held_out_nodes(gold)
                for which in RESOLVERS:
                    began = time.perf_counter()
                    node_of = run_resolver(driver, which, markers, names, embedder)
                    scored = score_resolver(gold, rows, node_of)
                    scored["seconds"] = round(time.perf_counter() - began, 1)
                    cascade = next(r for r in results if r.scorer == "cascade")
                    scored["metakg_cascade_at_equal_precision"] = same = at_equal_precision(
                        cascade.curve, scored["precision"]
                    )
                    entry["neo4j_graphrag"][which] = scored
                    beside = (
                        f"; metakg cascade as precise: P {same['precision']:.3f} R {same['recall']:.3f} "
                        f"F1 {same['f1']:.3f} @{same['threshold']:.2f}"
                        if same
                        else ""
                    )
                    print(
                        f"  {'neo4j-graphrag ' + which:<26} {scored['precision']:6.3f} {scored['recall']:6.3f} "
                        f"{scored['f1']:6.3f}  ({scored['seconds']} s, {len(markers):,} nodes -> "
                        f"{scored['nodes_after']:,}{beside})"
                    )
                    if "with_types" in scored:
                        typed = scored["with_types"]
                        print(
                            f"  {'  + metakg type check':<26} {typed['precision']:6.3f} {typed['recall']:6.3f} "
                            f"{typed['f1']:6.3f}"
                        )
            if isinstance(gold, GoldPairs) and gold.left_ids:
                entry["graph"] = compare_on_graph(gold, driver, embedder)
            entry["seconds"] = round(time.perf_counter() - started, 1)
            figures["sets"][name] = entry
        if len(link_rows) > 1:
            figures["link_defaults"] = check_link_defaults(link_rows)
    finally:
        if driver is not None:
            driver.close()
        if server is not None:
            from tools import neo4j_server

            neo4j_server.stop(server)
    record("identity", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
