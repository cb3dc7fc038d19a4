"""A content-addressed response cache (SQLite): a repeated request costs nothing and a killed run resumes.

Keys are :meth:`ChatRequest.key` (model, messages, parameters), combined with the endpoint that answered
when the caller names one (``endpoint=``), so a reply of one endpoint is never replayed for another. Replies
are stored once complete, so an interrupted run re-asks only what was never answered. Files written before
endpoints were part of the key stay readable: their entries simply do not match a key with an endpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from pathlib import Path

from metakg.llm.client import ChatRequest, Completion, Usage

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    finish_reason TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
"""


def cache_key(request: ChatRequest, endpoint: str | None = None) -> str:
    """The key of ``request``'s reply: :meth:`ChatRequest.key` alone without an endpoint (the keys of older
    files), else SHA-256 of that key and the endpoint (an identifier free of credentials, e.g. the base URL)."""
    if endpoint is None:
        return request.key()
    return scoped_key(request.key(), request.model, endpoint)


def scoped_key(request_key: str, model: str, endpoint: str) -> str:
    """The cache key of the reply ``endpoint`` gave to the request whose :meth:`ChatRequest.key` is
    ``request_key`` (a provider batch knows requests by that key only)."""
    scoped = json.dumps({"endpoint": endpoint, "model": model, "request": request_key}, sort_keys=True)
    return hashlib.sha256(scoped.encode()).hexdigest()


logger = logging.getLogger("metakg")


class ResponseCache:
    """SQLite-backed cache of completions; safe to share between threads of one process.

    A cache that cannot be written (a read-only or full disk) is read where it can be and written no more,
    with one warning: the run goes on, its new replies uncached (once a ``sqlite3`` traceback)."""

    def __init__(self, path: Path) -> None:
        """Remember the file; it is opened (and created) on first use."""
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._writable = True
        self._unusable = False

    def _degrade(self, error: Exception, *, reading: bool = False) -> None:
        """Stop writing (and, when ``reading`` failed too, reading) the cache, saying so once."""
        if self._writable:
            logger.warning(
                "the response cache %s cannot be %s (%s): this run's new replies are not cached; give "
                "paths.cache_dir a writable folder with room",
                self.path, "read" if reading else "written", error,
            )  # fmt: skip
        self._writable = False
        self._unusable = self._unusable or reading

    def _db(self) -> sqlite3.Connection | None:
        if self._connection is None and not self._unusable:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                try:
                    connection.execute("PRAGMA journal_mode=WAL")
                    connection.execute(_SCHEMA)
                except sqlite3.Error:
                    connection.close()
                    raise
                self._connection = connection
            except (sqlite3.Error, OSError) as e:
                self._degrade(e)
                self._connection = self._read_only()
        return self._connection

    def _read_only(self) -> sqlite3.Connection | None:
        """The cache opened for reading alone, or None (then the cache is not used at all)."""
        try:
            uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            connection.execute("SELECT 1 FROM responses LIMIT 1")
            return connection
        except (sqlite3.Error, OSError, ValueError) as e:
            self._degrade(e, reading=True)
            return None

    def get(self, request: ChatRequest, *, endpoint: str | None = None) -> Completion | None:
        """The cached completion of ``request`` as ``endpoint`` answered it (see :func:`cache_key`), marked
        ``cached=True``, or None."""
        with self._lock:
            db = self._db()
            if db is None:
                return None
            try:
                row = db.execute(
                    "SELECT model, text, prompt_tokens, completion_tokens, finish_reason FROM responses WHERE key = ?",
                    (cache_key(request, endpoint),),
                ).fetchone()
            except sqlite3.Error as e:
                self._degrade(e, reading=True)
                return None
        if row is None:
            return None
        model, text, prompt, completion, finish = row
        return Completion(text=text, model=model, usage=Usage(prompt, completion), cached=True, finish_reason=finish)

    def put(self, request: ChatRequest, completion: Completion, *, endpoint: str | None = None) -> None:
        """Store a completion ``endpoint`` gave (the first answer to a key wins)."""
        self.put_key(cache_key(request, endpoint), completion)

    def holds(self, key: str) -> bool:
        """Whether a reply is stored under ``key`` (:func:`scoped_key`)."""
        with self._lock:
            db = self._db()
            try:
                return (
                    db is not None
                    and db.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None
                )
            except sqlite3.Error as e:
                self._degrade(e, reading=True)
                return False

    def put_key(self, key: str, completion: Completion) -> None:
        """Store a completion under ``key`` (:func:`cache_key` or :func:`scoped_key`; the first answer wins)."""
        with self._lock:
            db = self._db()
            if db is None or not self._writable:
                return
            try:
                db.execute(
                    "INSERT OR IGNORE INTO responses (key, model, text, prompt_tokens, completion_tokens, "
                    "finish_reason) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        completion.model,
                        completion.text,
                        completion.usage.prompt_tokens,
                        completion.usage.completion_tokens,
                        completion.finish_reason,
                    ),
                )
            except sqlite3.Error as e:  # a full disk, a file made read-only under the run
                self._degrade(e)

    def __len__(self) -> int:
        with self._lock:
            db = self._db()
            return int(db.execute("SELECT count(*) FROM responses").fetchone()[0]) if db is not None else 0

    def close(self) -> None:
        """Close the database."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def export(self) -> str:
        """All entries as JSON lines (for inspection)."""
        with self._lock:
            db = self._db()
            rows = db.execute("SELECT key, model, text FROM responses ORDER BY created_at").fetchall() if db else []
        return "\n".join(json.dumps({"key": k, "model": m, "text": t}) for k, m, t in rows)
