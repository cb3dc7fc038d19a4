"""Extraction updates: which records of a dataset changed since an earlier run, and which replies carry over.

Every extraction stores, beside its bundle, one row per unit of work (:data:`UNIT_SCHEMA`): the unit and
record ids, the key of the request sent for it (SHA-256 of model, messages and parameters: the LLM cache
key) and the reply. A record's content hash is the hash of its units' request keys, so it changes when the
record's text changes, and also when the prompt, the chunking, the relation list, the model or the
sampling parameters change: whatever would make the model answer differently.

An update (``metakg extract ... --update BUNDLE``) asks the model only for the units whose request key the
earlier run has no reply for; every other unit takes its stored reply. The bundle is then built from all
replies exactly as a fresh run would build it, so triples supported only by removed or edited records
disappear, and an edge still stated by other records keeps fewer ``record_ids`` and a lower ``count``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from metakg.extractors.pipeline import Outcome, Unit
from metakg.llm.client import Completion

UNIT_SCHEMA: dict[str, pl.DataType] = {
    "unit_id": pl.String(),
    "record_id": pl.String(),
    "key": pl.String(),  # the request's cache key
    "model": pl.String(),
    "reply": pl.String(),  # null when the unit failed or was skipped
    "finish_reason": pl.String(),
    "provenance": pl.String(),  # a document's chunk: its file, page and section as cited
}


def units_table(outcomes: Sequence[Outcome], keys: Sequence[str]) -> pl.DataFrame:
    """The stored form of a run: one row per unit, in unit order (``keys[i]`` is unit ``i``'s request key)."""
    rows = [
        (
            o.unit.unit_id,
            o.unit.record_id,
            key,
            o.completion.model if o.completion else None,
            o.completion.text if o.status == "ok" and o.completion else None,
            o.completion.finish_reason if o.completion else None,
            o.unit.provenance,
        )
        for o, key in zip(outcomes, keys, strict=True)
    ]
    return pl.DataFrame(rows, schema=UNIT_SCHEMA, orient="row")


def record_hashes(record_ids: Sequence[str], keys: Sequence[str]) -> dict[str, str]:
    """Each record's content hash: SHA-256 of its units' request keys, in unit order."""
    parts: dict[str, list[str]] = {}
    for record_id, key in zip(record_ids, keys, strict=True):
        parts.setdefault(record_id, []).append(key)
    return {r: hashlib.sha256("\n".join(k).encode()).hexdigest() for r, k in parts.items()}


@dataclass(frozen=True)
class RecordChanges:
    """How the records of a dataset compare with those of the earlier run (record ids, sorted)."""

    unchanged: list[str]
    changed: list[str]
    added: list[str]
    removed: list[str]

    def counts(self) -> dict[str, int]:
        """The number of records in each class."""
        return {
            "unchanged": len(self.unchanged),
            "changed": len(self.changed),
            "added": len(self.added),
            "removed": len(self.removed),
        }


def compare_records(old: pl.DataFrame, units: Sequence[Unit], keys: Sequence[str]) -> RecordChanges:
    """Classify records by content. A record whose content hash the earlier run had is unchanged, under
    whatever id (line-numbered records move when lines before them go); otherwise it is changed when the
    earlier run had its id, else added. An earlier record is removed when its content is not among the new
    records and its id is not that of a changed record (a record moved there unchanged does not count)."""
    before = record_hashes(old["record_id"].to_list(), old["key"].to_list())
    now = record_hashes([u.record_id for u in units], keys)
    known = set(before.values())
    unchanged = sorted(r for r, h in now.items() if h in known)
    fresh = [r for r, h in now.items() if h not in known]
    changed = sorted(r for r in fresh if r in before)
    added = sorted(r for r in fresh if r not in before)
    current = set(now.values())
    removed = sorted(r for r, h in before.items() if h not in current and r not in changed)
    return RecordChanges(unchanged=unchanged, changed=changed, added=added, removed=removed)


def stored_outcomes(old: pl.DataFrame, units: Sequence[Unit], keys: Sequence[str]) -> dict[int, Outcome]:
    """The units (by position) whose request the earlier run has a reply for, each with that reply as its
    outcome (marked cached: it costs nothing)."""
    replies = {
        key: (reply, model, finish)
        for key, reply, model, finish in old.select("key", "reply", "model", "finish_reason").iter_rows()
        if reply is not None
    }
    found: dict[int, Outcome] = {}
    for i, (unit, key) in enumerate(zip(units, keys, strict=True)):
        if key in replies:
            reply, model, finish = replies[key]
            completion = Completion(text=reply, model=model or "", cached=True, finish_reason=finish)
            found[i] = Outcome(unit, "ok", completion)
    return found
