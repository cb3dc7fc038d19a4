"""LLM triple extraction from a dataset into a validated bundle, optionally linked to another bundle."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from metakg.api._shared import JsonResult, Progress, at_least_one, quiet
from metakg.api.bundles import Earlier, earlier_version, recorded_diff, write_validated
from metakg.api.llm import batch_session, llm_session, run_with, session_model
from metakg.config import Settings
from metakg.errors import InputDataError, UsageError
from metakg.extractors.examples import example_picker, read_examples
from metakg.extractors.ontology import Ontology, node_types, read_ontology, vocabulary_ontology
from metakg.extractors.pipeline import (
    IMPORTER,
    Guide,
    Outcome,
    RunStats,
    Unit,
    build_bundle,
    plan_units,
    reply_triples,
    run_units,
    run_units_batched,
    run_units_ray,
    unit_request,
)
from metakg.extractors.pipeline import summary as extraction_summary
from metakg.extractors.resolution import LinkTarget
from metakg.extractors.text2kgbench import BenchOntology, Responses, Sentence
from metakg.extractors.update import compare_records, stored_outcomes, units_table
from metakg.identity.curation import read_curation
from metakg.identity.names import LinkRule
from metakg.ingest.datasets import (
    FORMATS,
    READERS,
    RECORD_SCHEMA,
    DatasetFormat,
    DatasetRead,
    Reader,
    formats_help,
    formats_table,
    read_dataset,
)
from metakg.llm.batch import BATCH_DISCOUNT, PROVIDERS
from metakg.llm.client import ChatRequest
from metakg.llm.embedder import Embedder, LazyEmbedder, embed_in_blocks
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.llm.ray_engine import Endpoint, RayCluster
from metakg.llm.usage import UsageSummary, price
from metakg.schemas.bundle import (
    EXTRACTION_FILE,
    read_bundle,
    read_embeddings,
    read_manifest,
    read_side_table,
    source_entry,
)
from metakg.schemas.bundle_dir import writes_bundle
from metakg.schemas.curie import check_dataset_name
from metakg.schemas.vocabulary import default_vocabulary

__all__ = [
    "FORMATS",
    "PROMPT_MODES",
    "READERS",
    "DatasetFormat",
    "ExtractOptions",
    "Extraction",
    "Reader",
    "RunStats",
    "TextSource",
    "benchmark_responder",
    "extract",
    "extracted_dataset",
    "formats_help",
    "formats_table",
    "link_target",
]


def link_target(
    path: Path, settings: Settings, embedder: Embedder | None, progress: Progress | None = None
) -> LinkTarget:
    """The nodes of the bundle at ``path`` indexed for linking; with an embedder, also their name vectors
    (the bundle's stored embeddings when `metakg embed` made them with the same model, else computed now).

    Raises:
        BundleError: the bundle cannot be read.
    """
    say = progress or quiet
    say(f"reading link target {path}")
    bundle = read_bundle(path)
    if embedder is None:
        return LinkTarget.from_nodes(bundle.nodes)
    stored = read_embeddings(path, bundle)
    if stored is not None and bundle.manifest.get("embeddings", {}).get("model") == embedder.name:
        vectors = np.asarray(stored["vector"].to_list(), dtype=np.float32).reshape(stored.height, -1)
        return LinkTarget.from_nodes(bundle.nodes, vectors, stored["id"].to_list())
    names = bundle.nodes["name"].to_list()
    say(f"embedding {len(names)} link-target names (embedding the bundle once keeps them)")
    return LinkTarget.from_nodes(bundle.nodes, embed_in_blocks(embedder, names), bundle.nodes["id"].to_list())


@dataclass(frozen=True)
class TextSource:
    """The records to extract from: the file at ``path`` in the format ``fmt``, under the name ``dataset``
    (it scopes the ids, ``kg:<dataset>/<name>``), with the fields holding a record's text, id and time, and
    the first ``limit`` records only (None: all)."""

    path: Path
    fmt: DatasetFormat
    dataset: str
    text_field: str = "text"
    id_field: str | None = None
    time_field: str | None = None
    limit: int | None = None


@dataclass(frozen=True)
class ExtractOptions:
    """How an extraction runs: the requests in flight (``concurrency``, default ``llm.concurrency``), a spend
    limit (``budget_usd``), a bundle to link the mentions to (``link_to``), a curator's identity file, an
    earlier extraction to ``update`` (``history``: keep the versions; default: when the earlier bundle does),
    a provider ``batch`` API to send the prompts through (``openai``, ``anthropic`` or ``vllm``; ``wait``:
    poll until the batch ends, else stop once it is submitted and collect it on the next run), an
    ``ontology`` guiding the extraction (default: ``extract.ontology``) and a training file of worked
    ``examples`` for its prompts; the ``engine`` the prompts go out from (``local``, or ``ray``: the workers of
    the Ray cluster at ``ray_address``, default ``ray.address``)."""

    concurrency: int | None = None
    budget_usd: float | None = None
    link_to: Path | None = None
    identity_file: Path | None = None
    update: Path | None = None
    history: bool | None = None
    batch: str | None = None
    wait: bool = True
    ontology: Path | None = None
    examples: Path | None = None
    engine: str = "local"
    ray_address: str | None = None


#: where the LLM phase of a run runs: ``local`` (this process) or ``ray`` (the workers of a Ray cluster)
ENGINES = ("local", "ray")


@dataclass(frozen=True, kw_only=True)
class Extraction(JsonResult):
    """The figures of an extraction (the ``--json`` of ``metakg extract``): records ``read``, those accepted
    (``records``) and rejected (``input_rejects``); the prompts (``units``, ``reused_units`` an update kept),
    the LLM calls, cache hits, ``failed`` prompts and those ``skipped_budget``; the triples and the reply
    lines rejected or repaired; tokens and cost; the bundle's ``nodes`` and ``edges``, the ``resolution`` of
    mentions to nodes, the distinct ``errors``; for an update the ``records_changes`` and ``edges_changes``;
    with an ontology, the ``conformance_warnings`` kept (``extract.conformance = "warn"``);
    the run, the model, the ``bundle`` and its validation, and the wall time."""

    records: int
    read: int
    input_rejects: int
    units: int
    llm_calls: int
    cache_hits: int
    failed: int
    skipped_budget: int
    triples: int
    rejected_lines: int
    repaired_lines: int
    units_without_triples: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    saved_tokens: int
    cost_usd: float
    nodes: int
    edges: int
    resolution: dict[str, Any] | None
    errors: list[str]
    reused_units: int
    retries: int
    records_changes: dict[str, int] | None = None
    edges_changes: dict[str, int] | None = None
    conformance_warnings: int | None = None
    notes: list[str] | None = None  # what a batch's results held that no request asked for (never a failure)
    files: int | None = None  # documents: the input files read, and those refused (in the rejects)
    files_rejected: int | None = None
    #: --engine ray: the cluster (address, nodes, CPUs, dashboard), the prompts its workers sent and the nodes
    #: they ran on (prompts per node id)
    ray: dict[str, Any] | None = None
    run_id: str
    model: str
    bundle: Path
    validation_ok: bool
    validation_rejected: int
    wall_s: float

    omit_none = (
        "records_changes", "edges_changes", "conformance_warnings", "notes", "files", "files_rejected", "ray"
    )  # fmt: skip

    @property
    def complete(self) -> bool:
        """Every prompt was answered (none failed, none left out by the budget)."""
        return self.failed == 0 and self.skipped_budget == 0


#: tokens a chat template adds around each message and to open the reply, counted beside the messages'
#: own (OpenAI's rule: 4 and 3; ChatML, SmolLM2's template, adds 5 and 3)
PER_MESSAGE_TOKENS, REPLY_TOKENS = 4, 3


@dataclass(frozen=True)
class ExtractEstimate(JsonResult):
    """What an extraction would send before it sends anything (``extract --estimate``): the ``units``, those
    whose reply is already cached or kept by an update (``answered``), the ``calls`` left, their
    ``prompt_tokens`` (by the endpoint's own tokenizer where it offers one: ``tokenizer``) and at most
    ``max_completion_tokens``; the price at list and batch rates (``llm.prices_per_mtok``), from the prompts
    alone (``*_usd_min``) to every reply at ``llm.max_tokens`` (``*_usd_max``); None without a price for the
    model."""

    model: str
    units: int
    answered: int
    calls: int
    prompt_tokens: int
    max_completion_tokens: int
    tokenizer: str
    list_usd_min: float | None
    list_usd_max: float | None
    batch_usd_min: float | None
    batch_usd_max: float | None
    input_rejects: int = 0  # records the run would refuse (an unreadable time, no text), none of them asked
    #: documents: per input file its path, format, pages, units, prompt_tokens and why it was refused
    files: list[dict[str, Any]] | None = None

    omit_none = ("files",)


#: a text's tokens by an endpoint's tokenizer (None: the endpoint has none)
Counter = Callable[[list[str]], Awaitable[list[int] | None]]


#: how many distinct texts one call of a tokenizer counts before the progress line moves on
COUNT_BLOCK = 256


async def _prompt_tokens(
    counter: Counter | None,
    requests: Sequence[ChatRequest],
    progress: Progress | None = None,
    each: list[int] | None = None,
) -> tuple[int, str]:
    """The prompt tokens of ``requests``: each message by the endpoint's tokenizer plus the template's tokens,
    or, where the endpoint has no tokenizer, a quarter of the characters (said so). A text that several
    prompts share (the system message, the worked example) is counted once; the count goes in blocks of
    :data:`COUNT_BLOCK` texts, each block said on ``progress``. ``each``, when given, receives every request's
    own count, in order."""
    texts = [m.content for r in requests for m in r.messages]
    template = sum(len(r.messages) * PER_MESSAGE_TOKENS + REPLY_TOKENS for r in requests)
    distinct = list(dict.fromkeys(texts))
    counted: dict[str, int] = {}
    for start in range(0, len(distinct), COUNT_BLOCK):
        block = distinct[start : start + COUNT_BLOCK]
        counts = await counter(block) if counter is not None else None
        if counts is None:  # no counter, or the endpoint has no tokenizer
            break
        counted.update(zip(block, counts, strict=True))
        if progress is not None and len(distinct) > COUNT_BLOCK:
            progress(f"counting prompt tokens: {min(start + COUNT_BLOCK, len(distinct)):,}/{len(distinct):,} texts")
    exact = bool(distinct) and len(counted) == len(distinct)

    def tokens(text: str) -> int:
        return counted[text] if exact else -(-len(text) // 4)

    if each is not None:
        each.extend(sum(tokens(m.content) for m in r.messages) + len(r.messages) * PER_MESSAGE_TOKENS + REPLY_TOKENS
                    for r in requests)  # fmt: skip
    if exact:
        return sum(tokens(t) for t in texts) + template, "the endpoint's tokenizer"
    return sum(tokens(t) for t in texts) + template, "characters / 4 (the endpoint has no tokenizer)"


async def _preview(
    units: Sequence[Unit],
    settings: Settings,
    answered: int,
    *,
    model: str,
    cached: Callable[[ChatRequest], bool],
    counter: Counter | None,
    progress: Progress | None = None,
    per_unit: dict[str, int] | None = None,
) -> ExtractEstimate:
    """The estimate of sending ``units`` to ``model``: those ``cached`` cost nothing, the others' prompts are
    counted by ``counter`` (each fresh unit's count into ``per_unit`` by its id, when given)."""
    llm = settings.llm
    requests = [unit_request(u, model, temperature=llm.temperature, max_tokens=llm.max_tokens) for u in units]
    fresh_units = [(u, r) for u, r in zip(units, requests, strict=True) if not cached(r)]
    fresh = [r for _, r in fresh_units]
    each: list[int] = []
    tokens, tokenizer = await _prompt_tokens(counter, fresh, progress, each)
    if per_unit is not None:
        per_unit.update((u.unit_id, n) for (u, _), n in zip(fresh_units, each, strict=True))
    most = len(fresh) * llm.max_tokens
    priced = model in llm.prices_per_mtok
    low = price(llm.prices_per_mtok, model, tokens, 0) if priced else None
    high = price(llm.prices_per_mtok, model, tokens, most) if priced else None
    return ExtractEstimate(
        model=model,
        units=len(units) + answered,
        answered=answered + len(requests) - len(fresh),
        calls=len(fresh),
        prompt_tokens=tokens,
        max_completion_tokens=most,
        tokenizer=tokenizer,
        list_usd_min=None if low is None else round(low, 6),
        list_usd_max=None if high is None else round(high, 6),
        batch_usd_min=None if low is None else round(low * BATCH_DISCOUNT, 6),
        batch_usd_max=None if high is None else round(high * BATCH_DISCOUNT, 6),
    )


def _batch_counter(settings: Settings, provider: str) -> Counter | None:
    """The tokenizer of a batch run's endpoint: the ``[llm]`` endpoint's for OpenAI's Batch API (where it
    offers one), none for Anthropic or an offline vLLM run."""
    if provider != "openai" or not settings.llm.base_url:
        return None
    return OpenAICompatibleClient(settings.llm, base_url=settings.llm.base_url).count_tokens


def _estimate_with(
    units: Sequence[Unit],
    settings: Settings,
    options: ExtractOptions,
    answered: int,
    progress: Progress | None,
    per_unit: dict[str, int] | None = None,
) -> ExtractEstimate:
    """The preview of ``units``, through the run's batch provider (its cache scope) or its LLM endpoint."""
    if options.batch is not None:
        with batch_session(settings, options.batch, progress=progress) as runner:
            counting = _batch_counter(settings, options.batch)
            preview = _preview(
                units, settings, answered, model=settings.llm.model, cached=runner.cached, counter=counting,
                progress=progress, per_unit=per_unit,
            )  # fmt: skip
            return run_with(runner, preview)
    with llm_session(settings, progress=progress) as client:
        preview = _preview(
            units, settings, answered, model=client.model, cached=client.cached, counter=client.count_tokens,
            progress=progress, per_unit=per_unit,
        )  # fmt: skip
        return run_with(client, preview)


def estimate_extraction(
    source: TextSource, settings: Settings, *, options: ExtractOptions | None = None, progress: Progress | None = None
) -> ExtractEstimate:
    """What ``extract`` would send for ``source``, before any LLM call: calls, prompt tokens and price.

    The configured endpoint is asked for token counts only (the local server is started for them).

    Raises:
        UsageError: bad dataset name, limit or concurrency.
        InputDataError: the dataset cannot be read.
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    options = options or ExtractOptions()
    check_dataset_name(source.dataset)
    at_least_one("--limit", source.limit)
    data = _read(source, settings)
    guide = _guide(settings, options, _embedder(settings, progress))
    units = _plan(data, settings, guide)
    _check_batch(options)
    stored = _earlier_run(options.update, source.dataset)[1] if options.update is not None else None
    model = settings.llm.model if options.batch is not None else session_model(settings)
    _keys, kept, ask = _left(units, model, settings, stored)
    refused = "files" if data.files is not None else "records"
    (progress or quiet)(f"planning {len(ask):,} prompts ({data.rejects.height:,} {refused} refused)")
    per_unit: dict[str, int] = {}
    estimate = _estimate_with(ask, settings, options, len(kept), progress, per_unit)
    files = _files_planned(data, units, per_unit) if data.files is not None else None
    return dataclasses.replace(estimate, input_rejects=data.rejects.height, files=files)


def _files_planned(data: DatasetRead, units: Sequence[Unit], per_unit: dict[str, int]) -> list[dict[str, Any]]:
    """Per input file of a documents run: its format, pages, units and the prompt tokens still to send (0 for
    units already answered), or why it was refused."""
    source = dict(zip(data.records["record_id"].to_list(), data.records["source"].to_list(), strict=True))
    tokens: dict[str, int] = {}
    for unit in units:
        name = source.get(unit.record_id)
        if name is not None:
            tokens[name] = tokens.get(name, 0) + per_unit.get(unit.unit_id, 0)
    assert data.files is not None
    return [f | {"prompt_tokens": tokens.get(f["path"], 0)} for f in data.files]


def _embedder(settings: Settings, progress: Progress | None) -> Embedder | None:
    """The name embedder of a run (mention resolution, linking, example choice), loaded on first use."""
    if not settings.extract.embeddings:
        return None
    return LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress or quiet)


def _plan(data: DatasetRead, settings: Settings, guide: Guide | None) -> list[Unit]:
    extract = settings.extract
    return plan_units(data.records, chunk_chars=extract.chunk_chars, relations=extract.relations, guide=guide)


def _guide(
    settings: Settings,
    options: ExtractOptions,
    embedder: Embedder | None,
    ontology: Ontology | None = None,
    examples: Path | None = None,
) -> Guide | None:
    """The guide of a run: ``options.ontology`` or ``extract.ontology`` read and checked (or an ``ontology``
    already read), with the worked examples of ``options.examples``. Without an ontology, the vocabulary's
    types type the entities when ``extract.structured`` (an open guide: relations stay free); None when not
    (untyped lines).

    Raises:
        OntologyError: the ontology cannot be read or is malformed (the message names the element).
        InputDataError: the examples cannot be read.
        UsageError: examples without an ontology.
    """
    path = options.ontology or settings.extract.ontology
    examples = examples or options.examples
    extract = settings.extract
    if ontology is None and path is None:
        if examples is not None:
            raise UsageError("--examples shows worked examples of an ontology's relations: give --ontology too.")
        if not extract.structured:
            return None
        vocabulary = vocabulary_ontology(default_vocabulary())
        types = {name: name for name in vocabulary.classes}
        return Guide(vocabulary, True, None, extract.conformance, types, {}, tuple(extract.relations or ()))
    ontology = ontology or read_ontology(Path(path))  # type: ignore[arg-type]
    types, declared = node_types(ontology, default_vocabulary())
    picker = example_picker(read_examples(examples), embedder) if examples is not None else None
    return Guide(ontology, extract.structured, picker, extract.conformance, types, declared)


def _left(
    units: Sequence[Unit], model: str, settings: Settings, stored: pl.DataFrame | None
) -> tuple[list[str], dict[int, Outcome], list[Unit]]:
    """Each unit's request key, the outcomes an update keeps (by unit index), and the units left to ask."""
    llm = settings.llm
    keys = [unit_request(u, model, temperature=llm.temperature, max_tokens=llm.max_tokens).key() for u in units]
    kept = stored_outcomes(stored, units, keys) if stored is not None else {}
    return keys, kept, [u for i, u in enumerate(units) if i not in kept]


def _check(source: TextSource, out: Path, settings: Settings, options: ExtractOptions) -> None:
    """Refuse a request that cannot run, before any work.

    Raises:
        UsageError: bad dataset name, limit, concurrency, budget or node type, or a link target that is ``out``.
    """
    check_dataset_name(source.dataset)
    at_least_one("--limit", source.limit)
    at_least_one("--concurrency", options.concurrency)
    if options.budget_usd is not None and options.budget_usd < 0:
        raise UsageError(f"--budget-usd must not be negative, got {options.budget_usd}.")
    if settings.extract.node_type not in default_vocabulary().names:
        raise UsageError(f"extract.node_type {settings.extract.node_type!r} is not a vocabulary type.")
    if options.link_to is not None and options.link_to.resolve() == out.resolve():
        raise UsageError(f"--link-to {options.link_to} is also the output; write the extraction to a new directory.")
    _check_batch(options)


def _read(source: TextSource, settings: Settings) -> DatasetRead:
    """The records of ``source`` (a document's chunks at most ``extract.chunk_chars`` long).

    Raises:
        InputDataError: the file cannot be read, or no record of it can.
    """
    data = read_dataset(
        source.path,
        source.fmt,
        limit=source.limit,
        text_field=source.text_field,
        id_field=source.id_field,
        time_field=source.time_field,
        max_chars=settings.extract.chunk_chars,
        max_bytes=int(settings.extract.max_document_mb * 2**20),
    )
    if data.accepted == 0:
        why = "; ".join(f"{r['record']}: {r['reason']}" for r in data.rejects.head(3).iter_rows(named=True))
        raise InputDataError(
            f"no record of {source.path} could be read in the {source.fmt} format ({why or 'the file is empty'})."
        )
    return data


@dataclass(frozen=True)
class _Replies:
    """The LLM phase of a run: every unit's outcome in unit order, their request keys, the units an update
    kept, the run's figures and the model that answered."""

    outcomes: list[Outcome]
    keys: list[str]
    kept: int
    stats: RunStats
    usage: UsageSummary
    model: str
    ray: dict[str, Any] | None = None


def _ask(
    units: Sequence[Unit],
    settings: Settings,
    options: ExtractOptions,
    stored: pl.DataFrame | None,
    run_id: str,
    progress: Progress | None,
    counter: Callable[[RunStats], None] | None,
) -> _Replies:
    """Put the units to the configured LLM, or through a provider's batch API (an update's unchanged units
    take their stored replies)."""
    if options.batch is not None:
        return _ask_batch(units, settings, options, stored, run_id, progress, counter)
    if options.engine == "ray":
        return _ask_ray(units, settings, options, stored, run_id, progress, counter)
    say = progress or quiet
    llm = settings.llm.model_copy(update={"concurrency": options.concurrency or settings.llm.concurrency})
    session_settings = settings.model_copy(update={"llm": llm})
    with llm_session(session_settings, run_id=run_id, progress=progress) as client:
        keys, kept, ask = _left(units, client.model, session_settings, stored)
        _priced_for_budget(options, client.model, llm.prices_per_mtok)
        if options.budget_usd is not None and client.model in llm.prices_per_mtok:
            previewing = _preview(
                ask, session_settings, len(kept), model=client.model, cached=client.cached, counter=client.count_tokens
            )
            preview = run_with(client, previewing)
            _within_budget(preview, options.budget_usd, "list_usd_min")
        say(f"extracting from {len(ask)} prompts with {client.model}" + (f" ({len(kept)} unchanged)" if kept else ""))
        asked, stats = run_with(
            client,
            run_units(
                ask,
                client,
                temperature=llm.temperature,
                max_tokens=llm.max_tokens,
                concurrency=llm.concurrency,
                budget_usd=options.budget_usd,
                prices=llm.prices_per_mtok,
                progress=counter,
            ),
        )
        usage = client.meter.summary()
        model = client.model
    return _Replies(_merged(kept, asked, len(units)), keys, len(kept), stats, usage, model)


def _ask_ray(
    units: Sequence[Unit],
    settings: Settings,
    options: ExtractOptions,
    stored: pl.DataFrame | None,
    run_id: str,
    progress: Progress | None,
    counter: Callable[[RunStats], None] | None,
) -> _Replies:
    """:func:`_ask` with the fresh prompts sent from the workers of a Ray cluster (``options.ray_address``,
    else ``ray.address``/``RAY_ADDRESS``, else a Ray instance started here): to the ``ray.endpoints`` (default:
    the ``[llm]`` endpoint, or the local server), ``--concurrency`` request workers each; the replies go into the
    same cache and ledger as a direct run's.

    Raises:
        ConfigError: Ray is not installed, or the cluster cannot be joined.
    """
    say = progress or quiet
    llm = settings.llm
    concurrency = options.concurrency or llm.concurrency
    with llm_session(settings, run_id=run_id, progress=progress) as client, RayCluster(
        settings.ray, address=options.ray_address
    ) as cluster:  # fmt: skip
        keys, kept, ask = _left(units, client.model, settings, stored)
        _priced_for_budget(options, client.model, llm.prices_per_mtok)
        if options.budget_usd is not None and client.model in llm.prices_per_mtok:
            previewing = _preview(
                ask, settings, len(kept), model=client.model, cached=client.cached, counter=client.count_tokens
            )
            _within_budget(run_with(client, previewing), options.budget_usd, "list_usd_max", "a Ray run")
        info = cluster.info
        assert info is not None and isinstance(client.inner, OpenAICompatibleClient)
        endpoints = _ray_endpoints(settings, client.inner)
        say(
            f"Ray cluster {info.address}: {info.nodes} nodes, {info.cpus:g} CPUs"
            + (f", dashboard {info.dashboard}" if info.dashboard else ", no dashboard (pip install 'ray[default]')")
        )
        say(
            f"extracting from {len(ask)} prompts with {client.model} on Ray ({len(endpoints)} endpoint"
            f"{'s' if len(endpoints) != 1 else ''}, {concurrency} request workers each)"
            + (f" ({len(kept)} unchanged)" if kept else "")
        )

        def dispatch(bodies: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
            return cluster.replies(
                bodies, endpoints, concurrency=concurrency, max_retries=llm.max_retries, backoff_s=llm.backoff_s,
                timeout_s=llm.timeout_s,
            )  # fmt: skip

        asked, stats, nodes = run_with(
            client,
            run_units_ray(
                ask, client, dispatch, temperature=llm.temperature, max_tokens=llm.max_tokens,
                concurrency=concurrency, progress=counter, why_missing=cluster.missing_reason,
            ),
        )  # fmt: skip
        usage = client.meter.summary()
        figures = {
            "address": info.address, "nodes": info.nodes, "cpus": info.cpus, "dashboard": info.dashboard,
            "endpoints": len(endpoints), "processor": settings.ray.processor,
            "units_on_workers": sum(nodes.values()), "nodes_used": len(nodes), "units_per_node": nodes,
        }  # fmt: skip
        return _Replies(_merged(kept, asked, len(units)), keys, len(kept), stats, usage, client.model, figures)


def _ray_endpoints(settings: Settings, client: OpenAICompatibleClient) -> list[Endpoint]:
    """The endpoints a Ray run's workers post to: ``ray.endpoints`` (each with its URL's basic auth, else the
    ``[llm]`` key), else the run's own endpoint (the configured one, or the local server)."""
    if not settings.ray.endpoints:
        return [Endpoint(client.chat_url, client.http_headers())]
    found = []
    for url in settings.ray.endpoints:
        own = OpenAICompatibleClient(settings.llm, base_url=url)
        found.append(Endpoint(own.chat_url, own.http_headers()))
    return found


def _merged(kept: dict[int, Outcome], asked: Sequence[Outcome], total: int) -> list[Outcome]:
    """Every unit's outcome in unit order: those an update kept, the others as asked."""
    answers = iter(asked)
    return [kept[i] if i in kept else next(answers) for i in range(total)]


def _priced_for_budget(options: ExtractOptions, model: str, prices: Mapping[str, Any]) -> None:
    """Refuse a budget for a model without a price: it could not be kept (every call would cost 0).

    Raises:
        UsageError: ``--budget-usd`` with a model ``llm.prices_per_mtok`` does not price.
    """
    if options.budget_usd is not None and model not in prices:
        raise UsageError(
            f"--budget-usd {options.budget_usd:g}: the model {model!r} has no price in llm.prices_per_mtok, so "
            "no call would count against the budget; give its price (USD per million prompt and completion "
            "tokens), or run without --budget-usd. Nothing was sent."
        )


def _within_budget(preview: ExtractEstimate, budget: float, bound: str, way: str = "a batch") -> None:
    """Refuse a run the preview puts over ``budget`` by its ``bound`` (``list_usd_min``: the prompts alone at
    list price; ``batch_usd_max`` or ``list_usd_max``: every reply at llm.max_tokens at the batch or list price,
    for ``way``, a run that cannot be stopped midway).

    Raises:
        UsageError: over budget.
    """
    cost = getattr(preview, bound)
    if cost is None or cost <= budget:
        return
    rate = "batch" if bound.startswith("batch") else "list"
    what = (
        f"at least USD {cost:.4f} for their {preview.prompt_tokens:,} prompt tokens alone ({preview.tokenizer})"
        if bound == "list_usd_min"
        else f"up to USD {cost:.4f} at the {rate} price with every reply at llm.max_tokens ({preview.tokenizer}); "
        f"{way} cannot be stopped midway, so its most is what counts"
    )
    raise UsageError(
        f"the {preview.calls} calls left would cost {what}, over --budget-usd {budget:g}; nothing was sent "
        "(extract --estimate shows the figures)."
    )


def _ask_batch(
    units: Sequence[Unit],
    settings: Settings,
    options: ExtractOptions,
    stored: pl.DataFrame | None,
    run_id: str,
    progress: Progress | None,
    counter: Callable[[RunStats], None] | None,
) -> _Replies:
    """:func:`_ask` through the provider batch API ``options.batch``.

    Raises:
        BatchPending: the batch is not finished and the run does not wait (or vLLM's command is still to run).
    """
    assert options.batch is not None
    say = progress or quiet
    llm = settings.llm
    keys, kept, ask = _left(units, llm.model, settings, stored)
    _priced_for_budget(options, llm.model, llm.prices_per_mtok)
    with batch_session(settings, options.batch, run_id=run_id, wait=options.wait, progress=progress) as runner:
        if options.budget_usd is not None and llm.model in llm.prices_per_mtok:
            counting = _batch_counter(settings, options.batch)
            previewing = _preview(ask, settings, len(kept), model=llm.model, cached=runner.cached, counter=counting)
            preview = run_with(runner, previewing)
            _within_budget(preview, options.budget_usd, "batch_usd_max")
        say(f"extracting from {len(ask)} prompts with {llm.model} through the {options.batch} batch API")
        asked, stats = run_with(
            runner,
            run_units_batched(
                ask,
                runner,
                model=llm.model,
                temperature=llm.temperature,
                max_tokens=llm.max_tokens,
                progress=counter,
            ),
        )
        usage = runner.meter.summary()
    return _Replies(_merged(kept, asked, len(units)), keys, len(kept), stats, usage, llm.model)


def _check_batch(options: ExtractOptions) -> None:
    """Refuse an unknown batch provider or engine, or options a batch or Ray run cannot honour.

    Raises:
        UsageError: an unknown provider or engine, --concurrency with --batch, --batch with --engine ray, or a
            Ray address for the local engine.
    """
    if options.engine not in ENGINES:
        raise UsageError(f"unknown --engine {options.engine!r}; choose one of {', '.join(ENGINES)}.")
    if options.ray_address is not None and options.engine != "ray":
        raise UsageError("--ray-address names the cluster of --engine ray: give --engine ray too.")
    if options.batch is None:
        return
    if options.engine == "ray":
        raise UsageError(
            "--batch sends the prompts through a provider's batch API and --engine ray from a Ray cluster's "
            "workers: choose one."
        )
    if options.batch not in PROVIDERS:
        raise UsageError(f"unknown --batch {options.batch!r}; choose one of {', '.join(PROVIDERS)}.")
    if options.concurrency is not None:
        raise UsageError("--concurrency does not apply to --batch: the provider runs the batch at its own pace.")


@writes_bundle("out")
def extract(
    source: TextSource,
    out: Path,
    settings: Settings,
    *,
    options: ExtractOptions | None = None,
    progress: Progress | None = None,
    counter: Callable[[RunStats], None] | None = None,
) -> Extraction:
    """Extract triples from the records of ``source`` with the configured LLM into a validated bundle at
    ``out``; ``counter`` hears the run's figures after each prompt.

    Replies are cached, so a run that was killed, failed in part or ran out of budget continues where it
    stopped when started again, and a repeated run makes no LLM call.

    ``options.identity_file``: a curator's must-links, cannot-links and aliases (the file `metakg resolve
    --identity` reads), applied to the mentions' nodes and their links (entries naming nothing of this run
    are left alone).

    With ``options.update`` (a bundle an earlier extraction wrote; ``out`` may be the same directory), the
    units whose request the earlier run answered take its stored replies, whatever the cache holds; only new
    and changed records go to the model, and the bundle is built from all replies as a fresh run would build
    it (see :mod:`metakg.extractors.update`). The result adds ``records_changes`` and ``edges_changes``, and
    the diff against the earlier bundle goes into the new manifest; ``options.history`` keeps the versions
    (default: when the earlier bundle keeps them).

    Raises:
        UsageError: bad dataset name, format, limit, concurrency or budget.
        InputDataError: the dataset cannot be read.
        BundleError: the link target cannot be read or ``out`` cannot be written.
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    say = progress or quiet
    options = options or ExtractOptions()
    _check(source, out, settings, options)
    link_to, identity_file = options.link_to, options.identity_file
    curation = read_curation(identity_file) if identity_file is not None else None
    started = time.perf_counter()
    run_id = uuid.uuid4().hex
    update = options.update
    previous, stored = _earlier_run(update, source.dataset) if update is not None else (None, None)
    say(f"reading {source.path}")
    data = _read(source, settings)
    embedder = _embedder(settings, say)
    guide = _guide(settings, options, embedder)
    units = _plan(data, settings, guide)
    target = link_target(link_to, settings, embedder, progress) if link_to is not None else None
    replies = _ask(units, settings, options, stored, run_id, progress, counter)
    result = build_bundle(
        replies.outcomes,
        source.dataset,
        run_id=run_id,
        node_type=settings.extract.node_type,
        confidence=settings.extract.confidence,
        embedder=embedder,
        threshold=settings.extract.group_threshold,
        link=LinkRule(settings.extract.link_threshold, settings.extract.link_margin),
        target=target,
        curation=curation,
        input_rejects=data.rejects,
        guide=guide,
        progress=progress,
    )
    figures: dict[str, Any] = {
        "records": data.accepted,
        "read": data.read,
        "input_rejects": data.rejects.height,
        **extraction_summary(replies.stats, result, replies.outcomes),
        "units": len(units),
        "reused_units": replies.kept,
        "retries": replies.usage.retries,
        **({"conformance_warnings": result.conformance_warnings} if guide is not None else {}),
        **({"files": data.read, "files_rejected": data.rejects.height} if data.files is not None else {}),
        **({"ray": replies.ray} if replies.ray is not None else {}),
    }
    if stored is not None:
        figures["records_changes"] = compare_records(stored, units, replies.keys).counts()
    result.bundle.manifest = {
        "sources": [
            source_entry(
                source.dataset,
                IMPORTER,
                run_id,
                dataset=source.dataset,
                input=str(source.path),
                format=source.fmt,
                model=replies.model,
                prompts=sorted({f"{u.prompt.version}:{u.prompt.template_hash}" for u in units}),
                link_to=str(link_to) if link_to is not None else None,
                identity_file=str(identity_file) if identity_file is not None else None,
                **_ontology_entry(guide),
                **{k: v for k, v in figures.items() if k != "errors"},
            )
        ],
        "extraction": {"units": len(units), "model": replies.model},
        **_declared_types(guide),
    }
    result.bundle.side[EXTRACTION_FILE] = units_table(replies.outcomes, replies.keys)
    report = write_validated(out, result.bundle, settings, previous=previous, history=options.history, progress=say)
    if previous is not None:
        recorded = recorded_diff(out)
        edges = recorded.edges if recorded is not None else {"added": 0, "removed": 0}
        figures["edges_changes"] = {
            "added": edges["added"],
            "retracted": edges["removed"],
            "kept": previous.bundle.edges.height - edges["removed"],
        }
    return Extraction(
        **figures,
        run_id=run_id,
        model=replies.model,
        bundle=out,
        validation_ok=report.ok,
        validation_rejected=report.rejected,
        wall_s=round(time.perf_counter() - started, 3),
    )


def _ontology_entry(guide: Guide | None) -> dict[str, Any]:
    """What the source entry records of the ontology that guided a run."""
    if guide is None:
        return {}
    if guide.open:  # typed by the vocabulary, relations free
        return {"typed_by": "vocabulary", "structured": True}
    o = guide.ontology
    ontology = {"id": o.id, "source": o.source, "fingerprint": o.fingerprint()}
    return {"ontology": ontology, "structured": guide.structured, "conformance": guide.conformance}


def _declared_types(guide: Guide | None) -> dict[str, Any]:
    """The manifest's ``types``: the node types the ontology's classes became that the vocabulary lacks."""
    if guide is None:
        return {}
    return {"types": guide.declared_types} if guide.declared_types else {}


def extracted_dataset(path: Path) -> str | None:
    """The dataset name of the extraction whose bundle is at ``path`` (None when it holds no extraction).

    Raises:
        BundleError: no bundle there.
    """
    names = [s.get("name") for s in read_manifest(path).get("sources", []) if s.get("importer") == IMPORTER]
    return str(names[0]) if len(names) == 1 else None


def _earlier_run(path: Path, dataset: str) -> tuple[Earlier, pl.DataFrame]:
    """The bundle an earlier extraction of ``dataset`` wrote at ``path`` and its stored units.

    Raises:
        UsageError: ``path`` is not an extraction of ``dataset`` with stored replies.
        BundleError: ``path`` cannot be read.
    """
    earlier = earlier_version(path)
    bundle = earlier.bundle
    names = sorted({(s.get("name"), s.get("importer")) for s in bundle.manifest.get("sources", [])}, key=str)
    if names != [(dataset, IMPORTER)]:
        held = ", ".join(f"{n} ({i})" for n, i in names) or "no source"
        raise UsageError(
            f"update {path}: the bundle holds {held}, not only an extraction of dataset {dataset!r}; give the "
            "bundle an earlier extraction of that dataset wrote, and the same dataset.",
            cli_fix=f"metakg extract FILE --dataset NAME --update {path} (the NAME its first extraction was given)",
        )
    stored = read_side_table(path, bundle, EXTRACTION_FILE)
    if stored is None:
        raise UsageError(
            f"--update {path}: the bundle keeps no replies (it was extracted by an older metakg). Run the "
            "extraction once without --update (cached replies cost nothing); later updates can start from it."
        )
    return earlier, stored


#: how ``eval-extraction`` asks: the ontology prompt held to its JSON schema, the ontology prompt answered in
#: lines, or the plain chunk prompt given the ontology's relation names only (metakg's prompt before ontologies)
PROMPT_MODES = ("json", "lines", "untyped")


def benchmark_responder(
    settings: Settings,
    *,
    mode: str = "json",
    examples: bool = True,
    options: ExtractOptions | None = None,
    progress: Progress | None = None,
) -> Callable[[BenchOntology, Sequence[Sentence]], Responses]:
    """What answers a benchmark ontology's sentences with metakg's own extraction (for
    :func:`metakg.api.evaluate_extraction`): one prompt per sentence through the configured LLM (the reply
    cache, the usage ledger, ``options.batch`` and ``options.concurrency`` as ``extract`` uses them), replies
    parsed and checked against the ontology as ``extract`` checks them; ``examples`` shows the most similar
    training sentence of the ontology (its ``train/`` file) in each prompt.

    Each answer is a sentence's triples with the relation as the ontology writes it; a sentence whose prompt
    failed has none (it counts 0). The figures: prompts, LLM calls, cache hits, tokens, triples, reply lines
    rejected as unparseable, triples rejected as outside the ontology, seconds.

    Raises:
        UsageError: an unknown ``mode``.
    """
    if mode not in PROMPT_MODES:
        raise UsageError(f"unknown prompt mode {mode!r}; choose one of {', '.join(PROMPT_MODES)}.")
    options = options or ExtractOptions()
    run_settings = settings.model_copy(
        update={"extract": settings.extract.model_copy(update={"structured": mode == "json"})}
    )
    embedder = _embedder(settings, progress)

    def respond(bench: BenchOntology, sentences: Sequence[Sentence]) -> Responses:
        started = time.perf_counter()
        rows = [dict.fromkeys(RECORD_SCHEMA) | {"record_id": s.id, "kind": "text", "text": s.text} for s in sentences]
        records = pl.DataFrame(rows, schema=RECORD_SCHEMA)
        ontology = bench.ontology
        train = bench.train if examples else None
        guide = None if mode == "untyped" else _guide(run_settings, options, embedder, ontology, train)
        relations = [r.label for r in ontology.relations] if mode == "untyped" else None
        chunk = max(settings.extract.chunk_chars, max((len(s.text) for s in sentences), default=0) + 1)
        units = plan_units(records, chunk_chars=chunk, relations=relations, guide=guide)
        replies = _ask(units, run_settings, options, None, uuid.uuid4().hex, progress, None)
        rejects: list[dict[str, str]] = []
        triples, _without, _repaired, _warnings = reply_triples(replies.outcomes, rejects, guide)
        answers: dict[str, list[list[str]]] = {
            o.unit.record_id: [] for o in replies.outcomes if o.status == "ok" and o.completion is not None
        }
        unit_record = {u.unit_id: u.record_id for u in units}
        for unit_id, subject, predicate, obj, *_rest in triples:
            relation = ontology.relation(predicate)
            written = relation.written if relation is not None else predicate.replace(" ", "_")
            answers[unit_record[unit_id]].append([subject, written, obj])
        stats = replies.stats
        figures: dict[str, int | float] = {
            "prompts": len(units),
            "llm_calls": stats.llm_calls,
            "cache_hits": stats.cache_hits,
            "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens,
            "triples": len(triples),
            "unparsed_lines": sum(r["check"] == "unparsed_line" for r in rejects),
            "outside_ontology": sum(r["check"].endswith(("_relation", "_violation", "_type")) for r in rejects),
            "failed": stats.failed,
            "seconds": round(time.perf_counter() - started, 3),
        }
        return Responses(answers, figures)

    return respond
