"""``metakg calibrate medcog`` (thresholds from the five fixed routes, searched offline) and ``metakg casebank
build`` (MedCoG's episodic memory)."""

from __future__ import annotations

from pathlib import Path

import typer

from metakg import api
from metakg.cli._common import JSON_HELP, QUESTION_FORMAT_HELP, finish, guarded, out, progress, progress_bar, settings
from metakg.errors import UsageError

app = typer.Typer(
    rich_markup_mode=None, help="Calibrate a strategy's settings on a question file.", no_args_is_help=True
)
casebank_app = typer.Typer(
    rich_markup_mode=None,
    help="MedCoG's case bank: past questions, their reasoning and its outcome.",
    no_args_is_help=True,
)


@casebank_app.command("build")
def casebank_build(
    dataset: Path = typer.Argument(..., metavar="DATASET", help="Training questions with gold answers."),
    fmt: str = typer.Option(..., "--format", "-f", help=QUESTION_FORMAT_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="The case bank folder (merged into when it exists)."),
    route: str = typer.Option("scot", help="scot | scot_kg: the route whose trajectories are kept."),
    limit: int | None = typer.Option(None, help="Only the first N questions."),
    bundle: Path | None = typer.Option(
        None, "--bundle", "-b", help="Bundle directory (the scot_kg route reads it; scot needs none)."
    ),
    neo4j: bool = typer.Option(False, "--neo4j", help="Use the configured Neo4j database instead."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Answer each question with MedCoG's SCoT route and keep (question, trajectory, reward) with the
    question's embedding in the bank; run it again on more questions to grow the bank. Point
    [qa.medcog] casebank at the folder to use it."""
    cfg = settings()
    with guarded("casebank build", json_mode):
        with progress("casebank") as say, progress_bar("questions") as bar:
            result = api.build_casebank(
                cfg, api.Benchmark(dataset, fmt, limit=limit), output, route=route,  # type: ignore[arg-type]
                over=api.StoreChoice(bundle, neo4j), progress=say,
                tick=lambda label, done, total: bar(done, total, label),
            )  # fmt: skip
        if not json_mode:
            out.print(result.summary())
        finish(True, {"command": "casebank build", **result.as_dict()}, json_mode=json_mode)


@app.command("medcog")
def medcog(
    benchmark: Path = typer.Argument(..., metavar="BENCHMARK", help="The calibration questions (with gold answers)."),
    fmt: str = typer.Option(..., "--format", "-f", help=QUESTION_FORMAT_HELP),
    grid: str = typer.Option(
        ",".join(str(g) for g in api.DEFAULT_GRID), help="Threshold values tried for each of tau_c, tau_f, tau_k."
    ),
    objective: str = typer.Option("accuracy", help="accuracy (ties: the cheapest) | budget (best within --budget)."),
    budget: float | None = typer.Option(None, min=0.0, help="USD per question the budget objective stays within."),
    limit: int | None = typer.Option(None, min=1, help="Only the first N questions."),
    bundle: Path | None = typer.Option(None, "--bundle", "-b", help="Bundle directory (embedded store)."),
    neo4j: bool = typer.Option(False, "--neo4j", help="Use the configured Neo4j database instead."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the evaluation and calibration.json."),
    settings_out: Path | None = typer.Option(
        None, "--settings-out", help="Where to write the chosen [qa.medcog] thresholds (default: OUTPUT/medcog.toml)."
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Answer every question with MedCoG's monitoring step and each of its five fixed routes (the response
    cache makes reruns free), then search the threshold grid offline for the best accuracy (or the best
    within a cost budget), print the best triples and the routes they induce, and write the chosen
    thresholds as a settings file."""
    cfg = settings()
    with guarded("calibrate medcog", json_mode):
        if objective not in ("accuracy", "budget"):
            raise UsageError(f"--objective must be accuracy or budget, got {objective!r}.")
        try:
            values = [float(v) for v in grid.split(",") if v.strip()]
        except ValueError as e:
            raise UsageError(f"--grid must be comma-separated numbers, got {grid!r}.") from e
        with progress("calibrate") as say, progress_bar("questions") as bar:
            result = api.calibrate_medcog(
                cfg,
                api.Benchmark(benchmark, fmt, limit=limit),  # type: ignore[arg-type]
                output,
                api.Goal(values, objective, budget),  # type: ignore[arg-type]
                over=api.StoreChoice(bundle, neo4j),
                settings_out=settings_out,
                progress=say,
                tick=lambda label, done, total: bar(done, total, label),
            )
        if not json_mode:
            out.print("| tau_c | tau_f | tau_k | accuracy | USD/question | routes |", markup=False)
            out.print("|---:|---:|---:|---:|---:|---|", markup=False)
            for row in result.top:
                routes = ", ".join(f"{r} {n}" for r, n in row["routes"].items() if n)
                out.print(
                    f"| {row['tau_c']} | {row['tau_f']} | {row['tau_k']} | {row['accuracy']} | "
                    f"{row['cost_per_question']} | {routes} |",
                    markup=False,
                    highlight=False,
                )
            out.print(
                f"[dim]{result.questions} questions rated and answered by every route "
                f"({result.unrated} unrated); thresholds written to {result.settings}[/]"
            )
        finish(True, {"command": "calibrate medcog", **result.as_dict()}, json_mode=json_mode)
