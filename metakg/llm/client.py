"""The LLMClient protocol and its value types: chat messages in, text and token usage out."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: Role
    content: str


@dataclass(frozen=True)
class Usage:
    """Tokens a call used."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """A reply: its text, the tokens it cost, how long it took, and whether it came from the cache."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    attempts: int = 1  # how many times the request was sent (retries included)


@dataclass(frozen=True)
class ChatRequest:
    """Everything that determines a reply; its :meth:`key` addresses the response cache."""

    messages: tuple[Message, ...]
    model: str
    temperature: float = 0.0
    max_tokens: int = 512
    json_mode: bool = False
    json_schema: str | None = None  # a JSON Schema (as JSON text) the reply should follow, where offered
    tools: str | None = None  # OpenAI function definitions (as JSON text) to call, where the endpoint can

    def key(self) -> str:
        """SHA-256 of the model, messages and parameters (the cache key)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [[m.role, m.content] for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "json_mode": self.json_mode,
        }
        if self.json_schema is not None:  # only then: the keys of earlier requests stay the same
            payload["json_schema"] = self.json_schema
        if self.tools is not None:
            payload["tools"] = self.tools
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def as_openai(self) -> list[dict[str, Any]]:
        """The messages in the OpenAI chat format."""
        return [{"role": m.role, "content": m.content} for m in self.messages]


@runtime_checkable
class LLMClient(Protocol):
    """Sends chat requests to a model."""

    @property
    def model(self) -> str:
        """The model name requests go to."""
        ...

    async def complete(self, request: ChatRequest, *, tag: str = "") -> Completion:
        """One reply (``tag`` labels the call in the usage meter, ``stage:detail``); raises LLMError when the
        model cannot answer after the retries."""
        ...


def request(
    messages: Sequence[Message],
    *,
    model: str,
    temperature: float = 0.0,
    max_tokens: int = 512,
    json_mode: bool = False,
    json_schema: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> ChatRequest:
    """Build a :class:`ChatRequest`; a ``json_schema`` implies ``json_mode``. ``tools`` (OpenAI function
    definitions) are offered through function calling where the client uses it; the calls the model makes
    come back in the reply's text as ``{"tool_calls": [{"tool": name, "args": {...}}]}``."""
    # the schema's own key order is kept: a grammar built from it (llama.cpp) generates an object's properties
    # in that order, and subject, relation, object reads better to a model than the alphabet's order
    schema = json.dumps(json_schema) if json_schema is not None else None
    offered = json.dumps(list(tools), sort_keys=True) if tools else None
    return ChatRequest(
        tuple(messages), model, temperature, max_tokens, json_mode or schema is not None, schema, offered
    )
