"""Every SPARQL query metakg writes, as pure functions: text in, no I/O (as :mod:`metakg.loaders.cypher` is
for Cypher). The Wikidata sync (:mod:`metakg.ingest.wikidata`) and RoboData's remote tools build their
queries here.

SPARQL over HTTP has no parameters: an id is written into a query only after it is checked here against
the form of a Wikidata item (``Q42``) or property (``P31``), a text only as an escaped string literal
(:func:`literal`), and numbers only as integers. The prefixes (``wd:``, ``wdt:``, ``rdfs:``, ``schema:``,
``skos:``, ``owl:``) are those of :data:`~metakg.schemas.knowledge_source.WIKIDATA_PREFIXES`, which the
client sends with every query.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
QID = re.compile(r"^Q[1-9][0-9]*$")
PID = re.compile(r"^P[1-9][0-9]*$")


def item(qid: str) -> str:
    """``wd:Q42`` for an item id.

    Raises:
        ValueError: not the form of an item id.
    """
    if not QID.match(qid):
        raise ValueError(f"not a Wikidata item id: {qid!r}")
    return f"wd:{qid}"


def prop(pid: str, prefix: str = "wdt:") -> str:
    """``wdt:P31`` (or ``wd:P31`` with that prefix) for a property id.

    Raises:
        ValueError: not the form of a property id.
    """
    if not PID.match(pid):
        raise ValueError(f"not a Wikidata property id: {pid!r}")
    return f"{prefix}{pid}"


def items(qids: Iterable[str]) -> str:
    """Item ids as a VALUES list: ``wd:Q1 wd:Q2``."""
    return " ".join(item(q) for q in qids)


def props(pids: Iterable[str], prefix: str = "wdt:") -> str:
    """Property ids as a VALUES list: ``wdt:P31 wdt:P279``."""
    return " ".join(prop(p, prefix) for p in pids)


def literal(text: str) -> str:
    """``text`` as a SPARQL string literal (quotes, backslashes and control characters escaped)."""
    return json.dumps(text)


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a whole number of 0 or more, got {value!r}")
    return value


# ---------------------------------------------------------------------------- the sync
def linked_items(qids: Sequence[str], pids: Sequence[str]) -> str:
    """The items the ``qids`` link to by the ``pids`` (one hop of a subset)."""
    return (
        f"SELECT DISTINCT ?o WHERE {{ VALUES ?s {{ {items(qids)} }} VALUES ?p {{ {props(pids)} }} ?s ?p ?o . "
        "FILTER(isIRI(?o)) }"
    )


def class_members(class_: str, having: str | None, limit: int, offset: int) -> str:
    """One page of the instances of ``class_`` (with a ``having`` statement when given), by id."""
    where = f"?item wdt:P31 {item(class_)} ." + (f" ?item {prop(having)} ?x ." if having else "")
    return (
        f"SELECT DISTINCT ?item WHERE {{ {where} }} "
        f"ORDER BY ?item LIMIT {_count('limit', limit)} OFFSET {_count('offset', offset)}"
    )


def revisions(qids: Sequence[str]) -> str:
    """Each item's revision, modification time, redirect target and whether it exists."""
    return (
        f"SELECT ?item ?rev ?mod ?same ?exists WHERE {{ VALUES ?item {{ {items(qids)} }} "
        "OPTIONAL { ?item schema:version ?rev } OPTIONAL { ?item schema:dateModified ?mod } "
        "OPTIONAL { ?item owl:sameAs ?same } BIND(EXISTS { ?item ?anyp ?anyo } AS ?exists) }"
    )


def terms(qids: Sequence[str], languages: Sequence[str]) -> str:
    """Labels, descriptions and aliases of the items in the ``languages``."""
    langs = ", ".join(literal(lang) for lang in languages)
    return (
        f"SELECT ?item ?p ?o WHERE {{ VALUES ?item {{ {items(qids)} }} "
        "VALUES ?p { rdfs:label schema:description skos:altLabel } ?item ?p ?o . "
        f"FILTER(LANG(?o) IN ({langs})) }}"
    )


def statements(qids: Sequence[str], pids: Sequence[str]) -> str:
    """The items' direct statements of the ``pids``."""
    return f"SELECT ?item ?p ?o WHERE {{ VALUES ?item {{ {items(qids)} }} VALUES ?p {{ {props(pids)} }} ?item ?p ?o }}"


def property_labels(pids: Sequence[str], language: str) -> str:
    """The properties' labels in ``language``."""
    return (
        f"SELECT ?p ?label WHERE {{ VALUES ?p {{ {props(pids, 'wd:')} }} ?p rdfs:label ?label . "
        f"FILTER(LANG(?label) = {literal(language)}) }}"
    )


# ---------------------------------------------------------------------------- the agent's remote tools
def entity_terms(qid_or_pid: str, language: str = "en") -> str:
    """An item's or property's label and description in ``language``."""
    subject = prop(qid_or_pid, "wd:") if PID.match(qid_or_pid) else item(qid_or_pid)
    return (
        f"SELECT ?p ?o WHERE {{ VALUES ?p {{ rdfs:label schema:description }} {subject} ?p ?o . "
        f"FILTER(LANG(?o) = {literal(language)}) }}"
    )


def entity_claims(qid: str, limit: int = 60) -> str:
    """An item's direct properties, each with its number of values and one of them, the most used first."""
    return (
        f"SELECT ?p (COUNT(?o) AS ?n) (SAMPLE(?o) AS ?example) WHERE {{ {item(qid)} ?p ?o . "
        f"FILTER(STRSTARTS(STR(?p), {literal(WDT)})) }} GROUP BY ?p ORDER BY DESC(?n) ?p LIMIT {_count('limit', limit)}"
    )


def label_search(text: str, k: int, *, exact: bool, language: str = "en") -> str:
    """Items whose label in ``language`` is ``text`` (``exact``) or contains it, case ignored, with their
    description."""
    test = "LCASE(STR(?label)) = {}" if exact else "CONTAINS(LCASE(STR(?label)), {})"
    lang = literal(language)
    return (
        f"SELECT DISTINCT ?item ?label ?description WHERE {{ ?item rdfs:label ?label . "
        f"FILTER(LANG(?label) = {lang} && {test.format(literal(text.lower()))}) "
        f"OPTIONAL {{ ?item schema:description ?description . FILTER(LANG(?description) = {lang}) }} }} "
        f"LIMIT {_count('k', k)}"
    )


def statement_pattern(qid: str, predicate: str, direction: str) -> str:
    """The triple pattern linking the item to ``?other`` by ``predicate`` (a variable such as ``?p``, or a
    property written by :func:`prop`): its own statements (``out``) or statements about it (``in``)."""
    if not re.match(r"^(\?[A-Za-z_][A-Za-z0-9_]*|wdt:P[1-9][0-9]*)$", predicate):
        raise ValueError(f"the predicate must be a variable or a wdt: property, got {predicate!r}")
    return f"{item(qid)} {predicate} ?other" if direction == "out" else f"?other {predicate} {item(qid)}"


def linked(qid: str, pid: str, direction: str, limit: int) -> str:
    """The items linked to the item by ``pid`` statements (``out``: its own; ``in``: about it)."""
    pattern = statement_pattern(qid, prop(pid), direction)
    return f"SELECT DISTINCT ?other WHERE {{ {pattern} . FILTER(isIRI(?other)) }} LIMIT {_count('limit', limit)}"


def neighbours(qid: str, direction: str, pid: str | None, limit: int, language: str = "en") -> str:
    """The items linked to the item by direct statements (of ``pid`` when given), with their labels."""
    only = f"VALUES ?p {{ {prop(pid)} }} " if pid else ""
    return (
        f"SELECT ?p ?other ?label WHERE {{ {only}{statement_pattern(qid, '?p', direction)} . FILTER(isIRI(?other)) "
        f"FILTER(STRSTARTS(STR(?p), {literal(WDT)})) "
        f"OPTIONAL {{ ?other rdfs:label ?label . FILTER(LANG(?label) = {literal(language)}) }} }} "
        f"LIMIT {_count('limit', limit)}"
    )
