"""Many chat requests through a provider's batch API, at its batch price: OpenAI's Batch API (and any
endpoint offering its Files and Batches routes), Anthropic's Message Batches, and vLLM's offline
``run-batch``, which reads and writes files in OpenAI's batch format.

:class:`BatchRunner` answers a list of requests:

1. the response cache first: a cached reply is a cache hit, as in a direct run, and costs nothing;
2. then the batches an earlier run submitted and never collected (killed, or told not to wait): their ids
   are in the journal (``batches.sqlite`` beside the cache), so they are collected, not sent again;
3. then one new batch of the requests still unanswered. Its id goes into the journal as soon as the
   provider returns it; the runner polls until the batch ends and stores every reply in the cache and in the
   usage meter at the batch rate (:data:`BATCH_DISCOUNT` of the list price);
4. the requests a batch returned failed, expired or cancelled go out again as a new batch, up to
   ``batch.retries`` times; what still has no reply is returned with its reason.

A request's ``custom_id`` is its :meth:`~metakg.llm.client.ChatRequest.key` (64 hex digits, within every
provider's limit), so a reply is matched to its request whatever order the provider returns them in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from metakg.config import BatchSettings, LLMSettings
from metakg.errors import BatchPending, ConfigError, LLMError
from metakg.llm.cache import ResponseCache, scoped_key
from metakg.llm.client import ChatRequest, Completion, Usage
from metakg.llm.openai_client import _token_count as _count
from metakg.llm.usage import UsageMeter
from metakg.redact import credentials_in, mask_url, scrub, split_credentials

Provider = Literal["openai", "anthropic", "vllm"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "vllm")
#: what a provider's batch API charges against its list price (OpenAI Batch, Anthropic Message Batches)
BATCH_DISCOUNT = 0.5
#: the batch states of OpenAI's API after which nothing changes
_OPENAI_ENDED = frozenset({"completed", "expired", "cancelled", "failed"})


class BatchLost(LLMError):
    """The provider no longer knows a batch (expired from its records, or another account's): its requests
    are sent again."""


@dataclass(frozen=True)
class Polled:
    """A look at a batch: ended or not, the provider's status word, and its requests done so far."""

    ended: bool
    status: str
    done: int
    total: int


@dataclass(frozen=True)
class Ended:
    """What a batch gave back: replies and failed requests (reason), each by custom id."""

    replies: dict[str, Completion]
    errors: dict[str, str]
    notes: list[str] = field(default_factory=list)  # results no request of the batch asked for, doubled results


@dataclass(frozen=True)
class Submitted:
    """A batch as the journal keeps it: its id, what the backend needs to find it again (``info``), and the
    custom ids it holds."""

    batch_id: str
    info: dict[str, str]
    custom_ids: tuple[str, ...]


class BatchBackend(Protocol):
    """One provider's batch API."""

    provider: Provider
    scope: str  # whose replies these are, for the response cache (see ResponseCache)

    async def submit(
        self, items: Sequence[tuple[str, ChatRequest]], folder: Path, known: Collection[str]
    ) -> tuple[str, dict[str, str]]:
        """Send ``items`` (custom id, request) as one batch; returns its id and what finds it again. ``known``:
        the batch ids the journal holds (a batch found again must not be one of them)."""
        ...

    async def poll(self, batch: Submitted) -> Polled:
        """How far ``batch`` is."""
        ...

    async def collect(self, batch: Submitted) -> Ended:
        """The replies and failures of an ended batch."""
        ...

    async def aclose(self) -> None:
        """Close the connections."""
        ...


# ---------------------------------------------------------------------------------------------- the journal

_JOURNAL = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    scope TEXT NOT NULL,
    info TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    note TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS batch_items (batch_id TEXT NOT NULL, custom_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS batch_items_by_batch ON batch_items (batch_id);
CREATE TABLE IF NOT EXISTS failures (
    provider TEXT NOT NULL,
    scope TEXT NOT NULL,
    custom_id TEXT NOT NULL,
    tries INTEGER NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (provider, scope, custom_id)
);
"""


class BatchJournal:
    """The batches submitted and not yet collected (SQLite; one transaction per change, so a killed process
    leaves each batch either recorded whole or not at all)."""

    def __init__(self, path: Path) -> None:
        """Remember the file; it is created on first use."""
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # another run's write waits its turn (up to 30 s) instead of failing at once
                self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
                self._db.executescript(_JOURNAL)
            except (OSError, sqlite3.Error) as e:
                raise self._refused(e) from e
        return self._db

    def _refused(self, e: Exception) -> ConfigError:
        return ConfigError(f"the batch journal {self.path} cannot be used ({e}); check paths.cache_dir.")

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the journal; a database error is a ConfigError naming the file."""
        with self._lock:
            try:
                with self._connection() as db:
                    yield db
            except sqlite3.Error as e:
                raise self._refused(e) from e

    def add(self, provider: str, scope: str, batch: Submitted) -> None:
        """Record a submitted batch as open."""
        with self._writing() as db:
            db.execute(
                "INSERT OR REPLACE INTO batches (id, provider, scope, info) VALUES (?, ?, ?, ?)",
                (batch.batch_id, provider, scope, json.dumps(batch.info, sort_keys=True)),
            )
            db.execute("DELETE FROM batch_items WHERE batch_id = ?", (batch.batch_id,))
            db.executemany(
                "INSERT INTO batch_items (batch_id, custom_id) VALUES (?, ?)",
                [(batch.batch_id, c) for c in batch.custom_ids],
            )

    def open(self, provider: str, scope: str) -> list[Submitted]:
        """The batches of ``provider`` at ``scope`` not yet collected, oldest first."""
        with self._writing() as db:
            rows = db.execute(
                "SELECT id, info FROM batches WHERE provider = ? AND scope = ? AND state = 'open' ORDER BY created_at",
                (provider, scope),
            ).fetchall()
            found = []
            for batch_id, info in rows:
                ids = [r[0] for r in db.execute("SELECT custom_id FROM batch_items WHERE batch_id = ?", (batch_id,))]
                found.append(Submitted(batch_id, json.loads(info), tuple(ids)))
        return found

    def close_batch(self, batch_id: str, state: str = "collected", note: str | None = None) -> None:
        """Mark a batch collected (or ``lost``, with why): it is not looked at again."""
        with self._writing() as db:
            db.execute("UPDATE batches SET state = ?, note = ? WHERE id = ?", (state, note, batch_id))

    def record_failures(self, provider: str, scope: str, errors: Mapping[str, str]) -> None:
        """Count one more failed batch for each request of ``errors`` (its custom id -> why), keeping the
        latest reason: the retry bound holds across the runs of one attempt (a vLLM run stops at every batch it
        writes, and the next run goes on), until a run ends and reports the failures."""
        if not errors:
            return
        with self._writing() as db:
            db.executemany(
                "INSERT INTO failures (provider, scope, custom_id, tries, error) VALUES (?, ?, ?, 1, ?) "
                "ON CONFLICT (provider, scope, custom_id) DO UPDATE SET tries = tries + 1, error = excluded.error",
                [(provider, scope, key, why[:300]) for key, why in errors.items()],
            )

    def clear_failures(self, provider: str, scope: str, keys: Iterable[str]) -> None:
        """Forget the failed batches of ``keys``: a run ended and reported them (a later run tries afresh)."""
        with self._writing() as db:
            db.executemany(
                "DELETE FROM failures WHERE provider = ? AND scope = ? AND custom_id = ?",
                [(provider, scope, key) for key in keys],
            )

    def failures(self, provider: str, scope: str, keys: Iterable[str]) -> dict[str, tuple[int, str]]:
        """The requests of ``keys`` that earlier batches failed: how many batches, and the latest reason."""
        wanted = set(keys)
        with self._writing() as db:
            rows = db.execute(
                "SELECT custom_id, tries, error FROM failures WHERE provider = ? AND scope = ?", (provider, scope)
            ).fetchall()
        return {key: (tries, error) for key, tries, error in rows if key in wanted}

    def states(self) -> dict[str, str]:
        """Every batch id and its state (for reports and tests)."""
        with self._writing() as db:
            return dict(db.execute("SELECT id, state FROM batches").fetchall())

    def close(self) -> None:
        """Close the database."""
        if self._db is not None:
            self._db.close()
            self._db = None


# ----------------------------------------------------------------------------------- the OpenAI batch format


def openai_line(custom_id: str, request: ChatRequest) -> str:
    """One request as a line of an OpenAI batch input file (which vLLM's ``run-batch`` reads too)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": request.as_openai(),
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    if request.json_schema is not None:
        schema = json.loads(request.json_schema)
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    elif request.json_mode:
        body["response_format"] = {"type": "json_object"}
    line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return json.dumps(line, ensure_ascii=False)


def chat_completion(body: Any, model: str) -> Completion:
    """A chat-completion body (JSON) as a :class:`Completion`.

    Raises:
        ValueError: the body is not a chat completion.
    """
    try:
        choice = body["choices"][0]
        content = choice["message"].get("content") or ""
        if not isinstance(content, str):
            raise TypeError("content is not text")
        content.encode("utf-8")
        usage = body.get("usage") or {}
        counts = Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
        finish = choice.get("finish_reason")
        named = body.get("model")
    except (TypeError, AttributeError, IndexError, KeyError, ValueError) as e:
        raise ValueError(f"the reply is not a chat completion ({type(e).__name__}: {str(e)[:100]})") from e
    return Completion(
        text=content,
        model=named if isinstance(named, str) and named else model,
        usage=counts,
        finish_reason=finish if isinstance(finish, str) else None,
    )


def read_openai_output(
    lines: Iterable[str], model: str, into: Ended, *, where: str, expected: Collection[str] | None = None
) -> None:
    """Add the results of an OpenAI batch output or error file (vLLM writes the same) to ``into``: a 200 with a
    chat completion is a reply, anything else a failure with its reason. ``where`` names the file in reasons.
    A result whose ``custom_id`` is not one of ``expected`` (the batch's requests) is never read as a reply
    (nothing is cached or billed for it), and a second result for one request is not either: both are noted
    in ``into.notes``, the first result kept."""
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            custom_id = line["custom_id"]
            if not isinstance(custom_id, str):
                raise TypeError("custom_id is not text")
        except (ValueError, KeyError, TypeError) as e:
            # a line naming no request cannot be matched; its request stays unanswered and goes again
            into.notes.append(f"{where} line {number} is not a batch result ({e}); the line is ignored")
            continue
        if expected is not None and custom_id not in expected:
            into.notes.append(f"{where} line {number}: custom_id {custom_id[:80]!r} is no request of this batch; "
                              "its result is ignored")  # fmt: skip
            continue
        if custom_id in seen:
            into.notes.append(f"{where} line {number}: a second result for custom_id {custom_id[:80]!r} (the "
                              f"first is line {seen[custom_id]}); the first is kept")  # fmt: skip
            continue
        seen[custom_id] = number
        error = line.get("error")
        response = line.get("response") or {}
        status = response.get("status_code") if isinstance(response, dict) else None
        if error or status != 200:
            said = error.get("message") or error.get("code") if isinstance(error, dict) else error
            if not said and isinstance(response, dict):
                said = json.dumps(response.get("body"))[:300]
            into.errors[custom_id] = f"status {status}: {str(said)[:300]}" if status else str(said)[:300]
            continue
        try:
            into.replies[custom_id] = chat_completion(response.get("body"), model)
            into.errors.pop(custom_id, None)
        except ValueError as e:
            into.errors[custom_id] = str(e)


def _digest(items: Sequence[tuple[str, ChatRequest]]) -> str:
    return hashlib.sha256("\n".join(sorted(c for c, _ in items)).encode()).hexdigest()


def _write_input(items: Sequence[tuple[str, ChatRequest]], path: Path) -> None:
    """The batch input file, written whole (a temporary file renamed) so a killed run leaves no half file.

    Raises:
        ConfigError: the file cannot be written (the cache folder: ``paths.cache_dir``).
    """
    part = path.with_name(path.name + ".part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with part.open("w", encoding="utf-8") as fh:
            for custom_id, request in items:
                fh.write(openai_line(custom_id, request) + "\n")
        part.replace(path)
    except OSError as e:
        raise ConfigError(f"cannot write the batch request file {path} ({e}); check paths.cache_dir.") from e


# --------------------------------------------------------------------------------------------- the backends


def _failed(where: str, doing: str, e: Exception, secrets: list[str]) -> LLMError | ConfigError:
    """A provider call that failed, as an LLMError free of secrets (scrubbed before it is cut short, so no
    part of a key survives); :class:`BatchLost` when the provider does not know the batch (a 404); a
    :class:`ConfigError` (exit 2) when it refuses the key (401, 403): a setting to fix, not a failed run."""
    said = scrub(f"{type(e).__name__}: {e}", secrets)[:300]
    if type(e).__name__ in ("AuthenticationError", "PermissionDeniedError"):
        return ConfigError(
            f"{where} refused the API key {doing} ({said}): check the key (llm.api_key for --batch openai, "
            "ANTHROPIC_API_KEY or batch.anthropic_api_key for --batch anthropic)."
        )
    lost = type(e).__name__ == "NotFoundError" and "batch" in doing
    return (BatchLost if lost else LLMError)(f"{where} failed {doing} ({said}).")


class OpenAIBatches:
    """OpenAI's Files and Batches API through the ``openai`` SDK, at the ``[llm]`` endpoint with its key."""

    provider: Provider = "openai"

    def __init__(self, settings: LLMSettings, model: str) -> None:
        if not settings.base_url:
            raise ConfigError(
                "extract --batch openai needs llm.base_url: an endpoint with OpenAI's Files and Batches API "
                "(e.g. https://api.openai.com/v1); the local SmolLM2 server has none."
            )
        self._settings = settings
        self._model = model
        self._url, self._authorization = split_credentials(settings.base_url)
        self.scope = self._url.rstrip("/")  # the direct client's scope: a batch reply is this endpoint's reply
        self._client: Any = None

    def _sdk(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                base_url=self._url,
                api_key=self._settings.api_key.get_secret_value() or "not-needed",
                timeout=self._settings.timeout_s,
                max_retries=self._settings.max_retries,  # the SDK's retries: these are a few control calls
                default_headers={"Authorization": self._authorization} if self._authorization else None,
            )
        return self._client

    def _secrets(self) -> list[str]:
        return credentials_in(self._authorization, self._settings.api_key.get_secret_value())

    async def _adoptable(self, tag: str, known: Collection[str]) -> str | None:
        """A batch of these very requests that the journal never recorded (the run was killed between the
        provider's reply and the journal's write): found by its metadata, so it is not paid for twice. A batch
        the journal knows is never taken again (a retry of the same requests is a new batch)."""
        page = await self._sdk().batches.list(limit=100)
        for batch in getattr(page, "data", []) or []:
            metadata = getattr(batch, "metadata", None) or {}
            if (
                metadata.get("metakg_requests") == tag
                and batch.id not in known
                and batch.status not in ("failed", "expired", "cancelled", "cancelling")
            ):
                return str(batch.id)
        return None

    async def submit(
        self, items: Sequence[tuple[str, ChatRequest]], folder: Path, known: Collection[str]
    ) -> tuple[str, dict[str, str]]:
        tag = _digest(items)[:48]
        path = folder / f"openai-{tag[:16]}.input.jsonl"
        _write_input(items, path)
        try:
            adopted = await self._adoptable(tag, known)
            if adopted is not None:
                return adopted, {"input": str(path)}
            with path.open("rb") as fh:
                uploaded = await self._sdk().files.create(file=(path.name, fh), purpose="batch")
            # never retried by the SDK: a create that timed out may have made the batch (the next run finds it)
            batch = (
                await self._sdk()
                .with_options(max_retries=0)
                .batches.create(
                    input_file_id=uploaded.id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                    metadata={"metakg_requests": tag},
                )
            )
        except Exception as e:
            if getattr(e, "status_code", None) in (404, 405, 501):  # e.g. a vLLM or llama.cpp server: chat only
                raise LLMError(
                    f"{mask_url(self._settings.base_url or '')} has no Files and Batches API (status "
                    f"{getattr(e, 'status_code', '?')}): --batch openai "
                    "needs an endpoint that offers them (OpenAI, Azure OpenAI); for a vLLM model, --batch vllm "
                    "writes the file its run-batch command reads."
                ) from e
            raise self._error("submitting a batch", e) from e
        return str(batch.id), {"input": str(path), "file": str(uploaded.id)}

    def _error(self, doing: str, e: Exception) -> LLMError | ConfigError:
        return _failed(mask_url(self._settings.base_url or ""), doing, e, self._secrets())

    async def poll(self, batch: Submitted) -> Polled:
        try:
            found = await self._sdk().batches.retrieve(batch.batch_id)
        except Exception as e:
            raise self._error(f"reporting on batch {batch.batch_id}", e) from e
        counts = found.request_counts
        done = (counts.completed + counts.failed) if counts is not None else 0
        total = counts.total if counts is not None else len(batch.custom_ids)
        return Polled(found.status in _OPENAI_ENDED, str(found.status), done, total)

    async def collect(self, batch: Submitted) -> Ended:
        sdk = self._sdk()
        ended = Ended({}, {})
        try:
            found = await sdk.batches.retrieve(batch.batch_id)
            if found.status == "failed":
                errors = getattr(found.errors, "data", None) or []
                why = "; ".join(str(getattr(e, "message", e)) for e in errors)[:300] or "no reason given"
                return Ended({}, dict.fromkeys(batch.custom_ids, f"the batch failed: {why}"))
            for file_id, where in ((found.output_file_id, "output"), (found.error_file_id, "error file")):
                if file_id:
                    content = await sdk.files.content(file_id)
                    read_openai_output(
                        content.text.splitlines(), self._model, ended, where=where, expected=batch.custom_ids
                    )
        except Exception as e:
            raise self._error(f"collecting batch {batch.batch_id}", e) from e
        for custom_id in batch.custom_ids:
            if custom_id not in ended.replies and custom_id not in ended.errors:
                ended.errors[custom_id] = f"the batch ended {found.status} without a result for this request"
        return ended

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


class AnthropicBatches:
    """Anthropic's Message Batches through the ``anthropic`` SDK (``batch.anthropic_*`` settings; the model is
    ``llm.model``). System messages go into ``system``, the rest are the conversation."""

    provider: Provider = "anthropic"

    def __init__(self, settings: BatchSettings, llm: LLMSettings) -> None:
        self._settings = settings
        self._llm = llm
        self._root = settings.anthropic_base_url or "https://api.anthropic.com"
        self.scope = "anthropic:" + split_credentials(self._root)[0].rstrip("/")
        self._client: Any = None

    def _sdk(self) -> Any:
        if self._client is None:
            if not self._settings.anthropic_api_key.get_secret_value():
                raise ConfigError(
                    "extract --batch anthropic needs an API key: set ANTHROPIC_API_KEY (or batch.anthropic_api_key)."
                )
            import anthropic

            self._client = anthropic.AsyncAnthropic(
                api_key=self._settings.anthropic_api_key.get_secret_value(),
                base_url=self._settings.anthropic_base_url,
                timeout=self._llm.timeout_s,
                max_retries=self._llm.max_retries,
            )
        return self._client

    def _error(self, doing: str, e: Exception) -> LLMError | ConfigError:
        return _failed(mask_url(self._root), doing, e, [self._settings.anthropic_api_key.get_secret_value()])

    @staticmethod
    def params(request: ChatRequest) -> dict[str, Any]:
        """A request as Anthropic Messages parameters; a request held to a JSON schema asks for structured
        output (``output_config.format``), the schema in the form Anthropic takes (the SDK's
        ``transform_schema``: the length and item limits it does not enforce become descriptions)."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"],
        }
        if system:
            params["system"] = system
        if request.json_schema is not None:
            from anthropic import transform_schema

            schema = transform_schema(json.loads(request.json_schema))
            params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return params

    async def submit(
        self, items: Sequence[tuple[str, ChatRequest]], folder: Path, known: Collection[str]
    ) -> tuple[str, dict[str, str]]:
        requests = [{"custom_id": c, "params": self.params(r)} for c, r in items]
        sdk = self._sdk()  # outside the try: a missing key is a ConfigError
        try:  # never retried by the SDK: a create that timed out may have made the batch
            batch = await sdk.with_options(max_retries=0).messages.batches.create(requests=requests)
        except Exception as e:
            raise self._error("submitting a message batch", e) from e
        return str(batch.id), {}

    async def poll(self, batch: Submitted) -> Polled:
        try:
            found = await self._sdk().messages.batches.retrieve(batch.batch_id)
        except Exception as e:
            raise self._error(f"reporting on message batch {batch.batch_id}", e) from e
        counts = found.request_counts
        done = counts.succeeded + counts.errored + counts.canceled + counts.expired
        return Polled(found.processing_status == "ended", str(found.processing_status), done, done + counts.processing)

    async def collect(self, batch: Submitted) -> Ended:
        ended = Ended({}, {})
        try:
            async for entry in await self._sdk().messages.batches.results(batch.batch_id):
                result = entry.result
                if entry.custom_id not in batch.custom_ids or entry.custom_id in ended.replies:
                    ended.notes.append(f"message batch {batch.batch_id}: a result for custom_id "
                                       f"{entry.custom_id[:80]!r} no request of the batch awaits; ignored")  # fmt: skip
                    continue
                if result.type == "succeeded":
                    message = result.message
                    text = "".join(b.text for b in message.content if getattr(b, "type", "") == "text")
                    usage = Usage(_count(message.usage.input_tokens), _count(message.usage.output_tokens))
                    finish = "length" if message.stop_reason == "max_tokens" else "stop"
                    ended.replies[entry.custom_id] = Completion(text, message.model, usage, finish_reason=finish)
                elif result.type == "errored":
                    inner = getattr(result.error, "error", result.error)
                    ended.errors[entry.custom_id] = f"errored: {getattr(inner, 'message', inner)}"[:300]
                else:  # canceled, expired
                    ended.errors[entry.custom_id] = f"the request was {result.type} before it ran"
        except Exception as e:
            raise self._error(f"collecting message batch {batch.batch_id}", e) from e
        for custom_id in batch.custom_ids:
            if custom_id not in ended.replies and custom_id not in ended.errors:
                ended.errors[custom_id] = "the batch ended without a result for this request"
        return ended

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


class VLLMFiles:
    """vLLM's offline batch: the run writes the request file and says which command turns it into the result
    file (``batch.vllm_command``, e.g. ``vllm run-batch``); the next run reads that file. Nothing is sent over
    a network, so there is nothing to wait for: until the file is there, the run stops with the command."""

    provider: Provider = "vllm"
    scope = "vllm-run-batch"

    def __init__(self, settings: BatchSettings, model: str) -> None:
        self._command = settings.vllm_command
        self._model = model

    async def submit(
        self, items: Sequence[tuple[str, ChatRequest]], folder: Path, known: Collection[str]
    ) -> tuple[str, dict[str, str]]:
        tag = _digest(items)[:16]
        # the same requests sent again (a retry) get new files: the old result file is not read twice
        again = sum(1 for k in known if k == f"vllm-{tag}" or k.startswith(f"vllm-{tag}-"))
        tag = f"{tag}-{again}" if again else tag
        source = folder / f"vllm-{tag}.input.jsonl"
        result = folder / f"vllm-{tag}.output.jsonl"
        _write_input(items, source)
        command = f"{self._command} -i {shlex.quote(str(source))} -o {shlex.quote(str(result))} --model " + shlex.quote(
            self._model
        )
        return f"vllm-{tag}", {"input": str(source), "output": str(result), "command": command}

    async def poll(self, batch: Submitted) -> Polled:
        result = Path(batch.info["output"])
        if not result.is_file():
            raise BatchPending(
                f"batch {batch.batch_id}: {len(batch.custom_ids)} requests are in {batch.info['input']}; run the "
                f"command below (vLLM writes {result}), then run this extraction again to read it.",
                batch_id=batch.batch_id,
                command=batch.info["command"],
            )
        return Polled(True, "written", len(batch.custom_ids), len(batch.custom_ids))

    async def collect(self, batch: Submitted) -> Ended:
        ended = Ended({}, {})
        result = Path(batch.info["output"])
        try:
            with result.open(encoding="utf-8", errors="replace") as fh:
                read_openai_output(fh, self._model, ended, where=result.name, expected=batch.custom_ids)
        except OSError as e:
            raise LLMError(f"cannot read the vLLM result file {result} ({e}).") from e
        for custom_id in batch.custom_ids:
            if custom_id not in ended.replies and custom_id not in ended.errors:
                ended.errors[custom_id] = f"{result.name} holds no result for this request"
        return ended

    async def aclose(self) -> None:
        return None


def backend(provider: str, llm: LLMSettings, settings: BatchSettings, model: str) -> BatchBackend:
    """The backend of ``provider``.

    Raises:
        ConfigError: the provider is unknown or not configured.
    """
    if provider == "openai":
        return OpenAIBatches(llm, model)
    if provider == "anthropic":
        return AnthropicBatches(settings, llm)
    if provider == "vllm":
        return VLLMFiles(settings, model)
    raise ConfigError(f"unknown batch provider {provider!r}; choose one of {', '.join(PROVIDERS)}.")


# ------------------------------------------------------------------------------------------------ the runner


@dataclass(frozen=True)
class BatchAnswer:
    """The outcome of one request: its reply (``completion.cached`` when it came from the cache) or why none."""

    completion: Completion | None
    error: str | None = None


class BatchRunner:
    """Answers requests through one backend, with the cache, the journal and the meter (module docstring)."""

    def __init__(
        self,
        backend: BatchBackend,
        *,
        cache: ResponseCache,
        journal: BatchJournal,
        meter: UsageMeter,
        folder: Path,
        retries: int = 2,
        poll_s: float = 30.0,
        wait: bool = True,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.journal = journal
        self.meter = meter
        self.folder = folder
        self.retries = retries
        self.poll_s = poll_s
        self.wait = wait
        self._say = progress or (lambda _s: None)
        self.notes: list[str] = []  # what the collected results held that no request asked for, said once
        self.submitted: list[str] = []  # the batches this run sent
        self._requests: dict[str, ChatRequest] = {}  # the requests to send, by key
        self._tags: dict[str, str] = {}  # the first tag of each request to send
        self._fresh: dict[str, Completion] = {}  # the replies batches gave this run, by request key

    def cached(self, request: ChatRequest) -> bool:
        """Whether the cache holds this backend's reply to ``request``."""
        return self.cache.get(request, endpoint=self.backend.scope) is not None

    async def _finish(self, batch: Submitted, started: float) -> Ended:
        """Poll ``batch`` until it ends, then store and meter its replies and close it in the journal."""
        seen = ""
        while True:
            polled = await self.backend.poll(batch)
            said = f"batch {batch.batch_id}: {polled.status}, {polled.done}/{polled.total} done"
            if said != seen:
                self._say(said)
                seen = said
            if polled.ended:
                break
            if not self.wait:
                raise BatchPending(
                    f"batch {batch.batch_id} is {polled.status} ({polled.done}/{polled.total} done); run the same "
                    "command again to collect it (nothing is sent twice).",
                    batch_id=batch.batch_id,
                )
            await asyncio.sleep(self.poll_s)
        ended = await self.backend.collect(batch)
        for note in ended.notes:
            self._say(note)
        self.notes.extend(ended.notes)
        latency = time.perf_counter() - started
        for request_key, completion in ended.replies.items():
            self._store(request_key, completion, latency, batch.info.get("model", ""))
        self.journal.close_batch(batch.batch_id)
        return ended

    def _store(self, request_key: str, completion: Completion, latency: float, model: str) -> None:
        """Keep a collected reply in the cache and bill it in the meter once, at the batch rate: under its
        request's tag, or (a reply to a request of another run's, in a batch that run left open) under
        ``batch:<key>``, so what was paid for is neither lost nor paid for again."""
        request = self._requests.get(request_key)
        if request is not None:
            if request_key in self._fresh:
                return
            self.cache.put(request, completion, endpoint=self.backend.scope)
            fresh = replace(completion, latency_s=latency)
            self._fresh[request_key] = fresh
            self.meter.record(fresh, tag=self._tags[request_key], model=request.model, latency_s=latency,
                              rate=BATCH_DISCOUNT)  # fmt: skip
            return
        if not model:  # a batch journaled without its model: its key cannot be made
            return
        key = scoped_key(request_key, model, self.backend.scope)
        if not self.cache.holds(key):
            self.cache.put_key(key, completion)
            self.meter.record(completion, tag=f"batch:{request_key[:16]}", model=model, latency_s=latency,
                              rate=BATCH_DISCOUNT)  # fmt: skip

    async def run(self, tagged: Sequence[tuple[str, ChatRequest]]) -> list[BatchAnswer]:
        """One answer per (tag, request), in order; every request is recorded once in the meter under its tag
        (a request made twice is sent once: the second is a cache hit). A request goes out in at most
        ``1 + retries`` batches, an earlier run's batch included.

        Raises:
            BatchPending: a batch is not finished and the run does not wait (``wait=False``, or vLLM).
            LLMError: the provider refused a control call (submit, poll, collect) after its retries.
        """
        self._requests, self._tags, self._fresh = {}, {}, {}
        hits: dict[str, Completion] = {}
        for tag, request in tagged:
            key = request.key()
            if key in self._requests or key in hits:
                continue
            hit = self.cache.get(request, endpoint=self.backend.scope)
            if hit is not None:
                hits[key] = hit
            else:
                self._requests[key], self._tags[key] = request, tag
        provider, scope = self.backend.provider, self.backend.scope
        past = self.journal.failures(provider, scope, self._requests)  # batches of earlier runs that failed them
        errors: dict[str, str] = {key: why for key, (_n, why) in past.items()}
        tries = {key: past[key][0] if key in past else 0 for key in self._requests}  # the batches each went out in
        started = time.perf_counter()
        for earlier in self.journal.open(self.backend.provider, self.backend.scope):
            held = set(earlier.custom_ids) & tries.keys()
            if not held:
                continue  # another extraction's batch: left for it
            self._say(f"collecting batch {earlier.batch_id}, submitted by an earlier run")
            try:
                ended = await self._finish(earlier, started)
            except BatchLost as e:
                self.journal.close_batch(earlier.batch_id, "lost", str(e)[:300])
                self._say(f"batch {earlier.batch_id} is gone at the provider; its requests go out again")
                continue
            for key in held:
                tries[key] += 1
            failed = {k: v for k, v in ended.errors.items() if k in held and k not in self._fresh}
            errors.update(failed)
            self.journal.record_failures(provider, scope, failed)
        while True:
            left = [(k, r) for k, r in self._requests.items() if k not in self._fresh and tries[k] <= self.retries]
            if not left:
                break
            again = sum(tries[k] > 0 for k, _ in left)
            if again:
                self._say(f"sending {again} failed requests again in a new batch of {len(left)}")
            batch_id, info = await self.backend.submit(left, self.folder, self.journal.states().keys())
            model = left[0][1].model
            submitted = Submitted(batch_id, {**info, "model": model}, tuple(k for k, _ in left))
            self.journal.add(self.backend.provider, self.backend.scope, submitted)
            self.submitted.append(batch_id)
            for key, _request in left:
                tries[key] += 1
            self._say(f"submitted batch {batch_id} of {len(left)} requests")
            ended = await self._finish(submitted, time.perf_counter())
            failed = {k: v for k, v in ended.errors.items() if k in tries and k not in self._fresh}
            errors.update(failed)
            self.journal.record_failures(provider, scope, failed)
        answers = self._answers(tagged, hits, errors, tries)
        self.journal.clear_failures(provider, scope, self._requests)  # reported: a new run starts a new attempt
        return answers

    def _answers(
        self,
        tagged: Sequence[tuple[str, ChatRequest]],
        hits: dict[str, Completion],
        errors: dict[str, str],
        tries: dict[str, int],
    ) -> list[BatchAnswer]:
        """Each request's answer; fresh replies were metered when collected, the rest are metered here."""
        answers: list[BatchAnswer] = []
        given: set[str] = set()
        for tag, request in tagged:
            key = request.key()
            fresh = self._fresh.get(key)
            if fresh is not None and key not in given:
                given.add(key)
                answers.append(BatchAnswer(fresh))
                continue
            reply = hits.get(key) or (replace(fresh, cached=True) if fresh is not None else None)
            if reply is not None:
                self.meter.record(reply, tag=tag, model=request.model)
                answers.append(BatchAnswer(reply))
                continue
            why = errors.get(key, "no batch returned a result for this request")
            reason = f"{self.backend.provider} batch: {why}"
            self.meter.record(None, tag=tag, model=request.model, attempts=tries.get(key, 0), error=reason[:300])
            answers.append(BatchAnswer(None, reason))
        return answers

    async def aclose(self) -> None:
        """Close the backend's connections."""
        await self.backend.aclose()
