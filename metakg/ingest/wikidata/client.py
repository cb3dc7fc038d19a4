"""The SPARQL client: SELECT queries over the SPARQL 1.1 protocol with retries, a deadline on each whole
reply, a query budget, and the errors of a sync."""

from __future__ import annotations

import functools
import http.client
import io
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from metakg.errors import MetakgError
from metakg.ingest.wikidata.spec import _QID, _T, PREFIXES, WD
from metakg.redact import credentials_in, mask_url, scrub, split_credentials


class SyncError(MetakgError):
    """The endpoint could not be queried (after retries), answered malformed data, or the budget ran out."""

    exit_code = 1


class QueryTimeout(SyncError):
    """A query hit the endpoint's time limit (or the client timeout); the caller splits the batch."""


# ---------------------------------------------------------------------------- the endpoint
class _Transient(Exception):
    """A failed attempt worth retrying: why, and how long the server asked to wait (if it did)."""

    def __init__(self, last: str, wait: float | None = None) -> None:
        super().__init__(last)
        self.last, self.wait = last, wait


@dataclass
class SparqlClient:
    """SELECT queries with retries: 429 honours Retry-After, 5xx, malformed replies and connections dropped
    mid-reply back off, timeouts raise :class:`QueryTimeout` (the caller splits the batch). ``max_queries``
    bounds a run. ``timeout_s`` is the deadline of each attempt's whole reply (connect, headers and body), not
    of each read, so an endpoint dripping its reply cannot hold a run for long. A ``user:password@`` in the
    endpoint URL is sent as HTTP basic auth to the host behind it; messages show the URL masked.

    ``search_api``, when set, is a MediaWiki API (``https://www.wikidata.org/w/api.php``) whose
    ``wbsearchentities`` finds items by label and alias (:meth:`search_labels`); its requests share the
    agent, retries, timeout and query budget."""

    endpoint: str
    user_agent: str
    timeout_s: float = 70.0
    max_retries: int = 5
    backoff_s: float = 2.0
    max_queries: int = 10_000
    connect_retries: int = 1
    max_retry_after_s: float = 300.0
    search_api: str | None = None
    queries: int = 0
    retries: int = 0
    sleep: Callable[[float], None] = time.sleep

    def select(self, query: str, *, timeout_s: float | None = None) -> list[dict[str, dict[str, str]]]:
        """The bindings of a SELECT query, waiting at most ``timeout_s`` (default: the client's) for the whole
        reply of each attempt.

        Raises:
            QueryTimeout: no complete reply in time, or the endpoint's own time limit was hit.
            SyncError: the endpoint refused the query, or failed (or answered malformed data) after retries.
        """
        wait = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        url, authorization = split_credentials(self.endpoint)
        form = {"query": PREFIXES + query, "format": "json", "output": "json", "results": "json"}
        data = urllib.parse.urlencode(form).encode("ascii")

        def attempt() -> list[dict[str, dict[str, str]]]:
            request = urllib.request.Request(url, data=data, method="POST")
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
            request.add_header("Accept", SPARQL_JSON)
            request.add_header("User-Agent", self.user_agent)
            if authorization:  # never sent on to another host a redirect names
                request.add_unredirected_header("Authorization", authorization)
            deadline = _Deadline(wait)
            try:
                with _open(request, deadline) as response:
                    body = response.read()
            except urllib.error.HTTPError as e:
                said = _error_text(e)
                if e.code == 400:
                    raise SyncError(
                        f"the endpoint {mask_url(self.endpoint)} refused a query as malformed: {said}"
                    ) from e
                if e.code == 500:
                    lowered = said.lower()
                    if "timeoutexception" in lowered or "timeout" in lowered or "exceeds the limit" in lowered:
                        # the time limit was hit, or the endpoint refused a query it estimates would exceed it
                        # (Virtuoso: "estimated execution time ... exceeds the limit"): retrying cannot help
                        raise QueryTimeout(f"the query hit the endpoint's time limit: {said}") from e
                    raise _Transient(f"HTTP 500: {said}") from e
                raise
            return _bindings(json.loads(body))

        return self._with_retries(attempt, f"the endpoint {mask_url(self.endpoint)}", wait)

    def search_labels(self, text: str, *, language: str = "en", k: int = 7) -> list[dict[str, str | None]]:
        """Items whose label or alias matches ``text`` (the search API's ranking): id, label, description.

        Raises:
            SyncError: no ``search_api``, the API refused the request, or it failed after its retries.
        """
        if not self.search_api:
            raise SyncError("no search API is configured (wikidata.search_api).")
        params = {"action": "wbsearchentities", "search": text, "language": language, "uselang": language,
                  "type": "item", "limit": str(max(1, min(int(k), 50))), "format": "json"}  # fmt: skip
        url = f"{self.search_api}?{urllib.parse.urlencode(params)}"

        url, authorization = split_credentials(url)

        def attempt() -> list[dict[str, str | None]]:
            request = urllib.request.Request(url, headers={"User-Agent": self.user_agent, "Accept": "application/json"})
            if authorization:
                request.add_unredirected_header("Authorization", authorization)
            with _open(request, _Deadline(self.timeout_s)) as response:
                data = json.loads(response.read())
            if "error" in data:
                info = data["error"].get("info", data["error"]) if isinstance(data["error"], dict) else data["error"]
                raise SyncError(f"the search API {mask_url(str(self.search_api))} refused the search: {info}")
            hits = data["search"]
            if not isinstance(hits, list):
                raise ValueError("search is not a list")
            return [{"id": str(h["id"]), "label": h.get("label"), "description": h.get("description")} for h in hits]

        return self._with_retries(attempt, f"the search API {mask_url(str(self.search_api))}")

    def _with_retries(self, attempt: Callable[[], _T], target: str, wait_s: float | None = None) -> _T:
        """``attempt()`` within the query budget, retried on 429 (Retry-After honoured), 5xx, dropped or
        refused connections (a few times only: nothing may listen there) and malformed replies. ``target`` names
        what is asked ("the endpoint <url>"); ``wait_s`` is the attempt's time limit. No message carries the
        endpoint's credentials, which an error reply may echo."""
        try:
            return self._retried(attempt, target, wait_s)
        except SyncError as e:
            secrets = [
                secret
                for url in (self.endpoint, str(self.search_api or ""))
                for secret in credentials_in(split_credentials(url)[1])
            ]
            said = scrub(str(e), secrets)
            if said != str(e):
                raise type(e)(said) from None
            raise

    def _retried(self, attempt: Callable[[], _T], target: str, wait_s: float | None = None) -> _T:
        delay = self.backoff_s
        last = ""
        refused = 0
        for number in range(self.max_retries + 1):
            if self.queries >= self.max_queries:
                raise SyncError(
                    f"the query budget of {self.max_queries} queries is spent (wikidata.max_queries); "
                    "nothing was written. Raise it or narrow the subset."
                )
            self.queries += 1
            if number:
                self.retries += 1
            wait: float | None = None
            try:
                return attempt()
            except _Transient as e:
                last, wait = e.last, e.wait
            except urllib.error.HTTPError as e:
                if e.code == 429:
                    last = "HTTP 429 (rate limited)"
                    wait = _retry_after(e.headers.get("Retry-After"), self.max_retry_after_s)
                elif e.code >= 500:
                    last = f"HTTP {e.code}"
                    wait = _retry_after(e.headers.get("Retry-After"), self.max_retry_after_s)
                elif e.code in (401, 403):
                    raise SyncError(
                        f"{target} answered HTTP {e.code}: {e.reason}; check the user and password "
                        "(http://user:password@host/... in the URL)"
                    ) from e
                else:
                    raise SyncError(f"{target} answered HTTP {e.code}: {e.reason}") from e
            except TimeoutError as e:
                raise QueryTimeout(_no_answer(wait_s or self.timeout_s)) from e
            except urllib.error.URLError as e:
                if isinstance(e.reason, TimeoutError):
                    raise QueryTimeout(_no_answer(wait_s or self.timeout_s)) from e
                if isinstance(e.reason, ConnectionRefusedError | socket.gaierror):
                    # nothing listens there, or the name has no address (offline, or a wrong host): not a slow
                    # server, so give up soon
                    refused += 1
                    if refused > self.connect_retries:
                        why = (
                            f": its host name could not be resolved ({e.reason.strerror or e.reason}); is this "
                            "machine offline, or is the host name wrong?"
                            if isinstance(e.reason, socket.gaierror)
                            else f" refused the connection {refused} times: is it running?"
                        )
                        raise SyncError(
                            f"{target}{why} (wikidata.endpoint; wikidata.connect_retries sets how often to try)"
                        ) from e
                    self.sleep(min(delay, 1.0))
                    continue
                last = f"connection failed: {e.reason}"
            except (ValueError, KeyError, TypeError) as e:  # json errors are ValueErrors
                last = f"malformed response ({type(e).__name__}: {str(e)[:120]})"
            except http.client.HTTPException as e:  # IncompleteRead, a bad status line: the link broke mid-reply
                last = f"connection dropped mid-reply ({type(e).__name__}: {str(e)[:120]})"
            except (ConnectionError, OSError) as e:
                last = f"{type(e).__name__}: {str(e)[:200]}"
            if number < self.max_retries:
                self.sleep(wait if wait is not None else delay)
                delay *= 2
        raise SyncError(f"{target} failed {self.max_retries + 1} times (last: {last}).")


SPARQL_JSON = "application/sparql-results+json,application/json;q=0.9"


def _no_answer(seconds: float) -> str:
    return f"no answer within {seconds:g} s (the whole reply; wikidata.timeout_s sets the limit)"


class _Deadline:
    """The time one request may take in all: connecting, sending, the headers and the whole body."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; TimeoutError when none are."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError(_no_answer(self.seconds))
        return left


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each waiting only for what is left of the deadline (a reply dripped byte by byte
    cannot outlast it, as it outlasts a timeout per read)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # keeps the socket open while the body is read
        self._deadline = deadline

    def readable(self) -> bool:
        """Always: it is a reader."""
        return True

    def readinto(self, buffer: Any) -> int | None:
        """Read what arrives within the time left."""
        self._sock.settimeout(self._deadline.left())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        """Release the socket (closed once its connection has let go of it too)."""
        self._raw.close()
        super().close()


def _response_class(deadline: _Deadline) -> type[http.client.HTTPResponse]:
    class Response(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None,
                     url: str | None = None) -> None:  # fmt: skip
            super().__init__(sock, debuglevel, method, url)
            self.fp.close()
            self.fp = io.BufferedReader(_DeadlineReader(sock, deadline))

    return Response


class _HTTPConnection(http.client.HTTPConnection):
    """A connection whose connecting (the TLS handshake too, per read) and reading end at one deadline."""

    def __init__(self, host: str, *, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._deadline = deadline
        self.response_class = _response_class(deadline)

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        super().connect()


class _HTTPSConnection(_HTTPConnection, http.client.HTTPSConnection):
    """The same over TLS."""


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPConnection, req, deadline=self._deadline)  # type: ignore[arg-type]


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every HTTPS request (the system's certificates), made once."""
    return ssl.create_default_context()


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__(context=_tls())
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPSConnection, req, context=_tls(), deadline=self._deadline)  # type: ignore[arg-type]


def _open(request: urllib.request.Request, deadline: _Deadline) -> Any:
    """``urlopen(request)`` (proxies and redirects as urllib does them) within ``deadline``: the reply must
    be complete, not merely moving, when it runs out (TimeoutError)."""
    opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
    return opener.open(request, timeout=deadline.left())


def _error_text(error: urllib.error.HTTPError) -> str:
    """The start of an error reply's body (what the endpoint says went wrong), or its reason."""
    try:
        text = error.read(4096).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException):
        text = ""
    return (text or str(error.reason))[:200]


def _bindings(reply: Any) -> list[dict[str, dict[str, str]]]:
    """The rows of a SPARQL JSON results document, checked to be RDF terms (``type`` and ``value``).

    Raises:
        ValueError: not such a document (a malformed reply: retried).
    """
    bindings = (
        reply["results"]["bindings"] if isinstance(reply, dict) and isinstance(reply.get("results"), dict) else None
    )
    if not isinstance(bindings, list):
        raise ValueError("results.bindings is not a list")
    for number, row in enumerate(bindings):
        if not isinstance(row, dict):
            raise ValueError(f"results.bindings[{number}] is not an object")
        for name, term in row.items():
            if not (
                isinstance(term, dict) and isinstance(term.get("type"), str) and isinstance(term.get("value"), str)
            ):
                raise ValueError(f"results.bindings[{number}].{name} is not an RDF term (type and value)")
            for key, part in term.items():  # xml:lang, datatype: text too, and every text valid Unicode
                if not isinstance(part, str):
                    raise ValueError(f"results.bindings[{number}].{name}.{key} is not text")
                try:
                    part.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(
                        f"results.bindings[{number}].{name}.{key} is not Unicode text (a lone surrogate)"
                    ) from None
    return bindings


def _bound(client: SparqlClient, rows: list[dict[str, dict[str, str]]], *names: str) -> list[dict[str, dict[str, str]]]:
    """``rows``, each checked to bind every variable of ``names`` (those the query always binds).

    Raises:
        SyncError: a row lacks one of them (the endpoint does not answer the query it was sent).
    """
    for row in rows:
        missing = next((name for name in names if name not in row), None)
        if missing is not None:
            raise SyncError(
                f"the endpoint {mask_url(client.endpoint)} answered a result row without ?{missing}, which the "
                f"query always binds (it selects {' '.join('?' + n for n in names)}): it does not answer SPARQL "
                "1.1 queries as expected; check wikidata.endpoint (or --endpoint)."
            )
    return rows


def _retry_after(value: str | None, cap: float) -> float | None:
    if value is None:
        return None
    try:
        return min(cap, max(0.0, float(value)))
    except ValueError:
        return None


def _qid(uri: str) -> str | None:
    if uri.startswith(WD):
        tail = uri[len(WD) :]
        return tail if _QID.match(tail) else None
    return None


def batched(
    client: SparqlClient, ids: Sequence[str], size: int, build: Callable[[Sequence[str]], str]
) -> list[dict[str, dict[str, str]]]:
    """Run ``build(batch)`` over ``ids`` in batches; a batch that times out is split in halves."""
    rows: list[dict[str, dict[str, str]]] = []
    pending = [list(ids[i : i + size]) for i in range(0, len(ids), size)]
    while pending:
        batch = pending.pop(0)
        try:
            rows.extend(client.select(build(batch)))
        except QueryTimeout as e:
            if len(batch) == 1:
                raise SyncError(
                    f"the query for {batch[0]} alone got no complete answer from {mask_url(client.endpoint)} in time "
                    f"({e}). The endpoint may be slow or failing: raise wikidata.timeout_s (now "
                    f"{client.timeout_s:g} s), or leave {batch[0]} out of the subset if it is too large to fetch."
                ) from e
            half = len(batch) // 2
            pending[:0] = [batch[:half], batch[half:]]
    return rows
