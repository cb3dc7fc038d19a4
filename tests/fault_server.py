"""A real OpenAI-compatible HTTP server on 127.0.0.1 that injects faults on demand, for client tests.

Each request to ``/v1/chat/completions`` takes the next action from a script (then ``ok`` for ever):
``ok``, ``429:<seconds>`` (with Retry-After), ``500``, ``slow:<seconds>``, ``drop`` (connection closed
without a reply), ``truncated`` (a 200 with half a JSON body), ``refuse_json`` (400 naming response_format
when JSON mode is asked). Requests are bounded by the script; the server stops with the test.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FaultServer:
    """Start with :meth:`start`, script with :meth:`script`, read :attr:`requests` and :attr:`max_in_flight`."""

    def __init__(self) -> None:
        self.actions: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.reply = "ok reply"
        self.reply_for: Callable[[dict[str, Any]], str] | None = None  # a reply computed from the request body
        self.httpd: ThreadingHTTPServer | None = None

    def script(self, *actions: str) -> None:
        with self.lock:
            self.actions.extend(actions)

    def _next(self) -> str:
        with self.lock:
            return self.actions.popleft() if self.actions else "ok"

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> FaultServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._act(server._next(), body)
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
                elif name == "refuse_json" and "response_format" in body:
                    self._send(400, b'{"error": {"message": "response_format is not supported"}}')
                else:
                    self._ok(body)

            def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
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

            def _ok(self, body: dict[str, Any]) -> None:
                self._send(200, json.dumps(self._completion(body)).encode())

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                return None  # a client that gave up on a slow reply closed the socket: expected here

        self.httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
