"""Read a llama-architecture GGUF file: hyperparameters, tokenizer metadata and raw weight blocks.

Tensors stay as GGUF stores them (quantized blocks, memory-mapped) so the device path can import them
losslessly; `GGUFTensor.dequantize` gives float32 for the NumPy reference.

RoPE convention of the stored weights: llama.cpp's HF converter permutes the rows of `attn_q` and `attn_k`
(per head, it interleaves the two halves of the head dimension), turning HF's rotate-half RoPE, which pairs
(x[i], x[i + D/2]), into ggml's "normal" RoPE (mode 0), which pairs (x[2i], x[2i+1]). So the rows as stored
here need RoPE on **interleaved pairs**; applying rotate-half to them gives a model that talks nonsense.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import Any

import gguf
import numpy as np

QType = gguf.GGMLQuantizationType

SUPPORTED_TYPES = frozenset({QType.F32, QType.F16, QType.BF16, QType.Q4_0, QType.Q4_1, QType.Q8_0})

LAYER_TENSORS = (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
)


class GGUFModelError(ValueError):
    """The file is not a llama GGUF this package can run (names the offending key, tensor or type)."""


@dataclass(frozen=True)
class LlamaConfig:
    """Hyperparameters of a llama decoder, as read from `llama.*` keys."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    hidden: int
    ffn: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    vocab: int
    context: int


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor as stored.

    shape: NumPy order, e.g. (N, K) for a weight applied as y = x @ W.T (GGUF lists it reversed as [K, N]).
    data: for F32/F16 the values with that shape; for BF16 and quantized types the raw bytes, uint8
          [N, K / block_size * block_bytes] (one row of blocks per output row).
    """

    name: str
    ggml_type: QType
    shape: tuple[int, ...]
    data: np.ndarray

    def dequantize(self) -> np.ndarray:
        """float32 array of `shape`."""
        return np.asarray(gguf.quants.dequantize(self.data, self.ggml_type), dtype=np.float32).reshape(self.shape)


@dataclass(frozen=True)
class GGUFModel:
    """A loaded llama GGUF. `metadata` holds every key/value of the file (tokenizer.ggml.* included)."""

    path: str
    config: LlamaConfig
    tensors: dict[str, GGUFTensor]
    metadata: dict[str, Any]

    def layer(self, i: int, name: str) -> GGUFTensor:
        """Tensor `blk.{i}.{name}.weight`, e.g. layer(0, "attn_q")."""
        return self.tensors[f"blk.{i}.{name}.weight"]

    @property
    def output(self) -> GGUFTensor:
        """The logits matrix [vocab, hidden]; tied to the token embedding when the file has no `output.weight`."""
        return self.tensors.get("output.weight", self.tensors["token_embd.weight"])


def load_gguf(path: str | PathLike) -> GGUFModel:
    """Read and validate a llama GGUF. Raises GGUFModelError naming what does not fit."""
    reader = gguf.GGUFReader(path)
    metadata = {key: field.contents() for key, field in reader.fields.items()}
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise GGUFModelError(f"{path}: architecture is {arch!r}; only 'llama' is supported")
    tensors = {}
    for t in reader.tensors:
        qtype = QType(t.tensor_type)
        if qtype not in SUPPORTED_TYPES:
            names = ", ".join(sorted(q.name for q in SUPPORTED_TYPES))
            raise GGUFModelError(f"{path}: tensor {t.name!r} has type {qtype.name}; supported types: {names}")
        tensors[t.name] = GGUFTensor(t.name, qtype, tuple(int(d) for d in reversed(t.shape)), t.data)
    config = _read_config(metadata, tensors, path)
    _check_tensors(config, tensors, path)
    return GGUFModel(str(path), config, tensors, metadata)


def _read_config(metadata: dict[str, Any], tensors: dict[str, GGUFTensor], path) -> LlamaConfig:
    def key(name: str, default: Any = None) -> Any:
        value = metadata.get(f"llama.{name}", default)
        if value is None:
            raise GGUFModelError(f"{path}: missing metadata key llama.{name}")
        return value

    hidden = int(key("embedding_length"))
    n_heads = int(key("attention.head_count"))
    head_dim = int(key("attention.key_length", hidden // n_heads))
    rope_dims = int(key("rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise GGUFModelError(f"{path}: partial RoPE ({rope_dims} of {head_dim} dims) is not supported")
    # Older files omit vocab_size; the embedding's row count is the truth either way.
    embd = tensors.get("token_embd.weight")
    vocab = int(key("vocab_size", embd.shape[0] if embd is not None else None))
    return LlamaConfig(
        n_layers=int(key("block_count")),
        n_heads=n_heads,
        n_kv_heads=int(key("attention.head_count_kv", n_heads)),
        hidden=hidden,
        ffn=int(key("feed_forward_length")),
        head_dim=head_dim,
        rope_theta=float(key("rope.freq_base", 10000.0)),
        rms_eps=float(key("attention.layer_norm_rms_epsilon")),
        vocab=vocab,
        context=int(key("context_length")),
    )


def _check_tensors(c: LlamaConfig, tensors: dict[str, GGUFTensor], path) -> None:
    q_dim, kv_dim = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    expected = {
        "token_embd.weight": (c.vocab, c.hidden),
        "output_norm.weight": (c.hidden,),
    }
    if "output.weight" in tensors:
        expected["output.weight"] = (c.vocab, c.hidden)
    per_layer = {
        "attn_norm": (c.hidden,), "attn_q": (q_dim, c.hidden), "attn_k": (kv_dim, c.hidden),
        "attn_v": (kv_dim, c.hidden), "attn_output": (c.hidden, q_dim), "ffn_norm": (c.hidden,),
        "ffn_gate": (c.ffn, c.hidden), "ffn_up": (c.ffn, c.hidden), "ffn_down": (c.hidden, c.ffn),
    }
    for i in range(c.n_layers):
        expected.update({f"blk.{i}.{name}.weight": per_layer[name] for name in LAYER_TENSORS})
    for name, shape in expected.items():
        if name not in tensors:
            raise GGUFModelError(f"{path}: missing tensor {name!r}")
        if tensors[name].shape != shape:
            raise GGUFModelError(f"{path}: tensor {name!r} has shape {tensors[name].shape}, expected {shape}")
