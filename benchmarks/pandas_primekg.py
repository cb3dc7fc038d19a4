"""A plain pandas implementation of the PrimeKG -> bundle transform, the baseline of bench_primekg.

Same work as metakg.ingest.primekg + row validation + Parquet writing: text columns, CURIE ids with
zero padding, type mapping, row checks, mirrored and duplicate rows collapsed, nodes deduplicated (other
names of an id kept as aliases, every index as an xref), edge
ids hashed, endpoints checked. Written the way a pandas user would, without tricks.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from metakg.ingest.hygiene import CONTROL
from metakg.ingest.primekg import KG_COLUMNS, SOURCE_PREFIXES, TEXT_COLUMNS
from metakg.schemas.vocabulary import default_vocabulary


def curie(source: pd.Series, local: pd.Series) -> pd.Series:
    prefix = source.map({k: v[0] for k, v in SOURCE_PREFIXES.items()})
    width = source.map({k: v[1] for k, v in SOURCE_PREFIXES.items()}).fillna(0)
    local = local.str.strip()
    padded = local.where(~((width > 0) & local.str.fullmatch(r"\d+").fillna(False)), local.str.zfill(7))
    return prefix + ":" + padded


def transform(path: Path, out: Path) -> tuple[int, int, int]:
    df = pd.read_csv(path, dtype=str)
    types = {k.replace(" ", "_"): v for k, v in default_vocabulary().primekg.items()}
    df["_x"] = curie(df["x_source"], df["x_id"])
    df["_y"] = curie(df["y_source"], df["y_id"])
    df["_xt"] = df["x_type"].str.strip().str.replace(" ", "_").map(types)
    df["_yt"] = df["y_type"].str.strip().str.replace(" ", "_").map(types)
    df["_rel"] = (
        df["relation"]
        .str.lower()
        .str.replace(r"[^\w]+", "_", regex=True)
        .str.replace(r"_+", "_", regex=True)
        .str.strip("_")
    )
    bad = (
        df[KG_COLUMNS].isna().any(axis=1)
        | ~df["x_index"].str.fullmatch(r"\d+").fillna(False)
        | ~df["y_index"].str.fullmatch(r"\d+").fillna(False)
        | df["_x"].isna() | df["_y"].isna() | df["_xt"].isna() | df["_yt"].isna() | (df["_rel"] == "")
    )  # fmt: skip
    for column in TEXT_COLUMNS:  # control characters and overlong ids, names and relations
        text = df[column].fillna("")
        bad |= text.str.contains(CONTROL, regex=True) | (text.str.len() > 1000)
    rejects = df[bad]
    good = df[~bad].copy()
    good["_row"] = np.arange(len(good))
    x = good[["_x", "x_name", "_xt", "x_index", "_row"]].set_axis(["id", "name", "type", "index", "_row"], axis=1)
    y = good[["_y", "y_name", "_yt", "y_index", "_row"]].set_axis(["id", "name", "type", "index", "_row"], axis=1)
    # one node per id as its first row has it; an id named or indexed another way elsewhere keeps those too
    forms = pd.concat([x, y]).drop_duplicates(["id", "name", "type", "index"]).sort_values("_row", kind="stable")
    nodes = (
        forms.groupby("id", sort=False)
        .agg(
            name=("name", "first"),
            type=("type", "first"),
            aliases=("name", lambda s: list(dict.fromkeys(s))[1:]),
            xrefs=("index", lambda s: ["primekg.index:" + i for i in dict.fromkeys(s)]),
        )
        .reset_index()
    )
    nodes["source"] = "primekg"
    nodes = nodes[["id", "name", "type", "source", "aliases", "xrefs"]]
    good["src"] = np.where(good["_x"] <= good["_y"], good["_x"], good["_y"])
    good["dst"] = np.where(good["_x"] <= good["_y"], good["_y"], good["_x"])
    edges = (
        good.groupby(["src", "_rel", "dst"], sort=False)
        .agg(display=("display_relation", "first"), count=("_row", "size"))
        .reset_index()
        .rename(columns={"_rel": "rel"})
    )
    edges["source"] = "primekg"
    edges["confidence"] = 1.0
    keys = edges["src"] + "\x1f" + edges["rel"] + "\x1f" + edges["dst"] + "\x1fprimekg"
    edges["id"] = ["e:" + hashlib.blake2b(k.encode(), digest_size=8).hexdigest() for k in keys]
    # validation: unique node ids, endpoints exist, confidence in range
    nodes = nodes[~nodes["id"].duplicated()]
    known = set(nodes["id"])
    edges = edges[edges["src"].isin(known) & edges["dst"].isin(known) & edges["confidence"].between(0, 1)]
    out.mkdir(parents=True, exist_ok=True)
    nodes.to_parquet(out / "nodes.parquet")
    edges.to_parquet(out / "edges.parquet")
    rejects.to_parquet(out / "rejects.parquet")
    return len(nodes), len(edges), len(rejects)


if __name__ == "__main__":
    n, e, r = transform(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"pandas: {n} nodes, {e} edges, {r} rejects")
