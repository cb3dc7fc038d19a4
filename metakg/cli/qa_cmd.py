"""``metakg ask``, ``metakg eval``, ``metakg tune`` and ``metakg strategies``: questions over a bundle or Neo4j."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import (
    AS_OF_HELP,
    JSON_HELP,
    QUESTION_FORMAT_HELP,
    err,
    finish,
    guarded,
    out,
    progress,
    progress_bar,
    settings,
)
from metakg.errors import OutputError, UsageError

BUNDLE_HELP = "Bundle directory to ask (embedded store)."
NEO4J_HELP = "Ask the configured Neo4j database instead (neo4j.uri, user, password, database)."
STRATEGY_HELP = "A strategy (`metakg strategies` lists them; default: the qa.strategy setting, metakgrag)."
LOCAL_KG_HELP = (
    "Where robodata keeps the graph it grows, across questions: a bundle directory (read if it exists, written "
    "after each question) or `neo4j` (the configured database). Default: the qa.local_kg setting; empty, a new "
    "graph per question."
)
SWITCH_HELP = (
    "Switches of the strategy to turn on, comma-joined (metakgrag's ablations: no_completeness, no_relevance, "
    "no_restart, no_cycle)."
)


def print_answer(question: api.Question, answer: api.Answer) -> None:
    """The answer, its evidence paths and a short trace, for people."""
    if answer.status == "ok":
        out.print(
            f"[bold]answer[/] {escape((answer.choice + ': ' if answer.choice else '') + answer.text)}", highlight=False
        )
    else:
        out.print(f"[bold red]no answer[/] {escape(answer.reason or '')}", highlight=False)
    if answer.evidence:
        out.print(f"[bold]evidence[/] ({len(answer.evidence)} paths)")
        for path in answer.evidence:
            text = "; ".join(f"{h} -[{r}]-> {t}" for h, r, t in path.triples)
            text = text or f"{' '.join(path.nodes)} (a start entity alone: no edge)"
            out.print(f"  {text}", markup=False, highlight=False)
            cited = {s.edge: s.cited for s in answer.sources}
            stated = list(dict.fromkeys(c for edge in path.edges for c in cited.get(edge, ())))
            if stated:
                out.print(f"    [dim]from {escape('; '.join(stated))}[/]", highlight=False)
    for line in api.trace_lines(answer):
        out.print(f"  [dim]{escape(line)}[/]", highlight=False)
    u = answer.usage
    out.print(
        f"[dim]{answer.strategy}: {_calls(u.llm_calls, u.cache_hits)}, {u.tokens} tokens, "
        f"retrieval {u.retrieval_ms:.0f} ms, "
        + (f"model load {u.setup_ms:.0f} ms, " if u.setup_ms >= 1 else "")
        + f"total {u.total_ms:.0f} ms[/]",
        highlight=False,
    )


def _calls(calls: int, cached: int) -> str:
    """``2 LLM calls``, ``2 LLM calls (2 from the cache)``, ``1 LLM call``."""
    said = f"{calls} LLM call{'s' if calls != 1 else ''}"
    return f"{said} ({cached} from the cache)" if cached else said


def ask(
    question: str = typer.Argument(..., metavar="QUESTION", help="The question (quote it)."),
    choices: list[str] | None = typer.Option(None, "--choices", "-c", help="A choice 'A: text' (repeat per choice)."),
    bundle: Path | None = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    neo4j: bool = typer.Option(False, "--neo4j", help=NEO4J_HELP),
    strategy: str | None = typer.Option(None, "--strategy", "-s", help=STRATEGY_HELP),
    ablation: str | None = typer.Option(None, "--ablation", help=SWITCH_HELP),
    no_llm: bool = typer.Option(False, "--no-llm", help="Retrieval only (concepts by rules, no answer)."),
    local_kg: str | None = typer.Option(None, "--local-kg", help=LOCAL_KG_HELP),
    html: Path | None = typer.Option(
        None,
        "--html",
        help="Also write the answer as one self-contained web page here: the evidence as an interactive graph "
        "(click a node for its record, expand its neighbours), the trace as a timeline; opens without a server.",
    ),
    as_of: str | None = typer.Option(None, "--as-of", help=AS_OF_HELP),
    identity: Path | None = typer.Option(
        None,
        "--identity",
        help="Identity file (YAML, as for metakg resolve): answer over the bundle resolved with it (made once, "
        "kept in the cache).",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Answer a question over a bundle or Neo4j; print the answer, the evidence paths and a short trace.

    Exit 1 when no answer could be given (the reason is printed): an empty question, no matching entity,
    a reply without a choice letter, a failed LLM call."""
    cfg = settings()
    with guarded("ask", json_mode):
        if html is not None and html.is_dir():
            raise UsageError(
                f"--html {html} is a folder; give the path of the page to write, e.g. {html / 'answer.html'}."
            )
        cfg = api.with_local_kg(cfg, local_kg)
        asked = api.make_question(question, choices or [])
        heard: list[dict[str, Any]] = []
        if identity is not None and bundle is None:
            raise UsageError("--identity applies to a --bundle (for Neo4j: metakg resolve, then load neo4j).")
        with progress("ask") as say:
            chosen = api.create_strategy(cfg, strategy, ablation)
            when = api.parse_time(as_of) if as_of is not None else None
            if identity is not None and bundle is not None:
                bundle = api.curated_bundle(cfg, bundle, identity, say)
            say("loading the store")
            where = api.StoreChoice(bundle, neo4j, when, graphless=not chosen.uses_graph)
            runner = api.llm_runner(use_llm=not no_llm)
            with api.QASession(cfg, where, runner=runner, progress=say) as session:
                answer = session.answer(asked, chosen, steps=heard.append)
                if html is not None:  # the page holds the evidence nodes' records and neighbours: read them now
                    from metakg.server.page import offline_page

                    page = offline_page(api.answer_snapshot(session.store, asked, answer, heard).as_dict())
                    try:
                        html.parent.mkdir(parents=True, exist_ok=True)
                        html.write_text(page, encoding="utf-8")
                    except OSError as e:
                        raise OutputError(f"cannot write the page {html}: {e.strerror or e}.") from e
        if not json_mode:
            print_answer(asked, answer)
            if html is not None:
                out.print(f"[dim]answer page (opens without a server): {escape(str(html))}[/]")
        ok = answer.status == "ok" or (no_llm and bool(answer.evidence))
        finish(ok, {"command": "ask", **answer.to_dict(), "html": str(html) if html else None}, json_mode=json_mode)


def evaluate(
    benchmark: Path = typer.Argument(..., metavar="BENCHMARK", help="The benchmark file."),
    fmt: str = typer.Option(..., "--format", "-f", help=QUESTION_FORMAT_HELP),
    strategy: str = typer.Option(
        "metakgrag", "--strategy", "-s", help="Comma-separated strategies (`metakg strategies` lists them)."
    ),
    ablation: list[str] | None = typer.Option(
        None,
        "--ablation",
        help="Also run the strategies that offer these switches with them on (comma-joined: one run with all of "
        "them; repeat for several runs; 'all' = each switch alone). metakgrag's: no_completeness, no_relevance, "
        "no_restart, no_cycle.",
    ),
    limit: int | None = typer.Option(None, help="Only the first N questions (after --skip)."),
    skip: int = typer.Option(0, min=0, help="Leave out the first N questions (e.g. the ones settings were tuned on)."),
    budget: int = typer.Option(
        10, min=1, help="Evidence budget of recall@budget: the first N evidence entities (and triples) of each run."
    ),
    bundle: Path | None = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    neo4j: bool = typer.Option(False, "--neo4j", help=NEO4J_HELP),
    local_kg: str | None = typer.Option(None, "--local-kg", help=LOCAL_KG_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="Report folder (answers-*.jsonl, summary.json, ...)."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore answers already in the folder (default: resume)."),
    keep_failed: bool = typer.Option(
        False, "--keep-failed", help="On resume, keep failed answers instead of asking them again."
    ),
    no_llm: bool = typer.Option(
        False,
        "--no-llm",
        help="Retrieval only: run the graph strategies without an LLM (concepts by rules) and report the evidence "
        "metrics and retrieval times. Use its own output folder.",
    ),
    grow: Path | None = typer.Option(
        None,
        "--grow",
        help="Add MedCoG's SCoT answers of this evaluation to this case bank (made when absent), so the next "
        "run's memory routes see them.",
    ),
    scaling: str = typer.Option(
        "medagentsbench-gpt4o-medqa-hard",
        "--scaling",
        help="Reference points of the inference-density curve: a named set (medagentsbench-gpt4o-medqa-hard: "
        "the published GPT-4o figures on MedQA-hard), a CSV with method,accuracy,cost_usd, or an earlier eval "
        "report (its folder or summary.json).",
    ),
    iie_reference: str | None = typer.Option(
        None,
        "--iie-reference",
        help="The run IIE is measured against, e.g. llm_only (default: medcog[route=scot] when it runs).",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run strategies and their variants (MetaKGRAG ablations, MedCoG routes) over the same benchmark questions and
    compare them. Strategies that read no graph (llm_only, robodata) need no --bundle.

    Writes answers-<run>.jsonl (one row per question), summary.json and comparison.md into the output
    folder, and rejects.csv for input lines that are not questions. A re-run resumes: answers already in
    the folder are reused unless --fresh, and failed ones are asked again unless --keep-failed. Exit 1 when
    every answer of a run failed (for example an unreachable LLM)."""
    cfg = settings()
    with guarded("eval", json_mode):
        cfg = api.with_local_kg(cfg, local_kg)
        if not any(name.strip() for name in strategy.split(",")):
            raise UsageError("--strategy names no strategy; give one or more, comma-separated (metakg strategies).")
        if fmt not in api.EVAL_FORMATS:
            raise UsageError(f"unknown benchmark format {fmt!r}; choose one of {', '.join(api.EVAL_FORMATS)}.")
        if grow is not None:
            api.check_casebank(grow)  # before the run, not after it
        with progress("eval") as say, progress_bar("questions") as bar:

            def tick(label: str, done: int, total: int) -> None:
                bar(done, total, label)

            options = api.EvalOptions(not fresh, keep_failed, budget, scaling, iie_reference, tick)
            result = api.evaluate_benchmark(
                cfg,
                api.Benchmark(benchmark, fmt, limit=limit, skip=skip),
                output,
                api.Runs(strategy.split(","), ablation or []),
                over=api.StoreChoice(bundle, neo4j),
                runner=api.llm_runner(use_llm=not no_llm),
                options=options,
                progress=say,
            )
        summary = result.summary
        if grow is not None:
            grown = api.grow_from_report(cfg, output, list(summary), grow)
            err.print(escape(f"case bank {grow}: {grown.added} cases added, {grown.cases} in all"), style="dim")
        failed = result.failed_runs()  # a run that answered nothing is a failure
        for label in failed:
            err.print(
                escape(f"every answer of {label} failed; see the reasons in {output}/answers-{label}.jsonl"),
                style="red",
            )
        if json_mode:  # ok is false exactly when the exit is 1
            finish(not failed, {"command": "eval", "runs": summary, "failed_runs": failed}, json_mode=True)
            return
        out.print(result.table(), markup=False, highlight=False)
        for note in api.efficiency_notes(summary):
            out.print(f"[dim]{escape(note)}[/]", highlight=False)
        skipped = f"; left out without an LLM: {', '.join(result.skipped)}" if result.skipped else ""
        reused = sum(int(figures.get("reused") or 0) for figures in summary.values())
        if reused:  # answers of an earlier run, given over the same graph, settings and model
            skipped += f"; {reused} answer(s) reused from the earlier run there (--fresh asks every question again)"
        out.print(
            f"[dim]{result.questions} questions ({result.rejected} input lines rejected){skipped}; "
            f"report in {output}[/]"
        )
        finish(not failed, {}, json_mode=False)


def strategies(json_mode: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """List the QA strategies: what each does, its settings section ([qa.<name>]) with every setting's type,
    default and meaning, and the switches `eval --ablation` can turn on."""
    with guarded("strategies", json_mode):
        described = api.describe_strategies()
        left_out = api.strategies_left_out()
        for problem in left_out:  # an installed strategy that could not be loaded
            err.print(f"left out: {problem}", markup=False, highlight=False)
        if not json_mode:
            for item in described:
                switches = f" switches: {', '.join(item.switches)}" if item.switches else ""
                out.print(f"[bold]{item.name}[/] {item.summary}{switches}", highlight=False)
                for field in item.settings:
                    out.print(
                        f"  [{item.section}] {field['key']} = {field['default']!r} ({field['type']}): "
                        f"{field['description']}",
                        markup=False,
                        highlight=False,
                    )
        payload: dict[str, Any] = {"command": "strategies", "strategies": [d.as_dict() for d in described]}
        if left_out:
            payload["left_out"] = left_out
        finish(True, payload, json_mode=json_mode)


def tune(
    benchmark: Path = typer.Argument(..., metavar="BENCHMARK", help="The question file."),
    fmt: str = typer.Option(..., "--format", "-f", help=QUESTION_FORMAT_HELP),
    strategy: str = typer.Option("metakgrag", "--strategy", "-s", help="The retrieval strategy to tune."),
    grid: list[str] = typer.Option(
        ...,
        "--grid",
        help="key=value1,value2; repeat for more keys, every combination runs. [qa] keys (tau_entity, "
        "max_starts, ...) are shared, others belong to the strategy (path_hops, tau_coverage, preset, ...).",
    ),
    limit: int | None = typer.Option(None, help="Only the first N questions (after --skip)."),
    skip: int = typer.Option(0, min=0, help="Leave out the first N questions."),
    budget: int = typer.Option(10, help="Evidence budget of recall@budget (entities)."),
    bundle: Path | None = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    neo4j: bool = typer.Option(False, "--neo4j", help=NEO4J_HELP),
    local_kg: str | None = typer.Option(None, "--local-kg", help=LOCAL_KG_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for each run's answers, tune.json and tune.md."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run a small grid over retrieval settings without an LLM (concepts by rules) and rank the combinations
    by evidence recall at an equal budget, then recall, then fewer evidence entities.

    Example: metakg tune pilot.json -f pilot -b kg/ --limit 500 --grid path_hops=2,3 --grid tau_coverage=0.5,0.6"""
    cfg = settings()
    with guarded("tune", json_mode):
        if fmt not in api.EVAL_FORMATS:
            raise UsageError(f"unknown benchmark format {fmt!r}; choose one of {', '.join(api.EVAL_FORMATS)}.")
        parsed = api.parse_grid(grid, strategy)
        with progress("tune") as say, progress_bar("questions") as bar:
            result = api.tune_benchmark(
                cfg,
                api.Benchmark(benchmark, fmt, limit=limit, skip=skip),
                output,
                strategy=strategy,
                grid=parsed,
                over=api.StoreChoice(bundle, neo4j),
                options=api.EvalOptions(budget=budget, tick=lambda label, done, total: bar(done, total, label)),
                progress=say,
            )
        if not json_mode:
            out.print(result.table(), markup=False, highlight=False)
            out.print(f"[dim]{result.questions} questions, budget {budget} entities; report in {output}[/]")
        finish(True, {"command": "tune", **result.as_dict()}, json_mode=json_mode)
