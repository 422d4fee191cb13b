"""gemv_nk_mma, the matrix-unit GEMV that plans pick for 16-bit W [N, K] on devices with matrix units (CUDA): on
the emulator the gpu_plans fixture turns the capability on and the kernel runs on metal/mma.h's fallback, so its
loads, tails, splits and epilogue are checked in CI; with MTLINV_DEVICE=cuda the same tests run on the tensor
cores."""
import struct

import numpy as np
import pytest

import ml_dtypes
import mtlinv
from helpers import RTOL, first_difference, random, same_bits, unaligned
from test_gemv import k_splits, reference, weights

MMA_DTYPES = [np.float16, ml_dtypes.bfloat16]
MMA_IDS = ["f16", "bf16"]


def kernel(rows, k, n, dtype, limit):
    return mtlinv._native.plan_gemv(rows=rows, k=k, n=n, dtype=np.dtype(dtype).name, limit=limit)["launches"][0]


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("k, n", [(320, 72), (4100, 40), (7, 3), (40, 17)])
def test_rows_invariant_and_accurate(dtype, k, n, gpu_plans, rng):
    """Every row of M = 1..16 (tiles of 8 rows, and of 16 above M = 8) equals the row alone, with bias, K tails (a
    lane's group cut by K, whole lanes past K) and N tails; and the result is within the dtype's bound of a float64
    reference."""
    mtlinv.set_limit(16)
    assert kernel(1, k, n, dtype, 16)["kernel"].startswith("gemv_nk_mma_")
    w = weights(rng, n, k, dtype, True)
    bias = random(rng, (n,), dtype)
    x = random(rng, (16, k), dtype)
    singles = [np.asarray(mtlinv.gemv(x[r:r + 1], w, bias)) for r in range(16)]
    for m in (2, 5, 8, 9, 16):
        full = np.asarray(mtlinv.gemv(x[:m], w, bias))
        for r in range(m):
            assert same_bits(full[r:r + 1], singles[r]), f"M={m} row {r}: {first_difference(full[r:r+1], singles[r])}"
    ref = reference(x, w, bias)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(full, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("filler", [np.nan, np.inf, 6e4, 0.0])
def test_filler_rows_do_not_leak(filler, gpu_plans, rng):
    """The other seven rows of a tile hold NaN, inf, large or zero values: row 4's bits do not move."""
    mtlinv.set_limit(16)
    w = weights(rng, 48, 256, np.float16, True)
    x = random(rng, (12, 256), np.float16)
    alone = np.asarray(mtlinv.gemv(x[4:5], w))
    x[[0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]] = filler
    assert same_bits(np.asarray(mtlinv.gemv(x, w))[4:5], alone)


def test_nan_inf_propagate(gpu_plans, rng):
    mtlinv.set_limit(16)
    w = weights(rng, 16, 64, ml_dtypes.bfloat16, True)
    x = random(rng, (4, 64), ml_dtypes.bfloat16)
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    w[3, 7] = abs(float(w[3, 7])) + 1
    y = np.asarray(mtlinv.gemv(x, w)).astype(np.float32)
    assert np.isnan(y[1]).all()
    assert np.isinf(y[2, 3]) and np.isfinite(y[0]).all() and np.isfinite(y[3]).all()


def test_unaligned_x_same_bits(gpu_plans, rng):
    """x one element off a 16-byte boundary takes element loads (load16_upto) instead of 16-byte loads: the same
    bits."""
    mtlinv.set_limit(8)
    k = 1024 + 24
    w = weights(rng, 24, k, np.float16, True)
    x = random(rng, (8, k), np.float16)
    unaligned_copy = unaligned(x)
    for m in (1, 8):
        assert same_bits(np.asarray(mtlinv.gemv(unaligned_copy[:m], w)), np.asarray(mtlinv.gemv(x[:m], w))), m


def test_negative_control_limit_zero_differs(gpu_plans, rng):
    """With limit 0, M=8 runs gemv_nk_mma with the throughput split count: another order, other bits for this
    fixed case; with limit 8 the same rows give the single-row bits."""
    k, n = 4096, 256
    w = weights(rng, n, k, np.float16, True)
    x = random(rng, (8, k), np.float16)
    mtlinv.set_limit(8)
    singles = np.concatenate([np.asarray(mtlinv.gemv(x[r:r + 1], w)) for r in range(8)])
    assert same_bits(np.asarray(mtlinv.gemv(x, w)), singles)
    mtlinv.set_limit(0)
    assert kernel(8, k, n, np.float16, 0)["kernel"] == "gemv_nk_mma_r8_f16"
    throughput = np.asarray(mtlinv.gemv(x, w))
    assert not same_bits(throughput, singles), "throughput matched canonical: the control cannot fail"


@pytest.mark.parametrize("rows, limit, canonical, name", [
    (1, 0, True, "gemv_nk_mma_r8_bf16"), (8, 0, False, "gemv_nk_mma_r8_bf16"), (8, 8, True, "gemv_nk_mma_r8_bf16"),
    (9, 16, True, "gemv_nk_mma_r16_bf16"), (16, 16, True, "gemv_nk_mma_r16_bf16"),
    (32, 16, False, "gemv_nk_mma_r16_bf16"), (33, 16, False, "gemm_tiled_bf16")])
def test_routing(rows, limit, canonical, name, gpu_plans):
    """Tiles of 8 rows up to M = 8, of 16 above (W read once for 16 rows); the split count of M = 1 for every
    canonical call, another above the limit; the tiled GEMM above 32 rows."""
    plan = mtlinv._native.plan_gemv(rows=rows, k=4096, n=4096, dtype="bfloat16", limit=limit)
    assert plan["canonical"] is canonical
    launch = plan["launches"][0]
    assert launch["kernel"] == name
    if name.startswith("gemv_nk_mma"):
        tile = 8 if rows <= 8 else 16
        assert launch["threadgroups"][:2] == (256, -(-rows // tile))
        assert (launch["threads"][0] == kernel(1, 4096, 4096, "bfloat16", 0)["threads"][0]) is canonical


def test_other_layouts_and_float32_keep_the_scalar_kernels(gpu_plans):
    """The matrix units take 16-bit W [N, K] only: float32 (its products are not exact in 16 bits) and W [K, N]
    stay on gemv_nk / gemv_kn."""
    assert kernel(4, 4096, 512, np.float32, 16)["kernel"] == "gemv_nk_r4_f32"
    plan = mtlinv._native.plan_gemv(rows=4, k=4096, n=512, dtype="float16", limit=16, transpose=False)
    assert plan["launches"][0]["kernel"] == "gemv_kn_r4_f16"


def test_short_k_above_the_limit_takes_the_tiled_gemm(gpu_plans):
    """K = 32 is one block, held by the first split only: another split count would give the canonical order, so
    rows above the limit take the tiled GEMM."""
    assert kernel(4, 32, 64, ml_dtypes.bfloat16, 0)["kernel"] == "gemm_tiled_bf16"
    assert kernel(4, 32, 64, ml_dtypes.bfloat16, 4)["kernel"] == "gemv_nk_mma_r8_bf16"


# gemv_nk_mma's forms: (rows per tile, output tiles per threadgroup, splits per simdgroup).
FORMS = {"r8": (8, 1, 1), "r8_c2": (8, 2, 1), "r16": (16, 1, 1), "r16_u2": (16, 1, 2)}


def launch_form(form, x, w, bias, splits, vector_loads):
    """y = x @ w.T + bias by gemv_nk_mma's `form` with `splits` K splits, launched directly."""
    rows, tiles, per_simdgroup = FORMS[form]
    m, k = x.shape
    n = w.shape[0]
    y = mtlinv.asarray(np.zeros((m, n), x.dtype))
    # GemvArgs: rows, k, n, k_splits, x/w/y batch strides, has_bias, vector_loads, w_kn
    args = struct.pack("<10I", m, k, n, splits, m * k, 0, m * n, 1, vector_loads, 0)
    name = f"gemv_nk_mma_{form}_{MMA_IDS[MMA_DTYPES.index(x.dtype.type)]}"
    mtlinv._native._launch(name, (-(-n // (16 * tiles)), -(-m // rows), 1), (32 * splits // per_simdgroup, 1, 1),
                           args, [mtlinv.asarray(x), mtlinv.asarray(w), mtlinv.asarray(bias), y])
    return np.asarray(y)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("splits", [2, 4, 8])
@pytest.mark.parametrize("vector_loads", [1, 0])
def test_forms_give_the_same_bits(dtype, splits, vector_loads, rng):
    """Two output tiles per threadgroup (r8_c2) and two splits per simdgroup (r16_u2) change which simdgroup sums a
    split, never the order: the same bits as one tile and one split per simdgroup at the same split count, with K
    tails (42 blocks of 32: blocks left after the groups in flight, whole lanes past K; with element loads, every
    block in the tail loop and a lane's group cut by K), N tails (an odd number of output tiles, one cut) and bias."""
    k, n = (1320, 56) if vector_loads else (1316, 56)  # rows 16-byte aligned for vector loads
    w = weights(rng, n, k, dtype, True)
    bias = random(rng, (n,), dtype)
    x = random(rng, (16, k), dtype)
    r8 = launch_form("r8", x[:8], w, bias, splits, vector_loads)
    r16 = launch_form("r16", x, w, bias, splits, vector_loads)
    assert same_bits(launch_form("r8_c2", x[:8], w, bias, splits, vector_loads), r8)
    assert same_bits(launch_form("r16_u2", x, w, bias, splits, vector_loads), r16)
    assert same_bits(r16[:8], r8)
    ref = reference(x, w, bias)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(r16, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_forms_differ_from_another_split_count(rng):
    """The control for the test above: the same forms at another split count give other bits for this case."""
    k, n = 4096, 64
    w = weights(rng, n, k, np.float16, True)
    bias = np.zeros(n, np.float16)
    x = random(rng, (16, k), np.float16)
    assert not same_bits(launch_form("r16_u2", x, w, bias, 8, 1), launch_form("r16_u2", x, w, bias, 4, 1))


@pytest.mark.parametrize("k, n, wide, splits", [(4096, 14336, True, 8), (8192, 8192, True, 16),
                                                (4096, 4096, False, 16)])
def test_forms_in_the_plans(k, n, wide, splits, gpu_plans):
    """Where two output tiles per threadgroup keep the simdgroups per core at twice the splits (the emulator plans as
    for a GPU of 128 cores, an H200 has 132: the same forms), M <= 8 takes r8_c2 and 9..16 rows r16_u2 with half as
    many simdgroups; every canonical M has one split count. Above the limit: one tile, one split per simdgroup,
    another split count."""
    tiles = {1: "r8_c2" if wide else "r8", 8: "r8_c2" if wide else "r8", 16: "r16_u2" if wide else "r16"}
    for m, form in tiles.items():
        launch = kernel(m, k, n, ml_dtypes.bfloat16, 16)
        _, per_threadgroup, per_simdgroup = FORMS[form]
        assert launch["kernel"] == f"gemv_nk_mma_{form}_bf16"
        assert k_splits(launch) == splits
        assert launch["threadgroups"][:2] == (-(-n // (16 * per_threadgroup)), 1)
        assert launch["threads"][0] == 32 * splits // per_simdgroup
    above = kernel(16, k, n, ml_dtypes.bfloat16, 8)
    assert above["kernel"] == "gemv_nk_mma_r16_bf16" and k_splits(above) == splits // 2
    assert above["threads"][0] == 32 * splits // 2


def test_zero_products_change_no_sum(gpu_plans, rng):
    """metal/mma.h's promise, which lets sdpa_mma skip zeroing the keys a query does not see: a product that is
    exactly zero (x[k] = 0, W finite) changes no sum, whatever W[n, k] holds. Here the one nonzero product rounds to
    -0 in float (tiny times tiny, which only bfloat's range reaches), where IEEE additions of +0 and -0 disagree:
    with fma alone, as the fallback had it, the sums over negative W end at -0 and those over positive W at +0."""
    dtype = ml_dtypes.bfloat16
    mtlinv.set_limit(1)
    k, n = 64, 16  # one split: the whole sum in one simdgroup
    tiny = ml_dtypes.finfo(dtype).smallest_subnormal
    x = np.zeros((1, k), dtype)
    x[0, 0] = tiny
    w = np.empty((n, k), dtype)
    w[:, 0] = -tiny
    w[:, 1:] = -np.abs(random(rng, (n, k - 1), dtype))
    w_positive = w.copy()
    w_positive[:, 1:] = np.abs(w[:, 1:])
    y = np.asarray(mtlinv.gemv(x, w))
    assert not np.any(y.astype(np.float32))  # every output is a signed zero
    assert same_bits(y, np.asarray(mtlinv.gemv(x, w_positive))), first_difference(y, mtlinv.gemv(x, w_positive))
