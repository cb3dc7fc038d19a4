"""``metakg history ID`` and ``metakg snapshot``: the recorded past of a graph (bundle or Neo4j)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, progress, settings

GRAPH_HELP = (
    "A bundle written with --history, or a Neo4j URI (bolt://127.0.0.1:7687) loaded with --history; default: the "
    "configured Neo4j."
)


def _when(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else "-"


def history(
    element_id: str = typer.Argument(..., metavar="ID", help="A node id (wd:Q42) or an edge id (e:...)."),
    graph: str | None = typer.Option(None, "--graph", "-g", help=GRAPH_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List every recorded version of a node or an edge, oldest first: when metakg recorded and retired it,
    the source's own times (valid from / to, e.g. Wikidata modification times), and what it held.
    Exit 1 when nothing, now or in the history, has this id."""
    cfg = settings()
    with guarded("history", json_mode):
        found = api.element_history(cfg, graph, element_id)
        if not json_mode:
            for v in found:
                what = (
                    f"{v.get('name')} ({v.get('type')})"
                    if v.kind == "node"
                    else f"{v.get('src')} -[{v.get('rel')}]-> {v.get('dst')} count {v.get('count')}"
                )
                state = "current" if v.current else f"retired {_when(v.retired_at)}"
                out.print(
                    f"{v.kind} {escape(element_id)}: recorded {_when(v.recorded_at)}, {state}; "
                    f"valid {_when(v.valid_from)} .. {_when(v.valid_to)}: {escape(what)}",
                    highlight=False,
                )
                if v.get("sources"):
                    out.print(f"  [dim]from {escape('; '.join(v.get('sources')))}[/]", highlight=False)
        finish(
            True,
            {"command": "history", "id": element_id, "versions": [v.as_dict() for v in found]},
            json_mode=json_mode,
        )


def snapshot(
    graph: str | None = typer.Argument(None, metavar="[GRAPH]", help=GRAPH_HELP),
    as_of: str = typer.Option(..., "--as-of", help="The time (ISO 8601; UTC unless an offset is given)."),
    output: Path = typer.Option(..., "--output", "-o", help="New bundle directory for the graph as it was."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write the graph as it was recorded at a time as a bundle: the rows current then, whatever was changed
    or removed since (validate it, query it or load it like any bundle)."""
    cfg = settings()
    with guarded("snapshot", json_mode):
        at = api.parse_time(as_of)
        with progress(f"rebuilding the graph as of {at.isoformat()}"):
            manifest = api.snapshot(cfg, graph, at, output)
        if not json_mode:
            out.print(f"{output}: {manifest.nodes} nodes, {manifest.edges} edges as of {at.isoformat()}")
        finish(
            True,
            {"command": "snapshot", "bundle": str(output), "as_of": at.isoformat(), "nodes": manifest.nodes,
             "edges": manifest.edges, "edge_sources": manifest.counts["edge_sources"]},
            json_mode=json_mode,
        )  # fmt: skip
