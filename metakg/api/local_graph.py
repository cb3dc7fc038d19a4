"""The local graph an agent (RoboData) grows, kept across questions when ``[qa] local_kg`` says where: a bundle
directory, or the configured Neo4j database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
from pydantic import ValidationError

from metakg.api._shared import Progress, quiet
from metakg.api.stores import open_store
from metakg.config import QASettings, Settings, validation_messages
from metakg.errors import ConfigError
from metakg.llm.embedder import Embedder, LazyEmbedder
from metakg.loaders.embedded_store import EmbeddedStore
from metakg.schemas.bundle import MANIFEST_FILE, Bundle, read_bundle, write_bundle
from metakg.schemas.bundle_dir import bundle_path, check_bundle_folder, recover
from metakg.schemas.graph_store import GraphStore
from metakg.schemas.locks import exclusive
from metakg.schemas.tables import empty_edges, empty_nodes


class BundleLocalGraph(EmbeddedStore):
    """An embedded store read from a bundle directory (empty when the directory holds no bundle yet) and
    written back by :meth:`checkpoint` (after each question) and :meth:`close`. A write goes to a new folder
    that then replaces the old one, so an interruption leaves the last whole bundle."""

    def __init__(self, path: Path, *, embedder: Embedder | None = None) -> None:
        """Open the bundle at ``path`` (raises BundleError when it is there but damaged)."""
        found = read_bundle(path) if (path / MANIFEST_FILE).exists() else Bundle(empty_nodes(), empty_edges())
        super().__init__(found.nodes, found.edges, embedder=embedder)
        self.path = path
        self._manifest = dict(found.manifest)
        self._dirty = False

    def upsert(self, nodes: pl.DataFrame, edges: pl.DataFrame) -> None:
        """Add or update nodes and edges (kept in memory until the next checkpoint)."""
        super().upsert(nodes, edges)
        self._dirty = True

    def checkpoint(self) -> None:
        """Write the graph when it changed since the last write (or was never written): a new version swapped
        in whole (:func:`~metakg.schemas.bundle.write_bundle`)."""
        if not self._dirty and (self.path / MANIFEST_FILE).exists():
            return
        whole = self.bundle()
        written = Bundle(whole.nodes, whole.edges, manifest=self._manifest)
        write_bundle(self.path, written)
        self._manifest = dict(written.manifest)
        self._dirty = False

    def close(self) -> None:
        """Write what is left to write."""
        self.checkpoint()


def with_local_kg(settings: Settings, where: str | Path | None) -> Settings:
    """``settings`` with ``[qa] local_kg`` set to ``where`` (checked as the setting is; None: unchanged).

    Raises:
        ConfigError: ``where`` is a file, or its parent folder does not exist.
    """
    if where is None:
        return settings
    try:
        qa = QASettings.model_validate(settings.qa.model_dump() | {"local_kg": str(where)})
    except ValidationError as e:
        raise ConfigError(validation_messages(e)) from None
    return settings.model_copy(update={"qa": qa})


@contextmanager
def local_graph(settings: Settings, progress: Progress = quiet) -> Iterator[GraphStore | None]:
    """The local graph ``[qa] local_kg`` names, open for the block and closed (written) after it; None when
    it names none (each question then grows a graph of its own). A bundle directory is locked for the block.

    Raises:
        ResourceBusy: another process uses the bundle; BundleError: the bundle is damaged;
        ConfigError: Neo4j cannot be reached.
    """
    where = settings.qa.local_kg
    if not where:
        yield None
        return
    if where == "neo4j":
        progress("opening the local graph in Neo4j")
        with open_store(settings, None, neo4j=True, progress=progress) as store:
            yield store
        return
    path = bundle_path(Path(where))
    with exclusive(path, "the local graph", directory=False):
        recover(path)
        check_bundle_folder(Path(where), path)  # a folder of other files is never turned into a bundle
        progress(f"opening the local graph {path}")
        store = BundleLocalGraph(path, embedder=LazyEmbedder(settings.embedder, settings.paths.cache_dir, progress))
        try:
            yield store
        finally:
            store.close()
