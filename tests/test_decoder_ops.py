"""The per-element decoder ops: add, swiglu, RoPE relayouts, KV-cache writes, embedding lookup."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from helpers import DTYPE_IDS, FLOAT_DTYPES, RTOL, random, rows_invariant, same_bits


def rope_reference(x, positions, base):
    """x [L, H, D] float64, interleaved pairs."""
    d = x.shape[-1]
    freqs = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = positions[:, None] * freqs
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_add_and_swiglu(dtype, rng):
    a, b = random(rng, (3, 77), dtype), random(rng, (3, 77), dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(mtlinv.add(a, b), np.float64), a64 + b64, rtol=tol, atol=tol)
    ref = a64 / (1 + np.exp(-a64)) * b64
    np.testing.assert_allclose(np.asarray(mtlinv.swiglu(a, b), np.float64), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_rope_heads_matches_reference(dtype, rng):
    x = random(rng, (5, 3, 64), dtype)
    out = np.asarray(mtlinv.rope_heads(x, 7, 10000.0))
    assert out.shape == (3, 5, 64)
    ref = rope_reference(x.astype(np.float64), np.arange(7, 12), 10000.0).transpose(1, 0, 2)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol)


def test_write_heads_into_cache(rng):
    dtype = ml_dtypes.bfloat16
    cache = mtlinv.asarray(np.zeros((2, 10, 8), dtype))
    k = random(rng, (3, 2, 8), dtype)
    mtlinv.write_heads(k, cache, 4, 4, rotate=False)
    c = np.asarray(cache)
    assert same_bits(c[:, 4:7], k.transpose(1, 0, 2))
    assert not c[:, :4].any() and not c[:, 7:].any()
    mtlinv.write_heads(k, cache, 0, 4, rotate=True, base=100.0)
    assert same_bits(np.asarray(cache)[:, 0:3], mtlinv.rope_heads(k, 4, 100.0))


def test_write_heads_errors(rng):
    with pytest.raises(TypeError):
        mtlinv.write_heads(random(rng, (3, 2, 8), np.float32), None, 0)
    frozen = np.zeros((2, 4, 8), np.float32)
    frozen.flags.writeable = False
    wrapped = mtlinv.asarray(frozen)
    if np.shares_memory(np.asarray(wrapped), frozen):  # host-visible devices wrap the array itself
        with pytest.raises(ValueError, match="read-only"):
            mtlinv.write_heads(random(rng, (1, 2, 8), np.float32), wrapped, 0)
    else:  # other devices copy it: the copy is written, never the array
        mtlinv.write_heads(random(rng, (1, 2, 8), np.float32), wrapped, 0)
        assert np.asarray(wrapped).any()
    assert not frozen.any()
    cache = mtlinv.asarray(np.zeros((2, 4, 8), np.float32))
    with pytest.raises(ValueError, match="seq_offset=2 with L=3 rows does not fit dst capacity 4"):
        mtlinv.write_heads(random(rng, (3, 2, 8), np.float32), cache, 2)
    with pytest.raises(ValueError, match=r"x must be \[L, H, D\]"):
        mtlinv.write_heads(random(rng, (3, 3, 8), np.float32), cache, 0)


def test_heads_to_rows(rng):
    x = random(rng, (3, 5, 4), np.float32)
    assert same_bits(mtlinv.heads_to_rows(x), x.transpose(1, 0, 2).reshape(5, 12))


def test_embedding(rng):
    table = random(rng, (50, 16), ml_dtypes.bfloat16)
    ids = np.array([3, 0, 49, 3], np.int32)
    assert same_bits(mtlinv.embedding(table, ids), table[ids])
    with pytest.raises(ValueError, match=r"ids\[1\]=50 is outside \[0, 50\)"):
        mtlinv.embedding(table, np.array([1, 50], np.int32))
    with pytest.raises(ValueError, match=r"ids\[0\]=-1 is outside"):
        mtlinv.embedding(table, [-1])
    with pytest.raises(ValueError, match=r"=4294967297 is outside"):
        mtlinv.embedding(table, np.array([2**32 + 1], np.int64))
    with pytest.raises(TypeError, match="ids must be integers, got dtype float64"):
        mtlinv.embedding(table, [1.9, 2.7])
    with pytest.raises(ValueError, match=r"ids\[0\]=-1 is outside"):  # Tensors are checked by the core
        mtlinv.embedding(table, mtlinv.asarray(np.array([-1], np.int32)))
    with pytest.raises(TypeError, match="embedding: ids has dtype float32; expected int32 or uint32"):
        mtlinv.embedding(table, mtlinv.asarray(np.array([1.0], np.float32)))  # a DTypeError, as for an ndarray


def test_tensor_reshape():
    t = mtlinv.asarray(np.arange(12, dtype=np.float32))
    r = t.reshape(3, -1)
    assert r.shape == (3, 4) and np.array_equal(np.asarray(r), np.arange(12).reshape(3, 4))
    with pytest.raises(ValueError, match="cannot view"):
        t.reshape(5, 3)


ROWS = range(1, 17)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op", ["add", "swiglu"])
def test_elementwise_rows_invariant(op, dtype, rng):
    a, b = random(rng, (16, 77), dtype), random(rng, (16, 77), dtype)
    rows_invariant(getattr(mtlinv, op), (a, b))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_relayouts_rows_invariant(dtype, rng):
    """rope_heads, write_heads (both ways) and heads_to_rows: position l of an L-row call has the bits it has alone
    (at its own position)."""
    x = random(rng, (16, 3, 64), dtype)
    for m in ROWS:
        rope = np.asarray(mtlinv.rope_heads(x[:m], 100))
        cache = mtlinv.asarray(np.zeros((3, 16, 64), dtype))
        mtlinv.write_heads(x[:m], cache, 0, 100, rotate=True)
        rows = np.asarray(mtlinv.heads_to_rows(rope))
        for r in range(m):
            alone = np.asarray(mtlinv.rope_heads(x[r:r + 1], 100 + r))
            assert same_bits(rope[:, r:r + 1], alone), f"rope_heads M={m} row {r}"
            assert same_bits(np.asarray(cache)[:, r:r + 1], alone), f"write_heads M={m} row {r}"
            assert same_bits(rows[r:r + 1], mtlinv.heads_to_rows(alone)), f"heads_to_rows M={m} row {r}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_embedding_rows_invariant_and_exact(dtype, rng):
    table = random(rng, (50, 16), dtype)
    ids = rng.integers(0, 50, 16).astype(np.int32)
    for m in ROWS:
        assert same_bits(mtlinv.embedding(table, ids[:m]), table[ids[:m]]), f"M={m}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_write_heads_rotation_matches_float64(dtype, rng):
    """The rotating cache write against float64 RoPE, at positions near SmolLM2's context (8192): float32's angle
    (position times frequency) is off by up to about position * 2^-24 radians there, which the bound includes."""
    x = random(rng, (4, 2, 64), dtype)
    cache = mtlinv.asarray(np.zeros((2, 8, 64), dtype))
    mtlinv.write_heads(x, cache, 2, 8000, rotate=True, base=10000.0)
    ref = rope_reference(x.astype(np.float64), np.arange(8000, 8004), 10000.0).transpose(1, 0, 2)
    tol = RTOL[np.dtype(dtype)] + 8004 * 2.0**-24 * 2
    np.testing.assert_allclose(np.asarray(cache)[:, 2:6].astype(np.float64), ref, rtol=tol, atol=tol)
