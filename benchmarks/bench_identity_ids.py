"""Identity by identifiers on real mappings, scored against an independent gold.

Two bundles are made from real public files of the shared data directory's ``er/`` (read in place, never
copied): a MONDO bundle, one disease node per MONDO id whose xrefs are MONDO's curated exact matches to DOID
and MeSH, and a Wikidata bundle, one item per QID whose xrefs are Wikidata's own DOID (P699) and MeSH (P486)
statements, as Wikidata writes them (``DOID:...``, a bare MeSH descriptor id read as ``MESH:...``). ``metakg
resolve`` joins them by identifiers alone. The gold is independent of both: the ClinGen Wikidata bot's own
lookups of MONDO ids on live Wikidata (230 MONDO -> QID pairs), with every other pairing of a gold MONDO id
and a gold QID as a wrong pair (the lookups are one to one), scored by ``metakg identity eval --bundle``.

Three runs, side by side: the DOID statements alone, the MeSH statements alone, and both. Each reports the
clusters, the refused clusters, and precision, recall and F1 over the gold pairs the graph covers.

Run: ``make bench`` or ``python -m benchmarks.bench_identity_ids``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

from benchmarks.common import WORK, record, settings_and_data
from metakg.schemas.bundle import Bundle, write_bundle
from metakg.schemas.tables import conform_nodes, empty_edges

ROOT = Path(__file__).resolve().parents[1]
WIKIDATA = "http://www.wikidata.org/entity/"
#: run -> (the mappings used, whether a cluster may hold two ids of one system)
RUNS = {
    "doid": (("doid",), True),
    "mesh": (("mesh",), True),
    "both": (("doid", "mesh"), True),
    "both, unchecked": (("doid", "mesh"), False),
}


def mondo_nodes(er: Path, via: tuple[str, ...]) -> pl.DataFrame:
    """One disease node per MONDO id, its xrefs its exact matches to the sources in ``via``."""
    files = {"doid": "mondo_exactmatch_doid.sssom.tsv", "mesh": "mondo_exactmatch_mesh.sssom.tsv"}
    rows = pl.concat(
        pl.read_csv(er / files[v], separator="\t", comment_prefix="#", infer_schema_length=0).select(
            "subject_id", "subject_label", "object_id"
        )
        for v in via
    )
    nodes = rows.group_by("subject_id", maintain_order=True).agg(
        pl.col("subject_label").first().alias("name"), pl.col("object_id").unique().sort().alias("xrefs")
    )
    return nodes.select(
        pl.col("subject_id").alias("id"),
        "name",
        pl.lit("disease").alias("type"),
        pl.lit("mondo").alias("source"),
        "xrefs",
    )


def wikidata_nodes(er: Path, via: tuple[str, ...]) -> pl.DataFrame:
    """One item per QID, its xrefs its DOID and MeSH statements (as ``via`` says); an item with a DOID
    statement is a disease, the others (MeSH descriptors name drugs, anatomy, organisms...) are untyped."""
    parts = []
    if "doid" in via:
        parts.append(pl.read_csv(er / "wikidata_DOID.csv", infer_schema_length=0).select("entity", xref=pl.col("DOID")))
    if "mesh" in via:
        mesh = pl.read_csv(er / "wikidata_MeSH_ID.csv", infer_schema_length=0)
        parts.append(mesh.select("entity", xref="MESH:" + pl.col("MeSH_ID")))
    rows = pl.concat(parts).with_columns(qid=pl.col("entity").str.replace(WIKIDATA, "", literal=True))
    items = rows.group_by("qid", maintain_order=True).agg(pl.col("xref").unique().sort().alias("xrefs"))
    return items.select(
        ("wd:" + pl.col("qid")).alias("id"),
        pl.col("qid").alias("name"),
        pl.when(pl.col("xrefs").list.eval(pl.element().str.starts_with("DOID:")).list.any())
        .then(pl.lit("disease"))
        .otherwise(pl.lit("entity"))
        .alias("type"),
        pl.lit("wikidata").alias("source"),
        "xrefs",
    )


def clingen_gold(er: Path, out: Path) -> tuple[Path, int]:
    """The ClinGen bot's MONDO -> QID lookups as an id-pair table (``true``), with every other pairing of a
    gold MONDO id and a gold QID (``false``); returns the file and the number of right pairs."""
    table = pl.read_csv(er / "ClinGenBot_Status-Output_2019-11-06.csv", infer_schema_length=0)
    pairs = (
        table.select(
            mondo=pl.col("MONDO Disease ID").str.replace("_", ":", literal=True),
            qid=pl.col("Disease QID"),
        )
        .filter(pl.col("qid").str.starts_with("Q") & pl.col("mondo").str.starts_with("MONDO:"))
        .unique()
    )
    # a MONDO id or a QID looked up twice with two answers is no one-to-one gold: both pairs are left out
    pairs = pairs.filter(pl.col("mondo").is_unique() & pl.col("qid").is_unique())
    crossed = pairs.select("mondo").join(pairs.select("qid"), how="cross")
    right = set(zip(pairs["mondo"].to_list(), pairs["qid"].to_list(), strict=True))
    rows = [(m, "wd:" + q, "true" if (m, q) in right else "false") for m, q in crossed.iter_rows()]
    path = out / "clingen_mondo_wikidata.csv"
    out.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows, schema=["mondo", "wikidata", "same"], orient="row").write_csv(path)
    return path, len(right)


def same_source_twice(resolved: Path) -> dict[str, int]:
    """Clusters of the resolved bundle's decision table that hold two MONDO ids, or two Wikidata items: the
    joins a one-to-one gold cannot see, to be read by hand."""
    decisions = pl.read_parquet(resolved / "identity.parquet", columns=["cluster", "node", "canonical"])
    counted = (
        decisions.filter(pl.col("canonical").is_not_null())
        .group_by("cluster")
        .agg(
            mondo=pl.col("node").str.to_lowercase().str.starts_with("mondo:").sum(),
            items=pl.col("node").str.starts_with("wd:").sum(),
        )
    )
    return {
        "two_mondo": int((counted["mondo"] >= 2).sum()),
        "two_items": int((counted["items"] >= 2).sum()),
    }


def run_metakg(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    metakg = str(Path(sys.executable).with_name("metakg"))
    done = subprocess.run([metakg, *args, "--json"], capture_output=True, text=True, cwd=ROOT, check=False, env=env)
    if done.returncode != 0:
        sys.exit(f"metakg {args[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    _settings, data = settings_and_data(" (the mappings are in its er/ folder)")
    er = Path(data) / "er"
    work = WORK / "identity_ids"
    gold, right = clingen_gold(er, work)
    print(f"gold: {right} ClinGen MONDO -> Wikidata lookups (one to one), every other pairing a wrong pair")
    figures: dict[str, Any] = {"gold_pairs": right, "runs": {}}
    for name, (via, checked) in RUNS.items():
        mondo, wikidata = mondo_nodes(er, via), wikidata_nodes(er, via)
        env = {**os.environ, **({} if checked else {"METAKG_IDENTITY__ONE_PER_ENTITY": "[]"})}
        name = name.replace(", ", "_")
        for label, nodes in (("mondo", mondo), ("wikidata", wikidata)):
            write_bundle(work / f"{name}_{label}", Bundle(conform_nodes(nodes), empty_edges()))
        started = time.perf_counter()
        resolved = run_metakg(
            "resolve",
            str(work / f"{name}_mondo"),
            str(work / f"{name}_wikidata"),
            "-o",
            str(work / f"{name}_out"),
            env=env,
        )
        seconds = time.perf_counter() - started
        scored = run_metakg(
            "identity", "eval", str(gold), "-o", str(work / f"{name}_eval"), "--bundle", str(work / f"{name}_out")
        )
        twice = same_source_twice(work / f"{name}_out")
        figures["runs"][name] = {
            **twice,
            "mondo_nodes": mondo.height,
            "wikidata_items": wikidata.height,
            "clusters": resolved["clusters"],
            "refused": resolved["refused"],
            "kept_apart": resolved["kept_apart"],
            "nodes_after": resolved["nodes"],
            "resolve_s": round(seconds, 1),
            **{k: scored[k] for k in ("covered", "precision", "recall", "f1", "called", "right", "positives")},
            "wrong_examples": scored["wrong_examples"][:5],
            "missed_examples": scored["missed_examples"][:5],
        }
        print(
            f"{name}: {mondo.height:,} MONDO nodes + {wikidata.height:,} items -> {resolved['clusters']:,} clusters "
            f"({resolved['refused']:,} refused, {resolved['kept_apart']:,} nodes kept apart), {seconds:.1f} s"
        )
        print(
            f"  gold: {scored['positives']} of {right} right pairs covered: P {scored['precision']:.3f} "
            f"R {scored['recall']:.3f} F1 {scored['f1']:.3f}; clusters holding two MONDO ids: {twice['two_mondo']:,}, "
            f"two Wikidata items: {twice['two_items']:,}"
        )
    record("identity_ids", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
