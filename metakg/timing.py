"""Time spent loading models in this process (the ONNX embedder, spaCy pipelines), so a first answer can
report its model load apart from its retrieval: :func:`loading` wraps a load, :func:`load_ms` is the total."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_total_ms = 0.0


@contextmanager
def loading() -> Iterator[None]:
    """Count the block's wall time as model loading."""
    global _total_ms
    started = time.perf_counter()
    try:
        yield
    finally:
        with _lock:
            _total_ms += (time.perf_counter() - started) * 1000


def load_ms() -> float:
    """Milliseconds spent in :func:`loading` blocks so far in this process."""
    return _total_ms
