#!/usr/bin/env python3
"""How the canonical sdpa's time on an NVIDIA GPU splits between its passes and depends on its chunk size S: the
data behind sdpa_chunk_keys (src/core/plans/sdpa.cpp), which must pick S from the head dim, dtype and device alone.

    MTLINV_DEVICE=cuda python benchmarks/tune_sdpa_cuda.py [--reps 30] [--chunks 128 256 512]

Runs the kernels of the canonical plan on a device with matrix units (sdpa_mma_d128_bf16, then sdpa_combine_bf16)
directly with raw arguments, on bench_cuda.py's attention shape (Hq=32, Hkv=8, D=128, bf16, causal), decode
(Lq=1) and verify (Lq=8), timed as there (events, medians, K and V rotated through HBM). Each cell is both passes
at that S, then pass 1 alone, in us; the percentage is of the copy bandwidth for reading K and V once.
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

HQ, HKV, D = 32, 8, 128


def sdpa_args(lq, keys, chunk, prefetch):
    # SdpaArgs (metal/sdpa_args.h): q_heads, kv_heads, group, q_len, kv_len, kv_capacity, head_dim, causal,
    # scale_log2, n_blocks, block_keys, prefetch
    return struct.pack("8If3I", HQ, HKV, HQ // HKV, lq, keys, keys, D, 1, D ** -0.5 * math.log2(math.e),
                       -(-keys // chunk), chunk, prefetch)


def plan_prefetch(launches):
    """The plan's SdpaArgs.prefetch (its last field): a hint that changes no bits, kept at every S timed."""
    return struct.unpack_from("<I", launches[0]["args"], len(launches[0]["args"]) - 4)[0]


def plan_launches(lq, keys):
    """The canonical plan's two launches for this shape: kernels, grids and threadgroup sizes come from the plan,
    so this script cannot drift from it; only the chunk count (grid y of pass 1) follows the S being timed."""
    plan = ops.plan_sdpa(q_len=lq, kv_len=keys, head_dim=D, q_heads=HQ, kv_heads=HKV, dtype="bfloat16", limit=8)
    return plan["launches"]


def two_passes(launches, q, k, v, out, part_o, part_ml, lq, keys, chunk, combine=True):
    args = sdpa_args(lq, keys, chunk, plan_prefetch(launches))
    first, second = launches
    x, _, z = first["threadgroups"]
    ops._launch(first["kernel"], (x, -(-keys // chunk), z), first["threads"], args, [q, k, v, part_o, part_ml])
    if combine:
        ops._launch(second["kernel"], second["threadgroups"], second["threads"], args, [part_o, part_ml, out])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    ap.add_argument("--chunks", type=int, nargs="+", default=[128, 256, 512],
                    help="chunk sizes S to time (multiples of 128: sdpa_mma's 4 simdgroups take 32-key steps)")
    args = ap.parse_args()
    bad = [c for c in args.chunks if c <= 0 or c % 128]
    if bad:
        ap.error(f"--chunks must be positive multiples of 128, got {bad}")
    if not mtlinv.device_info().get("matrix_units"):
        sys.exit("tune_sdpa_cuda.py times the matrix-unit kernels: run it with MTLINV_DEVICE=cuda on a GPU")
    copy_bw = bc.copy_bandwidth()
    print(f"# {mtlinv.device_info()['name']}: copy {copy_bw / 1e9:.0f} GB/s; both passes / pass 1 alone, us "
          f"(% of copy bandwidth for both)\n")
    print(bc.row(["keys", "Lq"] + [f"S = {c}" for c in args.chunks] + ["plan's S"]))
    print(bc.row(["---:"] * (3 + len(args.chunks))))
    for keys in args.lengths:
        kv_host = bc.RNG.standard_normal((1, HKV, keys, D), dtype=np.float32).astype(bc.BF16)
        copies = bc.copies_for(2 * kv_host.nbytes)
        ks, _ = bc.tensors(kv_host, copies)
        vs, _ = bc.tensors(kv_host, copies)
        for lq in (1, 8):
            q = mtlinv.asarray(bc.RNG.standard_normal((1, HQ, lq, D), dtype=np.float32).astype(bc.BF16))
            out = mtlinv.asarray(np.zeros((1, HQ, lq, D), bc.BF16))
            launches = plan_launches(lq, keys)
            assert launches[0]["kernel"] == "sdpa_mma_d128_bf16", launches[0]["kernel"]
            cells = []
            for chunk in args.chunks:
                blocks = -(-keys // chunk)
                part_o = mtlinv.asarray(np.zeros(HQ * lq * blocks * D, np.float32))
                part_ml = mtlinv.asarray(np.zeros(HQ * lq * blocks * 2, np.float32))
                times = []
                for combine in (True, False):
                    calls = [lambda k=k, v=v, c=combine:
                             two_passes(launches, q, k, v, out, part_o, part_ml, lq, keys, chunk, c)
                             for k, v in zip(ks, vs)]
                    times.append(bc.event_median(calls, args.reps))
                cells.append(f"{times[0] * 1e6:.1f} / {times[1] * 1e6:.1f} "
                             f"({100 * 2 * kv_host.nbytes / times[0] / copy_bw:.0f}%)")
            print(bc.row([keys, lq, *cells, ops.sdpa_chunk_keys(D, "bfloat16")]), flush=True)
        del ks, vs


if __name__ == "__main__":
    main()
