"""Read a llama, qwen2 or qwen3 GGUF file: hyperparameters, tokenizer metadata and raw weight blocks.

Tensors stay as GGUF stores them (quantized blocks, memory-mapped) so the device path can import them
losslessly; `GGUFTensor.dequantize` gives float32 for the NumPy reference.

RoPE convention of the stored weights: llama.cpp's HF converter permutes the rows of a llama's `attn_q` and
`attn_k` (per head, it interleaves the two halves of the head dimension), turning HF's rotate-half RoPE, which
pairs (x[i], x[i + D/2]), into ggml's "normal" RoPE (mode 0), which pairs (x[2i], x[2i+1]). So the rows as stored
need RoPE on **interleaved pairs**; applying rotate-half to them gives a model that talks nonsense. Qwen 2 and
Qwen 3 files keep HF's row order (llama.cpp rotates them in its NEOX mode, on halves): the reader permutes their
q and k rows (with q's and k's biases and norm weights) as the converter permutes a llama's, whole rows of blocks,
so that every architecture reaches the decoder in the interleaved order.

Architectures: `llama` (with llama.cpp's `rope_freqs.weight`, the per-pair divisors its converter writes for
Llama 3's RoPE scaling, or `rope.scaling.type` linear), `qwen2` (q/k/v biases `attn_{q,k,v}.bias`), `qwen3`
(per-head norms `attn_q_norm`, `attn_k_norm`). A tensor the decoder would not use is refused by name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from os import PathLike
from typing import Any

import gguf
import numpy as np

from .._kinds import is_int, is_real
from .rope_scaling import RopeScalingError, base_frequencies, divided_frequencies

QType = gguf.GGMLQuantizationType

SUPPORTED_TYPES = frozenset({QType.F32, QType.F16, QType.BF16, QType.Q4_0, QType.Q4_1, QType.Q8_0, QType.Q5_0,
                             QType.Q5_1, QType.Q4_K, QType.Q5_K, QType.Q6_K})

LAYER_TENSORS = (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
)
# What each architecture's layers add to a llama's (tensor names after blk.N.), and whose q/k rows are stored in
# HF's rotate-half order (NEOX RoPE in llama.cpp) rather than permuted for interleaved pairs.
ARCH_LAYER_TENSORS = {"llama": (), "qwen2": ("attn_q.bias", "attn_k.bias", "attn_v.bias"),
                      "qwen3": ("attn_q_norm.weight", "attn_k_norm.weight")}
ROTATE_HALF_ARCHS = frozenset({"qwen2", "qwen3"})


class GGUFModelError(ValueError):
    """The file is not a GGUF this package can run (names the offending key, tensor or type)."""


@dataclass(frozen=True)
class LlamaConfig:
    """Hyperparameters of a llama-family decoder, as read from the `{arch}.*` keys (llama, qwen2, qwen3)."""

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
    # Pair j's RoPE frequency for a scaled RoPE (mtlinv.model.rope_scaling), float64; None: rope_theta^(-2j/D).
    rope_freqs: tuple[float, ...] | None = None


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
    """A loaded llama, qwen2 or qwen3 GGUF. `metadata` holds every key/value of the file (tokenizer.ggml.* included)."""

    path: str
    config: LlamaConfig
    tensors: dict[str, GGUFTensor]
    metadata: dict[str, Any]

    def layer(self, i: int, name: str) -> GGUFTensor:
        """Tensor `blk.{i}.{name}.weight`, e.g. layer(0, "attn_q"); a name with a dot as it is ("attn_q.bias")."""
        return self.tensors[f"blk.{i}.{name}" if "." in name else f"blk.{i}.{name}.weight"]

    def layer_extras(self, i: int) -> dict[str, GGUFTensor]:
        """Layer i's q/k/v biases (bq, bk, bv) and q/k norms (q_norm, k_norm), as its architecture has them (the
        names of reference.LayerWeights)."""
        keys = {"attn_q.bias": "bq", "attn_k.bias": "bk", "attn_v.bias": "bv", "attn_q_norm.weight": "q_norm",
                "attn_k_norm.weight": "k_norm"}
        return {keys[n]: self.layer(i, n) for n in ARCH_LAYER_TENSORS[self.metadata["general.architecture"]]}

    @property
    def output(self) -> GGUFTensor:
        """The logits matrix [vocab, hidden]; tied to the token embedding when the file has no `output.weight`."""
        return self.tensors.get("output.weight", self.tensors["token_embd.weight"])


class _BoundedReader(gguf.GGUFReader):
    """GGUFReader whose reads stop at the end of the file. The library's own returns fewer items (none past the end)
    than a header asks for, so a count of 2^40 in a truncated or corrupt file looped forever, growing its lists."""

    def _get(self, offset, dtype, count=1, override_order=None):
        end = int(offset) + np.dtype(dtype).itemsize * int(count)
        if int(count) < 0 or end > len(self.data):
            raise GGUFModelError(f"reading {int(count)} x {np.dtype(dtype)} at byte {offset} passes the end of the "
                                 f"file ({len(self.data)} bytes)")
        return super()._get(offset, dtype, count, override_order)

    def _get_field_parts(self, orig_offs, raw_type):
        """An array's declared length checked against the bytes left before its elements are read one by one (the
        library builds a Python list of them: a length of 2^40 exhausted memory before it reached the end)."""
        if raw_type == gguf.GGUFValueType.ARRAY:
            item_type = gguf.GGUFValueType(int(self._get(orig_offs, np.uint32)[0]))
            length = int(self._get(orig_offs + 4, np.uint64)[0])
            scalar = self.gguf_scalar_to_np.get(item_type)
            least = np.dtype(scalar).itemsize if scalar is not None else 8  # a string's or an array's length field
            if length * least > len(self.data) - orig_offs - 12:
                raise GGUFModelError(f"an array at byte {orig_offs} declares {length} {item_type.name} elements, "
                                     f"more than the file's remaining {len(self.data) - orig_offs - 12} bytes hold")
        return super()._get_field_parts(orig_offs, raw_type)


# What the gguf library raises on a file it cannot parse (a short read, a bad type code, bad UTF-8, a duplicate key).
_READ_ERRORS = (ValueError, IndexError, KeyError, TypeError, OverflowError, UnicodeDecodeError)


def load_gguf(path: str | PathLike) -> GGUFModel:
    """Read and validate a llama, qwen2 or qwen3 GGUF. Raises GGUFModelError naming what does not fit."""
    try:
        reader = _BoundedReader(path)
        metadata = {key: field.contents() for key, field in reader.fields.items()}
        raw_tensors = [(t.name, int(t.tensor_type), t.shape, t.data) for t in reader.tensors]
    except GGUFModelError as e:
        raise GGUFModelError(f"{path}: corrupt or truncated GGUF: {e}") from None
    except _READ_ERRORS as e:
        raise GGUFModelError(f"{path}: corrupt or truncated GGUF: {type(e).__name__}: {e}") from None
    arch = metadata.get("general.architecture")
    if arch not in ARCH_LAYER_TENSORS:
        raise GGUFModelError(f"{path}: architecture is {arch!r}; supported: {', '.join(ARCH_LAYER_TENSORS)}")
    tensors = {}
    for name, type_code, shape, data in raw_tensors:
        try:
            qtype = QType(type_code)
        except ValueError:
            raise GGUFModelError(f"{path}: tensor {name!r} has unknown type code {type_code}") from None
        if qtype not in SUPPORTED_TYPES:
            names = ", ".join(sorted(q.name for q in SUPPORTED_TYPES))
            raise GGUFModelError(f"{path}: tensor {name!r} has type {qtype.name}; supported types: {names}")
        tensors[name] = GGUFTensor(name, qtype, tuple(int(d) for d in reversed(shape)), data)
    config = _read_config(metadata, tensors, path, arch)
    _check_tensors(config, tensors, path, arch)
    if arch in ROTATE_HALF_ARCHS:
        tensors = _interleave_rope_rows(config, tensors)
    return GGUFModel(str(path), config, tensors, metadata)


def interleave_rope_rows(a: np.ndarray, n_heads: int) -> np.ndarray:
    """Rows of a q or k projection (or its bias, or a head's norm weight with n_heads 1) from the rotate-half order
    to interleaved pairs: within each head, new row 2i + j is old row j * D/2 + i (llama.cpp's permute of Hugging
    Face weights). Each row moves whole: its values, or its quantized blocks."""
    d = a.shape[0] // n_heads
    return a.reshape(n_heads, 2, d // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def _interleave_rope_rows(c: LlamaConfig, tensors: dict[str, GGUFTensor]) -> dict[str, GGUFTensor]:
    """A qwen file's tensors with q's and k's rows (biases, norms) in the interleaved RoPE order."""
    heads = {"attn_q": c.n_heads, "attn_k": c.n_kv_heads, "attn_q_norm": 1, "attn_k_norm": 1}
    out = dict(tensors)
    for name, t in tensors.items():
        m = re.fullmatch(r"blk\.\d+\.(\w+)\.(weight|bias)", name)
        if m and m.group(1) in heads:
            # Whole rows move: as [rows, bytes or values of a row], since a BF16 or quantized tensor's data is its
            # raw bytes (a 1-D one's too).
            data = np.asarray(t.data)
            rows = interleave_rope_rows(data.reshape(t.shape[0], -1), heads[m.group(1)]).reshape(data.shape)
            out[name] = GGUFTensor(name, t.ggml_type, t.shape, rows)
    return out


def _read_config(metadata: dict[str, Any], tensors: dict[str, GGUFTensor], path, arch: str) -> LlamaConfig:
    def value(name: str, default: Any) -> Any:
        v = metadata.get(f"{arch}.{name}", default)
        if v is None:
            raise GGUFModelError(f"{path}: missing metadata key {arch}.{name}")
        return v

    def count(name: str, default: Any = None) -> int:
        """A positive integer (a size or count), stored as an integer type."""
        v = value(name, default)
        if not is_int(v) or v < 1:
            raise GGUFModelError(f"{path}: {arch}.{name} must be a positive integer, got {v!r}")
        return int(v)

    def real(name: str, default: Any = None, positive: bool = False) -> float:
        v = value(name, default)
        if not is_real(v) or not math.isfinite(v) or v < 0 or (positive and v == 0):
            need = "a positive" if positive else "a non-negative"
            raise GGUFModelError(f"{path}: {arch}.{name} must be {need} finite number, got {v!r}")
        return float(v)

    hidden = count("embedding_length")
    n_heads = count("attention.head_count")
    n_kv_heads = count("attention.head_count_kv", n_heads)
    if n_heads % n_kv_heads != 0:
        raise GGUFModelError(f"{path}: {arch}.attention.head_count={n_heads} is not a multiple of "
                             f"{arch}.attention.head_count_kv={n_kv_heads}")
    head_dim = count("attention.key_length", max(hidden // n_heads, 1))
    rope_dims = count("rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        raise GGUFModelError(f"{path}: partial RoPE ({rope_dims} of {head_dim} dims) is not supported")
    theta = real("rope.freq_base", 10000.0, positive=True)
    # Older files omit vocab_size; the embedding's row count is the truth either way.
    embd = tensors.get("token_embd.weight")
    return LlamaConfig(
        n_layers=count("block_count"),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        hidden=hidden,
        ffn=count("feed_forward_length"),
        head_dim=head_dim,
        rope_theta=theta,
        rms_eps=real("attention.layer_norm_rms_epsilon"),
        vocab=count("vocab_size", embd.shape[0] if embd is not None else None),
        context=count("context_length"),
        rope_freqs=_rope_freqs(metadata, tensors, path, arch, head_dim, theta),
    )


def _rope_freqs(metadata, tensors, path, arch: str, head_dim: int, theta: float) -> tuple[float, ...] | None:
    """A scaled RoPE's frequency table: llama.cpp's rope_freqs.weight (Llama 3), or rope.scaling.type linear."""
    kind = metadata.get(f"{arch}.rope.scaling.type", "none")
    if kind not in ("none", "linear"):
        raise GGUFModelError(f"{path}: {arch}.rope.scaling.type {kind!r} is not supported; supported: none, linear, "
                             f"and llama.cpp's rope_freqs.weight (Llama 3)")
    factor = metadata.get(f"{arch}.rope.scaling.factor", 1.0)
    if kind == "linear" and (not is_real(factor) or not math.isfinite(factor) or factor < 1):
        raise GGUFModelError(f"{path}: {arch}.rope.scaling.factor must be a finite number of at least 1, got "
                             f"{factor!r}")
    divisors = tensors.get("rope_freqs.weight")
    if divisors is None:
        return tuple(base_frequencies(head_dim, theta) / factor) if kind == "linear" else None
    if kind == "linear":
        raise GGUFModelError(f"{path}: both rope_freqs.weight and {arch}.rope.scaling.type linear: which one "
                             f"applies is not defined")
    try:
        return divided_frequencies(head_dim, theta, divisors.dequantize().reshape(-1))
    except RopeScalingError as e:
        raise GGUFModelError(f"{path}: {e}") from None


def _check_tensors(c: LlamaConfig, tensors: dict[str, GGUFTensor], path, arch: str) -> None:
    # The layers the file holds must be exactly 0 .. block_count - 1: a block_count short of them would decode
    # with part of the model, silently, and a huge one would build its list of expected names first.
    layers = {int(m.group(1)) for name in tensors if (m := re.fullmatch(r"blk\.(\d+)\..*", name))}
    if len(layers) != c.n_layers or min(layers, default=0) != 0 or max(layers, default=-1) != c.n_layers - 1:
        held = f"{min(layers)}..{max(layers)} ({len(layers)} layers)" if layers else "none"
        raise GGUFModelError(f"{path}: {arch}.block_count={c.n_layers} but the file holds blk.* tensors of layers "
                             f"{held}")
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
    extras = {"attn_q.bias": (q_dim,), "attn_k.bias": (kv_dim,), "attn_v.bias": (kv_dim,),
              "attn_q_norm.weight": (c.head_dim,), "attn_k_norm.weight": (c.head_dim,)}
    if "rope_freqs.weight" in tensors:  # checked by _rope_freqs
        expected["rope_freqs.weight"] = tensors["rope_freqs.weight"].shape
    for i in range(c.n_layers):
        expected.update({f"blk.{i}.{name}.weight": per_layer[name] for name in LAYER_TENSORS})
        expected.update({f"blk.{i}.{name}": extras[name] for name in ARCH_LAYER_TENSORS[arch]})
    for name, shape in expected.items():
        if name not in tensors:
            raise GGUFModelError(f"{path}: missing tensor {name!r}")
        if tensors[name].shape != shape:
            raise GGUFModelError(f"{path}: tensor {name!r} has shape {tensors[name].shape}, expected {shape}")
    for name in tensors:  # one the decoder would leave out (a bias of a llama, a norm of a qwen2) changes the model
        if name not in expected:
            raise GGUFModelError(f"{path}: tensor {name!r} is not part of a {arch} decoder this package runs")
