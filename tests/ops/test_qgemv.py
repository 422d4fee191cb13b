"""qgemv: bitwise row-invariance under the limit, the negative control, the dequantisation point, accuracy,
errors, routing."""
import functools

import ml_dtypes

import numpy as np
import pytest

import mtlinv
from mtlinv import quant
from helpers import DTYPE_IDS, FLOAT_DTYPES, RTOL, first_difference, random, same_bits, unaligned

# The (group_size, bits) pairs of issue 4, and group 16 (built at 8 bits: GGUF's Q6_K, whose runs of 32 values span
# two groups); every other supported width runs in the smaller tests.
PAIRS = [(32, 4), (64, 4), (128, 4), (32, 8), (64, 8), (16, 8)]
PAIR_IDS = [f"g{g}b{b}" for g, b in PAIRS]


@functools.lru_cache(maxsize=None)
def quantized(n, k, group_size, bits, dtype, seed=0):
    """(wq, scales, biases) of a random [n, k] weight in `dtype`, made once per session (quantize is the slow
    part of these tests); read-only so no test can change another's weights."""
    rng = np.random.default_rng(seed)
    q = quant.quantize(random(rng, (n, k), dtype, scale=k ** -0.5), group_size=group_size, bits=bits)
    for a in q:
        a.flags.writeable = False
    return q


def run(x, q, group_size, bits, bias=None):
    wq, scales, biases = q
    return np.asarray(mtlinv.qgemv(x, wq, scales, biases, group_size=group_size, bits=bits, bias=bias))


def reference(x, q, group_size, bits, bias=None):
    """float64 product with the weights the kernels multiply: quant.dequantize_float32 (scale * q, rounded to
    float32, plus bias)."""
    w = quant.dequantize_float32(*q, group_size=group_size, bits=bits).astype(np.float64)
    y = np.asarray(x, np.float64) @ w.T
    return y if bias is None else y + np.asarray(bias, np.float64)


def assert_rows_invariant(x, q, group_size, bits, ms, bias=None):
    """For each M in `ms`, every row of an M-row call equals the call on that row alone, bit for bit. The M rows are
    a window of x starting at M % (len(x) - 15), so a row's content is checked at several positions."""
    alone = [run(x[r:r + 1], q, group_size, bits, bias) for r in range(len(x))]
    for m in ms:
        start = m % (len(x) - 15)
        full = run(x[start:start + m], q, group_size, bits, bias)
        for r in range(m):
            assert same_bits(full[r:r + 1], alone[start + r]), \
                f"M={m} row {r}: {first_difference(full[r:r + 1], alone[start + r])}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group_size, bits", PAIRS, ids=PAIR_IDS)
def test_rows_invariant_seed_shape(group_size, bits, dtype, rng):
    """The seed's shape, K=4096, N=512: M = 1..16, every row position."""
    mtlinv.set_limit(16)
    q = quantized(512, 4096, group_size, bits, dtype)
    x = random(rng, (19, 4096), dtype)
    assert_rows_invariant(x, q, group_size, bits, range(1, 17))


@pytest.mark.parametrize("bits", quant.SUPPORTED_BITS)
def test_rows_invariant_gpu_plans_every_width(bits, gpu_plans, rng):
    """Every bit width with the GPU plans' K splits, at a K whose runs (32 positions each) do not divide evenly
    among the lanes: the paired-run loop and the single-run loop of the kernel both run, and every tile height."""
    mtlinv.set_limit(16)
    k = 4096 + 5 * 32
    assert mtlinv._native.plan_qgemv(rows=1, k=k, n=13, group_size=32, bits=bits)["launches"][0]["threads"][0] > 32
    q = quantized(13, k, 32, bits, np.dtype(np.float32))
    x = random(rng, (25, k), np.float32)
    assert_rows_invariant(x, q, 32, bits, [1, 2, 3, 4, 5, 8, 9, 10])


@pytest.mark.parametrize("bits", quant.SUPPORTED_BITS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_rows_invariant_odd_n_with_bias(bits, dtype, rng):
    """N = 37 (a partial 4-output tile), K = 384 (3 groups of 128, 12 of 32), with the epilogue bias; every bit
    width, including the 3, 5 and 6 whose values straddle words."""
    mtlinv.set_limit(16)
    group_size = (32, 64, 128)[bits % 3]
    q = quantized(37, 384, group_size, bits, dtype)
    bias = random(rng, (37,), dtype)
    x = random(rng, (17, 384), dtype)
    assert_rows_invariant(x, q, group_size, bits, range(1, 17), bias)


def test_k_split_shape_is_invariant(rng):
    """K = 11008 (the down projection of a 7B model): several simdgroups split K; their combine must stay fixed."""
    assert mtlinv._native.plan_qgemv(rows=1, k=11008, n=64)["launches"][0]["threads"][0] > 32
    mtlinv.set_limit(16)
    q = quantized(64, 11008, 64, 4, np.dtype(np.float16))
    x = random(rng, (18, 11008), np.float16)
    assert_rows_invariant(x, q, 64, 4, [1, 2, 5, 8, 9, 16])


@pytest.mark.parametrize("dtype", [np.float32, FLOAT_DTYPES[2]], ids=["f32", "bf16"])
@pytest.mark.parametrize("filler", [np.nan, np.inf, -np.inf, 3e38, 0.0])
def test_filler_rows_do_not_leak(filler, dtype, rng):
    mtlinv.set_limit(16)
    q = quantized(100, 256, 64, 4, np.dtype(dtype))
    x = random(rng, (12, 256), dtype)
    alone = run(x[4:5], q, 64, 4)
    x[[0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]] = filler
    full = run(x, q, 64, 4)
    assert same_bits(full[4:5], alone)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group_size, bits", [(64, 4), (16, 8)], ids=["g64b4", "g16b8"])
def test_negative_control_limit_zero_differs(group_size, bits, dtype, rng):
    """With limit 0, M=8 takes the throughput kernel, whose reduction order differs: the invariance tests above
    would catch a kernel that mixed the two. In 16-bit types the output's rounding hides most float32-level
    differences, so those cases are 4096 wide."""
    q = quantized(512 if dtype == np.float32 else 4096, 4096, group_size, bits, np.dtype(dtype))
    x = random(rng, (8, 4096), dtype)
    singles = np.concatenate([run(x[r:r + 1], q, group_size, bits) for r in range(8)])
    assert mtlinv.get_limit() == 0
    assert not same_bits(run(x, q, group_size, bits), singles), \
        "throughput path matched canonical bits: the control cannot fail"
    mtlinv.set_limit(8)
    assert same_bits(run(x, q, group_size, bits), singles)


@pytest.mark.parametrize("limit", [0, 128], ids=["throughput", "canonical"])
@pytest.mark.parametrize("bits", quant.SUPPORTED_BITS)
def test_dequantisation_point(bits, limit):
    """x = identity picks single weights out: y[k, n] = W(n, k) exactly, so both kernels must dequantise to exactly
    quant.dequantize_float32's float32 values: scale * q rounded, then + bias (an fma would differ: the float32
    scales of quantize carry full 24-bit mantissas, so scale * q is rarely exact)."""
    mtlinv.set_limit(limit)
    group_size = (32, 64, 128)[bits % 3]
    q = quantized(40, 128, group_size, bits, np.dtype(np.float32))
    w = quant.dequantize_float32(*q, group_size=group_size, bits=bits)
    fused = np.asarray(quant.unpack(q[0], bits, 128), np.float64).reshape(40, -1, group_size) * \
        np.asarray(q[1], np.float64)[..., None] + np.asarray(q[2], np.float64)[..., None]
    assert not np.array_equal(fused.reshape(40, 128).astype(np.float32), w), "the test cannot tell fma from mul+add"
    y = run(np.eye(128, dtype=np.float32), q, group_size, bits)
    assert np.array_equal(y, w.T)


@pytest.mark.parametrize("limit", [0, 256], ids=["throughput", "canonical"])  # 256 rows of x = identity
def test_group_16_weights(limit):
    """Group 16: values [0, 16) of each run of 32 take one group's scale and bias, [16, 32) the next's, in both
    kernels: x = identity picks out exactly quant.dequantize_float32's weights, which one scale per run (the first
    group's, as a kernel reading groups of 32 would take) does not give."""
    mtlinv.set_limit(limit)
    q = quantized(40, 256, 16, 8, np.dtype(np.float32))
    w = quant.dequantize_float32(*q, group_size=16, bits=8)
    one_per_run = quant.dequantize_float32(q[0], q[1][:, ::2], q[2][:, ::2], group_size=32, bits=8)
    assert (one_per_run != w).mean() > 0.4, "the test cannot tell the halves' scales apart"
    assert np.array_equal(run(np.eye(256, dtype=np.float32), q, 16, 8), w.T)


def test_group_16_rows_invariant_with_gpu_plans(gpu_plans, rng):
    """Group 16 with the GPU plans' K splits, at a K whose runs do not divide evenly among the lanes."""
    mtlinv.set_limit(16)
    k = 4096 + 5 * 32
    q = quantized(13, k, 16, 8, np.dtype(np.float32))
    x = random(rng, (25, k), np.float32)
    assert_rows_invariant(x, q, 16, 8, [1, 2, 3, 4, 5, 8, 9, 10])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("limit", [0, 16], ids=["throughput", "canonical"])
@pytest.mark.parametrize("rows", [12, 40])  # above the limit: the row-tiled qgemv, then qgemm
@pytest.mark.parametrize("group_size, bits", [(64, 4), (16, 8)], ids=["g64b4", "g16b8"])
def test_accuracy(group_size, bits, dtype, limit, rows, rng):
    mtlinv.set_limit(limit)
    q = quantized(200, 1024, group_size, bits, np.dtype(dtype))
    bias = random(rng, (200,), dtype)
    x = random(rng, (rows, 1024), dtype)
    y = run(x, q, group_size, bits, bias).astype(np.float64)
    ref = reference(x, q, group_size, bits, bias)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("limit", [0, 16])
@pytest.mark.parametrize("rows", [4, 40])
def test_nan_inf_propagate(limit, rows, rng):
    mtlinv.set_limit(limit)
    q = quantized(8, 64, 32, 4, np.dtype(np.float32))
    x = random(rng, (rows, 64), np.float32)
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    y = run(x, q, 32, 4)
    w = quant.dequantize_float32(*q, group_size=32, bits=4)
    assert np.isnan(y[1]).all()
    assert np.array_equal(np.isinf(y[2]), w[:, 7] != 0) and np.isfinite(y[0]).all() and np.isfinite(y[3:]).all()


def test_leading_dims_and_vector_x(rng):
    mtlinv.set_limit(8)
    q = quantized(24, 64, 32, 8, np.dtype(np.float32))
    x = random(rng, (2, 3, 64), np.float32)
    y = run(x, q, 32, 8)
    assert y.shape == (2, 3, 24)
    v = run(x[1, 2], q, 32, 8)
    assert v.shape == (24,)
    assert same_bits(v, y[1, 2])
    np.testing.assert_allclose(y, reference(x, q, 32, 8), rtol=1e-5, atol=1e-5)


def test_tensor_operands(rng):
    """Operands already on the device (mtlinv.Tensor) give the same bits as NumPy arrays."""
    q = quantized(16, 128, 64, 4, np.dtype(np.float16))
    x = random(rng, (3, 128), np.float16)
    tensors = tuple(mtlinv.asarray(a) for a in q)
    assert same_bits(run(mtlinv.asarray(x), tensors, 64, 4), run(x, q, 64, 4))


@pytest.mark.parametrize("limit", [0, 16], ids=["throughput", "canonical"])
def test_unaligned_x_same_bits(limit, rng):
    """x two bytes off a 16-byte boundary takes the element-wise loads: same bits as the vector loads."""
    mtlinv.set_limit(limit)
    q = quantized(40, 256, 64, 4, np.dtype(np.float16))
    x = random(rng, (5, 256), np.float16)
    unaligned_copy = unaligned(x)
    assert same_bits(run(unaligned_copy, q, 64, 4), run(x, q, 64, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["qgemv", "qgemv_mma"])
@pytest.mark.parametrize("bits", quant.SUPPORTED_BITS)
def test_unaligned_wq_same_bits(bits, dtype, gpu_plans, rng):
    """wq one word off a 16-byte boundary takes word loads where 4- and 8-bit runs otherwise load 16 bytes at once:
    the same bits, at M=1 and in a tile of 8. With the GPU plans (several simdgroups, runs in flight; float32 x
    runs qgemv, 16-bit x qgemv_mma) and K = 1024 + 3 * 32 so that lanes hold odd run counts and qgemv_mma's last
    step is partial."""
    mtlinv.set_limit(8)
    k = 1024 + 96
    group_size = 32
    kernel = mtlinv._native.plan_qgemv(rows=8, k=k, n=9, group_size=group_size, bits=bits,
                                       dtype=np.dtype(dtype).name, limit=8)["launches"][0]["kernel"]
    assert kernel.startswith("qgemv_mma_" if dtype == np.float16 else f"qgemv_b{bits}_")
    q = quantized(9, k, group_size, bits, np.dtype(dtype))
    x = random(rng, (8, k), dtype)
    wq = q[0]
    unaligned_copy = unaligned(wq)
    for m in (1, 2, 8):
        got = run(x[:m], (unaligned_copy, q[1], q[2]), group_size, bits)
        assert same_bits(got, run(x[:m], q, group_size, bits)), m


def test_errors_name_values(rng):
    wq, scales, biases = quantized(16, 128, 64, 4, np.dtype(np.float32))
    x = random(rng, (2, 128), np.float32)

    def call(x=x, wq=wq, scales=scales, biases=biases, group_size=64, bits=4, bias=None):
        return mtlinv.qgemv(x, wq, scales, biases, group_size=group_size, bits=bits, bias=bias)

    with pytest.raises(ValueError, match=r"K=96 is not a multiple of group_size=64"):
        call(x=x[:, :96])
    # Group 16 divides K=48, but the kernels read runs of 32 values: the last 16 would be left out, silently.
    g16 = [np.zeros((16, 48 * 8 // 32), np.uint32), np.ones((16, 3), np.float32), np.zeros((16, 3), np.float32)]
    with pytest.raises(ValueError, match=r"qgemv: K=48 is not a multiple of 32, the values the kernels read"):
        call(x=x[:, :48], wq=g16[0], scales=g16[1], biases=g16[2], group_size=16, bits=8)
    with pytest.raises(ValueError, match=r"quant_tile: K=48 is not a multiple of 32, the values the kernels read"):
        mtlinv.quant.tile(*g16, group_size=16, bits=8)
    with pytest.raises(ValueError, match=r"x has K=64 but wq \[16, 16\] holds 16 words per row; .* needs 8"):
        call(x=x[:, :64])
    with pytest.raises(ValueError, match=r"scales has shape \[16, 1\] but N=16, K=128 at group_size=64 needs "
                                         r"\[N, K/group_size\] = \[16, 2\]"):
        call(scales=scales[:, :1])
    with pytest.raises(ValueError, match=r"biases has shape \[15, 2\]"):
        call(biases=biases[:15])
    with pytest.raises(ValueError, match="group_size=32 needs .* = \\[16, 4\\]"):
        call(group_size=32)
    with pytest.raises(ValueError, match="bits=7 is not supported"):
        call(bits=7)
    with pytest.raises(ValueError, match="group_size=16 is built for bits=8 only, got bits=4"):
        call(group_size=16)
    with pytest.raises(ValueError, match=r"group_size=24 is not supported; use 16 \(bits=8 only\), 32, 64 or 128"):
        call(group_size=24)
    with pytest.raises(TypeError, match="scales are float16 with float32 x and bits=4 at group_size=64; scales must "
                                        "have x's dtype"):
        call(scales=scales.astype(np.float16), biases=biases.astype(np.float16))
    with pytest.raises(TypeError, match="scales is float32 but biases is float16"):
        call(x=x.astype(np.float16), biases=biases.astype(np.float16))
    with pytest.raises(TypeError, match="wq has dtype int32; expected uint32"):
        call(wq=wq.astype(np.int32))
    with pytest.raises(TypeError, match="wq has dtype int32; expected uint32"):
        call(wq=mtlinv.asarray(wq.astype(np.int32)))
    with pytest.raises(TypeError, match="wq has dtype float32; expected uint32"):
        call(wq=wq.astype(np.float32))
    with pytest.raises(TypeError, match="x has dtype int32"):
        call(x=x.astype(np.int32))
    with pytest.raises(ValueError, match=r"wq must be \[N, K\*bits/32\]"):
        call(wq=wq[None])
    with pytest.raises(ValueError, match=r"bias has shape \[15\] but wq has N=16"):
        call(bias=np.zeros(15, np.float32))
    with pytest.raises(TypeError, match="x is float32 but bias is float16"):
        call(bias=np.zeros(16, np.float16))
    with pytest.raises(TypeError, match="group_size"):
        mtlinv.qgemv(x, wq, scales, biases, bits=4)


@pytest.mark.parametrize("rows, limit, canonical", [(1, 0, True), (2, 0, False), (2, 1, False), (2, 2, True),
                                                      (16, 16, True), (17, 16, False), (1, 100, True), (33, 16, False)])
@pytest.mark.parametrize("bits", [4, 8])
def test_routing(rows, limit, canonical, bits, gpu_plans):
    """Below the limit the canonical qgemv; above it the same row-tiled kernels (another split count) up to 32
    rows, and the tiled qgemm beyond. float32 x, which takes the scalar kernels on every device (16-bit x takes
    qgemv_mma where there are matrix units: tests/ops/test_qgemv_mma.py)."""
    plan = mtlinv._native.plan_qgemv(rows=rows, k=4096, n=4096, group_size=64, bits=bits, dtype="float32",
                                     limit=limit)
    assert plan["canonical"] is canonical
    tile = {1: 1, 2: 2, 16: 8, 17: 8}.get(rows)
    assert plan["launches"][0]["kernel"] == (f"qgemv_b{bits}_r{tile}_f32" if rows <= 32 else f"qgemm_b{bits}_f32")


@pytest.mark.parametrize("plans", ["emulator", "gpu"])
def test_throughput_qgemv_splits_differ_from_canonical(plans, request):
    """Above the limit the row-tiled qgemv runs with another K split count than below it, so it never reproduces
    the canonical bits by accident (the negative controls depend on it)."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    launches = [mtlinv._native.plan_qgemv(rows=8, k=4096, n=4096, group_size=64, bits=4, dtype="float32",
                                          limit=limit)["launches"][0] for limit in (8, 0)]
    assert launches[1]["kernel"].startswith("qgemv_b4_")
    threads = [launch["threads"][0] for launch in launches]
    assert threads[0] != threads[1]


@pytest.mark.parametrize("rows, tile", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (9, 8), (16, 8)])
def test_row_tile_from_m(rows, tile, gpu_plans):
    """The canonical kernel's tile height R is the smallest of 1, 2, 4, 8 that holds M rows; more rows run as
    further tiles of 8. The K splits never change with it."""
    plan = mtlinv._native.plan_qgemv(rows=rows, k=4096, n=512, group_size=64, bits=4, dtype="float32", limit=16)
    launch = plan["launches"][0]
    assert launch["kernel"] == f"qgemv_b4_r{tile}_f32"
    assert launch["threadgroups"][1] == -(-rows // tile)


def test_plan_k_partition_does_not_depend_on_m():
    plans = [mtlinv._native.plan_qgemv(rows=m, k=4096, n=512, dtype="float32", limit=16) for m in range(1, 17)]
    assert len({p["launches"][0]["threads"] for p in plans}) == 1
    assert {p["launches"][0]["threadgroups"][0] for p in plans} == {128}


def test_every_kernel_is_built():
    names = set(mtlinv.kernel_names())
    for bits in quant.SUPPORTED_BITS:
        for suffix in ("f32", "f16", "bf16"):
            assert {f"qgemv_b{bits}_r{r}_{suffix}" for r in (1, 2, 4, 8)} | {f"qgemm_b{bits}_{suffix}"} <= names
    for bits in (4, 8):
        for suffix in ("f16", "bf16"):
            assert {f"qgemv_b{bits}_r{r}_{suffix}_sf32" for r in (1, 2, 4, 8)} <= names
    for suffix in ("f32", "f16", "bf16", "f16_sf32", "bf16_sf32"):  # group 16: 8 bits only
        assert {f"qgemv_b8_r{r}_{suffix}_g16" for r in (1, 2, 4, 8)} <= names
    assert not any(name.endswith("_g16") and "_b8_" not in name and "_si8" not in name for name in names)
    # The super-block form (int8 codes): Q4_K, Q5_K at group 32, Q6_K at 6 bits and group 16.
    for suffix in ("f32", "f16", "bf16"):
        widths = ((4, ""), (5, ""), (6, "_g16"))
        assert {f"qgemv_b{b}_r{r}_{suffix}_si8{g}" for b, g in widths for r in (1, 2, 4, 8)} | {
            f"qgemm_b{b}_{suffix}_si8" for b in (4, 5, 6)} <= names
    assert {name for name in names if "_g16" in name and "_si8" in name and "_b6_" not in name} == set()
    # float16 scales beside bfloat16 x: the legacy GGUF blocks' own fields, at 4, 5 and 8 bits.
    assert {f"qgemv_b{b}_r{r}_bf16_sf16" for b in (4, 5, 8) for r in (1, 2, 4, 8)} | {
        f"qgemm_b{b}_bf16_sf16" for b in (4, 5, 8)} | {f"qgemv_mma_b{b}_r{r}_bf16_sf16" for b in (4, 5, 8)
                                                      for r in (8, 16)} | {
        f"qgemv_mma_b{b}_r{r}_bf16_sf16_tiled" for b in (4, 8) for r in (8, 16)} <= names


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("bits", [4, 8])
def test_float32_scales_with_16bit_activations(dtype, bits, rng):
    """float32 scales beside 16-bit x (GGUF's float16 block scales do not fit bfloat16; the float32 import holds
    every block): same invariance, and the weights dequantise exactly as mtlinv.quant.dequantize_float32 says."""
    from mtlinv import gguf_blocks, quant
    k, n = 256, 40
    w = rng.standard_normal((n, k)).astype(np.float32)
    raw = gguf_blocks.quantize_q4_1(w) if bits == 4 else gguf_blocks.quantize_q8_0(w)
    to_affine = gguf_blocks.q4_1_to_affine if bits == 4 else gguf_blocks.q8_0_to_affine
    wq, scales, biases = to_affine(raw, (n, k), dtype=np.float32)
    x = rng.standard_normal((6, k)).astype(dtype)
    mtlinv.set_limit(8)
    full = np.asarray(mtlinv.qgemv(x, wq, scales, biases, group_size=32, bits=bits))
    for r in range(6):
        alone = np.asarray(mtlinv.qgemv(x[r:r + 1], wq, scales, biases, group_size=32, bits=bits))
        assert same_bits(full[r:r + 1], alone), f"row {r}"
    w_deq = quant.dequantize_float32(wq, scales, biases, group_size=32, bits=bits).astype(np.float64)
    ref = x.astype(np.float64) @ w_deq.T
    tol = 1.6e-2 if dtype == ml_dtypes.bfloat16 else 2e-3
    np.testing.assert_allclose(full.astype(np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())
    plan = mtlinv._native.plan_qgemv(rows=1, k=k, n=n, group_size=32, bits=bits, dtype=dtype, scale_dtype="float32")
    assert plan["launches"][0]["kernel"].endswith("_sf32")
    wq2, scales2, biases2 = quant.quantize(w, group_size=32, bits=2)  # float32 scales, 2 bits: no kernel
    for rows in (x, x[:0]):  # also with no rows: whether a call is refused does not depend on M
        with pytest.raises(TypeError, match="scales must have x's dtype, be float32 with bits 4 or 8, be float16 with"):
            mtlinv.qgemv(rows, wq2, scales2, biases2, group_size=32, bits=2)


@pytest.mark.parametrize("kind, bits", [("q4_0", 4), ("q4_1", 4), ("q5_0", 5), ("q5_1", 5), ("q8_0", 8)])
@pytest.mark.parametrize("plans", ["device", "gpu"])
def test_float16_scales_with_bfloat16_activations(kind, bits, plans, request, rng):
    """GGUF's legacy blocks with their own float16 scales beside bfloat16 x (the _bf16_sf16 kernels): the same
    float32 weights as the float32-scale import, so the scalar qgemv and qgemm give its bits, and qgemv_mma too where
    both run the same width (4 and 8 bits; the import runs 5-bit codes as 8-bit ones); rows at or below the limit
    are each the row alone; the product is within bfloat16's bound of a float64 one."""
    from mtlinv import gguf_blocks, gguf_kquants
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    k, n = 256, 48
    w = rng.standard_normal((n, k)).astype(np.float32)
    if kind in ("q5_0", "q5_1"):
        size = gguf_kquants.BLOCK_BYTES[kind]
        raw = rng.integers(0, 256, size=(n, k // 32, size), dtype=np.uint8)
        for at in (0, 2) if kind == "q5_1" else (0,):  # d (and m): float16 of either sign, of order 2^-7
            raw[..., at:at + 2] = (rng.uniform(2.0 ** -8, 2.0 ** -6, (n, k // 32)) *
                                   rng.choice([-1, 1], (n, k // 32))).astype(np.float16).view(np.uint8).reshape(
                                       n, k // 32, 2)
        wq, s32, b32, _, _ = gguf_kquants.to_affine(raw.reshape(-1), (n, k), kind)
        s16, b16 = s32.astype(np.float16), b32.astype(np.float16)
        assert np.array_equal(s16.astype(np.float32), s32) and np.array_equal(b16.astype(np.float32), b32)
    else:
        raw = {"q4_0": gguf_blocks.quantize_q4_0, "q4_1": gguf_blocks.quantize_q4_1, "q8_0": gguf_blocks.quantize_q8_0}[
            kind](w)
        to_affine = getattr(gguf_blocks, f"{kind}_to_affine")
        wq, s16, b16 = to_affine(raw, (n, k), dtype=np.float16)
        _, s32, b32 = to_affine(raw, (n, k), dtype=np.float32)
    wide = quant.pack(quant.unpack(wq, bits, k), 8) if bits == 5 else wq  # float32 scales: 4 or 8 bits
    x = rng.standard_normal((48, k)).astype(ml_dtypes.bfloat16)
    weights = quant.dequantize_float32(wq, s16, b16, group_size=32, bits=bits).astype(np.float64)
    ref = x.astype(np.float64) @ weights.T
    mtlinv.set_limit(16)
    singles = [np.asarray(mtlinv.qgemv(x[r:r + 1], wq, s16, b16, group_size=32, bits=bits)) for r in range(16)]
    for m in (1, 5, 9, 16, 20, 48):
        got = np.asarray(mtlinv.qgemv(x[:m], wq, s16, b16, group_size=32, bits=bits))
        want = np.asarray(mtlinv.qgemv(x[:m], wide, s32, b32, group_size=32, bits=8 if bits == 5 else bits))
        kernel = mtlinv._native.plan_qgemv(rows=m, k=k, n=n, group_size=32, bits=bits, dtype="bfloat16",
                                           scale_dtype="float16")["launches"][0]["kernel"]
        assert "_bf16_sf16" in kernel, kernel
        if not (kernel.startswith("qgemv_mma_") and bits == 5):
            assert same_bits(got, want), f"M={m} ({kernel}): {first_difference(got, want)}"
        for r in range(m if m <= 16 else 0):
            assert same_bits(got[r:r + 1], singles[r]), f"M={m} row {r}"
        np.testing.assert_allclose(got.astype(np.float64), ref[:m], rtol=1.6e-2, atol=1.6e-2 * np.abs(ref[:m]).max())
    with pytest.raises(TypeError, match="be float16 with bfloat16 x and bits 4, 5 or 8"):
        mtlinv.qgemv(x, quant.pack(np.zeros((n, k), np.uint8), 6), s16, b16, group_size=32, bits=6)
    with pytest.raises(TypeError, match="bits=8 at group_size=16; scales must have x's dtype"):
        mtlinv.qgemv(x, quant.pack(np.zeros((n, k), np.uint8), 8), np.repeat(s16, 2, axis=1),
                     np.repeat(b16, 2, axis=1), group_size=16, bits=8)


def random_q6_k(rng, n, k):
    """Raw GGUF Q6_K blocks for an [n, k] weight: random codes and int8 scales, and float16 d of either sign in
    [2^-12, 2^-8) (as llama.cpp's quantiser writes for weights of order 1), so the weights stay finite."""
    import gguf
    blocks = rng.integers(0, 256, size=(n, k // 256, 210), dtype=np.uint8)
    d = (rng.choice([-1.0, 1.0], (n, k // 256)) * rng.uniform(2.0 ** -12, 2.0 ** -8, (n, k // 256))).astype(np.float16)
    blocks[..., 208:210] = d.view(np.uint8).reshape(n, k // 256, 2)
    want = gguf.quants.dequantize(blocks.reshape(n, -1), gguf.GGMLQuantizationType.Q6_K).reshape(n, k)
    return blocks.reshape(-1), np.asarray(want, np.float32)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("matrix_units", [False, True], ids=["qgemv", "qgemv_mma"])
def test_q6_k_import(matrix_units, dtype, request, rng):
    """GGUF Q6_K imported exactly (mtlinv.gguf_kquants: group 16, float32 scales, 6-bit codes stored in 8 bits), on
    the scalar kernel and (the GPU plans with matrix units) on qgemv_mma: x = identity picks out gguf's own
    dequantisation rounded to x's type (equal values; a zero's sign may differ), every row equals the row alone,
    and the product is within the dtype's bound of a float64 one."""
    from mtlinv import gguf_kquants
    if matrix_units:
        request.getfixturevalue("gpu_plans")
    k, n = 512, 40
    raw, want = random_q6_k(rng, n, k)
    wq, scales, biases, bits, group_size = gguf_kquants.to_affine(raw, (n, k), "q6_k")
    assert (bits, group_size, scales.dtype) == (6, 16, np.float32)
    q = (quant.pack(quant.unpack(wq, 6, k), 8), scales, biases)
    kernel = mtlinv._native.plan_qgemv(rows=1, k=k, n=n, group_size=16, bits=8, dtype=np.dtype(dtype).name,
                                       scale_dtype="float32", limit=k)["launches"][0]["kernel"]
    mma = matrix_units or mtlinv.device_info()["matrix_units"]  # a GPU with matrix units always plans qgemv_mma
    assert kernel.startswith("qgemv_mma_b8_" if mma else "qgemv_b8_") and kernel.endswith("_sf32_g16")
    mtlinv.set_limit(k)
    picked = run(np.eye(k, dtype=dtype), q, 16, 8).astype(np.float32)
    assert np.array_equal(picked, want.astype(dtype).astype(np.float32).T)
    mtlinv.set_limit(16)
    x = random(rng, (16, k), dtype)
    assert_rows_invariant(np.concatenate([x, x[:3]]), q, 16, 8, [1, 2, 5, 8, 9, 16])
    ref = x.astype(np.float64) @ want.astype(np.float64).T
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(run(x, q, 16, 8).astype(np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_rows_invariant_with_gpu_plans(gpu_plans, rng):
    """The GPU plans' K splits (4 simdgroups at K=4096), run on the emulator; float32 x, which GPUs run on the
    scalar kernel."""
    mtlinv.set_limit(16)
    w = rng.standard_normal((24, 4096)).astype(np.float32)
    wq, scales, biases = quant.quantize(w, group_size=64, bits=4)
    x = rng.standard_normal((16, 4096)).astype(np.float32)
    plan = mtlinv._native.plan_qgemv(rows=16, k=4096, n=24, group_size=64, bits=4, dtype="float32")
    assert plan["launches"][0]["kernel"].startswith("qgemv_b4_")
    assert plan["launches"][0]["threads"][0] > 32
    full = np.asarray(mtlinv.qgemv(x, wq, scales, biases, group_size=64, bits=4))
    for r in range(16):
        alone = np.asarray(mtlinv.qgemv(x[r:r + 1], wq, scales, biases, group_size=64, bits=4))
        assert same_bits(full[r:r + 1], alone), f"row {r}"


@pytest.mark.parametrize("bad", [2**40, -4, 4.0, True])
def test_bits_and_group_size_are_checked_before_conversion(bad):
    x = np.zeros((1, 64), np.float32)
    wq, s, b = np.zeros((1, 8), np.uint32), np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32)
    with pytest.raises(mtlinv.InvalidArgumentError, match="is not supported"):
        mtlinv.qgemv(x, wq, s, b, group_size=64, bits=bad)
    with pytest.raises(mtlinv.InvalidArgumentError, match="is not supported"):
        mtlinv.qgemv(x, wq, s, b, group_size=bad, bits=4)


def test_short_k_above_the_limit_takes_qgemm():
    """K = 256 is 8 runs: a second split would hold none and reproduce the canonical order, so rows above the
    limit take qgemm instead of the row-tiled qgemv."""
    plan = mtlinv._native.plan_qgemv(rows=4, k=256, n=64, group_size=64, bits=4, dtype="float32", limit=0)
    assert plan["launches"][0]["kernel"] == "qgemm_b4_f32"


def test_emulator_runs_one_row_in_the_two_row_tile():
    """The emulator's plan puts M=1 in the 2-row tile, whose emulator build runs more than twice as fast; the
    invariance tests above compare those rows bit for bit with rows of larger tiles."""
    if mtlinv.device_info()["backend"] != "emu":
        pytest.skip("the emulator's plan")
    plan = mtlinv._native.plan_qgemv(rows=1, k=4096, n=512, group_size=64, bits=4, dtype="bfloat16", limit=16)
    assert plan["launches"][0]["kernel"] == "qgemv_b4_r2_bf16"
