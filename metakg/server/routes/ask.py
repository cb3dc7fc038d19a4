"""Questions: one answer (``/api/ask``), or its steps as server-sent events while it is made
(``/api/ask/stream``)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse

from metakg import api
from metakg.config import Settings
from metakg.errors import MetakgError
from metakg.server.examples import example
from metakg.server.models import AskRequest, error_responses
from metakg.server.served import FieldError, ServedGraph

logger = logging.getLogger("metakg.server")


class EventStream(StreamingResponse):
    """Server-sent events (the OpenAPI document gives the stream this media type)."""

    media_type = "text/event-stream"


def router(served: ServedGraph) -> APIRouter:
    """The question routes over ``served``."""
    router = APIRouter()

    def checked(request: AskRequest) -> tuple[Settings, api.Question, Any]:
        """The settings for this question, the question and the strategy, or a 4xx naming the field."""
        try:
            return served.question(
                request.question, request.choices, strategy=request.strategy, switches=request.switches,
                overrides=request.settings,
            )  # fmt: skip
        except FieldError as e:
            detail = [{"loc": ["body", e.field], "msg": e.reason, "type": "value_error"}]
            raise HTTPException(status_code=422, detail=detail) from e

    @router.post("/api/ask", responses=error_responses(408, 413, 503) | example("post", "/api/ask"))
    async def ask(request: AskRequest) -> dict[str, Any]:
        """Answer a question over the graph: the answer, its evidence, trace and usage."""
        cfg, question, strategy = await anyio.to_thread.run_sync(checked, request)
        answer = await served.answer_async(cfg, question, strategy, use_llm=request.use_llm)
        return answer.to_dict() | {"trace_lines": api.trace_lines(answer)}

    @router.post(
        "/api/ask/stream",
        response_class=EventStream,
        responses={
            200: {
                "description": "Server-sent events: `step` events, then one `answer` (or `error`) event, each "
                "with JSON data.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **error_responses(408, 413, 503, json_route=False),
        },
    )
    async def ask_stream(request: AskRequest) -> EventStream:
        """The same answer as ``/api/ask``, as server-sent events: a ``step`` event for each step of the
        trace as the strategy takes it (the concepts and start entities, each start's refined path, the
        evidence retrieved), then one ``answer`` event (or an ``error`` event)."""
        cfg, question, strategy = await anyio.to_thread.run_sync(checked, request)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def put(event: tuple[str, Any]) -> None:  # from the answering thread into the loop's queue
            loop.call_soon_threadsafe(events.put_nowait, event)

        async def work() -> None:
            try:
                answer = await served.answer_async(
                    cfg, question, strategy, use_llm=request.use_llm, steps=lambda step: put(("step", step))
                )
                events.put_nowait(("answer", answer.to_dict() | {"trace_lines": api.trace_lines(answer)}))
            except MetakgError as e:
                events.put_nowait(("error", {"error": str(e)}))
            except Exception as e:  # a bug: the stream must still end, with an error event
                logger.exception("streamed answer failed")
                events.put_nowait(("error", {"error": f"internal error ({type(e).__name__}); see the server log"}))

        async def stream() -> AsyncIterator[str]:
            task = asyncio.ensure_future(work())  # held: the answer goes on if nobody reads the stream
            try:
                while True:
                    kind, data = await events.get()
                    yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"
                    if kind != "step":
                        return
            finally:
                if not task.done():
                    task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

        return EventStream(stream())

    return router
