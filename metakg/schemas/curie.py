"""CURIE node ids: a registry of prefixes, syntax checks, expansion to IRIs, one normaliser for the ways
sources write the same id, dataset-scoped ids.

Node ids are CURIEs from the authority that owns the entity (``drugbank:DB00945``, ``wd:Q42``).
LLM-extracted and other dataset-local concepts get ``kg:<dataset>/<slug>``. The prefixes, their synonyms
and their namespaces are the vocabulary's ``[prefixes]`` table (``vocabulary.toml``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from types import MappingProxyType
from urllib.parse import quote

import polars as pl

from metakg.errors import UsageError
from metakg.schemas.vocabulary import PrefixSpec, default_vocabulary

#: prefix -> IRI namespace: the vocabulary's [prefixes]. Extend with :func:`register_prefix`.
_PREFIXES: dict[str, str] = {name: spec.iri for name, spec in default_vocabulary().prefixes.items()}
PREFIXES = MappingProxyType(_PREFIXES)

#: A CURIE: a registered-looking prefix, a colon, a local part without whitespace or control characters.
CURIE_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]*:[^\s\x00-\x1f\x7f]+$"
#: A node id, as validation accepts it: a CURIE whose local part also holds none of the characters an IRI may
#: not hold raw (``"<>{}|\^```: ``ncbigene:97"9"6`` is no id; metakg's own slugs escape them)
NODE_ID_PATTERN = r'^[A-Za-z][A-Za-z0-9_.-]*:[^\s\x00-\x1f\x7f"<>{}|\\^`]+$'
_CURIE_RE = re.compile(CURIE_PATTERN)
_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def is_prefix(text: str) -> bool:
    """Whether ``text`` can be a CURIE prefix (a letter, then letters, digits, ``_``, ``.``, ``-``)."""
    return bool(_PREFIX_RE.match(text))


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
    _table.cache_clear()


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


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, PrefixSpec], list[tuple[str, PrefixSpec]]]:
    """Every spelling of a prefix (ignoring case) and every namespace (longest first), to its prefix."""
    specs = dict(default_vocabulary().prefixes)
    for name, namespace in _PREFIXES.items():  # registered ones, and the vocabulary's own
        if name not in specs or specs[name].iri != namespace:
            specs[name] = PrefixSpec(name, namespace)
    spellings = {spelling.casefold(): spec for spec in specs.values() for spelling in (spec.name, *spec.synonyms)}
    namespaces = [(iri, spec) for spec in specs.values() for iri in (spec.iri, *spec.iris)]
    return spellings, sorted(namespaces, key=lambda pair: -len(pair[0]))


def prefix_spec(spelling: str) -> PrefixSpec | None:
    """The prefix spelt ``spelling`` (its name or a synonym, ignoring case; blanks as written, dropped or as
    `_`), or None."""
    spellings, _ = _table()
    for form in (spelling, spelling.replace(" ", ""), spelling.replace(" ", "_")):
        if form.casefold() in spellings:
            return spellings[form.casefold()]
    return None


_IRI_FORMS = [  # generic resolvers: an OBO PURL (PREFIX_local), identifiers.org and bioregistry (prefix:local)
    re.compile(r"^https?://purl\.obolibrary\.org/obo/([A-Za-z][A-Za-z0-9]*)_(.+)$"),
    re.compile(r"^https?://(?:www\.)?(?:identifiers\.org|bioregistry\.io)/([A-Za-z][\w.]*)[:/](.+)$"),
]
_WRITTEN = re.compile(r"^([A-Za-z][\w.\- ]*?)\s*:\s*(\S.*)$")
_OBO_STYLE = re.compile(r"^([A-Za-z]+)_(\d+)$")  # MONDO_0007893, as some files write OBO ids


def normalise_curie(value: str, default_prefix: str | None = None) -> str | None:
    """The one form of an identifier, whichever way a source wrote it, or None when it is not one.

    ``MONDO:4975``, ``mondo:MONDO:0004975``, ``MONDO_0004975`` and ``http://purl.obolibrary.org/obo/MONDO_0004975``
    are all ``mondo:0004975``; ``http://www.wikidata.org/entity/Q42`` and ``Wikidata:q42`` are ``wd:Q42``;
    ``MESH:d000544`` is ``mesh:D000544``. The prefix's case and its synonyms (the vocabulary's ``[prefixes]``)
    do not count; a prefix repeated in the local id is dropped; numeric ids are zero-padded and letters put in
    upper case where the prefix says so. A prefix the vocabulary does not know is put in lower case.
    ``default_prefix`` is the prefix of a bare local id (a column of MeSH ids: ``D000544``).
    """
    text = unicodedata.normalize("NFKC", value).strip()
    if not text or any(ch.isspace() for ch in text if ch not in " "):
        return None
    spec: PrefixSpec | None = None
    prefix, local = "", ""
    if re.match(r"^https?://", text, re.IGNORECASE):
        _, namespaces = _table()
        swapped = re.sub(r"^https?://", lambda m: "https://" if m.group(0).lower() == "http://" else "http://", text)
        for iri, candidate in namespaces:
            for form in (text, swapped):
                if form.startswith(iri) and len(form) > len(iri):
                    spec, local = candidate, form[len(iri) :]
                    break
            if spec is not None:
                break
        if spec is None:
            for pattern in _IRI_FORMS:
                if (found := pattern.match(text)) and (spec := prefix_spec(found.group(1))) is not None:
                    local = found.group(2)
                    break
        if spec is None:
            return None
    elif (found := _WRITTEN.match(text)) is not None:
        prefix, local = found.group(1), found.group(2)
        spec = prefix_spec(prefix)
        if spec is None:
            if " " in prefix or not _PREFIX_RE.match(prefix):
                return None
            return f"{prefix.lower()}:{local}" if is_curie(f"{prefix.lower()}:{local}") else None
    elif (found := _OBO_STYLE.match(text)) is not None and (spec := prefix_spec(found.group(1))) is not None:
        local = found.group(2)
    elif default_prefix is not None and (spec := prefix_spec(default_prefix)) is not None:
        local = text
    else:
        return None
    return _written(spec, local)


def _written(spec: PrefixSpec, local: str) -> str | None:
    local = local.strip()
    for spelling in (spec.name, *spec.synonyms):  # mondo:MONDO:0004975, doid:DOID_2377
        for sep in (":", "_"):
            if local.casefold().startswith(spelling.casefold() + sep) and len(local) > len(spelling) + 1:
                local = local[len(spelling) + 1 :]
                break
    if spec.upper:
        local = local.upper()
    if spec.pad and local.isdigit():
        local = local.zfill(spec.pad)
    curie = f"{spec.name}:{local}"
    return curie if is_curie(curie) else None


def normalise_curies(values: Iterable[str], default_prefix: str | None = None) -> dict[str, str | None]:
    """:func:`normalise_curie` of each distinct value, as a mapping from the value."""
    return {value: normalise_curie(value, default_prefix) for value in set(values)}


def normalise_id_lists(column: pl.Series) -> pl.Series:
    """A column of id lists (``xrefs``) with every id in its one form (:func:`normalise_curie`), each once and
    in its first place; an entry that is no identifier is kept as it was."""
    ids = column.explode().drop_nulls().unique().to_list()
    mapping = {value: normalise_curie(value) or value for value in ids}
    return column.map_elements(
        lambda items: list(dict.fromkeys(mapping.get(v, v) for v in items)) if items is not None else None,
        return_dtype=pl.List(pl.String),
    )


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
