"""The LLM judge measured: biomappings' held-out pairs resolved as one graph with and without ``--judge``.

The same graph as ``bench_identity``'s (one node per id of the held-out half of a biomappings sample, the
known wrong merges counted: a labelled wrong pair, or two ids of one identifier system in one node). metakg
resolves it by names (``cascade``) at its default threshold; with the judge, the pairs scored within
``JUDGE_BAND`` below it go to the configured LLM (the local SmolLM2-135M when no endpoint is set, as
``metakg resolve --judge`` does) and those it calls one entity are joined too. Beside them: every pair of
the band joined (the threshold lowered by the band), and the judge's yes rate on the band's labelled right
and wrong pairs. Every call goes through the cached, metered client: a second run asks nothing.

Run: ``make bench`` or ``python -m benchmarks.bench_identity_judge [--pairs-limit 6000]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_identity import PAIRS_LIMIT, SETS, clusters_of, pair_graph, score_graph, typed_links
from benchmarks.common import record, settings_and_data
from metakg.api.llm import llm_session, run_with
from metakg.identity.evaluate import GoldPairs, read_gold
from metakg.identity.judge import JUDGE_BAND, judge_pairs
from metakg.identity.names import DEFAULT_THRESHOLDS
from metakg.llm.embedder import OnnxEmbedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs-limit", type=int, default=PAIRS_LIMIT, help="Rows sampled from biomappings.")
    args = parser.parse_args()
    settings, data = settings_and_data(" (the gold mappings are in its er/ folder)")
    if settings.embedder.model_dir is None:
        raise SystemExit("needs the ONNX embedding model (METAKG_EMBEDDER__MODEL_DIR)")
    embedder = OnnxEmbedder(Path(settings.embedder.model_dir))
    _fmt, file, second = SETS["biomappings"]
    er = Path(data) / "er"
    gold = read_gold("sssom", er / file, second=er / second if second else None, limit=args.pairs_limit)
    assert isinstance(gold, GoldPairs)
    nodes, pairs = pair_graph(gold)
    cut = DEFAULT_THRESHOLDS["cascade"]
    links = typed_links(nodes, "cascade", round(cut - JUDGE_BAND, 4), embedder)
    sure = [link for link in links if link.score >= cut]
    band = [link for link in links if link.score < cut]
    name = dict(zip(nodes["id"].to_list(), nodes["name"].to_list(), strict=True))
    print(f"biomappings held-out graph: {nodes.height:,} nodes, {len(pairs):,} labelled pairs")
    print(
        f"  cascade links: {len(sure):,} at or above {cut}, {len(band):,} in the band [{cut - JUDGE_BAND:.2f}, {cut})"
    )
    began = time.perf_counter()
    with llm_session(settings) as client:
        asked = [(name[x.a], "entity", name[x.b], "entity") for x in band]
        verdicts = run_with(client, judge_pairs(asked, client, concurrency=settings.llm.concurrency))
        usage = client.meter.summary()
        model = client.model
    seconds = round(time.perf_counter() - began, 1)
    yes = [link for link, verdict in zip(band, verdicts, strict=True) if verdict.same]
    label = {(a, b): match for a, b, match in pairs}
    labelled = [(v.same, label.get((x.a, x.b), label.get((x.b, x.a)))) for x, v in zip(band, verdicts, strict=True)]
    judged_right = [same for same, match in labelled if match is True]
    judged_wrong = [same for same, match in labelled if match is False]
    figures: dict[str, Any] = {
        "pairs_limit": args.pairs_limit,
        "model": model,
        "nodes": nodes.height,
        "labelled_pairs": len(pairs),
        "threshold": cut,
        "band": JUDGE_BAND,
        "asked": len(band),
        "yes": len(yes),
        "no": sum(1 for v in verdicts if v.same is False),
        "unclear": sum(1 for v in verdicts if v.same is None and not v.reply.startswith("error:")),
        "failed": sum(1 for v in verdicts if v.reply.startswith("error:")),
        "yes_rate_on_right_pairs": round(sum(1 for s in judged_right if s) / len(judged_right), 3)
        if judged_right
        else None,
        "yes_rate_on_wrong_pairs": round(sum(1 for s in judged_wrong if s) / len(judged_wrong), 3)
        if judged_wrong
        else None,
        "labelled_in_band": {"right": len(judged_right), "wrong": len(judged_wrong)},
        "llm_calls": usage.llm_calls,  # cache hits included
        "fresh_calls": usage.llm_calls - usage.cache_hits,
        "cache_hits": usage.cache_hits,
        "seconds": seconds,
        "runs": {},
    }
    print(
        f"  judge ({model}): {figures['yes']} yes, {figures['no']} no, {figures['unclear']} unclear, "
        f"{figures['failed']} failed in {seconds} s "
        f"({usage.llm_calls} calls, {usage.cache_hits} cache hits); yes on the band's right pairs "
        f"{figures['yes_rate_on_right_pairs']}, on its wrong pairs {figures['yes_rate_on_wrong_pairs']}"
    )
    for run, joined in (("cascade", sure), ("cascade + judge", sure + yes), ("cascade, band joined", links)):
        scored = score_graph(pairs, clusters_of(nodes, joined))
        figures["runs"][run] = scored
        print(
            f"  {run:<22} P {scored['precision']:.3f} R {scored['recall']:.3f} F1 {scored['f1']:.3f} "
            f"(wrong: {scored['wrong_labelled']} labelled, {scored['wrong_same_system']} same-system)"
        )
    record("identity_judge", figures, synthetic_data=False)


if __name__ == "__main__":
    main()
