"""The C API's error paths fuzzed through ctypes against the CMake-built libmtlinv: every invalid call Hypothesis
draws returns its documented status with mtlinv_last_error() naming the argument and the value, leaves *out as it
was, and never crashes; valid calls drawn alongside give the Python package's bits (where the package, too, runs
the emulator). What the header calls
undefined (a freed tensor used again; host buffers smaller than the sizes passed) is not called: it cannot be
told from valid memory without a sanitizer (docs/api.md, "C and C++")."""
import ctypes
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cmake_build
import mtlinv
from c_library import DTYPE, DTYPES, FLOAT16, FLOAT32, I64P, INT8, INVALID_ARGUMENT, CError, Library

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="loads the Linux libmtlinv.so")]


@pytest.fixture(scope="module")
def lib():
    """The CMake library, on its emulator: CMake builds no other backend, so whatever MTLINV_DEVICE names for the
    Python module (cuda on a GPU machine), the library chooses its backend, on its first call, with it unset."""
    library = Library(cmake_build.build() / "libmtlinv.so")
    saved = os.environ.pop("MTLINV_DEVICE", None)
    try:
        name = ctypes.create_string_buffer(256)
        library.check(library.device_name(name, len(name)))
    finally:
        if saved is not None:
            os.environ["MTLINV_DEVICE"] = saved
    return library


def fails(lib, call, code, *fragments):
    with pytest.raises(CError) as info:
        call()
    assert info.value.code == code, info.value
    for fragment in fragments:
        assert str(fragment) in info.value.message, f"{fragment!r} not in {info.value.message!r}"


def shape_array(shape):
    return (np.array(shape, np.int64) if shape else np.zeros(1, np.int64)).ctypes


dims = st.one_of(st.integers(-2**62, -1), st.integers(2**32, 2**62))


@given(st.lists(st.integers(0, 4), max_size=3), dims, st.integers(0, 2))
def test_tensor_from_host_bad_dimension(lib, shape, bad, at):
    at = min(at, len(shape))
    shape = shape[:at] + [bad] + shape[at:]
    data = np.zeros(1, np.float32)
    fails(lib, lambda: lib.call(lib.tensor_from_host, data.ctypes.data, shape_array(shape).data_as(I64P),
                                len(shape), FLOAT32), INVALID_ARGUMENT, "mtlinv_tensor_from_host", bad)


@given(st.one_of(st.integers(-2**31, -1), st.integers(9, 2**31 - 1)))
def test_tensor_from_host_bad_ndim(lib, ndim):
    fails(lib, lambda: lib.call(lib.tensor_from_host, None, None, ndim, FLOAT32), INVALID_ARGUMENT,
          f"ndim={ndim}")


@given(st.sampled_from(sorted(DTYPES, key=str)), st.lists(st.integers(0, 5), max_size=3), st.integers(0, 2**32 - 1))
def test_every_dtype_round_trips(lib, dtype, shape, seed):
    """Each mtlinv_dtype (MTLINV_INT8 too: the super-block form's codes) comes back with its bytes, and its dtype."""
    a = np.random.default_rng(seed).integers(0, 256, (*shape, dtype.itemsize), np.uint8).view(dtype).reshape(shape)
    t = lib.tensor(a)
    got = ctypes.c_int(-1)
    lib.check(lib.tensor_dtype(t, ctypes.byref(got)))
    assert got.value == DTYPES[dtype] and t.numpy(dtype).tobytes() == a.tobytes()


@given(st.one_of(st.integers(-2**31, -1), st.integers(INT8 + 1, 2**31 - 1)))
def test_tensor_from_host_bad_dtype(lib, dtype):
    data = np.zeros(2, np.float32)
    fails(lib, lambda: lib.call(lib.tensor_from_host, data.ctypes.data, shape_array([2]).data_as(I64P), 1, dtype),
          DTYPE, f"mtlinv_tensor_from_host: dtype={dtype}")


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_null_data_for_elements(lib, shape):
    fails(lib, lambda: lib.call(lib.tensor_from_host, None, shape_array(shape).data_as(I64P), len(shape),
                                FLOAT32), INVALID_ARGUMENT, "NULL")


@given(st.integers(1, 6), st.integers(0, 64))
def test_to_host_wrong_size(lib, n, size):
    t = lib.tensor(np.zeros(n, np.float32))
    if size == 4 * n:
        size += 1
    out = np.empty(max(size, 1), np.uint8)
    fails(lib, lambda: lib.check(lib.tensor_to_host(t, out.ctypes.data, size)), INVALID_ARGUMENT, f"{size} bytes")


@given(st.integers(-5, 5))
def test_queries_of_null_and_out_of_range(lib, i):
    assert lib.tensor_ndim(None) == -1 and lib.tensor_dim(None, i) == -1 and lib.tensor_nbytes(None) == 0
    t = lib.tensor(np.zeros((2, 3), np.float32))
    assert lib.tensor_dim(t, i) == ((2, 3)[i] if 0 <= i < 2 else -1)


@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 8), st.integers(1, 6), st.booleans())
def test_gemv(lib, k, other, n, m, transpose):
    """A K mismatch names both K; a match gives the Python package's bits."""
    rng = np.random.default_rng(k * 1000 + other)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, other) if transpose else (other, n)).astype(np.float32)
    tx, tw = lib.tensor(x), lib.tensor(w)
    if k != other:
        fails(lib, lambda: lib.call(lib.gemv, tx, tw, None, int(transpose)), INVALID_ARGUMENT, f"x has K={k}",
              f"w has K={other}")
    else:
        y = lib.call(lib.gemv, tx, tw, None, int(transpose)).numpy(np.float32)
        if mtlinv.device_info()["backend"] == "emu":
            assert y.tobytes() == np.asarray(mtlinv.gemv(x, w, transpose=transpose)).tobytes()
        else:  # the library runs the emulator, the package another backend: bits are not promised across them
            ref = x.astype(np.float64) @ (w.T if transpose else w).astype(np.float64)
            assert np.abs(y - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max()) * k


@given(st.sampled_from(["x", "w", "out"]))
def test_gemv_null(lib, which):
    args = {"x": lib.tensor(np.ones((1, 8), np.float32)), "w": lib.tensor(np.ones((2, 8), np.float32))}
    args[which] = None
    if which == "out":
        fails(lib, lambda: lib.check(lib.gemv(args["x"], args["w"], None, 1, None)), INVALID_ARGUMENT, "out is NULL")
    else:
        fails(lib, lambda: lib.call(lib.gemv, args["x"], args["w"], None, 1), INVALID_ARGUMENT, f"{which} is NULL")


@given(st.integers(-10, 300).filter(lambda b: b not in (2, 3, 4, 5, 6, 8)),
       st.integers(-10, 300).filter(lambda g: g not in (32, 64, 128)), st.booleans())
def test_qgemv_parameters(lib, bits, group_size, bad_bits):
    x = lib.tensor(np.ones((1, 128), np.float32))
    wq = lib.tensor(np.zeros((16, 16), np.uint32))
    scales, biases = lib.tensor(np.ones((16, 2), np.float32)), lib.tensor(np.zeros((16, 2), np.float32))
    b, g = (bits, 64) if bad_bits else (4, group_size)
    fails(lib, lambda: lib.call(lib.qgemv, x, wq, scales, biases, None, g, b), INVALID_ARGUMENT,
          f"bits={b}" if bad_bits else f"group_size={g}")


@given(st.integers(-10, 300), st.integers(-10, 300))
def test_qgemv_super_formats(lib, bits, group_size):
    """mtlinv_qgemv_super: a (bits, group_size) pair outside the super-block formats is refused naming both; the
    formats run."""
    k, n = 256, 16
    x = lib.tensor(np.ones((1, k), np.float32))
    supers = lib.tensor(np.ones((n, 1, 2), np.float32))
    b, g = bits % 9, group_size if group_size in (16, 32, 64) else 32
    codes = lib.tensor(np.ones((n, k // g), np.int8))  # operands of the right shapes: only the format is wrong
    wq = lib.tensor(np.zeros((n, k * max(b, 1) // 32), np.uint32))
    call = lambda: lib.call(lib.qgemv_super, x, wq, codes, codes, supers, None, g, b)  # noqa: E731
    if (b, g) in ((4, 32), (5, 32), (6, 16)):
        assert call().numpy(np.float32).shape == (1, n)
    else:
        fails(lib, call, INVALID_ARGUMENT, f"bits={b}", f"group_size={g}")


@given(st.sampled_from(["x", "wq", "scales", "biases", "supers", "out"]))
def test_qgemv_super_null(lib, which):
    k, n = 256, 16
    args = {"x": lib.tensor(np.ones((1, k), np.float32)), "wq": lib.tensor(np.zeros((n, k // 8), np.uint32)),
            "scales": lib.tensor(np.ones((n, 8), np.int8)), "biases": lib.tensor(np.ones((n, 8), np.int8)),
            "supers": lib.tensor(np.ones((n, 1, 2), np.float32))}
    operands = [None if name == which else args[name] for name in ("x", "wq", "scales", "biases", "supers")]
    if which == "out":
        fails(lib, lambda: lib.check(lib.qgemv_super(*operands, None, 32, 4, None)), INVALID_ARGUMENT,
              "mtlinv_qgemv_super: out is NULL")
    else:
        fails(lib, lambda: lib.call(lib.qgemv_super, *operands, None, 32, 4), INVALID_ARGUMENT,
              f"mtlinv_qgemv_super: {which} is NULL")


@given(st.integers(-40, 40), st.sampled_from([math.nan, math.inf, -math.inf, 0.1, -1.0]))
def test_sdpa(lib, kv_len, scale):
    q, k = lib.tensor(np.ones((1, 1, 64), np.float32)), lib.tensor(np.ones((1, 8, 64), np.float32))
    if not math.isfinite(scale):
        fails(lib, lambda: lib.call(lib.sdpa, q, k, k, 1, kv_len, scale), INVALID_ARGUMENT, "scale is")
    elif kv_len == 0 or kv_len > 8:
        fails(lib, lambda: lib.call(lib.sdpa, q, k, k, 1, kv_len, scale), INVALID_ARGUMENT, f"kv_len={kv_len}")
    else:
        assert lib.call(lib.sdpa, q, k, k, 1, kv_len, scale).numpy(np.float32).shape == (1, 1, 64)


@given(st.sampled_from([-1.0, -1e-30, math.nan, math.inf]))
def test_rms_norm_eps(lib, eps):
    x, w = lib.tensor(np.ones((2, 8), np.float32)), lib.tensor(np.ones(8, np.float32))
    fails(lib, lambda: lib.call(lib.rms_norm, x, w, eps), INVALID_ARGUMENT, "eps")


@given(st.one_of(st.integers(-2**31, -1), st.integers(2**30 + 1, 2**31 - 1)))
def test_limit_range(lib, limit):
    fails(lib, lambda: lib.check(lib.set_limit(limit, None)), INVALID_ARGUMENT, limit)
    fails(lib, lambda: lib.check(lib.push_limit(limit)), INVALID_ARGUMENT, limit)
    fails(lib, lambda: lib.check(lib.pop_limit()), INVALID_ARGUMENT, "")


@given(st.integers(0, 8))
def test_device_name_never_truncates(lib, size):
    buf = ctypes.create_string_buffer(b"\x7f" * 9)
    fails(lib, lambda: lib.check(lib.device_name(buf, size)), INVALID_ARGUMENT, f"buf has {size} bytes")
    assert buf.raw == b"\x7f" * 9 + b"\0"  # nothing written (create_string_buffer adds the NUL)


@given(st.integers(-64, 100), st.integers(-64, 100))
def test_tile_layout_shapes(lib, n, k):
    out = ctypes.c_int64(-7)
    code = lib.tiled_weight_elements(n, k, ctypes.byref(out))
    if n > 0 and k > 0 and n % 16 == 0 and k % 32 == 0:
        assert code == 0 and out.value == n * k
    else:
        assert code == INVALID_ARGUMENT and out.value == -7, lib.last_error()
        w = np.zeros(max(n * k, 1), np.float16)
        fails(lib, lambda: lib.check(lib.tile_weights(w.ctypes.data, FLOAT16, n, k, w.ctypes.data)),
              INVALID_ARGUMENT, "")


@given(st.integers(-3, 40), st.integers(-3, 300), st.sampled_from([16, 32, 64, 128]), st.integers(0, 9))
def test_quant_tiled_words(lib, n, k, group_size, bits):
    out = ctypes.c_int64(-7)
    code = lib.quant_tiled_words(n, k, group_size, bits, ctypes.byref(out))
    group_ok = group_size in (32, 64, 128) or group_size == 16 and bits == 8  # group 16: 8 bits only
    valid = n > 0 and n % 16 == 0 and k > 0 and group_ok and k % group_size == 0 and bits in (4, 8)
    if valid:
        assert code == 0 and out.value == n * -(-k // 128) * 4 * bits
    else:
        assert code == INVALID_ARGUMENT and out.value == -7 and lib.last_error(), lib.last_error()
