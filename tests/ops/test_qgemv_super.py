"""qgemv's super-block form (int8 scale and bias codes, float32 factors per 256 values: GGUF's Q4_K, Q5_K and Q6_K at
about their own bytes, mtlinv.gguf_kquants.to_super) against the float32-scale import of the same blocks
(gguf_kquants.to_affine): the same weights, so every kernel family gives the import's bits, row for row, at every
M and in both layouts; and errors that name what is wrong."""
import gguf
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv import gguf_kquants, quant
from helpers import DTYPE_IDS, FLOAT_DTYPES, RTOL, first_difference, random, same_bits

KINDS = {"q4_k": (4, 32), "q5_k": (5, 32), "q6_k": (6, 16)}
QTYPES = {"q4_k": gguf.GGMLQuantizationType.Q4_K, "q5_k": gguf.GGMLQuantizationType.Q5_K,
          "q6_k": gguf.GGMLQuantizationType.Q6_K}


def k_quant_blocks(rng, kind, n, k):
    """Raw blocks of `kind` for an [n, k] weight: random bytes, with float16 factors of either sign in
    [2^-12, 2^-8) (as llama.cpp writes for weights of order 1), so that products stay finite and of order 1."""
    per_block = gguf_kquants.BLOCK_BYTES[kind]
    raw = rng.integers(0, 256, size=(n, k // 256, per_block), dtype=np.uint8)
    fields = (208,) if kind == "q6_k" else (0, 2)
    for at in fields:
        d = (rng.choice([-1.0, 1.0], (n, k // 256)) * rng.uniform(2.0 ** -12, 2.0 ** -8, (n, k // 256)))
        raw[..., at:at + 2] = d.astype(np.float16).view(np.uint8).reshape(n, k // 256, 2)
    return raw.reshape(-1)


def forms(raw, n, k, kind):
    """(super, affine): the blocks as qgemv's operands in the super-block form and as the float32-scale import at
    the width the import runs at (8 bits where 5 or 6 have no float32-scale kernel)."""
    wq, sc, mc, supers, bits, group_size = gguf_kquants.to_super(raw, (n, k), kind)
    awq, scales, biases, abits, agroup = gguf_kquants.to_affine(raw, (n, k), kind)
    assert (abits, agroup) == (bits, group_size) == KINDS[kind]
    wide = 4 if bits == 4 else 8
    affine = dict(wq=quant.pack(quant.unpack(awq, bits, k), wide), scales=scales, biases=biases,
                  group_size=group_size, bits=wide)
    return dict(wq=wq, scales=sc, biases=mc, supers=supers, group_size=group_size, bits=bits), affine


def call(x, form, **extra):
    return np.asarray(mtlinv.qgemv(x, **form, **extra))


@pytest.mark.parametrize("kind", KINDS)
def test_expanded_supers_are_the_import_and_gguf(kind, rng):
    """The super-block form's scales and biases, as qgemv forms them (quant.expand_supers), are the affine
    import's, bit for bit, and its weights gguf's own dequantisation (but a zero's sign, as for the import)."""
    n, k = 8, 1024
    raw = k_quant_blocks(rng, kind, n, k)
    wq, sc, mc, supers, bits, group_size = gguf_kquants.to_super(raw, (n, k), kind)
    assert (sc.dtype, mc.dtype, supers.dtype, supers.shape) == (np.int8, np.int8, np.float32, (n, k // 256, 2))
    scales, biases = quant.expand_supers(sc, mc, supers, group_size)
    _, want_scales, want_biases, _, _ = gguf_kquants.to_affine(raw, (n, k), kind)
    assert same_bits(scales, want_scales) and same_bits(biases, want_biases)
    got = quant.dequantize_float32(wq, scales, biases, group_size, bits)
    want = gguf.quants.dequantize(raw.reshape(n, -1), QTYPES[kind]).reshape(n, k).astype(np.float32)
    assert np.array_equal(got, want)
    # About the blocks' own bytes: codes, one byte per group for each code array (Q6_K's one serves both), 8 per
    # 256 values.
    stored = sum(a.nbytes for a in {id(a): a for a in (wq, sc, mc, supers)}.values())
    assert stored * 8 / (n * k) == {"q4_k": 4.75, "q5_k": 5.75, "q6_k": 6.75}[kind]
    assert (sc is mc) == (kind == "q6_k")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("plans", ["device", "gpu"])
def test_the_import_bits_at_every_m(kind, dtype, plans, request, rng):
    """Every family (the scalar qgemv, qgemv_mma on the GPU plans with matrix units, the row-tiled throughput
    split and qgemm above the limit) gives the import's bits for the same rows where both forms run the same
    arithmetic on the same weights: everywhere but qgemv_mma at 5 and 6 bits, whose codes reach the matrix
    builtin's K slots in another order than the import's 8-bit ones (metal/qgemv_run.h, qgemv_code_pairs) and
    may round its sums differently (seen at M > 16, two steps per split). Rows at or below the limit are each the
    row alone, in both forms; the product is within the dtype's bound of a float64 one."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    n, k = 40, 512
    raw = k_quant_blocks(rng, kind, n, k)
    sup, aff = forms(raw, n, k, kind)
    bias = random(rng, (n,), dtype)
    x = random(rng, (48, k), dtype)
    w = quant.dequantize_float32(aff["wq"], aff["scales"], aff["biases"], aff["group_size"], aff["bits"])
    ref = x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)
    tol = RTOL[np.dtype(dtype)]
    mtlinv.set_limit(16)
    singles = [call(x[r:r + 1], sup, bias=bias) for r in range(16)]
    for m in (1, 3, 8, 9, 16, 20, 48):  # 20: the throughput split of the GEMVs; 48: qgemm
        got, want = call(x[:m], sup, bias=bias), call(x[:m], aff, bias=bias)
        kernel = mtlinv._native.plan_qgemv(rows=m, k=k, n=n, group_size=sup["group_size"], bits=sup["bits"],
                                           dtype=np.dtype(dtype).name, scale_dtype="int8")["launches"][0]["kernel"]
        if not (kernel.startswith("qgemv_mma_") and kind != "q4_k"):
            assert same_bits(got, want), f"M={m} ({kernel}): {first_difference(got, want)}"
        for r in range(m if m <= 16 else 0):
            assert same_bits(got[r:r + 1], singles[r]), f"M={m} row {r}"
        np.testing.assert_allclose(got.astype(np.float64), ref[:m], rtol=tol, atol=tol * np.abs(ref[:m]).max())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_tile_layout_gives_the_row_layouts_bits(kind, dtype, gpu_plans, rng):
    """Each K-quant in the tile layout (quant.tile with supers) on qgemv_mma: the row layout's bits at and below
    the limit, its supers [N/16, K/256, 16, 2]."""
    n, k = 32, 1024
    bits, group_size = KINDS[kind]
    sup, _ = forms(k_quant_blocks(rng, kind, n, k), n, k, kind)
    wq, sc, mc, supers = quant.tile(sup["wq"], sup["scales"], sup["biases"], group_size, bits, supers=sup["supers"])
    assert supers.shape == (n // 16, k // 256, 16, 2)
    assert np.array_equal(supers.transpose(0, 2, 1, 3).reshape(n, k // 256, 2), sup["supers"])
    tiled = dict(sup, wq=wq, scales=sc, biases=mc, supers=supers)
    mtlinv.set_limit(16)
    x = random(rng, (16, k), dtype)
    for m in (1, 5, 8, 16):
        got, want = call(x[:m], tiled), call(x[:m], sup)
        assert same_bits(got, want), f"M={m}: {first_difference(got, want)}"
    plan = mtlinv._native.plan_qgemv(rows=1, k=k, n=n, group_size=group_size, bits=bits,
                                     dtype=np.dtype(dtype).name, scale_dtype="int8", tiled=True)
    assert plan["launches"][0]["kernel"].startswith(f"qgemv_mma_b{bits}_") and plan["launches"][0]["kernel"].endswith(
        "_si8_g16_tiled" if group_size == 16 else "_si8_tiled")


def test_the_planned_kernels_read_codes(gpu_plans):
    """The plans name the super-block kernels of each family."""
    def kernel(rows, bits, group_size, dtype, limit=16):
        return mtlinv._native.plan_qgemv(rows=rows, k=512, n=64, group_size=group_size, bits=bits, dtype=dtype,
                                         scale_dtype="int8", limit=limit)["launches"][0]["kernel"]
    assert kernel(1, 6, 16, "bfloat16") == "qgemv_mma_b6_r8_bf16_si8_g16"
    assert kernel(1, 5, 32, "float32").startswith("qgemv_b5_") and kernel(1, 5, 32, "float32").endswith("_f32_si8")
    assert kernel(64, 4, 32, "float16", limit=0) == "qgemm_b4_f16_si8"


def test_errors_name_the_operand(rng):
    n, k = 16, 256
    sup, aff = forms(k_quant_blocks(rng, "q4_k", n, k), n, k, "q4_k")
    x = random(rng, (2, k), np.float32)
    with pytest.raises(mtlinv.InvalidArgumentError, match="scales are int8 codes .* but supers is not given"):
        mtlinv.qgemv(x, sup["wq"], sup["scales"], sup["biases"], group_size=32, bits=4)
    with pytest.raises(mtlinv.InvalidArgumentError, match="supers is given but scales are float32"):
        mtlinv.qgemv(x, **aff, supers=sup["supers"])
    with pytest.raises(mtlinv.DTypeError, match="supers has dtype float16; expected float32"):
        call(x, dict(sup, supers=sup["supers"].astype(np.float16)))
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"supers has shape \[16, 2, 2\] but N=16, K=256 needs "
                                                          r"\[N, K/256, 2\] = \[16, 1, 2\]"):
        call(x, dict(sup, supers=np.zeros((16, 2, 2), np.float32)))
    with pytest.raises(mtlinv.InvalidArgumentError, match="bits=8 and group_size=32 are not built for int8 scale "
                                                          "codes"):
        call(x, dict(sup, wq=quant.pack(quant.unpack(sup["wq"], 4, k), 8), bits=8))
    with pytest.raises(mtlinv.InvalidArgumentError, match="K=224 is not a multiple of 256"):
        call(x[:, :224], dict(sup, wq=sup["wq"][:, :28], scales=sup["scales"][:, :7], biases=sup["biases"][:, :7]))
    with pytest.raises(mtlinv.DTypeError, match="scales is int8 but biases is float32"):
        call(x, dict(sup, biases=sup["biases"].astype(np.float32)))
    with pytest.raises(TypeError, match="int8 scales are the super-block form's codes; pass supers="):
        quant.tile(sup["wq"], sup["scales"], sup["biases"], 32, 4)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"_quant_tile: supers must be float32 \[N, K/256, 2\] = "
                                                          r"\[16, 1, 2\], got float32 \[16, 2, 2\]"):
        quant.tile(sup["wq"], sup["scales"], sup["biases"], 32, 4, supers=np.zeros((16, 2, 2), np.float32))
    q6, _ = forms(k_quant_blocks(rng, "q6_k", n, k), n, k, "q6_k")
    with pytest.raises(mtlinv.InvalidArgumentError, match="quant_tile: int8 scale codes are tiled at bits 4 or 5 "
                                                          "with group_size 32, or 6 with 16"):
        quant.tile(quant.pack(quant.unpack(q6["wq"], 6, k), 8), q6["scales"], q6["biases"], 16, 8,
                   supers=q6["supers"])
    with pytest.raises(ValueError, match=r"expand_supers: scales \(16, 8\) at group_size=16 need supers"):
        quant.expand_supers(sup["scales"], sup["biases"], sup["supers"], 16)

