"""The SPARQL client against a hostile endpoint: a real HTTP server on 127.0.0.1 that answers SPARQL JSON
results and, on demand, drips its reply byte by byte, drops the connection mid-body, leaves a variable out
of its rows or demands a password."""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from metakg.ingest.wikidata import (
    QueryTimeout,
    SparqlClient,
    SubsetSpec,
    SyncError,
    check_revisions,
    fetch_entities,
    property_labels,
    select_items,
)
from tests.scripted_http import QuietHandler, ScriptedHTTP

WD = "http://www.wikidata.org/entity/"


def uri(value: str) -> dict[str, str]:
    return {"type": "uri", "value": value}


class SparqlServer(ScriptedHTTP):
    """Each POST takes the next action: ``ok`` (``rows``, as SPARQL JSON results), ``drip:<s>`` (the whole
    reply, headers included, a byte every ``<s>`` seconds), ``drop_mid_body`` (half the body of a
    content-length reply, then the connection closes), ``drop_mid_chunk`` (the same for a chunked reply),
    ``500``, ``401``, ``echo:<status>`` (an error reply repeating the Authorization header). Keeps each request's
    query, Authorization and Host."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []
        self.queries: list[str] = []
        self.seen: list[dict[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sparql"

    def start(self) -> SparqlServer:
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("content-length", 0))).decode())
                with server.lock:
                    server.queries.append(form.get("query", [""])[0])
                    server.seen.append({"authorization": self.headers.get("Authorization"),
                                        "host": self.headers.get("Host")})  # fmt: skip
                name, _, arg = server.next_action().partition(":")
                payload = json.dumps({"head": {"vars": []}, "results": {"bindings": server.rows}}).encode()
                head = "HTTP/1.1 {status}\r\ncontent-type: application/sparql-results+json\r\n{length}\r\n\r\n"
                sized = head.format(status="200 OK", length=f"content-length: {len(payload)}\r\nconnection: close")
                self.close_connection = True
                try:
                    if name == "drip":
                        for byte in sized.encode() + payload:
                            time.sleep(float(arg))
                            self.wfile.write(bytes([byte]))
                            if server.stopped.is_set():
                                return
                    elif name == "drop_mid_body":
                        self.wfile.write(sized.encode() + payload[: len(payload) // 2])
                        self.connection.shutdown(2)
                    elif name == "drop_mid_chunk":
                        half = payload[: len(payload) // 2]
                        chunked = head.format(status="200 OK", length="transfer-encoding: chunked")
                        self.wfile.write(chunked.encode() + b"%x\r\n%s\r\n" % (len(half), half))
                        self.connection.shutdown(2)
                    elif name == "echo":  # an error reply repeating the request's credentials, as some proxies do
                        said = f"bad query; you sent Authorization: {self.headers.get('Authorization')}".encode()
                        self.wfile.write(
                            head.format(status=f"{arg} Error", length=f"content-length: {len(said)}").encode()
                        )
                        self.wfile.write(said)
                    elif name in ("500", "401"):
                        said = b"internal error" if name == "500" else b"who are you?"
                        status = "500 Internal Server Error" if name == "500" else "401 Unauthorized"
                        self.wfile.write(head.format(status=status, length=f"content-length: {len(said)}").encode())
                        self.wfile.write(said)
                    else:
                        self.wfile.write(sized.encode() + payload)
                except OSError:
                    return  # the client gave up

        self.serve(Handler)
        return self


@pytest.fixture
def endpoint() -> Iterator[SparqlServer]:
    running = SparqlServer().start()
    yield running
    running.stop()


def client(url: str, **overrides: Any) -> SparqlClient:
    options: dict[str, Any] = {"timeout_s": 1.0, "max_retries": 3, "backoff_s": 0.01, "sleep": lambda _s: None}
    return SparqlClient(url, "metakg-test/1.0", **(options | overrides))


def revision_row(qid: str) -> dict[str, Any]:
    return {"item": uri(WD + qid), "exists": {"type": "literal", "value": "true"}}


def test_a_dripped_reply_ends_at_the_deadline_not_after_minutes(endpoint: SparqlServer) -> None:
    """Every byte comes well within the 1 s timeout, the reply would take ~12 s: the deadline is the whole
    reply's, so the query ends as a QueryTimeout after ~1 s (a timeout is not retried: batches are split)."""
    endpoint.rows = [revision_row("Q1")]
    endpoint.script("drip:0.05")
    start = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"no answer within 1 s \(the whole reply; wikidata.timeout_s"):
        client(endpoint.url).select("SELECT ?item WHERE { ?item ?p ?o }")
    assert time.monotonic() - start < 3.0


def test_a_batch_whose_reply_drips_is_split_and_answered(endpoint: SparqlServer) -> None:
    endpoint.rows = [revision_row("Q1"), revision_row("Q2")]
    endpoint.script("drip:0.05")  # the first query (both ids) drips; its halves are answered at once
    c = client(endpoint.url)
    start = time.monotonic()
    found = check_revisions(c, ["Q1", "Q2"], 2)
    assert time.monotonic() - start < 3.0
    assert found["Q1"].exists and found["Q2"].exists and c.queries == 3


def test_the_search_api_has_the_same_deadline(endpoint: SparqlServer) -> None:
    class SearchServer(ScriptedHTTP):
        pass

    search = SearchServer()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            payload = json.dumps({"search": [{"id": "Q42", "label": "Douglas Adams"}]}).encode()
            reply = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(payload), payload)
            self.close_connection = True
            for byte in reply:
                time.sleep(0.05)
                try:
                    self.wfile.write(bytes([byte]))
                except OSError:
                    return
                if search.stopped.is_set():
                    return

    search.serve(Handler)
    try:
        c = client(endpoint.url, search_api=f"http://127.0.0.1:{search.port}/w/api.php")
        start = time.monotonic()
        with pytest.raises(QueryTimeout, match="no answer within 1 s"):
            c.search_labels("Douglas Adams")
        assert time.monotonic() - start < 3.0
    finally:
        search.stop()


def test_a_connection_dropped_mid_body_is_retried(endpoint: SparqlServer) -> None:
    endpoint.rows = [revision_row("Q1")]
    endpoint.script("drop_mid_body", "drop_mid_chunk")
    c = client(endpoint.url)
    assert c.select("SELECT ?item WHERE { ?item ?p ?o }") == endpoint.rows
    assert c.retries == 2 and c.queries == 3


def test_connections_dropped_mid_body_every_time_end_as_a_sync_error(endpoint: SparqlServer) -> None:
    endpoint.rows = [revision_row("Q1")]
    endpoint.script("drop_mid_body", "drop_mid_chunk")
    with pytest.raises(SyncError, match=r"failed 2 times \(last: connection dropped mid-reply \(IncompleteRead"):
        client(endpoint.url, max_retries=1).select("SELECT ?item WHERE { ?item ?p ?o }")


def revisions(c: SparqlClient) -> Any:
    return check_revisions(c, ["Q1"], 10)


def entities(c: SparqlClient) -> Any:
    return fetch_entities(c, ["Q1"], SubsetSpec(name="s", seeds=["Q1"]), 10, "2024-01-01T00:00:00+00:00")


def labels(c: SparqlClient) -> Any:
    return property_labels(c, ["P50"], "en")


def class_members(c: SparqlClient) -> Any:
    return select_items(SubsetSpec.model_validate({"name": "s", "classes": [{"class": "Q5"}]}), c, 10)


def one_hop(c: SparqlClient) -> Any:
    return select_items(SubsetSpec(name="s", seeds=["Q1"], properties=["P50"], hops=1), c, 10)


LABEL = {"type": "literal", "value": "x", "xml:lang": "en"}


@pytest.mark.parametrize(
    ("call", "rows", "missing"),
    [
        (revisions, [{"exists": {"type": "literal", "value": "true"}}], "?item"),
        (revisions, [{"item": uri(WD + "Q1")}], "?exists"),  # always bound: BIND(EXISTS ...)
        (entities, [{"item": uri(WD + "Q1"), "o": LABEL}], "?p"),
        (labels, [{"p": uri(WD + "P50")}], "?label"),
        (class_members, [{"x": uri(WD + "Q1")}], "?item"),
        (one_hop, [{"s": uri(WD + "Q1")}], "?o"),
    ],
)
def test_rows_without_a_variable_the_query_binds_are_a_sync_error_naming_it(
    endpoint: SparqlServer, call: Any, rows: list[dict[str, Any]], missing: str
) -> None:
    endpoint.rows = rows
    c = client(endpoint.url)
    with pytest.raises(SyncError, match=rf"a result row without \{missing}, which the query always binds") as info:
        call(c)
    assert "wikidata.endpoint" in str(info.value) and c.queries == 1  # not retried: the same answer would come


def test_optional_variables_left_unbound_are_absent(endpoint: SparqlServer) -> None:
    endpoint.rows = [revision_row("Q1")]  # no ?rev, ?mod nor ?same: OPTIONAL in the query
    found = check_revisions(client(endpoint.url), ["Q1"], 10)["Q1"]
    assert found.exists and (found.version, found.modified, found.redirect) == (None, None, None)
    endpoint.rows = [{"x": uri(WD + "Q9")}, {"item": uri(WD + "Q2")}]  # the spec's own query: ?item may be unbound
    spec = SubsetSpec(name="s", sparql="SELECT ?item ?x WHERE { OPTIONAL { ?item ?p ?x } }")
    assert select_items(spec, client(endpoint.url), 10) == ["Q2"]


def test_terms_that_are_not_rdf_terms_are_a_malformed_reply(endpoint: SparqlServer) -> None:
    endpoint.rows = [{"item": "not a term"}]
    with pytest.raises(SyncError, match=r"failed 2 times \(last: malformed response .*item is not an RDF term"):
        client(endpoint.url, max_retries=1).select("SELECT ?item WHERE { ?item ?p ?o }")


@pytest.mark.parametrize(
    ("term", "says"),
    [
        ({"type": "literal", "value": "x", "xml:lang": 7}, r"item\.xml:lang is not text"),
        ({"type": "literal", "value": "x", "datatype": None}, r"item\.datatype is not text"),
    ],
)
def test_every_part_of_a_term_must_be_text(endpoint: SparqlServer, term: dict[str, Any], says: str) -> None:
    endpoint.rows = [{"item": term}]
    with pytest.raises(SyncError, match=rf"malformed response .*{says}"):
        client(endpoint.url, max_retries=1).select("SELECT ?item WHERE { ?item ?p ?o }")


def test_a_lone_surrogate_in_a_term_is_a_malformed_reply() -> None:
    from metakg.ingest.wikidata.client import _bindings

    reply = {"head": {"vars": ["item"]}, "results": {"bindings": [{"item": {"type": "literal", "value": "a\ud800"}}]}}
    with pytest.raises(ValueError, match=r"item\.value is not Unicode text"):
        _bindings(reply)


def test_userinfo_in_the_endpoint_url_is_basic_auth_to_the_real_host_and_never_shown(endpoint: SparqlServer) -> None:
    url = endpoint.url.replace("http://", "http://alice:s3cret%40pw@")
    endpoint.rows = [revision_row("Q1")]
    assert client(url).select("SELECT ?item WHERE { ?item ?p ?o }") == endpoint.rows
    assert endpoint.seen[0] == {
        "authorization": "Basic " + base64.b64encode(b"alice:s3cret@pw").decode(),
        "host": f"127.0.0.1:{endpoint.port}",
    }
    endpoint.script("500", "500")
    with pytest.raises(SyncError) as failed:
        client(url, max_retries=1).select("SELECT ?item WHERE { ?item ?p ?o }")
    endpoint.script("401")
    with pytest.raises(SyncError, match=r"answered HTTP 401.*check the user and password") as refused:
        client(url).select("SELECT ?item WHERE { ?item ?p ?o }")
    for error in (failed.value, refused.value):
        assert "s3cret" not in str(error) and "alice:***@127.0.0.1" in str(error)


@pytest.mark.parametrize("status", ["400", "500"])
def test_an_error_reply_echoing_the_credentials_never_passes_them_on(endpoint: SparqlServer, status: str) -> None:
    url = endpoint.url.replace("http://", "http://alice:s3cret%40pw@")
    token = base64.b64encode(b"alice:s3cret@pw").decode()
    endpoint.script(*[f"echo:{status}"] * 3)
    with pytest.raises(SyncError) as refused:
        client(url, max_retries=1).select("SELECT ?item WHERE { ?item ?p ?o }")
    said = str(refused.value)
    assert "you sent Authorization: Basic ***" in said, said
    assert token not in said and "s3cret" not in said
