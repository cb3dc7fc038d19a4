"""``metakg mcp``: a Model Context Protocol server (the MCP Python SDK; the only module that imports it)
whose read-only tools are the API's routes: search, node, neighbours, paths and ask, over one store opened
for the process.

Over stdio, each line the client writes is checked before the SDK sees it: a line longer than
``server.max_body_bytes`` is skipped unread and a line the SDK cannot parse (not JSON, not JSON-RPC, or
holding a lone UTF-16 surrogate such as ``"\ud800"``) is not handed on; both get a JSON-RPC error reply
instead of silence, and the server goes on serving. Log records are cut to a few hundred characters, so a
huge argument echoed in a message cannot flood stderr."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import IO, Annotated, Any, Literal, cast

from pydantic import Field, Strict

from metakg import api
from metakg.config import Settings
from metakg.errors import MetakgError, UsageError
from metakg.server.graphs import Graph, given_graphs, graph_settings
from metakg.server.served import MAX_HOPS, MAX_K, MAX_LIMIT, ServedGraph, bounded

#: the longest log message written (longer ones are cut, with their length said)
MAX_LOGGED_CHARS = 500
#: the longest traceback written with a log record
MAX_LOGGED_TRACEBACK_CHARS = 4000
logger = logging.getLogger("metakg.mcp")


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


#: what every tool says of a node given to it
NODE_HELP = (
    "A node id (kg:commonsenseqa/car, mondo:0005148, wd:Q42) or a name; a name is resolved as the search tool "
    "resolves it (exact, normalised, a typo, then a close name embedding), and one nothing resembles is an error "
    "listing the closest names."
)
#: a node given to a tool (the tools' signatures are read by the SDK, so their types live at module level)
NodeRef = Annotated[str, Field(min_length=1, max_length=1000, description=NODE_HELP)]
#: the graph a tool reads, on a server of several
GraphRef = Annotated[
    str | None,
    Field(
        max_length=64,
        description="The graph to read, by name, on a server of several graphs (metakg mcp --bundle NAME=DIR "
        "repeated; the server's instructions list them); default: the first.",
    ),
]


def build(settings: Settings, served: ServedGraph | Mapping[str, ServedGraph]) -> Any:
    """The MCP server over an open served graph, or several by name (the first the default; the caller
    closes them after the server stops)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    graphs = dict(served) if isinstance(served, Mapping) else {"default": served}
    first = next(iter(graphs))

    def pick(graph: str | None) -> ServedGraph:
        if graph is None:
            return graphs[first]
        if graph not in graphs:
            raise UsageError(f"no graph {graph!r} here; this server has {', '.join(graphs)}.")
        return graphs[graph]

    strategies = {d.name: d.summary for d in api.describe_strategies()}
    listed = "; ".join(f"{name}: {summary.rstrip('.')}" for name, summary in strategies.items())
    open_world = "robodata" in strategies
    server = _ToolList()
    reads = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def resolved(on: ServedGraph, ref: str) -> str:
        return str(on.resolve(ref).id)

    @server.tool(
        title="Find nodes by name",
        description="Nodes whose name or one of its aliases matches the text, best first, each with a score in "
        "[0, 1] and how it matched. mode auto (the default) gives the exact matches, then the normalised ones "
        "(case, punctuation and a leading article ignored), then typos (fuzzy: one letter edit from 5 letters, "
        "two from 9), then the names most like it by embedding, until k nodes are found; the other modes ask "
        "one way only. Use it to turn a name into the ids the other tools take.",
        annotations=reads,
    )
    @_told
    def search(
        text: Annotated[str, Field(min_length=1, max_length=1000, description="The name to look for.")],
        k: Annotated[int, Strict(), Field(ge=1, le=MAX_K, description=f"At most this many nodes (1 to {MAX_K}).")] = 10,
        mode: Annotated[
            Literal["exact", "normalised", "fuzzy", "embedding", "auto"],
            Field(description="How to match: auto (every way, in that order), or one way only."),
        ] = "auto",
        graph: GraphRef = None,
    ) -> list[dict[str, Any]]:
        return [asdict(hit) for hit in pick(graph).search(text, mode=mode, k=k)]

    @server.tool(
        title="Read a node",
        description="One node's record: id, name, type (a vocabulary type: drug, disease, gene_protein, "
        "concept, ...), source, description, aliases and xrefs (its ids in other sources).",
        annotations=reads,
    )
    @_told
    def node(id: NodeRef, graph: GraphRef = None) -> dict[str, Any]:
        return asdict(pick(graph).resolve(id))

    @server.tool(
        title="A node's neighbours",
        description="The nodes one edge away from a node, each with the edge (relation, its display text, "
        "source, confidence, how many records state it) and its direction: outgoing edges first, then incoming, "
        "each side in edge-id order, at most limit in all. relations keeps only edges of those relations.",
        annotations=reads,
    )
    @_told
    def neighbours(
        id: NodeRef,
        relations: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=200)]] | None,
            Field(max_length=100, description="Only edges of these relations (snake_case, e.g. treats)."),
        ] = None,
        direction: Annotated[
            Literal["out", "in", "both"], Field(description="out: edges from the node; in: edges to it.")
        ] = "both",
        limit: Annotated[
            int, Strict(), Field(ge=1, le=MAX_LIMIT, description=f"At most this many (1 to {MAX_LIMIT}).")
        ] = 50,
        graph: GraphRef = None,
    ) -> list[dict[str, Any]]:
        on = pick(graph)
        found = on.neighbours(
            resolved(on, id), relations=relations, direction=direction, limit=bounded("limit", limit, MAX_LIMIT)
        )
        return [asdict(nb) for nb in found]

    @server.tool(
        title="Paths between two nodes",
        description="Up to k shortest simple paths (no node twice) between two nodes, following edges in either "
        "direction, of at most max_hops edges; each path lists its node ids and its edges, shortest first. "
        "An empty list means no path within max_hops.",
        annotations=reads,
    )
    @_told
    def paths(
        src: NodeRef,
        dst: NodeRef,
        k: Annotated[int, Strict(), Field(ge=1, le=MAX_K, description=f"At most this many paths (1 to {MAX_K}).")] = 3,
        max_hops: Annotated[
            int, Strict(), Field(ge=1, le=MAX_HOPS, description=f"The longest path, in edges (1 to {MAX_HOPS}).")
        ] = 3,
        graph: GraphRef = None,
    ) -> list[dict[str, Any]]:
        on = pick(graph)
        found = on.paths(resolved(on, src), resolved(on, dst), k=k, max_hops=max_hops)
        return [asdict(path) | {"hops": path.hops} for path in found]

    @server.tool(
        title="Ask the graph",
        description="Answer a question with evidence from the graph: the answer (text, and the chosen letter for "
        "a multiple-choice question), its evidence (paths and triples whose node and edge ids exist in the "
        "graph), the strategy's trace and what it cost (LLM calls, tokens). Strategies: " + listed.rstrip(".") + ". "
        "use_llm false retrieves the evidence only (concepts by rules, no LLM call); the answer is then "
        "marked failed with that reason, and the evidence is what it found.",
        # a strategy that reads a service beyond the graph (RoboData asks Wikidata) makes the tool open-world
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=open_world),
    )
    @_told
    async def ask(
        question: Annotated[str, Field(min_length=1, description="The question, in natural language.")],
        choices: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=500)]] | None,
            Field(max_length=26, description='Multiple-choice options, each "A: text" (letter, colon, text).'),
        ] = None,
        strategy: Annotated[
            str | None,
            Field(min_length=1, max_length=64, description="A strategy the description lists (default: metakgrag)."),
        ] = None,
        use_llm: Annotated[bool, Strict(), Field(description="False: retrieval only, no LLM call.")] = True,
        graph: GraphRef = None,
    ) -> dict[str, Any]:
        on = pick(graph)
        cfg, asked, chosen = on.question(question, choices or [], strategy=strategy)
        # the answer runs its own event loop: in a worker thread, off the server's loop
        answer = await asyncio.to_thread(on.answer, cfg, asked, chosen, use_llm=use_llm)
        return {k: v for k, v in answer.to_dict().items() if k != "trace"} | {"trace": api.trace_lines(answer)}

    return MCPServer(
        name="metakg",
        instructions="Read a knowledge graph built with metakg: find nodes by name (search), read a node "
        "(node) and its neighbours (neighbours), find paths between two nodes (paths), and ask a question "
        "answered with evidence from the graph (ask). Every tool only reads; nodes may be given by id or by "
        "name. Ids look like kg:<dataset>/<name>, or the source's own CURIE (mondo:0005148, drugbank:DB00945, "
        "wd:Q42); relations are snake_case words (treats, is_a)."
        + (
            f" This server has {len(graphs)} graphs: {', '.join(graphs)}; every tool takes graph, the name of the "
            f"one to read (default {first})."
            if len(graphs) > 1
            else ""
        ),
        tools=server.tools,
    )


class _ToolList:
    """Collects tools as ``MCPServer.tool`` would register them, but each refusing an argument it does not take:
    the SDK's argument models drop an unknown key, so a misspelt ``strategy`` ran the default strategy and a
    misspelt ``limit`` the default limit, where the REST API refuses both (422)."""

    def __init__(self) -> None:
        self.tools: list[Any] = []

    def tool(self, **described: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator: ``fn`` as a tool (``described``: its title, description and annotations)."""
        from mcp.server.mcpserver.tools import Tool

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            made = _concise(Tool.from_function(fn, **described))
            loose = made.fn_metadata.arg_model
            strict: Any = type(loose.__name__, (loose,), {"model_config": {**loose.model_config, "extra": "forbid"}})
            made.fn_metadata.arg_model = strict  # read on each call
            made.parameters = strict.model_json_schema(by_alias=True)  # says additionalProperties: false
            self.tools.append(made)
            return fn

        return register


def _concise(tool: Any) -> Any:
    """``tool`` answering a bad argument with one line per argument, naming it and its bound (``k: Input
    should be less than or equal to 20``), as the HTTP API's 422 does, instead of pydantic's whole report with
    its links."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class Concise(type(tool)):  # type: ignore[misc]
        async def run(self, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().run(arguments, *args, **kwargs)
            except ToolError as e:
                cause = e.__cause__
                if not isinstance(cause, ValidationError):
                    raise
                said = "; ".join(
                    f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                    for error in cause.errors(include_url=False)
                )
                raise ToolError(f"bad arguments for {self.name}: {said}") from None

    return Concise.model_construct(**{name: getattr(tool, name) for name in type(tool).model_fields})


@contextmanager
def _opened(settings: Settings, graphs: Sequence[Graph]) -> Iterator[dict[str, ServedGraph]]:
    """Each of ``graphs`` opened for the tools, by name (closed on the way out)."""
    several = len(graphs) > 1
    made = {
        g.name: ServedGraph(
            graph_settings(settings, g, several=several), bundle=g.bundle, neo4j=g.neo4j, evaluations=False
        )
        for g in graphs
    }  # each checks its choice before any is opened
    with ExitStack() as stack:
        yield {name: stack.enter_context(graph) for name, graph in made.items()}


def run_stdio(
    settings: Settings, *, bundle: Path | None = None, neo4j: bool = False, graphs: Sequence[Graph] = ()
) -> None:
    """Serve the tools over stdio until the client closes the stream; the stores are opened here and closed
    on the way out. ``graphs``: several graphs, by name, instead of one ``bundle`` or Neo4j.

    Raises:
        UsageError: no graph, or a bundle and Neo4j both.
    """
    import anyio

    with _opened(settings, given_graphs(bundle, neo4j, graphs, settings)) as served:
        server = build(settings, served)
        bound_logs()
        anyio.run(serve_stdio, server, settings.server.max_body_bytes)


def run_http(
    settings: Settings, *, bundle: Path | None = None, neo4j: bool = False, graphs: Sequence[Graph] = ()
) -> None:
    """Serve the tools over streamable HTTP at ``/mcp`` on ``server.host``:``server.port`` until
    interrupted, with the HTTP API's rules: loopback by default, any other host only with an API key, which
    every request then carries in ``X-API-Key``; bodies up to ``server.max_body_bytes``.

    Raises:
        UsageError: no graph, a bundle and Neo4j both, or a host other than loopback without a key.
    """
    from metakg.server.app import RequestGuard, check_binding, run_asgi, with_key

    chosen = given_graphs(bundle, neo4j, graphs, settings)
    check_binding(settings)
    limits = settings.server
    with _opened(settings, chosen) as served:
        app = build(settings, served).streamable_http_app(host=limits.host, max_request_body_size=limits.max_body_bytes)
        bound_logs()
        key = limits.api_key.get_secret_value()
        run_asgi(RequestGuard(with_key(app, key) if key else app, settings), settings)


# ---------------------------------------------------------------------------- bounded logs
class _Bounded(logging.Filter):
    """Cuts a record's message to :data:`MAX_LOGGED_CHARS` and its traceback to
    :data:`MAX_LOGGED_TRACEBACK_CHARS` (a client's 10 MB argument echoed in an error stays out of the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Shorten the record in place; never drops it."""
        message = record.getMessage()
        shortened = _cut(message)
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            said = "".join(traceback.format_exception_only(type(error), error)).strip()
            frames = "".join(traceback.format_tb(error.__traceback__))
            if len(said) > MAX_LOGGED_CHARS or len(said) + len(frames) > MAX_LOGGED_TRACEBACK_CHARS:
                tail = frames[-(MAX_LOGGED_TRACEBACK_CHARS - MAX_LOGGED_CHARS) :]
                shortened = f"{shortened}\nTraceback (the last frames):\n{tail}{_cut(said)}"
                record.exc_info, record.exc_text = None, None
        if shortened != message:
            record.msg, record.args = shortened, None
        return True


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LOGGED_CHARS else f"{text[:MAX_LOGGED_CHARS]}… ({len(text)} characters)"


def bound_logs() -> None:
    """Bound every record the handlers of the root logger write (the SDK logs there, to stderr)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _Bounded) for f in handler.filters):
            handler.addFilter(_Bounded())


# ---------------------------------------------------------------------------- the stdio transport
#: the id of a message too long to parse, when it comes first (or after "jsonrpc" and "method")
_LEADING_ID = re.compile(
    r'^\s*\{\s*(?:"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,100}"\s*,\s*){0,2}"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,200}")\s*[,}]'
)


def _leading_id(head: str) -> int | str | None:
    found = _LEADING_ID.match(head)
    return cast(int | str, json.loads(found.group(1))) if found else None


class ClientLines:
    """The client's messages (one a line on stdin) for the SDK's stdio transport, checked first: a line over
    ``max_bytes`` is skipped without being read whole, and a line the SDK cannot parse is kept from it;
    each gets a JSON-RPC error (id null when it cannot be told) through :meth:`attach`'s stream."""

    def __init__(self, wire: IO[bytes], max_bytes: int) -> None:
        """Read lines from the binary stream ``wire``; refuse those over ``max_bytes`` (terminator aside)."""
        import anyio

        self._wire = wire
        self._max = max_bytes
        self._replies: Any = None
        self._attached = anyio.Event()
        self._asked: set[int | str] = set()  # ids of the requests passed on that the server has not answered

    def attach(self, replies: Any) -> None:
        """The stream the SDK writes its messages to stdout from; refusals go there."""
        self._replies = replies
        self._attached.set()

    def answered(self, request_id: Any) -> None:
        """The server replied to ``request_id`` (:class:`_Answers` tells)."""
        self._asked.discard(request_id)

    def __aiter__(self) -> ClientLines:
        return self

    async def _drain(self) -> None:
        """At the end of the client's input, wait for the replies to the requests passed on (at most
        :data:`DRAIN_S`): the SDK cancels what is in flight when its input ends, so a client that writes its
        requests and closes its end at once would get no answer."""
        import anyio

        with anyio.move_on_after(DRAIN_S):
            while self._asked:
                await anyio.sleep(0.02)
        if self._asked:
            logger.warning("input ended; %d request(s) still unanswered after %g s", len(self._asked), DRAIN_S)

    def _note(self, parsed: Any) -> None:
        """Keep the id of a request passed on (``parsed``: the message); forget one the client cancels."""
        if not isinstance(parsed, dict) or not isinstance(parsed.get("method"), str):
            return
        if "id" in parsed:
            self._asked.add(parsed["id"])
        elif parsed["method"] == "notifications/cancelled" and isinstance(parsed.get("params"), dict):
            self._asked.discard(parsed["params"].get("requestId"))

    async def __anext__(self) -> str:
        import anyio
        from mcp import types

        while True:
            head, size = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if not head:
                await self._drain()
                raise StopAsyncIteration
            text = head.decode("utf-8", errors="replace")  # as the SDK's own reader decodes
            if size > self._max:
                message = (
                    f"the message is {size} bytes, more than server.max_body_bytes ({self._max}); it was not read. "
                    "Send a smaller request (or raise server.max_body_bytes)."
                )
                await self._refuse(_leading_id(text), types.INVALID_REQUEST, message)
                continue
            if not text.strip():
                continue
            try:
                types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            except ValueError as e:  # pydantic's ValidationError is a ValueError
                refusal = _refusal(text, e)
                if refusal is not None:
                    await self._refuse(*refusal)
                continue
            try:  # read once, for the id checks below (the SDK reads the text itself)
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None
            if _has_bad_id(parsed):
                # the SDK would take a request with an id of another type ({}, null, true, 1.5, [1]) for a
                # notification and answer nothing, leaving the client waiting: refused, as JSON-RPC says
                message = "the request's id must be a string or an integer; send it again with one."
                await self._refuse(None, types.INVALID_REQUEST, message)
                continue
            self._note(parsed)
            return text

    def _read_line(self) -> tuple[bytes, int]:
        """The next line, at most ``max_bytes`` + 2 of it read into memory, and its size without the line
        terminator; (b"", 0) at the end of the stream. The rest of a longer line is read and dropped."""
        head = self._wire.readline(self._max + 2)
        if not head:
            return b"", 0
        size, last = len(head), head
        while not last.endswith(b"\n"):
            more = self._wire.readline(1 << 16)
            if not more:
                break
            size, last = size + len(more), more
        return head, size - (2 if last.endswith(b"\r\n") else 1 if last.endswith(b"\n") else 0)

    async def _refuse(self, request_id: int | str | None, code: int, message: str) -> None:
        import anyio
        from mcp import types
        from mcp.shared.message import SessionMessage

        logger.warning("refused a message from the client (id %s): %s", request_id, message)
        await self._attached.wait()
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the server is closing
            await self._replies.send(SessionMessage(error))


def _has_bad_id(parsed: Any) -> bool:
    """Whether the message ``parsed`` is a request (it has a method) holding an ``id`` that is neither a string
    nor an integer."""
    if not isinstance(parsed, dict) or "method" not in parsed or "id" not in parsed:
        return False
    raw = parsed["id"]
    return not isinstance(raw, int | str) or isinstance(raw, bool)


def _refusal(text: str, error: ValueError) -> tuple[int | str | None, int, str] | None:
    """The id, code and message of the error reply to a line the SDK cannot parse; None for a reply of the
    client's own (a response to the server: answered with nothing, as JSON-RPC wants)."""
    from mcp import types

    try:
        parsed = json.loads(text)
    except ValueError as e:
        return None, types.PARSE_ERROR, f"the line is not JSON ({e}); send one JSON-RPC message a line."
    except RecursionError:  # a few KB of nested brackets: refused, never the end of the server
        return None, types.PARSE_ERROR, "the line nests too deeply to be read; send one JSON-RPC message a line."
    if not isinstance(parsed, dict):
        return None, types.INVALID_REQUEST, "the line is JSON but not a JSON-RPC message (an object)."
    if "method" not in parsed and ("result" in parsed or "error" in parsed):
        logger.warning("dropped a response from the client the SDK cannot parse: %s", error)
        return None
    raw_id = parsed.get("id")
    valid_id = isinstance(raw_id, int | str) and not isinstance(raw_id, bool) and len(str(raw_id)) <= 200
    if valid_id:
        try:
            str(raw_id).encode("utf-8")  # an id that is not Unicode text cannot be echoed
        except UnicodeEncodeError:
            valid_id = False
    request_id = cast(int | str, raw_id) if valid_id else None
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return (
            request_id,
            types.PARSE_ERROR,
            (
                "the message holds a lone UTF-16 surrogate escape (such as \\ud800), which is not Unicode text; "
                "write characters outside the Basic Multilingual Plane as a surrogate pair or in UTF-8."
            ),
        )
    problems = getattr(error, "errors", None)
    said = str(problems()[0].get("msg", error)) if callable(problems) and problems() else str(error)
    return request_id, types.INVALID_REQUEST, _cut(f"not a valid JSON-RPC 2.0 message: {said}")


@contextmanager
def _wire_stdin() -> Iterator[IO[bytes]]:
    """The client's stdin, read through a private duplicate while fd 0 reads the null device, so neither a
    tool nor a child process can take the protocol's bytes (what the SDK does for the stdin it opens itself);
    fd 0 is restored on the way out."""
    if sys.platform == "win32":  # pragma: no cover - no fcntl
        yield sys.stdin.buffer
        return
    import fcntl

    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # never closed: a worker thread may still wait on it after the server stops
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


#: how long the end of the client's input waits for the replies still owed
DRAIN_S = 300.0


class _Answers:
    """The SDK's outgoing stream, telling ``lines`` each reply it carries (so the end of input can wait for
    the replies still owed)."""

    def __init__(self, stream: Any, lines: ClientLines) -> None:
        self._stream, self._lines = stream, lines

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        message = getattr(message, "root", message)
        try:
            await self._stream.send(item)
        finally:
            # told once the writer has the reply, not before: the end of input stops waiting when nothing is
            # owed, and the SDK then cancels whatever handler is still sending (a reply lost under load)
            if message is not None and type(message).__name__ in ("JSONRPCResponse", "JSONRPCError"):
                self._lines.answered(getattr(message, "id", None))

    async def __aenter__(self) -> _Answers:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._stream.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


async def serve_stdio(server: Any, max_bytes: int) -> None:
    """Serve ``server`` (an MCPServer) over stdin and stdout, as its own ``run("stdio")`` does, with the
    client's lines checked by :class:`ClientLines` (at most ``max_bytes`` each)."""
    from mcp.server.stdio import stdio_server

    with _wire_stdin() as wire:
        lines = ClientLines(wire, max_bytes)
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.attach(write_stream)
            lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async serves (no public accessor)
            answers = _Answers(write_stream, lines)
            await lowlevel.run(read_stream, answers, lowlevel.create_initialization_options())
