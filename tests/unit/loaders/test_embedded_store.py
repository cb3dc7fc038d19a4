"""The embedded store: the GraphStore contract, plus path results checked against networkx."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import polars as pl
import pytest

from metakg.errors import StoreError
from metakg.llm.embedder import Embedder
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.loaders.path_core import load_library
from metakg.schemas.bundle import Bundle
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.tables import conform_edges, conform_nodes
from tests.conftest import small_bundle
from tests.contract.graph_store_contract import GraphStoreContract


class TestEmbeddedStoreContract(GraphStoreContract):
    def make_store(self, bundle: Bundle, embedder: Embedder | None) -> GraphStore:
        return EmbeddedStore.from_bundle(bundle, embedder=embedder)


def random_graph(n_nodes: int, n_edges: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = [f"kg:r/{i}" for i in range(n_nodes)]
    src = rng.integers(0, n_nodes, n_edges)
    dst = rng.integers(0, n_nodes, n_edges)
    rel = rng.choice(["a", "b", "c"], n_edges)
    nodes = conform_nodes(pl.DataFrame({"id": ids, "name": ids, "type": "concept", "source": "r"}))
    edges = conform_edges(
        pl.DataFrame(
            {"src": [ids[i] for i in src], "dst": [ids[i] for i in dst], "rel": rel, "source": "r", "confidence": 1.0}
        )
    ).unique("id", keep="first", maintain_order=True)
    return nodes, edges


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_paths_agree_with_networkx(seed: int) -> None:
    nodes, edges = random_graph(300, 450, seed)
    store = EmbeddedStore(nodes, edges)
    graph = nx.MultiGraph()
    graph.add_nodes_from(nodes["id"])
    for s, d, e in edges.select("src", "dst", "id").iter_rows():
        graph.add_edge(s, d, key=e)
    ids = nodes["id"].to_list()
    rnd = random.Random(seed)
    checked = 0
    for _ in range(150):
        a, b = rnd.sample(ids, 2)
        expected = sorted(len(p) for p in nx.all_simple_edge_paths(graph, a, b, cutoff=4))[:6]
        got = store.shortest_paths(a, b, k=6, max_hops=4)
        assert [p.hops for p in got] == expected
        checked += bool(expected)
    assert checked > 20  # the graph is connected enough for the comparison to mean something


def test_directed_paths_agree_with_networkx() -> None:
    nodes, edges = random_graph(200, 600, 7)
    store = EmbeddedStore(nodes, edges)
    graph = nx.DiGraph()
    graph.add_edges_from(edges.select("src", "dst").iter_rows())
    rnd = random.Random(7)
    for _ in range(100):
        a, b = rnd.sample(nodes["id"].to_list(), 2)
        try:
            length = nx.shortest_path_length(graph, a, b)
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            length = None
        got = store.shortest_paths(a, b, max_hops=4, directed=True)
        assert (got[0].hops if got else None) == (length if length is not None and length <= 4 else None)


def test_refuses_duplicate_ids_and_dangling_edges() -> None:
    bundle = small_bundle()
    with pytest.raises(StoreError, match="not unique"):
        EmbeddedStore(pl.concat([bundle.nodes, bundle.nodes.head(1)]), bundle.edges)
    with pytest.raises(StoreError, match="do not exist"):
        EmbeddedStore(bundle.nodes.tail(-1), bundle.edges)


def test_embedding_search_without_embedder_explains() -> None:
    store = EmbeddedStore.from_bundle(small_bundle())
    with pytest.raises(StoreError, match="embedder"):
        store.search("anything", mode="embedding")
    assert store.search("no such name") == []  # auto mode without an embedder stops at normalised


def test_precomputed_embeddings_are_used(embedder: Embedder) -> None:
    bundle = small_bundle()
    vectors = embedder.embed(bundle.nodes["name"].to_list())
    frame = pl.DataFrame({"id": bundle.nodes["id"], "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})
    store = EmbeddedStore.from_bundle(bundle, embedder=embedder, embeddings=frame)
    assert store.search("migraine", mode="embedding", k=1)[0].node.name == "migraine"
    partial = EmbeddedStore.from_bundle(bundle, embedder=embedder, embeddings=frame.head(3))
    assert partial.search("migraine", mode="embedding", k=1)[0].node.name == "migraine"  # the rest embedded now
    ids = bundle.nodes["id"].to_list()
    one_null = frame.with_columns(pl.when(pl.int_range(pl.len()) == 2).then(None).otherwise("vector").alias("vector"))
    for other in (frame.reverse(), one_null):
        # rows in another order are matched by id; a node whose vector is null is embedded now
        found = EmbeddedStore.from_bundle(bundle, embedder=embedder, embeddings=other).name_vectors(ids)
        assert np.allclose([found[i] for i in ids], vectors, atol=1e-6)
    assert np.array_equal([store.name_vectors(ids)[i] for i in ids], vectors.astype(np.float32))


def test_compiled_core_is_built() -> None:
    assert load_library() is not None, "metakg/loaders/_paths.c was not compiled: run `make install`"
    nodes, edges = random_graph(50, 100, 3)
    assert EmbeddedStore(nodes, edges)._core is not None
    assert EmbeddedStore(nodes, edges, compiled=False)._core is None


@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("relations", [None, ["a", "c"]])
def test_compiled_core_matches_numpy_reference(seed: int, directed: bool, relations: list[str] | None) -> None:
    nodes, edges = random_graph(400, 1400, seed)
    compiled = EmbeddedStore(nodes, edges)
    reference = EmbeddedStore(nodes, edges, compiled=False)
    rnd = random.Random(seed)
    ids = nodes["id"].to_list()
    found = 0
    for _ in range(120):
        a, b = rnd.sample(ids, 2)
        kwargs = {"k": 7, "max_hops": 4, "directed": directed, "relations": relations}
        got = compiled.shortest_paths(a, b, **kwargs)  # type: ignore[arg-type]
        assert got == reference.shortest_paths(a, b, **kwargs)  # type: ignore[arg-type]
        found += len(got)
    assert found > 10  # enough pairs are connected for the comparison to mean something


def test_upsert_after_precomputed_embeddings_embeds_only_new_nodes(embedder: Embedder) -> None:
    bundle = small_bundle()
    calls: list[list[str]] = []

    class CountingEmbedder:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts: list[str]) -> np.ndarray:
            calls.append(list(texts))
            return embedder.embed(texts)

    vectors = embedder.embed(bundle.nodes["name"].to_list())
    frame = pl.DataFrame({"id": bundle.nodes["id"], "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})
    store = EmbeddedStore.from_bundle(bundle, embedder=CountingEmbedder(), embeddings=frame)
    store.upsert(
        conform_nodes(
            pl.DataFrame({"id": ["kg:test/tea"], "name": ["green tea"], "type": ["concept"], "source": ["t"]})
        ),
        conform_edges(pl.DataFrame(schema={"src": pl.String, "dst": pl.String, "rel": pl.String, "source": pl.String})),
    )
    hits = store.search("a cup of green tea", mode="embedding", k=1)
    assert hits[0].node.name == "green tea"
    assert calls == [["green tea"], ["a cup of green tea"]]  # the 10 precomputed names were not embedded again


def _batch(rng: np.random.Generator, n_pool: int, step: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A small upsert: a few nodes from a pool (some new, some known, with new aliases, descriptions and
    xrefs) and edges among them (some repeated, with another confidence and record id)."""
    picked = sorted({int(i) for i in rng.integers(0, n_pool, 3)})
    ids = [f"kg:r/{i}" for i in picked]
    nodes = conform_nodes(
        pl.DataFrame(
            {
                "id": ids,
                "name": [f"node {i}" for i in picked],
                "type": "concept",
                "source": "r",
                "description": [f"seen at step {step}" if rng.random() < 0.5 else None for _ in ids],
                "aliases": [[f"alias {i}.{step}"] for i in picked],
                "xrefs": [[f"x:{i}"] for i in picked],
                "retrieved_at": None,
            }
        )
    )
    pairs = [(a, b) for a in ids for b in ids if a != b and rng.random() < 0.5]
    edges = conform_edges(
        pl.DataFrame(
            {
                "src": [a for a, _ in pairs],
                "dst": [b for _, b in pairs],
                "rel": [rng.choice(["a", "b", "new"]) for _ in pairs],
                "source": "r",
                "confidence": [float(rng.random()) for _ in pairs],
                "record_ids": [[f"rec{step}"] for _ in pairs],
            },
            schema_overrides={"src": pl.String, "dst": pl.String, "rel": pl.String, "record_ids": pl.List(pl.String)},
        )
    )
    return nodes, edges


@pytest.mark.parametrize("seed", [1, 2])
def test_many_small_upserts_equal_one_store_built_from_the_merge(seed: int) -> None:
    """Incremental upserts (rows merged in place, new rows appended, adjacency rebuilt lazily) leave the same
    graph, answering the same neighbours, paths and name lookups, as a store built once from the merge."""
    from metakg.schemas.bundle import merge_bundles

    base_nodes, base_edges = random_graph(60, 80, seed)
    store = EmbeddedStore(base_nodes, base_edges)
    rng = np.random.default_rng(seed)
    batches = []
    for step in range(60):
        batch = _batch(rng, 90, step)
        batches.append(Bundle(*batch))
        store.upsert(*batch)
        if step % 7 == 0:  # reads between writes: the lazy indexes must follow the writes
            store.neighbours("kg:r/0")
            store.search("node 3", mode="exact")
    merged = merge_bundles([Bundle(base_nodes, base_edges), *batches])
    fresh = EmbeddedStore(conform_nodes(merged.nodes), conform_edges(merged.edges))
    got, want = store.bundle(), fresh.bundle()
    aliases = pl.col("aliases").list.sort()  # the merge's set difference does not keep the aliases' order
    assert got.nodes.with_columns(aliases).sort("id").equals(want.nodes.with_columns(aliases).sort("id"))
    assert got.edges.sort("id").equals(want.edges.sort("id"))
    ids = want.nodes["id"].to_list()
    assert len(ids) > 60  # new nodes arrived
    for side in ("_out", "_in", "_both"):  # the grown adjacency is the one a fresh build makes, entry for entry
        mine, theirs = getattr(store, side), getattr(fresh, side)
        assert all(np.array_equal(getattr(mine, f), getattr(theirs, f)) for f in ("ptr", "nbr", "eid"))
    rnd = random.Random(seed)
    for node_id in rnd.sample(ids, 20):
        assert sorted((n.edge.id, n.direction, n.edge.confidence, n.edge.count) for n in store.neighbours(node_id)) == (
            sorted((n.edge.id, n.direction, n.edge.confidence, n.edge.count) for n in fresh.neighbours(node_id))
        )
        mine, theirs = store.get_node(node_id), fresh.get_node(node_id)
        assert mine is not None and theirs is not None
        assert (mine.name, mine.description, mine.xrefs, sorted(mine.aliases)) == (
            theirs.name,
            theirs.description,
            theirs.xrefs,
            sorted(theirs.aliases),
        )
    for _ in range(30):
        a, b = rnd.sample(ids, 2)
        assert [p.edges for p in store.shortest_paths(a, b, k=4, max_hops=3)] == [
            p.edges for p in fresh.shortest_paths(a, b, k=4, max_hops=3)
        ]
    for text in ("node 61", "alias 5.3", "NODE 7"):
        assert {h.node.id for h in store.search(text, mode="exact")} == {
            h.node.id for h in fresh.search(text, mode="exact")
        }
    assert store.subgraph(ids[:3], hops=2).edges.sort("id").equals(fresh.subgraph(ids[:3], hops=2).edges.sort("id"))


def test_an_upsert_with_a_dangling_edge_changes_nothing() -> None:
    nodes, edges = random_graph(10, 12, 1)
    store = EmbeddedStore(nodes, edges)
    before = store.bundle()
    new_node = conform_nodes(pl.DataFrame({"id": ["kg:r/new"], "name": ["new"], "type": "concept", "source": "r"}))
    dangling = conform_edges(pl.DataFrame({"src": ["kg:r/new"], "dst": ["kg:r/nowhere"], "rel": "a", "source": "r"}))
    with pytest.raises(StoreError, match="kg:r/nowhere"):
        store.upsert(new_node, dangling)
    assert store.bundle().nodes.equals(before.nodes) and store.get_node("kg:r/new") is None


def test_a_name_of_punctuation_is_found_exactly_but_never_as_the_normalised_form_of_nothing() -> None:
    base = small_bundle()
    dash = conform_nodes(pl.DataFrame({"id": ["kg:test/dash"], "name": ["-"], "type": ["concept"], "source": ["t"]}))
    store = EmbeddedStore(pl.concat([base.nodes, dash]), base.edges)
    assert [h.node.id for h in store.search("-", mode="exact")] == ["kg:test/dash"]
    for text in ("?", "\U0001f642", "--", "\x01-"):  # once matched the node "-" at 1.0
        assert store.search(text, mode="normalised") == []
