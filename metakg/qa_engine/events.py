"""The trace as it happens: a strategy reports each step it takes (:func:`emit`) to whoever listens in the
current context (:func:`listening`), such as ``metakg serve``'s streaming ask. Each step carries
``elapsed_ms``, the time since listening began. Nothing listens by default, and a report then costs one
context-variable read."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Listener = Callable[[dict[str, Any]], None]
_listener: ContextVar[tuple[Listener, float] | None] = ContextVar("metakg_trace_listener", default=None)


def emit(kind: str, **data: Any) -> None:
    """Report one step of the answer being made (``kind``: ``concepts``, ``path``, ``retrieved``, ...)."""
    heard = _listener.get()
    if heard is not None:
        listener, began = heard
        listener({"kind": kind, **data, "elapsed_ms": round((time.perf_counter() - began) * 1000, 1)})


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the steps reported in this context (and the event loops it starts) to ``listener``."""
    token = _listener.set((listener, time.perf_counter()))
    try:
        yield
    finally:
        _listener.reset(token)
