"""A real HTTP proxy on 127.0.0.1 in front of a SPARQL endpoint that injects faults on demand.

Each request takes the next scripted action (then ``ok`` for ever): ``ok`` (forward), ``429:<s>`` (with
Retry-After), ``500``, ``slow:<s>`` (wait, then forward), ``malformed`` (a 200 with broken JSON).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class SparqlProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.actions: deque[str] = deque()
        self.requests = 0
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None

    def script(self, *actions: str) -> None:
        with self.lock:
            self.actions.extend(actions)

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/sparql"

    def start(self) -> SparqlProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with proxy.lock:
                    proxy.requests += 1
                    action = proxy.actions.popleft() if proxy.actions else "ok"
                name, _, arg = action.partition(":")
                if name == "429":
                    self._send(429, b"slow down", {"Retry-After": arg or "0"})
                elif name == "500":
                    self._send(500, b"internal error")
                elif name == "malformed":
                    self._send(200, b'{"head": {"vars": ["item"]}, "results": {"bindings": [', {})
                else:
                    if name == "slow":
                        time.sleep(float(arg))
                    self._forward(body)

            def _forward(self, body: bytes) -> None:
                request = urllib.request.Request(
                    proxy.upstream,
                    data=body,
                    headers={k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")},
                )
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        self._send(response.status, response.read(), {})
                except OSError:
                    self._send(502, b"upstream failed")

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/sparql-results+json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout): expected in the slow case

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                return None

        self.httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
