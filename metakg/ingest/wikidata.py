"""Wikidata subsets over SPARQL (the SPARQL 1.1 protocol over urllib), synced incrementally.

A subset spec (YAML) names seed items, the properties to follow and a hop count; and/or class-based
selections (instances of a class, optionally only those with a given property); and/or a raw SPARQL
SELECT returning ``?item``. Queries are portable (``rdfs:label``, ``schema:description``,
``skos:altLabel``, ``schema:version``, ``schema:dateModified``, ``owl:sameAs``; no WDQS label service),
batched with ``VALUES`` and paged, so they run on the Wikidata Query Service and on any endpoint holding
Wikidata-shaped RDF (tests use Virtuoso).

Incremental sync: a state file per subset keeps each entity's revision, modification time and fetched
content. A re-sync first checks revisions in batches, then fetches only entities that are new or changed,
drops entities that left the subset or were deleted, and follows redirects (``owl:sameAs``). The bundle
is rebuilt from the state, written atomically, and only then is the new state written (atomically).
"""

from __future__ import annotations

import functools
import http.client
import io
import json
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import polars as pl
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metakg.errors import InputDataError, MetakgError
from metakg.progress import Progress
from metakg.redact import credentials_in, mask_url, scrub, split_credentials
from metakg.schemas import sparql
from metakg.schemas.bundle import Bundle
from metakg.schemas.curie import normalise_curie
from metakg.schemas.knowledge_source import WIKIDATA_PREFIXES, check_select
from metakg.schemas.tables import (
    NODE_SCHEMA,
    conform_edges,
    conform_nodes,
    empty_edges,
    empty_rejects,
    normalise_relation_expr,
)
from metakg.schemas.vocabulary import TypeVocabulary

WD, WDT = sparql.WD, sparql.WDT
IMPORTER = "wikidata"
PREFIXES = WIKIDATA_PREFIXES
#: external-identifier properties that become ``xrefs`` (prefix:value), so PrimeKG nodes and items meet
XREF_PROPERTIES = {
    "P715": "drugbank",
    "P5270": "mondo",
    "P351": "ncbigene",
    "P352": "uniprot",
    "P486": "mesh",
    "P2892": "umls",
    "P594": "ensembl",
    "P683": "chebi",
    "P3841": "hp",
    "P1554": "uberon",
    "P686": "go",
    "P3937": "reactome",
    "P699": "doid",
    "P354": "hgnc",
    "P1550": "orphanet",
    "P492": "omim",
    "P592": "chembl",
}
TYPE_PROPERTY = "P31"
_QID = sparql.QID
_T = TypeVar("_T")
_PID = sparql.PID
#: PREFIX and BASE declarations (the client sends its own prefixes)
_PROLOGUE = re.compile(r"(?i)\b(?:PREFIX\s+[A-Za-z0-9_.-]*:\s*<[^>]*>|BASE\s*<[^>]*>)")


class SyncError(MetakgError):
    """The endpoint could not be queried (after retries), answered malformed data, or the budget ran out."""

    exit_code = 1


class QueryTimeout(SyncError):
    """A query hit the endpoint's time limit (or the client timeout); the caller splits the batch."""


# ---------------------------------------------------------------------------- the spec
class ClassSelection(BaseModel):
    """Instances of ``class_`` (``wdt:P31``), optionally only those that have ``property``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    class_: str = Field(alias="class")
    property: str | None = None
    limit: int = Field(default=1000, ge=1, le=1_000_000)

    @field_validator("class_")
    @classmethod
    def _q(cls, value: str) -> str:
        if not _QID.match(value):
            raise ValueError(f"{value!r} is not an item id like Q5")
        return value

    @field_validator("property")
    @classmethod
    def _p(cls, value: str | None) -> str | None:
        if value is not None and not _PID.match(value):
            raise ValueError(f"{value!r} is not a property id like P50")
        return value


class SubsetSpec(BaseModel):
    """What to sync. See the module docstring and the README for the YAML form."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seeds: list[str] = Field(default_factory=list)
    properties: list[str] = Field(default_factory=list)
    hops: int = Field(default=0, ge=0, le=3)
    languages: list[str] = Field(default_factory=lambda: ["en"], min_length=1)
    classes: list[ClassSelection] = Field(default_factory=list)
    sparql: str | None = None
    xrefs: dict[str, str] = Field(default_factory=dict, description="more external-id properties: PID -> prefix")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if not _QID.match(v)]
        if bad:
            raise ValueError(f"not item ids: {bad}")
        return values

    @field_validator("properties")
    @classmethod
    def _props(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if not _PID.match(v)]
        if bad:
            raise ValueError(f"not property ids: {bad}")
        return values

    @field_validator("languages")
    @classmethod
    def _langs(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if not re.match(r"^[a-z]{2,3}(-[a-z0-9]+)*$", v)]
        if bad:
            raise ValueError(f"not language codes: {bad}")
        return values

    @field_validator("sparql")
    @classmethod
    def _select_only(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            check_select(value)
        except ValueError as e:
            raise ValueError(f"must be a read-only SELECT query returning ?item: {e}") from None
        if "?item" not in _PROLOGUE.sub("", value):
            raise ValueError("must bind ?item")
        return value

    def xref_properties(self) -> dict[str, str]:
        """External-id properties and their CURIE prefixes (the built-in ones plus the spec's)."""
        return {**XREF_PROPERTIES, **self.xrefs}


def load_spec(path: Path) -> SubsetSpec:
    """Read and check a subset spec.

    Raises:
        InputDataError: the file is missing, not YAML, or a field is wrong (the message names it).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputDataError(f"cannot read subset spec {path}: {e.strerror or e}.") from e
    except yaml.YAMLError as e:
        raise InputDataError(f"subset spec {path} is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise InputDataError(f"subset spec {path} must be a mapping (name:, seeds:, properties:, ...).")
    try:
        spec = SubsetSpec.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors(include_url=False)
        )
        raise InputDataError(f"subset spec {path}: {problems}") from e
    if not (spec.seeds or spec.classes or spec.sparql):
        raise InputDataError(f"subset spec {path} selects nothing: give seeds, classes or sparql.")
    return spec


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
                if isinstance(e.reason, ConnectionRefusedError):
                    # nothing listens there: a refused connection is not a slow server, so give up soon
                    refused += 1
                    if refused > self.connect_retries:
                        raise SyncError(
                            f"{target} refused the connection {refused} times: is it running? "
                            "(wikidata.endpoint; wikidata.connect_retries sets how often to try)"
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


def _xref(prefix: str, value: str) -> str:
    """``prefix:value`` in its one form (:func:`normalise_curie`): ``doid`` with ``DOID:2377`` is ``doid:2377``."""
    return normalise_curie(f"{prefix}:{value}") or f"{prefix}:{value}"


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


# ---------------------------------------------------------------------------- selection and fetching
def select_items(spec: SubsetSpec, client: SparqlClient, batch_size: int, page_size: int = 1000) -> list[str]:
    """The item ids of the subset, in a stable order (seeds, then hop by hop, then classes, then sparql)."""
    chosen: dict[str, None] = dict.fromkeys(spec.seeds)
    frontier = list(spec.seeds)
    for _ in range(spec.hops if spec.properties else 0):
        rows = batched(client, frontier, batch_size, lambda b: sparql.linked_items(b, spec.properties))
        _bound(client, rows, "o")
        frontier = [q for q in (_qid(r["o"]["value"]) for r in rows) if q and q not in chosen]
        chosen.update(dict.fromkeys(frontier))
    for selection in spec.classes:
        offset = 0
        while offset < selection.limit:
            size = min(page_size, selection.limit - offset)
            rows = client.select(sparql.class_members(selection.class_, selection.property, size, offset))
            _bound(client, rows, "item")
            chosen.update(dict.fromkeys(q for q in (_qid(r["item"]["value"]) for r in rows) if q))
            if len(rows) < size:
                break
            offset += size
    if spec.sparql:  # the spec's own query may leave ?item unbound in a row (OPTIONAL, UNION): such rows are skipped
        rows = client.select(_PROLOGUE.sub("", spec.sparql))
        chosen.update(dict.fromkeys(q for q in (_qid(r.get("item", {}).get("value", "")) for r in rows) if q))
    return list(chosen)


@dataclass(frozen=True)
class Revision:
    """What the endpoint says of an entity before fetching it."""

    exists: bool
    version: str | None = None
    modified: str | None = None
    redirect: str | None = None

    @property
    def key(self) -> list[str | None]:
        """What a change is detected on."""
        return [self.version, self.modified]


def check_revisions(client: SparqlClient, ids: Sequence[str], batch_size: int) -> dict[str, Revision]:
    """Revision, modification time, redirect target and existence of each id (one query per batch)."""
    rows = batched(client, ids, batch_size, sparql.revisions)
    _bound(client, rows, "item", "exists")  # ?rev, ?mod and ?same are OPTIONAL: absent when unbound
    found: dict[str, Revision] = {}
    for row in rows:
        qid = _qid(row["item"]["value"])
        if qid is None:
            continue
        exists = row.get("exists", {}).get("value") in ("1", "true")
        found[qid] = Revision(
            exists=exists,
            version=row.get("rev", {}).get("value"),
            modified=row.get("mod", {}).get("value"),
            redirect=_qid(row.get("same", {}).get("value", "")),
        )
    return {i: found.get(i, Revision(exists=False)) for i in ids}


def _literal(binding: dict[str, str]) -> dict[str, str]:
    value = {"value": binding["value"]}
    if "datatype" in binding:
        value["datatype"] = binding["datatype"]
    if "xml:lang" in binding:
        value["lang"] = binding["xml:lang"]
    return value


def fetch_entities(
    client: SparqlClient, ids: Sequence[str], spec: SubsetSpec, batch_size: int, now: str
) -> dict[str, dict[str, Any]]:
    """Labels, descriptions and aliases in the spec's languages and the statements of the selected,
    type and external-id properties, for each id."""
    records: dict[str, dict[str, Any]] = {
        i: {"labels": {}, "descriptions": {}, "aliases": {}, "statements": {}, "retrieved_at": now} for i in ids
    }
    terms = batched(client, ids, batch_size, lambda b: sparql.terms(b, spec.languages))
    _bound(client, terms, "item", "p", "o")
    kinds = {
        "http://www.w3.org/2000/01/rdf-schema#label": "labels",
        "http://schema.org/description": "descriptions",
        "http://www.w3.org/2004/02/skos/core#altLabel": "aliases",
    }
    for row in terms:
        qid = _qid(row["item"]["value"])
        kind = kinds.get(row["p"]["value"])
        if qid not in records or kind is None:
            continue
        lang = row["o"].get("xml:lang", "")
        if kind == "aliases":
            records[qid]["aliases"].setdefault(lang, []).append(row["o"]["value"])
        else:
            records[qid][kind].setdefault(lang, row["o"]["value"])
    props = sorted({*spec.properties, TYPE_PROPERTY, *spec.xref_properties()})
    statements = batched(client, ids, batch_size, lambda b: sparql.statements(b, props))
    _bound(client, statements, "item", "p", "o")
    for row in statements:
        qid = _qid(row["item"]["value"])
        pid = row["p"]["value"][len(WDT) :] if row["p"]["value"].startswith(WDT) else None
        if qid not in records or pid is None:
            continue
        obj = row["o"]
        value: Any = {"item": _qid(obj["value"])} if obj["type"] == "uri" and _qid(obj["value"]) else _literal(obj)
        bucket = records[qid]["statements"].setdefault(pid, [])
        if value not in bucket:
            bucket.append(value)
    return records


def property_labels(client: SparqlClient, pids: Sequence[str], language: str) -> dict[str, str]:
    """English (or the first configured language's) labels of properties; ids without one map to themselves."""
    if not pids:
        return {}
    rows = client.select(sparql.property_labels(pids, language))
    _bound(client, rows, "p", "label")
    labels = {pid: pid for pid in pids}
    for row in rows:
        uri = row["p"]["value"]
        if uri.startswith(WD):
            labels[uri[len(WD) :]] = row["label"]["value"]
    return labels


# ---------------------------------------------------------------------------- state and sync
@dataclass
class SyncReport:
    """What a sync did; the counts are derived from the id lists."""

    queries: int = 0
    retries: int = 0
    redirected: int = 0
    nodes: int = 0
    edges: int = 0
    added_ids: list[str] = field(default_factory=list)
    changed_ids: list[str] = field(default_factory=list)
    removed_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary."""
        return {
            "queries": self.queries,
            "retries": self.retries,
            "entities_fetched": len(self.added_ids) + len(self.changed_ids),
            "added": len(self.added_ids),
            "changed": len(self.changed_ids),
            "removed": len(self.removed_ids),
            "redirected": self.redirected,
            "nodes": self.nodes,
            "edges": self.edges,
            "added_ids": self.added_ids,
            "changed_ids": self.changed_ids,
            "removed_ids": self.removed_ids,
        }


def read_state(path: Path) -> dict[str, Any]:
    """The state file (empty when missing). Raises InputDataError when it is unreadable."""
    if not path.exists():
        return {"entities": {}, "property_labels": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputDataError(f"the sync state file {path} is unreadable ({e}); delete it to sync from scratch.") from e
    if not isinstance(state, dict) or not isinstance(state.get("entities"), dict):
        raise InputDataError(f"the sync state file {path} has no entities map; delete it to sync from scratch.")
    state.setdefault("property_labels", {})
    return state


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write the state atomically (a temporary file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(state, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def sync_state(
    spec: SubsetSpec,
    state: dict[str, Any],
    client: SparqlClient,
    *,
    batch_size: int = 50,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], SyncReport]:
    """Bring ``state`` up to date with the endpoint; returns the new state (the old one is not changed)."""
    say = progress or (lambda _s: None)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    old: dict[str, Any] = state["entities"]
    say("selecting the subset")
    selected = select_items(spec, client, batch_size)
    say(f"checking revisions of {len(set(selected) | set(old))} entities")
    revisions = check_revisions(client, list(dict.fromkeys([*selected, *old])), batch_size)
    report = SyncReport()
    current: dict[str, None] = {}
    for qid in selected:
        rev = revisions[qid]
        if rev.redirect and rev.redirect != qid:
            report.redirected += 1
            target = rev.redirect
            if target not in revisions:
                revisions.update(check_revisions(client, [target], batch_size))
            current[target] = None
        elif rev.exists:
            current[qid] = None
    to_fetch = [q for q in current if q not in old or old[q].get("revision") != revisions[q].key]
    report.added_ids = [q for q in to_fetch if q not in old]
    report.changed_ids = [q for q in to_fetch if q in old]
    report.removed_ids = [q for q in old if q not in current]
    fetched: dict[str, dict[str, Any]] = {}
    if to_fetch:
        say(f"fetching {len(to_fetch)} entities")
        fetched = fetch_entities(client, to_fetch, spec, batch_size, now)
        for qid, record in fetched.items():
            record["revision"] = revisions[qid].key
    labels = dict(state.get("property_labels", {}))
    wanted = sorted(set(spec.properties) - set(labels))
    if wanted:
        labels.update(property_labels(client, wanted, spec.languages[0]))
    report.queries, report.retries = client.queries, client.retries
    ordered = {q: fetched[q] if q in fetched else old[q] for q in current}
    return {"spec": spec.model_dump(by_alias=True), "entities": ordered, "property_labels": labels}, report


def _timestamp(value: str | None) -> datetime | None:
    """An ``xsd:dateTime`` from the endpoint (``2024-05-01T12:00:00Z``) as a UTC datetime; None when absent
    or unreadable."""
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None
    return stamp.astimezone(UTC) if stamp and stamp.tzinfo else (stamp.replace(tzinfo=UTC) if stamp else None)


def _first(values: dict[str, Any], languages: Sequence[str]) -> Any:
    for lang in languages:
        if lang in values:
            return values[lang]
    return None


def build_bundle(spec: SubsetSpec, state: dict[str, Any], vocabulary: TypeVocabulary, run_id: str) -> Bundle:
    """Nodes and edges of the synced subset: item-valued statements between subset entities become edges,
    literals become node ``properties``, external ids become ``xrefs``, the P31 class gives the type."""
    entities: dict[str, dict[str, Any]] = state["entities"]
    labels: dict[str, str] = state.get("property_labels", {})
    xref_props = spec.xref_properties()
    selected = set(spec.properties)
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for qid, record in entities.items():
        statements: dict[str, list[Any]] = record["statements"]
        classes = [v["item"] for v in statements.get(TYPE_PROPERTY, []) if "item" in v]
        node_type = next((vocabulary.wikidata[c] for c in classes if c in vocabulary.wikidata), "entity")
        aliases = [a for lang in spec.languages for a in record["aliases"].get(lang, [])]
        xrefs = [  # in their one form: Wikidata writes some with their prefix (P699: DOID:2377), some without
            _xref(xref_props[pid], v["value"]) for pid in xref_props for v in statements.get(pid, []) if "value" in v
        ]
        properties = {
            f"{labels.get(pid, pid)} ({pid})": [v["value"] for v in values if "value" in v]
            for pid, values in sorted(statements.items())
            if pid in selected and any("value" in v for v in values)
        }
        revision = record.get("revision", [None, None])
        modified = _timestamp(revision[1])
        nodes.append(
            {
                "id": f"wd:{qid}",
                "name": _first(record["labels"], spec.languages) or qid,
                "type": node_type,
                "source": IMPORTER,
                "description": _first(record["descriptions"], spec.languages),
                "aliases": aliases,
                "xrefs": xrefs,
                "properties": json.dumps(properties, ensure_ascii=False) if properties else None,
                "revision": revision[0],
                "retrieved_at": datetime.fromisoformat(record["retrieved_at"]),
                "valid_from": modified,
            }
        )
        for pid in spec.properties:
            for value in statements.get(pid, []):
                target = value.get("item")
                if target is None or target not in entities:
                    continue
                edges.append(
                    {
                        "src": f"wd:{qid}",
                        "dst": f"wd:{target}",
                        "relation": labels.get(pid, pid),
                        "pid": pid,
                        # the statement that states it (item and property), not the item's revision: an edit of
                        # the item elsewhere (its label) leaves its edges as they were
                        "record_ids": [f"wd:{qid}#{pid}"],
                        "created_at": datetime.fromisoformat(record["retrieved_at"]),
                        "valid_from": modified,
                    }
                )
    node_frame = conform_nodes(pl.DataFrame(nodes, schema=dict(NODE_SCHEMA)))
    if edges:
        frame = pl.DataFrame(edges, infer_schema_length=None).with_columns(
            normalise_relation_expr(pl.col("relation")).alias("rel"),
            (pl.col("relation") + pl.lit(" (") + pl.col("pid") + pl.lit(")")).alias("display"),
            pl.lit(IMPORTER).alias("source"),
            pl.lit(1.0).alias("confidence"),
            pl.lit(1, dtype=pl.Int64).alias("count"),
            pl.lit(IMPORTER).alias("importer"),
            pl.lit(run_id).alias("run_id"),
        )
        frame = frame.with_columns(
            pl.when(pl.col("rel") == "").then(pl.col("pid").str.to_lowercase()).otherwise("rel").alias("rel")
        )
        frame = frame.unique(["src", "rel", "dst"], keep="first", maintain_order=True)
        edge_frame = conform_edges(frame.drop("relation", "pid"))  # computes the edge ids
    else:
        edge_frame = empty_edges()
    return Bundle(nodes=node_frame, edges=edge_frame, rejects=empty_rejects(), manifest={})


def fetch_fragment(
    client: SparqlClient,
    ids: Sequence[str],
    properties: Sequence[str],
    vocabulary: TypeVocabulary,
    *,
    languages: Sequence[str] = ("en",),
    run_id: str = "fragment",
    batch_size: int = 50,
) -> Bundle:
    """The nodes of ``ids`` and their ``properties`` statements among them, mapped exactly as a sync maps
    them (the same ids, types, xrefs, properties, revision and provenance), so a graph grown from fragments
    merges cleanly with a synced bundle. Redirected ids become their targets; missing ones are left out."""
    spec = SubsetSpec(name="fragment", seeds=list(dict.fromkeys(ids)), properties=list(properties),
                      languages=list(languages))  # fmt: skip
    now = datetime.now(UTC).isoformat(timespec="seconds")
    revisions = check_revisions(client, spec.seeds, batch_size)
    current = list(dict.fromkeys(r.redirect or q for q, r in revisions.items() if r.exists or r.redirect))
    missing = [q for q in current if q not in revisions]
    revisions.update(check_revisions(client, missing, batch_size) if missing else {})
    entities = fetch_entities(client, current, spec, batch_size, now) if current else {}
    for qid, record in entities.items():
        record["revision"] = revisions[qid].key
    labels = property_labels(client, sorted(set(spec.properties)), spec.languages[0])
    return build_bundle(spec, {"entities": entities, "property_labels": labels}, vocabulary, run_id)


@dataclass
class WikidataFragments:
    """The ``EntityFetcher`` of the QA engine over a SPARQL client (see :func:`fetch_fragment`)."""

    client: SparqlClient
    vocabulary: TypeVocabulary
    languages: Sequence[str] = ("en",)
    run_id: str = "fragment"

    @property
    def endpoint(self) -> str:
        """The endpoint URL."""
        return self.client.endpoint

    @property
    def queries(self) -> int:
        """Queries sent so far (retries included)."""
        return self.client.queries

    def select(self, query: str, *, timeout_s: float | None = None) -> list[dict[str, dict[str, str]]]:
        """A read-only SELECT through the client (its retries, timeout and query budget)."""
        return self.client.select(query, timeout_s=timeout_s)

    def search_entities(self, text: str, k: int) -> list[dict[str, str | None]] | None:
        """Items by label through the client's search API, or None when it has none (search labels over
        SPARQL then)."""
        if not self.client.search_api:
            return None
        return self.client.search_labels(text, language=self.languages[0], k=k)

    def fetch(self, ids: Sequence[str], properties: Sequence[str]) -> Bundle:
        """Nodes and statements as a sync maps them."""
        return fetch_fragment(self.client, ids, properties, self.vocabulary, languages=self.languages,
                              run_id=self.run_id)  # fmt: skip
