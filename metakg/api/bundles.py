"""Whole bundles: validate, describe, merge, embed, export as RDF."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from metakg.api._shared import Counter, JsonResult, Progress, quiet
from metakg.config import Settings
from metakg.errors import BundleError, UsageError
from metakg.llm.embedder import LazyEmbedder, embed_in_blocks
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.loaders.rdf_export import QUAD_FORMATS, format_for, write_rdf
from metakg.qa_engine.services import keep_phrases
from metakg.schemas.bundle import (
    Bundle,
    merge_bundles,
    read_bundle,
    read_manifest,
    verify_bundle,
    write_bundle,
    write_embeddings,
)
from metakg.schemas.bundle_dir import Version, bundle_path, token_of, writing
from metakg.schemas.diff import BundleDiff, diff_bundles
from metakg.schemas.history import History, advance, attach, read_history
from metakg.schemas.locks import check_replaceable
from metakg.schemas.rdf_mapping import bundle_quads, expected_history_count, expected_triple_count, history_quads
from metakg.schemas.validation import REPORT_HTML, REPORT_JSON, ValidationReport, validate, write_reports
from metakg.schemas.vocabulary import default_vocabulary

__all__ = [
    "REPORT_HTML",
    "REPORT_JSON",
    "Earlier",
    "EmbeddingsEntry",
    "Manifest",
    "RdfExport",
    "RecordedDiff",
    "bundle_info",
    "bundle_token",
    "diff",
    "earlier_version",
    "embed_bundle",
    "export_rdf",
    "merge",
    "recorded_diff",
    "validate_bundle",
    "validation_page",
    "write_validated",
]


def validate_bundle(
    path: Path, settings: Settings, *, accept_changes: bool = False, progress: Progress | None = None
) -> ValidationReport:
    """Validate the bundle at ``path`` in place: rejected rows move to its rejects, reports are written.

    Args:
        path: the bundle directory.
        settings: validation settings.
        accept_changes: read tables changed since the bundle was written (their new hashes are recorded);
            without it such a bundle is refused.
        progress: called with stage messages.

    Raises:
        BundleError: the bundle cannot be read or written, or a table changed behind its manifest.
    """
    say = progress or quiet
    say("reading bundle")
    read_manifest(path)  # a missing bundle is explained as such, before any lock file is made
    with writing(path):
        return write_validated(path, read_bundle(path, verify=not accept_changes), settings, progress=say)


@dataclass
class Earlier:
    """The version of a bundle an update replaces: its tables and the history it keeps (None: none)."""

    bundle: Bundle
    history: History | None


def earlier_version(path: Path) -> Earlier:
    """The bundle at ``path`` with its history, as the version an update replaces.

    Raises:
        BundleError: no readable bundle there.
    """
    bundle = read_bundle(path)
    return Earlier(bundle, read_history(path, bundle))


def record_update(bundle: Bundle, previous: Earlier | None, *, history: bool | None = None) -> None:
    """What an update writes besides its tables: with ``previous``, the diff against it (``diff`` in the
    manifest); with history (``history`` True, or None and the previous version keeps one), the versions:
    rows removed or changed since ``previous`` are retired now, new and changed ones recorded now
    (:mod:`metakg.schemas.history`). A first version with ``history`` starts its history now."""
    now = datetime.now(UTC)
    keep = history if history is not None else previous is not None and previous.history is not None
    if previous is not None:
        record_diff(bundle, previous.bundle)
    if keep:
        versions = advance(previous.bundle, previous.history, bundle, now) if previous else History.start(bundle, now)
        attach(bundle, versions, now)


def write_validated(
    out: Path,
    bundle: Bundle,
    settings: Settings,
    *,
    previous: Earlier | None = None,
    history: bool | None = None,
    progress: Progress | None = None,
) -> ValidationReport:
    """Validate ``bundle`` in memory, then write it (rejected rows moved to its rejects) and its reports.
    With ``previous`` (the version it replaces), the diff against it goes into the new manifest (``diff``);
    with ``history``, the versions too (:func:`record_update`).

    Raises:
        BundleError: ``out`` cannot be written.
    """
    say = progress or quiet
    say("running checks")
    vocabulary = default_vocabulary().with_types(bundle.manifest.get("types") or {})
    symmetric = vocabulary.symmetric | set(settings.validation.symmetric_relations)
    checked, report = validate(bundle, vocabulary.names, symmetric=symmetric)
    checked.side = bundle.side
    checked.verified = bundle.verified  # read accepting changes: the kept tables' hashes are recorded anew
    if previous is not None or history:
        say("comparing with the previous version")
        record_update(checked, previous, history=history)
    say("writing bundle")

    def reports(folder: Path) -> None:
        write_reports(report, checked.rejects, folder, html_report=settings.validation.html_report)

    write_bundle(out, checked, extras=reports, expect=bundle.token)
    bundle.token = checked.token  # the caller's bundle names the version now written
    return report


@dataclass(frozen=True)
class RecordedDiff(JsonResult):
    """The diff an update recorded in its manifest: for ``nodes`` and ``edges`` the rows ``added``,
    ``removed``, ``changed`` and ``unchanged`` and the ``changed_columns``; ``against`` is when the version it
    replaced was written."""

    nodes: dict[str, Any]
    edges: dict[str, Any]
    against: str | None

    @classmethod
    def from_manifest(cls, entry: Mapping[str, Any]) -> RecordedDiff:
        return cls(dict(entry.get("nodes", {})), dict(entry.get("edges", {})), entry.get("against"))


def record_diff(bundle: Bundle, previous: Bundle) -> RecordedDiff:
    """Put the diff of ``bundle`` against ``previous`` (the version it replaces) into its manifest as
    ``diff``, and return it."""
    recorded = RecordedDiff.from_manifest(
        diff_bundles(previous, bundle).summary() | {"against": previous.manifest.get("written_at")}
    )
    bundle.manifest["diff"] = recorded.as_dict()
    return recorded


def recorded_diff(path: Path) -> RecordedDiff | None:
    """The diff the last update of the bundle at ``path`` recorded in its manifest (None when it has none);
    reads the manifest only."""
    entry = read_manifest(path).get("diff")
    return RecordedDiff.from_manifest(entry) if entry is not None else None


@dataclass(frozen=True)
class Manifest:
    """A bundle's manifest (``manifest.json``) as written (``data``), with the figures callers read."""

    data: Mapping[str, Any]

    @property
    def schema_version(self) -> str | None:
        return self.data.get("schema_version")

    @property
    def written_at(self) -> str | None:
        """When this version was written (ISO 8601, UTC)."""
        return self.data.get("written_at")

    @property
    def counts(self) -> dict[str, Any]:
        """Rows per table (``nodes``, ``edges``, ``rejects``) and per type, relation, source and check."""
        return dict(self.data.get("counts", {}))

    @property
    def nodes(self) -> int:
        return int(self.counts.get("nodes", 0))

    @property
    def edges(self) -> int:
        return int(self.counts.get("edges", 0))

    @property
    def rejects(self) -> int:
        return int(self.counts.get("rejects", 0))

    @property
    def sources(self) -> list[dict[str, Any]]:
        """One entry per source: its name, importer, run and figures."""
        return list(self.data.get("sources", []))

    @property
    def validation(self) -> dict[str, Any] | None:
        """The summary of the last validation (None: never validated)."""
        found = self.data.get("validation")
        return dict(found) if found else None

    @property
    def embeddings(self) -> EmbeddingsEntry | None:
        """The name embeddings the bundle holds (None: none)."""
        found = self.data.get("embeddings")
        return EmbeddingsEntry(**found) if found else None

    def as_dict(self) -> dict[str, Any]:
        """The manifest as JSON data."""
        return dict(self.data)


@dataclass(frozen=True)
class EmbeddingsEntry(JsonResult):
    """The name embeddings of a bundle: the ``model``, the vectors' ``dim``, the node ``field`` embedded and the
    ``nodes`` embedded."""

    model: str
    dim: int
    field: str
    nodes: int


#: the largest validation report served: a report lists its checks and 20 examples of each, so a few hundred KB
MAX_REPORT_BYTES = 32 * 1024 * 1024


def validation_page(path: Path) -> bytes | None:
    """The HTML validation report of the bundle at ``path`` (None when it has none, or one larger than
    :data:`MAX_REPORT_BYTES`, which no validation writes). Only a regular file in the bundle's own folder is
    read: a link put there (to a file outside) is not followed, and its size is checked before it is read."""
    try:
        with Version(bundle_path(path)) as version:
            if not version.has(REPORT_HTML):
                return None
            with version.open(REPORT_HTML) as fh:
                if os.fstat(fh.fileno()).st_size > MAX_REPORT_BYTES:
                    return None
                return fh.read(MAX_REPORT_BYTES + 1)[:MAX_REPORT_BYTES]
    except (BundleError, OSError):
        return None


def bundle_token(path: Path) -> str | None:
    """The token of the version the bundle at ``path`` holds now (None: no bundle there): a writer that read
    this version passes it as ``expect`` so that a newer version is never overwritten."""
    return token_of(bundle_path(path))


def bundle_info(path: Path) -> Manifest:
    """The manifest of the bundle at ``path`` (counts, sources, hashes, validation summary).

    Raises:
        BundleError: no bundle there, or a table changed since the bundle was written.
    """
    return Manifest(verify_bundle(path))


def diff(old: Path, new: Path, *, examples: int = 5) -> BundleDiff:
    """What the bundle ``new`` adds, removes and changes against ``old`` (see :mod:`metakg.schemas.diff`).

    Raises:
        BundleError: a bundle is missing, damaged or changed behind its manifest.
    """
    return diff_bundles(read_bundle(old), read_bundle(new), examples=examples)


def merge(paths: Sequence[Path], out: Path) -> Manifest:
    """Merge bundles into a new bundle at ``out``; returns its manifest. The identity decisions of a resolved
    input, and what undoing them needs, come along (``metakg identity show`` and ``split`` work on the
    result).

    Raises:
        UsageError: ``out`` is one of the inputs.
        BundleError: an input cannot be read or ``out`` cannot be written.
    """
    if any(p.resolve() == out.resolve() for p in paths):
        raise UsageError(f"the output {out} is also an input; merge into a new directory.")
    from metakg.api.identity import with_identity  # here: identity loads the LLM client, which merge needs not

    with writing(out):
        read = [(p, read_bundle(p)) for p in paths]
        merged = with_identity(read, merge_bundles([b for _, b in read]))
        return Manifest(write_bundle(out, merged))


@dataclass(frozen=True)
class RdfExport(JsonResult):
    """What an RDF export wrote: the file, the format, the statements written and those the mapping promises
    (equal when nothing was lost), the nodes and edges, the history written (its summary) or left out (a
    format of one graph), and the language tag of the literals."""

    output: Path
    format: str
    statements_written: int
    statements_expected: int
    nodes: int
    edges: int
    history: dict[str, Any] | None
    history_left_out: bool
    lang: str | None

    @property
    def complete(self) -> bool:
        """Every statement the mapping promises was written."""
        return self.statements_written == self.statements_expected


LANG_TAG = re.compile(r"[a-zA-Z]+(?:-[a-zA-Z0-9]+)*")
"""A language tag as RDF literals take it (rdflib's check): ``en``, ``en-US``, ``zh-Hant``."""


def export_rdf(
    path: Path,
    out: Path,
    fmt: str | None = None,
    *,
    provenance: bool = True,
    lang: str | None = "en",
    progress: Counter | None = None,
) -> RdfExport:
    """Export a bundle as RDF; returns the statement counts written and promised by the mapping.

    The history of a bundle that keeps one goes into its own named graph, so only the formats with named
    graphs (``nq``, ``trig``) carry it; ``ttl`` and ``nt`` hold the current graph alone (``history_left_out``
    says so), where retired versions would otherwise answer a query of the current graph.

    Args:
        fmt: None: as ``out``'s name ends (``.nt``, ``.nq``, ``.trig``), else Turtle.
        lang: the language tag of labels, aliases and descriptions (None or empty: plain literals).

    Raises:
        BundleError: the bundle cannot be read.
        ExportError: the output cannot be written.
        OutputError: ``out`` is a link, a FIFO or a device.
        UsageError: ``lang`` is not a language tag, or ``fmt`` is not the format ``out``'s name ends in.
    """
    if str(out) == "-":
        raise UsageError("RDF is written to a file, not to standard output: give its path (-o kg.nt).")
    fmt = format_for(out, fmt)
    check_replaceable(out)  # before the bundle is read, not after (write_rdf checks again: it is called alone)
    if lang and not LANG_TAG.fullmatch(lang):
        raise UsageError(f"--lang {lang!r} is not a language tag: letters, then '-' and letters or digits (en-US)")
    bundle = read_bundle(path)
    vocabulary = default_vocabulary().with_types(bundle.manifest.get("types") or {})
    history = read_history(path, bundle)
    kept = history if fmt in QUAD_FORMATS else None
    expected = expected_triple_count(
        bundle.nodes, bundle.edges, vocabulary, provenance=provenance, named_graphs=fmt in QUAD_FORMATS
    ) + (expected_history_count(kept.nodes, kept.edges) if kept is not None else 0)

    def report(done: int) -> None:
        if progress is not None:
            progress(done, expected)

    quads = bundle_quads(bundle.nodes, bundle.edges, vocabulary, provenance=provenance, lang=lang)
    if kept is not None:
        quads = itertools.chain(quads, history_quads(kept.nodes, kept.edges, lang))
    written = write_rdf(quads, out, fmt, progress=report)
    history_written = kept.summary() if kept is not None else None
    left_out = history is not None and kept is None
    return RdfExport(out, fmt, written, expected, bundle.nodes.height, bundle.edges.height, history_written,
                     left_out, lang or None)  # fmt: skip


def embed_bundle(
    path: Path, settings: Settings, *, progress: Progress | None = None, counter: Counter | None = None
) -> EmbeddingsEntry:
    """Compute name embeddings for every node and store them in the bundle (``embeddings.parquet``); the
    graph's phrase index is built into the cache too, so the first question does not build it.

    Args:
        path: the bundle directory.
        settings: where the model is.
        progress: called with stage messages (e.g. a model download).
        counter: called with (names embedded, total) after each block.

    Returns:
        The manifest's embeddings entry.

    Raises:
        BundleError: the bundle cannot be read or written.
        EmbeddingError: the model cannot be found or run.
    """
    read_manifest(path)
    with writing(path):
        bundle = read_bundle(path)
        embedder = LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress or quiet)
        vectors = embed_in_blocks(embedder, bundle.nodes["name"].to_list(), counter)
        dim = int(vectors.shape[1]) if len(vectors) else embedder.dim
        entry = EmbeddingsEntry(
            **write_embeddings(path, bundle, bundle.nodes["id"], vectors, model=embedder.name, dim=dim)
        )
    # the graph is ready to ask: its phrase index is built now, not at the first question of a later process
    keep_phrases(EmbeddedStore.from_bundle(bundle), settings.paths.cache_dir)
    return entry
