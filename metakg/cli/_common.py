"""What every command shares: settings, progress on stderr, the --json contract, exit codes.

``--json`` makes a command print exactly one JSON object as the last line of stdout. Exit codes: 0
success, 1 data or validation failure, 2 usage or configuration error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from typer._click.globals import get_current_context  # the click typer bundles

from metakg import api
from metakg.cli.entry import INTERRUPTED_JSON
from metakg.config import Settings, load_settings
from metakg.errors import MetakgError, UsageError

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

JSON_HELP = "Print one JSON object with the results as the last line of stdout."
AS_OF_HELP = (
    "Read the graph as it was recorded at this time (ISO 8601, UTC unless an offset is given; a date means its "
    "end): a bundle written with --history, or a Neo4j loaded with --history."
)
HISTORY_HELP = (
    "Keep history: rows this update removes or changes are retired with their times, not lost (default: keep it "
    "when the earlier version does)."
)
#: the --max-rejects help of the commands that read records
TOLERANCE_HELP = (
    "Rejected records tolerated before the exit status is 1: a count (25) or a share of those read (0.5%) "
    "(default 0: any reject fails; the bundle is written either way)."
)
#: the --format help of the commands that read question sets
QUESTION_FORMAT_HELP = f"{api.formats_help(questions=True)} (docs/formats.md says what each reads)."


def settings() -> Settings:
    """The settings (environment, TOML file); a bad setting exits with status 2 (with the JSON line when the
    running command was given --json)."""
    try:
        return load_settings()
    except MetakgError as e:
        context = get_current_context(silent=True)
        json_mode = bool(context is not None and context.params.get("json_mode"))
        command = context.command_path.split(" ", 1)[-1] if context is not None else ""
        fail(e, json_mode=json_mode, command=command)


def with_rel_types(cfg: Settings, rel_types: str | None) -> Settings:
    """``cfg`` with ``neo4j.rel_types`` from ``--rel-types`` (None: as configured).

    Raises:
        UsageError: a value other than auto, typed or generic.
    """
    if rel_types is None:
        return cfg
    if rel_types not in ("auto", "typed", "generic"):
        raise UsageError(f"unknown --rel-types {rel_types!r}; choose auto, typed or generic.")
    return cfg.model_copy(update={"neo4j": cfg.neo4j.model_copy(update={"rel_types": rel_types})})


def emit_json(payload: dict[str, Any]) -> None:
    """The one JSON line of a --json run."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def fail(error: MetakgError, *, json_mode: bool, command: str = "") -> NoReturn:
    """Report ``error`` (stderr, plus the JSON line with --json) and exit with its code."""
    err.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, markup=True)
    if error.cli_fix:
        err.print(f"  fix: {escape(error.cli_fix)}", highlight=False)
    if json_mode:
        emit_json(
            {
                "ok": False,
                "command": command,
                "error": str(error),
                "error_type": type(error).__name__,
                "exit_code": error.exit_code,
            }
            | ({"fix": error.cli_fix} if error.cli_fix else {})
        )
    raise typer.Exit(error.exit_code)


_interrupt_said = False


def interrupt_said() -> bool:
    """Whether a command body has already said it was interrupted (:func:`guarded`): its exit status 130 then
    needs no second word from the entry point."""
    return _interrupt_said


@contextmanager
def guarded(command: str, json_mode: bool) -> Iterator[None]:
    """Run a command body: MetakgError becomes a clear message and its exit code, never a traceback."""
    global _interrupt_said
    try:
        yield
    except MetakgError as e:
        fail(e, json_mode=json_mode, command=command)
    except KeyboardInterrupt:
        _interrupt_said = True
        err.print("interrupted")
        if json_mode:
            emit_json(json.loads(INTERRUPTED_JSON) | {"command": command})
        raise typer.Exit(130) from None


@contextmanager
def progress(message: str, *, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr whose text the library's progress callback updates."""
    if quiet or not err.is_terminal:

        def log(stage: str) -> None:
            if not quiet:
                err.print(f"[dim]… {escape(stage)}[/]", highlight=False)

        yield log
        return
    with err.status(message) as status:

        def update(stage: str) -> None:
            status.update(escape(f"{message}: {stage}"))

        yield update


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr; the library calls the yielded function with (done, total[, info]).

    ``info`` is a short text shown after the bar (e.g. rate, tokens, cost). Without a terminal, a line is
    logged at every tenth of the way.
    """
    if not err.is_terminal:
        last = [-1]

        def log(done: int, total: int, info: str = "") -> None:
            tenth = 10 * done // max(total, 1)
            if tenth != last[0]:
                last[0] = tenth
                err.print(f"[dim]… {escape(description)}: {done}/{total} {escape(info)}[/]", highlight=False)

        yield log
        return
    with Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}", markup=False),
        console=err,
    ) as bar:
        task = bar.add_task(description, total=None, info="")

        def advance(done: int, total: int, info: str = "") -> None:
            bar.update(task, completed=done, total=total, info=info)

        yield advance


def finish(ok: bool, payload: dict[str, Any], *, json_mode: bool, fail_on_problem: bool = True) -> None:
    """Print the JSON line when asked and exit 1 when the work found data problems."""
    if json_mode:
        emit_json({"ok": ok, **payload})
    if not ok and fail_on_problem:
        raise typer.Exit(1)


def print_reject_reasons(rejected: int, unit: str, reasons: Sequence[Mapping[str, object]], where: Path) -> None:
    """Say on stderr how many records were rejected and why: the most frequent checks with a reason and the
    first record that failed each (so a wrong file is recognised at once), then where the rest are."""
    err.print(f"[yellow]{rejected} {unit} rejected; the most frequent reasons:[/]", highlight=False)
    for reason in reasons:
        err.print(
            f"  {reason['count']} x {escape(str(reason['check']))}: {escape(str(reason['reason']))} "
            f"(first: {escape(str(reason['record']))})",
            highlight=False,
        )
    err.print(f"[yellow]every rejected {unit[:-1]} with its reason: {escape(str(where))}[/]", highlight=False)
