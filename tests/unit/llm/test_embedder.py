"""The ONNX MiniLM embedder, run for real on the shared model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from metakg.config import EmbedderSettings
from metakg.errors import EmbeddingError
from metakg.llm import minilm_onnx
from metakg.llm.embedder import Embedder, LazyEmbedder, OnnxEmbedder, resolve_model_dir


def test_vectors_are_unit_length_and_meaningful(minilm: OnnxEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    vectors = minilm.embed(["dog", "puppy", "stock market crash"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3


def test_batching_and_order_do_not_change_results(model_dir: Path) -> None:
    texts = ["a", "a much longer sentence about knowledge graphs and retrieval", "aspirin", "東京タワー", ""]
    one_by_one = np.vstack([OnnxEmbedder(model_dir, batch_size=1).embed([t]) for t in texts])
    batched = OnnxEmbedder(model_dir, batch_size=2).embed(texts)
    assert np.allclose(one_by_one, batched, atol=1e-4)


def test_empty_input(minilm: OnnxEmbedder) -> None:
    assert minilm.embed([]).shape == (0, 384)


def test_missing_model_is_explained(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="METAKG_EMBEDDER__MODEL_DIR"):
        OnnxEmbedder(tmp_path).embed(["x"])


def test_resolve_prefers_configured_then_cache(tmp_path: Path, model_dir: Path) -> None:
    assert resolve_model_dir(EmbedderSettings(model_dir=model_dir), tmp_path) == model_dir
    cached = tmp_path / "models" / "all-MiniLM-L6-v2"
    cached.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (cached / name).symlink_to(model_dir / name)
    assert resolve_model_dir(EmbedderSettings(), tmp_path) == cached


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on an install without the model's package: the model is downloaded."""
    monkeypatch.setattr(minilm_onnx, "package_folder", lambda: None)


@pytest.mark.usefixtures("no_package")
def test_download_failure_is_explained(tmp_path: Path) -> None:
    settings = EmbedderSettings(model_url="http://127.0.0.1:9/model.onnx", tokenizer_url="http://127.0.0.1:9/t.json")
    with pytest.raises(EmbeddingError, match="download of"):
        resolve_model_dir(settings, tmp_path)
    assert not list((tmp_path / "models").rglob("*.part"))


@pytest.mark.usefixtures("no_package")
def test_model_is_downloaded_once_into_the_cache(
    tmp_path: Path, model_dir: Path, serve_dir: Callable[[Path], str]
) -> None:
    base = serve_dir(model_dir)
    settings = EmbedderSettings(model_url=f"{base}/model.onnx", tokenizer_url=f"{base}/tokenizer.json")
    messages: list[str] = []
    folder = resolve_model_dir(settings, tmp_path, say=messages.append)
    assert folder == tmp_path / "models" / "all-MiniLM-L6-v2"
    assert (folder / "model.onnx").stat().st_size == (model_dir / "model.onnx").stat().st_size
    assert len(messages) == 2 and all("downloading" in m for m in messages)
    vectors = OnnxEmbedder(folder).embed(["aspirin"])
    assert np.allclose(vectors, OnnxEmbedder(model_dir).embed(["aspirin"]))
    assert resolve_model_dir(settings, tmp_path, say=messages.append) == folder
    assert len(messages) == 2  # nothing downloaded the second time


def test_lazy_embedders_of_one_model_share_its_session(model_dir: Path) -> None:
    settings = EmbedderSettings(model_dir=model_dir)
    store_side, context_side = LazyEmbedder(settings, model_dir), LazyEmbedder(settings, model_dir)
    assert store_side._get() is context_side._get()  # one ONNX session per process, not one per user
    other = LazyEmbedder(settings.model_copy(update={"batch_size": 8}), model_dir)
    assert other._get() is not store_side._get()


@pytest.mark.usefixtures("no_package")
def test_lazy_embedder_remembers_a_failed_download(tmp_path: Path) -> None:
    settings = EmbedderSettings(model_url="http://127.0.0.1:9/model.onnx", tokenizer_url="http://127.0.0.1:9/t.json")
    messages: list[str] = []
    lazy = LazyEmbedder(settings, tmp_path, progress=messages.append)
    for _ in range(3):  # one download attempt, then the same error at once (an eval of 700 questions)
        with pytest.raises(EmbeddingError, match="download of"):
            lazy.embed(["x"])
    assert len(messages) == 1
