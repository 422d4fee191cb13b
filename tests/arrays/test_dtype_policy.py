"""One dtype policy for every route: an array's dtype is kept, never narrowed; what the kernels do not take is
refused with the same DTypeError, naming the dtype and how to convert it, whichever library it comes from.
(Python's own lists and numbers are the one exception: float64 there becomes float32, test_tensor.py.)"""
import numpy as np
import pytest

import mtlinv


def _float64_arrays():
    """(library, a float64 array of it) for each installed library: what NumPy's float64 is refused as."""
    arrays = [("numpy", np.ones((2, 4)))]
    try:
        import torch
        arrays.append(("torch", torch.ones(2, 4, dtype=torch.float64)))
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        arrays.append(("jax", jnp.ones((2, 4), jnp.float64)))
    except ImportError:
        pass
    arrays.append(("memoryview", memoryview(np.ones((2, 4)))))
    return arrays


FLOAT64 = _float64_arrays()


@pytest.mark.parametrize("name, array", FLOAT64, ids=[n for n, _ in FLOAT64])
def test_float64_is_refused_from_every_library(name, array):
    with pytest.raises(mtlinv.DTypeError, match=r"asarray has dtype float64.*expected one of float32.*convert it "
                                                r"first .*mtlinv converts no array's dtype by itself"):
        mtlinv.asarray(array)
    with pytest.raises(mtlinv.DTypeError, match=r"gemv: x has dtype float64.*expected float32, float16 or bfloat16; "
                                                r"convert it first"):
        mtlinv.gemv(array, np.ones((3, 4), np.float32))


def test_the_error_names_the_library_dtype():
    torch = pytest.importorskip("torch")
    with pytest.raises(mtlinv.DTypeError, match=r"\(Tensor of dtype torch.float64\)"):
        mtlinv.asarray(torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("make", ["int64", "bool", "complex64"])
def test_other_dtypes_are_refused_through_dlpack_as_from_numpy(make):
    torch = pytest.importorskip("torch")
    t = getattr(torch, make)
    with pytest.raises(mtlinv.DTypeError, match=f"gemv: x has dtype {np.dtype(make)}"):
        mtlinv.gemv(torch.ones(2, 4, dtype=t), np.ones((3, 4), np.float32))
    with pytest.raises(mtlinv.DTypeError, match=f"gemv: x has dtype {np.dtype(make)}"):
        mtlinv.gemv(np.ones((2, 4), make), np.ones((3, 4), np.float32))


def test_integer_dtypes_the_ops_take_are_kept():
    """uint32 (packed quantized weights) and int32 (token ids) arrive as they are from any library."""
    torch = pytest.importorskip("torch")
    assert mtlinv.asarray(torch.arange(3, dtype=torch.int32)).dtype == np.int32
    assert mtlinv.asarray(torch.zeros(3, dtype=torch.uint32)).dtype == np.uint32


def test_an_explicit_dtype_converts():
    """asarray(x, dtype) is the user asking for a conversion: it is done, from any library."""
    torch = pytest.importorskip("torch")
    t = mtlinv.asarray(torch.ones(2, dtype=torch.float64), np.float32)
    assert t.dtype == np.float32 and t.numpy().tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype, message", [(np.float64, r"asarray: dtype=float64 is not a dtype of mtlinv; expected "
                                                         r"one of float32"),
                                            ("no-such-type", r"asarray: dtype='no-such-type' is not a dtype")])
def test_an_explicit_dtype_the_kernels_do_not_take_is_named(dtype, message):
    """The dtype asked for is the argument at fault, not the array's own."""
    with pytest.raises(mtlinv.DTypeError, match=message):
        mtlinv.asarray(np.ones(3, np.float32), dtype)


@pytest.mark.parametrize("value, read_as", [([1, 2], "int64"), ((1, 2), "int64"), (3, "int64")])
def test_python_ints_are_refused_as_python_values(value, read_as):
    """A Python list of ints reads as int64, which no float argument takes; the message says what to give instead
    of how to convert an array."""
    with pytest.raises(mtlinv.DTypeError, match=rf"rms_norm: weight: a Python {type(value).__name__} that NumPy reads "
                                                rf"as {read_as}; expected .*give float values") as caught:
        mtlinv.rms_norm(np.ones((1, 2), np.float32), value)
    assert "astype" not in str(caught.value)
