"""``metakg serve``'s guards, run as a user runs them (the real CLI on a free port, real HTTP): the Host
allow-list, the body limit on chunked bodies, keys in URLs kept out of the log, short and blank keys refused,
writes that never overwrite another process's version of the bundle, and writes that wait for a running
evaluation."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metakg import api
from metakg.config import load_settings
from tests.conftest import small_bundle
from tests.integration.test_server import METAKG, Served, finished, isolated_env, pilot_questions, start, stop
from tools.neo4j_server import free_port

ASPIRIN = "kg:test/0"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("guarded") / "kg"
    api.write_validated(out, small_bundle(), load_settings())
    return out


@pytest.fixture(scope="module")
def served(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A key-less server on loopback (the default)."""
    logs = tmp_path_factory.mktemp("log")
    running = start(["--bundle", str(bundle)], logs / "serve.log", env=isolated_env(logs / "cache"))
    yield running
    stop(running)


def port_of(served: Served) -> int:
    return int(served.url.rsplit(":", 1)[1])


def test_a_request_for_another_host_name_is_refused(served: Served, bundle: Path, tmp_path: Path) -> None:
    port = port_of(served)
    node = f"/api/nodes/{ASPIRIN}"
    hostile = ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example")  # a DNS-rebinding page
    malformed = ("localhost:evil.example", "[::1].evil.example", "127.0.0.1:80@evil.example", f"localhost:{port}x")
    for host in (*hostile, *malformed):
        refused = served.get(node, headers={"Host": host})
        assert refused.status_code == 400, host
        assert "aspirin" not in refused.text and "allowed_hosts" in refused.json()["error"]
        asked = served.post("/api/ask", headers={"Host": host}, json={"question": "What does aspirin treat?",
                                                                      "use_llm": False})  # fmt: skip
        assert asked.status_code == 400 and "evidence" not in asked.text
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert served.get(node, headers={"Host": host}).json()["name"] == "aspirin", host
    named = start(
        ["--bundle", str(bundle)], tmp_path / "named.log", env={"METAKG_SERVER__ALLOWED_HOSTS": '["kg.example"]'}
    )
    try:
        for host in ("kg.example", f"kg.example:{port_of(named)}", f"127.0.0.1:{port_of(named)}"):
            assert named.get(node, headers={"Host": host}).json()["name"] == "aspirin", host
        assert named.get(node, headers={"Host": "evil.example"}).status_code == 400
    finally:
        stop(named)


def chunked_post(served: Served, path: str, chunks: list[bytes]) -> tuple[int, dict[str, Any]]:
    """POST ``chunks`` as a chunked body (no Content-Length) over a raw socket, sending from a thread while the
    answer is read (the server may answer before the body ends); returns the status and the JSON body."""
    sock = socket.create_connection(("127.0.0.1", port_of(served)), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port_of(served)}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()

    def send() -> None:
        try:
            sock.sendall(head)
            for chunk in chunks:
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed before the body ended
            pass

    sender = threading.Thread(target=send)
    sender.start()
    received = b""
    try:
        while (part := sock.recv(65536)) != b"":
            received += part
            headers, _, body = received.partition(b"\r\n\r\n")
            lengths = [int(line.split(b":")[1]) for line in headers.split(b"\r\n")[1:]
                       if line.lower().startswith(b"content-length:")]  # fmt: skip
            if lengths and len(body) >= lengths[0]:
                break
    finally:
        sender.join(timeout=60)
        sock.close()
    headers, _, body = received.partition(b"\r\n\r\n")
    return int(headers.split(b" ")[1]), json.loads(body)


def test_a_chunked_body_over_the_limit_gets_a_413_and_the_server_stays_up(served: Served) -> None:
    limit = load_settings().server.max_body_bytes
    filler = [b"x" * 1024] * (2 * limit // 1024)  # twice the limit, sent without a Content-Length
    status, body = chunked_post(served, "/api/ask", [b'{"question": "', *filler, b'", "use_llm": false}'])
    assert status == 413 and str(limit) in body["error"]
    status, body = chunked_post(served, "/api/triples", [b'{"triples": [', *[b'["a", "b", "c"],'] * 8000, b"]}"])
    assert status == 413
    whole = (
        b'{"question": "What does aspirin treat?", "choices": ["A: headache"], "strategy": "kg_rag", "use_llm": false}'
    )
    small = chunked_post(served, "/api/ask", [whole[i : i + 10] for i in range(0, len(whole), 10)])
    assert small[0] == 200 and "headache" in json.dumps(small[1]["evidence"])  # a small chunked body is read whole
    assert served.get("/api/health").json()["status"] == "ok"


def test_a_key_sent_in_the_url_never_reaches_the_log(served: Served) -> None:
    assert served.get("/api/health?api_key=SECRETVALUE").status_code == 200  # a key-less server ignores it
    assert served.get("/api/search?q=aspirin&token=SECRETTOKEN&k=1").status_code == 200
    deadline = time.monotonic() + 30
    while "token=***" not in served.log.read_text(encoding="utf-8"):  # the access log line is written
        assert time.monotonic() < deadline, served.log.read_text(encoding="utf-8")
        time.sleep(0.2)
    log = served.log.read_text(encoding="utf-8")
    assert "/api/health?api_key=*** HTTP/1.1" in log and "q=aspirin&token=***&k=1" in log
    assert "SECRETVALUE" not in log and "SECRETTOKEN" not in log


@pytest.mark.parametrize("key", ["Key-Of-The-Server-42x", "Zm9v+YmFy/YmF6cXV4eHh4="])
def test_the_servers_own_key_never_reaches_the_log_wherever_a_url_holds_it(
    bundle: Path, tmp_path: Path, key: str
) -> None:
    served = start(["--bundle", str(bundle), "--api-key", key], tmp_path / "keyed.log")
    quoted = urllib.parse.quote(key, safe="")
    try:
        for target in (
            f"/api/search?q={key}",
            f"/api/search?auth=Bearer+{key}",
            f"/{key}",
            f"/api/search?x=%26k%3D{key}",
            f"/api/nodes/{urllib.parse.quote(key)}",  # a path segment, re-quoted by the server
            f"/api/search?q={quoted}",
            f"/api/search?q={quoted.lower()}",  # escapes in lower case
            f"/api/search?q={urllib.parse.quote(quoted, safe='')}",  # encoded twice
            f"/api/search?apiKey%5B%5D={quoted}",  # an array form of a secret parameter
        ):
            served.get(target, headers={"X-API-Key": key})
        served.get("/api/health?marker=done", headers={"X-API-Key": key})
        deadline = time.monotonic() + 30
        while "marker=done" not in served.log.read_text(encoding="utf-8"):
            assert time.monotonic() < deadline, served.log.read_text(encoding="utf-8")
            time.sleep(0.2)
    finally:
        stop(served)
    log = (tmp_path / "keyed.log").read_text(encoding="utf-8")
    assert key not in log and key[:10] not in log and "q=*** HTTP/1.1" in log


def refused_serve(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    port = [] if "--port" in args else ["--port", str(free_port())]  # an option given twice is refused
    return subprocess.run(
        [str(METAKG), "serve", "--bundle", str(bundle), *port, *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, "METAKG_SERVER__API_KEY": ""},
    )  # fmt: skip


def test_short_and_blank_keys_are_refused_and_a_long_one_serves_every_address(bundle: Path, tmp_path: Path) -> None:
    short = refused_serve(bundle, "--host", "0.0.0.0", "--api-key", "x")
    assert short.returncode == 2 and "at least 16 characters" in short.stderr, short.stderr
    assert "--api-key" in short.stderr  # says how to set one
    for host in ("127.0.0.1", "0.0.0.0"):
        blank = refused_serve(bundle, "--host", host, "--api-key", "   ")
        assert blank.returncode == 2 and "blank" in blank.stderr, (host, blank.stderr)
    key = "a-key-of-20-chars-ok"
    served = start(["--bundle", str(bundle), "--api-key", key], tmp_path / "wide.log", host="0.0.0.0")
    try:
        assert served.process.poll() is None, served.log.read_text()
        assert served.get("/api/health").status_code == 401
        assert served.get("/api/health", headers={"X-API-Key": key}).json()["status"] == "ok"
    finally:
        stop(served)
    assert key not in (tmp_path / "wide.log").read_text(encoding="utf-8")


def test_a_busy_port_and_an_unreachable_neo4j_are_clear_errors_not_tracebacks(bundle: Path, served: Served) -> None:
    busy = refused_serve(bundle, "--port", str(port_of(served)))  # the fixture's server holds that port
    assert busy.returncode == 2 and "in use" in busy.stderr and "--port" in busy.stderr, busy.stderr
    assert "Traceback" not in busy.stderr
    down = subprocess.run(
        [str(METAKG), "serve", "--neo4j", "--port", str(free_port())],
        env={**os.environ, "METAKG_SERVER__API_KEY": "", "NEO4J_URI": f"bolt://127.0.0.1:{free_port()}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert down.returncode == 2 and "cannot reach Neo4j" in down.stderr, down.stderr
    assert "Traceback" not in down.stderr and len(down.stderr.splitlines()) < 10


def node_names(bundle: Path) -> set[str]:
    """The names of the nodes of the bundle as it is on disk now."""
    with api.open_store(load_settings(), bundle) as store:
        return set(store.names())


def test_a_write_never_replaces_a_version_the_server_did_not_read(bundle: Path, tmp_path: Path) -> None:
    copy = tmp_path / "kg"
    shutil.copytree(bundle, copy)

    def serving(name: str) -> Served:
        return start(["--bundle", str(copy), "--allow-writes"], tmp_path / f"{name}.log",
                     env={"METAKG_PATHS__CACHE_DIR": str(tmp_path / name)})  # fmt: skip

    first, second = serving("first"), serving("second")
    try:
        one = {"dataset": "notes", "triples": [["ibuprofen", "treats", "headache"]]}
        two = {"dataset": "notes", "triples": [["naproxen", "treats", "fever"]]}
        assert first.post("/api/triples", json=one).status_code == 200
        again = first.post("/api/triples", json={"dataset": "notes", "triples": [["ibuprofen", "treats", "fever"]]})
        assert again.status_code == 200, again.text  # a server goes on writing over the versions it wrote
        refused = second.post("/api/triples", json=two)
        assert refused.status_code == 409 and "restart the server" in refused.json()["error"].lower(), refused.text
        names = node_names(copy)
        assert "ibuprofen" in names and "naproxen" not in names  # the first write is kept, the second not made
        assert second.get("/api/search", params={"q": "naproxen", "mode": "exact"}).json() == []
        stop(second)
        second = serving("again")
        assert second.get("/api/search", params={"q": "ibuprofen", "mode": "exact"}).json()  # the new version
        assert second.post("/api/triples", json=two).status_code == 200
        assert first.post("/api/triples", json=one).status_code == 409  # now the first holds an old version
    finally:
        stop(first)
        stop(second)
    assert {"ibuprofen", "naproxen", "aspirin"} <= node_names(copy)
    assert [s["name"] for s in api.bundle_info(copy).sources] == ["api:notes"] * 3


def test_a_write_keeps_the_bundles_sources_and_name_embeddings(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METAKG_EMBEDDER__MODEL_DIR", str(model_dir))  # the server embeds the new names too
    triples = tmp_path / "base.tsv"
    triples.write_text("aspirin\ttreats\theadache\nwarfarin\tinteracts with\taspirin\n", encoding="utf-8")
    copy = tmp_path / "kg"
    for command in (["ingest", "triples", str(triples), "-d", "base", "-o", str(copy)], ["embed", str(copy)]):
        done = subprocess.run([str(METAKG), *command], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    before = api.bundle_info(copy).as_dict()
    assert [s["name"] for s in before["sources"]] == ["base"] and before["embeddings"]["nodes"] == 3
    served = start(["--bundle", str(copy), "--allow-writes"], tmp_path / "writes.log")
    try:
        added = served.post("/api/triples", json={"dataset": "notes", "triples": [["ibuprofen", "treats", "fever"]]})
        assert added.status_code == 200, added.text
    finally:
        stop(served)
    after = api.bundle_info(copy).as_dict()
    assert after["sources"][:1] == before["sources"] and [s["name"] for s in after["sources"]] == ["base", "api:notes"]
    assert after["embeddings"]["model"] == before["embeddings"]["model"]
    assert after["embeddings"]["nodes"] == after["counts"]["nodes"] == 5  # the new names embedded too
    again = start(["--bundle", str(copy)], tmp_path / "again.log")
    try:  # the stored vectors serve embedding search, the new node's too
        found = again.get("/api/search", params={"q": "ibuprofen", "mode": "embedding", "k": 1}).json()
        assert found[0]["node"]["name"] == "ibuprofen"
    finally:
        stop(again)


def test_a_write_waits_for_a_running_evaluation(bundle: Path, tmp_path: Path) -> None:
    copy = tmp_path / "kg"
    shutil.copytree(bundle, copy)
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    pilot_questions(benchmarks / "many.jsonl", 5000)
    env = {"METAKG_SERVER__BENCHMARKS_DIR": str(benchmarks), "METAKG_PATHS__CACHE_DIR": str(tmp_path / "cache")}
    served = start(["--bundle", str(copy), "--allow-writes"], tmp_path / "eval.log", env=env)
    try:
        run = served.post("/api/evaluations", json={"benchmark": "many.jsonl", "format": "pilot", "use_llm": False,
                                                    "strategies": ["kg_rag"]}).json()  # fmt: skip
        deadline = time.monotonic() + 120
        while served.get(f"/api/evaluations/{run['id']}").json()["progress"].get("done", 0) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        written: dict[str, Any] = {}

        def write() -> None:
            answer = served.post("/api/triples", json={"dataset": "notes", "triples": [["ibuprofen", "treats", "x"]]})
            written.update(status=answer.status_code, at=time.time())

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=5)  # a write that did not wait is done well within this
        assert not written, (written, served.get(f"/api/evaluations/{run['id']}").json())
        assert served.get(f"/api/evaluations/{run['id']}").json()["status"] == "running"
        assert "ibuprofen" not in node_names(copy)
        cancelled_at = time.time()
        assert served.delete(f"/api/evaluations/{run['id']}").status_code == 200
        writer.join(timeout=60)
        stopped = finished(served, run["id"])
        assert stopped["status"] == "cancelled" and stopped["progress"]["done"] < 5000
        assert written["status"] == 200 and written["at"] > cancelled_at  # it went ahead once the run stopped
    finally:
        stop(served)
    assert "ibuprofen" in node_names(copy)


def test_a_bundle_whose_manifest_reaches_outside_it_is_never_served(bundle: Path, tmp_path: Path) -> None:
    hostile = tmp_path / "hostile"
    shutil.copytree(bundle, hostile)
    manifest = json.loads((hostile / "manifest.json").read_text())
    manifest["content_hashes"]["../../etc/passwd"] = "0" * 64  # a received bundle probing files beside it
    (hostile / "manifest.json").write_text(json.dumps(manifest))
    refused = refused_serve(hostile)
    assert refused.returncode == 1 and "'../../etc/passwd', which is not one of a bundle's tables" in refused.stderr
    assert "Traceback" not in refused.stderr
    del manifest["content_hashes"]  # a manifest without hashes: refused unless validate --accept-changes
    (hostile / "manifest.json").write_text(json.dumps(manifest))
    unhashed = refused_serve(hostile)
    assert unhashed.returncode == 1 and "records no content hash" in unhashed.stderr, unhashed.stderr


def test_a_bundle_whose_table_links_out_of_it_is_never_served(bundle: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    shutil.copytree(bundle, linked)
    outside = tmp_path / "outside.parquet"
    shutil.move(linked / "nodes.parquet", outside)  # the same bytes, so its hash and size match the manifest
    (linked / "nodes.parquet").symlink_to(outside)
    refused = refused_serve(linked)
    assert refused.returncode == 1 and "nodes.parquet is a symbolic link" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_body_that_stops_arriving_gets_a_408_and_frees_the_connection(bundle: Path, tmp_path: Path) -> None:
    served = start(["--bundle", str(bundle)], tmp_path / "idle.log", env={"METAKG_SERVER__BODY_IDLE_S": "1"})
    try:
        sock = socket.create_connection(("127.0.0.1", port_of(served)), timeout=30)
        try:
            sock.sendall(
                f"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1:{port_of(served)}\r\nContent-Type: application/json\r\n"
                'Content-Length: 100\r\n\r\n{"question": '.encode()  # declares 100 bytes, sends 13, then waits
            )
            started = time.monotonic()
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                part = sock.recv(65536)
                if not part:
                    break
                answer += part
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"server.body_idle_s" in answer and time.monotonic() - started < 20
        finally:
            sock.close()
        assert served.get("/api/health").json()["status"] == "ok"
    finally:
        stop(served)


def test_a_header_that_trickles_is_cut_off_and_connections_past_the_bound_are_closed(
    bundle: Path, tmp_path: Path
) -> None:
    """A client sending its request header a byte at a time (slowloris) held a connection for ever, and
    20,000 of them left the server without file descriptors: the header now has server.header_s to arrive,
    and connections past server.max_connections are closed at once while the others are answered."""
    import contextlib
    import socket
    import time

    env = {"METAKG_SERVER__HEADER_S": "1.5", "METAKG_SERVER__MAX_CONNECTIONS": "16"}
    running = start(["--bundle", str(bundle)], tmp_path / "serve.log", env=env)
    try:
        port = port_of(running)
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        slow.settimeout(10)
        started = time.monotonic()
        assert slow.recv(100) == b"" and time.monotonic() - started < 8  # closed by the server
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(24)]
        try:
            closed = 0
            for conn in held:
                conn.settimeout(0.5)
                with contextlib.suppress(TimeoutError):  # still open: one of the 16
                    closed += conn.recv(10) == b""
            assert closed >= 24 - 16
            assert running.get("/api/health").status_code == 200  # the server answers on
        finally:
            for conn in held:
                conn.close()
        # a kept-alive connection that answered once has as long for its next header
        kept = socket.create_connection(("127.0.0.1", port))
        kept.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        kept.settimeout(10)
        first = b""
        while not first.rstrip().endswith(b"}"):  # the whole first answer, headers and body
            first += kept.recv(4096)
        assert b"200 OK" in first
        kept.sendall(b"GET /api/health HTTP/1.1\r\n")
        assert kept.recv(4096) == b""
        slow.close()
        kept.close()
    finally:
        stop(running)
