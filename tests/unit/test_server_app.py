"""The server's app in process (FastAPI's TestClient): what the real-process tests cannot provoke."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from metakg import api
from metakg.config import Settings, load_settings
from metakg.errors import UsageError
from metakg.schemas.bundle import Bundle
from metakg.schemas.bundle_dir import writing
from metakg.server.app import create_app, create_graphs_app
from metakg.server.graphs import parse_graphs
from tests.conftest import small_bundle


def test_a_bug_while_streaming_ends_the_stream_with_an_error_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(api, "answer_over", broken)
    with TestClient(create_app(load_settings(), bundle=bundle), base_url="http://127.0.0.1") as client:
        response = client.post("/api/ask/stream", json={"question": "What does aspirin treat?", "use_llm": False})
        assert response.status_code == 200
        assert "event: error" in response.text and "internal error (RuntimeError)" in response.text
        assert "a bug" not in response.text  # the details stay in the server's log
        assert client.get("/api/health").json()["status"] == "ok"  # the slot was given back


def served_settings(**server: Any) -> Settings:
    """The default settings with these ``server`` settings."""
    settings = load_settings()
    if "api_key" in server:
        server["api_key"] = SecretStr(server["api_key"])
    return settings.model_copy(update={"server": settings.server.model_copy(update=server)})


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "kg"
    api.write_validated(path, small_bundle(), load_settings())
    return path


SURROGATE = b"\\ud800"  # a lone surrogate, as a JSON escape: valid JSON, not valid Unicode


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/ask", b'{"question": "' + SURROGATE + b'", "use_llm": false}', "question"),
        ("/api/ask", b'{"question": "q?", "choices": ["A: ' + SURROGATE + b'"], "use_llm": false}', "choices"),
        ("/api/ask", b'{"question": "q?", "settings": {"' + SURROGATE + b'": 1}, "use_llm": false}', "settings"),
        ("/api/ask/stream", b'{"question": "x' + SURROGATE + b'", "use_llm": false}', "question"),
        ("/api/triples", b'{"triples": [["a", "links", "' + SURROGATE + b'"]]}', "triples"),
        ("/api/evaluations", b'{"benchmark": "' + SURROGATE + b'.jsonl", "format": "pilot"}', "benchmark"),
    ],
)
def test_a_lone_surrogate_in_a_body_is_a_422_naming_the_field(bundle: Path, path: str, body: bytes, field: str) -> None:
    app = create_app(served_settings(allow_writes=True), bundle=bundle)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        answer = client.post(path, content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422, answer.text
        errors = answer.json()["detail"]
        assert errors[0]["loc"][:2] == ["body", field] and "unicode" in errors[0]["msg"]
        assert "\\ud800" in answer.text  # the bad text is shown, escaped
        assert client.get("/api/health").json()["status"] == "ok"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/ask", b'{"question": NaN}', "question"),
        ("/api/ask", b'{"question": "q?", "settings": {"tau_entity": NaN}, "use_llm": false}', "settings"),
        ("/api/ask", b'{"question": "q?", "settings": {"path_hops": Infinity}, "use_llm": false}', "settings"),
        ("/api/ask/stream", b'{"question": -Infinity}', "question"),
        ("/api/triples", b'{"triples": [["a", "links", "b"]], "dataset": Infinity}', "dataset"),
        ("/api/evaluations", b'{"benchmark": NaN, "format": "pilot"}', "benchmark"),
    ],
)
def test_a_number_json_has_no_form_for_is_a_422_naming_the_field(
    bundle: Path, path: str, body: bytes, field: str
) -> None:
    app = create_app(served_settings(allow_writes=True), bundle=bundle)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        answer = client.post(path, content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"][:2] == ["body", field]
        assert client.get("/api/health").json()["status"] == "ok"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/ask", {"question": "q?", "stratgy": "kg_rag", "use_llm": False}, "stratgy"),
        ("/api/triples", {"triples": [["a", "links", "b"]], "datset": "x"}, "datset"),
        ("/api/evaluations", {"benchmark": "b.json", "format": "pilot", "strategy": "kg_rag"}, "strategy"),
    ],
)
def test_a_field_the_request_has_not_is_a_422_naming_it(bundle: Path, path: str, body: dict, field: str) -> None:
    """A misspelt field is never dropped: the run would be another than the one asked for."""
    app = create_app(served_settings(allow_writes=True), bundle=bundle)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        answer = client.post(path, json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"] == ["body", field]


@pytest.mark.parametrize(
    ("path", "body", "loc", "words"),
    [
        ("/api/ask", {"question": "q?", "use_llm": 0}, ["body", "use_llm"], "valid boolean"),
        ("/api/ask", {"question": "q?", "use_llm": "false"}, ["body", "use_llm"], "valid boolean"),
        ("/api/ask", {"question": "q?", "strategy": ""}, ["body", "strategy"], "at least 1 character"),
        ("/api/evaluations", {"benchmark": "b.json", "format": "pilot", "use_llm": 1}, ["body", "use_llm"],
         "valid boolean"),
        ("/api/evaluations", {"benchmark": "b.json", "format": "pilot", "ablations": ["no_such"]},
         ["body", "ablations"], "unknown switch in 'no_such'"),
        ("/api/evaluations", {"benchmark": "b.json", "format": "pilot", "strategies": ["no_such"]},
         ["body", "strategies"], "no_such"),
        ("/api/ask", {"question": "q?", "use_llm": False, "settings": {"qa.strategy": "kg_rag"}},
         ["body", "settings"], "not a per-question setting"),
    ],
)  # fmt: skip
def test_loose_values_are_a_422_not_a_guess(bundle: Path, path: str, body: dict, loc: list[str], words: str) -> None:
    """Issue 56, item 5: a boolean is a boolean (0, 1, "false" are refused, not read as one), an empty strategy
    names none, and an unknown ablation is refused with the request instead of queued as a run that fails."""
    app = create_app(served_settings(allow_writes=True), bundle=bundle)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        answer = client.post(path, json=body)
        assert answer.status_code == 422, answer.text
        detail = answer.json()["detail"][0]
        assert detail["loc"] == loc and words in detail["msg"], detail
        assert client.get("/api/evaluations").json() == []  # nothing queued


#: the error statuses each route can answer (beyond 422, which FastAPI documents itself)
ROUTE_ERRORS = {
    ("get", "/api/health"): {400, 401},
    ("get", "/api/graphs"): {400, 401},
    ("get", "/api/graph"): {400, 401},
    ("get", "/api/nodes/{node_id}"): {400, 401, 404},
    ("get", "/api/neighbours"): {400, 401, 404},
    ("get", "/api/search"): {400, 401, 503},
    ("get", "/api/paths"): {400, 401, 404},
    ("get", "/api/strategies"): {400, 401},
    ("post", "/api/ask"): {400, 401, 408, 413, 503},
    ("post", "/api/ask/stream"): {400, 401, 408, 413, 503},
    ("post", "/api/triples"): {400, 401, 403, 408, 409, 413, 503, 507},
    ("post", "/api/evaluations"): {400, 401, 408, 413, 503},
    ("get", "/api/evaluations"): {400, 401},
    ("get", "/api/evaluations/{run_id}"): {400, 401, 404},
    ("delete", "/api/evaluations/{run_id}"): {400, 401, 404},
}
ASPIRIN = "kg:test/0"


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method, path): op for path, item in document["paths"].items() for method, op in item.items()}


def conforms(document: dict[str, Any], method: str, template: str, answer: Any) -> None:
    """The answer's status is documented for the route, and its body has the documented shape."""
    responses = operations(document)[(method, template)]["responses"]
    assert str(answer.status_code) in responses, (method, template, answer.status_code, sorted(responses))
    body = answer.json()
    if answer.status_code == 422:
        assert all({"loc", "msg", "type"} <= set(error) for error in body["detail"]), body
    else:
        schema = responses[str(answer.status_code)]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}
        assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"], body


def test_the_openapi_document_lists_the_errors_of_each_route_and_the_stream_as_events(bundle: Path) -> None:
    writable = create_app(served_settings(allow_writes=True), bundle=bundle)  # a read-only one hides the write
    with TestClient(writable, base_url="http://127.0.0.1") as client:
        document = client.get("/openapi.json").json()
    found = operations(document)
    assert set(found) == set(ROUTE_ERRORS)
    for (method, path), op in found.items():
        documented = {int(status) for status in op["responses"] if int(status) >= 400}
        assert documented - {422} == ROUTE_ERRORS[(method, path)], (method, path)
        for status in documented - {422}:
            content = op["responses"][str(status)]["content"]
            assert content == {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}, path
    assert document["components"]["schemas"]["ErrorBody"]["required"] == ["error"]
    stream = found[("post", "/api/ask/stream")]["responses"]["200"]
    assert set(stream["content"]) == {"text/event-stream"}


def test_every_error_a_route_gives_is_documented_with_its_shape(bundle: Path, tmp_path: Path) -> None:
    key = "k" * 20
    keyed = create_app(served_settings(api_key=key, allow_writes=True), bundle=bundle)
    with TestClient(keyed, base_url="http://127.0.0.1") as client:
        document = client.get("/openapi.json", headers={"X-API-Key": key}).json()
        for (method, template), _ in operations(document).items():
            path = template.replace("{node_id}", ASPIRIN).replace("{run_id}", "0123456789ab")
            conforms(document, method, template, client.request(method, path))  # 401: no key
            wrong_host = {"X-API-Key": key, "host": "evil.example"}
            refused = client.request(method, path, headers=wrong_host)
            assert refused.status_code == 400
            conforms(document, method, template, refused)
    writable = create_app(served_settings(allow_writes=True), bundle=bundle)
    with TestClient(writable, base_url="http://127.0.0.1") as client:
        big = {"content": b"{" + b" " * 100_000 + b"}", "headers": {"content-type": "application/json"}}
        provoked = [
            ("get", "/api/nodes/{node_id}", "/api/nodes/kg:test/nope", {}, 404),
            ("get", "/api/neighbours", "/api/neighbours?id=kg:test/nope", {}, 404),
            ("get", "/api/paths", f"/api/paths?src={ASPIRIN}&dst=kg:test/nope", {}, 404),
            ("get", "/api/evaluations/{run_id}", "/api/evaluations/0123456789ab", {}, 404),
            ("delete", "/api/evaluations/{run_id}", "/api/evaluations/0123456789ab", {}, 404),
            ("get", "/api/search", "/api/search?q=aspirin&k=0", {}, 422),
            ("post", "/api/ask", "/api/ask", {"json": {"question": "q?", "strategy": "nope", "use_llm": False}}, 400),
            ("post", "/api/ask", "/api/ask", {"json": {"question": "x" * 3000}}, 422),
            ("post", "/api/ask", "/api/ask", big, 413),
            ("post", "/api/ask/stream", "/api/ask/stream", {"json": {"question": "q?", "choices": ["x"]}}, 400),
            ("post", "/api/ask/stream", "/api/ask/stream", big, 413),
            ("post", "/api/triples", "/api/triples", big, 413),
            ("post", "/api/evaluations", "/api/evaluations", {"json": {"benchmark": "../x", "format": "pilot"}}, 400),
        ]
        for method, template, path, kwargs, status in provoked:
            answer = client.request(method, path, **kwargs)
            assert answer.status_code == status, (path, answer.text)
            conforms(document, method, template, answer)
        with writing(bundle):  # another process writing the bundle right now: busy, try again
            busy = client.post("/api/triples", json={"triples": [["a", "links", "b"]]})
        assert busy.status_code == 503 and "another metakg process is writing" in busy.json()["error"], busy.text
        conforms(document, "post", "/api/triples", busy)
        other = small_bundle()  # another writer: a newer version (other content) on disk
        api.write_validated(bundle, Bundle(other.nodes, other.edges.head(5)), load_settings())
        changed = client.post("/api/triples", json={"triples": [["a", "links", "b"]]})
        assert changed.status_code == 409, changed.text
        conforms(document, "post", "/api/triples", changed)
    with TestClient(create_app(load_settings(), bundle=bundle), base_url="http://127.0.0.1") as client:
        read_only = client.post("/api/triples", json={"triples": [["a", "links", "b"]]})
        assert read_only.status_code == 403
        conforms(document, "post", "/api/triples", read_only)


@pytest.mark.parametrize(
    ("host", "key", "message"),
    [
        ("0.0.0.0", "", "needs an API key"),
        ("0.0.0.0", "short", "at least 16 characters"),
        ("127.0.0.1", "   ", "blank"),
        ("0.0.0.0", "\u200b" * 17, "printable ASCII without spaces"),
        ("0.0.0.0", "schlüssel-der-sechzehn", "printable ASCII without spaces"),
        ("0.0.0.0", "a key with spaces in it", "printable ASCII without spaces"),
    ],
)
def test_a_key_that_cannot_guard_a_server_is_refused(host: str, key: str, message: str) -> None:
    from metakg.errors import UsageError
    from metakg.server.app import check_binding

    with pytest.raises(UsageError, match=message):
        check_binding(served_settings(host=host, api_key=key))
    check_binding(served_settings(host=host, api_key="a-printable-key-of-24-ch"))


def test_the_report_is_never_read_through_a_link_out_of_the_bundle(bundle: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0")
    (bundle / "validation.html").unlink(missing_ok=True)
    (bundle / "validation.html").symlink_to(outside)
    with TestClient(create_app(load_settings(), bundle=bundle), base_url="http://127.0.0.1") as client:
        answer = client.get("/report")
    assert answer.status_code == 404 and "root:x" not in answer.text


def test_an_embedding_model_that_cannot_be_loaded_is_the_servers_problem_a_503(bundle: Path, tmp_path: Path) -> None:
    empty = tmp_path / "no-model"
    empty.mkdir()
    settings = served_settings()
    settings = settings.model_copy(update={"embedder": settings.embedder.model_copy(update={"model_dir": empty})})
    with TestClient(create_app(settings, bundle=bundle), base_url="http://127.0.0.1") as client:
        found = client.get("/api/search", params={"q": "aspirin", "mode": "exact"})
        assert found.status_code == 200 and found.json()[0]["node"]["name"] == "aspirin"  # names need no model
        refused = client.get("/api/search", params={"q": "a painkiller", "mode": "embedding"})
        assert refused.status_code == 503 and "lacks" in refused.json()["error"], refused.text


def test_bodies_and_bundles_that_once_gave_a_500_get_clean_answers(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["sources"] = [{"name": "\ud800x"}]  # a received bundle whose manifest is not Unicode text
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    app = create_app(served_settings(benchmarks_dir=bundle.parent), bundle=bundle)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        for path in ("/api/ask", "/api/triples"):
            raw = client.post(path, content=b"\xff\xfe", headers={"content-type": "text/plain"})
            assert raw.status_code == 422 and "\\\\xff" in raw.text, raw.text  # once a UnicodeDecodeError
        nul = client.post("/api/evaluations", json={"benchmark": "x\u0000", "format": "csqa"})
        assert nul.status_code == 400 and "NUL" in nul.json()["error"]
        graph = client.get("/api/graph")
        assert graph.status_code == 200 and graph.json()["sources"] == ["\\ud800x"]


def test_a_validation_report_larger_than_any_validation_writes_is_not_served(bundle: Path) -> None:
    from metakg.api.bundles import MAX_REPORT_BYTES

    report = bundle / "validation.html"
    with report.open("r+b") as fh:  # sparse: the size of a huge report without its bytes
        fh.truncate(MAX_REPORT_BYTES + 1)
    with TestClient(create_app(served_settings(), bundle=bundle), base_url="http://127.0.0.1") as client:
        assert client.get("/report").status_code == 404


def test_a_node_is_found_by_its_id_written_another_way(bundle: Path) -> None:
    with TestClient(create_app(served_settings(), bundle=bundle), base_url="http://127.0.0.1") as client:
        known = client.get("/api/search", params={"q": "aspirin", "mode": "exact"}).json()[0]["node"]["id"]
        prefix, local = known.split(":", 1)
        shouted = f"{prefix.upper()}:{local}"  # the prefix's case does not count
        assert client.get(f"/api/nodes/{shouted}").json()["id"] == known
        assert client.get("/api/neighbours", params={"id": shouted}).status_code == 200
        # a relation as the page shows it ("treats", "Treats", "symptom of") finds the edges stored snake_case
        stored = client.get("/api/neighbours", params={"id": known, "relation": "treats"}).json()
        shown = client.get("/api/neighbours", params={"id": known, "relation": "Treats"}).json()
        every = client.get("/api/neighbours", params={"id": known}).json()
        assert (
            stored
            and shown == stored
            and {nb["edge"]["rel"] for nb in stored} == {"treats"} != {nb["edge"]["rel"] for nb in every}
        )


def test_a_write_waits_for_a_running_evaluation(bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from metakg.server import served
    from metakg.server.evaluations import Evaluations

    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    (benchmarks / "q.json").write_text("[]", encoding="utf-8")
    entered, release = threading.Event(), threading.Event()

    def slow(_self: Evaluations, run: Any, _tick: Any) -> api.EvaluationResult:
        entered.set()  # the evaluation reads the store until the test lets it finish
        assert release.wait(30)
        return api.EvaluationResult({}, 0, run.out_dir, list(api.COLUMNS))

    monkeypatch.setattr(Evaluations, "_evaluate", slow)
    monkeypatch.setattr(served, "ASK_WAIT_S", 0.5)
    app = create_app(served_settings(allow_writes=True, benchmarks_dir=benchmarks), bundle=bundle)
    triple = {"triples": [["aspirin", "treats", "migraine"]], "dataset": "notes"}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        run = client.post("/api/evaluations", json={"benchmark": "q.json", "format": "pilot", "use_llm": False})
        assert run.status_code == 202, run.text
        assert entered.wait(30)
        refused = client.post("/api/triples", json=triple)
        assert refused.status_code == 503 and "being read" in refused.json()["error"]
        release.set()
        for _ in range(300):
            if client.get(f"/api/evaluations/{run.json()['id']}").json()["status"] == "done":
                break
            threading.Event().wait(0.05)
        added = client.post("/api/triples", json=triple)
        assert added.status_code == 200, added.text


def same_shape(example: Any, real: Any, where: str) -> list[str]:
    """Where the example answer ``example`` has other keys than the real answer ``real`` (dicts compared key
    by key, lists by their first items; values themselves are free). The OpenAPI document leaves out null
    values, so a key whose real value is null may be missing from the example."""
    if isinstance(example, dict) and isinstance(real, dict):
        keys = {k for k, v in real.items() if v is not None or k in example}
        wrong = [f"{where}: keys {sorted(example)} against {sorted(real)}"] if set(example) != keys else []
        return wrong + [m for k in set(example) & set(real) for m in same_shape(example[k], real[k], f"{where}.{k}")]
    if isinstance(example, list) and isinstance(real, list) and example and real:
        return same_shape(example[0], real[0], f"{where}[0]")
    return []


def test_the_reference_shows_an_example_of_every_answer_as_the_routes_give_it(bundle: Path) -> None:
    with TestClient(create_app(served_settings(allow_writes=True), bundle=bundle), base_url="http://127.0.0.1") as c:
        spec = c.get("/openapi.json").json()
        shown = {
            (method, path): next(
                (
                    r["content"]["application/json"].get("example")
                    for s, r in op["responses"].items()
                    if s in ("200", "202")
                ),
                None,
            )
            for path, ops in spec["paths"].items()
            for method, op in ops.items()
            if path != "/api/ask/stream"  # server-sent events, described in words
        }
        assert [route for route, example in shown.items() if not example] == []  # no `{ }` in /docs and /redoc
        real = {
            ("get", "/api/health"): c.get("/api/health"),
            ("get", "/api/graphs"): c.get("/api/graphs"),
            ("get", "/api/graph"): c.get("/api/graph"),
            ("get", "/api/nodes/{node_id}"): c.get("/api/nodes/kg:test/0"),
            ("get", "/api/neighbours"): c.get("/api/neighbours", params={"id": "kg:test/0"}),
            ("get", "/api/search"): c.get("/api/search", params={"q": "aspirin"}),
            ("get", "/api/paths"): c.get("/api/paths", params={"src": "kg:test/0", "dst": "kg:test/2"}),
            ("get", "/api/strategies"): c.get("/api/strategies"),
            ("post", "/api/ask"): c.post(
                "/api/ask", json={"question": "What does aspirin treat?", "choices": ["A: headache"], "use_llm": False}
            ),
            ("post", "/api/triples"): c.post(
                "/api/triples",
                json={"triples": [["aspirin", "eases", "fever"], ["aspirin", "***", "aspirin"]], "dataset": "notes"},
            ),
        }
        assert {route: r.status_code for route, r in real.items() if r.status_code != 200} == {}
        wrong = [m for route, r in real.items() for m in same_shape(shown[route], r.json(), " ".join(route))]
        assert wrong == [], "\n".join(wrong)
    with TestClient(create_app(served_settings(), bundle=bundle), base_url="http://127.0.0.1") as c:
        assert "/api/triples" not in c.get("/openapi.json").json()["paths"]  # read-only: not listed
        assert c.post("/api/triples", json={"triples": [["a", "b", "c"]], "dataset": "x"}).status_code == 403


def test_several_graphs_each_under_its_own_routes_with_its_own_key(tmp_path: Path) -> None:
    first, second = tmp_path / "drugs", tmp_path / "trials"
    api.write_validated(first, small_bundle(), load_settings())
    other = small_bundle()
    api.write_validated(second, Bundle(other.nodes.head(4), other.edges.head(2)), load_settings())
    key = "t" * 20
    settings = load_settings()
    settings = settings.model_copy(
        update={"server": settings.server.model_copy(update={"graph_keys": {"trials": SecretStr(key)}})}
    )
    graphs = parse_graphs([str(first), f"trials={second}"], False, [], settings)
    assert [(g.name, g.bundle) for g in graphs] == [("drugs", first), ("trials", second)]
    with TestClient(create_graphs_app(settings, graphs), base_url="http://127.0.0.1") as client:
        listed = client.get("/api/graphs").json()
        assert listed == [
            {"name": "drugs", "path": "/", "store": "embedded", "current": True},
            {"name": "trials", "path": "/graphs/trials/", "store": "embedded", "current": False},
        ]
        assert client.get("/api/graph").json()["counts"] == {"nodes": 10, "edges": 9}  # the first, at /
        assert client.get("/graphs/trials/api/graph").status_code == 401  # its own key
        assert client.get("/graphs/trials/api/graph", headers={"X-API-Key": "wrong" * 4}).status_code == 401
        inner = client.get("/graphs/trials/api/graph", headers={"X-API-Key": key})
        assert inner.status_code == 200 and inner.json()["counts"]["nodes"] == 4
        hits = client.get("/graphs/trials/api/search", params={"q": "aspirin"}, headers={"X-API-Key": key}).json()
        assert hits[0]["node"]["name"] == "aspirin"
        assert client.get("/graphs/trials/api/graphs", headers={"X-API-Key": key}).json()[1]["current"]
        assert client.get("/graphs/trials/").status_code == 200  # its page, which asks for the key
        assert "/graphs/trials/openapi.json" in client.get("/graphs/trials/docs").text
        assert client.get("/graphs/trials/openapi.json").json()["paths"]["/api/graph"]
        refused = client.get("/graphs/trials/api/graph", headers={"host": "evil.example", "X-API-Key": key})
        assert refused.status_code == 400  # the outer app's guards cover every graph


@pytest.mark.parametrize(
    ("bundles", "databases", "says"),
    [
        (["a=x", "a=y"], [], "two graphs are named 'a'"),
        (["bad name=x"], [], "write NAME=VALUE"),
        (["a=x"], ["neo4j"], "--neo4j-db 'neo4j': write NAME=DATABASE"),
        ([], [], "give --bundle DIR or --neo4j"),
        (["a=x", "b=y"], [], "server.graph_keys names c, which no graph served is called"),
    ],
)
def test_the_graphs_given_are_checked(bundles: list[str], databases: list[str], says: str) -> None:
    settings = load_settings()
    settings = settings.model_copy(
        update={"server": settings.server.model_copy(update={"graph_keys": {"c": SecretStr("k" * 20)}})}
    )
    with pytest.raises(UsageError, match=re.escape(says)):
        parse_graphs(bundles, False, databases, settings)
