"""Ontologies that guide extraction: classes with labels and an is-a hierarchy, relations with domain and range.

Two forms are read. Text2KGBench's JSON (``{"id", "title", "concepts": [{"qid", "label"}], "relations": [{"pid",
"label", "domain", "range"}]}``; a concept may name its parents in ``subclass_of``) and OWL/RDFS in Turtle,
RDF/XML, N-Triples or JSON-LD through rdflib (``owl:Class``/``rdfs:Class`` with ``rdfs:label`` and
``rdfs:subClassOf``; ``owl:ObjectProperty``, ``owl:DatatypeProperty`` and ``rdf:Property`` with ``rdfs:domain``
and ``rdfs:range``). A relation whose range is a datatype (``string``, ``number``, ``date``, ``year``, an XSD
type) takes a literal object, not an entity.

A bad ontology gets an :class:`~metakg.errors.OntologyError` naming the element: a domain or range that is not
a class, a subclass cycle, no relations, a relation without a label. ``strict=False`` (the benchmark harness,
whose own ontologies name a few classes they do not list) declares such classes instead and says so in
:attr:`Ontology.warnings`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metakg.errors import OntologyError
from metakg.schemas.vocabulary import TypeVocabulary

#: datatype names a range may give instead of a class (case-insensitive), and the literal kind each means
DATATYPES: Mapping[str, str] = {
    "string": "string",
    "text": "string",
    "literal": "string",
    "langstring": "string",
    "anyuri": "string",
    "number": "number",
    "integer": "number",
    "int": "number",
    "long": "number",
    "decimal": "number",
    "float": "number",
    "double": "number",
    "nonnegativeinteger": "number",
    "positiveinteger": "number",
    "quantity": "number",
    "date": "date",
    "datetime": "date",
    "time": "date",
    "year": "date",
    "gyear": "date",
    "gyearmonth": "date",
    "boolean": "boolean",
}

#: file suffixes read through rdflib, and the rdflib format of each
RDF_FORMATS: Mapping[str, str] = {
    ".ttl": "turtle",
    ".owl": "xml",
    ".rdf": "xml",
    ".xml": "xml",
    ".nt": "nt",
    ".n3": "n3",
    ".jsonld": "json-ld",
}


@dataclass(frozen=True)
class OntologyClass:
    """One class: its id (a QID, a DBpedia name or an IRI's local name), label and direct parents."""

    id: str
    label: str
    parents: tuple[str, ...] = ()
    iri: str | None = None
    declared: bool = True  # False: named by a relation only, declared by a lenient read


@dataclass(frozen=True)
class OntologyRelation:
    """One relation: ``domain`` and ``range`` are class ids (None: any); ``datatype`` is the literal kind of a
    datatype property's object (``string``, ``number``, ``date``, ``boolean``), None for an object property."""

    id: str
    label: str
    domain: str | None = None
    range: str | None = None
    datatype: str | None = None
    iri: str | None = None
    as_written: str | None = None  # the label exactly as the file gives it, when it differs (stray spaces)

    @property
    def key(self) -> str:
        """The relation as metakg names edges: snake_case of the label (``cast member`` -> ``cast_member``,
        ``academicStaffSize`` -> ``academic_staff_size``)."""
        return relation_key(self.label)

    @property
    def written(self) -> str:
        """The relation as Text2KGBench writes it in a triple: the label as the file gives it (stray spaces
        included: the benchmark's own conformance figures take the labels verbatim), spaces as underscores."""
        return (self.as_written or self.label).replace(" ", "_")


@dataclass(frozen=True)
class Ontology:
    """Classes and relations, read and checked; ``warnings`` lists what a lenient read declared or dropped."""

    id: str
    title: str
    classes: Mapping[str, OntologyClass]
    relations: tuple[OntologyRelation, ...]
    source: str = ""
    warnings: tuple[str, ...] = ()
    _by_key: dict[str, OntologyRelation] = field(default_factory=dict, repr=False, compare=False)
    _by_label: dict[str, OntologyClass] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for relation in self.relations:
            self._by_key.setdefault(relation.key, relation)
        for cls in self.classes.values():
            self._by_label.setdefault(_fold(cls.label), cls)
            self._by_label.setdefault(_fold(cls.id), cls)

    def relation(self, name: str) -> OntologyRelation | None:
        """The relation a reply names, by label, written form or id, in any case or spacing; None if unknown."""
        return self._by_key.get(relation_key(name)) or next(
            (r for r in self.relations if r.id.lower() == name.strip().lower()), None
        )

    def class_named(self, name: str) -> OntologyClass | None:
        """The class a reply names by label or id (case and spacing ignored); None if unknown."""
        return self._by_label.get(_fold(name))

    def ancestors(self, class_id: str) -> set[str]:
        """The class and every class above it."""
        seen: set[str] = set()
        todo = [class_id]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            cls = self.classes.get(current)
            if cls is not None:
                todo.extend(cls.parents)
        return seen

    def is_a(self, class_id: str, other: str) -> bool:
        """Whether ``class_id`` is ``other`` or one of its subclasses."""
        return other in self.ancestors(class_id)

    def fingerprint(self) -> str:
        """A short hash of what a prompt shows of the ontology: part of the reply-cache key."""
        body = json.dumps(
            {
                "classes": sorted((c.id, c.label, sorted(c.parents)) for c in self.classes.values()),
                "relations": sorted((r.id, r.label, r.domain, r.range, r.datatype) for r in self.relations),
            },
            sort_keys=True,
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]


#: a relation as read, before checking: id, label, domain, range, datatype, the label as written
_Rel = tuple[str, str, str | None, str | None, str | None, str | None]


def relation_key(label: str) -> str:
    """snake_case of a relation label: camelCase split, spaces, dashes and underscores folded to one ``_``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", label.strip())
    return re.sub(r"[^0-9a-z]+", "_", spaced.lower()).strip("_")


def _fold(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text).lower()


def read_ontology(path: Path, *, strict: bool = True) -> Ontology:
    """Read and check an ontology file: ``.json`` in Text2KGBench's form, otherwise RDF by suffix."""
    if not path.is_file():
        raise OntologyError(f"{path}: no such ontology file")
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise OntologyError(f"{path}: not a JSON ontology: {e}") from e
        return ontology_from_json(data, source=str(path), strict=strict)
    rdf_format = RDF_FORMATS.get(suffix)
    if rdf_format is None:
        raise OntologyError(
            f"{path}: unknown ontology format {suffix or '(no suffix)'!r}; use .json (Text2KGBench) or "
            f"{', '.join(RDF_FORMATS)} (OWL/RDFS)"
        )
    return ontology_from_rdf(path, rdf_format, strict=strict)


def ontology_from_json(data: Any, *, source: str = "", strict: bool = True) -> Ontology:
    """An ontology from Text2KGBench's JSON form (see the module doc)."""
    where = source or "ontology"
    if not isinstance(data, dict):
        raise OntologyError(f"{where}: expected a JSON object with 'concepts' and 'relations'")
    concepts, relations = data.get("concepts", []), data.get("relations")
    if not isinstance(concepts, list) or not isinstance(relations, list):
        raise OntologyError(f"{where}: 'concepts' and 'relations' must be lists")
    classes: list[OntologyClass] = []
    for n, item in enumerate(concepts):
        if not isinstance(item, dict) or not str(item.get("qid") or item.get("id") or "").strip():
            raise OntologyError(f"{where}: concepts[{n}] has no 'qid'")
        cid = str(item.get("qid") or item.get("id")).strip()
        parents = item.get("subclass_of") or item.get("parents") or []
        parents = [parents] if isinstance(parents, str) else parents
        classes.append(OntologyClass(cid, str(item.get("label") or cid).strip(), tuple(str(p) for p in parents)))
    rels: list[_Rel] = []
    for n, item in enumerate(relations):
        if not isinstance(item, dict):
            raise OntologyError(f"{where}: relations[{n}] is not an object")
        label = str(item.get("label") or "").strip()
        rid = str(item.get("pid") or item.get("id") or label).strip()
        if not label:
            raise OntologyError(f"{where}: relations[{n}] ({rid or 'no id'}) has no label")
        raw = str(item.get("label"))
        rels.append((rid, label, _blank(item.get("domain")), _blank(item.get("range")), None, raw))
    return _checked(
        str(data.get("id") or Path(source).stem or "ontology"),
        str(data.get("title") or data.get("id") or ""),
        classes,
        rels,
        where,
        strict,
    )


def ontology_from_rdf(path: Path, rdf_format: str, *, strict: bool = True) -> Ontology:
    """An ontology from OWL/RDFS (see the module doc); class and relation ids are the IRIs' local names."""
    import rdflib
    from rdflib.namespace import OWL, RDF, RDFS

    graph = rdflib.Graph()
    try:
        graph.parse(path, format=rdf_format)
    except Exception as e:  # rdflib raises parser-specific errors (BadSyntax, SAXParseException, ...)
        raise OntologyError(f"{path}: not readable as {rdf_format}: {e}") from e

    def label_of(node: Any) -> str:
        labels = list(graph.objects(node, RDFS.label))
        preferred = [lab for lab in labels if getattr(lab, "language", None) in (None, "en")]
        return str((preferred or labels)[0]) if labels else _local(str(node))

    class_nodes = {s for t in (OWL.Class, RDFS.Class) for s in graph.subjects(RDF.type, t)}
    # RDFS semantics: what rdfs:subClassOf, rdfs:domain and rdfs:range point at is a class, declared or not
    for link in (RDFS.subClassOf, RDFS.domain, RDFS.range):
        class_nodes |= {
            o
            for o in graph.objects(None, link)
            if isinstance(o, rdflib.URIRef) and not _is_datatype(str(o)) and _local(str(o)).lower() not in DATATYPES
        }  # an undeclared ``...#string`` or ``...#Date`` is a datatype, as in Text2KGBench's own files
    class_nodes = {c for c in class_nodes if isinstance(c, rdflib.URIRef) and c not in (OWL.Thing, RDFS.Resource)}
    classes = [
        OntologyClass(
            _local(str(c)),
            label_of(c),
            tuple(
                sorted(
                    _local(str(p))
                    for p in graph.objects(c, RDFS.subClassOf)
                    if isinstance(p, rdflib.URIRef) and p not in (OWL.Thing, RDFS.Resource)
                )
            ),
            str(c),
        )
        for c in sorted(class_nodes, key=str)
    ]
    datatype_props = set(graph.subjects(RDF.type, OWL.DatatypeProperty))
    props = {s for t in (OWL.ObjectProperty, OWL.DatatypeProperty, RDF.Property) for s in graph.subjects(RDF.type, t)}
    rels: list[_Rel] = []
    for prop in sorted(p for p in props if isinstance(p, rdflib.URIRef)):
        domain = next(iter(graph.objects(prop, RDFS.domain)), None)
        rng = next(iter(graph.objects(prop, RDFS.range)), None)
        datatype = None
        if rng is not None and _is_datatype(str(rng)):
            datatype = DATATYPES.get(_local(str(rng)).lower(), "string")
            rng = None
        elif prop in datatype_props and rng is None:
            datatype = "string"
        rels.append(
            (
                _local(str(prop)),
                label_of(prop),
                _local(str(domain)) if domain is not None else None,
                _local(str(rng)) if rng is not None else None,
                datatype,
                None,
            )
        )
    title = next((str(o) for s in graph.subjects(RDF.type, OWL.Ontology) for o in graph.objects(s, RDFS.label)), "")
    return _checked(path.stem, title, classes, rels, str(path), strict, iris={c.id: c.iri for c in classes})


def _checked(
    oid: str,
    title: str,
    classes: Iterable[OntologyClass],
    rels: list[_Rel],
    where: str,
    strict: bool,
    iris: Mapping[str, str | None] | None = None,
) -> Ontology:
    """Check the pieces and make the ontology: every domain, range and parent a class (or a datatype for a
    range), no subclass cycle, at least one relation."""
    by_id: dict[str, OntologyClass] = {}
    for cls in classes:
        by_id.setdefault(cls.id, cls)
    warnings: list[str] = []
    if not rels:
        raise OntologyError(f"{where}: the ontology has no relations; extraction needs at least one")

    def known(class_id: str, what: str) -> str:
        if class_id in by_id:
            return class_id
        by_label = next((c.id for c in by_id.values() if _fold(c.label) == _fold(class_id)), None)
        if by_label is not None:
            return by_label
        if strict:
            raise OntologyError(
                f"{where}: {what}: {class_id!r} is not a class of the ontology (declare it among the concepts)"
            )
        warnings.append(f"{what}: {class_id!r} is not a class of the ontology; declared")
        by_id[class_id] = OntologyClass(class_id, class_id, (), (iris or {}).get(class_id), declared=False)
        return class_id

    for cls in list(by_id.values()):
        parents = tuple(known(p, f"class {cls.id!r} ({cls.label}) subclass_of") for p in cls.parents)
        by_id[cls.id] = OntologyClass(cls.id, cls.label, parents, cls.iri)
    relations: list[OntologyRelation] = []
    for rid, label, domain, rng, datatype, raw in rels:
        what = f"relation {rid!r} ({label})"
        if rng is not None and rng not in by_id and rng.lower() in DATATYPES:
            datatype, rng = DATATYPES[rng.lower()], None
        relations.append(
            OntologyRelation(
                rid,
                label,
                known(domain, f"{what} domain") if domain else None,
                known(rng, f"{what} range") if rng else None,
                datatype,
                as_written=raw if raw is not None and raw != label else None,
            )
        )
    cycle = _subclass_cycle(by_id)
    if cycle:
        raise OntologyError(f"{where}: subclass cycle: {' -> '.join(cycle)}")
    return Ontology(oid, title, dict(by_id), tuple(relations), where, tuple(warnings))


def _subclass_cycle(classes: Mapping[str, OntologyClass]) -> list[str]:
    """A cycle of ``subclass_of`` links as the path that closes it, or [] if there is none."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in classes:
        if state.get(start):
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                if state.get(node) == 1:
                    return [*path[path.index(node) :], node]
                if state.get(node) == 2:
                    continue
                state[node] = 1
                path.append(node)
            parents = classes[node].parents if node in classes else ()
            if index < len(parents):
                stack.append((node, index + 1))
                stack.append((parents[index], 0))
            else:
                state[node] = 2
                path.pop()
    return []


def _is_datatype(iri: str) -> bool:
    return iri.startswith(("http://www.w3.org/2001/XMLSchema#", "http://www.w3.org/1999/02/22-rdf-syntax-ns#lang")) or (
        iri == "http://www.w3.org/2000/01/rdf-schema#Literal"
    )


def _blank(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def _local(iri: str) -> str:
    """An IRI's local name: after its last ``#``, else its last ``/``."""
    return re.split(r"[#/]", iri.rstrip("/#"))[-1] or iri


def node_types(ontology: Ontology, vocabulary: TypeVocabulary) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The node type of each class, and the types the bundle must declare.

    A class whose snake_case label is a vocabulary type is that type (``person``, ``drug``). Any other class
    becomes a type of its own, declared in the bundle's manifest under ``types`` and placed in the
    vocabulary's hierarchy: under the vocabulary type its Wikidata class maps to (``film``, Q11424, under
    ``creative_work``), else under its first parent's type, else under ``concept``.
    """
    types: dict[str, str] = {}
    declared: dict[str, dict[str, Any]] = {}

    def type_of(class_id: str, seen: frozenset[str] = frozenset()) -> str:
        if class_id in types:
            return types[class_id]
        cls = ontology.classes[class_id]
        name = relation_key(cls.label) or relation_key(cls.id) or "class"
        name = name if name[0].isalpha() else f"class_{name}"
        if name not in vocabulary.names:
            parent = vocabulary.wikidata.get(cls.id)
            if parent is None:
                parents = [p for p in cls.parents if p in ontology.classes and p not in seen]
                parent = type_of(parents[0], seen | {class_id}) if parents else "concept"
            if name not in declared:
                declared[name] = {
                    "label": cls.label,
                    "is_a": parent,
                    "ontology": ontology.id,
                    "class": cls.id,
                    **({"iri": iri} if (iri := _class_iri(cls)) else {}),
                }
        types[class_id] = name
        return name

    for class_id in ontology.classes:
        type_of(class_id)
    return types, declared


#: the id of the ontology :func:`vocabulary_ontology` makes: extraction typed by metakg's own vocabulary
VOCABULARY_ONTOLOGY = "metakg-vocabulary"
#: vocabulary types an extracted entity is never given: the root, and the type of extracted values
_NOT_FOR_ENTITIES = frozenset({"entity", "value"})


def vocabulary_ontology(vocabulary: TypeVocabulary) -> Ontology:
    """metakg's type vocabulary as the classes of an ontology with no relations: what types the entities of an
    extraction run without an ontology (relations stay free). Class ids are the type names, labels the
    vocabulary's labels, parents its is-a links (the root ``entity`` left out)."""
    classes = {
        name: OntologyClass(
            name,
            vocabulary.labels.get(name, name),
            tuple(p for p in [vocabulary.parents[name]] if p is not None and p not in _NOT_FOR_ENTITIES),
        )
        for name in vocabulary.parents
        if name not in _NOT_FOR_ENTITIES
    }
    return Ontology(VOCABULARY_ONTOLOGY, "metakg type vocabulary", classes, (), source="vocabulary")


def _class_iri(cls: OntologyClass) -> str | None:
    """A class's IRI: its own (OWL), or Wikidata's for a QID (Text2KGBench's Wikidata ontologies)."""
    if cls.iri:
        return cls.iri
    return f"http://www.wikidata.org/entity/{cls.id}" if re.fullmatch(r"Q[1-9]\d*", cls.id) else None
