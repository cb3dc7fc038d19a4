"""Triple files (``head<TAB>relation<TAB>tail``, or another one-character separator such as MetaQA's ``|``)
into the common schema.

Every non-blank line is a record that ends up accepted or rejected with a reason; repeated triples
(after name normalisation) become one edge whose ``count`` says how many lines stated it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from metakg.errors import InputDataError, UsageError
from metakg.ingest.hygiene import has_control, without_invisible
from metakg.progress import Progress
from metakg.schemas.bundle import Bundle, source_entry
from metakg.schemas.curie import check_dataset_name, dataset_id_expr
from metakg.schemas.tables import (
    conform_edges,
    conform_nodes,
    conform_rejects,
    edge_ids,
    normalise_name_expr,
    normalise_relation_expr,
)
from metakg.schemas.validation import code_names, first_failure_code
from metakg.textfiles import as_utf8, strip_bom

IMPORTER = "metakg.ingest.triples"


@dataclass(frozen=True)
class TripleIngestReport:
    """What one ingest run read, accepted and rejected."""

    read: int
    accepted: int
    rejected: int
    blank_lines: int
    merged_duplicates: int
    nodes: int
    edges: int
    header_skipped: bool = False  # the first line named the columns (HEADERS), so it was no triple

    reject_reasons: tuple[dict[str, object], ...] = ()  # the most frequent checks (see reject_reasons)

    def as_dict(self) -> dict[str, object]:
        """The report as plain JSON-able data."""
        return {**self.__dict__, "reject_reasons": list(self.reject_reasons)}


def _name(expr: pl.Expr) -> pl.Expr:
    # LLM-written triples often end a name with sentence punctuation ("lifespan."): a single final full stop,
    # comma, semicolon or colon is not part of the name. "!", "?" and an ellipsis are ("Murder!", "Why Not
    # Me?", "Still Waiting..."), so they stay, and the film Murder! never becomes the tag murder.
    return normalise_name_expr(expr).str.replace(r"([^.])[.,;:]$", "${1}").str.strip_chars()


def _split_lines(data: bytes) -> tuple[list[str | None], list[bytes]]:
    """Decode the file line by line; lines that are not UTF-8 come back as None (raw bytes kept)."""
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    try:
        return list(data.decode("utf-8").split("\n")[: len(raw_lines)]), raw_lines
    except UnicodeDecodeError:
        decoded: list[str | None] = []
        for line in raw_lines:
            try:
                decoded.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                decoded.append(None)
        return decoded, raw_lines


def read_triples(
    path: Path,
    dataset: str,
    *,
    source: str | None = None,
    node_type: str = "concept",
    confidence: float = 1.0,
    max_field_chars: int = 1000,
    run_id: str | None = None,
    progress: Progress | None = None,
    separator: str = "\t",
) -> tuple[Bundle, TripleIngestReport]:
    """Read a triple file into a bundle (not yet validated, not yet written).

    Args:
        path: the triple file.
        dataset: scopes the node ids, ``kg:<dataset>/<concept>``.
        source: the edges' and nodes' ``source``; defaults to ``dataset``.
        node_type: the vocabulary type given to every node.
        confidence: the confidence given to every edge.
        max_field_chars: a field longer than this (after trimming) is rejected.
        run_id: provenance run id; a new one is made when None.
        progress: called with a short stage name as the work advances.
        separator: the one character between fields (a tab by default).

    Returns:
        The bundle and the report; ``report.read == report.accepted + report.rejected``.

    Raises:
        InputDataError: the file cannot be read.
        UsageError: the dataset name cannot scope ids, or ``separator`` is not one character.
    """
    check_dataset_name(dataset)
    if len(separator) != 1 or separator in "\r\n":
        raise UsageError(f"the separator must be one character other than a line break, got {separator!r}.")
    source = source or dataset
    run_id = run_id or uuid.uuid4().hex
    say = progress or (lambda _stage: None)
    say("reading")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputDataError(f"cannot read triple file {path}: {e.strerror or e}.") from e
    decoded, raw_lines = _split_lines(strip_bom(as_utf8(data, path)))
    record_prefix = path.name
    say("parsing")
    lines, blank_lines = _lines(decoded)
    header = lines.height > 0 and int(lines["line_no"][0]) == 1 and _is_header(lines["line"][0], separator)
    if header:
        lines = lines.slice(1)
    parsed = _checked(_parsed(lines, separator), separator, max_field_chars)
    bad = parsed.filter(pl.col("check").is_not_null())
    good = parsed.filter(pl.col("check").is_null())

    say("building nodes")
    rejects = _rejects(bad, decoded, raw_lines, record_prefix)
    nodes, ids = _nodes(good, dataset, node_type, source)

    say("building edges")
    edges = _edges(good, ids, record_prefix, source, confidence, run_id)

    report = TripleIngestReport(
        read=lines.height,
        accepted=good.height,
        rejected=bad.height,
        blank_lines=blank_lines,
        merged_duplicates=good.height - edges.height,
        nodes=nodes.height,
        edges=edges.height,
        header_skipped=header,
    )
    manifest: dict[str, Any] = {
        "sources": [
            source_entry(
                source,
                IMPORTER,
                run_id,
                dataset=dataset,
                input=str(path),
                read=report.read,
                accepted=report.accepted,
                rejected=report.rejected,
            )
        ]
    }
    bundle = Bundle(
        nodes=conform_nodes(nodes), edges=conform_edges(edges), rejects=conform_rejects(rejects), manifest=manifest
    )
    return bundle, report


HEADERS = {
    ("head", "relation", "tail"),
    ("head", "rel", "tail"),
    ("subject", "predicate", "object"),
    ("subject", "relation", "object"),
    ("source", "relation", "target"),
    ("from", "relation", "to"),
    ("h", "r", "t"),
    ("s", "p", "o"),
}
"""First lines that name the columns (any case), read as a header, not as a triple."""


def _is_header(line: str | None, separator: str) -> bool:
    return line is not None and tuple(f.strip().lower() for f in line.split(separator)) in HEADERS


def _lines(decoded: list[str | None]) -> tuple[pl.DataFrame, int]:
    """The file's lines (``None`` for one that is not UTF-8) numbered from 1, invisible characters and a
    final carriage return removed, blank lines left out; and how many were blank."""
    lines = pl.DataFrame(
        {"line": pl.Series(decoded, dtype=pl.String()), "line_no": pl.int_range(1, len(decoded) + 1, eager=True)}
    )
    lines = lines.with_columns(without_invisible(pl.col("line").str.strip_suffix("\r")))
    blank = lines["line"].is_not_null() & (lines["line"].str.strip_chars() == "")
    return lines.filter(~blank), int(blank.sum())


def _parsed(lines: pl.DataFrame, separator: str) -> pl.DataFrame:
    """Each line split into head, relation and tail, the names cleaned and the relation normalised (each
    distinct value once: normalisation is costly per string and names repeat a lot)."""
    fields = pl.col("line").str.split(separator)
    parsed = lines.with_columns(
        fields.list.len().alias("n_fields"),
        fields.list.get(0, null_on_oob=True).alias("raw_head"),
        fields.list.get(1, null_on_oob=True).str.strip_chars().alias("relation"),
        fields.list.get(2, null_on_oob=True).alias("raw_tail"),
    )
    raw_names = pl.concat(
        [parsed.select(pl.col("raw_head").alias("raw")), parsed.select(pl.col("raw_tail").alias("raw"))]
    )
    names = raw_names.unique().with_columns(
        _name(pl.col("raw")).alias("name"), normalise_name_expr(pl.col("raw")).alias("surface")
    )
    relations = (
        parsed.select("relation").unique().with_columns(normalise_relation_expr(pl.col("relation")).alias("rel"))
    )
    return (
        parsed.join(
            names.rename({"raw": "raw_head", "name": "head", "surface": "head_surface"}),
            on="raw_head",
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
        .join(
            names.rename({"raw": "raw_tail", "name": "tail", "surface": "tail_surface"}),
            on="raw_tail",
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
        .join(relations, on="relation", how="left", nulls_equal=True, maintain_order="left")
        .drop("raw_head", "raw_tail")
    )


def _checked(parsed: pl.DataFrame, separator: str, max_field_chars: int) -> pl.DataFrame:
    """``parsed`` with the ``check`` and ``reason`` of the first rule each line fails (null: accepted)."""
    # (check, reason, failing): the first failing rule of a line decides its check and reason
    rules: list[tuple[str, str, pl.Expr]] = [
        ("invalid_utf8", "line is not valid UTF-8", pl.col("line").is_null()),
        ("control_character", "line holds a control character (such as NUL or BEL)", has_control(pl.col("line"))),
        (
            "field_count",
            f"expected 3 {'tab' if separator == chr(9) else repr(separator)}-separated fields (head, relation, "
            "tail), found ",
            pl.col("n_fields") != 3,
        ),
        ("empty_field", "head is empty", pl.col("head") == ""),
        ("empty_field", "relation is empty", pl.col("relation") == ""),
        ("empty_field", "tail is empty", pl.col("tail") == ""),
        *(
            (
                "field_too_long",
                f"{field} is longer than {max_field_chars} characters (ingest.max_field_chars)",
                pl.col(field).str.len_chars() > max_field_chars,
            )
            for field in ("head", "relation", "tail")
        ),
        ("bad_relation", "relation has no letters", ~pl.col("relation").str.contains(r"\p{L}")),
    ]
    parsed = parsed.with_columns(first_failure_code([(c, f) for c, _, f in rules]).alias("_code")).with_columns(
        code_names(pl.col("_code"), [(c, f) for c, _, f in rules]).alias("check"),
        code_names(pl.col("_code"), [(r, f) for _, r, f in rules]).alias("reason"),
    )
    return parsed.with_columns(
        pl.when(pl.col("check") == "field_count")
        .then(pl.col("reason") + pl.col("n_fields").cast(pl.String))
        .otherwise(pl.col("reason"))
        .alias("reason")
    )


def _rejects(bad: pl.DataFrame, decoded: list[str | None], raw_lines: list[bytes], record_prefix: str) -> pl.DataFrame:
    """The rejected lines, each with its check, reason and the line as written (escaped when not UTF-8)."""
    invalid_payload = {
        i + 1: raw_lines[i].decode("utf-8", errors="backslashreplace") for i, t in enumerate(decoded) if t is None
    }
    return bad.select(
        pl.lit("ingest").alias("stage"),
        pl.lit("input").alias("table"),
        (pl.lit(f"{record_prefix}:") + pl.col("line_no").cast(pl.String)).alias("record"),
        pl.col("check"),
        pl.col("reason"),
        pl.coalesce(
            pl.col("line"),
            pl.col("line_no").replace_strict(invalid_payload, default=None, return_dtype=pl.String),
        ).alias("payload"),
    )


def _nodes(good: pl.DataFrame, dataset: str, node_type: str, source: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The nodes of the accepted lines, and each name's id.

    Each distinct name is turned into an id once; mentions keep file order so that the first name seen
    becomes the node's name and the others its aliases, with every surface form as written (a name that
    lost a final full stop keeps it as an alias), so no input string stops being findable."""
    mentions = pl.concat(
        [
            good.select(
                pl.col("head").alias("name"),
                pl.col("head_surface").alias("surface"),
                (pl.col("line_no") * 2).alias("order"),
            ),
            good.select(
                pl.col("tail").alias("name"),
                pl.col("tail_surface").alias("surface"),
                (pl.col("line_no") * 2 + 1).alias("order"),
            ),
        ]
    )
    surface = mentions.group_by("name").agg(pl.col("order").min(), pl.col("surface").unique())
    surface = surface.with_columns(dataset_id_expr(dataset, pl.col("name")).alias("id")).sort("order")
    nodes = (
        surface.group_by("id", maintain_order=True)
        .agg(pl.col("name").first(), pl.col("name").slice(1).alias("_others"), pl.col("surface").explode())
        .with_columns(
            pl.concat_list("_others", "surface")
            .list.unique(maintain_order=True)
            .list.set_difference(pl.concat_list("name"))
            .alias("aliases")
        )
        .drop("_others", "surface")
        .with_columns(pl.lit(node_type).alias("type"), pl.lit(source).alias("source"))
    )
    return nodes, surface.select("name", "id")


def _edges(
    good: pl.DataFrame, ids: pl.DataFrame, record_prefix: str, source: str, confidence: float, run_id: str
) -> pl.DataFrame:
    """One edge per distinct (head, relation, tail), counting the lines that state it, with their record ids."""
    now = datetime.now(UTC)
    triples = (
        good.join(ids.rename({"name": "head", "id": "src"}), on="head", how="left")
        .join(ids.rename({"name": "tail", "id": "dst"}), on="tail", how="left")
        .sort("line_no")
        .with_columns((pl.lit(f"{record_prefix}:") + pl.col("line_no").cast(pl.String)).alias("record"))
    )
    edges = (
        triples.group_by(["src", "rel", "dst"], maintain_order=True)
        .agg(
            pl.col("relation").first().alias("display"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("record").alias("record_ids"),
        )
        .with_columns(
            pl.lit(source).alias("source"),
            pl.lit(confidence, dtype=pl.Float64).alias("confidence"),
            pl.lit(IMPORTER).alias("importer"),
            pl.lit(run_id).alias("run_id"),
            pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("created_at"),
        )
    )
    return edges.with_columns(edge_ids(edges))
