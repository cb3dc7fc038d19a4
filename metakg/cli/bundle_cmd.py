"""Commands on whole bundles: ``validate``, ``info``, ``merge``, ``embed``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from metakg import api
from metakg.cli._common import JSON_HELP, err, finish, guarded, out, progress, progress_bar, settings


def validate(
    bundle: Path = typer.Argument(..., help="Bundle directory."),
    allow_rejects: bool = typer.Option(False, "--allow-rejects", help="Exit 0 even when rows were rejected."),
    accept_changes: bool = typer.Option(
        False,
        "--accept-changes",
        help="Accept tables changed since the bundle was written (otherwise refused) and record their new hashes.",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Validate a bundle in place: great-expectations suites plus referential-integrity and mirror checks.
    Rows failing an error check move to rejects.parquet with their reason; mirrored copies of symmetric
    relations collapse into the edge they copy; a directed relation stated both ways is kept with a warning.
    validation.json and validation.html are written into the bundle. Exit 1 when rows were rejected or a
    table-level check failed (warnings never fail it)."""
    cfg = settings()
    with guarded("validate", json_mode):
        with progress(f"validating {bundle}") as say:
            report = api.validate_bundle(bundle, cfg, accept_changes=accept_changes, progress=say)
        if not json_mode:
            table = Table(title=f"{bundle}: {report.headline}")
            table.add_column("check", no_wrap=True, min_width=max((len(c.check) for c in report.checks), default=5))
            for column in ("severity", "rows found", "rows rejected", "unexpected (gx)"):
                table.add_column(column)  # these wrap before a check's name is cut
            for c in report.checks:
                gx = "" if c.gx_unexpected is None else str(c.gx_unexpected)
                style = "red" if c.rejected else ("yellow" if c.rows else None)
                table.add_row(c.check, c.severity, str(c.rows), str(c.rejected), gx, style=style)
            out.print(table)
            out.print(
                f"nodes {report.nodes_in} -> {report.nodes}, edges {report.edges_in} -> {report.edges}, "
                f"{report.rejected} rows rejected; reports: {bundle / api.REPORT_JSON}, {bundle / api.REPORT_HTML}"
            )
            for failure in report.table_failures:
                err.print(f"[red]table-level failure: {escape(str(failure))}[/]")
        payload = {
            "command": "validate",
            "bundle": str(bundle),
            "nodes": report.nodes,
            "edges": report.edges,
            "nodes_in": report.nodes_in,
            "edges_in": report.edges_in,
            "rejected": report.rejected,
            "failures": report.failures,
            "table_failures": report.table_failures,
            "warnings": report.warnings,
            "warned": report.warned,
            "collapsed": report.collapsed,
        }
        hard_failure = bool(report.table_failures)
        fail = hard_failure or (cfg.validation.fail_on_reject and not allow_rejects)
        finish(report.ok or not fail, payload, json_mode=json_mode)  # ok is exit 0: rejects allowed are ok


def info(
    bundle: Path = typer.Argument(..., help="Bundle directory."),
    top: int = typer.Option(10, min=0, help="How many node types and relations to list."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Summarise a bundle: counts per type and relation, sources, validation status, content hashes (every
    table is checked against them; a changed one is an error, exit 1)."""
    settings()  # a broken settings file or variable is refused by every command (exit 2)
    with guarded("info", json_mode):
        manifest = api.bundle_info(bundle)
        counts = manifest.counts
        if not json_mode:
            validation = manifest.validation
            status = (
                "not validated"
                if not validation
                else ("passed" if validation.get("ok") else f"failed ({', '.join(validation.get('failures', []))})")
            )
            out.print(f"[bold]{bundle}[/] (schema {manifest.schema_version}, written {manifest.written_at})")
            out.print(
                f"nodes {counts.get('nodes', 0)}, edges {counts.get('edges', 0)}, rejects {counts.get('rejects', 0)}; "
                f"validation: {status}"
            )
            for title, key in (
                ("node types", "node_types"),
                ("relations", "relations"),
                ("rejects by check", "rejects_by_check"),
            ):
                items = list(counts.get(key, {}).items())
                if items:
                    table = Table(title=f"{title} ({len(items)})")
                    table.add_column(title)
                    table.add_column("count", justify="right")
                    for name, n in items[:top]:
                        table.add_row(name, str(n))
                    out.print(table)
            for src in manifest.sources:
                out.print(_source_line(src), highlight=False)
            if manifest.embeddings is not None:
                out.print(f"embeddings: {manifest.embeddings.as_dict()}")
        finish(
            True,
            {
                "command": "info",
                "bundle": str(bundle),
                "nodes": manifest.nodes,
                "edges": manifest.edges,
                "rejected": manifest.rejects,
                "manifest": manifest.as_dict(),
            },
            json_mode=json_mode,
        )


#: the entries of a manifest source every importer writes, shown before its own figures
_SOURCE_HEAD = ("name", "input", "importer", "run_id", "at")


def _source_line(src: dict[str, object]) -> str:
    """One line per source: what was read, by what, when, then the figures that importer recorded (an ingest
    counts lines read, accepted and rejected; a Wikidata sync entities and queries; an extraction units and
    calls), each only when recorded."""
    figures = ", ".join(
        f"{key.replace('_', ' ')} {value}"
        for key, value in src.items()
        if key not in _SOURCE_HEAD and isinstance(value, int | float | str) and not isinstance(value, bool)
    )
    where = f": {src['input']}" if src.get("input") else ""
    when = f" at {src['at']}" if src.get("at") else ""
    return f"source {src.get('name')}{where} via {src.get('importer')}{when}" + (f" ({figures})" if figures else "")


def diff(
    old: Path = typer.Argument(..., metavar="OLD", help="The earlier bundle."),
    new: Path = typer.Argument(..., metavar="NEW", help="The later bundle."),
    examples: int = typer.Option(5, "--examples", min=0, max=1000, help="Rows shown per kind of change."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """What NEW adds, removes and changes against OLD: nodes and edges matched by id; a row is changed when
    a content column differs (the columns are named; run provenance such as created_at is not content).
    Counts per source and per relation, with examples. Exit 0 whether or not they differ."""
    settings()  # a broken settings file or variable is refused by every command (exit 2)
    with guarded("diff", json_mode):
        result = api.diff(old, new, examples=examples)
        if not json_mode:
            for name, part in (("nodes", result.nodes), ("edges", result.edges)):
                columns = ", ".join(f"{c} {n}" for c, n in part.changed_columns.items()) or "none"
                out.print(
                    f"[bold]{name}[/] +{part.added} added, -{part.removed} removed, ~{part.changed} changed "
                    f"(columns: {escape(columns)}), {part.unchanged} unchanged"
                )
                for label, groups in (("source", part.by_source), ("relation", part.by_relation)):
                    for value, kinds in list(groups.items())[:20]:
                        text = ", ".join(f"{k} {v}" for k, v in kinds.items())
                        out.print(f"  {label} {escape(value)}: {text}", highlight=False)
                for kind, rows in part.examples.items():
                    for row in rows:
                        out.print(f"  [dim]{kind}: {escape(row)}[/]", highlight=False)
            if result.empty:
                out.print("no difference")
        finish(True, {"command": "diff", "old": str(old), "new": str(new), **result.as_dict()}, json_mode=json_mode)


def merge(
    bundles: list[Path] = typer.Argument(..., help="Bundle directories to merge."),
    output: Path = typer.Option(..., "--output", "-o", help="New bundle directory."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Merge bundles: union of nodes (dedup by id, aliases and xrefs united) and edges (dedup by edge id,
    record ids united, count = distinct supporting records, so merging an input twice changes nothing).
    Validate the result before use."""
    settings()  # a broken settings file or variable is refused by every command (exit 2)
    with guarded("merge", json_mode):
        manifest = api.merge(bundles, output)
        if not json_mode:
            out.print(f"merged {len(bundles)} bundles into {output}: {manifest.nodes} nodes, {manifest.edges} edges")
        finish(
            True,
            {
                "command": "merge",
                "bundle": str(output),
                "inputs": [str(b) for b in bundles],
                "nodes": manifest.nodes,
                "edges": manifest.edges,
                "rejected": manifest.rejects,
            },
            json_mode=json_mode,
        )


def embed(
    bundle: Path = typer.Argument(..., help="Bundle directory."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Embed every node name (all-MiniLM-L6-v2, ONNX) into the bundle's embeddings.parquet, so embedding
    search needs no recomputation. The model comes from METAKG_EMBEDDER__MODEL_DIR or the cache."""
    cfg = settings()
    with guarded("embed", json_mode):
        with progress_bar("embedding node names") as advance:
            result = api.embed_bundle(bundle, cfg, progress=lambda message: err.print(message), counter=advance)
        if not json_mode:
            out.print(f"embedded {result.nodes} node names with {result.model} ({result.dim} dimensions)")
        finish(True, {"command": "embed", "bundle": str(bundle), **result.as_dict()}, json_mode=json_mode)
