"""The KG bundle: a directory with nodes, edges, rejects (Parquet) and ``manifest.json``.

A bundle is written as a whole new version beside the old one and swapped in with one rename
(:mod:`metakg.schemas.bundle_dir`), the manifest written last, so a crash leaves one version or the other and
a reader sees one or the other. The manifest records a SHA-256 for every table; a reader checks them, and
reads no file but the bundle's own tables, whatever the manifest names.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from metakg.errors import BundleError, BundleNotWritten
from metakg.schemas.bundle_dir import Version, bundle_path, readable, replace, sha256_of, token, token_of
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
IDENTITY_FILE = "identity.parquet"  # the identity decisions of `metakg resolve`
IDENTITY_NODES_FILE = "identity_nodes.parquet"  # the original rows of the nodes merged
IDENTITY_EDGES_FILE = "identity_edges.parquet"  # the original rows of the edges rewired
MANIFEST_FILE = "manifest.json"
CORE_TABLES = (NODES_FILE, EDGES_FILE, REJECTS_FILE)
#: optional tables, each listed in the manifest (hashed, verified) while the manifest has its key
SIDE_TABLES = {
    EMBEDDINGS_FILE: "embeddings",
    EXTRACTION_FILE: "extraction",
    HISTORY_NODES_FILE: "history",
    HISTORY_EDGES_FILE: "history",
    IDENTITY_FILE: "identity",
    IDENTITY_NODES_FILE: "identity",
    IDENTITY_EDGES_FILE: "identity",
}
#: the only files a manifest may list: a bundle's tables, inside its folder
TABLE_FILES = frozenset(CORE_TABLES) | frozenset(SIDE_TABLES)
#: how often a read starts again when a writer swaps in a new version under it
READ_ATTEMPTS = 5
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Bundle:
    """A KG bundle in memory: the three tables and the manifest.

    ``side`` holds optional tables to write with it (file name in :data:`SIDE_TABLES` -> frame); reading a
    bundle leaves them on disk (:func:`read_embeddings`, :func:`read_side_table`). ``token`` names the version
    it was read from (None: not read from disk); a writer that gives it back as ``expect`` refuses to replace
    another version. ``verified``: its tables were checked against the manifest's hashes when read.
    """

    nodes: pl.DataFrame
    edges: pl.DataFrame
    rejects: pl.DataFrame = field(default_factory=empty_rejects)
    manifest: dict[str, Any] = field(default_factory=dict)
    side: dict[str, pl.DataFrame] = field(default_factory=dict)
    token: str | None = None
    verified: bool = True


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return sha256_of(fh)


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    path.unlink(missing_ok=True)  # never write through a hard link to the old version's file
    frame.write_parquet(path, compression="zstd", statistics=False)


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


def write_bundle(
    path: Path,
    bundle: Bundle,
    *,
    keep: Collection[str] = (),
    expect: str | None = None,
    extras: Callable[[Path], None] | None = None,
) -> dict[str, Any]:
    """Write ``bundle`` as the new version of the bundle directory ``path`` and return the manifest written.

    The new version is built beside the old one and swapped in whole (the writer holds
    :func:`~metakg.schemas.bundle_dir.writing`, as every command does). The manifest keeps the keys already in
    ``bundle.manifest`` (sources, validation, ...) and refreshes schema version, counts, content hashes and
    the time of writing.

    Args:
        path: the bundle directory (created when missing).
        bundle: what to write; its ``side`` tables are written too.
        keep: files of the current version the new one keeps as they are (a table the writer did not change,
            the validation reports); their hashes are taken from ``bundle.manifest``.
        expect: the token of the version ``bundle`` was read from: another version there refuses the write.
        extras: writes further files (reports) into the new version's folder before its manifest.

    Raises:
        BundleError: the directory cannot be written (the old version is left whole), or (BundleChanged)
            ``expect`` is not the current version.
    """
    real = bundle_path(path)
    # side tables the manifest still lists but the writer did not load stay as they are (validate in place)
    keep = set(keep) | {n for n, key in SIDE_TABLES.items() if key in bundle.manifest and n not in bundle.side}
    nodes = conform_nodes(bundle.nodes)
    edges = conform_edges(bundle.edges)
    rejects = conform_rejects(bundle.rejects)
    old_hashes = bundle.manifest.get("content_hashes") or {}
    old_sizes = bundle.manifest.get("content_sizes") or {}
    manifest = dict(bundle.manifest)

    def build(folder: Path) -> None:
        frames = dict(zip(CORE_TABLES, (nodes, edges, rejects), strict=True)) | bundle.side
        for name, frame in frames.items():
            if name not in keep:
                _write_parquet(frame, folder / name)
        if extras is not None:
            extras(folder)
        files = [*CORE_TABLES]
        files += [name for name, key in SIDE_TABLES.items() if key in manifest and (folder / name).is_file()]
        # a kept file keeps the hash recorded when it was written (a file changed behind the manifest stays
        # detectable), unless the bundle was read without checks to record its files as they are now
        reused = {n for n in files if bundle.verified and n in keep and n in old_hashes and n in old_sizes}
        manifest.update(
            schema_version=SCHEMA_VERSION,
            written_at=datetime.now(UTC).isoformat(timespec="seconds"),
            counts=counts_of(nodes, edges, rejects),
            content_hashes={name: old_hashes[name] if name in reused else _sha256(folder / name) for name in files},
            content_sizes={
                name: old_sizes[name] if name in reused else (folder / name).stat().st_size for name in files
            },
        )
        manifest.setdefault("created_at", manifest["written_at"])
        manifest.setdefault("sources", [])
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")

    existed = real.is_dir()
    try:
        replace(real, build, keep=keep, expect=expect)
    except (OSError, pl.exceptions.PolarsError) as e:  # polars reports a full disk as a ComputeError
        cause = (e.strerror if isinstance(e, OSError) else None) or str(e)
        if isinstance(e, OSError) and e.errno == errno.EBUSY:  # renaming a mount point
            cause += " (the bundle folder is a mount point, which cannot be replaced: mount the folder above it)"
        left = "the previous version is unchanged" if existed else "nothing was written"
        raise BundleNotWritten(
            f"cannot write the bundle at {path}: {cause}; {left}. Check the free space, the path and its permissions."
        ) from e
    bundle.manifest = manifest
    bundle.token = token_of(real)
    return manifest


def write_embeddings(
    path: Path, bundle: Bundle, ids: pl.Series, vectors: Any, *, model: str, dim: int
) -> dict[str, Any]:
    """Store name embeddings (one row per node id) in the bundle at ``path`` (read as ``bundle``) and record
    them in its manifest: a new version that keeps every other file of the one read.

    Returns:
        The manifest's ``embeddings`` entry (model, dim, field, nodes).

    Raises:
        BundleError: the bundle cannot be written, or changed since it was read.
    """
    frame = pl.DataFrame({"id": ids, "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})
    keep = [name for name in (*CORE_TABLES, *SIDE_TABLES) if name != EMBEDDINGS_FILE]
    keep += ["validation.json", "validation.html"]
    updated = Bundle(
        bundle.nodes,
        bundle.edges,
        bundle.rejects,
        manifest=dict(bundle.manifest)
        | {"embeddings": {"model": model, "dim": dim, "field": "name", "nodes": frame.height}},
        side={EMBEDDINGS_FILE: frame},
    )
    write_bundle(path, updated, keep=keep, expect=bundle.token)
    bundle.manifest, bundle.token = updated.manifest, updated.token
    return dict(bundle.manifest["embeddings"])


def read_embeddings(path: Path, bundle: Bundle) -> pl.DataFrame | None:
    """The name embeddings stored in the bundle at ``path`` (columns ``id``, ``vector``), or None.

    Raises:
        BundleError: the manifest records embeddings but the table cannot be read.
    """
    return read_side_table(path, bundle, EMBEDDINGS_FILE)


def read_side_table(path: Path, bundle: Bundle, name: str) -> pl.DataFrame | None:
    """The optional table ``name`` (a :data:`SIDE_TABLES` file) of the bundle at ``path``, or None when its
    manifest does not list it; checked against the hash the manifest of ``bundle`` recorded.

    Raises:
        BundleError: the manifest lists the table but it cannot be read, or it is not the version ``bundle``
            was read from (the bundle changed since: read it again).
    """
    if SIDE_TABLES[name] not in bundle.manifest:
        return None
    expected = (bundle.manifest.get("content_hashes") or {}).get(name)
    with Version(bundle_path(path)) as version:
        if not version.has(name):
            if expected is None:
                return None
            raise _missing(path, name)
        try:
            with version.open(name) as fh:
                if bundle.verified:
                    if expected is None:
                        raise BundleError(
                            f"{path / MANIFEST_FILE} records no hash for {name}: validate the bundle accepting "
                            "changes to check it and record them.",
                            cli_fix=f"metakg validate {path} --accept-changes",
                        )
                    if sha256_of(fh) != expected:
                        raise BundleError(
                            f"{path / name} is not the version of the bundle that was read (it changed since, or "
                            f"behind {MANIFEST_FILE}): run the command again."
                        )
                return pl.read_parquet(readable(fh))
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


#: manifest keys read by metakg and the JSON type each must have
_MANIFEST_TYPES: dict[str, type | tuple[type, ...]] = {
    "schema_version": str,
    "written_at": str,
    "created_at": str,
    "sources": list,
    "counts": dict,
    "content_hashes": dict,
    "content_sizes": dict,
    "validation": dict,
    "embeddings": dict,
    "extraction": dict,
    "history": dict,
    "diff": dict,
    "merged_from": list,
    "types": dict,
}


def check_manifest(manifest: Any, path: Path, *, hashes: bool = True) -> dict[str, Any]:
    """``manifest`` (parsed JSON) when it is a manifest metakg can trust, for the bundle at ``path``.

    Args:
        manifest: the parsed ``manifest.json``.
        path: the bundle directory (for messages).
        hashes: require the content hashes of the three tables (False: ``validate --accept-changes``, which
            records them anew).

    Raises:
        BundleError: not an object, a field of the wrong type, a listed file that is not one of the bundle's
            tables (``../`` or an absolute path), or (with ``hashes``) no hash for a table; the message names it.
    """
    where = path / MANIFEST_FILE
    if not isinstance(manifest, dict):
        raise BundleError(f"{where} holds a JSON {_json_type(manifest)}, not an object: write the bundle again.")
    for key, kind in _MANIFEST_TYPES.items():
        if manifest.get(key) is None and key in ("content_hashes", "content_sizes"):
            manifest.pop(key, None)  # null: none recorded (refused below when hashes are required)
        elif key in manifest and not isinstance(manifest[key], kind):
            raise BundleError(
                f"{where}: field {key!r} is a JSON {_json_type(manifest[key])}, not "
                f"{'an object' if kind is dict else 'an array' if kind is list else 'a string'}: write the bundle "
                "again."
            )
    version = str(manifest.get("schema_version", ""))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise BundleError(
            f"{path} was written with schema version {version or 'unknown'}; this metakg reads "
            f"{SCHEMA_VERSION}. Re-create the bundle with this version."
        )
    for key in ("content_hashes", "content_sizes"):
        for name, value in (manifest.get(key) or {}).items():
            if name not in TABLE_FILES:
                raise BundleError(
                    f"{where}: {key} lists {name!r}, which is not one of a bundle's tables "
                    f"({', '.join(sorted(TABLE_FILES))}); metakg reads no other file. The manifest was altered: do "
                    "not use this bundle."
                )
            valid = _HEX64.match(value) if key == "content_hashes" and isinstance(value, str) else None
            if (key == "content_hashes" and not valid) or (key == "content_sizes" and type(value) is not int):
                raise BundleError(
                    f"{where}: {key}[{name!r}] is not a valid {'SHA-256' if key == 'content_hashes' else 'size'}."
                )
    sources = manifest.get("sources", [])
    if not all(isinstance(source, dict) for source in sources) or any(
        not isinstance(source.get(key, ""), str) for source in sources for key in ("name", "importer", "run_id", "at")
    ):
        raise BundleError(
            f"{where}: field 'sources' must hold objects whose name, importer, run_id and at are strings: write the "
            "bundle again."
        )
    counts = manifest.get("counts", {})
    for key in ("nodes", "edges", "rejects"):
        if key in counts and (type(counts[key]) is not int or counts[key] < 0):
            raise BundleError(f"{where}: counts.{key} is not a count: write the bundle again.")
    for key in ("node_types", "relations", "edge_sources", "rejects_by_check"):
        found = counts.get(key, {})
        if not isinstance(found, dict) or not all(type(n) is int and n >= 0 for n in found.values()):
            raise BundleError(f"{where}: counts.{key} must map names to counts: write the bundle again.")
    if "embeddings" in manifest:
        entry = manifest["embeddings"]
        if not isinstance(entry.get("model"), str) or type(entry.get("dim")) is not int:
            raise BundleError(f"{where}: field 'embeddings' needs a string 'model' and a whole number 'dim'.")
    if hashes:
        recorded = manifest.get("content_hashes") or {}
        missing = [name for name in (NODES_FILE, EDGES_FILE) if name not in recorded]
        if missing:
            raise BundleError(
                f"{where} records no content hash for {', '.join(missing)}, so the tables cannot be checked. If the "
                "bundle is yours, validate it accepting changes to check it and record them.",
                cli_fix=f"metakg validate {path} --accept-changes",
            )
    return manifest


def _whole_parquet(fh: Any) -> bool:
    """Whether the open file ``fh`` begins and ends with Parquet's magic bytes (its position is kept)."""
    at = fh.tell()
    try:
        fh.seek(0)
        head = fh.read(4)
        fh.seek(0, os.SEEK_END)
        if fh.tell() < 12:
            return False
        fh.seek(-4, os.SEEK_END)
        return bool(head == PARQUET_MAGIC and fh.read(4) == PARQUET_MAGIC)
    finally:
        fh.seek(at)


#: the four bytes a Parquet file starts and ends with
PARQUET_MAGIC = b"PAR1"


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (object, array, string, number, boolean, null)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def _parse_manifest(raw: bytes, path: Path, *, hashes: bool) -> dict[str, Any]:
    try:
        parsed = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BundleError(f"{path / MANIFEST_FILE} is not readable JSON: {e}.") from e
    except ValueError as e:  # NaN or Infinity, which JSON has no form for (and --json would print again)
        raise BundleError(f"{path / MANIFEST_FILE} is not readable JSON: {e}; write the bundle again.") from e
    except RecursionError:
        raise BundleError(
            f"{path / MANIFEST_FILE} nests too deeply to be a manifest: write the bundle again."
        ) from None
    return check_manifest(parsed, path, hashes=hashes)


def _no_constant(name: str) -> Any:
    raise ValueError(f"it holds {name}, which is no JSON number")


def _missing(path: Path, name: str) -> BundleError:
    """A table the manifest lists is not there: the name embeddings can be made again from the nodes; the
    other tables only by writing the bundle again."""
    if name == EMBEDDINGS_FILE:
        return BundleError(
            f"{path / name} is missing although {MANIFEST_FILE} lists it: embed the bundle again to make it.",
            cli_fix=f"metakg embed {path}",
        )
    return BundleError(f"{path / name} is missing although {MANIFEST_FILE} lists it: write the bundle again.")


def _no_manifest(path: Path) -> BundleError:
    return BundleError(
        f"{path} has no {MANIFEST_FILE}: it is not a bundle. Give a folder a metakg command wrote, or write it "
        "with the command that produces it."
    )


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``path`` (checked as :func:`check_manifest` checks it, hashes aside).

    Raises:
        BundleError: no bundle there, an untrustworthy manifest, or one of another schema major version.
    """
    with Version(bundle_path(path)) as version:
        try:
            raw = version.read_bytes(MANIFEST_FILE)
        except FileNotFoundError:
            raise _no_manifest(path) from None
        except OSError as e:
            raise BundleError(f"cannot read {path / MANIFEST_FILE}: {e.strerror or e}.") from e
    return _parse_manifest(raw, path, hashes=False)


def _read_version(version: Version, path: Path, *, verify: bool, tables: bool, every: bool) -> Bundle:
    """The manifest and (with ``tables``) the tables of one opened version; ``every``: verify the side tables
    too. Raises FileNotFoundError when a file is missing (the caller tells a swap from a damaged bundle)."""
    raw = version.read_bytes(MANIFEST_FILE)
    manifest = _parse_manifest(raw, path, hashes=verify)
    hashes = manifest.get("content_hashes") or {}
    sizes = manifest.get("content_sizes") or {}
    if every:
        names = sorted(set(hashes) | {NODES_FILE, EDGES_FILE})
    elif tables:
        names = [NODES_FILE, EDGES_FILE] + (
            [REJECTS_FILE] if REJECTS_FILE in hashes or version.has(REJECTS_FILE) else []
        )
    else:
        names = []
    handles = {}
    try:
        for name in names:
            handles[name] = version.open(name)
        if verify:
            for name, fh in handles.items():
                size = sizes.get(name)
                if name not in hashes:
                    continue  # a table the manifest does not list (check_manifest made sure nodes and edges are)
                if (size is not None and os.fstat(fh.fileno()).st_size != size) or sha256_of(fh) != hashes[name]:
                    if not _whole_parquet(fh):  # no change to accept: a cut or overwritten file
                        raise BundleError(
                            f"{path / name} is damaged: it is not a whole Parquet file (cut short, or overwritten), "
                            f"and no longer what {MANIFEST_FILE} records. Write the bundle again."
                        )
                    raise BundleError(
                        f"{path / name} changed since the bundle was written (its size or hash differs from "
                        f"{MANIFEST_FILE}). If the change is deliberate, validate the bundle accepting changes; "
                        "otherwise write the bundle again.",
                        cli_fix=f"metakg validate {path} --accept-changes",
                    )
        frames: dict[str, pl.DataFrame] = {}
        if tables:
            for name in CORE_TABLES:
                if name in handles:
                    try:
                        frames[name] = pl.read_parquet(readable(handles[name]))
                    except (OSError, pl.exceptions.PolarsError) as e:
                        raise BundleError(f"cannot read {path / name}: {e}. Write the bundle again.") from e
    finally:
        for fh in handles.values():
            fh.close()
    if not tables:
        return Bundle(pl.DataFrame(), pl.DataFrame(), manifest=manifest, token=token(raw), verified=verify)
    return Bundle(
        nodes=conform_nodes(frames[NODES_FILE], strict=True, where=path / NODES_FILE),
        edges=conform_edges(frames[EDGES_FILE], strict=True, where=path / EDGES_FILE),
        rejects=conform_rejects(frames[REJECTS_FILE], strict=True, where=path / REJECTS_FILE)
        if REJECTS_FILE in frames
        else empty_rejects(),
        manifest=manifest,
        token=token(raw),
        verified=verify,
    )


def _read(path: Path, *, verify: bool, tables: bool, every: bool = False) -> Bundle:
    real = bundle_path(path)
    for _ in range(READ_ATTEMPTS):
        with Version(real) as version:
            try:
                return _read_version(version, path, verify=verify, tables=tables, every=every)
            except FileNotFoundError as e:
                if version.replaced():
                    continue  # a writer swapped in a new version between our opens: read that one
                name = Path(str(e.filename or MANIFEST_FILE)).name
                if name == MANIFEST_FILE:
                    raise _no_manifest(path) from None
                raise _missing(path, name) from None
    raise BundleError(f"{path} kept changing while it was read ({READ_ATTEMPTS} new versions); try again.")


def verify_bundle(path: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``path`` after checking every table it lists (side tables included)
    against the size and SHA-256 it recorded.

    Raises:
        BundleError: no bundle, an untrustworthy manifest, or a table missing or changed since it was written.
    """
    return _read(path, verify=True, tables=False, every=True).manifest


def read_bundle(path: Path, *, verify: bool = True) -> Bundle:
    """Read the bundle at ``path``: one version, even while a writer swaps in another.

    Args:
        path: the bundle directory.
        verify: check each table against the size and hash the manifest recorded (once per read; a manifest
            without hashes is refused); False reads tables changed behind the manifest's back
            (``validate --accept-changes``).

    Raises:
        BundleError: missing, incomplete, corrupt, or (with ``verify``) altered since it was written.
    """
    return _read(path, verify=verify, tables=True)


def collapse_edges(edges: pl.DataFrame) -> pl.DataFrame:
    """Edges with the same id as one: the highest confidence, the union of record ids, the earliest creation.

    An edge's count is the number of distinct records that state it: the union of the inputs' record ids,
    never fewer than any one input counted (a record may state an edge twice), so merging an input with
    itself, or a merge with one of its inputs, changes nothing.
    """
    return edges.group_by("id", maintain_order=True).agg(
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


def declared_types(bundles: Sequence[Bundle]) -> dict[str, Any]:
    """The node types ``bundles`` declare in their manifests (an ontology's classes), the first definition of
    each kept."""
    declared: dict[str, Any] = {}
    for b in bundles:
        for name, spec in (b.manifest.get("types") or {}).items():
            declared.setdefault(name, spec)
    return declared


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
    merged_edges = collapse_edges(edges)
    sources: list[Any] = []
    for b in bundles:
        sources.extend(b.manifest.get("sources", []))
    declared = declared_types(bundles)
    manifest = {
        "sources": sources,
        **({"types": declared} if declared else {}),
        "merged_from": [
            {"nodes": b.nodes.height, "edges": b.edges.height, "created_at": b.manifest.get("created_at")}
            for b in bundles
        ],
    }
    return Bundle(
        nodes=conform_nodes(merged_nodes), edges=conform_edges(merged_edges), rejects=rejects, manifest=manifest
    )
