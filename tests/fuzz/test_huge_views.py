"""Views an op must copy (broadcast, strided, byte-swapped) are checked before the copy, by the op's own checks: a
view of 2^32 rows is refused with the message a contiguous array of that shape gets (naming the op's dimension or
element count), and nothing of its size is allocated. Before, NumPy's MemoryError came first ("Unable to allocate
128 GiB"), and a view that fit in memory was copied and then refused."""
import tracemalloc

import numpy as np
import pytest

import mtlinv

BIG = 2**32
f32 = np.float32


KINDS = ["broadcast", "strided", "byte-swapped"]
kind = KINDS[0]  # the kind of view huge() makes (test_huge_view_is_refused_before_any_copy sets it)


def huge(shape, dtype=f32):
    """A view of `shape` over a few elements of memory, of the current `kind`: broadcast (zero strides), strided
    (every other element of a short last axis, of one row read again and again) or byte-swapped and broadcast."""
    if kind == "strided":  # (a huge last axis, too, is read again and again)
        last = shape[-1] if shape[-1] <= 64 else 1
        row = np.zeros(2 * last, dtype)
        strides = (0,) * (len(shape) - 1) + (2 * row.itemsize if last > 1 else 0,)
        return np.lib.stride_tricks.as_strided(row, shape, strides, writeable=False)
    if kind == "byte-swapped":
        return np.broadcast_to(np.zeros((), np.dtype(dtype).newbyteorder()), shape)
    return np.broadcast_to(np.zeros((), dtype), shape)


def swapped_strided(shape, dtype=f32):
    """A byte-swapped, strided view (every other element of a small buffer), copied by every op."""
    base = np.zeros(shape[:-1] + (2 * shape[-1],), np.dtype(dtype).newbyteorder())
    return base[..., ::2]


def cache(shape):
    return mtlinv.asarray(np.zeros(shape, f32))


# (op call, the message's pattern): each view's shape breaks one of the op's documented size limits.
CASES = {
    "gemv N": (lambda: mtlinv.gemv(np.ones((2, 8), f32), huge((BIG, 8))), r"gemv: N=4294967296 is out of range"),
    "gemv rows*K": (lambda: mtlinv.gemv(huge((2**29, 16)), np.ones((4, 16), f32)),
                    r"gemv: rows\*K=8589934592 is out of range"),
    "gemv K": (lambda: mtlinv.gemv(huge((1, 2**31)), huge((1, 2**31))),
               r"gemv: K=2147483648 is out of range for the kernels \(at most 2\^31 - 1\)"),
    "gemv bias": (lambda: mtlinv.gemv(np.ones((2, 8), f32), np.ones((4, 8), f32), huge((BIG,))),
                  r"gemv: bias has shape \[4294967296\]"),
    "matmul N": (lambda: mtlinv.matmul(np.ones((2, 8), f32), huge((8, BIG))), r"matmul: N=4294967296 is out of range"),
    "qgemv rows*K": (lambda: mtlinv.qgemv(huge((2**29, 64)), np.zeros((16, 8), np.uint32), np.ones((16, 1), f32),
                                          np.zeros((16, 1), f32), group_size=64, bits=4),
                     r"qgemv: rows\*K=34359738368 is out of range"),
    "qgemv wq": (lambda: mtlinv.qgemv(np.ones((1, 64), f32), huge((BIG, 8), np.uint32), np.ones((16, 1), f32),
                                      np.zeros((16, 1), f32), group_size=64, bits=4),
                 r"qgemv: .*4294967296"),
    "rms_norm rows": (lambda: mtlinv.rms_norm(huge((BIG, 8)), np.ones(8, f32)),
                      r"rms_norm: rows=4294967296 is out of range"),
    "rms_norm cols": (lambda: mtlinv.rms_norm(huge((1, 2**31)), huge((2**31,))),
                      r"rms_norm: cols=2147483648 is out of range for the kernels \(at most 2\^31 - 1\)"),
    "add_rms_norm rows": (lambda: mtlinv.add_rms_norm(huge((BIG, 8)), huge((BIG, 8)), np.ones(8, f32)),
                          r"add_rms_norm: rows=4294967296 is out of range"),
    "sdpa C": (lambda: mtlinv.sdpa(np.ones((1, 1, 64), f32), huge((1, 2**31, 64)), huge((1, 2**31, 64))),
               r"sdpa: C=2147483648 is out of range for the kernels \(at most 2\^31 - 1\)"),
    "add size": (lambda: mtlinv.add(huge((BIG,)), huge((BIG,))), r"add: size=4294967296 is out of range"),
    "swiglu size": (lambda: mtlinv.swiglu(huge((BIG,)), huge((BIG,))), r"swiglu: size=4294967296 is out of range"),
    "swiglu_halves size": (lambda: mtlinv.swiglu_halves(huge((BIG, 2))),
                           r"swiglu_halves: size=8589934592 is out of range"),
    "write_heads L": (lambda: mtlinv.write_heads(huge((BIG, 1, 2)), cache((1, 4, 2)), 0),
                      r"write_heads: L=4294967296 is out of range"),
    "rope_heads L": (lambda: mtlinv.rope_heads(huge((BIG, 1, 2)), 0), r"rope_heads: L=4294967296 is out of range"),
    "qkv_to_heads L": (lambda: mtlinv.qkv_to_heads(huge((BIG, 3, 2)), 1, cache((1, 4, 2)), cache((1, 4, 2)), 0),
                       r"qkv_to_heads: L=4294967296 is out of range"),
    "qk_rms_norm L": (lambda: mtlinv.qk_rms_norm(huge((BIG, 3, 2)), 1, 1, np.ones(2, f32), np.ones(2, f32)),
                      r"qk_rms_norm: L=4294967296 is out of range"),
    "qk_rms_norm L * heads": (lambda: mtlinv.qk_rms_norm(huge((2**31, 3, 2)), 1, 1, np.ones(2, f32), np.ones(2, f32)),
                              r"qk_rms_norm: L \* \(q_heads \+ 2 kv_heads\)=6442450944 is out of range"),
    "heads_to_rows L": (lambda: mtlinv.heads_to_rows(huge((1, BIG, 2))), r"heads_to_rows: L=4294967296 is out of range"),
    "embedding V": (lambda: mtlinv.embedding(huge((BIG, 4)), [0]), r"embedding: V=4294967296 is out of range"),
    "embedding L": (lambda: mtlinv.embedding(np.ones((4, 4), f32), huge((BIG,), np.int32)),
                    r"embedding: L=4294967296 is out of range"),
    "sdpa B*Hq*Lq": (lambda: mtlinv.sdpa(huge((1, BIG, 64)), np.ones((1, 4, 64), f32), np.ones((1, 4, 64), f32),
                                         causal=False), r"sdpa: B\*Hq\*Lq=4294967296 is out of range"),
    # Outside the ops, each dimension against 2^32 - 1 before the copy.
    "tile_weights": (lambda: mtlinv.tile_weights(huge((BIG, 32), np.float16)),
                     r"tile_weights: w has shape \(4294967296, 32\): dimension 0 = 4294967296 is out of range"),
    "asarray": (lambda: mtlinv.asarray(huge((4, BIG))), r"asarray has shape \(4, 4294967296\): dimension 1"),
    "quantize": (lambda: mtlinv.quantize(huge((BIG, 64))), r"quantize: w has shape \(4294967296, 64\)"),
}


@pytest.mark.parametrize("view", KINDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_huge_view_is_refused_before_any_copy(case, view, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "kind", view)
    call, message = CASES[case]
    tracemalloc.start()  # NumPy reports its data allocations to tracemalloc
    try:
        with pytest.raises(mtlinv.InvalidArgumentError, match=message):
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{case}: {peak} bytes allocated before the refusal"


def test_view_gets_the_message_of_the_contiguous_array():
    """The same shape refused the same way, view or not (a shape small enough to make contiguous: K mismatch)."""
    x = np.ones((2, 8), f32)
    w = np.ones((4, 9), f32)
    with pytest.raises(mtlinv.InvalidArgumentError) as contiguous:
        mtlinv.gemv(x, w)
    with pytest.raises(mtlinv.InvalidArgumentError) as view:
        mtlinv.gemv(x, np.broadcast_to(np.ones(9, f32), (4, 9)))
    assert str(view.value) == str(contiguous.value)


@pytest.mark.parametrize("op", ["gemv", "rms_norm", "sdpa", "embedding", "write_heads"])
def test_views_that_pass_the_checks_are_copied_and_computed(op, rng):
    """The checks-first pass leaves a valid call as it was: a byte-swapped strided view gives the bits of its
    contiguous copy."""
    if op == "gemv":
        x, w = rng.standard_normal((3, 32)).astype(f32), rng.standard_normal((8, 32)).astype(f32)
        got, want = mtlinv.gemv(_view_of(x), _view_of(w)), mtlinv.gemv(x, w)
    elif op == "rms_norm":
        x, w = rng.standard_normal((3, 32)).astype(f32), rng.standard_normal(32).astype(f32)
        got, want = mtlinv.rms_norm(_view_of(x), _view_of(w)), mtlinv.rms_norm(x, w)
    elif op == "sdpa":
        q, k, v = (rng.standard_normal(s).astype(f32) for s in ((2, 3, 64), (1, 5, 64), (1, 5, 64)))
        got, want = mtlinv.sdpa(_view_of(q), _view_of(k), _view_of(v)), mtlinv.sdpa(q, k, v)
    elif op == "embedding":
        table, ids = rng.standard_normal((10, 16)).astype(f32), np.array([3, 0, 9, 3], np.int64)
        got, want = mtlinv.embedding(_view_of(table), ids[::-1]), mtlinv.embedding(table, ids[::-1].copy())
    else:
        x = rng.standard_normal((3, 2, 8)).astype(f32)
        got, want = cache((2, 5, 8)), cache((2, 5, 8))
        mtlinv.write_heads(_view_of(x), got, 1, 4, rotate=True)
        mtlinv.write_heads(x, want, 1, 4, rotate=True)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def _view_of(a):
    """a's values in a byte-swapped, strided view."""
    view = swapped_strided(a.shape, a.dtype)
    view[...] = a
    return view
