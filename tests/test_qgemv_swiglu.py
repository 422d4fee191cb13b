"""qgemv_swiglu: a stacked gate|up projection with SwiGLU after it, one launch where qgemv_mma runs (its epilogue
holds each gate beside its up), qgemv then swiglu_halves elsewhere, the same bits either way. On the emulator the
gpu_plans fixture makes the plans pick qgemv_mma, so the fused epilogue runs in CI on metal/mma.h's fallback; with
MTLINV_DEVICE=cuda every test runs it on the tensor cores."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from helpers import RTOL, first_difference, random, same_bits
from test_qgemv import quantized, reference, run

DTYPES = [np.float16, ml_dtypes.bfloat16]
IDS = ["f16", "bf16"]


def fused(x, q, group_size, bits):
    wq, scales, biases = q
    return np.asarray(mtlinv.qgemv_swiglu(x, wq, scales, biases, group_size=group_size, bits=bits))


def unfused(x, q, group_size, bits):
    return np.asarray(mtlinv.swiglu_halves(run(x, q, group_size, bits)))


def plan(rows, k, f, dtype, limit, bits=4, group_size=64, scale_dtype=None):
    return mtlinv._native.plan_qgemv(rows=rows, k=k, n=2 * f, group_size=group_size, bits=bits,
                                     dtype=np.dtype(dtype).name, scale_dtype=np.dtype(scale_dtype or dtype).name,
                                     limit=limit, swiglu=True)


@pytest.mark.parametrize("plans", ["device", "gpu"])
@pytest.mark.parametrize("dtype", DTYPES + [np.float32], ids=IDS + ["f32"])
@pytest.mark.parametrize("bits, group_size, k, f", [
    (4, 64, 640, 40),     # 20 runs: whole steps only
    (4, 32, 352, 13),     # a partial last step; F not a multiple of the tile's 8 outputs
    (8, 128, 1152, 24),   # several splits
    (3, 32, 96, 5)])      # one step; a tile wider than F; a width without the fused kernel
def test_the_bits_of_qgemv_then_swiglu_halves(bits, group_size, k, f, dtype, plans, rng, request):
    """For M = 1..16 under limit 16, and M = 20 above it: the bits of qgemv and swiglu_halves called one after the
    other, whether the plan fuses them (qgemv_mma: 16-bit x on a GPU's plans) or not."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    mtlinv.set_limit(16)
    q = quantized(2 * f, k, group_size, bits, np.dtype(dtype))
    x = random(rng, (20, k), dtype)
    for m in (1, 2, 8, 9, 16, 20):
        got, expected = fused(x[:m], q, group_size, bits), unfused(x[:m], q, group_size, bits)
        assert got.shape == (m, f)
        assert same_bits(got, expected), f"M={m}: {first_difference(got, expected)}"
    launches = plan(1, k, f, dtype, 16, bits, group_size)["launches"]
    matrix_units = (plans == "gpu" or mtlinv.device_info()["matrix_units"]) and dtype != np.float32
    if matrix_units and bits in (4, 8):
        prefixes = [f"qgemv_mma_swiglu_b{bits}_r8_"]
    else:  # the scalar qgemv, or qgemv_mma at a width built without the SwiGLU epilogue
        prefixes = [f"qgemv_mma_b{bits}_r8_" if matrix_units else f"qgemv_b{bits}_", "swiglu_halves_"]
    assert len(launches) == len(prefixes), launches
    assert all(l["kernel"].startswith(p) for l, p in zip(launches, prefixes)), launches


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_rows_invariant_and_accurate(dtype, gpu_plans, rng):
    """Every row of an M-row call equals the row alone (limit 16; tiles of 8 and 16 rows), and the result is within
    the dtype's bound of swiglu of the float64 gate and up (each rounded to the dtype first, as the kernel stores
    them)."""
    k, f = 576, 40
    q = quantized(2 * f, k, 32, 4, np.dtype(dtype))
    x = random(rng, (16, k), dtype)
    mtlinv.set_limit(16)
    singles = [fused(x[r:r + 1], q, 32, 4) for r in range(16)]
    for m in (3, 8, 16):
        full = fused(x[:m], q, 32, 4)
        for r in range(m):
            assert same_bits(full[r:r + 1], singles[r]), f"M={m} row {r}: {first_difference(full[r:r+1], singles[r])}"
    projection = np.asarray(np.asarray(reference(x, q, 32, 4), np.float32).astype(dtype), np.float64)
    gate, up = projection[:, :f], projection[:, f:]
    ref = gate / (1 + np.exp(-gate)) * up
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(full, np.float64), ref, rtol=4 * tol, atol=4 * tol * np.abs(ref).max())


def test_negative_control_limit_zero_differs(gpu_plans, rng):
    """With limit 0, M = 8 takes qgemv_mma with the throughput split count, fused as well: other bits for this
    fixed case (4096 products a sum); with limit 8 the rows have their single-row bits."""
    k, f = 4096, 128
    q = quantized(2 * f, k, 64, 4, np.dtype(np.float16))
    x = random(rng, (8, k), np.float16)
    mtlinv.set_limit(8)
    singles = np.concatenate([fused(x[r:r + 1], q, 64, 4) for r in range(8)])
    assert same_bits(fused(x, q, 64, 4), singles)
    mtlinv.set_limit(0)
    assert [l["kernel"] for l in plan(8, k, f, np.float16, 0)["launches"]] == ["qgemv_mma_swiglu_b4_r8_f16"]
    assert not same_bits(fused(x, q, 64, 4), singles), "throughput matched canonical: the control cannot fail"


@pytest.mark.parametrize("rows, limit, bits, kernels", [
    (1, 0, 4, ["qgemv_mma_swiglu_b4_r8_bf16"]), (9, 16, 8, ["qgemv_mma_swiglu_b8_r16_bf16"]),
    (32, 16, 4, ["qgemv_mma_swiglu_b4_r16_bf16"]), (33, 16, 4, ["qgemm_b4_bf16", "swiglu_halves_bf16"]),
    (1, 0, 5, ["qgemv_mma_b5_r8_bf16", "swiglu_halves_bf16"])])
def test_routing(rows, limit, bits, kernels, gpu_plans):
    """At 4 and 8 bits, qgemv_mma_swiglu in one launch over tiles of 8 outputs (half of qgemv's 16, from a [2 F, K]
    weight: the same grid), with the split count qgemv takes for 2 F outputs; qgemm then swiglu_halves above 32
    rows, and qgemv_mma then swiglu_halves at other widths, the projection in scratch."""
    p = plan(rows, 4096, 2048, ml_dtypes.bfloat16, limit, bits=bits)
    assert [l["kernel"] for l in p["launches"]] == kernels
    plain = mtlinv._native.plan_qgemv(rows=rows, k=4096, n=4096, group_size=64, bits=bits, dtype="bfloat16",
                                      limit=limit)["launches"][0]
    first = p["launches"][0]
    assert first["threadgroups"] == plain["threadgroups"] and first["threads"] == plain["threads"]
    n_arg = np.frombuffer(first["args"], np.uint32)[2]  # QGemvArgs.n: the outputs F where fused, else 2 F
    assert n_arg == (2048 if len(kernels) == 1 else 4096)


def test_errors(rng):
    x = random(rng, (2, 64), np.float16)
    wq, scales, biases = quantized(6, 64, 32, 4, np.dtype(np.float16))
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"qgemv_swiglu: wq has N=5 rows .*needs an even N"):
        mtlinv.qgemv_swiglu(x, wq[:5], scales[:5], biases[:5], group_size=32, bits=4)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"qgemv_swiglu: bits=7 is not supported"):
        mtlinv.qgemv_swiglu(x, wq, scales, biases, group_size=32, bits=7)
    with pytest.raises(mtlinv.DTypeError, match=r"qgemv_swiglu: wq has dtype int32"):
        mtlinv.qgemv_swiglu(x, wq.view(np.int32), scales, biases, group_size=32, bits=4)
    with pytest.raises(ValueError, match=r"qgemv_swiglu: scales has shape \[5, 2\] but N=6"):
        mtlinv.qgemv_swiglu(x, wq, scales[:5], biases, group_size=32, bits=4)
    with pytest.raises(ValueError, match=r"qgemv_swiglu: x has K=32 but wq"):
        mtlinv.qgemv_swiglu(x[:, :32], wq, scales, biases, group_size=32, bits=4)
    assert fused(np.zeros((0, 64), np.float16), (wq, scales, biases), 32, 4).shape == (0, 3)
