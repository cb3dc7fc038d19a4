"""``metakg load ...``: bundles into graph databases."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import JSON_HELP, err, finish, guarded, out, progress_bar, settings, with_rel_types
from metakg.errors import UsageError

app = typer.Typer(rich_markup_mode=None, help="Load a bundle into a graph database.", no_args_is_help=True)


@app.command("neo4j")
def neo4j(
    bundle: Path = typer.Argument(..., help="Bundle directory (validate it first)."),
    batch_size: int | None = typer.Option(
        None, help="Rows per UNWIND ... MERGE transaction (default: neo4j.batch_size)."
    ),
    mode: str = typer.Option(
        "follow",
        "--mode",
        help="follow: the database ends holding exactly the bundle for the bundle's sources (new and changed "
        "rows loaded, rows gone from the bundle removed, other sources untouched); merge: add and update only.",
    ),
    history: bool | None = typer.Option(
        None,
        "--history/--no-history",
        help="follow mode: copy every row the load replaces or removes into a retired version (:MetakgVersion) "
        "first, so `--as-of` and `metakg history` can read the past (default: as the sources' last load).",
    ),
    rel_types: str | None = typer.Option(
        None,
        "--rel-types",
        help="typed: a relationship type per relation; generic: one type RELATED with the relation in r.rel, "
        "for open-vocabulary graphs with many relations; auto: as the database has them, else generic beyond 64 "
        "relations. A layout other than the database's moves the bundle's edges to it (default: neo4j.rel_types, "
        "auto).",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Load a bundle into Neo4j (NEO4J_URI / NEO4J_USER / NEO4J_PASSWORD / NEO4J_DATABASE, default the
    `make neo4j-up` server): uniqueness constraint on the id, name and full-text indexes, a vector index when
    the bundle has embeddings; nodes before edges. By default the database follows the bundle: only rows
    that differ are written, rows the bundle no longer holds are removed, and what an import lacks (name
    keys, embeddings) is added. Loading twice changes nothing; an interrupted load finishes when run again."""
    cfg = settings()
    with guarded("load neo4j", json_mode):
        if mode not in ("follow", "merge"):
            raise UsageError(f"unknown --mode {mode!r}; choose follow or merge.")
        cfg = with_rel_types(cfg, rel_types)
        with progress_bar("loading rows into Neo4j") as advance:
            result = api.load_neo4j(
                bundle,
                cfg,
                batch_size=batch_size,
                progress=advance,
                mode=mode,  # type: ignore[arg-type]
                history=history,
            )
        if result.validated_first and not json_mode:
            first = result.validated_first
            err.print(
                f"[yellow]{bundle} had never been validated: validated first, in place "
                f"({first['rejected']} rows rejected, {first['warned']} warnings; see its validation report)[/]"
            )
        report = result.report
        if isinstance(report, api.LoadReport) and report.checkpoint.startswith("discarded"):
            err.print(f"[yellow]the checkpoint of an earlier load was {report.checkpoint}; everything was loaded[/]")
        if not json_mode and isinstance(report, api.FollowReport):
            out.print(
                f"Neo4j {result.uri} ({result.database}) follows {bundle}: {report.nodes_loaded} nodes "
                f"and {report.edges_loaded} edges loaded (new or changed), {report.nodes_removed} nodes and "
                f"{report.edges_removed} edges removed, {report.nodes_unchanged} nodes and "
                f"{report.edges_unchanged} edges unchanged, {report.seconds:.1f} s"
                + (f"; history kept (recorded at {report.recorded_at})" if report.history else "")
            )
            added = [
                f"{report.edges_relaid} unchanged edges moved to the {report.rel_types} layout"
                if report.edges_relaid
                else "",
                f"name embeddings written on {report.nodes_embedded} unchanged nodes" if report.nodes_embedded else "",
                f"name keys added to {report.keys_added} nodes" if report.keys_added else "",
                "metakg's bookkeeping of an earlier version moved off the graph" if report.load.get("migrated") else "",
            ]
            if any(added):
                out.print("  " + "; ".join(a for a in added if a), highlight=False)
            out.print(f"  relations: {report.rel_types} layout", highlight=False)
            for source, counts in sorted(report.counts_by_source.items()):
                out.print(
                    f"  source {escape(source)}: {counts['nodes']} nodes, {counts['edges']} edges", highlight=False
                )
        elif not json_mode and isinstance(report, api.LoadReport):
            out.print(
                f"Neo4j {result.uri} ({result.database}) now holds {result.nodes_in_neo4j} nodes and "
                f"{result.edges_in_neo4j} edges; {report.batches_run} batches run, "
                f"{report.batches_skipped} skipped (already loaded), {report.seconds:.1f} s"
            )
        finish(
            result.complete,
            {
                "command": "load neo4j",
                "bundle": str(bundle),
                "nodes": result.nodes_in_neo4j,
                "edges": result.edges_in_neo4j,
                **result.as_dict(),
            },
            json_mode=json_mode,
        )
