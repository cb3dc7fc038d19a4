"""``metakg mcp``: a Model Context Protocol server (the MCP Python SDK; the only module that imports it)
whose read-only tools are the API's routes: search, node, neighbours, paths and ask, over one store opened
for the process."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from metakg import api
from metakg.config import Settings
from metakg.errors import MetakgError, NodeNotFound, UsageError

#: the most results a tool returns, whatever it is asked for (as the HTTP API)
MAX_K = 100
MAX_LIMIT = 1000
MAX_HOPS = 6


def _bounded(name: str, value: int, upper: int) -> int:
    if not 1 <= value <= upper:
        raise UsageError(f"{name} must be from 1 to {upper}, got {value}.")
    return value


def _told(tool: Callable[..., Any]) -> Callable[..., Any]:
    """``tool`` with metakg's errors passed to the client as the tool's error message (the SDK shows the
    client only the messages of ``ToolError``; anything else stays a crash logged on the server)."""
    from mcp.server.mcpserver.exceptions import ToolError

    if inspect.iscoroutinefunction(tool):

        @functools.wraps(tool)
        async def told_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await tool(*args, **kwargs)
            except MetakgError as e:
                raise ToolError(str(e)) from e

        return told_async

    @functools.wraps(tool)
    def told(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        except MetakgError as e:
            raise ToolError(str(e)) from e

    return told


def build(settings: Settings, store: Any, llm: api.SharedLLM | None = None) -> Any:
    """The MCP server over an open store and LLM session (the caller closes both after the server stops)."""
    from mcp.server.mcpserver import MCPServer

    services = api.qa_services(settings, store)  # shared by every ask of the session
    server = MCPServer(
        name="metakg",
        instructions="Read a knowledge graph built with metakg: find nodes by name, read a node and its "
        "neighbours, find paths between two nodes, and ask a question answered with evidence from the graph.",
    )

    @server.tool(description="Nodes whose name or alias matches the text (exact, normalised, then by embedding).")
    @_told
    def search(
        text: str, k: int = 10, mode: Literal["exact", "normalised", "embedding", "auto"] = "auto"
    ) -> list[dict[str, Any]]:
        return [asdict(hit) for hit in store.search(text, mode=mode, k=_bounded("k", k, MAX_K))]

    @server.tool(description="One node's record by its id (e.g. kg:commonsenseqa/car).")
    @_told
    def node(id: str) -> dict[str, Any]:
        found = store.get_node(id)
        if found is None:
            raise NodeNotFound(f"no node with id {id!r}; find ids with the search tool.")
        return asdict(found)

    @server.tool(description="A node's neighbours and the edges to them: outgoing first, then incoming.")
    @_told
    def neighbours(
        id: str, relations: list[str] | None = None, direction: Literal["out", "in", "both"] = "both", limit: int = 50
    ) -> list[dict[str, Any]]:
        found = store.neighbours(
            id, relations=relations, direction=direction, limit=_bounded("limit", limit, MAX_LIMIT)
        )
        return [asdict(nb) for nb in found]

    @server.tool(description="Up to k shortest simple paths between two node ids, of at most max_hops edges.")
    @_told
    def paths(src: str, dst: str, k: int = 3, max_hops: int = 3) -> list[dict[str, Any]]:
        found = store.shortest_paths(
            src, dst, k=_bounded("k", k, MAX_K), max_hops=_bounded("max_hops", max_hops, MAX_HOPS)
        )
        return [asdict(path) | {"hops": path.hops} for path in found]

    @server.tool(description="Answer a question over the graph; returns the answer, its evidence and the trace.")
    @_told
    async def ask(
        question: str, choices: list[str] | None = None, strategy: str | None = None, use_llm: bool = True
    ) -> dict[str, Any]:
        if len(question) > settings.server.max_question_chars:
            raise UsageError(f"the question is longer than {settings.server.max_question_chars} characters.")
        asked = api.make_question(question, choices or [])
        chosen = api.create_strategy(settings, strategy)
        # the answer runs its own event loop: in a worker thread, off the server's loop
        answer = await asyncio.to_thread(
            api.answer_over, settings, store, asked, chosen, use_llm=use_llm, llm=llm, services=services
        )
        return {k: v for k, v in answer.to_dict().items() if k != "trace"} | {"trace": api.trace_lines(answer)}

    return server


def run_stdio(settings: Settings, *, bundle: Path | None = None, neo4j: bool = False) -> None:
    """Serve the tools over stdio until the client closes the stream; the store is opened here and closed
    on the way out.

    Raises:
        UsageError: neither or both of a bundle and Neo4j.
    """
    if (bundle is None) == (not neo4j):
        raise UsageError("serve a bundle (--bundle DIR) or the configured Neo4j database (--neo4j), one of them.")
    with api.open_store(settings, bundle, neo4j=neo4j) as store, closing(api.SharedLLM(settings)) as llm:
        build(settings, store, llm).run("stdio")


def run_http(settings: Settings, *, bundle: Path | None = None, neo4j: bool = False) -> None:
    """Serve the tools over streamable HTTP at ``/mcp`` on ``server.host``:``server.port`` until
    interrupted, with the HTTP API's rules: loopback by default, any other host only with an API key, which
    every request then carries in ``X-API-Key``; bodies up to ``server.max_body_bytes``.

    Raises:
        UsageError: neither or both of a bundle and Neo4j, or a host other than loopback without a key.
    """
    from metakg.server.app import RequestGuard, check_binding, run_asgi, with_key

    if (bundle is None) == (not neo4j):
        raise UsageError("serve a bundle (--bundle DIR) or the configured Neo4j database (--neo4j), one of them.")
    check_binding(settings)
    limits = settings.server
    with api.open_store(settings, bundle, neo4j=neo4j) as store, closing(api.SharedLLM(settings)) as llm:
        app = build(settings, store, llm).streamable_http_app(
            host=limits.host, max_request_body_size=limits.max_body_bytes
        )
        key = limits.api_key.get_secret_value()
        run_asgi(RequestGuard(with_key(app, key) if key else app, settings), settings)
