"""``metakg extract``: LLM triple extraction from a QA set or documents into a validated KG bundle."""

from __future__ import annotations

import math
import re
from contextlib import ExitStack
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import (
    HISTORY_HELP,
    JSON_HELP,
    TOLERANCE_HELP,
    emit_json,
    err,
    finish,
    guarded,
    out,
    progress,
    progress_bar,
    settings,
)
from metakg.errors import BatchPending, UsageError

#: files --format auto does not guess: their records need a format named (and their fields, for jsonl/csv)
RECORD_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".ndjson")


def _default_dataset(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem).strip("_.-")
    return name or "extracted"


def extract(
    dataset_file: Path = typer.Argument(
        ...,
        metavar="DATASET",
        help="The dataset file, or a document or a folder of documents (PDF, Word, HTML, Markdown, text).",
    ),
    fmt: str = typer.Option(
        "auto",
        "--format",
        "-f",
        help=f"{api.formats_help()}: question sets, plain text, jsonl/csv documents (see --text-field), or "
        "documents: auto (the default) picks each file's reader by its extension and first bytes; "
        "docs/formats.md says what each reads.",
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Bundle directory to write (replaced if it exists; default: the --update bundle)."
    ),
    dataset: str | None = typer.Option(
        None,
        "--dataset",
        "-d",
        help="Scopes new node ids, kg:<dataset>/<concept> (default: the --update bundle's, else the file name).",
    ),
    update: Path | None = typer.Option(
        None,
        "--update",
        help="An earlier extraction's bundle: unchanged records keep their replies (no LLM call), changed and new "
        "ones are extracted, triples of removed records are retracted; the diff goes into the manifest.",
    ),
    limit: int | None = typer.Option(None, help="Use only the first N records."),
    concurrency: int | None = typer.Option(None, help="LLM requests in flight (default: llm.concurrency, 4)."),
    budget_usd: float | None = typer.Option(
        None,
        "--budget-usd",
        help="Refuse a run whose prompts alone would cost more (by the preview of --estimate), and stop sending "
        "new requests once fresh calls cost this much (llm.prices_per_mtok).",
    ),
    estimate: bool = typer.Option(
        False,
        "--estimate",
        help="Print what the run would send (calls, prompt tokens by the endpoint's tokenizer, price at list and "
        "batch rates) and stop: no extraction call is made, nothing is written.",
    ),
    batch: str | None = typer.Option(
        None,
        "--batch",
        metavar="openai|anthropic|vllm",
        help="Send the prompts as one provider batch (half price, no rate limits, replies within a day): "
        "openai (the [llm] endpoint's Files and Batches API), anthropic (Message Batches; ANTHROPIC_API_KEY), "
        "vllm (writes the request file and prints the `vllm run-batch` command; the next run reads its output). "
        "Submitted batch ids are kept: a killed run, started again, collects instead of sending again.",
    ),
    engine: str = typer.Option(
        "local",
        "--engine",
        metavar="local|ray",
        help="Where the prompts go out from: this process (local), or the workers of a Ray cluster (ray: "
        'pip install "metakg[ray]"), to the ray.endpoints or the [llm] endpoint, --concurrency request workers '
        "each; replies land in the same cache. docs/scaling.md.",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="With --engine ray: the cluster to join (host:6379, ray://host:10001, auto); default: ray.address, "
        "RAY_ADDRESS, else a Ray instance started on this machine for the run.",
    ),
    wait: bool = typer.Option(
        True,
        "--wait/--no-wait",
        help="With --batch: poll until the batch ends (default), or stop once it is submitted (exit 75) and "
        "collect it when the same command runs again.",
    ),
    link_to: Path | None = typer.Option(
        None, "--link-to", help="A bundle (e.g. PrimeKG, Wikidata) whose ids matching mentions take."
    ),
    identity: Path | None = typer.Option(
        None,
        "--identity",
        help="Identity file (YAML, as for metakg resolve): must_link and cannot_link by node id decide the "
        "mentions' grouping and links; aliases add/remove apply to the nodes.",
    ),
    ontology: Path | None = typer.Option(
        None,
        "--ontology",
        help="An ontology (Text2KGBench JSON, or OWL/RDFS in Turtle or RDF/XML) whose relations to extract: typed "
        "entities, JSON held to its schema where the endpoint can, triples outside it rejected with the reason "
        "(extract.conformance); default: extract.ontology. docs/extraction.md.",
    ),
    examples: Path | None = typer.Option(
        None,
        "--examples",
        help="With --ontology: a training file (JSON Lines of {sent, triples}); each prompt shows the most similar "
        "sentence and its triples as a worked example.",
    ),
    text_field: str = typer.Option("text", help="jsonl/csv: the column with the text."),
    id_field: str | None = typer.Option(None, help="jsonl/csv: the column with the record id (default: line)."),
    time_field: str | None = typer.Option(
        None,
        help="jsonl/csv: the column with each record's time (ISO 8601 or Unix seconds); an edge's valid_from is "
        "the earliest time of the records stating it.",
    ),
    history: bool | None = typer.Option(None, "--history/--no-history", help=HISTORY_HELP),
    max_rejects: str = typer.Option("0", "--max-rejects", help=TOLERANCE_HELP),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Extract triples with the configured LLM (the local SmolLM2 server when no endpoint is set).

    One prompt per QA item, one per sentence-bounded chunk of a document. Every reply line becomes a
    triple or a reject with its reason; mentions are normalised and resolved (exact, lemma, embedding) and,
    with --link-to, take the ids of matching nodes. Replies are cached: a killed run, started again, asks
    the model only what it never answered, and an identical run makes no LLM call. The bundle is validated.

    With --update BUNDLE (an earlier extraction), records are compared by content: unchanged ones keep
    their stored replies, only changed and new ones are sent to the model, and triples stated only by
    removed or changed records are retracted (edges other records still state keep a lower count).

    With --engine ray, the prompts not in the cache go out from the workers of a Ray cluster (ray.data.llm);
    the replies land in the same cache and ledger, and the bundle is the one a direct run builds.

    With --batch, the prompts go out as one provider batch at the batch price; the same command collects a
    batch an earlier run submitted (nothing is sent twice). Exit 75 when the batch is not finished and the
    run does not wait for it (--no-wait, or vLLM's command still to run): run the same command later.

    Exit 1 when some prompts failed or were skipped by the budget, validation rejected rows, or more input
    records could not be read than --max-rejects allows (each is in the bundle's rejects with its reason).
    """
    cfg = settings()
    with guarded("extract", json_mode):
        if fmt not in api.FORMATS:
            raise UsageError(f"unknown --format {fmt!r}; choose one of {', '.join(api.FORMATS)}.")
        if budget_usd is not None and not math.isfinite(budget_usd):
            raise UsageError(f"--budget-usd must be a finite number of dollars, got {budget_usd}.")
        if fmt == "auto" and dataset_file.suffix.lower() in RECORD_SUFFIXES and not dataset_file.is_dir():
            raise UsageError(
                f"give --format for {dataset_file}: a {dataset_file.suffix} file holds records or questions "
                f"(jsonl, csv, csqa, medagents, ...), not a document."
            )
        name = dataset or (api.extracted_dataset(update) if update else None) or _default_dataset(dataset_file)
        source = api.TextSource(dataset_file, fmt, name, text_field, id_field, time_field, limit)
        options = api.ExtractOptions(
            concurrency,
            budget_usd,
            link_to,
            identity,
            update,
            history,
            batch,
            wait,
            ontology,
            examples,
            engine,
            ray_address,
        )
        if estimate:
            with progress(f"estimating the extraction of {dataset_file}") as say:
                preview = api.estimate_extraction(source, cfg, options=options, progress=say)
            if not json_mode:
                out.print(_estimate_lines(preview))
            finish(True, {"command": "extract --estimate", **preview.as_dict()}, json_mode=json_mode)
            return
        if output is None and update is None:
            raise UsageError("give --output DIR (or --update BUNDLE to update that bundle in place).")
        api.rejects_tolerated(0, 0, max_rejects)  # a bad value is a usage error before any work
        output = output or update
        assert output is not None
        with progress(f"extracting from {dataset_file}") as say, progress_bar("prompts") as advance:

            def count(stats: api.RunStats) -> None:
                advance(
                    stats.done,
                    stats.total,
                    f"{stats.items_per_s:.2f} items/s · {stats.tokens} tokens · ${stats.cost_usd:.4f} · "
                    f"{stats.cache_hits} cached · {stats.failed} failed",
                )

            try:
                summary = api.extract(source, output, cfg, options=options, progress=say, counter=count)
            except BatchPending as pending:
                _pending(pending, json_mode)
        complete = summary.complete
        if not json_mode:
            out.print(
                f"{summary.records} records, {summary.units} prompts: {summary.llm_calls} LLM calls, "
                f"{summary.cache_hits} from the cache, {summary.failed} failed, "
                f"{summary.skipped_budget} skipped by the budget\n"
                f"{summary.triples} triples ({summary.rejected_lines} reply lines rejected"
                + (
                    f", {summary.conformance_warnings} outside the ontology kept"
                    if summary.conformance_warnings
                    else ""
                )
                + "), "
                f"{summary.tokens} tokens, ${summary.cost_usd:.4f}\n"
                f"bundle {output}: {summary.nodes} nodes, {summary.edges} edges; "
                f"validation {'passed' if summary.validation_ok else 'rejected rows'}"
            )
            if summary.ray is not None:
                ray = summary.ray
                out.print(
                    f"Ray: {ray['units_on_workers']} prompts sent from the workers of {ray['nodes_used']} of "
                    f"{ray['nodes']} nodes ({escape(str(ray['address']))})"
                )
            if summary.files is not None:
                out.print(
                    f"{summary.files} files: {summary.files - (summary.files_rejected or 0)} read, "
                    f"{summary.files_rejected} refused"
                    + (f" (reasons in {escape(str(output / 'rejects.parquet'))})" if summary.files_rejected else "")
                )
            if summary.records_changes is not None and summary.edges_changes is not None:
                records, edges = summary.records_changes, summary.edges_changes
                out.print(
                    f"update of {update}: records {records['added']} added, {records['changed']} changed, "
                    f"{records['removed']} removed, {records['unchanged']} unchanged; edges {edges['added']} added, "
                    f"{edges['retracted']} retracted, {edges['kept']} kept"
                )
        for error in summary.errors:
            err.print(f"[yellow]failed: {escape(str(error))}[/]", highlight=False)
        for note in summary.notes or []:
            err.print(f"[dim]note: {escape(note)}[/]", highlight=False)
        if not complete:
            err.print("[yellow]run the same command again to continue; answered prompts come from the cache[/]")
        tolerated = api.rejects_tolerated(summary.input_rejects, summary.read, max_rejects)
        if not tolerated:
            err.print(
                f"[yellow]{summary.input_rejects} of {summary.read} input records could not be read "
                f"(more than --max-rejects {escape(max_rejects)}); see {escape(str(output / 'rejects.parquet'))}[/]"
            )
        finish(
            complete and summary.validation_ok and tolerated,
            {"command": "extract", **summary.as_dict()},
            json_mode=json_mode,
        )


def _pending(pending: BatchPending, json_mode: bool) -> NoReturn:
    """Report a batch still to finish (nothing failed) and exit 75: the same command collects it later."""
    err.print(f"[yellow]waiting:[/] {escape(str(pending))}", highlight=False)
    if pending.command and not json_mode:
        out.print(pending.command, highlight=False, markup=False, soft_wrap=True)
    if json_mode:
        emit_json(
            {"ok": False, "command": "extract", "pending": True, "batch_id": pending.batch_id, "error": str(pending)}
            | ({"run": pending.command} if pending.command else {})
            | ({"notes": pending.notes} if pending.notes else {})
            | {"exit_code": pending.exit_code}
        )
    raise typer.Exit(pending.exit_code)


def _estimate_lines(preview: api.ExtractEstimate) -> str:
    """The estimate as a person reads it."""

    def usd(low: float | None, high: float | None) -> str:
        return "no price for this model (llm.prices_per_mtok)" if low is None else f"USD {low:.4f} to {high:.4f}"

    files = [
        f"  {f['path']}: "
        + (
            f"refused: {f['rejected']}"
            if f["rejected"]
            else f"same file as {f['same_as']}"
            if f.get("same_as")
            else f"{f['format']}, {f['pages'] if f['pages'] is not None else 'no'} pages, {f['units']} prompts, "
            f"{f['prompt_tokens']:,} prompt tokens"
        )
        for f in preview.files or []
    ]
    return "\n".join([*files, ""] if files else []) + (
        f"{preview.units} prompts with {preview.model}: {preview.answered} already answered (cache or update), "
        f"{preview.calls} calls to make\n"
        f"{preview.prompt_tokens:,} prompt tokens ({preview.tokenizer}), at most "
        f"{preview.max_completion_tokens:,} completion tokens\n"
        f"list price {usd(preview.list_usd_min, preview.list_usd_max)}; "
        f"batch price {usd(preview.batch_usd_min, preview.batch_usd_max)} (prompts only, to every reply at "
        f"llm.max_tokens)"
        + (
            f"\n{preview.input_rejects} records would be refused before any prompt (an unreadable time, no "
            "text): the run lists them in the bundle's rejects"
            if preview.input_rejects
            else ""
        )
    )


def eval_extraction(
    dataset_dir: Path = typer.Argument(
        ...,
        metavar="DATASET_DIR",
        help="A Text2KGBench-layout folder: ontologies/, ground_truth/, test/ (and train/ for examples).",
    ),
    ontology: list[str] = typer.Option(
        [], "--ontology", help="Score only this ontology (ont_1_movie, 1_movie or movie); repeatable. Default: all."
    ),
    limit: int | None = typer.Option(None, help="Score only the first N ground-truth sentences of each ontology."),
    responses: Path | None = typer.Option(
        None,
        "--responses",
        help="A folder of response files, one per ontology found by its id in the file name ({id, triples} or "
        "{id, response} per line, as the benchmark's baseline runs): scored with no LLM.",
    ),
    prompt: str = typer.Option(
        "json",
        "--prompt",
        metavar="json|lines|untyped",
        help="Without --responses, how metakg asks: the ontology prompt held to its JSON schema (json), the same "
        "prompt answered in lines (lines), or the plain chunk prompt given the relation names only (untyped).",
    ),
    examples: bool = typer.Option(
        True,
        "--examples/--no-examples",
        help="Without --responses: show the most similar training sentence and its triples in each prompt.",
    ),
    concurrency: int | None = typer.Option(None, help="LLM requests in flight (default: llm.concurrency, 4)."),
    batch: str | None = typer.Option(
        None,
        "--batch",
        metavar="openai|anthropic|vllm",
        help="Send the prompts as one provider batch, as extract does.",
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Folder for summary.json, summary.md and one <ontology>.jsonl of sentence rows."
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Score triple extraction with Text2KGBench's seven figures, per ontology and on average.

    Without --responses, each test sentence goes through metakg's own extraction with the configured LLM (the
    local SmolLM2 server when no endpoint is set): one prompt per sentence under the ontology, replies cached
    and metered as extract's are, triples checked against the ontology. The run's figures (calls, tokens,
    triples, lines rejected, seconds) are printed beside the scores.

    Precision, recall and F1 against the gold triples (only triples whose relation is among the sentence's gold
    relations are judged), ontology conformance and relation hallucination (relations outside the ontology),
    subject and object hallucination (entities found neither in the sentence nor among the ontology's class
    labels). An ontology's figures average over all its ground-truth sentences, a sentence without a response
    counting 0, as the published figures do. docs/extraction.md explains each figure.
    """
    cfg = settings()
    with guarded("eval-extraction", json_mode):
        if prompt not in api.PROMPT_MODES:
            raise UsageError(f"unknown --prompt {prompt!r}; choose one of {', '.join(api.PROMPT_MODES)}.")
        if responses is not None and (batch is not None or concurrency is not None):
            raise UsageError("--batch and --concurrency run the extraction; --responses scores files without one.")
        with progress(f"scoring {dataset_dir}") as say, ExitStack() as stack:
            responder = None
            if responses is None:
                options = api.ExtractOptions(concurrency=concurrency, batch=batch)
                run_cfg = cfg if batch is not None else stack.enter_context(api.with_endpoint(cfg, progress=say))
                responder = api.benchmark_responder(
                    run_cfg, mode=prompt, examples=examples, options=options, progress=say
                )
            result = api.evaluate_extraction(
                dataset_dir,
                ontologies=ontology,
                limit=limit,
                responses=responses,
                responder=responder,
                source=f"metakg {prompt} prompt" if responder is not None else "",
                out_dir=output,
                progress=say,
            )
        if not json_mode:
            out.print(result.table(), markup=False, highlight=False)
            if result.run:
                out.print(", ".join(f"{k} {v:,}" for k, v in result.run.items()), highlight=False)
            if output is not None:
                out.print(f"sentence rows and the summary in {escape(str(output))}")
        for short_id in result.missing_responses:
            err.print(f"[yellow]no response file for {escape(short_id)}: its sentences count 0[/]", highlight=False)
        finish(True, {"command": "eval-extraction", **result.as_dict()}, json_mode=json_mode)
