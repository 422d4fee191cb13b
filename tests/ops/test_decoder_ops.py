"""The per-element decoder ops: add, swiglu, RoPE relayouts, KV-cache writes, embedding lookup."""
import types

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
    with pytest.raises(TypeError, match="ids must be integers, got dtype float32"):
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


def _qkv_separately(qkv, q_heads, capacity, seq_offset, start_pos, base):
    """What qkv_to_heads replaces: rope_heads on the query heads, two write_heads calls on key and value heads."""
    kv_heads = (qkv.shape[1] - q_heads) // 2
    k_cache = mtlinv.asarray(np.zeros((kv_heads, capacity, qkv.shape[2]), qkv.dtype))
    v_cache = mtlinv.asarray(np.zeros((kv_heads, capacity, qkv.shape[2]), qkv.dtype))
    q = mtlinv.rope_heads(np.ascontiguousarray(qkv[:, :q_heads]), start_pos, base)
    mtlinv.write_heads(np.ascontiguousarray(qkv[:, q_heads:q_heads + kv_heads]), k_cache, seq_offset, start_pos,
                       rotate=True, base=base)
    mtlinv.write_heads(np.ascontiguousarray(qkv[:, q_heads + kv_heads:]), v_cache, seq_offset, start_pos)
    return np.asarray(q), np.asarray(k_cache), np.asarray(v_cache)


def _qkv_fused(qkv, q_heads, capacity, seq_offset, start_pos, base):
    kv_heads = (qkv.shape[1] - q_heads) // 2
    k_cache = mtlinv.asarray(np.zeros((kv_heads, capacity, qkv.shape[2]), qkv.dtype))
    v_cache = mtlinv.asarray(np.zeros((kv_heads, capacity, qkv.shape[2]), qkv.dtype))
    q = mtlinv.qkv_to_heads(qkv, q_heads, k_cache, v_cache, seq_offset, start_pos, base)
    return np.asarray(q), np.asarray(k_cache), np.asarray(v_cache)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("q_heads, kv_heads, d, rows, seq_offset, start_pos", [
    (9, 3, 64, 5, 3, 3), (4, 1, 128, 1, 0, 8000), (2, 2, 2, 7, 9, 40), (1, 1, 8, 16, 0, 0)])
def test_qkv_to_heads_is_rope_and_two_cache_writes(dtype, q_heads, kv_heads, d, rows, seq_offset, start_pos, rng):
    """The fused relayout gives the bits of the three calls it replaces, and leaves the rest of the caches alone."""
    qkv = random(rng, (rows, q_heads + 2 * kv_heads, d), dtype)
    capacity = seq_offset + rows + 2
    fused = _qkv_fused(qkv, q_heads, capacity, seq_offset, start_pos, 10000.0)
    separate = _qkv_separately(qkv, q_heads, capacity, seq_offset, start_pos, 10000.0)
    for name, a, b in zip("qkv", fused, separate):
        assert same_bits(a, b), f"{name}: {a.shape} {b.shape}"
    for cache in fused[1:]:
        assert not cache[:, :seq_offset].any() and not cache[:, seq_offset + rows:].any()
    assert same_bits(fused[2][:, seq_offset:seq_offset + rows], qkv[:, q_heads + kv_heads:].transpose(1, 0, 2))
    # The projection's own output, [L, (q_heads + 2 Hkv) * D], is the same layout and gives the same bits.
    k_cache, v_cache = (mtlinv.asarray(np.zeros((kv_heads, capacity, d), qkv.dtype)) for _ in range(2))
    q = mtlinv.qkv_to_heads(qkv.reshape(rows, -1), q_heads, k_cache, v_cache, seq_offset, start_pos, 10000.0)
    for name, a, b in zip("qkv", (q, k_cache, v_cache), fused):
        assert same_bits(np.asarray(a), b), f"{name} from the flat qkv"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_qkv_to_heads_rows_invariant(dtype, rng):
    """Position l of an L-row call has, in q and in both caches, the bits it has alone (at its own position)."""
    qkv = random(rng, (16, 9, 64), dtype)  # 3 query heads, 3 key heads, 3 value heads
    alone = [_qkv_fused(qkv[r:r + 1], 3, 16, r, 100 + r, 10000.0) for r in range(16)]
    for m in ROWS:
        q, k, v = _qkv_fused(qkv[:m], 3, 16, 0, 100, 10000.0)
        for r in range(m):
            assert same_bits(q[:, r:r + 1], alone[r][0]), f"q M={m} row {r}"
            assert same_bits(k[:, r:r + 1], alone[r][1][:, r:r + 1]), f"k M={m} row {r}"
            assert same_bits(v[:, r:r + 1], alone[r][2][:, r:r + 1]), f"v M={m} row {r}"


def test_qkv_to_heads_errors(rng):
    qkv = random(rng, (2, 5, 8), np.float32)  # 3 query heads, 1 key head, 1 value head
    k, v = (mtlinv.asarray(np.zeros((1, 4, 8), np.float32)) for _ in range(2))
    with pytest.raises(ValueError, match=r"qkv_to_heads: qkv must be \[L, q_heads \+ 2 Hkv, D\] or "
                                         r"\[L, \(q_heads \+ 2 Hkv\) \* D\] for q_heads >= 1"):
        mtlinv.qkv_to_heads(qkv, 2, k, v, 0)
    with pytest.raises(ValueError, match=r"got qkv \[2, 32\], q_heads=3, k_dst \[1, 4, 8\]"):
        mtlinv.qkv_to_heads(random(rng, (2, 32), np.float32), 3, k, v, 0)  # 4 heads of 8, not 5
    with pytest.raises(ValueError, match=r"qkv_to_heads: q_heads must be in \[1, "):
        mtlinv.qkv_to_heads(qkv, 0, k, v, 0)
    with pytest.raises(ValueError, match="qkv_to_heads: q_heads must be an int, got float"):
        mtlinv.qkv_to_heads(qkv, 3.0, k, v, 0)
    with pytest.raises(ValueError, match=r"k_dst and v_dst must be \[Hkv, C, D\] of one shape"):
        mtlinv.qkv_to_heads(qkv, 3, k, mtlinv.asarray(np.zeros((1, 5, 8), np.float32)), 0)
    with pytest.raises(ValueError, match="k_dst and v_dst share memory"):
        mtlinv.qkv_to_heads(qkv, 3, k, k, 0)
    with pytest.raises(ValueError, match="seq_offset=3 with L=2 rows does not fit dst capacity 4"):
        mtlinv.qkv_to_heads(qkv, 3, k, v, 3)
    with pytest.raises(ValueError, match="rotation needs an even head dim"):
        odd = [mtlinv.asarray(np.zeros((1, 4, 7), np.float32)) for _ in range(2)]
        mtlinv.qkv_to_heads(random(rng, (2, 5, 7), np.float32), 3, *odd, 0)
    with pytest.raises(TypeError, match="qkv_to_heads: qkv is float16 but k_dst is float32"):
        mtlinv.qkv_to_heads(qkv.astype(np.float16), 3, k, v, 0)
    with pytest.raises(TypeError, match="qkv_to_heads: qkv is float32 but v_dst is float16"):
        mtlinv.qkv_to_heads(qkv, 3, k, mtlinv.asarray(np.zeros((1, 4, 8), np.float16)), 0)
    with pytest.raises(TypeError, match="qkv_to_heads: qkv has dtype int32; expected float32, float16 or bfloat16"):
        mtlinv.qkv_to_heads(qkv.astype(np.int32), 3, k, v, 0)
    with pytest.raises(TypeError):
        mtlinv.qkv_to_heads(qkv, 3, None, v, 0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_swiglu_halves_is_swiglu_of_the_halves(dtype, rng):
    x = random(rng, (5, 2 * 77), dtype)
    assert same_bits(mtlinv.swiglu_halves(x), mtlinv.swiglu(np.ascontiguousarray(x[:, :77]),
                                                             np.ascontiguousarray(x[:, 77:])))
    rows_invariant(mtlinv.swiglu_halves, (random(rng, (16, 2 * 77), dtype),))


def test_swiglu_halves_errors(rng):
    with pytest.raises(ValueError, match=r"swiglu_halves: x must be \[L, 2 F\], got \[3, 5\]"):
        mtlinv.swiglu_halves(random(rng, (3, 5), np.float32))
    with pytest.raises(ValueError, match=r"swiglu_halves: x must be \[L, 2 F\], got \[6\]"):
        mtlinv.swiglu_halves(random(rng, (6,), np.float32))
    assert np.asarray(mtlinv.swiglu_halves(np.zeros((0, 4), np.float32))).shape == (0, 2)


# --- the RoPE base: [1, FLT_MAX], where every frequency base^(-2j/D) is at most 1 and every angle finite -----------

F32_MAX = float(np.finfo(np.float32).max)
BASE_RANGE = r" is outside \[1, 3.4028234663852886e\+38\]"


def _rope_calls(base):
    """Every op a base reaches the kernels through, each as a call that returns the arrays the kernels wrote. Head
    dim 64: at 8 a subnormal base's frequencies stay finite (garbage, not NaN); from 16 on the last ones overflow."""
    x = np.ones((2, 1, 64), np.float32)

    def cache():
        return mtlinv.asarray(np.zeros((1, 4, 64), np.float32))

    def write_heads():
        k_cache = cache()
        mtlinv.write_heads(x, k_cache, 0, 5, rotate=True, base=base)
        return [k_cache]

    def qkv_to_heads():
        k_cache = cache()
        return [mtlinv.qkv_to_heads(np.ones((2, 3, 64), np.float32), 1, k_cache, cache(), 0, 5, base), k_cache]

    return {"rope_heads": lambda: [mtlinv.rope_heads(x, 5, base)], "write_heads": write_heads,
            "qkv_to_heads": qkv_to_heads}


@pytest.mark.parametrize("base, shown", [
    (1e-45, "1e-45"),                                # the issue's: subnormal, NaN results
    (float(np.nextafter(1.0, 0.0)), "0.9999999999999999"),  # just below the range, as a double
    (float(np.nextafter(np.float32(1), np.float32(0))), "0.9999999403953552"),  # and as a float32
    (0.5, "0.5"), (0.0, "0"), (-10000.0, "-10000"), (float("nan"), "nan"), (float("inf"), "inf"),
    (float(np.nextafter(F32_MAX, np.inf)), "3.402823466385289e\\+38"),  # just above: inf in float32
], ids=["subnormal", "below-1", "below-1-f32", "half", "zero", "negative", "nan", "inf", "above-f32-max"])
def test_rope_base_outside_the_range_is_refused(base, shown):
    """A base below 1 gives frequencies above 1 a position, up to 1/base: a subnormal one made them inf and every
    rotated value NaN, silently. Refused by name and value, as are those beyond float32."""
    for op, call in _rope_calls(base).items():
        with pytest.raises(mtlinv.InvalidArgumentError, match=f"^{op}: base={shown}{BASE_RANGE}"):
            call()


def _decoder(rope_theta):
    rng = np.random.default_rng(0)
    wq, scales, biases = mtlinv.quantize(rng.standard_normal((8, 64)).astype(np.float32), group_size=32, bits=4)
    output = types.SimpleNamespace(wq=mtlinv.asarray(wq), scales=mtlinv.asarray(scales),
                                   biases=mtlinv.asarray(biases), group_size=32, bits=4)
    return mtlinv.Decoder(n_heads=1, rope_theta=rope_theta, rms_eps=1e-5, layers=[], output=output,
                          embedding=mtlinv.asarray(np.ones((8, 64), np.float32)),
                          output_norm=mtlinv.asarray(np.ones(64, np.float32)))


def test_decoder_rope_theta_is_checked_where_it_is_given():
    with pytest.raises(mtlinv.InvalidArgumentError, match=f"^Decoder: rope_theta=1e-45{BASE_RANGE}"):
        _decoder(1e-45)
    with pytest.raises(mtlinv.InvalidArgumentError, match=f"^Decoder: rope_theta=0.5{BASE_RANGE}"):
        _decoder(0.5)
    for theta in (1.0, 10000.0, F32_MAX):
        assert _decoder(theta).capacity > 0


@pytest.mark.parametrize("base", [1.0, 10000.0, F32_MAX], ids=["one", "llama", "f32-max"])
def test_rope_base_at_the_range_edges_gives_finite_results(base):
    """The edges run, at the first positions and at the last a cache can hold (2^32 - 2: the angle pos * 1 is
    largest at base 1), and base 1 rotates every pair by one radian a position, as the float64 reference does."""
    for call in _rope_calls(base).values():
        assert all(np.isfinite(np.asarray(r)).all() for r in call())
    x = np.random.default_rng(0).standard_normal((2, 3, 64)).astype(np.float32)
    assert np.isfinite(np.asarray(mtlinv.rope_heads(x[:1], 2**32 - 2, base))).all()
    got = np.asarray(mtlinv.rope_heads(x, 5, base), np.float64).transpose(1, 0, 2)
    np.testing.assert_allclose(got, rope_reference(x.astype(np.float64), np.arange(5, 7), base), rtol=1e-5,
                               atol=1e-5)
