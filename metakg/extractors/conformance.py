"""The conformance stage: each parsed triple checked against the ontology that guided its extraction.

A triple conforms when its relation is one of the ontology's (by label, id or written form, in any case),
its subject is of the relation's domain class and its object of the range class (a subclass conforms), or,
for a relation whose range is a datatype or not given, its object is a value. A type the reply does not give
is taken from the domain or range. What does not conform is a reject with its check and reason
(``unknown_relation``, ``unknown_type``, ``domain_violation``, ``range_violation``) or, under ``warn``, kept
with the same reason as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from metakg.extractors.ontology import DATATYPES, Ontology, OntologyRelation
from metakg.extractors.parsing import Triple
from metakg.extractors.prompts import VALUE

Mode = Literal["reject", "warn"]
MODES: tuple[Mode, ...] = ("reject", "warn")


@dataclass(frozen=True)
class Conformed:
    """A triple as the ontology reads it: its relation (None: unknown, kept under ``warn``), the subject's
    class id, and the object's class id or, for a value, its kind (``value_kind``)."""

    triple: Triple
    relation: OntologyRelation | None
    subject_class: str | None
    object_class: str | None
    value_kind: str | None = None
    warning: tuple[str, str] | None = None  # (check, reason) of a kept violation


@dataclass(frozen=True)
class Violation:
    """Why a triple does not conform: a check name and a sentence naming the element."""

    check: str
    reason: str


def conform(triple: Triple, ontology: Ontology, mode: Mode = "reject") -> Conformed | Violation:
    """Check one triple (see the module doc); under ``warn`` a violation comes back kept, with its reason."""
    relation = ontology.relation(triple.predicate)
    if relation is None:
        violation = Violation("unknown_relation", f"relation {triple.predicate!r} is not in the ontology {ontology.id}")
        if mode == "reject":
            return violation
        subject = _known(ontology, triple.subject_type)
        object_class = _known(ontology, triple.object_type)
        kind = None if object_class is not None else _value_kind(triple.object_type)
        return Conformed(triple, None, subject, object_class, kind, (violation.check, violation.reason))
    subject, problem = _side(ontology, triple.subject, triple.subject_type, relation.domain, relation, "domain")
    if problem is not None and mode == "reject":
        return problem
    warning = problem
    if relation.datatype is not None or relation.range is None:
        object_class, kind, object_problem = _value_side(ontology, triple, relation)
    else:
        object_class, object_problem = _side(
            ontology, triple.object, triple.object_type, relation.range, relation, "range"
        )
        kind = None
    if object_problem is not None and mode == "reject":
        return object_problem
    warning = warning or object_problem
    return Conformed(
        triple, relation, subject, object_class, kind, (warning.check, warning.reason) if warning else None
    )


def _known(ontology: Ontology, name: str) -> str | None:
    found = ontology.class_named(name) if name else None
    return found.id if found is not None else None


def _value_kind(name: str) -> str | None:
    folded = name.strip().lower()
    if folded in (VALUE, "literal"):
        return VALUE
    return DATATYPES.get(folded)


def _side(
    ontology: Ontology, name: str, given: str, expected: str | None, relation: OntologyRelation, side: str
) -> tuple[str | None, Violation | None]:
    """The class of a subject (``side`` domain) or an entity object (range): the type given if it is a class
    and conforms, the expected class when none is given."""
    if not given.strip():
        return expected, None
    cls = ontology.class_named(given)
    if cls is None:
        if _value_kind(given) is not None and side == "range":
            return expected, Violation(
                "range_violation", f"{name!r} is given as a value, but {relation.label}'s range is the class "
                f"{_label(ontology, expected)}"
            )  # fmt: skip
        role = "subject" if side == "domain" else "object"
        return expected, Violation("unknown_type", f"{role} type {given!r} of {name!r} is not a class of {ontology.id}")
    if expected is not None and not ontology.is_a(cls.id, expected):
        role = "subject" if side == "domain" else "object"
        return cls.id, Violation(
            f"{side}_violation",
            f"the {role} {name!r} is a {cls.label}, but {relation.label}'s {side} is {_label(ontology, expected)}",
        )
    return cls.id, None


def _value_side(
    ontology: Ontology, triple: Triple, relation: OntologyRelation
) -> tuple[str | None, str | None, Violation | None]:
    """The object of a relation whose range is a datatype (a value) or not given (a value or an entity)."""
    given = triple.object_type.strip()
    cls = ontology.class_named(given) if given else None
    if relation.datatype is None:  # no range: an entity when typed with a class, else a value
        return (cls.id, None, None) if cls is not None else (None, _value_kind(given) or VALUE, None)
    if cls is not None:
        return None, relation.datatype, Violation(
            "range_violation", f"{triple.object!r} is given as a {cls.label}, but {relation.label} takes a "
            f"{relation.datatype} value"
        )  # fmt: skip
    return None, relation.datatype, None


def _label(ontology: Ontology, class_id: str | None) -> str:
    cls = ontology.classes.get(class_id or "")
    return cls.label if cls is not None else str(class_id)
