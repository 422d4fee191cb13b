"""qgemv with weights in the tile layout (mtlinv.quant.tile), which the matrix-unit kernel reads in whole blocks: the
same bits as the row layout at every M, the layout itself, the plans, and the errors where no tiled kernel runs. On
the emulator the gpu_plans fixture turns matrix units on (metal/mma.h's fallback); with MTLINV_DEVICE=cuda the same
tests run on the tensor cores."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv import quant
from mtlinv.model.device_model import QuantLinear
from helpers import RTOL, first_difference, random, same_bits
from test_qgemv import quantized, reference, run

MMA_DTYPES = [np.float16, ml_dtypes.bfloat16]
MMA_IDS = ["f16", "bf16"]


def tiled(q, group_size, bits):
    t = quant.tile(*q, group_size=group_size, bits=bits)
    for a in t:
        a.flags.writeable = False
    return t


def kernel(rows, k, n, bits, dtype, limit, tiled_layout=True, scale_dtype=None):
    return mtlinv._native.plan_qgemv(rows=rows, k=k, n=n, group_size=64, bits=bits, dtype=np.dtype(dtype).name,
                                     scale_dtype=np.dtype(scale_dtype or dtype).name, limit=limit,
                                     tiled=tiled_layout)["launches"][0]


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("scales", ["x", "float32", "float16"], ids=["scales_x", "scales_f32", "scales_f16"])
@pytest.mark.parametrize("bits, group_size, k, n", [
    (4, 64, 640, 32),    # 20 runs: whole steps only
    (4, 32, 352, 16),    # 11 runs: a partial last step, padded in the tile layout
    (4, 128, 1024, 48),  # groups of 4 runs, several splits
    (8, 32, 320, 16),    # 10 runs: a partial last step
    (8, 16, 352, 32),    # group 16 (runs span two groups): 11 runs, a partial last step
    (8, 128, 1152, 32)])
def test_tiles_give_the_bits_of_rows(bits, group_size, k, n, scales, dtype, gpu_plans, rng):
    """Every M of 1..20 (tiles of 8 and 16 rows, and two row tiles past 16), canonical, with bias: the tile layout's
    output equals the row layout's bit for bit, and each row the row alone; and it is accurate. Scales of x's type,
    float32, or float16 beside bfloat16 x (GGUF's legacy blocks, at group sizes 32 and up)."""
    if scales == "float16" and (np.dtype(dtype) != np.dtype(ml_dtypes.bfloat16) or group_size == 16):
        pytest.skip("float16 scales are built beside bfloat16 x, at group sizes 32 and up")
    mtlinv.set_limit(20)
    q = quantized(n, k, group_size, bits, np.dtype(dtype))
    if scales != "x":
        q = (q[0], q[1].astype(scales), q[2].astype(scales))
    t = tiled(q, group_size, bits)
    bias = random(rng, (n,), dtype)
    x = random(rng, (20, k), dtype)
    singles = [run(x[r:r + 1], t, group_size, bits, bias) for r in range(20)]
    for m in (1, 5, 8, 9, 16, 20):
        rows = run(x[:m], q, group_size, bits, bias)
        tiles = run(x[:m], t, group_size, bits, bias)
        assert same_bits(tiles, rows), f"M={m}: {first_difference(tiles, rows)}"
        for r in range(m):
            assert same_bits(tiles[r:r + 1], singles[r]), f"M={m} row {r}"
    ref = reference(x, q, group_size, bits, bias)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(tiles, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
def test_two_output_tiles_give_the_bits_of_rows(dtype, bits, gpu_plans, rng):
    """The 16-row tile of 4- and 8-bit weights takes two output tiles per threadgroup where N / 32 threadgroups still
    give every core one (the emulator's GPU plans count 128; an H100 132): the row layout's bits at M = 9 and 16 and
    past 16, each row the row alone. N / 16 is odd, so the last threadgroup's second tile lies past N (computed,
    never stored); K has a partial last step (11 runs of 32)."""
    k, n, group_size = 352, 4240, 32  # 265 tiles
    if mtlinv.device_info()["backend"] == "emu":
        name = MMA_IDS[MMA_DTYPES.index(dtype)]
        assert kernel(16, 256, n, bits, dtype, 16)["kernel"] == f"qgemv_mma_b{bits}_r16_c2_{name}_tiled"  # (g 64)
        assert kernel(16, 256, 1024, bits, dtype, 16)["kernel"] == f"qgemv_mma_b{bits}_r16_{name}_tiled"  # 32 TGs
    mtlinv.set_limit(16)
    q = quantized(n, k, group_size, bits, np.dtype(dtype))
    t = tiled(q, group_size, bits)
    bias = random(rng, (n,), dtype)
    x = random(rng, (20, k), dtype)
    singles = [run(x[r:r + 1], t, group_size, bits, bias) for r in range(16)]
    for m in (9, 16, 20):  # 20: above the limit, the throughput split count
        tiles = run(x[:m], t, group_size, bits, bias)
        rows = run(x[:m], q, group_size, bits, bias)
        assert same_bits(tiles, rows), f"M={m}: {first_difference(tiles, rows)}"
        for r in range(m if m <= 16 else 0):
            assert same_bits(tiles[r:r + 1], singles[r]), f"M={m} row {r}"


def test_throughput_path_reads_tiles_too(gpu_plans, rng):
    """Above the limit (limit 0) the tiled kernel runs with the throughput split count at any M, also past the 32
    rows where the row layout switches to qgemm, and stays accurate."""
    n, k, group_size, bits, dtype = 32, 4096, 64, 4, np.dtype(ml_dtypes.bfloat16)
    q = quantized(n, k, group_size, bits, dtype)
    x = random(rng, (40, k), dtype)
    mtlinv.set_limit(0)
    assert kernel(40, k, n, bits, dtype, 0)["kernel"] == "qgemv_mma_b4_r16_bf16_tiled"
    fast = run(x, tiled(q, group_size, bits), group_size, bits)
    ref = reference(x, q, group_size, bits)
    tol = RTOL[dtype]
    np.testing.assert_allclose(np.asarray(fast, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_negative_control_limit_zero_differs(gpu_plans, rng):
    """With limit 0, M = 8 runs the tiled kernel with the throughput split count: other bits for this fixed case
    than the rows alone, which limit 8 reproduces. Half precision and a wide N, since a float32 sum rounded to
    16 bits rarely shows its order."""
    n, k, group_size, bits = 512, 4096, 64, 4
    q = quantized(n, k, group_size, bits, np.dtype(np.float16))
    t = tiled(q, group_size, bits)
    x = random(rng, (8, k), np.float16)
    mtlinv.set_limit(8)
    singles = np.concatenate([run(x[r:r + 1], t, group_size, bits) for r in range(8)])
    assert same_bits(run(x, t, group_size, bits), singles)
    mtlinv.set_limit(0)
    assert kernel(8, k, n, bits, np.float16, 0)["kernel"] == "qgemv_mma_b4_r8_f16_tiled"
    assert not same_bits(run(x, t, group_size, bits), singles), "throughput matched canonical: the control cannot fail"


@pytest.mark.parametrize("bits, group_size, k, scale_dtype", [
    (4, 32, 352, np.float16),   # a partial last step
    (8, 64, 256, np.float32),   # whole steps, 4-byte scales (GGUF imports)
    (8, 128, 384, ml_dtypes.bfloat16)])
def test_layout(bits, group_size, k, scale_dtype):
    """Block [t, s] of wq holds K positions [128 s, 128 s + 128) of rows 16 t .. 16 t + 15 (zero words past K), and
    scales [t, g] the 16 rows' scales of group g: the C++ core's rearrangement (src/core/tile_layout.h) against the
    layout written out."""
    n = 32
    wq, scales, biases = quantized(n, k, group_size, bits, np.dtype(scale_dtype))
    twq, ts, tb = quant.tile(wq, scales, biases, group_size=group_size, bits=bits)
    step_words = 128 * bits // 32
    steps = -(-k // 128)
    assert twq.shape == (2, steps, 16, step_words) and ts.shape == tb.shape == (2, k // group_size, 16)
    assert ts.dtype == tb.dtype == np.dtype(scale_dtype)
    for t in range(2):
        for s in range(steps):
            for r in range(16):
                row = wq[16 * t + r, s * step_words:(s + 1) * step_words]
                assert np.array_equal(twq[t, s, r, :row.size], row)
                assert not twq[t, s, r, row.size:].any()
    assert same_bits(ts.transpose(0, 2, 1).reshape(n, -1), scales)
    assert same_bits(tb.transpose(0, 2, 1).reshape(n, -1), biases)


def test_plans(gpu_plans):
    """The tiled kernels at every M: tiles of 8 rows up to M = 8, of 16 above (at 4-bit, two output tiles a
    threadgroup where N / 32 threadgroups give every core one: 128 in the emulator's GPU plans, 132 on an H100),
    several row tiles past 16."""
    for m, limit, want in ((1, 8, "qgemv_mma_b4_r8_bf16_tiled"), (9, 16, "qgemv_mma_b4_r16_c2_bf16_tiled"),
                           (100, 0, "qgemv_mma_b4_r16_c2_bf16_tiled")):
        launch = kernel(m, 4096, 8192, 4, ml_dtypes.bfloat16, limit)
        assert launch["kernel"] == want
        assert tuple(launch["threadgroups"][:2]) == (8192 // (16 if m <= 8 else 32), -(-m // (8 if m <= 8 else 16)))
    assert kernel(1, 4096, 4096, 8, np.float16, 8, scale_dtype=np.float32)["kernel"] == "qgemv_mma_b8_r8_f16_sf32_tiled"


def test_errors(gpu_plans):
    n, k, group_size, bits = 32, 256, 64, 4
    q = quantized(n, k, group_size, bits, np.dtype(np.float16))
    t = tiled(q, group_size, bits)
    x = np.ones((1, k), np.float16)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"tile layout need 16-bit x.*float32"):
        run(x.astype(np.float32), (t[0], t[1].astype(np.float32), t[2].astype(np.float32)), group_size, bits)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"wq in the tile layout has shape \[2, 3, 16, 16\]"):
        run(x, (np.zeros((2, 3, 16, 16), np.uint32), t[1], t[2]), group_size, bits)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"scales has shape \[32, 4\].*\[N/16, K/group_size, 16\]"):
        run(x, (t[0], q[1], t[2]), group_size, bits)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"wq must be \[N, K\*bits/32\] \(rows\) or"):
        run(x, (t[0][0], t[1], t[2]), group_size, bits)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"bits 4 or 8.*bits=2"):
        kernel(1, 256, 32, 2, np.float16, 8)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"N a multiple of 16.*N=40"):
        kernel(1, 256, 40, 4, np.float16, 8)
    with pytest.raises(ValueError, match=r"tile: N=24 is not a positive multiple of 16"):
        quant.tile(*quantized(24, k, group_size, bits, np.dtype(np.float16)), group_size=group_size, bits=bits)
    with pytest.raises(ValueError, match=r"tile: bits=3"):
        quant.tile(*quantized(n, k, group_size, 3, np.dtype(np.float16)), group_size=group_size, bits=3)
    with pytest.raises(ValueError, match=r"tile: wq must be \[N, K\*bits/32\]"):
        quant.tile(*(a[None] for a in q), group_size=group_size, bits=bits)
    # The native rearrangement behind quant.tile checks what it reads by itself (it is reachable from Python).
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"_quant_tile: scales must be \[N, K/group_size\] = "
                                                          r"\[32, 4\] of one 2- or 4-byte float dtype, or int8 codes, "
                                                          r"got float16 \[32, 2\]"):
        mtlinv._native._quant_tile(q[0], q[1][:, :2], q[2], group_size, bits)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"_quant_tile: wq must be uint32"):
        mtlinv._native._quant_tile(q[0].astype(np.int64), q[1], q[2], group_size, bits)


def test_no_tiled_kernel_without_matrix_units():
    """The default emulator plans as a device without matrix units: the tile layout is refused, naming why."""
    if mtlinv.device_info()["matrix_units"]:
        pytest.skip("this device has matrix units")
    q = quantized(32, 256, 64, 4, np.dtype(np.float16))
    for m in (1, 0):  # no rows too: whether a call is refused does not depend on M
        with pytest.raises(mtlinv.InvalidArgumentError, match="on a device without matrix units"):
            run(np.ones((m, 256), np.float16), tiled(q, 64, 4), 64, 4)


def test_decoder_projections_tile_where_the_device_has_matrix_units(gpu_plans, rng):
    """QuantLinear (the decoder's projections) uploads the tile layout there, and computes the row layout's bits."""
    w = rng.standard_normal((48, 256)).astype(np.float32)
    x = mtlinv.asarray(random(rng, (3, 256), ml_dtypes.bfloat16))
    mtlinv.set_limit(4)
    linear = QuantLinear.from_float(w, bits=4)
    assert linear.wq.shape == (3, 2, 16, 16)
    wq, scales, biases = quant.quantize(w, group_size=32, bits=4)
    rows = mtlinv.qgemv(x, wq, scales.astype(np.float32), biases.astype(np.float32), group_size=32, bits=4)
    assert same_bits(linear(x), rows)


def test_audit_checks_the_tile_layout_where_it_runs(gpu_plans):
    """`mtlinv check` audits qgemv in the tile layout too on a device with matrix units."""
    from mtlinv.apps import audit_cases
    tiled_cases = [c for c in audit_cases.extra_cases(quick=True) if "tile layout" in c.desc]
    assert [c.desc.split()[2] for c in tiled_cases] == ["f16", "bf16"]
    for case in tiled_cases:
        passed, detail = case.run(4)
        assert passed, (case.desc, detail)
