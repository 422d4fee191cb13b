#!/usr/bin/env python3
"""How the canonical qgemv's time depends on its K splits and row tile, on an NVIDIA GPU: the data behind
qgemv_k_splits (src/core/plans/qgemv.cpp), which must pick the splits from K, N, bits and device alone.

    MTLINV_DEVICE=cuda python benchmarks/tune_qgemv_cuda.py [--reps 30] [--bits 4] [--group-size 64]

Launches qgemv_b{bits}_r{R}_bf16 directly (the plans' kernels, raw arguments) for every k_splits in 1, 2, 4, 8
and R in 1, 2, 4, 8 on the shapes of bench_cuda.py, timed as there (events, medians, weights rotated through
HBM). Prints, per shape and R, the time of each split count (GB/s of packed weights, scales and biases) and the
count the plan picks.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cuda as bc  # noqa: E402  (sets MTLINV_CUDA_ASYNC before mtlinv loads)

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import mtlinv  # noqa: E402
from mtlinv import _native as ops  # noqa: E402

def qgemv_args(m, k, n, group_size, splits):
    # QGemvArgs (metal/qgemv_args.h): rows, k, n, group_size, k_splits, has_bias, vector_loads, w_vector_loads
    return struct.pack("8I", m, k, n, group_size, splits, 0, 1, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    args = ap.parse_args()
    bits, group = args.bits, args.group_size
    copy_bw = bc.copy_bandwidth()
    print(f"# {mtlinv.device_info()['name']}: copy {copy_bw / 1e9:.0f} GB/s; qgemv {bits}-bit g{group}, bf16 x; "
          "us per call (GB/s of the weights)\n")
    bc.print_split_header()
    for k, n in bc.SHAPES:
        # Random codes and plausible scales: the timing does not depend on the values.
        wq_host = bc.RNG.integers(0, 2**32, size=(n, k * bits // 32), dtype=np.uint32)
        scales_host = (bc.RNG.random((n, k // group), dtype=np.float32) * 0.02).astype(bc.BF16)
        biases_host = (-bc.RNG.random((n, k // group), dtype=np.float32) * 0.1).astype(bc.BF16)
        wbytes = wq_host.nbytes + scales_host.nbytes + biases_host.nbytes
        packs = [tuple(mtlinv.asarray(a) for a in (wq_host, scales_host, biases_host))
                 for _ in range(bc.copies_for(wbytes))]
        bias = mtlinv.asarray(np.zeros(n, bc.BF16))
        for r in bc.TUNE_TILES:
            x = mtlinv.asarray(bc.RNG.standard_normal((r, k), dtype=np.float32).astype(bc.BF16))
            y = mtlinv.asarray(np.zeros((r, n), bc.BF16))
            cells = bc.split_cells(lambda s: [lambda p=p: ops._launch(f"qgemv_b{bits}_r{r}_bf16", (-(-n // 4), 1, 1),
                                                                      (32 * s, 1, 1), qgemv_args(r, k, n, group, s),
                                                                      [x, *p, bias, y]) for p in packs],
                                   args.reps, wbytes)
            plan = ops.plan_qgemv(rows=r, k=k, n=n, group_size=group, bits=bits, dtype="bfloat16", limit=16)
            print(bc.row([k, n, f"{r}", *cells, plan["launches"][0]["threads"][0] // 32]), flush=True)
        del packs


if __name__ == "__main__":
    main()
