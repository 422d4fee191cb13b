"""MLX checkpoints as mlx-lm writes them, loaded without conversion: a directory with config.json (its
"quantization": group_size, bits), model*.safetensors (each quantized matrix as .weight (uint32), .scales and
.biases: MLX's affine format, which is mtlinv's own), tokenizer.json and tokenizer_config.json.

Architectures (config.json's model_type): llama (with Llama 3's rope_scaling), qwen2 (q/k/v projection biases)
and qwen3 (per-head RMS norms of q and k before RoPE), with tied or untied embeddings.

The quantized matrices go to the device as they are, with one lossless change: mlx-lm's llama and qwen apply RoPE
to the halves of each head (x[i], x[i + D/2]), as Hugging Face's weights expect, while mtlinv's decoder rotates
interleaved pairs (x[2i], x[2i+1]), as GGUF's permuted llama weights expect; permuting the rows of q and k per head
(rows are whole outputs: their codes, scales and biases move together) turns one into the other, as llama.cpp's
converter does. The q and k biases and the q/k norm weights (one value per row of a head) move with their rows.
"""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

from .. import quant
from .gguf_model import GGUFModelError, LlamaConfig, interleave_rope_rows
from .reference import LayerWeights, LlamaWeights
from .rope_scaling import RopeScalingError, scaled_frequencies
from .tokenizer import Tokenizer

# safetensors dtype names -> NumPy dtypes (bfloat16 through ml_dtypes: NumPy has none of its own).
_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "U32": np.uint32, "I32": np.int32,
           "U8": np.uint8, "I64": np.int64}
SUPPORTED_ARCHITECTURES = ("llama", "qwen2", "qwen3")
# What each architecture adds to a llama layer, by mlx-lm's tensor names under self_attn.
QKV_BIASES = {"qwen2": ("q_proj.bias", "k_proj.bias", "v_proj.bias")}
QK_NORMS = {"qwen3": ("q_norm.weight", "k_norm.weight")}


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
    # What mlx-lm's classes of these architectures would run and the decoder does not: refused by name.
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        raise MLXCheckpointError(f"{path}: projection biases (attention_bias/mlp_bias) of model_type {arch!r} are "
                                 f"not supported")
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise MLXCheckpointError(f"{path}: partial RoPE (partial_rotary_factor={cfg['partial_rotary_factor']!r}) "
                                 f"is not supported")
    if cfg.get("use_sliding_window"):
        raise MLXCheckpointError(f"{path}: sliding-window attention (use_sliding_window) is not supported")
    if cfg.get("rope_traditional"):
        raise MLXCheckpointError(f"{path}: rope_traditional (RoPE on interleaved pairs of HF-order rows) is not "
                                 f"supported")
    try:
        n_heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        head_dim = int(cfg.get("head_dim") or hidden // n_heads)
        # transformers >= 5 nests rope_theta and the scaling under rope_parameters (mlx-lm reads both forms).
        nested = cfg.get("rope_parameters") or {}
        theta = float(cfg.get("rope_theta") or nested.get("rope_theta", 10000.0))
        config = LlamaConfig(
            n_layers=int(cfg["num_hidden_layers"]), n_heads=n_heads,
            n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads), hidden=hidden,
            ffn=int(cfg["intermediate_size"]), head_dim=head_dim, rope_theta=theta,
            rms_eps=float(cfg["rms_norm_eps"]), vocab=int(cfg["vocab_size"]),
            context=int(cfg.get("max_position_embeddings", 2048)),
            rope_freqs=scaled_frequencies(head_dim, theta, cfg.get("rope_scaling") or nested))
    except RopeScalingError as e:
        raise MLXCheckpointError(f"{path}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise MLXCheckpointError(f"{path / 'config.json'}: missing or bad key {e}") from None
    return cfg, config


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

    def attention_extras(self, i: int) -> dict[str, np.ndarray]:
        """Layer i's q/k/v biases (bq, bk, bv) and q/k norms (q_norm, k_norm) as the architecture has them, float32,
        q's and k's in the interleaved RoPE order of their rows (the names of reference.LayerWeights)."""
        arch, c = self.raw["model_type"], self.config
        prefix = f"model.layers.{i}.self_attn"
        extras = {}
        for key, name, heads in zip(("bq", "bk", "bv"), QKV_BIASES.get(arch, ()), (c.n_heads, c.n_kv_heads, None)):
            b = np.asarray(self.get(f"{prefix}.{name}")).astype(np.float32)
            extras[key] = interleave_rope_rows(b, heads) if heads else b
        for key, name in zip(("q_norm", "k_norm"), QK_NORMS.get(arch, ())):
            extras[key] = interleave_rope_rows(np.asarray(self.get(f"{prefix}.{name}")).astype(np.float32), 1)
        return extras

    def reference_weights(self) -> LlamaWeights:
        """The float64 weights of the reference decoder (mtlinv.model.reference), dequantized with MLX's formula,
        q and k rows (and their biases, norms) in the interleaved RoPE order."""
        c = self.config

        def f64(prefix, heads=None):
            w = self.dense(prefix).astype(np.float64)
            return interleave_rope_rows(w, heads) if heads else w

        def layer(i):
            p = f"model.layers.{i}"
            extras = {k: v.astype(np.float64) for k, v in self.attention_extras(i).items()}
            return LayerWeights(
                np.asarray(self.get(f"{p}.input_layernorm.weight"), np.float64),
                f64(f"{p}.self_attn.q_proj", c.n_heads), f64(f"{p}.self_attn.k_proj", c.n_kv_heads),
                f64(f"{p}.self_attn.v_proj"), f64(f"{p}.self_attn.o_proj"),
                np.asarray(self.get(f"{p}.post_attention_layernorm.weight"), np.float64),
                f64(f"{p}.mlp.gate_proj"), f64(f"{p}.mlp.up_proj"), f64(f"{p}.mlp.down_proj"), **extras)

        embd = f64("model.embed_tokens")
        return LlamaWeights(c, embd, tuple(layer(i) for i in range(c.n_layers)),
                            np.asarray(self.get("model.norm.weight"), np.float64),
                            embd if self.tied else f64("lm_head"))

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
