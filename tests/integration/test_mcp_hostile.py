"""``metakg mcp`` over stdio against a hostile client: raw JSON-RPC lines written to the real process's stdin,
its replies read from stdout with a timeout (a missing reply fails the test, it never hangs), stderr kept in a
file and measured."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from metakg import api
from metakg.config import load_settings
from tests.conftest import node_id, small_bundle

pytestmark = pytest.mark.integration

METAKG = Path(sys.executable).with_name("metakg")
REPLY_TIMEOUT_S = 60.0


class Stdio:
    """The real ``metakg mcp`` process: :meth:`send` a line, :meth:`reply` the next line it writes."""

    def __init__(self, bundle: Path, stderr: IO[bytes]) -> None:
        self.process = subprocess.Popen(
            [str(METAKG), "mcp", "--bundle", str(bundle)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, message: dict[str, Any] | str | bytes) -> None:
        assert self.process.stdin is not None
        line = message if isinstance(message, bytes) else (message if isinstance(message, str) else json.dumps(message))
        self.process.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=REPLY_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no reply within {REPLY_TIMEOUT_S:g} s") from None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})  # fmt: skip
        return self.reply()

    def close(self) -> int:
        """Close the server's input and wait for it to end; every line it wrote is then in :attr:`lines`."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        self._reader.join(timeout=30)  # the process has ended, but the reader may not have queued its last lines
        assert not self._reader.is_alive(), "the server's output did not end after the process did"
        return code


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Stdio, Path]]:
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        stdio = Stdio(bundle, stderr)
        try:
            stdio.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "hostile", "version": "1"}}})  # fmt: skip
            assert stdio.reply()["id"] == 1
            stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield stdio, log
        finally:
            if stdio.process.poll() is None:
                stdio.process.kill()
                stdio.process.wait(timeout=30)


def test_a_lone_surrogate_or_a_broken_line_gets_an_error_reply_and_serving_goes_on(
    served: tuple[Stdio, Path],
) -> None:
    stdio, _ = served
    aspirin = node_id(small_bundle(), "aspirin")
    stdio.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
               '"params": {"name": "node", "arguments": {"id": "\\ud800"}}}')  # fmt: skip
    surrogate = stdio.reply()
    assert surrogate["id"] == 2 and surrogate["error"]["code"] == -32700
    assert "lone UTF-16 surrogate" in surrogate["error"]["message"]
    assert stdio.call(3, "node", {"id": aspirin})["result"]["isError"] is False  # still serving
    stdio.send('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {')
    broken = stdio.reply()
    assert broken["id"] is None and broken["error"]["code"] == -32700 and "not JSON" in broken["error"]["message"]
    stdio.send('{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"z": ' + "[" * 1000 + "]" * 1000 + "}}")
    deep = stdio.reply()  # a 2 KB line nested a thousand deep once ended the server
    assert deep["error"]["code"] == -32700 and "nests too deeply" in deep["error"]["message"]
    stdio.send({"jsonrpc": "2.0", "id": 5, "method": 7})  # JSON, but not JSON-RPC
    assert stdio.reply()["error"]["code"] == -32600
    assert stdio.call(6, "node", {"id": aspirin})["id"] == 6
    assert stdio.close() == 0


def test_over_large_messages_are_refused_unread_and_huge_fields_never_flood_the_log(
    served: tuple[Stdio, Path],
) -> None:
    stdio, log = served
    aspirin = node_id(small_bundle(), "aspirin")
    limit = load_settings().server.max_body_bytes
    huge_id = {"jsonrpc": "2.0", "id": "x" * 10_000_000, "method": "tools/call",
               "params": {"name": "node", "arguments": {"id": aspirin}}}  # fmt: skip
    stdio.send(huge_id)
    refused = stdio.reply()
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert "server.max_body_bytes" in refused["error"]["message"] and str(limit) in refused["error"]["message"]
    huge_argument = stdio.call(8, "node", {"id": "y" * 10_000_000})  # the id comes first: it is answered
    assert huge_argument["id"] == 8 and "server.max_body_bytes" in huge_argument["error"]["message"]
    # under the limit, a long argument the tool's error message echoes: answered, logged only in part
    long_argument = stdio.call(9, "node", {"id": "z" * (limit - 500)})
    assert long_argument["result"]["isError"] is True
    assert stdio.call(10, "node", {"id": aspirin})["result"]["isError"] is False
    assert stdio.close() == 0
    logged = log.read_bytes()
    assert len(logged) < 20_000, f"{len(logged)} bytes of stderr: {logged[:300]!r}"
    assert b"zzzzzzzzzz" * 60 not in logged and b"yyyyyyyyyy" * 60 not in logged


@pytest.mark.parametrize("bad_id", [{"a": 1}, None, True, 1.5, [1]])
def test_a_request_whose_id_is_not_a_string_or_integer_gets_an_error_reply(
    served: tuple[Stdio, Path], bad_id: object
) -> None:
    stdio, _ = served
    stdio.send({"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"})
    refused = stdio.reply()  # once no reply at all: the SDK took it for a notification
    assert refused["id"] is None and refused["error"]["code"] == -32600 and "id" in refused["error"]["message"]
    stdio.send({"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
    assert stdio.reply()["id"] == "after"  # serving goes on
    assert stdio.close() == 0


def test_requests_written_just_before_the_input_ends_are_all_answered(served: tuple[Stdio, Path]) -> None:
    """A client that writes its requests and closes its end at once (``printf ... | metakg mcp``) gets every
    reply: the SDK cancels what is in flight when its input ends, so the end waits for them first."""
    stdio, _ = served
    aspirin = node_id(small_bundle(), "aspirin")
    for request_id in range(10, 20):
        tool = ("node", {"id": aspirin}) if request_id % 2 else ("search", {"text": "aspirin"})
        stdio.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": tool[0], "arguments": tool[1]}})  # fmt: skip
    stdio.send({"jsonrpc": "2.0", "id": 20, "method": "ping"})
    assert stdio.close() == 0
    replies = []
    while not stdio.lines.empty():
        replies.append(json.loads(stdio.lines.get()))
    assert sorted(r["id"] for r in replies) == list(range(10, 21))
    assert all("result" in r for r in replies), [r.get("error") for r in replies]
