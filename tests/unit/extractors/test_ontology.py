"""Ontologies for extraction: Text2KGBench JSON and OWL/RDFS read into one model, and bad ones refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metakg.errors import OntologyError
from metakg.extractors.ontology import ontology_from_json, read_ontology, relation_key

MOVIE: dict[str, Any] = {
    "id": "ont_1_movie",
    "title": "Movie Ontology",
    "concepts": [
        {"qid": "Q5", "label": "human"},
        {"qid": "Q11424", "label": "film"},
        {"qid": "Q202866", "label": "animated film", "subclass_of": "Q11424"},
        {"qid": "Q6256", "label": "country"},
    ],
    "relations": [
        {"pid": "P57", "label": "director", "domain": "Q11424", "range": "Q5"},
        {"pid": "P495", "label": "country of origin ", "domain": "Q11424", "range": "Q6256"},
        {"pid": "P577", "label": "publication date", "domain": "Q11424", "range": "Date"},
        {"pid": "P2130", "label": "cost", "domain": "Q11424", "range": ""},
    ],
}


def write(tmp_path: Path, data: Any, name: str = "onto.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def test_the_json_form_gives_classes_a_hierarchy_and_relations_with_domain_range_and_datatypes(tmp_path: Path) -> None:
    onto = read_ontology(write(tmp_path, MOVIE))
    assert onto.id == "ont_1_movie" and onto.title == "Movie Ontology"
    assert [c.label for c in onto.classes.values()] == ["human", "film", "animated film", "country"]
    assert onto.is_a("Q202866", "Q11424") and not onto.is_a("Q11424", "Q202866")
    director = onto.relation("director")
    assert director is not None and (director.domain, director.range, director.datatype) == ("Q11424", "Q5", None)
    date = onto.relation("publication_date")
    assert date is not None and date.datatype == "date" and date.range is None
    cost = onto.relation("Cost")
    assert cost is not None and cost.range is None and cost.datatype is None  # no range: anything
    origin = onto.relation("country of origin")
    assert origin is not None and origin.label == "country of origin"
    # the benchmark writes the label as the file gives it, its stray space included
    assert origin.written == "country_of_origin_" and origin.key == "country_of_origin"
    assert onto.relation("P57") is director and onto.relation("screenwriter") is None
    assert onto.class_named("Animated Film") is onto.classes["Q202866"]


def test_relation_keys_are_snake_case_of_labels_in_any_style() -> None:
    assert relation_key("academicStaffSize") == "academic_staff_size"
    assert relation_key("country of origin ") == "country_of_origin"
    assert relation_key("1stRunwaySurfaceType") == "1st_runway_surface_type"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["relations"].append({"pid": "P1", "label": "sequel", "domain": "Q999", "range": "Q11424"}),
            "relation 'P1' (sequel) domain: 'Q999' is not a class of the ontology",
        ),
        (
            lambda d: d["relations"].append({"pid": "P2", "label": "prequel", "domain": "Q11424", "range": "Q42"}),
            "relation 'P2' (prequel) range: 'Q42' is not a class",
        ),
        (lambda d: d.update(relations=[]), "the ontology has no relations"),
        (lambda d: d["relations"].append({"pid": "P3", "domain": "Q5"}), "relations[4] (P3) has no label"),
        (lambda d: d["concepts"].append({"label": "no id"}), "concepts[4] has no 'qid'"),
        (
            lambda d: d["concepts"].extend(
                [{"qid": "A", "label": "a", "subclass_of": ["B"]}, {"qid": "B", "label": "b", "subclass_of": ["A"]}]
            ),
            "subclass cycle: A -> B -> A",
        ),
        (
            lambda d: d["concepts"].append({"qid": "C", "label": "c", "subclass_of": "Q404"}),
            "class 'C' (c) subclass_of: 'Q404' is not a class",
        ),
    ],
)
def test_a_bad_ontology_is_refused_naming_the_element(tmp_path: Path, edit: Any, message: str) -> None:
    data = json.loads(json.dumps(MOVIE))
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(OntologyError) as caught:
        read_ontology(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_lenient_read_declares_a_class_a_relation_names_and_says_so() -> None:
    data = json.loads(json.dumps(MOVIE))
    data["relations"].append({"pid": "P110", "label": "illustrator", "domain": "Q47461344", "range": "Q5"})
    onto = ontology_from_json(data, source="book.json", strict=False)
    assert onto.classes["Q47461344"].declared is False and onto.classes["Q5"].declared is True
    assert onto.warnings == (
        "relation 'P110' (illustrator) domain: 'Q47461344' is not a class of the ontology; declared",
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bad.json", "{not json"),
        ("bad.ttl", "@prefix : <http://x/> . :a :b"),
        ("onto.csv", "a,b"),
        ("list.json", "[1, 2]"),
    ],
)
def test_unreadable_files_get_an_error_naming_the_file(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path, text, name)
    with pytest.raises(OntologyError, match=str(path).replace(".", r"\.")):
        read_ontology(path)
    with pytest.raises(OntologyError, match="no such ontology file"):
        read_ontology(tmp_path / "missing.json")


TURTLE = """
@prefix : <http://example.org/onto#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
<http://example.org/onto> a owl:Ontology ; rdfs:label "Drugs" .
:Drug a owl:Class ; rdfs:label "Medikament"@de, "drug"@en .
:Antibiotic a owl:Class ; rdfs:label "antibiotic" ; rdfs:subClassOf :Drug .
:Disease a owl:Class .
:treats a owl:ObjectProperty ; rdfs:label "treats" ; rdfs:domain :Drug ; rdfs:range :Disease .
:approvedIn a owl:DatatypeProperty ; rdfs:domain :Drug ; rdfs:range xsd:gYear .
:discoveredBy a owl:ObjectProperty ; rdfs:domain :Drug ; rdfs:range :Person .
"""


def test_owl_in_turtle_gives_labels_hierarchy_datatype_properties_and_rdfs_classes(tmp_path: Path) -> None:
    onto = read_ontology(write(tmp_path, TURTLE, "drugs.ttl"))
    assert onto.title == "Drugs"
    assert onto.classes["Drug"].label == "drug"  # the English label over the German one
    assert onto.classes["Disease"].label == "Disease"  # no label: the local name
    assert onto.is_a("Antibiotic", "Drug")
    treats = onto.relation("treats")
    assert treats is not None and (treats.domain, treats.range) == ("Drug", "Disease")
    approved = onto.relation("approved in")
    assert approved is not None and approved.datatype == "date" and approved.range is None
    # what rdfs:range points at is a class (RDFS semantics), declared or not
    assert onto.classes["Person"].declared and onto.relation("discoveredBy") is not None


def test_rdf_xml_reads_as_turtle_does(tmp_path: Path) -> None:
    import rdflib

    graph = rdflib.Graph().parse(data=TURTLE, format="turtle")
    from_xml = read_ontology(write(tmp_path, graph.serialize(format="xml"), "drugs.owl"))
    from_ttl = read_ontology(write(tmp_path, TURTLE, "drugs.ttl"))
    assert from_xml.fingerprint() == from_ttl.fingerprint()


def test_the_fingerprint_follows_what_a_prompt_shows(tmp_path: Path) -> None:
    first = ontology_from_json(MOVIE)
    data = json.loads(json.dumps(MOVIE))
    assert ontology_from_json(data).fingerprint() == first.fingerprint()
    data["relations"][0]["range"] = "Q6256"
    assert ontology_from_json(data).fingerprint() != first.fingerprint()
