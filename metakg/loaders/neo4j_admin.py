"""Files for ``neo4j-admin database import full``: the fastest first load into an empty database.

Writes header files and data files in the admin-import CSV dialect and returns the exact command to run.
Nothing talks to a database here. The files hold what a batched load writes: the entities with their labels
and columns (and their name embeddings, when the bundle has them), the relationships in the chosen layout,
and metakg's bookkeeping (unlabelled nodes with their self-loops: the name keys search uses, the layout, the
embedding model). ``load neo4j`` after an import then creates the indexes, records the sources and finds
every row unchanged, so it writes nothing else.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import polars as pl

from metakg.loaders.cypher import ENTITY, GENERIC_TYPE, KEY, META, VECTOR_INDEX, label_of
from metakg.loaders.neo4j_loader import EMBEDDING_META, RelTypes, layout_for, name_keys
from metakg.schemas.bundle import Bundle
from metakg.schemas.bundle_dir import recover, replace
from metakg.schemas.locks import check_replaceable, exclusive
from metakg.schemas.tables import RELATION_PATTERN

ARRAY_DELIMITERS = [";", "|", "¦", "\u241e"]

NODE_FIELDS = [
    ("id", "id:ID(Entity)"),
    ("name", "name"),
    ("type", "type"),
    ("source", "source"),
    ("description", "description"),
    ("aliases", "aliases:string[]"),
    ("xrefs", "xrefs:string[]"),
    ("properties", "properties"),
    ("revision", "revision"),
    ("valid_from", "valid_from:datetime"),
    ("labels", ":LABEL"),
]
EDGE_FIELDS = [
    ("src", ":START_ID(Entity)"),
    ("dst", ":END_ID(Entity)"),
    ("rel", ":TYPE"),
    ("id", "id"),
    ("display", "display"),
    ("source", "source"),
    ("confidence", "confidence:double"),
    ("count", "count:long"),
    ("record_ids", "record_ids:string[]"),
    ("importer", "importer"),
    ("model", "model"),
    ("prompt_hash", "prompt_hash"),
    ("run_id", "run_id"),
    ("created_at", "created_at:datetime"),
    ("valid_from", "valid_from:datetime"),
]
#: the bookkeeping records (unlabelled nodes; every property a record kind has, empty where it has none)
META_FIELDS = [
    ("meta_id", "meta_id:ID(Meta)"),
    ("kind", "kind"),
    ("name", "name"),
    ("rel_types", "rel_types"),
    ("model", "model"),
    ("dimensions", "dimensions:long"),
    ("field", "field"),
    ("pooling", "pooling"),
    ("normalised", "normalised:boolean"),
    ("similarity", "similarity"),
]
LOOP_FIELDS = [("start", ":START_ID(Meta)"), ("end", ":END_ID(Meta)"), ("type", ":TYPE")]
KEY_FIELDS = [*LOOP_FIELDS, ("key", "key"), ("id", "id")]


def _delimiter(frames: list[pl.Series]) -> str:
    """An array delimiter that no list element contains."""
    for candidate in ARRAY_DELIMITERS:
        if not any(bool(s.explode().drop_nulls().str.contains(candidate, literal=True).any()) for s in frames):
            return candidate
    raise ValueError("every candidate array delimiter occurs in the data")


def write_admin_import(
    bundle: Bundle,
    out_dir: Path,
    *,
    database: str = "neo4j",
    rel_types: RelTypes = "auto",
    embeddings: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """Write the nodes, relationships and bookkeeping files (each a header and a data file) into ``out_dir``.

    Args:
        bundle: a validated bundle.
        out_dir: the folder of the files.
        database: the database the command imports into.
        rel_types: ``typed``, ``generic`` (every edge of type ``RELATED``, its relation the ``rel`` property),
            or ``auto``: as :func:`~metakg.loaders.neo4j_loader.layout_for` picks by the graph.
        embeddings: the name embeddings (``id``, ``vector``) of ``metakg embed``, written on the nodes.

    Returns:
        The file paths, the counts, the array delimiter, the layout and the ``neo4j-admin`` command line.
    """
    layout = layout_for(bundle.edges["rel"], rel_types)
    keys = name_keys(bundle.nodes).explode("keys").drop_nulls("keys")
    delimiter = _delimiter([bundle.nodes["aliases"], bundle.nodes["xrefs"], bundle.edges["record_ids"]])
    labels = {t: f"{ENTITY};{label_of(t)}" for t in bundle.nodes["type"].unique().to_list()}
    nodes = bundle.nodes.with_columns(pl.col("type").replace_strict(labels).alias("labels"))
    node_fields = NODE_FIELDS
    meta: list[dict[str, Any]] = [{"meta_id": "keys", "kind": "keys", "name": "names"}]
    if embeddings is not None and embeddings.height:
        nodes = nodes.join(embeddings.rename({"vector": "embedding"}), on="id", how="left", maintain_order="left")
        nodes = nodes.with_columns(pl.col("embedding").cast(pl.List(pl.String)))
        node_fields = [*NODE_FIELDS, ("embedding", "embedding:double[]")]
        model = bundle.manifest.get("embeddings", {}).get("model")
        dims = len(embeddings["vector"][0])
        meta.append({"meta_id": "embedding", "kind": "embedding", "name": VECTOR_INDEX, "model": model,
                     "dimensions": dims, **EMBEDDING_META})  # fmt: skip
    edges = bundle.edges.filter(pl.col("rel").str.contains(RELATION_PATTERN))
    edge_fields = EDGE_FIELDS
    if layout == "generic":
        edges = edges.with_columns(pl.col("rel").alias("rel_property"), pl.lit(GENERIC_TYPE).alias("rel"))
        edge_fields = [*EDGE_FIELDS, ("rel_property", "rel")]
    if edges.height:
        meta.append({"meta_id": "layout", "kind": "layout", "name": "relations", "rel_types": layout})
    types = {"dimensions": pl.Int64, "normalised": pl.Boolean}
    meta_frame = pl.DataFrame(meta, schema={c: types.get(c, pl.String) for c, _ in META_FIELDS})
    loop = (pl.col("meta_id").alias("start"), pl.col("meta_id").alias("end"), pl.lit(META).alias("type"))
    loops = meta_frame.select(*loop)
    anchor = (pl.lit("keys").alias("start"), pl.lit("keys").alias("end"), pl.lit(KEY).alias("type"))
    key_rows = keys.select(*anchor, pl.col("keys").alias("key"), "id")
    files: dict[str, Path] = {}
    names = ("nodes", "edges", "meta", "meta_loops", "keys")
    for name in names:  # never written through a link, into a FIFO or over a folder: refused before any is written
        for target in (out_dir / f"{name}_header.csv", out_dir / f"{name}.csv"):
            check_replaceable(target)
    tables = {
        "nodes": (nodes, node_fields), "edges": (edges, edge_fields), "meta": (meta_frame, META_FIELDS),
        "meta_loops": (loops, LOOP_FIELDS), "keys": (key_rows, KEY_FIELDS),
    }  # fmt: skip

    def build(folder: Path) -> None:
        for name, (frame, fields) in tables.items():
            (folder / f"{name}_header.csv").write_text(",".join(h for _, h in fields) + "\n", encoding="utf-8")
            columns = []
            for column, _header in fields:
                if isinstance(frame.schema[column], pl.List):
                    columns.append(pl.col(column).list.join(delimiter))
                elif frame.schema[column] == pl.Datetime("us", "UTC"):
                    columns.append(pl.col(column).dt.to_string("%Y-%m-%dT%H:%M:%S%.6fZ"))
                else:
                    columns.append(pl.col(column))
            frame.select(columns).write_csv(folder / f"{name}.csv", include_header=False, quote_style="non_numeric")

    # the files are written into a staging folder beside the output and swapped in with it whole (the user's
    # other files in it carried over): a run killed or out of space leaves the earlier export as it was, never
    # a mix of two
    written = [f"{name}{part}.csv" for name in names for part in ("_header", "")]
    with exclusive(out_dir, "the neo4j-admin import files", directory=False):
        recover(out_dir)
        replace(out_dir, build, writes=written)
    for name in names:
        files[f"{name}_header"], files[name] = out_dir / f"{name}_header.csv", out_dir / f"{name}.csv"
    command = [
        "neo4j-admin", "database", "import", "full", database,
        f"--nodes={files['nodes_header']},{files['nodes']}",
        f"--nodes={files['meta_header']},{files['meta']}",
        f"--relationships={files['edges_header']},{files['edges']}",
        f"--relationships={files['meta_loops_header']},{files['meta_loops']}",
        f"--relationships={files['keys_header']},{files['keys']}",
        f"--array-delimiter={delimiter}", "--multiline-fields=true", "--overwrite-destination=true",
        f"--report-file={out_dir / 'import.report'}",
    ]  # fmt: skip
    return {
        "files": {k: str(v) for k, v in files.items()},
        "nodes": nodes.height,
        "edges": edges.height,
        "keys": key_rows.height,
        "embeddings": embeddings is not None and bool(embeddings.height),
        "array_delimiter": delimiter,
        "rel_types": layout,
        "command": shlex.join(command),
    }
