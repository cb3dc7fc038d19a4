"""Extraction's LLM phase on a Ray cluster, through ``ray.data.llm``: the module that imports ``ray``.

Ray is an optional extra (``pip install "metakg[ray]"``: ``ray[data]`` with aiohttp). A run joins a cluster
(:class:`RayCluster`: ``ray.address``, ``RAY_ADDRESS``, or a Ray instance of its own on this machine), and the
request bodies it still needs become a Ray Dataset of JSON texts. Two processors answer them:

- ``http`` (the default): ray.data.llm's HTTP request processor posts each body to an OpenAI-compatible
  endpoint; the prompts are dealt round-robin over the endpoints, each served by its own pool of request workers
  (actors), each worker sending one request at a time. 429, 408 and 5xx gateway errors and dropped connections
  are retried with backoff by the processor; any other reply (a 400, a 500 with an error body) comes back as it
  is and the caller makes it a failed prompt with its reason.
- ``vllm``: ray.data.llm's vLLM engine processor runs the model on the cluster's GPUs; its replies are put in
  the same chat-completion shape.

Replies stream back to the driver as they arrive (:meth:`RayCluster.replies` yields them), so the caller keeps
each one in its cache at once: a driver killed mid-run loses only the replies in flight. Ray retries the work of a
node that died on the nodes left. A batch whose requests failed past the retries does not stop the run: its
prompts are simply not among the replies, and the caller counts them failed.

Each reply carries ``metakg``: the node that sent the request, the HTTP status and the seconds it took.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from metakg.config import RaySettings
from metakg.errors import ConfigError, LLMError

logger = logging.getLogger("metakg.llm")

#: the key of a reply that holds metakg's own notes on it (node, status, seconds)
NOTE_KEY = "metakg"


def _ray() -> Any:
    """The ``ray`` module, or a clear error naming the extra."""
    try:
        import ray
        import ray.data.llm
    except ImportError as e:
        raise ConfigError(
            f'--engine ray needs Ray Data with its LLM module: pip install "metakg[ray]" ({e}).'
        ) from None
    return ray


@dataclass(frozen=True)
class Endpoint:
    """Where a share of the prompts goes: a chat-completions URL and the headers a request carries."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)


def _node() -> str:
    """The Ray node this code runs on (``local`` outside a Ray worker or driver)."""
    import ray

    return str(ray.get_runtime_context().get_node_id()) if ray.is_initialized() else "local"


@functools.cache
def _response_class() -> Any:
    """aiohttp's response class with :data:`NOTE_KEY` added to its JSON (made on first use, on a worker)."""
    import aiohttp

    class TaggedResponse(aiohttp.ClientResponse):
        """A response whose JSON is always an object, with the node, the status and the seconds noted in it."""

        metakg_started: float = 0.0

        async def json(self, *args: Any, **kwargs: Any) -> Any:
            text = await self.text(errors="replace")
            try:
                body = json.loads(text)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                body = {"error": {"message": f"HTTP {self.status}, not a JSON object: {text[:200]!r}"}}
            body[NOTE_KEY] = {
                "node": _node(),
                "status": self.status,
                "seconds": time.perf_counter() - self.metakg_started,
            }
            return body

    return TaggedResponse


class _Session:
    """What ray.data.llm's HTTP stage posts through (its ``session_factory``): an aiohttp session that sends
    metakg's request body as it was written (the stage serialises the row's payload, here that JSON text, once
    more: it is unwrapped), and whose replies say which node sent them."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._inner: Any = None

    async def __aenter__(self) -> _Session:
        import aiohttp

        self._inner = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._timeout_s), response_class=_response_class()
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.close()

    async def post(self, url: str, *, headers: dict[str, str], data: Any) -> Any:
        if isinstance(data, str) and data.startswith('"'):
            data = json.loads(data).encode("utf-8")  # the JSON text of the body, serialised again by the stage
        started = time.perf_counter()
        response = await self._inner.post(url, headers=headers, data=data)
        response.metakg_started = started
        return response


def _from_reply(row: dict[str, Any]) -> dict[str, Any]:
    """The HTTP stage's answer: the prompt's index and the reply as JSON text."""
    return {"index": row["index"], "reply": json.dumps(row["http_response"], ensure_ascii=False)}


def _to_vllm(row: dict[str, Any]) -> dict[str, Any]:
    """The vLLM engine's row: the body's messages and sampling (its JSON schema held by guided decoding)."""
    body = json.loads(row["body"])
    sampling: dict[str, Any] = {"temperature": body.get("temperature", 0.0), "max_tokens": body.get("max_tokens")}
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
    if schema is not None:
        sampling["guided_decoding"] = {"json": schema}
    return {"messages": body["messages"], "sampling_params": sampling, "index": row["index"], "model": body["model"]}


def _from_vllm(row: dict[str, Any]) -> dict[str, Any]:
    """The vLLM engine's answer as a chat completion (the shape the HTTP processor brings back)."""
    reply = {
        "model": row.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": row.get("generated_text") or ""},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": int(row.get("num_input_tokens") or 0),
                  "completion_tokens": int(row.get("num_generated_tokens") or 0)},
        NOTE_KEY: {"node": _node(), "status": 200, "seconds": 0.0},
    }  # fmt: skip
    return {"index": row["index"], "reply": json.dumps(reply, ensure_ascii=False)}


#: the logger through which Ray Data reports a batch whose task failed (with its traceback)
BLOCK_ERROR_LOGGER = "ray.data._internal.execution.streaming_executor_state"


def _failure(error: BaseException) -> str:
    """A failed batch's reason in a line: the HTTP stage's "no reply after N retries" with the last error, else
    the innermost exception's first line."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = str(error)
    retried = re.search(r"maximum retries of (\d+) .*?Previous Exception: (.*?)\. Full Traceback", text, re.S)
    if retried:
        return f"no reply after {retried[1]} retries (last: {retried[2][:120]})"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(error).__name__}: {first[:200]}"


class _BatchFailures(logging.Filter):
    """Keeps the reason of each batch Ray Data skipped (``max_errored_blocks``) and shows it in a line, not as a
    traceback that prints the batch's prompts."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            reason = _failure(record.exc_info[1])
            self.reasons.append(reason)
            record.msg = f"{record.getMessage()} ({reason})"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


def _answers(address: str | None) -> None:
    """Refuse at once a cluster address where nothing listens (Ray itself would wait minutes for it).

    Raises:
        ConfigError: ``host:port`` (or ``ray://host:port``) refuses the connection or does not answer in 10 s.
    """
    if address is None or address in ("auto", "local"):
        return
    found = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)/?", address.strip())
    if found is None:
        raise ConfigError(f"the Ray address {address!r} is not host:port, ray://host:port, auto or local.")
    host, port = found[1], int(found[2])
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as e:
        raise ConfigError(
            f"nothing answers at the Ray address {address} ({e.strerror or e}): is the cluster's head running "
            "(ray start --head)? Give its address with --ray-address, ray.address or RAY_ADDRESS."
        ) from None


@dataclass(frozen=True)
class ClusterInfo:
    """The cluster a run used: its address, its live nodes and CPUs, and the dashboard (None: not running)."""

    address: str
    nodes: int
    cpus: float
    dashboard: str | None


class RayCluster:
    """A connection to a Ray cluster for one run (a context manager: leaving it disconnects, and stops the Ray
    instance it started, if it started one)."""

    def __init__(self, settings: RaySettings, *, address: str | None = None) -> None:
        """Remember where to connect (``address``, else ``settings.address``, else ``RAY_ADDRESS`` as Ray reads
        it, else a new local instance); nothing is started until the block is entered."""
        self.settings = settings
        self.address = address or settings.address
        self.info: ClusterInfo | None = None
        self._failures = _BatchFailures()

    def __enter__(self) -> RayCluster:
        ray = _ray()
        _answers(self.address)
        try:
            context = ray.init(
                address=self.address,
                log_to_driver=False,
                logging_level=logging.WARNING,
                include_dashboard=None,
                configure_logging=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = self.address or "a new local instance"
            raise ConfigError(f"cannot join the Ray cluster at {where}: {e}") from None
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        dashboard = getattr(context, "dashboard_url", None) or None
        address = getattr(context, "address_info", {}).get("address") or self.address or "local"
        self.info = ClusterInfo(
            address=str(address),
            nodes=len(nodes),
            cpus=sum(float(n.get("Resources", {}).get("CPU", 0)) for n in nodes),
            dashboard=f"http://{dashboard}" if dashboard and "://" not in dashboard else dashboard,
        )
        context_data = ray.data.DataContext.get_current()
        context_data.max_errored_blocks = -1  # a failed batch's prompts come back missing, never stop the run
        logging.getLogger(BLOCK_ERROR_LOGGER).addFilter(self._failures)
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        logging.getLogger(BLOCK_ERROR_LOGGER).removeFilter(self._failures)
        ray.shutdown()

    def missing_reason(self) -> str:
        """Why a prompt's reply did not come back: the reasons of the batches that failed so far."""
        reasons = list(dict.fromkeys(self._failures.reasons))
        said = "; ".join(reasons[:3]) + (f"; {len(reasons) - 3} more" if len(reasons) > 3 else "")
        return f"no reply came back from the Ray cluster: its batch failed ({said or 'the cluster logs say why'})"

    def replies(
        self,
        bodies: Sequence[str],
        endpoints: Sequence[Endpoint],
        *,
        concurrency: int,
        max_retries: int,
        backoff_s: float,
        timeout_s: float,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each body's reply as it arrives: ``(index in bodies, reply JSON)``, in no order; a body whose batch
        failed past the retries is missing.

        ``processor = "http"``: the bodies are dealt round-robin over ``endpoints``, each served by at most
        ``concurrency`` request workers. ``"vllm"``: the engine on the cluster's GPUs answers them all.

        Raises:
            LLMError: the Ray run itself failed (the replies yielded before stay valid).
        """
        ray = _ray()
        from ray.data.llm import build_processor

        settings = self.settings
        if settings.processor == "vllm":
            shares = [self._vllm(ray, build_processor, bodies, concurrency)]
        else:
            shares = []
            for n, endpoint in enumerate(endpoints):
                # the body's JSON text is the row's payload as it is (unwrapped by _Session): nothing to do before
                # the requests, and no reshaping of the body into columns
                rows = [{"index": i, "payload": bodies[i]} for i in range(n, len(bodies), len(endpoints))]
                if rows:
                    shares.append(
                        self._http(ray, build_processor, rows, endpoint, concurrency, max_retries, backoff_s, timeout_s)
                    )
        if not shares:
            return
        dataset = shares[0].union(*shares[1:]) if len(shares) > 1 else shares[0]
        try:
            for row in dataset.iter_rows():
                yield int(row["index"]), json.loads(row["reply"])
        except (ray.exceptions.RayError, RuntimeError, ValueError) as e:
            raise LLMError(f"the Ray run stopped: {type(e).__name__}: {str(e)[:300]}") from None

    def _http(
        self,
        ray: Any,
        build_processor: Any,
        rows: list[dict[str, Any]],
        endpoint: Endpoint,
        concurrency: int,
        max_retries: int,
        backoff_s: float,
        timeout_s: float,
    ) -> Any:
        from ray.data.llm import HttpRequestProcessorConfig

        settings = self.settings
        # as many request workers as asked and as the cluster's CPUs hold, all started at once (a pool that grows
        # from one takes its time); one lost with its node is started again where there is room
        room = int(self.info.cpus // settings.worker_cpus) if self.info is not None else concurrency
        workers = max(1, min(concurrency, room))
        config = HttpRequestProcessorConfig(
            url=endpoint.url,
            headers=endpoint.headers or None,
            qps=settings.qps,
            max_retries=max_retries,
            base_retry_wait_time_in_s=backoff_s,
            session_factory=functools.partial(_Session, timeout_s),
            batch_size=settings.batch_size,
            concurrency=(workers, workers),
            http_request_stage={"num_cpus": settings.worker_cpus},
        )
        # the processor's step before the requests (here it passes each row on) asks for the request workers' CPUs,
        # so Ray fuses it into them (no task of its own to schedule); the step after reserves none: a node whose
        # CPUs the request workers hold (the node left after another died) must still run it
        processor = build_processor(
            config,
            postprocess=_from_reply,
            preprocess_map_kwargs={"num_cpus": settings.worker_cpus},
            postprocess_map_kwargs={"num_cpus": 0},
        )
        blocks = max(1, min(len(rows), -(-len(rows) // settings.batch_size)))
        return processor(ray.data.from_items(rows, override_num_blocks=blocks))

    def _vllm(self, ray: Any, build_processor: Any, bodies: Sequence[str], concurrency: int) -> Any:
        from ray.data.llm import vLLMEngineProcessorConfig

        settings = self.settings
        if not settings.vllm_model:
            raise ConfigError("ray.processor = vllm needs ray.vllm_model: the model the engine loads on the GPUs.")
        config = vLLMEngineProcessorConfig(
            model_source=settings.vllm_model,
            engine_kwargs=dict(settings.vllm_engine_kwargs),
            batch_size=settings.batch_size,
            concurrency=concurrency,
        )
        processor = build_processor(config, preprocess=_to_vllm, postprocess=_from_vllm)
        rows = [{"index": i, "body": body} for i, body in enumerate(bodies)]
        return processor(ray.data.from_items(rows))
