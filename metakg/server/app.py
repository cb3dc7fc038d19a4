"""The FastAPI app of ``metakg serve``: one store opened for the process and closed on shutdown, read-only
routes over it, and ``ask``; every input validated (a 422 names the field), bounded, and behind an API key
when one is set."""

from __future__ import annotations

import asyncio
import copy
import errno
import hmac
import json
import logging
import math
import queue
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as Path_
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, field_validator
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
from metakg.server.evaluations import EvaluationRun, Evaluations
from metakg.server.served import MAX_HOPS, MAX_K, MAX_NEIGHBOURS, FieldError, ServedGraph

logger = logging.getLogger("metakg.server")

#: the web page and its assets (the JavaScript libraries are vendored at build time: tools/vendor_js.sh)
STATIC = Path(__file__).with_name("static")


class ErrorBody(BaseModel):
    """Every error but a 422: what went wrong, in a sentence."""

    error: str = Field(description="What went wrong, and what to do about it.")


#: what each error status of the API means (the OpenAPI document lists them per route)
ERROR_STATUSES: dict[int, str] = {
    400: "A request the server cannot act on, with the reason: a Host header it does not answer for "
    "(server.allowed_hosts), a bad choice, strategy or benchmark, a body that is not UTF-8.",
    401: "The server has an API key and the request's X-API-Key header is not it.",
    403: "Writes are off: the server was not started with --allow-writes.",
    404: "No such node or evaluation run.",
    408: "The request body stopped arriving (no part for server.body_idle_s): send it whole.",
    409: "The served bundle was changed by another process since this server read it; restart the server.",
    413: "The request body is larger than server.max_body_bytes.",
    507: "The served bundle could not be written (a full disk): nothing was changed, the graph served is as it was.",
    503: "The server is busy (every question slot taken, the graph being read for a write, or another process "
    "writing the bundle), or cannot answer now: the LLM or the embedding model cannot be reached or loaded; "
    "try again shortly.",
}
#: the statuses every route can answer: a Host header refused, a missing or wrong key
EVERY_ROUTE = (400, 401)


def error_responses(*statuses: int, json_route: bool = True) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route that can answer ``statuses`` (and those of every route), each
    with the :class:`ErrorBody` model as JSON; a 422's model is FastAPI's own (``detail`` naming the field).
    A route whose own answer is not JSON (``json_route=False``) names the model by reference, since FastAPI
    would give a ``model`` the route's media type."""
    body: dict[str, Any] = (
        {"model": ErrorBody}
        if json_route
        else {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    )
    return {status: body | {"description": ERROR_STATUSES[status]} for status in sorted({*EVERY_ROUTE, *statuses})}


def printable(value: Any) -> Any:
    """``value`` (JSON data) with every string's lone surrogates written as ``\\udXXX`` escapes, so that it
    can be encoded as UTF-8, and every number JSON has no form for (``NaN``, ``Infinity``, which Python's parser
    accepts) as its text: a request's invalid input is echoed in its 422 without breaking the answer."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, bytes | bytearray):  # a body that is not UTF-8: shown as escapes
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    return value


class EventStream(StreamingResponse):
    """Server-sent events (the OpenAPI document gives the stream this media type)."""

    media_type = "text/event-stream"


class AskRequest(BaseModel):
    """A question to answer over the served graph."""

    model_config = ConfigDict(allow_inf_nan=False)  # NaN or Infinity for a number is a 422, never a setting

    question: str = Field(min_length=1, description="The question.")
    choices: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list, max_length=26, description='Multiple-choice options, each "A: text".'
    )
    strategy: str | None = Field(default=None, max_length=64, description="A strategy (default: qa.strategy).")
    switches: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=16)
    use_llm: bool = Field(default=True, description="False: retrieval only (concepts by rules), no LLM call.")
    settings: dict[Annotated[str, Field(max_length=64)], str | int | float | bool] = Field(
        default_factory=dict,
        max_length=32,
        description="Settings for this question only: a [qa] key (tau_entity) or one of the strategy's "
        "(path_hops), as `metakg strategies` lists them.",
    )


Field_ = Annotated[str, Field(min_length=1, max_length=1000)]


class TriplesRequest(BaseModel):
    """Triples to add to the served graph (only on a server started with ``--allow-writes``)."""

    model_config = ConfigDict(allow_inf_nan=False)

    triples: list[tuple[Field_, Field_, Field_]] = Field(
        min_length=1, max_length=10_000, description="(head, relation, tail) triples, as a triple file holds them."
    )
    dataset: str = Field(
        default="api",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="Scopes the new nodes' ids, kg:<dataset>/<name>.",
    )


class EvaluationRequest(BaseModel):
    """An evaluation run over the served graph, as ``metakg eval`` runs it."""

    model_config = ConfigDict(allow_inf_nan=False)

    benchmark: str = Field(
        min_length=1, max_length=500, description="A benchmark file, relative to server.benchmarks_dir."
    )
    format: str = Field(
        description="The question set's format (docs/formats.md).", json_schema_extra={"enum": list(api.EVAL_FORMATS)}
    )
    strategies: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=lambda: ["metakgrag"], min_length=1, max_length=8
    )
    ablations: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(default_factory=list, max_length=16)
    limit: int | None = Field(default=None, ge=1, le=100_000, description="Only the first N questions (after skip).")
    skip: int = Field(default=0, ge=0, le=1_000_000)
    budget: int = Field(default=10, ge=1, le=1000, description="Evidence budget of recall@budget.")
    use_llm: bool = Field(default=True, description="False: retrieval only, the evidence metrics.")

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in api.EVAL_FORMATS:
            raise ValueError(f"unknown format {value!r}; choose one of {', '.join(api.EVAL_FORMATS)}")
        return value


KEY_REQUIRED = "a valid X-API-Key header is required"


def key_matches(given: str | None, key: str) -> bool:
    """Whether a request's key is the server's (always, when the server has none); constant time."""
    return not key or hmac.compare_digest((given or "").encode(), key.encode())


def with_key(app: Any, key: str) -> Any:
    """An ASGI app that answers 401 to any HTTP request whose ``X-API-Key`` header is not ``key``."""

    async def keyed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"x-api-key", b"").decode("latin-1")
            if not key_matches(given, key):
                await JSONResponse(status_code=401, content={"error": KEY_REQUIRED})(scope, receive, send)
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


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def create_app(settings: Settings, *, bundle: Path | None = None, neo4j: bool = False) -> FastAPI:
    """The app over the bundle (embedded store) or the configured Neo4j database.

    Raises:
        UsageError: neither or both of a bundle and Neo4j.
    """
    served = ServedGraph(settings, bundle=bundle, neo4j=neo4j)  # checks the choice; opened by the lifespan
    limits = settings.server
    key = limits.api_key.get_secret_value()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        with served:
            yield

    def authorised(request: Request, x_api_key: Annotated[str | None, Header()] = None) -> None:
        if request.url.path == "/":  # the page itself holds no data; it asks for the key, then sends it
            return
        if not key_matches(x_api_key, key):
            raise HTTPException(status_code=401, detail=KEY_REQUIRED)

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

    if limits.cors_origins:  # off unless configured: only the server's own page calls the API
        app.add_middleware(
            CORSMiddleware,
            allow_origins=limits.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-API-Key"],
        )

    app.add_middleware(RequestGuard, settings=settings)  # added last: the outermost, before anything else
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def swagger(_request: Request) -> HTMLResponse:
        """The interactive API reference (Swagger UI), from files fetched at build time: it works offline."""
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="metakg API",
            swagger_js_url="/static/vendor/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui.css",
            swagger_favicon_url="/static/vendor/swagger-favicon.png",
        )

    def redoc(_request: Request) -> HTMLResponse:
        """The API reference as one page (ReDoc), from files fetched at build time, without web fonts."""
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="metakg API",
            redoc_js_url="/static/vendor/redoc.standalone.js",
            redoc_favicon_url="/static/vendor/swagger-favicon.png",
            with_google_fonts=False,
        )

    # as FastAPI serves its own: documentation, readable without the key (the API's routes still need it)
    app.router.add_route("/docs", swagger, include_in_schema=False)
    app.router.add_route("/redoc", redoc, include_in_schema=False)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        """The web page: search, ask, the evidence as an interactive graph."""
        return FileResponse(STATIC / "index.html")

    @app.get("/report", include_in_schema=False)
    def report() -> Response:
        """The served bundle's validation report (``metakg validate``), when it has one: a regular file in the
        bundle's folder (a link, to /etc/passwd say, is not followed)."""
        page = api.validation_page(bundle) if bundle is not None else None
        if page is None:
            raise HTTPException(status_code=404, detail="this graph has no validation report (metakg validate)")
        return Response(page, media_type="text/html")

    @app.get("/api/health", responses=error_responses())
    def health() -> dict[str, Any]:
        """Liveness, the version, and which store is served."""
        return {"status": "ok", "version": metakg.__version__, "store": "neo4j" if neo4j else "embedded"}

    @app.get("/api/graph", responses=error_responses())
    def graph() -> dict[str, Any]:
        """The graph's node and edge counts (and, for a bundle, its sources and validation summary)."""
        info: dict[str, Any] = {"counts": served.store.counts()}
        if bundle is not None:
            manifest = api.bundle_info(bundle)
            info["sources"] = [s.get("name") for s in manifest.get("sources", [])]
            info["validation"] = {k: manifest.get("validation", {}).get(k) for k in ("ok", "rejected", "warned")}
        shown: dict[str, Any] = printable(info)  # a received bundle's manifest may hold text that is not Unicode
        return shown

    @app.get("/api/nodes/{node_id:path}", responses=error_responses(404))
    def node(node_id: str) -> dict[str, Any]:
        """One node by id (as written or in its one form: ``MONDO:4975`` is ``mondo:0004975``)."""
        return asdict(served.node(node_id))

    @app.get("/api/neighbours", responses=error_responses(404))
    def neighbours(
        id: Annotated[str, Query(min_length=1, max_length=1000, description="The node's id.")],
        relation: Annotated[list[str] | None, Query(description="Only these relations.")] = None,
        direction: Literal["out", "in", "both"] = "both",
        limit: Annotated[int, Query(ge=1, le=MAX_NEIGHBOURS)] = 50,
    ) -> list[dict[str, Any]]:
        """The node's neighbours: outgoing first, then incoming, each side in edge-id order."""
        return [asdict(nb) for nb in served.neighbours(id, relations=relation, direction=direction, limit=limit)]

    @app.get("/api/search", responses=error_responses(503))
    def search(
        q: Annotated[str, Query(min_length=1, max_length=500, description="A name or description.")],
        mode: Literal["exact", "normalised", "fuzzy", "embedding", "auto"] = "auto",
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
    ) -> list[dict[str, Any]]:
        """Nodes matching the text: exact name or alias, normalised, then by name embedding (``auto``)."""
        return [asdict(hit) for hit in served.search(q, mode=mode, k=k)]

    @app.get("/api/paths", responses=error_responses(404))
    def paths(
        src: Annotated[str, Query(min_length=1, max_length=1000)],
        dst: Annotated[str, Query(min_length=1, max_length=1000)],
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 3,
        max_hops: Annotated[int, Query(ge=1, le=MAX_HOPS)] = 3,
        directed: bool = False,
    ) -> list[dict[str, Any]]:
        """Up to ``k`` shortest simple paths between two node ids, shortest first."""
        found = served.paths(src, dst, k=k, max_hops=max_hops, directed=directed)
        return [asdict(path) | {"hops": path.hops} for path in found]

    @app.get("/api/strategies", responses=error_responses())
    def strategies() -> list[dict[str, Any]]:
        """The QA strategies, their settings and switches."""
        return api.describe_strategies()

    def checked(request: AskRequest) -> tuple[Settings, api.Question, Any]:
        """The settings for this question, the question and the strategy, or a 4xx naming the field."""
        try:
            return served.question(
                request.question, request.choices, strategy=request.strategy, switches=request.switches,
                overrides=request.settings,
            )  # fmt: skip
        except FieldError as e:
            detail = [{"loc": ["body", e.field], "msg": e.reason, "type": "value_error"}]
            raise HTTPException(status_code=422, detail=detail) from e

    @app.post("/api/ask", responses=error_responses(408, 413, 503))
    def ask(request: AskRequest) -> dict[str, Any]:
        """Answer a question over the graph: the answer, its evidence, trace and usage."""
        cfg, question, strategy = checked(request)
        answer = served.answer(cfg, question, strategy, use_llm=request.use_llm)
        return answer.to_dict() | {"trace_lines": api.trace_lines(answer)}

    @app.post(
        "/api/ask/stream",
        response_class=EventStream,
        responses={
            200: {
                "description": "Server-sent events: `step` events, then one `answer` (or `error`) event, each "
                "with JSON data.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **error_responses(408, 413, 503, json_route=False),
        },
    )
    def ask_stream(request: AskRequest) -> EventStream:
        """The same answer as ``/api/ask``, as server-sent events: a ``step`` event for each step of the
        trace as the strategy takes it (the concepts and start entities, each start's refined path, the
        evidence retrieved), then one ``answer`` event (or an ``error`` event)."""
        cfg, question, strategy = checked(request)
        events: queue.Queue[tuple[str, Any]] = queue.Queue()

        def work() -> None:
            try:
                answer = served.answer(
                    cfg, question, strategy, use_llm=request.use_llm, steps=lambda step: events.put(("step", step))
                )
                events.put(("answer", answer.to_dict() | {"trace_lines": api.trace_lines(answer)}))
            except MetakgError as e:
                events.put(("error", {"error": str(e)}))
            except Exception as e:  # a bug: the stream must still end, with an error event
                logger.exception("streamed answer failed")
                events.put(("error", {"error": f"internal error ({type(e).__name__}); see the server log"}))

        def stream() -> Iterator[str]:
            threading.Thread(target=work, daemon=True).start()
            while True:
                kind, data = events.get()
                yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"
                if kind != "step":
                    return

        return EventStream(stream())

    @app.post("/api/triples", responses=error_responses(403, 408, 409, 413, 503, 507))
    def add_triples(request: TriplesRequest) -> dict[str, Any]:
        """Add triples to the graph, read as ``metakg ingest triples`` reads a file (each failing triple
        rejected with its reason); a served bundle is validated and written back. Only on a server started
        with ``--allow-writes`` (403 otherwise)."""
        if not limits.allow_writes:
            raise HTTPException(status_code=403, detail="this server is read-only; start it with --allow-writes")
        return served.add_triples(request.triples, request.dataset)

    def evaluations() -> Evaluations:
        return served.evaluations

    def evaluation(run_id: str) -> EvaluationRun:
        run = evaluations().get(run_id)
        if run is None:
            raise HTTPException(status_code=404, detail=f"no evaluation {run_id!r}; GET /api/evaluations lists them")
        return run

    @app.post("/api/evaluations", status_code=202, responses=error_responses(408, 413, 503))
    def start_evaluation(request: EvaluationRequest) -> dict[str, Any]:
        """Start an evaluation run in the background (one runs at a time, the others wait): answers and
        metrics as ``metakg eval`` writes them. Poll ``GET /api/evaluations/{id}`` for its status."""
        run = evaluations().start(request.model_dump())
        return run.view(full=False) | {"url": f"/api/evaluations/{run.id}"}

    @app.get("/api/evaluations", responses=error_responses())
    def list_evaluations() -> list[dict[str, Any]]:
        """Every evaluation run of this process, oldest first: status and progress."""
        return [run.view(full=False) for run in evaluations().all()]

    @app.get("/api/evaluations/{run_id}", responses=error_responses(404))
    def get_evaluation(run_id: Annotated[str, Path_(max_length=64)]) -> dict[str, Any]:
        """One run: status (queued, running, done, failed, cancelled), progress, and when done its summary
        (per run label) and comparison table."""
        return evaluation(run_id).view()

    @app.delete("/api/evaluations/{run_id}", responses=error_responses(404))
    def cancel_evaluation(run_id: Annotated[str, Path_(max_length=64)]) -> dict[str, Any]:
        """Cancel a waiting or running run (a running one stops before its next question; its answers so
        far stay in its folder)."""
        evaluations().cancel(run_id)
        return evaluation(run_id).view(full=False)

    return app


LOOPBACK = ("127.0.0.1", "localhost", "::1")


#: the shortest API key accepted for a server reachable from other machines
MIN_KEY_CHARS = 16


def check_binding(settings: Settings) -> None:
    """Refuse a host other than loopback without an API key of at least :data:`MIN_KEY_CHARS` characters,
    and a key that is only blanks anywhere.

    Raises:
        UsageError: saying how to set the key.
    """
    limits = settings.server
    key = limits.api_key.get_secret_value()
    how = (
        "set server.api_key (METAKG_SERVER__API_KEY) or --api-key, e.g. the output of "
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
        "secrets": [limits.api_key.get_secret_value()],
    }
    log_config["handlers"]["access"]["filters"] = ["secrets"]
    sock = listening_socket(limits.host, limits.port)
    if announce is not None:
        announce(f"http://{limits.host}:{limits.port}")
    config = uvicorn.Config(
        app, host=limits.host, port=limits.port, log_level="info", log_config=log_config, server_header=False
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise ConfigError("the server did not start; the lines above say why.")


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
    announce: Callable[[str], None] | None = None,
) -> None:
    """Run the app with uvicorn on ``server.host``:``server.port`` until interrupted; the store is closed on
    the way out.

    Args:
        announce: called with a line saying what is served where, once every check before listening passed.

    Raises:
        UsageError: a host other than loopback without an API key, or neither/both of bundle and Neo4j.
        BundleError: the bundle cannot be read.
    """
    check_binding(settings)
    if bundle is not None:
        api.bundle_info(bundle)  # a missing or broken bundle is explained before anything listens
    elif neo4j:
        with api.open_store(settings, None, neo4j=True) as store:  # Neo4j down: said now, not as a traceback
            store.counts()
    served = bundle or "the configured Neo4j database"
    said = (lambda address: announce(f"serving {served} on {address}")) if announce is not None else None
    run_asgi(create_app(settings, bundle=bundle, neo4j=neo4j), settings, announce=said)
