"""A real HTTP proxy on 127.0.0.1 in front of a SPARQL endpoint that injects faults on demand.

Each request takes the next scripted action (then ``ok`` for ever): ``ok`` (forward), ``429:<s>`` (with
Retry-After), ``500``, ``slow:<s>`` (wait, then forward), ``malformed`` (a 200 with broken JSON). With
``empty`` set, every request is answered 200 with no results, as an endpoint that lost its data would.
"""

from __future__ import annotations

import time
import urllib.request

from tests.scripted_http import QuietHandler, ScriptedHTTP


class SparqlProxy(ScriptedHTTP):
    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream
        self.requests = 0
        self.empty = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sparql"

    def start(self) -> SparqlProxy:
        proxy = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with proxy.lock:
                    proxy.requests += 1
                action = proxy.next_action()
                name, _, arg = action.partition(":")
                if proxy.empty:
                    self._send(200, b'{"head": {"vars": []}, "results": {"bindings": []}}', {})
                elif name == "429":
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

        self.serve(Handler)
        return self
