"""A float64 NumPy llama decoder: the accuracy oracle for the device forward pass, and a model the decoding
loops can run without a GPU.

Notation: M = tokens in one forward call, L = keys in the cache, H = hidden, D = head dim, Hq/Hkv = query/KV heads,
F = FFN width, V = vocab. Weights are [out, in] as in the GGUF; a projection is x @ W.T.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .gguf_model import GGUFModel, LlamaConfig
from .rope_scaling import base_frequencies


@dataclass(frozen=True)
class LayerWeights:
    """One decoder layer, float64. wq [Hq*D, H] and wk [Hkv*D, H] rows as stored in GGUF (interleaved-pair RoPE);
    Qwen 2's q/k/v biases and Qwen 3's per-head q/k norms in the same order, None where the model has none."""

    attn_norm: np.ndarray  # [H]
    wq: np.ndarray  # [Hq*D, H]
    wk: np.ndarray  # [Hkv*D, H]
    wv: np.ndarray  # [Hkv*D, H]
    wo: np.ndarray  # [H, Hq*D]
    ffn_norm: np.ndarray  # [H]
    w_gate: np.ndarray  # [F, H]
    w_up: np.ndarray  # [F, H]
    w_down: np.ndarray  # [H, F]
    bq: np.ndarray | None = None  # [Hq*D]
    bk: np.ndarray | None = None  # [Hkv*D]
    bv: np.ndarray | None = None  # [Hkv*D]
    q_norm: np.ndarray | None = None  # [D]: RMS norm of each query head before RoPE
    k_norm: np.ndarray | None = None  # [D]: of each key head


@dataclass(frozen=True)
class LlamaWeights:
    """All weights of a llama decoder, float64; `output` is the embedding itself when the model ties them."""

    config: LlamaConfig
    tok_embd: np.ndarray  # [V, H]
    layers: tuple[LayerWeights, ...]
    output_norm: np.ndarray  # [H]
    output: np.ndarray  # [V, H]

    @classmethod
    def from_gguf(cls, model: GGUFModel) -> LlamaWeights:
        """Dequantize every tensor with the `gguf` package's own dequantizer (independent of mtlinv's importers,
        which this reference is meant to check) and widen to float64."""
        def f64(tensor):
            return tensor.dequantize().astype(np.float64)

        names = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                 "ffn_down")
        layers = tuple(LayerWeights(*(f64(model.layer(i, n)) for n in names),
                                    **{k: f64(t) for k, t in model.layer_extras(i).items()})
                       for i in range(model.config.n_layers))
        tok_embd = f64(model.tensors["token_embd.weight"])
        output = tok_embd if model.output.name == "token_embd.weight" else f64(model.output)
        return cls(model.config, tok_embd, layers, f64(model.tensors["output_norm.weight"]), output)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x [M, H] * weight [H] / rms(x) per row."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope_interleaved(x: np.ndarray, positions: np.ndarray, theta: float, freqs=None) -> np.ndarray:
    """Rotate pairs (x[..., 2i], x[..., 2i+1]) by angle pos * theta**(-2i/D) (ggml's "normal" RoPE, mode 0), or by
    pos * freqs[i] with a scaled RoPE's table.

    x [M, heads, D], positions [M] -> [M, heads, D].
    """
    d = x.shape[-1]
    freqs = base_frequencies(d, theta) if freqs is None else np.asarray(freqs, np.float64)  # [D/2]
    angles = positions[:, None].astype(np.float64) * freqs  # [M, D/2]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class ReferenceModel:
    """Incremental llama forward pass over a KV cache, in float64.

    skip_layers: layer indices this instance leaves out (a cheap draft sharing the target's weights).
    row_by_row: run an M-token call as M one-token calls, so every row's arithmetic is the M = 1 arithmetic by
        construction (a batch-invariant model). Otherwise the M rows go through NumPy together, as a fast engine
        would, and their bits may depend on M (BLAS picks a different kernel for a matrix than for a vector).
    """

    def __init__(self, weights: LlamaWeights, skip_layers: Iterable[int] = (), row_by_row: bool = False):
        c = weights.config
        self.weights = weights
        self.skip_layers = frozenset(skip_layers)
        if not self.skip_layers <= set(range(c.n_layers)):
            raise ValueError(f"skip_layers {sorted(self.skip_layers)} outside 0..{c.n_layers - 1}")
        self.row_by_row = row_by_row
        self.kv_len = 0
        empty = np.zeros((c.n_kv_heads, 0, c.head_dim))
        self._k = [empty] * c.n_layers  # per layer [Hkv, >= kv_len, D]
        self._v = [empty] * c.n_layers

    def rollback(self, n_valid: int) -> None:
        """Keep the first n_valid cache positions; later ones are overwritten by the next forward."""
        if not 0 <= n_valid <= self.kv_len:
            raise ValueError(f"rollback({n_valid}) with {self.kv_len} cached positions")
        self.kv_len = n_valid

    def forward(self, tokens: Sequence[int], start_pos: int) -> np.ndarray:
        """Logits [M, V] for tokens at positions start_pos.., writing their K/V into the cache.

        start_pos must equal the cache length (roll back first to overwrite).
        """
        if start_pos != self.kv_len:
            raise ValueError(f"forward at start_pos={start_pos} but the cache holds {self.kv_len} positions")
        if len(tokens) == 0:
            raise ValueError("forward needs at least one token")
        if self.row_by_row:
            return np.concatenate([self._forward([t], start_pos + i) for i, t in enumerate(tokens)])
        return self._forward(tokens, start_pos)

    def _forward(self, tokens: Sequence[int], start: int) -> np.ndarray:
        w, c = self.weights, self.weights.config
        positions = np.arange(start, start + len(tokens))
        x = w.tok_embd[np.asarray(tokens)]  # [M, H]
        for i, layer in enumerate(w.layers):
            if i in self.skip_layers:
                continue
            x = x + self._attention(i, layer, rms_norm(x, layer.attn_norm, c.rms_eps), positions)
            h = rms_norm(x, layer.ffn_norm, c.rms_eps)
            gate, up = h @ layer.w_gate.T, h @ layer.w_up.T  # [M, F]
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ layer.w_down.T  # SwiGLU: silu(gate) * up
        self.kv_len = start + len(tokens)
        return rms_norm(x, w.output_norm, c.rms_eps) @ w.output.T

    def _attention(self, i: int, layer: LayerWeights, h: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Causal GQA attention of h [M, H] over cache + new keys -> [M, H]; appends the new K/V to layer i's cache."""
        c = self.weights.config
        m, start = len(positions), int(positions[0])
        def project(w, b, heads, norm=None):
            y = h @ w.T if b is None else h @ w.T + b
            y = y.reshape(m, heads, c.head_dim)
            return y if norm is None else rms_norm(y, norm, c.rms_eps)

        q = rope_interleaved(project(layer.wq, layer.bq, c.n_heads, layer.q_norm), positions, c.rope_theta,
                             c.rope_freqs)
        k = rope_interleaved(project(layer.wk, layer.bk, c.n_kv_heads, layer.k_norm), positions, c.rope_theta,
                             c.rope_freqs)
        v = project(layer.wv, layer.bv, c.n_kv_heads)
        keys = np.concatenate([self._k[i][:, :start], k.transpose(1, 0, 2)], axis=1)  # [Hkv, L, D]
        values = np.concatenate([self._v[i][:, :start], v.transpose(1, 0, 2)], axis=1)
        self._k[i], self._v[i] = keys, values
        group = c.n_heads // c.n_kv_heads  # query head j reads KV head j // group
        qg = q.transpose(1, 0, 2).reshape(c.n_kv_heads, group * m, c.head_dim)  # [Hkv, group*M, D]
        scores = (qg @ keys.transpose(0, 2, 1)).reshape(c.n_heads, m, -1) / np.sqrt(c.head_dim)  # [Hq, M, L]
        visible = np.arange(keys.shape[1])[None, :] <= positions[:, None]  # [M, L]: key j visible to query at p
        scores = np.where(visible, scores, -np.inf)
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = probs.reshape(c.n_kv_heads, group * m, -1) @ values  # [Hkv, group*M, D]
        out = out.reshape(c.n_heads, m, c.head_dim).transpose(1, 0, 2).reshape(m, c.n_heads * c.head_dim)
        return out @ layer.wo.T
