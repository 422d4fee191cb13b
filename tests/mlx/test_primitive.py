"""mtlinv._mlx_ext: mtlinv's gemv, qgemv and sdpa as MLX Primitives (mtlinv/mlx_ext), on MLX's CPU build.

What is checked, in bits: a primitive's result is mtlinv's own op's on the same arrays (every dtype, qgemv at every
bits and MLX group size, 32, 64 and 128); rows (queries) 1..limit each have the bits of the row alone, and limit 0 (the
throughput kernels) does not (the negative control); building a graph runs nothing until MLX evaluates it, and the
primitives compose with MLX's ops and with each other; bad arguments raise mtlinv's errors as the graph is built.
The primitives' GPU evaluation (Metal) runs only on Apple GPUs: tests/compile/test_macos_build.py compiles it for
macOS."""
import numpy as np
import pytest

import mtlinv

mx = pytest.importorskip("mlx.core")

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] == "cuda",
                                reason="MLX's CPU arrays are host memory; CUDA memory is not MLX's")

DTYPES = ["float32", "float16", "bfloat16"]
LIMIT = 8


def normal(shape, dtype, seed):
    return mx.random.normal(shape, key=mx.random.key(seed)).astype(getattr(mx, dtype))


def bits(a):
    """An MLX array's or an mtlinv Tensor's bits, bfloat16 widened to float32 (exact) for NumPy."""
    if isinstance(a, mx.array):
        return np.array(a.astype(mx.float32) if a.dtype == mx.bfloat16 else a)
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def same_bits(a, b) -> bool:
    a, b = bits(a), bits(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def host(a):
    return memoryview(a)  # an evaluated MLX array's memory, as mtlinv reads it (format 'bfloat16' included)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
def test_gemv_is_mtlinvs_gemv(mlx_ext, dtype, bias):
    w, x = normal((96, 256), dtype, 1), normal((LIMIT, 256), dtype, 2)
    b = normal((96,), dtype, 3) if bias else None
    for m in (1, 3, LIMIT):
        got = mlx_ext.gemv(x[:m], w, b, limit=LIMIT)
        with mtlinv.batch_invariant(LIMIT):
            expected = mtlinv.gemv(host(x[:m]), host(w), host(b) if bias else None)
        assert same_bits(got, expected), m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits_, group_size", [(2, 64), (3, 64), (4, 64), (5, 64), (6, 64), (8, 64), (4, 32),
                                               (4, 128)])
def test_qgemv_is_mtlinvs_qgemv_on_mlx_quantize(mlx_ext, dtype, bits_, group_size):
    """MLX's own quantization (mx.quantize: wq, scales, biases) is what the primitive reads."""
    wq, scales, biases = mx.quantize(normal((64, 256), dtype, 4), group_size=group_size, bits=bits_)
    x, b = normal((LIMIT, 256), dtype, 5), normal((64,), dtype, 6)
    for m in (1, LIMIT):
        got = mlx_ext.qgemv(x[:m], wq, scales, biases, bias=b, group_size=group_size, bits=bits_, limit=LIMIT)
        with mtlinv.batch_invariant(LIMIT):
            expected = mtlinv.qgemv(host(x[:m]), host(wq), host(scales), host(biases), bias=host(b),
                                    group_size=group_size, bits=bits_)
        assert same_bits(got, expected), m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_sdpa_is_mtlinvs_sdpa(mlx_ext, dtype, head_dim, causal):
    k, v = normal((1, 2, 40, head_dim), dtype, 7), normal((1, 2, 40, head_dim), dtype, 8)
    for q_len, scale in ((1, None), (5, 0.3), (LIMIT, None)):
        q = normal((1, 4, q_len, head_dim), dtype, 9)
        got = mlx_ext.sdpa(q, k, v, scale=scale, causal=causal, limit=LIMIT)
        with mtlinv.batch_invariant(LIMIT):
            expected = mtlinv.sdpa(host(q), host(k), host(v), scale=scale, causal=causal)
        assert same_bits(got, expected), q_len


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["gemv", "qgemv"])
def test_rows_are_invariant_to_limit_and_not_at_limit_zero(mlx_ext, dtype, op):
    """Each of M <= limit rows has the bits of the row alone; at limit 0, M=8 takes the throughput kernel, whose
    other reduction order shows in the bits (the negative control: 16-bit outputs round most float32-level
    differences away, hence tests/ops/test_gemv.py's 4096-wide case)."""
    n = 512 if dtype == "float32" else 4096
    w, x = normal((n, 4096), dtype, 10), normal((LIMIT, 4096), dtype, 11)
    if op == "gemv":
        def call(rows, limit):
            return mlx_ext.gemv(rows, w, limit=limit)
    else:
        wq, scales, biases = mx.quantize(w, group_size=64, bits=4)

        def call(rows, limit):
            return mlx_ext.qgemv(rows, wq, scales, biases, group_size=64, bits=4, limit=limit)
    alone = mx.concatenate([call(x[r:r + 1], LIMIT) for r in range(LIMIT)])
    for m in range(1, LIMIT + 1):
        assert same_bits(call(x[:m], LIMIT), alone[:m]), m
    assert not same_bits(call(x, 0), alone), "the throughput kernel matched: the control is void"


def test_sdpa_queries_are_invariant_and_not_at_limit_zero(mlx_ext):
    """Query i of a causal block has the bits of a one-query call over the keys up to its position; limit 0 does
    not (tests/ops/test_sdpa.py's control case)."""
    kv_len, q_len = 1000, LIMIT
    k, v = normal((1, 2, kv_len, 64), "float32", 12), normal((1, 2, kv_len, 64), "float32", 13)
    q = normal((1, 4, q_len, 64), "float32", 14)
    block = mlx_ext.sdpa(q, k, v, limit=LIMIT)
    for i in range(q_len):
        end = kv_len - q_len + i + 1
        alone = mlx_ext.sdpa(q[:, :, i:i + 1], k[:, :, :end], v[:, :, :end], limit=LIMIT)
        assert same_bits(block[:, :, i:i + 1], alone), i
    assert not same_bits(mlx_ext.sdpa(q, k, v, limit=0), block), "the throughput path matched: the control is void"


def test_building_the_graph_runs_nothing_until_mlx_evaluates_it(mlx_ext):
    w1, w2, x = normal((64, 128), "float32", 15), normal((32, 64), "float32", 16), normal((3, 128), "float32", 17)
    mx.eval(w1, w2, x)
    before = mlx_ext.plans_run()
    h = mlx_ext.gemv(x, w1, limit=LIMIT)
    y = mx.exp(mlx_ext.gemv(mx.tanh(h), w2, limit=LIMIT)) * 2  # primitives among MLX's ops, one into the other
    assert isinstance(y, mx.array) and y.shape == (3, 32) and y.dtype == mx.float32
    assert mlx_ext.plans_run() == before, "nothing ran while the graph was built"
    mx.eval(y)
    assert mlx_ext.plans_run() == before + 2
    with mtlinv.batch_invariant(LIMIT):
        h_ref = mx.array(np.asarray(mtlinv.gemv(host(x), host(w1))))
        expected = mx.exp(mx.array(np.asarray(mtlinv.gemv(host(mx.tanh(h_ref)), host(w2))))) * 2
    assert same_bits(y, expected)


def test_strided_operands_are_read_as_mlx_holds_them(mlx_ext):
    """A transposed or sliced MLX view is made contiguous by MLX inside the graph: the result is the op's on the
    view's values."""
    w = normal((128, 64), "float16", 18)
    x = normal((6, 128), "float16", 19)[::2]
    got = mlx_ext.gemv(x, w.T, limit=LIMIT)
    with mtlinv.batch_invariant(LIMIT):
        expected = mtlinv.gemv(host(mx.contiguous(x)), host(mx.contiguous(w.T)))
    assert same_bits(got, expected)


def test_bad_arguments_raise_mtlinvs_errors_as_the_graph_is_built(mlx_ext):
    x, w = normal((2, 64), "float32", 20), normal((8, 64), "float32", 21)
    with pytest.raises(mtlinv.DTypeError, match="gemv: x has dtype float64"):
        mlx_ext.gemv(x.astype(mx.float64), w, limit=LIMIT)
    with pytest.raises(mtlinv.DTypeError, match="gemv: x is float32 but w is float16"):
        mlx_ext.gemv(x, w.astype(mx.float16), limit=LIMIT)
    with pytest.raises(mtlinv.InvalidArgumentError, match="gemv: x has K=32 but w has K=64"):
        mlx_ext.gemv(x[:, :32], w, limit=LIMIT)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"gemv: w must be \[N, K\].*got shape \[1, 8, 64\]"):
        mlx_ext.gemv(x, w[None], limit=LIMIT)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"limit must be in \[0, 2\^30\], got -1"):
        mlx_ext.gemv(x, w, limit=-1)
    wq, scales, biases = mx.quantize(normal((64, 128), "float32", 22), group_size=64, bits=4)
    with pytest.raises(mtlinv.InvalidArgumentError, match="bits"):
        mlx_ext.qgemv(normal((1, 128), "float32", 23), wq, scales, biases, group_size=64, bits=7, limit=LIMIT)
    q, k = normal((1, 2, 1, 48), "float32", 24), normal((1, 1, 4, 48), "float32", 25)
    with pytest.raises(mtlinv.InvalidArgumentError, match="sdpa: head dim D=48 is not supported"):
        mlx_ext.sdpa(q, k, k, limit=LIMIT)
