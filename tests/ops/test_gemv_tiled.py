"""gemv with W [N, K] in the tile layout (mtlinv.tile_weights), which the matrix-unit kernel reads in whole blocks:
the same bits as the row layout at every M up to the limit, the layout itself, the plans, and the errors where no
tiled kernel runs.
On the emulator the gpu_plans fixture turns matrix units on (metal/mma.h's fallback); with MTLINV_DEVICE=cuda the
same tests run on the tensor cores."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from helpers import RTOL, first_difference, random, same_bits, unaligned

DTYPES = [np.float16, ml_dtypes.bfloat16]
IDS = ["f16", "bf16"]


def run(x, w, bias=None):
    return np.asarray(mtlinv.gemv(x, w, bias))


def reference(x, w, bias=None):
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64).T
    return y if bias is None else y + np.asarray(bias, np.float64)


def kernel(rows, k, n, dtype, limit, tiled=True):
    return mtlinv._native.plan_gemv(rows=rows, k=k, n=n, dtype=np.dtype(dtype).name, limit=limit,
                                    tiled=tiled)["launches"][0]


def assert_accurate(y, ref, dtype):
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("k, n", [
    (512, 32),   # 16 blocks
    (224, 48)])  # 7 blocks, an odd number of tiles
def test_tiles_give_the_bits_of_rows(k, n, dtype, gpu_plans, rng):
    """Every M of 1..20 (tiles of 8 and 16 rows, and two row tiles past 16), canonical, with bias: the tile layout's
    output equals the row layout's bit for bit, and each row the row alone; and it is accurate."""
    mtlinv.set_limit(20)
    w = random(rng, (n, k), dtype, scale=k ** -0.5)
    tiles_w = mtlinv.tile_weights(w)
    bias = random(rng, (n,), dtype)
    x = random(rng, (20, k), dtype)
    singles = [run(x[r:r + 1], tiles_w, bias) for r in range(20)]
    for m in (1, 5, 8, 9, 16, 20):
        rows = run(x[:m], w, bias)
        tiles = run(x[:m], tiles_w, bias)
        assert same_bits(tiles, rows), f"M={m}: {first_difference(tiles, rows)}"
        for r in range(m):
            assert same_bits(tiles[r:r + 1], singles[r]), f"M={m} row {r}"
    assert_accurate(tiles, reference(x, w, bias), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_unaligned_operands_take_element_loads(dtype, gpu_plans, rng):
    """16-byte loads need x and w on 16-byte boundaries; either one off takes the element loads, with the bits of
    the aligned call (and of the row layout)."""
    mtlinv.set_limit(16)
    k, n = 288, 32
    w = random(rng, (n, k), dtype, scale=k ** -0.5)
    tiles_w = mtlinv.tile_weights(w)
    x = random(rng, (16, k), dtype)
    for m in (1, 9):
        aligned = run(x[:m], tiles_w)
        assert same_bits(aligned, run(x[:m], w)), m
        for a, b in ((unaligned(x[:m]), tiles_w), (x[:m], unaligned(tiles_w))):
            assert same_bits(run(a, b), aligned), m


def test_throughput_path_reads_tiles_too(gpu_plans, rng):
    """Above the limit (limit 0) the tiled kernel runs with the throughput split count at any M, also past the 32
    rows where the row layout switches to the tiled GEMM, and stays accurate."""
    n, k, dtype = 32, 2048, np.dtype(ml_dtypes.bfloat16)
    w = random(rng, (n, k), dtype, scale=k ** -0.5)
    x = random(rng, (40, k), dtype)
    mtlinv.set_limit(0)
    assert kernel(40, k, n, dtype, 0)["kernel"] == "gemv_nk_mma_r16_bf16_tiled"
    assert kernel(40, k, n, dtype, 0, tiled=False)["kernel"] == "gemm_tiled_bf16"
    assert_accurate(run(x, mtlinv.tile_weights(w)), reference(x, w), dtype)


def test_negative_control_limit_zero_differs(gpu_plans, rng):
    """With limit 0, M = 8 runs the tiled kernel with the throughput split count: other bits for this fixed case
    than the rows alone, which limit 8 reproduces. Half precision and a wide N, since a float32 sum rounded to
    16 bits rarely shows its order."""
    n, k = 512, 4096
    w = mtlinv.tile_weights(random(rng, (n, k), np.float16, scale=k ** -0.5))
    x = random(rng, (8, k), np.float16)
    mtlinv.set_limit(8)
    singles = np.concatenate([run(x[r:r + 1], w) for r in range(8)])
    assert same_bits(run(x, w), singles)
    mtlinv.set_limit(0)
    assert kernel(8, k, n, np.float16, 0)["kernel"] == "gemv_nk_mma_r8_f16_tiled"
    assert not same_bits(run(x, w), singles), "throughput matched canonical: the control cannot fail"


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("k", [32, 96])
def test_layout(k, dtype, rng):
    """Block [t, b] holds K positions [32 b, 32 b + 32) of rows 16 t .. 16 t + 15: the C++ core's rearrangement
    (src/core/tile_layout.h) against the layout written out."""
    n = 32
    w = random(rng, (n, k), dtype)
    t = mtlinv.tile_weights(w)
    blocks = k // 32
    assert t.shape == (2, blocks, 16, 32) and t.dtype == np.dtype(dtype)
    for tile in range(2):
        for b in range(blocks):
            for r in range(16):
                assert same_bits(t[tile, b, r], w[16 * tile + r, 32 * b:32 * b + 32])


def test_plans(gpu_plans):
    """The tiled kernels at every M, in the canonical form's shapes: two output tiles for 8 rows and two splits per
    simdgroup for 16 where the form is wide (N = 14336 on a GPU of 132 cores), one otherwise."""
    for m, limit, want in ((1, 8, "gemv_nk_mma_r8_bf16_tiled"), (9, 16, "gemv_nk_mma_r16_bf16_tiled"),
                           (100, 0, "gemv_nk_mma_r16_bf16_tiled")):
        launch = kernel(m, 4096, 4096, ml_dtypes.bfloat16, limit)
        assert launch["kernel"] == want
        assert launch["threadgroups"][1] == -(-m // (8 if m <= 8 else 16))
    wide = mtlinv._native.plan_gemv(rows=1, k=4096, n=14336, dtype="float16", limit=8)["launches"][0]["kernel"]
    assert kernel(1, 4096, 14336, np.float16, 8)["kernel"] == wide + "_tiled"


def test_errors(gpu_plans, rng):
    """Bad tiled calls raise naming the argument and the values; tile_weights refuses what no kernel reads."""
    w = random(rng, (32, 96), np.float16)
    t = mtlinv.tile_weights(w)
    x = random(rng, (2, 96), np.float16)
    with pytest.raises(mtlinv.DTypeError, match=r"gemv: x is float32 but w is float16"):
        run(x.astype(np.float32), t)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"x has K=64 but w has K=96 \(x \[2, 64\], w "
                                                          r"\[2, 3, 16, 32\], w layout \[N/16, K/32, 16, 32\]"):
        run(x[:, :64], t)
    # The shape gives K: an x a few positions short of the blocks' K does not pass (with a padded last block it did).
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"x has K=95 but w has K=96"):
        run(np.ascontiguousarray(x[:, :95]), t)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"w in the tile layout must be \[N/16, K/32, 16, 32\], "
                                                          r"got shape \[2, 6, 16, 16\]"):
        run(x, np.ascontiguousarray(t.reshape(2, 6, 16, 16)))
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"w of shape \[2, 3, 16, 32\] is w \[N, K\] in the tile "
                                                          r"layout, which needs transpose"):
        mtlinv.gemv(x, t, transpose=False)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"tile layout needs 16-bit x.*float32.*batched w"):
        mtlinv._native.plan_gemv(rows=1, k=96, n=32, dtype="float32", limit=8, batch=2, tiled=True)
    with pytest.raises(ValueError, match=r"tile_weights: N=24 is not a positive multiple of 16"):
        mtlinv.tile_weights(w[:24])
    with pytest.raises(ValueError, match=r"tile_weights: K=95 is not a positive multiple of 32 \(the layout's shape "
                                         r"must give K\); keep the row layout"):
        mtlinv.tile_weights(w[:, :95])
    with pytest.raises(TypeError, match=r"tile_weights: w has dtype float32"):
        mtlinv.tile_weights(w.astype(np.float32))
    with pytest.raises(ValueError, match=r"tile_weights: w must be \[N, K\], got shape \(1, 32, 96\)"):
        mtlinv.tile_weights(w[None])


def test_no_tiled_kernel_without_matrix_units(rng):
    """The default emulator plans as a device without matrix units: the tile layout is refused, naming why."""
    if mtlinv.device_info()["matrix_units"]:
        pytest.skip("this device has matrix units")
    w = mtlinv.tile_weights(random(rng, (32, 64), np.float16))
    for m in (1, 0):  # no rows too: whether a call is refused does not depend on M
        with pytest.raises(mtlinv.InvalidArgumentError, match="on a device without matrix units"):
            run(random(rng, (m, 64), np.float16), w)


def test_audit_checks_the_tile_layout_where_it_runs(gpu_plans):
    """`mtlinv check` audits gemv with w in the tile layout too on a device with matrix units."""
    from mtlinv.apps import audit
    tiled_cases = [c for c in audit.cases(quick=True) if c.op == "gemv" and "tiles" in c.desc]
    assert [c.desc.split()[2] for c in tiled_cases] == ["f16", "bf16"]
    for case in tiled_cases:
        passed, detail = case.run(4)
        assert passed, (case.desc, detail)
