"""sdpa_mma, the canonical attention pass on the matrix units that plans pick for 16-bit q, k, v with head dims 64
and 128 on devices with matrix units (CUDA): on the emulator the gpu_plans fixture turns the capability on and the
kernel runs on metal/mma.h's fallback, so its tiles, partial steps and merge are checked in CI; with
MTLINV_DEVICE=cuda the same tests (and all of test_sdpa.py) run on the tensor cores."""
import struct

import ml_dtypes
import numpy as np
import pytest

import mtlinv
from helpers import RTOL, first_difference, same_bits
from test_sdpa import assert_block_matches, chunk_keys, chunking, misaligned, qkv, reference, singles

sdpa = mtlinv.sdpa
MMA_DTYPES = [np.float16, ml_dtypes.bfloat16]
MMA_IDS = ["f16", "bf16"]


def pass_one(q_len, head_dim, dtype, limit, q_heads=32, kv_heads=8, aligned=True):
    plan = mtlinv._native.plan_sdpa(q_len=q_len, kv_len=4096, head_dim=head_dim, q_heads=q_heads, kv_heads=kv_heads,
                                    dtype=np.dtype(dtype).name, limit=limit, aligned=aligned)
    return plan["launches"][0]


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("head_dim", [64, 128])
def test_verify_blocks_equal_single_queries(head_dim, dtype, gpu_plans, rng):
    """Every query of causal blocks of Lq = 1..8 with GQA 4 (tiles of 16 of the 32 queries of a kv head) equals the
    single-query call over the first p + 1 keys: kv_len inside a step, at a chunk boundary, past it."""
    mtlinv.set_limit(8)
    assert pass_one(8, head_dim, dtype, 8)["kernel"].startswith("sdpa_mma_")
    s = chunk_keys(head_dim, dtype)
    kv_lens = [13, s - 3, s + 2, 2 * s + 37]
    q, k, v = qkv(rng, q_heads=8, kv_heads=2, q_len=8, capacity=max(kv_lens), head_dim=head_dim, dtype=dtype)
    for kv_len in kv_lens:
        alone = singles(q, k, v, kv_len)
        for lq in (1, 2, 5, 8):
            assert_block_matches(q[:, :, 8 - lq:], k, v, kv_len, alone)


def test_many_queries_per_tile_and_count_zero_rows(gpu_plans, rng):
    """Lq = 40 under limit 40 with GQA 2: five tiles of 16 per kv head, a diagonal that spans two steps, and queries
    that see none of a step that later queries of their tile see in part."""
    mtlinv.set_limit(40)
    kv_len = 300
    q, k, v = qkv(rng, q_heads=2, kv_heads=1, q_len=40, capacity=kv_len, head_dim=64, dtype=np.float16)
    alone = singles(q, k, v, kv_len)
    assert_block_matches(q, k, v, kv_len, alone)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
def test_later_keys_holding_nan_and_inf_leave_earlier_queries_alone(dtype, gpu_plans, rng):
    """The last key's K holds inf and its V NaN: only the last query sees it. The earlier queries of the block share
    its step, and keep the single-query bits: p v of that step runs per count with V zeroed past it."""
    mtlinv.set_limit(8)
    kv_len = 600
    q, k, v = qkv(rng, q_heads=8, kv_heads=2, q_len=8, capacity=kv_len, head_dim=128, dtype=dtype)
    alone = singles(q, k, v, kv_len)
    k[:, :, kv_len - 1] = np.inf
    v[:, :, kv_len - 1] = np.nan
    full = np.asarray(sdpa(q, k, v, kv_len=kv_len))
    assert np.isnan(full[:, :, 7].astype(np.float32)).all()
    for i in range(7):
        assert same_bits(full[:, :, i:i + 1], alone[i]), f"query {i}: {first_difference(full[:, :, i:i + 1], alone[i])}"


def test_unwritten_cache_is_never_seen(gpu_plans, rng):
    """A cache of capacity C whose unwritten keys hold NaN gives the bits of the keys so far alone."""
    dtype = ml_dtypes.bfloat16
    q, keys, values = qkv(rng, q_heads=4, kv_heads=1, q_len=1, capacity=300, head_dim=64, dtype=dtype)
    for n in (1, 31, 33, 64, 257, 300):
        k_cache = np.full_like(keys, np.nan)
        v_cache = np.full_like(values, np.nan)
        k_cache[:, :, :n] = keys[:, :, :n]
        v_cache[:, :, :n] = values[:, :, :n]
        cached = np.asarray(sdpa(q, k_cache, v_cache, kv_len=n))
        fresh = np.asarray(sdpa(q, keys[:, :, :n].copy(), values[:, :, :n].copy()))
        assert same_bits(cached, fresh), f"kv_len={n}: {first_difference(cached, fresh)}"


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=MMA_IDS)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_accuracy(dtype, causal, gpu_plans, rng):
    """Within the dtype's bound of a float64 softmax, p rounded to the dtype included; the non-causal block ends
    inside a step for every query (one run of the partial-step path)."""
    mtlinv.set_limit(16)
    kv_len = 700
    q, k, v = qkv(rng, batch=2, q_heads=4, kv_heads=2, q_len=6, capacity=kv_len + 20, head_dim=128, dtype=dtype)
    out = np.asarray(sdpa(q, k, v, kv_len=kv_len, causal=causal), np.float64)
    ref = reference(q, k, v, kv_len=kv_len, causal=causal)
    tol = RTOL[np.dtype(dtype)]
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_non_causal_block_equals_single_queries(gpu_plans, rng):
    mtlinv.set_limit(16)
    kv_len = 300
    q, k, v = qkv(rng, q_heads=4, kv_heads=2, q_len=12, capacity=kv_len, head_dim=64, dtype=ml_dtypes.bfloat16)
    assert_block_matches(q, k, v, kv_len, singles(q, k, v, kv_len, causal=False), causal=False)


def test_misaligned_inputs_give_the_same_bits(gpu_plans, rng):
    mtlinv.set_limit(8)
    q, k, v = qkv(rng, q_heads=8, kv_heads=2, q_len=3, capacity=300, head_dim=128, dtype=np.float16)
    shifted = [misaligned(a) for a in (q, k, v)]
    assert all(a.ctypes.data % 16 != 0 for a in shifted)
    assert same_bits(sdpa(*[mtlinv.asarray(a) for a in shifted]), sdpa(q, k, v))


def test_negative_control_limit_zero_differs(gpu_plans, rng):
    """With limit 0 the block of 8 takes the split sdpa_blocks path (scalar, other blocks): other bits for this
    fixed case; with limit 8 the single-query bits."""
    kv_len = 1100
    q, k, v = qkv(rng, q_heads=8, kv_heads=2, q_len=8, capacity=kv_len, head_dim=128, dtype=np.float16)
    alone = np.concatenate(singles(q, k, v, kv_len), axis=2)
    assert mtlinv.get_limit() == 0
    assert pass_one(8, 128, np.float16, 0, q_heads=8, kv_heads=2)["kernel"].startswith("sdpa_blocks_")
    fast = np.asarray(sdpa(q, k, v))
    assert not same_bits(fast, alone), "the throughput path matched canonical bits: the control cannot fail"
    mtlinv.set_limit(8)
    assert same_bits(np.asarray(sdpa(q, k, v)), alone)


@pytest.mark.parametrize("q_len, head_dim, dtype, limit, name", [
    (1, 128, ml_dtypes.bfloat16, 0, "sdpa_mma_d128_bf16"),       # decoding is always canonical
    (8, 128, ml_dtypes.bfloat16, 8, "sdpa_mma_d128_bf16"),
    (8, 64, np.float16, 8, "sdpa_mma_d64_f16"),
    (8, 128, ml_dtypes.bfloat16, 0, "sdpa_blocks_q8_bf16"),      # above the limit: the split path
    (8, 96, np.float16, 8, "sdpa_blocks_q8_f16"),               # head dims other than 64 and 128 stay scalar
    (8, 256, np.float16, 8, "sdpa_blocks_q8_f16"),
    (8, 128, np.float32, 8, "sdpa_blocks_q8_f32"),              # float32 products are not exact in 16 bits
])
def test_routing(q_len, head_dim, dtype, limit, name, gpu_plans):
    launch = pass_one(q_len, head_dim, dtype, limit)
    assert launch["kernel"] == name
    if name.startswith("sdpa_mma"):
        # tiles of 16 of a kv head's G * Lq queries, B * Hkv, the chunks over kv_len = 4096
        chunks = mtlinv._native.sdpa_chunks(*chunking(head_dim, dtype), 4096)
        assert launch["threadgroups"] == (-(-q_len * 4 // 16), 8, len(chunks))
        stem, suffix = name.rsplit("_", 1)
        assert pass_one(q_len, head_dim, dtype, limit, aligned=False)["kernel"] == f"{stem}_unaligned_{suffix}"


def run_by_hand(q, k, v, kv_len, chunks=None, prefetch=None, limit=8):
    """sdpa's two planned launches for q, k, v (causal; pass 1 sdpa_mma) by hand: with the plan's chunks replaced by
    `chunks` (block_keys, tier_keys) and SdpaArgs.prefetch by `prefetch`, where given. Both must give the call more
    than one chunk: with one, the plan is a single launch."""
    from mtlinv import _native
    batch, q_heads, q_len, head_dim = q.shape
    plan = _native.plan_sdpa(q_len=q_len, kv_len=kv_len, head_dim=head_dim, q_heads=q_heads, kv_heads=k.shape[1],
                             capacity=k.shape[2], dtype=np.dtype(q.dtype).name, limit=limit)
    first, second = plan["launches"]
    args = bytearray(first["args"])
    grid = first["threadgroups"]
    if chunks is not None:
        n = len(_native.sdpa_chunks(*chunks, kv_len))
        struct.pack_into("<3I", args, 36, n, *chunks)  # SdpaArgs.n_blocks, block_keys, tier_keys
        assert n > 1, f"{chunks} put kv_len={kv_len} in one chunk"
        grid = (*grid[:2], n)  # sdpa_mma's grid: query tiles, B * Hkv, chunks
    if prefetch is not None:
        struct.pack_into("<I", args, 48, prefetch)  # SdpaArgs.prefetch
    rows = batch * q_heads * q_len
    part_o = mtlinv.asarray(np.zeros(rows * grid[2] * head_dim, np.float32))
    part_ml = mtlinv.asarray(np.zeros(rows * grid[2] * 2, np.float32))
    out = mtlinv.asarray(np.zeros(q.shape, q.dtype))
    operands = [mtlinv.asarray(a) for a in (q, k, v)] + [out]
    _native._launch(first["kernel"], grid, first["threads"], bytes(args),
                    _native.plan_buffers(first, operands, [part_o, part_ml]))
    _native._launch(second["kernel"], second["threadgroups"], second["threads"], bytes(args),
                    _native.plan_buffers(second, operands, [part_o, part_ml]))
    return np.asarray(out)


@pytest.mark.parametrize("chunks", [(128, 512), (256, 1024)])
def test_tiered_chunks_give_single_query_bits_and_attention(chunks, gpu_plans, rng):
    """Chunks that grow with the position, at sizes the emulator runs quickly ((128, 512): 128 keys below 512, 256 up
    to 2048, 512 up to 8192). Every query of a causal block of 8 equals its single-query call under the same chunks,
    at kv_len in tier 0, around the tier boundaries and two tiers in; and the block is attention within the
    dtype's bound of float64, so the chunks take every key once."""
    kv_lens = [300, 511, 513, 1030, 2049, 2600]
    q, k, v = qkv(rng, q_heads=8, kv_heads=2, q_len=8, capacity=max(kv_lens), head_dim=64, dtype=np.float16)
    assert pass_one(8, 64, np.float16, 8)["kernel"] == "sdpa_mma_d64_f16"
    for kv_len in kv_lens:
        block = run_by_hand(q, k, v, kv_len, chunks)
        for i in range(8):
            alone = run_by_hand(np.ascontiguousarray(q[:, :, i:i + 1]), k, v, kv_len - 7 + i, chunks)
            assert same_bits(block[:, :, i:i + 1], alone), (kv_len, i, first_difference(block[:, :, i:i + 1], alone))
        ref = reference(q, k, v, kv_len=kv_len)
        tol = RTOL[np.dtype(np.float16)]
        np.testing.assert_allclose(block.astype(np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def prefetch_flag(launch):
    return int.from_bytes(launch["args"][48:52], "little")  # SdpaArgs.prefetch


def planned_prefetch(kv_len, q_len=1, limit=8, kv_heads=8):
    return prefetch_flag(mtlinv._native.plan_sdpa(q_len=q_len, kv_len=kv_len, head_dim=128, q_heads=32,
                                                  kv_heads=kv_heads, dtype="bfloat16", limit=limit)["launches"][0])


def test_prefetch_only_where_one_tile_is_at_most_a_threadgroup_per_two_cores(gpu_plans):
    """SdpaArgs.prefetch (sdpa_mma asks L2 for K and V a step ahead): on where a tile's grid, chunks x B x Hkv, is at
    most one threadgroup per two cores (128 cores under the emulator's GPU plans, 132 on an H200), off beyond
    (slower there on an H200), and off on the split path, which has no prefetches."""
    assert planned_prefetch(2048) == 1     # 8 chunks of 256 x 8 kv heads
    assert planned_prefetch(2048, q_len=8) == 1
    assert planned_prefetch(2304) == 0     # 9 x 8
    assert planned_prefetch(16384, kv_heads=1) == 1  # 16 chunks of 256, 24 of 512
    assert planned_prefetch(1024, q_len=8, limit=0) == 0


def test_prefetch_changes_no_bits(gpu_plans, rng):
    """The plan's two launches run by hand with SdpaArgs.prefetch as planned (1) and cleared: the same bits, which
    are sdpa's. On CUDA the first run issues L2 prefetches; the emulator's fast build ignores the hint, so there
    this checks the plumbing only."""
    q, k, v = qkv(rng, q_heads=8, kv_heads=2, q_len=8, capacity=1024, head_dim=128, dtype=ml_dtypes.bfloat16)
    first = mtlinv._native.plan_sdpa(q_len=8, kv_len=1024, head_dim=128, q_heads=8, kv_heads=2, dtype="bfloat16",
                                     limit=8)["launches"][0]
    assert first["kernel"] == "sdpa_mma_d128_bf16" and prefetch_flag(first) == 1
    outs = [run_by_hand(q, k, v, 1024, prefetch=prefetch) for prefetch in (1, 0)]
    with mtlinv.batch_invariant(8):
        expected = np.asarray(sdpa(q, k, v))
    assert same_bits(outs[0], outs[1]) and same_bits(outs[0], expected), first_difference(outs[1], outs[0])
