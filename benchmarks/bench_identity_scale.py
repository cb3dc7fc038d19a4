"""`metakg resolve` at PrimeKG scale: a full-scale synthetic PrimeKG with a 100k-item Wikidata-shaped bundle.

The PrimeKG bundle is the one ``bench_primekg_scale`` makes (the published counts: about 129k nodes and 4M
edges). The Wikidata-shaped bundle has ``--items`` items (``wd:Q...``) and twice as many edges among them;
``--shared`` of the items carry the id of a PrimeKG node as an xref, in another written form (``MONDO:``,
upper case, an OBO PURL) as Wikidata's external ids do, a few of them the same node as another item, and
one in 200 with a type that cannot be its node's (to be refused). ``metakg resolve`` runs in its own
process (wall time and peak memory are its own), by identifiers only; the figures are checked against an
independent count: the clusters must be the PrimeKG nodes the items point at (each with its first item; a
node's later items are kept apart, one entity having one Wikidata item), and the refused ones the mistyped.

Run: ``make bench`` or ``python -m benchmarks.bench_identity_scale [--scale 1.0 --items 100000]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.bench_primekg_scale import bundle_path
from benchmarks.common import WORK, record, run_measured
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from metakg.schemas.tables import conform_edges, conform_nodes

ROOT = Path(__file__).resolve().parents[1]

#: how Wikidata writes another source's id (P486 MeSH, P5270 MONDO ...): the prefix in its own case
WRITTEN = {"mondo": "MONDO:", "drugbank": "DrugBank:", "ncbigene": "NCBIGene:", "hp": "HP:", "go": "GO:"}


def random_edges(ids: list[str], rng: np.random.Generator) -> pl.DataFrame:
    """About twice as many ``related_to`` edges as ``ids``, between random pairs of them (no loops)."""
    src, dst = rng.integers(0, len(ids), size=2 * len(ids)), rng.integers(0, len(ids), size=2 * len(ids))
    keep = src != dst
    return pl.DataFrame(
        {
            "src": [ids[i] for i in src[keep]],
            "rel": "related_to",
            "dst": [ids[i] for i in dst[keep]],
            "source": "wikidata",
            "confidence": 1.0,
            "record_ids": [[f"wikidata:{i}"] for i in range(int(keep.sum()))],
        }
    )


def wikidata_bundle(primekg: Path, out: Path, items: int, shared: float, seed: int = 7) -> dict[str, int]:
    """Write the Wikidata-shaped bundle and return what resolving it with ``primekg`` must give."""
    nodes = pl.read_parquet(primekg / "nodes.parquet", columns=["id", "type"])
    rng = np.random.default_rng(seed)
    n_shared = int(items * shared)
    targets = rng.integers(0, nodes.height, size=n_shared)  # repeats: two items of one node
    target_ids = nodes["id"].gather(targets).to_list()
    target_types = nodes["type"].gather(targets).to_list()
    mistyped = rng.random(n_shared) < 0.005

    def written(curie: str) -> str:
        prefix, local = curie.split(":", 1)
        return WRITTEN.get(prefix, prefix.upper() + ":") + local

    xrefs = [[written(t)] for t in target_ids] + [[] for _ in range(items - n_shared)]
    types = [
        ("drug" if kind != "drug" else "disease") if bad else kind
        for kind, bad in zip(target_types, mistyped, strict=True)
    ] + ["entity"] * (items - n_shared)
    ids = [f"wd:Q{1_000_000 + i}" for i in range(items)]
    frame = pl.DataFrame(
        {
            "id": ids,
            "name": [f"item {i}" for i in range(items)],
            "type": types,
            "source": "wikidata",
            "xrefs": xrefs,
        },
        schema_overrides={"xrefs": pl.List(pl.String)},
    )
    write_bundle(out, Bundle(conform_nodes(frame), conform_edges(random_edges(ids, rng))))
    # the independent count: a PrimeKG node pointed at by items none of which is mistyped is one cluster
    # and the second and later items of such a node are kept apart (one entity has one Wikidata item)
    pointed = pl.DataFrame({"node": target_ids, "bad": mistyped})
    by_node = pointed.group_by("node").agg(pl.col("bad").any(), pl.len().alias("items"))
    good = by_node.filter(~pl.col("bad"))
    return {
        "clusters": good.height,
        "refused": int(by_node["bad"].sum()),
        "kept_apart": int((good["items"] - 1).sum()),
        "items_shared": n_shared,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="Size of the synthetic PrimeKG.")
    parser.add_argument("--items", type=int, default=100_000, help="Items of the Wikidata-shaped bundle.")
    parser.add_argument("--shared", type=float, default=0.6, help="Share of items holding a PrimeKG id.")
    args = parser.parse_args()
    primekg = bundle_path(args.scale)
    wikidata = WORK / f"identity_wikidata_{args.items}"
    expected = wikidata_bundle(primekg, wikidata, args.items, args.shared)
    out = WORK / "identity_resolved"
    metakg = str(Path(sys.executable).with_name("metakg"))
    done = run_measured([metakg, "resolve", str(primekg), str(wikidata), "-o", str(out), "--json"], cwd=ROOT)
    wall, peak_mib = done.seconds, done.peak_mib
    report = json.loads(done.stdout.strip().splitlines()[-1])
    p_nodes = pl.scan_parquet(primekg / "nodes.parquet").select(pl.len()).collect().item()
    p_edges = pl.scan_parquet(primekg / "edges.parquet").select(pl.len()).collect().item()
    resolved = read_bundle(out)
    figures = {
        "primekg_nodes": p_nodes,
        "primekg_edges": p_edges,
        "wikidata_items": args.items,
        "wikidata_edges": report["edges"] - p_edges,
        "resolve_s": round(wall, 1),
        "resolve_peak_rss_mib": round(peak_mib),
        "clusters": report["clusters"],
        "clusters_expected": expected["clusters"],
        "refused": report["refused"],
        "refused_expected": expected["refused"],
        "kept_apart": report["kept_apart"],
        "kept_apart_expected": expected["kept_apart"],
        "nodes_after": report["nodes"],
        "edges_after": report["edges"],
    }
    print(
        f"resolve {p_nodes:,} PrimeKG nodes / {p_edges:,} edges with {args.items:,} Wikidata-shaped items: "
        f"{wall:.1f} s, peak {peak_mib:,.0f} MiB"
    )
    print(
        f"  clusters {report['clusters']:,} (independent count {expected['clusters']:,}), refused "
        f"{report['refused']:,} (expected {expected['refused']:,}), kept apart {report['kept_apart']:,} (expected "
        f"{expected['kept_apart']:,}), nodes after {report['nodes']:,}"
    )
    assert report["clusters"] == expected["clusters"], "the clusters differ from the independent count"
    assert report["refused"] == expected["refused"], "the refused clusters differ from the mistyped items"
    assert report["kept_apart"] == expected["kept_apart"], "the items kept apart differ from the second items"
    assert resolved.edges.height == report["edges"]
    record("identity_scale", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
