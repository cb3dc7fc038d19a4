"""The extraction pipeline: records -> prompts -> LLM replies -> triples -> resolved, provenanced bundle.

Stages, each a plain function:

1. :func:`plan_units`: one unit of work per QA item, one per sentence-bounded chunk of a text record.
2. :func:`run_units`: the units go to the LLM with bounded concurrency and an optional USD budget. Each unit
   ends in exactly one outcome: ``ok`` (a reply), ``failed`` (no reply after the client's retries; the
   reason is kept) or ``skipped`` (the budget was spent before it started). Replies are cached by the
   client, so a killed or failed run, run again, asks the model only what it never answered.
3. :func:`build_bundle`: every reply line becomes a triple or a reject with its reason; mentions are
   normalised and resolved (:mod:`metakg.extractors.resolution`); edges carry their provenance (the
   record and chunk ids that stated them, model, prompt hash, run id, time).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import polars as pl

from metakg.errors import BatchPending, LLMError
from metakg.extractors.conformance import Conformed, Mode, conform
from metakg.extractors.ontology import Ontology
from metakg.extractors.parsing import Triple, parse_reply
from metakg.extractors.prompts import (
    Example,
    Prompt,
    chunk_prompt,
    ontology_prompt,
    qa_item_prompt,
    typed_chunk_prompt,
    typed_qa_prompt,
)
from metakg.extractors.resolution import LinkTarget, Resolution, resolve_mentions
from metakg.identity.curation import Curation
from metakg.identity.names import DEFAULT_LINKS, GROUP_THRESHOLD, LinkRule
from metakg.llm.batch import BatchRunner
from metakg.llm.client import ChatRequest, Completion, LLMClient, request
from metakg.llm.embedder import Embedder
from metakg.llm.openai_client import OpenAICompatibleClient, completion_from_json
from metakg.llm.usage import MeteredClient, UsageMeter, UsageSummary, metered
from metakg.progress import Progress
from metakg.schemas.bundle import Bundle
from metakg.schemas.curie import slug_expr
from metakg.schemas.tables import (
    conform_edges,
    conform_nodes,
    conform_rejects,
    empty_edges,
    empty_nodes,
    match_key_expr,
    normalise_name_expr,
    normalise_relation_expr,
)
from metakg.text_processing import chunk_text

IMPORTER = "extract"
Status = Literal["ok", "failed", "skipped"]


@dataclass(frozen=True)
class Unit:
    """One LLM request: a QA item, or one chunk of a text record (``unit_id`` = ``<record>#<chunk>``)."""

    unit_id: str
    record_id: str
    prompt: Prompt
    chunk: int | None = None
    time: datetime | None = None  # the record's own time, when the dataset gives one
    provenance: str | None = None  # a document's chunk: how it is cited ("report.pdf p. 12, 3.2 Methods")


@dataclass(frozen=True)
class Outcome:
    """What became of one unit."""

    unit: Unit
    status: Status
    completion: Completion | None = None
    error: str | None = None


@dataclass
class RunStats:
    """Running totals of a run, passed to the progress callback after each unit.

    The LLM figures are a view of the usage meter: each unit's calls are recorded there once, then added
    here (cache hits count as calls and cost nothing; see :mod:`metakg.llm.usage`).
    """

    done: int = 0
    total: int = 0
    failed: int = 0
    skipped: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    saved_tokens: int = 0
    cost_usd: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    notes: list[str] = field(default_factory=list)  # what a batch's results held that no unit asked for

    @property
    def tokens(self) -> int:
        """Billed prompt plus completion tokens (cache hits cost nothing)."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def items_per_s(self) -> float:
        """Units finished per second so far."""
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def add(self, usage: UsageSummary) -> None:
        """Add one unit's metered usage."""
        self.llm_calls += usage.llm_calls
        self.cache_hits += usage.cache_hits
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.saved_tokens += usage.saved_tokens
        self.cost_usd += usage.cost_usd


#: receives the run's statistics after each unit
OnStats = Callable[[RunStats], None]


@dataclass(frozen=True)
class Guide:
    """What guides a typed extraction: the ontology, constrained JSON replies (``structured``) or lines, a
    worked example per text (``examples``: text -> the most similar training example, or None), how a triple
    that does not conform is treated (``conformance``), the node type of each class id, and the types the
    bundle must declare (:func:`~metakg.extractors.ontology.node_types`).

    An ontology with no relations (:func:`~metakg.extractors.ontology.vocabulary_ontology`: extraction without
    an ontology) is ``open``: relations are free (or one of ``relations``), only the entities are typed, and
    the prompts are the QA-item and chunk prompts asking for typed JSON."""

    ontology: Ontology
    structured: bool = True
    examples: Callable[[str], Example | None] | None = None
    conformance: Mode = "reject"
    node_types: dict[str, str] = field(default_factory=dict)
    declared_types: dict[str, dict[str, Any]] = field(default_factory=dict)  # the manifest's ``types``
    relations: tuple[str, ...] = ()  # an open guide's relations (none: any)

    @property
    def open(self) -> bool:
        """True when the relations are free: the ontology declares none."""
        return not self.ontology.relations

    def prompt(self, text: str) -> Prompt:
        """The prompt for one text."""
        if self.open:
            return typed_chunk_prompt(text, self.ontology, relations=self.relations)
        example = self.examples(text) if self.examples is not None else None
        return ontology_prompt(text, self.ontology, structured=self.structured, example=example)

    def qa_prompt(self, row: dict[str, Any]) -> Prompt:
        """The prompt for one QA item (a row of :data:`~metakg.ingest.datasets.RECORD_SCHEMA`): under an
        ontology, its question and answer as one text; open, the QA-item prompt with its options."""
        answer = row["answer_text"] or row["answer"] or ""
        if not self.open:
            return self.prompt(f"{row['question']}\nAnswer: {answer}")
        options = dict(zip(row["option_labels"] or [], row["option_texts"] or [], strict=True))
        return typed_qa_prompt(
            row["question"], options, answer, row["concept"], self.ontology, relations=self.relations
        )


def plan_units(
    records: pl.DataFrame,
    *,
    chunk_chars: int = 1500,
    relations: Sequence[str] | None = None,
    guide: Guide | None = None,
) -> list[Unit]:
    """The units of work of ``records`` (a frame in :data:`~metakg.ingest.datasets.RECORD_SCHEMA`); with
    ``guide``, each QA item and each chunk is asked for typed triples (:meth:`Guide.qa_prompt`,
    :meth:`Guide.prompt`); without, for ``subject\\predicate\\object`` lines."""
    units: list[Unit] = []
    for row in records.iter_rows(named=True):
        record_id = row["record_id"]
        if row["kind"] == "chunk":  # a document's chunk, cut along its structure: one prompt
            text = row["text"] or ""
            prompt = guide.prompt(text) if guide is not None else chunk_prompt(text, relations=relations)
            units.append(Unit(record_id, record_id, prompt, time=row.get("time"), provenance=row.get("provenance")))
        elif guide is not None and row["kind"] == "qa":
            units.append(Unit(record_id, record_id, guide.qa_prompt(row), time=row.get("time")))
        elif guide is not None:
            for chunk in chunk_text(row["text"] or "", max_chars=chunk_chars):
                prompt = guide.prompt(chunk.text)
                units.append(Unit(f"{record_id}#{chunk.index}", record_id, prompt, chunk.index, row.get("time")))
        elif row["kind"] == "qa":
            options = dict(zip(row["option_labels"] or [], row["option_texts"] or [], strict=True))
            prompt = qa_item_prompt(
                row["question"], options, row["answer_text"] or row["answer"] or "", row["concept"], relations=relations
            )
            units.append(Unit(record_id, record_id, prompt, time=row.get("time")))
        else:
            for chunk in chunk_text(row["text"] or "", max_chars=chunk_chars):
                prompt = chunk_prompt(chunk.text, relations=relations)
                units.append(Unit(f"{record_id}#{chunk.index}", record_id, prompt, chunk.index, row.get("time")))
    return units


def unit_request(unit: Unit, model: str, *, temperature: float = 0.0, max_tokens: int = 512) -> ChatRequest:
    """The request sent for ``unit``; its key identifies the reply (the cache key, and an update's match)."""
    schema = json.loads(unit.prompt.json_schema) if unit.prompt.json_schema is not None else None
    return request(
        unit.prompt.messages, model=model, temperature=temperature, max_tokens=max_tokens, json_schema=schema
    )


async def run_units(
    units: Sequence[Unit],
    client: LLMClient,
    *,
    temperature: float = 0.0,
    max_tokens: int = 512,
    concurrency: int = 4,
    budget_usd: float | None = None,
    prices: dict[str, tuple[float, float]] | None = None,
    progress: OnStats | None = None,
    stats: RunStats | None = None,
) -> tuple[list[Outcome], RunStats]:
    """Send every unit to ``client``; returns one outcome per unit, in unit order, and the totals (added to
    ``stats`` when given: a run whose units go several ways counts them all in one).

    At most ``concurrency`` requests are in flight. With ``budget_usd``, a unit that would start after the
    fresh calls' cost (``prices``, USD per million tokens) reached the budget is skipped; calls already in
    flight finish, so a run can overshoot by at most ``concurrency - 1`` calls. Every call is recorded in
    ``client``'s usage meter when it is a :class:`~metakg.llm.usage.MeteredClient` (else in a new one),
    under the scope ``extract:<unit id>``.
    """
    stats = stats if stats is not None else RunStats(total=len(units))
    semaphore = asyncio.Semaphore(concurrency)
    client = metered(client, prices)

    async def one(unit: Unit) -> Outcome:
        async with semaphore:
            if budget_usd is not None and stats.cost_usd >= budget_usd:
                outcome = Outcome(unit, "skipped", error=f"the budget of ${budget_usd:g} was spent")
            else:
                chat = unit_request(unit, client.model, temperature=temperature, max_tokens=max_tokens)
                with UsageMeter.scope(f"extract:{unit.unit_id}") as scope:
                    try:
                        outcome = Outcome(unit, "ok", await client.complete(chat, tag=f"extract:{unit.unit_id}"))
                    except LLMError as e:
                        outcome = Outcome(unit, "failed", error=str(e))
                stats.add(client.meter.summary(scope=scope))
        stats.done += 1
        stats.failed += outcome.status == "failed"
        stats.skipped += outcome.status == "skipped"
        if progress is not None:
            progress(stats)
        return outcome

    outcomes = await asyncio.gather(*(one(u) for u in units))
    return list(outcomes), stats


async def run_units_batched(
    units: Sequence[Unit],
    runner: BatchRunner,
    *,
    model: str,
    temperature: float = 0.0,
    max_tokens: int = 512,
    progress: OnStats | None = None,
) -> tuple[list[Outcome], RunStats]:
    """:func:`run_units` through a provider's batch API (:mod:`metakg.llm.batch`): the same requests, so the
    same cache keys and the same bundle; one outcome per unit, in unit order. A unit whose request no batch
    answered (after ``batch.retries`` new batches) is ``failed`` with the provider's reason.

    Raises:
        BatchPending: a batch is submitted but not finished, and the runner does not wait.
    """
    stats = RunStats(total=len(units))
    tagged = [
        (f"extract:{u.unit_id}", unit_request(u, model, temperature=temperature, max_tokens=max_tokens)) for u in units
    ]
    try:
        answers = await runner.run(tagged)
    except BatchPending as pending:  # the notes of what was collected before the new batch went out
        pending.notes = list(runner.notes)
        raise
    outcomes = [
        Outcome(unit, "ok", a.completion) if a.completion is not None else Outcome(unit, "failed", error=a.error)
        for unit, a in zip(units, answers, strict=True)
    ]
    stats.done = len(units)
    stats.failed = sum(o.status == "failed" for o in outcomes)
    stats.add(runner.meter.summary(stage="extract"))  # not the replies an older batch held for other runs
    stats.notes.extend(runner.notes)
    if progress is not None:
        progress(stats)
    return outcomes, stats


#: a Ray run's replies: request bodies (JSON text) in, ``(index, reply JSON)`` out as they arrive, a body whose
#: batch failed left out (:meth:`metakg.llm.ray_engine.RayCluster.replies`, bound to the run's endpoints)
Dispatch = Callable[[Sequence[str]], Iterator[tuple[int, dict[str, Any]]]]


def _reply_error(reply: dict[str, Any], status: int) -> str | None:
    """Why a reply the workers brought back is no answer (an error body, a status other than 200), or None."""
    error = reply.get("error")
    if error is None and status < 400:
        return None
    message = error.get("message") if isinstance(error, dict) else error
    return f"the endpoint answered HTTP {status}: {str(message or 'no message')[:300]}"


async def run_units_ray(
    units: Sequence[Unit],
    client: MeteredClient,
    dispatch: Dispatch,
    *,
    temperature: float = 0.0,
    max_tokens: int = 512,
    concurrency: int = 4,
    progress: OnStats | None = None,
    why_missing: Callable[[], str] | None = None,
) -> tuple[list[Outcome], RunStats, dict[str, int]]:
    """:func:`run_units` with the fresh prompts sent from the workers of a Ray cluster (``dispatch``); returns
    one outcome per unit in unit order, the totals, and how many replies each node's workers brought.

    The units the cache answers, and the first fresh one, go through ``client`` itself (an
    :class:`~metakg.llm.openai_client.OpenAICompatibleClient` under its meter): that first call learns which
    structured-output form the endpoint takes, and the workers send the others in that form, the same request
    body a direct run sends. Each reply is kept in ``client``'s cache and recorded in its meter as it arrives,
    as a direct call is; a reply that is an error, or a unit whose batch failed on the cluster, is ``failed``
    with the reason (``why_missing`` says it for a unit that never came back).
    """
    endpoint = client.inner
    if not isinstance(endpoint, OpenAICompatibleClient):
        raise TypeError("a Ray run sends what an OpenAI-compatible client would: give one")
    stats = RunStats(total=len(units))
    requests = [unit_request(u, client.model, temperature=temperature, max_tokens=max_tokens) for u in units]
    fresh = [i for i, r in enumerate(requests) if not client.cached(r)]
    asked = set(fresh[1:])  # the rest go to the workers; the cached ones and the first fresh one stay here
    here = [i for i in range(len(units)) if i not in asked]
    outcomes: dict[int, Outcome] = {}
    answered, _ = await run_units(
        [units[i] for i in here], client, temperature=temperature, max_tokens=max_tokens, concurrency=concurrency,
        progress=progress, stats=stats,
    )  # fmt: skip
    outcomes.update(zip(here, answered, strict=True))
    rest = fresh[1:]
    nodes: dict[str, int] = {}

    def settle(i: int, outcome: Outcome, usage: UsageSummary | None = None) -> None:
        outcomes[i] = outcome
        if usage is not None:
            stats.add(usage)
        stats.done += 1
        stats.failed += outcome.status == "failed"
        if progress is not None:
            progress(stats)

    def fail(i: int, reason: str) -> None:
        tag = f"extract:{units[i].unit_id}"
        with UsageMeter.scope(tag) as scope:
            client.meter.record(None, tag=tag, model=requests[i].model, error=reason[:300])
        settle(i, Outcome(units[i], "failed", error=reason), client.meter.summary(scope=scope))

    probe = outcomes.get(fresh[0]) if fresh else None
    stopped: str | None = None
    if probe is not None and probe.status == "failed":
        stopped = f"not sent to the Ray cluster: the endpoint failed the first prompt ({probe.error})"
    elif rest:
        bodies = [json.dumps(endpoint.chat_body(requests[i]), ensure_ascii=False) for i in rest]
        try:
            for k, reply in dispatch(bodies):
                i = rest[k]
                if i in outcomes:
                    continue  # a reply Ray brought twice (a batch redone after a node died)
                note = reply.pop("metakg", None) or {}
                node = str(note.get("node") or "unknown")
                nodes[node] = nodes.get(node, 0) + 1
                why = _reply_error(reply, int(note.get("status") or 200))
                try:
                    completion = completion_from_json(reply, requests[i], float(note.get("seconds") or 0.0))
                except ValueError as e:
                    why = why or str(e)
                if why is not None:
                    fail(i, why)
                    continue
                endpoint.remember(requests[i], completion)
                tag = f"extract:{units[i].unit_id}"
                with UsageMeter.scope(tag) as scope:
                    client.meter.record(completion, tag=tag, model=requests[i].model, latency_s=completion.latency_s)
                settle(i, Outcome(units[i], "ok", completion), client.meter.summary(scope=scope))
        except LLMError as e:
            stopped = str(e)
    missing = [i for i in rest if i not in outcomes]
    if missing:
        reason = stopped or (why_missing() if why_missing is not None else "no reply came back from the Ray cluster")
        for i in missing:
            fail(i, reason)
    return [outcomes[i] for i in range(len(units))], stats, nodes


@dataclass
class ExtractionResult:
    """The bundle of a run (not yet validated) and its counts."""

    bundle: Bundle
    triples: int
    rejected_lines: int
    repaired_lines: int
    records_without_triples: int
    resolution: Resolution | None
    conformance_warnings: int = 0
    types: dict[str, dict[str, Any]] = field(default_factory=dict)  # the node types the ontology's classes became


def _reject(record: str, check: str, reason: str, payload: str, table: str = "reply") -> dict[str, str]:
    return {"stage": "extract", "table": table, "record": record, "check": check, "reason": reason, "payload": payload}


def _name_expr(column: str) -> pl.Expr:
    """Mentions as stored: NFC, whitespace collapsed, a leading article dropped (case is kept)."""
    return normalise_name_expr(pl.col(column)).str.replace(r"(?i)^(the|a|an)\s+", "").alias(column)


def build_bundle(
    outcomes: Sequence[Outcome],
    dataset: str,
    *,
    run_id: str,
    node_type: str = "concept",
    confidence: float = 0.8,
    embedder: Embedder | None = None,
    threshold: float = GROUP_THRESHOLD,
    link: LinkRule = DEFAULT_LINKS["cascade"],
    target: LinkTarget | None = None,
    curation: Curation | None = None,
    input_rejects: pl.DataFrame | None = None,
    guide: Guide | None = None,
    progress: Progress | None = None,
) -> ExtractionResult:
    """Parse the replies of ``outcomes`` into a bundle; every reply line and every unit is accounted for.

    Units that failed or were skipped, reply lines that are not triples, triples whose subject or object
    has no letters or digits, and triples whose subject and object resolve to the same entity go to the
    rejects, each with its reason.

    With ``guide``, each triple is checked against the ontology (:mod:`metakg.extractors.conformance`): one
    that does not conform is a reject (or, under ``warn``, kept and counted); a conforming triple's relation
    is the ontology's, its subject and object nodes take the node types of their classes, and an object that
    is a value (a date, a number, a string) becomes a ``value`` node of its own, never merged with entities.
    """
    say = progress or (lambda _s: None)
    rejects: list[dict[str, str]] = []
    say("parsing replies")
    rows, without, repaired, warnings = reply_triples(outcomes, rejects, guide)
    frame = _checked_triples(rows, rejects)

    resolution: Resolution | None = None
    nodes = empty_nodes()
    if frame.height:
        is_value = pl.col("value_kind").is_not_null()
        entity_objects = frame.filter(~is_value)["object"]
        mentions = pl.concat([frame["subject"], entity_objects]).unique(maintain_order=True).to_list()
        say(f"resolving {len(mentions)} mentions")
        resolution = resolve_mentions(
            mentions,
            dataset,
            node_type=node_type,
            embedder=embedder,
            threshold=threshold,
            link=link,
            target=target,
            curation=curation,
            progress=say,
        )
        ids = pl.DataFrame({"mention": list(resolution.ids), "id": list(resolution.ids.values())})
        frame = frame.join(ids.rename({"mention": "subject", "id": "src"}), on="subject", how="left").join(
            ids.rename({"mention": "object", "id": "_entity"}), on="object", how="left"
        )
        value_id = pl.lit(f"kg:{dataset}/value/") + slug_expr(pl.col("object"))
        frame = frame.with_columns(pl.when(is_value).then(value_id).otherwise(pl.col("_entity")).alias("dst"))
        frame = _refused(frame, pl.col("src") == pl.col("dst"), rejects, "self_loop",
                         "the subject and the object resolve to the same entity")  # fmt: skip
        nodes = resolution.nodes
        if guide is not None:
            nodes = _typed_nodes(nodes, frame, dataset, guide)
    accepted = frame.height
    edges = _edges(frame, dataset, confidence, run_id) if frame.height else empty_edges()
    edges = conform_edges(edges)  # computes the edge ids
    used = pl.concat([edges["src"], edges["dst"]]).unique()
    nodes = nodes.filter(pl.col("id").is_in(used.implode())).unique("id", keep="first", maintain_order=True)
    reject_frame = conform_rejects(pl.DataFrame(rejects, schema=dict.fromkeys(_REJECT_COLUMNS, pl.String)))
    if input_rejects is not None and input_rejects.height:
        reject_frame = pl.concat([conform_rejects(input_rejects), reject_frame], how="vertical")
    bundle = Bundle(nodes=nodes, edges=edges, rejects=reject_frame, manifest={})
    return ExtractionResult(
        bundle=bundle,
        triples=accepted,
        rejected_lines=sum(1 for r in rejects if r["table"] == "reply"),
        repaired_lines=repaired,
        records_without_triples=without,
        resolution=resolution,
        conformance_warnings=warnings,
    )


def _typed_nodes(nodes: pl.DataFrame, frame: pl.DataFrame, dataset: str, guide: Guide) -> pl.DataFrame:
    """The run's new nodes typed by their classes (the class a node's mentions were given most often, the
    most specific of those as often), and a ``value`` node per value object; nodes a link target gave keep
    their own type."""
    depth = {c: len(guide.ontology.ancestors(c)) for c in guide.ontology.classes}
    classes = (
        pl.concat(
            [
                frame.select(pl.col("src").alias("id"), pl.col("s_class").alias("class")),
                frame.filter(pl.col("value_kind").is_null()).select(
                    pl.col("dst").alias("id"), pl.col("o_class").alias("class")
                ),
            ]
        )
        .drop_nulls()
        .group_by("id", "class")
        .agg(pl.len().alias("n"))
        .with_columns(pl.col("class").replace_strict(depth, default=0, return_dtype=pl.Int64).alias("depth"))
        .sort(["id", "n", "depth", "class"], descending=[False, True, True, False])
        .unique("id", keep="first")
        .with_columns(pl.col("class").replace_strict(guide.node_types, default=None).alias("_type"))
        .select("id", "_type")
    )
    typed = (
        nodes.join(classes, on="id", how="left")
        .with_columns(
            pl.when((pl.col("source") == dataset) & pl.col("_type").is_not_null())
            .then(pl.col("_type"))
            .otherwise(pl.col("type"))
            .alias("type")
        )
        .drop("_type")
    )
    values = (
        frame.filter(pl.col("value_kind").is_not_null())
        .group_by("dst", maintain_order=True)
        .agg(pl.col("object").first().alias("name"))
        .select(pl.col("dst").alias("id"), "name", pl.lit(VALUE_TYPE).alias("type"), pl.lit(dataset).alias("source"))
    )
    return pl.concat([typed, conform_nodes(values)], how="vertical") if values.height else typed


#: Row = unit, subject, predicate, object, model, prompt hash, the record's time, then (with an ontology) the
#: subject's class, the object's class and the object's value kind (None for an entity object)
Row = tuple[str, str, str, str, str, str, datetime | None, str | None, str | None, str | None]

#: the node type of an extracted value (a date, a number, a string) a relation states
VALUE_TYPE = "value"


def reply_triples(
    outcomes: Sequence[Outcome], rejects: list[dict[str, str]], guide: Guide | None = None
) -> tuple[list[Row], int, int, int]:
    """The triples of every answered unit's reply; a unit that failed or was skipped, a line that is not a
    triple, a reply cut at max_tokens (its last triple), a reply holding no triple and (with ``guide``) a
    triple that does not conform to the ontology go to ``rejects``. Returns the rows, the units without a
    triple, the lines repaired and the conformance warnings kept."""
    rows: list[Row] = []
    without = repaired = warnings = 0
    for outcome in outcomes:
        unit = outcome.unit
        if outcome.status != "ok" or outcome.completion is None:
            check = "llm_failed" if outcome.status == "failed" else "budget_exhausted"
            reason = (outcome.error or outcome.status) + (
                "; run again to retry it (answered units come from the cache)"
                if outcome.status == "failed"
                else "; run again with a larger --budget-usd to continue (answered units come from the cache)"
            )
            rejects.append(_reject(unit.unit_id, check, reason, unit.prompt.messages[-1].content, table="input"))
            continue
        completion = outcome.completion
        parsed = parse_reply(completion.text)
        repaired += parsed.repaired
        triples = parsed.triples
        if parsed.cut is not None:  # a JSON reply cut short: its complete triples are kept, the rest said
            cut = completion.finish_reason == "length"
            rejects.append(
                _reject(
                    unit.unit_id,
                    "reply_truncated" if cut else "unparsed_line",
                    "the reply was cut at llm.max_tokens after its last complete triple"
                    if cut
                    else "the JSON reply ends here, incomplete",
                    parsed.cut,
                )
            )
        elif completion.finish_reason == "length" and triples:
            last = triples.pop()  # the reply was cut at max_tokens: its last triple may be cut too
            rejects.append(
                _reject(
                    unit.unit_id,
                    "reply_truncated",
                    "the reply was cut at llm.max_tokens; its last line may be incomplete",
                    _payload(last),
                )
            )
        for line, reason in parsed.rejects:
            rejects.append(_reject(unit.unit_id, "unparsed_line", reason, line))
        if not triples:
            without += 1
            if not parsed.rejects:
                rejects.append(
                    _reject(unit.unit_id, "no_triples", "the reply held no triple", completion.text, table="input")
                )
        for t in triples:
            typed: tuple[str | None, str | None, str | None] = (None, None, None)
            predicate = t.predicate
            if guide is not None and guide.open:  # free relations: only the types are read
                typed = (_open_class(guide.ontology, t.subject_type), _open_class(guide.ontology, t.object_type), None)
            elif guide is not None:
                checked = conform(t, guide.ontology, guide.conformance)
                if not isinstance(checked, Conformed):
                    rejects.append(_reject(unit.unit_id, checked.check, checked.reason, _payload(t)))
                    continue
                warnings += checked.warning is not None
                predicate = checked.relation.label if checked.relation is not None else t.predicate
                typed = (checked.subject_class, checked.object_class, checked.value_kind)
            origin = (unit.unit_id, completion.model, unit.prompt.template_hash, unit.time)
            rows.append((origin[0], t.subject, predicate, t.object, *origin[1:], *typed))
    return rows, without, repaired, warnings


def _open_class(ontology: Ontology, name: str) -> str | None:
    """The vocabulary type a reply names, None for none, one unknown or the catch-all ``concept``: the node
    then keeps the run's node type (``extract.node_type``)."""
    found = ontology.class_named(name) if name.strip() else None
    return found.id if found is not None and found.id != "concept" else None


def _payload(t: Triple) -> str:
    return f"{t.subject}\\{t.predicate}\\{t.object}"


_PAYLOAD = pl.col("subject") + pl.lit("\\") + pl.col("predicate") + pl.lit("\\") + pl.col("object")


def _refused(
    frame: pl.DataFrame, failing: pl.Expr, rejects: list[dict[str, str]], check: str, reason: str
) -> pl.DataFrame:
    """``frame`` without the rows ``failing`` marks, which go to ``rejects`` with ``check`` and ``reason``."""
    bad = frame.filter(failing).select("unit", _PAYLOAD.alias("payload"))
    rejects.extend(_reject(u, check, reason, p) for u, p in bad.iter_rows())
    return frame.filter(~failing)


def _checked_triples(rows: list[Row], rejects: list[dict[str, str]]) -> pl.DataFrame:
    """The rows as a frame with their names, relation and match keys; a triple whose subject, object or
    predicate has no letters or digits goes to ``rejects``."""
    columns = ("unit", "subject", "predicate", "object", "model", "prompt_hash")
    schema: dict[str, pl.DataType] = {
        **dict.fromkeys(columns, pl.String()),
        "time": pl.Datetime("us", "UTC"),
        **dict.fromkeys(("s_class", "o_class", "value_kind"), pl.String()),
    }
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    frame = frame.with_columns(  # one context: the keys are taken from the mentions as the model wrote them
        _name_expr("subject"),
        _name_expr("object"),
        normalise_relation_expr(pl.col("predicate")).alias("rel"),
        match_key_expr(pl.col("subject")).alias("s_key"),
        match_key_expr(pl.col("object")).alias("o_key"),
    )
    checks = [
        ("empty_subject", "the subject has no letters or digits", pl.col("s_key") == ""),
        ("empty_object", "the object has no letters or digits", pl.col("o_key") == ""),
        ("bad_relation", "the predicate has no letters or digits", pl.col("rel") == ""),
    ]
    for check, reason, failing in checks:
        frame = _refused(frame, failing, rejects, check, reason)
    return frame


def _edges(frame: pl.DataFrame, dataset: str, confidence: float, run_id: str) -> pl.DataFrame:
    """One edge per distinct (src, relation, dst), with the units stating it and the earliest record time."""
    return (
        frame.group_by(["src", "rel", "dst"], maintain_order=True)
        .agg(
            pl.col("predicate").first().alias("display"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("unit").unique(maintain_order=True).alias("record_ids"),
            pl.col("model").first(),
            pl.col("prompt_hash").first(),
            pl.col("time").min().alias("valid_from"),  # the earliest record stating it
        )
        .with_columns(
            pl.lit(dataset).alias("source"),
            pl.lit(confidence, dtype=pl.Float64).alias("confidence"),
            pl.lit(IMPORTER).alias("importer"),
            pl.lit(run_id).alias("run_id"),
            pl.lit(datetime.now(UTC), dtype=pl.Datetime("us", "UTC")).alias("created_at"),
        )
    )


_REJECT_COLUMNS = ("stage", "table", "record", "check", "reason", "payload")


def summary(stats: RunStats, result: ExtractionResult, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The figures of a run (the ``--json`` summary of ``metakg extract``)."""
    errors = sorted({o.error for o in outcomes if o.status == "failed" and o.error})
    return {
        "units": stats.total,
        "llm_calls": stats.llm_calls,
        "cache_hits": stats.cache_hits,
        "failed": stats.failed,
        "skipped_budget": stats.skipped,
        "triples": result.triples,
        "rejected_lines": result.rejected_lines,
        "repaired_lines": result.repaired_lines,
        "units_without_triples": result.records_without_triples,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "tokens": stats.tokens,
        "saved_tokens": stats.saved_tokens,
        "cost_usd": round(stats.cost_usd, 6),
        "nodes": result.bundle.nodes.height,
        "edges": result.bundle.edges.height,
        "resolution": result.resolution.as_dict() if result.resolution else None,
        "errors": errors,
        # what a batch's results held that no request asked for (a doubled or unknown custom_id, a line that
        # is no result): said, never counted as a failure
        **({"notes": list(stats.notes)} if stats.notes else {}),
    }
