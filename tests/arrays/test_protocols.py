"""The protocols themselves, both ways: DLPack (legacy and versioned capsules, max_version, copy, dl_device, the
read-only flag, strides), the buffer protocol (MLX's 'bfloat16' format; ml_dtypes' bfloat16 has none) and NumPy's
__array_interface__."""
import ctypes

import ml_dtypes
import numpy as np
import pytest

import mtlinv

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] == "cuda",
                                reason="host-memory protocols; CUDA memory: test_cuda_import.py")

BF16 = np.dtype(ml_dtypes.bfloat16)


def _capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule).decode()


def test_export_kind_follows_max_version():
    t = mtlinv.asarray(np.ones(3, np.float32))
    assert _capsule_name(t.__dlpack__()) == "dltensor"
    assert _capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert _capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert _capsule_name(t.__dlpack__(max_version=(2, 3))) == "dltensor_versioned"


def test_read_only_tensors_export_read_only_through_versioned_dlpack():
    torch = pytest.importorskip("torch")
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = mtlinv.asarray(a)
    assert t.readonly
    with pytest.raises(BufferError, match="legacy DLPack cannot mark read-only; ask with max_version"):
        t.__dlpack__()
    # NumPy reads the flag: its array is read-only too.
    view = np.from_dlpack(t)
    assert not view.flags.writeable and np.shares_memory(view, a)
    assert torch.from_dlpack(t).tolist() == [0, 1, 2, 3]  # torch takes it (PyTorch has no read-only tensors)


def test_read_only_flag_is_honoured_on_import():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False

    class Versioned:  # a producer that hands out NumPy's versioned capsule (read-only flag set)
        def __dlpack__(self, **kwargs):
            return a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    t = mtlinv.asarray(Versioned())
    assert t.readonly and not t.numpy().flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        t.numpy()[0] = 1


def test_copy_argument():
    t = mtlinv.asarray(np.zeros(3, np.float32))
    shared = np.from_dlpack(t, copy=False)
    copied = np.from_dlpack(t, copy=True)
    t.numpy()[0] = 5
    assert shared[0] == 5 and copied[0] == 0
    with pytest.raises(BufferError, match="copy must be True, False or None"):
        t.__dlpack__(copy="yes")


def test_dl_device_is_checked():
    t = mtlinv.asarray(np.zeros(3, np.float32))
    assert t.__dlpack_device__() == (1, 0)
    assert _capsule_name(t.__dlpack__(dl_device=(1, 0))) == "dltensor"
    with pytest.raises(BufferError, match=r"on DLPack device \(1, 0\), not \(2, 0\); mtlinv does not move memory"):
        t.__dlpack__(dl_device=(2, 0))


def test_capsules_free_the_tensor_whether_or_not_consumed():
    import gc
    import weakref
    a = np.zeros(3, np.float32)
    t = mtlinv.asarray(a)
    alive = weakref.ref(a)
    capsules = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    views = [np.from_dlpack(t), np.from_dlpack(t, copy=False)]
    del t, a, capsules
    gc.collect()
    assert alive() is not None  # the views still hold it
    del views
    gc.collect()
    assert alive() is None


def test_strided_and_negative_strided_dlpack_imports():
    """A strided export is read through its strides (and copied into contiguous memory, as a strided ndarray is)."""
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in (base[:, ::2], base.T, base[1:3, 2:5]):
        assert np.array_equal(mtlinv.asarray(view).numpy(), view.numpy())
    flipped = np.arange(6, dtype=np.float32)[::-1]
    assert np.array_equal(mtlinv.asarray(torch.from_numpy(flipped.copy())).numpy(), flipped)
    assert mtlinv.asarray(torch.zeros(0, 3)).shape == (0, 3)
    assert mtlinv.asarray(torch.tensor(2.5)).shape == ()


def test_a_consumed_capsule_is_refused():
    capsule = np.ones(2, np.float32).__dlpack__()

    class Again:
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return (1, 0)

    assert mtlinv.asarray(Again()).numpy().tolist() == [1, 1]
    with pytest.raises(ValueError, match="not a DLPack capsule \\(or one already consumed\\)"):
        mtlinv.asarray(Again())


def test_buffer_formats():
    """MLX exports bfloat16 buffers with format 'bfloat16', which PEP 3118 lacks; mtlinv reads it. ml_dtypes'
    bfloat16 has no buffer at all (NumPy refuses), nor has a bfloat16 Tensor: NumPy reads those through __array__."""
    mx = pytest.importorskip("mlx.core")
    x = mx.arange(6, dtype=mx.bfloat16).reshape(2, 3)
    view = memoryview(x)
    assert view.format == "bfloat16"
    t = mtlinv.asarray(view)
    assert t.dtype == BF16 and t.numpy().astype(np.float32).tolist() == [[0, 1, 2], [3, 4, 5]]
    t.numpy()[0, 0] = 7  # zero-copy: MLX's memory
    assert x[0, 0].item() == 7
    with pytest.raises(ValueError, match="cannot include dtype 'E' in a buffer"):
        memoryview(np.ones(2, BF16))
    bf = mtlinv.asarray(np.ones(2, BF16))
    with pytest.raises(BufferError, match="bfloat16 has no buffer-protocol format; use np.asarray"):
        memoryview(bf)
    assert np.asarray(bf).dtype == BF16 and np.shares_memory(np.asarray(bf), bf.numpy())
    assert memoryview(mtlinv.asarray(np.ones(2, np.float16))).format == "e"


def test_array_interface():
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    t = mtlinv.asarray(a)
    face = t.__array_interface__
    assert face["typestr"] == "<f2" and face["shape"] == (2, 3) and face["data"][0] == a.ctypes.data
    assert face["data"][1] is False

    class Interface:  # a producer with nothing but the array interface
        __array_interface__ = face

    assert np.shares_memory(mtlinv.asarray(Interface()).numpy(), a)
    with pytest.raises(AttributeError, match="no bfloat16 type; use DLPack or np.asarray"):
        mtlinv.asarray(np.ones(2, BF16)).__array_interface__


def test_non_arrays_are_named():
    with pytest.raises(ValueError, match=r"asarray \(object\) is not an array"):
        mtlinv.asarray(object())
    with pytest.raises(ValueError, match=r"gemv: x cannot be converted|gemv: x \(dict\) is not an array"):
        mtlinv.gemv({}, np.ones((2, 2), np.float32))


def test_device_memory_is_refused_off_cuda():
    """A DLPack producer on a GPU, given to the emulator (or Metal): refused by name, not read as host memory."""

    class OnGpu:
        def __dlpack__(self, **kwargs):
            raise AssertionError("the capsule must not be asked for")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(ValueError, match=r"gemv: x \(OnGpu\) is CUDA memory; mtlinv takes arrays in host memory on "
                                         r"this backend"):
        mtlinv.gemv(OnGpu(), np.ones((2, 2), np.float32))
