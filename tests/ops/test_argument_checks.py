"""Bad scalar arguments and out-of-range sizes: each gets an error naming the op, the argument and the value, never
a silent conversion (2.9 taken as 2, None as False), a wrapped index or a crash."""
import os

import numpy as np
import pytest

import mtlinv

F32 = np.float32


def huge_zeros(shape, dtype=np.float16):
    """A zero array of more than 2^32 elements, allocated lazily (calloc): the checks refuse it before any page of it
    is touched. Skipped where the machine will not reserve that much address space, and off the emulator, whose
    Tensors wrap such an array where a GPU's would copy its 8 GB (the checks are the core's, the same everywhere)."""
    if mtlinv.device_info()["backend"] != "emu":
        pytest.skip("the array would be copied to the device; the core's checks run on the emulator")
    try:
        return np.zeros(shape, dtype)
    except MemoryError:
        if os.environ.get("CI"):  # CI's machines reserve it (every run so far): a skip there would hide the tests
            pytest.fail(f"CI: cannot reserve {np.prod(shape) * np.dtype(dtype).itemsize} bytes of address space")
        pytest.skip(f"cannot reserve {np.prod(shape) * np.dtype(dtype).itemsize} bytes of address space")


@pytest.mark.parametrize("value", [2.9, None, "2", True, np.float64(2.0)])
def test_write_heads_offsets_must_be_ints(value):
    x, cache = np.ones((1, 2, 8), F32), mtlinv.asarray(np.zeros((2, 4, 8), F32))
    with pytest.raises(ValueError, match=rf"write_heads: seq_offset must be an int, got {type(value).__name__}"):
        mtlinv.write_heads(x, cache, value)
    with pytest.raises(ValueError, match=rf"write_heads: start_pos must be an int, got {type(value).__name__}"):
        mtlinv.write_heads(x, cache, 0, value)
    with pytest.raises(ValueError, match=rf"rope_heads: start_pos must be an int, got {type(value).__name__}"):
        mtlinv.rope_heads(x, value)
    assert not np.asarray(cache).any()


def test_write_heads_offsets_that_would_wrap():
    """seq_offset + L past 2^63 once wrapped to a negative sum that passed the capacity check, and the kernel wrote
    far outside the cache (a segfault)."""
    x, cache = np.ones((2, 2, 8), F32), mtlinv.asarray(np.zeros((2, 4, 8), F32))
    with pytest.raises(ValueError, match=r"write_heads: seq_offset must be in \[0, 4611686018427387904\], got 9223"):
        mtlinv.write_heads(x, cache, 2**63 - 1)
    with pytest.raises(ValueError, match="write_heads: seq_offset=4611686018427387903 with L=2 rows does not fit"):
        mtlinv.write_heads(x, cache, 2**62 - 1)
    with pytest.raises(ValueError, match="write_heads: start_pos=4611686018427387904 is out of range"):
        mtlinv.write_heads(x, cache, 0, 2**62)
    with pytest.raises(ValueError, match=r"write_heads: start_pos \+ L=4294967297 is out of range"):
        mtlinv.write_heads(x, cache, 0, 2**32 - 1)
    with pytest.raises(ValueError, match=r"rope_heads: start_pos \+ L=4294967297 is out of range"):
        mtlinv.rope_heads(x, 2**32 - 1)  # named as the op called, not the op it writes through
    assert not np.asarray(cache).any()


@pytest.mark.parametrize("value", [None, "no", 1, 0.0])
def test_flags_must_be_bools(value):
    with pytest.raises(ValueError, match=rf"gemv: transpose must be True or False, got {type(value).__name__}"):
        mtlinv.gemv(np.ones((1, 4), F32), np.ones((4, 4), F32), transpose=value)
    q, kv = np.ones((1, 1, 3, 64), F32), np.ones((1, 1, 2, 64), F32)
    with pytest.raises(ValueError, match=rf"sdpa: causal must be True or False, got {type(value).__name__}"):
        mtlinv.sdpa(q, kv, kv, causal=value)
    with pytest.raises(ValueError, match=rf"write_heads: rotate must be True or False, got {type(value).__name__}"):
        mtlinv.write_heads(np.ones((1, 1, 8), F32), mtlinv.asarray(np.zeros((1, 4, 8), F32)), 0, 0, value)


@pytest.mark.parametrize("value", ["2", None, True])
def test_reals_must_be_numbers(value):
    x = np.ones((1, 8), F32)
    with pytest.raises(ValueError, match=rf"rms_norm: eps must be a real number, got {type(value).__name__}"):
        mtlinv.rms_norm(x, np.ones(8, F32), value)
    q = np.ones((1, 1, 1, 64), F32)
    if value is not None:  # scale=None is the default scale
        with pytest.raises(ValueError, match=rf"sdpa: scale must be a real number, got {type(value).__name__}"):
            mtlinv.sdpa(q, q, q, scale=value)
    with pytest.raises(ValueError, match=rf"rope_heads: base must be a real number, got {type(value).__name__}"):
        mtlinv.rope_heads(np.ones((1, 1, 8), F32), 0, value)


def test_reals_are_checked_before_narrowing_to_float32():
    """eps and base reach the core as doubles: 1e39 is named as given (not as inf), and -1e-50 is refused (as float32
    it would round to -0.0 and pass)."""
    x = np.ones((1, 8), F32)
    with pytest.raises(ValueError, match=r"rms_norm: eps must be >= 0 and finite within float32, got 1e\+39"):
        mtlinv.rms_norm(x, np.ones(8, F32), 1e39)
    with pytest.raises(ValueError, match=r"rms_norm: eps must be >= 0 and finite within float32, got -1e-50"):
        mtlinv.rms_norm(x, np.ones(8, F32), -1e-50)
    with pytest.raises(ValueError, match=r"rope_heads: base=1e\+39 is outside \[1, 3.4028234663852886e\+38\]"):
        mtlinv.rope_heads(np.ones((1, 1, 8), F32), 0, 1e39)


def test_reals_beyond_a_double():
    with pytest.raises(ValueError, match="rms_norm: eps=1000000000000000000000000000000000000000"):
        mtlinv.rms_norm(np.ones((1, 8), F32), np.ones(8, F32), 10**400)


def test_sdpa_scale_whose_log2_scaling_overflows():
    """The kernels take scale * log2(e) as a float32: a finite scale of 2.4e38 made it inf and every output NaN."""
    rng = np.random.default_rng(0)
    q, k = rng.random((1, 1, 1, 64), F32), rng.random((1, 1, 4, 64), F32)
    for scale in (3e38, -2.4e38, 1e300):
        with pytest.raises(ValueError, match="sdpa: scale must be finite with scale"):
            mtlinv.sdpa(q, k, k, scale=scale)
    out = np.asarray(mtlinv.sdpa(q, k, k, scale=1e37))  # the largest scales that fit still run
    assert np.isfinite(out).all()


def test_reshape_takes_int_dimensions():
    t = mtlinv.asarray(np.arange(4, dtype=F32))
    with pytest.raises(ValueError, match="reshape: a dimension must be an int, got float 2.5"):
        t.reshape(2.5, 2)
    assert t.reshape(np.int64(2), 2).shape == (2, 2)


@pytest.mark.parametrize("use", [
    lambda t: np.asarray(t),
    lambda t: t.numpy(),
    lambda t: memoryview(t),
    lambda t: t.__dlpack__(),
    lambda t: mtlinv.add(t, np.float32(1)),
    lambda t: mtlinv.gemv(t.reshape(1), np.ones((2, 1), F32)),
    lambda t: mtlinv.write_heads(np.ones((1, 1, 2), F32), t, 0),
    lambda t: mtlinv.embedding(np.ones((4, 2), F32), t),
], ids=["asarray", "numpy", "memoryview", "dlpack", "add", "gemv", "write_heads_dst", "embedding_ids"])
def test_a_tensor_without_memory_is_refused(use):
    """Tensor.__new__ makes a Tensor with no memory (shape (), one element); using it once crashed the process."""
    t = mtlinv.Tensor.__new__(mtlinv.Tensor)
    with pytest.raises(ValueError, match="this Tensor has no memory"):
        use(t)


@pytest.mark.parametrize("kwargs, message", [
    (dict(group_size=64, bits=4.0), "bits must be an int, got float"),
    (dict(group_size=64.0, bits=4), "group_size must be an int, got float"),
    (dict(group_size=64, bits=True), "bits must be an int, got bool"),
])
def test_quant_params_must_be_ints(kwargs, message):
    w = np.ones((2, 64), F32)
    with pytest.raises(TypeError, match=message):
        mtlinv.quantize(w, **kwargs)


def test_gemv_batch_beyond_uint32():
    """A batched weight of 2^32 + 1 entries: its batch count once went to the kernels as 1, and only the first
    entry was computed."""
    w = huge_zeros((2**32 + 1, 1, 1))
    with pytest.raises(ValueError, match="gemv: B=4294967297 is out of range"):
        mtlinv.gemv(np.ones((1, 1), np.float16), w)


def test_relayout_dims_beyond_uint32():
    x = huge_zeros((2**32 + 1, 1, 1))
    with pytest.raises(ValueError, match="heads_to_rows: H=4294967297 is out of range"):
        mtlinv.heads_to_rows(x)
    dst = mtlinv.asarray(huge_zeros((1, 2**32 + 1, 1)))
    with pytest.raises(ValueError, match="write_heads: C=4294967297 is out of range"):
        mtlinv.write_heads(np.ones((1, 1, 1), np.float16), dst, 2**32)


def test_reduced_extents_beyond_int32():
    """The kernels step through K (and rms_norm's columns) in uint32 counters that wrap within a few thousand of
    2^32: K = 2^32 - 1 gave gemv_kn a zero chunk (y = 0), and gemv_nk_mma and rms_norm never ended on an H200."""
    k = 2**31
    x = huge_zeros((k,))
    with pytest.raises(ValueError, match=r"gemv: K=2147483648 is out of range for the kernels \(at most 2\^31 - 1\)"):
        mtlinv.gemv(x, huge_zeros((1, k)))
    with pytest.raises(ValueError, match=r"gemv: K=2147483648 is out of range"):
        mtlinv.gemv(x, huge_zeros((k, 1)), transpose=False)
    with pytest.raises(ValueError, match=r"rms_norm: cols=2147483648 is out of range"):
        mtlinv.rms_norm(x, x)


def sparse_float16(path, shape):
    """A float16 array of `shape` (hundreds of GiB) as a sparse file mapped read-only: the checks refuse it before
    any page is touched. Emulator only, as huge_zeros."""
    if mtlinv.device_info()["backend"] != "emu":
        pytest.skip("the array would be copied to the device; the core's checks run on the emulator")
    with open(path, "wb") as f:
        f.truncate(int(np.prod(shape)) * 2)
    return np.memmap(path, np.float16, "r", shape=shape)


def test_sdpa_combine_grid_beyond_uint32(tmp_path):
    """sdpa_combine's grid holds Lq * ceil(D / 32) threadgroups along x, which wrapped past 2^32 (Lq = 2^30 at
    D = 128, a q of 256 GiB)."""
    q = sparse_float16(tmp_path / "q.bin", (1, 1, 2**30, 128))
    kv = np.zeros((1, 1, 4, 128), np.float16)
    with pytest.raises(ValueError, match=r"sdpa: Lq\*ceil\(D/32\)=4294967296 is out of range for the kernels"):
        mtlinv.sdpa(q, kv, kv, causal=False)


def test_sdpa_keys_beyond_int32(tmp_path):
    """Attention walks its keys in uint32 too: a chunk's first key plus a quarter of it wrapped past 2^32 and skipped
    the last keys. A cache of 2^31 keys is refused."""
    k = sparse_float16(tmp_path / "k.bin", (1, 2**31, 64))
    with pytest.raises(ValueError, match=r"sdpa: C=2147483648 is out of range for the kernels \(at most 2\^31 - 1\)"):
        mtlinv.sdpa(np.zeros((1, 1, 64), np.float16), k, k, causal=False)


def test_sdpa_plans_refuse_what_would_divide_by_zero():
    """plan_sdpa (introspection) is called without the op's checks: no heads or no batch raised SIGFPE."""
    for kwargs in (dict(kv_heads=0), dict(batch=0, limit=0), dict(q_heads=3, kv_heads=2)):
        with pytest.raises(ValueError, match=r"sdpa: a plan needs B, Lq, Hkv >= 1 and Hq a positive multiple of Hkv"):
            mtlinv._native.plan_sdpa(q_len=2, kv_len=100, **kwargs)
    with pytest.raises(ValueError, match=r"sdpa: k has Hkv=0 heads; attention needs at least one"):
        mtlinv.sdpa(np.zeros((4, 1, 64), np.float16), np.zeros((0, 8, 64), np.float16),
                    np.zeros((0, 8, 64), np.float16))


def test_matmul_errors_name_its_own_arguments():
    """matmul(a, b) is gemv(a, b, transpose=False); its errors speak of matmul, a and b, gemv's of x and w."""
    with pytest.raises(ValueError, match=r"matmul: a has K=3 but b has K=4 \(a \[2, 3\], b \[4, 5\], b layout"):
        mtlinv.matmul(np.ones((2, 3), F32), np.ones((4, 5), F32))
    with pytest.raises(TypeError, match="matmul: a is float32 but b is float16"):
        mtlinv.matmul(np.ones((2, 3), F32), np.ones((3, 5), np.float16))
    with pytest.raises(ValueError, match=r"gemv: x has K=3 but w has K=5 \(x \[2, 3\], w \[4, 5\]"):
        mtlinv.gemv(np.ones((2, 3), F32), np.ones((4, 5), F32))
