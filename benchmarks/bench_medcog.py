"""MedCoG: LLM calls and tokens per question per route, and KG-verification retrieval time without LLM time.

Graphs:

- **real**: the PrimeKG-derived real files as one bundle (:mod:`benchmarks.primekg_real`), with name
  embeddings;
- **full**: a full-scale SYNTHETIC PrimeKG (the published node and relation counts, 4M edges after mirrored
  rows collapse), with name embeddings.

**Retrieval** (both graphs, embedded store and Neo4j): the ``scot_kg`` route with a scripted LLM whose plan
reply is one verification pair per question, so the time measured is graph work alone: grounding each
side (the graph's names found in the text, else embedding search), k = 2 shortest paths of at most 3 hops
between every grounded pair, and ranking the paths by similarity to the question. The pairs are node
names of the graph: half the questions pair a node with one two edges away (a path exists), half pair a
random disease with a random drug (often none within 3 hops: the search then explores the whole
neighbourhood). Per store: p50 and p95 over the questions after the first, and the first apart (it builds
the phrase matcher and loads the model). A Neo4j database this benchmark loaded before with the same bundle is served
again (under ``benchmarks/.work/neo4j``), with the load time measured then.

**LLM usage** (real graph, embedded): the five fixed routes and META over the first questions of
MedAgentsBench's MedQA-hard (100 by default, as in MedCoG's acceptance run) with the local SmolLM2 server,
priced at GPT-4o's list prices, the memory routes reading a case bank built from the 300 questions of the
non-hard training file (SCoT, no graph). Per route and per step (monitor, plan, filter, evaluate, scot):
LLM calls and tokens (billed plus cached: what the method uses) per question; per route accuracy, list
cost, inference density and IIE; the META run's route distribution and ORACLE. Replies come from the LLM
response cache when a run asks the same prompt again, so a rerun is fast and reports the same figures
(a first run takes about an hour and a half on 2 cores).

Run: ``make bench`` or
``python -m benchmarks.bench_medcog [--questions 100 --scale 1.0 --llm-questions 100 --no-neo4j --no-llm]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.common import WORK, neo4j_with, record, settings_and_data
from benchmarks.primekg_real import write_real_kg
from metakg import api
from metakg.config import Settings
from metakg.ingest.primekg_synthetic import generate
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.llm.usage import percentile
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Question
from metakg.qa_engine.strategies.medcog.strategy import is_placeholder
from metakg.schemas.bundle import read_bundle
from metakg.schemas.graph_store import GraphStore

HARD = "medagentsbench/medqa_test_hard.jsonl"
TRAIN = "medagentsbench/medqa_test_nonhard_casebank_300.jsonl"
#: GPT-4o list prices (USD per million prompt, completion tokens), so the local model's tokens are priced
#: like the model the published reference curve was measured with
PRICES = {"smollm2-135m-instruct": (2.5, 10.0)}


def real_bundle(settings: Settings, data_dir: Path) -> Path:
    """The real PrimeKG-derived files as an embedded bundle (built once into the work folder)."""
    out = WORK / "medcog_real"
    if not (out / "embeddings.parquet").is_file():
        kg, _rows = write_real_kg(data_dir / "primekg", WORK / "medcog_real_kg.csv")
        api.ingest_primekg(kg, out, settings)
        api.embed_bundle(out, settings)
    return out


def full_bundle(settings: Settings, data_dir: Path, scale: float) -> Path:
    """A SYNTHETIC PrimeKG at ``scale`` (1.0: full size) as an embedded bundle (built once)."""
    out = WORK / f"medcog_synthetic_{scale}"
    if not (out / "embeddings.parquet").is_file():
        files = generate(WORK / f"medcog_synthetic_{scale}_csv", data_dir / "primekg", scale=scale)
        api.ingest_primekg(files.path, out, settings)
        api.embed_bundle(out, settings)
    return out


def verification_questions(bundle: Path, n: int, seed: int = 0) -> tuple[list[Question], dict[str, str]]:
    """``n`` questions over graph names and each one's plan reply: half pair a node with a node two edges
    away, half a random disease with a random drug."""
    data = read_bundle(bundle)
    nodes, edges = data.nodes.select("id", "name", "type"), data.edges.select("src", "dst")
    rng = np.random.default_rng(seed)
    name = dict(zip(nodes["id"].to_list(), nodes["name"].to_list(), strict=True))
    both = pl.concat([edges, edges.select(src="dst", dst="src")])
    # two-edge walks: first edges sampled, then one random second edge from each one's middle node (a join
    # of all edges with all edges would square the hubs' degrees)
    first = both.sample(n=min(4 * n, both.height), seed=seed)
    two = (
        first.join(both, left_on="dst", right_on="src", suffix="_2")
        .filter(pl.col("dst_2") != pl.col("src"))
        .with_columns(pick=pl.int_range(pl.len()).shuffle(seed=seed).over(["src", "dst"]))
        .filter(pl.col("pick") == 0)
        .unique(["src", "dst_2"], keep="first", maintain_order=True)
    )
    walks = two.head(n // 2)
    pairs = list(zip(walks["src"].to_list(), walks["dst_2"].to_list(), strict=True))
    diseases = nodes.filter(pl.col("type") == "disease")["id"].to_list()
    drugs = nodes.filter(pl.col("type") == "drug")["id"].to_list()
    while len(pairs) < n:
        pairs.append((diseases[rng.integers(len(diseases))], drugs[rng.integers(len(drugs))]))
    questions, replies = [], {}
    for number, (a, b) in enumerate(pairs, start=1):
        text = f"Question {number}: how is {name[a]} related to {name[b]}?"
        questions.append(Question(text, (("A", "directly"), ("B", "indirectly")), f"v{number}", "A", "directly"))
        replies[text] = f"{name[a]} | {name[b]} is related to {name[a]}"
    return questions, replies


def scripted(replies: dict[str, str]) -> ScriptedClient:
    """Plan replies by question; every evaluation says the paths suffice; SCoT answers A."""

    def reply(request: ChatRequest) -> str:
        prompt = request.messages[-1].content
        if "query | hypothesis" in prompt:
            return next(r for q, r in replies.items() if q in prompt)
        return "yes" if "Are these paths enough" in prompt else "Answer: A"

    return ScriptedClient(reply)


def retrieval(store: GraphStore, settings: Settings, questions: list[Question], replies: dict[str, str]) -> Any:
    """KG verification time per question (ms, no LLM time) in one warm context."""
    medcog = {"route": "scot_kg", "filter_groundings": False, "max_refinements": 0}
    run = settings.model_copy(update={"qa": settings.qa.with_section("medcog", medcog)})
    ctx: QAContext = api.qa_context(run, store, scripted(replies))
    strategy = api.create_strategy(run, "medcog")

    async def answer_all() -> list[Any]:
        return [await strategy.answer(q, ctx) for q in questions]

    answers = asyncio.run(answer_all())
    times = [a.usage.retrieval_ms for a in answers]
    rest = times[1:] or times
    ids_ok = all(store.get_node(n) is not None for a in answers for p in a.evidence for n in p.nodes)
    return {
        "first_question_ms": round(times[0], 1),
        "p50_ms": round(percentile(rest, 50) or 0.0, 1),
        "p95_ms": round(percentile(rest, 95) or 0.0, 1),
        "mean_ms": round(float(np.mean(rest)), 1),
        "with_paths": sum(1 for a in answers if a.evidence),
        "paths_per_question": round(float(np.mean([len(a.evidence) for a in answers])), 2),
        "evidence_ids_in_store": ids_ok,
    }


def graph_figures(bundle: Path, settings: Settings, n: int, name: str, neo4j: bool) -> dict[str, Any]:
    """Retrieval on the embedded store and, with ``neo4j``, on a fresh Neo4j loaded with the bundle."""
    data = read_bundle(bundle)
    questions, replies = verification_questions(bundle, n)
    figures: dict[str, Any] = {"nodes": data.nodes.height, "edges": data.edges.height, "questions": n}
    del data
    with api.open_store(settings, bundle) as store:
        figures["embedded"] = retrieval(store, settings, questions, replies)
    if neo4j:
        with neo4j_with(bundle, settings, f"medcog_{name}", reuse=True) as (neo, store, load_s):
            figures["neo4j"] = {"load_s": round(load_s, 1), **retrieval(store, neo, questions, replies)}
    return figures


def llm_usage(bundle: Path, settings: Settings, data_dir: Path, limit: int, train: int) -> dict[str, Any]:
    """Calls and tokens per question per route with the local SmolLM2 server (GPT-4o list prices)."""
    bank = WORK / f"medcog_bank_{train}"
    llm = settings.llm.model_copy(update={"prices_per_mtok": PRICES})
    priced = settings.model_copy(update={"llm": llm})
    if not (bank / "manifest.json").is_file():
        api.build_casebank(priced, api.Benchmark(data_dir / TRAIN, "medagents", limit=train), bank)
    run = priced.model_copy(update={"qa": priced.qa.with_section("medcog", {"casebank": bank})})
    started = time.perf_counter()
    report = WORK / "medcog_llm"
    result = api.evaluate_benchmark(
        run, api.Benchmark(data_dir / HARD, "medagents", limit=limit), report, api.Runs(["medcog"], ["all"]),
        over=api.StoreChoice(bundle), options=api.EvalOptions(resume=False),
    )  # fmt: skip
    summary = result.summary
    keys = ("calls_per_question", "method_tokens_per_question", "cost_per_question", "accuracy", "fail")
    keys += ("inference_density", "iie")
    figures: dict[str, Any] = {
        label: {k: s.get(k) for k in keys} | {"per_step": per_step(report / f"answers-{label}.jsonl")}
        for label, s in summary.items()
        if label != "ORACLE"
    }
    figures["medcog"]["routes"] = summary["medcog"]["routes"]
    figures["medcog"]["monitor_fallbacks"] = summary["medcog"]["monitor_fallbacks"]
    figures["medcog"]["planning"] = planning(report / "answers-medcog.jsonl")
    figures["ORACLE"] = {"accuracy": summary.get("ORACLE", {}).get("accuracy")}
    figures["scaling_fit"] = summary["medcog"].get("scaling_fit")
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures


def planning(answers: Path) -> dict[str, int]:
    """How the verification plans of a run's answers went: plan rounds, checks taken from the LLM, checks
    rejected as the prompt's placeholders, placeholder checks accepted (0 by design), rounds whose checks
    grounded nothing, and plan rounds run after such a round (0 by design)."""
    counts = dict.fromkeys(
        ("rounds", "llm_checks", "placeholders_rejected", "placeholders_accepted", "nothing_grounded",
         "rounds_after_nothing_grounded"),
        0,
    )  # fmt: skip
    for line in answers.read_text(encoding="utf-8").splitlines():
        ungrounded = False
        for entry in json.loads(line)["trace"].get("verification") or []:
            counts["rounds"] += 1
            counts["rounds_after_nothing_grounded"] += ungrounded
            counts["placeholders_rejected"] += len(entry.get("placeholder_checks") or [])
            if entry["pairs_from"] == "llm":
                counts["llm_checks"] += len(entry["pairs"])
                counts["placeholders_accepted"] += sum(any(is_placeholder(x) for x in p) for p in entry["pairs"])
            ungrounded = not any(g["query_ids"] or g["hypothesis_ids"] for g in entry["grounding"])
            counts["nothing_grounded"] += ungrounded
    return counts


def per_step(answers: Path) -> dict[str, dict[str, float]]:
    """Calls and tokens per question of each step (the tag's last part: monitor, plan, filter, evaluate,
    scot; ``answer`` for the zero-shot answer) over a run's answers."""
    rows = [json.loads(line) for line in answers.read_text(encoding="utf-8").splitlines()]
    steps: dict[str, dict[str, float]] = {}
    for row in rows:
        for call in row["usage"].get("calls", []):
            step = call["tag"].rsplit(":", 1)[1] if call["tag"].count(":") > 1 else "answer"
            entry = steps.setdefault(step, {"calls": 0.0, "tokens": 0.0})
            entry["calls"] += 1 / len(rows)
            entry["tokens"] += call["tokens"] / len(rows)
    return {k: {m: round(v, 2) for m, v in e.items()} for k, e in steps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=100, help="verification questions per graph and store")
    parser.add_argument("--scale", type=float, default=1.0, help="synthetic PrimeKG scale (1.0: full size)")
    parser.add_argument("--llm-questions", type=int, default=100, help="MedQA-hard questions per route")
    parser.add_argument("--train", type=int, default=300, help="training questions in the case bank")
    parser.add_argument("--no-neo4j", action="store_true")
    parser.add_argument("--no-llm", action="store_true", help="retrieval figures only")
    args = parser.parse_args()
    settings, data_dir = settings_and_data()
    real = real_bundle(settings, data_dir)
    figures: dict[str, Any] = {
        "real": graph_figures(real, settings, args.questions, "real", not args.no_neo4j),
        "full": graph_figures(
            full_bundle(settings, data_dir, args.scale),
            settings,
            args.questions,
            f"full_{args.scale}",
            not args.no_neo4j,
        ),
        "scale": args.scale,
    }
    if not args.no_llm:
        figures["llm_usage"] = llm_usage(real, settings, data_dir, args.llm_questions, args.train)
    print(f"MedCoG KG verification per question ({args.questions} questions, no LLM time; ms)")
    for name in ("real", "full"):
        g = figures[name]
        for backend in ("embedded", "neo4j"):
            if backend in g:
                f = g[backend]
                print(
                    f"  {name:<5} {g['edges']:>9,} edges {backend:<8} p50 {f['p50_ms']:8.1f}  p95 {f['p95_ms']:8.1f}  "
                    f"first {f['first_question_ms']:9.1f}  with paths {f['with_paths']}/{g['questions']}"
                )
    if args.no_llm:
        record(f"medcog_retrieval_{args.scale}", figures, synthetic_data=True)
        return
    print(f"MedCoG LLM usage per question ({args.llm_questions} MedQA-hard questions, local SmolLM2)")
    for label, f in figures["llm_usage"].items():
        if isinstance(f, dict) and "calls_per_question" in f:
            steps = ", ".join(f"{k} {v['calls']}" for k, v in f["per_step"].items())
            print(
                f"  {label:<26} calls {f['calls_per_question']}  tokens {f['method_tokens_per_question']}  "
                f"accuracy {f['accuracy']}  density {f['inference_density']}  ({steps})"
            )
    print(f"  META routes: {figures['llm_usage']['medcog']['routes']}")
    print(f"  verification plans: {figures['llm_usage']['medcog']['planning']}")
    record("medcog", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
