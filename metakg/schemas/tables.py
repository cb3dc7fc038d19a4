"""The one node table schema, the one edge table schema, and the rejects table schema.

Every stage reads and writes polars frames with exactly these columns; :func:`conform_nodes` and
:func:`conform_edges` add missing optional columns and cast, so sources only fill what they know.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import polars as pl
import polars_hash as plh

from metakg.errors import BundleError

SCHEMA_VERSION = "1.1"

NODE_SCHEMA: Mapping[str, pl.DataType] = {
    "id": pl.String(),
    "name": pl.String(),
    "type": pl.String(),
    "source": pl.String(),
    "description": pl.String(),
    "aliases": pl.List(pl.String()),
    "xrefs": pl.List(pl.String()),
    # source facts and provenance (Wikidata fills them; other sources leave them null)
    "properties": pl.String(),  # JSON object: "label (Pxx)" -> literal values
    "revision": pl.String(),  # the source revision the node was built from
    "retrieved_at": pl.Datetime("us", "UTC"),
    "valid_from": pl.Datetime("us", "UTC"),  # the source's time of this version (Wikidata: last modified)
}

EDGE_SCHEMA: Mapping[str, pl.DataType] = {
    "id": pl.String(),
    "src": pl.String(),
    "dst": pl.String(),
    "rel": pl.String(),
    "display": pl.String(),
    "source": pl.String(),
    "confidence": pl.Float64(),
    "count": pl.Int64(),
    # provenance
    "record_ids": pl.List(pl.String()),
    "importer": pl.String(),
    "model": pl.String(),
    "prompt_hash": pl.String(),
    "run_id": pl.String(),
    "created_at": pl.Datetime("us", "UTC"),
    "valid_from": pl.Datetime("us", "UTC"),  # the source's time of the statement (Wikidata: its item's)
}

REJECT_SCHEMA: Mapping[str, pl.DataType] = {
    "stage": pl.String(),  # ingest | validate
    "table": pl.String(),  # input | nodes | edges
    "record": pl.String(),  # file:line, or the row's id / position
    "check": pl.String(),  # machine name of the failed check
    "reason": pl.String(),  # human sentence
    "payload": pl.String(),  # the rejected record as text, complete
}

_REQUIRED_NODE = ("id", "name", "type", "source")
_REQUIRED_EDGE = ("src", "dst", "rel", "source")


def _conform(
    frame: pl.DataFrame,
    schema: Mapping[str, pl.DataType],
    required: tuple[str, ...],
    what: str,
    *,
    strict: bool = False,
    where: Path | None = None,
) -> pl.DataFrame:
    place = f"{where}: " if where is not None else ""
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise BundleError(f"{place}{what} table lacks required column(s) {missing}; it has {frame.columns}.")
    exprs = []
    for name, dtype in schema.items():
        if name in frame.columns:
            exprs.append(pl.col(name).cast(dtype, strict=strict).alias(name))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    try:
        return frame.select(exprs)
    except pl.exceptions.PolarsError:
        for name, dtype in schema.items():  # name the first column that does not hold its type
            if name in frame.columns:
                try:
                    frame.select(pl.col(name).cast(dtype, strict=strict))
                except pl.exceptions.PolarsError:
                    raise BundleError(
                        f"{place}{what} column {name!r} holds {frame.schema[name]}, which cannot be read as {dtype}: "
                        "write the table again with the right types."
                    ) from None
        raise


def conform_nodes(frame: pl.DataFrame, *, strict: bool = False, where: Path | None = None) -> pl.DataFrame:
    """Return ``frame`` with exactly the node columns, in order, with their dtypes.

    Args:
        frame: a node table.
        strict: a value that cannot be cast to its column's type is an error, not a null (tables read from disk).
        where: the file the table came from, for messages.

    Raises:
        BundleError: a required column (id, name, type, source) is missing, or (``strict``) a column of the
            wrong type.
    """
    out = _conform(frame, NODE_SCHEMA, _REQUIRED_NODE, "node", strict=strict, where=where)
    return out.with_columns(
        pl.col("aliases").fill_null(pl.lit([], dtype=pl.List(pl.String()))),
        pl.col("xrefs").fill_null(pl.lit([], dtype=pl.List(pl.String()))),
    )


def conform_edges(frame: pl.DataFrame, *, strict: bool = False, where: Path | None = None) -> pl.DataFrame:
    """Return ``frame`` with exactly the edge columns; ``id`` is computed where it is missing (``strict`` and
    ``where`` as for :func:`conform_nodes`).

    Raises:
        BundleError: a required column (src, dst, rel, source) is missing, or (``strict``) a column of the
            wrong type.
    """
    out = _conform(frame, EDGE_SCHEMA, _REQUIRED_EDGE, "edge", strict=strict, where=where)
    out = out.with_columns(
        pl.col("count").fill_null(1),
        pl.col("record_ids").fill_null(pl.lit([], dtype=pl.List(pl.String()))),
        pl.col("display").fill_null(pl.col("rel")),
    )
    if out["id"].null_count():
        computed = edge_ids(out)
        out = out.with_columns(pl.coalesce(pl.col("id"), computed).alias("id"))
    return out


def conform_rejects(frame: pl.DataFrame, *, strict: bool = False, where: Path | None = None) -> pl.DataFrame:
    """Return ``frame`` with exactly the reject columns (``strict`` and ``where`` as for :func:`conform_nodes`)."""
    return _conform(frame, REJECT_SCHEMA, ("check", "reason"), "reject", strict=strict, where=where)


def reject_reasons(rejects: pl.DataFrame, top: int = 3) -> list[dict[str, object]]:
    """The ``top`` most frequent checks among ``rejects``: ``check``, ``count``, and the ``reason`` and ``record``
    of the first row that failed it, most frequent first (what a person needs to see why a file was refused)."""
    if rejects.is_empty():
        return []
    grouped = (
        rejects.with_row_index("_order")
        .group_by("check")
        .agg(pl.len().alias("count"), pl.col("_order").min(), pl.col("reason").first(), pl.col("record").first())
        .sort(["count", "_order"], descending=[True, False])
        .head(top)
    )
    return [{k: row[k] for k in ("check", "count", "reason", "record")} for row in grouped.iter_rows(named=True)]


def empty_nodes() -> pl.DataFrame:
    """A node table with no rows."""
    return pl.DataFrame(schema=dict(NODE_SCHEMA))


def empty_edges() -> pl.DataFrame:
    """An edge table with no rows."""
    return pl.DataFrame(schema=dict(EDGE_SCHEMA))


def empty_rejects() -> pl.DataFrame:
    """A rejects table with no rows."""
    return pl.DataFrame(schema=dict(REJECT_SCHEMA))


def edge_ids_expr(src: pl.Expr, rel: pl.Expr, dst: pl.Expr, source: pl.Expr) -> pl.Expr:
    """Stable edge ids: ``e:`` + 16 hex digits of BLAKE3(src, rel, dst, source), vectorised in Rust.

    BLAKE3 through polars-hash gives the same value on every platform and version (unlike polars' own
    ``hash``), so ids written to bundles and databases stay valid. Nulls hash as empty strings.
    """
    key = plh.concat_str([e.fill_null("") for e in (src, rel, dst, source)], separator="\x1f")
    digest: pl.Expr = key.chash.blake3()
    return pl.lit("e:") + digest.str.slice(0, 16)


def edge_ids(frame: pl.DataFrame) -> pl.Series:
    """:func:`edge_id` for every row of a frame with src, rel, dst, source (nulls hash as empty strings)."""
    return frame.select(
        edge_ids_expr(pl.col("src"), pl.col("rel"), pl.col("dst"), pl.col("source")).alias("id")
    ).to_series()


def edge_id(src: str, rel: str, dst: str, source: str) -> str:
    """The stable id of one edge (the same code path as :func:`edge_ids`)."""
    frame = pl.DataFrame({"src": [src], "rel": [rel], "dst": [dst], "source": [source]})
    return str(edge_ids(frame)[0])


def normalise_name_expr(expr: pl.Expr) -> pl.Expr:
    """Names as stored: NFC, trimmed, inner whitespace runs collapsed to one space."""
    return expr.str.normalize("NFC").str.replace_all(r"\s+", " ").str.strip_chars()


def normalise_relation_expr(expr: pl.Expr) -> pl.Expr:
    """Relations as stored: lower-case snake_case of word characters (any script)."""
    return (
        expr.str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(r"[^\w]+", "_")
        .str.replace_all(r"_+", "_")
        .str.strip_chars("_")
    )


RELATION_PATTERN = r"^[^\W_][\w]*$"


def match_key_expr(expr: pl.Expr) -> pl.Expr:
    """The key names are matched on: NFKC, lower case, punctuation and underscores to spaces (``Panic_disorder``
    is *panic disorder*), leading article dropped."""
    return (
        expr.str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(r"(?:[^\w\s]|_)+", " ")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
        .str.replace(r"^(the|a|an) ", "")
    )


@functools.lru_cache(maxsize=65_536)
def match_key(text: str) -> str:
    """:func:`match_key_expr` for one string (the same code path, so both always agree; cached, since a
    polars call costs half a millisecond and questions repeat their concepts and choices)."""
    value = pl.select(match_key_expr(pl.lit(text, dtype=pl.String))).item()
    return str(value)
