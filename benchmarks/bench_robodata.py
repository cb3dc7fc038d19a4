"""RoboData: per-question cost of the agent, and the local graph's throughput for many small upserts.

- **Upserts**: the agent's update tools write a few nodes and edges at a time. This benchmark upserts
  ``--upserts`` small fragments (one node and one edge to an earlier node each) of real Wikidata labels into
  an empty embedded store and into an empty Neo4j database, one after the other, side by side, and reports
  nodes per second; then into an embedded store already holding a random ``--base``-node graph, with and
  without a neighbour read after each upsert. The former upsert (merge the whole graph, index it again) runs
  beside each embedded figure as the reference.
- **Per question**: the first ``--questions`` SimpleQuestions-Wikidata test questions with the local
  SmolLM2 server against a local Virtuoso loaded with the SimpleQuestions-Wikidata answer triples and the
  RoboData experiment KGs (Debian's virtuoso-opensource, as in the tests): remote queries, tool calls,
  tokens and wall time per question (means and p50), at ``--turns`` orchestrator turns; then the same for
  the RoboData authors' queries A1-A7 (the paper's per-query figures are for GPT-4-class models).

Run: ``make bench`` or ``python -m benchmarks.bench_robodata [--upserts 300 --questions 10 --turns 8]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.common import WORK, neo4j_with, record, settings_and_data
from metakg import api
from metakg.config import Settings
from metakg.ingest.datasets import DatasetFormat
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.schemas.bundle import Bundle, merge_bundles, write_bundle
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.tables import conform_edges, conform_nodes, empty_edges, empty_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import sparql_server
from tools.wikidata_testdata import write_test_rdf

QUESTIONS = "wikidata/simplequestions_wd_test_answerable.txt"
LABELS = "wikidata/simplequestions_wd_labels_en.tsv"
AUTHORS = "wikidata/robodata_experiment_kgs.json"


def fragments(data_dir: Path, n: int) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """``n`` fragments of one node (a real label) and one edge to the previous node."""
    rows = (data_dir / LABELS).read_text(encoding="utf-8").splitlines()[1 : n + 1]
    out = []
    for i, row in enumerate(rows):
        qid, label = row.split("\t")[:2]
        nodes = conform_nodes(pl.DataFrame({"id": [f"wd:{qid}"], "name": [label], "type": "entity", "source": "bench"}))
        if i == 0:
            edges = empty_edges()
        else:
            prev = rows[i - 1].split("\t")[0]
            edges = conform_edges(
                pl.DataFrame(
                    {
                        "src": [f"wd:{qid}"],
                        "dst": [f"wd:{prev}"],
                        "rel": ["related_to"],
                        "source": "bench",
                        "confidence": 1.0,
                    }
                )
            )
        out.append((nodes, edges))
    return out


def upserts_per_second(store: GraphStore, parts: list[tuple[pl.DataFrame, pl.DataFrame]]) -> dict[str, float]:
    started = time.perf_counter()
    for nodes, edges in parts:
        store.upsert(nodes, edges)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "nodes_per_s": round(len(parts) / seconds, 1)}


class ReindexingStore(EmbeddedStore):
    """The embedded store's former upsert, kept here as the reference: merge the whole graph with the
    upsert and index it all again."""

    def upsert(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        merged = merge_bundles([self.bundle(), Bundle(nodes, edges)])
        self._index(conform_nodes(merged.nodes), conform_edges(merged.edges))


def base_graph(n_nodes: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A random graph of ``n_nodes`` nodes and twice as many edges, under ids the fragments do not use."""
    rng = np.random.default_rng(7)
    ids = [f"kg:base/{i}" for i in range(n_nodes)]
    nodes = conform_nodes(pl.DataFrame({"id": ids, "name": ids, "type": "entity", "source": "bench"}))
    src, dst = rng.integers(0, n_nodes, 2 * n_nodes), rng.integers(0, n_nodes, 2 * n_nodes)
    ends = {"src": [ids[i] for i in src], "dst": [ids[i] for i in dst]}
    edges = conform_edges(pl.DataFrame(ends | {"rel": "related_to", "source": "bench", "confidence": 1.0}))
    edges = edges.unique("id", keep="first", maintain_order=True)
    return nodes, edges


def interleaved_per_second(store: GraphStore, parts: list[tuple[pl.DataFrame, pl.DataFrame]]) -> dict[str, float]:
    """Upserts each followed by a read of the new node's neighbours (the agent's pattern)."""
    started = time.perf_counter()
    for nodes, edges in parts:
        store.upsert(nodes, edges)
        store.neighbours(nodes["id"][0])
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "nodes_per_s": round(len(parts) / seconds, 1)}


def upsert_figures(settings: Settings, data_dir: Path, n: int, neo4j: bool, base: int) -> dict[str, Any]:
    parts = fragments(data_dir, n)
    figures: dict[str, Any] = {
        "upserts": len(parts),
        "embedded": upserts_per_second(EmbeddedStore(empty_nodes(), empty_edges()), parts),
        "reindexing": upserts_per_second(ReindexingStore(empty_nodes(), empty_edges()), parts),
    }
    if base:
        nodes, edges = base_graph(base)
        figures["base_nodes"], figures["base_edges"] = nodes.height, edges.height
        figures["embedded_on_base"] = upserts_per_second(EmbeddedStore(nodes, edges), parts)
        figures["embedded_on_base_with_reads"] = interleaved_per_second(EmbeddedStore(nodes, edges), parts)
        few = parts[: max(1, n // 10)]  # the reference is slow on a large base: a tenth of the upserts
        figures["reindexing_on_base"] = upserts_per_second(ReindexingStore(nodes, edges), few)
    if neo4j:
        seed = WORK / "robodata_seed"
        write_bundle(seed, Bundle(parts[0][0], empty_edges()))  # one node: a database with the schema in place
        with neo4j_with(seed, settings, "robodata_upserts") as (_neo, store, _load_s):
            figures["neo4j"] = upserts_per_second(store, parts[1:])
    return figures


def per_question(
    settings: Settings,
    data_dir: Path,
    questions: int,
    turns: int,
    questions_file: str = QUESTIONS,
    fmt: DatasetFormat = "simplequestions",
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "virtuoso"
        server = sparql_server.start(home, data_dirs=(data_dir / "wikidata",))
        try:
            for path in write_test_rdf(data_dir / "wikidata", home, questions=True):
                sparql_server.load(server, path)
            run = settings.model_copy(
                update={
                    "wikidata": settings.wikidata.model_copy(update={"endpoint": server.endpoint}),
                    "qa": settings.qa.with_section("robodata", {"max_turns": turns}),
                }
            )
            out = Path(tmp) / "report"
            api.evaluate_benchmark(run, api.Benchmark(data_dir / questions_file, fmt, limit=questions), out,
                                   api.Runs(["robodata"]), options=api.EvalOptions(resume=False))  # fmt: skip
            rows = [pl.read_ndjson(out / "answers-robodata.jsonl").to_dicts()][0]
        finally:
            sparql_server.stop(server)
    stats = [r["trace"]["stats"] for r in rows]
    usage = [r["usage"] for r in rows]

    def summary(values: list[float]) -> dict[str, float]:
        return {"mean": round(statistics.mean(values), 2), "p50": round(statistics.median(values), 2)}

    return {
        "questions": len(rows),
        "turns": turns,
        "answered": sum(1 for r in rows if r["status"] == "ok"),
        "remote_queries": summary([s.get("remote_queries", 0) for s in stats]),
        "tool_calls": summary([s["tool_calls"] for s in stats]),
        "llm_calls": summary([u["llm_calls"] for u in usage]),
        "tokens": summary([u["tokens"] + u["saved_tokens"] for u in usage]),
        "seconds": summary([u["total_ms"] / 1000 for u in usage]),
        "nodes_added": summary([s["nodes_added"] for s in stats]),
        "support_precision": summary([s["support_precision"] or 0.0 for s in stats]),
        # the most times one question ran a call of one tool that failed with one error (2 at most by design)
        "most_same_failures": max((same_failures(r["trace"]) for r in rows), default=0),
        "repeated_failures_blocked": sum(s.get("repeated_failures_blocked", 0) for s in stats),
    }


def same_failures(trace: dict[str, Any]) -> int:
    """The most times the calls of one answer failed the same way (one tool, one error kind), counting
    only the calls that ran."""
    from collections import Counter

    from metakg.qa_engine.strategies.robodata.agent import failure_kind

    seen: Counter[tuple[str, str]] = Counter()
    for step in trace.get("steps") or []:
        for call in step.get("tool_calls") or []:
            if not call["ok"] and not call["text"].startswith("not run"):
                seen[(call["tool"], failure_kind(call["tool"], call["text"]))] += 1
    return max(seen.values(), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upserts", type=int, default=300)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--base", type=int, default=100_000, help="Nodes of the large base graph (0: none).")
    parser.add_argument("--no-neo4j", action="store_true")
    args = parser.parse_args()
    settings, data_dir = settings_and_data()
    figures = {
        "upserts": upsert_figures(settings, data_dir, args.upserts, not args.no_neo4j, args.base),
        "per_question": per_question(settings, data_dir, args.questions, args.turns),
        "authors_queries": per_question(settings, data_dir, 7, args.turns, AUTHORS, "robodata"),
    }
    up = figures["upserts"]
    print(f"RoboData local graph: {up['upserts']} small upserts (one node and one edge each)")
    labels = {
        "embedded": "embedded, empty start",
        "reindexing": "embedded, re-indexing each upsert (reference), empty start",
        "neo4j": "Neo4j, empty start",
        "embedded_on_base": f"embedded, on a {up.get('base_nodes', 0):,}-node base",
        "embedded_on_base_with_reads": "embedded, same base, a neighbour read after each upsert",
        "reindexing_on_base": "embedded, re-indexing each upsert (reference), same base",
    }
    for key, label in labels.items():
        if key in up:
            print(f"  {label:<62} {up[key]['nodes_per_s']:8.1f} nodes/s ({up[key]['seconds']} s)")
    for name, title in (("per_question", "SimpleQuestions-Wikidata"), ("authors_queries", "the authors' A1-A7")):
        q = figures[name]
        print(f"RoboData per question ({q['questions']} {title}, local SmolLM2, {q['turns']} turns)")
        for key in (
            "remote_queries",
            "tool_calls",
            "llm_calls",
            "tokens",
            "seconds",
            "nodes_added",
            "support_precision",
        ):
            print(f"  {key:<18} mean {q[key]['mean']:>9}  p50 {q[key]['p50']:>9}")
        print(
            f"  one call failing the same way, most times in one question: {q['most_same_failures']} "
            f"(calls not run for it: {q['repeated_failures_blocked']})"
        )
    record("robodata", figures, synthetic_data=True)


if __name__ == "__main__":
    main()
