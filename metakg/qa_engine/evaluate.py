"""The evaluation harness: run strategies (and their variants, e.g. MetaKGRAG ablations) over the same
questions and compare them.

Per run (a strategy, possibly with switches on) it writes ``answers-<label>.jsonl``, one row per
question, appended as each answer arrives; a re-run with the same output folder reuses the rows already
there (questions are matched by id; failed answers are asked again), so an interrupted evaluation resumes.
``summary.json`` and ``comparison.md`` then hold, per run: accuracy (free text: the reply contains a gold
answer; exact matches beside it), wrong, fail, LLM calls, tokens, cost, latency p50/p95, retrieval p50/p95,
the evidence metrics of :mod:`metakg.qa_engine.metrics` (answer recall, recall at an equal budget of
entities and of triples, entities, triples and tokens per question, on-path share), and the strategy's own
figures (MetaKGRAG: the path refinement rate and cycles per question).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metakg.errors import InputDataError, UsageError
from metakg.llm.usage import percentile
from metakg.progress import Tick
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, Question
from metakg.qa_engine.efficiency import DEFAULT_SCALING, ReferenceSet, iie, inference_density, load_reference
from metakg.qa_engine.metrics import EvidenceScorer, answer_match, with_gold_entities
from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.strategy import Strategy
from metakg.schemas.bundle import write_bundle
from metakg.schemas.locks import open_output, write_output


@dataclass(frozen=True)
class RunSpec:
    """One run to evaluate: a strategy and the switches turned on for it (e.g. MetaKGRAG ablations)."""

    strategy: str
    switches: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``metakgrag`` or ``metakgrag[no_relevance+no_restart]``."""
        return f"{self.strategy}[{'+'.join(self.switches)}]" if self.switches else self.strategy


def run_specs(strategies: Sequence[str], variants: Sequence[str], registry: StrategyRegistry) -> list[RunSpec]:
    """The runs for ``--strategy a,b`` and ``--ablation x`` options.

    Each variant value names switches joined by commas (``no_relevance,no_restart``: one run with both on),
    ``none`` (the strategy as configured) or ``all`` (one run per switch). A variant applies to the chosen
    strategies that offer its switches, else to the registered ones that do (MetaKGRAG's ablations run
    without naming metakgrag).

    Raises:
        UsageError: an unknown strategy, or a switch no strategy offers.
    """
    names = list(dict.fromkeys(s.strip() for s in strategies if s.strip()))
    specs = [RunSpec(registry.get(name).name) for name in names]
    with_switches = [n for n in names if registry.get(n).switches()] or [
        n for n in registry.names if registry.get(n).switches()
    ]
    for value in variants:
        items = [v.strip() for v in value.split(",") if v.strip() and v.strip() != "none"]
        matched = items == ["all"]
        for name in with_switches:
            offered = registry.get(name).switches()
            runs: list[tuple[str, ...]]
            if items == ["all"]:
                runs = [(s,) for s in offered]
            elif all(i in offered for i in items):
                runs, matched = [tuple(s for s in offered if s in items)], True
            else:
                continue
            for switches in runs:
                spec = RunSpec(name, switches)
                if spec not in specs:
                    specs.append(spec)
        if not matched:
            offered_all = sorted({s for n in with_switches for s in registry.get(n).switches()})
            raise UsageError(f"unknown switch in {value!r}; the strategies offer: {', '.join(offered_all) or 'none'}.")
    return specs


def record(question: Question, answer: Answer, strategy: Strategy[Any], scorer: EvidenceScorer) -> dict[str, Any]:
    """The JSONL row of one answer: the question, gold, verdict, evidence metrics, trace, usage and the
    strategy's own metrics.

    ``correct``: the gold letter for a multiple-choice question; for a free-text one, a reply containing a
    gold answer (normalised, :func:`~metakg.qa_engine.metrics.answer_match`), with ``exact`` beside it.
    """
    correct = exact = None
    if question.answer is not None and question.choices:
        correct = exact = answer.status == "ok" and answer.choice == question.answer
    elif question.gold_texts and answer.status == "ok":
        correct, exact = answer_match(answer.text, question.gold_texts)
    evidence = scorer.score(question, answer) if strategy.uses_graph else {}
    return {
        "question_id": question.id,
        "question": question.text,
        "gold": question.answer,
        "gold_text": question.answer_text,
        "gold_answers": list(question.gold_texts),
        "correct": correct,
        "exact": exact,
        "evidence_recall": evidence.get("evidence_recall"),
        "evidence_entities": evidence.get("evidence_entities"),
        "evidence_metrics": evidence,
        "metrics": strategy.metrics(answer),
        **answer.to_dict(),
    }


def _mean(values: Sequence[float | int | None], digits: int = 4) -> float | None:
    found = [float(v) for v in values if v is not None]
    return round(sum(found) / len(found), digits) if found else None


def hit_at(row: dict[str, Any], budget: int, unit: str = "entities") -> bool | None:
    """Whether the row's first gold answer is among its first ``budget`` evidence entities (or triples);
    None when the question has no gold answer in the graph to find."""
    evidence = row.get("evidence_metrics") or {}
    if evidence.get("evidence_recall") is None:
        return None
    rank = evidence[f"gold_rank_{unit}"]
    return rank is not None and rank <= budget


def recall_at(rows: Sequence[dict[str, Any]], budget: int, unit: str = "entities") -> float | None:
    """The share of questions with a gold answer whose first gold answer is among the first ``budget``
    evidence entities (or triples) in the strategy's order."""
    hits = [h for h in (hit_at(r, budget, unit) for r in rows) if h is not None]
    return round(sum(hits) / len(hits), 4) if hits else None


def sign_test(lost: int, gained: int) -> float:
    """The exact two-sided p-value of McNemar's test for paired outcomes: the chance, were both runs equally
    good, of a split of the ``lost + gained`` questions where they differ at least this uneven. Not rounded:
    a table rounds it (:func:`p_text`)."""
    from scipy.stats import binom  # the statistics load only when an evaluation compares runs

    n = lost + gained
    return 1.0 if n == 0 else min(1.0, 2 * float(binom.cdf(min(lost, gained), n, 0.5)))


def versus(
    base: Sequence[dict[str, Any]], other: Sequence[dict[str, Any]], budget: int, graded: bool = False
) -> dict[str, Any]:
    """``other`` against ``base`` question by question (an ablation against its full run): the questions
    whose gold answer ``base`` finds within the ``budget`` and ``other`` does not (``lost``) and the reverse
    (``gained``), with the sign test's p-value; with ``graded`` answers, the same for correct answers. Only
    questions both runs were scored on count (``questions``)."""
    mine = {r["question_id"]: r for r in other}
    pairs = [(r, mine[r["question_id"]]) for r in base if r["question_id"] in mine]

    def split(outcome: Any) -> dict[str, Any]:
        both = [(outcome(a), outcome(b)) for a, b in pairs]
        both = [(a, b) for a, b in both if a is not None and b is not None]
        lost = sum(1 for a, b in both if a and not b)
        gained = sum(1 for a, b in both if b and not a)
        return {"questions": len(both), "lost": lost, "gained": gained, "p_value": sign_test(lost, gained)}

    out = {"recall_at_budget": split(lambda r: hit_at(r, budget))}
    if graded:
        out["correct"] = split(lambda r: r.get("correct"))
    return out


def paired_text(split: dict[str, Any]) -> str:
    """One paired comparison as a table shows it: ``-3 +1 (p 0.625)``."""
    return f"-{split['lost']} +{split['gained']} (p {p_text(split['p_value'])})"


def versus_text(figures: dict[str, Any]) -> str | None:
    """The comparison table's cell for a run's paired figures: ``recall@budget -3 +1 (p 0.625)``, then
    ``answers ...`` when an LLM graded them; each only when some question was scored by both runs."""
    paired = figures.get("versus") or {}
    shown = [
        f"{title} {paired_text(paired[key])}"
        for key, title in (("recall_at_budget", "recall@budget"), ("correct", "answers"))
        if (paired.get(key) or {}).get("questions")
    ]
    return "; ".join(shown) or None


def p_text(p: float) -> str:
    """A p-value as a table shows it: three significant digits, and ``<0.001`` below that."""
    return "<0.001" if p < 0.001 else f"{p:.3g}"


def add_efficiency(
    summary: dict[str, dict[str, Any]], scaling: str | Path | ReferenceSet, reference: str | None
) -> None:
    """Inference density (against the curve fitted to ``scaling``: a named set, or a file of the user's own
    runs, see :func:`~metakg.qa_engine.efficiency.load_reference`) and IIE (against the ``reference`` run,
    default ``medcog[route=scot]`` when it ran) of every run, in place. Both use the list cost per question
    (cache hits priced as if fresh).

    Raises:
        UsageError: an unknown reference set or reference run.
        InputDataError: a reference file that is wrong, or points that make no rising curve.
    """
    ref_set = scaling if isinstance(scaling, ReferenceSet) else load_reference(scaling)
    try:
        fit = ref_set.fit()
    except ValueError as e:
        raise InputDataError(f"scaling reference {ref_set.name}: {e}.") from e
    reference = reference or ("medcog[route=scot]" if "medcog[route=scot]" in summary else None)
    if reference is not None and reference not in summary:
        raise UsageError(f"the IIE reference run {reference!r} is not among the runs ({', '.join(summary)}).")
    ref = summary.get(reference) if reference else None
    for figures in summary.values():
        accuracy, cost = figures.get("accuracy"), figures.get("cost_per_question")
        if accuracy is None or cost is None:
            continue
        density, in_range = inference_density(fit, accuracy, cost)
        figures["inference_density"] = density
        figures["density_in_fitted_range"] = in_range
        if ref is not None and ref.get("accuracy") is not None:
            figures["iie"] = iie(accuracy, cost, ref["accuracy"], ref["cost_per_question"])
    for figures in summary.values():
        figures["scaling_fit"] = {
            "reference": ref_set.name,
            "source": ref_set.source,
            "a": round(fit.a, 5),
            "b": round(fit.b, 5),
            "r2": round(fit.r2, 4),
            "accuracy_range": [fit.low, fit.high],
        }
        figures["iie_reference"] = reference


def efficiency_notes(summary: dict[str, dict[str, Any]]) -> list[str]:
    """Lines under the comparison table: the scaling fit, the IIE reference, densities outside the fitted
    range, and each run's route distribution (MedCoG)."""
    notes: list[str] = []
    fits = [f["scaling_fit"] for f in summary.values() if "scaling_fit" in f]
    if fits:
        fit = fits[0]
        notes.append(
            f"inference density against {fit['reference']} ({fit['source']}): accuracy = {fit['a']} ln(cost) + "
            f"{fit['b']}, R\u00b2 {fit['r2']}, fitted on accuracies {fit['accuracy_range'][0]}-"
            f"{fit['accuracy_range'][1]}; cost/q is the list cost (cache hits priced as if fresh)."
        )
        outside = [label for label, f in summary.items() if f.get("density_in_fitted_range") is False]
        if outside:
            notes.append(f"outside the fitted accuracy range (density extrapolated): {', '.join(outside)}.")
        reference = next((f.get("iie_reference") for f in summary.values() if f.get("iie_reference")), None)
        if reference:
            notes.append(f"IIE: accuracy gained per extra USD per question over {reference}.")
    for label, figures in summary.items():
        routes = figures.get("routes")
        if isinstance(routes, dict) and any(routes.values()):
            shown = ", ".join(f"{r} {n}" for r, n in routes.items() if n)
            notes.append(f"{label} routes: {shown}.")
    return notes


def oracle_run(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """ORACLE over two or more runs: a question counts as correct when any run answered it correctly (the
    best strategy per question, chosen after the fact); None with fewer than two runs that were graded."""
    graded = {label: rows for label, rows in runs.items() if any(r["correct"] is not None for r in rows)}
    if len(graded) < 2:
        return None
    ids = list(dict.fromkeys(r["question_id"] for rows in graded.values() for r in rows))
    right = {r["question_id"] for rows in graded.values() for r in rows if r["correct"] is True}
    return {
        "questions": len(ids),
        "correct": len(right),
        "accuracy": round(len(right) / len(ids), 4) if ids else None,
        "over": list(graded),
    }


def _percentile(values: list[float], q: float) -> float | None:
    found = percentile(values, q)
    return None if found is None else round(found, 1)


def summarise(
    rows: Sequence[dict[str, Any]], strategy: type[Strategy[Any]] | Strategy[Any], *, budget: int = 10
) -> dict[str, Any]:
    """Accuracy, failures, usage, latency, evidence metrics (recall, recall at ``budget`` entities and
    triples, evidence size, on-path share), and the strategy's own figures of one run."""
    n = len(rows)
    correct = sum(1 for r in rows if r["correct"] is True)
    fail = sum(1 for r in rows if r["status"] == "fail")
    evidence = [r.get("evidence_metrics") or {} for r in rows]
    usage = [r["usage"] for r in rows]
    total_ms = [u["total_ms"] for u in usage]
    retrieval_ms = [u["retrieval_ms"] for u in usage]
    list_cost = sum(list_cost_of(u) for u in usage)
    return {
        "questions": n,
        "correct": correct,
        "accuracy": round(correct / n, 4) if n else None,
        "wrong": n - correct - fail,
        "fail": fail,
        "exact": sum(1 for r in rows if r.get("exact") is True),
        "evidence_recall": _mean([e.get("evidence_recall") for e in evidence]),
        "budget": budget,
        "recall_at_budget": recall_at(rows, budget),
        "recall_at_budget_triples": recall_at(rows, budget, "triples"),
        "evidence_entities_per_question": _mean([e.get("evidence_entities") for e in evidence], 2),
        "evidence_triples_per_question": _mean([e.get("evidence_triples") for e in evidence], 2),
        "evidence_tokens_per_question": _mean([e.get("evidence_tokens") for e in evidence], 1),
        "on_path_share": _mean([e.get("on_path_share") for e in evidence]),
        "llm_calls": sum(u["llm_calls"] for u in usage),
        "cache_hits": sum(u["cache_hits"] for u in usage),
        "llm_failures": sum(u.get("failures", 0) for u in usage),
        "tokens": sum(u["tokens"] for u in usage),
        "saved_tokens": sum(u.get("saved_tokens", 0) for u in usage),
        "calls_per_question": round(sum(u["llm_calls"] for u in usage) / n, 3) if n else None,
        "tokens_per_question": round(sum(u["tokens"] for u in usage) / n, 1) if n else None,
        "cost_usd": round(sum(u["cost_usd"] for u in usage), 6),
        "list_cost_usd": round(list_cost, 6),
        "cost_per_question": round(list_cost / n, 8) if n else None,
        "method_tokens_per_question": round(sum(u["tokens"] + u.get("saved_tokens", 0) for u in usage) / n, 1)
        if n
        else None,
        "latency_p50_ms": _percentile(total_ms, 50),
        "latency_p95_ms": _percentile(total_ms, 95),
        "retrieval_p50_ms": _percentile(retrieval_ms, 50),
        "retrieval_p95_ms": _percentile(retrieval_ms, 95),
    } | strategy.summarise([r.get("metrics") or {} for r in rows])


COLUMNS = (
    ("questions", "questions"),
    ("accuracy", "accuracy"),
    ("wrong", "wrong"),
    ("fail", "fail"),
    ("evidence_recall", "evidence recall"),
    ("recall_at_budget", "recall@budget"),
    ("evidence_entities_per_question", "entities/q"),
    ("evidence_triples_per_question", "triples/q"),
    ("evidence_tokens_per_question", "evidence tokens/q"),
    ("on_path_share", "on-path share"),
    ("calls_per_question", "LLM calls/q"),
    ("tokens_per_question", "tokens/q"),
    ("cost_per_question", "cost/q USD"),
    ("inference_density", "density"),
    ("iie", "IIE"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p95_ms", "p95 ms"),
    ("retrieval_p50_ms", "retrieval p50 ms"),
)


def comparison_table(summary: dict[str, dict[str, Any]], extra: Sequence[tuple[str, str]] = ()) -> str:
    """A Markdown table with one row per run: the shared columns, then ``extra`` (key, title) columns, and
    when a run was compared question by question with its full run (:func:`versus`), that comparison."""
    columns = [*COLUMNS, *extra]
    if any("versus" in s for s in summary.values()):
        columns.append(("versus", "vs full run"))

    def cell(s: dict[str, Any], key: str) -> str:
        shown = versus_text(s) if key == "versus" else s.get(key)
        return "-" if shown is None else str(shown)

    head = "| run | " + " | ".join(title for _, title in columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    rows = [f"| {label} | " + " | ".join(cell(s, key) for key, _ in columns) + " |" for label, s in summary.items()]
    return "\n".join([head, rule, *rows]) + "\n"


def _asked(question: Question) -> tuple[Any, ...]:
    """What a saved row must repeat to stand for ``question``: its text and gold (an id is a line number in
    most formats, and a line inserted above shifts every id)."""
    return (question.text, question.answer, list(question.gold_texts))


def graph_key(ctx: QAContext) -> str:
    """What identifies the graph answers were given over, for :func:`run_key`: its counts and the digest of
    its names the phrase index was read by (a new version of a bundle, another bundle or database differs;
    an edge moved with every count and name kept does not)."""
    return json.dumps({"counts": ctx.store.counts(), "names": ctx.services.names_digest}, sort_keys=True)


def run_key(graph: str, spec: RunSpec, strategy: Any, ctx: QAContext) -> str:
    """What a saved answer row must have been given under to be reused: the graph (:func:`graph_key`), the
    run, the strategy's settings with its switches, the shared ``[qa]`` settings (not other strategies'
    sections) and the LLM (none: retrieval only). A re-run after any of these changed asks again instead of
    reporting the old answers as new."""
    parts = {
        "graph": graph,
        "run": spec.label,
        "strategy": strategy.settings.model_dump(mode="json"),
        "qa": ctx.settings.model_dump(mode="json", exclude=set(ctx.settings.sections())),
        "llm": ctx.llm.model if ctx.llm is not None else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _done_rows(
    path: Path, wanted: dict[str, tuple[Any, ...]], *, keep_failed: bool, key: str
) -> dict[str, dict[str, Any]]:
    """Rows already written for the wanted questions (id: :func:`_asked`) under the same ``key``
    (:func:`run_key`), a row whose question or gold changed since left out (a torn last line is dropped too);
    failed answers only with ``keep_failed``, so a re-run asks them again (the LLM may be back)."""
    done: dict[str, dict[str, Any]] = {}
    if path.is_symlink() or not path.is_file():  # a link is refused when the file is written, never read
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("question_id") in wanted:
            same = (row.get("question"), row.get("gold"), row.get("gold_answers")) == wanted[row["question_id"]]
            if same and row.get("run_key") == key and (keep_failed or row.get("status") != "fail"):
                done[row["question_id"]] = row
            else:
                done.pop(row["question_id"], None)
    return done


def list_cost_of(usage: dict[str, Any]) -> float:
    """An answer's calls at list price, from its row's ``usage`` (rows written before list costs: what was
    billed)."""
    return float(usage.get("list_cost_usd", usage["cost_usd"]))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name)[:120] or "_"


def metric_columns(specs: Sequence[RunSpec], registry: StrategyRegistry) -> list[tuple[str, str]]:
    """The comparison-table columns the runs' strategies add, each once."""
    return list(dict.fromkeys(c for spec in specs for c in registry.get(spec.strategy).metric_columns))


async def evaluate(
    questions: Sequence[Question],
    specs: Sequence[RunSpec],
    ctx: QAContext,
    out_dir: Path,
    registry: StrategyRegistry,
    *,
    resume: bool = True,
    keep_failed: bool = False,
    budget: int = 10,
    scaling_reference: str | Path | ReferenceSet = DEFAULT_SCALING,
    iie_reference: str | None = None,
    tick: Tick | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every spec over ``questions``; write the per-question JSONL, ``summary.json`` and ``comparison.md``.

    Strategies are built by ``registry`` from the context's settings (``[qa.<name>]`` sections). Without an
    LLM in the context (retrieval only) the summary has no accuracy, correct or wrong counts.

    A re-run resumes from the rows already written, asking failed answers again unless ``keep_failed``, and
    a question whose text or gold is not the one its row answered.
    ``budget`` is the evidence budget (entities, and triples) of the recall-at-budget figures.
    With an LLM, each run gets its cost per question, its inference density against the
    ``scaling_reference`` curve and its IIE against the ``iie_reference`` run (default: MedCoG's fixed SCoT
    route when it ran); see :mod:`metakg.qa_engine.efficiency`.

    Returns:
        The summary keyed by run label.

    Raises:
        InputDataError: two questions share an id (rows are matched by id, so one would count twice).
    """
    repeated = sorted(i for i, n in Counter(q.id for q in questions).items() if n > 1)
    if repeated:
        raise InputDataError(f"question ids repeat ({', '.join(repeated[:5])}); each question needs its own id.")
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict[str, Any]] = {}
    scorer = EvidenceScorer(ctx.store, max_evidence=ctx.settings.max_evidence)
    answered: dict[str, list[dict[str, Any]]] = {}
    questions = [with_gold_entities(q, lambda text: ctx.services.phrases.find(text)) for q in questions]
    asked = {q.id: _asked(q) for q in questions}
    graph = graph_key(ctx)  # after the gold entities: the phrase index has read the names
    for spec in specs:
        strategy = registry.create(spec.strategy, ctx.settings, spec.switches)
        path = out_dir / f"answers-{spec.label}.jsonl"
        key = run_key(graph, spec, strategy, ctx)
        done = _done_rows(path, asked, keep_failed=keep_failed, key=key) if resume else {}
        rows: list[dict[str, Any]] = []
        with open_output(path) as fh:
            for reused in done.values():  # rewrite the reused rows first: the file ends whole
                fh.write(json.dumps(reused, ensure_ascii=False) + "\n")
            for number, question in enumerate(questions, start=1):
                row = done.get(question.id) or {}
                if not row:
                    answer = await strategy.answer(question, ctx)
                    row = record(question, answer, strategy, scorer) | {"run_key": key}
                    if answer.local_graph is not None:  # an agent's own graph, as a bundle beside the answers
                        folder = out_dir / "local-kg" / _safe(spec.label) / _safe(question.id)
                        write_bundle(folder, answer.local_graph)
                        row["local_kg"] = str(folder)
                if question.id not in done:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    fh.flush()
                rows.append(row)
                if tick is not None:
                    tick(spec.label, number, len(questions))
        figures = summarise(rows, strategy, budget=budget) | {"reused": len(done)}
        if ctx.llm is None:  # retrieval only: nothing was answered, so there is no accuracy to report
            figures.update(correct=None, accuracy=None, wrong=None)
        summary[spec.label] = figures
        answered[spec.label] = rows
    for spec in specs:  # each variant against its strategy's full run, question by question
        if spec.switches and spec.strategy in answered:
            paired = versus(answered[spec.strategy], answered[spec.label], budget, graded=ctx.llm is not None)
            summary[spec.label]["versus"] = {"run": spec.strategy, **paired}
    if ctx.llm is not None:
        add_efficiency(summary, scaling_reference, iie_reference)
    oracle = oracle_run(answered)
    if oracle is not None and ctx.llm is not None:
        summary["ORACLE"] = oracle
    write_output(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    table = comparison_table(summary, metric_columns(specs, registry))
    notes = "".join(f"\n- {line}" for line in efficiency_notes(summary))
    write_output(out_dir / "comparison.md", table + (notes + "\n" if notes else ""))
    return summary
