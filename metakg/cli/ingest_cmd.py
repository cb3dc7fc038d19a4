"""``metakg ingest ...``: sources into a KG bundle."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import (
    HISTORY_HELP,
    JSON_HELP,
    TOLERANCE_HELP,
    err,
    finish,
    guarded,
    out,
    print_reject_reasons,
    progress,
    settings,
)
from metakg.config import Settings

app = typer.Typer(
    rich_markup_mode=None, help="Read a source into a KG bundle (common schema, Parquet).", no_args_is_help=True
)


@app.command("triples")
def triples(
    file: Path = typer.Argument(..., help="Triples: head<TAB>relation<TAB>tail, one per line."),
    dataset: str = typer.Option(..., "--dataset", "-d", help="Scopes node ids: kg:<dataset>/<concept>."),
    output: Path = typer.Option(..., "--output", "-o", help="Bundle directory to write (replaced if it exists)."),
    source: str | None = typer.Option(None, help="Source name stored on nodes and edges (default: the dataset)."),
    node_type: str = typer.Option("concept", "--type", help="Vocabulary type given to every node."),
    confidence: float = typer.Option(1.0, help="Confidence given to every edge, in [0, 1]."),
    separator: str = typer.Option(
        "\t",
        "--separator",
        help="The character between fields: a tab by default (also written '\\t'); MetaQA's kb.txt uses '|'.",
        show_default=False,
    ),
    previous: Path | None = typer.Option(
        None, "--previous", help="The bundle of the earlier version (may be the output itself): its diff is recorded."
    ),
    history: bool | None = typer.Option(None, "--history/--no-history", help=HISTORY_HELP),
    allow_rejects: bool = typer.Option(False, "--allow-rejects", help="Exit 0 even when some lines were rejected."),
    max_rejects: str = typer.Option("0", "--max-rejects", help=TOLERANCE_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Ingest a triple file. Every non-blank line is accepted or rejected with a reason (rejects.parquet);
    repeated triples become one edge with a count. Exit 1 when more lines were rejected than --max-rejects
    allows (the bundle is still written), unless --allow-rejects."""
    cfg = settings()
    with guarded("ingest triples", json_mode):
        api.rejects_tolerated(0, 0, max_rejects)  # a bad value is a usage error before any work
        with progress(f"ingesting {file}") as say:
            report = api.ingest_triples(
                file,
                dataset,
                output,
                cfg,
                source=source,
                node_type=node_type,
                confidence=confidence,
                separator="\t" if separator == "\\t" else separator,  # '\t' as a shell passes it
                previous=previous,
                history=history,
                progress=say,
            )
        if not json_mode:
            out.print(
                f"read {report.read} lines: {report.accepted} accepted, {report.rejected} rejected "
                f"({'a header line, ' if report.header_skipped else ''}{report.blank_lines} blank lines skipped, "
                f"{report.merged_duplicates} repeated triples merged)\n"
                f"bundle {output}: {report.nodes} nodes, {report.edges} edges"
            )
            if report.rejected:
                print_reject_reasons(report.rejected, "lines", report.reject_reasons, output / "rejects.parquet")
        if not report.accepted:  # an empty bundle is never what was meant: exit 1 whatever rejects are allowed
            err.print(f"[yellow]no triple accepted from {escape(str(file))}: the bundle is empty[/]", highlight=False)
        finish(
            bool(report.accepted) and _tolerated(cfg, report.rejected, report.read, max_rejects, allow_rejects),
            {
                "command": "ingest triples",
                "bundle": str(output),
                **report.as_dict(),
                **_diff(output, previous, json_mode),
            },
            json_mode=json_mode,
        )


@app.command("primekg")
def primekg(
    path: Path | None = typer.Argument(
        None, help="kg.csv, or a folder with kg.csv or nodes.csv + edges.csv. Omit with --download."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Bundle directory to write (replaced if it exists)."),
    download: bool = typer.Option(
        False, "--download", help="Fetch kg.csv from Harvard Dataverse into the cache (once) and check its MD5."
    ),
    previous: Path | None = typer.Option(
        None, "--previous", help="The bundle of the earlier version (may be the output itself): its diff is recorded."
    ),
    history: bool | None = typer.Option(None, "--history/--no-history", help=HISTORY_HELP),
    allow_rejects: bool = typer.Option(False, "--allow-rejects", help="Exit 0 even when some rows were rejected."),
    max_rejects: str = typer.Option("0", "--max-rejects", help=TOLERANCE_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Ingest PrimeKG. Node ids are CURIEs from each row's source and id (ncbigene:, drugbank:, mondo:, ...);
    node types map to the vocabulary; the mirrored copy PrimeKG stores of every relationship and exact
    duplicate rows collapse into one edge (counted in the report); bad rows go to rejects.parquet."""
    cfg = settings()
    with guarded("ingest primekg", json_mode):
        api.rejects_tolerated(0, 0, max_rejects)
        with progress("ingesting PrimeKG") as say:
            report = api.ingest_primekg(
                path, output, cfg, download_missing=download, previous=previous, history=history, progress=say
            )
        if not json_mode:
            n = report.conflicting_ids
            conflicts = (
                f"; {n} ids named, typed or indexed two ways (the first kept, other names as aliases)" if n else ""
            )
            out.print(
                f"read {report.read} rows: {report.accepted} accepted, {report.rejected} rejected; "
                f"{report.collapsed_copies} copies collapsed ({report.mirrored_pairs} mirrored pairs, "
                f"{report.exact_duplicates} exact duplicate rows){conflicts}\n"
                f"bundle {output}: {report.nodes} nodes, {report.edges} edges"
            )
            if report.rejected:
                print_reject_reasons(report.rejected, "rows", report.reject_reasons, output / "rejects.parquet")
        finish(
            _tolerated(cfg, report.rejected, report.read, max_rejects, allow_rejects),
            {
                "command": "ingest primekg",
                "bundle": str(output),
                **report.as_dict(),
                **_diff(output, previous, json_mode),
            },
            json_mode=json_mode,
        )


def _tolerated(cfg: Settings, rejected: int, read: int, max_rejects: str, allow_rejects: bool) -> bool:
    """Whether the rejects leave the run ok (exit 0, and ``ok`` in --json): allowed by --allow-rejects or
    ``validation.fail_on_reject = false``, or within --max-rejects."""
    allowed = allow_rejects or not cfg.validation.fail_on_reject
    return allowed or api.rejects_tolerated(rejected, read, max_rejects)


def _diff(output: Path, previous: Path | None, json_mode: bool) -> dict[str, object]:
    """The diff an ingest with --previous recorded, printed for people and returned for --json."""
    if previous is None:
        return {}
    recorded = api.recorded_diff(output)
    if not json_mode:
        for table in ("nodes", "edges"):
            part = getattr(recorded, table) if recorded is not None else {}
            out.print(
                f"against {previous}: {table} +{part.get('added', 0)} added, -{part.get('removed', 0)} removed, "
                f"~{part.get('changed', 0)} changed",
                highlight=False,
            )
    return {"diff": recorded.as_dict() if recorded is not None else {}}
