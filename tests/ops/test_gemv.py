"""gemv / matmul: bitwise row-invariance under the limit, the negative control, accuracy, errors, routing."""
import struct

import numpy as np
import pytest

import mtlinv
from helpers import DTYPE_IDS, FLOAT_DTYPES, RTOL, first_difference, random, same_bits, unaligned


def reference(x, w, bias=None, transpose=True):
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    y = x64 @ (np.swapaxes(w64, -1, -2) if transpose else w64)
    return y if bias is None else y + np.asarray(bias, np.float64)


def weights(rng, n, k, dtype, transpose, batch=None):
    shape = (n, k) if transpose else (k, n)
    return random(rng, shape if batch is None else (batch,) + shape, dtype, scale=k ** -0.5)


def assert_rows_invariant(x, w, bias=None, transpose=True):
    """Every row of the M-row call equals the call on that row alone, bit for bit."""
    full = np.asarray(mtlinv.gemv(x, w, bias, transpose=transpose))
    for r in range(x.shape[-2]):
        alone = np.asarray(mtlinv.gemv(x[..., r:r + 1, :], w, bias, transpose=transpose))
        assert same_bits(full[..., r:r + 1, :], alone), f"row {r} of M={x.shape[-2]}: {first_difference(full[..., r:r+1, :], alone)}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["", "bias"])
def test_rows_invariant_m1_to_16(dtype, transpose, with_bias, rng):
    mtlinv.set_limit(16)
    k, n = 320, 72
    w = weights(rng, n, k, dtype, transpose)
    bias = random(rng, (n,), dtype) if with_bias else None
    x = random(rng, (16, k), dtype)
    for m in range(1, 17):
        assert_rows_invariant(x[:m], w, bias, transpose)


@pytest.mark.parametrize("k", [1, 7, 64, 4097])
@pytest.mark.parametrize("n", [1, 3, 1000])
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
def test_odd_shapes(k, n, transpose, rng):
    mtlinv.set_limit(16)
    dtype = np.float16
    w = weights(rng, n, k, dtype, transpose)
    x = random(rng, (9, k), dtype)
    assert_rows_invariant(x, w, transpose=transpose)
    y = np.asarray(mtlinv.gemv(x, w, transpose=transpose), np.float64)
    ref = reference(x, w, transpose=transpose)
    np.testing.assert_allclose(y, ref, rtol=RTOL[np.dtype(dtype)], atol=2e-3 * np.abs(ref).max() + 1e-6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_seed_shapes(dtype, rng):
    """The seed PR's case: K=4096, N=512, M=2..8."""
    mtlinv.set_limit(8)
    w = weights(rng, 512, 4096, dtype, True)
    x = random(rng, (8, 4096), dtype)
    singles = [np.asarray(mtlinv.gemv(x[r:r + 1], w)) for r in range(8)]
    for m in range(2, 9):
        full = np.asarray(mtlinv.gemv(x[:m], w))
        for r in range(m):
            assert same_bits(full[r:r + 1], singles[r]), f"M={m} row {r}"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_batched_weights(dtype, rng):
    mtlinv.set_limit(16)
    w = weights(rng, 40, 96, dtype, True, batch=3)
    x = random(rng, (3, 5, 96), dtype)
    assert_rows_invariant(x, w)
    y = np.asarray(mtlinv.gemv(x, w), np.float64)
    np.testing.assert_allclose(y, reference(x, w), rtol=RTOL[np.dtype(dtype)], atol=RTOL[np.dtype(dtype)])
    shared = np.asarray(mtlinv.gemv(x[0], w))  # one x against every batch entry
    assert shared.shape == (3, 5, 40)
    assert same_bits(shared[1], np.asarray(mtlinv.gemv(x[0], w[1])))


def test_leading_dims_and_vector_x(rng):
    mtlinv.set_limit(16)
    w = weights(rng, 24, 32, np.float32, True)
    x = random(rng, (2, 3, 32), np.float32)
    y = mtlinv.gemv(x, w)
    assert y.shape == (2, 3, 24)
    v = mtlinv.gemv(x[0, 0], w)
    assert v.shape == (24,)
    assert same_bits(np.asarray(v), np.asarray(y)[0, 0])


@pytest.mark.parametrize("filler", [np.nan, np.inf, 6e4, 1e-7, 0.0])
def test_filler_rows_do_not_leak(filler, rng):
    mtlinv.set_limit(16)
    w = weights(rng, 100, 256, np.float16, True)
    x = random(rng, (12, 256), np.float16)
    alone = np.asarray(mtlinv.gemv(x[4:5], w))
    x[[0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]] = filler
    full = np.asarray(mtlinv.gemv(x, w))
    assert same_bits(full[4:5], alone)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
def test_unaligned_operands_same_bits(dtype, transpose, rng):
    """The scalar kernels (every dtype here; float32 and Metal everywhere) take 16-byte loads only when x and w both
    start on a 16-byte boundary: either one off it takes the element loads, with the same bits."""
    mtlinv.set_limit(8)
    k = 1048  # rows of whole 16-byte pieces in every dtype, so the aligned call does take the 16-byte loads
    w = weights(rng, 40, k, dtype, transpose)
    x = random(rng, (8, k), dtype)
    for m in (1, 8):
        aligned = np.asarray(mtlinv.gemv(x[:m], w, transpose=transpose))
        for a, b in ((unaligned(x[:m]), w), (x[:m], unaligned(w))):
            assert same_bits(np.asarray(mtlinv.gemv(a, b, transpose=transpose)), aligned), m


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
def test_negative_control_limit_zero_differs(dtype, transpose, rng):
    """With limit 0, M=8 takes the throughput kernel, whose reduction order differs: the invariance tests above
    would catch a kernel that mixed the two. In 16-bit types the output's rounding hides most float32-level
    differences (a 512-wide bf16 case differs in none of its outputs), so those cases are 4096 wide."""
    n = 512 if dtype == np.float32 else 4096
    w = weights(rng, n, 4096, dtype, transpose)
    x = random(rng, (8, 4096), dtype)
    singles = np.concatenate([np.asarray(mtlinv.gemv(x[r:r + 1], w, transpose=transpose)) for r in range(8)])
    assert mtlinv.get_limit() == 0
    full = np.asarray(mtlinv.gemv(x, w, transpose=transpose))
    assert not same_bits(full, singles), "throughput path matched canonical bits: the control cannot fail"
    mtlinv.set_limit(8)
    assert same_bits(np.asarray(mtlinv.gemv(x, w, transpose=transpose)), singles)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("limit", [0, 16], ids=["throughput", "canonical"])
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
@pytest.mark.parametrize("rows", [12, 40], ids=["tiled-gemv", "gemm"])  # (throughput: both kernels)
def test_accuracy(dtype, limit, transpose, rows, rng):
    mtlinv.set_limit(limit)
    w = weights(rng, 200, 1000, dtype, transpose)
    bias = random(rng, (200,), dtype)
    x = random(rng, (rows, 1000), dtype)
    y = np.asarray(mtlinv.gemv(x, w, bias, transpose=transpose), np.float64)
    ref = reference(x, w, bias, transpose)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("limit", [0, 16])
def test_nan_inf_propagate(limit, rng):
    mtlinv.set_limit(limit)
    w = weights(rng, 8, 64, np.float32, True)
    x = random(rng, (4, 64), np.float32)
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    w[3, 7] = abs(w[3, 7]) + 1
    y = np.asarray(mtlinv.gemv(x, w))
    assert np.isnan(y[1]).all()
    assert np.isinf(y[2, 3]) and np.isfinite(y[0]).all() and np.isfinite(y[3]).all()


def test_matmul_alias(rng):
    a = random(rng, (5, 48), np.float32)
    b = random(rng, (48, 20), np.float32)
    y = mtlinv.matmul(a, b)
    np.testing.assert_allclose(np.asarray(y), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_errors_name_shapes(rng):
    x = random(rng, (2, 4095), np.float32)
    w = random(rng, (16, 4096), np.float32)
    with pytest.raises(ValueError, match=r"x has K=4095 but w has K=4096.*\[2, 4095\].*\[16, 4096\]"):
        mtlinv.gemv(x, w)
    with pytest.raises(TypeError, match="x is float32 but w is float16"):
        mtlinv.gemv(x[:, :16], w[:, :16].astype(np.float16))
    with pytest.raises(ValueError, match=r"gemv: bias has shape \[15\] but w has N=16 \(w \[16, 16\]\)"):
        mtlinv.gemv(x[:, :16], w[:, :16], np.zeros(15, np.float32))
    with pytest.raises(TypeError, match="gemv: x is float32 but bias is float16"):
        mtlinv.gemv(x[:, :16], w[:, :16], np.zeros(16, np.float16))
    with pytest.raises(TypeError, match="int32"):
        mtlinv.gemv(x.astype(np.int32), w.astype(np.int32))
    with pytest.raises(ValueError, match="w must be"):
        mtlinv.gemv(x, np.zeros(4095, np.float32))
    with pytest.raises(ValueError, match="batch 2 but w has batch 3"):
        mtlinv.gemv(random(rng, (2, 4, 8), np.float32), random(rng, (3, 5, 8), np.float32))
    with pytest.raises(TypeError, match="float64"):
        mtlinv.gemv(np.zeros((2, 8)), np.zeros((3, 8)))


@pytest.mark.parametrize("rows, limit, canonical, kernel", [
    (1, 0, True, "gemv_nk_r1_f32"), (2, 0, False, "gemv_nk_r2_f32"), (2, 1, False, "gemv_nk_r2_f32"),
    (2, 2, True, "gemv_nk_r2_f32"), (3, 4, True, "gemv_nk_r4_f32"), (16, 16, True, "gemv_nk_r8_f32"),
    (17, 16, False, "gemv_nk_r8_f32"), (32, 0, False, "gemv_nk_r8_f32"), (33, 16, False, "gemm_tiled_f32"),
    (1, 100, True, "gemv_nk_r1_f32")])
def test_routing(rows, limit, canonical, kernel):
    # float32: the scalar kernels on every device (16-bit W [N, K] takes gemv_nk_mma where there are matrix
    # units, tests/ops/test_gemv_mma.py).
    plan = mtlinv._native.plan_gemv(rows=rows, k=4096, n=4096, dtype="float32", limit=limit)
    assert plan["canonical"] is canonical
    assert plan["launches"][0]["kernel"] == kernel


def k_splits(launch):
    """GemvArgs.k_splits (metal/gemv_args.h: rows, k, n, k_splits, ...) of a planned launch: the K partition, which the
    threads per threadgroup do not show when a simdgroup sums two splits (gemv_nk_mma's r16_u2)."""
    return struct.unpack_from("<4I", launch["args"])[3]


def planned_k_splits(**shape):
    return k_splits(mtlinv._native.plan_gemv(**shape)["launches"][0])


@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
@pytest.mark.parametrize("plans", ["emulator", "gpu"])
def test_throughput_gemv_splits_differ_from_canonical(transpose, plans, request):
    """Above the limit the row-tiled kernels run with another K split, so those rows never share the canonical
    bits by accident (the negative controls depend on it)."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    splits = [planned_k_splits(rows=8, k=4096, n=4096, dtype="bfloat16", limit=limit, transpose=transpose)
              for limit in (8, 0)]
    assert splits[0] != splits[1]


@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
@pytest.mark.parametrize("n", [512, 14336])
def test_plan_k_partition_does_not_depend_on_m(transpose, n, gpu_plans):
    """Every canonical M has the K partition of M = 1, also where the tiles of 8 and 16 rows take different forms
    (gemv_nk_mma at N = 14336: two output tiles per threadgroup, two splits per simdgroup)."""
    splits = {planned_k_splits(rows=m, k=4096, n=n, dtype="bfloat16", limit=16, transpose=transpose)
              for m in range(1, 17)}
    assert len(splits) == 1
    assert splits.pop() > 1, "GPU plans split K"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
def test_rows_invariant_with_k_splits(dtype, transpose, gpu_plans, rng):
    """The GPU plans' multi-simdgroup K partition (ordered combine through threadgroup memory), run on the
    emulator: every row of M = 1..16 equals the row alone, and the result stays accurate."""
    mtlinv.set_limit(16)
    k, n = 4100, 40  # several K splits, with a tail
    w = weights(rng, n, k, dtype, transpose)
    bias = random(rng, (n,), dtype)
    x = random(rng, (16, k), dtype)
    singles = [np.asarray(mtlinv.gemv(x[r:r + 1], w, bias, transpose=transpose)) for r in range(16)]
    for m in (2, 7, 16):
        full = np.asarray(mtlinv.gemv(x[:m], w, bias, transpose=transpose))
        for r in range(m):
            assert same_bits(full[r:r + 1], singles[r]), f"M={m} row {r}"
    ref = reference(x, w, bias, transpose)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(full, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_short_k_above_the_limit_takes_the_tiled_gemm():
    """K = 128 in float32 is 32 groups of 16 bytes, all in the first split of gemv_nk: another split count would
    give the canonical order, so rows above the limit take the tiled GEMM. gemv_kn's K ranges always differ."""
    plans = {t: mtlinv._native.plan_gemv(rows=4, k=128, n=64, dtype="float32", limit=0, transpose=t)
             for t in (True, False)}
    assert plans[True]["launches"][0]["kernel"] == "gemm_tiled_f32"
    assert plans[False]["launches"][0]["kernel"] == "gemv_kn_r4_f32"
