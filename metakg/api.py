"""Composition root: turns settings into objects, wires the stages, returns values.

The CLI calls only this module. Every function returns plain results (reports, dicts, stores) and
reports progress through an optional callback; none prints or exits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from metakg.config import Settings
from metakg.errors import ConfigError, InputDataError, NodeNotFound, UsageError
from metakg.extractors.pipeline import RunStats, build_bundle, plan_units, run_units
from metakg.extractors.pipeline import summary as extraction_summary
from metakg.extractors.resolution import LinkTarget
from metakg.fetch import download
from metakg.ingest import wikidata
from metakg.ingest.datasets import DatasetFormat, DatasetRead, read_dataset
from metakg.ingest.primekg import DATAVERSE_KG_URL, KG_MD5, PrimeKGReport, md5_of, read_primekg
from metakg.ingest.primekg_synthetic import SyntheticPrimeKG, generate
from metakg.ingest.triples import TripleIngestReport, read_triples
from metakg.llm import local_server
from metakg.llm.cache import ResponseCache
from metakg.llm.client import Completion, LLMClient, Message, request
from metakg.llm.embedder import Embedder, OnnxEmbedder, Vectors, resolve_model_dir
from metakg.llm.ledger import UsageLedger
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.loaders.neo4j_admin import write_admin_import
from metakg.loaders.neo4j_loader import load_bundle
from metakg.loaders.neo4j_store import Neo4jStore, connect
from metakg.loaders.rdf_export import RdfFormat, write_rdf
from metakg.qa_engine.core import Ablation, Answer, QAContext, Question, QuestionError
from metakg.qa_engine.evaluate import evaluate, run_specs
from metakg.qa_engine.strategies import answer_question, make_strategy
from metakg.schemas.bundle import (
    EMBEDDINGS_FILE,
    Bundle,
    merge_bundles,
    read_bundle,
    read_manifest,
    write_bundle,
)
from metakg.schemas.curie import check_dataset_name
from metakg.schemas.graph_store import GraphPath, GraphStore, Neighbour, NodeRecord
from metakg.schemas.rdf_mapping import bundle_quads, expected_triple_count
from metakg.schemas.validation import ValidationReport, validate, write_reports
from metakg.schemas.vocabulary import default_vocabulary

T = TypeVar("T")
Progress = Callable[[str], None]
Counter = Callable[[int, int], None]  # (done, total)
EMBED_BLOCK = 2048

DEMO_KG = "metakgrag_pilot/commonsenseqa__knowledge_graph.txt"
DEMO_QUESTIONS = "metakgrag_pilot/commonsenseqa__commonsenseqa.json"
_PILOT_URL = (
    "https://raw.githubusercontent.com/XujieYuan/Understanding-KG-RAG/6da0f52f8221b237722a49912b53f3683a190cce/data/"
)
DEMO_KG_URL = _PILOT_URL + "commonsenseqa/knowledge_graph.txt"
DEMO_QUESTIONS_URL = _PILOT_URL + "commonsenseqa/commonsenseqa.json"


def _quiet(_message: str) -> None:
    return None


# ---------------------------------------------------------------------------- ingest and validate
def ingest_triples(
    path: Path,
    dataset: str,
    out: Path,
    settings: Settings,
    *,
    source: str | None = None,
    node_type: str = "concept",
    confidence: float = 1.0,
    progress: Progress | None = None,
) -> TripleIngestReport:
    """Read a tab-separated triple file and write it as a bundle at ``out``.

    Raises:
        InputDataError: the file cannot be read.
        UsageError: bad dataset name, unknown node type, or confidence outside [0, 1].
        BundleError: ``out`` cannot be written.
    """
    if node_type not in default_vocabulary().names:
        raise UsageError(f"unknown node type {node_type!r}; choose one of {sorted(default_vocabulary().names)}.")
    if not 0.0 <= confidence <= 1.0:
        raise UsageError(f"confidence must be in [0, 1], got {confidence}.")
    if not path.is_file():
        raise InputDataError(f"triple file {path} does not exist or is not a file.")
    bundle, report = read_triples(
        path,
        dataset,
        source=source,
        node_type=node_type,
        confidence=confidence,
        max_field_chars=settings.ingest.max_field_chars,
        progress=progress,
    )
    (progress or _quiet)("writing bundle")
    write_bundle(out, bundle)
    return report


def primekg_download(settings: Settings, progress: Progress | None = None) -> Path:
    """PrimeKG's kg.csv from Harvard Dataverse, fetched once into the cache and checked against its MD5.

    Raises:
        InputDataError: the download fails (offline) or the file's MD5 is not the published one.
    """
    target = settings.paths.cache_dir / "primekg" / "kg.csv"
    if not target.is_file():
        (progress or _quiet)(f"downloading {DATAVERSE_KG_URL} (about 1 GB)")
        download(
            DATAVERSE_KG_URL,
            target,
            error=InputDataError,
            hint=f"Offline: download kg.csv from Harvard Dataverse (doi:10.7910/DVN/IXA7BM) and put it at {target}, "
            "or pass its path.",
            timeout=600,
        )
    (progress or _quiet)("checking the MD5 of kg.csv")
    digest = md5_of(target)
    if digest != KG_MD5:
        raise InputDataError(f"{target} has MD5 {digest}, not PrimeKG's {KG_MD5}: delete it and download it again.")
    return target


def ingest_primekg(
    path: Path | None,
    out: Path,
    settings: Settings,
    *,
    download_missing: bool = False,
    progress: Progress | None = None,
) -> PrimeKGReport:
    """Read PrimeKG (``kg.csv`` or ``nodes.csv`` + ``edges.csv``) and write it as a bundle at ``out``.

    Raises:
        UsageError: neither a path nor ``download_missing``.
        InputDataError: the file is missing, malformed as a whole, or the download fails.
    """
    if path is None:
        if not download_missing:
            raise UsageError("give the path of kg.csv (or its folder), or --download to fetch it.")
        path = primekg_download(settings, progress)
    bundle, report = read_primekg(path, progress=progress)
    (progress or _quiet)("writing bundle")
    write_bundle(out, bundle)
    return report


def synthetic_primekg(out_dir: Path, settings: Settings, *, scale: float, seed: int = 0) -> SyntheticPrimeKG:
    """Write a SYNTHETIC PrimeKG-shaped kg.csv following the published per-type and per-relation counts.

    Raises:
        ConfigError: the count tables are not under the data directory.
        UsageError: scale not in (0, 2].
    """
    if not 0 < scale <= 2:
        raise UsageError(f"scale must be in (0, 2], got {scale}.")
    data_dir = settings.resolved_data_dir()
    if data_dir is None or not (data_dir / "primekg").is_dir():
        raise ConfigError("the synthetic generator needs primekg/primekg_plus_Table*.csv: set METAKG_PATHS__DATA_DIR.")
    return generate(out_dir, data_dir / "primekg", scale=scale, seed=seed)


def validate_bundle(path: Path, settings: Settings, *, progress: Progress | None = None) -> ValidationReport:
    """Validate the bundle at ``path`` in place: rejected rows move to its rejects, reports are written.

    Raises:
        BundleError: the bundle cannot be read or written.
    """
    say = progress or _quiet
    say("reading bundle")
    return write_validated(path, read_bundle(path), settings, progress=say)


def write_validated(
    out: Path, bundle: Bundle, settings: Settings, *, progress: Progress | None = None
) -> ValidationReport:
    """Validate ``bundle`` in memory, then write it (rejected rows moved to its rejects) and its reports.

    Raises:
        BundleError: ``out`` cannot be written.
    """
    say = progress or _quiet
    say("running checks")
    checked, report = validate(bundle, default_vocabulary().names)
    say("writing bundle")
    write_bundle(out, checked)
    write_reports(report, checked.rejects, out, html_report=settings.validation.html_report)
    return report


def bundle_info(path: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``path`` (counts, sources, hashes, validation summary)."""
    return read_manifest(path)


def merge(paths: Sequence[Path], out: Path) -> dict[str, Any]:
    """Merge bundles into a new bundle at ``out``; returns its manifest.

    Raises:
        UsageError: ``out`` is one of the inputs.
        BundleError: an input cannot be read or ``out`` cannot be written.
    """
    if any(p.resolve() == out.resolve() for p in paths):
        raise UsageError(f"the output {out} is also an input; merge into a new directory.")
    merged = merge_bundles([read_bundle(p) for p in paths])
    return write_bundle(out, merged)


def export_rdf(
    path: Path, out: Path, fmt: RdfFormat, *, provenance: bool = True, progress: Counter | None = None
) -> dict[str, Any]:
    """Export a bundle as RDF; returns the statement counts written and promised by the mapping.

    Raises:
        BundleError: the bundle cannot be read.
        ExportError: the output cannot be written.
    """
    bundle = read_bundle(path)
    vocabulary = default_vocabulary()
    expected = expected_triple_count(
        bundle.nodes, bundle.edges, vocabulary, provenance=provenance, named_graphs=(fmt == "nq")
    )

    def report(done: int) -> None:
        if progress is not None:
            progress(done, expected)

    written = write_rdf(
        bundle_quads(bundle.nodes, bundle.edges, vocabulary, provenance=provenance), out, fmt, progress=report
    )
    return {
        "output": str(out),
        "format": fmt,
        "statements_written": written,
        "statements_expected": expected,
        "nodes": bundle.nodes.height,
        "edges": bundle.edges.height,
    }


# ---------------------------------------------------------------------------- embeddings and stores
class DeferredEmbedder:
    """An Embedder that finds (and, if need be, downloads) its model on first use, not when built."""

    def __init__(self, settings: Settings, progress: Progress | None = None) -> None:
        """Keep the settings; no I/O here."""
        self._settings = settings
        self._progress = progress
        self._inner: OnnxEmbedder | None = None

    def _get(self) -> OnnxEmbedder:
        if self._inner is None:
            folder = resolve_model_dir(self._settings.embedder, self._settings.paths.cache_dir, say=self._progress)
            self._inner = OnnxEmbedder(
                folder, batch_size=self._settings.embedder.batch_size, max_length=self._settings.embedder.max_length
            )
        return self._inner

    @property
    def name(self) -> str:
        """The model folder's name."""
        return self._get().name

    @property
    def dim(self) -> int:
        """The vector size."""
        return self._get().dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts with the resolved model."""
        return self._get().embed(texts)


def make_embedder(settings: Settings, progress: Progress | None = None) -> Embedder:
    """The configured embedder (the model is located on first use)."""
    return DeferredEmbedder(settings, progress)


def embed_in_blocks(embedder: Embedder, texts: Sequence[str], counter: Counter | None = None) -> Vectors:
    """Embed ``texts`` in blocks of EMBED_BLOCK, calling ``counter(done, total)`` after each block."""
    blocks = []
    for start in range(0, len(texts), EMBED_BLOCK):
        blocks.append(embedder.embed(texts[start : start + EMBED_BLOCK]))
        if counter is not None:
            counter(min(start + EMBED_BLOCK, len(texts)), len(texts))
    return np.vstack(blocks) if blocks else np.zeros((0, embedder.dim), dtype=np.float32)


def embed_bundle(
    path: Path, settings: Settings, *, progress: Progress | None = None, counter: Counter | None = None
) -> dict[str, Any]:
    """Compute name embeddings for every node and store them in the bundle (``embeddings.parquet``).

    Args:
        path: the bundle directory.
        settings: where the model is.
        progress: called with stage messages (e.g. a model download).
        counter: called with (names embedded, total) after each block.

    Raises:
        BundleError: the bundle cannot be read or written.
        EmbeddingError: the model cannot be found or run.
    """
    bundle = read_bundle(path)
    embedder = make_embedder(settings, progress)
    vectors = embed_in_blocks(embedder, bundle.nodes["name"].to_list(), counter)
    frame = pl.DataFrame({"id": bundle.nodes["id"], "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})
    frame.write_parquet(path / EMBEDDINGS_FILE)
    bundle.manifest["embeddings"] = {
        "model": embedder.name,
        "dim": int(vectors.shape[1]) if len(vectors) else embedder.dim,
        "field": "name",
        "nodes": frame.height,
    }
    write_bundle(path, bundle)
    return dict(bundle.manifest["embeddings"])


def _bundle_embeddings(path: Path, bundle: Bundle) -> pl.DataFrame | None:
    """The name embeddings stored in the bundle by `metakg embed`, or None."""
    if "embeddings" in bundle.manifest and (path / EMBEDDINGS_FILE).is_file():
        return pl.read_parquet(path / EMBEDDINGS_FILE)
    return None


def load_neo4j(
    path: Path, settings: Settings, *, batch_size: int | None = None, progress: Counter | None = None
) -> dict[str, Any]:
    """Load a bundle into the configured Neo4j (idempotent, resumable); returns the counts in Neo4j.

    Raises:
        BundleError: the bundle cannot be read.
        ConfigError: Neo4j cannot be reached.
    """
    bundle = read_bundle(path)
    embeddings = _bundle_embeddings(path, bundle)
    driver = connect(settings.neo4j)
    try:
        report = load_bundle(
            driver,
            bundle,
            database=settings.neo4j.database,
            target=settings.neo4j.uri,
            batch_size=batch_size or settings.neo4j.batch_size,
            embeddings=embeddings,
            checkpoint_dir=path,
            progress=progress,
        )
    finally:
        driver.close()
    return {"uri": settings.neo4j.uri, "database": settings.neo4j.database, **report.as_dict()}


def export_neo4j_admin(path: Path, out_dir: Path, settings: Settings) -> dict[str, Any]:
    """Write neo4j-admin import files for a bundle; returns the files and the command to run.

    Raises:
        BundleError: the bundle cannot be read.
    """
    return write_admin_import(read_bundle(path), out_dir, database=settings.neo4j.database)


def open_store(
    path: Path | None, settings: Settings, *, backend: str | None = None, progress: Progress | None = None
) -> GraphStore:
    """The configured GraphStore: the embedded store over the bundle at ``path``, or the Neo4j database.

    Raises:
        UsageError: the embedded store without a bundle path.
        BundleError: the bundle cannot be read.
        StoreError: the bundle is not valid enough to index (run validate first).
        ConfigError: Neo4j cannot be reached.
    """
    backend = backend or settings.store.backend
    if backend == "neo4j":
        return Neo4jStore(
            connect(settings.neo4j),
            database=settings.neo4j.database,
            embedder=make_embedder(settings, progress),
            target=settings.neo4j.uri,
        )
    if path is None:
        raise UsageError("the embedded store needs a bundle directory.")
    bundle = read_bundle(path)
    embeddings = _bundle_embeddings(path, bundle)
    return EmbeddedStore.from_bundle(bundle, embedder=make_embedder(settings, progress), embeddings=embeddings)


NEO4J_SCHEMES = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")


def open_graph(graph: str, settings: Settings, *, progress: Progress | None = None) -> GraphStore:
    """A GraphStore for ``graph``: a Neo4j URI (user, password, database from the settings) or a bundle path.

    Raises:
        BundleError: the bundle cannot be read.
        ConfigError: Neo4j cannot be reached.
    """
    if graph.startswith(NEO4J_SCHEMES):
        neo4j_settings = settings.neo4j.model_copy(update={"uri": graph})
        return open_store(
            None, settings.model_copy(update={"neo4j": neo4j_settings}), backend="neo4j", progress=progress
        )
    return open_store(Path(graph), settings, backend="embedded", progress=progress)


def resolve_node(store: GraphStore, text: str) -> NodeRecord:
    """A node by id, else the best name match (exact, normalised, then embedding).

    Raises:
        NodeNotFound: nothing matches.
    """
    node = store.get_node(text)
    if node is not None:
        return node
    hits = store.search(text, mode="auto", k=1)
    if not hits:
        raise NodeNotFound(f"no node has the id or name {text!r}.")
    return hits[0].node


def neighbours_of(
    store: GraphStore, text: str, *, relations: Sequence[str] | None = None, limit: int | None = 20
) -> tuple[NodeRecord, list[Neighbour]]:
    """The node ``text`` resolves to and its neighbours."""
    node = resolve_node(store, text)
    return node, store.neighbours(node.id, relations=relations, limit=limit)


def paths_between(
    store: GraphStore, a: str, b: str, *, k: int = 1, max_hops: int = 3, relations: Sequence[str] | None = None
) -> tuple[NodeRecord, NodeRecord, list[GraphPath]]:
    """The nodes ``a`` and ``b`` resolve to and up to ``k`` shortest paths between them."""
    na, nb = resolve_node(store, a), resolve_node(store, b)
    return na, nb, store.shortest_paths(na.id, nb.id, k=k, max_hops=max_hops, relations=relations)


# ---------------------------------------------------------------------------- LLM
@contextmanager
def llm_session(
    settings: Settings, *, run_id: str | None = None, progress: Progress | None = None
) -> Iterator[tuple[OpenAICompatibleClient, UsageLedger]]:
    """A cached, accounted LLM client for one run; starts (and stops) the local server when no endpoint is set.

    Raises:
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    import uuid

    run_id = run_id or uuid.uuid4().hex
    folder = settings.paths.cache_dir / "llm"
    cache = ResponseCache(folder / "responses.sqlite")
    ledger = UsageLedger(run_id, settings.llm.prices_per_mtok, path=folder / "ledger.jsonl")
    try:
        if settings.llm.base_url:
            yield (
                OpenAICompatibleClient(settings.llm, base_url=settings.llm.base_url, cache=cache, ledger=ledger),
                ledger,
            )
            return
        (progress or _quiet)("starting the local SmolLM2 server")
        with local_server.running() as server:
            llm = settings.llm.model_copy(update={"model": server.model})
            yield OpenAICompatibleClient(llm, base_url=server.base_url, cache=cache, ledger=ledger), ledger
    finally:
        cache.close()


def run_with(client: OpenAICompatibleClient, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` in a new event loop and close the client's HTTP connections before the loop ends."""

    async def body() -> T:
        try:
            return await work
        finally:
            await client.aclose()

    return asyncio.run(body())


def ask(settings: Settings, prompt: str, *, system: str | None = None) -> tuple[Completion, dict[str, Any]]:
    """One question to the configured model; returns the reply and the ledger summary."""
    with llm_session(settings) as (client, ledger):
        messages = ([Message("system", system)] if system else []) + [Message("user", prompt)]
        completion = run_with(
            client,
            client.complete(
                request(
                    messages,
                    model=client.model,
                    temperature=settings.llm.temperature,
                    max_tokens=settings.llm.max_tokens,
                ),
                tag="ask",
            ),
        )
        return completion, ledger.summary()


# ---------------------------------------------------------------------------- extraction
def link_target(
    path: Path, settings: Settings, embedder: Embedder | None, progress: Progress | None = None
) -> LinkTarget:
    """The nodes of the bundle at ``path`` indexed for linking; with an embedder, also their name vectors
    (the bundle's stored embeddings when `metakg embed` made them with the same model, else computed now).

    Raises:
        BundleError: the bundle cannot be read.
    """
    say = progress or _quiet
    say(f"reading link target {path}")
    bundle = read_bundle(path)
    if embedder is None:
        return LinkTarget.from_nodes(bundle.nodes)
    stored = _bundle_embeddings(path, bundle)
    if stored is not None and bundle.manifest.get("embeddings", {}).get("model") == embedder.name:
        vectors = np.asarray(stored["vector"].to_list(), dtype=np.float32).reshape(stored.height, -1)
        return LinkTarget.from_nodes(bundle.nodes, vectors, stored["id"].to_list())
    names = bundle.nodes["name"].to_list()
    say(f"embedding {len(names)} link-target names (run `metakg embed {path}` once to keep them)")
    return LinkTarget.from_nodes(bundle.nodes, embed_in_blocks(embedder, names), bundle.nodes["id"].to_list())


def extract(
    path: Path,
    fmt: DatasetFormat,
    out: Path,
    settings: Settings,
    *,
    dataset: str,
    limit: int | None = None,
    concurrency: int | None = None,
    budget_usd: float | None = None,
    link_to: Path | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    progress: Progress | None = None,
    counter: Callable[[RunStats], None] | None = None,
) -> dict[str, Any]:
    """Extract triples from a dataset with the configured LLM into a validated bundle at ``out``.

    Replies are cached, so a run that was killed, failed in part or ran out of budget continues where it
    stopped when started again, and a repeated run makes no LLM call.

    Returns:
        The run summary (records, LLM calls, cache hits, triples, rejected lines, tokens, cost, ...).

    Raises:
        UsageError: bad dataset name, format, limit, concurrency or budget.
        InputDataError: the dataset cannot be read.
        BundleError: the link target cannot be read or ``out`` cannot be written.
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    import time
    import uuid

    say = progress or _quiet
    check_dataset_name(dataset)
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}.")
    if concurrency is not None and concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {concurrency}.")
    if budget_usd is not None and budget_usd < 0:
        raise UsageError(f"--budget-usd must not be negative, got {budget_usd}.")
    if settings.extract.node_type not in default_vocabulary().names:
        raise UsageError(f"extract.node_type {settings.extract.node_type!r} is not a vocabulary type.")
    if link_to is not None and link_to.resolve() == out.resolve():
        raise UsageError(f"--link-to {link_to} is also the output; write the extraction to a new directory.")
    started = time.perf_counter()
    run_id = uuid.uuid4().hex
    say(f"reading {path}")
    data = read_dataset(path, fmt, limit=limit, text_field=text_field, id_field=id_field)
    units = plan_units(data.records, chunk_chars=settings.extract.chunk_chars, relations=settings.extract.relations)
    embedder = make_embedder(settings, progress) if settings.extract.embeddings else None
    target = link_target(link_to, settings, embedder, progress) if link_to is not None else None
    llm = settings.llm.model_copy(update={"concurrency": concurrency or settings.llm.concurrency})
    session_settings = settings.model_copy(update={"llm": llm})
    with llm_session(session_settings, run_id=run_id, progress=progress) as (client, ledger):
        say(f"extracting from {len(units)} prompts with {client.model}")
        outcomes, stats = run_with(
            client,
            run_units(
                units,
                client,
                temperature=llm.temperature,
                max_tokens=llm.max_tokens,
                concurrency=llm.concurrency,
                budget_usd=budget_usd,
                prices=llm.prices_per_mtok,
                progress=counter,
            ),
        )
        model = client.model
        usage = ledger.summary()
    result = build_bundle(
        outcomes,
        dataset,
        run_id=run_id,
        node_type=settings.extract.node_type,
        confidence=settings.extract.confidence,
        embedder=embedder,
        threshold=settings.extract.link_threshold,
        target=target,
        input_rejects=data.rejects,
        progress=progress,
    )
    figures = {
        "records": data.accepted,
        "read": data.read,
        "input_rejects": data.rejects.height,
        **extraction_summary(stats, result, outcomes),
        "retries": usage["retries"],
    }
    result.bundle.manifest = {
        "sources": [
            {
                "name": dataset,
                "dataset": dataset,
                "importer": "extract",
                "input": str(path),
                "format": fmt,
                "run_id": run_id,
                "model": model,
                "prompts": sorted({f"{u.prompt.version}:{u.prompt.template_hash}" for u in units}),
                "link_to": str(link_to) if link_to is not None else None,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                **{k: v for k, v in figures.items() if k != "errors"},
            }
        ]
    }
    report = write_validated(out, result.bundle, settings, progress=say)
    figures.update(
        {
            "run_id": run_id,
            "model": model,
            "bundle": str(out),
            "validation_ok": report.ok,
            "validation_rejected": report.rejected,
            "wall_s": round(time.perf_counter() - started, 3),
        }
    )
    return figures


# ---------------------------------------------------------------------------- Wikidata
def sync_wikidata(
    spec_path: Path,
    out: Path,
    settings: Settings,
    *,
    endpoint: str | None = None,
    state_path: Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Sync the Wikidata subset of ``spec_path`` into a validated bundle at ``out``, incrementally.

    The state file (default ``<cache_dir>/wikidata/<name>-<endpoint hash>.json``) remembers each entity's
    revision and content; the bundle, then the state, are written only when the sync succeeded.

    Raises:
        InputDataError: the spec or the state file is unreadable.
        SyncError: the endpoint failed after retries, answered malformed data, or the query budget ran out.
        BundleError: ``out`` cannot be written.
    """
    import hashlib
    import uuid

    say = progress or _quiet
    spec = wikidata.load_spec(spec_path)
    url = endpoint or settings.wikidata.endpoint
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--endpoint {url!r} must start with http:// or https://.")
    if state_path is None:
        digest = hashlib.sha256(url.encode()).hexdigest()[:10]
        state_path = settings.paths.cache_dir / "wikidata" / f"{spec.name}-{digest}.json"
    conf = settings.wikidata
    client = wikidata.SparqlClient(
        url,
        conf.user_agent,
        timeout_s=conf.timeout_s,
        max_retries=conf.max_retries,
        backoff_s=conf.backoff_s,
        max_queries=conf.max_queries,
    )
    state = wikidata.read_state(state_path)
    new_state, report = wikidata.sync_state(spec, state, client, batch_size=conf.batch_size, progress=progress)
    run_id = uuid.uuid4().hex
    bundle = wikidata.build_bundle(spec, new_state, default_vocabulary(), run_id)
    report.nodes, report.edges = bundle.nodes.height, bundle.edges.height
    figures = {**report.as_dict(), "endpoint": url, "state": str(state_path), "run_id": run_id}
    bundle.manifest = {
        "sources": [
            {
                "name": f"wikidata:{spec.name}",
                "importer": wikidata.IMPORTER,
                "input": str(spec_path),
                "endpoint": url,
                "run_id": run_id,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                **{k: v for k, v in figures.items() if not k.endswith("_ids")},
            }
        ]
    }
    validation = write_validated(out, bundle, settings, progress=say)
    wikidata.write_state(state_path, new_state)
    figures.update({"bundle": str(out), "validation_ok": validation.ok})
    return figures


# ---------------------------------------------------------------------------- QA engine
def qa_store(settings: Settings, *, bundle: Path | None, neo4j: bool, progress: Progress | None = None) -> GraphStore:
    """The store questions are asked against: the bundle (embedded store) or the configured Neo4j database.

    Raises:
        UsageError: both or neither of a bundle and Neo4j.
    """
    if neo4j == (bundle is not None):
        raise UsageError("give either --bundle DIR (embedded store) or --neo4j (the configured database).")
    return open_store(bundle, settings, backend="neo4j" if neo4j else "embedded", progress=progress)


def qa_context(
    settings: Settings, store: GraphStore, llm: LLMClient | None, *, progress: Progress | None = None
) -> QAContext:
    """A QA context over ``store`` with the configured embedder, QA settings, temperature and prices."""
    return QAContext(
        store=store,
        embedder=make_embedder(settings, progress),
        settings=settings.qa,
        llm=llm,
        temperature=settings.llm.temperature,
        prices=settings.llm.prices_per_mtok,
    )


def make_question(text: str, choices: Sequence[str] = (), *, question_id: str = "q1") -> Question:
    """A question from text and ``"A: ..."`` choices.

    Raises:
        UsageError: a choice without a letter (the message names it).
    """
    try:
        return Question(text, Question.parse_choices(choices), question_id)
    except QuestionError as e:
        raise UsageError(str(e)) from e


def ask_question(
    settings: Settings,
    question: Question,
    *,
    bundle: Path | None = None,
    neo4j: bool = False,
    strategy: str | None = None,
    ablation: str | None = None,
    use_llm: bool = True,
    progress: Progress | None = None,
) -> Answer:
    """Answer one question over the bundle or Neo4j with ``strategy`` (default ``qa.strategy``).

    Without ``use_llm`` only retrieval runs (concepts by rules) and the answer fails with that reason.

    Raises:
        UsageError: an unknown strategy or ablation, or the store choice is wrong.
    """
    say = progress or _quiet
    chosen = make_strategy(strategy or settings.qa.strategy, _ablation(ablation))
    say("loading the store")
    store = qa_store(settings, bundle=bundle, neo4j=neo4j, progress=say)
    if not use_llm:
        rules = settings.model_copy(update={"qa": settings.qa.model_copy(update={"concepts": "rules"})})
        return asyncio.run(answer_question(chosen, question, qa_context(rules, store, None, progress=say)))
    with llm_session(settings, progress=say) as (client, _ledger):
        ctx = qa_context(settings, store, client, progress=say)
        say(f"answering with {chosen.name}")
        return run_with(client, answer_question(chosen, question, ctx))


def _ablation(value: str | None) -> Ablation | None:
    try:
        return Ablation.parse(value) if value else None
    except ValueError as e:
        raise UsageError(str(e)) from e


def read_questions(path: Path, fmt: DatasetFormat, *, limit: int | None = None) -> tuple[list[Question], DatasetRead]:
    """The questions of a benchmark file (the records with a question) and the dataset read report.

    Raises:
        InputDataError: the file cannot be read; UsageError: an unknown format.
    """
    read = read_dataset(path, fmt, limit=limit)
    questions = [
        Question(
            text=row["question"],
            choices=tuple(zip(row["option_labels"] or [], row["option_texts"] or [], strict=True)),
            id=row["record_id"],
            answer=row["answer"],
            answer_text=row["answer_text"],
        )
        for row in read.records.iter_rows(named=True)
        if row["kind"] == "qa"
    ]
    return questions, read


def evaluate_benchmark(
    settings: Settings,
    path: Path,
    fmt: DatasetFormat,
    out_dir: Path,
    *,
    strategies: Sequence[str],
    ablations: Sequence[str] = (),
    limit: int | None = None,
    bundle: Path | None = None,
    neo4j: bool = False,
    resume: bool = True,
    progress: Progress | None = None,
    tick: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run strategies (and MetaKGRAG ablations) over a benchmark; writes the answers, summary and comparison.

    Input lines that are not questions go to ``out_dir/rejects.csv`` with their reason.

    Raises:
        UsageError: unknown strategy, ablation or format, or a wrong store choice.
        InputDataError: the benchmark file cannot be read, or it holds no question.
    """
    say = progress or _quiet
    try:
        specs = run_specs(strategies, ablations)
    except ValueError as e:
        raise UsageError(str(e)) from e
    questions, read = read_questions(path, fmt, limit=limit)
    out_dir.mkdir(parents=True, exist_ok=True)
    if read.rejects.height:
        read.rejects.write_csv(out_dir / "rejects.csv")
    if not questions:
        raise InputDataError(f"{path} holds no question in the {fmt} format ({read.rejects.height} lines rejected).")
    store = qa_store(settings, bundle=bundle, neo4j=neo4j, progress=say)
    with llm_session(settings, progress=say) as (client, _ledger):
        ctx = qa_context(settings, store, client, progress=say)
        summary = run_with(client, evaluate(questions, specs, ctx, out_dir, resume=resume, tick=tick))
    return {"summary": summary, "questions": len(questions), "rejected": read.rejects.height, "out": out_dir}


# ---------------------------------------------------------------------------- demo
def demo_file(settings: Settings, name: str, url: str, progress: Progress | None = None) -> Path:
    """A demo input (``name`` under the data directory), else downloaded once into the cache.

    Raises:
        ConfigError: no data directory and the download fails.
    """
    data_dir = settings.resolved_data_dir()
    if data_dir is not None and (data_dir / name).is_file():
        return data_dir / name
    cached = settings.paths.cache_dir / "data" / name
    if cached.is_file():
        return cached
    (progress or _quiet)(f"downloading {url}")
    return download(
        url,
        cached,
        error=ConfigError,
        hint=f"The demo needs {name}: put it under the data directory "
        f"({data_dir or 'none; set METAKG_PATHS__DATA_DIR'}).",
    )


def demo_triples_file(settings: Settings, progress: Progress | None = None) -> Path:
    """The CommonsenseQA KG file of the MetaKGRAG pilot (data directory, else downloaded once)."""
    return demo_file(settings, DEMO_KG, DEMO_KG_URL, progress)


@dataclass
class DemoResult:
    """What the demo did and found."""

    bundle: Path
    ingest: TripleIngestReport
    validation: ValidationReport
    concept: NodeRecord
    neighbours: list[Neighbour]
    path_ends: tuple[NodeRecord, NodeRecord]
    paths: list[GraphPath]
    counts: dict[str, int] = field(default_factory=dict)
    answers: list[tuple[Question, Answer]] = field(default_factory=list)


def run_demo(
    settings: Settings,
    out: Path,
    *,
    concept: str = "car",
    path_from: str = "dog",
    path_to: str = "cat",
    questions: int = 3,
    progress: Progress | None = None,
) -> DemoResult:
    """Ingest the CommonsenseQA KG, validate it, load it into the embedded store, query it, and answer the
    first ``questions`` CommonsenseQA questions with MetaKGRAG (the configured LLM, else the local one)."""
    say = progress or _quiet
    source = demo_triples_file(settings, say)
    say(f"ingesting {source}")
    report = ingest_triples(source, "commonsenseqa", out, settings, progress=say)
    say("validating")
    validation = validate_bundle(out, settings, progress=say)
    say("loading the embedded store")
    store = open_store(out, settings, backend="embedded", progress=say)
    node, neighbours = neighbours_of(store, concept, limit=10)
    a, b, paths = paths_between(store, path_from, path_to, k=3, max_hops=settings.store.max_hops)
    answers: list[tuple[Question, Answer]] = []
    if questions > 0:
        asked, _read = read_questions(demo_file(settings, DEMO_QUESTIONS, DEMO_QUESTIONS_URL, say), "pilot")
        with llm_session(settings, progress=say) as (client, _ledger):
            ctx = qa_context(settings, store, client, progress=say)
            strategy = make_strategy("metakgrag")

            async def answer_all() -> list[Answer]:
                return [await answer_question(strategy, q, ctx) for q in asked[:questions]]

            say(f"answering {questions} CommonsenseQA questions with metakgrag")
            answers = list(zip(asked[:questions], run_with(client, answer_all()), strict=True))
    return DemoResult(
        bundle=out,
        ingest=report,
        validation=validation,
        concept=node,
        neighbours=neighbours,
        path_ends=(a, b),
        paths=paths,
        counts=store.counts(),
        answers=answers,
    )
