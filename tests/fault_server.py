"""A real OpenAI-compatible HTTP server on 127.0.0.1 that injects faults on demand, for client tests.

Each request to ``/v1/chat/completions`` takes the next action from a script (then ``ok`` for ever):
``ok``, ``429:<seconds>`` (with Retry-After), ``500``, ``slow:<seconds>``, ``drop`` (connection closed
without a reply), ``truncated`` (a 200 with half a JSON body), ``drop_mid_body`` (a chunked 200 whose
connection closes after the first half of the body), ``drip:<seconds>`` (the whole reply, status line and
headers included, one byte every ``<seconds>``), ``refuse_json`` (400 naming response_format when JSON mode
is asked), ``refuse_json_500`` (the same as a 500, as llama-cpp-python's server does), ``shape:<name>`` (a 200
of valid JSON that is not a chat completion: see :data:`ODD_SHAPES`), ``echo_auth:<status>`` (an error reply
whose text repeats the request's Authorization header, as some proxies do), ``status:<code>`` (that status
with an error body). :attr:`action_for`, when set, picks a request's action from its body instead (None: the
script's). The headers of each
request are kept in :attr:`headers`. Requests are bounded by the script; the server stops with the test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.scripted_http import QuietHandler, ScriptedHTTP

#: 200 replies of valid JSON that are not chat completions, by name (``shape:<name>``)
ODD_SHAPES: dict[str, object] = {
    "choices_number": {"choices": 7},
    "null_message": {"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]},
    "content_object": {"choices": [{"index": 0, "message": {"role": "assistant", "content": {"a": 1}}}]},
    "usage_text": {"choices": [{"index": 0, "message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}},
    "choice_list": {"choices": [[1, 2]]},
    "lone_surrogate": {"choices": [{"index": 0, "message": {"content": "\ud800 broken"}}]},
    "usage_infinite": {
        "choices": [{"index": 0, "message": {"content": "x"}}],
        "usage": {"prompt_tokens": float("inf")},
    },
    "usage_huge": {"choices": [{"index": 0, "message": {"content": "x"}}], "usage": {"completion_tokens": 1e300}},
    "usage_negative": {"choices": [{"index": 0, "message": {"content": "x"}}], "usage": {"prompt_tokens": -5}},
}
#: a 200 whose JSON nests deeper than a parser goes (``deep``)
DEEP = b'{"choices": ' + b"[" * 5000 + b"]" * 5000 + b"}"


class FaultServer(ScriptedHTTP):
    """Start with :meth:`start`, script with :meth:`script`, read :attr:`requests` and :attr:`max_in_flight`."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each request's headers (names in lower case)
        self.in_flight = 0
        self.max_in_flight = 0
        self.reply = "ok reply"
        self.reply_for: Callable[[dict[str, Any]], str] | None = None  # a reply computed from the request body
        # the action for a request, chosen from its body (None: the script's next), for runs whose order varies
        self.action_for: Callable[[dict[str, Any]], str | None] | None = None
        # function calls (name, arguments as JSON text) computed from a request that offers tools
        self.calls_for: Callable[[dict[str, Any]], list[tuple[str, str]]] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FaultServer:
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                chosen = server.action_for(body) if server.action_for is not None else None
                try:
                    self._act(chosen or server.next_action(), body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def _act(self, action: str, body: dict[str, Any]) -> None:
                name, _, arg = action.partition(":")
                if name == "429":
                    self._send(429, b'{"error": {"message": "slow down"}}', {"retry-after": arg or "0"})
                elif name == "500":
                    self._send(500, b'{"error": {"message": "boom"}}')
                elif name == "status":
                    self._send(int(arg), json.dumps({"error": {"message": f"status {arg}"}}).encode())
                elif name == "slow":
                    time.sleep(float(arg))
                    self._ok(body)
                elif name == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                elif name == "truncated":
                    payload = json.dumps(self._completion(body)).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 2])
                    self.close_connection = True
                    self.connection.shutdown(2)
                elif name == "drop_mid_body":
                    payload = json.dumps(self._completion(body)).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    half = payload[: len(payload) // 2]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))  # the rest never comes
                    self.close_connection = True
                    self.connection.shutdown(2)
                elif name == "drip":
                    self._drip(float(arg), body)
                elif name == "shape":
                    self._send(200, DEEP if arg == "deep" else json.dumps(ODD_SHAPES[arg]).encode())
                elif name == "echo_auth":
                    said = f"bad request; you sent Authorization: {self.headers.get('Authorization')}"
                    self._send(int(arg), json.dumps({"error": {"message": said}}).encode())
                elif name == "refuse_json" and "response_format" in body:
                    self._send(400, b'{"error": {"message": "response_format is not supported"}}')
                elif name == "refuse_tools" and "tools" in body:
                    self._send(400, b'{"error": {"message": "tools are not supported by this model"}}')
                elif name == "refuse_json_500" and "response_format" in body:
                    self._send(500, b'{"error": {"message": "body.response_format.type: not a known type"}}')
                else:
                    self._ok(body)

            def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
                if "tools" in body and server.calls_for is not None:
                    calls = [
                        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                        for i, (n, a) in enumerate(server.calls_for(body))
                    ]
                    message = {"role": "assistant", "content": None, "tool_calls": calls}
                    return {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
                            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}  # fmt: skip
                return {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "m"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {
                                "role": "assistant",
                                "content": server.reply_for(body) if server.reply_for else server.reply,
                            },
                        }
                    ],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                }

            def _drip(self, interval: float, body: dict[str, Any]) -> None:
                """The whole reply, one byte at a time: every read of the client gets a byte in time."""
                payload = json.dumps(self._completion(body)).encode()
                head = (
                    f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                    "connection: close\r\n\r\n"
                ).encode()
                self.close_connection = True
                for byte in head + payload:
                    time.sleep(interval)
                    try:
                        self.wfile.write(bytes([byte]))
                    except OSError:
                        return  # the client gave up
                    if server.stopped.is_set():
                        return

            def _ok(self, body: dict[str, Any]) -> None:
                self._send(200, json.dumps(self._completion(body)).encode())

        self.serve(Handler)
        return self
