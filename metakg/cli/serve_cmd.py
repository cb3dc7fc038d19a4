"""``metakg serve``: the HTTP API over a bundle or the configured Neo4j database."""

from __future__ import annotations

import typer
from pydantic import SecretStr
from rich.markup import escape

from metakg import api
from metakg.cli._common import err, guarded, settings
from metakg.config import Settings
from metakg.errors import UsageError


def with_server(cfg: Settings, host: str | None, port: int | None, api_key: str | None) -> Settings:
    """``cfg`` with the command line's host, port and key in its ``[server]`` section.

    Raises:
        UsageError: a port outside 1-65535.
    """
    update: dict[str, object] = {}
    if host is not None:
        update["host"] = host
    if port is not None:
        if not 1 <= port <= 65535:
            raise UsageError(f"--port must be from 1 to 65535, got {port}.")
        update["port"] = port
    if api_key:
        update["api_key"] = SecretStr(api_key)
    return cfg.model_copy(update={"server": cfg.server.model_copy(update=update)})


def serve(
    bundle: list[str] = typer.Option(
        [],
        "--bundle",
        "-b",
        help="Serve this bundle (embedded store). Repeat as NAME=DIR to serve several graphs: the first at /, "
        "each other under /graphs/NAME/.",
    ),
    neo4j: bool = typer.Option(False, "--neo4j", help="Serve the configured Neo4j database."),
    neo4j_db: list[str] = typer.Option(
        [], "--neo4j-db", help="Also serve this database of the configured Neo4j server, as NAME=DATABASE."
    ),
    host: str | None = typer.Option(
        None, help="Address to bind (default server.host, 127.0.0.1); any other needs an API key."
    ),
    port: int | None = typer.Option(None, help="TCP port (default server.port, 8000)."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="METAKG_SERVER__API_KEY",
        show_envvar=False,
        help="Require this key in the X-API-Key header (default server.api_key; never printed).",
    ),
    allow_writes: bool = typer.Option(
        False,
        "--allow-writes",
        help="Allow POST /api/triples to add triples to the graph (a served bundle is written back). Default: "
        "read-only (server.allow_writes).",
    ),
) -> None:
    """Serve the graph over HTTP until interrupted: health, graph info, nodes, neighbours, search, paths,
    strategies, ask (also streamed), evaluation runs and the web page, with OpenAPI docs at /docs. Binds to
    127.0.0.1 by default; read-only unless --allow-writes; the store is opened once and closed on shutdown.
    Several graphs (--bundle NAME=DIR repeated, --neo4j-db NAME=DATABASE): the first at /, each other with the
    same routes under /graphs/NAME/, and a graph named in server.graph_keys needs its own API key."""
    from metakg.server import serve as run
    from metakg.server.graphs import parse_graphs

    cfg = settings()
    with guarded("serve", False):
        graphs = parse_graphs(bundle, neo4j, neo4j_db, cfg)
        cfg = with_server(cfg, host, port, api_key)
        if allow_writes:
            cfg = cfg.model_copy(update={"server": cfg.server.model_copy(update={"allow_writes": True})})
        run(cfg, graphs=graphs, announce=lambda line: err.print(f"[dim]{escape(line)}[/]"))


def mcp(
    bundle: list[str] = typer.Option(
        [],
        "--bundle",
        "-b",
        help="Serve this bundle (embedded store). Repeat as NAME=DIR to serve several graphs: every tool then "
        "takes graph, the name of the one to read (default the first).",
    ),
    neo4j: bool = typer.Option(False, "--neo4j", help="Serve the configured Neo4j database."),
    neo4j_db: list[str] = typer.Option(
        [], "--neo4j-db", help="Also serve this database of the configured Neo4j server, as NAME=DATABASE."
    ),
    http: bool = typer.Option(False, "--http", help="Serve over streamable HTTP at /mcp instead of stdio."),
    host: str | None = typer.Option(
        None, help="With --http: address to bind (default server.host, 127.0.0.1); any other needs an API key."
    ),
    port: int | None = typer.Option(None, help="With --http: TCP port (default server.port, 8000)."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="METAKG_SERVER__API_KEY",
        show_envvar=False,
        help="With --http: require this key in the X-API-Key header (default server.api_key; never printed).",
    ),
) -> None:
    """A Model Context Protocol server with read-only tools over the graph: search, node, neighbours, paths
    and ask. On stdio by default (point an MCP client at `metakg mcp --bundle DIR`); with --http, streamable
    HTTP at http://127.0.0.1:8000/mcp."""
    from metakg.server.graphs import parse_graphs
    from metakg.server.mcp_tools import run_http, run_stdio

    cfg = settings()
    with guarded("mcp", False):
        graphs = parse_graphs(bundle, neo4j, neo4j_db, cfg)
        if not http and (host is not None or port is not None or api_key is not None):
            raise UsageError("--host, --port and --api-key are for --http; stdio needs none (its client starts it).")
        for graph in graphs:
            if graph.bundle is not None:
                api.bundle_info(graph.bundle)  # a missing or broken bundle is explained before the protocol starts
        if not http:
            run_stdio(cfg, graphs=graphs)
            return
        cfg = with_server(cfg, host, port, api_key)
        err.print(f"[dim]MCP over HTTP at http://{cfg.server.host}:{cfg.server.port}/mcp[/]")
        run_http(cfg, graphs=graphs)
