"""What strategies share across the questions of one context: bounded caches and the similarity service.

- :class:`LRUCache`: a dict with a size bound that evicts the least recently used entry.
- :class:`Similarity`: cosine similarity between texts and graph nodes; each text is embedded once and each
  node's vector (its stored name embedding, else its embedded name) looked up once, while they stay cached.
- :class:`QAServices`: the similarity service, the neighbour-list cache (filled in batches, with the
  neighbours' vectors, on a store that reads in round trips) and the phrase index over the graph's names
  (kept on disk per graph), made on first use and kept for the life of the context.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from metakg.llm.embedder import Embedder, Vectors
from metakg.schemas.graph_store import BatchReads, GraphStore, Neighbour, NodeRecord, Vector
from metakg.schemas.locks import unique_temp_name
from metakg.text_processing import PhraseIndex

K = TypeVar("K")
V = TypeVar("V")
logger = logging.getLogger("metakg.qa")


class LRUCache(Generic[K, V]):
    """At most ``max_entries`` entries; adding one more evicts the least recently read or written. Safe to
    share between threads (a server answering questions at once over one set of services)."""

    def __init__(self, max_entries: int) -> None:
        """An empty cache bounded by ``max_entries`` (at least 1)."""
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``, evicting the least recently used entry when full."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


class Similarity:
    """Cosine similarity between texts and nodes, with bounded caches of text and node vectors.

    A node's vector is its stored name embedding when the store has one (``metakg embed``, same dimension
    as the embedder), else its name embedded now.
    """

    def __init__(self, embedder: Embedder, store: GraphStore | None = None, *, max_entries: int) -> None:
        """Use ``embedder`` for texts, and ``store``'s name embeddings for nodes when it has them."""
        self._embedder = embedder
        self._store = store
        self._texts: LRUCache[str, Vectors] = LRUCache(max_entries)
        self._nodes: LRUCache[str, Vectors] = LRUCache(max_entries)

    def _empty(self) -> Vectors:
        return np.zeros((0, self._embedder.dim), dtype=np.float32)

    def vectors(self, texts: Sequence[str]) -> Vectors:
        """Unit vectors of ``texts`` (rows in order), embedding only the texts not cached."""
        if not texts:
            return self._empty()
        found = {t: v for t in dict.fromkeys(texts) if (v := self._texts.get(t)) is not None}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            for text, vector in zip(missing, self._embedder.embed(missing), strict=True):
                self._texts.put(text, vector)
                found[text] = vector
        return np.stack([found[t] for t in texts])

    def node_vectors(self, nodes: Sequence[NodeRecord]) -> Vectors:
        """Unit vectors of the nodes' names (rows in order): stored embeddings first, else embedded."""
        if not nodes:
            return self._empty()
        found = {n.id: v for n in nodes if (v := self._nodes.get(n.id)) is not None}
        missing = list({n.id: n for n in nodes if n.id not in found}.values())
        if missing:
            stored = self._store.name_vectors([n.id for n in missing]) if self._store is not None else {}
            for node_id, vector in stored.items():
                if len(vector) == self._embedder.dim:
                    found[node_id] = np.asarray(vector, dtype=np.float32)
            rest = [n for n in missing if n.id not in found]
            if rest:
                for node, vector in zip(rest, self.vectors([n.name for n in rest]), strict=True):
                    found[node.id] = vector
            for node in missing:
                self._nodes.put(node.id, found[node.id])
        return np.stack([found[n.id] for n in nodes])

    def prime(self, vectors: Mapping[str, Vector]) -> None:
        """Take stored name embeddings read along with something else (a neighbour batch), so the nodes'
        vectors need no query of their own; vectors of another dimension than the embedder's are ignored."""
        for node_id, vector in vectors.items():
            if node_id not in self._nodes and len(vector) == self._embedder.dim:
                self._nodes.put(node_id, np.asarray(vector, dtype=np.float32))

    def nodes_to(self, nodes: Sequence[NodeRecord], texts: Sequence[str]) -> Any:
        """``sim[i, j]`` = cosine(name of nodes[i], texts[j]), clipped to [0, 1]."""
        if not nodes or not texts:
            return np.zeros((len(nodes), len(texts)), dtype=np.float32)
        return np.clip(self.node_vectors(nodes) @ self.vectors(texts).T, 0.0, 1.0)


def save_phrases(index: PhraseIndex, path: Path) -> None:
    """Keep ``index`` at ``path`` for the next process: written under a temporary name of its own, then renamed
    onto ``path``, so that builders of the same index at once (the first questions a server answers) never
    write into each other's file, and a reader finds a whole file or none. The file only saves time: when it
    cannot be written, the index in memory serves and the failure is logged."""
    temporary = unique_temp_name(path)
    try:
        index.save(temporary)
        os.replace(temporary, path)
    except OSError as e:
        logger.warning("could not keep the phrase index at %s: %s", path, e)
        for left in (temporary, temporary.with_name(temporary.name + ".partial")):  # save()'s own temporary
            with contextlib.suppress(OSError):
                left.unlink()


def names_digest(names: Sequence[str]) -> str:
    """A digest of exactly these ``names`` (in this order): what names a graph's phrase index."""
    digest = hashlib.sha256(f"{PhraseIndex.FORMAT}\0".encode())
    for name in names:
        digest.update(name.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:32]


def phrases_file(names: Sequence[str], cache_dir: Path, *, digest: str | None = None) -> Path:
    """Where the phrase index of exactly these ``names`` (in this order) is kept under ``cache_dir``
    (``digest``: their :func:`names_digest`, when already known)."""
    return cache_dir / "phrases" / f"{digest or names_digest(names)}.json"


def keep_phrases(store: GraphStore, cache_dir: Path) -> Path:
    """Build the phrase index of ``store``'s names into ``cache_dir`` unless it is there, and return its file.

    The steps that make a graph to ask (``embed``, ``load neo4j``) call it, so the first question of a later
    process reads the index instead of building it (seconds at 100k names)."""
    names = store.names()
    path = phrases_file(names, cache_dir)
    if not path.is_file():
        save_phrases(PhraseIndex(names), path)
    return path


class QAServices:
    """The shared services of one QA context; each is made on first use.

    Caches are bounded by ``max_entries`` each and evict the least recently used entries. One instance may
    serve many contexts over the same store, from many threads (``metakg serve``); a change to the graph
    needs new services (the caches would be stale).
    """

    def __init__(
        self, store: GraphStore, embedder: Embedder, *, max_entries: int, cache_dir: Path | None = None
    ) -> None:
        """Services over ``store`` with ``embedder``; nothing is built here. With ``cache_dir``, the phrase
        index of a graph is kept on disk under ``cache_dir/phrases``."""
        self._store = store
        self._embedder = embedder
        self.max_entries = max_entries
        #: how the store's document chunks are cited in answers' sources (record id -> "report.pdf p. 12, ...")
        self.provenance: dict[str, str] = {}
        self._cache_dir = cache_dir
        self._similarity: Similarity | None = None
        self._phrases: PhraseIndex | None = None
        self._names_digest = ""
        self.neighbour_lists: LRUCache[tuple[str, int], list[Neighbour]] = LRUCache(max_entries)

    @property
    def similarity(self) -> Similarity:
        """The similarity service (text and node vectors cached across questions)."""
        if self._similarity is None:
            self._similarity = Similarity(self._embedder, self._store, max_entries=self.max_entries)
        return self._similarity

    @property
    def phrases(self) -> PhraseIndex:
        """A phrase index over every node name and alias of the store, made on first use: read from the disk
        cache when one was built for exactly these names, else built (and saved there)."""
        if self._phrases is None:
            names = self._store.names()
            self._names_digest = names_digest(names)
            if self._cache_dir is None:
                self._phrases = PhraseIndex(names)
                return self._phrases
            path = phrases_file(names, self._cache_dir, digest=self._names_digest)
            found = PhraseIndex.load(path)  # kept local: another question may be setting the attribute meanwhile
            if found is None:
                found = PhraseIndex(names)
                save_phrases(found, path)
            self._phrases = found
            return found
        return self._phrases

    @property
    def names_digest(self) -> str:
        """The digest of the store's names (:func:`names_digest`), read with the phrase index (no second read
        of the names)."""
        _ = self.phrases
        return self._names_digest

    def neighbours(self, node_id: str, limit: int, read: Callable[[], list[Neighbour]]) -> list[Neighbour]:
        """The cached neighbour list of ``node_id`` (first ``limit``), read with ``read`` when not cached (on a
        store that reads in batches, by :meth:`prefetch`, which brings the neighbours' vectors along)."""
        key = (node_id, limit)
        found = self.neighbour_lists.get(key)
        if found is None and isinstance(self._store, BatchReads):
            self.prefetch([node_id], limit)
            found = self.neighbour_lists.get(key)
        if found is None:
            found = read()
            self.neighbour_lists.put(key, found)
        return found

    def prefetch(self, ids: Sequence[str], limit: int) -> None:
        """Read the neighbour lists of the ``ids`` not cached yet in one round trip, with the neighbours'
        name embeddings for the similarity service, when the store reads in batches (else nothing: the
        lists are read one by one when asked for, which costs no round trip)."""
        if not isinstance(self._store, BatchReads):
            return
        todo = [i for i in dict.fromkeys(ids) if (i, limit) not in self.neighbour_lists]
        if todo:
            lists, vectors = self._store.neighbours_of(todo, limit=limit, vectors=True)
            for node_id, found in lists.items():
                self.neighbour_lists.put((node_id, limit), found)
            self.similarity.prime(vectors)
