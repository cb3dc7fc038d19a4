"""``metakg serve`` as a user runs it: the real CLI starts uvicorn on a free port, and an HTTP client calls
every route, on the embedded store and on Neo4j; bad input gets a 4xx naming the field, never a 500."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metakg import api
from metakg.config import Neo4jSettings, load_settings
from tests.conftest import llama_pids, node_id, real_model, small_bundle

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools.neo4j_server import free_port

METAKG = Path(sys.executable).with_name("metakg")


class Served:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process, self.url, self.log = process, url, log

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=60, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + path, timeout=120, **kwargs)

    def delete(self, path: str) -> httpx.Response:
        return httpx.delete(self.url + path, timeout=60)


#: a local model a server starts runs on one thread, beside the other test workers (docs/testing.md)
LOCAL_THREADS = {"METAKG_LLM__LOCAL_THREADS": "1"}


def start(args: list[str], log: Path, env: dict[str, str] | None = None, host: str = "127.0.0.1") -> Served:
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(METAKG), "serve", *args, "--port", str(port), "--host", host],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **LOCAL_THREADS, **(env or {})},
        )  # fmt: skip
    served = Served(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return served
        try:
            httpx.get(served.url + "/api/health", timeout=2)  # any answer (a 401 too): it listens
            return served
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError(f"the server did not start: {log.read_text()}")


def stop(served: Served) -> None:
    served.process.terminate()
    try:
        served.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        served.process.kill()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serve") / "kg"
    api.write_validated(out, small_bundle(), load_settings())
    return out


def isolated_env(cache: Path) -> dict[str, str]:
    """What ``isolated_settings`` gives a test, for a server a module's fixture starts before it: a cache of its
    own (not the user's) and the embedding model the tests use (without it the server would build or fetch one
    into its new cache)."""
    env = {"METAKG_PATHS__CACHE_DIR": str(cache)}
    found = real_model()
    if found is not None:
        env["METAKG_EMBEDDER__MODEL_DIR"] = str(found)
    return env


@pytest.fixture(scope="module")
def embedded(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    logs = tmp_path_factory.mktemp("log")
    served = start(["--bundle", str(bundle)], logs / "serve.log", env=isolated_env(logs / "cache"))
    yield served
    stop(served)


def check_routes(served: Served, bundle_nodes: int) -> None:
    aspirin, migraine = node_id(small_bundle(), "aspirin"), node_id(small_bundle(), "migraine")
    assert served.get("/api/health").json()["status"] == "ok"
    assert served.get("/api/graph").json()["counts"]["nodes"] == bundle_nodes
    assert served.get(f"/api/nodes/{aspirin}").json()["name"] == "aspirin"
    around = served.get("/api/neighbours", params={"id": aspirin, "limit": 2}).json()
    assert len(around) == 2 and {"node", "edge", "direction"} <= set(around[0])
    treats = served.get("/api/neighbours", params={"id": aspirin, "relation": "treats", "direction": "out"}).json()
    assert {n["edge"]["rel"] for n in treats} == {"treats"}
    assert served.get("/api/search", params={"q": "pyrexia", "mode": "exact"}).json()[0]["node"]["name"] == "fever"
    paths = served.get("/api/paths", params={"src": aspirin, "dst": migraine, "k": 2, "max_hops": 3}).json()
    assert paths and paths[0]["nodes"][0] == aspirin and paths[0]["nodes"][-1] == migraine and paths[0]["hops"] == 2
    assert "metakgrag" in {s["name"] for s in served.get("/api/strategies").json()}
    asked = served.post(
        "/api/ask",
        json={"question": "What does aspirin treat?", "choices": ["A: headache", "B: warfarin"], "use_llm": False,
              "strategy": "kg_rag"},
    )  # fmt: skip
    assert asked.status_code == 200 and asked.json()["evidence"] and asked.json()["usage"]["llm_calls"] == 0
    assert served.get("/docs").status_code == 200 and "/api/ask" in served.get("/openapi.json").json()["paths"]


def test_every_route_on_the_embedded_store(embedded: Served) -> None:
    check_routes(embedded, small_bundle().nodes.height)
    page = embedded.get("/")
    assert page.status_code == 200 and "cytoscape.min.js" in page.text
    assert embedded.get("/static/vendor/cytoscape.min.js").status_code == 200
    assert "Validation" in embedded.get("/report").text


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/search", {"q": "aspirin", "k": "abc"}, "k"),
        ("/api/search", {"q": "aspirin", "k": 10**12}, "k"),
        ("/api/search", {"q": "aspirin", "mode": "phonetic"}, "mode"),
        ("/api/search", {}, "q"),
        ("/api/neighbours", {"id": "kg:test/0", "limit": -1}, "limit"),
        ("/api/neighbours", {"id": "kg:test/0", "direction": "sideways"}, "direction"),
        ("/api/paths", {"src": "kg:test/0", "dst": "kg:test/2", "max_hops": 99}, "max_hops"),
        ("/api/paths", {"src": "kg:test/0", "dst": "kg:test/2", "k": 0}, "k"),
    ],
)
def test_bad_parameters_get_a_422_naming_the_field(
    embedded: Served, path: str, params: dict[str, Any], field: str
) -> None:
    answer = embedded.get(path, params=params)
    assert answer.status_code == 422
    assert field in [error["loc"][-1] for error in answer.json()["detail"]]


def test_bad_bodies_unknown_ids_and_unicode_never_get_a_500(embedded: Served) -> None:
    assert embedded.get("/api/nodes/kg:test/nope").status_code == 404
    assert embedded.get("/api/neighbours", params={"id": "kg:test/nope"}).status_code == 404
    assert embedded.get("/api/paths", params={"src": "kg:test/0", "dst": "kg:test/nope"}).status_code == 404
    assert embedded.get("/api/search", params={"q": "東京 O'Brien \\ \" MATCH (n)"}).status_code == 200
    assert embedded.get("/api/search", params={"q": "\u202e\u0000x"}).status_code in (200, 422)
    huge = embedded.post(
        "/api/ask", content=b"{" + b" " * 1_000_000 + b"}", headers={"content-type": "application/json"}
    )
    assert huge.status_code == 413
    for body, field in (({"question": ""}, "question"), ({"question": 5}, "question"), ({}, "question"),
                        ({"question": "x" * 5000, "use_llm": False}, "question"),
                        ({"question": "q?", "choices": "A: x"}, "choices")):  # fmt: skip
        answer = embedded.post("/api/ask", json=body)
        assert answer.status_code == 422, body
        assert field in json.dumps(answer.json()), body
    bad = embedded.post("/api/ask", json={"question": "q?", "choices": ["no letter"], "use_llm": False})
    assert bad.status_code == 400 and "choice" in bad.json()["error"]
    unknown = embedded.post("/api/ask", json={"question": "q?", "strategy": "graphrag", "use_llm": False})
    assert unknown.status_code == 400 and "graphrag" in unknown.json()["error"]
    assert embedded.post("/api/nodes/kg:test/0").status_code == 405  # nothing writes
    read_only = embedded.post("/api/triples", json={"triples": [["a", "links", "b"]]})
    assert read_only.status_code == 403 and "--allow-writes" in read_only.text


def test_an_api_key_is_required_when_set_and_off_loopback(bundle: Path, tmp_path: Path) -> None:
    refused = subprocess.run(
        [str(METAKG), "serve", "--bundle", str(bundle), "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120, env={**os.environ, "METAKG_SERVER__API_KEY": ""},
    )  # fmt: skip
    assert refused.returncode == 2 and "needs an API key" in refused.stderr
    served = start(["--bundle", str(bundle)], tmp_path / "key.log", env={"METAKG_SERVER__API_KEY": "s3cret-key"})
    try:
        assert served.get("/api/health").status_code == 401
        assert served.get("/api/health", headers={"X-API-Key": "wrong"}).status_code == 401
        assert served.get("/api/health", headers={"X-API-Key": "s3cret-key"}).json()["status"] == "ok"
    finally:
        stop(served)
    assert "s3cret-key" not in (tmp_path / "key.log").read_text(encoding="utf-8")


def test_every_route_on_neo4j(
    bundle: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings, tmp_path: Path, any_embedder: None
) -> None:
    pilot_questions(tmp_path / "three.jsonl", 3)
    env = {
        "NEO4J_URI": neo4j_settings.uri,
        "NEO4J_DATABASE": neo4j_settings.database,
        "METAKG_SERVER__BENCHMARKS_DIR": str(tmp_path),
        "METAKG_PATHS__CACHE_DIR": str(tmp_path / "cache"),
    }
    settings = load_settings().model_copy(update={"neo4j": neo4j_settings})
    api.load_neo4j(bundle, settings)
    served = start(["--neo4j"], tmp_path / "neo4j.log", env=env)
    try:
        assert served.get("/api/health").json()["store"] == "neo4j"
        check_routes(served, small_bundle().nodes.height)
        assert served.get("/report").status_code == 404  # a database has no bundle report
        kinds = [kind for kind, _ in streamed(served, {"question": "What does aspirin treat?", "use_llm": False})]
        assert kinds[0] == "step" and kinds[-1] == "answer"
        run = served.post("/api/evaluations", json={"benchmark": "three.jsonl", "format": "pilot", "use_llm": False,
                                                    "strategies": ["kg_rag"]})  # fmt: skip
        done = finished(served, run.json()["id"])
        assert done["status"] == "done" and done["summary"]["kg_rag"]["questions"] == 3, done
    finally:
        stop(served)


def streamed(served: Served, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a streamed answer, in the order they came."""
    events: list[tuple[str, Any]] = []
    with httpx.stream("POST", served.url + "/api/ask/stream", json=body, timeout=120) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: "):
                events.append((kind, json.loads(line[len("data: ") :])))
    return events


def test_the_streaming_ask_sends_the_trace_as_it_happens_then_the_answer(embedded: Served) -> None:
    body = {"question": "What does aspirin treat?", "choices": ["A: headache", "B: warfarin"], "use_llm": False}
    events = streamed(embedded, body)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "answer" and set(kinds[:-1]) == {"step"}
    steps = [data["kind"] for _, data in events[:-1]]
    assert steps[0] == "concepts" and "path" in steps  # metakgrag: each start's refined path as it is made
    answer = events[-1][1]
    assert answer["evidence"] and len([s for s in steps if s == "path"]) == len(answer["trace"]["paths"])
    bad = httpx.post(embedded.url + "/api/ask/stream", json={"question": ""}, timeout=30)
    assert bad.status_code == 422


def test_settings_for_one_question_are_checked_and_used(embedded: Served) -> None:
    body = {"question": "What does aspirin treat?", "use_llm": False, "strategy": "kg_rag"}
    wide = embedded.post("/api/ask", json=body).json()
    narrow = embedded.post("/api/ask", json=body | {"settings": {"neighbours": 1, "qa.max_evidence": 1}})
    assert narrow.status_code == 200
    assert len(narrow.json()["evidence"]) < len(wide["evidence"])
    for settings, named in (({"neighbours": -1}, "neighbours"), ({"no_such_setting": 1}, "no_such_setting"),
                            ({"tau_entity": "high"}, "tau_entity")):  # fmt: skip
        refused = embedded.post("/api/ask", json=body | {"settings": settings})
        assert refused.status_code == 422, settings
        assert refused.json()["detail"][0]["loc"] == ["body", "settings"] and named in refused.text
    assert embedded.post("/api/ask", json=body | {"settings": {"neighbours": [1]}}).status_code == 422


def pilot_questions(path: Path, count: int) -> Path:
    rows = [
        {"id": f"q{i}", "question": "What does aspirin treat?\nA: headache\nB: warfarin", "answer": "A"}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def finished(served: Served, run_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run: dict[str, Any] = served.get(f"/api/evaluations/{run_id}").json()
        if run["status"] not in ("queued", "running"):
            return run
        time.sleep(0.2)
    raise AssertionError(f"evaluation {run_id} did not finish: {run}")


def test_evaluations_run_in_the_background_and_cors_is_off_unless_configured(
    embedded: Served, bundle: Path, tmp_path: Path
) -> None:
    preflight = {"Origin": "http://elsewhere.test", "Access-Control-Request-Method": "GET"}
    assert "access-control-allow-origin" not in embedded.get("/api/health", headers=preflight).headers
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    pilot_questions(benchmarks / "three.jsonl", 3)
    pilot_questions(benchmarks / "many.jsonl", 5000)
    (tmp_path / "secret.jsonl").write_text("{}\n")
    env = {"METAKG_SERVER__BENCHMARKS_DIR": str(benchmarks), "METAKG_PATHS__CACHE_DIR": str(tmp_path / "cache"),
           "METAKG_SERVER__CORS_ORIGINS": '["http://elsewhere.test"]'}  # fmt: skip
    served = start(["--bundle", str(bundle)], tmp_path / "eval.log", env=env)
    try:
        allowed = httpx.options(served.url + "/api/health", headers=preflight, timeout=30)
        assert allowed.headers["access-control-allow-origin"] == "http://elsewhere.test"
        body = {"format": "pilot", "strategies": ["kg_rag", "metakgrag"], "use_llm": False}
        long_run = served.post("/api/evaluations", json=body | {"benchmark": "many.jsonl"})
        assert long_run.status_code == 202 and long_run.json()["status"] in ("queued", "running")
        short = served.post("/api/evaluations", json=body | {"benchmark": "three.jsonl"}).json()
        assert served.get(f"/api/evaluations/{short['id']}").json()["status"] == "queued"  # one runs at a time
        long_id = long_run.json()["id"]
        deadline = time.monotonic() + 120
        while served.get(f"/api/evaluations/{long_id}").json()["progress"].get("done", 0) < 2:
            assert time.monotonic() < deadline, served.get(f"/api/evaluations/{long_id}").json()
            time.sleep(0.1)
        assert served.delete(f"/api/evaluations/{long_id}").status_code == 200
        cancelled = finished(served, long_id)
        assert cancelled["status"] == "cancelled" and cancelled["progress"]["done"] < 5000
        done = finished(served, short["id"])
        assert done["status"] == "done", done
        assert set(done["summary"]) == {"kg_rag", "metakgrag"} and done["summary"]["kg_rag"]["questions"] == 3
        assert "kg_rag" in done["comparison"] and done["request"]["benchmark"] == "three.jsonl"
        report = tmp_path / "cache" / "evaluations" / short["id"]
        assert (report / "summary.json").is_file() and (report / "answers-kg_rag.jsonl").is_file()
        assert [run["id"] for run in served.get("/api/evaluations").json()] == [long_id, short["id"]]
        for name in ("../secret.jsonl", str(tmp_path / "secret.jsonl"), "missing.jsonl"):
            refused = served.post("/api/evaluations", json=body | {"benchmark": name})
            assert refused.status_code == 400 and "benchmark" in refused.json()["error"], name
        unknown = served.post("/api/evaluations", json=body | {"benchmark": "three.jsonl", "strategies": ["nope"]})
        # refused with the request, naming the strategy (a 422 since issue 56, item 5)
        assert unknown.status_code == 422 and "nope" in json.dumps(unknown.json()["detail"])
        wrong = served.post("/api/evaluations", json=body | {"benchmark": "three.jsonl", "format": "csv"})
        assert wrong.status_code == 422 and "format" in json.dumps(wrong.json()["detail"])
        assert served.get("/api/evaluations/0123456789ab").status_code == 404
    finally:
        stop(served)


def llama_children(pid: int) -> int:
    """How many llama-cpp servers the process ``pid`` has started and still runs."""
    return len(llama_pids(pid))


def test_questions_with_the_local_llm_share_one_local_server(bundle: Path, tmp_path: Path) -> None:
    env = {"METAKG_QA__CONCEPTS": "rules", "METAKG_PATHS__CACHE_DIR": str(tmp_path)}  # the local SmolLM2
    served = start(["--bundle", str(bundle)], tmp_path / "llm.log", env=env)
    try:
        assert llama_children(served.process.pid) == 0  # started by the first question that needs it
        bodies = [{"question": f"What does aspirin treat? ({n})", "choices": ["A: headache", "B: warfarin"],
                   "strategy": "kg_rag"} for n in range(3)]  # fmt: skip
        answers = [served.post("/api/ask", json=body) for body in bodies]
        assert all(a.status_code == 200 and a.json()["usage"]["llm_calls"] >= 1 for a in answers), answers
        assert llama_children(served.process.pid) == 1  # one local server for every question
    finally:
        stop(served)
    assert llama_children(served.process.pid) == 0


def test_the_local_llm_started_by_a_streamed_question_serves_the_next_ones(bundle: Path, tmp_path: Path) -> None:
    env = {"METAKG_QA__CONCEPTS": "rules", "METAKG_PATHS__CACHE_DIR": str(tmp_path)}  # the local SmolLM2
    served = start(["--bundle", str(bundle)], tmp_path / "stream-llm.log", env=env)
    try:
        body = {"question": "What does aspirin treat?", "choices": ["A: headache", "B: warfarin"], "strategy": "kg_rag"}
        kind, first = streamed(served, body)[-1]
        assert kind == "answer" and first["usage"]["llm_calls"] >= 1 and first["usage"]["failures"] == 0, first
        started = llama_pids(served.process.pid)
        assert len(started) == 1
        time.sleep(2)  # the thread that answered the stream has ended by now; the local server must outlive it
        assert llama_pids(served.process.pid) == started, served.log.read_text(encoding="utf-8")
        kind, second = streamed(served, body | {"question": "Which of these does aspirin treat?"})[-1]
        assert kind == "answer" and second["usage"]["llm_calls"] >= 1 and second["usage"]["failures"] == 0, second
        assert second["usage"]["cache_hits"] == 0  # answered by the running server, not from the cache
        assert llama_pids(served.process.pid) == started
    finally:
        stop(served)
    assert llama_pids(served.process.pid) == []


def test_triples_are_added_only_with_allow_writes_and_the_bundle_keeps_them(bundle: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "kg"
    shutil.copytree(bundle, copy)
    served = start(["--bundle", str(copy), "--allow-writes"], tmp_path / "writes.log")
    try:
        body = {"dataset": "notes", "triples": [["ibuprofen", "treats", "headache"], ["ibuprofen", "123", "x"],
                                                ["a\tb", "links", "c"],
                                                ["ibuprofen", "interacts with", "warfarin"]]}  # fmt: skip
        added = served.post("/api/triples", json=body)
        assert added.status_code == 200, added.text
        result = added.json()
        assert (result["read"], result["accepted"]) == (4, 2)  # a tab rejects its triple alone (probe round 4)
        assert [(r["triple"], r["check"]) for r in result["rejected"]] == [(2, "bad_relation"),
                                                                            (3, "control_character")]  # fmt: skip
        assert "kg:notes/ibuprofen" in result["nodes"]
        found = served.get("/api/search", params={"q": "ibuprofen", "mode": "exact"}).json()
        assert found[0]["node"]["id"] == "kg:notes/ibuprofen"
        around = served.get("/api/neighbours", params={"id": "kg:notes/ibuprofen"}).json()
        assert {nb["node"]["name"] for nb in around} == {"headache", "warfarin"}
        asked = served.post("/api/ask", json={"question": "What does ibuprofen treat?", "use_llm": False,
                                              "strategy": "kg_rag"})  # fmt: skip
        assert "ibuprofen" in json.dumps(asked.json()["evidence"])  # questions see the new triples at once
        for bad in ({"triples": [["a", "links"]]}, {"triples": []},
                    {"triples": [["a", "links", "b"]], "dataset": "../x"}):  # fmt: skip
            refused = served.post("/api/triples", json=bad)
            assert refused.status_code in (400, 422), bad
    finally:
        stop(served)
    kept = api.bundle_info(copy).as_dict()  # written back, validated, with the change recorded
    assert kept["counts"]["nodes"] == small_bundle().nodes.height + 3  # ibuprofen, headache, warfarin (notes)
    assert kept["diff"]["nodes"]["added"] == 3 and kept["validation"]["ok"] is not None
    again = start(["--bundle", str(copy)], tmp_path / "again.log")
    try:
        assert again.get("/api/nodes/kg:notes/ibuprofen").json()["name"] == "ibuprofen"
    finally:
        stop(again)


def test_a_served_database_has_planned_a_questions_reads_before_the_first_question(
    bundle: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings, tmp_path: Path, any_embedder: None
) -> None:
    """A Neo4j server restarted since the load has forgotten its plans: serving it asks a question's reads
    (``warm``) before any client does, so the first question does not pay for them."""
    from metakg.server.served import ServedGraph

    base = load_settings()
    settings = base.model_copy(
        update={"neo4j": neo4j_settings, "paths": base.paths.model_copy(update={"cache_dir": tmp_path / "cache"})}
    )
    api.load_neo4j(bundle, settings)
    with ServedGraph(settings, neo4j=True, evaluations=False) as served:
        sent = served.store.queries
        assert sent >= 10, sent  # warm's reads, three rounds of them
        served.search("aspirin")
        assert served.store.queries > sent


def test_two_servers_over_one_neo4j_answer_alike_under_load(
    bundle: Path, clean_neo4j: Any, neo4j_settings: Neo4jSettings, tmp_path: Path, any_embedder: None
) -> None:
    """Scaling out: two ``metakg serve`` processes over one Neo4j, sharing one cache folder, asked at once from
    many threads, give every question the same evidence, each other's and a lone request's."""
    from concurrent.futures import ThreadPoolExecutor

    env = {
        "NEO4J_URI": neo4j_settings.uri,
        "NEO4J_DATABASE": neo4j_settings.database,
        "METAKG_PATHS__CACHE_DIR": str(tmp_path / "cache"),  # shared: the phrase index file, the model, replies
    }
    api.load_neo4j(bundle, load_settings().model_copy(update={"neo4j": neo4j_settings}))
    servers = [start(["--neo4j"], tmp_path / f"serve{i}.log", env=env) for i in range(2)]
    questions = ["What does aspirin treat?", "What treats migraine?", "Is fever a symptom of flu?", "What is ASA?"]
    asks = [
        {"question": q, "strategy": strategy, "use_llm": False}
        for q in questions
        for strategy in ("kg_rag", "metakgrag")
    ]

    def evidence(served: Served, body: dict[str, Any]) -> tuple[int, list[Any]]:
        reply = served.post("/api/ask", json=body)
        return reply.status_code, [path["triples"] for path in reply.json().get("evidence", [])]

    try:
        alone = [evidence(servers[0], body) for body in asks]
        assert all(status == 200 for status, _ in alone) and any(found for _, found in alone)
        work = [(servers[i % 2], asks[i % len(asks)]) for i in range(6 * len(asks))]
        with ThreadPoolExecutor(max_workers=8) as pool:
            together = list(pool.map(lambda job: evidence(*job), work))
        for i, got in enumerate(together):
            assert got == alone[i % len(asks)], (i, asks[i % len(asks)])
    finally:
        for served in servers:
            stop(served)
    for i in range(2):
        assert "Traceback" not in (tmp_path / f"serve{i}.log").read_text(encoding="utf-8")
