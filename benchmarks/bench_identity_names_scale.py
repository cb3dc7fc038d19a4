"""`metakg resolve --names` at PrimeKG scale, on real names.

The synthetic PrimeKG of ``bench_primekg_scale`` names its nodes "SYNTHETIC anatomy 9319": a name scorer
would be timed on names it must confuse. Here its nodes take real names instead: the terms of the public
disease and phenotype synonym table (``er/phenotype.ssslm.tsv.gz``: a term, its id and its synonyms), then
DrugBank's drug names, then Wikidata labels (KGTK) when more are needed. The Wikidata-shaped bundle has
``--items`` items sharing no identifier with PrimeKG, of three kinds:

- *variants*: a PrimeKG node's name written otherwise (case, a trailing blank): every name scorer must join
  the item to that node;
- *synonyms*: another name of a PrimeKG node's term from the same table ("hemangiosarcoma" for
  "angiosarcoma"): what a fuzzy or embedding scorer may find;
- *others*: real names no PrimeKG node was given (the table's terms left over, then Wikidata labels).

``metakg resolve --names SCORER`` runs in its own process (wall time and peak memory its own). The check is
independent of the scorer's code: with ``exact`` and ``lemma`` every variant item must end in its node's
cluster (recall 1.0 on the planted pairs; a fuzzy scorer may lose one to a close name of a type that
cannot be one entity with it, which refuses the whole cluster); the benchmark also reports the share of
synonym items joined to their own node and the items joined to another node than the one planted (a
wrong join, or a real name two terms share).

Run: ``make bench`` or ``python -m benchmarks.bench_identity_names_scale [--scorer exact --items 100000]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.bench_identity_scale import random_edges
from benchmarks.bench_primekg_scale import bundle_path
from benchmarks.common import WORK, record, run_measured, settings_and_data
from metakg.identity.names import keys_of
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from metakg.schemas.tables import conform_edges, conform_nodes

ROOT = Path(__file__).resolve().parents[1]
SHARES = {"variants": 0.2, "synonyms": 0.2}  # the rest of the items are other names


def name_pools(er: Path) -> tuple[pl.DataFrame, list[str]]:
    """The terms with their synonyms (``term``, ``name``, ``synonyms``), and further real names; every name
    of either has a match key of its own (two names one key apart would be one name to every scorer)."""
    table = pl.read_csv(
        er / "phenotype.ssslm.tsv.gz", separator="\t", columns=["text", "curie", "name"], quote_char=None
    ).drop_nulls()
    terms = (
        table.group_by("curie", maintain_order=True)
        .agg(pl.col("name").first(), pl.col("text").unique(maintain_order=True).alias("synonyms"))
        .with_columns(pl.col("synonyms").list.set_difference(pl.concat_list("name")))
        .rename({"curie": "term"})
    )
    terms = (
        terms.with_columns(pl.Series("key", keys_of(terms["name"].to_list())))
        .filter(pl.col("key") != "")
        .unique("key", keep="first", maintain_order=True)
    )
    # a synonym written as a term's name in another case (its own, or another term's) is not a synonym here
    synonyms = terms.select("term", "synonyms").explode("synonyms").drop_nulls("synonyms")
    synonym_keys = pl.Series(keys_of(synonyms["synonyms"].to_list()))
    synonyms = synonyms.filter(~synonym_keys.is_in(terms["key"].implode()))
    terms = (
        terms.drop("synonyms", "key")
        .join(synonyms.group_by("term").agg("synonyms"), on="term", how="left", maintain_order="left")
        .with_columns(pl.col("synonyms").fill_null(pl.lit([], dtype=pl.List(pl.String))))
    )
    drugs = pl.read_csv(er / "drugbank_vocabulary.csv", columns=["Common name", "Synonyms"])
    kgtk = [
        pl.read_csv(er / f, separator="\t", columns=["node2"], quote_char=None)["node2"].str.replace(
            r"^'(.*)'@en$", "${1}"
        )
        for f in ("labels.en.tsv.gz", "aliases.en.tsv.gz")
    ]
    candidates = [
        *drugs["Common name"].drop_nulls().to_list(),
        *kgtk[0].drop_nulls().to_list(),
        *table["text"].to_list(),
        *drugs["Synonyms"].drop_nulls().str.split(" | ").explode().to_list(),
        *kgtk[1].drop_nulls().to_list(),
    ]
    seen = set(keys_of(terms["name"].to_list())) | set(keys_of(terms["synonyms"].explode().drop_nulls().to_list()))
    more = []
    for name, key in zip(candidates, keys_of(candidates), strict=True):
        if key and key not in seen:
            seen.add(key)
            more.append(name)
    return terms, more


def named_bundles(primekg: Path, out: Path, items: int, seed: int = 11) -> dict[str, object]:
    """Write ``out/primekg`` (the synthetic PrimeKG with real names) and ``out/wikidata``; return the planted
    pairs (item -> node) of each kind."""
    settings, data_dir = settings_and_data(" for the name tables")
    del settings
    terms, more = name_pools(data_dir / "er")
    nodes = pl.read_parquet(primekg / "nodes.parquet")
    rng = np.random.default_rng(seed)
    # the nodes take the terms' names first (a random order), then the other names; a name is used once
    order = rng.permutation(nodes.height)
    given_terms = min(terms.height, nodes.height)
    names = terms["name"].to_list()[:given_terms] + more[: nodes.height - given_terms]
    if len(names) < nodes.height:
        sys.exit(f"only {len(names):,} real names for {nodes.height:,} nodes")
    renamed = nodes.with_columns(pl.Series("name", [names[i] for i in np.argsort(order)]))
    primekg_named = out / "primekg"
    write_bundle(primekg_named, Bundle(conform_nodes(renamed), read_bundle(primekg).edges))
    # nodes holding a term (with synonyms) and the rest, by row
    node_of_term = {int(order[i]): i for i in range(given_terms)}  # node row -> term row
    with_synonyms = [r for r, t in node_of_term.items() if len(terms["synonyms"][t]) > 0]
    n_variants, n_synonyms = int(items * SHARES["variants"]), int(items * SHARES["synonyms"])
    variant_rows = rng.choice(nodes.height, size=n_variants, replace=False)
    synonym_rows = rng.choice(with_synonyms, size=min(n_synonyms, len(with_synonyms)), replace=False)
    node_ids, node_names, node_types = (renamed[c].to_list() for c in ("id", "name", "type"))
    rows: list[dict[str, object]] = []
    chosen = [node_names[r] for r in variant_rows]
    upper = [n.upper() for n in chosen]
    # upper case where it keeps the key (it does not for "ß", which becomes "SS"), else a trailing blank
    keeps = [a == b for a, b in zip(keys_of(chosen), keys_of(upper), strict=True)]
    for r, name, big, same in zip(variant_rows, chosen, upper, keeps, strict=True):
        written = big if same and rng.random() < 0.5 else f"{name} "
        rows.append({"name": written, "type": node_types[r], "kind": "variants", "planted": node_ids[r]})
    for r in synonym_rows:
        synonyms = terms["synonyms"][node_of_term[int(r)]].to_list()
        rows.append(
            {"name": synonyms[int(rng.integers(len(synonyms)))], "type": node_types[r], "kind": "synonyms",
             "planted": node_ids[r]}
        )  # fmt: skip
    leftover = terms["name"].to_list()[given_terms:] + more[nodes.height - given_terms :]
    for name in leftover[: items - len(rows)]:
        rows.append({"name": name, "type": "entity", "kind": "others", "planted": None})
    planted = pl.DataFrame(rows).with_columns(pl.Series("id", [f"wd:Q{2_000_000 + i}" for i in range(len(rows))]))
    frame = planted.select("id", "name", "type", pl.lit("wikidata").alias("source"))
    edges = random_edges(planted["id"].to_list(), rng)
    write_bundle(out / "wikidata", Bundle(conform_nodes(frame), conform_edges(edges)))
    return {"planted": planted, "primekg": primekg_named, "wikidata": out / "wikidata"}


def joined(resolved: Path, planted: pl.DataFrame) -> dict[str, float | int]:
    """Per kind of item: how many ended in the cluster of the node planted for it, and in another one."""
    decisions = pl.read_parquet(resolved / "identity.parquet", columns=["node", "canonical"])
    canonical = decisions.filter(pl.col("canonical").is_not_null())
    of = dict(zip(canonical["node"].to_list(), canonical["canonical"].to_list(), strict=True))
    figures: dict[str, float | int] = {}
    for kind in ("variants", "synonyms", "others"):
        part = planted.filter(pl.col("kind") == kind)
        right = wrong = 0
        for item, node in zip(part["id"].to_list(), part["planted"].to_list(), strict=True):
            cluster = of.get(item)
            if cluster is None:
                continue
            if node is not None and of.get(node) == cluster:
                right += 1
            else:
                wrong += 1
        figures[f"{kind}_items"] = part.height
        figures[f"{kind}_joined_to_planted"] = right
        figures[f"{kind}_joined_elsewhere"] = wrong
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="Size of the synthetic PrimeKG.")
    parser.add_argument("--items", type=int, default=100_000, help="Items of the Wikidata-shaped bundle.")
    parser.add_argument("--scorer", action="append", help="Name scorers to run (repeatable; default exact, fuzzy).")
    args = parser.parse_args()
    work = WORK / f"identity_names_{args.scale}_{args.items}"
    made = named_bundles(bundle_path(args.scale), work, args.items)
    planted: pl.DataFrame = made["planted"]  # type: ignore[assignment]
    metakg = str(Path(sys.executable).with_name("metakg"))
    p_nodes = pl.scan_parquet(Path(str(made["primekg"])) / "nodes.parquet").select(pl.len()).collect().item()
    p_edges = pl.scan_parquet(Path(str(made["primekg"])) / "edges.parquet").select(pl.len()).collect().item()
    figures: dict[str, object] = {"primekg_nodes": p_nodes, "primekg_edges": p_edges, "wikidata_items": planted.height}
    for scorer in args.scorer or ["exact", "fuzzy"]:
        out = work / f"resolved_{scorer}"
        command = [metakg, "resolve", str(made["primekg"]), str(made["wikidata"]), "-o", str(out), "--names",
                   scorer, "--json"]  # fmt: skip
        done = run_measured(command, cwd=ROOT)
        wall, peak = done.seconds, done.peak_mib
        report = json.loads(done.stdout.strip().splitlines()[-1])
        found = joined(out, planted)
        figures[scorer] = {
            "resolve_s": round(wall, 1),
            "peak_rss_mib": round(peak),
            "joined_by_name": report["joined_by_name"],
            "clusters": report["clusters"],
            **found,
        }
        print(
            f"resolve --names {scorer}: {p_nodes:,} PrimeKG nodes / {p_edges:,} edges with {planted.height:,} "
            f"items, {wall:.1f} s, peak {peak:,.0f} MiB; {report['joined_by_name']:,} nodes joined by name"
        )
        for kind in ("variants", "synonyms", "others"):
            print(
                f"  {kind}: {found[f'{kind}_joined_to_planted']:,} of {found[f'{kind}_items']:,} joined to their "
                f"node, {found[f'{kind}_joined_elsewhere']:,} to another"
            )
        if scorer in ("exact", "lemma"):  # a variant has the node's very key: these scorers cannot miss it
            assert found["variants_joined_to_planted"] == found["variants_items"], "a planted name variant was missed"
        # after each scorer: a long run keeps what it measured
        record("identity_names_scale", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
