"""Float32 subnormals: canonical bits that do not depend on whether the GPU flushes them, and row invariance where
they do (docs/kernel_guide.md, "Subnormals").

The Metal Shading Language lets a GPU flush float32 subnormals to zero, as operands and as results. The emulator's
flush-to-zero mode (MTLINV_EMU_FTZ=1; _native._set_emu_ftz here) computes that way. `check` runs an op's bitwise
row invariance (M = 1..8, every row against the row alone) in IEEE arithmetic and, on the emulator, flushing, on
data whose products or sums reach float32's subnormals, then compares the two modes' bits: the same where the
kernels promise it (half data, whose products and sums are never float32 subnormals; rms_norm whose eps absorbs
its tiny sums of squares), different where the data's own products or sums are subnormal, which shows that the data
reaches them and that the mode flushes. Other tests check the mode itself, softmax weights below 2^-125 (0 in every
mode and path), the packed dequantisation of subnormal bfloat scales (rounded once in both modes), and
qkv_to_heads' value heads (copied, in both modes).
"""
import contextlib
import math
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv import _native, quant
from helpers import DTYPE_IDS, FLOAT_DTYPES, as_numpy, bits, rows_invariant, same_bits
from test_decoder_ops import _qkv_fused, _qkv_separately
from test_qgemv_mma import picked_weights, rounded_once

EMULATOR = mtlinv.device_info()["backend"] == "emu"
F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
ROWS = 8


@contextlib.contextmanager
def flushing(on):
    """The emulator's flush-to-zero mode on or off for the block; None: leave the device as it is."""
    if on is None:
        yield
        return
    previous = _native._set_emu_ftz(on)
    try:
        yield
    finally:
        _native._set_emu_ftz(previous)


def modes():
    return [False, True] if EMULATOR else [None]


def compare_modes(results, independent):
    """The IEEE and flushing results (bytes) are the same exactly when `independent`; off the emulator (one result)
    there is nothing to compare."""
    if len(results) == 2:
        assert (results[0] == results[1]) is independent, \
            "the modes give the same bits" if results[0] == results[1] else "the modes give different bits"


def check(call, inputs, independent):
    """call's rows are invariant in every mode, and the modes give the same bits exactly when `independent`."""
    mtlinv.set_limit(ROWS)
    results = []
    for ftz in modes():
        with flushing(ftz):
            rows_invariant(call, inputs, ROWS)
            results.append(bits(call(*(a[:ROWS] for a in inputs))))
    compare_modes(results, independent)


def spread(rng, shape, dtype, low, high):
    """Values of both signs, 2^e times [1, 2) with e uniform in [low, high), rounded to dtype."""
    e = rng.integers(low, high, size=shape)
    return (rng.choice([-1.0, 1.0], shape) * rng.uniform(1, 2, shape) * np.exp2(e)).astype(dtype)


def one_product(x, w, dtype):
    return float(np.asarray(mtlinv.gemv(np.array([[x]], dtype), np.array([[w]], dtype)), np.float64)[0, 0])


@pytest.mark.skipif(not EMULATOR, reason="the emulator's mode")
def test_mode_flushes_results_and_operands():
    """gemv of one product: a subnormal float32 result becomes 0, and so does a product with a subnormal float32 or
    bfloat operand; half subnormals are kept (their float32 values are normal)."""
    cases = [(F32, 2.0 ** -70, 2.0 ** -70, 2.0 ** -140, 0.0),  # the result is subnormal
             (F32, 2.0 ** -130, 2.0 ** 100, 2.0 ** -30, 0.0),  # an operand is
             (BF16, 2.0 ** -130, 2.0 ** 100, 2.0 ** -30, 0.0),  # a bfloat operand is
             (F16, 2.0 ** -24, 2.0 ** 10, 2.0 ** -14, 2.0 ** -14)]  # a half subnormal is not a float32 one
    for dtype, x, w, ieee, flushed in cases:
        with flushing(False):
            assert one_product(x, w, dtype) == ieee
        with flushing(True):
            assert one_product(x, w, dtype) == flushed


@pytest.mark.skipif(not EMULATOR, reason="the emulator's mode")
def test_environment_switch():
    script = ("import numpy as np, mtlinv; from mtlinv import _native; "
              "y = mtlinv.gemv(np.array([[2.0 ** -70]], np.float32), np.array([[2.0 ** -70]], np.float32)); "
              "print(_native._set_emu_ftz(False), float(np.asarray(y)[0, 0]))")
    for value, expected in (("1", "True 0.0"), ("0", f"False {2.0 ** -140!r}")):
        out = subprocess.run([sys.executable, "-c", script], env={**os.environ, "MTLINV_EMU_FTZ": value},
                             capture_output=True, text=True, check=True).stdout
        assert out.split() == expected.split()


# Exponents of the data. Float32 and bfloat: products of two values between 2^-150 and 2^-120, so that a row's sums
# start (and some stay) below 2^-126, where flushing changes them (an fma's product is exact inside it: a tiny product
# added to a normal sum is kept either way). Half data spans its own range: its products are at least 2^-48.
RANGES = {np.dtype(F32): (-75, -60), np.dtype(BF16): (-75, -60), np.dtype(F16): (-24, 4)}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("transpose", [True, False], ids=["nk", "kn"])
@pytest.mark.parametrize("plans", ["emulator", "gpu"])
def test_gemv(dtype, transpose, plans, request, rng):
    """gemv_nk, gemv_kn, and with GPU plans their K splits and (16-bit, [N, K]) the matrix-unit kernel."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    low, high = RANGES[np.dtype(dtype)]
    x = spread(rng, (ROWS, 160), dtype, low, high)
    w = spread(rng, (24, 160) if transpose else (160, 24), dtype, low, high)
    check(lambda a: mtlinv.gemv(a, w, transpose=transpose), [x], independent=dtype == F16)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("plans", ["emulator", "gpu"])
def test_qgemv(dtype, plans, request, rng):
    """Tiny scales and biases of x's dtype (quantize keeps scales above 1e-7, so they are made here): half ones down
    to its subnormals, float32 and bfloat ones whose weights' products with x lie below 2^-126. With GPU plans
    16-bit x takes qgemv_mma, which dequantises with metal/pair16.h."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    low, high = RANGES[np.dtype(dtype)]
    w_low, w_high = (-24, -4) if dtype == F16 else (-45, -35)
    scales = spread(rng, (16, 256 // 32), dtype, w_low, w_high)
    biases = spread(rng, (16, 256 // 32), dtype, w_low, w_high)
    wq = quant.pack(rng.integers(0, 16, size=(16, 256)), 4)
    x = spread(rng, (ROWS, 256), dtype, *((low, high) if dtype == F16 else (-100, -88)))
    check(lambda a: mtlinv.qgemv(a, wq, scales, biases, group_size=32, bits=4), [x], independent=dtype == F16)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_rms_norm(dtype, eps, rng):
    """Rows of tiny values: their squares are float32 subnormals (half's are not), their sums x + r never are. With
    eps = 1e-6 the mean square is below half an ulp of eps in either mode, so the scale and the bits are the same;
    with eps = 0 they differ."""
    low, high = (-24, -20) if dtype == F16 else (-100, -65)
    x = spread(rng, (ROWS, 96), dtype, low, high)
    r = spread(rng, (ROWS, 96), dtype, low, high)
    w = spread(rng, (96,), dtype, -2, 2)
    independent = dtype == F16 or eps > 0
    check(lambda a: mtlinv.rms_norm(a, w, eps), [x], independent)
    check(lambda a, b: np.concatenate([as_numpy(t) for t in mtlinv.add_rms_norm(a, b, w, eps)], -1), [x, r],
          independent)


def sdpa_queries(rng, dtype, head_dim, kv_len):
    """Scores spread over hundreds of binades at scale 1, so that many weights are below 2^-125; values of both
    signs at float32's smallest normals and below (half: its own range), so that their products with the weights,
    and for float32 and bfloat some values themselves, are subnormal."""
    q = (rng.standard_normal((2, ROWS, head_dim)) * 3).astype(dtype)
    k = (rng.standard_normal((1, kv_len, head_dim)) * 3).astype(dtype)
    v = spread(rng, (1, kv_len, head_dim), dtype, *((-14, 4) if dtype == F16 else (-135, -110)))
    return q, k, v


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("plans", ["emulator", "gpu"])
def test_sdpa(dtype, plans, request, rng):
    """A causal block of Lq = 1..8 queries against the queries alone: sdpa_blocks, and with GPU plans (16-bit)
    sdpa_mma, over two chunks (sdpa_combine) and one. Products of weights and values, half ones included, can be
    float32 subnormals: the modes are compared for float32 and bfloat, whose values are."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    for kv_len in (300, 40):
        q, k, v = sdpa_queries(rng, dtype, 64, kv_len)
        mtlinv.set_limit(ROWS)
        results = []
        for ftz in modes():
            with flushing(ftz):
                for m in range(1, ROWS + 1):
                    block = as_numpy(mtlinv.sdpa(q[:, :m], k, v, kv_len=kv_len - ROWS + m, scale=1.0))
                    for j in range(m):
                        alone = mtlinv.sdpa(q[:, j:j + 1], k, v, kv_len=kv_len - ROWS + j + 1, scale=1.0)
                        assert same_bits(block[:, j:j + 1], alone), f"Lq={m} query {j}"
                results.append(bits(block))
        if dtype != F16:
            compare_modes(results, independent=False)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("path", ["chunks", "split", "flash", "mma"])
def test_sdpa_weights_below_2_pow_minus_125_are_zero(dtype, path, request):
    """One query over a key of score 0 and value 0, and 32 keys about 130 binades below it (weights that would be
    float32 subnormals), or 120 (weights near 2^-120), one of them with a value of 2^100: the output is 0 in every
    mode, or that weight times 2^100. Without the cut the first would be about 2^-30 in IEEE arithmetic and 0
    flushing."""
    if path == "mma":
        if dtype == F32:
            pytest.skip("sdpa_mma takes 16-bit dtypes")
        request.getfixturevalue("gpu_plans")
    lq = {"chunks": 1, "split": 2, "flash": 9, "mma": 1}[path]
    mtlinv.set_limit(1)
    kernel = mtlinv._native.plan_sdpa(q_len=lq, kv_len=33, head_dim=64, dtype=np.dtype(dtype).name,
                                      causal=False)["launches"][0]["kernel"]
    assert kernel.startswith({"chunks": "sdpa_", "split": "sdpa_blocks", "flash": "sdpa_flash_d64",
                              "mma": "sdpa_mma_d64"}[path]), kernel
    for below in (130, 120):
        q = np.zeros((1, lq, 64), dtype)
        q[..., 0] = 1
        k = np.zeros((1, 33, 64), dtype)
        k[0, 1:, 0] = -below / math.log2(math.e)  # a score about `below` binades under the first key's 0
        v = np.zeros((1, 33, 64), dtype)
        v[0, 1] = 2.0 ** 100  # of those keys, one carries a value
        weight = 2.0 ** (float(k[0, 1, 0]) * math.log2(math.e))
        for ftz in modes():
            with flushing(ftz):
                out = np.asarray(mtlinv.sdpa(q, k, v, scale=1.0, causal=False), np.float64)
            if below > 125:
                assert not out.any(), f"{below} binades below: {out.max()}"
            else:
                assert np.all(np.abs(out / (weight * 2.0 ** 100) - 1) < 0.01), out[..., 0]


@pytest.mark.parametrize("bits", [4, 8])
def test_packed_dequantisation_of_tiny_bfloat_scales(bits, gpu_plans, rng):
    """qgemv_mma with bfloat scales and biases down to subnormal (2^-133): each weight T(scale q + bias) is rounded
    once, subnormals kept, in both modes: metal/pair16.h's integer path takes what float32 would flush. The products
    with x = identity flush the weights that are subnormal themselves (and only those)."""
    n, k, group_size = 32, 128, 32
    groups = (n, k // group_size)
    exponents = rng.integers(-135, -112, size=groups)
    scales = (rng.choice([-1.0, 1.0], groups) * rng.uniform(1, 2, groups) * 2.0 ** exponents).astype(BF16)
    biases = (rng.uniform(-1, 1, groups) * 2.0 ** (exponents + rng.integers(-4, 9, groups))).astype(BF16)
    wq = quant.pack(rng.integers(0, 1 << bits, size=(n, k)), bits)
    w = rounded_once(wq, scales, biases, group_size, bits)
    tiny = np.abs(np.asarray(w, np.float32)) < 2.0 ** -126
    assert 100 < tiny.sum() < w.size - 100, "both subnormal and normal weights"
    for ftz in modes():
        with flushing(ftz):
            picked = picked_weights((wq, scales, biases), group_size, bits, BF16)
        expected = np.where(tiny, BF16(0), w) if ftz else w
        assert same_bits(picked, expected.T), f"ftz={ftz}"


@pytest.mark.parametrize("fill", ["subnormal", "nan"])
def test_qkv_value_heads_are_copied(fill, rng):
    """qkv_to_heads writes value heads with the bits rows_to_heads writes, in both modes: bfloat subnormals and a
    signalling NaN's payload, which a round trip through float would change."""
    qkv = rng.standard_normal((3, 4, 8)).astype(BF16)  # 2 query heads, 1 key head, 1 value head
    special = 0x0013 if fill == "subnormal" else 0x7F81
    qkv.view(np.uint16)[:, 3, ::2] = special
    qkv.view(np.uint16)[:, :3, 1] = 0x8005  # subnormal inputs of the rotations
    for ftz in modes():
        with flushing(ftz):
            fused = _qkv_fused(qkv, 2, 5, 1, 7, 10000.0)
            separate = _qkv_separately(qkv, 2, 5, 1, 7, 10000.0)
        for name, a, b in zip("qkv", fused, separate):
            assert same_bits(a, b), f"{name}, ftz={ftz}"
        assert same_bits(fused[2][:, 1:4], qkv[:, 3:].transpose(1, 0, 2))
