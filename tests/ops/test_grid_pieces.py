"""Grids in pieces (src/core/grid_pieces.h). CUDA launches at most 65535 threadgroups along y and z, where plans put
rows, heads, batch and key blocks, so a larger grid runs as several dispatches, each seeing its threadgroups'
places in the whole grid. Here every op runs with its grids cut into pieces of one threadgroup along y and z
(`_set_piece_limit`, on any backend; x is never cut) and must give the bits it gives in one dispatch: a kernel
that saw its position in the piece instead of in the grid would write the first piece's outputs over and over and
leave the rest unwritten. Each case first checks that its grid is larger than a piece, so that the test can fail."""
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from helpers import first_difference, random, same_bits
from mtlinv import _native

BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def _whole_grids_after():
    yield
    _native._set_piece_limit(None)


@pytest.fixture
def backend():
    name = mtlinv.device_info()["backend"]
    if name == "metal":
        pytest.skip("the Metal backend takes whole grids only; pieces are for CUDA's grid limits")
    return name


def largest_grid(plan):
    """The largest threadgroup count along y or z of the plan's launches."""
    return max(max(launch["threadgroups"][1:]) for launch in plan["launches"])


def run_whole_and_in_pieces(op):
    _native._set_piece_limit(None)
    whole = np.asarray(op())
    assert _native._set_piece_limit((1, 1)) is None
    pieces = np.asarray(op())
    _native._set_piece_limit(None)
    assert same_bits(whole, pieces), first_difference(whole, pieces)
    return whole


@pytest.mark.parametrize("rows, limit", [(40, 40), (100, 0)], ids=["canonical", "throughput"])
def test_gemv_in_pieces(rows, limit, backend, gpu_plans, rng):
    x, w = random(rng, (2, rows, 96), BF16), random(rng, (2, 80, 96), BF16)  # batch 2: grid z
    mtlinv.set_limit(limit)
    plan = _native.plan_gemv(rows=rows, k=96, n=80, dtype="bfloat16", batch=2)
    assert plan["canonical"] == (limit > 0) and largest_grid(plan) > 1
    out = run_whole_and_in_pieces(lambda: mtlinv.gemv(x, w))
    ref = np.einsum("bmk,bnk->bmn", x.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())


@pytest.mark.parametrize("rows, limit", [(40, 40), (100, 0)], ids=["canonical", "throughput"])
def test_qgemv_in_pieces(rows, limit, backend, gpu_plans, rng):
    x = random(rng, (rows, 128), BF16)
    wq, scales, biases = mtlinv.quantize(random(rng, (48, 128), BF16), group_size=64, bits=4)
    mtlinv.set_limit(limit)
    plan = _native.plan_qgemv(rows=rows, k=128, n=48, dtype="bfloat16", scale_dtype="bfloat16")
    assert plan["canonical"] == (limit > 0) and largest_grid(plan) > 1
    run_whole_and_in_pieces(lambda: mtlinv.qgemv(x, wq, scales, biases, group_size=64, bits=4))


@pytest.mark.parametrize("q_len, limit", [(1, 8), (5, 8), (5, 0), (40, 0)],
                         ids=["decode", "verify", "blocks", "prefill"])
@pytest.mark.parametrize("matrix_units", [False, True], ids=["scalar", "mma"])
def test_sdpa_in_pieces(q_len, limit, matrix_units, backend, request, rng):
    """The canonical passes (sdpa_mma or sdpa_blocks, then sdpa_combine), the throughput path's blocks and the
    flash kernel of a prefill, over several key chunks, kv heads and a batch of 2."""
    if matrix_units:
        request.getfixturevalue("gpu_plans")
    elif backend == "cuda":
        pytest.skip("CUDA plans for its matrix units; the scalar plans run on the emulator")
    mtlinv.set_limit(limit)
    kv_len = 700
    q = random(rng, (2, 4, q_len, 64), BF16)
    k, v = random(rng, (2, 2, kv_len, 64), BF16), random(rng, (2, 2, kv_len, 64), BF16)
    plan = _native.plan_sdpa(q_len=q_len, kv_len=kv_len, head_dim=64, q_heads=4, kv_heads=2, batch=2,
                             dtype="bfloat16", limit=limit)
    assert largest_grid(plan) > 1
    run_whole_and_in_pieces(lambda: mtlinv.sdpa(q, k, v))


def relayouts(rng):
    """The ops whose grids put rows or heads along y or z (rms_norm and the elementwise ops have theirs along x, which
    is never cut): RoPE into heads (grid (1, 3 heads, 4 rows)), heads back to rows ((2, 3, 4)) and the embedding
    lookup ((2, 4 rows, 1)), with the results they must give where that is cheap to say."""
    heads = random(rng, (4, 3, 64), BF16)
    table, ids = random(rng, (10, 96), BF16), np.array([3, 0, 9, 3], np.int32)
    return {
        "rope_heads": (lambda: mtlinv.rope_heads(heads, 7, 10000.0), None),
        "heads_to_rows": (lambda: mtlinv.heads_to_rows(heads.transpose(1, 0, 2).copy()), heads.reshape(4, 3 * 64)),
        "embedding": (lambda: mtlinv.embedding(table, ids), table[ids]),
    }


@pytest.mark.parametrize("name", ["rope_heads", "heads_to_rows", "embedding"])
def test_relayouts_in_pieces(name, backend, rng):
    op, expected = relayouts(rng)[name]
    out = run_whole_and_in_pieces(op)
    if expected is not None:
        assert same_bits(out, expected)


def test_a_grid_past_cuda_limits(backend, rng):
    """More than 65535 threadgroups along y (the embedding's rows) and z (rope_heads' rows): the CUDA backend
    launches them in pieces; elsewhere the grid is taken whole. Checked against numpy's result."""
    if backend != "cuda":
        pytest.skip("only CUDA limits grids to 65535 threadgroups along y and z; the emulator's pieces are tested "
                    "above with a lowered limit")
    rows = 70_000
    table = random(rng, (rows, 64), BF16)
    ids = rng.permutation(rows).astype(np.int32)
    assert same_bits(mtlinv.embedding(table, ids), table[ids])
    x = random(rng, (rows, 1, 32), BF16)
    out = np.asarray(mtlinv.rope_heads(x, 0, 10000.0))
    assert out.shape == (1, rows, 32)
    assert same_bits(out[0, :1], x[:1, 0])  # position 0: no rotation
    last = np.asarray(mtlinv.rope_heads(x[-1:], rows - 1, 10000.0))
    assert same_bits(out[:, -1:], last)  # the last row, computed in the last piece, equals its own call


def test_piece_limit_arguments():
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"limit must be 2 integers \(y, z\)"):
        _native._set_piece_limit((0, 1))
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"limit must be 2 integers \(y, z\)"):
        _native._set_piece_limit((1, 1, 1))
    assert _native._set_piece_limit((3, 2)) is None
    assert _native._set_piece_limit(None) == (3, 2)
