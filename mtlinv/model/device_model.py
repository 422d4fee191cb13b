"""The llama decoder on mtlinv ops: every step of the forward pass runs on the active device, activations in
bfloat16, weights as imported losslessly from the GGUF blocks into mtlinv's affine format.

With ``mtlinv.set_limit(L)`` and M <= L tokens per call, every op is row-invariant, so the logits of a position
have the same bits whether it is decoded alone (M = 1) or verified among k + 1 positions — which is what makes
greedy speculative decoding reproduce greedy decoding exactly.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import mtlinv

from .. import gguf_blocks, gguf_kquants, quant
from .._kinds import is_int
from .gguf_model import GGUFModel, GGUFModelError, GGUFTensor, LlamaConfig
from .reference import LlamaWeights

ACTIVATION = ml_dtypes.bfloat16
# GGUF scales (float16 d, m) mostly do not fit bfloat16's 8 significant bits. The legacy types keep them in float16
# where it holds every scale and bias (qgemv's float16-scale kernels beside bfloat16 x, at these widths); float32
# holds any, at 4 and 8 bits.
SCALE_DTYPE = np.float32
HALF_SCALE_BITS = (4, 5, 8)

_IMPORTERS = {
    "Q4_0": (gguf_blocks.q4_0_to_affine, 4),
    "Q4_1": (gguf_blocks.q4_1_to_affine, 4),
    "Q8_0": (gguf_blocks.q8_0_to_affine, 8),
}


@dataclass(frozen=True)
class QuantLinear:
    """A projection y = x @ W.T with W [N, K] in the affine format (group 32 from GGUF, 16 where a Q6_K tensor is
    part of it) on the device. Several of one input (q, k and v; gate and up) are stacked by rows into one, so that
    one call computes them all."""

    wq: mtlinv.Tensor
    scales: mtlinv.Tensor
    biases: mtlinv.Tensor
    bits: int
    group_size: int = gguf_blocks.QK
    bias: mtlinv.Tensor | None = None  # [N] in the activation dtype, added to y (Qwen 2's q|k|v)
    # The super-block form's factors (GGUF's K-quants at their own bytes: int8 scale and bias codes), or None.
    supers: mtlinv.Tensor | None = None

    @classmethod
    def from_gguf(cls, *tensors: GGUFTensor, compact: bool = True) -> QuantLinear:
        """The GGUF tensors' rows stacked, imported losslessly. Parts of different widths (Q4 and Q8 blocks) are all
        stored at the widest: a 4-bit code is the same value as an 8-bit code, with the same scale and bias; parts of
        different group sizes (Q4_K and Q6_K) at the smallest, each scale and bias repeated over the smaller
        groups. K-quant tensors alone (Q4_K, Q5_K, Q6_K) stay in the super-block form (gguf_kquants.to_super: about
        their blocks' own bytes, the same weights), stacked the same way; the other types keep their float16 scales
        where float16 holds every scale and bias, else float32. With compact=False every type takes the float32-scale
        affine import (the same weights at more bytes: benchmarks compare the two)."""
        if compact and all(t.ggml_type.name.lower() in gguf_kquants.SUPER_KINDS for t in tensors):
            return cls._upload_super([gguf_kquants.to_super(t.data, t.shape, t.ggml_type.name.lower())
                                      for t in tensors])
        return cls._upload([_import_affine(t, half=compact) for t in tensors])

    @classmethod
    def from_float(cls, *ws, bits: int = 8) -> QuantLinear:
        """Float weights [N_i, K], stacked by rows and quantized with mtlinv.quant (MLX's affine format, float32
        scales)."""
        w = np.concatenate([np.asarray(w, np.float32) for w in ws])
        return cls._upload([(*quant.quantize(w, group_size=gguf_blocks.QK, bits=bits), bits, gguf_blocks.QK)])

    @classmethod
    def from_affine(cls, *parts, group_size: int, bits: int) -> QuantLinear:
        """Matrices already in the affine format ((wq, scales, biases) each, as MLX stores them), stacked by rows.
        Scales and biases in the activation dtype (bfloat16, as mlx-lm saves them) stay as they are, and qgemv
        computes MLX's own bfloat16 weights; others are widened to float32, exactly."""
        def dtype(a):
            return a if a.dtype == ACTIVATION else a.astype(SCALE_DTYPE)
        return cls._upload([(wq, dtype(s), dtype(b), bits, group_size) for wq, s, b in parts])

    @classmethod
    def _upload(cls, parts) -> QuantLinear:
        """The parts ((wq, scales, biases, bits, group_size) each) stacked by rows, on the device: in the tile
        layout (mtlinv.quant.tile) where the device has matrix units and the weight allows it: the same bits, 8-20%
        less time on an H200 at 4 bits."""
        bits = max(part[3] for part in parts)
        group_size = min(part[4] for part in parts)
        # One scale dtype for the stack: float16 where every part has it, else float32 (exact for either), unless
        # the parts keep x's own (MLX's bfloat16).
        dtypes = {part[1].dtype for part in parts}
        scale_dtype = dtypes.pop() if len(dtypes) == 1 else np.dtype(SCALE_DTYPE)
        if scale_dtype == np.float32 and bits not in (4, 8) or group_size == 16:
            # qgemv takes float32 scales with 4- or 8-bit codes only, and group 16 with 8-bit codes only; a 5- or
            # 6-bit code is the same value as an 8-bit one (same scale and bias), so Q5_* and Q6_K blocks stay exact
            # at 8 bits a weight instead of 5 or 6.
            bits = 8
        wq = _stack_codes([part[0] for part in parts], [part[3] for part in parts], bits)
        scales, biases = (_stack_groups([part[i] for part in parts], [part[4] for part in parts], group_size)
                          .astype(scale_dtype) for i in (1, 2))
        if mtlinv.device_info()["matrix_units"] and bits in (4, 8) and wq.shape[0] % quant.TILE_ROWS == 0:
            wq, scales, biases = quant.tile(wq, scales, biases, group_size, bits)
        return cls(mtlinv.asarray(wq), mtlinv.asarray(scales), mtlinv.asarray(biases), bits, group_size)

    @classmethod
    def _upload_super(cls, parts) -> QuantLinear:
        """_upload for parts in the super-block form ((wq, scales, biases, supers, bits, group_size) each): at the
        widest width and the smallest group (Q4_K with Q6_K: 6 bits, group 16, each code repeated over two
        groups), the combinations qgemv is built for; in the tile layout where the device has matrix units (the
        row layout's bits in less time: docs/models.md)."""
        bits = max(part[4] for part in parts)
        group_size = min(part[5] for part in parts)
        wq = _stack_codes([p[0] for p in parts], [p[4] for p in parts], bits)
        scales, biases = (_stack_groups([p[i] for p in parts], [p[5] for p in parts], group_size) for i in (1, 2))
        supers = np.concatenate([p[3] for p in parts])
        if mtlinv.device_info()["matrix_units"] and wq.shape[0] % quant.TILE_ROWS == 0:
            wq, scales, biases, supers = quant.tile(wq, scales, biases, group_size, bits, supers=supers)
        scales = mtlinv.asarray(scales)
        # Q6_K's one code array serves as scales and biases (to_super): stored once, half a bit a weight less.
        shared = all(p[1] is p[2] for p in parts)
        return cls(mtlinv.asarray(wq), scales, scales if shared else mtlinv.asarray(biases), bits, group_size,
                   supers=mtlinv.asarray(supers))

    def with_bias(self, *parts) -> QuantLinear:
        """This projection with the bias y += concat(parts) (one per stacked part, float), in the activation dtype."""
        return dataclasses.replace(self, bias=_vector(np.concatenate([np.asarray(p, np.float32) for p in parts])))

    def __call__(self, x):
        return mtlinv.qgemv(x, self.wq, self.scales, self.biases, group_size=self.group_size, bits=self.bits,
                            bias=self.bias, supers=self.supers)


def _stack_codes(wqs, widths, bits):
    """Packed codes of stacked parts (each at its width) stacked by rows at `bits`, the widest: a narrower code is
    the same value at more bits."""
    k = wqs[0].shape[1] * 32 // widths[0]
    return np.concatenate([quant.pack(quant.unpack(w, b, k), bits) if b != bits else w for w, b in zip(wqs, widths)])


def _stack_groups(arrays, group_sizes, group_size):
    """Per-group arrays of stacked parts stacked by rows at `group_size`, the smallest: each value repeated over the
    smaller groups its own group covers."""
    return np.concatenate([np.repeat(a, g // group_size, axis=1) for a, g in zip(arrays, group_sizes)])


def _import_affine(t: GGUFTensor, half: bool = True):
    """(wq, scales, biases, bits, group_size) of a quantized GGUF tensor, as numpy arrays: scales and biases in
    float16 where `half` and float16 holds them all (the types whose scale is a block's float16 field), else in
    float32."""
    kind = t.ggml_type.name
    if kind in _IMPORTERS:
        importer, bits = _IMPORTERS[kind]
        wq, scales, biases = importer(t.data, t.shape, dtype=SCALE_DTYPE)
        return (wq, *_as_half(scales, biases, half and bits in HALF_SCALE_BITS), bits, gguf_blocks.QK)
    if kind.lower() in gguf_kquants.AFFINE_KINDS:
        wq, scales, biases, bits, group_size = gguf_kquants.to_affine(t.data, t.shape, kind.lower())
        half = half and kind.lower() not in gguf_kquants.SUPER_KINDS and bits in HALF_SCALE_BITS
        return (wq, *_as_half(scales, biases, half), bits, group_size)
    takes = ", ".join([*_IMPORTERS, *(k.upper() for k in gguf_kquants.AFFINE_KINDS)])
    raise GGUFModelError(f"{t.name}: type {kind}: the device model runs its projections through qgemv, which "
                         f"takes {takes} (the embedding and norms may be F32, F16, BF16 or any quantized type)")


def _as_half(scales, biases, half):
    """float32 scales and biases in float16 where `half` and float16 holds every value (a bias -8 d, -16 d or
    -128 d past float16's range does not), else as they are."""
    if half:
        with np.errstate(over="ignore"):
            pair = scales.astype(np.float16), biases.astype(np.float16)
        if all(np.array_equal(p.astype(np.float32), f) for p, f in zip(pair, (scales, biases))):
            return pair
    return scales, biases


def _vector(a) -> mtlinv.Tensor:
    """A vector (a GGUF tensor, or an array) in the activation dtype on the device."""
    return mtlinv.asarray(np.asarray(a.dequantize() if isinstance(a, GGUFTensor) else a).astype(ACTIVATION))


def _with_extras(qkv: QuantLinear, extras: dict) -> QuantLinear:
    """The stacked q|k|v projection with the layer's biases (bq, bk, bv), where it has them."""
    return qkv.with_bias(extras["bq"], extras["bk"], extras["bv"]) if "bq" in extras else qkv


def _norms(extras: dict) -> dict:
    """The layer's q/k norms (q_norm, k_norm) on the device, where it has them."""
    return {k: _vector(extras[k]) for k in ("q_norm", "k_norm") if k in extras}


@dataclass(frozen=True)
class DeviceLayer:
    attn_norm: mtlinv.Tensor
    w_qkv: QuantLinear  # q, k and v stacked: [(Hq + 2 Hkv) D, H]
    wo: QuantLinear
    ffn_norm: mtlinv.Tensor
    w_gate_up: QuantLinear  # gate and up stacked: [2 F, H]
    w_down: QuantLinear
    q_norm: mtlinv.Tensor | None = None  # [D]: Qwen 3's RMS norm of each query head before RoPE
    k_norm: mtlinv.Tensor | None = None  # [D]: of each key head

    def decoder_layer(self, k_cache, v_cache) -> dict:
        """The layer as mtlinv.Decoder takes it."""
        extra = {} if self.q_norm is None else dict(q_norm=self.q_norm, k_norm=self.k_norm)
        return dict(attn_norm=self.attn_norm, ffn_norm=self.ffn_norm, qkv=self.w_qkv, o=self.wo,
                    gate_up=self.w_gate_up, down=self.w_down, k_cache=k_cache, v_cache=v_cache, **extra)


@dataclass(frozen=True)
class DeviceWeights:
    config: LlamaConfig
    embedding: mtlinv.Tensor  # [V, H] bfloat16, for the lookup
    layers: tuple[DeviceLayer, ...]
    output_norm: mtlinv.Tensor
    output: QuantLinear  # [V, H]: the logits projection (the embedding itself when tied)

    @classmethod
    def from_gguf(cls, model: GGUFModel, progress=None) -> DeviceWeights:
        """Imports every tensor; `progress(done, total)` is called after each layer."""
        c = model.config
        layers = []
        for i in range(c.n_layers):
            def proj(*names):
                return QuantLinear.from_gguf(*(model.layer(i, n) for n in names))

            extras = {k: t.dequantize() for k, t in model.layer_extras(i).items()}
            layers.append(DeviceLayer(
                _vector(model.layer(i, "attn_norm")), _with_extras(proj("attn_q", "attn_k", "attn_v"), extras),
                proj("attn_output"), _vector(model.layer(i, "ffn_norm")), proj("ffn_gate", "ffn_up"),
                proj("ffn_down"), **_norms(extras)))
            if progress:
                progress(i + 1, c.n_layers)
        embedding = mtlinv.asarray(model.tensors["token_embd.weight"].dequantize().astype(ACTIVATION))
        return cls(c, embedding, tuple(layers), _vector(model.tensors["output_norm.weight"]),
                   QuantLinear.from_gguf(model.output))


    @classmethod
    def from_mlx(cls, ckpt, progress=None) -> DeviceWeights:
        """Imports an MLX checkpoint (mlx_checkpoint.Checkpoint): its quantized matrices as they are, q and k rows
        interleaved for the decoder's RoPE."""
        c = ckpt.config

        def proj(i, names, rope=None):
            parts = [ckpt.quantized(f"model.layers.{i}.{n}", rope.get(n) if rope else None) for n in names]
            return QuantLinear.from_affine(*parts, group_size=ckpt.group_size, bits=ckpt.bits)

        def vec(name):
            return mtlinv.asarray(np.asarray(ckpt.get(name)).astype(ACTIVATION))

        rope = {"self_attn.q_proj": c.n_heads, "self_attn.k_proj": c.n_kv_heads}
        layers = []
        for i in range(c.n_layers):
            extras = ckpt.attention_extras(i)
            qkv = proj(i, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), rope)
            layers.append(DeviceLayer(
                vec(f"model.layers.{i}.input_layernorm.weight"), _with_extras(qkv, extras),
                proj(i, ("self_attn.o_proj",)), vec(f"model.layers.{i}.post_attention_layernorm.weight"),
                proj(i, ("mlp.gate_proj", "mlp.up_proj")), proj(i, ("mlp.down_proj",)), **_norms(extras)))
            if progress:
                progress(i + 1, c.n_layers)
        head = "model.embed_tokens" if ckpt.tied else "lm_head"
        output = QuantLinear.from_affine(ckpt.quantized(head), group_size=ckpt.group_size, bits=ckpt.bits)
        embedding = mtlinv.asarray(ckpt.dense("model.embed_tokens").astype(ACTIVATION))
        return cls(c, embedding, tuple(layers), vec("model.norm.weight"), output)

    @classmethod
    def from_reference(cls, w: LlamaWeights, bits: int = 8) -> DeviceWeights:
        """Device weights from float64 reference weights (a model built in memory), quantized to `bits`."""
        def vec(a):
            return mtlinv.asarray(np.asarray(a).astype(ACTIVATION))

        def qkv(l):
            linear = QuantLinear.from_float(l.wq, l.wk, l.wv, bits=bits)
            return linear if l.bq is None else linear.with_bias(l.bq, l.bk, l.bv)

        layers = tuple(DeviceLayer(vec(l.attn_norm), qkv(l), QuantLinear.from_float(l.wo, bits=bits), vec(l.ffn_norm),
                                   QuantLinear.from_float(l.w_gate, l.w_up, bits=bits),
                                   QuantLinear.from_float(l.w_down, bits=bits),
                                   *(None if n is None else vec(n) for n in (l.q_norm, l.k_norm)))
                       for l in w.layers)
        return cls(w.config, vec(w.tok_embd), layers, vec(w.output_norm), QuantLinear.from_float(w.output, bits=bits))


class DeviceModel:
    """A DecoderModel (mtlinv.model.decoding) whose forward pass runs on the active mtlinv device.

    capacity: KV-cache positions preallocated per layer. skip_layers: layers this instance leaves out (a cheap
    draft sharing the target's weights). Each instance owns its KV cache.
    """

    def __init__(self, weights: DeviceWeights, capacity: int, skip_layers: Iterable[int] = ()):
        c = weights.config
        if not is_int(capacity) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.weights = weights
        self.capacity = int(capacity)
        self.skip_layers = frozenset(skip_layers)
        if not self.skip_layers <= set(range(c.n_layers)):
            raise ValueError(f"skip_layers {sorted(self.skip_layers)} outside 0..{c.n_layers - 1}")
        shape = (c.n_kv_heads, capacity, c.head_dim)  # per layer, as qkv_to_heads writes them and sdpa reads them
        self._k, self._v = ([None if i in self.skip_layers else mtlinv.asarray(np.zeros(shape, ACTIVATION))
                             for i in range(c.n_layers)] for _ in range(2))  # None: a layer this model skips
        # The forward runs in C++ (mtlinv.Decoder): with ten op calls a layer from Python, a step of this
        # host-bound loop took 1.3-1.4x as long on an H200 (docs/decisions.md, "Decoder step: host side").
        layers = [layer.decoder_layer(self._k[i], self._v[i])
                  for i, layer in enumerate(weights.layers) if i not in self.skip_layers]
        self._decoder = mtlinv.Decoder(n_heads=c.n_heads, rope_theta=c.rope_theta, rms_eps=c.rms_eps,
                                       embedding=weights.embedding, layers=layers, output_norm=weights.output_norm,
                                       output=weights.output, rope_freqs=c.rope_freqs)
        self.kv_len = 0

    def rollback(self, n_valid: int) -> None:
        """Keep the first n_valid cache positions; later ones are overwritten by the next forward."""
        if not 0 <= n_valid <= self.kv_len:
            raise ValueError(f"rollback({n_valid}) with {self.kv_len} cached positions")
        self.kv_len = n_valid

    def forward(self, tokens: Sequence[int], start_pos: int) -> np.ndarray:
        """Logits [M, V] (float32) for tokens at positions start_pos.. (== the cache length)."""
        return np.asarray(self.forward_on_device(tokens, start_pos)).astype(np.float32)

    def forward_on_device(self, tokens: Sequence[int], start_pos: int) -> mtlinv.Tensor:
        """forward's logits [M, V] (bfloat16) left on the device: on a GPU the call returns once its kernels are
        queued (benchmarks/profile_decode.py times the two apart)."""
        if start_pos != self.kv_len:
            raise ValueError(f"forward at start_pos={start_pos} but the cache holds {self.kv_len} positions")
        # The decoder checks the rest (integer ids in the vocabulary, M >= 1 within the capacity) before any work,
        # raising InvalidArgumentError, a ValueError; the cache length moves only once it has run.
        logits = self._decoder.forward(tokens, start_pos)
        self.kv_len = start_pos + len(tokens)
        return logits


def forward_by_ops(weights: DeviceWeights, k_caches, v_caches, tokens: Sequence[int], start: int,
                   skip_layers: Iterable[int] = ()) -> mtlinv.Tensor:
    """DeviceModel's forward as Python op calls, one per op (the loop before it moved into mtlinv.Decoder): the
    oracle of the Decoder's bits (tests/model/test_native_decoder.py) and the baseline of its host time
    (benchmarks/profile_decode.py times the two). k_caches and v_caches: indexed by layer, a [Hkv, C, D] Tensor for
    each layer not skipped."""
    c = weights.config
    skip = frozenset(skip_layers)
    layers = [(i, layer) for i, layer in enumerate(weights.layers) if i not in skip]
    norms = [layer.attn_norm for _, layer in layers] + [weights.output_norm]
    m = len(tokens)
    x = mtlinv.embedding(weights.embedding, np.asarray(tokens))
    h = mtlinv.rms_norm(x, norms[0], c.rms_eps)
    for (i, layer), next_norm in zip(layers, norms[1:]):
        qkv = layer.w_qkv(h)
        if layer.q_norm is not None:
            qkv = mtlinv.qk_rms_norm(qkv, c.n_heads, c.n_kv_heads, layer.q_norm, layer.k_norm, c.rms_eps)
        q = mtlinv.qkv_to_heads(qkv, c.n_heads, k_caches[i], v_caches[i], start, start, c.rope_theta, c.rope_freqs)
        o = mtlinv.sdpa(q, k_caches[i], v_caches[i], causal=True, kv_len=start + m)
        x, h = mtlinv.add_rms_norm(x, layer.wo(mtlinv.heads_to_rows(o)), layer.ffn_norm, c.rms_eps)
        x, h = mtlinv.add_rms_norm(x, layer.w_down(mtlinv.swiglu_halves(layer.w_gate_up(h))), next_norm, c.rms_eps)
    return weights.output(h)
