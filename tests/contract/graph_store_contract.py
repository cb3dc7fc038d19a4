"""The GraphStore contract: every store implementation subclasses this class and provides ``make_store``.

The embedded store and the Neo4j store both pass it, so every QA strategy can run on either.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from metakg.errors import NodeNotFound, UsageError
from metakg.llm.embedder import Embedder
from metakg.schemas.bundle import Bundle
from metakg.schemas.graph_store import AUTO_EMBEDDING_FLOOR, GraphStore
from metakg.schemas.tables import conform_edges, conform_nodes
from tests.conftest import node_id, small_bundle


class GraphStoreContract:
    """Behaviour every GraphStore must show on :func:`tests.conftest.small_bundle`."""

    def make_store(self, bundle: Bundle, embedder: Embedder | None) -> GraphStore:
        raise NotImplementedError

    @pytest.fixture
    def bundle(self) -> Bundle:
        return small_bundle()

    @pytest.fixture
    def store(self, bundle: Bundle, embedder: Embedder) -> GraphStore:
        return self.make_store(bundle, embedder)

    def nid(self, bundle: Bundle, name: str) -> str:
        return node_id(bundle, name)

    # ---------------------------------------------------------------- lifecycle
    def test_a_store_is_a_context_manager_and_closes_twice_harmlessly(self, store: GraphStore, bundle: Bundle) -> None:
        with store as opened:
            assert opened is store and store.counts()["nodes"] == bundle.nodes.height
        store.close()
        assert isinstance(store, GraphStore)

    # ---------------------------------------------------------------- lookup
    def test_edge_records_are_the_records_stating_each_edge(self, store: GraphStore, bundle: Bundle) -> None:
        from metakg.schemas.graph_store import EdgeSources

        assert isinstance(store, EdgeSources)
        wanted = bundle.edges["id"].to_list()[:3]
        found = store.edge_records([*wanted, wanted[0], "e:no-such-edge"])
        expected = dict(zip(bundle.edges["id"].to_list(), bundle.edges["record_ids"].to_list(), strict=True))
        assert found == {e: tuple(expected[e]) for e in wanted} and all(found.values())
        assert store.edge_records([]) == {}

    def test_counts(self, store: GraphStore, bundle: Bundle) -> None:
        assert store.counts() == {"nodes": bundle.nodes.height, "edges": bundle.edges.height}

    def test_get_node_returns_all_fields(self, store: GraphStore, bundle: Bundle) -> None:
        node = store.get_node(self.nid(bundle, "aspirin"))
        assert node is not None
        assert node.name == "aspirin" and node.type == "drug" and node.source == "test"
        assert node.description == "a common painkiller"
        assert set(node.aliases) == {"acetylsalicylic acid", "ASA"}
        assert set(node.xrefs) == {"drugbank:DB00945", "wd:Q18216"}

    def test_get_node_unknown_is_none(self, store: GraphStore) -> None:
        assert store.get_node("kg:test/does-not-exist") is None

    def test_names_are_stored_exactly(self, store: GraphStore, bundle: Bundle) -> None:
        tricky = 'O\'Brien \\ "quoted" MATCH (n) 東京'
        node = store.get_node(self.nid(bundle, tricky))
        assert node is not None and node.name == tricky

    def test_names_lists_every_name_and_alias_once(self, store: GraphStore, bundle: Bundle) -> None:
        names = store.names()
        expected = set(bundle.nodes["name"].to_list()) | set(bundle.nodes["aliases"].explode().drop_nulls().to_list())
        assert set(names) == expected and len(names) == len(expected)

    def test_name_vectors_are_the_names_embeddings(self, store: GraphStore, bundle: Bundle, embedder: Embedder) -> None:
        store.search("painkiller", mode="embedding", k=1)  # the embedded store builds its vectors on first use
        aspirin = self.nid(bundle, "aspirin")
        found = store.name_vectors([aspirin, "kg:test/does-not-exist"])
        assert list(found) == [aspirin]
        vector = np.asarray(found[aspirin], dtype=np.float32)
        assert vector.shape == (embedder.dim,)
        assert float(vector @ embedder.embed(["aspirin"])[0]) == pytest.approx(1.0, abs=1e-4)

    # ---------------------------------------------------------------- neighbours
    def test_neighbours_both_directions(self, store: GraphStore, bundle: Bundle) -> None:
        found = store.neighbours(self.nid(bundle, "aspirin"))
        by_name = {(n.node.name, n.direction, n.edge.rel) for n in found}
        assert by_name == {
            ("headache", "out", "treats"),
            ("warfarin", "out", "interacts_with"),
            ("fever", "out", "treats"),
            ('O\'Brien \\ "quoted" MATCH (n) 東京', "in", "related_to"),
        }

    def test_neighbours_relation_filter_and_direction(self, store: GraphStore, bundle: Bundle) -> None:
        aspirin = self.nid(bundle, "aspirin")
        treats = store.neighbours(aspirin, relations=["treats"])
        assert {n.node.name for n in treats} == {"headache", "fever"}
        assert all(n.edge.rel == "treats" for n in treats)
        incoming = store.neighbours(aspirin, direction="in")
        assert [n.direction for n in incoming] == ["in"]
        assert store.neighbours(aspirin, relations=["no_such_relation"]) == []

    def test_neighbour_edges_point_the_right_way(self, store: GraphStore, bundle: Bundle) -> None:
        aspirin = self.nid(bundle, "aspirin")
        for n in store.neighbours(aspirin):
            if n.direction == "out":
                assert (n.edge.src, n.edge.dst) == (aspirin, n.node.id)
            else:
                assert (n.edge.src, n.edge.dst) == (n.node.id, aspirin)

    def test_neighbours_limit(self, store: GraphStore, bundle: Bundle) -> None:
        assert len(store.neighbours(self.nid(bundle, "aspirin"), limit=2)) == 2

    def test_neighbours_come_outgoing_first_each_side_in_edge_id_order(self, store: GraphStore, bundle: Bundle) -> None:
        """The one order every store lists neighbours in, so a limit keeps the same ones everywhere."""
        aspirin = self.nid(bundle, "aspirin")
        in_bundle = bundle.edges.filter(pl.col("src") == aspirin)["id"].to_list()
        assert in_bundle != sorted(in_bundle)  # the bundle's row order is not the order asked for
        found = store.neighbours(aspirin)
        ways = [n.direction for n in found]
        assert ways == sorted(ways, key=lambda w: w != "out") and "in" in ways
        for way in ("out", "in"):
            ids = [n.edge.id for n in found if n.direction == way]
            assert ids == sorted(ids)
        assert [n.edge.id for n in store.neighbours(aspirin, limit=2)] == [n.edge.id for n in found[:2]]
        assert [n.edge.id for n in store.neighbours(aspirin, limit=4)] == [n.edge.id for n in found[:4]]

    def test_neighbours_unknown_node_raises(self, store: GraphStore) -> None:
        with pytest.raises(NodeNotFound):
            store.neighbours("kg:test/nope")

    def test_isolated_node_has_no_neighbours(self, store: GraphStore, bundle: Bundle) -> None:
        assert store.neighbours(self.nid(bundle, "isolated")) == []

    # ---------------------------------------------------------------- search
    def test_exact_search_by_name_and_alias(self, store: GraphStore, bundle: Bundle) -> None:
        hits = store.search("aspirin", mode="exact")
        assert [h.node.id for h in hits] == [self.nid(bundle, "aspirin")]
        assert hits[0].match == "exact"
        assert [h.node.name for h in store.search("pyrexia", mode="exact")] == ["fever"]
        assert store.search("Aspirin", mode="exact") == []

    def test_a_text_without_anything_to_search_for_is_refused_and_punctuation_has_no_normalised_form(
        self, store: GraphStore
    ) -> None:
        for blank in ("", "   ", "\x01\x02", "\u200b"):
            with pytest.raises(UsageError, match="nothing to search for"):
                store.search(blank)
        for text in ("-", "?!", "\U0001f642"):  # no letter or digit: no node matches by normalised name
            assert store.search(text, mode="normalised") == []

    def test_normalised_search(self, store: GraphStore) -> None:
        hits = store.search("  The ASPIRIN! ", mode="normalised")
        assert [h.node.name for h in hits] == ["aspirin"]
        assert hits[0].match == "normalised"
        assert [h.node.name for h in store.search("Influenza.", mode="normalised")] == ["flu"]

    def test_embedding_search_ranks_related_name_first(self, store: GraphStore) -> None:
        hits = store.search("migraine headache attack", mode="embedding", k=3)
        assert len(hits) == 3
        assert hits[0].node.name in {"migraine", "headache"}
        assert all(h.match == "embedding" for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    def test_auto_search_falls_back(self, store: GraphStore) -> None:
        assert store.search("aspirin")[0].match == "exact"
        assert store.search("ASPIRIN")[0].match == "normalised"
        assert store.search("aspirin tablets")[0].match == "embedding"

    def test_auto_search_fills_k_with_each_node_once_best_way_first_and_alike_only(
        self, store: GraphStore, bundle: Bundle
    ) -> None:
        hits = store.search("migraine", k=5)
        assert hits[0].node.id == self.nid(bundle, "migraine") and hits[0].match == "exact"
        assert len({h.node.id for h in hits}) == len(hits)  # each node once: the exact one not repeated
        assert all(h.match == "embedding" and h.score >= AUTO_EMBEDDING_FLOOR for h in hits[1:])
        order = {"exact": 0, "normalised": 1, "fuzzy": 2, "embedding": 3}
        assert [order[h.match] for h in hits] == sorted(order[h.match] for h in hits)
        every = store.search("migraine", mode="embedding", k=5)  # asked for by embedding: the best 5, however weak
        assert len(every) == 5 and len(hits) < 5 and min(h.score for h in every) < AUTO_EMBEDDING_FLOOR

    def test_fuzzy_search_finds_typos_of_longer_names_only(self, store: GraphStore, bundle: Bundle) -> None:
        hits = store.search("sumatriptn", mode="fuzzy")  # one letter dropped
        assert [h.node.id for h in hits] == [self.nid(bundle, "sumatriptan")] and hits[0].match == "fuzzy"
        assert hits[0].score == pytest.approx(1 - 1 / 11)
        assert [h.node.name for h in store.search("Cephalalgai", mode="fuzzy")] == ["headache"]  # an alias, two edits
        assert store.search("flux", mode="fuzzy") == []  # four letters: one edit is another word
        assert store.search("aspirinxyz", mode="fuzzy") == []  # three edits
        typo = store.search("warfarine", k=3)
        assert typo[0].node.name == "warfarin" and typo[0].match == "fuzzy"

    # ---------------------------------------------------------------- paths
    def test_shortest_path_two_hops(self, store: GraphStore, bundle: Bundle) -> None:
        paths = store.shortest_paths(self.nid(bundle, "aspirin"), self.nid(bundle, "migraine"))
        assert len(paths) == 1
        path = paths[0]
        assert path.hops == 2
        assert path.nodes == tuple(self.nid(bundle, n) for n in ("aspirin", "headache", "migraine"))
        assert [e.rel for e in path.edges] == ["treats", "symptom_of"]

    def test_paths_follow_edges_backwards_unless_directed(self, store: GraphStore, bundle: Bundle) -> None:
        a, b = self.nid(bundle, "aspirin"), self.nid(bundle, "sumatriptan")
        undirected = store.shortest_paths(a, b, max_hops=3)
        assert undirected and undirected[0].hops == 3
        assert store.shortest_paths(a, b, max_hops=3, directed=True) == []

    def test_k_shortest_paths_are_distinct_valid_and_ordered(self, store: GraphStore, bundle: Bundle) -> None:
        a, b = self.nid(bundle, "aspirin"), self.nid(bundle, "flu")
        paths = store.shortest_paths(a, b, k=5, max_hops=3)
        # aspirin-treats->fever-symptom_of->flu and aspirin-treats->fever<-causes-flu: two 2-hop paths
        assert [p.hops for p in paths] == [2, 2]
        assert len({tuple(e.id for e in p.edges) for p in paths}) == 2
        for p in paths:
            assert len(set(p.nodes)) == len(p.nodes)
            for edge, (x, y) in zip(p.edges, zip(p.nodes, p.nodes[1:], strict=False), strict=True):
                assert {edge.src, edge.dst} == {x, y}

    def test_hop_limit_and_relation_filter(self, store: GraphStore, bundle: Bundle) -> None:
        a, b = self.nid(bundle, "aspirin"), self.nid(bundle, "migraine")
        assert store.shortest_paths(a, b, max_hops=1) == []
        assert store.shortest_paths(a, b, relations=["treats"]) == []
        assert store.shortest_paths(a, b, relations=["treats", "symptom_of"])[0].hops == 2

    def test_no_path_to_isolated_node(self, store: GraphStore, bundle: Bundle) -> None:
        assert store.shortest_paths(self.nid(bundle, "aspirin"), self.nid(bundle, "isolated"), max_hops=5) == []

    def test_path_to_itself(self, store: GraphStore, bundle: Bundle) -> None:
        a = self.nid(bundle, "aspirin")
        assert store.shortest_paths(a, a)[0].hops == 0

    def test_path_unknown_node_raises(self, store: GraphStore, bundle: Bundle) -> None:
        with pytest.raises(NodeNotFound):
            store.shortest_paths(self.nid(bundle, "aspirin"), "kg:test/nope")

    # ---------------------------------------------------------------- subgraph and upsert
    def test_subgraph_one_hop_is_induced(self, store: GraphStore, bundle: Bundle) -> None:
        sub = store.subgraph([self.nid(bundle, "warfarin")], hops=1)
        assert set(sub.nodes["name"]) == {"warfarin", "aspirin", "thrombosis"}
        assert sub.edges.height == 2
        node_ids = set(sub.nodes["id"])
        assert all(s in node_ids and d in node_ids for s, d in sub.edges.select("src", "dst").iter_rows())

    def test_subgraph_two_hops_and_relation_filter(self, store: GraphStore, bundle: Bundle) -> None:
        sub = store.subgraph([self.nid(bundle, "warfarin")], hops=2)
        assert {"headache", "fever", "thrombosis"} <= set(sub.nodes["name"])
        only = store.subgraph([self.nid(bundle, "warfarin")], hops=2, relations=["treats"])
        assert set(only.nodes["name"]) == {"warfarin", "thrombosis"}
        assert set(only.edges["rel"]) == {"treats"}

    def test_upsert_adds_and_updates(self, store: GraphStore, bundle: Bundle) -> None:
        aspirin = self.nid(bundle, "aspirin")
        new_nodes = conform_nodes(
            pl.DataFrame({"id": ["kg:test/ibuprofen"], "name": ["ibuprofen"], "type": ["drug"], "source": ["test"]})
        )
        new_edges = conform_edges(
            pl.DataFrame(
                {
                    "src": ["kg:test/ibuprofen"],
                    "dst": [aspirin],
                    "rel": ["similar_to"],
                    "source": ["test"],
                    "confidence": [0.7],
                }
            )
        )
        store.upsert(new_nodes, new_edges)
        store.upsert(new_nodes, new_edges.head(0))  # the same node again changes nothing
        assert store.counts() == {"nodes": bundle.nodes.height + 1, "edges": bundle.edges.height + 1}
        assert {n.node.name for n in store.neighbours("kg:test/ibuprofen")} == {"aspirin"}
        assert store.shortest_paths("kg:test/ibuprofen", self.nid(bundle, "headache"))[0].hops == 2
