"""Wikidata subsets over SPARQL (the SPARQL 1.1 protocol over urllib), synced incrementally.

A subset spec (YAML) names seed items, the properties to follow and a hop count; and/or class-based
selections (instances of a class, optionally only those with a given property); and/or a raw SPARQL
SELECT returning ``?item``. Queries are portable (``rdfs:label``, ``schema:description``,
``skos:altLabel``, ``schema:version``, ``schema:dateModified``, ``owl:sameAs``; no WDQS label service),
batched with ``VALUES`` and paged, so they run on the Wikidata Query Service and on any endpoint holding
Wikidata-shaped RDF (tests use Virtuoso).

Incremental sync: a state file per subset keeps each entity's revision, modification time and fetched
content. A re-sync first checks revisions in batches, then fetches only entities that are new or changed,
drops entities that left the subset or were deleted, and follows redirects (``owl:sameAs``). The bundle
is rebuilt from the state, written atomically, and only then is the new state written (atomically).

The parts, by job: :mod:`.spec` (the subset spec), :mod:`.client` (the SPARQL client and the sync's errors),
:mod:`.mapping` (selection, revisions, fetching, and the mapping into nodes and edges) and :mod:`.state` (the
state file and the incremental sync). The queries themselves are written by :mod:`metakg.schemas.sparql`.
"""

from __future__ import annotations

from metakg.ingest.wikidata.client import QueryTimeout, SparqlClient, SyncError, batched
from metakg.ingest.wikidata.mapping import (
    Revision,
    WikidataFragments,
    build_bundle,
    check_revisions,
    fetch_entities,
    fetch_fragment,
    property_labels,
    select_items,
)
from metakg.ingest.wikidata.spec import (
    IMPORTER,
    PREFIXES,
    TYPE_PROPERTY,
    XREF_PROPERTIES,
    ClassSelection,
    SubsetSpec,
    load_spec,
)
from metakg.ingest.wikidata.state import SyncReport, read_state, sync_state, write_state

__all__ = [
    "IMPORTER",
    "PREFIXES",
    "TYPE_PROPERTY",
    "XREF_PROPERTIES",
    "ClassSelection",
    "QueryTimeout",
    "Revision",
    "SparqlClient",
    "SubsetSpec",
    "SyncError",
    "SyncReport",
    "WikidataFragments",
    "batched",
    "build_bundle",
    "check_revisions",
    "fetch_entities",
    "fetch_fragment",
    "load_spec",
    "property_labels",
    "read_state",
    "select_items",
    "sync_state",
    "write_state",
]
