"""``metakg ask`` and ``metakg eval``: questions over a bundle or Neo4j with the QA strategies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import typer

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, progress, progress_bar, settings
from metakg.errors import UsageError
from metakg.ingest.datasets import DatasetFormat
from metakg.qa_engine.core import Ablation, Answer, Question
from metakg.qa_engine.evaluate import COLUMNS, comparison_table
from metakg.qa_engine.render import answer_page
from metakg.qa_engine.strategies import STRATEGIES

BUNDLE_HELP = "Bundle directory to ask (embedded store)."
NEO4J_HELP = "Ask the configured Neo4j database instead (neo4j.uri, user, password, database)."
STRATEGY_HELP = f"{' | '.join(STRATEGIES)} (default: the qa.strategy setting, metakgrag)."
ABLATION_HELP = f"MetaKGRAG switches, comma-joined: {', '.join(Ablation.NAMES)}."
EVAL_FORMATS = ("medagents", "csqa", "pilot")


def _trace_lines(answer: Answer) -> list[str]:
    trace = answer.trace
    lines = []
    if "concepts" in trace:
        lines.append(f"concepts ({trace['concept_method']}): {', '.join(trace['concepts']) or '-'}")
        starts = [f"{s['name']} ({s['score']})" for s in trace.get("start_entities", [])]
        lines.append(f"start entities: {', '.join(starts) or '-'}")
    for path in trace.get("paths", []):
        lines.append(f"from {path['start']}: {' > '.join(path['initial_path'])}")
        for cycle in path["cycles"]:
            missing = ", ".join(cycle["missing_concepts"]) or "-"
            misleading = len(cycle["misleading_entities"])
            step = f"  cycle {cycle['cycle']}: missing {missing}; misleading {misleading}"
            if "pivot" in cycle:
                step += f"; pivot {cycle['pivot']} -> {' > '.join(cycle['new_path'])} (sim {cycle['path_similarity']})"
            lines.append(step)
        lines.append(f"  stop: {path['stop']}{'; refined' if path['refined'] else ''}")
    return lines


def print_answer(question: Question, answer: Answer) -> None:
    """The answer, its evidence paths and a short trace, for people."""
    if answer.status == "ok":
        out.print(f"[bold]answer[/] {answer.choice + ': ' if answer.choice else ''}{answer.text}", highlight=False)
    else:
        out.print(f"[bold red]no answer[/] {answer.reason}", highlight=False)
    if answer.evidence:
        out.print(f"[bold]evidence[/] ({len(answer.evidence)} paths)")
        for path in answer.evidence:
            out.print("  " + "; ".join(f"{h} -[{r}]-> {t}" for h, r, t in path.triples), markup=False)
    for line in _trace_lines(answer):
        out.print(f"  [dim]{line}[/]", highlight=False)
    u = answer.usage
    out.print(
        f"[dim]{answer.strategy}: {u.llm_calls} LLM calls, {u.tokens} tokens, retrieval {u.retrieval_ms:.0f} ms, "
        f"total {u.total_ms:.0f} ms[/]",
        highlight=False,
    )


def ask(
    question: str = typer.Argument(..., metavar="QUESTION", help="The question (quote it)."),
    choices: list[str] | None = typer.Option(None, "--choices", "-c", help="A choice 'A: text' (repeat per choice)."),
    bundle: Path | None = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    neo4j: bool = typer.Option(False, "--neo4j", help=NEO4J_HELP),
    strategy: str | None = typer.Option(None, "--strategy", "-s", help=STRATEGY_HELP),
    ablation: str | None = typer.Option(None, "--ablation", help=ABLATION_HELP),
    no_llm: bool = typer.Option(False, "--no-llm", help="Retrieval only (concepts by rules, no answer)."),
    html: Path | None = typer.Option(None, "--html", help="Write a page drawing the evidence subgraph here."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Answer a question over a bundle or Neo4j; print the answer, the evidence paths and a short trace.

    Exit 1 when no answer could be given (the reason is printed): an empty question, no matching entity,
    a reply without a choice letter, a failed LLM call."""
    cfg = settings()
    with guarded("ask", json_mode):
        asked = api.make_question(question, choices or [])
        with progress("ask") as say:
            answer = api.ask_question(
                cfg,
                asked,
                bundle=bundle,
                neo4j=neo4j,
                strategy=strategy,
                ablation=ablation,
                use_llm=not no_llm,
                progress=say,
            )
        if html is not None:
            html.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(answer_page(asked, answer), encoding="utf-8")
        if not json_mode:
            print_answer(asked, answer)
            if html is not None:
                out.print(f"[dim]evidence page: {html}[/]")
        ok = answer.status == "ok" or (no_llm and bool(answer.evidence))
        finish(ok, {"command": "ask", **answer.to_dict(), "html": str(html) if html else None}, json_mode=json_mode)


def evaluate(
    benchmark: Path = typer.Argument(..., metavar="BENCHMARK", help="The benchmark file."),
    fmt: str = typer.Option(..., "--format", "-f", help=f"{' | '.join(EVAL_FORMATS)}."),
    strategy: str = typer.Option(
        "metakgrag", "--strategy", "-s", help=f"Comma-separated strategies: {', '.join(STRATEGIES)}."
    ),
    ablation: list[str] | None = typer.Option(
        None,
        "--ablation",
        help=f"Also run metakgrag with these switches (comma-joined; repeat for several runs; 'all' = each of "
        f"{', '.join(Ablation.NAMES)} alone).",
    ),
    limit: int | None = typer.Option(None, help="Only the first N questions."),
    bundle: Path | None = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    neo4j: bool = typer.Option(False, "--neo4j", help=NEO4J_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="Report folder (answers-*.jsonl, summary.json, ...)."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore answers already in the folder (default: resume)."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run strategies and MetaKGRAG ablations over the same benchmark questions and compare them.

    Writes answers-<run>.jsonl (one row per question), summary.json and comparison.md into the output
    folder, and rejects.csv for input lines that are not questions. A re-run resumes: answers already in
    the folder are reused unless --fresh."""
    cfg = settings()
    with guarded("eval", json_mode):
        if fmt not in EVAL_FORMATS:
            raise UsageError(f"unknown benchmark format {fmt!r}; choose one of {', '.join(EVAL_FORMATS)}.")
        with progress("eval") as say, progress_bar("questions") as bar:

            def tick(label: str, done: int, total: int) -> None:
                bar(done, total, label)

            result = api.evaluate_benchmark(
                cfg,
                benchmark,
                cast(DatasetFormat, fmt),
                output,
                strategies=strategy.split(","),
                ablations=ablation or [],
                limit=limit,
                bundle=bundle,
                neo4j=neo4j,
                resume=not fresh,
                progress=say,
                tick=tick,
            )
        summary: dict[str, dict[str, Any]] = result["summary"]
        if json_mode:
            typer.echo(json.dumps(summary))
            return
        out.print(comparison_table(summary), markup=False, highlight=False)
        out.print(
            f"[dim]{result['questions']} questions ({result['rejected']} input lines rejected); "
            f"columns: {', '.join(title for _, title in COLUMNS)}; report in {output}[/]"
        )
        finish(True, {}, json_mode=False)
