"""Shared test helpers: bitwise comparison and per-dtype accuracy bounds."""
import threading

import ml_dtypes
import numpy as np

FLOAT_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]

# Relative bounds against a float64 reference, scaled by the magnitude of the terms summed; the output rounding of
# each dtype dominates for f16/bf16, float32 accumulation error for f32.
RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3, np.dtype(ml_dtypes.bfloat16): 1.6e-2}


def as_numpy(t) -> np.ndarray:
    return t.numpy() if hasattr(t, "numpy") and not isinstance(t, np.ndarray) else np.asarray(t)


def bits(a) -> bytes:
    """The raw bytes of an array: what invariance tests compare (never allclose)."""
    return np.ascontiguousarray(as_numpy(a)).tobytes()


def same_bits(a, b) -> bool:
    a, b = as_numpy(a), as_numpy(b)
    return a.shape == b.shape and a.dtype == b.dtype and bits(a) == bits(b)


def first_difference(a, b) -> str:
    a = np.ascontiguousarray(as_numpy(a)).view(np.uint8)
    b = np.ascontiguousarray(as_numpy(b)).view(np.uint8)
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    diff = np.flatnonzero(a.reshape(-1) != b.reshape(-1))
    return "identical" if diff.size == 0 else f"{diff.size} bytes differ, first at byte {diff[0]}"


def rows_invariant(call, inputs, rows=16):
    """call(*(a[:m] for a in inputs)) has, for every m <= rows and row r < m, the bits of row r computed alone
    (rows along the first axis of every input and of the output)."""
    alone = [as_numpy(call(*(a[r:r + 1] for a in inputs))) for r in range(rows)]
    for m in range(1, rows + 1):
        full = as_numpy(call(*(a[:m] for a in inputs)))
        for r in range(m):
            assert same_bits(full[r:r + 1], alone[r]), f"M={m} row {r}: {first_difference(full[r:r + 1], alone[r])}"


def random(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def unaligned(a):
    """A copy of `a` whose data starts a whole number of elements past a 16-byte boundary, not on one: kernels then
    take their element-wise loads where an aligned copy takes 16-byte loads."""
    storage = np.empty(a.size + 16 // a.itemsize, a.dtype)
    offset = next(i for i in range(1, 16 // a.itemsize) if (storage.ctypes.data + a.itemsize * i) % 16)
    out = storage[offset:offset + a.size].reshape(a.shape)
    out[...] = a
    return out


def run_threads(target, count):
    """target(t) in `count` threads at once, t = 0..count - 1, all joined before it returns."""
    threads = [threading.Thread(target=target, args=(t,)) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
