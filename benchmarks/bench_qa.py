"""QA engine: retrieval time per question (no LLM time) on both stores, and LLM calls and tokens per strategy.

Graphs:
- the MetaKGRAG authors' CommonsenseQA KG (real, 5.7k nodes), with name embeddings;
- a 100k-node graph: that KG plus nodes named with real Wikidata labels and descriptions, joined by
  SYNTHETIC heavy-tailed random edges (500k by default), so the questions still find their entities.

Questions: the first N of the pilot's CommonsenseQA questions. Retrieval runs with concepts by rules (no
LLM) in one context per store, as `metakg eval` does (similarity and neighbour caches warm up over the run);
the first question of a fresh process (the model loads, the store opens, the phrase matcher is read from
the cache where ``embed`` and ``load neo4j`` keep it, or built when it is not there) is reported apart.
LLM usage: `metakg eval`-style runs of llm_only, kg_rag and metakgrag with the local SmolLM2 server.

Run: ``make bench`` or ``python -m benchmarks.bench_qa [--questions 100 --nodes 100000 --edges 500000]``
(``--first-only``: only the first question of a fresh process, on both graphs and stores).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.common import WORK, neo4j_with, record, settings_and_data, skewed_endpoints
from metakg import api
from metakg.config import Settings
from metakg.llm import local_server
from metakg.llm.usage import percentile
from metakg.qa_engine.services import keep_phrases
from metakg.schemas.bundle import Bundle, read_bundle, write_bundle
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.tables import conform_edges, conform_nodes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PILOT_KG = "metakgrag_pilot/commonsenseqa__knowledge_graph.txt"
PILOT_QUESTIONS = "metakgrag_pilot/commonsenseqa__commonsenseqa.json"
LABELS = "wikidata/kgtk_arnold_labels_en.ttl"
SQ_LABELS = "wikidata/simplequestions_wd_labels_en.tsv"
DESCRIPTIONS = ("wikidata/kgtk_arnold_descriptions_en_part1.ttl", "wikidata/kgtk_arnold_descriptions_en_part2.ttl")
RETRIEVAL = ("kg_rag", "metakgrag")


def csqa_bundle(settings: Settings, data_dir: Path) -> Path:
    """The pilot CommonsenseQA KG as a bundle with name embeddings (built once into the work folder)."""
    out = WORK / "qa_csqa"
    if not (out / "embeddings.parquet").is_file():
        api.ingest_triples(data_dir / PILOT_KG, "commonsenseqa", out, settings)
        api.embed_bundle(out, settings)
    return out


def real_labels(data_dir: Path) -> list[tuple[str, str]]:
    """(Wikidata id, English label) pairs: the KGTK subset's labels, then the SimpleQuestions labels, then
    the KGTK descriptions (real English phrases) when more names are needed."""
    pairs: list[tuple[str, str]] = []
    literal = r'^wd:(\S+) (?:rdfs:label|schema:description) "((?:[^"\\]|\\.)*)"@en'
    pairs += re.findall(literal, (data_dir / LABELS).read_text(encoding="utf-8"), re.M)
    rows = (data_dir / SQ_LABELS).read_text(encoding="utf-8").splitlines()[1:]
    pairs += [(r.split("\t")[0], r.split("\t")[1]) for r in rows if r.count("\t") >= 1]
    for name in DESCRIPTIONS:
        pairs += [(f"{q}-d", d) for q, d in re.findall(literal, (data_dir / name).read_text(encoding="utf-8"), re.M)]
    return pairs


def big_bundle(settings: Settings, data_dir: Path, base: Path, n_nodes: int, n_edges: int, seed: int = 0) -> Path:
    """``base`` plus nodes named by real Wikidata labels up to ``n_nodes``, and SYNTHETIC random edges."""
    out = WORK / f"qa_big_{n_nodes}_{n_edges}"
    if (out / "embeddings.parquet").is_file():
        return out
    bundle = read_bundle(base)
    taken = set(bundle.nodes["name"].str.to_lowercase().to_list())
    labels: list[tuple[str, str]] = []
    used: set[str] = set()
    for qid, name in real_labels(data_dir):
        if len(labels) == n_nodes - bundle.nodes.height:
            break
        if name.lower() not in taken and qid not in used:
            taken.add(name.lower())
            used.add(qid)
            labels.append((f"kg:bench/{qid}", name))
    extra = conform_nodes(
        pl.DataFrame(
            {"id": [i for i, _ in labels], "name": [n for _, n in labels], "type": "concept", "source": "bench"}
        )
    )
    nodes = pl.concat([bundle.nodes, extra], how="diagonal_relaxed")
    ids = nodes["id"]
    rng = np.random.default_rng(seed)
    src, dst = skewed_endpoints(rng, nodes.height, n_edges)
    keep = src != dst
    random_edges = conform_edges(
        pl.DataFrame(
            {
                "src": ids.gather(src[keep]),
                "dst": ids.gather(dst[keep]),
                "rel": [f"related_{i}" for i in rng.integers(0, 40, int(keep.sum()))],
                "source": "bench",
                "confidence": 0.5,
            }
        )
    )
    edges = pl.concat([bundle.edges, random_edges], how="diagonal_relaxed").unique("id", keep="first")
    write_bundle(out, Bundle(nodes=conform_nodes(nodes), edges=conform_edges(edges)))
    api.embed_bundle(out, settings)
    return out


def retrieval(store: GraphStore, settings: Settings, questions: list[api.Question]) -> dict[str, Any]:
    """Retrieval time per question (ms) for kg_rag and metakgrag, one warm context per strategy run; the
    store's statements per question where it counts them (Neo4j), and a digest of the evidence, equal on
    both stores when they return the same evidence."""
    rules = settings.model_copy(update={"qa": settings.qa.model_copy(update={"concepts": "rules"})})
    ctx = api.qa_context(rules, store, None)
    figures: dict[str, Any] = {}
    for name in RETRIEVAL:
        strategy = api.create_strategy(settings, name)

        async def run_all(strategy: Any = strategy) -> list[Any]:
            return [await strategy.answer(q, ctx) for q in questions]

        sent = getattr(store, "queries", None)
        answers = asyncio.run(run_all())
        times = [a.usage.retrieval_ms for a in answers]
        rest = times[1:] or times
        evidence = json.dumps([[p.triples for p in a.evidence] for a in answers], sort_keys=True)
        figures[name] = {
            "first_question_ms": round(times[0], 1),
            "p50_ms": round(percentile(rest, 50) or 0.0, 1),
            "p95_ms": round(percentile(rest, 95) or 0.0, 1),
            "mean_ms": round(float(np.mean(rest)), 1),
            "with_evidence": sum(1 for a in answers if a.evidence),
            "cycles_per_question": round(float(np.mean([a.trace.get("cycles", 0) for a in answers])), 2),
            "evidence_digest": hashlib.sha256(evidence.encode()).hexdigest()[:16],
        }
        if sent is not None:
            figures[name]["queries_per_question"] = round((store.queries - sent) / len(questions), 2)  # type: ignore[attr-defined]
    return figures


def first_question(bundle: Path, cache: Path, uri: str | None = None) -> dict[str, Any]:
    """The first question of a fresh process (``--first-question``, run as a child): the store's opening,
    the model loads and the retrieval of one metakgrag question, each apart."""
    command = [sys.executable, "-m", "benchmarks.bench_qa", "--first-question", str(bundle), "--cache-dir", str(cache)]
    if uri is not None:
        command += ["--neo4j-uri", uri]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the first-question run failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def first_question_child(bundle: Path, cache: Path, uri: str | None) -> None:
    """Open the store, answer the first pilot question with metakgrag (no LLM), print the timings as JSON."""
    settings, data_dir = settings_and_data()
    paths = settings.paths.model_copy(update={"cache_dir": cache})
    settings = settings.model_copy(update={"paths": paths, "qa": settings.qa.model_copy(update={"concepts": "rules"})})
    if uri is not None:
        settings = settings.model_copy(update={"neo4j": settings.neo4j.model_copy(update={"uri": uri})})
    questions, _read = api.read_questions(data_dir / PILOT_QUESTIONS, "pilot", limit=1)
    started = time.perf_counter()
    with api.open_store(settings, None if uri else bundle, neo4j=uri is not None) as store:
        opened = time.perf_counter() - started
        answer = asyncio.run(
            api.create_strategy(settings, "metakgrag").answer(questions[0], api.qa_context(settings, store, None))
        )
    usage = answer.usage
    print(json.dumps({"open_ms": round(opened * 1000, 1), "model_load_ms": round(usage.setup_ms, 1),
                      "retrieval_ms": round(usage.retrieval_ms, 1), "evidence": len(answer.evidence)}))  # fmt: skip


def first_questions(bundle: Path, store: GraphStore, uri: str | None = None) -> dict[str, Any]:
    """The first question of a fresh process: after the graph was made ready as ``embed`` and ``load neo4j``
    leave it (its phrase index kept in the cache: ``cold``, what a user gets), with no phrase index on disk
    (``no_index``), and with the one that run saved (``warm``)."""
    with tempfile.TemporaryDirectory() as ready, tempfile.TemporaryDirectory() as empty:
        keep_phrases(store, Path(ready))
        cold = first_question(bundle, Path(ready), uri)
        no_index = first_question(bundle, Path(empty), uri)
        return {"cold": cold, "no_index": no_index, "warm": first_question(bundle, Path(empty), uri)}


def on_neo4j(bundle: Path, settings: Settings, questions: list[api.Question], name: str) -> dict[str, Any]:
    """Load ``bundle`` into a fresh Neo4j server and time retrieval there."""
    with neo4j_with(bundle, settings, f"qa_{name}") as (neo, store, load_s):
        first = first_questions(bundle, store, neo.neo4j.uri)
        if not questions:
            return {"load_s": round(load_s, 1), "first_question": first}
        return {"load_s": round(load_s, 1), "first_question": first, **retrieval(store, neo, questions)}


def llm_usage(bundle: Path, settings: Settings, data_dir: Path, limit: int) -> dict[str, Any]:
    """LLM calls, tokens and latency per question for each strategy, with the local SmolLM2 server."""
    with local_server.running() as server, tempfile.TemporaryDirectory() as tmp:
        llm = settings.llm.model_copy(update={"base_url": server.base_url, "model": server.model, "timeout_s": 120})
        paths = settings.paths.model_copy(update={"cache_dir": Path(tmp) / "cache"})  # no cached replies
        local = settings.model_copy(update={"llm": llm, "paths": paths})
        result = api.evaluate_benchmark(
            local,
            api.Benchmark(data_dir / PILOT_QUESTIONS, "pilot", limit=limit),
            Path(tmp) / "report",
            api.Runs(["llm_only", "kg_rag", "metakgrag"]),
            over=api.StoreChoice(bundle),
        )
    keys = ("calls_per_question", "tokens_per_question", "latency_p50_ms", "latency_p95_ms", "accuracy", "fail")
    return {label: {k: s[k] for k in keys} for label, s in result.summary.items() if label != "ORACLE"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=500_000)
    parser.add_argument("--llm-questions", type=int, default=10)
    parser.add_argument("--no-neo4j", action="store_true")
    parser.add_argument("--first-only", action="store_true", help="Only the first question of a fresh process.")
    parser.add_argument("--first-question", type=Path, help=argparse.SUPPRESS)  # the child of first_question
    parser.add_argument("--cache-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--neo4j-uri", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_question is not None:
        first_question_child(args.first_question, args.cache_dir, args.neo4j_uri)
        return
    settings, data_dir = settings_and_data()
    questions, _read = api.read_questions(data_dir / PILOT_QUESTIONS, "pilot", limit=args.questions)
    csqa = csqa_bundle(settings, data_dir)
    big = big_bundle(settings, data_dir, csqa, args.nodes, args.edges)
    figures: dict[str, Any] = {"questions": len(questions)}
    for name, path in (("csqa", csqa), ("big", big)):
        bundle = read_bundle(path)
        figures[name] = {"nodes": bundle.nodes.height, "edges": bundle.edges.height}
        with api.open_store(settings, path) as store:
            figures[name]["embedded"] = {"first_question": first_questions(path, store)}
            if not args.first_only:
                figures[name]["embedded"].update(retrieval(store, settings, questions))
        if not args.no_neo4j:
            figures[name]["neo4j"] = on_neo4j(path, settings, [] if args.first_only else questions, name)
    if not args.first_only:
        figures["llm_usage"] = llm_usage(csqa, settings, data_dir, args.llm_questions)
    print(f"QA retrieval per question ({len(questions)} CommonsenseQA questions, no LLM time; ms)")
    for name in ("csqa", "big"):
        g = figures[name]
        for backend in ("embedded", "neo4j"):
            if backend in g:
                for strategy, f in g[backend].items():
                    if isinstance(f, dict) and "p50_ms" in f:
                        print(
                            f"  {name:<5} {g['nodes']:>7,} nodes {backend:<8} {strategy:<9} p50 {f['p50_ms']:8.1f}  "
                            f"p95 {f['p95_ms']:8.1f}  queries/q {f.get('queries_per_question', '-')}  "
                            f"evidence {f['evidence_digest']}"
                        )
                first = g[backend]["first_question"]
                print(
                    f"  {name:<5} {backend:<8} first question of a process: retrieval {first['cold']['retrieval_ms']} "
                    f"ms cold (index kept by embed/load) / {first['no_index']['retrieval_ms']} ms with no index on "
                    f"disk / {first['warm']['retrieval_ms']} ms warm, model load {first['cold']['model_load_ms']} "
                    f"ms, store open {first['cold']['open_ms']} ms"
                )
    if args.first_only:
        record("qa_first_question", figures, synthetic_data=True)
        return
    print(f"LLM usage per question ({args.llm_questions} questions, local SmolLM2)")
    for label, f in figures["llm_usage"].items():
        calls, tokens, p50 = f["calls_per_question"], f["tokens_per_question"], f["latency_p50_ms"]
        print(f"  {label:<10} calls {calls}  tokens {tokens}  p50 {p50} ms")
    record("qa", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
