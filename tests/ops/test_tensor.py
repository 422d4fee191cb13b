import ml_dtypes
import numpy as np
import pytest

import mtlinv
from helpers import FLOAT_DTYPES


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [np.uint32, np.int32, np.uint8])
def test_round_trip(dtype, rng):
    a = (rng.standard_normal((3, 5)) * 10).astype(dtype)
    t = mtlinv.asarray(a)
    assert t.shape == (3, 5) and t.dtype == np.dtype(dtype)
    assert np.asarray(t).tobytes() == a.tobytes()
    assert t.numpy().tobytes() == a.tobytes()


def test_asarray_shares_memory_on_host_devices(rng):
    if not mtlinv.device_info()["backend"] in ("emu", "metal"):
        pytest.skip("zero-copy needs host-visible memory")
    a = rng.standard_normal(16).astype(np.float32)
    t = mtlinv.asarray(a)
    assert np.shares_memory(np.asarray(t), a)
    view = memoryview(t)
    assert view.format == "f" and view.shape == (16,)


def test_bfloat16_array_view():
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 3)
    t = mtlinv.asarray(a)
    back = np.asarray(t)
    assert back.dtype == ml_dtypes.bfloat16 and back.tobytes() == a.tobytes()


def test_non_contiguous_input_is_copied(rng):
    a = rng.standard_normal((4, 6)).astype(np.float32)[:, ::2]
    t = mtlinv.asarray(a)
    assert np.array_equal(np.asarray(t), a)


def test_unsupported_dtype_names_it():
    with pytest.raises(TypeError, match="float64"):
        mtlinv.asarray(np.zeros(3))
    with pytest.raises(mtlinv.DTypeError):
        mtlinv.asarray(np.zeros(3, dtype=np.complex64))


def test_shapes_that_overflow_are_refused():
    t = mtlinv.asarray(np.arange(4, dtype=np.float32))
    with pytest.raises(ValueError, match=r"reshape: a dimension must be in \[-1, \d+\], got 4611686018427387905"):
        t.reshape(2**62 + 1, 4)


@pytest.mark.parametrize("source, shape", [
    ((12,), (3, 4)), ((12,), (3, -1)), ((12,), (-1, 2, 3)), ((2, 6), ((4, 3),)), ((12,), (12, 1, 1)),
    ((1,), ()), ((2, 0, 3), (0, 5)), ((2, 0, 3), (-1, 7)),
])
def test_reshape_matches_numpy(source, shape):
    a = np.arange(np.prod(source), dtype=np.float32).reshape(source)
    r = mtlinv.asarray(a).reshape(*shape)
    expected = a.reshape(*shape) if shape else a.reshape(())
    assert r.shape == expected.shape and np.array_equal(np.asarray(r), expected)


@pytest.mark.parametrize("shape", [(5, 3), (-1, 5), (-1, -1), (2**31, 2**31, 2**31), (2**62, 2**62, -1), (0, 12)])
def test_reshape_to_another_size_is_refused(shape):
    t = mtlinv.asarray(np.arange(12, dtype=np.float32))
    with pytest.raises(ValueError, match="reshape: (cannot view shape|invalid shape)"):
        t.reshape(*shape)


def test_zero_dim_and_empty_arrays():
    assert mtlinv.asarray(np.float32(3)).shape == ()
    empty = mtlinv.asarray(np.zeros((2, 0, 3), np.float32))
    assert empty.shape == (2, 0, 3) and np.asarray(empty).size == 0


def test_tensor_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="asarray"):
        mtlinv.Tensor()


def test_device_info():
    info = mtlinv.device_info()
    assert info["backend"] in info["built_backends"]
    assert info["threads"] >= 1 and info["simd_width"] == 32


def test_error_hierarchy():
    assert issubclass(mtlinv.InvalidArgumentError, ValueError)
    assert issubclass(mtlinv.DTypeError, TypeError)
    assert issubclass(mtlinv.DeviceError, RuntimeError)
    assert issubclass(mtlinv.KernelError, RuntimeError)
    assert issubclass(mtlinv.OutOfMemoryError, MemoryError)
    for cls in (mtlinv.InvalidArgumentError, mtlinv.DTypeError, mtlinv.DeviceError, mtlinv.KernelError):
        assert issubclass(cls, mtlinv.MtlinvError)


def test_synchronize_waits_for_queued_ops():
    """mtlinv.synchronize() exists on every backend and returns once the ops before it have run (on CUDA they return
    queued; tests/runtime/test_cuda_specific.py checks that the device is idle after it)."""
    a = np.arange(8, dtype=np.float32)
    out = mtlinv.add(a, a)
    assert mtlinv.synchronize() is None
    assert np.array_equal(np.asarray(out), 2 * a)


def test_buffer_requests_are_honoured():
    """A plain-bytes request (PyBUF_SIMPLE, as hashlib makes) gets one flat buffer, not a 2-D one PEP 3118 forbids."""
    import hashlib
    if mtlinv.device_info()["backend"] == "cuda":
        pytest.skip("CUDA memory is not host-visible: Tensors there have no buffer")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = mtlinv.asarray(a)
    assert hashlib.sha256(t).hexdigest() == hashlib.sha256(a).hexdigest()
    view = memoryview(t)
    assert view.shape == (3, 4) and view.strides == (16, 4) and view.format == "f"


def test_byte_swapped_arrays_are_read_in_native_order():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    swapped = a.astype(a.dtype.newbyteorder("S"))
    assert np.array_equal(mtlinv.asarray(swapped).numpy(), a)
    w = np.ones((4, 3), np.float32)
    assert np.array_equal(np.asarray(mtlinv.gemv(swapped, w.astype(">f4"))), np.asarray(mtlinv.gemv(a, w)))


class _DLPackOnly:
    """A producer that speaks only DLPack, as some array libraries do (np.asarray makes it a 0-d object array)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class _CudaOnly:
    __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False), "version": 3}


def test_dlpack_and_cuda_producers():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert np.array_equal(mtlinv.asarray(_DLPackOnly(a)).numpy(), a)
    assert np.array_equal(mtlinv.asarray(_DLPackOnly(a), np.float16).numpy(), a.astype(np.float16))
    assert np.array_equal(np.asarray(mtlinv.gemv(_DLPackOnly(a), np.ones((3, 4), np.float32))), a @ np.ones((4, 3)))
    # Off the CUDA backend CUDA memory is refused; on it, taken without a copy, and this one's address 0 refused.
    refusal = ("is CUDA memory at address 0" if mtlinv.device_info()["backend"] == "cuda"
               else "is CUDA memory; mtlinv takes arrays in host memory")
    with pytest.raises(ValueError, match=r"gemv: x \(_CudaOnly\) " + refusal):
        mtlinv.gemv(_CudaOnly(), np.ones((3, 4), np.float32))


def test_byte_swapped_operands_of_every_op_are_read_in_native_order(rng):
    """qgemv's wq and tile_weights refused '>u4' and '>f2' while the other operands were converted."""
    w = rng.standard_normal((16, 64)).astype(np.float32)
    wq, scales, biases = mtlinv.quantize(w, group_size=32, bits=4)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    swapped = [a.astype(a.dtype.newbyteorder("S")) for a in (x, wq, scales, biases)]
    assert np.array_equal(np.asarray(mtlinv.qgemv(*swapped, group_size=32, bits=4)),
                          np.asarray(mtlinv.qgemv(x, wq, scales, biases, group_size=32, bits=4)))
    w16 = w.astype(np.float16)
    assert np.array_equal(mtlinv.tile_weights(w16.astype(">f2")), mtlinv.tile_weights(w16))


def test_lists_and_python_scalars_are_float32():
    """asarray refused them (DTypeError: float64) while the ops took them as float32; a float64 ndarray stays
    refused (test_unsupported_dtype_names_it)."""
    t = mtlinv.asarray([1.5, 2.5])
    assert t.dtype == np.float32 and np.array_equal(t.numpy(), np.array([1.5, 2.5], np.float32))
    t = mtlinv.asarray(1.5)
    assert t.dtype == np.float32 and t.shape == () and t.numpy() == np.float32(1.5)
    assert mtlinv.asarray([[1.0], [2.0]]).shape == (2, 1)
    assert np.array_equal(np.asarray(mtlinv.rms_norm([[1.0, 2.0]], [1.0, 1.0])),
                          np.asarray(mtlinv.rms_norm(np.array([[1.0, 2.0]], np.float32), np.ones(2, np.float32))))
    with pytest.raises(mtlinv.DTypeError, match="float64"):
        mtlinv.rms_norm(np.ones((1, 2)), np.ones(2))


@pytest.mark.parametrize("value, weight", [([1.0, 1e300], [1.0, 1e300]), (1e39, [1e39, 1.0]),
                                           ((-3.5e38,), (1.0, -3.5e38))])
def test_a_python_number_past_float32_is_refused(value, weight):
    """It became inf (NumPy's RuntimeWarning alone said so), in asarray and in an op's argument alike."""
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"asarray: .* is beyond float32's range"):
        mtlinv.asarray(value)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"rms_norm: weight: .* is beyond float32's range"):
        mtlinv.rms_norm(np.ones((1, 2), np.float32), weight)


def test_python_numbers_that_stay_in_float32_are_taken():
    """The control: inf and NaN as given, a value that rounds to float32's largest, one that rounds to 0."""
    taken = mtlinv.asarray([float("inf"), float("nan"), 3.4028235e38, 1e-50]).numpy()
    assert np.isinf(taken[0]) and np.isnan(taken[1]) and taken[2] == np.finfo(np.float32).max and taken[3] == 0
