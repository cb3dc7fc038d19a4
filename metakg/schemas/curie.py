"""CURIE node ids: a registry of prefixes, syntax checks, expansion to IRIs, dataset-scoped ids.

Node ids are CURIEs from the authority that owns the entity (``drugbank:DB00945``, ``wd:Q42``).
LLM-extracted and other dataset-local concepts get ``kg:<dataset>/<slug>``.
"""

from __future__ import annotations

import re
import unicodedata
from types import MappingProxyType
from urllib.parse import quote

import polars as pl

from metakg.errors import UsageError

#: prefix -> IRI namespace. Extend with :func:`register_prefix`.
_PREFIXES: dict[str, str] = {
    "kg": "https://w3id.org/metakg/kg/",
    "wd": "http://www.wikidata.org/entity/",
    "drugbank": "https://go.drugbank.com/drugs/",
    "ncbigene": "https://identifiers.org/ncbigene:",
    "mondo": "http://purl.obolibrary.org/obo/MONDO_",
    "hp": "http://purl.obolibrary.org/obo/HP_",
    "uberon": "http://purl.obolibrary.org/obo/UBERON_",
    "go": "http://purl.obolibrary.org/obo/GO_",
    "reactome": "https://identifiers.org/reactome:",
    "mesh": "https://identifiers.org/mesh:",
    "ctd": "https://identifiers.org/ctd.chemical:",
    "umls": "https://identifiers.org/umls:",
    "chebi": "http://purl.obolibrary.org/obo/CHEBI_",
    "mondo.grouped": "https://w3id.org/metakg/primekg/mondo-grouped/",
    "primekg.index": "https://w3id.org/metakg/primekg/node-index/",
}
PREFIXES = MappingProxyType(_PREFIXES)

#: A CURIE: a registered-looking prefix, a colon, a local part without whitespace or control characters.
CURIE_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]*:[^\s\x00-\x1f\x7f]+$"
_CURIE_RE = re.compile(CURIE_PATTERN)
_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_DATASET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Characters that may not appear raw in an IRI (RFC 3987).
_IRI_FORBIDDEN = frozenset('"<>{}|\\^`')
# What slug() escapes: '%' first (so escapes added later are not escaped again), the IRI-forbidden
# characters, and those that would end the path of the IRI a CURIE expands to.
_SLUG_ESCAPED = ["%", *sorted(_IRI_FORBIDDEN), "#", "?", "/"]


def register_prefix(prefix: str, namespace: str) -> None:
    """Add or replace a CURIE prefix.

    Args:
        prefix: the short name, e.g. ``"orpha"``.
        namespace: the IRI the local part is appended to.

    Raises:
        UsageError: the prefix is not a valid CURIE prefix.
    """
    if not _PREFIX_RE.match(prefix):
        raise UsageError(f"{prefix!r} is not a valid CURIE prefix (letters, digits, '_', '.', '-').")
    _PREFIXES[prefix] = namespace


def is_curie(value: str) -> bool:
    """True when ``value`` has CURIE syntax (the prefix need not be registered)."""
    return bool(_CURIE_RE.match(value))


def split_curie(curie: str) -> tuple[str, str]:
    """Split ``prefix:local``.

    Raises:
        UsageError: ``curie`` is not a CURIE.
    """
    if not is_curie(curie):
        raise UsageError(f"{curie!r} is not a CURIE (expected prefix:local, e.g. drugbank:DB00945).")
    prefix, local = curie.split(":", 1)
    return prefix, local


def expand(curie: str) -> str:
    """The IRI of a CURIE; unregistered prefixes expand under the metakg namespace.

    Raises:
        UsageError: ``curie`` is not a CURIE.
    """
    prefix, local = split_curie(curie)
    namespace = _PREFIXES.get(prefix, f"https://w3id.org/metakg/prefix/{prefix}/")
    # '%' stays: a local part may already hold percent escapes (slug() writes them)
    return namespace + "".join(quote(ch, safe="") if ch in _IRI_FORBIDDEN else ch for ch in local)


def check_dataset_name(dataset: str) -> str:
    """Return ``dataset`` when it can scope ids, else raise.

    Raises:
        UsageError: the name has characters other than letters, digits, '_', '.', '-'.
    """
    if not _DATASET_RE.match(dataset):
        raise UsageError(
            f"dataset name {dataset!r} is not allowed: use letters, digits, '_', '.', '-' "
            "(it becomes part of every node id, kg:<dataset>/<concept>)."
        )
    return dataset


def slug(name: str) -> str:
    """The id-safe form of a concept name: NFKC, lower case, whitespace runs to ``_``, unsafe chars escaped."""
    text = unicodedata.normalize("NFKC", name).strip().lower()
    text = re.sub(r"\s+", "_", text)
    return "".join(quote(ch, safe="") if ch in _SLUG_ESCAPED else ch for ch in text)


def slug_expr(names: pl.Expr) -> pl.Expr:
    """Vectorised :func:`slug` over a column of already whitespace-normalised names."""
    expr = names.str.normalize("NFKC").str.strip_chars().str.to_lowercase()
    expr = expr.str.replace_all(r"\s+", "_")
    for ch in _SLUG_ESCAPED:
        expr = expr.str.replace_all(ch, quote(ch, safe=""), literal=True)
    return expr


def dataset_id_expr(dataset: str, names: pl.Expr) -> pl.Expr:
    """``kg:<dataset>/<slug(name)>`` for a column of names."""
    check_dataset_name(dataset)
    return pl.lit(f"kg:{dataset}/") + slug_expr(names)
