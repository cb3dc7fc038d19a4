"""What changed between two versions of a bundle: nodes and edges added, removed and changed.

Rows are matched by id. A row present in both versions is *changed* when a content column differs. Which
columns count is set per table (:data:`NODE_CONTENT`, :data:`EDGE_CONTENT`): the provenance that every run
rewrites (``retrieved_at``, ``created_at``, ``run_id``) does not. List columns are compared as sets, since a
merge does not keep their order. Counts are given in all, per source, and per relation for edges. A few
examples of each kind are kept. The same diff is what an update records in the manifest of the bundle it
writes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from metakg.schemas.bundle import Bundle
from metakg.schemas.tables import conform_edges, conform_nodes

#: the node columns whose difference makes a node changed
NODE_CONTENT = ("name", "type", "source", "description", "aliases", "xrefs", "properties", "revision")
#: the edge columns whose difference makes an edge changed (src, rel and dst are part of the id)
EDGE_CONTENT = ("display", "source", "confidence", "count", "record_ids", "importer", "model", "prompt_hash")


@dataclass
class TableDiff:
    """The diff of one table."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    unchanged: int = 0
    changed_columns: dict[str, int] = field(default_factory=dict)  # column -> rows where it changed
    by_source: dict[str, dict[str, int]] = field(default_factory=dict)  # source -> added/removed/changed
    by_relation: dict[str, dict[str, int]] = field(default_factory=dict)  # edges only
    examples: dict[str, list[str]] = field(default_factory=dict)  # added/removed/changed -> a few rows

    @property
    def total(self) -> int:
        """Rows added, removed or changed."""
        return self.added + self.removed + self.changed


@dataclass
class BundleDiff:
    """The diff of two bundles."""

    nodes: TableDiff
    edges: TableDiff

    @property
    def empty(self) -> bool:
        """True when nothing was added, removed or changed."""
        return self.nodes.total == 0 and self.edges.total == 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"nodes": asdict(self.nodes), "edges": asdict(self.edges), "empty": self.empty}

    def summary(self) -> dict[str, Any]:
        """The counts without the examples and breakdowns (what a manifest records)."""
        return {
            table: {k: getattr(part, k) for k in ("added", "removed", "changed", "unchanged")}
            | {"changed_columns": part.changed_columns}
            for table, part in (("nodes", self.nodes), ("edges", self.edges))
        }


#: the importers whose record ids only say where in the input file the lines stating an edge are
#: (``triples.tsv:12``, ``kg.csv row 12``): a line inserted above shifts them, a renamed file renames them,
#: and neither changes the edge. How many lines state it is its ``count``, which is compared. Other record
#: ids (Wikidata statements, extraction units, a user's own ids such as ``PMID:12345``) are compared.
POSITIONAL_IMPORTERS = ("metakg.ingest.triples", "metakg.ingest.primekg")


def comparable(frame: pl.DataFrame, columns: tuple[str, ...]) -> list[pl.Expr]:
    """``columns`` of ``frame`` in the form rows are compared in: list columns sorted (a merge does not keep
    their order), a missing list as an empty one; the ``record_ids`` of triple files and PrimeKG
    (:data:`POSITIONAL_IMPORTERS`) left out, so a line inserted into such a file changes the edges it states,
    not every edge after it. A diff compares them; a Neo4j load and a bundle's history hash them."""
    compared = []
    for c in columns:
        column = pl.col(c)
        if c == "record_ids" and "importer" in frame.columns:
            positional = pl.col("importer").is_in(POSITIONAL_IMPORTERS).fill_null(False)  # no importer: compared
            column = pl.when(positional).then(None).otherwise(column)
        if isinstance(frame.schema[c], pl.List):
            column = column.fill_null(pl.lit([], dtype=frame.schema[c])).list.sort()
        compared.append(column.alias(c))
    return compared


def content_hash(frame: pl.DataFrame, columns: tuple[str, ...]) -> pl.Expr:
    """A hash of each row's content ``columns`` (:data:`NODE_CONTENT` or :data:`EDGE_CONTENT`: what a diff
    counts as a change), as text, named ``content_hash``: what a database keeps to tell a changed row from
    an unchanged one, and what history compares. Stable for one polars version (a new one may re-load rows)."""
    return pl.struct(comparable(frame, columns)).hash(seed=7).cast(pl.String).alias("content_hash")


def _table_diff(
    old: pl.DataFrame,
    new: pl.DataFrame,
    content: tuple[str, ...],
    groups: tuple[str, ...],
    shown: tuple[str, ...],
    describe: pl.Expr,
    n: int,
) -> TableDiff:
    keep = ("id", *dict.fromkeys((*content, *groups, *shown)))
    left = old.select(keep).with_columns(comparable(old, content))
    right = new.select(keep).with_columns(comparable(new, content))
    joined = left.join(right, on="id", how="full", suffix="_new", coalesce=False, nulls_equal=False)
    present_old, present_new = pl.col("id").is_not_null(), pl.col("id_new").is_not_null()
    differs = {c: pl.col(c).ne_missing(pl.col(f"{c}_new")) for c in content}
    kind = (
        pl.when(present_old & ~present_new)
        .then(pl.lit("removed"))
        .when(~present_old & present_new)
        .then(pl.lit("added"))
        .when(pl.any_horizontal(*differs.values()))
        .then(pl.lit("changed"))
        .otherwise(pl.lit("unchanged"))
    )
    marked = joined.with_columns(kind.alias("_kind"), *(d.alias(f"_d_{c}") for c, d in differs.items()))
    # the grouping columns as the row is now (its old values for a removed row)
    marked = marked.with_columns(pl.coalesce(f"{g}_new", g).alias(f"_g_{g}") for g in groups)
    counts = dict(marked.group_by("_kind").len().iter_rows())
    changed = marked.filter(pl.col("_kind") == "changed")
    columns = {c: int(changed[f"_d_{c}"].sum()) for c in content}
    breakdowns: dict[str, dict[str, dict[str, int]]] = {}
    for g in groups:
        table = marked.filter(pl.col("_kind") != "unchanged").group_by(f"_g_{g}", "_kind").len()
        per: dict[str, dict[str, int]] = {}
        for value, what, count in table.sort(f"_g_{g}", "_kind").iter_rows():
            per.setdefault(str(value), {})[str(what)] = int(count)
        breakdowns[g] = per
    examples: dict[str, list[str]] = {}
    picked: dict[str, pl.DataFrame] = {}
    for what in ("added", "removed", "changed"):
        # the first rows by id: a join's unmatched rows come in no fixed order, and --json must not change
        rows = marked.filter(pl.col("_kind") == what).with_columns(pl.coalesce("id_new", "id").alias("_id"))
        picked[what] = rows = rows.sort("_id").head(n)
        if rows.height:
            examples[what] = [str(v) for v in rows.select(describe).to_series().to_list()]
    if "changed" in examples:
        which = picked["changed"].select(pl.concat_list([pl.when(f"_d_{c}").then(pl.lit(c)) for c in content]))
        examples["changed"] = [
            f"{row} ({', '.join(c for c in cols if c)})"
            for row, cols in zip(examples["changed"], which.to_series().to_list(), strict=True)
        ]
    return TableDiff(
        added=int(counts.get("added", 0)),
        removed=int(counts.get("removed", 0)),
        changed=int(counts.get("changed", 0)),
        unchanged=int(counts.get("unchanged", 0)),
        changed_columns={c: v for c, v in columns.items() if v},
        by_source=breakdowns.get("source", {}),
        by_relation=breakdowns.get("rel", {}),
        examples=examples,
    )


def diff_bundles(old: Bundle, new: Bundle, *, examples: int = 5) -> BundleDiff:
    """The nodes and edges ``new`` adds, removes and changes against ``old`` (matched by id), with up to
    ``examples`` rows of each kind."""
    old_nodes, new_nodes = conform_nodes(old.nodes), conform_nodes(new.nodes)
    old_edges, new_edges = conform_edges(old.edges), conform_edges(new.edges)
    node_text = pl.concat_str(pl.col("_id"), pl.lit(" "), pl.coalesce("name_new", "name"), ignore_nulls=True)
    edge_text = pl.concat_str(
        pl.col("_id"), pl.lit(" "), pl.coalesce("src_new", "src"), pl.lit(" -["), pl.coalesce("rel_new", "rel"),
        pl.lit("]-> "), pl.coalesce("dst_new", "dst"), ignore_nulls=True,
    )  # fmt: skip
    return BundleDiff(
        nodes=_table_diff(old_nodes, new_nodes, NODE_CONTENT, ("source",), ("name",), node_text, examples),
        edges=_table_diff(
            old_edges, new_edges, EDGE_CONTENT, ("source", "rel"), ("src", "rel", "dst"), edge_text, examples
        ),
    )
