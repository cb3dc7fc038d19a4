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

from rdflib import Dataset, Graph
from rdflib.namespace import OWL, RDF, RDFS, SKOS, XSD

from metakg.errors import ExportError
from metakg.schemas.locks import unique_temp_name
from metakg.schemas.rdf_mapping import MK, MKE, MKR, MKS, MKT, MKV, SCHEMA, WD, WDT, Quad

RdfFormat = TypingLiteral["ttl", "nt", "nq", "trig"]
FORMATS: dict[str, str] = {"ttl": "turtle", "nt": "nt", "nq": "nquads", "trig": "trig"}
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
        path: the output file (overwritten).
        fmt: ``ttl`` and ``nt`` drop graph names; ``nq`` and ``trig`` keep them.
        progress: called with the number of statements written so far, once per chunk.

    Returns:
        The number of statements serialised (before any de-duplication by a reader).

    Raises:
        ExportError: unknown format, or the file cannot be written.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown RDF format {fmt!r}; use one of {sorted(FORMATS)}.")
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
