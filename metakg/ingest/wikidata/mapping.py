"""Selecting, checking and fetching the subset's entities, and mapping them into nodes and edges exactly as a
sync does (also for the fragments RoboData fetches)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import polars as pl

from metakg.ingest.wikidata.client import SparqlClient, _bound, _qid, batched
from metakg.ingest.wikidata.spec import (
    _PROLOGUE,
    IMPORTER,
    TYPE_PROPERTY,
    WD,
    WDT,
    SubsetSpec,
)
from metakg.schemas import sparql
from metakg.schemas.bundle import Bundle
from metakg.schemas.curie import normalise_curie
from metakg.schemas.tables import (
    NODE_SCHEMA,
    conform_edges,
    conform_nodes,
    empty_edges,
    empty_rejects,
    normalise_relation_expr,
)
from metakg.schemas.vocabulary import TypeVocabulary


# ---------------------------------------------------------------------------- selection and fetching
def _xref(prefix: str, value: str) -> str:
    """``prefix:value`` in its one form (:func:`normalise_curie`): ``doid`` with ``DOID:2377`` is ``doid:2377``."""
    return normalise_curie(f"{prefix}:{value}") or f"{prefix}:{value}"


def select_items(spec: SubsetSpec, client: SparqlClient, batch_size: int, page_size: int = 1000) -> list[str]:
    """The item ids of the subset, in a stable order (seeds, then hop by hop, then classes, then sparql)."""
    chosen: dict[str, None] = dict.fromkeys(spec.seeds)
    frontier = list(spec.seeds)
    for _ in range(spec.hops if spec.properties else 0):
        rows = batched(client, frontier, batch_size, lambda b: sparql.linked_items(b, spec.properties))
        _bound(client, rows, "o")
        frontier = [q for q in (_qid(r["o"]["value"]) for r in rows) if q and q not in chosen]
        chosen.update(dict.fromkeys(frontier))
    for selection in spec.classes:
        offset = 0
        while offset < selection.limit:
            size = min(page_size, selection.limit - offset)
            rows = client.select(sparql.class_members(selection.class_, selection.property, size, offset))
            _bound(client, rows, "item")
            chosen.update(dict.fromkeys(q for q in (_qid(r["item"]["value"]) for r in rows) if q))
            if len(rows) < size:
                break
            offset += size
    if spec.sparql:  # the spec's own query may leave ?item unbound in a row (OPTIONAL, UNION): such rows are skipped
        rows = client.select(_PROLOGUE.sub("", spec.sparql))
        chosen.update(dict.fromkeys(q for q in (_qid(r.get("item", {}).get("value", "")) for r in rows) if q))
    return list(chosen)


@dataclass(frozen=True)
class Revision:
    """What the endpoint says of an entity before fetching it."""

    exists: bool
    version: str | None = None
    modified: str | None = None
    redirect: str | None = None

    @property
    def key(self) -> list[str | None]:
        """What a change is detected on."""
        return [self.version, self.modified]


def check_revisions(client: SparqlClient, ids: Sequence[str], batch_size: int) -> dict[str, Revision]:
    """Revision, modification time, redirect target and existence of each id (one query per batch)."""
    rows = batched(client, ids, batch_size, sparql.revisions)
    _bound(client, rows, "item", "exists")  # ?rev, ?mod and ?same are OPTIONAL: absent when unbound
    found: dict[str, Revision] = {}
    for row in rows:
        qid = _qid(row["item"]["value"])
        if qid is None:
            continue
        exists = row.get("exists", {}).get("value") in ("1", "true")
        found[qid] = Revision(
            exists=exists,
            version=row.get("rev", {}).get("value"),
            modified=row.get("mod", {}).get("value"),
            redirect=_qid(row.get("same", {}).get("value", "")),
        )
    return {i: found.get(i, Revision(exists=False)) for i in ids}


def _literal(binding: dict[str, str]) -> dict[str, str]:
    value = {"value": binding["value"]}
    if "datatype" in binding:
        value["datatype"] = binding["datatype"]
    if "xml:lang" in binding:
        value["lang"] = binding["xml:lang"]
    return value


def fetch_entities(
    client: SparqlClient, ids: Sequence[str], spec: SubsetSpec, batch_size: int, now: str
) -> dict[str, dict[str, Any]]:
    """Labels, descriptions and aliases in the spec's languages and the statements of the selected,
    type and external-id properties, for each id."""
    records: dict[str, dict[str, Any]] = {
        i: {"labels": {}, "descriptions": {}, "aliases": {}, "statements": {}, "retrieved_at": now} for i in ids
    }
    terms = batched(client, ids, batch_size, lambda b: sparql.terms(b, spec.languages))
    _bound(client, terms, "item", "p", "o")
    kinds = {
        "http://www.w3.org/2000/01/rdf-schema#label": "labels",
        "http://schema.org/description": "descriptions",
        "http://www.w3.org/2004/02/skos/core#altLabel": "aliases",
    }
    for row in terms:
        qid = _qid(row["item"]["value"])
        kind = kinds.get(row["p"]["value"])
        if qid not in records or kind is None:
            continue
        lang = row["o"].get("xml:lang", "")
        if kind == "aliases":
            records[qid]["aliases"].setdefault(lang, []).append(row["o"]["value"])
        else:
            records[qid][kind].setdefault(lang, row["o"]["value"])
    props = sorted({*spec.properties, TYPE_PROPERTY, *spec.xref_properties()})
    statements = batched(client, ids, batch_size, lambda b: sparql.statements(b, props))
    _bound(client, statements, "item", "p", "o")
    for row in statements:
        qid = _qid(row["item"]["value"])
        pid = row["p"]["value"][len(WDT) :] if row["p"]["value"].startswith(WDT) else None
        if qid not in records or pid is None:
            continue
        obj = row["o"]
        value: Any = {"item": _qid(obj["value"])} if obj["type"] == "uri" and _qid(obj["value"]) else _literal(obj)
        bucket = records[qid]["statements"].setdefault(pid, [])
        if value not in bucket:
            bucket.append(value)
    return records


def property_labels(client: SparqlClient, pids: Sequence[str], language: str) -> dict[str, str]:
    """English (or the first configured language's) labels of properties; ids without one map to themselves."""
    if not pids:
        return {}
    rows = client.select(sparql.property_labels(pids, language))
    _bound(client, rows, "p", "label")
    labels = {pid: pid for pid in pids}
    for row in rows:
        uri = row["p"]["value"]
        if uri.startswith(WD):
            labels[uri[len(WD) :]] = row["label"]["value"]
    return labels


def _timestamp(value: str | None) -> datetime | None:
    """An ``xsd:dateTime`` from the endpoint (``2024-05-01T12:00:00Z``) as a UTC datetime; None when absent
    or unreadable."""
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None
    return stamp.astimezone(UTC) if stamp and stamp.tzinfo else (stamp.replace(tzinfo=UTC) if stamp else None)


def _first(values: dict[str, Any], languages: Sequence[str]) -> Any:
    for lang in languages:
        if lang in values:
            return values[lang]
    return None


def build_bundle(spec: SubsetSpec, state: dict[str, Any], vocabulary: TypeVocabulary, run_id: str) -> Bundle:
    """Nodes and edges of the synced subset: item-valued statements between subset entities become edges,
    literals become node ``properties``, external ids become ``xrefs``, the P31 class gives the type."""
    entities: dict[str, dict[str, Any]] = state["entities"]
    labels: dict[str, str] = state.get("property_labels", {})
    xref_props = spec.xref_properties()
    selected = set(spec.properties)
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for qid, record in entities.items():
        statements: dict[str, list[Any]] = record["statements"]
        classes = [v["item"] for v in statements.get(TYPE_PROPERTY, []) if "item" in v]
        node_type = next((vocabulary.wikidata[c] for c in classes if c in vocabulary.wikidata), "entity")
        aliases = [a for lang in spec.languages for a in record["aliases"].get(lang, [])]
        xrefs = [  # in their one form: Wikidata writes some with their prefix (P699: DOID:2377), some without
            _xref(xref_props[pid], v["value"]) for pid in xref_props for v in statements.get(pid, []) if "value" in v
        ]
        properties = {
            f"{labels.get(pid, pid)} ({pid})": [v["value"] for v in values if "value" in v]
            for pid, values in sorted(statements.items())
            if pid in selected and any("value" in v for v in values)
        }
        revision = record.get("revision", [None, None])
        modified = _timestamp(revision[1])
        nodes.append(
            {
                "id": f"wd:{qid}",
                "name": _first(record["labels"], spec.languages) or qid,
                "type": node_type,
                "source": IMPORTER,
                "description": _first(record["descriptions"], spec.languages),
                "aliases": aliases,
                "xrefs": xrefs,
                "properties": json.dumps(properties, ensure_ascii=False) if properties else None,
                "revision": revision[0],
                "retrieved_at": datetime.fromisoformat(record["retrieved_at"]),
                "valid_from": modified,
            }
        )
        for pid in spec.properties:
            for value in statements.get(pid, []):
                target = value.get("item")
                if target is None or target not in entities:
                    continue
                edges.append(
                    {
                        "src": f"wd:{qid}",
                        "dst": f"wd:{target}",
                        "relation": labels.get(pid, pid),
                        "pid": pid,
                        # the statement that states it (item and property), not the item's revision: an edit of
                        # the item elsewhere (its label) leaves its edges as they were
                        "record_ids": [f"wd:{qid}#{pid}"],
                        "created_at": datetime.fromisoformat(record["retrieved_at"]),
                        "valid_from": modified,
                    }
                )
    node_frame = conform_nodes(pl.DataFrame(nodes, schema=dict(NODE_SCHEMA)))
    if edges:
        frame = pl.DataFrame(edges, infer_schema_length=None).with_columns(
            normalise_relation_expr(pl.col("relation")).alias("rel"),
            (pl.col("relation") + pl.lit(" (") + pl.col("pid") + pl.lit(")")).alias("display"),
            pl.lit(IMPORTER).alias("source"),
            pl.lit(1.0).alias("confidence"),
            pl.lit(1, dtype=pl.Int64).alias("count"),
            pl.lit(IMPORTER).alias("importer"),
            pl.lit(run_id).alias("run_id"),
        )
        frame = frame.with_columns(
            pl.when(pl.col("rel") == "").then(pl.col("pid").str.to_lowercase()).otherwise("rel").alias("rel")
        )
        frame = frame.unique(["src", "rel", "dst"], keep="first", maintain_order=True)
        edge_frame = conform_edges(frame.drop("relation", "pid"))  # computes the edge ids
    else:
        edge_frame = empty_edges()
    return Bundle(nodes=node_frame, edges=edge_frame, rejects=empty_rejects(), manifest={})


def fetch_fragment(
    client: SparqlClient,
    ids: Sequence[str],
    properties: Sequence[str],
    vocabulary: TypeVocabulary,
    *,
    languages: Sequence[str] = ("en",),
    run_id: str = "fragment",
    batch_size: int = 50,
) -> Bundle:
    """The nodes of ``ids`` and their ``properties`` statements among them, mapped exactly as a sync maps
    them (the same ids, types, xrefs, properties, revision and provenance), so a graph grown from fragments
    merges cleanly with a synced bundle. Redirected ids become their targets; missing ones are left out."""
    spec = SubsetSpec(name="fragment", seeds=list(dict.fromkeys(ids)), properties=list(properties),
                      languages=list(languages))  # fmt: skip
    now = datetime.now(UTC).isoformat(timespec="seconds")
    revisions = check_revisions(client, spec.seeds, batch_size)
    current = list(dict.fromkeys(r.redirect or q for q, r in revisions.items() if r.exists or r.redirect))
    missing = [q for q in current if q not in revisions]
    revisions.update(check_revisions(client, missing, batch_size) if missing else {})
    entities = fetch_entities(client, current, spec, batch_size, now) if current else {}
    for qid, record in entities.items():
        record["revision"] = revisions[qid].key
    labels = property_labels(client, sorted(set(spec.properties)), spec.languages[0])
    return build_bundle(spec, {"entities": entities, "property_labels": labels}, vocabulary, run_id)


@dataclass
class WikidataFragments:
    """The ``EntityFetcher`` of the QA engine over a SPARQL client (see :func:`fetch_fragment`)."""

    client: SparqlClient
    vocabulary: TypeVocabulary
    languages: Sequence[str] = ("en",)
    run_id: str = "fragment"

    @property
    def endpoint(self) -> str:
        """The endpoint URL."""
        return self.client.endpoint

    @property
    def queries(self) -> int:
        """Queries sent so far (retries included)."""
        return self.client.queries

    def select(self, query: str, *, timeout_s: float | None = None) -> list[dict[str, dict[str, str]]]:
        """A read-only SELECT through the client (its retries, timeout and query budget)."""
        return self.client.select(query, timeout_s=timeout_s)

    def search_entities(self, text: str, k: int) -> list[dict[str, str | None]] | None:
        """Items by label through the client's search API, or None when it has none (search labels over
        SPARQL then)."""
        if not self.client.search_api:
            return None
        return self.client.search_labels(text, language=self.languages[0], k=k)

    def fetch(self, ids: Sequence[str], properties: Sequence[str]) -> Bundle:
        """Nodes and statements as a sync maps them."""
        return fetch_fragment(self.client, ids, properties, self.vocabulary, languages=self.languages,
                              run_id=self.run_id)  # fmt: skip
