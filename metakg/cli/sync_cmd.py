"""``metakg sync wikidata``: a Wikidata subset over SPARQL into a KG bundle, incrementally."""

from __future__ import annotations

from pathlib import Path

import typer

from metakg import api
from metakg.cli._common import HISTORY_HELP, JSON_HELP, finish, guarded, out, progress, settings

app = typer.Typer(
    rich_markup_mode=None,
    help="Sync a remote source into a KG bundle, fetching only what changed.",
    no_args_is_help=True,
)


@app.command("wikidata")
def wikidata(
    spec: Path = typer.Argument(..., help="Subset spec (YAML): name, seeds, properties, hops, languages, ..."),
    output: Path = typer.Option(..., "--output", "-o", help="Bundle directory to write (replaced if it exists)."),
    endpoint: str | None = typer.Option(
        None, help="SPARQL endpoint (default: wikidata.endpoint, the Wikidata Query Service)."
    ),
    state: Path | None = typer.Option(
        None, help="Sync state file (default: <cache_dir>/wikidata/<name>-<endpoint hash>.json)."
    ),
    history: bool | None = typer.Option(None, "--history/--no-history", help=HISTORY_HELP),
    allow_removals: bool = typer.Option(
        False,
        "--allow-removals",
        help="Apply removals of seeds, or of more than wikidata.max_removed_share of the subset, which otherwise "
        "stop the sync before it writes (an endpoint answering empty results removes everything).",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Sync a Wikidata subset. The first run fetches every entity; later runs check revisions in batches,
    fetch only new or changed entities, drop those that left the subset or were deleted, and follow
    redirects. Labels, descriptions and aliases become node fields, item-valued statements between subset
    entities become edges, literals become node properties, external ids become xrefs and P31 gives the
    type. Nothing is written when the sync fails."""
    cfg = settings()
    with guarded("sync wikidata", json_mode):
        with progress(f"syncing {spec}") as say:
            summary = api.sync_wikidata(
                spec,
                output,
                cfg,
                endpoint=endpoint,
                state_path=state,
                history=history,
                allow_removals=allow_removals,
                progress=say,
            )
        if not json_mode:
            out.print(
                f"{summary.queries} queries ({summary.retries} retries), {summary.entities_fetched} "
                f"entities fetched: {summary.added} added, {summary.changed} changed, {summary.removed} "
                f"removed, {summary.redirected} redirects followed\n"
                f"bundle {output}: {summary.nodes} nodes, {summary.edges} edges; "
                f"validation {'passed' if summary.validation_ok else 'rejected rows'}; state {summary.state}"
            )
        finish(summary.validation_ok, {"command": "sync wikidata", **summary.as_dict()}, json_mode=json_mode)
