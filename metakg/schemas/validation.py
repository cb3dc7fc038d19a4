"""Validation of a bundle: great-expectations suites plus row-level checks, rejects with reasons.

Every row of the input tables ends up accepted or in the rejects table with the name of the check it
failed and a sentence saying why. Checks that great-expectations does not express well (every edge
endpoint exists; no mirrored duplicate edges) are done here in polars.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from metakg.schemas.bundle import Bundle
from metakg.schemas.curie import CURIE_PATTERN, NODE_ID_PATTERN
from metakg.schemas.expectations import ExpectationOutcome, run_suites
from metakg.schemas.tables import RELATION_PATTERN, conform_rejects

REPORT_JSON = "validation.json"
REPORT_HTML = "validation.html"

_CONTROL = r"[\x00-\x1f\x7f]"

#: check name -> what a failing row means (the reason stored in rejects.parquet)
CHECKS: dict[str, str] = {
    "nodes.id_not_null": "node id is null or empty",
    "nodes.id_curie": "node id is not a CURIE (prefix:local)",
    "nodes.name_not_empty": "node name is null or empty",
    "nodes.type_in_vocabulary": "node type is not in the type vocabulary",
    "nodes.aliases_not_empty": "an alias is null or empty",
    "nodes.name_control": "the name or an alias holds a control character (NUL, escape, a line break)",
    "nodes.xrefs_curie": "an xref is null or not a CURIE (prefix:local)",
    "nodes.id_unique": "duplicate node id (an earlier row with this id was kept)",
    "edges.id_not_null": "edge id is null or empty",
    "edges.id_format": "edge id holds whitespace or a control character",
    "edges.endpoints_not_null": "edge src or dst is null or empty",
    "edges.relation_format": "relation is not snake_case word characters",
    "edges.confidence_in_range": "confidence is null or outside [0, 1]",
    "edges.count_positive": "count is null or below 1",
    "edges.id_unique": "duplicate edge id (an earlier row with this id was kept)",
    "edges.endpoint_exists": "src or dst is not an accepted node id",
    "edges.mirrored_symmetric": "mirrored copy of a symmetric relation: merged into the edge kept (its records "
    "join that edge's)",
    "edges.mutual_directed": "the same directed relation also runs the other way between these nodes (both kept)",
}
#: how a check treats the rows it finds: an error rejects them; ``collapsed`` merges them into the edge they
#: copy; a warning keeps them and lists them. A bundle fails validation only on errors.
SEVERITY: dict[str, str] = {"edges.mirrored_symmetric": "collapsed", "edges.mutual_directed": "warning"}


@dataclass
class CheckResult:
    """One check over one table: how many rows it rejected and what great-expectations counted."""

    check: str
    table: str
    description: str
    rejected: int
    gx_unexpected: int | None = None
    severity: str = "error"
    rows: int = 0  # rows the check found (rejected ones for an error)


@dataclass
class ValidationReport:
    """The outcome of validating one bundle."""

    ok: bool
    nodes_in: int
    edges_in: int
    nodes: int
    edges: int
    rejected: int
    failures: list[str]
    table_failures: list[str]
    checks: list[CheckResult] = field(default_factory=list)
    validated_at: str = ""
    warnings: list[str] = field(default_factory=list)
    collapsed: int = 0
    warned: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)  # of warnings and collapses

    @property
    def headline(self) -> str:
        """One line for people: passed or failed, with warnings and collapsed copies counted."""
        if not self.ok:
            failed = f" ({', '.join(self.failures)})" if self.failures else ""  # the checks, table-level ones too
            return f"Validation failed: {self.rejected} rows rejected{failed}"
        notes = [f"{self.warned} rows with warnings" if self.warned else "",
                 f"{self.collapsed} mirrored copies collapsed" if self.collapsed else ""]  # fmt: skip
        return "Validation passed" + (f" ({'; '.join(n for n in notes if n)})" if any(notes) else "")

    def summary(self) -> dict[str, Any]:
        """The JSON summary (also stored in the manifest)."""
        data = asdict(self)
        data["checks"] = [asdict(c) for c in self.checks]
        return data


def first_failure_code(rules: list[tuple[str, pl.Expr]]) -> pl.Expr:
    """The position (UInt8) of the first rule whose expression is true (or null) for a row, else null.

    Args:
        rules: (check name, expression that is true where the row fails), in the order they are tried.
    """
    code: Any = pl.lit(None, dtype=pl.UInt8)
    for number, (_name, failing) in reversed(list(enumerate(rules))):
        code = pl.when(failing.fill_null(True)).then(pl.lit(number, dtype=pl.UInt8)).otherwise(code)
    return code  # type: ignore[no-any-return]


def code_names(code: pl.Expr, rules: list[tuple[str, pl.Expr]]) -> pl.Expr:
    """Rule positions from :func:`first_failure_code` back to rule names.

    A when/then chain streams in bounded memory (``replace_strict`` took gigabytes on 8M rows); compute
    the code into a column first so that it is evaluated once.
    """
    names: Any = pl.lit(None, dtype=pl.String)
    for number, (name, _failing) in reversed(list(enumerate(rules))):
        names = pl.when(code == number).then(pl.lit(name)).otherwise(names)
    return names  # type: ignore[no-any-return]


def first_failure(rules: list[tuple[str, pl.Expr]]) -> pl.Expr:
    """The name of the first rule whose expression is true (or null) for a row, else null."""
    return code_names(first_failure_code(rules), rules)


def _first_failure(frame: pl.DataFrame, rules: list[tuple[str, pl.Expr]]) -> pl.DataFrame:
    """Add ``_check``: the name of the first rule that fails for the row, else null."""
    return frame.with_columns(first_failure(rules).alias("_check"))


def _blank(column: str) -> pl.Expr:
    return pl.col(column).is_null() | (pl.col(column).str.strip_chars() == "")


def _mark_duplicates(frame: pl.DataFrame, check: str) -> pl.DataFrame:
    """Rows that passed so far but repeat an earlier passing row's id get ``check``."""
    passing = pl.col("_check").is_null()
    seen_before = pl.col("_row").rank("ordinal").over(pl.col("id"), passing) > 1
    return frame.with_columns(
        pl.when(passing & seen_before).then(pl.lit(check)).otherwise(pl.col("_check")).alias("_check")
    )


def _any_item(column: pl.Expr, bad: pl.Expr) -> pl.Expr:
    """True where some item of the list ``column`` is null or ``bad`` (every item is checked)."""
    return column.list.eval(pl.element().is_null() | bad).list.any().fill_null(False)


def check_nodes(nodes: pl.DataFrame, types: Iterable[str]) -> pl.DataFrame:
    """Nodes with ``_row`` and ``_check`` (null where the row is accepted)."""
    type_list = sorted(types)
    frame = nodes.with_row_index("_row", offset=1)
    frame = _first_failure(
        frame,
        [
            ("nodes.id_not_null", _blank("id")),
            ("nodes.id_curie", ~pl.col("id").str.contains(NODE_ID_PATTERN)),
            ("nodes.name_not_empty", _blank("name")),
            ("nodes.type_in_vocabulary", ~pl.col("type").is_in(type_list)),
            ("nodes.aliases_not_empty", _any_item(pl.col("aliases"), pl.element().str.strip_chars() == "")),
            (
                "nodes.name_control",  # bit rot, a table edited by hand or written through the API
                pl.col("name").str.contains(_CONTROL).fill_null(False)
                | _any_item(pl.col("aliases"), pl.element().str.contains(_CONTROL)),
            ),
            ("nodes.xrefs_curie", _any_item(pl.col("xrefs"), ~pl.element().str.contains(CURIE_PATTERN))),
        ],
    )
    return _mark_duplicates(frame, "nodes.id_unique")


def check_edges(edges: pl.DataFrame, node_ids: pl.Series, symmetric: Iterable[str] = ()) -> pl.DataFrame:
    """Edges with ``_row``, ``_check`` (null where the row is kept), ``_into`` (the row a collapsed mirror
    joins) and ``_warn`` (a warning about a kept row)."""
    frame = edges.with_row_index("_row", offset=1)
    frame = _first_failure(
        frame,
        [
            ("edges.id_not_null", _blank("id")),
            ("edges.id_format", pl.col("id").str.contains(r"[\s\x00-\x1f\x7f]")),  # bit rot, a hand-made id
            ("edges.endpoints_not_null", _blank("src") | _blank("dst")),
            ("edges.relation_format", ~pl.col("rel").str.contains(RELATION_PATTERN)),
            (
                "edges.confidence_in_range",
                pl.col("confidence").is_null()
                | pl.col("confidence").is_nan()
                | (pl.col("confidence") < 0)
                | (pl.col("confidence") > 1),
            ),
            ("edges.count_positive", pl.col("count").is_null() | (pl.col("count") < 1)),
        ],
    )
    frame = _mark_duplicates(frame, "edges.id_unique")
    passing = pl.col("_check").is_null()
    dangling = ~pl.col("src").is_in(node_ids.implode()) | ~pl.col("dst").is_in(node_ids.implode())
    frame = frame.with_columns(
        pl.when(passing & dangling).then(pl.lit("edges.endpoint_exists")).otherwise(pl.col("_check")).alias("_check")
    )
    # A mirror is (b, rel, a) from the same source when (a, rel, b) is also there. For a symmetric relation
    # it is a copy: the later row of the pair collapses into the earlier one. For a directed relation both
    # are facts (A influenced_by B, B influenced_by A): both are kept, and listed as a warning. One edge of
    # every pair has src > dst, so only those rows are probed; self-loops are not mirrors of themselves.
    alive = frame.filter(pl.col("_check").is_null()).select("_row", "src", "dst", "rel", "source")
    reversed_rows = alive.filter(pl.col("src") > pl.col("dst"))
    pairs = reversed_rows.join(
        alive.filter(pl.col("src") < pl.col("dst")),
        left_on=["src", "dst", "rel", "source"],
        right_on=["dst", "src", "rel", "source"],
        how="inner",
        nulls_equal=True,
        suffix="_mirror",
    ).with_columns(pl.col("rel").is_in(sorted(symmetric)).alias("_symmetric"))
    copies = pairs.filter("_symmetric").select(
        pl.max_horizontal("_row", "_row_mirror").alias("_row"), pl.min_horizontal("_row", "_row_mirror").alias("_into")
    )
    mutual = pairs.filter(~pl.col("_symmetric")).select(pl.concat_list("_row", "_row_mirror").explode().alias("_row"))
    frame = frame.join(copies, on="_row", how="left")
    return frame.with_columns(
        pl.when(pl.col("_into").is_not_null())
        .then(pl.lit("edges.mirrored_symmetric"))
        .otherwise(pl.col("_check"))
        .alias("_check"),
        pl.when(pl.col("_row").is_in(mutual["_row"].implode()))
        .then(pl.lit("edges.mutual_directed"))
        .otherwise(pl.lit(None, dtype=pl.String))
        .alias("_warn"),
    )


def _collapse(accepted: pl.DataFrame, checked: pl.DataFrame) -> pl.DataFrame:
    """``accepted`` edges with the records of the mirrored copies collapsed into them: record ids joined,
    the count at least the number of distinct records (as a merge counts)."""
    copies = checked.filter(pl.col("_check") == "edges.mirrored_symmetric")
    if copies.height == 0:
        return accepted
    extra = copies.group_by("_into").agg(
        pl.col("record_ids").explode().drop_nulls().alias("_more"), pl.col("count").max().alias("_c")
    )
    merged = accepted.join(extra, left_on="_row", right_on="_into", how="left")
    ids = pl.concat_list("record_ids", pl.col("_more").fill_null(pl.lit([], dtype=pl.List(pl.String))))
    return merged.with_columns(
        pl.when(pl.col("_more").is_not_null())
        .then(ids.list.unique(maintain_order=True))
        .otherwise("record_ids")
        .alias("record_ids"),
        pl.when(pl.col("_more").is_not_null())
        .then(pl.max_horizontal("count", "_c", ids.list.unique().list.len().cast(pl.Int64)))
        .otherwise("count")
        .alias("count"),
    ).drop("_more", "_c")


def _rejects_from(checked: pl.DataFrame, table: str, record: pl.Expr) -> pl.DataFrame:
    bad = checked.filter(pl.col("_check").is_not_null() & (pl.col("_check") != "edges.mirrored_symmetric"))
    payload_cols = [c for c in checked.columns if not c.startswith("_")]
    return bad.select(
        pl.lit("validate").alias("stage"),
        pl.lit(table).alias("table"),
        record.alias("record"),
        pl.col("_check").alias("check"),
        pl.col("_check").replace_strict(CHECKS, default="failed check").alias("reason"),
        pl.struct(payload_cols).struct.json_encode().alias("payload"),
    )


def validate(
    bundle: Bundle, types: Iterable[str], *, run_gx: bool = True, symmetric: Iterable[str] | None = None
) -> tuple[Bundle, ValidationReport]:
    """Validate a bundle.

    Args:
        bundle: the bundle as read or built.
        types: the allowed node types (the vocabulary's names).
        run_gx: also run the great-expectations suites (their counts go into the report).
        symmetric: relations whose mirrored copies collapse (default: the shipped vocabulary's).

    Returns:
        The bundle with only accepted rows (new rejects appended to its rejects table, mirrored copies of
        symmetric relations merged into the edges they copy, the validation summary in its manifest) and the
        report. ``report.ok`` is False when any row was rejected or a table-level check failed; warnings
        and collapsed copies do not fail it.
    """
    if symmetric is None:
        from metakg.schemas.vocabulary import default_vocabulary

        symmetric = default_vocabulary().symmetric
    type_set = frozenset(types)
    outcomes: list[ExpectationOutcome] = run_suites(bundle.nodes, bundle.edges, type_set) if run_gx else []
    nodes_checked = check_nodes(bundle.nodes, type_set)
    accepted_nodes = nodes_checked.filter(pl.col("_check").is_null())
    edges_checked = check_edges(bundle.edges, accepted_nodes["id"], symmetric)
    accepted_edges = _collapse(edges_checked.filter(pl.col("_check").is_null()), edges_checked)

    node_record = pl.concat_str(
        pl.lit("nodes row "), pl.col("_row").cast(pl.String), pl.lit(" id="), pl.col("id").fill_null("<null>")
    )
    edge_record = pl.concat_str(
        pl.lit("edges row "), pl.col("_row").cast(pl.String), pl.lit(" id="), pl.col("id").fill_null("<null>")
    )
    new_rejects = pl.concat(
        [_rejects_from(nodes_checked, "nodes", node_record), _rejects_from(edges_checked, "edges", edge_record)]
    )

    table_failures = []
    if accepted_nodes.height == 0:
        table_failures.append("nodes.table_not_empty")
    if bundle.edges.height > 0 and accepted_edges.height == 0:
        table_failures.append("edges.table_not_empty")

    counts = dict(new_rejects.group_by("check").len().iter_rows())
    found = {
        "edges.mirrored_symmetric": edges_checked.filter(pl.col("_check") == "edges.mirrored_symmetric"),
        "edges.mutual_directed": edges_checked.filter(pl.col("_warn") == "edges.mutual_directed"),
    }
    gx_counts: dict[str, int] = {}
    for outcome in outcomes:
        gx_counts[outcome.check] = gx_counts.get(outcome.check, 0) + outcome.unexpected_count
    checks = [
        CheckResult(
            check=name,
            table=name.split(".")[0],
            description=description,
            rejected=int(counts.get(name, 0)),
            gx_unexpected=gx_counts.get(name),
            severity=SEVERITY.get(name, "error"),
            rows=found[name].height if name in found else int(counts.get(name, 0)),
        )
        for name, description in CHECKS.items()
    ]
    failures = [c.check for c in checks if c.rejected] + table_failures
    examples = {
        name: [f"{s} -[{r}]-> {d} ({e})" for e, s, r, d in rows.select("id", "src", "rel", "dst").head(20).iter_rows()]
        for name, rows in found.items()
        if rows.height
    }
    report = ValidationReport(
        ok=not failures,
        nodes_in=bundle.nodes.height,
        edges_in=bundle.edges.height,
        nodes=accepted_nodes.height,
        edges=accepted_edges.height,
        rejected=new_rejects.height,
        failures=failures,
        table_failures=table_failures,
        checks=checks,
        validated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        warnings=[name for name in found if SEVERITY[name] == "warning" and found[name].height],
        collapsed=found["edges.mirrored_symmetric"].height,
        warned=found["edges.mutual_directed"].height,
        examples=examples,
    )
    manifest = dict(bundle.manifest)
    manifest["validation"] = {k: v for k, v in report.summary().items() if k != "checks"}
    out = Bundle(
        nodes=accepted_nodes.drop("_row", "_check"),
        edges=accepted_edges.drop("_row", "_check", "_into", "_warn"),
        rejects=pl.concat([conform_rejects(bundle.rejects), conform_rejects(new_rejects)]),
        manifest=manifest,
    )
    return out, report


def write_reports(report: ValidationReport, rejects: pl.DataFrame, directory: Path, *, html_report: bool) -> list[Path]:
    """Write ``validation.json`` (and ``validation.html``) into ``directory``; return the paths written."""
    written = [directory / REPORT_JSON]
    written[0].write_text(json.dumps(report.summary(), indent=2), encoding="utf-8")
    if html_report:
        path = directory / REPORT_HTML
        path.write_text(render_html(report, rejects), encoding="utf-8")
        written.append(path)
    return written


def render_html(report: ValidationReport, rejects: pl.DataFrame, examples: int = 20) -> str:
    """A self-contained HTML page: the summary, one row per check, and example rejects per check."""
    esc = html.escape
    status = "passed" if report.ok else "failed"
    rows = "".join(
        f"<tr class={'bad' if c.rejected else ('note' if c.rows else 'ok')}><td>{esc(c.check)}</td>"
        f"<td>{esc(c.severity)}</td><td>{esc(c.description)}</td><td>{c.rows}</td><td>{c.rejected}</td>"
        f"<td>{'' if c.gx_unexpected is None else c.gx_unexpected}</td></tr>"
        for c in report.checks
    )
    sections = []
    validate_rejects = rejects.filter(pl.col("stage") == "validate")
    for check in report.failures:
        sample = validate_rejects.filter(pl.col("check") == check).head(examples)
        items = "".join(
            f"<tr><td>{esc(str(r['record']))}</td><td><code>{esc(str(r['payload'])[:500])}</code></td></tr>"
            for r in sample.iter_rows(named=True)
        )
        sections.append(f"<h3>{esc(check)}</h3><table><tr><th>record</th><th>row</th></tr>{items}</table>")
    for check, lines in report.examples.items():
        items = "".join(f"<li><code>{esc(line)}</code></li>" for line in lines)
        sections.append(f"<h3>{esc(check)} ({esc(SEVERITY.get(check, 'error'))}, kept)</h3><ul>{items}</ul>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>metakg validation: {status}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}tr.bad td{{background:#fde8e8}}
tr.note td{{background:#fff8e0}}</style></head>
<body><h1>{esc(report.headline)}</h1>
<p>Nodes: {report.nodes_in} read, {report.nodes} accepted. Edges: {report.edges_in} read, {report.edges}
accepted. Rows rejected: {report.rejected}. Table-level failures: {esc(", ".join(report.table_failures) or "none")}.
Validated at {esc(report.validated_at)}.</p>
<p>Only errors fail a bundle: a warning keeps its rows and lists them; a collapsed mirror of a symmetric
relation is merged into the edge it copies.</p>
<h2>Checks</h2><table><tr><th>check</th><th>severity</th><th>meaning</th><th>rows found</th><th>rows rejected</th>
<th>great-expectations unexpected</th></tr>{rows}</table>
<h2>Examples</h2>{"".join(sections) or "<p>none</p>"}
</body></html>
"""
