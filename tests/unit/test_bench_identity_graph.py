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
    # a resolver that puts a with both of its MeSH ids (right) and with b's (two MeSH ids the gold keeps apart)
    merged = alone | {"mesh:D1": a, "mesh:D2": a, "mesh:D3": a}
    found = score_graph(pairs, merged)
    assert (found["correct"], found["wrong_same_system"], found["wrong_labelled"]) == (2, 2, 0)
    assert found["precision"] == 0.5 and found["labelled_only"]["precision"] == 1.0
    everything = score_graph(pairs, dict.fromkeys(nodes["id"], "all"))
    assert everything["recall"] == 1.0 and everything["wrong_labelled"] == 1
    assert everything["precision"] < everything["labelled_only"]["precision"]


def test_two_ids_of_one_system_the_right_pairs_join_are_no_wrong_merge() -> None:
    # the gold says doid:1 is mesh:D1 and mesh:D2 (a chain of its own): merging all three is right
    pairs = [("doid:1", "mesh:D1", True), ("doid:1", "mesh:D2", True), ("doid:2", "mesh:D3", True)]
    together = {"doid:1": "x", "mesh:D1": "x", "mesh:D2": "x", "doid:2": "y", "mesh:D3": "y"}
    assert score_graph(pairs, together)["wrong_same_system"] == 0
    assert score_graph(pairs, together)["precision"] == 1.0
    everything = dict.fromkeys(together, "x")
    assert score_graph(pairs, everything)["wrong_same_system"] == 3  # D3 with D1 and D2, doid:2 with doid:1
