"""qgemv_mma, the matrix-unit quantized GEMV that plans pick for 16-bit x on devices with matrix units (CUDA): on
the emulator the gpu_plans fixture turns the capability on and the kernel runs on metal/mma.h's fallback, so its
loads, partial steps, splits and epilogue are checked in CI; with MTLINV_DEVICE=cuda the same tests run on the
tensor cores."""
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv import gguf_blocks, quant
from helpers import RTOL, first_difference, random, same_bits, unaligned
from test_qgemv import quantized, reference, run

MMA_DTYPES = [np.float16, ml_dtypes.bfloat16]
MMA_IDS = ["f16", "bf16"]


def kernel(rows, k, n, group_size, bits, dtype, limit, scale_dtype=None):
    return mtlinv._native.plan_qgemv(rows=rows, k=k, n=n, group_size=group_size, bits=bits,
                                     dtype=np.dtype(dtype).name, scale_dtype=np.dtype(scale_dtype or dtype).name,
                                     limit=limit)["launches"][0]


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("bits, group_size, k, n", [
    (4, 64, 640, 40),     # 20 runs: whole steps only
    (4, 32, 352, 17),     # 11 runs: a partial last step; an N tail
    (4, 128, 1024, 16),   # groups of 4 runs
    (8, 128, 1152, 24),   # 36 runs, several splits
    (8, 32, 320, 20),     # 10 runs: a partial last step
    (8, 16, 352, 17),     # group 16 (runs span two groups): a partial last step, an N tail
    (8, 16, 1152, 24),    # group 16, several splits
    (2, 32, 96, 9), (3, 64, 448, 16), (5, 128, 384, 20), (6, 32, 160, 33)])
def test_rows_invariant_and_accurate(bits, group_size, k, n, dtype, gpu_plans, rng):
    """Every row of M = 1..16 (tiles of 8 rows, and of 16 above M = 8) equals the row alone, with bias, for every
    width; and the result is within the dtype's bound of a float64 product with the float32 weights (the kernel
    rounds each weight to x's type first)."""
    mtlinv.set_limit(16)
    assert kernel(1, k, n, group_size, bits, dtype, 16)["kernel"].startswith(f"qgemv_mma_b{bits}_r8_")
    q = quantized(n, k, group_size, bits, np.dtype(dtype))
    bias = random(rng, (n,), dtype)
    x = random(rng, (16, k), dtype)
    singles = [run(x[r:r + 1], q, group_size, bits, bias) for r in range(16)]
    for m in (2, 7, 8, 9, 16):
        full = run(x[:m], q, group_size, bits, bias)
        for r in range(m):
            assert same_bits(full[r:r + 1], singles[r]), f"M={m} row {r}: {first_difference(full[r:r+1], singles[r])}"
    ref = reference(x, q, group_size, bits, bias)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(full, np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def rounded_once(wq, scales, biases, group_size, bits):
    """T(scale q + bias): the exact value (fractions) rounded once to the scales' type T, to nearest, ties to even.
    Independent of floating-point rounding paths (ml_dtypes rounds float64 to bfloat16 through float32, twice)."""
    dtype = scales.dtype
    q = quant.unpack(wq, bits, wq.shape[1] * 32 // bits).astype(np.int64)
    s = np.repeat(np.asarray(scales, np.float64), group_size, axis=1)
    b = np.repeat(np.asarray(biases, np.float64), group_size, axis=1)
    exact = [Fraction(si) * int(qi) + Fraction(bi) for si, qi, bi in zip(s.ravel(), q.ravel(), b.ravel())]
    guess = np.array([float(e) for e in exact]).astype(dtype)
    assert np.isfinite(np.asarray(guess, np.float32)).all(), "rounded_once handles finite results only"
    largest = int(np.array(ml_dtypes.finfo(dtype).max, dtype).view(np.uint16))
    out = np.empty(guess.shape, np.uint16)
    for i, (e, g) in enumerate(zip(exact, guess.view(np.uint16))):
        # The guess, or one of its neighbours in magnitude (same sign), is the nearest; ties go to the even pattern.
        sign, magnitude = int(g) & 0x8000, int(g) & 0x7FFF
        near = [sign | m for m in (magnitude - 1, magnitude, magnitude + 1) if 0 <= m <= largest]
        value = {c: Fraction(float(np.array(c, np.uint16).view(dtype))) for c in near}
        out[i] = min(near, key=lambda c: (abs(value[c] - e), c & 1))
    return out.view(dtype).reshape(q.shape)


def picked_weights(q, group_size, bits, dtype):
    """qgemv with x = identity: y[k, n] is the weight W(n, k) exactly as the kernel hands it to the matrix units."""
    k = q[0].shape[1] * 32 // bits
    suffix = MMA_IDS[MMA_DTYPES.index(dtype)] + ("_g16" if group_size == 16 else "")
    assert kernel(k, k, q[0].shape[0], group_size, bits, dtype, k)["kernel"] == f"qgemv_mma_b{bits}_r16_{suffix}"
    mtlinv.set_limit(k)
    return run(np.eye(k, dtype=dtype), q, group_size, bits)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("bits, group_size", [(3, 128), (4, 64), (8, 64), (8, 16)])
def test_dequantisation_point(bits, group_size, dtype, gpu_plans):
    """With scales of x's type each weight enters the products as T(scale q + bias) rounded once (an fma in T), not
    as MLX's dequantisation (the product rounded first, quant.dequantize): the weights here tell the two apart."""
    q = quantized(40, 128, group_size, bits, np.dtype(dtype))
    w = rounded_once(*q, group_size, bits)
    assert not same_bits(w, quant.dequantize(*q, group_size=group_size, bits=bits)), "cannot tell w from MLX's"
    assert same_bits(picked_weights(q, group_size, bits, dtype), w.T)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("bits", [4, 8])
def test_dequantisation_extremes(bits, dtype, gpu_plans, rng):
    """Scales and biases across the type's exponent range, of both signs, biases that cancel the product, and (half)
    products and sums deep in the subnormals: rounded once and subnormals kept, as rounded_once says."""
    n, k, group_size = 32, 128, 32
    groups = (n, k // group_size)
    # half: products up to 2^7 * 255, within its range; bfloat: clear of float32's subnormals.
    lowest, highest = (-24, 7) if dtype == np.float16 else (-110, 100)
    exponents = rng.integers(lowest, highest, size=groups)
    scales = (rng.choice([-1.0, 1.0], groups) * rng.uniform(1, 2, groups) * 2.0 ** exponents).astype(dtype)
    biases = (rng.uniform(-1, 1, groups) * 2.0 ** (exponents + rng.integers(-12, 5, groups))).astype(dtype)
    if dtype != np.float16:
        # Products past float32's range that the bias brings back (the emulator's fallback takes these at half scale).
        scales[0, 0], biases[0, 0] = 1.5 * 2.0 ** 120, -1.9 * 2.0 ** 127
    wq = quant.pack(rng.integers(0, 1 << bits, size=(n, k)), bits)
    w = rounded_once(wq, scales, biases, group_size, bits)
    assert np.isfinite(np.asarray(w, np.float32)).all()
    if dtype == np.float16:
        assert (np.abs(np.asarray(w, np.float32)) < 2.0 ** -14).sum() > 100, "few subnormal weights"
    assert same_bits(picked_weights((wq, scales, biases), group_size, bits, dtype), w.T)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("bits", [3, 4, 8])
def test_every_code_enters_exactly(bits, dtype, gpu_plans):
    """With scale 1 and bias 0 each weight is its code: every code of the width, at every place in a word (both codes
    of a pair; at 8 bits in bfloat16 the top bit set and clear, which take different subtrahends), enters the
    products as T(q) exactly."""
    n, k, group_size = 32, 256, 64
    codes = (np.arange(k)[None, :] + 7 * np.arange(n)[:, None]) % (1 << bits)  # each row every code, shifted
    scales = np.ones((n, k // group_size), dtype)
    biases = np.zeros((n, k // group_size), dtype)
    wq = quant.pack(codes, bits)
    assert same_bits(picked_weights((wq, scales, biases), group_size, bits, dtype), codes.T.astype(dtype))


@pytest.mark.parametrize("filler", [np.nan, np.inf, -np.inf, 6e4, 0.0])
def test_filler_rows_do_not_leak(filler, gpu_plans, rng):
    """The other rows of the tile hold NaN, inf, large or zero values: row 4's bits do not move."""
    mtlinv.set_limit(16)
    q = quantized(24, 256, 64, 4, np.dtype(np.float16))
    x = random(rng, (12, 256), np.float16)
    alone = run(x[4:5], q, 64, 4)
    x[[0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]] = filler
    assert same_bits(run(x, q, 64, 4)[4:5], alone)


def test_nan_inf_propagate(gpu_plans, rng):
    mtlinv.set_limit(16)
    q = quantized(16, 128, 32, 4, np.dtype(ml_dtypes.bfloat16))
    x = random(rng, (4, 128), ml_dtypes.bfloat16)
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    y = run(x, q, 32, 4).astype(np.float32)
    assert np.isnan(y[1]).all()
    assert not np.isfinite(y[2]).any() and np.isfinite(y[0]).all() and np.isfinite(y[3]).all()


def test_unaligned_x_same_bits(gpu_plans, rng):
    """x one element off a 16-byte boundary takes element loads instead of 16-byte loads: the same bits."""
    mtlinv.set_limit(8)
    k = 1024 + 96
    q = quantized(24, k, 32, 4, np.dtype(np.float16))
    x = random(rng, (8, k), np.float16)
    unaligned_copy = unaligned(x)
    for m in (1, 8):
        assert same_bits(run(unaligned_copy[:m], q, 32, 4), run(x[:m], q, 32, 4)), m


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("bits", [4, 8])
def test_float32_scales(bits, dtype, gpu_plans, rng):
    """GGUF imports keep float32 scales: qgemv_mma_*_sf32, the same invariance."""
    k, n = 256, 40
    w = rng.standard_normal((n, k)).astype(np.float32)
    raw = gguf_blocks.quantize_q4_1(w) if bits == 4 else gguf_blocks.quantize_q8_0(w)
    to_affine = gguf_blocks.q4_1_to_affine if bits == 4 else gguf_blocks.q8_0_to_affine
    q = to_affine(raw, (n, k), dtype=np.float32)
    assert kernel(1, k, n, 32, bits, dtype, 8, np.float32)["kernel"] == \
        f"qgemv_mma_b{bits}_r8_{MMA_IDS[MMA_DTYPES.index(dtype)]}_sf32"
    x = random(rng, (6, k), dtype)
    mtlinv.set_limit(8)
    full = run(x, q, 32, bits)
    for r in range(6):
        assert same_bits(full[r:r + 1], run(x[r:r + 1], q, 32, bits)), f"row {r}"


def float32_scales(rng, groups, special):
    """float32 scales and biases with full 24-bit significands, of both signs, as the kernels' fast path
    (quant_dequantize_fma) takes them, plus zero scales and biases of either sign; with `special`, the groups of
    weight rows 16 and up (the second tile of 16) in the first step (groups 0-3 of 32 values) are also those that
    path leaves to the general one: scales at 2^100 and above, subnormal, and -0 biases with negative scales."""
    scales = (rng.choice([-1.0, 1.0], groups) * rng.uniform(1, 2, groups) * 2.0 ** rng.integers(-20, 0, groups))
    scales = scales.astype(np.float32)
    biases = (rng.uniform(-1, 1, groups) * 2.0 ** rng.integers(-14, 4, groups)).astype(np.float32)
    scales[0, :3] = [0.0, -0.0, 0.0]
    biases[1, :3] = [-0.0, 0.0, -0.0]
    if special:
        scales[16:24, 0] = np.float32(1.25 * 2.0 ** 100) * np.float32(rng.uniform(1, 1024))
        scales[24:28, 1] = np.array([1, -3, 7, -0x7FFFFF], np.int64) * np.float32(2.0 ** -149)  # subnormal
        scales[28:32, 2], biases[28:32, 2] = -np.abs(scales[28:32, 2]), -0.0
        scales[28, 3], biases[28, 3] = -0.0, -0.0
    return scales, biases


@pytest.mark.parametrize("bits", [4, 8])
def test_float32_scales_weights_exact(bits, gpu_plans, rng):
    """With float32 scales each weight enters the products as T(float32(float32(scale q) + bias)), the float32
    weight of quant.dequantize_float32 rounded once to x's type, bit for bit: on groups the kernel's fast path takes
    (full 24-bit scales of both signs, zero scales and biases) and on those it leaves to the general path (huge and
    subnormal scales, -0 biases with negative scales). bfloat16 x, whose range holds the huge weights. A zero
    weight's sign does not reach the output (the products are summed onto +0), so zeros are compared as +0."""
    n, k, group_size, dtype = 32, 256, 32, ml_dtypes.bfloat16
    scales, biases = float32_scales(rng, (n, k // group_size), special=True)
    wq = quant.pack(rng.integers(0, 1 << bits, size=(n, k)), bits)
    want = quant.dequantize_float32(wq, scales, biases, group_size=group_size, bits=bits).astype(dtype)
    assert np.isfinite(np.asarray(want, np.float32)).all()
    assert kernel(k, k, n, group_size, bits, dtype, k, np.float32)["kernel"] == f"qgemv_mma_b{bits}_r16_bf16_sf32"
    mtlinv.set_limit(k)
    got = run(np.eye(k, dtype=dtype), (wq, scales, biases), group_size, bits)
    plus_zero = lambda a: np.asarray(a, np.float32) + np.float32(0.0)  # noqa: E731  (-0 + 0 = +0, all else kept)
    assert same_bits(plus_zero(got), plus_zero(want.T)), first_difference(plus_zero(got), plus_zero(want.T))


@pytest.mark.parametrize("layout", ["rows", "tiles"])
@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("bits", [4, 8])
def test_float32_scales_both_paths_agree(bits, dtype, layout, gpu_plans, rng):
    """The fast path (quant_dequantize_fma) and the general one (quant_dequantize) give the same outputs: a
    simdgroup takes the general path for a whole step when any of its lanes' groups needs it, so a huge scale in
    every group of weight row 0 sends its tile's other 15 rows through the general path, and their outputs must
    keep the bits they have through the fast path; the second tile keeps the fast path. Negative control: row 0
    itself changes."""
    n, k, group_size = 32, 1024, 64
    scales, biases = float32_scales(rng, (n, k // group_size), special=False)
    wq = quant.pack(rng.integers(0, 1 << bits, size=(n, k)), bits)
    huge = scales.copy()
    huge[0] = np.float32(2.0 ** 101)
    x = random(rng, (8, k), dtype)
    mtlinv.set_limit(8)
    arrange = (lambda q: quant.tile(*q, group_size=group_size, bits=bits)) if layout == "tiles" else (lambda q: q)
    fast = run(x, arrange((wq, scales, biases)), group_size, bits)
    general = run(x, arrange((wq, huge, biases)), group_size, bits)
    assert same_bits(general[:, 1:], fast[:, 1:]), first_difference(general[:, 1:], fast[:, 1:])
    assert not same_bits(general[:, 0], fast[:, 0])


@pytest.mark.parametrize("k, n", [(4096, 256), (576, 4096)])  # 576: 5 steps, 1 a split of 8, 2 in one of 4
def test_negative_control_limit_zero_differs(k, n, gpu_plans, rng):
    """With limit 0, M=8 runs qgemv_mma with the throughput split count: another order, other bits for this fixed
    case; with limit 8 the same rows give the single-row bits. At K = 576 a float32 sum of 576 products rounded to
    half rarely shows its order (about 1 output in 2000 here), hence the wide N."""
    q = quantized(n, k, 64, 4, np.dtype(np.float16))
    x = random(rng, (8, k), np.float16)
    mtlinv.set_limit(8)
    singles = np.concatenate([run(x[r:r + 1], q, 64, 4) for r in range(8)])
    assert same_bits(run(x, q, 64, 4), singles)
    mtlinv.set_limit(0)
    assert kernel(8, k, n, 64, 4, np.float16, 0)["kernel"] == "qgemv_mma_b4_r8_f16"
    assert not same_bits(run(x, q, 64, 4), singles), "throughput matched canonical: the control cannot fail"


@pytest.mark.parametrize("rows, limit, canonical, name", [
    (1, 0, True, "qgemv_mma_b4_r8_bf16"), (8, 0, False, "qgemv_mma_b4_r8_bf16"),
    (8, 8, True, "qgemv_mma_b4_r8_bf16"), (9, 16, True, "qgemv_mma_b4_r16_bf16"),
    (16, 16, True, "qgemv_mma_b4_r16_bf16"), (32, 16, False, "qgemv_mma_b4_r16_bf16"),
    (33, 16, False, "qgemm_b4_bf16")])
def test_routing(rows, limit, canonical, name, gpu_plans):
    """Tiles of 8 rows up to M = 8, of 16 above; the split count of M = 1 for every canonical call, another above
    the limit; qgemm above 32 rows."""
    plan = mtlinv._native.plan_qgemv(rows=rows, k=4096, n=4096, group_size=64, bits=4, dtype="bfloat16",
                                     limit=limit)
    assert plan["canonical"] is canonical
    launch = plan["launches"][0]
    assert launch["kernel"] == name
    if name.startswith("qgemv_mma"):
        tile = 8 if rows <= 8 else 16
        assert launch["threadgroups"][:2] == (256, -(-rows // tile))
        canonical_threads = kernel(1, 4096, 4096, 64, 4, ml_dtypes.bfloat16, 0)["threads"][0]
        assert (launch["threads"][0] == canonical_threads) is canonical


VECTOR_LOADS, QGEMV_ARGS_BYTES = 24, 32  # QGemvArgs.vector_loads' byte offset and the struct's size (qgemv_args.h)


def tiled_plan(m, k, n, group_size, bits, dtype, constant_weights):
    """qgemv_mma's launch for weights in the tile layout, as a plain call or as a decoder's (constant weights)."""
    launch = mtlinv._native.plan_qgemv(rows=m, k=k, n=n, group_size=group_size, bits=bits,
                                       dtype=np.dtype(dtype).name, limit=mtlinv.get_limit(), tiled=True,
                                       constant_weights=constant_weights)["launches"][0]
    assert len(launch["args"]) == QGEMV_ARGS_BYTES, "QGemvArgs changed: update the offsets above"
    return launch


def launch_tiled(launch, x, tiled, vector_loads):
    """`launch` run by hand on x and the tiled weights, QGemvArgs.vector_loads replaced."""
    wq, scales, biases = (mtlinv.asarray(np.array(a)) for a in tiled)  # writeable copies: a launch may write any
    args = bytearray(launch["args"])
    struct.pack_into("<I", args, VECTOR_LOADS, vector_loads)
    y = mtlinv.asarray(np.zeros((x.shape[0], wq.shape[0] * wq.shape[2]), x.dtype))
    operands = [mtlinv.asarray(x), wq, scales, biases, y, y, wq]  # bias and supers: unread placeholders, as the op
    mtlinv._native._launch(launch["kernel"], launch["threadgroups"], launch["threads"], bytes(args),
                           mtlinv._native.plan_buffers(launch, operands))
    return np.asarray(y)


def first_loop(k, splits):
    """What simdgroup 0 of qgemv_mma's 8-row tile runs with 16-byte loads, in order (metal/qgemv_mma.metal): 'pair'
    (two whole steps), 'single' (one), 'tail' (only the partial-step loop)."""
    full, s, loops = k // 128, 0, []
    while s + splits < full:
        loops.append("pair")
        s += 2 * splits
    while s < full:
        loops.append("single")
        s += splits
    return tuple(dict.fromkeys(loops)) or ("tail",)


@pytest.mark.parametrize("m, k, bits, loops", [
    (1, 4096, 4, ("pair",)),
    (3, 5120, 8, ("pair", "single")),  # the 8B down projection's simdgroups: pairs, then a single step
    (8, 640, 4, ("single",)),
    (2, 96, 4, ("tail",)),            # no whole step
])
@pytest.mark.parametrize("vector_loads", [1, 0])
def test_early_instance_same_bits(m, k, bits, loops, vector_loads, gpu_plans, rng):
    """The _early kernels (a decoder's projections: constant weights, tile layout, up to 8 rows) wait for the kernel
    ahead after their first weight loads, on whichever loop runs first (with element loads of x, at once): the bits
    of the op's own call, which makes no promise. On the emulator's GPU plans each case checks that its simdgroup 0
    takes the loops it names (a GPU's split counts may differ: the same kernel paths, other shapes reach them)."""
    mtlinv.set_limit(8)
    q = quantized(48, k, 32, bits, np.dtype(np.float16))
    x = random(rng, (m, k), np.float16)
    launch = tiled_plan(m, k, 48, 32, bits, np.float16, constant_weights=True)
    assert launch["kernel"].endswith("_tiled_early"), launch["kernel"]
    if mtlinv.device_info()["backend"] == "emu":
        assert first_loop(k, launch["threads"][0] // 32) == loops, launch["threads"]
    got = launch_tiled(launch, x, quant.tile(*q, group_size=32, bits=bits), vector_loads)
    expected = run(x, q, 32, bits)
    assert same_bits(got, expected), first_difference(got, expected)


@pytest.mark.parametrize("constant_weights", [False, True], ids=["plain", "early"])
def test_reads_x_after_the_kernel_ahead(constant_weights, gpu_plans, rng):
    """x written by the kernel right before: on CUDA that kernel is still running when qgemv_mma starts
    (programmatic dependent launch), so an instance that read x before its wait, the plain one (which waits first)
    or the _early one (the op's constant_weights: it waits after its weight loads), would see the memory before the
    write. Both must give the bits of the call on the written x. The emulator runs kernels one after the other:
    there this checks only the op's constant_weights path."""
    mtlinv.set_limit(8)
    cuda = mtlinv.device_info()["backend"] == "cuda"
    k, inner = (4096, 8192) if cuda else (1152, 128)  # on CUDA a producer of some 20 us, time enough to race
    producer = mtlinv.asarray(random(rng, (k, inner), ml_dtypes.bfloat16, scale=inner ** -0.5))
    q = quantized(48, k, 32, 4, np.dtype(ml_dtypes.bfloat16))
    assert tiled_plan(1, k, 48, 32, 4, ml_dtypes.bfloat16, constant_weights)["kernel"].endswith("_early") == \
        constant_weights
    for _ in range(3):
        # Every upload (it waits for the device) before the producer: between it and qgemv_mma nothing waits.
        weights = [mtlinv.asarray(a) for a in quant.tile(*q, group_size=32, bits=4)]
        a = mtlinv.asarray(random(rng, (1, inner), ml_dtypes.bfloat16))
        x = mtlinv.gemv(a, producer)
        got = np.asarray(mtlinv.qgemv(x, *weights, group_size=32, bits=4, constant_weights=constant_weights))
        expected = run(np.asarray(x), q, 32, 4)
        assert same_bits(got, expected), first_difference(got, expected)


def test_constant_weights_must_be_a_bool():
    q = quantized(16, 128, 32, 4, np.dtype(np.float16))
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"qgemv: constant_weights must be True or False, got int 1"):
        mtlinv.qgemv(np.zeros((1, 128), np.float16), *q, group_size=32, bits=4, constant_weights=1)


@pytest.mark.parametrize("rows, tiled, constant, name", [
    (1, True, True, "qgemv_mma_b4_r8_bf16_tiled_early"), (8, True, True, "qgemv_mma_b4_r8_bf16_tiled_early"),
    (1, True, False, "qgemv_mma_b4_r8_bf16_tiled"), (9, True, True, "qgemv_mma_b4_r16_c2_bf16_tiled"),
    (1, False, True, "qgemv_mma_b4_r8_bf16")])
def test_constant_weights_routing(rows, tiled, constant, name, gpu_plans):
    """The op's constant_weights picks the _early instance in the tile layout at up to 8 rows, nowhere else; without
    it (the default) the plain one."""
    shape = dict(rows=rows, k=4096, n=8192, dtype="bfloat16", limit=16, tiled=tiled)  # 9 rows: two output tiles
    assert mtlinv._native.plan_qgemv(**shape, constant_weights=constant)["launches"][0]["kernel"] == name
    assert not mtlinv._native.plan_qgemv(**shape)["launches"][0]["kernel"].endswith("_early")


def test_float32_x_keeps_the_scalar_kernel(gpu_plans):
    """float32 x stays on qgemv: its products are not exact in 16 bits."""
    assert kernel(4, 4096, 512, 64, 4, np.float32, 16)["kernel"] == "qgemv_b4_r4_f32"


def test_short_k_above_the_limit_takes_qgemm(gpu_plans):
    """K = 128 is one step, held by the first split only: another split count would give the canonical order, so
    rows above the limit take qgemm."""
    assert kernel(4, 128, 64, 64, 4, np.float16, 0)["kernel"] == "qgemm_b4_f16"
    assert kernel(4, 128, 64, 64, 4, np.float16, 4)["kernel"] == "qgemv_mma_b4_r8_f16"
