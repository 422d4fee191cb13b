"""MLX checkpoints as mlx-lm writes them, loaded without conversion: a directory with config.json (its
"quantization": group_size, bits), model*.safetensors (each quantized matrix as .weight (uint32), .scales and
.biases: MLX's affine format, which is mtlinv's own), tokenizer.json and tokenizer_config.json.

The quantized matrices go to the device as they are, with one lossless change: mlx-lm's llama applies RoPE to the
halves of each head (x[i], x[i + D/2]), as Hugging Face's weights expect, while mtlinv's decoder rotates
interleaved pairs (x[2i], x[2i+1]), as GGUF's permuted weights expect; permuting the rows of q and k per head
(rows are whole outputs: their codes, scales and biases move together) turns one into the other, as llama.cpp's
converter does.
"""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

from .. import quant
from .gguf_model import GGUFModelError, LlamaConfig
from .tokenizer import Tokenizer

# safetensors dtype names -> NumPy dtypes (bfloat16 through ml_dtypes: NumPy has none of its own).
_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "U32": np.uint32, "I32": np.int32,
           "U8": np.uint8, "I64": np.int64}
SUPPORTED_ARCHITECTURES = ("llama",)


class MLXCheckpointError(GGUFModelError):
    """The directory is not an MLX checkpoint this package can run (names the file, key or tensor)."""


def is_checkpoint(path) -> bool:
    return Path(path).is_dir() and (Path(path) / "config.json").is_file()


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file, memory-mapped: an 8-byte header length, a JSON header of name ->
    dtype, shape, [begin, end) offsets into the data after it."""
    data = np.memmap(path, np.uint8, mode="r")
    if data.size < 8:
        raise MLXCheckpointError(f"{path}: too short for a safetensors file")
    n = struct.unpack("<Q", bytes(data[:8]))[0]
    if n > data.size - 8:
        raise MLXCheckpointError(f"{path}: header of {n} bytes passes the end of the file")
    try:
        header = json.loads(bytes(data[8:8 + n]))
    except ValueError as e:
        raise MLXCheckpointError(f"{path}: the header is not JSON: {e}") from None
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise MLXCheckpointError(f"{path}: tensor {name!r} has dtype {info.get('dtype')!r}; supported: "
                                     f"{', '.join(_DTYPES)}")
        begin, end = (8 + n + int(o) for o in info["data_offsets"])
        shape = tuple(int(d) for d in info["shape"])
        if end > data.size or end - begin != math.prod(shape) * np.dtype(dtype).itemsize:
            raise MLXCheckpointError(f"{path}: tensor {name!r}: offsets do not fit its shape {shape} or the file")
        tensors[name] = data[begin:end].view(dtype).reshape(shape)
    return tensors


def read_config(path: Path) -> tuple[dict, LlamaConfig]:
    """config.json and the decoder's hyperparameters; refuses an architecture or feature it cannot run, by name."""
    try:
        cfg = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise MLXCheckpointError(f"{path / 'config.json'}: {e}") from None
    arch = cfg.get("model_type")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise MLXCheckpointError(f"{path}: model_type {arch!r} is not supported; supported: "
                                 f"{', '.join(SUPPORTED_ARCHITECTURES)}")
    if cfg.get("rope_scaling"):
        kind = cfg["rope_scaling"].get("rope_type", cfg["rope_scaling"].get("type"))
        raise MLXCheckpointError(f"{path}: rope_scaling {kind!r} (Llama 3's scaled RoPE and the like) is not "
                                 f"supported: the decoder's RoPE has one base frequency")
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        raise MLXCheckpointError(f"{path}: projection biases (attention_bias/mlp_bias) are not supported")
    try:
        n_heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        config = LlamaConfig(
            n_layers=int(cfg["num_hidden_layers"]), n_heads=n_heads,
            n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads), hidden=hidden,
            ffn=int(cfg["intermediate_size"]), head_dim=int(cfg.get("head_dim") or hidden // n_heads),
            rope_theta=float(cfg.get("rope_theta", 10000.0)), rms_eps=float(cfg["rms_norm_eps"]),
            vocab=int(cfg["vocab_size"]), context=int(cfg.get("max_position_embeddings", 2048)))
    except (KeyError, TypeError, ValueError) as e:
        raise MLXCheckpointError(f"{path / 'config.json'}: missing or bad key {e}") from None
    return cfg, config


def interleave_rope_rows(a: np.ndarray, n_heads: int) -> np.ndarray:
    """Rows of a q or k projection (or its scales, biases) from the rotate-half order to interleaved pairs: within
    each head, new row 2i + j is old row j * D/2 + i (llama.cpp's permute of Hugging Face weights)."""
    d = a.shape[0] // n_heads
    return a.reshape(n_heads, 2, d // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


class Checkpoint:
    """The tensors of an MLX checkpoint, by mlx-lm's names, and its quantization."""

    def __init__(self, path: Path):
        self.path = path
        self.raw, self.config = read_config(path)
        files = sorted(path.glob("model*.safetensors"))
        if not files:
            raise MLXCheckpointError(f"{path}: no model*.safetensors")
        self.tensors: dict[str, np.ndarray] = {}
        for f in files:
            self.tensors.update(read_safetensors(f))
        q = self.raw.get("quantization") or self.raw.get("quantization_config") or {}
        self.group_size, self.bits = q.get("group_size"), q.get("bits")
        if q and q.get("mode", "affine") != "affine":
            raise MLXCheckpointError(f"{path}: quantization mode {q.get('mode')!r}; only 'affine' is supported")
        self.tied = "lm_head.weight" not in self.tensors

    def get(self, name: str) -> np.ndarray:
        if name not in self.tensors:
            raise MLXCheckpointError(f"{self.path}: missing tensor {name!r}")
        return self.tensors[name]

    def quantized(self, prefix: str, rope_heads: int | None = None):
        """(wq, scales, biases) of `prefix`.weight/.scales/.biases; rows interleaved for RoPE when rope_heads."""
        if f"{prefix}.scales" not in self.tensors:
            raise MLXCheckpointError(f"{self.path}: {prefix} is not quantized (no {prefix}.scales); the device "
                                     f"model runs quantized projections")
        parts = [np.asarray(self.get(f"{prefix}.{s}")) for s in ("weight", "scales", "biases")]
        quant.check_params(self.group_size, self.bits)
        if rope_heads:
            parts = [interleave_rope_rows(p, rope_heads) for p in parts]
        return tuple(parts)

    def dense(self, prefix: str) -> np.ndarray:
        """A matrix or vector as float32, dequantized with MLX's own formula when stored quantized."""
        if f"{prefix}.scales" in self.tensors:
            wq, s, b = self.quantized(prefix)
            return quant.dequantize(wq, s, b, self.group_size, self.bits).astype(np.float32)
        return np.asarray(self.get(f"{prefix}.weight")).astype(np.float32)


def _token_string(value) -> str | None:
    """A special token as tokenizer_config.json gives it: a string, or a dict with its "content"."""
    return value.get("content") if isinstance(value, dict) else value


def read_tokenizer(path: Path, config: dict):
    """(Tokenizer, stop ids, chat template source or None, special token strings) of a checkpoint directory:
    tokenizer.json, tokenizer_config.json (its chat_template, or a chat_template.jinja file beside it), and the
    end-of-sequence ids of config.json."""
    try:
        tcfg = json.loads((path / "tokenizer_config.json").read_text())
    except FileNotFoundError:
        tcfg = {}
    except (OSError, ValueError) as e:
        raise MLXCheckpointError(f"{path / 'tokenizer_config.json'}: {e}") from None
    if not (path / "tokenizer.json").is_file():
        raise MLXCheckpointError(f"{path}: no tokenizer.json")
    special = {name: _token_string(tcfg[name]) for name in ("bos_token", "eos_token", "unk_token", "pad_token")
               if isinstance(_token_string(tcfg.get(name)), str)}
    probe = Tokenizer.from_file(path / "tokenizer.json", None, None)
    ids = {name: probe.token_id(tok) for name, tok in special.items()}
    eos = config.get("eos_token_id")
    stops = {int(i) for i in (eos if isinstance(eos, list) else [eos]) if i is not None}
    if ids.get("eos_token") is not None:
        stops.add(ids["eos_token"])
    bos = ids.get("bos_token", config.get("bos_token_id"))
    tokenizer = Tokenizer.from_file(path / "tokenizer.json", bos, min(stops) if stops else None)
    template = tcfg.get("chat_template")
    if template is None and (path / "chat_template.jinja").is_file():
        template = (path / "chat_template.jinja").read_text()
    return tokenizer, frozenset(stops), template, special
