"""The RDF mapping: a pure function from node and edge frames to quads (rdflib terms).

- node: ``rdf:type`` its metakg type class, ``rdfs:label``, ``schema:description``, one ``skos:altLabel``
  per alias, one ``skos:exactMatch`` per xref (``mk:xref`` literal when the xref is not a CURIE),
  ``mk:source``;
- edge: ``src mkr:<rel> dst`` in the named graph of its source (and ``src wdt:<P> dst`` too where the relation
  stands for a Wikidata property); with provenance, an ``rdf:Statement``
  ``mke:<edge id>`` carrying subject, predicate, object, confidence, count, source, importer, model,
  prompt hash, run id, creation time and one ``mk:record`` per record id (in the same named graph);
- vocabulary: each type an ``rdfs:Class`` with label and ``rdfs:subClassOf`` its parent, and its link to the
  Wikidata classes the vocabulary maps to it (``skos:exactMatch`` for one, ``skos:closeMatch`` for each of
  several: ``mkt:person skos:exactMatch wd:Q5``); each relation used an ``rdf:Property`` labelled with its
  display form, ``owl:equivalentProperty`` the Wikidata property it came from (``mkr:educated_at`` and
  ``wdt:P69``);
- text: labels, aliases and descriptions in the language given (``"aspirin"@en``; none when it is empty);
- source times: ``mk:validFrom`` on a node and on an edge's statement where the source gave one;
- history (a bundle written with ``--history``), all in the named graph ``mk:history`` so that a query of
  the other graphs sees only the current graph: ``mk:recordedAt`` of each current node and edge statement,
  and each retired version as a resource of its own (``mk:NodeVersion`` or ``mk:EdgeVersion``) with
  ``mk:versionOf`` the node or edge statement, its content and ``mk:recordedAt``, ``mk:retiredAt``,
  ``mk:validFrom``, ``mk:validTo``.

:func:`expected_triple_count` says how many distinct triples (or quads) an export must hold, computed from
the frames independently of the generator, so a round trip can be checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import polars as pl
from rdflib import OWL, RDF, RDFS, SKOS, Literal, Namespace, URIRef
from rdflib.namespace import XSD
from rdflib.term import Node

from metakg.schemas.curie import expand, is_curie
from metakg.schemas.vocabulary import TypeVocabulary

MK = Namespace("https://w3id.org/metakg/vocab#")
MKT = Namespace("https://w3id.org/metakg/type/")
MKR = Namespace("https://w3id.org/metakg/rel/")
MKE = Namespace("https://w3id.org/metakg/edge/")
MKS = Namespace("https://w3id.org/metakg/source/")
MKV = Namespace("https://w3id.org/metakg/version/")
#: the named graph of the history: recording times and retired versions
HISTORY_GRAPH = URIRef("https://w3id.org/metakg/graph/history")
SCHEMA = Namespace("http://schema.org/")
WD = Namespace("http://www.wikidata.org/entity/")
WDT = Namespace("http://www.wikidata.org/prop/direct/")
#: a Wikidata property named at the end of a relation's display form: "educated at (P69)"
_WIKIDATA_PROPERTY = re.compile(r"\((P\d+)\)\s*$")

Quad = tuple[Node, Node, Node, URIRef | None]

_EDGE_OPTIONAL = (
    ("importer", MK["importer"]),
    ("model", MK["model"]),
    ("prompt_hash", MK["promptHash"]),
    ("run_id", MK["runId"]),
)


def node_iri(node_id: str) -> URIRef:
    """The IRI of a node id (its CURIE expanded)."""
    return URIRef(expand(node_id))


def source_graph(source: str) -> URIRef:
    """The named graph that holds a source's edges."""
    return MKS[_segment(source)]


def _segment(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else f"%{ord(ch):02X}" for ch in text)


def _text(value: str, lang: str | None) -> Literal:
    return Literal(value, lang=lang or None)


def wikidata_classes(vocabulary: TypeVocabulary) -> dict[str, list[str]]:
    """The Wikidata classes the vocabulary maps to each type, by type."""
    classes: dict[str, list[str]] = {}
    for qid, name in vocabulary.wikidata.items():
        classes.setdefault(name, []).append(qid)
    return classes


def vocabulary_quads(vocabulary: TypeVocabulary, lang: str | None = "en") -> Iterator[Quad]:
    """The type classes with labels, subclass links, their Wikidata classes and, for a type an ontology's
    class became, that class (``owl:equivalentClass``)."""
    mapped = wikidata_classes(vocabulary)
    for name, parent in vocabulary.parents.items():
        cls = MKT[name]
        yield cls, RDF.type, RDFS.Class, None
        yield cls, RDFS.label, _text(vocabulary.labels[name], lang), None
        if parent is not None:
            yield cls, RDFS.subClassOf, MKT[parent], None
        qids = mapped.get(name, [])
        for qid in qids:
            yield cls, SKOS.exactMatch if len(qids) == 1 else SKOS.closeMatch, WD[qid], None
        if name in vocabulary.iris:  # a type an ontology's class became: that class
            yield cls, OWL.equivalentClass, URIRef(vocabulary.iris[name]), None


def node_quads(nodes: pl.DataFrame, lang: str | None = "en") -> Iterator[Quad]:
    """The triples of each node (default graph)."""
    for row in nodes.iter_rows(named=True):
        s = node_iri(row["id"])
        yield s, RDF.type, MKT[row["type"]], None
        yield s, RDFS.label, _text(row["name"], lang), None
        if row["description"]:
            yield s, SCHEMA.description, _text(row["description"], lang), None
        for alias in row["aliases"] or []:
            yield s, SKOS.altLabel, _text(alias, lang), None
        for xref in row["xrefs"] or []:
            yield (
                (s, SKOS.exactMatch, URIRef(expand(xref)), None)
                if is_curie(xref)
                else (s, MK["xref"], Literal(xref), None)
            )
        yield s, MK["source"], Literal(row["source"]), None
        if row["valid_from"] is not None:
            yield s, MK["validFrom"], _time(row["valid_from"]), None


def _time(value: datetime) -> Literal:
    return Literal(value, datatype=XSD.dateTime)


def edge_statement(edge_id: str) -> URIRef:
    """The IRI of an edge's reified statement."""
    return MKE[edge_id.removeprefix("e:")]


def _relations(edges: pl.DataFrame) -> pl.DataFrame:
    """Each relation used, its first display form and the Wikidata property that display names (or null)."""
    return (
        edges.group_by("rel", maintain_order=True)
        .agg(pl.col("display").first())
        .with_columns(pl.col("display").str.extract(_WIKIDATA_PROPERTY.pattern, 1).alias("wikidata"))
    )


def relation_quads(edges: pl.DataFrame, lang: str | None = "en") -> Iterator[Quad]:
    """One ``rdf:Property`` per relation used, labelled with its first display form, and the Wikidata
    property it stands for when its display names one."""
    for rel, display, pid in _relations(edges).iter_rows():
        yield MKR[rel], RDF.type, RDF.Property, None
        yield MKR[rel], RDFS.label, _text(display or rel, lang), None
        if pid:
            yield MKR[rel], OWL.equivalentProperty, WDT[pid], None


def _properties(edges: pl.DataFrame) -> dict[str, str]:
    """Each relation that stands for a Wikidata property, and that property (``educated_at`` -> ``P69``)."""
    if not edges.height:
        return {}
    return {rel: pid for rel, _display, pid in _relations(edges).iter_rows() if pid}


def edge_quads(edges: pl.DataFrame, *, provenance: bool = True) -> Iterator[Quad]:
    """The edge triples, each in its source's named graph, with reified provenance when asked. An edge whose
    relation stands for a Wikidata property is also written in Wikidata's own terms (``wd:Q42 wdt:P69
    wd:Q691283``), so a query written for Wikidata finds it with no reasoner."""
    properties = _properties(edges)
    for row in edges.iter_rows(named=True):
        g = source_graph(row["source"])
        s, p, o = node_iri(row["src"]), MKR[row["rel"]], node_iri(row["dst"])
        yield s, p, o, g
        if row["rel"] in properties:
            yield s, WDT[properties[row["rel"]]], o, g
        if not provenance:
            continue
        e = edge_statement(row["id"])
        yield e, RDF.type, RDF.Statement, g
        yield e, RDF.subject, s, g
        yield e, RDF.predicate, p, g
        yield e, RDF.object, o, g
        if row["confidence"] is not None:
            yield e, MK["confidence"], Literal(row["confidence"], datatype=XSD.double), g
        yield e, MK["count"], Literal(row["count"], datatype=XSD.integer), g
        yield e, MK["source"], Literal(row["source"]), g
        for column, predicate in _EDGE_OPTIONAL:
            if row[column]:
                yield e, predicate, Literal(row[column]), g
        created: datetime | None = row["created_at"]
        if created is not None:
            yield e, MK["createdAt"], _time(created), g
        for record in row["record_ids"] or []:
            yield e, MK["record"], Literal(record), g
        if row["valid_from"] is not None:
            yield e, MK["validFrom"], _time(row["valid_from"]), g


_VERSION_TIMES = (("recorded_at", "recordedAt"), ("retired_at", "retiredAt"), ("valid_from", "validFrom"),
                  ("valid_to", "validTo"))  # fmt: skip


def history_quads(nodes: pl.DataFrame, edges: pl.DataFrame, lang: str | None = "en") -> Iterator[Quad]:
    """The history tables (:mod:`metakg.schemas.history`) in the ``mk:history`` graph: recording times of
    current rows, and each retired version as its own resource."""
    h = HISTORY_GRAPH
    for row in nodes.iter_rows(named=True):
        subject = node_iri(row["id"])
        if row["retired_at"] is None:
            if row["recorded_at"] is not None:
                yield subject, MK["recordedAt"], _time(row["recorded_at"]), h
            continue
        v = MKV[f"node/{_segment(row['id'])}/{int(row['retired_at'].timestamp() * 1_000_000)}"]
        yield v, RDF.type, MK["NodeVersion"], h
        yield v, MK["versionOf"], subject, h
        yield v, RDFS.label, _text(row["name"], lang), h
        yield v, MK["nodeType"], MKT[row["type"]], h
        yield v, MK["source"], Literal(row["source"]), h
        if row["description"]:
            yield v, SCHEMA.description, _text(row["description"], lang), h
        for column, name in _VERSION_TIMES:
            if row[column] is not None:
                yield v, MK[name], _time(row[column]), h
    for row in edges.iter_rows(named=True):
        statement = edge_statement(row["id"])
        if row["retired_at"] is None:
            if row["recorded_at"] is not None:
                yield statement, MK["recordedAt"], _time(row["recorded_at"]), h
            continue
        v = MKV[f"edge/{_segment(row['id'])}/{int(row['retired_at'].timestamp() * 1_000_000)}"]
        yield v, RDF.type, MK["EdgeVersion"], h
        yield v, MK["versionOf"], statement, h
        yield v, RDF.subject, node_iri(row["src"]), h
        yield v, RDF.predicate, MKR[row["rel"]], h
        yield v, RDF.object, node_iri(row["dst"]), h
        yield v, MK["source"], Literal(row["source"]), h
        if row["confidence"] is not None:
            yield v, MK["confidence"], Literal(row["confidence"], datatype=XSD.double), h
        yield v, MK["count"], Literal(row["count"], datatype=XSD.integer), h
        for column, name in _VERSION_TIMES:
            if row[column] is not None:
                yield v, MK[name], _time(row[column]), h


def expected_history_count(nodes: pl.DataFrame, edges: pl.DataFrame) -> int:
    """How many statements :func:`history_quads` promises for these history tables (computed apart)."""
    times = [pl.col(c).is_not_null().sum() for c, _ in _VERSION_TIMES]
    total = 0
    # node: type, versionOf, label, nodeType, source; edge: type, versionOf, s, p, o, source, count
    for frame, fixed in ((nodes, 5), (edges, 7)):
        current = frame.filter(pl.col("retired_at").is_null())
        retired = frame.filter(pl.col("retired_at").is_not_null())
        total += int(current["recorded_at"].is_not_null().sum())
        total += retired.height * fixed + sum(int(retired.select(t).item() or 0) for t in times)
        if frame is edges:
            total += int(retired["confidence"].is_not_null().sum())
        if frame is nodes:
            total += int((retired["description"].fill_null("") != "").sum())
    return total


def bundle_quads(
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    vocabulary: TypeVocabulary,
    *,
    provenance: bool = True,
    lang: str | None = "en",
) -> Iterator[Quad]:
    """Every quad of a bundle: vocabulary, relations, nodes, edges; text in the language ``lang`` (None or
    empty: plain literals)."""
    yield from vocabulary_quads(vocabulary, lang)
    yield from relation_quads(edges, lang)
    yield from node_quads(nodes, lang)
    yield from edge_quads(edges, provenance=provenance)


def expected_triple_count(
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    vocabulary: TypeVocabulary,
    *,
    provenance: bool = True,
    named_graphs: bool = True,
) -> int:
    """How many distinct statements the mapping promises for these frames.

    Args:
        nodes: accepted nodes (ids unique).
        edges: accepted edges (ids unique).
        vocabulary: the type vocabulary exported with them.
        provenance: whether reified edge provenance is included.
        named_graphs: True for quad formats, where the same triple in two graphs counts twice.
    """
    vocab = sum(3 if parent is not None else 2 for parent in vocabulary.parents.values()) + len(vocabulary.wikidata)
    vocab += len(vocabulary.iris)
    relations = 0
    if edges.height:
        named = _relations(edges)
        relations = 2 * named.height + int(named["wikidata"].is_not_null().sum())
    n: dict[str, Any] = nodes.select(
        (pl.len() * 3).alias("base"),  # type, label, source
        (pl.col("description").fill_null("") != "").sum().alias("desc"),
        pl.col("valid_from").is_not_null().sum().alias("valid_from"),
        pl.col("aliases").list.unique().list.len().sum().alias("aliases"),
        pl.col("xrefs").list.unique().list.len().sum().alias("xrefs"),
    ).row(0, named=True)
    node_total = sum(int(v or 0) for v in n.values())
    key = ["src", "rel", "dst", "source"] if named_graphs else ["src", "rel", "dst"]
    direct = edges.select(key).unique().height if edges.height else 0
    properties = _properties(edges)
    if properties:  # the same edges in Wikidata's terms: one triple per property, not per relation
        as_wikidata = edges.filter(pl.col("rel").is_in(list(properties))).with_columns(
            pl.col("rel").replace_strict(properties, return_dtype=pl.String)
        )
        direct += as_wikidata.select(key).unique().height
    prov = 0
    if provenance and edges.height:
        p: dict[str, Any] = edges.select(
            (pl.len() * 6).alias("base"),  # type, subject, predicate, object, count, source
            pl.col("confidence").is_not_null().sum().alias("confidence"),
            *[(pl.col(c).fill_null("") != "").sum().alias(c) for c, _ in _EDGE_OPTIONAL],
            pl.col("created_at").is_not_null().sum().alias("created_at"),
            pl.col("valid_from").is_not_null().sum().alias("valid_from"),
            pl.col("record_ids").list.unique().list.len().sum().alias("records"),
        ).row(0, named=True)
        prov = sum(int(v or 0) for v in p.values())
    return vocab + relations + node_total + direct + prov
