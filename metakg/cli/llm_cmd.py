"""``metakg llm ...``: the model endpoint (the local SmolLM2 server by default)."""

from __future__ import annotations

import signal
import time

import typer

from metakg import api
from metakg.cli._common import JSON_HELP, err, finish, guarded, out, progress, settings
from metakg.errors import UsageError

app = typer.Typer(
    rich_markup_mode=None,
    help="Run or ask the LLM (any OpenAI-compatible endpoint; local SmolLM2 by default).",
    no_args_is_help=True,
)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@app.command("serve")
def serve(
    port: int | None = typer.Option(None, help="Port on 127.0.0.1 (default: llm.local_port, 8765)."),
) -> None:
    """Run llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct on 127.0.0.1 until
    Ctrl-C or SIGTERM, which stop the server too. Point metakg (or any OpenAI client) at it with
    METAKG_LLM__BASE_URL. A busy port is an error (exit 2)."""
    cfg = settings()
    with guarded("llm serve", False):
        # SIGTERM (kill, systemd, docker stop) ends the command like Ctrl-C, so the server child is stopped too
        signal.signal(signal.SIGTERM, _interrupt)
        server = api.start_local_server(port or cfg.llm.local_port, cfg.llm.local_threads)
        out.print(f"serving {server.model} at {server.base_url} (log: {server.log}); Ctrl-C stops it")
        out.print(f"export METAKG_LLM__BASE_URL={server.base_url}", markup=False, highlight=False)
        try:
            while server.process.poll() is None:
                time.sleep(1)
            err.print(f"[red]the server stopped by itself (status {server.process.returncode}); see {server.log}[/]")
            raise typer.Exit(1)
        except KeyboardInterrupt:
            err.print("stopping")
        finally:
            api.stop_local_server(server)


@app.command("ask")
def ask(
    prompt: str = typer.Argument(..., help="The question."),
    system: str | None = typer.Option(None, help="A system message."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Send one prompt to the configured model (starting the local server when no endpoint is set) and
    print the reply with its token usage. Repeating a prompt is answered from the cache."""
    cfg = settings()
    with guarded("llm ask", json_mode):
        if not prompt.strip():
            raise UsageError("the prompt is empty: nothing to ask the model.")
        with progress("asking") as say:
            say("starting")
            completion, usage = api.llm_reply(cfg, prompt, system=system)
        if not json_mode:
            out.print(completion.text, markup=False, highlight=False)
            err.print(
                f"[dim]{completion.model}: {completion.usage.prompt_tokens} prompt + "
                f"{completion.usage.completion_tokens} completion tokens, "
                f"{'cached' if completion.cached else f'{completion.latency_s:.2f} s'}[/]"
            )
        finish(
            True,
            {
                "command": "llm ask",
                "reply": completion.text,
                "model": completion.model,
                "cached": completion.cached,
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
                **usage.as_dict(),
            },
            json_mode=json_mode,
        )
