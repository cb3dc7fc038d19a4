"""Wikidata: incremental sync of a subset into a bundle, and the SPARQL source the QA engine may explore."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metakg.api._shared import JsonResult, Progress, cache_folder, quiet
from metakg.api.bundles import Earlier, RecordedDiff, earlier_version, recorded_diff, write_validated
from metakg.config import Settings
from metakg.errors import BundleError, UsageError
from metakg.ingest import wikidata
from metakg.redact import check_url, mask_url
from metakg.schemas.bundle import MANIFEST_FILE, source_entry
from metakg.schemas.bundle_dir import writes_bundle
from metakg.schemas.locks import exclusive
from metakg.schemas.vocabulary import default_vocabulary


def sparql_client(settings: Settings, endpoint: str | None = None) -> wikidata.SparqlClient:
    """A SPARQL client for ``endpoint`` (default: ``wikidata.endpoint``) with the configured agent, timeout,
    retries, query budget and search API (``wikidata.search_api``, resolved against the endpoint); it sends
    nothing until asked. It is also the QA engine's knowledge source."""
    conf = settings.wikidata if endpoint is None else settings.wikidata.model_copy(update={"endpoint": endpoint})
    return wikidata.SparqlClient(
        endpoint or conf.endpoint,
        conf.user_agent,
        timeout_s=conf.timeout_s,
        max_retries=conf.max_retries,
        backoff_s=conf.backoff_s,
        max_queries=conf.max_queries,
        connect_retries=conf.connect_retries,
        search_api=conf.search_api_url(),
    )


@dataclass(frozen=True, kw_only=True)
class WikidataSync(JsonResult):
    """What a sync did: the ``queries`` sent and ``retries``, the entities fetched, ``added``, ``changed``,
    ``removed`` (and their ids) and ``redirected``; the bundle's ``nodes`` and ``edges``; the ``endpoint``,
    the ``state`` file, the run, the ``bundle`` and whether its validation passed; and, when it replaced a
    version, the ``diff`` recorded against it."""

    queries: int
    retries: int
    entities_fetched: int
    added: int
    changed: int
    removed: int
    redirected: int
    nodes: int
    edges: int
    added_ids: list[str]
    changed_ids: list[str]
    removed_ids: list[str]
    endpoint: str
    state: Path
    run_id: str
    bundle: Path
    validation_ok: bool
    diff: RecordedDiff | None = None

    omit_none = ("diff",)


@writes_bundle("out")
def sync_wikidata(
    spec_path: Path,
    out: Path,
    settings: Settings,
    *,
    endpoint: str | None = None,
    state_path: Path | None = None,
    history: bool | None = None,
    allow_removals: bool = False,
    progress: Progress | None = None,
) -> WikidataSync:
    """Sync the Wikidata subset of ``spec_path`` into a validated bundle at ``out``, incrementally.
    ``history``: keep the versions entities had (default: when the bundle already keeps them).

    A sync that would remove a seed, or more than ``wikidata.max_removed_share`` of the entities the subset
    held, stops before writing anything (an endpoint answering empty results looks exactly like that), unless
    ``allow_removals``; so does a first sync that finds none of its seeds.

    The state file (default ``<cache_dir>/wikidata/<name>-<endpoint hash>.json``) remembers each entity's
    revision and content; the bundle, then the state, are written only when the sync succeeded.

    Raises:
        InputDataError: the spec or the state file is unreadable.
        SyncError: the endpoint failed after retries, answered malformed data, or the query budget ran out;
            or the sync would remove seeds or too many entities.
        BundleError: ``out`` cannot be written.
    """
    say = progress or quiet
    spec = wikidata.load_spec(spec_path)
    url = endpoint or settings.wikidata.endpoint
    try:
        check_url(url, "--endpoint")
    except ValueError as e:
        raise UsageError(f"{e}.") from None
    if state_path is None:
        digest = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:10]  # one state per endpoint however written
        state_path = cache_folder(settings, "wikidata") / f"{spec.name}-{digest}.json"
    client = sparql_client(settings, url)
    with exclusive(state_path, "the Wikidata state file", directory=False):
        return _sync(spec, spec_path, out, settings, client, url, state_path, say, progress, history, allow_removals)


def _sync(
    spec: wikidata.SubsetSpec,
    spec_path: Path,
    out: Path,
    settings: Settings,
    client: wikidata.SparqlClient,
    url: str,
    state_path: Path,
    say: Progress,
    progress: Progress | None,
    history: bool | None,
    allow_removals: bool = False,
) -> WikidataSync:
    """The sync itself, under the locks of the bundle and the state file."""
    state = wikidata.read_state(state_path)
    new_state, report = wikidata.sync_state(
        spec, state, client, batch_size=settings.wikidata.batch_size, progress=progress
    )
    previous = _previous_version(out)
    if not allow_removals:
        check_removals(spec, state, new_state, report, settings.wikidata.max_removed_share, url)
    run_id = uuid.uuid4().hex
    bundle = wikidata.build_bundle(spec, new_state, default_vocabulary(), run_id)
    if previous is not None and not allow_removals:
        check_replaced(spec, previous, bundle.nodes["id"].to_list(), settings.wikidata.max_removed_share, url, out)
    report.nodes, report.edges = bundle.nodes.height, bundle.edges.height
    figures = {**report.as_dict(), "endpoint": url, "state": str(state_path), "run_id": run_id}
    bundle.manifest = {
        "sources": [
            source_entry(
                f"wikidata:{spec.name}",
                wikidata.IMPORTER,
                run_id,
                input=str(spec_path),
                **{k: v for k, v in figures.items() if not k.endswith("_ids") and k != "run_id"},
            )
        ]
    }
    validation = write_validated(out, bundle, settings, previous=previous, history=history, progress=say)
    wikidata.write_state(state_path, new_state)
    return WikidataSync(
        **figures,
        bundle=out,
        validation_ok=validation.ok,
        diff=recorded_diff(out) if previous is not None else None,
    )


def check_removals(
    spec: wikidata.SubsetSpec,
    old: dict[str, Any],
    new: dict[str, Any],
    report: wikidata.SyncReport,
    max_share: float,
    url: str,
) -> None:
    """Stop a sync whose removals look like a failing endpoint rather than edits to Wikidata.

    Raises:
        SyncError: a seed would be removed, more than ``max_share`` of the entities held would be, or a first
            sync of a subset with seeds found none of them; the message gives the figures and the way round.
    """
    held = len(old.get("entities", {}))
    removed = report.removed_ids
    seeds = [q for q in removed if q in set(spec.seeds)]
    way_round = (
        f"Check the endpoint ({mask_url(url)}); if Wikidata really changed so, run again with --allow-removals "
        "(or raise wikidata.max_removed_share). Nothing was written."
    )
    if seeds:
        raise wikidata.SyncError(
            f"the sync would remove {len(seeds)} seed(s) of the subset ({', '.join(seeds[:5])}): the endpoint says "
            f"they are gone. {way_round}"
        )
    if held and len(removed) > max_share * held:
        raise wikidata.SyncError(
            f"the sync would remove {len(removed)} of the {held} entities the subset holds "
            f"({len(removed) / held:.0%}, more than wikidata.max_removed_share {max_share:.0%}). {way_round}"
        )
    if not held and spec.seeds and not new.get("entities"):
        raise wikidata.SyncError(
            f"the endpoint returned none of the subset's {len(spec.seeds)} seeds, so the bundle would be empty. "
            f"{way_round}"
        )


def check_replaced(
    spec: wikidata.SubsetSpec, previous: Earlier, new_ids: list[str], max_share: float, url: str, out: Path
) -> None:
    """Stop a sync that would drop from the bundle it replaces a seed, or more than ``max_share`` of its nodes.

    The state file guards a sync against its own last run; this guards the bundle itself, whatever the state
    file says: a new cache folder, or the endpoint's URL written otherwise (a trailing slash), starts from
    an empty state, and a bundle of other sources given as ``-o`` would be replaced by the subset alone.

    Raises:
        SyncError: the message gives the figures and the way round.
    """
    held = previous.bundle.nodes["id"].to_list()
    kept = set(new_ids)
    removed = [i for i in held if i not in kept]
    way_round = (
        f"Check the endpoint ({mask_url(url)}) and -o; if that is what you want, run again with --allow-removals "
        "(or raise wikidata.max_removed_share). Nothing was written."
    )
    seeds = [f"wd:{q}" for q in spec.seeds if f"wd:{q}" in set(removed)]
    if seeds:
        raise wikidata.SyncError(
            f"the sync would drop {len(seeds)} seed(s) of the subset ({', '.join(seeds[:5])}) from the bundle at "
            f"{out}. {way_round}"
        )
    if held and len(removed) > max_share * len(held):
        others = sorted(
            {s.get("name", "?") for s in previous.bundle.manifest.get("sources", [])} - {f"wikidata:{spec.name}"}
        )
        holds = f" (it holds {', '.join(map(str, others))})" if others else ""
        raise wikidata.SyncError(
            f"the sync would drop {len(removed)} of the {len(held)} nodes of the bundle at {out}{holds} "
            f"({len(removed) / len(held):.0%}, more than wikidata.max_removed_share {max_share:.0%}). {way_round}"
        )


def _previous_version(out: Path) -> Earlier | None:
    """The bundle a sync is about to replace, when there is a readable one (for the diff it records)."""
    if not (out / MANIFEST_FILE).exists():
        return None
    try:
        return earlier_version(out)
    except BundleError:
        return None  # damaged or changed by hand: the new version replaces it without a diff
