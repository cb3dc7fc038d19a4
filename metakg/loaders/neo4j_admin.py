"""Files for ``neo4j-admin database import full``: the fastest first load into an empty database.

Writes header files and data files (nodes, relationships) in the admin-import CSV dialect and returns the
exact command to run. Nothing talks to a database here. Rows carry the same content hash as a batched load
writes, so ``load neo4j`` (following the bundle) after an import writes only what changed since.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import polars as pl

from metakg.loaders.cypher import ENTITY, GENERIC_TYPE, label_of
from metakg.loaders.neo4j_loader import node_rows
from metakg.schemas.bundle import Bundle
from metakg.schemas.diff import EDGE_CONTENT, content_hash
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
    ("name_key", "name_key"),
    ("alias_keys", "alias_keys:string[]"),
    ("alias_key_text", "alias_key_text"),
    ("all_names", "all_names"),
    ("revision", "revision"),
    ("valid_from", "valid_from:datetime"),
    ("content_hash", "content_hash"),
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
    ("content_hash", "content_hash"),
]


def _delimiter(frames: list[pl.Series]) -> str:
    """An array delimiter that no list element contains."""
    for candidate in ARRAY_DELIMITERS:
        if not any(bool(s.explode().drop_nulls().str.contains(candidate, literal=True).any()) for s in frames):
            return candidate
    raise ValueError("every candidate array delimiter occurs in the data")


def write_admin_import(
    bundle: Bundle, out_dir: Path, *, database: str = "neo4j", rel_types: str = "typed"
) -> dict[str, Any]:
    """Write ``nodes_header.csv``, ``nodes.csv``, ``edges_header.csv``, ``edges.csv`` into ``out_dir``;
    with ``rel_types="generic"``, every edge gets the one relationship type ``RELATED`` and its relation as
    the ``rel`` property (as ``load neo4j --rel-types generic`` writes them).

    Returns:
        The file paths, the counts, the array delimiter and the ``neo4j-admin`` command line.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    props = node_rows(bundle.nodes).drop("type").unnest("props")
    labels = {t: f"{ENTITY};{label_of(t)}" for t in props["type"].unique().to_list()}
    delimiter = _delimiter([props["aliases"], props["xrefs"], props["alias_keys"], bundle.edges["record_ids"]])
    nodes = props.with_columns(pl.col("type").replace_strict(labels).alias("labels"))
    edges = bundle.edges.filter(pl.col("rel").str.contains(RELATION_PATTERN))
    edges = edges.with_columns(content_hash(edges, EDGE_CONTENT))  # so a later follow-mode load skips them
    edge_fields = EDGE_FIELDS
    if rel_types == "generic":
        edges = edges.with_columns(pl.col("rel").alias("rel_property"), pl.lit(GENERIC_TYPE).alias("rel"))
        edge_fields = [*EDGE_FIELDS, ("rel_property", "rel")]
    files: dict[str, Path] = {}
    for name, frame, fields in (("nodes", nodes, NODE_FIELDS), ("edges", edges, edge_fields)):
        header = out_dir / f"{name}_header.csv"
        header.write_text(",".join(h for _, h in fields) + "\n", encoding="utf-8")
        data = out_dir / f"{name}.csv"
        columns = []
        for column, _header in fields:
            if frame.schema[column] == pl.List(pl.String):
                columns.append(pl.col(column).list.join(delimiter))
            elif frame.schema[column] == pl.Datetime("us", "UTC"):
                columns.append(pl.col(column).dt.to_string("%Y-%m-%dT%H:%M:%S%.6fZ"))
            else:
                columns.append(pl.col(column))
        frame.select(columns).write_csv(data, include_header=False, quote_style="non_numeric")
        files[f"{name}_header"], files[name] = header, data
    command = [
        "neo4j-admin", "database", "import", "full", database,
        f"--nodes={files['nodes_header']},{files['nodes']}",
        f"--relationships={files['edges_header']},{files['edges']}",
        f"--array-delimiter={delimiter}", "--multiline-fields=true", "--overwrite-destination=true",
        f"--report-file={out_dir / 'import.report'}",
    ]  # fmt: skip
    return {
        "files": {k: str(v) for k, v in files.items()},
        "nodes": nodes.height,
        "edges": edges.height,
        "array_delimiter": delimiter,
        "rel_types": rel_types,
        "command": shlex.join(command),
    }
