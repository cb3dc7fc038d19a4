"""metakg's Text2KGBench scorer on the benchmark authors' own baseline responses reproduces their published
per-ontology averages, all seven figures within 0.01, for every ontology of both datasets and both baselines
(Mihindukulasooriya et al., ISWC 2023; data CC BY-SA 4.0, read from the shared data folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metakg.api import evaluate_extraction

#: (dataset, baseline) -> the published averages' file (its "all_test_cases" rows)
PUBLISHED = {
    ("wikidata_tekgen", "Vicuna-13B"): "ont_llm_avg_stats_v2.jsonl",
    ("wikidata_tekgen", "Alpaca-LoRA-13B"): "ont_llm_avg_stats.jsonl",
    ("dbpedia_webnlg", "Vicuna-13B"): "avg_eval_results.jsonl",
    ("dbpedia_webnlg", "Alpaca-LoRA-13B"): "avg_eval_results.jsonl",
}
METRICS = ("precision", "recall", "f1", "onto_conf", "sub_halluc", "rel_halluc", "obj_halluc")


@pytest.mark.parametrize(("dataset", "baseline"), list(PUBLISHED))
def test_the_authors_responses_score_as_published(data_dir: Path, dataset: str, baseline: str) -> None:
    root = data_dir / "text2kgbench" / dataset
    runs = root / "baselines" / baseline
    published = {}
    for line in (runs / "eval_metrics" / PUBLISHED[dataset, baseline]).read_text().splitlines():
        row = json.loads(line)
        if row.get("type") == "all_test_cases":
            published[row["onto"]] = row
    result = evaluate_extraction(root, responses=runs / "llm_responses")
    assert result.missing_responses == []
    assert {r["ontology"] for r in result.ontologies} == set(published)  # 10 and 19 ontologies
    for row in result.ontologies:
        truth = root / "ground_truth" / f"ont_{row['ontology']}_ground_truth.jsonl"
        assert row["sentences"] == len(truth.read_text().splitlines())
        for metric in METRICS:
            expected = float(published[row["ontology"]][f"avg_{metric}"])
            assert row[metric] == pytest.approx(expected, abs=0.01), (row["ontology"], metric)
