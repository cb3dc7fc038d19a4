"""``metakg config show``: the effective settings."""

from __future__ import annotations

import json

import typer

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, settings
from metakg.config import describe_settings

app = typer.Typer(
    rich_markup_mode=None, help="Inspect settings (METAKG_* environment variables, metakg.toml).", no_args_is_help=True
)


@app.command("show")
def show(json_mode: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Print the effective settings after environment variables and the TOML file are applied, checked as a
    command using them checks them (a [qa.<strategy>] key the strategy has not is an error, exit 2)."""
    with guarded("config show", json_mode):
        cfg = settings()
        api.check_settings(cfg)
        data = describe_settings(cfg)
        if not json_mode:
            out.print_json(json.dumps(data))
        finish(True, {"command": "config show", "settings": data}, json_mode=json_mode)
