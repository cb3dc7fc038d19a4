"""A scripted LLMClient for deterministic unit tests of logic: canned replies chosen by the prompt."""

from __future__ import annotations

from collections.abc import Callable

from metakg.errors import LLMError
from metakg.llm.cache import ResponseCache
from metakg.llm.client import ChatRequest, Completion, Usage


class ScriptedClient:
    """Replies from a table (a substring of the last user message -> reply) or a function of the request.

    Counts its calls, so tests can check that a cached or resumed run makes none.
    """

    def __init__(
        self,
        replies: dict[str, str] | Callable[[ChatRequest], str],
        *,
        model: str = "scripted",
        default: str | None = None,
        cache: ResponseCache | None = None,
    ) -> None:
        """Keep the script; ``default`` answers prompts the table does not match (None: raise LLMError).

        With ``cache``, replies are cached exactly as the OpenAI-compatible client caches them, so resumed
        runs can be tested without a server.
        """
        self._replies = replies
        self._model = model
        self._default = default
        self.calls: list[ChatRequest] = []
        self._cache = cache

    @property
    def model(self) -> str:
        """The scripted model's name."""
        return self._model

    async def complete(self, request: ChatRequest, *, tag: str = "") -> Completion:
        """The scripted reply; token counts are word counts. A function script may raise LLMError."""
        if self._cache is not None:
            hit = self._cache.get(request)
            if hit is not None:
                return hit
        self.calls.append(request)
        prompt = request.messages[-1].content if request.messages else ""
        if callable(self._replies):
            text = self._replies(request)
        else:
            matches = [reply for needle, reply in self._replies.items() if needle in prompt]
            if matches:
                text = matches[0]
            elif self._default is not None:
                text = self._default
            else:
                raise LLMError(f"the script has no reply for: {prompt[:80]!r}")
        usage = Usage(sum(len(m.content.split()) for m in request.messages), len(text.split()))
        completion = Completion(text=text, model=self._model, usage=usage, finish_reason="stop")
        if self._cache is not None:
            self._cache.put(request, completion)
        return completion
