"""Ontology-guided extraction with a scripted client: the prompt and its JSON schema, conformance (unknown
relations, domain and range, subclasses, values), typed nodes, declared types that validate, and warn mode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest

from metakg.extractors.conformance import Conformed, Violation, conform
from metakg.extractors.ontology import node_types, ontology_from_json
from metakg.extractors.parsing import Triple, parse_reply
from metakg.extractors.pipeline import Guide, build_bundle, plan_units, run_units, unit_request
from metakg.extractors.prompts import Example, ontology_prompt, ontology_schema
from metakg.ingest.datasets import RECORD_SCHEMA
from metakg.llm.client import ChatRequest
from metakg.llm.scripted import ScriptedClient
from metakg.schemas.validation import validate
from metakg.schemas.vocabulary import default_vocabulary

ONTOLOGY = ontology_from_json(
    {
        "id": "ont_1_movie",
        "concepts": [
            {"qid": "Q5", "label": "human"},
            {"qid": "Q11424", "label": "film"},
            {"qid": "Q202866", "label": "animated film", "subclass_of": "Q11424"},
            {"qid": "Q6256", "label": "country"},
            {"qid": "Q42", "label": "person"},
        ],
        "relations": [
            {"pid": "P57", "label": "director", "domain": "Q11424", "range": "Q5"},
            {"pid": "P495", "label": "country of origin", "domain": "Q11424", "range": "Q6256"},
            {"pid": "P577", "label": "publication date", "domain": "Q11424", "range": "Date"},
            {"pid": "P921", "label": "main subject", "domain": "Q11424", "range": ""},
        ],
    }
)


def typed(s: str, st: str, r: str, o: str, ot: str) -> Triple:
    return Triple(s, r, o, st, ot)


@pytest.mark.parametrize(
    ("triple", "check", "words"),
    [
        (typed("Akira", "film", "producer", "Otomo", "human"), "unknown_relation", "relation 'producer' is not in"),
        (
            typed("Otomo", "human", "director", "Akira", "film"),
            "domain_violation",
            "the subject 'Otomo' is a human, but director's domain is film",
        ),
        (
            typed("Akira", "film", "director", "Japan", "country"),
            "range_violation",
            "the object 'Japan' is a country, but director's range is human",
        ),
        (typed("Akira", "cartoon", "director", "Otomo", "human"), "unknown_type", "subject type 'cartoon' of 'Akira'"),
        (typed("Akira", "film", "publication date", "Japan", "country"), "range_violation", "takes a date value"),
        (typed("Akira", "film", "director", "1988", "date"), "range_violation", "'1988' is given as a value"),
    ],
)
def test_a_triple_outside_the_ontology_is_refused_with_its_reason(triple: Triple, check: str, words: str) -> None:
    verdict = conform(triple, ONTOLOGY)
    assert isinstance(verdict, Violation) and verdict.check == check and words in verdict.reason
    kept = conform(triple, ONTOLOGY, "warn")
    assert isinstance(kept, Conformed) and kept.warning is not None and kept.warning[0] == check


def test_a_subclass_conforms_and_untyped_sides_take_the_domain_and_range() -> None:
    sub = conform(typed("Akira", "Animated Film", "Director", "Otomo", "human"), ONTOLOGY)
    assert isinstance(sub, Conformed) and sub.subject_class == "Q202866" and sub.warning is None
    assert sub.relation is not None and sub.relation.id == "P57"
    bare = conform(Triple("Akira", "director", "Otomo"), ONTOLOGY)
    assert isinstance(bare, Conformed) and (bare.subject_class, bare.object_class) == ("Q11424", "Q5")
    date = conform(typed("Akira", "film", "publication_date", "1988", "date"), ONTOLOGY)
    assert isinstance(date, Conformed) and (date.object_class, date.value_kind) == (None, "date")
    # no range: an entity when typed with a class, a value otherwise
    entity = conform(typed("Akira", "film", "main subject", "Japan", "country"), ONTOLOGY)
    value = conform(typed("Akira", "film", "main subject", "cyberpunk", "value"), ONTOLOGY)
    assert isinstance(entity, Conformed) and entity.object_class == "Q6256" and entity.value_kind is None
    assert isinstance(value, Conformed) and value.value_kind == "value"


def test_the_prompt_shows_the_ontology_and_its_schema_bounds_the_reply() -> None:
    example = Example("Spirited Away is a film by Hayao Miyazaki.", (("Spirited Away", "director", "Hayao Miyazaki"),))
    prompt = ontology_prompt("Akira is a 1988 film by Katsuhiro Otomo.", ONTOLOGY, example=example)
    system, shown, answer, asked = (m.content for m in prompt.messages)
    assert "- director: film -> human" in system and "- publication date: film -> date (a value)" in system
    assert "animated film (a kind of film)" in system
    assert "Spirited Away" in shown and "Akira" in asked and "<data>" in asked
    assert json.loads(answer)["triples"][0]["object_type"] == "human"
    schema = json.loads(prompt.json_schema or "")
    alternatives = {
        a["properties"]["relation"]["const"]: a["properties"] for a in schema["properties"]["triples"]["items"]["anyOf"]
    }
    assert sorted(alternatives) == ["country of origin", "director", "main subject", "publication date"]
    # the types each relation allows: its domain with its subclasses, its range, a value kind, or anything
    assert alternatives["director"]["subject_type"]["enum"] == ["animated film", "film"]
    assert alternatives["director"]["object_type"]["enum"] == ["human"]
    assert alternatives["publication date"]["object_type"]["enum"] == ["date"]
    assert {"country", "value"} <= set(alternatives["main subject"]["object_type"]["enum"])
    lines = ontology_prompt("Akira.", ONTOLOGY, structured=False)
    assert lines.json_schema is None and lines.template_hash != prompt.template_hash
    assert ontology_schema(ONTOLOGY)["properties"]["triples"]["maxItems"] >= 5


def test_node_types_reuse_the_vocabulary_or_are_declared_under_it() -> None:
    types, declared = node_types(ONTOLOGY, default_vocabulary())
    assert types["Q42"] == "person"  # a vocabulary type by its label
    assert types["Q11424"] == "film" and declared["film"]["is_a"] == "creative_work"  # Q11424 maps there
    assert declared["animated_film"]["is_a"] == "film"  # under its parent class
    assert declared["human"]["is_a"] == "person"  # Q5 maps to person
    vocabulary = default_vocabulary().with_types(declared)
    assert vocabulary.is_a("animated_film", "creative_work") and "film" not in default_vocabulary().names
    looped = default_vocabulary().with_types({"a": {"is_a": "b"}, "b": {"is_a": "a"}, "c": {"is_a": "nowhere"}})
    assert looped.is_a("a", "concept") and looped.is_a("c", "concept")  # never a cycle, never an unknown parent


def text_records(*texts: str) -> pl.DataFrame:
    rows = [
        {k: None for k in RECORD_SCHEMA} | {"record_id": f"r{i}", "kind": "text", "text": t}
        for i, t in enumerate(texts)
    ]
    return pl.DataFrame(rows, schema=RECORD_SCHEMA)


REPLIES = {
    "Akira": {"triples": [
        {"subject": "Akira", "subject_type": "animated film", "relation": "director", "object": "Katsuhiro Otomo",
         "object_type": "human"},
        {"subject": "Akira", "subject_type": "film", "relation": "publication date", "object": "1988",
         "object_type": "date"},
        {"subject": "Akira", "subject_type": "film", "relation": "budget", "object": "1.1 billion yen",
         "object_type": "value"},
        {"subject": "Katsuhiro Otomo", "subject_type": "human", "relation": "director", "object": "Akira",
         "object_type": "film"},
    ]},
    "Ghost": {"triples": [
        {"subject": "Ghost in the Shell", "subject_type": "film", "relation": "country of origin", "object": "Japan",
         "object_type": "country"},
        {"subject": "Ghost in the Shell", "subject_type": "film", "relation": "publication date", "object": "1988",
         "object_type": "date"},
    ]},
}  # fmt: skip


def script(request: ChatRequest) -> str:
    text = request.messages[-1].content
    return json.dumps(next(v for k, v in REPLIES.items() if k in text))


def extract(conformance: str = "reject"):  # type: ignore[no-untyped-def]
    types, declared = node_types(ONTOLOGY, default_vocabulary())
    guide = Guide(ONTOLOGY, True, None, conformance, types)  # type: ignore[arg-type]
    units = plan_units(text_records("Akira is a 1988 anime by Katsuhiro Otomo.", "Ghost in the Shell is Japanese."),
                       guide=guide)  # fmt: skip
    assert unit_request(units[0], "m").json_schema == units[0].prompt.json_schema is not None
    outcomes, _ = asyncio.run(run_units(units, ScriptedClient(script)))
    return build_bundle(outcomes, "anime", run_id="r", guide=guide), declared


def test_a_guided_run_types_nodes_keeps_values_apart_and_rejects_with_reasons() -> None:
    result, declared = extract()
    bundle = result.bundle
    nodes = dict(zip(bundle.nodes["name"].to_list(), bundle.nodes["type"].to_list(), strict=True))
    assert nodes["Akira"] == "animated_film" and nodes["Katsuhiro Otomo"] == "human" and nodes["Japan"] == "country"
    # one date value stated by two films: one value node, never merged with an entity of the same name
    assert nodes["1988"] == "value"
    assert bundle.nodes.filter(pl.col("type") == "value")["id"].to_list() == ["kg:anime/value/1988"]
    assert sorted(bundle.edges["rel"].to_list()) == ["country_of_origin", "director", "publication_date",
                                                      "publication_date"]  # fmt: skip
    checks = dict(zip(bundle.rejects["check"].to_list(), bundle.rejects["reason"].to_list(), strict=True))
    assert set(checks) == {"unknown_relation", "domain_violation"}
    assert "relation 'budget' is not in the ontology ont_1_movie" in checks["unknown_relation"]
    assert result.triples == 4 and result.conformance_warnings == 0
    vocabulary = default_vocabulary().with_types(declared)
    _checked, report = validate(bundle, vocabulary.names)
    assert report.ok, report
    _checked, plain = validate(bundle, default_vocabulary().names)
    assert not plain.ok  # the declared types are what makes the bundle valid


def test_warn_keeps_what_does_not_conform_and_counts_it() -> None:
    result, _declared = extract("warn")
    assert result.triples == 6 and result.conformance_warnings == 2
    assert "budget" in result.bundle.edges["rel"].to_list() and result.bundle.rejects.height == 0


def test_a_reply_cut_short_keeps_its_complete_triples() -> None:
    whole = json.dumps(REPLIES["Akira"])
    parsed = parse_reply(whole[: whole.index('"relation": "budget"') + 10])
    assert [t.predicate for t in parsed.triples] == ["director", "publication date"]
    assert parsed.triples[0].subject_type == "animated film"
    assert parsed.rejects == [] and parsed.cut is not None and parsed.cut.startswith('{"subject": "Akira"')
    # a raw line break inside a string is read, not refused
    assert len(parse_reply('{"triples": [{"subject": "A\nB", "relation": "director", "object": "C"}]}').triples) == 1


def test_declared_types_survive_writing_merge_resolve_rdf_and_neo4j_labels(tmp_path: Path) -> None:
    """The types an ontology's classes became travel with the bundle: it validates when written, a merge and
    a resolve keep them (and validate), the RDF export types nodes with them and ties each to its class, and
    each is a Neo4j label."""
    import rdflib

    from metakg import api
    from metakg.config import load_settings
    from metakg.loaders.cypher import label_of
    from metakg.schemas.bundle import read_bundle

    settings = load_settings(paths={"cache_dir": tmp_path / "cache"})
    result, declared = extract()
    result.bundle.manifest = {"types": declared}
    first = tmp_path / "first"
    assert api.write_validated(first, result.bundle, settings).ok
    assert read_bundle(first).manifest["types"] == declared
    second = tmp_path / "second"
    api.merge([first], second)
    assert read_bundle(second).manifest["types"] == declared
    assert api.validate_bundle(second, settings).ok
    resolved = tmp_path / "resolved"
    api.resolve([first, second], resolved, settings)
    assert read_bundle(resolved).manifest["types"] == declared and api.validate_bundle(resolved, settings).ok
    out = tmp_path / "kg.nt"
    api.export_rdf(first, out)
    graph = rdflib.Graph().parse(out, format="nt")
    mkt = next(str(o) for o in graph.objects(None, rdflib.RDF.type) if str(o).endswith("/animated_film"))
    assert (rdflib.URIRef(mkt), rdflib.RDFS.subClassOf, rdflib.URIRef(mkt.replace("animated_film", "film"))) in graph
    film = rdflib.URIRef(mkt.replace("animated_film", "film"))
    assert (film, rdflib.OWL.equivalentClass, rdflib.URIRef("http://www.wikidata.org/entity/Q11424")) in graph
    assert {label_of(t) for t in declared} >= {"Film", "AnimatedFilm", "Human"}


def test_without_an_ontology_the_vocabulary_types_the_entities_and_relations_stay_free() -> None:
    """The open guide (extraction without an ontology, structured): QA items keep their options in the
    prompt, the schema draws types from the vocabulary and leaves the relation free (or one of
    ``extract.relations``), known types type the nodes, and an unknown type or a plain line keeps the default
    type, never a reject."""
    from metakg.extractors.ontology import vocabulary_ontology

    vocabulary = vocabulary_ontology(default_vocabulary())
    assert "entity" not in vocabulary.classes and "value" not in vocabulary.classes
    assert vocabulary.classes["drug"].parents == ("chemical",) and vocabulary.classes["concept"].parents == ()
    guide = Guide(vocabulary, True, None, "reject", {n: n for n in vocabulary.classes})
    assert guide.open
    item = {k: None for k in RECORD_SCHEMA} | {
        "record_id": "q1", "kind": "qa", "question": "What treats a fever?", "option_labels": ["A", "B"],
        "option_texts": ["aspirin", "sand"], "answer": "A", "answer_text": "aspirin",
    }  # fmt: skip
    frame = pl.concat([pl.DataFrame([item], schema=RECORD_SCHEMA), text_records("Imatinib treats leukaemia.")])
    units = plan_units(frame, guide=guide)
    assert [u.prompt.version for u in units] == ["typed-qa/1", "typed-chunk/1"]
    assert "A: aspirin\nB: sand" in units[0].prompt.messages[-1].content
    assert "Core concept" not in units[0].prompt.messages[-1].content  # none given: no line a model could copy
    schema = json.loads(units[0].prompt.json_schema or "")
    item_schema = schema["properties"]["triples"]["items"]
    assert list(item_schema["properties"]) == ["subject", "relation", "object", "subject_type", "object_type"]
    assert item_schema["properties"]["relation"]["type"] == "string"
    assert {"drug", "disease", "gene or protein", "concept"} <= set(item_schema["properties"]["subject_type"]["enum"])
    assert "value" not in item_schema["properties"]["object_type"]["enum"]
    closed = Guide(vocabulary, True, None, "reject", {}, {}, ("treats",))
    closed_schema = json.loads(plan_units(frame, guide=closed)[1].prompt.json_schema or "")
    assert closed_schema["properties"]["triples"]["items"]["properties"]["relation"] == {"enum": ["treats"]}
    assert units[1].prompt.template_hash != plan_units(frame, guide=closed)[1].prompt.template_hash

    replies = {
        "fever": json.dumps({"triples": [
            {"subject": "aspirin", "relation": "treats", "object": "fever", "subject_type": "drug",
             "object_type": "phenotype or effect"},
            {"subject": "sand", "relation": "is found on", "object": "beach", "subject_type": "mineral",
             "object_type": "concept"},
        ]}),
        "Imatinib": "imatinib\\treats\\leukaemia",  # a line: no types
    }  # fmt: skip

    def reply(request: ChatRequest) -> str:
        return next(v for k, v in replies.items() if k in request.messages[-1].content)

    outcomes, _ = asyncio.run(run_units(units, ScriptedClient(reply)))
    result = build_bundle(outcomes, "med", run_id="r", guide=guide)
    nodes = dict(zip(result.bundle.nodes["name"].to_list(), result.bundle.nodes["type"].to_list(), strict=True))
    assert nodes == {"aspirin": "drug", "fever": "phenotype", "sand": "concept", "beach": "concept",
                     "imatinib": "concept", "leukaemia": "concept"}  # fmt: skip
    assert sorted(result.bundle.edges["rel"].to_list()) == ["is_found_on", "treats", "treats"]
    assert result.bundle.rejects.height == 0 and result.triples == 3
    _checked, report = validate(result.bundle, default_vocabulary().names)
    assert report.ok, report


def test_resolve_merges_extracted_nodes_of_compatible_types_and_keeps_the_others_apart(tmp_path: Path) -> None:
    """Two extractions, one typed by an ontology (declared types) and one by the vocabulary: resolving them by
    name joins the nodes whose types lie on one is-a chain (an animated film and a creative work; a human,
    declared under person, and a person) and keeps apart those whose types clash (the country Japan and a
    'Japan' the model called a person)."""
    from metakg import api
    from metakg.config import load_settings
    from metakg.extractors.ontology import vocabulary_ontology
    from metakg.schemas.bundle import read_bundle

    settings = load_settings(paths={"cache_dir": tmp_path / "cache"})
    guided, declared = extract()
    guided.bundle.manifest = {"types": declared}
    assert api.write_validated(tmp_path / "anime", guided.bundle, settings).ok

    vocabulary = vocabulary_ontology(default_vocabulary())
    guide = Guide(vocabulary, True, None, "reject", {n: n for n in vocabulary.classes})
    reply = json.dumps({"triples": [
        {"subject": "Akira", "relation": "is directed by", "object": "Katsuhiro Otomo", "subject_type": "creative work",
         "object_type": "person"},
        {"subject": "Japan", "relation": "appears in", "object": "Ghost in the Shell", "subject_type": "person",
         "object_type": "creative work"},
    ]})  # fmt: skip
    units = plan_units(text_records("Akira, by Katsuhiro Otomo."), guide=guide)
    outcomes, _ = asyncio.run(run_units(units, ScriptedClient(lambda _request: reply)))
    typed = build_bundle(outcomes, "films", run_id="r", guide=guide)
    assert api.write_validated(tmp_path / "films", typed.bundle, settings).ok

    resolved = api.resolve([tmp_path / "anime", tmp_path / "films"], tmp_path / "one", settings, names="exact")
    nodes = read_bundle(tmp_path / "one").nodes
    by_name = nodes.group_by("name").agg(pl.col("type")).rows_by_key("name", unique=True)
    assert len(by_name["Akira"][0]) == 1 and by_name["Akira"][0][0] == "animated_film"  # the most specific kept
    assert len(by_name["Katsuhiro Otomo"][0]) == 1 and by_name["Katsuhiro Otomo"][0][0] == "human"
    assert len(by_name["Ghost in the Shell"][0]) == 1  # film and creative work
    assert sorted(by_name["Japan"][0]) == ["country", "person"]  # two entities: their types clash
    counts = resolved.counts
    assert counts.clusters == 3 and counts.nodes == counts.nodes_before - 3
    assert counts.joined_by_name == 6  # the three pairs, by name: no identifier joins extracted nodes
    assert api.validate_bundle(tmp_path / "one", settings).ok


def test_a_served_typed_bundle_gives_each_node_its_class_as_the_page_shows_it(tmp_path: Path) -> None:
    """`metakg serve` over an ontology-typed extraction: the node record the page shows (``GET /api/nodes``,
    drawn as key-values when a node is clicked) gives the class's type, and the served graph validates with its
    declared types."""
    from fastapi.testclient import TestClient

    from metakg import api
    from metakg.config import load_settings
    from metakg.server.app import create_app

    settings = load_settings(paths={"cache_dir": tmp_path / "cache"})
    result, declared = extract()
    result.bundle.manifest = {"types": declared}
    assert api.write_validated(tmp_path / "anime", result.bundle, settings).ok
    app = create_app(settings, bundle=tmp_path / "anime")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        akira = client.get("/api/nodes/kg:anime/akira")
        assert akira.status_code == 200 and akira.json()["type"] == "animated_film", akira.text
        assert client.get("/api/nodes/kg:anime/value/1988").json()["type"] == "value"
        graph = client.get("/api/graph").json()
        assert graph["counts"]["nodes"] == result.bundle.nodes.height and graph["validation"]["ok"], graph
