"""``metakg demo``: the main job end to end on the embedded default store."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, progress, settings
from metakg.cli.qa_cmd import print_answer
from metakg.cli.query_cmd import path_text


def demo(
    output: Path = typer.Option(Path("out/demo/commonsenseqa"), "--output", "-o", help="Bundle directory to write."),
    concept: str = typer.Option("car", help="Concept whose neighbours are shown."),
    path_from: str = typer.Option("dog", "--from", help="Start of the path query."),
    path_to: str = typer.Option("cat", "--to", help="End of the path query."),
    questions: int = typer.Option(
        3, min=0, max=1000, help="CommonsenseQA questions answered with metakgrag (0: none, no LLM)."
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Ingest the CommonsenseQA KG of the MetaKGRAG pilot, validate it, load it into the embedded store,
    show a concept's neighbours and shortest paths between two concepts, then answer the first CommonsenseQA
    questions with MetaKGRAG (the configured LLM, else the local SmolLM2 server)."""
    cfg = settings()
    with guarded("demo", json_mode):
        with progress("demo") as say:
            result = api.run_demo(
                cfg, output, concept=concept, path_from=path_from, path_to=path_to, questions=questions, progress=say
            )
        ing, val = result.ingest, result.validation
        if not json_mode:
            out.print(
                f"[bold]1. ingest[/] {ing.read} triples read: {ing.accepted} accepted, {ing.rejected} rejected, "
                f"{ing.merged_duplicates} repeats merged -> {ing.nodes} nodes, {ing.edges} edges"
            )
            out.print(
                f"[bold]2. validate[/] {escape(val.headline)}; {val.nodes} nodes, {val.edges} edges kept; "
                f"report {output / 'validation.html'}"
            )
            out.print(f"[bold]3. embedded store[/] {result.counts['nodes']} nodes, {result.counts['edges']} edges")
            out.print(f"[bold]4. neighbours of {escape(result.concept.name)}[/] ({escape(result.concept.id)})")
            for n in result.neighbours:
                arrow = f"-[{n.edge.display}]->" if n.direction == "out" else f"<-[{n.edge.display}]-"
                out.print(f"     {arrow} {n.node.name}", highlight=False, markup=False)
            a, b = result.path_ends
            out.print(f"[bold]5. shortest paths {escape(a.name)} -> {escape(b.name)}[/]")
            for p in result.paths:
                out.print(f"     {p.hops} hops: {path_text(p)}", highlight=False, markup=False)
            for number, (question, answer) in enumerate(result.answers, start=6):
                out.print(f"[bold]{number}. metakgrag[/] {escape(question.text)}", highlight=False)
                for letter, text in question.choices:
                    out.print(f"     {letter}: {text}", highlight=False, markup=False)
                print_answer(question, answer)
                out.print(f"     gold: {question.answer}: {question.answer_text}", highlight=False, markup=False)
        finish(
            True,
            {
                "command": "demo",
                "bundle": str(output),
                "read": ing.read,
                "accepted": ing.accepted,
                "rejected": ing.rejected + val.rejected,
                "ingest_nodes": ing.nodes,
                "ingest_edges": ing.edges,
                "nodes": val.nodes,
                "edges": val.edges,
                "failures": val.failures,
                "warnings": val.warnings,
                "neighbours": len(result.neighbours),
                "paths": len(result.paths),
                "answers": [{"question": q.text, "gold": q.answer, **a.to_dict()} for q, a in result.answers],
            },
            json_mode=json_mode,
        )
