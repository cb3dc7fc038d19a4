"""Structured sources into bundles: triple files, PrimeKG (real or a synthetic PrimeKG-shaped file)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from metakg.api._shared import JsonResult, Progress, cache_folder, output_folder, quiet
from metakg.api.bundles import earlier_version, record_update, write_validated
from metakg.config import Settings
from metakg.errors import BundleChanged, BundleError, ConfigError, InputDataError, OutputError, UsageError
from metakg.fetch import download
from metakg.ingest.datasets import input_reject
from metakg.ingest.primekg import DATAVERSE_KG_URL, KG_MD5, PrimeKGReport, md5_of, read_primekg
from metakg.ingest.primekg_synthetic import SyntheticPrimeKG, generate
from metakg.ingest.triples import TripleIngestReport, read_triples
from metakg.llm.embedder import Embedder, embed_in_blocks
from metakg.schemas.bundle import (
    EMBEDDINGS_FILE,
    MANIFEST_FILE,
    Bundle,
    merge_bundles,
    read_embeddings,
    read_manifest,
    source_entry,
    write_bundle,
)
from metakg.schemas.bundle_dir import writing
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.history import HISTORY_KEY
from metakg.schemas.locks import require_folder
from metakg.schemas.tables import reject_reasons
from metakg.schemas.vocabulary import default_vocabulary


def ingest_triples(
    path: Path,
    dataset: str,
    out: Path,
    settings: Settings,
    *,
    source: str | None = None,
    node_type: str = "concept",
    confidence: float = 1.0,
    separator: str = "\t",
    previous: Path | None = None,
    history: bool | None = None,
    progress: Progress | None = None,
) -> TripleIngestReport:
    """Read a triple file (fields split by ``separator``, a tab by default) and write it as a bundle at ``out``.
    With ``previous`` (the bundle of the earlier version, ``out`` itself included), the diff against it is
    recorded in the new manifest (``diff``); ``history`` keeps the versions (default: when ``previous``
    keeps them; see :func:`~metakg.api.bundles.record_update`).

    Raises:
        InputDataError: the file cannot be read.
        UsageError: bad dataset name, unknown node type, confidence outside [0, 1], or a separator that is
            not one character.
        BundleError: ``out`` cannot be written.
    """
    if node_type not in default_vocabulary().names:
        raise UsageError(f"unknown node type {node_type!r}; choose one of {sorted(default_vocabulary().names)}.")
    if not 0.0 <= confidence <= 1.0:
        raise UsageError(f"confidence must be in [0, 1], got {confidence}.")
    if not path.is_file():
        raise InputDataError(f"triple file {path} does not exist or is not a file.")
    _keeps_its_history(out, previous, history)
    with writing(out):
        bundle, report = read_triples(
            path,
            dataset,
            source=source,
            node_type=node_type,
            confidence=confidence,
            max_field_chars=settings.ingest.max_field_chars,
            progress=progress,
            separator=separator,
        )
        report = dataclasses.replace(report, reject_reasons=tuple(reject_reasons(bundle.rejects)))
        _record_previous(bundle, previous, history, progress)
        (progress or quiet)("writing bundle")
        write_bundle(out, bundle)
    return report


def _keeps_its_history(out: Path, previous: Path | None, history: bool | None) -> None:
    """Refuse to replace a bundle that keeps history by one that would not: written without ``previous``, the
    new version would start from nothing and its retired versions would be gone.

    Raises:
        UsageError: ``out`` keeps history, ``previous`` is not given and ``history`` is not False.
    """
    if previous is not None or history is False or not (out / MANIFEST_FILE).is_file():
        return
    try:
        kept = read_manifest(out).get(HISTORY_KEY)
    except BundleError:
        return  # not a readable bundle: nothing of it to keep
    if kept:
        retired = int(kept.get("retired_nodes", 0)) + int(kept.get("retired_edges", 0))
        raise UsageError(
            f"{out} keeps history ({retired} retired versions): replacing it without the version it replaces "
            "would lose them. Give the bundle as the previous version to update it (its history goes on), or "
            "say that no history is to be kept to replace it.",
            cli_fix=f"add --previous {out} to update it, or --no-history to replace it and drop its history",
        )


def _record_previous(bundle: Bundle, previous: Path | None, history: bool | None, progress: Progress | None) -> None:
    if previous is not None:
        (progress or quiet)(f"comparing with {previous}")
    if previous is not None or history:
        record_update(bundle, earlier_version(previous) if previous is not None else None, history=history)


def primekg_download(settings: Settings, progress: Progress | None = None) -> Path:
    """PrimeKG's kg.csv from Harvard Dataverse, fetched once into the cache and checked against its MD5.

    Raises:
        InputDataError: the download fails (offline) or the file's MD5 is not the published one.
    """
    target = cache_folder(settings, "primekg") / "kg.csv"
    if not target.is_file():
        (progress or quiet)(f"downloading {DATAVERSE_KG_URL} (about 1 GB)")
        download(
            DATAVERSE_KG_URL,
            target,
            error=InputDataError,
            hint=f"Offline: download kg.csv from Harvard Dataverse (doi:10.7910/DVN/IXA7BM) and put it at {target}, "
            "or pass its path.",
            timeout=600,
        )
    (progress or quiet)("checking the MD5 of kg.csv")
    digest = md5_of(target)
    if digest != KG_MD5:
        raise InputDataError(f"{target} has MD5 {digest}, not PrimeKG's {KG_MD5}: delete it and download it again.")
    return target


def ingest_primekg(
    path: Path | None,
    out: Path,
    settings: Settings,
    *,
    download_missing: bool = False,
    previous: Path | None = None,
    history: bool | None = None,
    progress: Progress | None = None,
) -> PrimeKGReport:
    """Read PrimeKG (``kg.csv`` or ``nodes.csv`` + ``edges.csv``) and write it as a bundle at ``out``; with
    ``previous`` (the bundle of another release), the diff against it goes into the new manifest, and with
    ``history`` the versions.

    Raises:
        UsageError: neither a path nor ``download_missing``.
        InputDataError: the file is missing, malformed as a whole, or the download fails.
    """
    if path is None:
        if not download_missing:
            raise UsageError("give the path of kg.csv (or its folder), or --download to fetch it.")
        path = primekg_download(settings, progress)
    _keeps_its_history(out, previous, history)
    with writing(out):
        bundle, report = read_primekg(path, progress=progress, max_field_chars=settings.ingest.max_field_chars)
        if report.read == 0:
            raise InputDataError(f"{path} holds no rows (a header alone, or nothing): nothing to import.")
        report = dataclasses.replace(report, reject_reasons=tuple(reject_reasons(bundle.rejects)))
        _record_previous(bundle, previous, history, progress)
        (progress or quiet)("writing bundle")
        write_bundle(out, bundle)
    return report


def synthetic_primekg(out_dir: Path, settings: Settings, *, scale: float, seed: int = 0) -> SyntheticPrimeKG:
    """Write a SYNTHETIC PrimeKG-shaped kg.csv following the published per-type and per-relation counts.

    Raises:
        ConfigError: the count tables are not under the data directory.
        UsageError: scale not in (0, 16] (16 times PrimeKG: about 130M rows, 64M edges).
    """
    if not 0 < scale <= 16:
        raise UsageError(f"scale must be in (0, 16], got {scale}.")
    require_folder(out_dir, "the synthetic PrimeKG file")  # the arguments first, then the settings
    data_dir = settings.paths.data_dir
    if data_dir is None or not (data_dir / "primekg").is_dir():
        raise ConfigError(
            "the synthetic generator needs the PrimeKG count tables (primekg/primekg_plus_Table*.csv) under the "
            "data directory: set METAKG_PATHS__DATA_DIR."
        )
    output_folder(out_dir, "the synthetic PrimeKG file")
    try:
        return generate(out_dir, data_dir / "primekg", scale=scale, seed=seed)
    except OSError as e:
        raise OutputError(f"cannot write the synthetic PrimeKG file into {out_dir}: {e.strerror or e}.") from e


def rejects_tolerated(rejected: int, read: int, max_rejects: str = "0") -> bool:
    """Whether ``rejected`` of ``read`` records is within ``max_rejects``: a count (``"25"``) or a share of the
    records read (``"0.5%"``).

    Raises:
        UsageError: ``max_rejects`` is neither a whole number nor a percentage from 0 to 100.
    """
    text = max_rejects.strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if not 0 <= share <= 100:
                raise ValueError(text)
            return rejected <= share / 100 * read
        count = int(text)
        if count < 0:
            raise ValueError(text)
        return rejected <= count
    except ValueError:
        raise UsageError(f"--max-rejects {max_rejects!r} must be a count (25) or a percentage (0.5%).") from None


@dataclasses.dataclass(frozen=True)
class TriplesAdded(JsonResult):
    """What :func:`add_triples` did: the triples ``read`` and ``accepted``, each one ``rejected`` (its number
    from 1, the check and the reason), the ids of the ``nodes`` and ``edges`` written, and for a bundle the
    ``token`` of the version written (the one to expect next)."""

    read: int
    accepted: int
    rejected: list[dict[str, Any]]
    nodes: list[str]
    edges: list[str]
    token: str | None = None

    omit_none = ("token",)


def add_triples(
    settings: Settings,
    store: GraphStore,
    triples: Sequence[tuple[str, str, str]],
    dataset: str,
    *,
    bundle: Path | None = None,
    expect: str | None = None,
) -> TriplesAdded:
    """Add ``(head, relation, tail)`` triples to an open store, read as ``metakg ingest triples`` reads a
    file (ids ``kg:<dataset>/<name>``; the same checks, each failing triple rejected with its reason). With
    ``bundle`` (the folder the store was read from), the graph with the triples is validated and written to it
    first, under its lock, as a new version with the diff against the one it replaces (its sources, history
    and name embeddings kept, the write listed among its sources), and the store takes the rows only once that
    version is written; a database store keeps them itself.

    Args:
        expect: the token of the bundle version the store holds (``token`` in the result of the previous
            write, or of the bundle read): when the bundle now holds another one, nothing is written.

    Returns:
        ``read``, ``accepted``, ``rejected`` (one entry per rejected triple: its number from 1 and the
        reason), ``nodes`` and ``edges`` (the ids written), and for a bundle its new ``token``.

    Raises:
        UsageError: a dataset name that cannot scope ids.
        BundleError: the bundle cannot be read or written; BundleChanged: it holds another version than
            ``expect`` (the store is left unchanged either way).
    """
    # a tab or line break would split the line the triple is read as: such a triple is rejected alone
    broken = {n for n, t in enumerate(triples, start=1) if any(ch in f for f in t for ch in "\t\r\n")}
    sound = [(n, t) for n, t in enumerate(triples, start=1) if n not in broken]
    with tempfile.TemporaryDirectory(prefix="metakg-triples-") as folder:
        path = Path(folder) / "triple"
        path.write_text("".join("\t".join(t) + "\n" for _, t in sound), encoding="utf-8")
        new, report = read_triples(path, dataset, max_field_chars=settings.ingest.max_field_chars)
    numbers = [n for n, _ in sound]  # line i of the file is triple numbers[i - 1]
    new.rejects = new.rejects.with_columns(
        pl.col("record").map_elements(
            lambda r: f"triple:{numbers[int(r.rsplit(':', 1)[1]) - 1]}", return_dtype=pl.String
        )
    )
    reason = "a field holds a tab or a line break"
    extra = [
        input_reject(f"triple:{n}", "control_character", reason, json.dumps(triples[n - 1], ensure_ascii=False))
        for n in sorted(broken)
    ]
    if extra:
        new.rejects = pl.concat([new.rejects, pl.DataFrame(extra, schema=new.rejects.schema)], how="vertical_relaxed")
    rejected = sorted(
        ({"triple": int(str(r["record"]).rsplit(":", 1)[1]), "check": r["check"], "reason": r["reason"]}
         for r in new.rejects.iter_rows(named=True)),
        key=lambda r: r["triple"],
    )  # fmt: skip
    result = TriplesAdded(len(triples), report.accepted, rejected, new.nodes["id"].to_list(), new.edges["id"].to_list())
    if bundle is None:
        if new.nodes.height or new.edges.height:
            store.upsert(new.nodes, new.edges)
        return result
    whole = getattr(store, "bundle", None)
    if whole is None:
        raise UsageError("only a store read from a bundle can be written back to it.")
    if not (new.nodes.height or new.edges.height):
        return dataclasses.replace(result, token=expect)
    with writing(bundle):
        previous = earlier_version(bundle)
        if expect is not None and previous.bundle.token != expect:
            raise BundleChanged(
                f"{bundle} changed since this server read it (another process wrote a new version); nothing was "
                "written. Restart the server to serve the new version, then repeat the change."
            )
        graph = whole()
        merged = merge_bundles([Bundle(graph.nodes, graph.edges), Bundle(new.nodes, new.edges)])
        run_id = uuid.uuid4().hex
        kept = previous.bundle.manifest
        manifest = {k: v for k, v in kept.items() if k not in _RECOMPUTED} | {
            "sources": [
                *kept.get("sources", []),
                source_entry(f"api:{dataset}", "serve", run_id, triples=report.read, accepted=report.accepted),
            ]
        }
        rejects = pl.concat([previous.bundle.rejects, new.rejects], how="vertical_relaxed")
        written = Bundle(merged.nodes, merged.edges, rejects=rejects, manifest=manifest)
        _carry_embeddings(bundle, previous.bundle, written, getattr(store, "embedder", None))
        write_validated(bundle, written, settings, previous=previous)
    added_nodes = set(result.nodes)
    added_edges = set(result.edges)
    store.upsert(
        written.nodes.filter(pl.col("id").is_in(added_nodes)), written.edges.filter(pl.col("id").is_in(added_edges))
    )
    return dataclasses.replace(result, token=written.token)


#: manifest keys a new version computes afresh (the others are kept from the version it replaces)
_RECOMPUTED = frozenset(
    {
        "counts",
        "content_hashes",
        "content_sizes",
        "written_at",
        "schema_version",
        "validation",
        "diff",
        "embeddings",
        "history",
    }
)


def _carry_embeddings(path: Path, previous: Bundle, written: Bundle, embedder: Embedder | None) -> None:
    """Give ``written`` the name embeddings ``previous`` kept, with the new nodes' names embedded by
    ``embedder`` (of the same model); without such an embedder the new version keeps none."""
    entry: dict[str, Any] = previous.manifest.get("embeddings") or {}
    stored = read_embeddings(path, previous) if entry else None
    if stored is None or embedder is None or embedder.name != entry.get("model"):
        return
    ids = written.nodes["id"]
    fresh = written.nodes.filter(~pl.col("id").is_in(stored["id"].implode()))
    kept = stored.filter(pl.col("id").is_in(ids.implode()))
    if fresh.height:
        vectors = embed_in_blocks(embedder, fresh["name"].to_list())
        added = pl.DataFrame({"id": fresh["id"], "vector": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))})
        kept = pl.concat([kept.cast({"vector": pl.List(pl.Float32)}), added], how="vertical")
    written.side[EMBEDDINGS_FILE] = kept
    written.manifest["embeddings"] = dict(entry) | {"nodes": kept.height}
