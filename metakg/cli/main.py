"""The ``metakg`` typer app: registers the command groups."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
import typer.core
from rich.markup import escape
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
    identity_cmd,
    ingest_cmd,
    llm_cmd,
    load_cmd,
    qa_cmd,
    query_cmd,
    serve_cmd,
    sync_cmd,
    synthetic_cmd,
)
from metakg.cli._common import emit_json, err, interrupt_said
from metakg.cli.entry import INTERRUPTED, interrupted

#: the root help's sections, in the order of the work: build, inspect, move, ask, serve, the rest
COMMAND_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Build a graph", ("ingest", "extract", "sync", "merge", "resolve", "identity", "validate", "embed")),
    ("Inspect bundles", ("info", "diff", "history", "snapshot")),
    ("Neo4j and RDF", ("load", "export")),
    ("Query and ask", ("query", "ask", "eval", "tune", "calibrate", "casebank", "strategies")),
    ("Measure extraction", ("eval-extraction",)),
    ("Serve", ("serve", "mcp", "llm")),
    ("Other", ("demo", "config", "synthetic")),
)


class MetakgGroup(typer.core.TyperGroup):
    """The root command: a usage error (an unknown option, a missing argument, a bad value) keeps the --json
    contract, one JSON object as the last line of stdout, and exits with status 2. Its help lists the commands
    in sections, in the order of the work (:data:`COMMAND_SECTIONS`)."""

    def list_commands(self, ctx: Any) -> list[str]:
        known = [name for _title, names in COMMAND_SECTIONS for name in names]
        registered = super().list_commands(ctx)
        return [n for n in known if n in registered] + sorted(n for n in registered if n not in known)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        registered = set(super().list_commands(ctx))
        listed = {name for _title, names in COMMAND_SECTIONS for name in names}
        sections = [*COMMAND_SECTIONS, ("More", tuple(sorted(registered - listed)))]
        width = max((len(n) for n in registered), default=0)
        for title, names in sections:
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name.ljust(width), command.get_short_help_str(limit=formatter.width - width - 6)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        given = list(sys.argv[1:] if args is None else args)
        extra["standalone_mode"] = False  # errors come back here instead of being printed and exited on
        try:
            if (repeated := _repeated_option(self, given)) is not None:
                raise UsageError(repeated)
            code = super().main(given, *rest, **extra)
        except UsageError as e:
            e.show()
            if "--json" in given:
                command = e.ctx.command_path.removeprefix(self.name or "metakg").strip() if e.ctx else ""
                command = command or _command_named(given)
                error = e.format_message()
                emit_json({"ok": False, "command": command, "error": error, "error_type": "UsageError", "exit_code": 2})
            sys.exit(2)
        except (typer.Abort, KeyboardInterrupt):
            interrupted()
        if code == INTERRUPTED and not interrupt_said():
            # typer turns Ctrl-C outside a command's guard (reading the settings, say) into a silent status 130
            interrupted()
        sys.exit(code if isinstance(code, int) else 0)  # typer.Exit(n) comes back as n


def _repeated_option(root: typer.core.TyperGroup, args: Sequence[str]) -> str | None:
    """What is wrong when an option that takes one value is given twice (``ask -b a -b b``, ``-ba -bb``,
    ``--bundle=a``): the parser keeps the last one without a word, so the command would run on a value the
    user may not have meant. A command line asking for help is left to the help."""
    if "--help" in args:
        return None
    command: Any = root
    seen: set[str] = set()
    words = iter(args)
    for word in words:
        if word == "--":
            return None
        options = {
            name: p
            for p in command.params
            if isinstance(p, typer.core.TyperOption) and not p.is_flag and not p.count
            for name in p.opts + p.secondary_opts
        }
        if word.startswith("--"):
            name, attached = word.split("=", 1)[0], "=" in word
        else:  # a short option may carry its value: -b/path
            name, attached = word[:2], len(word) > 2
        option = options.get(name)
        if option is not None:
            if not attached:
                for _ in range(option.nargs):
                    next(words, None)  # its value, whatever it looks like
            if not option.multiple and option.opts[0] in seen:
                return f"{option.opts[0]} takes one value and was given more than once; give it once."
            seen.add(option.opts[0])
        elif isinstance(command, typer.core.TyperGroup) and not word.startswith("-"):
            command, seen = command.commands.get(word), set()
            if command is None:
                return None  # click says what is unknown
    return None


def _command_named(args: Sequence[str]) -> str:
    """The command the arguments name (``info``, ``ingest triples``), skipping the root options, for a usage
    error found before the command was reached (a bad ``--config``)."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--config":
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
            if len(words) == 2 or words[0] not in {group.name for group in app.registered_groups}:
                break
    return " ".join(words)


app = typer.Typer(
    cls=MetakgGroup,
    rich_markup_mode=None,
    name="metakg",
    help="Build, validate, export and query knowledge graphs. Every command but the servers (serve, mcp, "
    "llm serve) takes --json; exit codes: 0 success, 1 data or validation failure, 2 usage or configuration "
    "error, 75 waiting (extract --batch --no-wait), 130 interrupted.",
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
app.add_typer(identity_cmd.app, name="identity")
app.add_typer(calibrate_cmd.app, name="calibrate")
app.add_typer(calibrate_cmd.casebank_app, name="casebank")
app.command("validate")(bundle_cmd.validate)
app.command("info")(bundle_cmd.info)
app.command("merge")(bundle_cmd.merge)
app.command("resolve")(identity_cmd.resolve)
app.command("diff")(bundle_cmd.diff)
app.command("embed")(bundle_cmd.embed)
app.command("history")(history_cmd.history)
app.command("snapshot")(history_cmd.snapshot)
app.command("extract")(extract_cmd.extract)
app.command("eval-extraction")(extract_cmd.eval_extraction)
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
    warnings_to_stderr()
    if config is not None:
        if not config.is_file():
            raise typer.BadParameter(f"{config} is not a file.", param_hint="'--config'")
        os.environ["METAKG_CONFIG"] = str(config)


class _Warnings(logging.Handler):
    """The library's warnings (``metakg`` loggers: a cache that cannot be written, a strategy left out) on
    stderr, as the commands' other remarks are."""

    def emit(self, record: logging.LogRecord) -> None:
        err.print(f"[yellow]warning: {escape(record.getMessage())}[/]", highlight=False)


def warnings_to_stderr() -> None:
    """Show the ``metakg`` loggers' warnings on stderr (once per process)."""
    library = logging.getLogger("metakg")
    if not any(isinstance(h, _Warnings) for h in library.handlers):
        library.addHandler(_Warnings(logging.WARNING))


def main() -> None:
    """Entry point of the ``metakg`` script."""
    app()
