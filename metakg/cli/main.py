"""The ``metakg`` typer app: registers the command groups."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from metakg import __version__
from metakg.cli import (
    bundle_cmd,
    calibrate_cmd,
    config_cmd,
    demo_cmd,
    export_cmd,
    extract_cmd,
    history_cmd,
    ingest_cmd,
    llm_cmd,
    load_cmd,
    qa_cmd,
    query_cmd,
    serve_cmd,
    sync_cmd,
    synthetic_cmd,
)

app = typer.Typer(
    rich_markup_mode=None,
    name="metakg",
    help="Build, validate, export and query knowledge graphs. Every command takes --json; exit codes: "
    "0 success, 1 data or validation failure, 2 usage or configuration error.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(ingest_cmd.app, name="ingest")
app.add_typer(load_cmd.app, name="load")
app.add_typer(export_cmd.app, name="export")
app.add_typer(query_cmd.app, name="query")
app.add_typer(config_cmd.app, name="config")
app.add_typer(synthetic_cmd.app, name="synthetic")
app.add_typer(llm_cmd.app, name="llm")
app.add_typer(sync_cmd.app, name="sync")
app.add_typer(calibrate_cmd.app, name="calibrate")
app.add_typer(calibrate_cmd.casebank_app, name="casebank")
app.command("validate")(bundle_cmd.validate)
app.command("info")(bundle_cmd.info)
app.command("merge")(bundle_cmd.merge)
app.command("diff")(bundle_cmd.diff)
app.command("embed")(bundle_cmd.embed)
app.command("history")(history_cmd.history)
app.command("snapshot")(history_cmd.snapshot)
app.command("extract")(extract_cmd.extract)
app.command("demo")(demo_cmd.demo)
app.command("ask")(qa_cmd.ask)
app.command("eval")(qa_cmd.evaluate)
app.command("strategies")(qa_cmd.strategies)
app.command("tune")(qa_cmd.tune)
app.command("serve")(serve_cmd.serve)
app.command("mcp")(serve_cmd.mcp)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"metakg {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    config: Path | None = typer.Option(None, "--config", help="TOML settings file (same as METAKG_CONFIG)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """metakg: knowledge graphs from datasets, PrimeKG and Wikidata, validated, loaded and questioned."""
    if config is not None:
        os.environ["METAKG_CONFIG"] = str(config)


def main() -> None:
    """Entry point of the ``metakg`` script."""
    app()
