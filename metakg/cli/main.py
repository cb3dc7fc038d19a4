"""The ``metakg`` typer app: registers the command groups."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
import typer.core
from typer._click.exceptions import UsageError  # the click typer bundles

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
from metakg.cli._common import emit_json
from metakg.cli.entry import interrupted


class MetakgGroup(typer.core.TyperGroup):
    """The root command: a usage error (an unknown option, a missing argument, a bad value) keeps the --json
    contract, one JSON object as the last line of stdout, and exits with status 2."""

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        given = list(sys.argv[1:] if args is None else args)
        extra["standalone_mode"] = False  # errors come back here instead of being printed and exited on
        try:
            code = super().main(given, *rest, **extra)
        except UsageError as e:
            e.show()
            if "--json" in given:
                command = e.ctx.command_path.removeprefix(self.name or "metakg").strip() if e.ctx else ""
                error = e.format_message()
                emit_json({"ok": False, "command": command, "error": error, "error_type": "UsageError", "exit_code": 2})
            sys.exit(2)
        except (typer.Abort, KeyboardInterrupt):
            interrupted()
        sys.exit(code if isinstance(code, int) else 0)  # typer.Exit(n) comes back as n


app = typer.Typer(
    cls=MetakgGroup,
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
