"""What a Tensor offers as an array (shape, dtype, nbytes, ndim, size, device, repr, numpy()), and what it refuses
with a TypeError that says where to go instead (indexing, arithmetic, iteration)."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv


def test_array_attributes():
    t = mtlinv.asarray(np.zeros((2, 3, 4), ml_dtypes.bfloat16))
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.size == 24 and t.nbytes == 48
    assert t.dtype == np.dtype(ml_dtypes.bfloat16)
    assert t.device == mtlinv.device_info()["backend"]
    assert np.array_equal(t.numpy(), np.zeros((2, 3, 4), ml_dtypes.bfloat16))


def test_repr_is_readable():
    device = mtlinv.device_info()["backend"]
    t = mtlinv.asarray(np.zeros((4, 4), np.float16))
    assert repr(t) == f"mtlinv.Tensor(shape=(4, 4), dtype=float16, device='{device}')"
    a = np.zeros(2, ml_dtypes.bfloat16)
    a.flags.writeable = False
    # A read-only array stays read-only where the Tensor shares its memory; a device without host-visible memory
    # (CUDA) holds a copy, which is writable.
    shares = device != "cuda"
    flag = ", read-only" if shares else ""
    assert repr(mtlinv.asarray(a)) == f"mtlinv.Tensor(shape=(2,), dtype=bfloat16, device='{device}'{flag})"


@pytest.mark.parametrize("use", [
    lambda t: t[0], lambda t: t.__setitem__(0, 1), lambda t: list(t), lambda t: t + 1, lambda t: 1 + t,
    lambda t: t - t, lambda t: t * 2, lambda t: 2 * t, lambda t: t / 2, lambda t: t @ t, lambda t: 1 - t,
], ids=["index", "setitem", "iter", "add", "radd", "sub", "mul", "rmul", "div", "matmul", "rsub"])
def test_what_a_tensor_does_not_do_is_said(use):
    t = mtlinv.asarray(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match=r"mtlinv.Tensor has no (indexing|iteration|arithmetic): use t.numpy\(\)"):
        use(t)


def test_numpy_does_arithmetic_on_a_tensor():
    """With an ndarray on the left, NumPy reads the Tensor as an array (zero-copy) and computes itself."""
    t = mtlinv.asarray(np.ones(2, np.float32))
    assert (np.ones(2, np.float32) + t).tolist() == [2, 2]
