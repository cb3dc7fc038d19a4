"""The HTTP API's request models and error bodies (every field bounded; a 422 names the field), and how
error statuses are documented per route."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator

from metakg import api


class ErrorBody(BaseModel):
    """Every error but a 422: what went wrong, in a sentence."""

    error: str = Field(description="What went wrong, and what to do about it.")


#: what each error status of the API means (the OpenAPI document lists them per route)
ERROR_STATUSES: dict[int, str] = {
    400: "A request the server cannot act on, with the reason: a Host header it does not answer for "
    "(server.allowed_hosts), a bad choice, strategy or benchmark, a body that is not UTF-8.",
    401: "The server has an API key and the request's X-API-Key header is not it.",
    403: "Writes are off: the server was not started with --allow-writes.",
    404: "No such node or evaluation run.",
    408: "The request body stopped arriving (no part for server.body_idle_s): send it whole.",
    409: "The served bundle was changed by another process since this server read it; restart the server.",
    413: "The request body is larger than server.max_body_bytes.",
    507: "The served bundle could not be written (a full disk): nothing was changed, the graph served is as it was.",
    503: "The server is busy (every question slot taken, the graph being read for a write, or another process "
    "writing the bundle), or cannot answer now: the LLM or the embedding model cannot be reached or loaded; "
    "try again shortly.",
}
#: the statuses every route can answer: a Host header refused, a missing or wrong key
EVERY_ROUTE = (400, 401)


def error_responses(*statuses: int, json_route: bool = True) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route that can answer ``statuses`` (and those of every route), each
    with the :class:`ErrorBody` model as JSON; a 422's model is FastAPI's own (``detail`` naming the field).
    A route whose own answer is not JSON (``json_route=False``) names the model by reference, since FastAPI
    would give a ``model`` the route's media type."""
    body: dict[str, Any] = (
        {"model": ErrorBody}
        if json_route
        else {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    )
    return {status: body | {"description": ERROR_STATUSES[status]} for status in sorted({*EVERY_ROUTE, *statuses})}


def printable(value: Any) -> Any:
    """``value`` (JSON data) with every string's lone surrogates written as ``\\udXXX`` escapes, so that it
    can be encoded as UTF-8, and every number JSON has no form for (``NaN``, ``Infinity``, which Python's parser
    accepts) as its text: a request's invalid input is echoed in its 422 without breaking the answer."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, bytes | bytearray):  # a body that is not UTF-8: shown as escapes
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    return value


class AskRequest(BaseModel):
    """A question to answer over the served graph."""

    # NaN or Infinity for a number is a 422, never a setting; so is a field the request has not (a misspelt
    # "strategy" would be dropped, and the run be another than the one asked for)
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    question: str = Field(min_length=1, description="The question.")
    choices: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list, max_length=26, description='Multiple-choice options, each "A: text".'
    )
    strategy: str | None = Field(
        default=None, min_length=1, max_length=64, description="A strategy (default: qa.strategy)."
    )
    switches: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=16)
    use_llm: StrictBool = Field(default=True, description="False: retrieval only (concepts by rules), no LLM call.")
    settings: dict[Annotated[str, Field(max_length=64)], str | int | float | bool] = Field(
        default_factory=dict,
        max_length=32,
        description="Settings for this question only: a [qa] key (tau_entity) or one of the strategy's "
        "(path_hops), as `metakg strategies` lists them.",
    )


Field_ = Annotated[str, Field(min_length=1, max_length=1000)]


class TriplesRequest(BaseModel):
    """Triples to add to the served graph (only on a server started with ``--allow-writes``)."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    triples: list[tuple[Field_, Field_, Field_]] = Field(
        min_length=1, max_length=10_000, description="(head, relation, tail) triples, as a triple file holds them."
    )
    dataset: str = Field(
        default="api",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="Scopes the new nodes' ids, kg:<dataset>/<name>.",
    )


def _check_runs(strategies: list[str], ablations: list[str]) -> None:
    from metakg.errors import UsageError

    try:
        api.Runs(strategies, ablations).check()
    except UsageError as e:
        raise ValueError(str(e)) from None


class EvaluationRequest(BaseModel):
    """An evaluation run over the served graph, as ``metakg eval`` runs it."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")

    benchmark: str = Field(
        min_length=1, max_length=500, description="A benchmark file, relative to server.benchmarks_dir."
    )
    format: str = Field(
        description="The question set's format (docs/formats.md).", json_schema_extra={"enum": list(api.EVAL_FORMATS)}
    )
    strategies: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=lambda: ["metakgrag"], min_length=1, max_length=8
    )
    ablations: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(default_factory=list, max_length=16)
    limit: int | None = Field(default=None, ge=1, le=100_000, description="Only the first N questions (after skip).")
    skip: int = Field(default=0, ge=0, le=1_000_000)
    budget: int = Field(default=10, ge=1, le=1000, description="Evidence budget of recall@budget.")
    use_llm: StrictBool = Field(default=True, description="False: retrieval only, the evidence metrics.")

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in api.EVAL_FORMATS:
            raise ValueError(f"unknown format {value!r}; choose one of {', '.join(api.EVAL_FORMATS)}")
        return value

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, value: list[str]) -> list[str]:
        """An unknown strategy is refused with the request (a 422 naming ``strategies``), never queued."""
        _check_runs(value, [])
        return value

    @field_validator("ablations")
    @classmethod
    def _known_ablations(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """An ablation no chosen strategy offers is refused with the request (a 422 naming ``ablations``)."""
        strategies = info.data.get("strategies")
        if strategies is not None:  # else the strategies were refused already
            _check_runs(strategies, value)
        return value
