#!/usr/bin/env python3
"""How the canonical sdpa's time depends on its chunk size S, on an NVIDIA GPU: the data behind sdpa_chunk_keys
(src/core/plans/sdpa.cpp), which must pick S from the head dim, dtype and device alone.

    MTLINV_DEVICE=cuda python benchmarks/tune_sdpa_cuda.py [--reps 30]

Runs the plans' two kernels (sdpa_blocks_q{4,8}_bf16, then sdpa_combine_bf16) directly with raw arguments for
S in 64, 128, 256, and pass 1 alone at S = 256, on bench_cuda.py's attention shape (Hq=32, Hkv=8, D=128, bf16,
causal), decode (Lq=1) and verify (Lq=8), timed as there (events, medians, K and V rotated through HBM).
"""
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cuda as bc  # noqa: E402  (sets MTLINV_CUDA_ASYNC before mtlinv loads)

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import _native as ops  # noqa: E402

CHUNKS = (64, 128, 256)
HQ, HKV, D = 32, 8, 128


def sdpa_args(lq, keys, chunk):
    # SdpaArgs (metal/sdpa_args.h): q_heads, kv_heads, group, q_len, kv_len, kv_capacity, head_dim, causal,
    # scale_log2, n_blocks, block_keys
    return struct.pack("8If2I", HQ, HKV, HQ // HKV, lq, keys, keys, D, 1, D ** -0.5 * math.log2(math.e),
                       -(-keys // chunk), chunk)


def two_passes(q, k, v, out, part_o, part_ml, lq, keys, chunk, combine=True):
    args = sdpa_args(lq, keys, chunk)
    tile = 4 if lq * HQ // HKV <= 4 else 8  # sdpa_query_tile in src/core/plans/sdpa.cpp
    ops._launch(f"sdpa_blocks_q{tile}_bf16", (-(-lq * HQ // HKV // tile), -(-keys // chunk), HKV), (128, 1, 1),
                args, [q, k, v, part_o, part_ml])
    if combine:  # SDPA_COMBINE_GROUPS (8) ranges of blocks, D/4 threads each
        ops._launch("sdpa_combine_bf16", (lq, HQ, 1), (8 * D // 4, 1, 1), args, [part_o, part_ml, out])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    args = ap.parse_args()
    copy_bw = bc.copy_bandwidth()
    print(f"# {mtlinv.device_info()['name']}: copy {copy_bw / 1e9:.0f} GB/s; us per call (% of copy bandwidth)\n")
    print(bc.row(["keys", "Lq"] + [f"S = {c}" for c in CHUNKS] + ["pass 1 alone, S = 256", "plan's S"]))
    print(bc.row(["---:"] * (4 + len(CHUNKS))))
    for keys in args.lengths:
        kv_host = bc.RNG.standard_normal((1, HKV, keys, D), dtype=np.float32).astype(bc.BF16)
        copies = bc.copies_for(2 * kv_host.nbytes)
        ks, _ = bc.tensors(kv_host, copies)
        vs, _ = bc.tensors(kv_host, copies)
        for lq in (1, 8):
            q = mtlinv.asarray(bc.RNG.standard_normal((1, HQ, lq, D), dtype=np.float32).astype(bc.BF16))
            out = mtlinv.asarray(np.zeros((1, HQ, lq, D), bc.BF16))
            cells = []
            for chunk, combine in [(c, True) for c in CHUNKS] + [(256, False)]:
                blocks = -(-keys // chunk)
                part_o = mtlinv.asarray(np.zeros(HQ * lq * blocks * D, np.float32))
                part_ml = mtlinv.asarray(np.zeros(HQ * lq * blocks * 2, np.float32))
                calls = [lambda k=k, v=v: two_passes(q, k, v, out, part_o, part_ml, lq, keys, chunk, combine)
                         for k, v in zip(ks, vs)]
                t = bc.event_median(calls, args.reps)
                cells.append(f"{t * 1e6:.1f} ({100 * 2 * kv_host.nbytes / t / copy_bw:.0f}%)")
            print(bc.row([keys, lq, *cells, ops.sdpa_chunk_keys(D, "bfloat16")]), flush=True)
        del ks, vs


if __name__ == "__main__":
    main()
