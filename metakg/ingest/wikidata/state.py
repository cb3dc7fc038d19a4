"""The sync's state file (each entity's revision, modification time and fetched content) and one incremental
sync of a subset over it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from metakg.errors import InputDataError, OutputError
from metakg.ingest.wikidata.client import SparqlClient
from metakg.ingest.wikidata.mapping import (
    check_revisions,
    fetch_entities,
    property_labels,
    select_items,
)
from metakg.ingest.wikidata.spec import SubsetSpec
from metakg.progress import Progress


# ---------------------------------------------------------------------------- state and sync
@dataclass
class SyncReport:
    """What a sync did; the counts are derived from the id lists."""

    queries: int = 0
    retries: int = 0
    redirected: int = 0
    nodes: int = 0
    edges: int = 0
    added_ids: list[str] = field(default_factory=list)
    changed_ids: list[str] = field(default_factory=list)
    removed_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary."""
        return {
            "queries": self.queries,
            "retries": self.retries,
            "entities_fetched": len(self.added_ids) + len(self.changed_ids),
            "added": len(self.added_ids),
            "changed": len(self.changed_ids),
            "removed": len(self.removed_ids),
            "redirected": self.redirected,
            "nodes": self.nodes,
            "edges": self.edges,
            "added_ids": self.added_ids,
            "changed_ids": self.changed_ids,
            "removed_ids": self.removed_ids,
        }


def read_state(path: Path) -> dict[str, Any]:
    """The state file (empty when missing). Raises InputDataError when it is unreadable."""
    if not path.exists():
        return {"entities": {}, "property_labels": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputDataError(f"the sync state file {path} is unreadable ({e}); delete it to sync from scratch.") from e
    if not isinstance(state, dict) or not isinstance(state.get("entities"), dict):
        raise InputDataError(f"the sync state file {path} has no entities map; delete it to sync from scratch.")
    state.setdefault("property_labels", {})
    return state


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write the state atomically (a temporary file renamed over the old one).

    Raises:
        OutputError: it cannot be written (a full or read-only disk); the old state is left whole and the
            temporary file removed.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(state, ensure_ascii=False, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(
            f"cannot write the sync state file {path} ({e.strerror or e}); the bundle is written, but the state "
            "file is the old one, so the next sync fetches the changed entities again. Free space (or give "
            "--state a writable place) and run the sync again."
        ) from e


def sync_state(
    spec: SubsetSpec,
    state: dict[str, Any],
    client: SparqlClient,
    *,
    batch_size: int = 50,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], SyncReport]:
    """Bring ``state`` up to date with the endpoint; returns the new state (the old one is not changed)."""
    say = progress or (lambda _s: None)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    old: dict[str, Any] = state["entities"]
    say("selecting the subset")
    selected = select_items(spec, client, batch_size)
    say(f"checking revisions of {len(set(selected) | set(old))} entities")
    revisions = check_revisions(client, list(dict.fromkeys([*selected, *old])), batch_size)
    report = SyncReport()
    current: dict[str, None] = {}
    for qid in selected:
        rev = revisions[qid]
        if rev.redirect and rev.redirect != qid:
            report.redirected += 1
            target = rev.redirect
            if target not in revisions:
                revisions.update(check_revisions(client, [target], batch_size))
            current[target] = None
        elif rev.exists:
            current[qid] = None
    to_fetch = [q for q in current if q not in old or old[q].get("revision") != revisions[q].key]
    report.added_ids = [q for q in to_fetch if q not in old]
    report.changed_ids = [q for q in to_fetch if q in old]
    report.removed_ids = [q for q in old if q not in current]
    fetched: dict[str, dict[str, Any]] = {}
    if to_fetch:
        say(f"fetching {len(to_fetch)} entities")
        fetched = fetch_entities(client, to_fetch, spec, batch_size, now)
        for qid, record in fetched.items():
            record["revision"] = revisions[qid].key
    labels = dict(state.get("property_labels", {}))
    wanted = sorted(set(spec.properties) - set(labels))
    if wanted:
        labels.update(property_labels(client, wanted, spec.languages[0]))
    report.queries, report.retries = client.queries, client.retries
    ordered = {q: fetched[q] if q in fetched else old[q] for q in current}
    return {"spec": spec.model_dump(by_alias=True), "entities": ordered, "property_labels": labels}, report
