"""The LLMClient for any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp server, Ollama).

The module that imports the ``openai`` SDK for chat calls (provider batches: :mod:`metakg.llm.batch`).
The SDK's own retries are off; this client retries 429,
5xx, timeouts, dropped connections and unreadable replies with exponential backoff, honouring
``Retry-After``. ``llm.timeout_s`` bounds each attempt whole (connect, headers and body), so an endpoint
that drips its reply byte by byte costs one timeout, not minutes. A ``user:password@`` in the endpoint URL
is sent as HTTP basic auth to the host behind it, and never shown. A semaphore bounds the requests in
flight. Replies are cached (content-addressed, per endpoint: the same messages to another endpoint are
asked again); a completion says how many attempts it took, and a final failure raises LLMError with its
attempts, so the usage meter (:mod:`metakg.llm.usage`) that wraps this client records every call once.
When a server refuses JSON mode, the request is sent again as plain text. Tools go out through function
calling (``llm.function_calling``); the calls come back in the reply's text, and an endpoint that refuses
tools, or ignores them (no call although one is required), gets them as JSON-in-text instructions (with
structured output) from then on.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

from metakg.config import LLMSettings
from metakg.errors import ConfigError, LLMError
from metakg.llm.cache import ResponseCache
from metakg.llm.client import ChatRequest, Completion, Usage
from metakg.redact import credentials_in, mask_url, scrub, split_credentials

MAX_RETRY_AFTER_S = 120.0


def _retry_after(error: Any) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


def _refused(error: BaseException) -> bool:
    """True when the connection itself was refused (nothing listening), not dropped or timed out."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or type(seen).__name__ == "ConnectError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: the most tokens a reply may say it used (a count beyond it is not a count: ``1e300``, ``Infinity``)
MAX_TOKEN_COUNT = 10**9


def _token_count(value: Any) -> int:
    """A usage count as an int from 0 to :data:`MAX_TOKEN_COUNT`.

    Raises:
        ValueError: a count that is not one (negative, not finite, absurdly large, or not a number).
    """
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TOKEN_COUNT:
        raise ValueError(f"a token count of {str(value)[:40]!r}")
    return int(value)


class _ToolsIgnored(Exception):
    """A reply to a request that required a tool call holds none: the endpoint ignores tools."""


def _with_calls(content: str, calls: Any) -> str:
    """The reply's text, with its function calls (if any) appended as ``{"tool_calls": [{"tool", "args"}]}``:
    one form for calls made natively and calls written in text, kept whole by the response cache."""
    made = []
    for call in calls or []:
        function = getattr(call, "function", None)
        if function is None:
            continue
        try:
            args: Any = json.loads(function.arguments or "{}")
        except ValueError:
            args = function.arguments  # the tool box reports arguments that are not a JSON object
        made.append({"tool": function.name, "args": args})
    if not made:
        return content
    return (content + "\n" if content else "") + json.dumps({"tool_calls": made}, ensure_ascii=False)


def reply_completion(
    response: Any, request: ChatRequest, latency_s: float, *, tools_required: bool = False
) -> Completion:
    """The completion in a chat-completions reply (the SDK's object, or :func:`completion_from_json`'s).

    Raises:
        ValueError: the reply is not a chat completion (no choices, a content that is not text, a token count
            that is not one).
        _ToolsIgnored: ``tools_required`` and the reply holds no call.
    """
    if not getattr(response, "choices", None):
        raise ValueError("the reply has no choices")
    # the SDK builds the reply without checking it: a 200 of another shape ({"choices": 7}, a null message)
    # is a malformed reply, retried like one, never an exception from deep in the code
    try:
        choice = response.choices[0]
        content = choice.message.content
        calls = getattr(choice.message, "tool_calls", None)
        if content is not None and not isinstance(content, str):
            raise TypeError("content is not text")
        usage = getattr(response, "usage", None)
        counts = Usage(
            prompt_tokens=_token_count(getattr(usage, "prompt_tokens", 0)),
            completion_tokens=_token_count(getattr(usage, "completion_tokens", 0)),
        )
        if tools_required and not calls:
            raise _ToolsIgnored()
        text = _with_calls(content or "", calls)
        text.encode("utf-8")  # a lone surrogate is not text: it could not be cached, logged or shown
        model = getattr(response, "model", None)
        finish = choice.finish_reason
    except (TypeError, AttributeError, IndexError, KeyError, ValueError, OverflowError, RecursionError) as e:
        raise ValueError(f"the reply is not a chat completion ({type(e).__name__}: {str(e)[:100]})") from e
    return Completion(
        text=text,
        model=model if isinstance(model, str) and model else request.model,
        usage=counts,
        latency_s=latency_s,
        finish_reason=finish if isinstance(finish, str) else None,
    )


def completion_from_json(body: dict[str, Any], request: ChatRequest, latency_s: float = 0.0) -> Completion:
    """The completion in a chat-completions reply as JSON (what a Ray run's workers bring back), read as the
    SDK reads one.

    Raises:
        ValueError: the body is not a chat completion.
    """
    from openai.types.chat import ChatCompletion

    try:
        response = ChatCompletion.construct(**body)
    except TypeError as e:  # keys that are not names
        raise ValueError(f"the reply is not a chat completion ({e})") from e
    return reply_completion(response, request, latency_s)


class OpenAICompatibleClient:
    """LLMClient over the openai SDK with retries, bounded concurrency and a response cache."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        base_url: str,
        cache: ResponseCache | None = None,
    ) -> None:
        """Keep the settings; the HTTP client is created on the first request, not here."""
        self._settings = settings
        self._base_url = base_url  # as configured: shown masked (mask_url) in messages
        self._url, self._authorization = split_credentials(base_url)  # where requests go, and the basic auth
        self._cache = cache
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None
        self._refused_formats: set[str] = set()  # response formats this endpoint refused (see _response_format)
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def model(self) -> str:
        """The configured model name."""
        return self._settings.model

    def _bind_loop(self) -> None:
        # the SDK's HTTP client and the semaphore belong to one event loop; a new loop gets new ones
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._client = None
            self._semaphore = asyncio.Semaphore(self._settings.concurrency)

    def _sdk(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as e:  # pragma: no cover - openai is a runtime dependency
                raise ConfigError("the openai package is missing: pip install openai") from e
            self._client = openai.AsyncOpenAI(
                base_url=self._url,
                api_key=self._settings.api_key.get_secret_value() or "not-needed",
                timeout=self._settings.timeout_s,  # each read; _with_retries bounds the whole attempt
                max_retries=0,
                # the userinfo of the URL as basic auth (it wins over the API key's bearer, as a browser's would)
                default_headers={"Authorization": self._authorization} if self._authorization else None,
            )
        return self._client

    async def complete(self, request: ChatRequest, *, tag: str = "") -> Completion:
        """A reply to ``request``: from the cache, or from the endpoint with retries.

        Raises:
            LLMError: no usable reply after ``max_retries`` retries, or the request itself is refused (4xx).
        """
        if self._cache is not None:
            hit = self._cache.get(request, endpoint=self.cache_scope)
            if hit is not None:
                return hit
        self._bind_loop()
        assert self._semaphore is not None
        async with self._semaphore:
            try:
                completion = await self._with_retries(request)
            except LLMError as e:  # an endpoint's error text may echo the key it was sent: never passed on
                said = scrub(str(e), self._credentials())
                if said != str(e):
                    raise LLMError(said, attempts=e.attempts) from None
                raise
        if self._cache is not None:
            self._cache.put(request, completion, endpoint=self.cache_scope)
        return completion

    def cached(self, request: ChatRequest) -> bool:
        """Whether the response cache already holds a reply to ``request`` (a run would not send it)."""
        return self._cache is not None and self._cache.get(request, endpoint=self.cache_scope) is not None

    async def count_tokens(self, texts: list[str]) -> list[int] | None:
        """Each text's tokens by the endpoint's own tokenizer (llama.cpp's and llama-cpp-python's servers offer
        ``/extras/tokenize/count``, vLLM's ``/tokenize``), or None when the endpoint offers neither."""
        import httpx

        root = self._url.rstrip("/").removesuffix("/v1")
        async with httpx.AsyncClient(timeout=self._settings.timeout_s, headers=self.http_headers()) as http:
            for path in ("/extras/tokenize/count", "/tokenize"):
                try:
                    counts = []
                    for text in texts:  # "input" for llama-cpp-python, "prompt" for vLLM
                        reply = await http.post(root + path, json={"model": self.model, "input": text, "prompt": text})
                        reply.raise_for_status()
                        body = reply.json()
                        counts.append(int(body["count"]) if "count" in body else len(body["tokens"]))
                    return counts
                except (httpx.HTTPError, ValueError, KeyError, TypeError):
                    continue  # not this endpoint's way
        return None

    def _credentials(self) -> list[str]:
        """What this client sends that an error text must never show: the API key, the URL's basic auth."""
        return credentials_in(self._authorization, self._settings.api_key.get_secret_value())

    @property
    def cache_scope(self) -> str:
        """Whose replies the cache holds for this client: a configured endpoint's URL without credentials, or
        the local server (started on a free port each run, so its port is not part of it). The model is in
        each request's key."""
        if self._settings.base_url is None:
            return "local-server"
        return self._url.rstrip("/")

    async def _with_retries(self, request: ChatRequest) -> Completion:
        import openai

        delay = self._settings.backoff_s
        last: str = ""
        refused = 0
        attempt = 0
        while attempt <= self._settings.max_retries:
            attempt += 1
            tools = self._tools(request)
            style = None if tools is not None else self._response_format(request)
            try:
                # the deadline is for the whole attempt: the SDK's timeout bounds each read only
                once = await asyncio.wait_for(self._once(request, style, tools), self._settings.timeout_s)
                return replace(once, attempts=attempt)
            except TimeoutError:
                last = f"no complete reply within {self._settings.timeout_s:g} s (llm.timeout_s)"
                await asyncio.sleep(delay)
            except _ToolsIgnored:
                # the endpoint took the tools but made no call although one was required (llama-cpp-python
                # does this for models it cannot force): ask again with structured output, and from now on
                self._refused_formats.add("tools")
                attempt -= 1
                continue
            except (openai.BadRequestError, openai.UnprocessableEntityError, openai.InternalServerError) as e:
                if tools is not None and "tool" in str(e).lower():
                    # no function calling here: the tools are described in the prompt and called as JSON in
                    # text, with the structured-output forms, from now on; a refusal is not an attempt
                    self._refused_formats.add("tools")
                    attempt -= 1
                    continue
                if style is not None and "response_format" in str(e):
                    # the endpoint has not this structured-output form (llama-cpp-python says so with a 500):
                    # the next form, at last plain text, from now on; a refusal is not an attempt
                    self._refused_formats.add(style[0])
                    attempt -= 1
                    continue
                if isinstance(e, openai.InternalServerError):  # any other 500: retried like other failures
                    last = f"{type(e).__name__}: {str(e)[:200]}"
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                raise LLMError(f"the endpoint refused the request ({e}).", attempts=attempt) from e
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as e:
                raise LLMError(
                    f"the endpoint {mask_url(self._base_url)} refused the model {request.model!r} "
                    f"({type(e).__name__}): check METAKG_LLM__API_KEY and METAKG_LLM__MODEL.",
                    attempts=attempt,
                ) from e
            except openai.APIConnectionError as e:
                if not isinstance(e, openai.APITimeoutError) and _refused(e):
                    # nothing listens there: a refused connection is not a slow server, so give up soon
                    refused += 1
                    if refused > self._settings.connect_retries:
                        raise LLMError(
                            f"{mask_url(self._base_url)} refused the connection {refused} times: is the server "
                            "running? (llm.base_url; llm.connect_retries sets how often to try)",
                            attempts=attempt,
                        ) from e
                    last = "connection refused"
                    await asyncio.sleep(min(delay, 1.0))
                    continue
                last = f"{type(e).__name__}: {str(e)[:200]}"
                await asyncio.sleep(delay)
            except openai.RateLimitError as e:
                last = "429 rate limited"
                wait = _retry_after(e)
                await asyncio.sleep(wait if wait is not None else delay)
            except (
                openai.APIStatusError,
                openai.APIResponseValidationError,
                ValueError,
                RecursionError,  # a reply nested deeper than a parser goes
            ) as e:
                last = f"{type(e).__name__}: {str(e)[:200]}"
                wait = _retry_after(e)
                await asyncio.sleep(wait if wait is not None else delay)
            delay *= 2
        message = (
            f"no reply from {mask_url(self._base_url)} after {self._settings.max_retries + 1} attempts (last: {last})"
        )
        raise LLMError(message, attempts=self._settings.max_retries + 1)

    def _response_format(self, request: ChatRequest) -> tuple[str, dict[str, Any]] | None:
        """The most structured reply format the request asks for that this endpoint has not refused:
        with a schema, OpenAI's ``json_schema`` form, then ``json_object`` with a ``schema`` (llama-cpp-python's
        server), then plain ``json_object``; with JSON mode only the last; else none."""
        forms: list[tuple[str, dict[str, Any]]] = []
        if request.json_schema is not None:
            schema = json.loads(request.json_schema)
            forms += [
                ("json_schema", {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}),
                ("json_object_schema", {"type": "json_object", "schema": schema}),
            ]
        if request.json_mode:
            forms.append(("json_object", {"type": "json_object"}))
        return next((f for f in forms if f[0] not in self._refused_formats), None)

    def _tools(self, request: ChatRequest) -> list[dict[str, Any]] | None:
        """The request's tools, when this client offers them through function calling (``llm.function_calling``;
        ``auto``: for a configured endpoint, not the local server) and the endpoint has not refused them."""
        mode = self._settings.function_calling
        wanted = mode == "on" or (mode == "auto" and self._settings.base_url is not None)
        if request.tools is None or not wanted or "tools" in self._refused_formats:
            return None
        tools: list[dict[str, Any]] = json.loads(request.tools)
        return tools

    def chat_body(
        self,
        request: ChatRequest,
        style: tuple[str, dict[str, Any]] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The JSON body of the chat-completions request this client sends for ``request``: with ``style`` and
        ``tools``, or, when neither is given, the structured-output form this endpoint takes so far (the form a
        Ray run sends: :mod:`metakg.llm.ray_engine`)."""
        if style is None and tools is None:
            tools = self._tools(request)
            style = None if tools is not None else self._response_format(request)
        body: dict[str, Any] = {
            "model": request.model,
            "messages": request.as_openai(),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if style is not None:
            body["response_format"] = style[1]
        if tools is not None:  # the model must call at least one (a reply is then its calls)
            body.update(tools=tools, tool_choice="required")
        return body

    async def _once(
        self,
        request: ChatRequest,
        style: tuple[str, dict[str, Any]] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        start = time.perf_counter()
        response = await self._sdk().chat.completions.create(**self.chat_body(request, style, tools))
        return reply_completion(response, request, time.perf_counter() - start, tools_required=tools is not None)

    def remember(self, request: ChatRequest, completion: Completion) -> None:
        """Keep a reply to ``request`` that reached this client's endpoint another way (a Ray run's workers) in
        its response cache, as its own replies are kept."""
        if self._cache is not None:
            self._cache.put(request, completion, endpoint=self.cache_scope)

    @property
    def chat_url(self) -> str:
        """Where chat completions are posted (no credentials in it: see :meth:`http_headers`)."""
        return self._url.rstrip("/") + "/chat/completions"

    def http_headers(self) -> dict[str, str]:
        """The authorization a plain HTTP request to this endpoint carries: the URL's basic auth, else the API
        key as a bearer token (none when neither is set)."""
        if self._authorization:
            return {"Authorization": self._authorization}
        key = self._settings.api_key.get_secret_value()
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.close()
            self._client = None
