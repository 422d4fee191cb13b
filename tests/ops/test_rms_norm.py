import numpy as np
import pytest

import mtlinv
from helpers import DTYPE_IDS, FLOAT_DTYPES, RTOL, random, rows_invariant, same_bits


def reference(x, w, eps):
    x64 = np.asarray(x, dtype=np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps) * np.asarray(w, dtype=np.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 64), (4, 576), (2, 4097)])
def test_accuracy(dtype, shape, rng):
    x, w = random(rng, shape, dtype), random(rng, shape[-1:], dtype)
    y = np.asarray(mtlinv.rms_norm(x, w, 1e-5), dtype=np.float64)
    ref = reference(x, w, 1e-5)
    np.testing.assert_allclose(y, ref, rtol=RTOL[np.dtype(dtype)], atol=RTOL[np.dtype(dtype)] * np.abs(ref).max())


@pytest.mark.parametrize("plans", ["emulator", "gpu"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_rows_are_invariant(dtype, plans, rng, request):
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")  # 256-thread rows: the two-level simdgroup reduction
    x, w = random(rng, (16, 1000), dtype), random(rng, (1000,), dtype)
    x[3] = 1e30 if dtype == np.float32 else 6e4
    x[7, 5] = np.nan
    # Every M: rms_norm has no throughput path, so each call must give every row its bits.
    rows_invariant(lambda a: mtlinv.rms_norm(a, w, 1e-6), (x,))


def test_nan_propagates(rng):
    x = random(rng, (2, 8), np.float32)
    x[0, 3] = np.nan
    y = np.asarray(mtlinv.rms_norm(x, np.ones(8, np.float32), 1e-6))
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()


def test_batched_leading_dims(rng):
    x, w = random(rng, (2, 3, 32), np.float32), random(rng, (32,), np.float32)
    y = mtlinv.rms_norm(x, w)
    assert y.shape == (2, 3, 32)
    assert same_bits(np.asarray(y).reshape(6, 32), mtlinv.rms_norm(x.reshape(6, 32), w))


def test_bad_inputs_name_the_values(rng):
    x = random(rng, (2, 8), np.float32)
    with pytest.raises(ValueError, match=r"weight has shape \[7\].*x has shape \[2, 8\]"):
        mtlinv.rms_norm(x, np.ones(7, np.float32))
    with pytest.raises(TypeError, match="x is float32 but weight is float16"):
        mtlinv.rms_norm(x, np.ones(8, np.float16))
    with pytest.raises(TypeError, match="int32"):
        mtlinv.rms_norm(x.astype(np.int32), np.ones(8, np.int32))
    with pytest.raises(ValueError, match="eps"):
        mtlinv.rms_norm(x, np.ones(8, np.float32), -1.0)


@pytest.mark.parametrize("plans", ["emulator", "gpu"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (4, 576), (2, 4097), (2, 3, 64)])
def test_add_rms_norm_is_add_then_rms_norm(dtype, shape, plans, rng, request):
    """The fused residual add and norm give the bits of the two ops, the sum included."""
    if plans == "gpu":
        request.getfixturevalue("gpu_plans")
    x, r, w = random(rng, shape, dtype), random(rng, shape, dtype), random(rng, shape[-1:], dtype)
    s, y = mtlinv.add_rms_norm(x, r, w, 1e-5)
    expected_s = mtlinv.add(x, r)
    assert same_bits(s, expected_s)
    assert same_bits(y, mtlinv.rms_norm(expected_s, w, 1e-5))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_add_rms_norm_rows_invariant(dtype, rng, gpu_plans):
    x, r, w = random(rng, (16, 1000), dtype), random(rng, (16, 1000), dtype), random(rng, (1000,), dtype)
    rows_invariant(lambda a, b: np.concatenate([np.asarray(t) for t in mtlinv.add_rms_norm(a, b, w, 1e-6)], -1), (x, r))


def test_add_rms_norm_bad_inputs(rng):
    x, w = random(rng, (2, 8), np.float32), np.ones(8, np.float32)
    with pytest.raises(ValueError, match=r"add_rms_norm: shapes differ: x \[2, 8\] and residual \[1, 8\]"):
        mtlinv.add_rms_norm(x, x[:1], w)
    with pytest.raises(TypeError, match="add_rms_norm: x is float32 but residual is float16"):
        mtlinv.add_rms_norm(x, x.astype(np.float16), w)
    with pytest.raises(ValueError, match=r"add_rms_norm: weight has shape \[7\]"):
        mtlinv.add_rms_norm(x, x, w[:7])
    with pytest.raises(ValueError, match="add_rms_norm: eps must be >= 0"):
        mtlinv.add_rms_norm(x, x, w, -1.0)
    s, y = mtlinv.add_rms_norm(np.zeros((0, 8), np.float32), np.zeros((0, 8), np.float32), w)
    assert np.asarray(s).shape == np.asarray(y).shape == (0, 8)
