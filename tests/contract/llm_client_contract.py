"""What every :class:`~metakg.llm.client.LLMClient` promises (a subclass gives ``make()`` and, when it can,
``failing()``): a model name; for a request, a :class:`~metakg.llm.client.Completion` with text, the model and
non-negative usage; a failure is an :class:`~metakg.errors.LLMError`, never another exception."""

from __future__ import annotations

import asyncio

import pytest

from metakg.errors import LLMError
from metakg.llm.client import Completion, LLMClient, Message, request

QUESTION = [Message("user", "Answer with one word: what colour is the sky on a clear day?")]


class LLMClientContract:
    def make(self) -> LLMClient:
        raise NotImplementedError

    def failing(self) -> LLMClient | None:
        """A client of the same kind whose model cannot answer (None: this kind cannot fail that way)."""
        return None

    def test_it_names_its_model(self) -> None:
        assert isinstance(self.make().model, str) and self.make().model

    def test_a_request_gives_a_completion_with_its_usage(self) -> None:
        client = self.make()
        done = asyncio.run(client.complete(request(QUESTION, model=client.model, max_tokens=16), tag="qa:contract"))
        assert isinstance(done, Completion) and isinstance(done.text, str)
        assert done.model and done.attempts >= 1 and done.latency_s >= 0
        usage = done.usage
        assert usage.prompt_tokens >= 0 and usage.completion_tokens >= 0

    def test_a_json_request_is_taken(self) -> None:
        client = self.make()
        asked = request(QUESTION, model=client.model, max_tokens=32, json_schema={"type": "object"})
        assert isinstance(asyncio.run(client.complete(asked)).text, str)

    def test_a_failure_is_an_llm_error(self) -> None:
        client = self.failing()
        if client is None:
            pytest.skip("this kind of client has no failing form")  # reported per class, not in CI-only paths
        with pytest.raises(LLMError):
            asyncio.run(client.complete(request(QUESTION, model=client.model, max_tokens=8)))
