"""The affine quantized-weight format (mtlinv.quant, run by the C++ core's src/core/quant.cpp) and the lossless GGUF
importers (mtlinv.gguf_blocks).

The core's every result is compared bit for bit with the NumPy reference (tests/quant_reference.py, the
implementation the core replaced); the comparison against MLX itself runs only where ``mlx`` is installed
(``pip install "mlx[cpu]"``).
"""
import math
import os

import ml_dtypes

import numpy as np
import pytest

import quant_reference as reference
from mtlinv import gguf_blocks as gb
from mtlinv import quant

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]
PAIRS = [(g, b) for b in quant.SUPPORTED_BITS for g in quant.SUPPORTED_GROUP_SIZES]
# Unit roundoff of each dtype: bounds the error of storing scale/bias and of dequantising in it.
UNIT_ROUNDOFF = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float16): 2.0**-11, BF16: 2.0**-8}


def bits_of(a):
    """The raw bits of an array, for bitwise comparisons (NaN == NaN, -0.0 != 0.0)."""
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


# ----------------------------------------------------------------------------------------------- layout


@pytest.mark.parametrize(
    "bits, q, words",
    [
        (4, [1, 2, 3, 4, 5, 6, 7, 8] * 4, [0x87654321] * 4),
        (8, [1, 2, 3, 4] * 8, [0x04030201] * 8),
        (2, [1, 2, 3, 0] * 8, [0x39393939, 0x39393939]),
        # 3 bits: element 10 sits at bits 30..32, straddling words 0 and 1; element 21 at bits 63..65.
        (3, [0] * 10 + [7] + [0] * 10 + [5] + [0] * 10, [0xC0000000, 0x80000001, 0x00000002]),
        # 6 bits: element 5 sits at bits 30..35.
        (6, [63] + [0] * 4 + [63] + [0] * 26, [0xC000003F, 0x0000000F, 0, 0, 0, 0]),
    ],
)
def test_pack_layout_hand_built(bits, q, words):
    q = np.array([q], dtype=np.uint8)
    packed = quant.pack(q, bits)
    assert packed.dtype == np.uint32
    assert packed.tolist() == [words]
    assert np.array_equal(quant.unpack(packed, bits, q.shape[-1]), q)


@pytest.mark.parametrize("bits", quant.SUPPORTED_BITS)
def test_pack_unpack_round_trip(bits):
    q = np.random.default_rng(bits).integers(0, 1 << bits, (2, 3, 128), dtype=np.uint8)
    packed = quant.pack(q, bits)
    assert packed.shape == (2, 3, 128 * bits // 32)
    assert np.array_equal(quant.unpack(packed, bits, 128), q)


def test_quantize_hand_example():
    # 0..15 twice: the larger-magnitude extreme (15) is the edge and maps to q=0, so the scale is
    # negative (-1), the bias is 15 and q = 15 - w: words 0x89ABCDEF (q 15..8), 0x01234567 (q 7..0).
    w = np.tile(np.arange(16, dtype=np.float32), 2)[None]
    wq, scales, biases = quant.quantize(w, group_size=32, bits=4)
    assert wq.tolist() == [[0x89ABCDEF, 0x01234567, 0x89ABCDEF, 0x01234567]]
    assert scales.tolist() == [[-1.0]] and biases.tolist() == [[15.0]]
    assert np.array_equal(quant.dequantize(wq, scales, biases, 32, 4), w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [0.0, 1.0, -3.5, 1e-3])
def test_constant_rows_are_exact(dtype, value):
    w = np.full((3, 64), value, dtype=np.float32).astype(dtype)
    wq, scales, biases = quant.quantize(w, 64, 4)
    assert scales.dtype == dtype and biases.dtype == dtype
    assert np.array_equal(quant.dequantize(wq, scales, biases, 64, 4), w)


# ------------------------------------------------------------------------------------------ round trip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group_size, bits", PAIRS)
def test_round_trip_error_bound(dtype, group_size, bits):
    rng = np.random.default_rng(group_size * 10 + bits)
    w = (rng.standard_normal((16, 256)) * rng.uniform(0.01, 10, (16, 1))).astype(np.float32).astype(dtype)
    wq, scales, biases = quant.quantize(w, group_size, bits)
    assert wq.shape == (16, 256 * bits // 32) and wq.dtype == np.uint32
    assert scales.shape == biases.shape == (16, 256 // group_size)
    assert scales.dtype == biases.dtype == dtype

    out = quant.dequantize(wq, scales, biases, group_size, bits)
    assert out.dtype == dtype and out.shape == w.shape
    q = quant.unpack(wq, bits, 256).reshape(16, -1, group_size)
    w32, out32 = (a.astype(np.float32).reshape(16, -1, group_size) for a in (w, out))
    s = np.abs(scales.astype(np.float32))[..., None]
    b = np.abs(biases.astype(np.float32))[..., None]
    err = np.abs(out32 - w32)
    # Storing scale and bias in `dtype` and the two roundings of the dequantisation.
    slack = 4 * UNIT_ROUNDOFF[dtype] * (((1 << bits) - 1) * s + b + np.abs(w32))
    # MLX refits the scale so that the group's largest-magnitude value is exact; the opposite
    # extreme can then fall up to one step beyond q = 2**bits - 1 and be clipped: elements that
    # land on the top code are within one step, all others within half a step.
    top = q == (1 << bits) - 1
    assert (err[~top] <= 0.5 * s.repeat(group_size, -1)[~top] + slack[~top]).all()
    assert (err <= s + slack).all()


def test_dequantize_float32_matches_formula():
    w = np.random.default_rng(3).standard_normal((4, 128)).astype(np.float16)
    wq, scales, biases = quant.quantize(w, 32, 4)
    q = quant.unpack(wq, 4, 128).reshape(4, 4, 32).astype(np.float32)
    expected = q * scales.astype(np.float32)[..., None] + biases.astype(np.float32)[..., None]
    out = quant.dequantize_float32(wq, scales, biases, 32, 4)
    assert out.dtype == np.float32 and np.array_equal(bits_of(out), bits_of(expected.reshape(4, 128)))


# ------------------------------------------------------------------------- the core vs the NumPy reference


def hard_weights(rng, dtype, rows, k, group_size):
    """Weights that reach every branch of the quantiser: normal rows of every scale, constant groups (zero, -0.0,
    small, beyond the ~3e31 where q0 overflows), groups below half the minimal step, subnormals, ties of the
    rounding (integers and halves), wide float16 groups whose dequantisation overflows, and extremes of one sign."""
    w = rng.standard_normal((rows, k)) * 10.0 ** rng.uniform(-6, 4, (rows, 1))
    groups = w.reshape(rows, k // group_size, group_size)
    finfo = np.finfo(np.float16) if dtype == np.float16 else np.finfo(np.float32)
    specials = [0.0, -0.0, 1e-3, -3.5, 3e31 if dtype != np.float16 else 6e4, -4e31 if dtype != np.float16 else -6e4,
                1e-9, 2.0 ** -140]
    for i, value in enumerate(specials):
        groups[i % rows, i % groups.shape[1]] = value
    groups[-1, 0] = rng.integers(-8, 8, group_size) / 2.0
    groups[-1, -1] = rng.uniform(0, 1, group_size) * 1e-8
    # The widest group whose range still fits float32 (float16: wider than float16 itself).
    groups[-2, 0] = np.linspace(-1, 1, group_size) * float(finfo.max) * (0.9 if dtype == np.float16 else 0.45)
    groups[-2, -1] = np.abs(groups[-2, -1]) + 5.0
    return w.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group_size, bits", PAIRS)
def test_core_matches_the_numpy_reference_bit_for_bit(dtype, group_size, bits):
    rng = np.random.default_rng([group_size, bits, DTYPES.index(dtype)])
    w = hard_weights(rng, dtype, 12, 4 * group_size, group_size)
    with np.errstate(over="ignore", invalid="ignore"):
        want = reference.quantize(w, group_size, bits)
    got = quant.quantize(w, group_size, bits)
    for name, a, b in zip(("wq", "scales", "biases"), got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(bits_of(a), bits_of(b)), name
    # Dequantisation of the reference's triple and of random scales and biases (overflow to inf included).
    scales = (rng.standard_normal(want[1].shape) * 10.0 ** rng.uniform(-4, 4, want[1].shape)).astype(dtype)
    biases = (rng.standard_normal(want[1].shape) * 10.0 ** rng.uniform(-4, 4, want[1].shape)).astype(dtype)
    for triple in (want, (want[0], scales, biases)):
        for name in ("dequantize", "dequantize_float32"):
            a = getattr(quant, name)(*triple, group_size, bits)
            b = getattr(reference, name)(*triple, group_size, bits)
            assert a.dtype == b.dtype and np.array_equal(bits_of(a), bits_of(b)), name


@pytest.mark.parametrize("bits", quant.SUPPORTED_BITS)
def test_core_pack_matches_the_numpy_reference(bits):
    q = np.random.default_rng(bits).integers(0, 1 << bits, (3, 2, 96), dtype=np.uint8)
    assert np.array_equal(quant.pack(q, bits), reference.pack(q, bits))
    words = np.random.default_rng(bits).integers(0, 2**32, (5, 96 * bits // 32), dtype=np.uint32)
    assert np.array_equal(quant.unpack(words, bits, 96), reference.unpack(words, bits, 96))


def test_reference_catches_a_changed_rounding():
    """Negative control: the bitwise comparison above notices a quantiser one rounding away from the core's."""
    w = hard_weights(np.random.default_rng(0), np.dtype(np.float16), 12, 256, 64)
    wq, scales, biases = quant.quantize(w, 64, 4)
    nudged = (scales.astype(np.float32) * np.float32(1 + 2**-10)).astype(np.float16)
    assert not np.array_equal(bits_of(nudged), bits_of(reference.quantize(w, 64, 4)[1]))


# ---------------------------------------------------------------------------------------------- errors


def test_quantize_errors():
    w = np.zeros((4, 128), np.float32)
    with pytest.raises(ValueError, match="K=96 .* not a multiple of group_size=64"):
        quant.quantize(np.zeros((2, 96), np.float32), 64, 4)
    with pytest.raises(ValueError, match="bits=7"):
        quant.quantize(w, 64, 7)
    with pytest.raises(ValueError, match="bits=1"):
        quant.quantize(w, 64, 1)
    with pytest.raises(ValueError, match="group_size=24"):
        quant.quantize(w, 24, 4)
    with pytest.raises(TypeError, match="float64"):
        quant.quantize(w.astype(np.float64), 64, 4)
    with pytest.raises(TypeError, match="int32"):
        quant.quantize(w.astype(np.int32), 64, 4)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        quant.quantize(np.zeros(128, np.float32), 64, 4)
    with pytest.raises(ValueError, match="inf or NaN"):
        quant.quantize(np.full((1, 64), np.inf, np.float32), 64, 4)
    with pytest.raises(ValueError, match="overflows float32"):
        quant.quantize(np.array([[3e38, -3e38] * 32], np.float32), 64, 4)


def test_dequantize_errors():
    wq, scales, biases = quant.quantize(np.ones((4, 128), np.float16), 64, 4)
    with pytest.raises(TypeError, match="wq must be uint32, got int32"):
        quant.dequantize(wq.astype(np.int32), scales, biases, 64, 4)
    with pytest.raises(TypeError, match="share a dtype"):
        quant.dequantize(wq, scales, biases.astype(np.float32), 64, 4)
    with pytest.raises(TypeError, match="float64"):
        quant.dequantize(wq, scales.astype(np.float64), biases.astype(np.float64), 64, 4)
    with pytest.raises(ValueError, match=r"needs scales and biases of shape \(4, 2\), got \(4, 4\)"):
        quant.dequantize(wq, np.ones((4, 4), np.float16), np.ones((4, 4), np.float16), 64, 4)
    with pytest.raises(ValueError, match=r"needs scales and biases of shape \(4, 4\)"):
        quant.dequantize(wq, scales, biases, 32, 4)  # wrong group size for these scales
    with pytest.raises(ValueError, match="differs from biases.shape"):
        quant.dequantize(wq, scales, biases[:3], 64, 4)
    with pytest.raises(ValueError, match="bits=7"):
        quant.dequantize(wq, scales, biases, 64, 7)
    with pytest.raises(ValueError, match=r"wq rows of 16 words hold 170.667 values of bits=3, not a whole number"):
        quant.dequantize(wq, scales, biases, 64, 3)  # once: "needs shape (4, 2), got (4, 2)"


def test_pack_takes_ints_only():
    with pytest.raises(TypeError, match="pack: q must be an integer array"):
        quant.pack(np.full((1, 32), 1.7), 4)  # once truncated to 1
    with pytest.raises(TypeError, match="pack: bits must be an int, got float 4.0"):
        quant.pack(np.ones((1, 32), np.uint8), 4.0)
    with pytest.raises(TypeError, match="unpack: bits must be an int"):
        quant.unpack(np.zeros((1, 4), np.uint32), 4.0, 32)


@pytest.mark.parametrize("int_type", [np.int8, np.uint8, np.int64])
def test_numpy_int_params_act_as_python_ints(int_type, rng):
    """NumPy ints pass as ints, and act as Python ints: an int8 bits=8 overflowed in 1 << bits and a uint8 one in
    K * bits, raising OverflowError or a false range error."""
    w = rng.standard_normal((4, 128)).astype(np.float16)
    want = quant.quantize(w, 64, 8)
    got = quant.quantize(w, int_type(64), int_type(8))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert np.array_equal(quant.dequantize(*got, int_type(64), int_type(8)), quant.dequantize(*want, 64, 8))
    assert np.array_equal(quant.unpack(quant.pack(np.full((1, 32), 255, np.uint8), int_type(8)), int_type(8), 32),
                          np.full((1, 32), 255, np.uint8))


# ------------------------------------------------------------------------------------------------ GGUF


def ref_encode_block(kind, x):
    """A literal, element-by-element transcription of llama.cpp's quantize_row_*_ref for one block."""
    f32 = np.float32
    if kind == "q4_0":
        amax, vmax = f32(0), f32(0)
        for v in x:
            if amax < abs(v):
                amax, vmax = abs(v), v
        d = vmax / f32(-8)
        inv = f32(1) / d if d else f32(0)
        qs = [min(15, int(x[j] * inv + f32(8.5))) | min(15, int(x[16 + j] * inv + f32(8.5))) << 4 for j in range(16)]
        return np.float16(d).tobytes() + bytes(qs)
    if kind == "q4_1":
        lo, hi = f32(np.inf), f32(-np.inf)
        for v in x:
            lo, hi = min(lo, v), max(hi, v)
        d = (hi - lo) / f32(15)
        inv = f32(1) / d if d else f32(0)
        qs = [min(15, int((x[j] - lo) * inv + f32(0.5))) | min(15, int((x[16 + j] - lo) * inv + f32(0.5))) << 4
              for j in range(16)]
        return np.float16(d).tobytes() + np.float16(lo).tobytes() + bytes(qs)
    amax = max(abs(v) for v in x)
    d = amax / f32(127)
    inv = f32(1) / d if d else f32(0)
    q = [int(math.copysign(math.floor(abs(float(v * inv)) + 0.5), float(v * inv))) for v in x]  # roundf
    return np.float16(d).tobytes() + np.array(q, np.int8).tobytes()


GGUF = {
    "q4_0": (gb.quantize_q4_0, gb.dequantize_q4_0, gb.q4_0_to_affine, 4),
    "q4_1": (gb.quantize_q4_1, gb.dequantize_q4_1, gb.q4_1_to_affine, 4),
    "q8_0": (gb.quantize_q8_0, gb.dequantize_q8_0, gb.q8_0_to_affine, 8),
}


def gguf_test_matrix(shape, seed):
    """Random rows of varied magnitude; larger shapes also get zero, constant, one-hot and rounding-tie blocks."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 2, (shape[0], 1))).astype(np.float32)
    if shape[0] > 1 and shape[1] >= 96:
        x[0, :32] = 0.0
        x[-1, 32:64] = 1.25
        x[-1, 64:96] = 0.0
        x[-1, 70] = -7.0
    if shape[0] > 2 and shape[1] >= 96:
        # Q8_0 gets d = 1 and exact ties x/d = k + 0.5: roundf rounds them away from zero, not to even.
        x[1, :32] = np.arange(32, dtype=np.float32) - np.float32(15.5)
        x[1, 0] = 127.0
        x[1, 1] = np.nextafter(np.float32(0.5), np.float32(0))  # roundf gives 0, trunc(x + 0.5) gives 1
    return x


@pytest.mark.parametrize("kind", GGUF)
def test_gguf_encoders_match_llama_cpp_reference(kind):
    encode, decode, _, _ = GGUF[kind]
    x = gguf_test_matrix((3, 128), seed=1)
    raw = encode(x)
    assert raw.dtype == np.uint8 and raw.ndim == 1
    expected = b"".join(ref_encode_block(kind, block) for block in x.reshape(-1, 32))
    assert raw.tobytes() == expected
    # And the encoding is a sane approximation of x.
    assert np.abs(decode(raw, x.shape) - x).max() <= 0.1 * np.abs(x).max()


def test_gguf_nibble_order_hand_built():
    # d = 1.0; byte j = j (low nibble) | (15 - j) (high nibble): elements 0..15 hold q = j,
    # elements 16..31 hold q = 15 - j.
    raw = np.frombuffer(np.float16(1.0).tobytes() + bytes(j | (15 - j) << 4 for j in range(16)), np.uint8)
    q = np.array(list(range(16)) + list(range(15, -1, -1)), np.float32)
    assert np.array_equal(gb.dequantize_q4_0(raw, (1, 32)), (q - 8)[None])
    wq, scales, biases = gb.q4_0_to_affine(raw, (1, 32), np.float32)
    assert wq.tolist() == [[0x76543210, 0xFEDCBA98, 0x89ABCDEF, 0x01234567]]
    assert scales.tolist() == [[1.0]] and biases.tolist() == [[-8.0]]


@pytest.mark.parametrize("kind", GGUF)
@pytest.mark.parametrize("shape", [(1, 32), (5, 96), (17, 256)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_gguf_conversion_exact(kind, shape, dtype):
    encode, decode, convert, bits = GGUF[kind]
    raw = encode(gguf_test_matrix(shape, seed=shape[0]))
    reference = decode(raw, shape)
    wq, scales, biases = convert(raw, shape, dtype)
    assert wq.shape == (shape[0], shape[1] * bits // 32) and wq.dtype == np.uint32
    assert scales.shape == biases.shape == (shape[0], shape[1] // 32)
    assert scales.dtype == biases.dtype == np.dtype(dtype)
    converted = quant.dequantize_float32(wq, scales, biases, group_size=32, bits=bits)
    # Equal float32 values; only the sign of zeros may differ (d*0 = -0.0 for d < 0, x + (-x) = +0.0).
    assert np.array_equal(bits_of(converted + np.float32(0)), bits_of(reference + np.float32(0)))


@pytest.mark.parametrize("kind", GGUF)
def test_gguf_bfloat16_scales(kind):
    encode, decode, convert, bits = GGUF[kind]
    shape = (4, 128)
    raw = encode(gguf_test_matrix(shape, seed=7))
    # Real f16 scales mostly carry more than bfloat16's 8 significant bits: refused, never rounded.
    with pytest.raises(ValueError, match="not exactly representable in bfloat16.*dtype=float32"):
        convert(raw, shape, BF16)
    # Blocks whose d (and m) fit in 8 significant bits convert exactly.
    blocks = raw.reshape(-1, gb.BLOCK_BYTES[kind]).copy()
    n_f16 = 2 if kind == "q4_1" else 1
    halves = blocks[:, : 2 * n_f16].copy().view("<f2")
    blocks[:, : 2 * n_f16] = halves.astype(BF16).astype("<f2").view(np.uint8)
    raw = blocks.reshape(-1)
    wq, scales, biases = convert(raw, shape, BF16)
    assert scales.dtype == BF16
    converted = quant.dequantize_float32(wq, scales, biases, group_size=32, bits=bits)
    assert np.array_equal(converted, decode(raw, shape))


def test_gguf_float16_bias_overflow_and_bad_blocks():
    one_block = lambda d: np.frombuffer(np.float16(d).tobytes() + bytes(16), np.uint8)
    assert gb.q4_0_to_affine(one_block(8188.0), (1, 32))[2].tolist() == [[-65504.0]]
    with pytest.raises(ValueError, match="bias values are not exactly representable in float16"):
        gb.q4_0_to_affine(one_block(8192.0), (1, 32), np.float16)  # -8d = -65536 overflows
    assert gb.q4_0_to_affine(one_block(8192.0), (1, 32), np.float32)[2].tolist() == [[-65536.0]]
    with pytest.raises(ValueError, match="non-finite scale"):
        gb.q4_0_to_affine(one_block(np.inf), (1, 32))
    with pytest.raises(ValueError, match="needs 36 bytes .* got 18"):
        gb.q4_0_to_affine(one_block(1.0), (1, 64))
    with pytest.raises(ValueError, match="K=48 is not a multiple of the block size 32"):
        gb.dequantize_q8_0(np.zeros(51, np.uint8), (1, 48))
    with pytest.raises(TypeError, match="uint8"):
        gb.q8_0_to_affine(np.zeros(34, np.int8), (1, 32))
    with pytest.raises(TypeError, match="float64"):
        gb.q4_1_to_affine(np.zeros(20, np.uint8), (1, 32), np.float64)
    for shape in ((1, 32.0), (1, float("nan"))):
        with pytest.raises(ValueError, match="shape must be two positive integers"):
            gb.dequantize_q4_0(one_block(1.0), shape)
    with pytest.raises(ValueError, match=r"quantize_q4_0: block 0 of row 0 needs a float16 field of -125000"):
        gb.quantize_q4_0(np.full((1, 32), 1e6, np.float32))  # llama.cpp would store -inf
    with pytest.raises(ValueError, match=r"quantize_q8_0: x has a non-finite value at \(0, 5\)"):
        gb.quantize_q8_0(np.where(np.arange(32) == 5, np.nan, 1.0).reshape(1, 32))


# ------------------------------------------------------------------------------------- MLX (optional)


def mlx_cases(dtype, rng):
    """Random groups plus the edge cases: constant, zero, huge, tiny and one-signed rows."""
    big = {np.dtype(np.float32): 1e37, np.dtype(np.float16): 3e4, BF16: 1e37}[dtype]
    tiny = {np.dtype(np.float32): 1e-40, np.dtype(np.float16): 1e-6, BF16: 1e-38}[dtype]
    w = rng.standard_normal((12, 256)).astype(np.float32)
    w[0] = 1.0
    w[1] = 0.0
    w[2] = -3.5
    w[3, :128] = tiny
    w[4] *= big
    w[5] *= tiny
    w[6] = np.abs(w[6])
    w[7] = -np.abs(w[7])
    w[8] = rng.integers(-8, 8, 256)
    w[9] *= 10.0 ** rng.uniform(-8, 4, (256,)).astype(np.float32)
    w[10] = min(big, 1e35)  # constant beyond ~3e31 (float32/bfloat16): MLX stores scale -0.0
    with np.errstate(over="ignore"):
        w = w.astype(dtype)
    return np.where(np.isfinite(w.astype(np.float32)), w, np.zeros_like(w)).reshape(2, 6, 256)


def test_matches_mlx_bit_for_bit():
    try:
        import mlx.core as mx
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must run the MLX bit-exactness check: pip install 'mlx[cpu]' (the test extra has it)")
        pytest.skip("MLX is not installed (pip install 'mlx[cpu]'); bit-exact check skipped")

    def to_mx(a):
        return mx.array(a.astype(np.float32)).astype(mx.bfloat16) if a.dtype == BF16 else mx.array(a)

    def to_np(a, dtype):
        return np.array(a.astype(mx.float32)).astype(BF16) if dtype == BF16 else np.array(a)

    rng = np.random.default_rng(0)
    for dtype in DTYPES:
        w = mlx_cases(dtype, rng)
        for group_size, bits in [(g, b) for g, b in PAIRS if g in quant.MLX_GROUP_SIZES]:  # MLX refuses 16
            ours = quant.quantize(w, group_size, bits)
            theirs = mx.quantize(to_mx(w), group_size=group_size, bits=bits)
            assert len(theirs) == 3, f"mx.quantize returned {len(theirs)} arrays"
            for name, a, b in zip(("wq", "scales", "biases"), ours, theirs):
                b = to_np(b, dtype) if name != "wq" else np.array(b)
                assert a.dtype == b.dtype and a.shape == b.shape, (dtype, group_size, bits, name)
                assert np.array_equal(bits_of(a), bits_of(b)), (dtype, group_size, bits, name)
            with np.errstate(over="ignore"):
                deq = quant.dequantize(*ours, group_size, bits)
            their_deq = mx.dequantize(*(to_mx(a) for a in ours), group_size=group_size, bits=bits)
            assert np.array_equal(bits_of(deq), bits_of(to_np(their_deq, dtype))), (dtype, group_size, bits)


# ----------------------------------------------------------------------------------------------- conversions


def test_byte_swapped_arrays_are_read_in_native_order():
    """quantize, dequantize and tile refused '>f2' and '>u4', which the ops read in native order."""
    w = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float16)
    native = quant.quantize(w, group_size=64, bits=4)
    swapped = quant.quantize(w.astype(">f2"), group_size=64, bits=4)
    for a, b in zip(native, swapped):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    swapped = [a.astype(a.dtype.newbyteorder("S")) for a in native]
    assert np.array_equal(quant.dequantize(*swapped, group_size=64, bits=4),
                          quant.dequantize(*native, group_size=64, bits=4))
    for a, b in zip(quant.tile(*swapped, group_size=64, bits=4), quant.tile(*native, group_size=64, bits=4)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_lists_are_float32_and_float64_arrays_refused():
    """quantize(list) raised a TypeError (float64); lists and scalars are float32, as in every op."""
    rows = [[float(i % 7) for i in range(32)]] * 2
    wq, scales, biases = quant.quantize(rows, group_size=32, bits=4)
    expected = quant.quantize(np.array(rows, np.float32), group_size=32, bits=4)
    assert scales.dtype == np.float32
    for a, b in zip((wq, scales, biases), expected):
        assert np.array_equal(a, b)
    with pytest.raises(TypeError, match="float64"):
        quant.quantize(np.array(rows), group_size=32, bits=4)
