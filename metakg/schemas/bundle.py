"""The KG bundle: a directory with nodes, edges, rejects (Parquet) and ``manifest.json``.

Files are written to a temporary name and renamed, and the manifest is written last, so a bundle whose
manifest exists is complete; a half-written one is reported as incomplete and can be written again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from metakg.errors import BundleError
from metakg.schemas.locks import unique_temp_name
from metakg.schemas.tables import (
    SCHEMA_VERSION,
    conform_edges,
    conform_nodes,
    conform_rejects,
    empty_rejects,
)

NODES_FILE = "nodes.parquet"
EDGES_FILE = "edges.parquet"
REJECTS_FILE = "rejects.parquet"
EMBEDDINGS_FILE = "embeddings.parquet"
EXTRACTION_FILE = "extraction.parquet"
HISTORY_NODES_FILE = "history_nodes.parquet"
HISTORY_EDGES_FILE = "history_edges.parquet"
MANIFEST_FILE = "manifest.json"
#: optional tables, each listed in the manifest (hashed, verified) while the manifest has its key
SIDE_TABLES = {
    EMBEDDINGS_FILE: "embeddings",
    EXTRACTION_FILE: "extraction",
    HISTORY_NODES_FILE: "history",
    HISTORY_EDGES_FILE: "history",
}


@dataclass
class Bundle:
    """A KG bundle in memory: the three tables and the manifest.

    ``side`` holds optional tables to write with it (file name in :data:`SIDE_TABLES` -> frame); reading a
    bundle leaves them on disk (:func:`read_embeddings`, :func:`read_side_table`).
    """

    nodes: pl.DataFrame
    edges: pl.DataFrame
    rejects: pl.DataFrame = field(default_factory=empty_rejects)
    manifest: dict[str, Any] = field(default_factory=dict)
    side: dict[str, pl.DataFrame] = field(default_factory=dict)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    tmp = unique_temp_name(path)
    try:
        frame.write_parquet(tmp, compression="zstd", statistics=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def counts_of(nodes: pl.DataFrame, edges: pl.DataFrame, rejects: pl.DataFrame) -> dict[str, Any]:
    """Counts for the manifest: totals, per node type, per relation, per source, rejects per check."""

    def per(frame: pl.DataFrame, column: str) -> dict[str, int]:
        if frame.height == 0:
            return {}
        grouped = frame.group_by(column).len().sort(["len", column], descending=[True, False])
        return {str(k): int(v) for k, v in zip(grouped[column], grouped["len"], strict=True)}

    return {
        "nodes": nodes.height,
        "edges": edges.height,
        "rejects": rejects.height,
        "node_types": per(nodes, "type"),
        "relations": per(edges, "rel"),
        "edge_sources": per(edges, "source"),
        "rejects_by_check": per(rejects, "check"),
    }


def write_bundle(path: Path, bundle: Bundle) -> dict[str, Any]:
    """Write ``bundle`` to the directory ``path`` (created if needed) and return the manifest written.

    The manifest keeps the keys already in ``bundle.manifest`` (sources, validation, ...) and refreshes
    schema version, counts, content hashes and the time of writing.

    Raises:
        BundleError: the directory cannot be written.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        manifest_path = path / MANIFEST_FILE
        if manifest_path.exists():  # the bundle is being rewritten: mark it incomplete until done
            manifest_path.unlink()
        nodes = conform_nodes(bundle.nodes)
        edges = conform_edges(bundle.edges)
        rejects = conform_rejects(bundle.rejects)
        _write_parquet(nodes, path / NODES_FILE)
        _write_parquet(edges, path / EDGES_FILE)
        _write_parquet(rejects, path / REJECTS_FILE)
        for name, frame in bundle.side.items():
            _write_parquet(frame, path / name)
        files = [NODES_FILE, EDGES_FILE, REJECTS_FILE]
        files += [name for name, key in SIDE_TABLES.items() if key in bundle.manifest and (path / name).exists()]
        manifest = dict(bundle.manifest)
        manifest.update(
            schema_version=SCHEMA_VERSION,
            written_at=datetime.now(UTC).isoformat(timespec="seconds"),
            counts=counts_of(nodes, edges, rejects),
            content_hashes={name: _sha256(path / name) for name in files},
            content_sizes={name: (path / name).stat().st_size for name in files},
        )
        manifest.setdefault("created_at", manifest["written_at"])
        manifest.setdefault("sources", [])
        tmp = unique_temp_name(manifest_path)
        try:
            tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, manifest_path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        raise BundleError(f"cannot write the bundle at {path}: {e}. Check the path and its permissions.") from e
    bundle.manifest = manifest
    return manifest


def write_embeddings(
    path: Path, bundle: Bundle, ids: pl.Series, vectors: Any, *, model: str, dim: int
) -> dict[str, Any]:
    """Store name embeddings (one row per node id) in the bundle at ``path`` and record them in its manifest.

    The table is written like every other one (temporary name, then rename) and the manifest last, so an
    interrupted write leaves the bundle marked incomplete, never pointing at a torn file.

    Returns:
        The manifest's ``embeddings`` entry (model, dim, field, nodes).

    Raises:
        BundleError: the bundle cannot be written.
    """
    frame = pl.DataFrame({"id": ids, "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})
    try:
        manifest_path = path / MANIFEST_FILE
        if manifest_path.exists():
            manifest_path.unlink()
        _write_parquet(frame, path / EMBEDDINGS_FILE)
    except OSError as e:
        raise BundleError(f"cannot write the embeddings of the bundle at {path}: {e}.") from e
    bundle.manifest["embeddings"] = {"model": model, "dim": dim, "field": "name", "nodes": frame.height}
    write_bundle(path, bundle)
    return dict(bundle.manifest["embeddings"])


def read_embeddings(path: Path, bundle: Bundle) -> pl.DataFrame | None:
    """The name embeddings stored in the bundle at ``path`` (columns ``id``, ``vector``), or None.

    Raises:
        BundleError: the manifest records embeddings but the table cannot be read.
    """
    return read_side_table(path, bundle, EMBEDDINGS_FILE)


def read_side_table(path: Path, bundle: Bundle, name: str) -> pl.DataFrame | None:
    """The optional table ``name`` (a :data:`SIDE_TABLES` file) of the bundle at ``path``, or None when its
    manifest does not list it.

    Raises:
        BundleError: the manifest lists the table but it cannot be read.
    """
    if SIDE_TABLES[name] not in bundle.manifest or not (path / name).is_file():
        return None
    try:
        return pl.read_parquet(path / name)
    except (OSError, pl.exceptions.PolarsError) as e:
        raise BundleError(f"cannot read {path / name}: {e}. Write the bundle again.") from e


def source_entry(name: str, importer: str, run_id: str, **details: Any) -> dict[str, Any]:
    """A manifest ``sources`` entry: the source's name, its importer, the run id, the time, and ``details``
    (input, endpoint, model, figures of the run; values that are None are left out)."""
    entry: dict[str, Any] = {
        "name": name,
        "importer": importer,
        "run_id": run_id,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    entry.update({k: v for k, v in details.items() if v is not None})
    return entry


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``path``.

    Raises:
        BundleError: no bundle there, an incomplete one, or one of another schema major version.
    """
    if not path.is_dir():
        raise BundleError(f"{path} is not a KG bundle directory (it does not exist or is a file).")
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.is_file():
        raise BundleError(
            f"{path} has no {MANIFEST_FILE}: it is not a bundle, or writing it was interrupted. "
            "Run the command that produced it again."
        )
    try:
        manifest: dict[str, Any] = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise BundleError(f"{manifest_path} is not readable JSON: {e}.") from e
    version = str(manifest.get("schema_version", ""))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise BundleError(
            f"{path} was written with schema version {version or 'unknown'}; this metakg reads "
            f"{SCHEMA_VERSION}. Re-create the bundle with this version."
        )
    return manifest


def verify_bundle(path: Path, manifest: dict[str, Any]) -> None:
    """Check every table of the bundle at ``path`` against the size and SHA-256 its manifest recorded.

    Raises:
        BundleError: a table is missing or changed since the bundle was written; the message names it.
    """
    sizes = manifest.get("content_sizes", {})
    for name, expected in manifest.get("content_hashes", {}).items():
        table = path / name
        if not table.is_file():
            raise BundleError(f"{table} is missing although {MANIFEST_FILE} lists it: write the bundle again.")
        changed = (name in sizes and table.stat().st_size != sizes[name]) or _sha256(table) != expected
        if changed:
            raise BundleError(
                f"{table} changed since the bundle was written (its size or hash differs from {MANIFEST_FILE}). "
                f"If the change is deliberate, run `metakg validate {path} --accept-changes`; otherwise write "
                "the bundle again."
            )


def read_bundle(path: Path, *, verify: bool = True) -> Bundle:
    """Read the bundle at ``path``.

    Args:
        path: the bundle directory.
        verify: check each table against the size and hash the manifest recorded (once per read); False
            reads tables changed behind the manifest's back (``validate --accept-changes``).

    Raises:
        BundleError: missing, incomplete, corrupt, or (with ``verify``) altered since it was written.
    """
    manifest = read_manifest(path)
    if verify:
        verify_bundle(path, manifest)
    try:
        nodes = pl.read_parquet(path / NODES_FILE)
        edges = pl.read_parquet(path / EDGES_FILE)
        rejects_path = path / REJECTS_FILE
        rejects = pl.read_parquet(rejects_path) if rejects_path.exists() else empty_rejects()
    except (OSError, pl.exceptions.PolarsError) as e:
        raise BundleError(f"cannot read the tables of bundle {path}: {e}.") from e
    return Bundle(
        nodes=conform_nodes(nodes), edges=conform_edges(edges), rejects=conform_rejects(rejects), manifest=manifest
    )


def merge_bundles(bundles: list[Bundle]) -> Bundle:
    """Union of bundles: nodes deduplicated by id, edges by edge id, provenance kept.

    A node seen in several bundles keeps the first non-empty name, type, source and description and the
    union of aliases and xrefs. An edge seen several times keeps the highest confidence and the union of
    its record ids; its count is the number of those distinct records (at least its largest input count),
    so merging a bundle with itself, or a merge with one of its inputs, changes no count. Rejects are
    concatenated; sources are listed in order.

    Raises:
        BundleError: ``bundles`` is empty.
    """
    if not bundles:
        raise BundleError("nothing to merge: give at least one bundle.")
    nodes = pl.concat([conform_nodes(b.nodes) for b in bundles], how="vertical")
    edges = pl.concat([conform_edges(b.edges) for b in bundles], how="vertical")
    rejects = pl.concat([conform_rejects(b.rejects) for b in bundles], how="vertical")
    # every name and alias seen for an id stays findable: the names not kept become aliases
    merged_nodes = (
        nodes.with_columns(pl.concat_list(pl.col("name"), pl.col("aliases")).alias("_names"))
        .group_by("id", maintain_order=True)
        .agg(
            pl.col("name").drop_nulls().first(),
            pl.col("type").drop_nulls().first(),
            pl.col("source").drop_nulls().first(),
            pl.col("description").drop_nulls().first(),
            pl.col("_names").explode().drop_nulls().unique(maintain_order=True),
            pl.col("xrefs").explode().drop_nulls().unique(maintain_order=True),
            pl.col("properties").drop_nulls().first(),
            pl.col("revision").drop_nulls().first(),
            pl.col("retrieved_at").max(),
        )
        .with_columns(pl.col("_names").list.set_difference(pl.concat_list(pl.col("name"))).alias("aliases"))
        .drop("_names")
    )
    # an edge's count is the number of distinct records that state it: the union of the inputs' record ids,
    # never fewer than any one input counted (a record may state an edge twice), so merging an input with
    # itself, or a merge with one of its inputs, changes nothing
    merged_edges = edges.group_by("id", maintain_order=True).agg(
        pl.col("src").first(),
        pl.col("dst").first(),
        pl.col("rel").first(),
        pl.col("display").first(),
        pl.col("source").first(),
        pl.col("confidence").max(),
        pl.max_horizontal(
            pl.col("count").max(), pl.col("record_ids").explode().drop_nulls().n_unique().cast(pl.Int64)
        ).alias("count"),
        pl.col("record_ids").explode().drop_nulls().unique(maintain_order=True),
        pl.col("importer").first(),
        pl.col("model").first(),
        pl.col("prompt_hash").first(),
        pl.col("run_id").first(),
        pl.col("created_at").min(),
    )
    sources: list[Any] = []
    for b in bundles:
        sources.extend(b.manifest.get("sources", []))
    manifest = {
        "sources": sources,
        "merged_from": [
            {"nodes": b.nodes.height, "edges": b.edges.height, "created_at": b.manifest.get("created_at")}
            for b in bundles
        ],
    }
    return Bundle(
        nodes=conform_nodes(merged_nodes), edges=conform_edges(merged_edges), rejects=rejects, manifest=manifest
    )
