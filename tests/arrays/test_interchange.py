"""Every (library x dtype x direction) pair of docs/arrays.md's table, on host memory: the values arrive bit for bit,
and where the table says zero-copy, a write through one side is read through the other (a copy would not show it).
Libraries: NumPy + ml_dtypes, PyTorch, MLX, JAX (each skipped when not installed)."""
import numpy as np
import pytest

import mtlinv
from frameworks import DTYPES, FRAMEWORKS

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] == "cuda",
                                reason="host-memory interchange; CUDA memory: test_cuda_import.py")

VALUE = 3.25  # exact in every dtype, and in none of the arrays below


@pytest.fixture(params=sorted(FRAMEWORKS))
def lib(request):
    return FRAMEWORKS[request.param]()


@pytest.fixture(params=sorted(DTYPES))
def dtype(request):
    return DTYPES[request.param]


def _data(dtype):
    """3x4 values exact in every dtype, in 64-byte-aligned memory: JAX views only such memory (else it copies,
    test_jax_copies_unaligned_memory), as mtlinv's own allocations are."""
    values = (np.arange(12, dtype=np.float32).reshape(3, 4) / 8 - 0.5).astype(dtype)
    raw = np.empty(values.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start:start + values.nbytes].view(dtype).reshape(3, 4)
    out[...] = values
    return out


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_import_shares_memory(lib, dtype):
    """lib -> mtlinv: mtlinv.asarray keeps the dtype and views the library's memory."""
    x = lib.make(_data(dtype))
    t = mtlinv.asarray(x)
    assert t.dtype == dtype and t.shape == (3, 4)
    assert _same(t.numpy(), _data(dtype))
    t.numpy()[0, 0] = VALUE  # through mtlinv ...
    assert lib.read(x)[0, 0] == VALUE  # ... read by the library
    if lib.write is not None:
        lib.write(x, -VALUE)  # and the other way
        assert t.numpy()[0, 0] == -VALUE


def test_import_feeds_the_ops(lib, dtype):
    """An op takes the library's array as it takes the NumPy array of the same values, bit for bit."""
    x, w = _data(dtype), _data(dtype)[:2]
    expected = mtlinv.gemv(x, w).numpy()
    assert _same(mtlinv.gemv(lib.make(x), lib.make(w)).numpy(), expected)


def test_export(lib, dtype):
    """mtlinv -> lib: the library reads a Tensor's values, sharing its memory where the table says so."""
    t = mtlinv.asarray(_data(dtype))
    x = lib.export(t)
    assert _same(lib.read(x), _data(dtype))
    t.numpy()[0, 0] = VALUE
    assert (lib.read(x)[0, 0] == VALUE) == lib.export_shares


def test_export_of_an_op_result(lib, dtype):
    """A result (memory mtlinv allocated, not a wrapped array) leaves the same way."""
    y = mtlinv.add(_data(dtype), _data(dtype))
    x = lib.export(y)
    assert _same(lib.read(x), y.numpy())
    y.numpy()[0, 0] = VALUE
    assert (lib.read(x)[0, 0] == VALUE) == lib.export_shares


def test_jax_copies_unaligned_memory():
    """JAX views DLPack memory only at 64-byte alignment; a Tensor wrapping an ndarray elsewhere is copied by JAX
    (copy=None), or refused by JAX (copy=False). mtlinv's allocations (op results) are 64-byte aligned."""
    jnp = pytest.importorskip("jax.numpy")
    raw = np.zeros(20, np.float32)
    a = raw[1:17] if raw.ctypes.data % 64 == 0 else raw[(-raw.ctypes.data % 64) // 4 + 1:][:16]
    t = mtlinv.asarray(a)
    x = jnp.from_dlpack(t)
    a[0] = VALUE
    assert np.asarray(x)[0] == 0
    with pytest.raises(ValueError, match="not aligned to 64 bytes"):
        jnp.from_dlpack(t, copy=False)


def test_round_trip_through_the_library(lib, dtype):
    t = mtlinv.asarray(_data(dtype))
    back = mtlinv.asarray(lib.export(t))
    assert _same(back.numpy(), _data(dtype))
    if lib.export_shares:
        t.numpy()[0, 0] = VALUE
        assert back.numpy()[0, 0] == VALUE
