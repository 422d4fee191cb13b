"""Q5_0, Q5_1, Q4_K, Q5_K and Q6_K: imported bit for bit as the `gguf` package's own NumPy dequantisation does it,
on blocks of random bytes (every bit pattern of the codes and scales) and on files llama.cpp's quantiser wrote
(tests/model/fixtures, made by tools/make_model_fixtures.py); the models in those files give llama.cpp's logits
(token agreement and logit error, not bits: the kernels differ)."""
import pathlib

import gguf
import numpy as np
import pytest

import mtlinv
from mtlinv import gguf_blocks, gguf_kquants, quant
from mtlinv.model import GGUFModelError, LlamaWeights, ReferenceModel, Tokenizer, load_gguf
from mtlinv.model.device_model import DeviceModel, DeviceWeights, QuantLinear
from mtlinv.model.gguf_model import GGUFTensor, QType

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
KINDS = {QType.Q5_0: "q5_0", QType.Q5_1: "q5_1", QType.Q4_K: "q4_k", QType.Q5_K: "q5_k", QType.Q6_K: "q6_k"}
# Byte offsets of the float16 fields of a block (d, and dmin or m where the type has one).
F16_FIELDS = {"q5_0": (0,), "q5_1": (0, 2), "q4_k": (0, 2), "q5_k": (0, 2), "q6_k": (208,)}
_EXISTING = {QType.Q4_0: gguf_blocks.q4_0_to_affine, QType.Q4_1: gguf_blocks.q4_1_to_affine,
             QType.Q8_0: gguf_blocks.q8_0_to_affine}


def ours(raw, shape, qtype):
    """Our float32 dequantisation of a tensor's blocks: the affine import's weights (what qgemv multiplies)."""
    if qtype in _EXISTING:
        wq, s, b = _EXISTING[qtype](raw, shape, dtype=np.float32)
        bits, group_size = 8 if qtype == QType.Q8_0 else 4, 32
    else:
        wq, s, b, bits, group_size = gguf_kquants.to_affine(raw, shape, KINDS[qtype])
        assert group_size == (16 if qtype == QType.Q6_K else 32)
    assert s.dtype == np.float32 and b.dtype == np.float32
    return quant.dequantize_float32(wq, s, b, group_size, bits)


def assert_bit_equal(got, want, what):
    """Equal bits, except that a zero may have the other sign (Q4_0, Q5_0, Q8_0: see gguf_blocks)."""
    assert got.shape == want.shape, what
    same = got.view(np.uint32) == want.view(np.uint32)
    zeros = (got == 0) & (want == 0)
    assert (same | zeros).all(), f"{what}: {int((~(same | zeros)).sum())} values differ"


def random_blocks(rng, kind, n, k):
    per = gguf_kquants._BLOCK_ELEMENTS[kind]
    raw = rng.integers(0, 256, size=(n, k // per, gguf_kquants.BLOCK_BYTES[kind]), dtype=np.uint8)
    for offset in F16_FIELDS[kind]:
        raw[..., offset + 1] &= 0xFB  # an even float16 exponent: never 31 (inf, NaN); signs and the rest random
    return raw.reshape(-1)


@pytest.mark.parametrize("qtype", list(KINDS))
def test_random_blocks_decode_as_gguf_does(qtype):
    rng = np.random.default_rng(int(qtype))
    shape = (8, 1024)
    raw = random_blocks(rng, KINDS[qtype], *shape)
    want = gguf.quants.dequantize(raw.reshape(shape[0], -1), qtype).reshape(shape).astype(np.float32)
    assert_bit_equal(ours(raw, shape, qtype), want, qtype.name)


def test_decoders_check_sizes():
    with pytest.raises(ValueError, match=r"K=288 is not a multiple of the Q4_K block size 256"):
        gguf_kquants.to_affine(np.zeros(10, np.uint8), (1, 288), "q4_k")
    with pytest.raises(ValueError, match=r"shape \[2, 256\] in Q6_K needs 420 bytes \(2 blocks of 210\), got 10"):
        gguf_kquants.to_affine(np.zeros(10, np.uint8), (2, 256), "q6_k")
    with pytest.raises(TypeError, match="blocks must be a uint8 array"):
        gguf_kquants.to_affine(np.zeros(22, np.int8), (1, 32), "q5_0")


FILES = ("Q4_K_M", "Q4_K", "Q5_K", "Q5_0", "Q5_1", "Q6_K")  # every projection in a type qgemv holds exactly


@pytest.fixture(scope="module")
def reference():
    return np.load(FIXTURES / "reference_logits.npz")


def fixture(name):
    return load_gguf(FIXTURES / f"tiny-{name}.gguf")


@pytest.mark.parametrize("name", FILES)
def test_llama_cpp_quantised_tensors_decode_as_gguf_does(name):
    model = fixture(name)
    types = {t.ggml_type for t in model.tensors.values() if t.ggml_type not in (QType.F32, QType.F16)}
    expected = {QType.Q4_K, QType.Q6_K} if name == "Q4_K_M" else {QType[name]}
    assert types == expected, f"llama.cpp wrote {sorted(t.name for t in types)}"
    for t in model.tensors.values():
        if t.ggml_type in expected:
            assert_bit_equal(ours(t.data, t.shape, t.ggml_type), t.dequantize(), t.name)


def agreement(got, want):
    """Share of positions whose best token agrees, and the largest logit error relative to the logits' spread."""
    top = float(np.mean(np.argmax(got, -1) == np.argmax(want, -1)))
    return top, float(np.abs(got - want).max() / want.std())


@pytest.mark.parametrize("name", FILES)
def test_float64_reference_gives_llama_cpp_logits(name, reference):
    """The file as read here (weights dequantised as above, run in float64) against llama.cpp's own run of it.
    llama.cpp's CPU products round the activations to 8-bit blocks (Q8_K, Q8_0, Q8_1) first: errors of 3.5-6.6%
    of the logits' spread here, against 200% for weights read wrongly (the negative control below)."""
    tokens = [int(t) for t in reference["tokens"]]
    got = ReferenceModel(LlamaWeights.from_gguf(fixture(name))).forward(tokens, 0)
    top, err = agreement(got, reference[name])
    assert top == 1.0 and err < 0.1, (top, err)


def test_a_misread_file_fails_the_logit_comparison(reference):
    """Negative control: with one projection's rows in the wrong order (as a misread layout would give) the logits
    leave the bound (error 2.0 of the spread; the best tokens still agree: the tied embedding dominates them)."""
    weights = LlamaWeights.from_gguf(fixture("Q4_K"))
    layer = weights.layers[0]
    broken = type(layer)(**{**vars(layer), "wq": layer.wq[::-1].copy()})
    wrong = type(weights)(weights.config, weights.tok_embd, (broken, *weights.layers[1:]), weights.output_norm,
                          weights.output)
    tokens = [int(t) for t in reference["tokens"]]
    top, err = agreement(ReferenceModel(wrong).forward(tokens, 0), reference["Q4_K"])
    assert top < 1.0 or err > 0.1, (top, err)


@pytest.mark.parametrize("name", FILES)
def test_device_model_gives_llama_cpp_logits(name, reference):
    tokens = [int(t) for t in reference["tokens"]]
    got = DeviceModel(DeviceWeights.from_gguf(fixture(name)), len(tokens)).forward(tokens, 0)
    top, err = agreement(got, reference[name])
    assert top >= 0.9 and err < 0.1, (top, err)  # bfloat16 activations against 8-bit ones: 4-7.1% here


def test_mixed_projection_takes_the_smaller_group(monkeypatch):
    """Q4_K_M's layer 1 stacks Q4_K q and k with a Q6_K v: one projection in the super-block form at group 16 and 6
    bits, each Q4_K code widened and its scale and bias codes repeated over two groups, whose weights are gguf's
    dequantisation of all three, bit for bit. Loaded in the row layout on every device (a device with matrix units
    would tile it, the same weights in another order: test_tiled_kquant_projections_give_the_row_layouts_logits)."""
    model = fixture("Q4_K_M")
    parts = [model.layer(1, name) for name in ("attn_q", "attn_k", "attn_v")]
    assert [t.ggml_type for t in parts] == [QType.Q4_K, QType.Q4_K, QType.Q6_K]
    real_info = mtlinv.device_info
    monkeypatch.setattr(mtlinv, "device_info", lambda: {**real_info(), "matrix_units": False})
    linear = QuantLinear.from_gguf(*parts)
    assert (linear.bits, linear.group_size, linear.supers is not None) == (6, 16, True)
    wq, scales, biases, supers = (np.asarray(a) for a in (linear.wq, linear.scales, linear.biases, linear.supers))
    got = quant.dequantize_float32(wq, *quant.expand_supers(scales, biases, supers, 16), group_size=16, bits=6)
    assert_bit_equal(got, np.concatenate([t.dequantize() for t in parts]), "attn_qkv")
    # A K-quant stacked with another type (Q5_0 here) takes the affine import, at 8 bits.
    q5 = GGUFTensor("q5", QType.Q5_0, parts[2].shape, np.zeros(parts[2].shape[0] * parts[2].shape[1] // 32 * 22,
                                                                  np.uint8))
    mixed = QuantLinear.from_gguf(parts[0], q5)
    assert (mixed.bits, mixed.group_size, mixed.supers) == (8, 32, None)


@pytest.mark.parametrize("qtype, bits", [(QType.Q4_0, 4), (QType.Q4_1, 4), (QType.Q5_0, 5), (QType.Q5_1, 5),
                                         (QType.Q8_0, 8)])
def test_legacy_blocks_keep_their_float16_scales(qtype, bits):
    """Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 reach the device at their codes' width with their float16 scales (the
    _bf16_sf16 kernels), weights gguf's own dequantisation (but a zero's sign); with compact=False, and where float16
    cannot hold a bias (a d past 4094 makes Q5_0's -16 d overflow it), float32 scales at 4 or 8 bits, the same
    weights."""
    rng = np.random.default_rng(int(qtype))
    shape = (32, 256)
    raw = gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32), qtype)  # the gguf package's quantiser
    t = GGUFTensor("w", qtype, shape, raw)
    want = t.dequantize()

    def weights(linear, dtype, width):
        assert (np.asarray(linear.scales).dtype, linear.bits, linear.group_size) == (dtype, width, 32)
        parts = [np.asarray(a) for a in (linear.wq, linear.scales, linear.biases)]
        if parts[0].ndim != 2:
            pytest.skip("the device keeps the weights in the tile layout; the row layout is checked on the emulator")
        return quant.dequantize_float32(*parts, group_size=32, bits=width)

    assert_bit_equal(weights(QuantLinear.from_gguf(t), np.float16, bits), want, qtype.name)
    assert_bit_equal(weights(QuantLinear.from_gguf(t, compact=False), np.float32, 8 if bits == 5 else bits), want,
                     f"{qtype.name}, compact=False")
    if qtype == QType.Q5_0:  # one block's d of 5000: -16 d = -80000, past float16; the stack stays float32
        big = raw.reshape(shape[0], -1, 22).copy()  # [N, K/32, 22]: d first
        big[0, 0, :2] = np.array([5000], np.float16).view(np.uint8)
        t_big = GGUFTensor("big", qtype, shape, big.reshape(shape[0], -1))
        assert_bit_equal(weights(QuantLinear.from_gguf(t_big), np.float32, 8), t_big.dequantize(), "d = 5000")
        stacked = QuantLinear.from_gguf(t, t_big)
        assert_bit_equal(weights(stacked, np.float32, 8), np.concatenate([want, t_big.dequantize()]), "stacked")


def test_device_model_refuses_other_types_by_name():
    """A projection in a type qgemv holds no exact import for (Q3_K here) is refused naming the tensor and type."""
    t = GGUFTensor("blk.0.ffn_gate.weight", QType.Q3_K, (256, 256), np.zeros((256, 110), np.uint8))
    with pytest.raises(GGUFModelError, match=r"blk.0.ffn_gate.weight: type Q3_K: the device model runs its "
                                             r"projections through qgemv, which takes Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, "
                                             r"Q4_K, Q5_K, Q6_K"):
        QuantLinear.from_gguf(t)


def test_fixture_tokenizer_matches_llama_cpp(reference):
    """The fixtures' byte-level BPE vocabulary (gpt-2 pre-tokenizer) encodes as llama.cpp encodes it."""
    tok = Tokenizer.from_gguf(fixture("Q4_K"))
    assert tok.encode(str(reference["text"])) == [int(i) for i in reference["text_ids"]]


@pytest.mark.parametrize("name", ["Q4_K_M", "Q5_K", "Q6_K"])
def test_tiled_kquant_projections_give_the_row_layouts_logits(name, reference, gpu_plans, monkeypatch):
    """Where the device has matrix units the loader lays every K-quant projection out in tiles (Q4_K, Q5_K and Q6_K
    alike, the super-block form); the model's logits are then bit for bit those of the same projections in the row
    layout, which the same plans run with the same kernels' row instances (the emulator planning as for such a GPU)."""
    from mtlinv.model import device_model

    tokens = [int(t) for t in reference["tokens"]]
    tiled = DeviceWeights.from_gguf(fixture(name))
    projections = [p for layer in tiled.layers for p in (layer.w_qkv, layer.wo, layer.w_gate_up, layer.w_down)]
    assert all(p.supers is not None for p in projections)
    assert {p.bits for p in projections if p.wq.ndim == 4} == ({4, 6} if name == "Q4_K_M" else {int(name[1])})
    real_info = mtlinv.device_info
    monkeypatch.setattr(device_model.mtlinv, "device_info", lambda: {**real_info(), "matrix_units": False})
    rows = DeviceWeights.from_gguf(fixture(name))  # loaded as for a device without matrix units: the row layout
    monkeypatch.undo()
    assert all(p.wq.ndim == 2 for layer in rows.layers for p in (layer.w_qkv, layer.wo, layer.w_gate_up,
                                                                    layer.w_down))
    got = np.asarray(DeviceModel(tiled, len(tokens)).forward(tokens, 0))
    want = np.asarray(DeviceModel(rows, len(tokens)).forward(tokens, 0))
    assert got.tobytes() == want.tobytes()
