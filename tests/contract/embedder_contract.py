"""What every :class:`~metakg.llm.embedder.Embedder` promises (a subclass gives ``make()``): a name and a
dimension, one unit-length float row per text, in order, the same row for the same text, and no row for no
text."""

from __future__ import annotations

import numpy as np

from metakg.llm.embedder import Embedder

TEXTS = ["aspirin", "acetylsalicylic acid", "Tokyo 東京", "", "a much longer text about a migraine and its treatment"]


class EmbedderContract:
    def make(self) -> Embedder:
        raise NotImplementedError

    def test_it_names_itself_and_its_dimension(self) -> None:
        embedder = self.make()
        assert isinstance(embedder.name, str) and embedder.name
        assert isinstance(embedder.dim, int) and embedder.dim > 0

    def test_one_unit_row_per_text_in_order(self) -> None:
        embedder = self.make()
        vectors = np.asarray(embedder.embed(TEXTS))
        assert vectors.shape == (len(TEXTS), embedder.dim) and np.issubdtype(vectors.dtype, np.floating)
        norms = np.linalg.norm(vectors, axis=1)
        assert np.all(np.isfinite(vectors))
        assert np.allclose(norms[norms > 0], 1.0, atol=1e-4)  # unit length (an empty text may be all zeros)
        alone = np.asarray(embedder.embed([TEXTS[2]]))[0]
        assert np.allclose(alone, vectors[2], atol=1e-4)  # a row does not depend on its batch

    def test_the_same_text_gives_the_same_row_and_no_text_no_row(self) -> None:
        embedder = self.make()
        first, second = np.asarray(embedder.embed(["migraine", "migraine"]))
        assert np.allclose(first, second, atol=1e-5)
        assert not np.allclose(first, np.asarray(embedder.embed(["warfarin"]))[0], atol=1e-3)
        assert np.asarray(embedder.embed([])).shape[0] == 0
