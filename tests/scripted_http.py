"""What the fault-injecting test servers share: a script of actions, a quiet threaded HTTP server on
127.0.0.1, start and stop."""

from __future__ import annotations

import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that gave up on a slow reply closed the socket: expected here


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing."""

    def log_message(self, format: str, *args: object) -> None:
        return None


class ScriptedHTTP:
    """Each request takes the next scripted action (then ``ok`` for ever)."""

    def __init__(self) -> None:
        self.actions: deque[str] = deque()
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None
        self.stopped = threading.Event()  # set by stop(): slow handlers (drip) end early

    def script(self, *actions: str) -> None:
        with self.lock:
            self.actions.extend(actions)

    def next_action(self) -> str:
        with self.lock:
            return self.actions.popleft() if self.actions else "ok"

    @property
    def port(self) -> int:
        assert self.httpd is not None
        return int(self.httpd.server_address[1])

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Serve ``handler`` on a free port in a daemon thread."""
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
