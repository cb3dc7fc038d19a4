"""PrimeKG (Chandak et al. 2023) into the common schema: ``kg.csv``, or ``nodes.csv`` + ``edges.csv``.

- Node ids are CURIEs built from ``x_source``/``x_id`` (``NCBI`` -> ``ncbigene:``, ``MONDO`` ->
  ``mondo:0005148`` zero-padded, grouped MONDO ids -> ``mondo.grouped:``, ``HPO`` -> ``hp:``, ...), never
  names; the PrimeKG ``node_index`` is kept as the xref ``primekg.index:<n>``.
- Node types map to the vocabulary (``gene/protein`` -> ``gene_protein``; ``biological process`` and
  ``biological_process`` alike).
- PrimeKG stores each relationship twice (source and target swapped, same label) and has exact duplicate
  rows: all copies become one edge, oriented from the smaller to the larger id, whose ``count`` says how many
  rows stated it; the report says how many copies were collapsed.
- A row with a missing value, an unknown source or type, an empty id, a malformed index, bytes that are
  not UTF-8, a control character (NUL, BEL, ...) or an id, name or relation longer than
  ``ingest.max_field_chars`` is rejected with its reason; read = accepted + rejected.

The file is scanned lazily with polars, every column as text, so a bad value never stops the read.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from metakg.errors import ConfigError, InputDataError
from metakg.ingest.hygiene import has_control
from metakg.progress import Progress
from metakg.schemas.bundle import Bundle, source_entry
from metakg.schemas.curie import prefix_spec
from metakg.schemas.tables import conform_edges, conform_nodes, edge_ids, normalise_relation_expr
from metakg.schemas.validation import code_names, first_failure_code
from metakg.schemas.vocabulary import default_vocabulary
from metakg.textfiles import strip_bom

IMPORTER = "metakg.ingest.primekg"
KG_COLUMNS = [
    "relation", "display_relation", "x_index", "x_id", "x_type", "x_name", "x_source",
    "y_index", "y_id", "y_type", "y_name", "y_source",
]  # fmt: skip
NODE_COLUMNS = ["node_index", "node_id", "node_type", "node_name", "node_source"]
EDGE_COLUMNS = ["relation", "display_relation", "x_index", "y_index"]
DATAVERSE_KG_URL = "https://dataverse.harvard.edu/api/access/datafile/6180620"
KG_MD5 = "aac8191d4fbc5bf09cdf8c3c78b4e75f"

#: PrimeKG's node sources, each a spelling of a prefix of the vocabulary ([prefixes])
PRIMEKG_SOURCES = ["NCBI", "DrugBank", "MONDO", "MONDO_grouped", "HPO", "UBERON", "GO", "REACTOME", "CTD"]


def _source_prefixes() -> dict[str, tuple[str, int]]:
    """PrimeKG source -> (CURIE prefix, zero-pad numeric ids to this width or 0), from the vocabulary."""
    found = {source: prefix_spec(source) for source in PRIMEKG_SOURCES}
    missing = [source for source, spec in found.items() if spec is None]
    if missing:
        raise ConfigError(f"the vocabulary's [prefixes] has no prefix spelt {missing}: PrimeKG ids need them.")
    return {source: (spec.name, spec.pad) for source, spec in found.items() if spec is not None}


#: PrimeKG source -> (CURIE prefix, zero-pad numeric ids to this width or 0)
SOURCE_PREFIXES = _source_prefixes()


@dataclass(frozen=True)
class PrimeKGReport:
    """What one PrimeKG import read, accepted, rejected and collapsed."""

    read: int
    accepted: int
    rejected: int
    nodes: int
    edges: int
    collapsed_copies: int
    mirrored_pairs: int
    exact_duplicates: int  # rows repeating another's (id, relation, id), whatever their names say
    conflicting_ids: int = 0  # ids the rows name, type or index in more than one way (the first kept)

    reject_reasons: tuple[dict[str, object], ...] = ()  # the most frequent checks (see reject_reasons)

    def as_dict(self) -> dict[str, object]:
        """Plain JSON-able data."""
        return {**self.__dict__, "reject_reasons": list(self.reject_reasons)}


def _scan(path: Path, columns: list[str], *, lossy: bool = False) -> pl.LazyFrame:
    """Scan a CSV with every column as text plus one spare column that catches surplus fields."""
    try:
        with path.open("rb") as fh:
            start = strip_bom(fh.read(4096))
    except OSError as e:
        raise InputDataError(f"cannot read {path}: {e.strerror or e}.") from e
    first = start.split(b"\n", 1)[0]
    header = first.decode("utf-8", errors="replace").strip().split(",")
    if header != columns:
        text = start[:512].decode("utf-8", errors="replace")
        if "\x00" in text or "\ufffd" in text:
            found = f"it looks binary: its first bytes are {start[:8].hex(' ')}"
        else:
            found = f"found {first.decode('utf-8', errors='replace').strip()[:200]!r}"
        raise InputDataError(f"{path} does not have the PrimeKG header {','.join(columns)} ({found}).")
    names = [*columns, "_surplus"]
    return pl.scan_csv(
        path,
        has_header=False,
        skip_rows=1,
        schema={name: pl.String for name in names},
        truncate_ragged_lines=True,
        missing_columns="insert",
        encoding="utf8-lossy" if lossy else "utf8",
    ).with_row_index("_row", offset=2)


def scan_kg(path: Path, *, lossy: bool = False) -> pl.LazyFrame:
    """``kg.csv`` (or a folder holding it, or ``nodes.csv`` + ``edges.csv``) as kg.csv-shaped text columns.

    Raises:
        InputDataError: the path holds neither layout, or a header is wrong.
    """
    if path.is_dir():
        if (path / "kg.csv").is_file():
            return _scan(path / "kg.csv", KG_COLUMNS, lossy=lossy).with_columns(pl.lit(False).alias("_orphan"))
        if (path / "nodes.csv").is_file() and (path / "edges.csv").is_file():
            scanned = _scan(path / "nodes.csv", NODE_COLUMNS, lossy=lossy)
            twice = (
                scanned.group_by("node_index").agg(pl.col("_row").sort())
                .filter(pl.col("_row").list.len() > 1).sort(pl.col("_row").list.first()).head(3).collect()
            )  # fmt: skip
            if twice.height:  # one edge row would become two edges, one of them made up
                said = "; ".join(f"node_index {i!r} on lines {', '.join(map(str, r))}" for i, r in twice.iter_rows())
                raise InputDataError(
                    f"{path / 'nodes.csv'} gives a node_index more than once ({said}): each index names one node. "
                    "Keep one row per index."
                )
            nodes = scanned.drop("_row", "_surplus")
            edges = _scan(path / "edges.csv", EDGE_COLUMNS, lossy=lossy)
            side = {c: c.replace("node_", "") for c in NODE_COLUMNS}
            x = nodes.rename({k: f"x_{v}" for k, v in side.items()})
            y = nodes.rename({k: f"y_{v}" for k, v in side.items()})
            known = nodes.select(pl.col("node_index").alias("_known"), pl.lit(True).alias("_hit"))
            return (
                edges.join(x, on="x_index", how="left", maintain_order="left")
                .join(y, on="y_index", how="left", maintain_order="left")
                .join(known.rename({"_known": "x_index", "_hit": "_x_hit"}), on="x_index", how="left",
                      maintain_order="left")
                .join(known.rename({"_known": "y_index", "_hit": "_y_hit"}), on="y_index", how="left",
                      maintain_order="left")
                .with_columns((pl.col("_x_hit").is_null() | pl.col("_y_hit").is_null()).alias("_orphan"))
                .select("_row", *KG_COLUMNS, "_surplus", "_orphan")
            )  # fmt: skip
        raise InputDataError(f"{path} holds neither kg.csv nor nodes.csv + edges.csv.")
    if path.exists() and not path.is_file():
        raise InputDataError(f"PrimeKG file {path} is not a regular file (a FIFO, device or socket): give kg.csv.")
    if not path.is_file():
        raise InputDataError(
            f"PrimeKG file {path} does not exist. Download kg.csv from Harvard Dataverse (doi:10.7910/DVN/IXA7BM).",
            cli_fix="metakg ingest primekg --download -o BUNDLE",
        )
    return _scan(path, KG_COLUMNS, lossy=lossy).with_columns(pl.lit(False).alias("_orphan"))


def _lookup(expr: pl.Expr, mapping: dict[str, str]) -> pl.Expr:
    """``mapping[value]`` or null, as a when/then chain: unlike ``replace_strict`` it streams in bounded memory
    (on the full 8.1M-row file, ``replace_strict`` alone took a gigabyte), and the mappings here are small."""
    result: Any = pl.lit(None, dtype=pl.String)
    for key, value in reversed(list(mapping.items())):
        result = pl.when(expr == key).then(pl.lit(value)).otherwise(result)
    return result  # type: ignore[no-any-return]


def _curie(source: pl.Expr, local: pl.Expr) -> pl.Expr:
    padded_sources = [name for name, (_prefix, width) in SOURCE_PREFIXES.items() if width]
    padded = pl.when(source.is_in(padded_sources) & local.str.contains(r"^\d+$")).then(local.str.zfill(7))
    prefix = _lookup(source, {name: f"{prefix}:" for name, (prefix, _width) in SOURCE_PREFIXES.items()})
    return prefix + padded.otherwise(local)


def _type(column: pl.Expr) -> pl.Expr:
    lookup = {key.replace(" ", "_"): value for key, value in default_vocabulary().primekg.items()}
    return _lookup(column.str.strip_chars().str.replace_all(" ", "_"), lookup)


#: row check -> the reason stored with a rejected row
REASONS = {
    "unknown_index": "x_index or y_index is no node_index of nodes.csv",
    "missing_value": "a column is missing or empty",
    "surplus_fields": "the row has more than 12 fields",
    "invalid_utf8": "the row has bytes that are not UTF-8",
    "control_character": "a field holds a control character (such as NUL or BEL)",
    "field_too_long": "an id, name or relation is longer than {limit} characters (ingest.max_field_chars)",
    "empty_id": "x_id or y_id is blank",
    "malformed_index": "x_index or y_index is not a whole number from 0 to 4294967295",
    "unknown_source": "x_source or y_source is not a PrimeKG source",
    "unknown_type": "x_type or y_type is not a PrimeKG node type",
    "bad_relation": "relation has no letters",
}


def _index_ok(text: pl.Expr) -> pl.Expr:
    # digits only, and small enough for the UInt32 the indexes are read as (a larger one would become null)
    return text.str.contains(r"^\d+$") & text.cast(pl.UInt32, strict=False).is_not_null()


#: the free-text columns: the ones no lookup checks
TEXT_COLUMNS = ["relation", "display_relation", "x_id", "x_name", "y_id", "y_name"]


def _rules(lossy: bool, max_field_chars: int) -> list[tuple[str, pl.Expr]]:
    """The row checks, in order (``lossy``: the file had bytes that are not UTF-8; ``max_field_chars``: the
    longest id, name or relation accepted)."""
    invalid = (
        pl.any_horizontal([pl.col(c).str.contains("\ufffd", literal=True) for c in KG_COLUMNS])
        if lossy
        else pl.lit(False)
    )
    return [
        ("unknown_index", pl.col("_orphan").fill_null(False)),
        ("missing_value", pl.any_horizontal([pl.col(c).is_null() for c in KG_COLUMNS])),
        ("surplus_fields", pl.col("_surplus").is_not_null()),
        ("invalid_utf8", invalid),
        ("control_character", pl.any_horizontal([has_control(pl.col(c)) for c in TEXT_COLUMNS])),
        ("field_too_long", pl.any_horizontal([pl.col(c).str.len_chars() > max_field_chars for c in TEXT_COLUMNS])),
        ("empty_id", (pl.col("x_id").str.strip_chars() == "") | (pl.col("y_id").str.strip_chars() == "")),
        ("malformed_index", pl.any_horizontal([~_index_ok(pl.col(c)) for c in ("x_index", "y_index")])),
        ("unknown_source", pl.col("_x").is_null() | pl.col("_y").is_null()),
        ("unknown_type", pl.col("_xt").is_null() | pl.col("_yt").is_null()),
        ("bad_relation", ~pl.col("_rel").str.contains(r"\p{L}").fill_null(False)),
    ]


def _checked(scan: pl.LazyFrame, *, lossy: bool, relations: dict[str, str], max_field_chars: int) -> pl.LazyFrame:
    """Derived columns (CURIE ids, vocabulary types, relation) and the row check."""
    rules = _rules(lossy, max_field_chars)
    return (
        scan.with_columns(
            _curie(pl.col("x_source"), pl.col("x_id").str.strip_chars()).alias("_x"),
            _curie(pl.col("y_source"), pl.col("y_id").str.strip_chars()).alias("_y"),
            _type(pl.col("x_type")).alias("_xt"),
            _type(pl.col("y_type")).alias("_yt"),
            _lookup(pl.col("relation"), relations).alias("_rel"),
        )
        .with_columns(first_failure_code(rules).alias("_code"))
        .with_columns(code_names(pl.col("_code"), rules).alias("_check"))
    )


def _kept(checked: pl.LazyFrame) -> pl.LazyFrame:
    """The columns later steps need, with few-valued ones as categoricals (most of the memory is text)."""
    type_enum = pl.Enum(sorted(default_vocabulary().names))
    return checked.select(
        "_row",
        "_check",
        "_x",
        "_y",
        pl.col("_xt").cast(type_enum),
        pl.col("_yt").cast(type_enum),
        pl.col("_rel").cast(pl.Categorical),
        pl.col("display_relation").cast(pl.Categorical),
        pl.col("x_name").cast(pl.Categorical),
        pl.col("y_name").cast(pl.Categorical),
        pl.col("x_index").cast(pl.UInt32, strict=False),
        pl.col("y_index").cast(pl.UInt32, strict=False),
    )


GZIP_MAGIC = b"\x1f\x8b"


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def _read_gzip(
    path: Path, *, source: str, run_id: str, progress: Progress | None, max_field_chars: int
) -> tuple[Bundle, PrimeKGReport]:
    """A gzip-compressed kg.csv, decompressed into a temporary file and read like a plain one."""
    (progress or (lambda _stage: None))("decompressing")
    with tempfile.TemporaryDirectory(prefix="metakg-primekg-") as tmp:
        plain = Path(tmp) / "kg.csv"
        try:
            with gzip.open(path, "rb") as packed, plain.open("wb") as out:
                shutil.copyfileobj(packed, out, 1 << 20)
        except (OSError, EOFError) as e:
            raise InputDataError(f"cannot decompress {path} (gzip): {e}.") from e
        bundle, report = read_primekg(
            plain, source=source, run_id=run_id, progress=progress, max_field_chars=max_field_chars
        )
    # records are named after the file the user gave, not the temporary one
    bundle.rejects = bundle.rejects.with_columns(pl.col("record").str.replace("kg.csv", path.name, literal=True))
    bundle.edges = bundle.edges.with_columns(
        pl.col("record_ids").list.eval(pl.element().str.replace("kg.csv", path.name, literal=True))
    )
    for entry in bundle.manifest.get("sources", []):
        entry["input"] = str(path)
    return bundle, report


def _unparsable(path: Path, error: Exception) -> InputDataError:
    """The error for a file the CSV reader cannot split into rows at all."""
    return InputDataError(
        f"cannot parse {path} as CSV ({str(error).splitlines()[0]}). The usual cause is a field that opens a double "
        "quote and never closes it, which swallows the rest of the file: find the line with an odd number of "
        f"double quotes (e.g. awk -F'\"' 'NF % 2 == 0 {{print NR}}' {path}), fix it, and ingest again."
    )


def _checked_rows(path: Path, max_field_chars: int) -> tuple[pl.DataFrame, bool]:
    """Every row of the file with the columns later steps need and the check it fails (``_check``, null when
    none), in one streaming pass; and whether the text had to be read with bad bytes replaced. Strict UTF-8
    is the fast path: only a file with bad bytes is read again.

    Raises:
        InputDataError: the file cannot be parsed as PrimeKG's CSV.
    """
    try:
        distinct = scan_kg(path, lossy=True).select(pl.col("relation").drop_nulls().unique()).collect()["relation"]
    except pl.exceptions.ComputeError as e:
        raise _unparsable(path, e) from e
    relations = dict(
        zip(distinct.to_list(), pl.select(normalise_relation_expr(pl.lit(distinct))).to_series(), strict=True)
    )
    try:
        checked = _checked(scan_kg(path), lossy=False, relations=relations, max_field_chars=max_field_chars)
        return _kept(checked).collect(engine="streaming"), False
    except pl.exceptions.ComputeError as e:
        if "utf" not in str(e).lower():
            raise _unparsable(path, e) from e
    replaced = _kept(
        _checked(scan_kg(path, lossy=True), lossy=True, relations=relations, max_field_chars=max_field_chars)
    )
    return replaced.collect(engine="streaming"), True


def _rejects(path: Path, bad: pl.DataFrame, lossy: bool, record_prefix: str, max_field_chars: int) -> pl.DataFrame:
    """The rejects table of the rows ``bad`` names (``_row``, ``_check``), each with its text read again."""
    payloads = (
        scan_kg(path, lossy=lossy)
        .filter(pl.col("_row").is_in(bad["_row"].implode()))
        .select(
            "_row",
            pl.concat_str([pl.col(c).fill_null("") for c in [*KG_COLUMNS, "_surplus"]], separator=",").alias("payload"),
        )
        .collect()
        if bad.height
        else pl.DataFrame(schema={"_row": pl.UInt32, "payload": pl.String})
    )
    return bad.join(payloads, on="_row", how="left", maintain_order="left").select(
        pl.lit("ingest").alias("stage"),
        pl.lit("input").alias("table"),
        (pl.lit(f"{record_prefix} row ") + pl.col("_row").cast(pl.String)).alias("record"),
        pl.col("_check").alias("check"),
        pl.col("_check")
        .replace_strict({k: v.format(limit=max_field_chars) for k, v in REASONS.items()})
        .alias("reason"),
        pl.col("payload"),
    )


def _nodes(good: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """One node per id of either side, as the first row naming it has it, and how many ids the rows give
    more than one name, type or index (PrimeKG gives each id one). The other names of such an id become
    aliases and its other indexes xrefs too (PrimeKG's index is an xref), so nothing a row said is lost; the
    first type stays."""
    forms = pl.concat(
        [
            good.select(  # names and types stay categorical (4-byte codes) until each side is deduplicated
                pl.col(f"_{s}").alias("id"),
                pl.col(f"{s}_name").alias("name"),
                pl.col(f"_{s}t").alias("type"),
                pl.col(f"{s}_index").alias("index"),
                pl.col("_row"),
            )
            .unique(["id", "name", "type", "index"], keep="first", maintain_order=True)
            .with_columns(pl.col("name", "type").cast(pl.String))
            for s in ("x", "y")
        ]
    ).sort("_row", maintain_order=True)
    nodes = forms.group_by("id", maintain_order=True).agg(
        pl.col("name").first(),
        pl.col("type").first(),
        pl.col("name").unique(maintain_order=True).slice(1).alias("aliases"),
        (pl.lit("primekg.index:") + pl.col("index").unique(maintain_order=True).cast(pl.String)).alias("xrefs"),
        (pl.struct("name", "type", "index").n_unique() > 1).alias("_conflict"),
    )
    conflicting = int(nodes["_conflict"].sum())
    return nodes.select("id", "name", "type", pl.lit(source).alias("source"), "aliases", "xrefs"), conflicting


def _edge_rows(
    grouped: pl.DataFrame, ids: pl.Series, rel_names: pl.Series, *, source: str, run_id: str, record_prefix: str
) -> pl.DataFrame:
    """The collapsed edges (integer codes ``s``, ``r``, ``d``) as edge rows: ids and relations decoded, the
    first row as the record, the provenance columns and the edge id."""
    edges = grouped.with_columns(
        ids.gather(grouped["s"]).alias("src"),
        ids.gather(grouped["d"]).alias("dst"),
        rel_names.gather(grouped["r"]).alias("rel"),
        (pl.lit(f"{record_prefix} row ") + pl.col("_row").cast(pl.String)).alias("record"),
    ).drop("s", "d", "r", "_row")
    edges = edges.with_columns(
        pl.concat_list("record").alias("record_ids"),
        pl.lit(source).alias("source"),
        pl.lit(1.0).alias("confidence"),
        pl.lit(IMPORTER).alias("importer"),
        pl.lit(run_id).alias("run_id"),
        pl.lit(datetime.now(UTC), dtype=pl.Datetime("us", "UTC")).alias("created_at"),
    ).drop("record", "_orientations")
    return edges.with_columns(edge_ids(edges))


def read_primekg(
    path: Path,
    *,
    source: str = "primekg",
    run_id: str | None = None,
    progress: Progress | None = None,
    max_field_chars: int = 1000,
) -> tuple[Bundle, PrimeKGReport]:
    """Read PrimeKG into a bundle (not yet validated, not yet written).

    Args:
        path: ``kg.csv``, or a folder with ``kg.csv`` or ``nodes.csv`` + ``edges.csv``.
        source: the ``source`` of every node and edge.
        run_id: provenance run id; a new one is made when None.
        progress: called with a short stage name as the work advances.
        max_field_chars: a row whose id, name or relation is longer than this is rejected.

    Raises:
        InputDataError: the file is missing or its header is not PrimeKG's.
    """
    say = progress or (lambda _stage: None)
    run_id = run_id or uuid.uuid4().hex
    if path.is_file() and _is_gzip(path):
        return _read_gzip(path, source=source, run_id=run_id, progress=progress, max_field_chars=max_field_chars)
    say("scanning")
    record_prefix = (
        path.name
        if path.is_file()
        else f"{path.name}/kg.csv"
        if (path / "kg.csv").is_file()
        else f"{path.name}/edges.csv"
    )
    # One streaming pass keeps only what later steps need (the raw text columns are most of the memory);
    # strict UTF-8 is the fast path, and only a file with bad bytes is read again with them replaced.
    table, lossy = _checked_rows(path, max_field_chars)
    say("collecting rejected rows")
    rejects = _rejects(
        path,
        table.filter(pl.col("_check").is_not_null()).select("_row", "_check"),
        lossy,
        record_prefix,
        max_field_chars,
    )
    good = table.filter(pl.col("_check").is_null()).drop("_check")
    del table  # the big frames are let go as soon as the next one is made: PrimeKG has 8 million rows

    say("building nodes")
    nodes, conflicting_ids = _nodes(good, source)
    good = good.drop("x_name", "y_name", "x_index", "y_index")

    say("collapsing mirrored and duplicate rows")
    # Ids become integer codes whose order is the ids' sort order, so orienting (smaller id first) and
    # grouping work on 4-byte integers instead of strings.
    ids = nodes["id"].sort()
    id_type = pl.Enum(ids)
    rel_names = good["_rel"].cast(pl.String).unique().sort()
    coded = good.select(
        pl.col("_x").cast(id_type).to_physical().alias("x"),
        pl.col("_y").cast(id_type).to_physical().alias("y"),
        pl.col("_rel").cast(pl.String).cast(pl.Enum(rel_names)).to_physical().alias("r"),
        pl.col("display_relation").cast(pl.String).alias("display"),
        pl.col("_row"),
    )
    accepted = good.height
    del good
    exact_duplicates = accepted - coded.select("x", "r", "y").n_unique() if accepted else 0
    edges = (
        coded.select(
            pl.min_horizontal("x", "y").alias("s"),
            pl.max_horizontal("x", "y").alias("d"),
            "r",
            (pl.col("x") > pl.col("y")).alias("_flipped"),
            "display",
            "_row",
        )
        .group_by(["s", "r", "d"], maintain_order=True)
        .agg(
            pl.col("display").first(),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("_row").first(),
            pl.col("_flipped").n_unique().alias("_orientations"),
        )
    )
    del coded
    mirrored_pairs = int((edges["_orientations"] == 2).sum())
    edges = _edge_rows(edges, ids, rel_names, source=source, run_id=run_id, record_prefix=record_prefix)

    report = PrimeKGReport(
        read=accepted + rejects.height,
        accepted=accepted,
        rejected=rejects.height,
        nodes=nodes.height,
        edges=edges.height,
        collapsed_copies=accepted - edges.height,
        mirrored_pairs=mirrored_pairs,
        exact_duplicates=exact_duplicates,
        conflicting_ids=conflicting_ids,
    )
    manifest: dict[str, Any] = {
        "sources": [source_entry(source, IMPORTER, run_id, input=str(path), **report.as_dict())]
    }
    return Bundle(conform_nodes(nodes), conform_edges(edges), rejects, manifest), report


def md5_of(path: Path) -> str:
    """The MD5 of a file (PrimeKG publishes the MD5 of kg.csv)."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
