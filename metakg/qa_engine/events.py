"""The trace as it happens: a strategy reports each step it takes (:func:`emit`) to whoever listens in the
current context (:func:`listening`), such as ``metakg serve``'s streaming ask. Nothing listens by default,
and a report then costs one context-variable read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Listener = Callable[[dict[str, Any]], None]
_listener: ContextVar[Listener | None] = ContextVar("metakg_trace_listener", default=None)


def emit(kind: str, **data: Any) -> None:
    """Report one step of the answer being made (``kind``: ``concepts``, ``path``, ``retrieved``, ...)."""
    listener = _listener.get()
    if listener is not None:
        listener({"kind": kind, **data})


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the steps reported in this context (and the event loops it starts) to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
