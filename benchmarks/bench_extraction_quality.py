"""Extraction quality on Text2KGBench with the local model: three prompts side by side on one sample.

The sample is the first N test sentences (default 10) of each Wikidata-TekGen ontology (Mihindukulasooriya et
al., ISWC 2023; CC BY-SA 4.0). Each sentence is asked three ways through ``metakg eval-extraction``'s path
(:func:`metakg.api.benchmark_responder`), each with a fresh reply cache so every call is made:

- ``untyped``: metakg's chunk prompt before ontologies, given the relation names only, answered in lines;
- ``lines``: the ontology prompt (classes, relations with domain and range, the most similar training
  sentence as a worked example), answered in lines;
- ``json``: the same prompt, the reply held to the ontology's JSON schema (llama.cpp's grammar).

Recorded per prompt: the seven figures (averages over the sample, as the benchmark computes them), calls,
tokens per kept triple, seconds per sentence, reply lines that could not be parsed, triples outside the
ontology. The authors' Vicuna-13B figures on the same sentences are scored beside them for scale.

A 135M-parameter model shows that the pipeline runs and where it fails; it says nothing of what a capable
endpoint extracts (point ``[llm]`` at one and run ``metakg eval-extraction`` for that).

Run: ``make bench`` or ``python -m benchmarks.bench_extraction_quality [--limit 10] [--ontology movie ...]
[--mode json ...]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, WORK, record, settings_and_data
from metakg import api
from metakg.config import load_settings
from metakg.llm import local_server

MODES = ("untyped", "lines", "json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--limit", type=int, default=10, help="test sentences per ontology")
    parser.add_argument("--ontology", action="append", default=[], help="only these ontologies (repeatable)")
    parser.add_argument("--max-tokens", type=int, default=512, help="reply tokens (llm.max_tokens' default)")
    parser.add_argument("--mode", action="append", choices=MODES, help="only these prompts; the others' figures "
                        "stay as last recorded")  # fmt: skip
    args = parser.parse_args()
    _settings, data = settings_and_data(" (Text2KGBench)")
    dataset = Path(data) / "text2kgbench" / "wikidata_tekgen"
    earlier = RESULTS / "extraction_quality.json"
    kept = json.loads(earlier.read_text()) if args.mode and earlier.is_file() else {}
    figures: dict[str, Any] = {m: kept[m] for m in MODES if m in kept and m not in args.mode}
    figures |= {"dataset": "wikidata_tekgen", "sentences_per_ontology": args.limit, "max_tokens": args.max_tokens}
    vicuna = api.evaluate_extraction(
        dataset, ontologies=args.ontology, limit=args.limit, responses=dataset / "baselines/Vicuna-13B/llm_responses"
    )
    figures["vicuna_13b_same_sentences"] = vicuna.average
    with local_server.running() as server:
        figures["model"] = server.model
        for mode in args.mode or MODES:
            cache = WORK / "extraction_quality" / f"cache_{mode}"
            shutil.rmtree(cache, ignore_errors=True)
            settings = load_settings(
                paths={"cache_dir": cache},
                llm={"base_url": server.base_url, "model": server.model, "max_tokens": args.max_tokens,
                     "timeout_s": 600, "concurrency": 1},
            )  # fmt: skip
            started = time.perf_counter()
            result = api.evaluate_extraction(
                dataset,
                ontologies=args.ontology,
                limit=args.limit,
                responder=api.benchmark_responder(settings, mode=mode),
                out_dir=WORK / "extraction_quality" / mode,
            )
            seconds = time.perf_counter() - started
            run = result.run
            sentences = sum(r["sentences"] for r in result.ontologies)
            tokens = run.get("prompt_tokens", 0) + run.get("completion_tokens", 0)
            figures[mode] = {
                **result.average,
                "sentences": sentences,
                "llm_calls": run.get("llm_calls", 0),
                "triples_kept": run.get("triples", 0),
                "tokens_per_triple": round(tokens / run["triples"], 1) if run.get("triples") else None,
                "seconds_per_sentence": round(seconds / sentences, 2) if sentences else None,
                "unparsed_lines": run.get("unparsed_lines", 0),
                "outside_ontology": run.get("outside_ontology", 0),
            }
            print(f"  {mode}: {figures[mode]}", flush=True)
    record("extraction_quality", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
