"""RDF export of a bundle with rdflib: Turtle, N-Triples, N-Quads or TriG.

N-Triples and N-Quads are written in chunks, so memory stays flat on large bundles; Turtle and TriG need the
whole graph in memory to group statements by subject (and graph).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal as TypingLiteral
from typing import cast

from rdflib import Dataset, Graph
from rdflib.namespace import OWL, RDF, RDFS, SKOS, XSD

from metakg.errors import ExportError, UsageError
from metakg.schemas.locks import check_replaceable, remove_stale_temps, unique_temp_name
from metakg.schemas.rdf_mapping import MK, MKE, MKR, MKS, MKT, MKV, SCHEMA, WD, WDT, Quad

RdfFormat = TypingLiteral["ttl", "nt", "nq", "trig"]
FORMATS: dict[str, str] = {"ttl": "turtle", "nt": "nt", "nq": "nquads", "trig": "trig"}
#: the file name endings that say a format
SUFFIXES: dict[str, RdfFormat] = {
    ".ttl": "ttl", ".turtle": "ttl", ".nt": "nt", ".ntriples": "nt", ".nq": "nq", ".nquads": "nq", ".trig": "trig",
}  # fmt: skip
#: endings that say something the export does not write: another RDF syntax, or compression
UNWRITTEN = {
    ".rdf": "RDF/XML", ".owl": "RDF/XML", ".xml": "XML", ".jsonld": "JSON-LD", ".json": "JSON", ".n3": "N3",
    ".trix": "TriX", ".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd", ".zip": "zip",
}  # fmt: skip


def format_for(path: Path, fmt: str | None) -> RdfFormat:
    """The format to write ``path`` in: ``fmt``, else the one its name ends in, else Turtle.

    Raises:
        UsageError: ``fmt`` is not a format, or not the one the name ends in (a ``.nt`` file of Turtle breaks
        its readers), or the name ends in another syntax or a compression (``.rdf``, ``.jsonld``, ``.gz``).
    """
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown RDF format {fmt!r}; use one of {', '.join(FORMATS)}.")
    suffix = path.suffix.lower()
    if suffix in UNWRITTEN:  # a reader would take the file for that: refused rather than written as Turtle
        raise UsageError(
            f"{path.name} ends in {path.suffix}, which says {UNWRITTEN[suffix]}; the export writes plain Turtle, "
            "N-Triples, N-Quads or TriG: give a name ending in .ttl, .nt, .nq or .trig."
        )
    named = SUFFIXES.get(suffix)
    if fmt is not None and named is not None and named != fmt:
        raise UsageError(f"--format {fmt} but {path.name} ends in {path.suffix}: give a name ending in .{fmt}, or "
                         f"--format {named}.")  # fmt: skip
    return cast(RdfFormat, fmt) if fmt is not None else named or "ttl"


#: the formats that keep named graphs (the sources' graphs, and the history's)
QUAD_FORMATS = frozenset({"nq", "trig"})
CHUNK = 50_000


def _bind(graph: Graph) -> None:
    """The prefixes of the written file; ``schema`` replaces rdflib's own binding of the prefix (to
    https://schema.org/), which would otherwise push ours to a stray ``schema1``."""
    for prefix, ns in (
        ("mk", MK),
        ("mkt", MKT),
        ("mkr", MKR),
        ("mke", MKE),
        ("mks", MKS),
        ("mkv", MKV),
        ("schema", SCHEMA),
        ("skos", SKOS),
        ("owl", OWL),
        ("wd", WD),
        ("wdt", WDT),
        ("xsd", XSD),
        ("rdfs", RDFS),
        ("rdf", RDF),
    ):
        graph.bind(prefix, ns, override=True, replace=True)


def write_rdf(
    quads: Iterable[Quad],
    path: Path,
    fmt: RdfFormat,
    *,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Serialise ``quads`` to ``path``.

    Args:
        quads: statements from :func:`metakg.schemas.rdf_mapping.bundle_quads`.
        path: the output file (overwritten; its folder made when missing; never a link, FIFO or device).
        fmt: ``ttl`` and ``nt`` drop graph names; ``nq`` and ``trig`` keep them.
        progress: called with the number of statements written so far, once per chunk.

    Returns:
        The number of statements serialised (before any de-duplication by a reader).

    Raises:
        ExportError: unknown format, or the file cannot be written.
        OutputError: ``path`` is a link or not a regular file.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown RDF format {fmt!r}; use one of {sorted(FORMATS)}.")
    check_replaceable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"cannot make the folder of {path}: {e.strerror or e}.") from e
    remove_stale_temps(path)  # what an export killed before its rename left
    tmp = unique_temp_name(path)
    written = 0
    try:
        if fmt == "ttl":
            graph = Graph()
            _bind(graph)
            for s, p, o, _g in quads:
                graph.add((s, p, o))
                written += 1
            graph.serialize(destination=tmp, format="turtle", encoding="utf-8")
        elif fmt == "trig":
            dataset = Dataset()
            _bind(dataset)
            for s, p, o, gname in quads:
                (dataset.default_graph if gname is None else dataset.graph(gname)).add((s, p, o))
                written += 1
            dataset.serialize(destination=tmp, format="trig", encoding="utf-8")
        else:
            with tmp.open("wb") as out:
                iterator = iter(quads)
                while chunk := list(itertools.islice(iterator, CHUNK)):
                    if fmt == "nt":
                        g = Graph()
                        for s, p, o, _g in chunk:
                            g.add((s, p, o))
                        out.write(g.serialize(format="nt", encoding="utf-8"))
                    else:
                        ds = Dataset()
                        for s, p, o, gname in chunk:
                            target = ds.default_graph if gname is None else ds.graph(gname)
                            target.add((s, p, o))
                        out.write(ds.serialize(format="nquads", encoding="utf-8"))
                    written += len(chunk)
                    if progress:
                        progress(written)
        tmp.replace(path)
    except OSError as e:
        raise ExportError(f"cannot write {path}: {e.strerror or e}.") from e
    finally:
        with contextlib.suppress(OSError):  # a read-only folder: nothing was made there, nothing to remove
            tmp.unlink(missing_ok=True)  # a failed or interrupted export leaves nothing behind
    return written
