"""The evaluation harness with a scripted LLM: rows, summary figures, comparison table, resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from metakg.config import QASettings
from metakg.errors import UsageError
from metakg.llm.scripted import ScriptedClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Question
from metakg.qa_engine.evaluate import RunSpec, evaluate, run_specs
from metakg.qa_engine.strategies import REGISTRY
from metakg.schemas.tables import conform_edges, conform_nodes
from tests.unit.qa_engine.handmade import QUESTION, AxisEmbedder, store

QUESTIONS = [
    Question(QUESTION, (("A", "zeta"), ("B", "bridge")), "q1", "A", "zeta"),
    Question(QUESTION + " ", (("A", "zeta"), ("B", "bridge")), "q2", "B", "bridge"),
    Question(" ", (("A", "zeta"),), "q3", "A", "zeta"),
]


def run(
    out: Path, specs: list[RunSpec], client: ScriptedClient | None = None, **options: bool
) -> tuple[dict[str, dict[str, object]], ScriptedClient]:
    client = client or ScriptedClient({"key concepts": "alpha\nbeta", "Reply with the letter": "Answer: A"})
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=SETTINGS, llm=client)
    return asyncio.run(evaluate(QUESTIONS, specs, ctx, out, REGISTRY, **options)), client


SETTINGS = QASettings.model_validate({"metakgrag": {"path_hops": 2}})


def test_answers_given_over_another_graph_settings_or_model_are_not_reused(tmp_path: Path) -> None:
    """A resumed run reuses a saved answer only when it would be given the same way: the old answers are
    never reported as those of the run asked for."""
    spec = RunSpec("metakgrag")
    run(tmp_path, [spec])

    def again(ctx: QAContext) -> int:  # failed rows kept too, so every row counts
        summary = asyncio.run(evaluate(QUESTIONS, [spec], ctx, tmp_path, REGISTRY, keep_failed=True))
        return int(summary["metakgrag"]["reused"])

    def context(**changes: Any) -> QAContext:
        client = ScriptedClient({"key concepts": "alpha\nbeta", "Reply with the letter": "Answer: A"})
        return QAContext(**({"store": store(), "embedder": AxisEmbedder(), "settings": SETTINGS, "llm": client}
                            | changes))  # fmt: skip

    assert again(context()) == len(QUESTIONS)  # the same run: every answer reused
    other = QASettings.model_validate({"metakgrag": {"path_hops": 3}})
    assert again(context(settings=other)) == 0  # another setting: asked again
    assert again(context()) == 0  # and back: the rows now hold the other setting's answers
    again(context())
    bigger = store()
    omega = conform_nodes(
        pl.DataFrame({"id": ["kg:hand/omega"], "name": ["omega"], "type": ["concept"], "source": "hand"})
    )
    bigger.upsert(omega, conform_edges(pl.DataFrame(schema=dict.fromkeys(("src", "dst", "rel", "source"), pl.String))))
    assert again(context(store=bigger)) == 0  # another graph
    model = ScriptedClient({"key concepts": "alpha\nbeta", "Reply with the letter": "Answer: A"}, model="other")
    assert again(context(llm=model)) == 0  # another model


def test_rows_summary_table_and_resume(tmp_path: Path) -> None:
    specs = run_specs(["llm_only", "metakgrag"], ["no_cycle"], REGISTRY)
    assert [s.label for s in specs] == ["llm_only", "metakgrag", "metakgrag[no_cycle]"]
    summary, client = run(tmp_path, specs)
    assert set(summary) == {"llm_only", "metakgrag", "metakgrag[no_cycle]", "ORACLE"}
    oracle = summary["ORACLE"]  # the best run per question: only q1 is right in any run
    assert (oracle["questions"], oracle["correct"], oracle["accuracy"]) == (3, 1, 0.3333)
    assert oracle["over"] == ["llm_only", "metakgrag", "metakgrag[no_cycle]"]
    full = summary["metakgrag"]
    assert (full["questions"], full["correct"], full["accuracy"], full["wrong"], full["fail"]) == (3, 1, 0.3333, 1, 1)
    assert full["llm_calls"] == 4 and full["calls_per_question"] == pytest.approx(4 / 3, abs=1e-3)
    assert full["tokens"] > 0 and full["latency_p50_ms"] is not None and full["retrieval_p95_ms"] is not None
    assert full["evidence_recall"] is not None and 0 <= full["evidence_recall"] <= 1
    assert summary["metakgrag[no_cycle]"]["prr"] == 0.0 and summary["metakgrag[no_cycle]"]["cycles_per_question"] == 0
    assert summary["llm_only"]["evidence_recall"] is None and summary["llm_only"]["llm_calls"] == 2
    assert "prr" not in summary["llm_only"] and full["evidence_entities_per_question"] > 0
    rows = [json.loads(line) for line in (tmp_path / "answers-metakgrag.jsonl").read_text().splitlines()]
    assert [r["question_id"] for r in rows] == ["q1", "q2", "q3"]
    assert [r["correct"] for r in rows] == [True, False, False]
    assert rows[2]["status"] == "fail" and "empty" in rows[2]["reason"]
    assert rows[0]["evidence"] and rows[0]["trace"]["paths"]
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    table = (tmp_path / "comparison.md").read_text().splitlines()
    rows_of_table = [line for line in table if line.startswith("|")]
    assert table[0].startswith("| run | questions | accuracy") and len(rows_of_table) == 2 + 4
    assert any(line.startswith("- inference density against medagentsbench") for line in table)  # the fit, named
    assert table[0].endswith("| PRR | cycles/q | vs full run |")
    assert table[2].endswith("| - | - | - |")  # llm_only has no PRR, and no full run to be compared with
    paired = summary["metakgrag[no_cycle]"]["versus"]  # the ablation against the full run, question by question
    assert paired["run"] == "metakgrag" and paired["correct"]["questions"] == 3
    assert table[4].startswith("| metakgrag[no_cycle] |") and "answers -" in table[4].rsplit("|", 2)[1]
    calls = len(client.calls)
    again, client2 = run(tmp_path, specs)  # resume: answered rows are reused; the failed q3 is asked again
    assert len(client2.calls) == 0 and calls == 2 + 4 + 4  # (q3 fails before any LLM call)
    stable = {"reused", "latency_p50_ms", "latency_p95_ms", "retrieval_p50_ms", "retrieval_p95_ms"}
    assert [{k: v for k, v in s.items() if k not in stable} for s in again.values()] == [
        {k: v for k, v in s.items() if k not in stable} for s in summary.values()
    ]
    assert all(v["reused"] == 2 for label, v in again.items() if label != "ORACLE")


def test_a_torn_answers_file_resumes_from_its_whole_rows(tmp_path: Path) -> None:
    spec = RunSpec("llm_only")
    run(tmp_path, [spec])
    path = tmp_path / "answers-llm_only.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:20])  # killed while writing the second row
    summary, client = run(tmp_path, [spec])
    assert summary["llm_only"]["reused"] == 1 and len(client.calls) == 1  # q2 asked again; q3 fails before the LLM
    assert len(path.read_text().splitlines()) == 3


def test_a_question_changed_under_its_id_is_asked_again(tmp_path: Path) -> None:
    spec = RunSpec("llm_only")
    run(tmp_path, [spec])
    # a line inserted above shifts the ids: q1 now stands for another question, q2 for another gold
    changed = [Question("What is aspirin?", QUESTIONS[0].choices, "q1", "A", "zeta"), QUESTIONS[1]]
    changed[1] = Question(QUESTIONS[1].text, QUESTIONS[1].choices, "q2", "A", "zeta")
    client = ScriptedClient({"key concepts": "alpha\nbeta", "Reply with the letter": "Answer: A"})
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), settings=SETTINGS, llm=client)
    summary = asyncio.run(evaluate([*changed, QUESTIONS[2]], [spec], ctx, tmp_path, REGISTRY, keep_failed=True))
    assert summary["llm_only"]["reused"] == 1 and len(client.calls) == 2  # only q3's row still stands
    rows = [json.loads(line) for line in (tmp_path / "answers-llm_only.jsonl").read_text().splitlines()]
    assert {r["question_id"]: (r["question"], r["gold"]) for r in rows} == {
        "q1": ("What is aspirin?", "A"),
        "q2": (QUESTIONS[1].text, "A"),
        "q3": (" ", "A"),
    }


def test_run_specs_all_ablations() -> None:
    labels = [s.label for s in run_specs(["metakgrag"], ["all", "no_restart,no_relevance", "none"], REGISTRY)]
    assert labels == [
        "metakgrag",
        "metakgrag[no_completeness]",
        "metakgrag[no_relevance]",
        "metakgrag[no_restart]",
        "metakgrag[no_cycle]",
        "metakgrag[no_relevance+no_restart]",
    ]
    # ablations name metakgrag's switches, so they run even when only baselines are chosen
    assert [s.label for s in run_specs(["kg_rag"], ["no_cycle"], REGISTRY)] == ["kg_rag", "metakgrag[no_cycle]"]
    with pytest.raises(UsageError, match="unknown switch in 'no_magic'"):
        run_specs(["metakgrag"], ["no_magic"], REGISTRY)
    with pytest.raises(UsageError, match="unknown strategy"):
        run_specs(["graphrag"], [], REGISTRY)


def test_failed_answers_are_asked_again_unless_kept(tmp_path: Path) -> None:
    from metakg.errors import LLMError

    def down(request: object) -> str:
        raise LLMError("connection refused")

    spec = RunSpec("llm_only")
    first, _ = run(tmp_path, [spec], ScriptedClient(down))
    assert first["llm_only"]["fail"] == 3 and first["llm_only"]["llm_failures"] == 2  # q3 fails before the LLM
    kept, client = run(tmp_path, [spec], keep_failed=True)
    assert kept["llm_only"]["reused"] == 3 and len(client.calls) == 0
    back, client = run(tmp_path, [spec])  # the LLM is back: the failed answers are asked again
    assert back["llm_only"]["reused"] == 0 and len(client.calls) == 2 and back["llm_only"]["fail"] == 1


def test_repeated_question_ids_are_refused(tmp_path: Path) -> None:
    from metakg.errors import InputDataError

    twice = [QUESTIONS[0], QUESTIONS[0]]
    ctx = QAContext(store=store(), embedder=AxisEmbedder(), llm=ScriptedClient({}, default="Answer: A"))
    with pytest.raises(InputDataError, match="question ids repeat \\(q1\\)"):
        asyncio.run(evaluate(twice, [RunSpec("llm_only")], ctx, tmp_path, REGISTRY))
