"""Hypothesis strategies shared by the fuzz tests: dtypes, the forms an array argument may take (every one goes
through the ops' one conversion route), float64 references' bounds."""
import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import mtlinv
from helpers import RTOL

FLOATS = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
dtypes = st.sampled_from(FLOATS)
limits = st.sampled_from([0, 8])  # the throughput route and, for up to 8 rows, the canonical one
seeds = st.integers(0, 2**32 - 1)


def values(seed, shape, dtype, scale=1.0):
    """Normal values of `dtype` (rounded from float64) from a seed Hypothesis drew."""
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


FORMS = ["array", "byteswapped", "strided", "broadcast", "tensor", "list"]
forms = st.sampled_from(FORMS)


def as_form(a, form):
    """`a`'s values as an argument of the given form; an op must read each as `a` (a list only where `a` is float32,
    the dtype lists are read in)."""
    if form == "byteswapped":
        return a.astype(a.dtype.newbyteorder())
    if form == "strided" and a.ndim:  # (a 0-d array has no strides to spread)
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        view = wide[..., ::2]
        view[...] = a
        return view
    if form == "broadcast" and a.ndim:
        # A view with a zero stride over a repeated leading axis: a[0] repeated, which a's first row is set to.
        a[...] = a[:1]
        return np.broadcast_to(a[:1], a.shape)
    if form == "tensor":
        return mtlinv.asarray(a)
    if form == "list" and a.dtype == np.float32 and a.size:  # (an empty list loses the axes after the empty one)
        return a.tolist()
    return a


def assert_close(out, ref, magnitude, dtype, what):
    """|out - ref| <= RTOL[dtype] * magnitude, elementwise: magnitude is the float64 sum of the terms' absolute
    values, which bounds float32 accumulation; RTOL also covers the rounding of a 16-bit output, and the dtype's
    smallest subnormal the rounding of an output below its normal range."""
    out = np.asarray(out).astype(np.float64)
    assert out.shape == ref.shape, f"{what}: shape {out.shape}, reference {ref.shape}"
    bound = RTOL[np.dtype(dtype)] * magnitude + float(ml_dtypes.finfo(dtype).smallest_subnormal)
    bad = np.flatnonzero(~(np.abs(out - ref) <= bound))
    assert bad.size == 0, (f"{what}: {bad.size} elements off; first at {bad[0]}: {out.flat[bad[0]]} vs "
                           f"{ref.flat[bad[0]]} (bound {bound.flat[bad[0]] if np.ndim(bound) else bound})")


def same_bits(out, want):
    out, want = np.asarray(out), np.asarray(want)
    return out.shape == want.shape and out.dtype == want.dtype and out.tobytes() == want.tobytes()
