"""The evaluation harness: run strategies (and MetaKGRAG ablations) over the same questions and compare them.

Per run (a strategy, or metakgrag with ablation switches) it writes ``answers-<label>.jsonl``, one row per
question, appended as each answer arrives; a re-run with the same output folder reuses the rows already
there (questions are matched by id), so an interrupted evaluation resumes. ``summary.json`` and
``comparison.md`` then hold, per run: accuracy, wrong, fail, LLM calls, tokens, cost, latency p50/p95,
retrieval p50/p95, evidence answer-recall (share of questions whose gold answer text is an entity of the
evidence) and the path refinement rate (share of final paths that differ from their initial path).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metakg.qa_engine.core import Ablation, Answer, QAContext, Question
from metakg.qa_engine.strategies import answer_question, make_strategy
from metakg.schemas.tables import match_key
from metakg.text_processing import lemma_key

Tick = Callable[[str, int, int], None]


@dataclass(frozen=True)
class RunSpec:
    """One strategy to evaluate, with its MetaKGRAG ablation switches."""

    strategy: str
    ablation: Ablation = field(default_factory=Ablation)

    @property
    def label(self) -> str:
        """``metakgrag`` or ``metakgrag[no_relevance+no_restart]``."""
        return self.strategy if self.ablation.label == "full" else f"{self.strategy}[{self.ablation.label}]"


def run_specs(strategies: Sequence[str], ablations: Sequence[str]) -> list[RunSpec]:
    """The runs for ``--strategy a,b`` and ``--ablation x`` options (``all``: each switch alone).

    Each ablation value is one metakgrag run (switches joined by commas); ``none`` is the full method.

    Raises:
        UsageError: an unknown strategy; ValueError: an unknown switch.
    """
    specs = [RunSpec(s) for s in dict.fromkeys(s.strip() for s in strategies if s.strip())]
    for spec in specs:
        make_strategy(spec.strategy)  # fails early on an unknown name
    values: list[str] = []
    for value in ablations:
        values.extend(Ablation.NAMES if value.strip() == "all" else [value])
    for value in values:
        spec = RunSpec("metakgrag", Ablation.parse(value))
        if spec not in specs:
            specs.append(spec)
    return specs


def _key(text: str) -> str:
    return lemma_key(match_key(text))


def evidence_recall(answer: Answer, gold_text: str | None) -> bool | None:
    """True when the gold answer text names an entity of the evidence (None: no gold text or no graph use)."""
    if not gold_text or answer.strategy == "llm_only":
        return None
    gold = _key(gold_text)
    return any(_key(name) == gold for path in answer.evidence for h, _, t in path.triples for name in (h, t))


def record(question: Question, answer: Answer) -> dict[str, Any]:
    """The JSONL row of one answer: the question, gold, verdict, evidence, trace and usage."""
    correct = None
    if question.answer is not None and question.choices:
        correct = answer.status == "ok" and answer.choice == question.answer
    elif question.answer is not None and answer.status == "ok":
        correct = _key(answer.text) == _key(question.answer)
    trace = answer.trace
    return {
        "question_id": question.id,
        "question": question.text,
        "gold": question.answer,
        "gold_text": question.answer_text,
        "correct": correct,
        "evidence_recall": evidence_recall(answer, question.answer_text),
        "paths_total": len(trace.get("paths", [])),
        "paths_refined": trace.get("refined_paths", 0),
        "cycles": trace.get("cycles", 0),
        **answer.to_dict(),
    }


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, failures, usage, latency and the retrieval metrics of one run's rows."""
    n = len(rows)
    correct = sum(1 for r in rows if r["correct"] is True)
    fail = sum(1 for r in rows if r["status"] == "fail")
    recalls = [r["evidence_recall"] for r in rows if r["evidence_recall"] is not None]
    paths = sum(r["paths_total"] for r in rows)
    usage = [r["usage"] for r in rows]
    total_ms = [u["total_ms"] for u in usage]
    retrieval_ms = [u["retrieval_ms"] for u in usage]
    return {
        "questions": n,
        "correct": correct,
        "accuracy": round(correct / n, 4) if n else None,
        "wrong": n - correct - fail,
        "fail": fail,
        "evidence_recall": round(sum(recalls) / len(recalls), 4) if recalls else None,
        "prr": round(sum(r["paths_refined"] for r in rows) / paths, 4) if paths else None,
        "cycles_per_question": round(sum(r["cycles"] for r in rows) / n, 3) if n else None,
        "llm_calls": sum(u["llm_calls"] for u in usage),
        "cache_hits": sum(u["cache_hits"] for u in usage),
        "tokens": sum(u["tokens"] for u in usage),
        "calls_per_question": round(sum(u["llm_calls"] for u in usage) / n, 3) if n else None,
        "tokens_per_question": round(sum(u["tokens"] for u in usage) / n, 1) if n else None,
        "cost_usd": round(sum(u["cost_usd"] for u in usage), 6),
        "latency_p50_ms": _percentile(total_ms, 50),
        "latency_p95_ms": _percentile(total_ms, 95),
        "retrieval_p50_ms": _percentile(retrieval_ms, 50),
        "retrieval_p95_ms": _percentile(retrieval_ms, 95),
    }


COLUMNS = (
    ("questions", "questions"),
    ("accuracy", "accuracy"),
    ("wrong", "wrong"),
    ("fail", "fail"),
    ("evidence_recall", "evidence recall"),
    ("prr", "PRR"),
    ("calls_per_question", "LLM calls/q"),
    ("tokens_per_question", "tokens/q"),
    ("cost_usd", "cost USD"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p95_ms", "p95 ms"),
    ("retrieval_p50_ms", "retrieval p50 ms"),
)


def comparison_table(summary: dict[str, dict[str, Any]]) -> str:
    """A Markdown table with one row per run."""
    head = "| run | " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|---|" + "---:|" * len(COLUMNS)
    rows = [
        f"| {label} | " + " | ".join("-" if s[key] is None else str(s[key]) for key, _ in COLUMNS) + " |"
        for label, s in summary.items()
    ]
    return "\n".join([head, rule, *rows]) + "\n"


def _done_rows(path: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """Rows already written for the wanted question ids (a torn last line is dropped)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("question_id") in wanted:
            done[row["question_id"]] = row
    return done


async def evaluate(
    questions: Sequence[Question],
    specs: Sequence[RunSpec],
    ctx: QAContext,
    out_dir: Path,
    *,
    resume: bool = True,
    tick: Tick | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every spec over ``questions``; write the per-question JSONL, ``summary.json`` and ``comparison.md``.

    Returns:
        The summary keyed by run label.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict[str, Any]] = {}
    ids = {q.id for q in questions}
    for spec in specs:
        strategy = make_strategy(spec.strategy, spec.ablation)
        path = out_dir / f"answers-{spec.label}.jsonl"
        done = _done_rows(path, ids) if resume else {}
        rows: list[dict[str, Any]] = []
        with path.open("w", encoding="utf-8") as fh:
            for row in done.values():  # rewrite the reused rows first: the file ends whole
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            for number, question in enumerate(questions, start=1):
                row = done.get(question.id) or record(
                    question, await answer_question(strategy, question, ctx, label=spec.label)
                )
                if question.id not in done:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    fh.flush()
                rows.append(row)
                if tick is not None:
                    tick(spec.label, number, len(questions))
        summary[spec.label] = summarise(rows) | {"reused": len(done)}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out_dir / "comparison.md").write_text(comparison_table(summary), encoding="utf-8")
    return summary
