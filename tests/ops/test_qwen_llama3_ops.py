"""The decoder ops of Qwen 3 and Llama 3: qk_rms_norm (per-head RMS norms of q and k before RoPE) and qkv_to_heads
with a RoPE frequency table (Llama 3's scaled RoPE): bits against the ops they stand for, row-invariance with its
negative control, accuracy against float64, errors."""
import numpy as np
import pytest

import mtlinv
from helpers import DTYPE_IDS, FLOAT_DTYPES, RTOL, random, rows_invariant, same_bits
from mtlinv.model.rope_scaling import base_frequencies, scaled_frequencies

LLAMA3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=64)


def _qk_norm(x, q_heads, kv_heads, wq, wk, eps=1e-6):
    return np.asarray(mtlinv.qk_rms_norm(x, q_heads, kv_heads, wq, wk, eps))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("q_heads, kv_heads, d, rows", [(2, 1, 64, 3), (4, 2, 128, 1), (1, 1, 80, 5)])
def test_qk_rms_norm_is_rms_norm_per_head(dtype, q_heads, kv_heads, d, rows, rng):
    """Query heads have rms_norm's bits with q_weight, key heads with k_weight; value heads are the input's bits."""
    heads = q_heads + 2 * kv_heads
    x = random(rng, (rows, heads, d), dtype)
    wq, wk = (random(rng, (d,), dtype, 0.2) + 1).astype(dtype), (random(rng, (d,), dtype, 0.2) + 1).astype(dtype)
    got = _qk_norm(x.reshape(rows, -1), q_heads, kv_heads, wq, wk).reshape(x.shape)
    q = np.asarray(mtlinv.rms_norm(np.ascontiguousarray(x[:, :q_heads]), wq, 1e-6))
    k = np.asarray(mtlinv.rms_norm(np.ascontiguousarray(x[:, q_heads:q_heads + kv_heads]), wk, 1e-6))
    assert same_bits(got[:, :q_heads], q)
    assert same_bits(got[:, q_heads:q_heads + kv_heads], k)
    assert same_bits(got[:, q_heads + kv_heads:], x[:, q_heads + kv_heads:])
    assert same_bits(_qk_norm(x, q_heads, kv_heads, wq, wk), got)  # the [L, heads, D] form: the same
    # Negative control: the weights swapped give other bits (the check above tells which weight a head got).
    swapped = _qk_norm(x, q_heads, kv_heads, wk, wq)
    assert not same_bits(swapped[:, :q_heads], q)
    # Accuracy against float64.
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-6)
    ref[:, :q_heads] *= wq.astype(np.float64)
    ref[:, q_heads:q_heads + kv_heads] *= wk.astype(np.float64)
    ref[:, q_heads + kv_heads:] = x64[:, q_heads + kv_heads:]
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_qk_rms_norm_rows_invariant(dtype, rng):
    x = random(rng, (16, 4 * 64), dtype)  # 2 query heads, 1 key head, 1 value head
    wq, wk = random(rng, (64,), dtype), random(rng, (64,), dtype)
    rows_invariant(lambda a: mtlinv.qk_rms_norm(a, 2, 1, wq, wk), (x,))
    # Negative control: the same check fails for a call whose rows depend on how many share it.
    with pytest.raises(AssertionError, match="M=2 row 0"):
        rows_invariant(lambda a: mtlinv.qk_rms_norm(a, 2, 1, wq, wk, eps=0.5 * len(a)), (x,))


def test_qk_rms_norm_errors(rng):
    x = random(rng, (2, 4 * 8), np.float32)
    w = random(rng, (8,), np.float32)
    with pytest.raises(ValueError, match=r"qk_rms_norm: x must be \[L, q_heads \+ 2 kv_heads, D\] or .* got x "
                                         r"\[2, 32\], q_heads=1, kv_heads=1, q_weight \[8\]"):
        mtlinv.qk_rms_norm(x, 1, 1, w, w)  # 3 heads of 8, not 4
    with pytest.raises(ValueError, match=r"q_weight and k_weight must be \[D\] of one shape, D >= 1, got \[8\] and "
                                         r"\[4\]"):
        mtlinv.qk_rms_norm(x, 2, 1, w, w[:4].copy())
    with pytest.raises(ValueError, match=r"qk_rms_norm: kv_heads must be in \[1, "):
        mtlinv.qk_rms_norm(x, 2, 0, w, w)
    with pytest.raises(ValueError, match="qk_rms_norm: eps must be >= 0 and finite within float32, got -1"):
        mtlinv.qk_rms_norm(x, 2, 1, w, w, eps=-1.0)
    with pytest.raises(TypeError, match="qk_rms_norm: x is float32 but k_weight is float16"):
        mtlinv.qk_rms_norm(x, 2, 1, w, w.astype(np.float16))
    with pytest.raises(TypeError, match="qk_rms_norm: x is float32 but q_weight is float16"):
        mtlinv.qk_rms_norm(x, 2, 1, w.astype(np.float16), w)
    with pytest.raises(TypeError, match="qk_rms_norm: x has dtype int32; expected float32, float16 or bfloat16"):
        mtlinv.qk_rms_norm(x.astype(np.int32), 2, 1, w, w)
    assert np.asarray(mtlinv.qk_rms_norm(np.zeros((0, 32), np.float32), 2, 1, w, w)).shape == (0, 32)


def _heads(qkv, q_heads, start, freqs=None, base=500000.0):
    kv_heads = (qkv.shape[1] - q_heads) // 2
    k, v = (mtlinv.asarray(np.zeros((kv_heads, start + len(qkv), qkv.shape[2]), qkv.dtype)) for _ in range(2))
    q = mtlinv.qkv_to_heads(qkv, q_heads, k, v, start, start, base, freqs)
    return np.asarray(q), np.asarray(k)[:, start:], np.asarray(v)[:, start:]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_qkv_to_heads_frequency_table(dtype, rng):
    """With a table, pair j turns by p * freqs[j]: against float64, for Llama 3's table; value heads copied; and a
    table of the unscaled frequencies comes within float32's rounding of them, while Llama 3's is far from it."""
    qkv = random(rng, (4, 4, 64), dtype)  # 2 query heads, 1 key head, 1 value head
    start = 1000
    freqs = scaled_frequencies(64, 500000.0, LLAMA3)
    q, k, v = _heads(qkv, 2, start, freqs)
    angles = np.arange(start, start + 4)[:, None] * np.asarray(freqs, np.float32).astype(np.float64)
    cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]
    x = qkv.astype(np.float64)
    ref = np.empty_like(x)
    ref[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    ref[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    tol = RTOL[np.dtype(dtype)] + (start + 4) * 2.0**-24 * 2
    np.testing.assert_allclose(q.astype(np.float64), ref[:, :2].transpose(1, 0, 2), rtol=tol, atol=tol)
    np.testing.assert_allclose(k.astype(np.float64), ref[:, 2:3].transpose(1, 0, 2), rtol=tol, atol=tol)
    assert same_bits(v, qkv[:, 3:].transpose(1, 0, 2))
    plain = _heads(qkv, 2, start)[0].astype(np.float64)
    unscaled = _heads(qkv, 2, start, base_frequencies(64, 500000.0))[0].astype(np.float64)
    np.testing.assert_allclose(unscaled, plain, rtol=tol, atol=tol)
    assert np.abs(q.astype(np.float64) - plain).max() > 0.5


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_qkv_to_heads_frequency_table_rows_invariant(dtype, rng):
    """Position l of an L-row call has, in q and in both caches, the bits it has alone (at its own position)."""
    qkv = random(rng, (16, 4, 64), dtype)
    freqs = scaled_frequencies(64, 500000.0, LLAMA3)
    alone = [_heads(qkv[r:r + 1], 2, 100 + r, freqs) for r in range(16)]
    for m in (1, 2, 5, 16):
        got = _heads(qkv[:m], 2, 100, freqs)
        for r in range(m):
            for name, a, b in zip("qkv", got, alone[r]):
                assert same_bits(a[:, r:r + 1], b), f"{name} M={m} row {r}"
    # Negative control: a row rotated for another position than its own has other bits.
    assert not same_bits(_heads(qkv[1:2], 2, 100, freqs)[0], alone[1][0])


def test_qkv_to_heads_frequency_table_errors(rng):
    qkv = random(rng, (2, 3, 8), np.float32)
    k, v = (mtlinv.asarray(np.zeros((1, 4, 8), np.float32)) for _ in range(2))
    with pytest.raises(ValueError, match=r"qkv_to_heads: freqs must be \[D / 2\] = \[4\] for D=8, got \[3\]"):
        mtlinv.qkv_to_heads(qkv, 1, k, v, 0, 0, 1e4, [0.5, 0.25, 0.125])
    with pytest.raises(ValueError, match=r"qkv_to_heads: freqs\[1\]=1.5 is outside \(0, 1\]"):
        mtlinv.qkv_to_heads(qkv, 1, k, v, 0, 0, 1e4, [0.5, 1.5, 0.1, 0.1])
    with pytest.raises(ValueError, match=r"freqs\[0\]=nan is outside"):
        mtlinv.qkv_to_heads(qkv, 1, k, v, 0, 0, 1e4, [np.nan, 0.5, 0.1, 0.1])
    with pytest.raises(ValueError, match="qkv_to_heads: freqs must be a 1-D sequence of real numbers"):
        mtlinv.qkv_to_heads(qkv, 1, k, v, 0, 0, 1e4, [[0.5, 0.5], [0.1, 0.1]])
