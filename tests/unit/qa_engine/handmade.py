"""A hand-made graph and embedder where MetaKGRAG's missing concept, pivot and corrected path are known.

::

    alpha -- decoy -- decoy two
      |        \\
    bridge     zeta -- beta

Vectors live on five axes (question, alpha, beta, noise, noise); cosines are exact:

=========  ==========  ===============  =========
entity     sim to Q    sim to "beta c"  notes
=========  ==========  ===============  =========
alpha      0           0                the start (concept "alpha")
decoy      0.9         0.2              greedy's first pick
decoy two  0.8         0                greedy's second pick: the initial path misses "beta"
zeta       0.6         0.6              relevant to "beta": +delta makes it win from the pivot
bridge     0.5         0                a side branch
beta       0.2         ~0.98            covers "beta"
=========  ==========  ===============  =========

The concepts are "alpha" and "beta concept" (the pure beta axis). Initial path alpha > decoy > decoy two;
coverage(beta concept) = 0.2 < 0.6, so "beta" is missing; the pivot is decoy
(closest to "beta"); zeta gets +0.25 (0.85 > 0.8), so the corrected path is alpha > decoy > zeta > beta.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from metakg.llm.embedder import Vectors
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.schemas.bundle import Bundle
from metakg.schemas.tables import conform_edges, conform_nodes

QUESTION = "What links alpha and beta?"
VECTORS = {
    QUESTION: (1, 0, 0, 0, 0),
    "alpha": (0, 1, 0, 0, 0),
    "beta": (0.2, 0, 0.98, 0, 0),
    "beta concept": (0, 0, 1, 0, 0),
    "decoy": (0.9, 0, 0.2, 0.387, 0),
    "decoy two": (0.8, 0, 0, 0, 0.6),
    "zeta": (0.6, 0, 0.6, 0, 0.529),
    "bridge": (0.5, 0, 0, 0.866, 0),
}
EDGES = [
    ("alpha", "near", "decoy"),
    ("decoy", "near", "decoy two"),
    ("decoy", "leads to", "zeta"),
    ("zeta", "leads to", "beta"),
    ("alpha", "near", "bridge"),
]


class AxisEmbedder:
    """Looks texts up in VECTORS ("beta" as a concept is the pure beta axis); unknown texts are orthogonal."""

    name = "axis"
    dim = 5

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        rows = [VECTORS.get(t, (0, 0, 0, 0, 0)) for t in texts]
        matrix = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.asarray(matrix / np.where(norms == 0, 1, norms), dtype=np.float32)


def ident(name: str) -> str:
    return "kg:hand/" + name.replace(" ", "_")


def store(embedder: AxisEmbedder | None = None, types: dict[str, str] | None = None) -> EmbeddedStore:
    """The graph; every node is a ``concept`` unless ``types`` names another type for it."""
    names = list(dict.fromkeys([n for e in EDGES for n in (e[0], e[2])]))
    kinds = [(types or {}).get(n, "concept") for n in names]
    nodes = conform_nodes(
        pl.DataFrame({"id": [ident(n) for n in names], "name": names, "type": kinds, "source": "hand"})
    )
    edges = conform_edges(
        pl.DataFrame(
            {
                "src": [ident(s) for s, _, _ in EDGES],
                "dst": [ident(d) for _, _, d in EDGES],
                "rel": [r.replace(" ", "_") for _, r, _ in EDGES],
                "display": [r for _, r, _ in EDGES],
                "source": "hand",
                "confidence": 1.0,
            }
        )
    )
    return EmbeddedStore.from_bundle(Bundle(nodes=nodes, edges=edges), embedder=embedder or AxisEmbedder())
