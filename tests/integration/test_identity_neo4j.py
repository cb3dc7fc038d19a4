"""``load neo4j`` follows a resolved bundle and a split of it, in a real Neo4j."""

from __future__ import annotations

from typing import Any

from metakg.config import Neo4jSettings
from metakg.identity.resolve import resolve_graph, unresolve
from metakg.loaders.neo4j_loader import follow_bundle
from metakg.schemas.bundle import Bundle
from metakg.schemas.vocabulary import default_vocabulary
from tests.unit.test_identity_resolve import graph

VOCAB = default_vocabulary()


def everything(driver: Any) -> tuple[set[str], set[tuple[str, str, str]]]:
    nodes, _, _ = driver.execute_query("MATCH (n:Entity) RETURN n.id AS id")
    edges, _, _ = driver.execute_query("MATCH (a:Entity)-[r]->(b:Entity) RETURN r.id AS id, a.id AS s, b.id AS d")
    return {r["id"] for r in nodes}, {(r["id"], r["s"], r["d"]) for r in edges}


def wanted(bundle: Bundle) -> tuple[set[str], set[tuple[str, str, str]]]:
    return set(bundle.nodes["id"]), set(bundle.edges.select("id", "src", "dst").iter_rows())


def test_neo4j_follows_a_resolved_bundle_and_a_split_of_it(clean_neo4j: Any, neo4j_settings: Neo4jSettings) -> None:
    driver = clean_neo4j

    def follow(bundle: Bundle) -> None:
        follow_bundle(driver, bundle, database=neo4j_settings.database, target=neo4j_settings.uri)

    inputs = graph()
    follow(inputs)
    assert everything(driver) == wanted(inputs)
    resolved = resolve_graph(inputs.nodes, inputs.edges, VOCAB)
    one = Bundle(resolved.nodes, resolved.edges)
    follow(one)  # the Wikidata nodes merged away are removed, the edges rewired
    assert everything(driver) == wanted(one)
    split = unresolve(resolved, VOCAB, ["mondo:0004975"])
    apart = Bundle(split.nodes, split.edges)
    follow(apart)
    assert everything(driver) == wanted(apart) and "wd:Q11081" in everything(driver)[0]
    back = unresolve(resolved, VOCAB)
    follow(Bundle(back.nodes, back.edges))
    assert everything(driver) == wanted(inputs)  # every split: the database holds the inputs again
