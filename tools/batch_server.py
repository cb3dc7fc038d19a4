"""A local stand-in for the providers' batch APIs, in front of any OpenAI-compatible chat endpoint (in the
tests, the real local SmolLM2 server), so `metakg extract --batch` runs end to end on this machine:

- OpenAI's Files and Batches routes (``/v1/files``, ``/v1/batches``): upload, create, retrieve, list,
  cancel, output and error files, in the API's own shapes and status words;
- Anthropic's Message Batches routes (``/v1/messages/batches``, their ``results`` JSONL), with the
  key (``x-api-key`` or a bearer token) and ``anthropic-version`` headers and ``custom_id`` rules the API enforces;
- ``python -m tools.batch_server run-batch -i IN -o OUT --model M --upstream URL``: vLLM's offline
  ``run-batch`` command line, reading and writing vLLM's files.

Every request of a batch is sent to the upstream endpoint as a chat completion, one at a time, by a worker
thread. Faults on demand (:class:`Faults`): batches held in progress until released (a collector can be
killed meanwhile), the next batch expired after N requests, every n-th request of the next batch failed, the
next batch failed as a whole. Counters say how many batches were created, so a test can tell a collected
batch from a resubmitted one. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, Response

ROOT = Path(__file__).resolve().parents[1]


def chat(upstream: str, body: dict[str, Any], timeout: float = 300.0) -> tuple[int, Any]:
    """One chat completion from ``upstream`` (an OpenAI-compatible ``/v1`` root): status and JSON body. A
    request held to a JSON schema in OpenAI's form (``response_format`` ``json_schema``, which OpenAI's and
    vLLM's batch APIs take) goes upstream in the form llama-cpp-python's server reads (``json_object`` with a
    ``schema``): the model is the local one, the schema the same."""
    wanted = body.get("response_format") or {}
    if wanted.get("type") == "json_schema":
        schema = (wanted.get("json_schema") or {}).get("schema")
        body = {**body, "response_format": {"type": "json_object", "schema": schema}}
    reply = httpx.post(upstream.rstrip("/") + "/chat/completions", json=body, timeout=timeout)
    try:
        return reply.status_code, reply.json()
    except ValueError:
        return reply.status_code, {"error": {"message": reply.text[:300]}}


def openai_result(custom_id: str, status: int, body: Any) -> dict[str, Any]:
    """A line of an OpenAI (and vLLM) batch output or error file."""
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:16]}",
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": f"req_{uuid.uuid4().hex[:16]}", "body": body},
        "error": None,
    }


def run_batch(source: Path, target: Path, upstream: str) -> int:
    """vLLM's ``run-batch``: every line of ``source`` through ``upstream``; ``target`` written once, at the end
    (as vLLM does). Returns the number of requests."""
    lines = [json.loads(raw) for raw in source.read_text(encoding="utf-8").splitlines() if raw.strip()]
    results = []
    for line in lines:
        status, reply = chat(upstream, line["body"])
        results.append(openai_result(line["custom_id"], status, reply))
    part = target.with_name(target.name + ".part")
    part.write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    part.replace(target)
    return len(lines)


@dataclass
class Faults:
    """What goes wrong, set by a test. ``hold``: batches stay in progress while it is clear. The others apply
    to the next batch created, then reset: ``expire_after`` (it ends expired after this many requests),
    ``fail_every`` (every n-th request fails with a 500), ``fail_batch`` (it fails validation as a whole)."""

    hold: threading.Event = field(default_factory=threading.Event)
    expire_after: int | None = None
    fail_every: int = 0
    fail_batch: bool = False

    def __post_init__(self) -> None:
        self.hold.set()

    def take(self) -> tuple[int | None, int, bool]:
        """The one-shot faults for a new batch (and reset them)."""
        taken = (self.expire_after, self.fail_every, self.fail_batch)
        self.expire_after, self.fail_every, self.fail_batch = None, 0, False
        return taken


def _now() -> int:
    return int(time.time())


class BatchServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url`` is the OpenAI root (``.../v1``),
    ``anthropic_url`` the Anthropic root. ``created`` lists every batch created (``openai:<id>``,
    ``anthropic:<id>``)."""

    def __init__(self, upstream: str, *, api_key: str = "batch-test-key", model: str | None = None) -> None:
        self.upstream = upstream
        self.api_key = api_key
        self.model = model  # sent upstream instead of the request's model, when set
        self.faults = Faults()
        self.created: list[str] = []
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, Any]] = {}
        self.results: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -------------------------------------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> BatchServer:
        import socket

        import uvicorn

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the batch server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.faults.hold.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ------------------------------------------------------------------------------------------------ work

    def _upstream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        body = dict(body)
        if self.model:
            body["model"] = self.model
        return body

    def _work_openai(self, batch_id: str, lines: list[dict[str, Any]], faults: tuple[int | None, int, bool]) -> None:
        expire_after, fail_every, _ = faults
        batch = self.batches[batch_id]
        self.faults.hold.wait()
        with self.lock:
            batch.update(status="in_progress", in_progress_at=_now())
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for number, line in enumerate(lines, 1):
            if batch["status"] == "cancelling" or (expire_after is not None and number > expire_after):
                code = "batch_cancelled" if batch["status"] == "cancelling" else "batch_expired"
                message = "This request could not be executed before the batch " + (
                    "was cancelled." if code == "batch_cancelled" else "expired."
                )
                errors.append(
                    {
                        "id": f"batch_req_{uuid.uuid4().hex[:16]}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": message},
                    }
                )
            elif fail_every and number % fail_every == 0:
                errors.append(openai_result(line["custom_id"], 500, {"error": {"message": "injected server error"}}))
            else:
                status, reply = chat(self.upstream, self._upstream_body(line["body"]))
                (output if status == 200 else errors).append(openai_result(line["custom_id"], status, reply))
            with self.lock:
                counts = batch["request_counts"]
                counts["completed"] = len(output)
                counts["failed"] = len(errors)
        with self.lock:
            batch.update(status="finalizing", finalizing_at=_now())
            for rows, key in ((output, "output_file_id"), (errors, "error_file_id")):
                if rows:
                    batch[key] = self._file("".join(json.dumps(r) + "\n" for r in rows).encode(), "batch_output")
            if batch["status"] == "cancelling":
                ended = "cancelled"
            else:
                ended = "expired" if expire_after is not None and len(lines) > expire_after else "completed"
            batch["status"] = ended
            batch[f"{ended}_at"] = _now()

    def _file(self, content: bytes, purpose: str, filename: str = "batch.jsonl") -> str:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": _now(),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "content": content,
        }
        return file_id

    def _work_anthropic(
        self, batch_id: str, requests: list[dict[str, Any]], faults: tuple[int | None, int, bool]
    ) -> None:
        expire_after, fail_every, _ = faults
        batch = self.messages[batch_id]
        self.faults.hold.wait()
        results: list[dict[str, Any]] = []
        for number, item in enumerate(requests, 1):
            if batch["processing_status"] == "canceling" or (expire_after is not None and number > expire_after):
                kind = "canceled" if batch["processing_status"] == "canceling" else "expired"
                results.append({"custom_id": item["custom_id"], "result": {"type": kind}})
                continue
            params = item["params"]
            if fail_every and number % fail_every == 0:
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": "api_error", "message": "injected server error"}},
                }
            else:
                messages = [{"role": "system", "content": params["system"]}] if params.get("system") else []
                for m in params["messages"]:
                    content = m["content"]
                    if isinstance(content, list):
                        content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
                    messages.append({"role": m["role"], "content": content})
                body = {"model": params["model"], "messages": messages, "max_tokens": params["max_tokens"]}
                if "temperature" in params:
                    body["temperature"] = params["temperature"]
                wanted = (params.get("output_config") or {}).get("format") or {}
                if wanted.get("type") == "json_schema":  # structured output: the same schema, upstream's form
                    body["response_format"] = {"type": "json_object", "schema": wanted.get("schema")}
                status, reply = chat(self.upstream, self._upstream_body(body))
                if status == 200:
                    choice = reply["choices"][0]
                    usage = reply.get("usage") or {}
                    message = {
                        "id": f"msg_{uuid.uuid4().hex[:24]}",
                        "type": "message",
                        "role": "assistant",
                        "model": params["model"],
                        "content": [{"type": "text", "text": choice["message"].get("content") or ""}],
                        "stop_reason": "max_tokens" if choice.get("finish_reason") == "length" else "end_turn",
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": usage.get("prompt_tokens", 0),
                            "output_tokens": usage.get("completion_tokens", 0),
                        },
                    }
                    result = {"type": "succeeded", "message": message}
                else:
                    result = {
                        "type": "errored",
                        "error": {
                            "type": "error",
                            "error": {"type": "api_error", "message": f"upstream status {status}"},
                        },
                    }
            results.append({"custom_id": item["custom_id"], "result": result})
        with self.lock:  # as the API does: every request counts as processing until the whole batch has ended
            counts = batch["request_counts"]
            counts["processing"] = 0
            for entry in results:
                counts[entry["result"]["type"]] += 1
            self.results[batch_id] = results
            batch.update(
                processing_status="ended",
                ended_at=_iso(),
                results_url=f"{self.anthropic_url}/v1/messages/batches/{batch_id}/results",
            )

    # ------------------------------------------------------------------------------------------------ routes

    def app(self) -> Any:
        app = FastAPI()

        def openai_error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
            return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status)

        def anthropic_error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
            return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status)

        def bearer_ok(request: Request) -> bool:
            return request.headers.get("authorization") == f"Bearer {self.api_key}"

        def public(entry: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in entry.items() if k != "content"}

        def anthropic_refusal(request: Request) -> JSONResponse | None:
            # the key as x-api-key, or as a bearer token (which newer SDKs send)
            if self.api_key not in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:]):
                return anthropic_error(401, "invalid x-api-key", "authentication_error")
            if not request.headers.get("anthropic-version"):
                return anthropic_error(400, "anthropic-version: header is required")
            return None

        @app.middleware("http")
        async def keys(request: Request, call_next: Any) -> Any:
            """Every route checks its provider's headers first, as the APIs do."""
            path = request.url.path
            if path.startswith("/v1/messages/batches"):
                refused = anthropic_refusal(request)
                if refused is not None:
                    return refused
            elif path.startswith(("/v1/files", "/v1/batches")) and not bearer_ok(request):
                return openai_error(401, "Incorrect API key provided.", "invalid_api_key")
            return await call_next(request)

        @app.post("/v1/files")
        async def upload(request: Request, file: UploadFile = File(...), purpose: str = Form(...)) -> Any:
            if purpose != "batch":
                return openai_error(400, f"purpose {purpose!r} is not supported here")
            content = await file.read()
            with self.lock:
                file_id = self._file(content, purpose, file.filename or "upload.jsonl")
                return public(self.files[file_id])

        @app.get("/v1/files/{file_id}")
        async def file_info(request: Request, file_id: str) -> Any:
            if file_id not in self.files:
                return openai_error(404, f"No such File object: {file_id}")
            return public(self.files[file_id])

        @app.get("/v1/files/{file_id}/content")
        async def file_content(request: Request, file_id: str) -> Any:
            if file_id not in self.files:
                return openai_error(404, f"No such File object: {file_id}")
            return Response(self.files[file_id]["content"], media_type="application/octet-stream")

        @app.post("/v1/batches")
        async def create(request: Request) -> Any:
            body = await request.json()
            file_id = body.get("input_file_id")
            if file_id not in self.files:
                return openai_error(404, f"No such File object: {file_id}")
            if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
                return openai_error(400, "endpoint must be /v1/chat/completions and completion_window 24h here")
            faults = self.faults.take()
            batch_id = f"batch_{uuid.uuid4().hex[:24]}"
            lines: list[dict[str, Any]] = []
            problems: list[dict[str, Any]] = []
            seen: set[str] = set()
            for number, raw in enumerate(self.files[file_id]["content"].decode().splitlines(), 1):
                try:
                    line = json.loads(raw)
                    assert line["method"] == "POST" and line["url"] == body["endpoint"]
                    assert isinstance(line["custom_id"], str) and line["custom_id"] not in seen
                    seen.add(line["custom_id"])
                    lines.append(line)
                except (ValueError, KeyError, AssertionError):
                    problems.append(
                        {"code": "invalid_request", "message": "bad batch line", "param": None, "line": number}
                    )
            if faults[2]:
                problems.append({"code": "invalid_request", "message": "injected validation failure", "line": 1})
            batch = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "errors": None,
                "input_file_id": file_id,
                "completion_window": "24h",
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": _now(),
                "in_progress_at": None,
                "expires_at": _now() + 86400,
                "finalizing_at": None,
                "completed_at": None,
                "failed_at": None,
                "expired_at": None,
                "cancelling_at": None,
                "cancelled_at": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": body.get("metadata"),
            }
            with self.lock:
                self.batches[batch_id] = batch
                self.created.append(f"openai:{batch_id}")
                if problems:
                    batch.update(status="failed", failed_at=_now(), errors={"object": "list", "data": problems})
                else:
                    threading.Thread(target=self._work_openai, args=(batch_id, lines, faults), daemon=True).start()
                return dict(batch)

        @app.get("/v1/batches/{batch_id}")
        async def retrieve(request: Request, batch_id: str) -> Any:
            if batch_id not in self.batches:
                return openai_error(404, f"No such Batch object: {batch_id}")
            with self.lock:
                return json.loads(json.dumps(self.batches[batch_id]))

        @app.get("/v1/batches")
        async def listing(request: Request, limit: int = 20) -> Any:
            with self.lock:
                data = sorted(self.batches.values(), key=lambda b: -b["created_at"])[:limit]
                data = json.loads(json.dumps(data))
            return {"object": "list", "data": data, "first_id": None, "last_id": None, "has_more": False}

        @app.post("/v1/batches/{batch_id}/cancel")
        async def cancel(request: Request, batch_id: str) -> Any:
            if batch_id not in self.batches:
                return openai_error(404, f"No such Batch object: {batch_id}")
            with self.lock:
                batch = self.batches[batch_id]
                if batch["status"] in ("validating", "in_progress"):
                    batch.update(status="cancelling", cancelling_at=_now())
                return dict(batch)

        @app.post("/v1/messages/batches")
        async def message_batch(request: Request) -> Any:
            body = await request.json()
            requests = body.get("requests")
            if not isinstance(requests, list) or not requests:
                return anthropic_error(400, "requests: a non-empty list is required")
            seen: set[str] = set()
            for index, item in enumerate(requests):
                custom_id = item.get("custom_id")
                if not isinstance(custom_id, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", custom_id):
                    return anthropic_error(400, f"requests.{index}.custom_id: String should match pattern")
                if custom_id in seen:
                    return anthropic_error(400, f"requests.{index}.custom_id: duplicate custom_id {custom_id}")
                seen.add(custom_id)
                params = item.get("params") or {}
                if not {"model", "max_tokens", "messages"} <= params.keys():
                    return anthropic_error(400, f"requests.{index}.params: model, max_tokens and messages required")
                if any(m.get("role") not in ("user", "assistant") for m in params["messages"]):
                    return anthropic_error(400, f"requests.{index}.params.messages: roles are user and assistant")
            faults = self.faults.take()
            batch_id = f"msgbatch_{uuid.uuid4().hex[:24]}"
            batch = {
                "id": batch_id,
                "type": "message_batch",
                "processing_status": "in_progress",
                "request_counts": {
                    "processing": len(requests),
                    "succeeded": 0,
                    "errored": 0,
                    "canceled": 0,
                    "expired": 0,
                },
                "ended_at": None,
                "created_at": _iso(),
                "expires_at": _iso(86400),
                "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": None,
            }
            with self.lock:
                self.messages[batch_id] = batch
                self.created.append(f"anthropic:{batch_id}")
                threading.Thread(target=self._work_anthropic, args=(batch_id, requests, faults), daemon=True).start()
                return json.loads(json.dumps(batch))

        @app.get("/v1/messages/batches/{batch_id}")
        async def message_batch_info(request: Request, batch_id: str) -> Any:
            if batch_id not in self.messages:
                return anthropic_error(404, f"batch {batch_id} not found", "not_found_error")
            with self.lock:
                return json.loads(json.dumps(self.messages[batch_id]))

        @app.get("/v1/messages/batches/{batch_id}/results")
        async def message_batch_results(request: Request, batch_id: str) -> Any:
            if batch_id not in self.results:
                return anthropic_error(404, f"batch {batch_id} has no results yet", "not_found_error")
            text = "".join(json.dumps(r) + "\n" for r in self.results[batch_id])
            return Response(text, media_type="application/binary")

        return app


def _iso(ahead_s: int = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ahead_s))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.batch_server", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run-batch", help="vLLM's run-batch: a request file through --upstream to a result file")
    run.add_argument("-i", "--input-file", dest="source", type=Path, required=True)
    run.add_argument("-o", "--output-file", dest="target", type=Path, required=True)
    run.add_argument("--model", default=None, help="the model named in the requests (sent upstream as written)")
    run.add_argument("--upstream", required=True, help="an OpenAI-compatible /v1 root answering the requests")
    args = parser.parse_args(argv)
    count = run_batch(args.source, args.target, args.upstream)
    print(f"{count} requests answered into {args.target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
