"""LLM triple extraction from a dataset into a validated bundle, optionally linked to another bundle."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from metakg.api._shared import Progress, at_least_one, quiet
from metakg.api.bundles import Earlier, earlier_version, recorded_diff, write_validated
from metakg.api.llm import llm_session, run_with
from metakg.config import Settings
from metakg.errors import InputDataError, UsageError
from metakg.extractors.pipeline import IMPORTER, RunStats, build_bundle, plan_units, run_units, unit_request
from metakg.extractors.pipeline import summary as extraction_summary
from metakg.extractors.resolution import LinkTarget
from metakg.extractors.update import compare_records, stored_outcomes, units_table
from metakg.identity.curation import read_curation
from metakg.identity.names import LinkRule
from metakg.ingest.datasets import FORMATS, READERS, DatasetFormat, Reader, formats_help, formats_table, read_dataset
from metakg.llm.embedder import Embedder, LazyEmbedder, embed_in_blocks
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
    "READERS",
    "DatasetFormat",
    "Reader",
    "RunStats",
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


@writes_bundle("out")
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
    identity_file: Path | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    time_field: str | None = None,
    update: Path | None = None,
    history: bool | None = None,
    progress: Progress | None = None,
    counter: Callable[[RunStats], None] | None = None,
) -> dict[str, Any]:
    """Extract triples from a dataset with the configured LLM into a validated bundle at ``out``.

    Replies are cached, so a run that was killed, failed in part or ran out of budget continues where it
    stopped when started again, and a repeated run makes no LLM call.

    ``identity_file``: a curator's must-links, cannot-links and aliases (the file `metakg resolve
    --identity` reads), applied to the mentions' nodes and their links (entries naming nothing of this run
    are left alone).

    With ``update`` (a bundle an earlier extraction wrote; ``out`` may be the same directory), the units
    whose request the earlier run answered take its stored replies, whatever the cache holds; only new and
    changed records go to the model, and the bundle is built from all replies as a fresh run would build
    it (see :mod:`metakg.extractors.update`). The summary adds ``records_changes`` and ``edges_changes``,
    and the diff against the earlier bundle goes into the new manifest; ``history`` keeps the versions
    (default: when the earlier bundle keeps them).

    Returns:
        The run summary (records, LLM calls, cache hits, triples, rejected lines, tokens, cost, ...).

    Raises:
        UsageError: bad dataset name, format, limit, concurrency or budget.
        InputDataError: the dataset cannot be read.
        BundleError: the link target cannot be read or ``out`` cannot be written.
        ConfigError: no endpoint configured and the local model cannot be started.
    """
    say = progress or quiet
    check_dataset_name(dataset)
    at_least_one("--limit", limit)
    at_least_one("--concurrency", concurrency)
    if budget_usd is not None and budget_usd < 0:
        raise UsageError(f"--budget-usd must not be negative, got {budget_usd}.")
    if settings.extract.node_type not in default_vocabulary().names:
        raise UsageError(f"extract.node_type {settings.extract.node_type!r} is not a vocabulary type.")
    if link_to is not None and link_to.resolve() == out.resolve():
        raise UsageError(f"--link-to {link_to} is also the output; write the extraction to a new directory.")
    curation = read_curation(identity_file) if identity_file is not None else None
    started = time.perf_counter()
    run_id = uuid.uuid4().hex
    previous, stored = _earlier_run(update, dataset) if update is not None else (None, None)
    say(f"reading {path}")
    data = read_dataset(path, fmt, limit=limit, text_field=text_field, id_field=id_field, time_field=time_field)
    if data.accepted == 0:
        why = "; ".join(f"{r['record']}: {r['reason']}" for r in data.rejects.head(3).iter_rows(named=True))
        raise InputDataError(f"no record of {path} could be read in the {fmt} format ({why or 'the file is empty'}).")
    units = plan_units(data.records, chunk_chars=settings.extract.chunk_chars, relations=settings.extract.relations)
    embedder = LazyEmbedder(settings.embedder, settings.paths.cache_dir, say) if settings.extract.embeddings else None
    target = link_target(link_to, settings, embedder, progress) if link_to is not None else None
    llm = settings.llm.model_copy(update={"concurrency": concurrency or settings.llm.concurrency})
    session_settings = settings.model_copy(update={"llm": llm})
    with llm_session(session_settings, run_id=run_id, progress=progress) as client:
        keys = [
            unit_request(u, client.model, temperature=llm.temperature, max_tokens=llm.max_tokens).key() for u in units
        ]
        kept = stored_outcomes(stored, units, keys) if stored is not None else {}
        ask = [u for i, u in enumerate(units) if i not in kept]
        say(f"extracting from {len(ask)} prompts with {client.model}" + (f" ({len(kept)} unchanged)" if kept else ""))
        asked, stats = run_with(
            client,
            run_units(
                ask,
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
        usage = client.meter.summary()
    answers = iter(asked)
    outcomes = [kept[i] if i in kept else next(answers) for i in range(len(units))]
    result = build_bundle(
        outcomes,
        dataset,
        run_id=run_id,
        node_type=settings.extract.node_type,
        confidence=settings.extract.confidence,
        embedder=embedder,
        threshold=settings.extract.group_threshold,
        link=LinkRule(settings.extract.link_threshold, settings.extract.link_margin),
        target=target,
        curation=curation,
        input_rejects=data.rejects,
        progress=progress,
    )
    figures = {
        "records": data.accepted,
        "read": data.read,
        "input_rejects": data.rejects.height,
        **extraction_summary(stats, result, outcomes),
        "units": len(units),
        "reused_units": len(kept),
        "retries": usage.retries,
    }
    if stored is not None:
        figures["records_changes"] = compare_records(stored, units, keys).counts()
    result.bundle.manifest = {
        "sources": [
            source_entry(
                dataset,
                IMPORTER,
                run_id,
                dataset=dataset,
                input=str(path),
                format=fmt,
                model=model,
                prompts=sorted({f"{u.prompt.version}:{u.prompt.template_hash}" for u in units}),
                link_to=str(link_to) if link_to is not None else None,
                identity_file=str(identity_file) if identity_file is not None else None,
                **{k: v for k, v in figures.items() if k != "errors"},
            )
        ],
        "extraction": {"units": len(units), "model": model},
    }
    result.bundle.side[EXTRACTION_FILE] = units_table(outcomes, keys)
    report = write_validated(out, result.bundle, settings, previous=previous, history=history, progress=say)
    if previous is not None:
        recorded = recorded_diff(out)
        edges = recorded.edges if recorded is not None else {"added": 0, "removed": 0}
        figures["edges_changes"] = {
            "added": edges["added"],
            "retracted": edges["removed"],
            "kept": previous.bundle.edges.height - edges["removed"],
        }
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
