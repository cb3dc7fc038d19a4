"""The identity benchmark's graph scoring: a pair set resolved as one graph, every known wrong merge counted."""

from __future__ import annotations

from benchmarks.bench_identity import pair_graph, score_graph
from metakg.identity.evaluate import GoldPairs, half


def held_out(ids: list[str]) -> list[str]:
    return [i for i in ids if half(i) == 1]


def test_a_pair_set_becomes_one_node_per_id_and_merges_are_scored_pairwise() -> None:
    subjects = held_out([f"doid:{i}" for i in range(40)])[:3]
    a, b, c = subjects
    gold = GoldPairs(
        "g",
        left=["one", "one", "two", "three"],
        right=["One", "Uno", "Two", "Tres"],
        match=[True, True, False, True],
        keys=[a, a, b, c],
        left_ids=[a, a, b, c],
        right_ids=["mesh:D1", "MESH:d2", "mesh:D3", "mesh:D1"],  # mesh:D1 in two rows: one node
    )
    nodes, pairs = pair_graph(gold)
    assert sorted(nodes["id"]) == sorted([a, b, c, "mesh:D1", "mesh:D2", "mesh:D3"])
    assert len(pairs) == 4 and sum(match for *_, match in pairs) == 3
    alone = {x: x for x in nodes["id"]}
    assert score_graph(pairs, alone)["recall"] == 0.0
    # a resolver that puts a with both of its MeSH ids: two right pairs, and two MeSH ids in one node
    merged = alone | {"mesh:D1": a, "mesh:D2": a}
    found = score_graph(pairs, merged)
    assert (found["correct"], found["wrong_same_system"], found["wrong_labelled"]) == (2, 1, 0)
    assert found["precision"] == round(2 / 3, 4) and found["labelled_only"]["precision"] == 1.0
    everything = score_graph(pairs, dict.fromkeys(nodes["id"], "all"))
    assert everything["recall"] == 1.0 and everything["wrong_labelled"] == 1
    assert everything["precision"] < everything["labelled_only"]["precision"]
