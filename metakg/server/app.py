"""The FastAPI app of ``metakg serve``: the served graph opened by the lifespan and closed on shutdown, the
middleware (host and body guards, CORS when configured, the API key) and error handlers, and the routers by
topic (:mod:`metakg.server.routes`); every input validated (a 422 names the field) and bounded."""

from __future__ import annotations

import asyncio
import copy
import errno
import hmac
import logging
import re
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

import metakg
from metakg import api
from metakg.config import Settings
from metakg.errors import (
    BundleChanged,
    BundleNotWritten,
    ConfigError,
    EmbeddingError,
    LLMError,
    MetakgError,
    NodeNotFound,
    ResourceBusy,
    UsageError,
)
from metakg.redact import mask_query, secret_pattern
from metakg.server.graphs import Graph, given_graphs, graph_settings
from metakg.server.models import printable
from metakg.server.routes import ask, evaluations, graph, pages
from metakg.server.routes.pages import STATIC
from metakg.server.served import ServedGraph

logger = logging.getLogger("metakg.server")


KEY_REQUIRED = "a valid X-API-Key header is required"


def key_matches(given: str | None, key: str) -> bool:
    """Whether a request's key is the server's (always, when the server has none); constant time."""
    return not key or hmac.compare_digest((given or "").encode(), key.encode())


#: the challenge of a 401: the key goes in the X-API-Key header (without one, MCP clients guess OAuth)
CHALLENGE = {"WWW-Authenticate": 'APIKey realm="metakg", header="X-API-Key"'}


def with_key(app: Any, key: str) -> Any:
    """An ASGI app that answers 401 to any HTTP request whose ``X-API-Key`` header is not ``key``."""

    async def keyed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"x-api-key", b"").decode("latin-1")
            if not key_matches(given, key):
                await JSONResponse(status_code=401, content={"error": KEY_REQUIRED}, headers=CHALLENGE)(
                    scope, receive, send
                )
                return
        await app(scope, receive, send)

    return keyed


WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def allowed_hosts(settings: Settings) -> list[str] | None:
    """The names a request's ``Host`` header may carry: loopback names, the address the server binds and
    ``server.allowed_hosts``; None (any) only for a server bound to every address with no names configured,
    which needs an API key. A page on another site whose name an attacker points at 127.0.0.1 (DNS rebinding)
    sends its own name, which is refused."""
    limits = settings.server
    names = ["127.0.0.1", "localhost", "::1", "[::1]", *limits.allowed_hosts]
    if limits.host in WILDCARD_HOSTS:
        return names if limits.allowed_hosts else None
    return [*names, limits.host]


#: a Host header: a bracketed IPv6 address or a name without ``@``, ``/`` or ``:``, then at most a numeric port
_HOST_HEADER = re.compile(r"^(\[[0-9a-f:.]+\]|[^\[\]@/:\s]+)(?::\d{1,5})?$")


def _host_of(scope: dict[str, Any]) -> str:
    """The name a request's ``Host`` header gives, without its port; "" when the header is not one (a port
    that is not a number, a user part, a second host: ``localhost:evil.example``, ``[::1].evil.example``)."""
    headers = dict(scope.get("headers") or [])
    host: str = headers.get(b"host", b"").decode("latin-1").strip().lower()
    found = _HOST_HEADER.match(host)
    return found.group(1) if found else ""


class RequestGuard:
    """ASGI middleware for the checks every request of ``metakg serve`` and ``metakg mcp --http`` passes
    first: its ``Host`` among :func:`allowed_hosts` (400 otherwise), and a body of at most
    ``server.max_body_bytes``, counted as it is read whether or not it declares its length (413 otherwise),
    that does not pause for more than ``server.body_idle_s`` (408 otherwise)."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)
        self.limit = settings.server.max_body_bytes
        self.idle = settings.server.body_idle_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.hosts is not None and _host_of(scope) not in self.hosts:
            refused = _error(400, "this server does not answer for that host name (server.allowed_hosts)")
            await refused(scope, receive, send)
            return
        if not _utf8_query(scope.get("query_string") or b""):  # read as U+FFFD, it once found "-" by embedding
            await _error(400, "a query value is not UTF-8 once its %-escapes are decoded")(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        too_large = _error(413, f"the request body is larger than {self.limit} bytes")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await too_large(scope, receive, send)
            return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS") and length is None:
            await self.app(scope, receive, send)
            return
        # read the whole body first (at most ``limit`` bytes, each part within ``idle`` s of the last: a client
        # declaring more than it sends must not hold a connection for ever), then hand it on as one message
        body = bytearray()
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=self.idle)
            except TimeoutError:
                slow = _error(408, f"the request body stopped arriving for {self.idle:g} s (server.body_idle_s)")
                await slow(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        delivered = False

        async def replay() -> Any:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _utf8_query(query: bytes) -> bool:
    """Whether every name and value of a query string is UTF-8 once its %-escapes and ``+`` are decoded."""
    from urllib.parse import unquote_to_bytes

    try:
        for part in query.replace(b"+", b" ").split(b"&"):
            unquote_to_bytes(part).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def create_app(
    settings: Settings,
    *,
    bundle: Path | None = None,
    neo4j: bool = False,
    name: str | None = None,
    graphs: Sequence[Graph] = (),
    prefix: str = "",
    also: Sequence[ServedGraph] = (),
) -> FastAPI:
    """The app over the bundle (embedded store) or the configured Neo4j database.

    On a server of several graphs (:func:`create_graphs_app`), ``name`` is this one's, ``graphs`` all of
    them (``GET /api/graphs`` lists them for the page's picker), ``prefix`` the path it is mounted at
    (``/graphs/NAME``: the outer app guards the requests) and ``also`` the other graphs, which the app of the
    default graph opens and closes with its own (a mounted app has no lifespan of its own).

    Raises:
        UsageError: neither or both of a bundle and Neo4j.
    """
    served = ServedGraph(settings, bundle=bundle, neo4j=neo4j)  # checks the choice; opened by the lifespan
    limits = settings.server
    key = limits.api_key.get_secret_value()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        with ExitStack() as stack:
            for graph in (served, *also):
                stack.enter_context(graph)
            yield

    def authorised(request: Request, x_api_key: Annotated[str | None, Header()] = None) -> None:
        if request.url.path == prefix + "/":  # the page itself holds no data; it asks for the key, then sends it
            return
        if not key_matches(x_api_key, key):
            raise HTTPException(status_code=401, detail=KEY_REQUIRED, headers=CHALLENGE)

    app = FastAPI(
        title="metakg",
        version=metakg.__version__,
        description="Read and question a knowledge graph built with metakg.",
        lifespan=lifespan,
        dependencies=[Depends(authorised)],
        docs_url=None,  # served below from the vendored copies: FastAPI's own pages load from CDNs
        redoc_url=None,
    )

    @app.exception_handler(MetakgError)
    async def metakg_error(_request: Request, error: MetakgError) -> JSONResponse:
        status = (
            404
            if isinstance(error, NodeNotFound)
            else 409
            if isinstance(error, BundleChanged)
            else 507
            if isinstance(error, BundleNotWritten)
            else 503
            if isinstance(error, ResourceBusy)
            else 503
            if isinstance(error, ConfigError | EmbeddingError | LLMError)  # the server's problem, not the request's
            else 400
        )
        return _error(status, str(error))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        """Errors as ``{"error": "..."}`` like every other; a 422 raised by a route keeps its ``detail`` list."""
        content = {"error": error.detail} if isinstance(error.detail, str) else {"detail": error.detail}
        return JSONResponse(status_code=error.status_code, content=printable(content), headers=error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        """FastAPI's 422 (``detail``: each error with the field's ``loc``), with text that is not valid Unicode
        (a lone surrogate, ``"\\ud800"`` in the JSON) escaped, so that the answer itself can be written."""
        return JSONResponse(status_code=422, content={"detail": jsonable_encoder(printable(error.errors()))})

    if limits.cors_origins and not prefix:  # off unless configured: only the server's own page calls the API
        app.add_middleware(
            CORSMiddleware,
            allow_origins=limits.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-API-Key"],
        )

    if not prefix:
        app.add_middleware(RequestGuard, settings=settings)  # added last: the outermost, before anything else
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    app.include_router(pages.router(bundle, prefix + (app.openapi_url or "/openapi.json")))
    app.include_router(graph.router(served, graph_list(graphs, name, bundle, settings)))
    app.include_router(ask.router(served))
    app.include_router(evaluations.router(served))
    app.state.served = served
    return app


def graph_list(
    graphs: Sequence[Graph], name: str | None, bundle: Path | None, settings: Settings
) -> list[dict[str, Any]]:
    """What ``GET /api/graphs`` answers: each graph served, its name, where its page is, its store, and
    whether it is the one asked (a server of one graph lists that one)."""
    if not graphs:
        own = name or (bundle.name if bundle is not None else settings.neo4j.database)
        return [{"name": own, "path": "/", "store": "neo4j" if bundle is None else "embedded", "current": True}]
    return [
        {
            "name": g.name,
            "path": "/" if number == 0 else g.path,
            "store": "neo4j" if g.neo4j else "embedded",
            "current": g.name == name,
        }
        for number, g in enumerate(graphs)
    ]


def create_graphs_app(settings: Settings, graphs: Sequence[Graph]) -> FastAPI:
    """The app of a server of ``graphs``: the first at ``/``, every other under ``/graphs/NAME/`` with its own
    page, API and reference pages, each graph with its own key when ``server.graph_keys`` names one.

    Raises:
        UsageError: no graph.
    """
    if not graphs:
        raise UsageError("give --bundle DIR or --neo4j.")
    several = len(graphs) > 1
    if not several:
        only = graphs[0]
        return create_app(graph_settings(settings, only, several=False), bundle=only.bundle, neo4j=only.neo4j)
    mounted: list[tuple[str, FastAPI]] = []
    for g in graphs[1:]:
        at = g.path.rstrip("/")
        own = graph_settings(settings, g, several=True)
        mounted.append((at, create_app(own, bundle=g.bundle, neo4j=g.neo4j, name=g.name, graphs=graphs, prefix=at)))
    first = graphs[0]
    app = create_app(
        graph_settings(settings, first, several=True),
        bundle=first.bundle,
        neo4j=first.neo4j,
        name=first.name,
        graphs=graphs,
        also=[sub.state.served for _at, sub in mounted],
    )
    for at, sub in mounted:
        app.mount(at, sub)
    return app


def guarded_protocol(header_s: float, max_connections: int) -> type[Any]:
    """uvicorn's HTTP/1.1 protocol with two bounds it lacks: a request's header must arrive whole within
    ``header_s`` of the connection (or of the last response on a kept-alive one), else the connection is
    closed; past ``max_connections`` open connections a new one is closed at once."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _waiting_scope: object = None

        def _arm(self) -> None:
            self._disarm()
            self._waiting_scope = getattr(self, "scope", None)
            self._deadline = self.loop.call_later(header_s, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and getattr(self, "scope", None) is not self._waiting_scope:
                self._disarm()  # a whole request header arrived

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request of a kept-alive connection has as long

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return Guarded


LOOPBACK = ("127.0.0.1", "localhost", "::1")


#: the shortest API key accepted for a server reachable from other machines
MIN_KEY_CHARS = 16


def check_binding(
    settings: Settings, key_setting: str = "server.api_key (METAKG_SERVER__API_KEY) or --api-key"
) -> None:
    """Refuse a host other than loopback without an API key of at least :data:`MIN_KEY_CHARS` characters,
    and a key that is only blanks anywhere.

    Raises:
        UsageError: saying how to set the key.
    """
    limits = settings.server
    key = limits.api_key.get_secret_value()
    how = (
        f"set {key_setting}, e.g. the output of "
        "`python -c 'import secrets; print(secrets.token_urlsafe(24))'`; clients send it in the X-API-Key header."
    )
    if key and not key.strip():
        raise UsageError(f"the API key is blank: {how}")
    if key and not (key.isascii() and key.isprintable() and not any(ch.isspace() for ch in key)):
        # a header carries Latin-1: a key of other characters could never be sent as typed
        raise UsageError(f"the API key must be printable ASCII without spaces: {how}")
    if limits.host not in LOOPBACK and len(key.strip()) < MIN_KEY_CHARS:
        shown = "an API key" if not key else f"an API key of at least {MIN_KEY_CHARS} characters"
        raise UsageError(f"serving on {limits.host} (not loopback) needs {shown}: {how}")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (the server listens on it), made before the server starts so that a
    busy port is a clear error, not a log line.

    Raises:
        UsageError: the port is in use, or the address is not this machine's.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            why = "the port is in use (another server listens there). Choose another with --port (server.port)"
        elif e.errno == errno.EADDRNOTAVAIL:
            why = "no interface of this machine has that address. Choose another with --host (server.host)"
        else:
            why = f"{e.strerror or e}. Check --host and --port"
        raise UsageError(f"cannot listen on {host}:{port}: {why}.") from e
    sock.set_inheritable(True)
    return sock


def run_asgi(app: Any, settings: Settings, *, announce: Callable[[str], None] | None = None) -> None:
    """Run an ASGI app with uvicorn on ``server.host``:``server.port`` until interrupted; ``announce`` is called
    with the address once the socket is bound.

    Raises:
        UsageError: a host other than loopback without an API key, or an address or port that cannot be bound.
        ConfigError: the app did not start (its store could not be opened; the log says why).
    """
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    check_binding(settings)
    limits = settings.server
    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config.setdefault("filters", {})["secrets"] = {
        "()": "metakg.server.app.AccessLogSecrets",
        "secrets": log_secrets(limits),
    }
    log_config["handlers"]["access"]["filters"] = ["secrets"]
    sock = listening_socket(limits.host, limits.port)
    if announce is not None:
        announce(f"http://{limits.host}:{limits.port}")
    config = uvicorn.Config(
        app, host=limits.host, port=limits.port, log_level="info", log_config=log_config, server_header=False,
        http=guarded_protocol(limits.header_s, limits.max_connections),
    )  # fmt: skip
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise ConfigError("the server did not start; the lines above say why.")


def log_secrets(limits: Any) -> list[str]:
    """Every key a server takes (``server.api_key`` and each of ``server.graph_keys``): the access log masks
    them all."""
    return [limits.api_key.get_secret_value(), *(k.get_secret_value() for k in limits.graph_keys.values())]


class AccessLogSecrets(logging.Filter):
    """Masks secrets in uvicorn's access log: the values of secret-looking query parameters (``?api_key=...``),
    and the server's own key wherever a request line holds it (raw or percent-encoded): a key sent in the URL
    is refused, and must not be written to the log either."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        super().__init__()
        self._secrets = [secret_pattern(s) for s in sorted({s for s in secrets or [] if s}, key=len, reverse=True)]

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            line = mask_query(args[2])
            for secret in self._secrets:
                line = secret.sub("***", line)
            record.args = (*args[:2], line, *args[3:])
        return True


def serve(
    settings: Settings,
    *,
    bundle: Path | None = None,
    neo4j: bool = False,
    graphs: Sequence[Graph] = (),
    announce: Callable[[str], None] | None = None,
) -> None:
    """Run the app with uvicorn on ``server.host``:``server.port`` until interrupted; the stores are closed
    on the way out. ``graphs``: several graphs (:mod:`metakg.server.graphs`), instead of one ``bundle`` or
    the configured Neo4j database.

    Args:
        announce: called with a line saying what is served where, once every check before listening passed.

    Raises:
        UsageError: a host other than loopback without an API key (for any graph), or no graph.
        BundleError: a bundle cannot be read.
    """
    graphs = given_graphs(bundle, neo4j, graphs, settings)
    for g in graphs:
        own = g.name in settings.server.graph_keys
        check_binding(
            graph_settings(settings, g, several=len(graphs) > 1),
            f"server.graph_keys.{g.name} (the key of the graph {g.name})"
            if own
            else "server.api_key (METAKG_SERVER__API_KEY) or --api-key",
        )
        if g.bundle is not None:
            api.bundle_info(g.bundle)  # a missing or broken bundle is explained before anything listens
        else:
            with api.open_store(graph_settings(settings, g, several=True), None, neo4j=True) as store:
                store.counts()  # Neo4j down: said now, not as a traceback
    if len(graphs) == 1:
        served = str(graphs[0].bundle) if graphs[0].bundle is not None else "the configured Neo4j database"
    else:
        served = f"{len(graphs)} graphs ({', '.join(g.name for g in graphs)}; {graphs[0].name} at /)"
    said = (lambda address: announce(f"serving {served} on {address}")) if announce is not None else None
    run_asgi(create_graphs_app(settings, graphs), settings, announce=said)
