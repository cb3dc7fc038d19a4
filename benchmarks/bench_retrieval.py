"""Retrieval quality per dataset: kg_rag, MetaKGRAG and its ablations in both presets, without an LLM.

Each dataset is split as the settings were tuned: the tuning part (never reported here) and the held-out
part, which this benchmark evaluates (`metakg eval --no-llm --skip N`, concepts by rules):

- CommonsenseQA, the MetaKGRAG authors' pilot KG and questions: tuned on the first 500, reported on 501-700;
- GenMedGPT-5K, the authors' pilot KG and patient questions (free text; the gold answer is the doctor's
  reply, scored by the graph entities it names): tuned on the first half, reported on the second;
- CMB-Exam Pharmacy, the authors' pilot KG and questions (Chinese, multiple choice): tuned on the first
  half, reported on the second;
- MetaQA 1-hop: the KB subset ingested as triples (`|`-separated), the questions whose full gold answer set
  is in the subset; tuned on the first half, reported on the second;
- ExplainCPE, the authors' pilot KG and questions (Chinese pharmacist exam, multiple choice; the answer
  letter is followed by an explanation): tuned on the first half, reported on the second;
- MetaQA-style 2- and 3-hop questions over the same KB, from metakg's own templates
  (``benchmarks/multihop.py``): tuned on the tuning half of the topic entities, reported on the held-out
  half, in the tuning templates' wording and in a second wording nobody tuned on, and over both wordings
  together (recalls and the lost and gained counts, added up; no p-value).

Per run: the number of questions, evidence recall, recall at an equal budget of 10 entities, evidence
entities, triples and tokens per question, the on-path share, retrieval p50, MetaKGRAG's refinement rate,
and for an ablation the questions it lost and gained against its preset's full method (with the sign
test's p-value).

Run: ``make bench`` or ``python -m benchmarks.bench_retrieval``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from benchmarks import multihop
from benchmarks.common import WORK, record, settings_and_data
from metakg import api
from metakg.config import Settings

CSQA_KG = "metakgrag_pilot/commonsenseqa__knowledge_graph.txt"
CSQA_QUESTIONS = "metakgrag_pilot/commonsenseqa__commonsenseqa.json"
GENMED_KG = "metakgrag_pilot/GenMedGPT-5K__knowledge_graph.txt"
GENMED_QUESTIONS = "metakgrag_pilot/GenMedGPT-5K__genmedgpt-5k.json"
CMB_KG = "metakgrag_pilot/CMB-Exam__Pharmacy__knowledge_graph.txt"
CMB_QUESTIONS = "metakgrag_pilot/CMB-Exam__Pharmacy__Pharmacy.json"
CPE_KG = "metakgrag_pilot/explainpe__knowledge_graph.txt"
CPE_QUESTIONS = "metakgrag_pilot/explainpe__explaincpe.json"
METAQA_KB = "metaqa/kb_subset_8107.txt"
METAQA_QUESTIONS = "metaqa/qa_test_1hop_closed_in_kb_subset.tsv"
KEYS = (
    "evidence_recall",
    "recall_at_budget",
    "evidence_entities_per_question",
    "evidence_triples_per_question",
    "evidence_tokens_per_question",
    "on_path_share",
    "retrieval_p50_ms",
    "prr",
)


def bundle(settings: Settings, triples: Path, dataset: str, separator: str = "\t") -> Path:
    """The triple file as an embedded bundle (built once into the work folder)."""
    out = WORK / f"retrieval_{dataset}"
    if not (out / "embeddings.parquet").is_file():
        api.ingest_triples(triples, dataset, out, settings, separator=separator)
        api.embed_bundle(out, settings)
    return out


def runs(settings: Settings, questions: Path, fmt: str, graph: Path, skip: int, name: str) -> dict[str, Any]:
    """kg_rag, and metakgrag with every ablation in the default and the paper preset, on the held-out part;
    the paper preset's ablations are compared with the paper preset's full method."""
    out = WORK / f"retrieval_eval_{name}"
    shutil.rmtree(out, ignore_errors=True)
    benchmark = api.Benchmark(questions, fmt, skip=skip)  # type: ignore[arg-type]
    where = api.StoreChoice(graph)
    summary = api.evaluate_benchmark(
        settings, benchmark, out, api.Runs(["kg_rag", "metakgrag"], ["all"]), over=where, runner=api.NoLLM()
    ).summary
    paper = settings.model_copy(
        update={"qa": settings.qa.model_validate(settings.qa.model_dump() | {"metakgrag": {"preset": "paper"}})}
    )
    paper_summary = api.evaluate_benchmark(
        paper, benchmark, out / "paper", api.Runs(["metakgrag"], ["all"]), over=where, runner=api.NoLLM()
    ).summary
    for label, s in paper_summary.items():
        summary[f"{label} (paper preset)"] = s
    return {
        label: {k: s.get(k) for k in KEYS}
        | {"questions": s["questions"]}
        | ({"versus_full": s["versus"]["recall_at_budget"]} if "versus" in s else {})
        for label, s in summary.items()
    }


def pooled(*tables: dict[str, Any]) -> dict[str, Any]:
    """The recalls of several question sets run alike, over all their questions: each recall is a share of
    questions, so the sets' counts add up; the other figures stay per set (a p50 does not pool)."""
    out: dict[str, Any] = {}
    for label in tables[0]:
        n = sum(t[label]["questions"] for t in tables)
        out[label] = {
            key: round(sum(round(t[label][key] * t[label]["questions"]) for t in tables) / n, 6) if n else None
            for key in ("evidence_recall", "recall_at_budget")
        } | {"questions": n}
        if all("versus_full" in t[label] for t in tables):
            # the counts add up; no p-value: the wordings ask the same topics, so their questions are not
            # independent of each other
            out[label]["versus_full"] = {
                k: sum(t[label]["versus_full"][k] for t in tables) for k in ("questions", "lost", "gained")
            }
    return out


def main() -> None:
    settings, data_dir = settings_and_data()
    figures: dict[str, Any] = {"budget_entities": 10}
    csqa = bundle(settings, data_dir / CSQA_KG, "commonsenseqa")
    figures["commonsenseqa_heldout_501_700"] = runs(settings, data_dir / CSQA_QUESTIONS, "pilot", csqa, 500, "csqa")
    genmed = bundle(settings, data_dir / GENMED_KG, "genmedgpt")
    total = len(api.read_questions(data_dir / GENMED_QUESTIONS, "pilot")[0])
    figures[f"genmedgpt_heldout_{total // 2 + 1}_{total}"] = runs(
        settings, data_dir / GENMED_QUESTIONS, "pilot", genmed, total // 2, "genmedgpt"
    )
    cmb = bundle(settings, data_dir / CMB_KG, "cmb")
    total = len(api.read_questions(data_dir / CMB_QUESTIONS, "pilot")[0])
    figures[f"cmb_pharmacy_heldout_{total // 2 + 1}_{total}"] = runs(
        settings, data_dir / CMB_QUESTIONS, "pilot", cmb, total // 2, "cmb"
    )
    metaqa = bundle(settings, data_dir / METAQA_KB, "metaqa", separator="|")
    total = len(api.read_questions(data_dir / METAQA_QUESTIONS, "metaqa")[0])
    figures[f"metaqa_1hop_heldout_{total // 2 + 1}_{total}"] = runs(
        settings, data_dir / METAQA_QUESTIONS, "metaqa", metaqa, total // 2, "metaqa"
    )
    cpe = bundle(settings, data_dir / CPE_KG, "explaincpe")
    total = len(api.read_questions(data_dir / CPE_QUESTIONS, "pilot")[0])
    figures[f"explaincpe_heldout_{total // 2 + 1}_{total}"] = runs(
        settings, data_dir / CPE_QUESTIONS, "pilot", cpe, total // 2, "explaincpe"
    )
    sets = multihop.build(data_dir / METAQA_KB, WORK / "multihop")
    for name in ("2hop_held", "2hop_held_b", "3hop_held", "3hop_held_b"):
        hops, family = name[:4], "other templates" if name.endswith("_b") else "tuning templates"
        figures[f"metaqa_style_{hops}_heldout ({family})"] = runs(settings, sets[name], "metaqa", metaqa, 0, name)
    for hops in ("2hop", "3hop"):
        figures[f"metaqa_style_{hops}_heldout (both wordings)"] = pooled(
            figures[f"metaqa_style_{hops}_heldout (tuning templates)"],
            figures[f"metaqa_style_{hops}_heldout (other templates)"],
        )
    for dataset, table in figures.items():
        if not isinstance(table, dict):
            continue
        print(f"{dataset} (retrieval only, budget 10 entities)")
        for label, f in table.items():
            line = f"  {label:<42} recall {f['evidence_recall']}  recall@10 {f['recall_at_budget']}"
            if "on_path_share" in f:
                line += f"  entities/q {f['evidence_entities_per_question']}  on-path {f['on_path_share']}"
            if "versus_full" in f:  # a pooled count has no p-value
                v = f["versus_full"]
                line += "  vs full: " + (api.paired_text(v) if "p_value" in v else f"-{v['lost']} +{v['gained']}")
            print(line)
    record("retrieval", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
