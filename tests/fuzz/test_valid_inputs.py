"""Every public op on inputs Hypothesis draws (shapes, dtypes, the limit, and each array argument in any form the
conversion route takes: byte-swapped, strided, broadcast, a Tensor, a list): each result against a float64
reference within the per-dtype bound, and the layout ops (tile_weights, quant.tile, embedding, heads_to_rows, the
KV-cache writes) against the bits of a NumPy rearrangement."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mtlinv
import mtlinv.quant
from strategies import FLOATS, as_form, assert_close, dtypes, forms, limits, same_bits, seeds, values

rows = st.integers(1, 12)
small = st.integers(1, 40)


@given(dtypes, limits, rows, small, small, st.booleans(), st.booleans(), forms, forms, seeds)
def test_gemv(dtype, limit, m, k, n, transpose, with_bias, x_form, w_form, seed):
    x, w = values(seed, (m, k), dtype), values(seed + 1, (n, k) if transpose else (k, n), dtype)
    bias = values(seed + 2, (n,), dtype) if with_bias else None
    x_arg, w_arg = as_form(x, x_form), as_form(w, w_form)
    with mtlinv.batch_invariant(limit):
        y = mtlinv.gemv(x_arg, w_arg, bias, transpose=transpose)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    w64 = w64.T if transpose else w64
    b64 = bias.astype(np.float64) if with_bias else 0.0
    assert_close(y, x64 @ w64 + b64, np.abs(x64) @ np.abs(w64) + np.abs(b64), dtype, "gemv")


@given(dtypes, rows, small, small, forms, seeds)
def test_matmul(dtype, m, k, n, form, seed):
    a, b = values(seed, (m, k), dtype), values(seed + 1, (k, n), dtype)
    y = mtlinv.matmul(as_form(a, form), b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_close(y, a64 @ b64, np.abs(a64) @ np.abs(b64), dtype, "matmul")


@given(dtypes, limits, rows, st.integers(1, 3), st.sampled_from([1, 2, 3]), st.sampled_from([32, 64, 128]),
       st.sampled_from([2, 3, 4, 5, 6, 8]), forms, seeds)
def test_qgemv(dtype, limit, m, groups, n16, group_size, bits, form, seed):
    k, n = groups * group_size, 16 * n16
    w = values(seed, (n, k), dtype)
    wq, scales, biases = mtlinv.quant.quantize(w, group_size=group_size, bits=bits)
    x = values(seed + 1, (m, k), dtype)
    with mtlinv.batch_invariant(limit):
        y = mtlinv.qgemv(as_form(x, form), as_form(wq, form), scales, biases, group_size=group_size, bits=bits)
    w64 = mtlinv.quant.dequantize_float32(wq, scales, biases, group_size, bits).astype(np.float64)
    x64 = x.astype(np.float64)
    assert_close(y, x64 @ w64.T, np.abs(x64) @ np.abs(w64).T, dtype, "qgemv")


@given(dtypes, st.integers(1, 6), st.integers(1, 300), st.sampled_from([0.0, 1e-6, 0.5]), forms, forms, seeds)
def test_rms_norm_and_add_rms_norm(dtype, m, c, eps, x_form, w_form, seed):
    x, r, w = values(seed, (m, c), dtype), values(seed + 1, (m, c), dtype), values(seed + 2, (c,), dtype)
    x_arg, w_arg = as_form(x, x_form), as_form(w, w_form)
    y = mtlinv.rms_norm(x_arg, w_arg, eps)
    s, y2 = mtlinv.add_rms_norm(x_arg, r, w_arg, eps)
    for name, inp, out in (("rms_norm", x.astype(np.float64), y),
                           ("add_rms_norm", x.astype(np.float64) + r.astype(np.float64), y2)):
        inv = 1 / np.sqrt((inp**2).mean(-1, keepdims=True) + eps)
        ref = inp * inv * w.astype(np.float64)
        assert_close(out, ref, np.abs(ref) + 1e-30, dtype, name)
    sum64 = x.astype(np.float64) + r.astype(np.float64)
    assert_close(s, sum64, np.abs(sum64), dtype, "add_rms_norm sum")


@given(dtypes, limits, st.sampled_from([(1, 1), (2, 1), (4, 2)]), st.integers(1, 10), st.integers(0, 20),
       st.sampled_from([64, 128]), st.booleans(), st.sampled_from([None, 0.1]), forms, seeds)
def test_sdpa(dtype, limit, heads, q_len, extra_keys, head_dim, causal, scale, form, seed):
    hq, hkv = heads
    capacity = q_len + extra_keys
    q = values(seed, (hq, q_len, head_dim), dtype)
    k, v = values(seed + 1, (hkv, capacity, head_dim), dtype), values(seed + 2, (hkv, capacity, head_dim), dtype)
    q_arg, k_arg, v_arg = as_form(q, form), as_form(k, form), as_form(v, form)
    with mtlinv.batch_invariant(limit):
        out = mtlinv.sdpa(q_arg, k_arg, v_arg, scale=scale, causal=causal)
    q64, k64, v64 = (np.repeat(a.astype(np.float64), hq // a.shape[0], axis=0) for a in (q, k, v))
    s = q64 @ k64.transpose(0, 2, 1) * (head_dim**-0.5 if scale is None else scale)
    if causal:
        position = capacity - q_len + np.arange(q_len)
        s = np.where(np.arange(capacity)[None, :] <= position[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert_close(out, p @ v64, p @ np.abs(v64) + np.abs(v64).max() * 1e-3, dtype, "sdpa")


@given(dtypes, st.integers(1, 5), st.integers(1, 70), forms, seeds)
def test_add_swiglu_swiglu_halves(dtype, m, f, form, seed):
    a, b = values(seed, (m, f), dtype), values(seed + 1, (m, f), dtype)
    a_arg = as_form(a, form)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_close(mtlinv.add(a_arg, b), a64 + b64, np.abs(a64) + np.abs(b64), dtype, "add")
    ref = a64 / (1 + np.exp(-a64)) * b64
    assert_close(mtlinv.swiglu(a_arg, b), ref, np.abs(ref) + 1e-7, dtype, "swiglu")
    halves = np.concatenate([a, b], axis=1)
    got = mtlinv.swiglu_halves(as_form(halves, form))  # (a broadcast form sets every row to the first)
    assert same_bits(got, mtlinv.swiglu(halves[:, :f], halves[:, f:]))


def rope(x, positions, base):
    """float64 RoPE of x [L, H, D] on interleaved pairs (llama GGUF's layout)."""
    d = x.shape[-1]
    angle = positions[:, None] * base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out


@given(dtypes, st.integers(1, 6), st.integers(1, 3), st.sampled_from([2, 8, 64]), st.integers(0, 5),
       st.integers(0, 1000), st.sampled_from([1.0, 100.0, 10000.0, 1e6]), forms, seeds)
def test_rope_write_heads_qkv_to_heads(dtype, length, heads, dim, offset, start, base, form, seed):
    x = values(seed, (length, heads, dim), dtype)
    x_arg = as_form(x, form)
    positions = np.arange(start, start + length, dtype=np.float64)
    ref = rope(x.astype(np.float64), positions, base)
    magnitude = np.abs(x.astype(np.float64))[..., 0::2].repeat(2, -1) + np.abs(x.astype(np.float64))[..., 1::2].repeat(2, -1)
    assert_close(mtlinv.rope_heads(x_arg, start, base), ref.transpose(1, 0, 2), magnitude.transpose(1, 0, 2),
                 dtype, "rope_heads")
    capacity = offset + length + 2
    cache = mtlinv.asarray(np.zeros((heads, capacity, dim), dtype))
    mtlinv.write_heads(x_arg, cache, offset)  # a layout op: bits
    want = np.zeros((heads, capacity, dim), dtype)
    want[:, offset:offset + length] = x.transpose(1, 0, 2)
    assert same_bits(cache, want)
    # qkv_to_heads: the bits of rope_heads and two write_heads calls, in one launch
    qkv = values(seed + 1, (length, 3 * heads, dim), dtype)
    k_cache, v_cache = (mtlinv.asarray(np.zeros((heads, capacity, dim), dtype)) for _ in range(2))
    q = mtlinv.qkv_to_heads(as_form(qkv, form), heads, k_cache, v_cache, offset, start, base)
    assert same_bits(q, mtlinv.rope_heads(qkv[:, :heads], start, base))
    k_want = mtlinv.asarray(np.zeros((heads, capacity, dim), dtype))
    mtlinv.write_heads(qkv[:, heads:2 * heads], k_want, offset, start, rotate=True, base=base)
    assert same_bits(k_cache, k_want)
    want[...] = 0
    want[:, offset:offset + length] = qkv[:, 2 * heads:].transpose(1, 0, 2)
    assert same_bits(v_cache, want)


@given(dtypes, st.integers(1, 4), st.integers(0, 6), st.integers(1, 40), forms, seeds)
def test_heads_to_rows(dtype, heads, length, dim, form, seed):
    x = values(seed, (heads, length, dim), dtype)
    assert same_bits(mtlinv.heads_to_rows(as_form(x, form)), x.transpose(1, 0, 2).reshape(length, heads * dim))


@given(dtypes, st.integers(1, 50), st.integers(1, 40), st.lists(st.integers(0, 10**6), max_size=20),
       st.sampled_from(["int32", "uint32", "int64", "list", "tensor"]), forms, seeds)
def test_embedding(dtype, vocab, dim, raw_ids, ids_form, table_form, seed):
    table = values(seed, (vocab, dim), dtype)
    ids = np.array([i % vocab for i in raw_ids], np.int64)
    if ids_form == "list":
        ids_arg = ids.tolist()
    elif ids_form == "tensor":
        ids_arg = mtlinv.asarray(ids.astype(np.int32))
    else:
        ids_arg = ids.astype(ids_form)
    assert same_bits(mtlinv.embedding(as_form(table, table_form), ids_arg), table[ids])


@given(st.sampled_from(FLOATS[1:]), st.integers(1, 3), st.integers(1, 3), forms, seeds)
def test_tile_weights(dtype, n16, k32, form, seed):
    w = values(seed, (16 * n16, 32 * k32), dtype)
    if form == "tensor" and mtlinv.device_info()["backend"] == "cuda":
        # tile_weights reorders host memory; a Tensor on CUDA is device memory, refused with the fix named.
        with pytest.raises(mtlinv.InvalidArgumentError, match="w .*CUDA memory.*copy it to the host first"):
            mtlinv.tile_weights(as_form(w, form))
        return
    got = mtlinv.tile_weights(as_form(w, form))
    assert same_bits(got, w.reshape(n16, 16, k32, 32).transpose(0, 2, 1, 3))


@given(st.sampled_from(FLOATS), st.integers(1, 2), st.integers(1, 5), st.sampled_from([32, 64, 128]),
       st.sampled_from([4, 8]), seeds)
def test_quant_tile(dtype, n16, groups, group_size, bits, seed):
    n, k = 16 * n16, groups * group_size
    wq, scales, biases = mtlinv.quant.quantize(values(seed, (n, k), dtype), group_size=group_size, bits=bits)
    tiled = mtlinv.quant.tile(wq, scales, biases, group_size=group_size, bits=bits)
    steps, words = -(-k // 128), 4 * bits  # 128 K positions a block, padded with zero words
    padded = np.zeros((n, steps * words), np.uint32)
    padded[:, :wq.shape[1]] = wq
    assert same_bits(tiled[0], padded.reshape(n16, 16, steps, words).transpose(0, 2, 1, 3))
    for got, rowwise in zip(tiled[1:], (scales, biases)):
        assert same_bits(got, rowwise.reshape(n16, 16, groups).transpose(0, 2, 1))


@given(st.integers(1, 4), st.integers(1, 3), st.sampled_from([32, 64, 128]), st.sampled_from([2, 3, 4, 5, 6, 8]),
       seeds)
def test_quantize_has_the_bits_of_mlx(n, groups, group_size, bits, seed):
    """mtlinv.quant.quantize against MLX's own mx.quantize (float32 weights)."""
    mx = __import__("pytest").importorskip("mlx.core")
    w = values(seed, (n, groups * group_size), np.float32)
    ours = mtlinv.quant.quantize(w, group_size=group_size, bits=bits)
    theirs = mx.quantize(mx.array(w), group_size=group_size, bits=bits)
    for a, b in zip(ours, theirs):
        assert same_bits(a, np.array(b))


@given(st.sampled_from(FLOATS + [np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.uint8)]),
       st.lists(st.integers(0, 5), max_size=4), forms, seeds)
def test_tensor_round_trip(dtype, shape, form, seed):
    a = values(seed, shape, np.float32).astype(dtype) if dtype.kind == "f" else \
        np.random.default_rng(seed).integers(0, 200, shape).astype(dtype)
    t = mtlinv.asarray(as_form(a, form if form != "list" else "array"))
    assert same_bits(t.numpy(), a) and t.shape == a.shape and t.dtype == a.dtype
