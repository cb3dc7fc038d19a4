"""Wikidata-shaped RDF for the local test endpoint, derived from the real Wikidata files in shared/data/wikidata.

From ``Q42_wbgetentities.json`` (the full API response for Q42): truthy ``wdt:`` statements (best rank per
property, as the truthy dump keeps them), ``rdfs:label``, ``schema:description``, ``skos:altLabel``,
``schema:version`` (lastrevid) and ``schema:dateModified`` (modified). From ``Q42_neighbour_labels.json``:
the labels of every item and property Q42's statements name (those responses carry no revision, so the
derived data gives them none). ``kgtk_arnold_P31_P279.ttl`` (real P31/P279 edges of a 2021 subset) is
loaded as it is, so neighbours have their classes. Nothing is invented.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rdflib import XSD, Graph, Literal, Namespace, URIRef
from rdflib.namespace import RDFS, SKOS

WD = Namespace("http://www.wikidata.org/entity/")
WDT = Namespace("http://www.wikidata.org/prop/direct/")
SCHEMA = Namespace("http://schema.org/")


def _value(snak: dict[str, Any]) -> URIRef | Literal | None:
    if snak.get("snaktype") != "value":
        return None  # somevalue / novalue have no truthy wdt: value here
    value = snak["datavalue"]["value"]
    kind = snak["datavalue"]["type"]
    if kind == "wikibase-entityid":
        return WD[value["id"]]
    if kind == "time":
        text = value["time"].lstrip("+")
        return Literal(text.replace("-00", "-01"), datatype=XSD.dateTime)
    if kind == "quantity":
        return Literal(value["amount"].lstrip("+"), datatype=XSD.decimal)
    if kind == "monolingualtext":
        return Literal(value["text"], lang=value["language"])
    if kind == "globecoordinate":
        return Literal(f"Point({value['longitude']} {value['latitude']})")
    if snak.get("datatype") == "url":
        return URIRef(value)
    return Literal(str(value))


def entity_triples(entity: dict[str, Any]) -> Iterator[tuple[URIRef, URIRef, URIRef | Literal]]:
    """The truthy triples, labels, descriptions, aliases and revision data of one wbgetentities entity."""
    s = WD[entity["id"]]
    for lang, label in entity.get("labels", {}).items():
        yield s, RDFS.label, Literal(label["value"], lang=lang)
    for lang, description in entity.get("descriptions", {}).items():
        yield s, SCHEMA.description, Literal(description["value"], lang=lang)
    for lang, aliases in entity.get("aliases", {}).items():
        for alias in aliases:
            yield s, SKOS.altLabel, Literal(alias["value"], lang=lang)
    if "lastrevid" in entity:
        yield s, SCHEMA.version, Literal(int(entity["lastrevid"]), datatype=XSD.integer)
    if "modified" in entity:
        yield s, SCHEMA.dateModified, Literal(entity["modified"], datatype=XSD.dateTime)
    for prop, statements in entity.get("claims", {}).items():
        ranks = {st.get("rank") for st in statements}
        best = "preferred" if "preferred" in ranks else "normal"
        for statement in statements:
            if statement.get("rank") != best:
                continue
            value = _value(statement["mainsnak"])
            if value is not None:
                yield s, WDT[prop], value


def write_test_rdf(source: Path, out_dir: Path, *, questions: bool = False) -> list[Path]:
    """Write the derived N-Triples into ``out_dir``; returns the files to load (derived first, then KGTK).
    With ``questions``, also the SimpleQuestions-Wikidata answer triples and the RoboData authors' experiment
    KGs, so question answering over the endpoint has its data (the sync tests count on the smaller set)."""
    graph = Graph()
    q42 = json.loads((source / "Q42_wbgetentities.json").read_text(encoding="utf-8"))
    for entity in q42["entities"].values():
        for triple in entity_triples(entity):
            graph.add(triple)
    neighbours = json.loads((source / "Q42_neighbour_labels.json").read_text(encoding="utf-8"))
    for entity in neighbours["entities"].values():
        for triple in entity_triples(entity):
            graph.add(triple)
    out_dir.mkdir(parents=True, exist_ok=True)
    derived = out_dir / "q42_derived.nt"
    graph.serialize(derived, format="nt", encoding="utf-8")
    files = [derived, source / "kgtk_arnold_P31_P279.ttl"]
    if questions:
        files += [
            source / "simplequestions_wd_answerable_truthy_derived.ttl",
            source / "robodata_experiment_kgs_union.nt",
        ]
    return files
