"""``metakg eval-extraction``: extraction scored on a Text2KGBench-layout dataset (the seven figures of the
benchmark per ontology; see :mod:`metakg.extractors.text2kgbench`).

With ``responses``, a folder of response files (one per ontology, found by the ontology's id in the file
name, such as the benchmark authors' baseline runs) is scored with no LLM. Without it, each ontology's test
sentences go through metakg's own ontology-guided extraction and its triples are scored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metakg.api._shared import JsonResult, Progress, at_least_one, quiet
from metakg.errors import InputDataError, UsageError
from metakg.extractors.text2kgbench import (
    BenchOntology,
    OntologyScore,
    Responses,
    Sentence,
    dataset_average,
    dataset_ontologies,
    read_responses,
    read_sentences,
    responses_file,
    score_ontology,
)
from metakg.schemas.locks import require_folder, write_output

__all__ = ["EVAL_EXTRACTION_COLUMNS", "ExtractionEval", "Responder", "evaluate_extraction", "extraction_table"]

#: the table's columns: (key, header)
EVAL_EXTRACTION_COLUMNS = (
    ("sentences", "sentences"),
    ("answered", "answered"),
    ("precision", "P"),
    ("recall", "R"),
    ("f1", "F1"),
    ("onto_conf", "onto conf"),
    ("sub_halluc", "sub halluc"),
    ("rel_halluc", "rel halluc"),
    ("obj_halluc", "obj halluc"),
)

#: what answers an ontology's sentences when no response folder is given: sentences in, the system triples of
#: each answered sentence (by id) out, with figures of the run (calls, tokens) to report
Responder = Callable[[BenchOntology, Sequence[Sentence]], Responses]


@dataclass(frozen=True)
class ExtractionEval(JsonResult):
    """Per-ontology figures (``{"ontology", "sentences", "answered", "precision", ...}``), their mean, what
    was scored (``responses`` folder or ``model``), and the run's figures (calls, tokens) when one ran."""

    ok: bool
    dataset: str
    source: str
    ontologies: list[dict[str, Any]]
    average: dict[str, float]
    run: dict[str, Any] = field(default_factory=dict)
    missing_responses: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def table(self) -> str:
        """The figures as a Markdown table, one row per ontology and the average last."""
        return extraction_table(self.ontologies, self.average)


def extraction_table(rows: Sequence[dict[str, Any]], average: dict[str, float]) -> str:
    """Per-ontology rows and the average as a Markdown table."""
    header = "| ontology | " + " | ".join(h for _, h in EVAL_EXTRACTION_COLUMNS) + " |"
    lines = [header, "|" + "---|" * (len(EVAL_EXTRACTION_COLUMNS) + 1)]

    def cell(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    for row in rows:
        lines.append(f"| {row['ontology']} | " + " | ".join(cell(row[k]) for k, _ in EVAL_EXTRACTION_COLUMNS) + " |")
    sentences = sum(r["sentences"] for r in rows)
    answered = sum(r["answered"] for r in rows)
    figures = " | ".join(cell(average[k]) for k, _ in EVAL_EXTRACTION_COLUMNS[2:])
    lines.append(f"| **average** | {sentences} | {answered} | {figures} |")
    return "\n".join(lines) + "\n"


def evaluate_extraction(
    dataset_dir: Path,
    *,
    ontologies: Sequence[str] = (),
    limit: int | None = None,
    responses: Path | None = None,
    responder: Responder | None = None,
    source: str = "",
    out_dir: Path | None = None,
    progress: Progress | None = None,
) -> ExtractionEval:
    """Score extraction on a Text2KGBench-layout ``dataset_dir`` (``ontologies`` picks some by id; ``limit``
    takes each ontology's first N ground-truth sentences).

    The triples scored are those of the ``responses`` folder's files, or those ``responder`` returns for each
    ontology's sentences (the api's :func:`metakg.api.extract.benchmark_responder` runs metakg's extraction).
    With ``out_dir``: ``summary.json``, ``summary.md`` and ``<ontology>.jsonl`` (one row per sentence).

    Raises:
        UsageError: neither or both of ``responses`` and ``responder``; a ``limit`` below 1.
        InputDataError: the folder is not such a dataset, an ontology id is unknown, a file cannot be read.
    """
    say = progress or quiet
    if limit is not None:
        at_least_one("--limit", limit)
    if (responses is None) == (responder is None):
        raise UsageError("score either a folder of --responses or a run of the extraction, not both or neither")
    if responses is not None and not responses.is_dir():
        raise InputDataError(f"{responses}: not a folder of response files")
    if out_dir is not None:
        require_folder(out_dir, "the evaluation's output")
    picked = dataset_ontologies(dataset_dir, ontologies)
    scores: list[OntologyScore] = []
    missing: list[str] = []
    warnings: list[str] = [f"{b.short_id}: {w}" for b in picked for w in b.ontology.warnings]
    run: dict[str, Any] = {}
    for number, bench in enumerate(picked, start=1):
        sentences = read_sentences(bench.ground_truth, limit)
        say(f"ontology {number}/{len(picked)}: {bench.short_id} ({len(sentences)} sentences)")
        if responses is not None:
            found = responses_file(responses, bench.short_id)
            if found is None:
                missing.append(bench.short_id)
            answers = read_responses(found) if found is not None else {}
        else:
            assert responder is not None
            responded = responder(bench, sentences)
            answers = responded.answers
            for key, value in responded.figures.items():
                if isinstance(value, int | float):
                    run[key] = run.get(key, 0) + value
        scores.append(score_ontology(bench, sentences, answers))
    average = dataset_average(scores)
    result = ExtractionEval(
        True,
        str(dataset_dir),
        source or (str(responses) if responses is not None else "extraction"),
        [s.as_dict() for s in scores],
        {metric: round(value, 4) for metric, value in average.items()},
        run,
        missing,
        warnings,
    )
    if out_dir is not None:
        _write(out_dir, result, scores)
    return result


def _write(out_dir: Path, result: ExtractionEval, scores: Sequence[OntologyScore]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_output(out_dir / "summary.json", json.dumps(result.as_dict(), indent=2) + "\n")
    write_output(out_dir / "summary.md", result.table())
    for score in scores:
        lines = (json.dumps(row.as_dict(), ensure_ascii=False) for row in score.rows)
        write_output(out_dir / f"{score.ontology}.jsonl", "".join(f"{line}\n" for line in lines))
