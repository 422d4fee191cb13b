"""Every public op on invalid inputs Hypothesis draws: each raises the documented MtlinvError subclass (docs/api.md,
"Arguments, conversions and errors") with a message naming the op, the argument and the offending value; none
crashes, returns, or raises anything else."""
import math
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mtlinv
import mtlinv.quant

f32 = np.float32
Bad = mtlinv.InvalidArgumentError
BadType = mtlinv.DTypeError
# Scalars that are not what an argument takes: 2.9 or True for an int, None or a string for a flag or a number.
not_ints = st.sampled_from([2.9, True, None, "3", 1.0, np.float32(2)])
not_flags = st.sampled_from([None, "no", 1, 0, 1.0])
not_reals = st.sampled_from([None, "1e-6", True, [1.0]])
wrong_dtypes = st.sampled_from([np.float64, np.int64, np.int8, np.complex64, np.bool_])


def raises(call, kind, *fragments):
    """call() raises `kind` (an MtlinvError) whose message holds every fragment (str() of the value it names)."""
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, mtlinv.MtlinvError)
    message = str(info.value)
    for fragment in fragments:
        assert str(fragment) in message, f"{fragment!r} not in {message!r}"


@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 8))
def test_gemv_k_mismatch(k, other, n):
    if other == k:
        other += 1
    raises(lambda: mtlinv.gemv(np.ones((2, k), f32), np.ones((n, other), f32)), Bad, "gemv:", f"x has K={k}",
           f"w has K={other}")
    raises(lambda: mtlinv.matmul(np.ones((2, k), f32), np.ones((other, n), f32)), Bad, "matmul:", f"a has K={k}")


@given(wrong_dtypes, st.sampled_from(["x", "w", "bias"]))
def test_gemv_dtype(dtype, which):
    args = {"x": np.ones((2, 8), f32), "w": np.ones((4, 8), f32), "bias": np.ones(4, f32)}
    args[which] = args[which].astype(dtype)
    # The argument is named first ("gemv: w has dtype ...") or beside the one it must match ("gemv: x is float32 but
    # w is int8").
    raises(lambda: mtlinv.gemv(args["x"], args["w"], args["bias"]), BadType, "gemv: ", f"{which} ",
           np.dtype(dtype).name)


@given(st.sampled_from([np.float16, ml_dtypes.bfloat16]))
def test_gemv_mixed_dtypes(dtype):
    raises(lambda: mtlinv.gemv(np.ones((2, 8), f32), np.ones((4, 8), dtype)), BadType, "gemv:", "float32",
           np.dtype(dtype).name)


@given(not_flags)
def test_gemv_transpose_flag(value):
    raises(lambda: mtlinv.gemv(np.ones((2, 8), f32), np.ones((4, 8), f32), transpose=value), Bad,
           "gemv: transpose must be True or False", repr(value))


@given(st.integers(-5, 300).filter(lambda b: b not in (2, 3, 4, 5, 6, 8)), st.sampled_from([32, 64, 128]))
def test_qgemv_bits(bits, group_size):
    x = np.ones((1, 128), f32)
    raises(lambda: mtlinv.qgemv(x, np.zeros((16, 16), np.uint32), np.ones((16, 1), f32), np.zeros((16, 1), f32),
                                group_size=group_size, bits=bits), Bad, "qgemv:", f"bits={bits}")


@given(st.integers(-5, 300).filter(lambda g: g not in (32, 64, 128)))
def test_qgemv_group_size(group_size):
    raises(lambda: mtlinv.qgemv(np.ones((1, 128), f32), np.zeros((16, 16), np.uint32), np.ones((16, 2), f32),
                                np.zeros((16, 2), f32), group_size=group_size, bits=4), Bad, "qgemv:",
           f"group_size={group_size}")


@given(st.sampled_from([np.int32, np.float32, np.uint8, np.uint16]))
def test_qgemv_wq_dtype(dtype):
    raises(lambda: mtlinv.qgemv(np.ones((1, 64), f32), np.zeros((16, 8), dtype), np.ones((16, 1), f32),
                                np.zeros((16, 1), f32), group_size=64, bits=4), BadType, "qgemv: wq",
           np.dtype(dtype).name)


@given(st.integers(1, 300), st.integers(1, 300))
def test_rms_norm_weight_shape(c, other):
    if other == c:
        other += 1
    raises(lambda: mtlinv.rms_norm(np.ones((2, c), f32), np.ones(other, f32)), Bad, "rms_norm: weight has shape",
           f"[{other}]", f"[2, {c}]")


@given(st.sampled_from([-1e-6, -1.0, math.inf, math.nan, 1e39, -math.inf]))
def test_rms_norm_eps(eps):
    raises(lambda: mtlinv.rms_norm(np.ones((2, 8), f32), np.ones(8, f32), eps), Bad, "rms_norm: eps",
           f"got {eps:g}")


@given(not_reals)
def test_rms_norm_eps_kind(eps):
    raises(lambda: mtlinv.rms_norm(np.ones((2, 8), f32), np.ones(8, f32), eps), Bad, "rms_norm: eps must be a real")


@given(st.integers(1, 300).filter(lambda d: d not in (64, 80, 96, 128, 256)))
def test_sdpa_head_dim(d):
    raises(lambda: mtlinv.sdpa(np.ones((1, 1, d), f32), np.ones((1, 4, d), f32), np.ones((1, 4, d), f32)), Bad,
           f"sdpa: head dim D={d} is not supported")


@given(st.integers(-10, 40).filter(lambda n: not 1 <= n <= 8))
def test_sdpa_kv_len(kv_len):
    raises(lambda: mtlinv.sdpa(np.ones((1, 1, 64), f32), np.ones((1, 8, 64), f32), np.ones((1, 8, 64), f32),
                               kv_len=kv_len), Bad, f"sdpa: kv_len={kv_len}", "C=8")


@given(st.sampled_from([math.nan, math.inf, -math.inf, 3e38, -1e300]))
def test_sdpa_scale(scale):
    """Refused where scale * log2(e) is not a finite float32 (3e38 * 1.44 passes 3.4e38)."""
    raises(lambda: mtlinv.sdpa(np.ones((1, 1, 64), f32), np.ones((1, 8, 64), f32), np.ones((1, 8, 64), f32),
                               scale=scale), Bad, "sdpa: scale", f"got {scale:g}")


@given(st.integers(1, 5), st.integers(1, 5))
def test_sdpa_heads(hq, hkv):
    if hq % hkv == 0:
        hq = hkv * hq + 1 if hkv > 1 else hq
    if hq % hkv == 0:
        return  # hkv == 1 divides everything: no invalid pair to make
    raises(lambda: mtlinv.sdpa(np.ones((hq, 1, 64), f32), np.ones((hkv, 4, 64), f32), np.ones((hkv, 4, 64), f32)),
           Bad, f"sdpa: q has Hq={hq} heads", f"Hkv={hkv}")


@given(st.integers(0, 10), st.integers(1, 5), st.integers(1, 12))
def test_write_heads_offset(offset, length, capacity):
    if offset + length <= capacity:
        offset = capacity - length + 1
    dst = mtlinv.asarray(np.zeros((1, capacity, 4), f32))
    raises(lambda: mtlinv.write_heads(np.ones((length, 1, 4), f32), dst, offset), Bad,
           f"write_heads: seq_offset={offset}", f"L={length}", f"capacity {capacity}")


@given(st.sampled_from([0.0, 1e-45, 0.5, -3.0, math.nan, math.inf, 1e39]))
def test_rope_base(base):
    raises(lambda: mtlinv.rope_heads(np.ones((2, 1, 4), f32), 0, base), Bad, "rope_heads: base")
    dst = mtlinv.asarray(np.zeros((1, 4, 4), f32))
    raises(lambda: mtlinv.write_heads(np.ones((2, 1, 4), f32), dst, 0, 0, rotate=True, base=base), Bad,
           "write_heads: base")


@given(not_ints, st.sampled_from(["seq_offset", "start_pos"]))
def test_write_heads_int_arguments(value, name):
    dst = mtlinv.asarray(np.zeros((1, 4, 4), f32))
    kwargs = {"seq_offset": 0, "start_pos": 0, name: value}
    raises(lambda: mtlinv.write_heads(np.ones((2, 1, 4), f32), dst, **kwargs), Bad, f"write_heads: {name} must be an int")


@given(st.lists(st.integers(-2**40, 2**40), min_size=1, max_size=8), st.integers(1, 20))
def test_embedding_ids_out_of_range(ids, vocab):
    bad = [i for i, v in enumerate(ids) if not 0 <= v < vocab]
    if not bad:
        ids[0], bad = vocab, [0]
    raises(lambda: mtlinv.embedding(np.ones((vocab, 4), f32), np.array(ids, np.int64)), Bad,
           f"embedding: ids[{bad[0]}]={ids[bad[0]]} is outside [0, {vocab})")


@given(st.sampled_from([np.float32, np.float64, np.float16]))
def test_embedding_ids_dtype(dtype):
    raises(lambda: mtlinv.embedding(np.ones((4, 4), f32), np.zeros(2, dtype)), BadType, "embedding: ids",
           np.dtype(dtype).name)


@given(st.integers(1, 100), st.integers(1, 100))
def test_tile_weights_shape(n, k):
    if n % 16 == 0 and k % 32 == 0:
        n += 1
    raises(lambda: mtlinv.tile_weights(np.ones((n, k), np.float16)), Bad, "tile_weights")


@given(wrong_dtypes)
def test_tile_weights_dtype(dtype):
    raises(lambda: mtlinv.tile_weights(np.ones((16, 32), dtype)), BadType, "tile_weights: w has dtype",
           np.dtype(dtype).name)


@given(st.one_of(st.integers(-2**40, -1), st.integers(2**30 + 1, 2**40)))
def test_limit_range(limit):
    raises(lambda: mtlinv.set_limit(limit), Bad, str(limit))
    with pytest.raises(Bad, match=re.escape(str(limit))):
        with mtlinv.batch_invariant(limit):
            pass
    assert mtlinv.get_limit() == 0


@given(st.sampled_from(["gemv", "rms_norm", "sdpa", "add", "heads_to_rows", "swiglu_halves"]),
       st.sampled_from([object(), "abc", {"a": 1}, [[1.0], [2.0, 3.0]]]))
def test_unreadable_arguments(op, value):
    calls = {"gemv": lambda: mtlinv.gemv(value, np.ones((4, 8), f32)),
             "rms_norm": lambda: mtlinv.rms_norm(value, np.ones(8, f32)),
             "sdpa": lambda: mtlinv.sdpa(value, np.ones((1, 4, 64), f32), np.ones((1, 4, 64), f32)),
             "add": lambda: mtlinv.add(value, np.ones(3, f32)),
             "heads_to_rows": lambda: mtlinv.heads_to_rows(value),
             "swiglu_halves": lambda: mtlinv.swiglu_halves(value)}
    with pytest.raises(mtlinv.MtlinvError, match=f"^{op}: "):
        calls[op]()


@given(st.sampled_from(["quantize", "dequantize", "tile"]), st.integers(-3, 300), st.booleans())
def test_quant_helpers_parameters(helper, value, as_bits):
    """The format helpers raise the builtins (ValueError for a value, TypeError for a kind) naming the value."""
    if as_bits and value in (2, 3, 4, 5, 6, 8) or not as_bits and value in (16, 32, 64, 128):
        value = 7
    kwargs = {"group_size": 64, "bits": 4, ("bits" if as_bits else "group_size"): value}
    w = np.ones((16, 128), f32)
    wq, scales, biases = mtlinv.quant.quantize(w, group_size=64, bits=4)
    calls = {"quantize": lambda: mtlinv.quant.quantize(w, **kwargs),
             "dequantize": lambda: mtlinv.quant.dequantize(wq, scales, biases, **kwargs),
             "tile": lambda: mtlinv.quant.tile(wq, scales, biases, **kwargs)}
    with pytest.raises(ValueError, match=f"{'bits' if as_bits else 'group_size'}={value}"):
        calls[helper]()


@given(st.sampled_from([np.float64, np.int32, np.uint8]))
def test_quantize_dtype(dtype):
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        mtlinv.quant.quantize(np.ones((2, 64), dtype), group_size=64, bits=4)


# Each op with its first array argument replaced: the contract's routes, op by op.
FIRST_ARGUMENT = {
    "gemv": lambda a: mtlinv.gemv(a, np.ones((4, 8), f32)),
    "matmul": lambda a: mtlinv.matmul(a, np.ones((8, 4), f32)),
    "qgemv": lambda a: mtlinv.qgemv(a, np.zeros((16, 1), np.uint32), np.ones((16, 1), f32), np.zeros((16, 1), f32),
                                    group_size=32, bits=4),
    "rms_norm": lambda a: mtlinv.rms_norm(a, np.ones(8, f32)),
    "add_rms_norm": lambda a: mtlinv.add_rms_norm(a, np.ones((2, 8), f32), np.ones(8, f32)),
    "sdpa": lambda a: mtlinv.sdpa(a, np.ones((1, 4, 64), f32), np.ones((1, 4, 64), f32)),
    "add": lambda a: mtlinv.add(a, np.ones((2, 8), f32)),
    "swiglu": lambda a: mtlinv.swiglu(a, np.ones((2, 8), f32)),
    "swiglu_halves": lambda a: mtlinv.swiglu_halves(a),
    "rope_heads": lambda a: mtlinv.rope_heads(a, 0),
    "write_heads": lambda a: mtlinv.write_heads(a, mtlinv.asarray(np.zeros((1, 4, 8), f32)), 0),
    "qkv_to_heads": lambda a: mtlinv.qkv_to_heads(a, 1, *(mtlinv.asarray(np.zeros((1, 4, 8), f32)) for _ in "kv"),
                                                  0),
    "qk_rms_norm": lambda a: mtlinv.qk_rms_norm(a, 1, 1, np.ones(8, f32), np.ones(8, f32)),
    "heads_to_rows": lambda a: mtlinv.heads_to_rows(a),
    "embedding": lambda a: mtlinv.embedding(a, [0]),
    "tile_weights": lambda a: mtlinv.tile_weights(a),
}
SHAPES = {"sdpa": (1, 1, 64), "rope_heads": (2, 1, 8), "write_heads": (2, 1, 8), "qkv_to_heads": (2, 3, 8),
          "qk_rms_norm": (2, 3, 8),
          "heads_to_rows": (1, 2, 8), "qgemv": (1, 32), "tile_weights": (16, 32)}


@given(st.sampled_from(sorted(FIRST_ARGUMENT)), st.sampled_from(["float64", "int64", "complex64", "bool"]),
       st.booleans())
def test_unsupported_dtypes_are_refused_not_converted(op, dtype, view):
    """A float64 (or other unsupported) ndarray is a DTypeError naming the dtype, not a silent conversion; the
    same as a view, refused before any copy."""
    a = np.ones(SHAPES.get(op, (2, 8)), dtype)
    if view:
        a = np.broadcast_to(a[:1], a.shape)
    raises(lambda: FIRST_ARGUMENT[op](a), BadType, f"{op}:", dtype)
