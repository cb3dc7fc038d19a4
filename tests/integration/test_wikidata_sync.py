"""`metakg sync wikidata` against a real SPARQL endpoint (Virtuoso) holding real Wikidata data.

The tests share the module's endpoint and leave its data as they found it; the one that edits the data has an
endpoint of its own.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from metakg.schemas.bundle import read_bundle
from tests.sparql_proxy import SparqlProxy
from tests.unit.cli.test_cli import run
from tools.sparql_server import GRAPH, Server

pytestmark = pytest.mark.integration

PROPS = ["P50", "P800", "P106", "P19", "P69", "P26", "P40", "P22", "P25", "P735"]
SPEC = f"name: q42\nseeds: [Q42]\nproperties: [{', '.join(PROPS)}]\nhops: 1\nlanguages: [en]\n"


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "q42.yaml"
    path.write_text(SPEC)
    return path


def sync(spec: Path, out: Path, endpoint: str, *extra: str, code: int = 0) -> dict[str, Any]:
    """`metakg sync wikidata SPEC -o OUT --endpoint URL --json`; asserts the exit code, returns the summary."""
    return run("sync", "wikidata", str(spec), "-o", str(out), "--endpoint", endpoint, "--json", *extra, code=code)[1]


def sparql(server: Server, query: str) -> list[dict[str, dict[str, str]]]:
    """An independent client: plain urllib, SPARQL JSON results."""
    data = urllib.parse.urlencode({"query": query}).encode()
    request = urllib.request.Request(server.endpoint, data=data, headers={"Accept": "application/sparql-results+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["results"]["bindings"]  # type: ignore[no-any-return]


def update(server: Server, statement: str) -> None:
    sparql(
        server,
        "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "
        "PREFIX schema: <http://schema.org/> PREFIX owl: <http://www.w3.org/2002/07/owl#> " + statement,
    )


def independent_counts(server: Server) -> tuple[int, int]:
    values = " ".join(f"wdt:{p}" for p in PROPS)
    subset = "{ BIND(wd:Q42 AS ?x) } UNION { wd:Q42 ?p0 ?x . VALUES ?p0 { " + values + " } FILTER(isIRI(?x)) }"
    as_s = subset.replace("?x", "?s").replace("?p0", "?q0")
    as_o = subset.replace("?x", "?o").replace("?p0", "?r0")
    prefixes = "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "
    nodes = sparql(
        server, prefixes + f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {subset} FILTER EXISTS {{ ?x ?a ?b }} }}"
    )
    edges = sparql(
        server,
        prefixes + f"SELECT (COUNT(*) AS ?n) WHERE {{ SELECT DISTINCT ?s ?p ?o WHERE {{ {{ {as_s} }} "
        f"{{ {as_o} }} ?s ?p ?o . VALUES ?p {{ {values} }} }} }}",
    )
    return int(nodes[0]["n"]["value"]), int(edges[0]["n"]["value"])


def test_a_one_hop_subset_around_q42_validates_and_matches_independent_counts(
    sparql_endpoint: Server, spec: Path, tmp_path: Path
) -> None:
    first = sync(spec, tmp_path / "b", sparql_endpoint.endpoint)
    assert first["ok"] is True and first["validation_ok"] is True
    assert (first["nodes"], first["edges"]) == independent_counts(sparql_endpoint)
    assert first["added"] == first["entities_fetched"] == first["nodes"] and first["removed"] == 0
    bundle = read_bundle(tmp_path / "b")
    q42 = bundle.nodes.filter(bundle.nodes["id"] == "wd:Q42").row(0, named=True)
    assert q42["name"] == "Douglas Adams" and q42["type"] == "person" and "Douglas Noël Adams" in q42["aliases"]
    assert q42["description"] == "English writer and humorist" and q42["revision"] == "595492361"
    assert q42["retrieved_at"] is not None
    edges = bundle.edges
    assert set(edges["src"]) == {"wd:Q42"} and all(r[0].startswith("wd:Q42#P") for r in edges["record_ids"])
    assert "educated_at" in set(edges["rel"])


def test_faults_are_survived_or_stop_cleanly_without_writing(
    sparql_endpoint: Server, spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = SparqlProxy(sparql_endpoint.endpoint).start()
    monkeypatch.setenv("METAKG_WIKIDATA__TIMEOUT_S", "1")
    monkeypatch.setenv("METAKG_WIKIDATA__BACKOFF_S", "0.01")
    try:
        out = tmp_path / "b"
        # query 1 (hop): 429 then ok; query 2 (revisions, 22 ids): too slow -> split in halves, a 500, malformed JSON
        proxy.script("429:1", "ok", "slow:2", "500", "ok", "malformed", "ok")
        ok = sync(spec, out, proxy.url)
        assert ok["ok"] is True and ok["retries"] == 3 and ok["nodes"] == independent_counts(sparql_endpoint)[0]
        manifest = (out / "manifest.json").read_bytes()
        state = Path(ok["state"])
        saved = state.read_bytes()
        monkeypatch.setenv("METAKG_WIKIDATA__MAX_RETRIES", "1")
        proxy.script("500", "500")
        failed = sync(spec, out, proxy.url, code=1)
        assert (
            failed["error_type"] == "SyncError"
            and "failed 2 times" in failed["error"]
            and "HTTP 500" in failed["error"]
        )
        assert (out / "manifest.json").read_bytes() == manifest and state.read_bytes() == saved  # untouched
        monkeypatch.setenv("METAKG_WIKIDATA__MAX_QUERIES", "1")
        budget = sync(spec, out, proxy.url, code=1)
        assert "query budget" in budget["error"] and state.read_bytes() == saved
    finally:
        proxy.stop()


def test_an_endpoint_answering_nothing_removes_nothing(sparql_endpoint: Server, spec: Path, tmp_path: Path) -> None:
    proxy = SparqlProxy(sparql_endpoint.endpoint).start()
    try:
        out = tmp_path / "b"
        first = sync(spec, out, proxy.url)
        manifest = (out / "manifest.json").read_bytes()
        state = Path(first["state"])
        saved = state.read_bytes()
        proxy.empty = True  # 200 with no results for every query: every entity, Q42 the seed included, "gone"
        stopped = sync(spec, out, proxy.url, code=1)
        assert stopped["error_type"] == "SyncError" and "seed" in stopped["error"]
        assert "Q42" in stopped["error"] and "--allow-removals" in stopped["error"]
        assert (out / "manifest.json").read_bytes() == manifest and state.read_bytes() == saved  # untouched
        assert read_bundle(out).nodes.height == first["nodes"]
        fresh = sync(spec, tmp_path / "c", proxy.url, "--state", str(tmp_path / "fresh.json"), code=1)
        assert "none of the subset's 1 seeds" in fresh["error"] and not (tmp_path / "c").exists()
        assert not (tmp_path / "fresh.json").exists()
        # a state file of its own (a new cache folder, the URL written otherwise) knows nothing to lose, but the
        # bundle being replaced does: the same subset without its hops would keep the seed alone
        proxy.empty = False
        narrow = tmp_path / "narrow.yaml"
        narrow.write_text(spec.read_text().replace("hops: 1", "hops: 0"))
        assert narrow.read_text() != spec.read_text()
        lost = sync(narrow, out, proxy.url + "/", "--state", str(tmp_path / "other.json"), code=1)
        assert "drop" in lost["error"] and "of the bundle at" in lost["error"] and "--allow-removals" in lost["error"]
        assert (out / "manifest.json").read_bytes() == manifest and not (tmp_path / "other.json").exists()
        proxy.empty = True
        # told, the removals are applied (an empty node table then fails validation: exit 1, bundle written)
        emptied = sync(spec, out, proxy.url, "--allow-removals", code=1)
        assert emptied["removed"] == first["nodes"] and emptied["validation_ok"] is False
        assert read_bundle(out).nodes.height == 0
    finally:
        proxy.stop()


def test_bad_specs_are_clear_errors(sparql_endpoint: Server, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nseeds: [Q42, douglas]\n")
    out = sync(bad, tmp_path / "b", sparql_endpoint.endpoint, code=1)
    assert "seeds" in out["error"] and "douglas" in out["error"]
    bad.write_text("name: x\nsparql: 'DELETE WHERE { ?item ?p ?o }'\n")
    out = sync(bad, tmp_path / "b", sparql_endpoint.endpoint, code=1)
    assert "read-only SELECT" in out["error"]


def test_class_and_sparql_selections(sparql_endpoint: Server, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: sel\nclasses:\n  - {class: Q5, limit: 1500}\n"
        "sparql: 'PREFIX wd: <http://www.wikidata.org/entity/> SELECT ?item WHERE { VALUES ?item { wd:Q42 } }'\n"
    )
    out = sync(spec, tmp_path / "b", sparql_endpoint.endpoint)
    assert out["ok"] is True and out["nodes"] == 1501  # two pages of humans (1000 + 500), plus Q42 from the query
    people = read_bundle(tmp_path / "b").nodes
    assert (people["type"] == "person").all() and "wd:Q42" in set(people["id"])


def test_incremental_resync_fetches_only_what_changed(
    own_sparql_endpoint: Server, spec: Path, tmp_path: Path, clean_neo4j: Any, neo4j_settings: Any
) -> None:
    """Re-syncs after an edit, a deletion and a redirect fetch only what changed, record the diff, and
    ``load neo4j`` (following the bundle) leaves Neo4j holding exactly each re-synced bundle. With history
    kept from the first sync and load, the bundle and Neo4j both still give back the first version."""
    from metakg.loaders.neo4j_loader import follow_bundle, graph_as_of, versions_of
    from metakg.schemas.history import as_of, parse_time, read_history, versions

    loads: list[str] = []

    def neo4j_follows() -> None:
        bundle = read_bundle(tmp_path / "b")
        report = follow_bundle(
            clean_neo4j,
            bundle,
            database=neo4j_settings.database,
            target=neo4j_settings.uri,
            history=None if loads else True,  # the first load keeps history; later ones follow its choice
        )
        assert report.history
        loads.append(report.recorded_at)
        nodes, _, _ = clean_neo4j.execute_query("MATCH (n:Entity) RETURN n.id AS id, n.revision AS rev")
        edges, _, _ = clean_neo4j.execute_query("MATCH (:Entity)-[r]->(:Entity) RETURN r.id AS id, type(r) AS rel")
        assert {(r["id"], r["rev"]) for r in nodes} == set(bundle.nodes.select("id", "revision").iter_rows())
        assert {(r["id"], r["rel"]) for r in edges} == set(bundle.edges.select("id", "rel").iter_rows())

    first = sync(spec, tmp_path / "b", own_sparql_endpoint.endpoint, "--history")
    first_bundle = read_bundle(tmp_path / "b")
    synced_at = parse_time(first_bundle.manifest["history"]["recorded_at"])
    modified = {  # an independent reading of the items' schema:dateModified
        "wd:" + r["item"]["value"].rsplit("/", 1)[1]: parse_time(r["mod"]["value"])
        for r in sparql(
            own_sparql_endpoint,
            "PREFIX schema: <http://schema.org/> SELECT ?item ?mod WHERE { ?item schema:dateModified ?mod }",
        )
    }
    valid_from = {i: t for i, t in first_bundle.nodes.select("id", "valid_from").iter_rows() if t is not None}
    assert valid_from and valid_from == {i: t for i, t in modified.items() if i in set(first_bundle.nodes["id"])}
    neo4j_follows()
    again = sync(spec, tmp_path / "b", own_sparql_endpoint.endpoint)
    assert again["entities_fetched"] == 0 and (again["added"], again["changed"], again["removed"]) == (0, 0, 0)
    assert again["queries"] == 2  # the hop selection and one revision-check batch; nothing fetched
    assert (again["nodes"], again["edges"]) == (first["nodes"], first["edges"])
    assert "diff" not in first  # nothing to compare the first version with
    quiet_diff = again["diff"]  # a re-sync that changed nothing records an empty diff (provenance is no change)
    assert all(quiet_diff[t][k] == 0 for t in ("nodes", "edges") for k in ("added", "removed", "changed"))

    # edit one statement of Q42 (born in Cambridge -> London) and bump its revision; delete one item
    update(
        own_sparql_endpoint,
        f"WITH <{GRAPH}> DELETE {{ wd:Q42 wdt:P19 wd:Q350 }} INSERT {{ wd:Q42 wdt:P19 wd:Q84 }} WHERE {{}}",
    )
    update(
        own_sparql_endpoint,
        f"WITH <{GRAPH}> DELETE {{ wd:Q42 schema:version ?v }} INSERT {{ wd:Q42 schema:version 595492362 }} "
        "WHERE { wd:Q42 schema:version ?v }",
    )
    update(own_sparql_endpoint, f"WITH <{GRAPH}> DELETE {{ wd:Q14623683 ?p ?o }} WHERE {{ wd:Q14623683 ?p ?o }}")
    edited = sync(spec, tmp_path / "b", own_sparql_endpoint.endpoint)
    assert edited["changed_ids"] == ["Q42"]
    assert sorted(edited["removed_ids"]) == ["Q14623683", "Q350"]  # deleted; no longer referenced by the edit
    assert edited["added_ids"] == ["Q84"] and edited["entities_fetched"] == 2
    bundle = read_bundle(tmp_path / "b")
    born = bundle.edges.filter(bundle.edges["rel"] == "place_of_birth")
    assert born["dst"].to_list() == ["wd:Q84"] and born["record_ids"].to_list() == [["wd:Q42#P19"]]  # the statement
    assert "wd:Q14623683" not in set(bundle.nodes["id"]) and edited["validation_ok"] is True
    neo4j_follows()  # the edit, the deletion and the new entity reach Neo4j; the stale rows leave it
    recorded = bundle.manifest["diff"]  # the diff the sync recorded, checked against the ids it reported
    assert (recorded["nodes"]["added"], recorded["nodes"]["removed"]) == (1, 2)
    assert recorded["nodes"]["changed"] >= 1 and recorded["nodes"]["changed_columns"]["revision"] >= 1
    assert recorded["edges"]["added"] >= 1 and recorded["edges"]["removed"] >= 1

    # a redirect: Q14623681 now points at Q14623678 (merged items)
    update(own_sparql_endpoint, f"WITH <{GRAPH}> DELETE {{ wd:Q14623681 ?p ?o }} WHERE {{ wd:Q14623681 ?p ?o }}")
    update(own_sparql_endpoint, f"INSERT DATA {{ GRAPH <{GRAPH}> {{ wd:Q14623681 owl:sameAs wd:Q14623678 }} }}")
    redirected = sync(spec, tmp_path / "b", own_sparql_endpoint.endpoint)
    assert redirected["redirected"] == 1 and redirected["removed_ids"] == ["Q14623681"]
    assert redirected["entities_fetched"] == 0  # the target was in the subset already
    neo4j_follows()
    quiet = sync(spec, tmp_path / "b", own_sparql_endpoint.endpoint)
    assert quiet["entities_fetched"] == 0 and quiet["changed"] == 0

    # history: three updates later, the first version is still there, in the bundle and in Neo4j
    def ids(b: Any) -> tuple[set[str], set[str]]:
        return set(b.nodes["id"]), set(b.edges["id"])

    final = read_bundle(tmp_path / "b")
    kept = read_history(tmp_path / "b", final)
    assert kept is not None and ids(as_of(final, kept, synced_at)) == ids(first_bundle)
    assert ids(graph_as_of(clean_neo4j, neo4j_settings.database, parse_time(loads[0]))) == ids(first_bundle)
    [gone] = versions(final, kept, "wd:Q14623683")  # the deleted item: one version, retired
    assert not gone["current"] and gone["retired_at"] is not None
    q42 = versions(final, kept, "wd:Q42")
    assert [v["revision"] for v in q42][-1] == "595492362" and len(q42) == 2 and q42[-1]["current"]
    in_neo4j = versions_of(clean_neo4j, neo4j_settings.database, "wd:Q42")
    assert [v["revision"] for v in in_neo4j] == [v["revision"] for v in q42]

    # a label edit of Q42 retires Q42's version alone: none of its edges changed (once 23 were retired, each
    # edge's record ids holding the item's revision)
    retired = kept.summary()
    edges_before = read_bundle(tmp_path / "b").edges.select("id", "record_ids").sort("id")
    update(
        own_sparql_endpoint,
        f'WITH <{GRAPH}> DELETE {{ wd:Q42 rdfs:label ?l }} INSERT {{ wd:Q42 rdfs:label "Douglas Noel Adams"@en }} '
        "WHERE { wd:Q42 rdfs:label ?l FILTER(lang(?l) = 'en') }",
    )
    update(
        own_sparql_endpoint,
        f"WITH <{GRAPH}> DELETE {{ wd:Q42 schema:version ?v }} INSERT {{ wd:Q42 schema:version 595492363 }} "
        "WHERE { wd:Q42 schema:version ?v }",
    )
    relabelled = sync(spec, tmp_path / "b", own_sparql_endpoint.endpoint)
    assert relabelled["changed_ids"] == ["Q42"]
    after = read_bundle(tmp_path / "b")
    assert after.nodes.filter(after.nodes["id"] == "wd:Q42")["name"].to_list() == ["Douglas Noel Adams"]
    now_kept = read_history(tmp_path / "b", after)
    assert now_kept is not None
    assert now_kept.summary()["retired_edges"] == retired["retired_edges"]
    assert now_kept.summary()["retired_nodes"] == retired["retired_nodes"] + 1
    assert after.edges.select("id", "record_ids").sort("id").equals(edges_before)
    assert relabelled["diff"]["edges"]["changed"] == 0
    neo4j_follows()
    edge_versions, _, _ = clean_neo4j.execute_query("MATCH (v:MetakgVersion {kind: 'edge'}) RETURN count(v) AS n")
    assert edge_versions[0]["n"] == retired["retired_edges"]  # Neo4j retired no edge either


def test_the_qa_context_explores_the_configured_endpoint(
    sparql_endpoint: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strategies that explore a remote knowledge base get the configured endpoint through the context."""
    from metakg import api
    from metakg.config import load_settings
    from metakg.schemas.knowledge_source import KnowledgeSource
    from tests.unit.qa_engine.handmade import store

    monkeypatch.setenv("METAKG_WIKIDATA__ENDPOINT", sparql_endpoint.endpoint)
    ctx = api.qa_context(load_settings(), store(), None)
    source = ctx.knowledge_source
    assert isinstance(source, KnowledgeSource) and source.endpoint == sparql_endpoint.endpoint
    rows = source.select("SELECT ?label WHERE { wd:Q42 rdfs:label ?label FILTER(lang(?label) = 'en') }")
    assert [r["label"]["value"] for r in rows] == ["Douglas Adams"]
