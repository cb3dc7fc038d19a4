"""The type vocabulary: an is-a hierarchy read from ``vocabulary.toml``, with source mappings, the relations
declared symmetric (``[relations] symmetric``) and the CURIE prefixes with their synonyms (``[prefixes]``)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from metakg.errors import ConfigError


@dataclass(frozen=True)
class PrefixSpec:
    """One CURIE prefix metakg writes: its namespace, the other spellings and namespaces that mean it, and how
    its local ids are written (``pad``: digits a numeric id is zero-padded to; ``upper``: upper case), and
    ``type``: the vocabulary type every id of the namespace names (``mondo``: a disease), or None when its
    ids name things of several types (MeSH, UMLS, GO). ``organism``: where a namespace writes the organism
    into its ids (Reactome's ``R-HSA-``, KEGG's ``hsa04210``), how to read it."""

    name: str
    iri: str
    synonyms: tuple[str, ...] = ()
    iris: tuple[str, ...] = ()
    pad: int = 0
    upper: bool = False
    type: str | None = None
    organism: OrganismCode | None = None


@dataclass(frozen=True)
class OrganismCode:
    """How a namespace writes the organism into its local ids: ``pattern`` (a regular expression whose first
    group is the organism's code, matched at the start of the local id, ignoring case), the code of ``human``
    (the organism of metakg's biomedical graphs), and the codes that name no one organism (``any``:
    Reactome's ``ALL``, KEGG's reference maps ``map``, ``ko``). Codes are kept case-folded."""

    pattern: re.Pattern[str]
    human: str
    any: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TypeVocabulary:
    """Node types with their parents, labels and mappings from PrimeKG types and Wikidata classes."""

    parents: dict[str, str | None]
    labels: dict[str, str]
    primekg: dict[str, str] = field(default_factory=dict)
    wikidata: dict[str, str] = field(default_factory=dict)
    symmetric: frozenset[str] = frozenset()  # relations whose direction means nothing (mirrors collapse)
    prefixes: dict[str, PrefixSpec] = field(default_factory=dict)
    iris: dict[str, str] = field(default_factory=dict)  # declared types: the IRI of the ontology class each is

    @property
    def names(self) -> frozenset[str]:
        """All type names."""
        return frozenset(self.parents)

    def ancestors(self, name: str) -> list[str]:
        """``name`` and its ancestors, nearest first.

        Raises:
            KeyError: ``name`` is not a type of this vocabulary.
        """
        chain = [name]
        parent = self.parents[name]
        while parent is not None:
            chain.append(parent)
            parent = self.parents[parent]
        return chain

    def is_a(self, name: str, ancestor: str) -> bool:
        """True when ``name`` equals ``ancestor`` or descends from it."""
        return name in self.parents and ancestor in self.ancestors(name)

    def with_types(self, declared: Mapping[str, Any]) -> TypeVocabulary:
        """This vocabulary and the types a bundle declares (its manifest's ``types``: name -> ``{"label",
        "is_a", "iri"}``, the classes of an ontology that guided its extraction). A declared type whose parent is
        unknown goes under ``concept``; the shipped types are never redefined."""
        if not declared:
            return self
        parents = dict(self.parents)
        labels = dict(self.labels)
        iris = dict(self.iris)
        for name, spec in declared.items():
            if name in self.parents or not isinstance(spec, Mapping):
                continue
            parents[name] = str(spec.get("is_a") or "concept")
            labels[name] = str(spec.get("label") or name)
            if isinstance(spec.get("iri"), str) and spec["iri"].startswith(("http://", "https://")):
                iris[name] = spec["iri"]
        for name in declared:
            seen = {name}
            step = parents.get(name)
            while step is not None and step in parents and step not in seen:
                seen.add(step)
                step = parents[step]
            if name not in self.parents and step is not None:  # an unknown parent, or a cycle of declared ones
                parents[name] = "concept"
        return replace(self, parents=parents, labels=labels, iris=iris)

    def id_type(self, node_id: str) -> str | None:
        """The type the namespace of ``node_id`` implies (its prefix's ``type``, the prefix in any of its
        spellings, ignoring case: ``NCBITaxon:9606`` is a taxon), or None."""
        prefix = node_id.split(":", 1)[0] if ":" in node_id else ""
        spec = self._spellings.get(prefix.casefold()) if prefix else None
        return spec.type if spec is not None else None

    def id_organism(self, node_id: str) -> str | None:
        """The organism ``node_id`` is about, where its namespace writes one into its ids: ``"human"``, or
        ``"<prefix>:<CODE>"`` for another (``reactome:R-BTA-1266738``: ``"reactome:BTA"``, cattle; the prefix
        in any spelling, the id in any case); None for an id of no one organism (``reactome:R-ALL-29356``,
        ``kegg.pathway:map04210``, every MeSH id). Another organism's code is its namespace's own, so
        Reactome's mouse and KEGG's are two organisms to this check."""
        prefix, _, local = node_id.partition(":")
        spec = self._spellings.get(prefix.casefold()) if local else None
        if spec is None or spec.organism is None:
            return None
        found = spec.organism.pattern.match(local)
        written = found.group(1) if found is not None else None
        if not written or written.casefold() in spec.organism.any:
            return None
        return "human" if written.casefold() == spec.organism.human else f"{spec.name}:{written.upper()}"

    def organisms_apart(self, a: str, b: str) -> bool:
        """True when ids ``a`` and ``b`` cannot be one entity for their organisms (:func:`organisms_clash`): one
        is about an organism other than human (a cattle pathway of Reactome) and the other is not about that
        same organism (a MeSH term, of no one organism, or the human pathway)."""
        return organisms_clash(self.organisms_of([a]), self.organisms_of([b]))

    def organisms_of(self, ids: Iterable[str]) -> frozenset[str]:
        """The organisms ``ids`` (a node's id and xrefs) are about (:meth:`id_organism`), None left out."""
        return frozenset(o for i in ids if (o := self.id_organism(i)) is not None)

    @cached_property
    def _spellings(self) -> dict[str, PrefixSpec]:
        """Every spelling of a prefix (its name and synonyms, case-folded) to the prefix."""
        return {
            spelling.casefold(): spec for spec in self.prefixes.values() for spelling in (spec.name, *spec.synonyms)
        }


def organisms_clash(first: Collection[str], second: Collection[str]) -> bool:
    """True when two things about these organisms (:meth:`TypeVocabulary.organisms_of`) cannot be one entity:
    the same process in another species is another entity, so a thing about an organism other than human is
    one entity only with things about exactly the same organisms; human things and things of no one organism
    fit each other."""
    return set(first) != set(second) and any(o != "human" for o in {*first, *second})


def parse_vocabulary(text: str, origin: str = "vocabulary.toml") -> TypeVocabulary:
    """Build a vocabulary from TOML text.

    Raises:
        ConfigError: the TOML is malformed, a parent is unknown, the hierarchy has a cycle, or a mapping
            names an unknown type.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{origin}: not valid TOML ({e}).") from e
    types = data.get("types", {})
    parents: dict[str, str | None] = {n: spec.get("is_a") for n, spec in types.items()}
    labels = {n: str(spec.get("label", n)) for n, spec in types.items()}
    wikidata: dict[str, str] = {}
    for name, spec in types.items():
        for qid in spec.get("wikidata", []):
            wikidata[str(qid)] = name
    primekg = {str(k): str(v) for k, v in data.get("primekg", {}).items()}
    for name, parent in parents.items():
        if parent is not None and parent not in parents:
            raise ConfigError(f"{origin}: type {name!r} is_a unknown type {parent!r}.")
    for name in parents:  # cycle check
        seen = {name}
        parent = parents[name]
        while parent is not None:
            if parent in seen:
                raise ConfigError(f"{origin}: the is_a chain of {name!r} has a cycle.")
            seen.add(parent)
            parent = parents[parent]
    for source, target in [*primekg.items(), *wikidata.items()]:
        if target not in parents:
            raise ConfigError(f"{origin}: {source!r} maps to unknown type {target!r}.")
    relations = data.get("relations", {})
    symmetric = relations.get("symmetric", [])
    if not isinstance(symmetric, list) or not all(isinstance(r, str) and r for r in symmetric):
        raise ConfigError(f"{origin}: relations.symmetric must be a list of relation names.")
    return TypeVocabulary(
        parents=parents,
        labels=labels,
        primekg=primekg,
        wikidata=wikidata,
        symmetric=frozenset(symmetric),
        prefixes=_prefixes(data.get("prefixes", {}), origin, parents),
    )


def _prefixes(table: object, origin: str, types: dict[str, str | None]) -> dict[str, PrefixSpec]:
    """The ``[prefixes]`` table, checked: every spelling (a name or a synonym, ignoring case) and every
    namespace means one prefix, and a prefix's ``type`` is one of ``types``.

    Raises:
        ConfigError: naming the prefix and the field that is wrong.
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{origin}: [prefixes] must be a table of prefixes.")
    found: dict[str, PrefixSpec] = {}
    spelled: dict[str, str] = {}
    for name, spec in table.items():
        where = f"{origin}: prefixes.{name}"
        if not isinstance(spec, dict) or not isinstance(spec.get("iri"), str) or not spec["iri"]:
            raise ConfigError(f"{where} needs iri, the namespace its local ids are appended to.")
        unknown = set(spec) - {"iri", "synonyms", "iris", "pad", "upper", "type", "organism"}
        if unknown:
            raise ConfigError(
                f"{where} has unknown keys {sorted(unknown)} (iri, synonyms, iris, pad, upper, type, organism)."
            )
        kind = spec.get("type")
        if kind is not None and (not isinstance(kind, str) or kind not in types):
            raise ConfigError(f"{where}.type {kind!r} is not a type of the vocabulary.")
        synonyms, iris = spec.get("synonyms", []), spec.get("iris", [])
        for key, values in (("synonyms", synonyms), ("iris", iris)):
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                raise ConfigError(f"{where}.{key} must be a list of text.")
        pad, upper = spec.get("pad", 0), spec.get("upper", False)
        if not isinstance(pad, int) or isinstance(pad, bool) or not 0 <= pad <= 20:
            raise ConfigError(f"{where}.pad must be a whole number from 0 to 20.")
        if not isinstance(upper, bool):
            raise ConfigError(f"{where}.upper must be true or false.")
        for spelling in [name, *synonyms]:
            other = spelled.setdefault(spelling.casefold(), name)
            if other != name:
                raise ConfigError(f"{where}: {spelling!r} already names the prefix {other!r}.")
        organism = _organism(spec.get("organism"), where)
        found[name] = PrefixSpec(name, spec["iri"], tuple(synonyms), tuple(iris), pad, upper, kind, organism)
    return found


def _organism(spec: object, where: str) -> OrganismCode | None:
    """A prefix's ``organism`` table (``pattern``, ``human``, ``any``), checked.

    Raises:
        ConfigError: naming the prefix and the field that is wrong.
    """
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - {"pattern", "human", "any"}:
        raise ConfigError(f"{where}.organism must be a table of pattern, human and any.")
    pattern, human, anyone = spec.get("pattern"), spec.get("human"), spec.get("any", [])
    if not isinstance(human, str) or not human:
        raise ConfigError(f"{where}.organism.human must be the code of human in the ids.")
    if not isinstance(anyone, list) or not all(isinstance(code, str) and code for code in anyone):
        raise ConfigError(f"{where}.organism.any must be a list of codes.")
    if human.casefold() in {code.casefold() for code in anyone}:
        raise ConfigError(f"{where}.organism.any must not hold the human code {human!r}.")
    try:
        compiled = re.compile(pattern, re.IGNORECASE) if isinstance(pattern, str) else None
    except re.error as e:
        raise ConfigError(f"{where}.organism.pattern is not a regular expression ({e}).") from e
    if compiled is None or compiled.groups < 1:
        raise ConfigError(f"{where}.organism.pattern must be a regular expression with a group for the code.")
    return OrganismCode(compiled, human.casefold(), frozenset(code.casefold() for code in anyone))


@lru_cache(maxsize=1)
def default_vocabulary() -> TypeVocabulary:
    """The vocabulary shipped with metakg."""
    text = resources.files("metakg.schemas").joinpath("vocabulary.toml").read_text(encoding="utf-8")
    return parse_vocabulary(text)


def load_vocabulary(path: Path | None) -> TypeVocabulary:
    """The vocabulary at ``path``, or the shipped one when ``path`` is None.

    Raises:
        ConfigError: the file is missing or invalid.
    """
    if path is None:
        return default_vocabulary()
    if not path.is_file():
        raise ConfigError(f"type vocabulary file {path} does not exist.")
    return parse_vocabulary(path.read_text(encoding="utf-8"), origin=str(path))
