"""Entity search through a MediaWiki search API (wbsearchentities), as against the real Wikidata.

Wikidata itself is not reachable here, so a local server answers ``wbsearchentities`` over the real
SimpleQuestions-Wikidata labels (prefix match on labels, as the API matches); it also injects a 429 with
Retry-After and an API error, and records each request so the parameters and the User-Agent are checked."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakg import api
from metakg.config import WIKIDATA_SEARCH_API, load_settings
from metakg.ingest.wikidata import SparqlClient, SyncError, WikidataFragments
from metakg.qa_engine.strategies.robodata.remote import remote_tools
from metakg.schemas.vocabulary import default_vocabulary
from tests.scripted_http import QuietHandler, ScriptedHTTP


class SearchAPI(ScriptedHTTP):
    def __init__(self, labels: list[tuple[str, str]]) -> None:
        super().__init__()
        self.labels = labels
        self.requests: list[tuple[dict[str, str], str]] = []


@pytest.fixture
def search_api(data_dir: Path) -> Iterator[SearchAPI]:
    rows = (data_dir / "wikidata" / "simplequestions_wd_labels_en.tsv").read_text(encoding="utf-8").splitlines()[1:]
    server = SearchAPI([(r.split("\t")[0], r.split("\t")[1]) for r in rows if r.startswith("Q")])

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            server.requests.append((query, self.headers.get("User-Agent", "")))
            action = server.next_action()
            if action == "429":
                self.send_response(429)
                self.send_header("Retry-After", "0")
                self.end_headers()
                return
            if action == "error":
                body = {"error": {"code": "badvalue", "info": 'Unrecognized value for parameter "type".'}}
            else:
                text = query.get("search", "").lower()
                hits = [(q, label) for q, label in server.labels if label.lower().startswith(text)]
                hits.sort(key=lambda h: (h[1].lower() != text, len(h[1])))  # exact first, then shorter
                body = {"search": [{"id": q, "label": label, "description": None}
                                   for q, label in hits[: int(query.get("limit", "7"))]]}  # fmt: skip
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server.serve(Handler)
    yield server
    server.stop()


def client(server: SearchAPI) -> SparqlClient:
    return SparqlClient(
        "http://127.0.0.1:9/sparql",  # no SPARQL endpoint: a search must not need one
        "metakg-test/1.0 (tests)",
        backoff_s=0,
        search_api=f"http://127.0.0.1:{server.port}/w/api.php",
        sleep=lambda _s: None,
    )


def test_search_sends_wbsearchentities_and_reads_the_hits(search_api: SearchAPI) -> None:
    c = client(search_api)
    hits = c.search_labels("Douglas Adams", k=3)
    assert hits[0] == {"id": "Q42", "label": "Douglas Adams", "description": None}
    query, agent = search_api.requests[-1]
    assert query == {"action": "wbsearchentities", "search": "Douglas Adams", "language": "en", "uselang": "en",
                     "type": "item", "limit": "3", "format": "json"}  # fmt: skip
    assert agent == "metakg-test/1.0 (tests)" and c.queries == 1


def test_search_retries_a_429_and_reports_an_api_error(search_api: SearchAPI) -> None:
    c = client(search_api)
    search_api.script("429")
    assert c.search_labels("Cambridge", k=1)[0]["label"] == "Cambridge"
    assert c.retries == 1 and c.queries == 2  # the retry counts towards the query budget
    search_api.script("error")
    with pytest.raises(SyncError, match="refused the search: Unrecognized value"):
        c.search_labels("Cambridge")


def test_the_remote_search_tool_uses_the_api_when_the_source_has_one(search_api: SearchAPI) -> None:
    source = WikidataFragments(client(search_api), default_vocabulary())
    result = remote_tools(source).call("remote_search", {"text": "douglas adams", "k": 2})
    assert result.ok and json.loads(result.text)[0]["id"] == "Q42"
    assert search_api.requests[-1][0]["limit"] == "2"


def test_auto_picks_the_wikidata_api_only_for_the_query_service() -> None:
    settings = load_settings()
    assert settings.wikidata.search_api == "auto"
    assert api.sparql_client(settings, "https://query.wikidata.org/sparql").search_api == WIKIDATA_SEARCH_API
    assert api.sparql_client(settings, "http://127.0.0.1:8890/sparql").search_api is None
    none = settings.model_copy(update={"wikidata": settings.wikidata.model_copy(update={"search_api": "none"})})
    assert api.sparql_client(none, "https://query.wikidata.org/sparql").search_api is None
    with pytest.raises(SyncError, match="no search API"):
        api.sparql_client(settings, "http://127.0.0.1:8890/sparql").search_labels("x")
