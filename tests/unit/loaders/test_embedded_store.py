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
